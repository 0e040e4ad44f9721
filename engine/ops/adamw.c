/* adamw.c — the reference AdamW (adamw.h): hyperparameters, the per-step
 * float scalars, the fixed-order gradient sum of squares, the plain-C
 * reference update and step, and the two kernels of backend/adamw_kernels.h on
 * the stream's backend.
 *
 * The reference is deliberately the simplest possible loop over
 * pl__adamw_elem: every other implementation (SIMD, CPU backend, CUDA) is
 * tested bit for bit against it. */
#include "ops/adamw.h"

#include <math.h>
#include <stdlib.h>

#include "backend/adamw_kernels.h"
#include "core/internal.h"
#include "ops/adamw_internal.h"

const char *const pl_lr_decay_names[] = {"constant", "linear", "cosine", NULL};

pl_adamw_hparams pl_adamw_hparams_default(void) {
  pl_adamw_hparams hp = {.lr = 1e-3,
                         .beta1 = 0.9,
                         .beta2 = 0.999,
                         .eps = 1e-8,
                         .weight_decay = 0.01,
                         .max_grad_norm = 0.0,
                         .decay = PL_LR_CONSTANT};
  return hp;
}

double pl_adamw_lr_at(const pl_adamw_hparams *hp, int64_t t) {
  if (hp->warmup > 0 && t <= hp->warmup)
    return hp->lr * (double)t / (double)hp->warmup;
  if (hp->decay == PL_LR_CONSTANT || hp->steps <= hp->warmup)
    return hp->lr;
  double p = (double)(t - hp->warmup) / (double)(hp->steps - hp->warmup);
  p = p > 1 ? 1 : p;
  const double f = hp->decay == PL_LR_LINEAR
                       ? 1 - p
                       : 0.5 * (1 + cos(3.14159265358979323846 * p));
  return hp->lr_min + (hp->lr - hp->lr_min) * f;
}

/* The schedule's fields (pl_adamw_hparams_check). */
static pl_status schedule_check(const pl_adamw_hparams *hp) {
  if (hp->warmup < 0)
    return pl_set_error(PL_EINVAL, "adamw: warmup=%lld: must be >= 0 steps",
                        (long long)hp->warmup);
  if ((unsigned)hp->decay > PL_LR_COSINE)
    return pl_set_error(PL_EINVAL,
                        "adamw: decay=%d: must be constant, linear or cosine",
                        (int)hp->decay);
  if (hp->decay == PL_LR_CONSTANT)
    return PL_OK;
  if (hp->steps <= hp->warmup)
    return pl_set_error(PL_EINVAL,
                        "adamw: steps=%lld: a %s decay needs more steps than "
                        "the warm-up's %lld",
                        (long long)hp->steps, pl_lr_decay_names[hp->decay],
                        (long long)hp->warmup);
  if (!(hp->lr_min >= 0 && hp->lr_min <= hp->lr))
    return pl_set_error(PL_EINVAL, "adamw: lr_min=%g: must be in [0, lr=%g]",
                        hp->lr_min, hp->lr);
  return PL_OK;
}

pl_status pl_adamw_hparams_check(const pl_adamw_hparams *hp) {
  if (!hp)
    return pl_set_error(PL_EINVAL, "adamw: hparams is NULL");
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
  return schedule_check(hp);
}

pl_adamw_scalars pl_adamw_scalars_make(const pl_adamw_hparams *hp, int64_t t,
                                       float gscale) {
  PL_ASSERT(t >= 1);
  pl_adamw_scalars k;
  k.lr = (float)pl_adamw_lr_at(hp, t);
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
  if (!(hp->max_grad_norm > 0))
    return 1.0f;
  double norm = sqrt(sumsq);
  double c = hp->max_grad_norm / (norm + 1e-6);
  return c < 1.0 ? (float)c : 1.0f;
}

size_t pl_adamw_norm_nchunks(size_t n) {
  return pl__adamw_nchunks(n);
}

