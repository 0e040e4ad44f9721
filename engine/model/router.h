/* router.h — the MoE router: logits = x·W_r, softmax over E experts, top-k,
 * route weights (renormalized over the top-k, or the plain probabilities),
 * and its backward; optional auxiliary-loss-free balancing bias.
 *
 *   x [N, H] (dt), W_r [H, E] (dt), logits/probs [N, E] f32
 *   p = softmax(x·W_r)                      (fp32 accumulate, fp32 softmax)
 *   idx [N, k] int32, ordered by score descending, ties to the lower index
 *       (identical rule on both backends): without a bias the k largest
 *       logits (ranked before the softmax, so no two distinct logits tie
 *       through expf rounding), with a bias b the k largest p_e + b_e
 *   w [N, k] f32: renorm ? p_{idx_j} / Σ_j p_{idx_j} : p_{idx_j}
 *       (renorm == softmax over the k chosen logits, the Mixtral/LLEP rule)
 *
 * The one router of the engine: the MoE dispatch bench's `router` profile and
 * the tests call it with renorm = 1; pl_moe_forward takes idx on the host, so
 * such a caller copies idx (N·k int32) D2H after pl_router_fwd — the one
 * documented host sync of a routed layer (ops/moe.h).
 *
 * Bias b (optional, f32 [E]): DeepSeek-V3's auxiliary-loss-free balancing
 * (arXiv 2412.19437 §2.1.2): b only changes which experts are selected, never
 * the route weights, and after each step b_e += γ·sign(mean load − load_e)
 * (pl_router_bias_update), so overloaded experts are chosen less without an
 * auxiliary loss term in the gradient.  (DeepSeek-V3 uses sigmoid affinities;
 * we keep the softmax router of the paper's models and apply the same rule.)
 *
 * Backward, with the selection held fixed (it is piecewise constant):
 *   renorm:  w = softmax over the selected logits, so
 *            dlogit_{idx_j} = w_j (dw_j − Σ_i w_i dw_i), 0 elsewhere
 *   plain:   dlogit_e = p_e (g_e − Σ_j p_{idx_j} dw_j), g_e = dw_j at e = idx_j
 *   dx = dlogits·W_rᵀ,  dW_r += xᵀ·dlogits (f32 accumulate)
 * dlogits are stored in dt (the GEMMs take both operands in one dtype). */
#ifndef PLATEAU_MODEL_ROUTER_H
#define PLATEAU_MODEL_ROUTER_H

#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_router_shape {
  int64_t N; /* tokens            */
  int64_t H; /* hidden            */
  int E;     /* experts           */
  int k;     /* top-k, 1..min(E,32) */
  int renorm;
  pl_dtype dt; /* x, W_r, dx, dlogits: f32 or bf16 */
} pl_router_shape;

pl_status pl_router_check(const pl_router_shape *sh);

/* probs: [N, E] f32 output (kept for backward); bias may be NULL. */
pl_status pl_router_fwd(pl_stream *s, const pl_router_shape *sh, const void *x,
                        const void *W, const float *bias, float *probs,
                        int32_t *idx, float *w);
/* dlogits: [N, E] of dt, scratch (the caller's, e.g. tag "activations");
 * dx [N, H] dt (overwritten); dW [H, E] f32 (accumulated). */
pl_status pl_router_bwd(pl_stream *s, const pl_router_shape *sh, const void *x,
                        const void *W, const float *probs, const int32_t *idx,
                        const float *w, const float *dw, void *dlogits,
                        void *dx, float *dW);

/* Host side, after the step's per-expert routed counts are known (summed over
 * ranks): b_e += gamma · sign(mean − counts_e). */
void pl_router_bias_update(float *bias, const int64_t *counts, int E,
                           float gamma);

/* One MoE layer's balancing state: this rank's routed counts of the step
 * (E), the host bias and its device copy (E, f32). */
typedef struct pl_router_bias_slot {
  int64_t *counts;
  float *hbias, *bias;
} pl_router_bias_slot;

/* After a step, for n MoE layers: the counts summed over `group`, each
 * host bias moved by pl_router_bias_update and copied to the device on s
 * (synchronized), every count zeroed.  gamma 0: the counts are only zeroed.
 * Collective over group unless gamma is 0 or n is 0. */
pl_status pl_router_bias_step(pl_comm *group, pl_stream *s,
                              const pl_router_bias_slot *slots, int n, int E,
                              float gamma);

#ifdef __cplusplus
}
#endif
#endif
