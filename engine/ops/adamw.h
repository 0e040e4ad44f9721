/* adamw.h — the reference AdamW every optimizer implementation must equal.
 *
 * One operation order, used by the reference, the SIMD CPU kernel
 * (backend/cpu/adamw_simd.c), the CPU-backend kernel (backend/cpu/adamw_cpu.c)
 * and the CUDA kernel (backend/cuda/adamw.cu) through one element function,
 * pl__adamw_elem in backend/adamw_kernels.h (with pl_adamw_scalars and the
 * norm's chunk constants).  Per parameter element, fp32, each step a separately
 * rounded IEEE operation (no FMA contraction anywhere):
 *
 *   g    = g_raw · gscale                     (gscale = clip factor, 1 if off)
 *   m    = b1·m + (1−b1)·g                    (mul, mul, add)
 *   v    = b2·v + (1−b2)·(g·g)                (mul, mul, mul, add)
 *   mhat = m / bc1,  vhat = v / bc2           (bc1 = 1−b1^t, bc2 = 1−b2^t)
 *   u    = mhat / (sqrt(vhat) + eps) + wd·p   (sqrt, add, div, mul, add)
 *   p    = p − lr·u                           (mul, sub; decoupled decay)
 *   w    = bf16(p)                            (round to nearest even)
 *
 * The per-step scalars (1−b1, 1−b2, bc1, bc2, gscale) are computed once on the
 * host in double and rounded to float (pl_adamw_scalars_make), then passed to
 * every implementation, so all of them see identical float operands.
 *
 * Global gradient-norm clipping (non-predictive: computed from all gradients
 * before any parameter is updated).  The sum of squares has ONE fixed order:
 * each tensor is cut into chunks of PL_ADAMW_NORM_CHUNK elements; inside a
 * chunk, element i goes to lane i mod 32 and each lane sums its elements in
 * index order in double (g·g is exact in double); the 32 lanes are combined by
 * the tree  lane[l] += lane[l+off], off = 16, 8, 4, 2, 1;  chunk partials are
 * summed in order (tensors in parameter order, chunks in index order); ranks'
 * sums are summed in rank order.  norm = sqrt(sum);
 * gscale = (float)min(1, max_norm / (norm + 1e-6)) (PyTorch's clip_grad_norm_
 * rule).  The CUDA kernel computes the same chunk partials (one warp per
 * chunk, the same lanes and tree), so the norm, hence gscale, is bit-identical
 * on every backend. */
#ifndef PLATEAU_OPS_ADAMW_H
#define PLATEAU_OPS_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "plateau/host_device.h"
#include "plateau/optypes.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The learning rate's schedule after its warm-up. */
typedef enum pl_lr_decay {
  PL_LR_CONSTANT, /* lr from the end of the warm-up on                 */
  PL_LR_LINEAR,   /* straight down to lr_min at step `steps`          */
  PL_LR_COSINE,   /* half a cosine down to lr_min at step `steps`     */
} pl_lr_decay;

/* "constant", "linear", "cosine", NULL-terminated (pl_lr_decay order). */
extern const char *const pl_lr_decay_names[];

typedef struct pl_adamw_hparams {
  double lr;            /* > 0: the peak learning rate                  */
  double beta1, beta2;  /* in [0, 1)                                    */
  double eps;           /* > 0                                          */
  double weight_decay;  /* >= 0 (decoupled)                             */
  double max_grad_norm; /* > 0: clip the global norm to it; <= 0: off  */
  /* the schedule (pl_adamw_lr_at): a linear warm-up over the first
   * `warmup` steps, then `decay` down to lr_min at step `steps` */
  int64_t warmup;    /* >= 0 (0: none)                                   */
  pl_lr_decay decay; /* PL_LR_CONSTANT: steps and lr_min unused         */
  int64_t steps;     /* decay: the step lr_min is reached (> warmup)     */
  double lr_min;     /* decay: in [0, lr]                                */
} pl_adamw_hparams;

