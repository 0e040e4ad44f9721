/* test_mpi_plan_virtual.c — the planner on proxies with virtual groups and
 * router slots (plan/plan.h, train/layout.h), CPU backend, f32, rank 0 of
 * mpirun -np 1..4 alone (the others idle):
 *   virtual  a virtual D = 2 and P = 2 on one rank (W_v 2, a dense model,
 *            V not divisible by P): the measured device peak and pinned host
 *            of two steps equal pl_plan_memory's; the time model gives
 *            the virtual groups no communication (no Ulysses all-to-all, no
 *            Ring-DTP hop, comm_s 0) while pl_plan_proxy_comm gives the
 *            two-rank run's, above 0, with its Ulysses part;
 *   slots    a proxy with fewer experts present than k (tiny at W_v 8: one
 *            of its 8 experts, k = 2; two router slots per present expert):
 *            the measured peaks equal the plan's, whose MoE layer takes k
 *            routes per token. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "plan/plan.h"
#include "train/data.h"
#include "train/step.h"

static pl_dev *dev;
static pl_comm *world;
static int rank;

/* Two steps of (m, lc, sc) at S on this rank alone; the last step's result. */
static pl_step_result measure(pl_comm *self, const pl_model_cfg *m,
                              const pl_layout_cfg *lc, const pl_step_cfg *sc,
                              int64_t S) {
  pl_trainer *t;
  ck_assert_msg(pl_trainer_create(dev, self, m, lc, S, sc, &t) == PL_OK, "%s",
                pl_last_error());
  pl_data *data;
  ck_assert_int_eq(pl_data_synthetic(m->V, 5, &data), PL_OK);
  pl_step_result r[2];
  ck_assert_int_eq(pl_trainer_run(t, data, 0, 2, NULL, r), PL_OK);
  pl_data_close(data);
  pl_trainer_destroy(t);
  return r[1];
}

static void planned(const pl_model_cfg *m, const pl_layout_cfg *lc,
                    const pl_step_cfg *sc, int64_t S, const pl_step_result *r,
                    pl_plan_cfg *pc, pl_plan_machine *mc) {
  *pc = pl_plan_cfg_plateau(1, S);
  pc->lc = *lc, pc->sc = *sc;
  *mc = pl_plan_machine_default();
  mc->backend = PL_BACKEND_CPU;
  pl_plan_mem pm;
  ck_assert_int_eq(pl_plan_memory(m, pc, mc, 0, &pm), PL_OK);
  ck_assert_msg(pm.dev_peak == r->dev.peak,
                "device peak: plan %zu, measured %zu", pm.dev_peak,
                r->dev.peak);
  ck_assert_int_eq(pm.host_pinned, r->host.peak);
}

START_TEST(virtual) {
  pl_comm *self = NULL;
  ck_assert_int_eq(pl_comm_split(world, rank == 0 ? 0 : -1, 0, &self), PL_OK);
  if (!self)
    return;
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.dense_layers = m.L, m.V = 511;
  const pl_layout_cfg lc = {2, 2, 2, 0, 0};
  pl_step_cfg sc = pl_step_cfg_default();
  sc.dt = PL_F32, sc.oo.bucket = 5000;
  const pl_step_result r = measure(self, &m, &lc, &sc, 64);
  pl_comm_destroy(self);
  pl_plan_cfg pc;
  pl_plan_machine mc;
  planned(&m, &lc, &sc, 64, &r, &pc, &mc);
  pl_plan_time t;
  ck_assert_int_eq(pl_plan_time_predict(&m, &pc, &mc, &t), PL_OK);
  ck_assert(t.part_s[PL_TPART_A2A_SEQ] == 0 && t.comm_s == 0);
  double comm = 0;
  pl_plan_time run;
  ck_assert_int_eq(pl_plan_proxy_comm(&m, &pc, &mc, 0, &comm, &run), PL_OK);
  ck_assert_msg(comm > 0 && run.part_s[PL_TPART_A2A_SEQ] > 0,
                "the 2-rank run's Ulysses: %g s, comm %g s",
                run.part_s[PL_TPART_A2A_SEQ], comm);
  /* a real run has nothing left out */
  pl_plan_cfg real = pc;
  real.W = 2;
  ck_assert_int_eq(pl_plan_proxy_comm(&m, &real, &mc, 0, &comm, NULL), PL_OK);
  ck_assert(comm == 0);
}
END_TEST

START_TEST(slots) {
  pl_comm *self = NULL;
  ck_assert_int_eq(pl_comm_split(world, rank == 0 ? 0 : -1, 0, &self), PL_OK);
  if (!self)
    return;
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK); /* E 8, k 2 */
  const pl_layout_cfg lc = {2, 1, 8, 0, 0};
  pl_step_cfg sc = pl_step_cfg_default();
  sc.dt = PL_F32, sc.oo.bucket = 5000, sc.moe_lanes = 0;
  const pl_step_result r = measure(self, &m, &lc, &sc, 64);
  pl_comm_destroy(self);
  pl_plan_cfg pc;
  pl_plan_machine mc;
  planned(&m, &lc, &sc, 64, &r, &pc, &mc);
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
  rank = pl_comm_rank(world);
  pl_comm_set_timeout(world, 120.0);
  const TTest *tests[] = {virtual, slots, NULL};
  const int nf = pl_check_run("plan: virtual groups", 300, tests, rank, world);
  pl_comm_destroy(world);
  pl_dev_destroy(dev);
  pl_finalize();
  return nf ? 1 : 0;
}
