/* test_mpi_fsdp2_rank.c — one process stands for a rank of a multi-rank
 * FSDP2 run on the dry device (fsdp2.h's rank view): for the grid of
 * test_mpi_fsdp2_plan.c (fsdp2_grid_testlib.h) on W = mpirun's ranks, every
 * rank runs the real W-rank FSDP2 step on a dry device (real communicators,
 * the balanced routes, two steps), and rank 0 then builds the same
 * configuration alone as the rank view (W = 1, W_v = W, rank_view: the CP
 * and EP groups virtual, the router over all E experts) on a dry device of
 * its own.  The rank view's device peak, pinned host peak, live set at the
 * peak and every tag's own peak must equal rank 0's of the real run to the
 * byte: the measurement fsdp2_dry.c takes of a run it cannot start is the
 * memory of that run's rank 0.  The GPU proxy of the same run (rank_view 0)
 * is measured beside it: with EP over several ranks it routes among fewer
 * experts and differs, which the test asserts somewhere on the grid, so
 * the comparison can fail.
 *
 * Why it can be exact: the balanced profile routes every rank's tokens
 * alike, and a virtual group's absent members send the caller what the
 * caller sends itself (plateau/comm.h; the MoE plan counts what each would
 * send, ops/moe_plan_virtual.c), which is what the real members send under
 * that routing.  Points that are proxies already (W_v set) are left out:
 * their W_v-rank run is not the mpirun world. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "fsdp2.h"
#include "fsdp2_grid_testlib.h"
#include "plan/plan.h"
#include "train/data.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

/* Two steps of (m, c, S) over world w of dry device dd; *r: the last. */
static void train(pl_dev *dd, pl_comm *w, const point *p, const pl_fsdp2_cfg *c,
                  pl_step_result *r) {
  pl_fsdp2 *t = NULL;
  ck_assert_msg(pl_fsdp2_create(dd, w, &p->m, c, p->S, &t) == PL_OK, "%s: %s",
                p->name, pl_last_error());
  pl_data *d = NULL;
  ck_assert_int_eq(pl_data_synthetic(p->m.V, 9, &d), PL_OK);
  ck_assert_msg(pl_fsdp2_run(t, d, 0, 1, NULL, NULL) == PL_OK, "%s: %s",
                p->name, pl_last_error());
  ck_assert_msg(pl_fsdp2_run(t, d, 1, 1, NULL, r) == PL_OK, "%s: %s", p->name,
                pl_last_error());
  pl_data_close(d);
  pl_fsdp2_destroy(t);
}

/* Two steps of p with configuration c on a fresh dry device (flavour be):
 * over the real world when alone == false; when alone, over a world of one
 * process, rank 0's only (the others make the collective splits and wait).
 * *r: the last step's memory; the caller destroys *dd after reading it (tag
 * names live in the device). */
static void measure(const point *p, const pl_fsdp2_cfg *c, pl_backend be,
                    bool alone, pl_dev **dd, pl_step_result *r) {
  memset(r, 0, sizeof *r);
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
    train(*dd, w, p, c, r);
  pl_comm_destroy(w);
}

static size_t at_peak(const pl_mem_stats *s, const char *tag) {
  for (int i = 0; i < s->n_tags; i++)
    if (!strcmp(s->at_peak[i].tag, tag))
      return s->at_peak[i].bytes;
  return 0;
}

static size_t own_peak(const pl_mem_stats *s, const char *tag) {
  for (int i = 0; i < s->n_tags; i++)
    if (!strcmp(s->tag_peak[i].tag, tag))
      return s->tag_peak[i].bytes;
  return 0;
}

/* The first tag (by name, of either side) whose bytes at the peak or own
 * peak differ; NULL when none does. */
static const char *tag_diff(const pl_mem_stats *a, const pl_mem_stats *b) {
  for (int s = 0; s < 2; s++) {
    const pl_mem_stats *x = s ? b : a;
    for (int i = 0; i < x->n_tags; i++) {
      const char *t = x->tag_peak[i].tag;
      if (at_peak(a, t) != at_peak(b, t) || own_peak(a, t) != own_peak(b, t))
        return t;
    }
  }
  return NULL;
}

static bool same(const pl_step_result *a, const pl_step_result *b,
                 const char **bad) {
  *bad = tag_diff(&a->dev, &b->dev);
  return a->dev.peak == b->dev.peak && a->host.peak == b->host.peak && !*bad;
}

