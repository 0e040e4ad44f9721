/* test_cpu_adamw_cuda.c — the classic offloaded step on the CUDA backend
 * (gradients device→host, SIMD update on the host, bf16 weights host→device)
 * equals the reference AdamW bit for bit over several steps with clipping,
 * through full host copies and through rings of 1 and 3 slots (the copies
 * of a slot ordered by events across pieces and steps).
 * Without a GPU it prints "skipped: no CUDA device" and passes.  CK_NOFORK:
 * the CUDA context is never created before a fork. */
#include <check.h>

#include "core/check_run.h"
#include "cpu_adamw_testlib.h"

START_TEST(offload_on_cuda_equals_reference) {
  pl_dev *cuda, *cpu;
  if (!pl_check_cpu_and_gpu(&cpu, &cuda))
    return;
  static const int rings[] = {0, 1, 3};
  for (int r = 0; r < 3; r++) {
    const tl_case c = {.name = "offload baseline",
                       .nt = 3,
                       .numel = {1001, 17, 5000},
                       .bucket = 600,
                       .slots = rings[r],
                       .max_norm = 1.0,
                       .wd = 0.01,
                       .gdt = PL_BF16,
                       .steps = 4,
                       .opt = &tl_offload};
    tl_result R;
    pl_status st = tl_run(cuda, &c, 42, &R);
    ck_assert_msg(st == PL_OK, "%s: %s: %s", c.name, pl_strerror(st),
                  pl_last_error());
    ck_assert_msg(R.ok, "CUDA %s, slots %d: %s", c.name, rings[r], R.msg);
    ck_assert(R.clipped_steps > 0);
    printf("cuda ok: %s, slots %d\n", c.name, rings[r]);
  }
  pl_dev_destroy(cpu);
  pl_dev_destroy(cuda);
}
END_TEST

int main(void) {
  const TTest *tests[] = {offload_on_cuda_equals_reference, NULL};
  return pl_check_suite("cpu_adamw_cuda", 300, tests, NULL, NULL, CK_NOFORK, 0)
             ? 1
             : 0;
}
