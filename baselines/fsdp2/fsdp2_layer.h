/* fsdp2_layer.h — the decoder layer of the FSDP2 baseline (internal to
 * baselines/fsdp2): the model's layer (model/layer.h, model/moe_ffn.h: the
 * same arithmetic and storage points) computed the way PyTorch autograd
 * runs torchtitan's TransformerBlock — a forward that either keeps what the
 * backward needs (a layer without activation checkpointing) or frees it (a
 * checkpointed layer, recomputed at the start of its backward, as
 * checkpoint_wrapper does), and context parallelism by ring attention.
 *
 *   h  = rmsnorm(x)·w_n;  q, k, v = h·W_qkv; RoPE per sequence chunk
 *   o  = attention(q, k, v)     causal flash attention (CP = 1) or ring
 *                               attention over the CP group (ring_attn.h)
 *   y1 = x + o·W_o
 *   h2 = rmsnorm(y1)·w_n2
 *   y  = y1 + moe(h2) + swiglu(h2·W_up)·W_down     (MoE layers: router and
 *        routed experts through ops/moe.h's ep variant, standard all-to-all
 *        EP; the shared expert or, in dense layers, the dense FFN)
 *
 * Positions: with CP > 1 the N = 2c local tokens are global chunks
 * pl_ring_chunk(CP, r, 0) and (…, 1) of c tokens, and RoPE rotates each
 * chunk at its own start; with CP = 1 the N tokens start at 0.
 *
 * Kept between forward and backward (tag "saved" when the forward keeps
 * them; the recompute of a checkpointed layer tags them "activations"):
 * h, q, k, v (after RoPE), o, the LSE (n_q·N f32), y1, h2 (N×H each or
 * N×(heads·d)), and in MoE layers the router's probabilities (N×E f32), its
 * routes and weights (N×k int32, f32) and the MoE layer's routing context
 * (tag "routing"), and the SwiGLU's gu (N×2I_s) and a (N×I_s).  The input x
 * is the caller's (the boundary).  What the routed experts keep differs from
 * PyTorch: ops/moe.h keeps nothing H wide between forward and backward (the
 * backward dispatches h2 again and recomputes the experts' gate/up
 * projections), where autograd keeps the dispatched rows and the experts'
 * intermediates of every layer without checkpointing.
 *
 * Transients of one forward or backward: "activations" (the intermediates
 * not kept, the f32 gradient sums, the backward's activation gradients),
 * "router", "dispatch", "expert" (ops/moe.h), "attention", "cp_kv",
 * "cp_ring" (ring_attn.h).
 *
 * Weights (dt) and their f32 gradients (accumulated, +=) are views into the
 * gathered units and their unsharded gradients, set before each call. */
#ifndef PLATEAU_BASELINES_FSDP2_FSDP2_LAYER_H
#define PLATEAU_BASELINES_FSDP2_FSDP2_LAYER_H

#include <stdbool.h>

#include "model/attention.h"
#include "model/router.h"
#include "ops/moe.h"
#include "plateau/plateau.h"
#include "ring_attn.h"
#include "train/timeline.h"

typedef struct pl__fsdp2_saved {
  bool valid;
  void *h, *q, *k, *v, *o, *y1, *h2, *gu, *a;
  float *lse, *probs, *w;
  int32_t *idx;
  const int32_t *hidx; /* N×k host: own, or a dry device's routes */
  int32_t *own;        /* hidx when the forward allocated it */
  pl_moe_ctx *ctx;
} pl__fsdp2_saved;

typedef struct pl__fsdp2_layer {
  pl_dev *dev;
  int64_t H;
  int n_q, n_kv, d;
  double rope_theta;
  pl_dtype dt;
  pl_attn_kernels attn;
  float eps;
  /* context parallelism: CP ranks, this rank r, the ring (NULL: CP = 1) */
  int CP, cp_rank;
  pl_ring_attn *ring;
  /* FFN */
  pl_moe *moe; /* NULL: dense layer                                   */
  int E, k, renorm;
  int64_t I_s; /* SwiGLU width (shared expert or dense FFN; 0: none)  */
  /* views */
  void *w_n, *w_qkv, *w_o, *w_n2, *w_r, *w_up, *w_down;
  float *g_n, *g_qkv, *g_o, *g_n2, *g_r, *g_up, *g_down;
  pl_moe_weights ew;
  pl_moe_wgrads eg;
  const float *bias; /* E, device; NULL: none                          */
  int64_t *counts;   /* E, host: routes per expert of the forwards      */
  pl_moe_stats stats;
  pl__fsdp2_saved sv;
  pl_timeline *tl; /* the time breakdown's spans (attention, moe; NULL:
                      no marks)                                       */
} pl__fsdp2_layer;

/* y = layer(x) (N×H each, distinct).  keep: save what the backward needs
 * (tag "saved"); else free it.  count: add the routes to counts. */
pl_status pl__fsdp2_layer_forward(pl__fsdp2_layer *l, pl_stream *s,
                                  const void *x, void *y, int64_t N, bool keep,
                                  bool count);
/* From the saved activations, or after recomputing them from x when the
 * forward kept none: dx from dy (distinct), weight gradients accumulated.
 * Frees the saved activations. */
pl_status pl__fsdp2_layer_backward(pl__fsdp2_layer *l, pl_stream *s,
                                   const void *x, const void *dy, void *dx,
                                   int64_t N);
/* Free the saved activations (after a failure). */
void pl__fsdp2_layer_drop(pl__fsdp2_layer *l, pl_stream *s);

#endif
