/* test_peak_cuda.c — a peak the plan calls fitting can be had on this GPU.
 *
 * The planner calls a point fitting when its device peak is within the
 * usable HBM (the device's memory less hbm_reserve, or the ceiling `plateau
 * bench calib` measured).  Here the device's own memory is taken with the
 * planner's default reserve and a step's allocation pattern is replayed up
 * to exactly that usable figure: the forward's checkpoints (1.5 GiB each)
 * with a 3 GiB transient taken and freed between them, the backward's
 * release of every other checkpoint newest first, gradients of 2 GiB
 * (larger than the holes) until only the logits fit, the head's logits —
 * one block as large as a fifth of the usable memory, asked for last as
 * the baseline's head does — and blocks of 1 GiB and less into the holes
 * up to the usable byte.  Every allocation
 * must succeed (the pool's freed blocks must not keep the logits out).  The
 * allocatable ceiling under the probe's pattern (pl_mem_probe_ceiling) is
 * printed and must reach the usable figure too.  Without a GPU it prints
 * "skipped: no CUDA device" and passes.  CK_NOFORK: the CUDA context is
 * never created before a fork. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/check_run.h"
#include "plan/plan.h"

#define GIB ((size_t)1 << 30)
#define MAXB 4096

static size_t in_use(pl_dev *dev) {
  pl_mem_stats s;
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s), PL_OK);
  return s.current;
}

static void take(pl_dev *dev, size_t bytes, const char *tag, void **out) {
  pl_status st = pl_alloc(dev, PL_ARENA_DEVICE, bytes, tag, out);
  ck_assert_msg(st == PL_OK, "%s of %zu bytes with %zu in use: %s", tag, bytes,
                in_use(dev), pl_last_error());
}

START_TEST(plan_peak_pattern_fits) {
  if (pl_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return;
  }
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CUDA, -1, &dev), PL_OK);
  pl_dev_info info;
  ck_assert_int_eq(pl_dev_info_get(dev, &info), PL_OK);
  const pl_plan_machine mc = pl_plan_machine_default();
  const size_t usable = info.total_bytes - (size_t)mc.hbm_reserve;
  const size_t logits = usable / 5 / (64u << 20) * (64u << 20);
  printf("# %s: %zu bytes, usable to the plan %zu (reserve %.0f)\n", info.name,
         info.total_bytes, usable, mc.hbm_reserve);
  void **b = calloc(MAXB, sizeof *b);
  int n = 0;
  /* the forward: checkpoints until only the logits and a margin are left */
  while (in_use(dev) + 3 * GIB + GIB / 2 + logits + 4 * GIB < usable &&
         n < MAXB) {
    void *tmp;
    take(dev, 3 * GIB, "transient", &tmp);
    take(dev, GIB + GIB / 2, "checkpoint", &b[n++]);
    pl_free(dev, tmp);
  }
  /* the backward frees every other checkpoint, newest first */
  for (int i = n - 1; i >= 0; i -= 2)
    pl_free(dev, b[i]), b[i] = NULL;
  ck_assert_int_eq(pl_dev_sync(dev), PL_OK);
  /* gradients of 2 GiB, larger than the holes, until only the logits fit,
   * then the logits: both need memory the holes hold */
  while (in_use(dev) + 2 * GIB + logits <= usable && n < MAXB)
    take(dev, 2 * GIB, "grads", &b[n++]);
  void *lg;
  take(dev, logits, "logits", &lg);
  /* the rest up to the usable byte */
  for (size_t sz = GIB; sz >= 2u << 20 && n < MAXB; sz /= 2)
    while (in_use(dev) + sz <= usable && n < MAXB)
      take(dev, sz, "grads", &b[n++]);
  const size_t peak = in_use(dev);
  printf("# the plan's pattern: %zu bytes in use at the peak (logits %zu)\n",
         peak, logits);
  ck_assert_uint_ge(peak + (2u << 20), usable);
  pl_free(dev, lg);
  for (int i = 0; i < n; i++)
    pl_free(dev, b[i]);
  free(b);
  size_t ceiling = 0;
  ck_assert_int_eq(
      pl_mem_probe_ceiling(dev, PL_ARENA_DEVICE, GIB, 64u << 20, &ceiling),
      PL_OK);
  printf("# allocatable ceiling (probe): %zu bytes, %.2f GiB (%.2f GiB held "
         "back)\n",
         ceiling, (double)ceiling / GIB,
         (double)(info.total_bytes - ceiling) / GIB);
  ck_assert_msg(ceiling >= usable,
                "the probe reached %zu bytes, below the plan's usable %zu: "
                "raise hbm_reserve or plan from the calib ceiling",
                ceiling, usable);
  pl_dev_destroy(dev);
}
END_TEST

int main(void) {
  const TTest *tests[] = {plan_peak_pattern_fits, NULL};
  return pl_check_suite("peak_cuda", 600, tests, NULL, NULL, CK_NOFORK, 0) ? 1
                                                                           : 0;
}
