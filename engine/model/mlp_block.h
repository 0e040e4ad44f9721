/* mlp_block.h — a dense transformer block without attention: RMSNorm →
 * SwiGLU MLP (H → 2·I → H) with a residual, forward and backward, on both
 * backends.  It is the layer the checkpoint runner (engine/train/ckpt.h) and
 * SCO are measured with (gpt-oss-20b-like: H = 2880); attention plugs into
 * the same runner later through pl_layer_ops.
 *
 *   n  = rmsnorm(x) · w_norm                  x, n: N×H
 *   gu = n · W_up                             W_up: H×2I, gu = [g | u]: N×2I
 *   a  = silu(g) ⊙ u                          a: N×I
 *   y  = x + a · W_down                       W_down: I×H, y: N×H
 *
 * Storage dtype `dt` (bf16 or f32) for activations and weights, fp32
 * accumulation in every GEMM and reduction; weight gradients are fp32 and
 * accumulate across calls (zero them with pl_mlp_block_zero_grad). */
#ifndef PLATEAU_MODEL_MLP_BLOCK_H
#define PLATEAU_MODEL_MLP_BLOCK_H

#include "plateau/plateau.h"

typedef struct pl_mlp_block {
  pl_dev *dev;
  int64_t H, I;
  pl_dtype dt;
  float eps;
  void *w_norm, *w_up, *w_down;    /* dt, tag "weights"          */
  float *g_norm, *g_up, *g_down;   /* f32, tag "grads"           */
} pl_mlp_block;

/* Weights drawn from the counter RNG (seed, layer) so every rank and backend
 * builds the same block.  Gradients zeroed. */
pl_status pl_mlp_block_init(pl_dev *dev, pl_mlp_block *b, int64_t H, int64_t I,
                            pl_dtype dt, uint64_t seed, int layer);
void pl_mlp_block_free(pl_mlp_block *b);
pl_status pl_mlp_block_zero_grad(pl_mlp_block *b, pl_stream *s);
/* Parameter count (weights only). */
int64_t pl_mlp_block_params(int64_t H, int64_t I);

/* y = block(x); intermediates are allocated (tag "activations") and freed
 * before return (stream-ordered).  x and y must not alias. */
pl_status pl_mlp_block_forward(pl_mlp_block *b, pl_stream *s, const void *x,
                               void *y, int64_t N);
/* Recompute from x, then dx = dL/dx given dy = dL/dy, and accumulate the
 * weight gradients.  dx may alias dy. */
pl_status pl_mlp_block_backward(pl_mlp_block *b, pl_stream *s, const void *x,
                                const void *dy, void *dx, int64_t N);

/* ---- kernels (CPU and CUDA twins with the same signature) -------------- */
/* n = x · rstd · w, rstd = 1/sqrt(mean_j x_j² + eps); x, w, n in dt. */
#define PL_RMSNORM_FWD_ARGS                                                    \
  pl_stream *s, const void *x, const void *w, void *n, int64_t N, int64_t H,   \
      float eps, pl_dtype dt
/* dx = dres + rmsnorm_bwd(x, w, dn) (dres may be NULL); dw += Σ_rows dn ⊙ x·rstd
 * (fp32, in a fixed order so results are deterministic).  scratch: f32 of
 * pl_rmsnorm_bwd_scratch(N, H) elements, or NULL on the CPU backend. */
#define PL_RMSNORM_BWD_ARGS                                                    \
  pl_stream *s, const void *x, const void *w, const void *dn,                  \
      const void *dres, void *dx, float *dw, float *scratch, int64_t N,        \
      int64_t H, float eps, pl_dtype dt
/* a = silu(g) ⊙ u for gu = [g | u] (N×2I) */
#define PL_SWIGLU_FWD_ARGS                                                     \
  pl_stream *s, const void *gu, void *a, int64_t N, int64_t I, pl_dtype dt
/* dgu = [da ⊙ u ⊙ silu'(g) | da ⊙ silu(g)] */
#define PL_SWIGLU_BWD_ARGS                                                     \
  pl_stream *s, const void *gu, const void *da, void *dgu, int64_t N,          \
      int64_t I, pl_dtype dt

size_t pl_rmsnorm_bwd_scratch(int64_t N, int64_t H);
pl_status pl_cpu_rmsnorm_fwd(PL_RMSNORM_FWD_ARGS);
pl_status pl_cpu_rmsnorm_bwd(PL_RMSNORM_BWD_ARGS);
pl_status pl_cpu_swiglu_fwd(PL_SWIGLU_FWD_ARGS);
pl_status pl_cpu_swiglu_bwd(PL_SWIGLU_BWD_ARGS);
#if PL_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
pl_status pl_cuda_rmsnorm_fwd(PL_RMSNORM_FWD_ARGS);
pl_status pl_cuda_rmsnorm_bwd(PL_RMSNORM_BWD_ARGS);
pl_status pl_cuda_swiglu_fwd(PL_SWIGLU_FWD_ARGS);
pl_status pl_cuda_swiglu_bwd(PL_SWIGLU_BWD_ARGS);
#ifdef __cplusplus
}
#endif
#endif

#endif
