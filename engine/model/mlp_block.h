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
  void *w_norm, *w_up, *w_down;  /* dt, tag "weights"          */
  float *g_norm, *g_up, *g_down; /* f32, tag "grads"           */
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

#endif
