/* attention_testutil.h — helpers shared by the attention tests (CPU and CUDA):
 * random inputs drawn on a device with pl_rng_fill (same bits on both
 * backends), host copies in double, and a normwise comparison that reports the
 * max abs / normwise error and the first bad index.  Header-only, static. */
#ifndef PLATEAU_MODEL_ATTENTION_TESTUTIL_H
#define PLATEAU_MODEL_ATTENTION_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/attention.h"
#include "plateau/host_device.h"

typedef struct attn_err {
  double max_abs, norm_err; /* max |got-ref|, and that over max |ref| */
  long first_bad; /* first index with |got-ref|/max|ref| > tol, or -1 */
} attn_err;

/* element i of a host array of dtype dt as double */
static inline double tu_get(const void *p, pl_dtype dt, size_t i) {
  if (dt == PL_F32)
    return ((const float *)p)[i];
  if (dt == PL_BF16)
    return pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
  return ((const double *)p)[i];
}

static inline double *tu_to_f64(const void *p, pl_dtype dt, size_t n) {
  double *r = (double *)malloc(sizeof(double) * (n ? n : 1));
  for (size_t i = 0; i < n; i++)
    r[i] = tu_get(p, dt, i);
  return r;
}

/* got (dtype dt, host) vs ref (double) */
static inline attn_err tu_compare(const void *got, pl_dtype dt,
                                  const double *ref, size_t n, double tol) {
  attn_err e = {0, 0, -1};
  /* normwise against the largest reference value, floored at 1e-3: a
   * gradient that vanishes analytically (S = 1: softmax ≡ 1, so dQ = dK = 0)
   * still carries rounding noise of the terms that cancel (~1e-6 here) */
  double sc = 1e-3;
  for (size_t i = 0; i < n; i++)
    sc = fmax(sc, fabs(ref[i]));
  for (size_t i = 0; i < n; i++) {
    double d = fabs(tu_get(got, dt, i) - ref[i]);
    if (!(d <= e.max_abs))
      e.max_abs = isnan(d) ? INFINITY : fmax(e.max_abs, d);
    if (!(d / sc <= tol) && e.first_bad < 0)
      e.first_bad = (long)i;
  }
  e.norm_err = e.max_abs / sc;
  return e;
}

/* Per-dtype normwise tolerances: outputs are rounded once to the storage
 * dtype; sums of S terms in fp32 add a little more. */
static inline double tu_tol(pl_dtype dt) {
  return dt == PL_F32 ? 2e-4 : 2.5e-2;
}

#endif
