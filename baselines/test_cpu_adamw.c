/* test_cpu_adamw.c — the classic offloaded step (the ZeRO-Offload baseline)
 * equals the reference over many steps with clipping, on each SIMD path this
 * CPU supports (the paths themselves: engine/ops/test_adamw_simd.c). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_adamw_testlib.h"

/* The classic offloaded step, each path, many steps, clipping on. */
START_TEST(offload_step_equals_reference) {
  pl_simd_path path = (pl_simd_path)(_i + 1);
  if (!pl_simd_path_supported(path)) {
    printf("skipped: offload step on %s (not supported)\n",
           pl_simd_path_name(path));
    return;
  }
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  tl_case c = {"offload", 3, {1001, 17, 5000}, 0, 0, 1.0, 0.01,
               _i % 2 ? PL_F32 : PL_BF16, 0, 0, 6, &tl_offload, (int)path};
  tl_result R;
  pl_status st = tl_run(dev, &c, 99, &R);
  ck_assert_msg(st == PL_OK, "%s", pl_last_error());
  ck_assert_msg(R.ok, "path %s: %s", pl_simd_path_name(path), R.msg);
  ck_assert(R.clipped_steps > 0);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim"), 0);
  pl_dev_destroy(dev);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cpu_adamw");
  TCase *tc = tcase_create("offload");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, offload_step_equals_reference, 0, 3);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
