/* layer.h — the decoder layer: RMSNorm → attention (QKV projection, RoPE,
 * causal GQA flash attention, Ulysses over the sequence-parallel group when
 * D > 1) → output projection + residual → the FFN slot (the layer's own
 * model/mlp_block.h: RMSNorm → dense SwiGLU → residual; or any pl_ffn_ops,
 * e.g. the MoE FFN of model/moe_ffn.h), forward and backward (the checkpoint
 * runner runs it as pl_decoder_layer_ops, train/ckpt.h).
 *
 *   h  = rmsnorm(x)·w_n                       x, h: N×H (this rank's tokens)
 *   q  = rope(h·W_q), k = rope(h·W_k), v = h·W_v   W_qkv = [W_q|W_k|W_v]:
 *                                                  H × (n_q + 2·n_kv)·d
 *   o  = attention(q, k, v)                   N × n_q·d (Ulysses if D > 1)
 *   y1 = x + o·W_o                            W_o: n_q·d × H
 *   y  = ffn(y1)                              (y1 + FFN(rmsnorm(y1)))
 *
 * Positions: rank r of a D-group holds tokens [r·N, (r+1)·N) of the sequence,
 * so RoPE uses pos0 = r·N.  Weight gradients (f32, tag "grads") accumulate
 * over calls and are this rank's partial sums: the trainer reduces them over
 * the group (ZeRO-3 reduce-scatter).  Backward recomputes everything from x;
 * forward frees its intermediates (tag "activations"; the attention workspace
 * and Ulysses buffers are tag "attention"). */
#ifndef PLATEAU_MODEL_LAYER_H
#define PLATEAU_MODEL_LAYER_H

#include "model/attention.h"
#include "model/mlp_block.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_layer_cfg {
  int64_t H, I;      /* hidden, dense FFN width                  */
  int n_q, n_kv, d;  /* heads and head dim                       */
  double rope_theta; /* 0 = 10000                                */
  pl_dtype dt;       /* f32 or bf16 (CUDA attention: bf16 only)  */
  pl_attn_kernels attn_kernels; /* attention kernel choice ({0}: AUTO) */
} pl_layer_cfg;

/* The FFN slot: y = x + ffn(x) (the block owns its RMSNorm and residual,
 * as pl_mlp_block does), forward and backward with the pl_mlp_block
 * contract (backward recomputes from x and accumulates weight grads; dx and
 * dy distinct).  NULL in pl_layer: the layer's own dense MLP block. */
typedef struct pl_ffn_ops {
  pl_status (*forward)(void *ffn, pl_stream *s, const void *x, void *y, int64_t N);
  pl_status (*backward)(void *ffn, pl_stream *s, const void *x, const void *dy, void *dx,
                        int64_t N);
} pl_ffn_ops;

typedef struct pl_layer {
  pl_dev *dev;
  pl_comm *sp; /* Ulysses group (borrowed); NULL = D = 1 */
  pl_layer_cfg cfg;
  float eps;
  void *w_n, *w_qkv, *w_o;    /* dt, "weights" */
  float *g_n, *g_qkv, *g_o;   /* f32, "grads"  */
  pl_mlp_block mlp;
  const pl_ffn_ops *ffn;      /* NULL: mlp; else ffn->*(ffn_ctx, ...) */
  void *ffn_ctx;
  int views;                  /* 1: w_* and g_* are the caller's (never freed) */
} pl_layer;

/* Weights from the counter RNG (seed, index): identical on every rank and
 * backend.  Refuses heads not divisible by the group size. */
pl_status pl_layer_init(pl_dev *dev, pl_comm *sp, pl_layer *l, const pl_layer_cfg *cfg,
                        uint64_t seed, int index);
/* The attention half of a layer whose weights and gradients live elsewhere
 * (ZeRO-3 gathered units): checks cfg (the same messages as pl_layer_init),
 * allocates nothing; the caller points w_n, w_qkv, w_o (dt) and g_n, g_qkv,
 * g_o (f32, accumulated) at its buffers before each call and sets the FFN
 * slot.  pl_layer_free only clears it. */
pl_status pl_layer_init_views(pl_dev *dev, pl_comm *sp, pl_layer *l, const pl_layer_cfg *cfg,
                              const pl_ffn_ops *ffn, void *ffn_ctx);
void pl_layer_free(pl_layer *l);
pl_status pl_layer_zero_grad(pl_layer *l, pl_stream *s);
int64_t pl_layer_params(const pl_layer_cfg *cfg);

/* y = layer(x), N tokens on this rank (x, y: N×H, distinct). */
pl_status pl_layer_forward(pl_layer *l, pl_stream *s, const void *x, void *y, int64_t N);
/* Recompute from x; dx from dy (distinct buffers); accumulate weight grads. */
pl_status pl_layer_backward(pl_layer *l, pl_stream *s, const void *x, const void *dy, void *dx,
                            int64_t N);

#ifdef __cplusplus
}
#endif
#endif
