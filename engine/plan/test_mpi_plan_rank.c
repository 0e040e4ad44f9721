/* test_mpi_plan_rank.c — one process stands for a rank of a multi-rank run
 * on the dry device: for the grid of test_mpi_plan.c (plan_grid_testlib.h)
 * on W = mpirun's ranks, every rank runs the real W-rank step on a dry
 * device (real communicators, LLEP's balanced routes, two steps), and rank
 * 0 then builds the same configuration alone as the rank view (W = 1,
 * W_v = W, lc.rank_view: every group virtual, the world's expert group
 * included) on a dry device of its own.  The rank view's device peak,
 * pinned host peak, live set at the peak and every tag's own peak must
 * equal rank 0's of the real run to the byte: the measurement the planner
 * takes of a run it cannot start (one process for a 64-GPU run) is the
 * memory of that run's rank 0.
 *
 * Why it can be exact: the balanced profile routes every rank's tokens
 * alike (seed 0), and a virtual group's absent members send the caller what
 * the caller sends itself (plateau/comm.h), which is what the real members
 * send under that routing.  Points that are proxies already (lc.W_v set)
 * are left out: their W_v-rank run is not the mpirun world. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "plan/plan.h"
#include "plan/plan_grid_testlib.h"
#include "plan/plan_testlib.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

/* Two steps of p on a fresh dry device (flavour be): over the real world
 * when alone == false; when alone, over a world of one process, rank 0's
 * only (the others make the collective splits and wait).  *r: the last
 * step's memory; the caller destroys *dd after reading it (tag names live in
 * the device). */
static void measure(const point *p, pl_backend be, bool alone, pl_dev **dd,
                    pl_step_result *r) {
  ck_assert_int_eq(pl_plan_dry_device(be, 0, alone ? 0 : rank, dd), PL_OK);
  pl_comm *dw = NULL, *w = NULL;
  ck_assert_int_eq(pl_comm_world(*dd, &dw), PL_OK);
  if (alone) { /* a world of this process only */
    ck_assert_int_eq(pl_comm_split(dw, rank, 0, &w), PL_OK);
    pl_comm_destroy(dw);
  } else {
    w = dw;
  }
  if (!alone || rank == 0)
    pt_train(*dd, w, p, 2, r);
  pl_comm_destroy(w);
}

/* The first tag (by name) whose bytes at the peak or own peak differ. */
static const char *tag_diff(const pl_mem_stats *a, const pl_mem_stats *b) {
  for (int i = 0; i < a->n_tags; i++) {
    const char *t = a->tag_peak[i].tag;
    if (pt_tag_at_peak(a, t) != pt_tag_at_peak(b, t))
      return t;
    size_t pb = 0;
    for (int j = 0; j < b->n_tags; j++)
      if (!strcmp(b->tag_peak[j].tag, t))
        pb = b->tag_peak[j].bytes;
    if (pb != a->tag_peak[i].bytes)
      return t;
  }
  return a->n_tags == b->n_tags ? NULL : "(the number of tags)";
}

static void run_grid(pl_backend be) {
  point g[32];
  const int n = grid(size, g);
  int checked = 0, failed = 0;
  if (rank == 0)
    printf("rank 0 of %d real ranks vs the rank view on one process (dry, "
           "%s):\n",
           size, pl_backend_name(be));
  for (int i = 0; i < n; i++) {
    if (g[i].c.lc.W_v)
      continue;
    pl_step_result real, view;
    pl_dev *dr = NULL, *dv = NULL;
    measure(&g[i], be, false, &dr, &real);
    int ok = 1;
    point v = g[i];
    v.c.lc.W_v = size, v.c.lc.rank_view = 1;
    measure(&v, be, true, &dv, &view);
    if (rank == 0) {
      const char *bad = tag_diff(&real.dev, &view.dev);
      ok = real.dev.peak == view.dev.peak && real.host.peak == view.host.peak &&
           !bad;
      printf("  %-40s dev %9zu / %9zu  host %9zu / %9zu  %s%s\n", g[i].name,
             real.dev.peak, view.dev.peak, real.host.peak, view.host.peak,
             ok ? "equal" : "DIFFERS, tag ",
             ok    ? ""
             : bad ? bad
                   : "-");
      for (int q = 0; q < real.dev.n_tags; q++) {
        const char *t = real.dev.tag_peak[q].tag;
        size_t pb = 0;
        for (int j = 0; j < view.dev.n_tags; j++)
          if (!strcmp(view.dev.tag_peak[j].tag, t))
            pb = view.dev.tag_peak[j].bytes;
        printf("     %s at %zu/%zu own %zu/%zu\n", t,
               pt_tag_at_peak(&real.dev, t), pt_tag_at_peak(&view.dev, t),
               real.dev.tag_peak[q].bytes, pb);
      }
    }
    pl_dev_destroy(dv);
    pl_dev_destroy(dr);
    checked++;
    failed += !ok;
  }
  if (rank == 0)
    ck_assert_msg(failed == 0,
                  "%d of %d points: the rank view differs from rank 0 of "
                  "the %d-rank run",
                  failed, checked, size);
  ck_assert_int_gt(checked, 0);
}

START_TEST(rank_view_grid) {
  run_grid(PL_BACKEND_CPU);
}
END_TEST

START_TEST(rank_view_grid_cuda) {
  run_grid(PL_BACKEND_CUDA);
}
END_TEST

/* The layout of the rank view: the world's expert group virtual, the router
 * over all E experts; refused with more than one process. */
START_TEST(rank_view_layout) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.E = 16;
  pl_layout_cfg lc = {1, 1, 8, 0, 1};
  pl_layout_plan p;
  ck_assert_int_eq(pl_layout_plan_make(&m, &lc, 1, 0, 256, &p), PL_OK);
  ck_assert_int_eq(p.e_virtual, 1);
  ck_assert_int_eq(p.E_moe, 16);
  ck_assert_int_eq(p.E_route, 16);
  ck_assert_int_eq(p.E_local, 2);
  ck_assert_int_eq(p.ep_span, 8);
  lc.rank_view = 0; /* the proxy: the present rank's experts only */
  ck_assert_int_eq(pl_layout_plan_make(&m, &lc, 1, 0, 256, &p), PL_OK);
  ck_assert_int_eq(p.e_virtual, 0);
  ck_assert_int_eq(p.E_moe, 2);
  ck_assert_int_eq(p.ep_span, 1);
  /* an expert group of 4 in a proxy of one process: virtual */
  lc = (pl_layout_cfg){1, 1, 8, 4, 0};
  ck_assert_int_eq(pl_layout_plan_make(&m, &lc, 1, 0, 256, &p), PL_OK);
  ck_assert_int_eq(p.e_virtual, 1);
  ck_assert_int_eq(p.ep_grouped, 1);
  ck_assert_int_eq(p.ep_vsize, 2);
  lc = (pl_layout_cfg){1, 1, 8, 0, 1};
  ck_assert_int_eq(pl_layout_plan_make(&m, &lc, 2, 0, 256, &p), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "rank view"), "%s", pl_last_error());
}
END_TEST

int main(int argc, char **argv) {
  const int e = pl_check_world_open(&argc, &argv, "plan_rank", &dev, &world,
                                    &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {rank_view_layout, rank_view_grid, rank_view_grid_cuda,
                          NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("plan_rank", 300, tests, rank, world));
}
