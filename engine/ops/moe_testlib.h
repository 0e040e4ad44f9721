/* moe_testlib.h — comparisons shared by the MoE tests: bit for bit, or
 * within a normwise tolerance where a sum's order differs; each failure
 * names the rank, the first bad index and the largest error.  Included by
 * test files only (static functions). */
#ifndef PLATEAU_OPS_MOE_TESTLIB_H
#define PLATEAU_OPS_MOE_TESTLIB_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plateau/plateau.h"

static inline float mt_getv(const void *p, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? ((const float *)p)[i]
                      : pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
}

/* Bit-exact comparison on rank me; reports the first differing index. */
static inline void mt_expect_same(int me, const char *what, const void *a,
                                  const void *b, size_t n, pl_dtype dt) {
  size_t bytes = n * pl_dtype_size(dt);
  if (bytes == 0 || memcmp(a, b, bytes) == 0)
    return;
  double mx = 0;
  long first = -1;
  for (size_t i = 0; i < n; i++) {
    float x = mt_getv(a, dt, i), y = mt_getv(b, dt, i);
    if (memcmp((const char *)a + i * pl_dtype_size(dt),
               (const char *)b + i * pl_dtype_size(dt), pl_dtype_size(dt))) {
      if (first < 0)
        first = (long)i;
      double d = fabs((double)x - y);
      if (d > mx || isnan(d))
        mx = d;
    }
  }
  fprintf(stderr,
          "rank %d: %s not bit-exact: first bad index %ld, max abs err %.3g\n",
          me, what, first, mx);
  ck_abort_msg("rank %d: %s not bit-exact: first bad index %ld, max abs err "
               "%.3g",
               me, what, first, mx);
}

/* Normwise tolerance for sums whose order differs, on rank me. */
static inline void mt_expect_close(int me, const char *what, const float *a,
                                   const float *b, size_t n, double tol) {
  double scale = 1e-30, mx = 0;
  long first = -1;
  for (size_t i = 0; i < n; i++)
    scale = fmax(scale, fabs(b[i]));
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]) / scale;
    if (!(e <= tol) && first < 0)
      first = (long)i;
    if (e > mx || isnan(e))
      mx = e;
  }
  if (first >= 0)
    fprintf(stderr,
            "rank %d: %s: max normwise err %.3g > %.3g, first bad index %ld\n",
            me, what, mx, tol, first);
  ck_assert_msg(first < 0,
                "rank %d: %s: max normwise err %.3g > %.3g, first bad index "
                "%ld",
                me, what, mx, tol, first);
}

#endif