/* lr 1e-3 constant, betas (0.9, 0.999), eps 1e-8, wd 0.01, no clipping. */
pl_adamw_hparams pl_adamw_hparams_default(void);
/* The learning rate of step t (>= 1):
 *   t <= warmup:             lr · t / warmup
 *   then, with p = (t − warmup) / (steps − warmup) capped at 1,
 *   constant:                lr
 *   linear:                  lr_min + (lr − lr_min) · (1 − p)
 *   cosine:                  lr_min + (lr − lr_min) · (1 + cos(π·p)) / 2
 * (PyTorch: LambdaLR with the same factor of step t = scheduler step + 1). */
double pl_adamw_lr_at(const pl_adamw_hparams *hp, int64_t t);
/* PL_EINVAL naming the bad field. */
pl_status pl_adamw_hparams_check(const pl_adamw_hparams *hp);
/* PL_EINVAL unless the gradient dtype gdt is f32 or bf16 (who names the
 * caller in the message). */
pl_status pl_adamw_gdt_check(pl_dtype gdt, const char *who);
/* Scalars of step t (>= 1) with clip factor gscale (1.0f when not clipping);
 * lr is pl_adamw_lr_at(hp, t). */
pl_adamw_scalars pl_adamw_scalars_make(const pl_adamw_hparams *hp, int64_t t,
                                       float gscale);
/* gscale from the global sum of squares (clipping on), or 1.0f (off). */
float pl_adamw_clip_scale(const pl_adamw_hparams *hp, double sumsq);

/* ---- the fixed-order sum of squares ---------------------------------------
 */
/* Number of chunk partials of a tensor of n elements: ceil(n / CHUNK). */
size_t pl_adamw_norm_nchunks(size_t n);
/* partials[c] for c < nchunks(n), in the fixed order above (host memory;
 * g is f32 or bf16).  Chunks are independent: OpenMP threads over chunks do
 * not change a bit. */
void pl_adamw_ref_sumsq_partials(const void *g, pl_dtype gdt, size_t n,
                                 double *partials);
/* The same partials of n elements of g in the stream's device memory, on
 * its backend (the CUDA kernel computes the same chunks, lanes and tree: the
 * same bits), enqueued on s; partials is device memory too. */
pl_status pl_adamw_sumsq_dev(pl_stream *s, const void *g, pl_dtype gdt,
                             size_t n, double *partials);
/* Sum of partials in index order (the chunk order of the norm). */
double pl_adamw_sum_partials(const double *partials, size_t n);

/* ---- the reference ------------------------------------------------------- */
/* One element-wise update of n elements (host memory), the order above:
 * p, m, v (n, f32) updated in place, g (n, f32 or bf16) read, w (n, bf16)
 * written (may be NULL: no refresh).  Single-threaded plain C. */
void pl_adamw_ref_update(float *p, float *m, float *v, const void *g,
                         pl_dtype gdt, pl_bf16 *w, size_t n,
                         const pl_adamw_scalars *k);

/* A whole reference step t over ntensors tensors in parameter order (host
 * memory): norm (when clipping) from all gradients first, then the update.
 * global_sumsq: NULL = this process's tensors are all the parameters;
 * otherwise the global sum (ranks' sums added in rank order) to clip with.
 * *gscale_out (may be NULL) gets the factor used. */
pl_status pl_adamw_ref_step(const pl_adamw_hparams *hp, int64_t t, int ntensors,
                            const size_t *numel, float **p, float **m,
                            float **v, const void *const *g, pl_dtype gdt,
                            pl_bf16 **w, const double *global_sumsq,
                            float *gscale_out);
/* This process's fixed-order sum of squares over its tensors. */
double pl_adamw_ref_sumsq(int ntensors, const size_t *numel,
                          const void *const *g, pl_dtype gdt);

#ifdef __cplusplus
}
#endif
#endif
