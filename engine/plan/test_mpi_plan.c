/* test_mpi_plan.c — the planner's memory against the real step: for
 * a grid of small configurations (tiny-like models: layers, experts, top-k,
 * tokens, D and P over the ranks of mpirun -np 1..4, SCO budgets, ring and
 * fused heads, dispatch ep / llep / pipelined_llep, micro-batches, f32 and
 * bf16, the routing context kept or recomputed, the stream and hybrid
 * optimizers, a one-GPU proxy, V not divisible by P, the optimizer state
 * partly or wholly resident on the device, kept activations of every
 * level and a budget, expert groups smaller than the world, a Ulysses
 * group past the key/value heads) every rank
 * runs the
 * trainer (engine/train) on the CPU backend and compares the tracked device
 * peak and pinned host peak of its second step with pl_plan_memory's (rank
 * 0 of the run stepped on a dry device, the other ranks virtual, balanced
 * routes): within 5% of rank 0's measured peaks, and no rank's above them
 * by more than 5%.  The real step routes each chunk by its own counts, the
 * dry one by the balanced profile: the difference is the routing-sized
 * tags.  A failure names the configuration, the rank and the tag whose
 * bytes at the peak were mis-predicted the most.  The last test shows the
 * check can fail: a plan with the wrong dtype under-predicts. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "plan/plan.h"
#include "plan/plan_grid_testlib.h"
#include "plan/plan_testlib.h"
#include "train/data.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

/* Two steps of the real trainer; the second's memory. */
static void measure(const point *p, pl_step_result *r) {
  pt_train(dev, world, p, 2, r);
}

/* One point: the planner's answer (rank 0 measured on a dry device, every
 * other rank of the run virtual) against the real step of every rank:
 * within 5% of rank 0's, and no rank's peak above it by more than 5% (rank
 * 0 holds the widest vocabulary shard: the peak).  Returns the max errors. */
static void check_point(const point *p, const pl_plan_machine *mc,
                        double *dev_err, double *host_err) {
  pl_plan_mem pm;
  pl_status st = pl_plan_memory(&p->m, &p->c, mc, 0, &pm);
  ck_assert_msg(st == PL_OK, "%s: %s", p->name, pl_last_error());
  pl_step_result r;
  measure(p, &r);
  char why[160];
  pt_worst_tag(&pm, &r.dev, why, sizeof why);
  /* rank 0: both ways; every rank: how far its peak is above the answer */
  double e[4] = {rank == 0 ? pt_rel(pm.dev_peak, r.dev.peak) : 0,
                 rank == 0 ? pt_rel(pm.host_pinned, r.host.peak) : 0,
                 ((double)r.dev.peak - (double)pm.dev_peak) /
                     (double)r.dev.peak,
                 ((double)r.host.peak - (double)pm.host_pinned) /
                     (r.host.peak ? (double)r.host.peak : 1)};
  double all[4] = {e[0], e[1], e[2], e[3]};
  ck_assert_int_eq(pl_host_allreduce_f64(world, all, 4, PL_RED_MAX), PL_OK);
  if (rank == 0)
    printf("  %-36s dev %8zu / %8zu (%5.2f%%, any rank above by %5.2f%%)  "
           "host %5.2f%%  peak at %s\n",
           p->name, pm.dev_peak, r.dev.peak, 100 * all[0], 100 * all[2],
           100 * all[1], pm.peak_phase);
  /* every rank sees the same maxima, so every rank fails together */
  ck_assert_msg(all[0] <= 0.05 && all[2] <= 0.05,
                "%s, rank %d of %d: device peak planned %zu, measured %zu; "
                "rank 0 %.2f%% off, a rank %.2f%% above; most mis-predicted "
                "tag: %s",
                p->name, rank, size, pm.dev_peak, r.dev.peak, 100 * all[0],
                100 * all[2], why);
  ck_assert_msg(all[1] <= 0.05 && all[3] <= 0.05,
                "%s, rank %d: pinned host planned %zu, measured %zu", p->name,
                rank, pm.host_pinned, r.host.peak);
  *dev_err = all[0] > all[2] ? all[0] : all[2];
  *host_err = all[1] > all[3] ? all[1] : all[3];
}

START_TEST(step_grid) {
  pl_plan_machine mc = pl_plan_machine_default();
  mc.backend = PL_BACKEND_CPU;
  point g[32];
  const int n = grid(size, g);
  double worst = 0;
  if (rank == 0)
    printf("planner vs the tracked peaks, %d rank(s):\n", size);
  for (int i = 0; i < n; i++) {
    double de, he;
    const uint64_t t0 = pl_now_ns();
    check_point(&g[i], &mc, &de, &he);
    if (rank == 0 && getenv("PLAN_TEST_TIMES"))
      printf("    %.2f s\n", pl_elapsed_s(t0));
    if (de > worst)
      worst = de;
  }
  if (rank == 0)
    printf("  largest device error over %d configurations: %.2f%%\n", n,
           100 * worst);
}
END_TEST

START_TEST(wrong_model_fails) {
  /* the check can fail: predicting f32 for a bf16 step is far off */
  pl_plan_machine mc = pl_plan_machine_default();
  mc.backend = PL_BACKEND_CPU;
  point p = base(size, "wrong dtype");
  p.c.S = 1024;
  pl_plan_mem pm;
  pl_plan_cfg wrong = p.c;
  wrong.sc.dt = PL_F32;
  ck_assert_int_eq(pl_plan_memory(&p.m, &wrong, &mc, 0, &pm), PL_OK);
  pl_step_result r;
  measure(&p, &r);
  double e = pt_rel(pm.dev_peak, r.dev.peak);
  ck_assert_int_eq(pl_host_allreduce_f64(world, &e, 1, PL_RED_MIN), PL_OK);
  ck_assert_msg(e > 0.05, "an f32 prediction of a bf16 step stayed within 5%%");
}
END_TEST

START_TEST(invalid_is_refused) {
  pl_plan_machine mc = pl_plan_machine_default();
  point p = base(size, "bad D");
  p.c.lc.D = 3; /* n_q = 4 */
  pl_plan_mem pm;
  ck_assert_int_eq(pl_plan_memory(&p.m, &p.c, &mc, 0, &pm), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "D=3"));
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "plan", &dev, &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {step_grid, wrong_model_fails, invalid_is_refused,
                          NULL};
  return pl_check_world_close(dev, world,
                              pl_check_run("plan", 300, tests, rank, world));
}
