/* model.c — the model's presets, validation, parameter counts and FLOPs per
 * token (model/model.h).  Pure host arithmetic. */
#include "model/model.h"

#include <stdio.h>
#include <string.h>

const char *const pl_model_preset_names[] = {"120b",        "241b", "667b",
                                             "gpt-oss-20b", "tiny", NULL};

static pl_model_cfg paper(const char *name, int L) {
  pl_model_cfg c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "%s", name);
  c.V = 200000, c.H = 7168, c.L = L;
  c.n_q = 64, c.n_kv = 8, c.d = 128;
  c.E = 384, c.k = 8, c.I = 2048;
  c.n_shared = 1, c.I_shared = 2048;
  c.dense_layers = 0, c.I_dense = 18432;
  c.rope_theta = 1e6;
  c.renorm = 1;
  c.bias_gamma = 1e-3f;
  return c;
}

pl_status pl_model_preset(const char *name, pl_model_cfg *out) {
  if (!name)
    name = "";
  if (!strcmp(name, "120b"))
    *out = paper(name, 7);
  else if (!strcmp(name, "241b"))
    *out = paper(name, 14);
  else if (!strcmp(name, "667b"))
    *out = paper(name, 39);
  else if (!strcmp(name, "gpt-oss-20b")) {
    pl_model_cfg c = paper(name, 24);
    c.V = 201088, c.H = 2880;
    c.n_q = 64, c.n_kv = 8, c.d = 64;
    c.E = 32, c.k = 4, c.I = 2880;
    c.n_shared = 0, c.I_shared = 0;
    c.I_dense = 2880;
    c.rope_theta = 150000;
    *out = c;
  } else if (!strcmp(name, "tiny")) {
    pl_model_cfg c = paper(name, 3);
    c.V = 512, c.H = 64;
    c.n_q = 4, c.n_kv = 2, c.d = 16;
    c.E = 8, c.k = 2, c.I = 32;
    c.n_shared = 1, c.I_shared = 32;
    c.dense_layers = 1, c.I_dense = 48;
    c.rope_theta = 10000;
    c.bias_gamma = 1e-2f;
    *out = c;
  } else
    return pl_set_error(PL_EINVAL,
                        "model '%s': allowed 120b, 241b, 667b, gpt-oss-20b, "
                        "tiny",
                        name);
  return PL_OK;
}

pl_status pl_model_cfg_check(const pl_model_cfg *c) {
  if (!c)
    return pl_set_error(PL_EINVAL, "model: cfg is NULL");
  if (c->V < 1 || c->H < 1 || c->L < 1)
    return pl_set_error(PL_EINVAL,
                        "model: V=%lld H=%lld L=%d: all must be >= 1",
                        (long long)c->V, (long long)c->H, c->L);
  if (c->V > INT32_MAX)
    return pl_set_error(PL_EINVAL, "model: V=%lld: token ids are int32",
                        (long long)c->V);
  if (c->n_q < 1 || c->n_kv < 1 || c->n_q % c->n_kv || c->d < 2 || c->d % 2)
    return pl_set_error(PL_EINVAL,
                        "model: n_q=%d n_kv=%d d=%d: need n_kv | n_q and an "
                        "even d >= 2",
                        c->n_q, c->n_kv, c->d);
  if (c->dense_layers < 0 || c->dense_layers > c->L)
    return pl_set_error(PL_EINVAL,
                        "model: dense_layers=%d: must be in [0, L=%d]",
                        c->dense_layers, c->L);
  if (c->dense_layers < c->L) {
    if (c->E < 1 || c->k < 1 || c->k > c->E || c->k > 32 || c->I < 1)
      return pl_set_error(PL_EINVAL,
                          "model: E=%d k=%d I=%lld: MoE layers need "
                          "1 <= k <= min(E, 32) and I >= 1",
                          c->E, c->k, (long long)c->I);
    if (c->n_shared < 0 || c->n_shared > 1 || (c->n_shared && c->I_shared < 1))
      return pl_set_error(PL_EINVAL,
                          "model: n_shared=%d I_shared=%lld: 0 or 1 shared "
                          "expert of width >= 1",
                          c->n_shared, (long long)c->I_shared);
  }
  if (c->dense_layers > 0 && c->I_dense < 1)
    return pl_set_error(PL_EINVAL,
                        "model: I_dense=%lld: dense layers need "
                        "a width >= 1",
                        (long long)c->I_dense);
  if (!(c->rope_theta > 0))
    return pl_set_error(PL_EINVAL, "model: rope_theta=%g: must be > 0",
                        c->rope_theta);
  if (!(c->bias_gamma >= 0))
    return pl_set_error(PL_EINVAL, "model: bias_gamma=%g: must be >= 0",
                        (double)c->bias_gamma);
  return PL_OK;
}

pl_model_params pl_model_count(const pl_model_cfg *c) {
  pl_model_params p;
  memset(&p, 0, sizeof p);
  const int64_t H = c->H;
  p.embed = c->V * H;
  p.head = H * c->V;
  p.final_norm = H;
  p.attn =
      H * (int64_t)(c->n_q + 2 * c->n_kv) * c->d + (int64_t)c->n_q * c->d * H;
  p.norms = 2 * H;
  p.router = H * c->E;
  p.expert = 3 * H * c->I;
  p.shared = (int64_t)c->n_shared * 3 * H * c->I_shared;
  p.dense_ffn = 3 * H * c->I_dense;
  p.layer_dense = p.attn + p.norms + p.dense_ffn;
  p.layer_moe =
      p.attn + p.norms + p.router + (int64_t)c->E * p.expert + p.shared;
  const int nd = c->dense_layers < c->L ? c->dense_layers : c->L;
  const int nm = c->E > 0 ? c->L - nd : 0;
  const int ndense = c->L - nm;
  p.total = p.embed + p.head + p.final_norm + (int64_t)ndense * p.layer_dense +
            (int64_t)nm * p.layer_moe;
  p.experts_total = (int64_t)nm * c->E * p.expert;
  p.active_nohead =
      (int64_t)ndense * (p.attn + p.dense_ffn) +
      (int64_t)nm * (p.attn + p.router + (int64_t)c->k * p.expert + p.shared);
  p.active = p.active_nohead + p.head;
  return p;
}

double pl_model_flops_matmul(const pl_model_cfg *c) {
  return 6.0 * (double)pl_model_count(c).active;
}

double pl_model_flops_attention(const pl_model_cfg *c, int64_t S) {
  return 6.0 * (double)S * (double)c->d * (double)c->n_q * (double)c->L;
}

double pl_model_flops_per_token(const pl_model_cfg *c, int64_t S) {
  return pl_model_flops_matmul(c) + pl_model_flops_attention(c, S);
}
