/* test_core.c — status/last-error, the counter-based RNG, bf16 rounding,
 * statistics and tensors (option parsing: suite/harness/test_options.c). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "plateau/dev.h"
#include "plateau/host_device.h"
#include "plateau/log.h"
#include "plateau/status.h"
#include "plateau/tensor.h"
#include "plateau/timer.h"

START_TEST(status_names_and_exit_codes) {
  ck_assert_str_eq(pl_strerror(PL_ENOMEM), "PL_ENOMEM");
  ck_assert_int_eq(pl_status_exit_code(PL_OK), 0);
  ck_assert_int_eq(pl_status_exit_code(PL_ECHECK), 1);
  ck_assert_int_eq(pl_status_exit_code(PL_EINVAL), 2);
  ck_assert_int_eq(pl_status_exit_code(PL_ENOMEM), 3);
  ck_assert_int_eq(pl_set_error(PL_EINVAL, "N=%d: bad", 7), PL_EINVAL);
  ck_assert_str_eq(pl_last_error(), "N=7: bad");
  /* a failure passed up: what was being done, then why */
  ck_assert_int_eq(pl_error_prefix(PL_EIO, "--out=%s: ", "x"), PL_EIO);
  ck_assert_str_eq(pl_last_error(), "--out=x: N=7: bad");
  /* a prefix that fills the buffer: cut, never overrun */
  char big[2000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = 0;
  pl_error_prefix(PL_EIO, "%s", big);
  ck_assert_uint_eq(strlen(pl_last_error()), 1023);
  pl_clear_error();
  ck_assert_str_eq(pl_last_error(), "");
}
END_TEST

START_TEST(rng_counter_based) {
  /* value i is a pure function of (seed, i): slices agree with the whole */
  float whole[1000];
  for (int i = 0; i < 1000; i++)
    whole[i] = pl_rng_uniform(42, (uint64_t)i, -1, 1);
  for (int i = 500; i < 1000; i++)
    ck_assert(whole[i] == pl_rng_uniform(42, (uint64_t)i, -1, 1));
  /* different seeds differ; uniform stays in range with mean ~0 */
  int same = 0;
  double mean = 0, var = 0;
  for (int i = 0; i < 1000; i++) {
    same += whole[i] == pl_rng_uniform(43, (uint64_t)i, -1, 1);
    ck_assert(whole[i] >= -1 && whole[i] < 1);
    mean += whole[i];
  }
  ck_assert_int_lt(same, 5);
  ck_assert(fabs(mean / 1000) < 0.1);
  /* normal: mean ~0, std ~1 over 100k draws */
  mean = 0;
  for (int i = 0; i < 100000; i++) {
    double z = pl_rng_normal(7, (uint64_t)i, 0, 1);
    mean += z;
    var += z * z;
  }
  mean /= 100000;
  var = var / 100000 - mean * mean;
  ck_assert_msg(fabs(mean) < 0.02 && fabs(sqrt(var) - 1) < 0.02,
                "mean %g std %g", mean, sqrt(var));
}
END_TEST

START_TEST(bf16_rounding) {
  ck_assert_uint_eq(pl_f32_to_bf16(1.0f), 0x3f80);
  ck_assert(pl_bf16_to_f32(pl_f32_to_bf16(1.0f)) == 1.0f);
  /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1 */
  ck_assert_uint_eq(pl_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  /* 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even) -> up */
  ck_assert_uint_eq(pl_f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  ck_assert(isnan(pl_bf16_to_f32(pl_f32_to_bf16(NAN))));
  ck_assert(isinf(pl_bf16_to_f32(pl_f32_to_bf16(INFINITY))));
  /* relative rounding error bound 2^-8 (8 significant bits, half an ulp) */
  for (int i = 0; i < 10000; i++) {
    float x = pl_rng_normal(3, (uint64_t)i, 0, 100);
    float y = pl_bf16_to_f32(pl_f32_to_bf16(x));
    ck_assert(fabsf(y - x) <= fabsf(x) * (1.0f / 256) + 1e-30f);
  }
}
END_TEST

START_TEST(stats_median_spread) {
  double s[] = {5, 1, 4, 2, 3};
  pl_stats st = pl_stats_of(s, 5);
  ck_assert(st.median == 3 && st.min == 1 && st.max == 5 && st.mean == 3);
  double e[] = {4, 1, 3, 2};
  st = pl_stats_of(e, 4);
  ck_assert(st.median == 2.5);
  st = pl_stats_of(NULL, 0);
  ck_assert_int_eq(st.n, 0);
  char stamp[32];
  pl_utc_stamp(stamp, sizeof stamp);
  ck_assert_int_eq((int)strlen(stamp), 20);
  ck_assert(stamp[19] == 'Z');
}
END_TEST

START_TEST(tensors) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  pl_tensor t;
  int64_t shape[3] = {2, 3, 5};
  ck_assert_int_eq(
      pl_tensor_alloc(dev, PL_ARENA_DEVICE, PL_BF16, 3, shape, "weights", &t),
      PL_OK);
  ck_assert_int_eq(pl_tensor_numel(&t), 30);
  ck_assert_uint_eq(pl_tensor_bytes(&t), 60);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "weights"), 60);
  pl_tensor_free(&t);
  ck_assert_ptr_null(t.data);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "weights"), 0);
  int64_t neg[2] = {2, -1};
  ck_assert_int_eq(
      pl_tensor_alloc(dev, PL_ARENA_DEVICE, PL_F32, 2, neg, "x", &t),
      PL_EINVAL);
  ck_assert_int_eq(
      pl_tensor_alloc(dev, PL_ARENA_DEVICE, PL_F32, 5, shape, "x", &t),
      PL_EINVAL);
  int64_t empty[2] = {0, 7};
  ck_assert_int_eq(
      pl_tensor_alloc(dev, PL_ARENA_HOST, PL_I64, 2, empty, "x", &t), PL_OK);
  ck_assert_ptr_nonnull(t.data);
  ck_assert_int_eq(pl_tensor_numel(&t), 0);
  pl_tensor_free(&t);
  pl_dtype dt;
  ck_assert_int_eq(pl_dtype_parse("fp32", &dt), PL_OK);
  ck_assert_int_eq(dt, PL_F32);
  ck_assert_int_eq(pl_dtype_parse("fp16", &dt), PL_EINVAL);
  pl_backend be;
  ck_assert_int_eq(pl_backend_parse("tpu", &be), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "cpu | cuda"));
  pl_dev_destroy(dev);
}
END_TEST

int main(void) {
  const TTest *tests[] = {
      status_names_and_exit_codes, rng_counter_based, bf16_rounding,
      stats_median_spread,         tensors,           NULL};
  return pl_check_suite("core", 0, tests, NULL, NULL, CK_FORK_GETENV, 0) ? 1
                                                                         : 0;
}
