/* moe_ffn.h — the FFN sublayer of the end-to-end model (model/model.h), in
 * the decoder layer's FFN slot (pl_ffn_ops of model/layer.h): a MoE FFN —
 * router, routed experts (ops/moe.h, any dispatch variant) and a shared
 * SwiGLU expert — or, without routed experts, a dense SwiGLU FFN.
 *
 *   h   = rmsnorm(x)·w_n                        x, h, y: N×H (dt)
 *   MoE: p, idx, w = router(h, W_r, bias)       W_r: H×E, top-k (router.h)
 *        m   = Σ_j w_j · expert_{idx_j}(h)      pl_moe_forward
 *   s   = swiglu(h·W_up)·W_down                 W_up: H×2I_s = [gate | up],
 *                                               W_down: I_s×H (the shared
 *                                               expert, or the dense FFN)
 *   y   = x + m + s
 *
 * Storage points (the same on both backends): y = m (the MoE output, dt),
 * y += x (one rounding), y += a·W_down (GEMM with beta 1: one rounding).
 * Backward recomputes h, the router and the shared expert from x; the
 * hidden gradient dh = dh_experts + dh_router + dh_shared is summed in f32
 * and rounded once before the RMSNorm backward.
 *
 * Views: the weights (dt) and their f32 gradients (accumulated, +=) are the
 * caller's buffers — ZeRO-3 gathered units and the rank's expert shards —
 * set in the struct before each call.  The router bias (f32 [E], device) is
 * read, never differentiated; counts[e] (host) adds the routes of every
 * forward (not of the recompute) for the bias update after the step.
 *
 * Routing context: with keep_ctx the forward keeps pl_moe_forward's context
 * (the plan and per-route indices, tag "routing", and any LLEP helper
 * weights, tag "llep_weights") until the backward, which then runs the MoE
 * backward on it; without, the backward calls pl_moe_forward again on the
 * recomputed routes (nothing kept between the two; one more expert forward).
 * Both give bit-identical results (the recomputed routes are identical).
 *
 * The MoE layer runs on the device's default stream: the stream passed to
 * forward/backward must be that stream (PL_EINVAL otherwise). */
#ifndef PLATEAU_MODEL_MOE_FFN_H
#define PLATEAU_MODEL_MOE_FFN_H

#include <stdbool.h>

#include "model/layer.h"
#include "ops/moe.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_moe_ffn_cfg {
  int64_t H;
  pl_dtype dt;   /* f32 | bf16                                          */
  int E, k;      /* experts the router chooses among (0: dense FFN)     */
  int E_moe;     /* experts of the MoE layer the routes land on (0: E):
                    E a multiple of it, route slot e landing on expert
                    e mod E_moe — a proxy whose present experts are fewer
                    than k (train/layout.h); counts stay per slot      */
  int renorm;    /* route weights renormalized over the k chosen        */
  int64_t I_s;   /* width of the always-on SwiGLU (shared expert or the
                    dense FFN); 0: none (MoE only)                      */
  bool keep_ctx; /* see the file comment                                */
} pl_moe_ffn_cfg;

typedef struct pl_moe_ffn {
  pl_dev *dev;
  pl_moe_ffn_cfg cfg;
  float eps;
  pl_moe *moe; /* borrowed; its cfg H, E, k, dt match; NULL when
                  E = 0 */
  /* views (set by the caller) */
  void *w_n, *w_r, *w_up, *w_down;
  float *g_n, *g_r, *g_up, *g_down;
  pl_moe_weights ew;
  pl_moe_wgrads eg;
  const float *bias;  /* E, device; NULL: no bias                      */
  int64_t *counts;    /* E, host (owned): routes per expert, summed
                         over forwards until the caller clears them   */
  pl_moe_ctx *ctx;    /* kept between forward and backward            */
  pl_moe_stats stats; /* of the last forward                          */
} pl_moe_ffn;

/* Checks cfg against the MoE layer (NULL iff cfg->E == 0); allocates the
 * host counts.  PL_EINVAL naming the value. */
pl_status pl_moe_ffn_init(pl_dev *dev, pl_moe_ffn *f, const pl_moe_ffn_cfg *cfg,
                          pl_moe *moe);
void pl_moe_ffn_free(pl_moe_ffn *f);

/* y = x + ffn(x) (x, y distinct, N×H). */
pl_status pl_moe_ffn_forward(pl_moe_ffn *f, pl_stream *s, const void *x,
                             void *y, int64_t N);
/* Recompute from x, dx = dy + d(ffn)/dx, accumulate the weight gradients
 * (experts through pl_moe_backward).  dx and dy distinct. */
pl_status pl_moe_ffn_backward(pl_moe_ffn *f, pl_stream *s, const void *x,
                              const void *dy, void *dx, int64_t N);

/* The block in the decoder layer's FFN slot (ffn_ctx = the pl_moe_ffn). */
extern const pl_ffn_ops pl_moe_ffn_ops;

#ifdef __cplusplus
}
#endif
#endif
