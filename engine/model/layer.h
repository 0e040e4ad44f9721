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
 * and Ulysses buffers are tag "attention") — unless the layer keeps some of
 * them for its backward (pl_layer_keep below, tag "kept").
 *
 * Kept activations.  keep = ATTN: the forward keeps the attention output o
 * and its log-sum-exp, and the backward recomputes h, q, k, v and y1 (norm,
 * QKV, RoPE, the O projection) but never the attention forward (nor, with
 * D > 1, its Ulysses exchanges); keep = ALL: the forward keeps h, q, k, v,
 * o, lse and y1, and the backward recomputes nothing before the FFN slot
 * (whose own backward recomputes from y1, as its contract says).  Exact:
 * the forward is deterministic (the same kernels on the same inputs), so the
 * kept values are the bits the recompute would produce; keep_verify
 * recomputes anyway and compares bit for bit (PL_ERUNTIME on a difference:
 * the tests' assertion of determinism, on either backend).  A backward after
 * a keeping forward must get the same x (the checkpoint runner's contract);
 * a second forward first frees what the first kept. */
#ifndef PLATEAU_MODEL_LAYER_H
#define PLATEAU_MODEL_LAYER_H

#include "model/attention.h"
#include "model/mlp_block.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_layer_cfg {
  int64_t H, I;                 /* hidden, dense FFN width                  */
  int n_q, n_kv, d;             /* heads and head dim                       */
  double rope_theta;            /* 0 = 10000                                */
  pl_dtype dt;                  /* f32 or bf16 (CUDA attention: bf16 only)  */
  pl_attn_kernels attn_kernels; /* attention kernel choice ({0}: AUTO) */
} pl_layer_cfg;

/* The FFN slot: y = x + ffn(x) (the block owns its RMSNorm and residual,
 * as pl_mlp_block does), forward and backward with the pl_mlp_block
 * contract (backward recomputes from x and accumulates weight grads; dx and
 * dy distinct).  NULL in pl_layer: the layer's own dense MLP block. */
typedef struct pl_ffn_ops {
  pl_status (*forward)(void *ffn, pl_stream *s, const void *x, void *y,
                       int64_t N);
  pl_status (*backward)(void *ffn, pl_stream *s, const void *x, const void *dy,
                        void *dx, int64_t N);
} pl_ffn_ops;

typedef enum pl_layer_keep {
  PL_LAYER_KEEP_NONE = 0, /* recompute the attention half from x         */
  PL_LAYER_KEEP_ATTN = 1, /* keep o and lse: no attention forward again   */
  PL_LAYER_KEEP_ALL = 2   /* keep h, q, k, v, o, lse, y1: no recompute    */
} pl_layer_keep;

/* The attention half's activations of one forward (N tokens). */
typedef struct pl_layer_acts {
  void *h, *q, *k, *v, *o, *y1; /* N×H, N×n_q·d, N×n_kv·d ×2, N×n_q·d, N×H */
  float *lse;                   /* n_q/D × N·D (the Ulysses head layout)   */
} pl_layer_acts;

typedef struct pl_layer {
  pl_dev *dev;
  pl_comm *sp; /* Ulysses group (borrowed); NULL = D = 1 */
  pl_layer_cfg cfg;
  float eps;
  void *w_n, *w_qkv, *w_o;  /* dt, "weights" */
  float *g_n, *g_qkv, *g_o; /* f32, "grads"  */
  pl_mlp_block mlp;
  const pl_ffn_ops *ffn; /* NULL: mlp; else ffn->*(ffn_ctx, ...) */
  void *ffn_ctx;
  int views; /* 1: w_* and g_* are the caller's (never freed) */
  /* kept activations (set by the caller; NONE after init) */
  pl_layer_keep keep;
  bool keep_verify;
  pl_layer_acts kept; /* what the last forward kept (tag "kept") */
  pl_layer_keep kept_level;
  int64_t kept_N;
  /* Optional: called on the stream at the start (end = 0) and end (end = 1)
   * of the backward's recompute of the attention half (a time breakdown);
   * NULL: none. */
  pl_status (*recompute_mark)(void *ctx, pl_stream *s, int end);
  void *mark_ctx;
  /* Optional (borrowed; NULL: none): the group whose members run this
   * layer together (the trainer's world).  They agree on their status
   * (plateau/comm.h pl_agree) before the attention's collectives and before
   * the FFN slot, forward and backward, so a rank that failed locally in
   * one part never leaves the others waiting in the next part's
   * collectives. */
  pl_comm *agree;
} pl_layer;

/* Bytes a layer keeps for its backward at level k, N tokens, a Ulysses
 * group of D: ATTN N·n_q·d·b + N·n_q·4 (o, lse); ALL adds h, q, k, v, y1:
 * N·(2H + n_q·d + 2·n_kv·d)·b. */
size_t pl_layer_kept_bytes(const pl_layer_cfg *cfg, int64_t N, int D,
                           pl_layer_keep k);

/* Weights from the counter RNG (seed, index): identical on every rank and
 * backend.  Refuses heads not divisible by the group size. */
pl_status pl_layer_init(pl_dev *dev, pl_comm *sp, pl_layer *l,
                        const pl_layer_cfg *cfg, uint64_t seed, int index);
/* The attention half of a layer whose weights and gradients live elsewhere
 * (ZeRO-3 gathered units): checks cfg (the same messages as pl_layer_init),
 * allocates nothing; the caller points w_n, w_qkv, w_o (dt) and g_n, g_qkv,
 * g_o (f32, accumulated) at its buffers before each call and sets the FFN
 * slot.  pl_layer_free only clears it. */
pl_status pl_layer_init_views(pl_dev *dev, pl_comm *sp, pl_layer *l,
                              const pl_layer_cfg *cfg, const pl_ffn_ops *ffn,
                              void *ffn_ctx);
void pl_layer_free(pl_layer *l);
pl_status pl_layer_zero_grad(pl_layer *l, pl_stream *s);
int64_t pl_layer_params(const pl_layer_cfg *cfg);

/* y = layer(x), N tokens on this rank (x, y: N×H, distinct). */
pl_status pl_layer_forward(pl_layer *l, pl_stream *s, const void *x, void *y,
                           int64_t N);
/* Recompute from x; dx from dy (distinct buffers); accumulate weight grads. */
pl_status pl_layer_backward(pl_layer *l, pl_stream *s, const void *x,
                            const void *dy, void *dx, int64_t N);

#ifdef __cplusplus
}
#endif
#endif