static void print_point(const point *p, const pl_step_result *real,
                        const pl_step_result *view, const pl_step_result *proxy,
                        bool ok, const char *bad) {
  printf("  %-42s dev %9zu / %9zu (proxy %9zu)  host %8zu / %8zu  %s%s\n",
         p->name, real->dev.peak, view->dev.peak, proxy->dev.peak,
         real->host.peak, view->host.peak, ok ? "equal" : "DIFFERS, tag ",
         ok    ? ""
         : bad ? bad
               : "-");
  if (ok)
    return;
  for (int q = 0; q < real->dev.n_tags; q++) {
    const char *t = real->dev.tag_peak[q].tag;
    printf("     %-12s at %zu / %zu  own %zu / %zu\n", t,
           at_peak(&real->dev, t), at_peak(&view->dev, t),
           real->dev.tag_peak[q].bytes, own_peak(&view->dev, t));
  }
}

static void run_grid(pl_backend be) {
  point g[32];
  const int n = grid(g, size);
  int checked = 0, failed = 0, proxy_differs = 0;
  if (rank == 0)
    printf("FSDP2: rank 0 of %d real ranks vs the rank view on one process "
           "(dry, %s), real / view:\n",
           size, pl_backend_name(be));
  for (int i = 0; i < n; i++) {
    if (g[i].c.W_v)
      continue;
    pl_step_result *r = calloc(3, sizeof *r);
    ck_assert_ptr_nonnull(r);
    pl_dev *dr = NULL, *dv = NULL, *dp = NULL;
    measure(&g[i], &g[i].c, be, false, &dr, &r[0]);
    pl_fsdp2_cfg v = g[i].c;
    v.W_v = size, v.rank_view = 1;
    measure(&g[i], &v, be, true, &dv, &r[1]);
    v.rank_view = 0; /* the GPU proxy of the same run */
    measure(&g[i], &v, be, true, &dp, &r[2]);
    int ok = 1;
    if (rank == 0) {
      const char *bad = NULL;
      ok = same(&r[0], &r[1], &bad);
      const char *pbad = NULL;
      proxy_differs += !same(&r[0], &r[2], &pbad);
      print_point(&g[i], &r[0], &r[1], &r[2], ok, bad);
    }
    pl_dev_destroy(dp);
    pl_dev_destroy(dv);
    pl_dev_destroy(dr);
    free(r);
    checked++;
    failed += !ok;
  }
  if (rank == 0) {
    ck_assert_msg(failed == 0,
                  "%d of %d points: the rank view differs from rank 0 of "
                  "the %d-rank run",
                  failed, checked, size);
    /* EP over several ranks: the proxy routes among the experts present
     * only, so it is not a real rank (on one rank the two are the run) */
    if (size > 1)
      ck_assert_msg(proxy_differs > 0,
                    "the proxy equals the real rank on every point: the "
                    "comparison cannot tell them apart");
    else
      ck_assert_int_eq(proxy_differs, 0);
  }
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

/* The check: the rank view plays one rank (W = 1) of a larger world, the
 * router then over all E experts where the proxy sees E/ep·min(W, ep). */
START_TEST(rank_view_check) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.E = 8, m.k = 4;
  pl_fsdp2_cfg c = pl_fsdp2_cfg_default();
  c.W_v = 8, c.ep = 8; /* the proxy on one rank: 1 expert present < k */
  ck_assert_int_eq(pl_fsdp2_check(&m, &c, 1, 256), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "fewer than k=4"), "%s",
                pl_last_error());
  c.rank_view = 1; /* the rank view: all 8 */
  ck_assert_msg(pl_fsdp2_check(&m, &c, 1, 256) == PL_OK, "%s", pl_last_error());
  /* more than one process: refused */
  ck_assert_int_eq(pl_fsdp2_check(&m, &c, 2, 256), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "rank view"), "%s", pl_last_error());
  /* a real run (W_v = W): the flag changes nothing */
  c.W_v = 0;
  ck_assert_msg(pl_fsdp2_check(&m, &c, 8, 256) == PL_OK, "%s", pl_last_error());
  const pl_plan_cfg pc = pl_fsdp2_plan_cfg(&m, &c, 8, 256);
  ck_assert_int_eq(pc.lc.rank_view, 1);
}
END_TEST

int main(int argc, char **argv) {
  const int e = pl_check_world_open(&argc, &argv, "fsdp2_rank", &dev, &world,
                                    &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {rank_view_check, rank_view_grid, rank_view_grid_cuda,
                          NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("fsdp2_rank", 300, tests, rank, world));
}
