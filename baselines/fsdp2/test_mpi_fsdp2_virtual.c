/* test_mpi_fsdp2_virtual.c — the FSDP2 baseline's virtual CP group
 * (fsdp2.h: cp beyond the ranks present in a proxy), CPU backend, f32, under
 * mpirun -np 1..4: a virtual cp = 2 on one rank (W_v 2, the others idle)
 * against the real cp = 2 run of ranks 0 and 1 on rank 0 — the same tokens
 * per rank, the same tracked device peaks tag by tag (ring attention's
 * gathered K/V and its gradient ring included), per collective of the CP
 * group the same calls and bytes, stand-ins counted only in the virtual run;
 * and the virtual run's device peak equal to the planner's dry measurement
 * of it (fsdp2_dry.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "fsdp2_internal.h"
#include "plan/plan.h"
#include "train/data.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

typedef struct out {
  pl_step_result r[2];
  pl_comm_stats cp;
  int64_t N;
} out;

static void run(pl_comm *w, const pl_model_cfg *m, const pl_fsdp2_cfg *c,
                int64_t S, out *o) {
  memset(o, 0, sizeof *o);
  pl_fsdp2 *t;
  ck_assert_msg(pl_fsdp2_create(dev, w, m, c, S, &t) == PL_OK, "%s",
                pl_last_error());
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(m->V, 3, &d), PL_OK);
  ck_assert_int_eq(pl_fsdp2_run(t, d, 0, 2, NULL, o->r), PL_OK);
  pl_comm_stats_get(t->cpc, &o->cp);
  o->N = t->N;
  pl_data_close(d);
  pl_fsdp2_destroy(t);
}

static size_t tag_peak(const pl_mem_stats *m, const char *tag) {
  for (int i = 0; i < m->n_tags; i++)
    if (!strcmp(m->tag_peak[i].tag, tag))
      return m->tag_peak[i].bytes;
  return 0;
}

START_TEST(as_real) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.dense_layers = m.L; /* routing-free memory */
  pl_fsdp2_cfg c = pl_fsdp2_cfg_default();
  c.dt = PL_F32, c.cp = 2, c.W_v = 2, c.ac = PL_FSDP2_AC_SELECTIVE;
  c.profile = true;
  const int64_t S = 64;
  out v, r;
  pl_comm *self = NULL, *pair = NULL;
  ck_assert_int_eq(pl_comm_split(world, rank == 0 ? 0 : -1, 0, &self), PL_OK);
  if (self) {
    run(self, &m, &c, S, &v);
    ck_assert(v.cp.standins > 0);
    ck_assert_int_eq(v.N, S / 2);
    /* the planner's dry measurement of the virtual proxy */
    pl_plan_cfg pc = pl_fsdp2_plan_cfg(&m, &c, 1, S);
    pl_plan_machine mc = pl_plan_machine_default();
    mc.backend = PL_BACKEND_CPU;
    pl_plan_mem pm;
    ck_assert_int_eq(pl_fsdp2_dry_memory(&m, &pc, &mc, &pm), PL_OK);
    ck_assert_msg(pm.dev_peak == v.r[1].dev.peak,
                  "device peak: plan %zu, measured %zu", pm.dev_peak,
                  v.r[1].dev.peak);
    pl_comm_destroy(self);
  }
  if (size < 2)
    return;
  ck_assert_int_eq(pl_comm_split(world, rank < 2 ? 0 : -1, rank, &pair), PL_OK);
  if (!pair)
    return;
  run(pair, &m, &c, S, &r);
  pl_comm_destroy(pair);
  if (rank != 0)
    return;
  ck_assert_int_eq(r.N, v.N);
  ck_assert(r.cp.standins == 0);
  for (int s = 0; s < 2; s++) {
    const pl_mem_stats *a = &r.r[s].dev, *b = &v.r[s].dev;
    ck_assert_msg(a->peak == b->peak, "peak: real %zu, virtual %zu", a->peak,
                  b->peak);
    for (int i = 0; i < a->n_tags; i++)
      ck_assert_msg(a->tag_peak[i].bytes == tag_peak(b, a->tag_peak[i].tag),
                    "tag %s: real %zu, virtual %zu", a->tag_peak[i].tag,
                    a->tag_peak[i].bytes, tag_peak(b, a->tag_peak[i].tag));
  }
  for (int op = 0; op < PL_COMM_NOPS; op++)
    ck_assert_msg(
        r.cp.calls[op] == v.cp.calls[op] && r.cp.sent[op] == v.cp.sent[op] &&
            r.cp.recv[op] == v.cp.recv[op],
        "CP %s: real %llu calls %llu/%llu B, virtual %llu calls "
        "%llu/%llu B",
        pl_comm_op_name(op), (unsigned long long)r.cp.calls[op],
        (unsigned long long)r.cp.sent[op], (unsigned long long)r.cp.recv[op],
        (unsigned long long)v.cp.calls[op], (unsigned long long)v.cp.sent[op],
        (unsigned long long)v.cp.recv[op]);
  ck_assert(r.cp.calls[PL_COMM_ALLGATHER] > 0 &&
            r.cp.calls[PL_COMM_SENDRECV] > 0);
}
END_TEST

START_TEST(refused) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  pl_fsdp2_cfg c = pl_fsdp2_cfg_default();
  c.cp = 4, c.W_v = 6; /* 6 is not a multiple of cp·W = 4 */
  ck_assert_int_eq(pl_fsdp2_check(&m, &c, 1, 64), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "cp=4") &&
                    strstr(pl_last_error(), "W_v=6"),
                "%s", pl_last_error());
  /* fewer present experts than k: ep 8 of E 8 on one rank, k 2 */
  c = pl_fsdp2_cfg_default();
  c.ep = 8, c.W_v = 8;
  ck_assert_int_eq(pl_fsdp2_check(&m, &c, 1, 64), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "fewer than k=2"), "%s",
                pl_last_error());
  pl_clear_error();
}
END_TEST

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK)
    return 2;
  if (pl_dev_create(PL_BACKEND_CPU, 0, &dev) != PL_OK ||
      pl_comm_world(dev, &world) != PL_OK) {
    fprintf(stderr, "set-up: %s\n", pl_last_error());
    return 3;
  }
  rank = pl_comm_rank(world), size = pl_comm_size(world);
  pl_comm_set_timeout(world, 120.0);
  const TTest *tests[] = {as_real, refused, NULL};
  const int nf = pl_check_run("fsdp2 virtual cp", 300, tests, rank, world);
  pl_comm_destroy(world);
  pl_dev_destroy(dev);
  pl_finalize();
  return nf ? 1 : 0;
}