void pl_adamw_ref_sumsq_partials(const void *g, pl_dtype gdt, size_t n,
                                 double *partials) {
  pl__cpu_adamw_partials(g, gdt, n, partials);
}

double pl_adamw_sum_partials(const double *partials, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++)
    s = s + partials[i];
  return s;
}

void pl_adamw_ref_update(float *p, float *m, float *v, const void *g,
                         pl_dtype gdt, pl_bf16 *w, size_t n,
                         const pl_adamw_scalars *k) {
  int is_bf16 = gdt == PL_BF16;
  for (size_t i = 0; i < n; i++) {
    float pn =
        pl__adamw_elem(p[i], &m[i], &v[i], pl__adamw_load_g(g, is_bf16, i), k);
    p[i] = pn;
    if (w)
      w[i] = pl_f32_to_bf16(pn);
  }
}

double pl_adamw_ref_sumsq(int ntensors, const size_t *numel,
                          const void *const *g, pl_dtype gdt) {
  double total = 0.0;
  for (int t = 0; t < ntensors; t++) {
    size_t nc = pl_adamw_norm_nchunks(numel[t]);
    if (nc == 0)
      continue;
    double *part = (double *)calloc(nc, sizeof(double));
    PL_ASSERT(part);
    pl_adamw_ref_sumsq_partials(g[t], gdt, numel[t], part);
    for (size_t c = 0; c < nc; c++)
      total = total + part[c];
    free(part);
  }
  return total;
}

pl_status pl_adamw_gdt_check(pl_dtype gdt, const char *who) {
  if (gdt != PL_F32 && gdt != PL_BF16)
    return pl_set_error(PL_EINVAL, "%s: gradient dtype %s: must be f32 or bf16",
                        who, pl_dtype_name(gdt));
  return PL_OK;
}

pl_status pl_adamw_ref_step(const pl_adamw_hparams *hp, int64_t t, int ntensors,
                            const size_t *numel, float **p, float **m,
                            float **v, const void *const *g, pl_dtype gdt,
                            pl_bf16 **w, const double *global_sumsq,
                            float *gscale_out) {
  PL_TRY(pl_adamw_hparams_check(hp));
  if (t < 1)
    return pl_set_error(PL_EINVAL, "adamw: step t=%lld: must be >= 1",
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
    pl_adamw_ref_update(p[i], m[i], v[i], g[i], gdt, w ? w[i] : NULL, numel[i],
                        &k);
  if (gscale_out)
    *gscale_out = gscale;
  return PL_OK;
}

/* ---- the kernels on the stream's backend (adamw_internal.h) ---------------
 */

pl_status pl__adamw_update(pl_stream *s, float *p, float *m, float *v,
                           const void *g, pl_dtype gdt, pl_bf16 *w, size_t n,
                           const pl_adamw_scalars *k) {
  PL_TRY(pl_adamw_gdt_check(gdt, "adamw"));
  if (n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_adamw_update(s, p, m, v, g, gdt, w, n, k);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_adamw_update(s, p, m, v, g, gdt, w, n, k);
}

pl_status pl__adamw_sumsq(pl_stream *s, const void *g, pl_dtype gdt, size_t n,
                          double *partials) {
  PL_TRY(pl_adamw_gdt_check(gdt, "adamw"));
  if (n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_adamw_sumsq(s, g, gdt, n, partials);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_adamw_sumsq(s, g, gdt, n, partials);
}

pl_status pl_adamw_sumsq_dev(pl_stream *s, const void *g, pl_dtype gdt,
                             size_t n, double *partials) {
  return pl__adamw_sumsq(s, g, gdt, n, partials);
}

pl_status pl__adamw_bind_thread(pl_dev *dev) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(pl_dev_stream(dev)))
    return pl__cuda_adamw_bind_thread(dev);
#endif
  (void)dev;
  return PL_OK;
}
