/* mem_probe.c — the most bytes an arena can hold at once under a training
 * step's allocation pattern, measured by allocating through the tracked
 * allocator (the same pool, the same path as the engine's buffers).
 *
 * Why a pattern and not one cudaMemGetInfo: a step takes many large blocks,
 * frees them in another order than it took them, and then asks for its
 * largest buffer (the logits, the dispatch buffers) into the holes; a pool
 * that caches freed blocks may then hold less than the free memory a driver
 * reports.  The planner reads the result (`plateau bench calib`, variant
 * alloc) as the device's allocatable ceiling. */
#include <stdlib.h>

#include "core/internal.h"

#define PROBE_MAX_BLOCKS 8192

/* Take blocks from `size` halving down to `grain` until each size is
 * refused; blocks[*n..] the new ones.  PL_OK, or the first error other than
 * out of memory. */
static pl_status fill(pl_dev *dev, pl_arena a, size_t size, size_t grain,
                      void **blocks, int *n) {
  for (size_t b = size; b >= grain && b > 0; b /= 2) {
    for (;;) {
      if (*n >= PROBE_MAX_BLOCKS)
        return PL_OK;
      pl_status st = pl_alloc(dev, a, b, "probe", &blocks[*n]);
      if (st == PL_ENOMEM)
        break;
      PL_TRY(st);
      (*n)++;
    }
  }
  return PL_OK;
}

static size_t in_use(pl_dev *dev, pl_arena a) {
  pl_mem_stats s;
  return pl_mem_stats_get(dev, a, &s) == PL_OK ? s.current : 0;
}

pl_status pl_mem_probe_ceiling(pl_dev *dev, pl_arena a, size_t big,
                               size_t grain, size_t *out) {
  *out = 0;
  if (grain == 0 || big < grain)
    return pl_set_error(PL_EINVAL,
                        "memory probe: block %zu and grain %zu bytes: the "
                        "grain must be > 0 and at most the block",
                        big, grain);
  pl_mem_stats s0;
  PL_TRY(pl_mem_stats_get(dev, a, &s0));
  if ((dev->backend == PL_BACKEND_CPU || a == PL_ARENA_HOST) && s0.limit == 0)
    return pl_set_error(PL_EINVAL,
                        "memory probe of host memory (the CPU backend or the "
                        "pinned arena) without a limit: set one with "
                        "pl_mem_set_limit, the probe would take all of it");
  void **blocks = calloc(PROBE_MAX_BLOCKS, sizeof *blocks);
  if (!blocks)
    return pl_set_error(PL_ENOMEM, "memory probe: out of host memory");
  int n = 0, nbig = 0;
  size_t first = 0, second = 0, large = 0;
  void *lb = NULL;
  pl_status st = PL_OK;
  /* 1. the forward: large blocks until refused, then smaller ones */
  PL_TRY_GOTO(st, done, fill(dev, a, big, big, blocks, &n));
  nbig = n;
  PL_TRY_GOTO(st, done, fill(dev, a, big / 2, grain, blocks, &n));
  first = in_use(dev, a);
  /* 2. the backward frees every other large block, newest first, and the
   *    small ones: holes of one block each */
  for (int i = n - 1; i >= nbig; i--)
    pl_free(dev, blocks[i]), blocks[i] = NULL;
  for (int i = nbig - 1; i >= 0; i -= 2)
    pl_free(dev, blocks[i]), blocks[i] = NULL;
  n = nbig;
  PL_TRY_GOTO(st, done, pl_dev_sync(dev));
  /* 3. the largest buffer, as large as the holes together (no hole holds
   *    it), halved until taken */
  size_t want = (first - in_use(dev, a)) / grain * grain;
  for (; want >= big; want = want / 2 / grain * grain) {
    pl_status e = pl_alloc(dev, a, want, "probe", &lb);
    if (e == PL_OK) {
      large = want;
      break;
    }
    if (e != PL_ENOMEM)
      PL_TRY_GOTO(st, done, e);
  }
  /* 4. the rest of the step's blocks into what is left */
  PL_TRY_GOTO(st, done, fill(dev, a, big, grain, blocks, &n));
  second = in_use(dev, a);
done:
  pl_free(dev, lb);
  for (int i = 0; i < n; i++)
    pl_free(dev, blocks[i]);
  free(blocks);
  PL_TRY(st);
  PL_TRY(pl_dev_sync(dev));
  if (large == 0)
    return pl_set_error(PL_ENOMEM,
                        "memory probe: after freeing half of %zu bytes no "
                        "block of %zu bytes or more could be taken again",
                        first, big);
  *out = first < second ? first : second;
  return PL_OK;
}
