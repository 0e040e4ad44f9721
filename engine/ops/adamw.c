/* adamw.c — the reference AdamW (adamw.h): hyperparameters, the per-step
 * float scalars, the fixed-order gradient sum of squares, the plain-C
 * reference update and step, and the backend dispatch of the two kernels.
 *
 * The reference is deliberately the simplest possible loop over
 * pl_adamw_elem: every other implementation (SIMD, CPU backend, CUDA) is tested
 * bit for bit against it. */
#include "ops/adamw.h"

#include <math.h>
#include <stdlib.h>

#include "core/internal.h"
#include "ops/adamw_kernels.h"

pl_adamw_hparams pl_adamw_hparams_default(void) {
  pl_adamw_hparams hp = {1e-3, 0.9, 0.999, 1e-8, 0.01, 0.0};
  return hp;
}

pl_status pl_adamw_hparams_check(const pl_adamw_hparams *hp) {
  if (!hp) return pl_set_error(PL_EINVAL, "adamw: hparams is NULL");
  if (!(hp->lr > 0) || !isfinite(hp->lr))
    return pl_set_error(PL_EINVAL, "adamw: lr=%g: must be finite and > 0",
                        hp->lr);
  if (!(hp->beta1 >= 0 && hp->beta1 < 1))
    return pl_set_error(PL_EINVAL, "adamw: beta1=%g: must be in [0, 1)",
                        hp->beta1);
  if (!(hp->beta2 >= 0 && hp->beta2 < 1))
    return pl_set_error(PL_EINVAL, "adamw: beta2=%g: must be in [0, 1)",
                        hp->beta2);
  if (!(hp->eps > 0) || !isfinite(hp->eps))
    return pl_set_error(PL_EINVAL, "adamw: eps=%g: must be finite and > 0",
                        hp->eps);
  if (!(hp->weight_decay >= 0) || !isfinite(hp->weight_decay))
    return pl_set_error(PL_EINVAL,
                        "adamw: weight_decay=%g: must be finite and >= 0",
                        hp->weight_decay);
  if (isnan(hp->max_grad_norm))
    return pl_set_error(PL_EINVAL,
                        "adamw: max_grad_norm=nan: must be > 0 (clip) or <= 0 "
                        "(off)");
  return PL_OK;
}

pl_adamw_scalars pl_adamw_scalars_make(const pl_adamw_hparams *hp, int64_t t,
                                       float gscale) {
  PL_ASSERT(t >= 1);
  pl_adamw_scalars k;
  k.lr = (float)hp->lr;
  k.b1 = (float)hp->beta1;
  k.omb1 = (float)(1.0 - hp->beta1);
  k.b2 = (float)hp->beta2;
  k.omb2 = (float)(1.0 - hp->beta2);
  k.bc1 = (float)(1.0 - pow(hp->beta1, (double)t));
  k.bc2 = (float)(1.0 - pow(hp->beta2, (double)t));
  k.eps = (float)hp->eps;
  k.wd = (float)hp->weight_decay;
  k.gscale = gscale;
  return k;
}

float pl_adamw_clip_scale(const pl_adamw_hparams *hp, double sumsq) {
  if (!(hp->max_grad_norm > 0)) return 1.0f;
  double norm = sqrt(sumsq);
  double c = hp->max_grad_norm / (norm + 1e-6);
  return c < 1.0 ? (float)c : 1.0f;
}

size_t pl_adamw_norm_nchunks(size_t n) {
  return (n + PL_ADAMW_NORM_CHUNK - 1) / PL_ADAMW_NORM_CHUNK;
}

/* One chunk [lo, hi): lanes by index mod 32, each in index order, then the
 * fixed tree (adamw.h).  The 32 lane chains are interleaved (independent
 * accumulators, each still adding its own elements in index order), which
 * changes no bit and lets the compiler overlap them. */
static double chunk_sumsq(const void *g, int is_bf16, size_t lo, size_t hi) {
  double lane[PL_ADAMW_NORM_LANES] = {0};
  size_t i = lo;
  for (; i + PL_ADAMW_NORM_LANES <= hi; i += PL_ADAMW_NORM_LANES)
    for (int l = 0; l < PL_ADAMW_NORM_LANES; l++) {
      double x = (double)pl_adamw_load_g(g, is_bf16, i + (size_t)l);
      lane[l] = lane[l] + x * x;
    }
  for (int l = 0; i < hi; i++, l++) {
    double x = (double)pl_adamw_load_g(g, is_bf16, i);
    lane[l] = lane[l] + x * x;
  }
  for (int off = PL_ADAMW_NORM_LANES / 2; off >= 1; off /= 2)
    for (int l = 0; l < off; l++) lane[l] = lane[l] + lane[l + off];
  return lane[0];
}

