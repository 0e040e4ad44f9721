/* test_mpi_stream_adamw.c — several ranks, each with its own shard: the clip
 * factor comes from the global norm (ranks' fixed-order sums added in rank
 * order), identical on every rank and equal to the reference that regenerates
 * all ranks' gradients; stream and hybrid both equal the reference bit for
 * bit (the offload baseline: baselines/test_mpi_cpu_adamw.c).  Run under
 * mpirun -np 1..4 (CK_NOFORK). */
#include <check.h>

#include "comm/check_mpi.h"
#include "ops/adamw_testlib.h"

/* One case a line (formatted, each would take thirteen). */
/* clang-format off */
static const tl_case cases[] = {
    {"stream clip", 3, {999, 1001, 3}, 333, 2, 1.0, 0.01, PL_BF16, 0, 0, 5, 0, 0},
    {"stream clip grads on host", 2, {2049, 77}, 500, 3, 1.0, 0.0, PL_F32, 1, 0, 4, 0, 0},
    {"hybrid clip", 3, {999, 1001, 3}, 250, 2, 1.0, 0.01, PL_BF16, 0, 0.5, 4, 0, 0},
};
/* clang-format on */
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

START_TEST(global_norm_equals_reference) {
  pl_dev *dev;
  pl_comm *world;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  ck_assert_int_eq(pl_comm_world(dev, &world), PL_OK);
  tl_comm = world;
  for (int i = 0; i < NCASES; i++) {
    tl_result R;
    pl_status st = tl_run(dev, &cases[i], 5 + (uint64_t)i, &R);
    ck_assert_msg(st == PL_OK, "%s: %s", cases[i].name, pl_last_error());
    ck_assert_msg(R.ok, "rank %d %s: %s", pl_comm_rank(world), cases[i].name,
                  R.msg);
    ck_assert(R.clipped_steps > 0);
  }
  /* the gathered sum is the rank-order sum, the same on every rank */
  double mine = 1.0 + pl_comm_rank(world) * 1e-17, got;
  ck_assert_int_eq(pl_adamw_global_sumsq(world, mine, &got), PL_OK);
  double want = 0;
  for (int r = 0; r < pl_comm_size(world); r++)
    want = want + (1.0 + r * 1e-17);
  ck_assert(memcmp(&got, &want, 8) == 0);
  tl_comm = NULL;
  pl_comm_destroy(world);
  pl_dev_destroy(dev);
}
END_TEST

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK)
    return 1;
  const TTest *tests[] = {global_norm_equals_reference, NULL};
  const int failed =
      pl_check_run("mpi_stream_adamw", 120, tests, pl_world_rank(), NULL);
  pl_finalize();
  return failed ? 1 : 0;
}
