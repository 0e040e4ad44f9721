/* test_mpi_cpu_adamw.c — the classic offloaded step with several ranks, each
 * with its own shard: its clip factor comes from the global norm (ranks'
 * fixed-order sums added in rank order) and every rank equals the reference
 * that regenerates all ranks' gradients, bit for bit.  Run under mpirun
 * -np 1..4 (CK_NOFORK). */
#include <check.h>

#include "comm/check_mpi.h"
#include "cpu_adamw_testlib.h"

START_TEST(offload_global_norm_equals_reference) {
  pl_dev *dev;
  pl_comm *world;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  ck_assert_int_eq(pl_comm_world(dev, &world), PL_OK);
  tl_comm = world;
  const tl_case c = {.name = "offload baseline clip",
                     .nt = 2,
                     .numel = {1001, 5000},
                     .bucket = 700,
                     .slots = 2, /* a ring of two pieces */
                     .max_norm = 1.0,
                     .wd = 0.01,
                     .gdt = PL_BF16,
                     .steps = 4,
                     .opt = &tl_offload};
  tl_result R;
  pl_status st = tl_run(dev, &c, 8, &R);
  ck_assert_msg(st == PL_OK, "%s: %s", c.name, pl_last_error());
  ck_assert_msg(R.ok, "rank %d %s: %s", pl_comm_rank(world), c.name, R.msg);
  ck_assert(R.clipped_steps > 0);
  tl_comm = NULL;
  pl_comm_destroy(world);
  pl_dev_destroy(dev);
}
END_TEST

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK)
    return 1;
  const TTest *tests[] = {offload_global_norm_equals_reference, NULL};
  const int failed =
      pl_check_run("mpi_cpu_adamw", 120, tests, pl_world_rank(), NULL);
  pl_finalize();
  return failed ? 1 : 0;
}
