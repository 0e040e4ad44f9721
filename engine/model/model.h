/* model.h — the end-to-end MoE language model: its configuration, the named
 * presets, parameter counts (total and active per token) and the FLOPs per
 * token of one training step.
 *
 *   x_0 = E[tok]                       token embedding, E: V×H (a lookup)
 *   x_{ℓ+1} = layer_ℓ(x_ℓ), ℓ < L      decoder layers (model/layer.h)
 *   loss = CE(rmsnorm(x_L)·w_f · W_h)  final RMSNorm, untied head W_h: H×V
 *
 * A decoder layer is RMSNorm → causal GQA attention with RoPE (n_q query and
 * n_kv key/value heads of dimension d; W_qkv: H×(n_q+2n_kv)·d, W_o: n_q·d×H)
 * → residual → RMSNorm → FFN → residual.  The FFN (model/moe_ffn.h) of the
 * first `dense_layers` layers is a dense SwiGLU of width I_dense; of every
 * other layer it is MoE: a learned softmax router (W_r: H×E, top-k with
 * DeepSeek-V3's auxiliary-loss-free bias, model/router.h), E routed SwiGLU
 * experts of width I and n_shared shared SwiGLU experts of width I_shared
 * that every token passes through.
 *
 * The paper's models (App. A) state H, V, the FFN widths, E, k and the depth
 * but not the attention: we use GQA with n_q = 64, n_kv = 8, d = 128 in the
 * 120b / 241b / 667b presets, and count its parameters with that choice.
 * Every layer MoE with untied embeddings gives 122.50 B / 242.13 B / 669.39 B
 * parameters (pl_model_count; the closest reading of the paper's labels).
 *
 * gpt-oss-20b (our reading of the released model card): H 2880, 24 layers,
 * 64 query / 8 key-value heads of d = 64, 32 experts of width 2880, top-4, no
 * shared expert, V 201,088, untied head — but full causal attention in every
 * layer (no sliding-window layers, no attention sinks, no biases): 20.91 B
 * total, 3.61 B active per token. */
#ifndef PLATEAU_MODEL_MODEL_H
#define PLATEAU_MODEL_MODEL_H

#include <stdint.h>

#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_model_cfg {
  char name[32];
  int64_t V, H;      /* vocabulary, hidden                                 */
  int L;             /* decoder layers                                     */
  int n_q, n_kv, d;  /* attention heads and head dimension                 */
  int E, k;          /* routed experts, routes per token                   */
  int64_t I;         /* routed expert width                                */
  int n_shared;      /* shared experts (0 or 1)                            */
  int64_t I_shared;  /* shared expert width                                */
  int dense_layers;  /* the first dense_layers layers have a dense FFN     */
  int64_t I_dense;   /* dense FFN width                                    */
  double rope_theta; /* RoPE base                                          */
  int renorm;        /* route weights: softmax over the k chosen (1) or the
                        plain probabilities (0)                            */
  float bias_gamma; /* aux-loss-free bias step: b_e += γ·sign(mean−load_e) */
} pl_model_cfg;

/* Names of the presets, NULL-terminated: "120b", "241b", "667b",
 * "gpt-oss-20b", "tiny". */
extern const char *const pl_model_preset_names[];

/* Fill *out from a preset; PL_EINVAL naming the allowed names otherwise. */
pl_status pl_model_preset(const char *name, pl_model_cfg *out);

/* Sizes and divisibility: PL_EINVAL with a message naming the value. */
pl_status pl_model_cfg_check(const pl_model_cfg *c);

/* 1 if layer ℓ has the MoE FFN (ℓ >= dense_layers and E > 0). */
static inline int pl_model_layer_is_moe(const pl_model_cfg *c, int l) {
  return l >= c->dense_layers && c->E > 0;
}

/* Parameter counts of the full model (not of a rank).  Norm weights count
 * in total; "active" counts the matrices a token multiplies by (no norms, no
 * embedding lookup; the head, the attention projections, the router, k routed
 * experts, the shared experts, the dense FFN). */
typedef struct pl_model_params {
  int64_t embed, head, final_norm;
  int64_t attn;        /* per layer: W_qkv + W_o                           */
  int64_t norms;       /* per layer: the two RMSNorm weights               */
  int64_t router;      /* per MoE layer: H·E                               */
  int64_t expert;      /* one routed expert: 3·H·I                         */
  int64_t shared;      /* per MoE layer: n_shared·3·H·I_shared             */
  int64_t dense_ffn;   /* per dense layer: 3·H·I_dense                     */
  int64_t layer_dense; /* all parameters of a dense layer                  */
  int64_t layer_moe;   /* all parameters of a MoE layer (E experts)        */
  int64_t total;       /* everything                                       */
  int64_t experts_total; /* routed experts, all layers                       */
  int64_t active;        /* per token, as above                              */
  int64_t active_nohead; /* active minus the head                            */
} pl_model_params;

pl_model_params pl_model_count(const pl_model_cfg *c);

/* Model FLOPs of one training step (forward + backward) per token at context
 * S (the sequence length a token attends over, causal):
 *   6 · active                       (matmuls: 2 forward, 4 backward)
 *   + 6 · S · d · n_q · L            (causal attention: QKᵀ and PV are
 *                                     2·(S/2)·d multiply-adds per query head
 *                                     forward = 2·S·d·n_q FLOPs; ×3 fwd+bwd)
 * Recomputation (checkpointing, the MoE's inner recompute) is not counted:
 * this is the work of the model, the measure of TFLOP/s and MFU. */
double pl_model_flops_per_token(const pl_model_cfg *c, int64_t S);
/* The two terms separately. */
double pl_model_flops_matmul(const pl_model_cfg *c);
double pl_model_flops_attention(const pl_model_cfg *c, int64_t S);

#ifdef __cplusplus
}
#endif
#endif
