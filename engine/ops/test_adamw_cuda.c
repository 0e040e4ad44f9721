/* test_adamw_cuda.c — OffloadStreamAdamW on the CUDA backend equals the
 * reference AdamW bit for bit (master, m, v, bf16 weights, clip factor) over
 * many steps and the same shape table as the CPU test: the device kernel uses
 * explicit round-to-nearest intrinsics only (no FMA contraction, denormals
 * kept), so the bound we assert is exact equality — the strictest "within
 * fp32 rounding".  The CPU backend equals the same reference
 * (test_stream_adamw), so CPU and CUDA agree.  The tracked device staging
 * peak is <= s·β·16 and equals the CPU backend's figure for the same
 * configuration.  Optimizer-state residency (the last bucket, half, all of
 * the state in device memory, updated there) equals the same reference bit
 * for bit too.  Without a GPU it prints "skipped: no CUDA device" and
 * passes.  CK_NOFORK: the CUDA context is never created before a fork. */
#include <check.h>

#include "core/check_run.h"
#include "ops/adamw_testlib.h"

/* One case a line (formatted, each would take thirteen). */
/* clang-format off */
static const tl_case cases[] = {
    {"odd sizes, spanning", 4, {1, 1000, 77, 3333}, 997, 2, 0, 0.01, PL_BF16, 0, 0, 5, 0, 0},
    {"beta > tensor", 3, {17, 5, 129}, 100, 3, 0, 0.0, PL_BF16, 0, 0, 3, 0, 0},
    {"beta > all params", 2, {300, 211}, 100000, 4, 0, 0.01, PL_BF16, 0, 0, 3, 0, 0},
    {"s=1 clip", 2, {2049, 4097}, 1000, 1, 1.0, 0.01, PL_BF16, 0, 0, 6, 0, 0},
    {"s=2 clip wd0, many chunks", 2, {100003, 70001}, 30000, 2, 1.0, 0.0, PL_BF16, 0, 0, 6, 0, 0},
    {"s=3 clip f32", 2, {2049, 4097}, 1000, 3, 1.0, 0.1, PL_F32, 0, 0, 6, 0, 0},
    {"s=4", 3, {999, 1001, 3}, 333, 4, 0, 0.01, PL_BF16, 0, 0, 5, 0, 0},
    {"s=5 clip", 3, {999, 1001, 3}, 333, 5, 1.0, 0.01, PL_BF16, 0, 0, 5, 0, 0},
    {"grads on host", 3, {1023, 17, 2000}, 500, 2, 1.0, 0.01, PL_BF16, 1, 0, 4, 0, 0},
    {"hybrid 0.5", 4, {1, 1000, 77, 3333}, 500, 2, 1.0, 0.01, PL_BF16, 0, 0.5, 5, 0, 0},
    {"hybrid all cpu", 3, {999, 1001, 3}, 250, 2, 1.0, 0.01, PL_F32, 0, 1.0, 4, 0, 0},
    {"hybrid auto", 3, {4999, 1001, 3}, 300, 3, 1.0, 0.01, PL_BF16, 0, -1, 6, 0, 0},
    {"hybrid grads on host", 2, {3001, 999}, 400, 2, 1.0, 0.0, PL_BF16, 1, 0.3, 4, 0, 0},
};
/* clang-format on */
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

START_TEST(cuda_equals_reference) {
  pl_dev *cuda, *cpu;
  if (!pl_check_cpu_and_gpu(&cpu, &cuda))
    return;
  for (int i = 0; i < NCASES; i++) {
    const tl_case *c = &cases[i];
    tl_result R, Rc;
    pl_status st = tl_run(cuda, c, 42 + (uint64_t)i, &R);
    ck_assert_msg(st == PL_OK, "%s: %s: %s", c->name, pl_strerror(st),
                  pl_last_error());
    ck_assert_msg(R.ok, "CUDA %s: %s", c->name, R.msg);
    ck_assert_msg(R.staging_peak <= (size_t)c->slots * c->bucket * 16,
                  "%s: staging peak %zu", c->name, R.staging_peak);
    ck_assert_int_eq(tl_run(cpu, c, 42 + (uint64_t)i, &Rc), PL_OK);
    ck_assert_msg(Rc.ok, "CPU %s: %s", c->name, Rc.msg);
    ck_assert_uint_eq(R.staging_peak, Rc.staging_peak);
    printf("cuda ok: %s (staging %zu B)\n", c->name, R.staging_peak);
  }
  pl_dev_destroy(cpu);
  pl_dev_destroy(cuda);
}
END_TEST

/* The resident buckets on the GPU: the same bits as the reference and as
 * the all-streamed step, the resident state 12 B per parameter. */
START_TEST(cuda_resident_equals_reference) {
  pl_dev *cuda, *cpu;
  if (!pl_check_cpu_and_gpu(&cpu, &cuda))
    return;
  const tl_case c[2] = {
      {"spanning, clip",
       4,
       {1, 1000, 77, 3333},
       500,
       2,
       1.0,
       0.01,
       PL_BF16,
       0,
       0,
       4,
       0,
       0},
      {"hybrid 0.5, many chunks",
       2,
       {100003, 70001},
       30000,
       2,
       1.0,
       0.0,
       PL_BF16,
       0,
       0.5,
       4,
       0,
       0},
  };
  for (int k = 0; k < 2; k++) {
    size_t total = 0;
    for (int i = 0; i < c[k].nt; i++)
      total += c[k].numel[i];
    const size_t nb = (total + c[k].bucket - 1) / c[k].bucket;
    const size_t res[3] = {total - c[k].bucket * (nb - 1),
                           total - c[k].bucket * (nb / 2), total};
    for (int r = 0; r < 3; r++) {
      tl_result R;
      pl_mem_reset_peak(cuda, PL_ARENA_DEVICE);
      pl_status st = tl_run_resident(cuda, &c[k], 5 + (uint64_t)k, res[r], &R);
      ck_assert_msg(st == PL_OK, "%s resident %zu: %s", c[k].name, res[r],
                    pl_last_error());
      ck_assert_msg(R.ok, "CUDA %s resident %zu: %s", c[k].name, res[r], R.msg);
      ck_assert_uint_eq(
          pl_mem_tag_peak(cuda, PL_ARENA_DEVICE, "optim_resident"),
          res[r] * 12);
      printf("cuda ok: %s, %zu of %zu resident\n", c[k].name, res[r], total);
    }
  }
  pl_dev_destroy(cpu);
  pl_dev_destroy(cuda);
}
END_TEST

int main(void) {
  const TTest *tests[] = {cuda_equals_reference, cuda_resident_equals_reference,
                          NULL};
  return pl_check_suite("adamw_cuda", 300, tests, NULL, NULL, CK_NOFORK, 0) ? 1
                                                                            : 0;
}