void pl_adamw_ref_sumsq_partials(const void *g, pl_dtype gdt, size_t n,
                                 double *partials) {
  int is_bf16 = gdt == PL_BF16;
  size_t nc = pl_adamw_norm_nchunks(n);
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < nc; c++) {
    size_t lo = c * PL_ADAMW_NORM_CHUNK;
    size_t hi = lo + PL_ADAMW_NORM_CHUNK < n ? lo + PL_ADAMW_NORM_CHUNK : n;
    partials[c] = chunk_sumsq(g, is_bf16, lo, hi);
  }
}

double pl_adamw_sum_partials(const double *partials, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s = s + partials[i];
  return s;
}

void pl_adamw_ref_update(float *p, float *m, float *v, const void *g,
                         pl_dtype gdt, pl_bf16 *w, size_t n,
                         const pl_adamw_scalars *k) {
  int is_bf16 = gdt == PL_BF16;
  for (size_t i = 0; i < n; i++) {
    float pn = pl_adamw_elem(p[i], &m[i], &v[i], pl_adamw_load_g(g, is_bf16, i),
                             k);
    p[i] = pn;
    if (w) w[i] = pl_f32_to_bf16(pn);
  }
}

double pl_adamw_ref_sumsq(int ntensors, const size_t *numel,
                          const void *const *g, pl_dtype gdt) {
  double total = 0.0;
  for (int t = 0; t < ntensors; t++) {
    size_t nc = pl_adamw_norm_nchunks(numel[t]);
    if (nc == 0) continue;
    double *part = (double *)calloc(nc, sizeof(double));
    PL_ASSERT(part);
    pl_adamw_ref_sumsq_partials(g[t], gdt, numel[t], part);
    for (size_t c = 0; c < nc; c++) total = total + part[c];
    free(part);
  }
  return total;
}

pl_status pl_adamw_gdt_check(pl_dtype gdt, const char *who) {
  if (gdt != PL_F32 && gdt != PL_BF16)
    return pl_set_error(PL_EINVAL, "%s: gradient dtype %s: must be f32 or bf16", who,
                        pl_dtype_name(gdt));
  return PL_OK;
}

pl_status pl_adamw_ref_step(const pl_adamw_hparams *hp, int64_t t,
                            int ntensors, const size_t *numel, float **p,
                            float **m, float **v, const void *const *g,
                            pl_dtype gdt, pl_bf16 **w,
                            const double *global_sumsq, float *gscale_out) {
  PL_TRY(pl_adamw_hparams_check(hp));
  if (t < 1) return pl_set_error(PL_EINVAL, "adamw: step t=%lld: must be >= 1",
                                 (long long)t);
  PL_TRY(pl_adamw_gdt_check(gdt, "adamw"));
  float gscale = 1.0f;
  if (hp->max_grad_norm > 0) {
    double ss = global_sumsq ? *global_sumsq
                             : pl_adamw_ref_sumsq(ntensors, numel, g, gdt);
    gscale = pl_adamw_clip_scale(hp, ss);
  }
  pl_adamw_scalars k = pl_adamw_scalars_make(hp, t, gscale);
  for (int i = 0; i < ntensors; i++)
    pl_adamw_ref_update(p[i], m[i], v[i], g[i], gdt, w ? w[i] : NULL,
                        numel[i], &k);
  if (gscale_out) *gscale_out = gscale;
  return PL_OK;
}

/* ---- backend dispatch ----------------------------------------------------- */

pl_status pl_adamw_update(pl_stream *s, float *p, float *m, float *v,
                          const void *g, pl_dtype gdt, pl_bf16 *w, size_t n,
                          const pl_adamw_scalars *k) {
  PL_TRY(pl_adamw_gdt_check(gdt, "adamw"));
  if (n == 0) return PL_OK;
  if (pl_stream_backend(s) == PL_BACKEND_CUDA) {
#if PL_HAVE_CUDA
    return pl_cuda_adamw_update(s, p, m, v, g, gdt, w, n, k);
#else
    return pl_set_error(PL_EUNSUPPORTED, "adamw: CUDA backend not built");
#endif
  }
  return pl_cpu_adamw_update(s, p, m, v, g, gdt, w, n, k);
}

pl_status pl_adamw_sumsq(pl_stream *s, const void *g, pl_dtype gdt, size_t n,
                         double *partials) {
  PL_TRY(pl_adamw_gdt_check(gdt, "adamw"));
  if (n == 0) return PL_OK;
  if (pl_stream_backend(s) == PL_BACKEND_CUDA) {
#if PL_HAVE_CUDA
    return pl_cuda_adamw_sumsq(s, g, gdt, n, partials);
#else
    return pl_set_error(PL_EUNSUPPORTED, "adamw: CUDA backend not built");
#endif
  }
  return pl_cpu_adamw_sumsq(s, g, gdt, n, partials);
}

pl_status pl_adamw_bind_thread(pl_dev *dev) {
#if PL_HAVE_CUDA
  if (pl_dev_backend(dev) == PL_BACKEND_CUDA)
    return pl_cuda_adamw_bind_thread(dev);
#else
  (void)dev;
#endif
  return PL_OK;
}
