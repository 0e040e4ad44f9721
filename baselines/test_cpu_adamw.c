/* test_cpu_adamw.c — the classic offloaded step (the ZeRO-Offload baseline)
 * equals the reference over many steps with clipping, on each SIMD path this
 * CPU supports (the paths themselves: engine/ops/test_adamw_simd.c), with its
 * transfers pipelined over pieces that split tensors and with one piece per
 * tensor, through full host copies and through rings of 1 to 4 slots (fewer
 * and more slots than pieces); the staging's host memory is what it says. */
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
  /* pieces of 600: 1001 -> 2, 17 -> 1, 5000 -> 9 (the pipeline); staging
   * full (slots 0) or a ring of 1..4 slots */
  for (int slots = 0; slots <= 4; slots++) {
    tl_case c = {"offload",
                 3,
                 {1001, 17, 5000},
                 600,
                 slots,
                 1.0,
                 0.01,
                 _i % 2 ? PL_F32 : PL_BF16,
                 0,
                 0,
                 6,
                 &tl_offload,
                 (int)path};
    tl_result R;
    pl_status st = tl_run(dev, &c, 99, &R);
    ck_assert_msg(st == PL_OK, "%s", pl_last_error());
    ck_assert_msg(R.ok, "path %s slots %d: %s", pl_simd_path_name(path), slots,
                  R.msg);
    ck_assert(R.clipped_steps > 0);
    ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim"), 0);
    /* the default bucket: one piece per tensor */
    c.bucket = 0;
    st = tl_run(dev, &c, 98, &R);
    ck_assert_msg(st == PL_OK && R.ok, "path %s slots %d, default bucket: %s",
                  pl_simd_path_name(path), slots, R.msg);
  }
  pl_dev_destroy(dev);
}
END_TEST

/* The pieces: at most `bucket` elements, never across a tensor; the
 * staging's host memory: every element (full) or min(slots, pieces) slots of
 * a piece (ring), gradients and weights; bad slots refused. */
START_TEST(offload_pieces) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  pl_adamw_param prm[3];
  size_t numel[3] = {1001, 17, 5000};
  for (int i = 0; i < 3; i++) {
    prm[i].numel = numel[i];
    ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, numel[i] * 2, "weights",
                              (void **)&prm[i].weight),
                     PL_OK);
    ck_assert_int_eq(
        pl_alloc(dev, PL_ARENA_DEVICE, numel[i] * 2, "grads", &prm[i].grad),
        PL_OK);
  }
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  pl_cpu_offload_adamw *o;
  ck_assert_int_eq(pl_cpu_offload_adamw_create(dev, &hp, 3, prm, PL_BF16,
                                               PL_SIMD_AUTO, 1, NULL, NULL, &o),
                   PL_OK);
  const size_t total = 1001 + 17 + 5000;
  /* the default: a ring of PL_CPU_OFFLOAD_RING_SLOTS slots, one piece per
   * tensor here (3 pieces, one slot each) */
  ck_assert_uint_eq(pl_cpu_offload_adamw_npieces(o), 3);
  ck_assert_int_eq(pl_cpu_offload_adamw_slots(o), PL_CPU_OFFLOAD_RING_SLOTS);
  ck_assert_uint_eq(pl_cpu_offload_adamw_bucket(o), PL_CPU_OFFLOAD_BUCKET);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim_offload"),
                    (size_t)3 * 5056 * (2 + 2)); /* slots of the longest,
                                                    64-element blocks */
  ck_assert_int_eq(pl_cpu_offload_adamw_cached(o), 1);
  ck_assert_int_eq(pl_cpu_offload_adamw_set_bucket(o, 600), PL_OK);
  ck_assert_uint_eq(pl_cpu_offload_adamw_npieces(o), 2 + 1 + 9);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim_offload"),
                    (size_t)PL_CPU_OFFLOAD_RING_SLOTS * 640 * (2 + 2));
  ck_assert_int_eq(pl_cpu_offload_adamw_cached(o), 1); /* 7200 bytes */
  ck_assert_int_eq(pl_cpu_offload_adamw_set_bucket(o, 0), PL_EINVAL);
  ck_assert_int_eq(pl_cpu_offload_adamw_set_staging(o, 0, 0), PL_OK);
  ck_assert_uint_eq(pl_cpu_offload_adamw_bucket(o), PL_CPU_OFFLOAD_BUCKET);
  ck_assert_uint_eq(pl_cpu_offload_adamw_npieces(o), 3);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim_offload"),
                    total * (2 + 2));
  ck_assert_int_eq(pl_cpu_offload_adamw_cached(o), 0); /* full staging */
  /* more slots than pieces: one slot a piece */
  ck_assert_int_eq(pl_cpu_offload_adamw_set_staging(o, 8, 2000), PL_OK);
  ck_assert_uint_eq(pl_cpu_offload_adamw_npieces(o), 1 + 1 + 3);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim_offload"),
                    (size_t)5 * 2048 * (2 + 2));
  /* 64 slots asked, 5 pieces: 5 slots made */
  ck_assert_int_eq(pl_cpu_offload_adamw_set_staging(o, 64, 2000), PL_OK);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim_offload"),
                    (size_t)5 * 2048 * (2 + 2));
  ck_assert_int_eq(pl_cpu_offload_adamw_set_staging(o, -1, 0), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "slots=-1"));
  ck_assert_int_eq(pl_cpu_offload_adamw_set_staging(o, 65, 0), PL_EINVAL);
  pl_cpu_offload_adamw_destroy(o);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim_offload"), 0);
  for (int i = 0; i < 3; i++) {
    pl_free(dev, prm[i].weight);
    pl_free(dev, prm[i].grad);
  }
  pl_dev_destroy(dev);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cpu_adamw");
  TCase *tc = tcase_create("offload");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, offload_step_equals_reference, 0, 3);
  tcase_add_test(tc, offload_pieces);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
