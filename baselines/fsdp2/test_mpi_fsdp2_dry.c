/* test_mpi_fsdp2_dry.c — the planner's dry measurement of the FSDP2
 * baseline (fsdp2_dry.c, reached through the planner's hook:
 * pl_plan_dry_measure): for the grid of test_mpi_fsdp2_plan.c
 * (fsdp2_grid_testlib.h) at the ranks of mpirun, both flavours of the dry
 * device, one step measures every field two steps do (the baseline
 * allocates its state when it is built); the hook refuses a system nothing
 * registered, and fsdp2 once unregistered; and the measurement follows the
 * configuration (an AC-none step measured above the AC-full one).  That the
 * measurement is what the baseline's real steps hold is
 * test_mpi_fsdp2_plan.c's (every rank) and test_mpi_fsdp2_rank.c's (the
 * rank view); the planner's answers on it, test_fsdp2_planner.c's. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "fsdp2.h"
#include "fsdp2_grid_testlib.h"
#include "plan/plan.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

/* One step measures what two do: the baseline allocates its state when it
 * is built, so the second step starts from what the first did (the state
 * after the first is what both report) — every field of the grid's
 * measurements, both flavours. */
START_TEST(one_step) {
  point g[32];
  const int n = grid(g, size);
  const pl_backend bes[2] = {PL_BACKEND_CPU, PL_BACKEND_CUDA};
  pl_plan_mem *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  ck_assert(a && b);
  for (int f = 0; f < 2; f++)
    for (int i = 0; i < n; i++) {
      pl_plan_machine mc = pl_plan_machine_default();
      mc.backend = bes[f];
      const pl_plan_cfg c = pl_fsdp2_plan_cfg(&g[i].m, &g[i].c, size, g[i].S);
      ck_assert_int_eq(pl_fsdp2_dry_memory_steps(&g[i].m, &c, &mc, 1, a),
                       PL_OK);
      ck_assert_int_eq(pl_fsdp2_dry_memory_steps(&g[i].m, &c, &mc, 2, b),
                       PL_OK);
      char d[4][PL_PLAN_DIFF_LEN];
      const int nd = pl_plan_mem_diff(a, b, d, 4);
      ck_assert_msg(nd == 0, "%s (%s): one step / two differ in %d fields: %s",
                    g[i].name, pl_backend_name(bes[f]), nd, d[0]);
    }
  pl_plan_machine mc = pl_plan_machine_default();
  const pl_plan_cfg c = pl_fsdp2_plan_cfg(&g[0].m, &g[0].c, size, g[0].S);
  ck_assert_int_eq(pl_fsdp2_dry_memory_steps(&g[0].m, &c, &mc, 0, a),
                   PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "steps=0"));
  free(a), free(b);
}
END_TEST

START_TEST(hook_refusals) {
  /* nothing registered for plateau: refused, naming the system */
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  const pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg c = pl_plan_cfg_plateau(1, 256);
  pl_plan_mem out;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, &out), PL_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "plateau"));
  /* unregistered, fsdp2 is refused too */
  point p = base("unregistered");
  c = pl_fsdp2_plan_cfg(&p.m, &p.c, size, p.S);
  pl_plan_set_dry_measure(PL_PLAN_FSDP2, NULL);
  ck_assert_int_eq(pl_plan_dry_measure(&p.m, &c, &mc, &out), PL_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "fsdp2"));
  pl_fsdp2_register_dry();
}
END_TEST

START_TEST(ac_differs) {
  /* the measurement follows the configuration: without checkpointing every
   * layer's saved set stays, above what full AC holds */
  point p = base("AC");
  p.c.ac = PL_FSDP2_AC_NONE, p.S = 1024;
  const pl_plan_machine mc = pl_plan_machine_default();
  const pl_plan_cfg c = pl_fsdp2_plan_cfg(&p.m, &p.c, size, p.S);
  pl_plan_cfg full = c;
  full.ac = PL_PLAN_AC_FULL;
  pl_plan_mem none_m, full_m;
  ck_assert_int_eq(pl_plan_dry_measure(&p.m, &full, &mc, &full_m), PL_OK);
  ck_assert_int_eq(pl_plan_dry_measure(&p.m, &c, &mc, &none_m), PL_OK);
  char d[4][PL_PLAN_DIFF_LEN];
  ck_assert_int_gt(pl_plan_mem_diff(&full_m, &none_m, d, 4), 0);
  ck_assert_msg(none_m.dev_peak > full_m.dev_peak,
                "AC none measured %zu, AC full %zu", none_m.dev_peak,
                full_m.dev_peak);
  ck_assert(none_m.term_peak[PL_TERM_RESIDENT] >
            full_m.term_peak[PL_TERM_RESIDENT]);
}
END_TEST

int main(int argc, char **argv) {
  const int e = pl_check_world_open(&argc, &argv, "fsdp2 dry", &dev, &world,
                                    &rank, &size);
  if (e)
    return e;
  pl_fsdp2_register_dry();
  const TTest *tests[] = {one_step, hook_refusals, ac_differs, NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("fsdp2_dry", 300, tests, rank, world));
}
