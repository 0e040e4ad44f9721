/* step_cfg.c — the training step's configuration (train/step.h): the
 * defaults, the layers' kept activations of a budget and their bytes, and
 * the names of the time breakdown's parts.  Below the trainer's other
 * files: they call it, it calls none of them. */
#include <string.h>

#include "model/layer.h"
#include "train/step.h"

pl_step_cfg pl_step_cfg_default(void) {
  pl_step_cfg c;
  memset(&c, 0, sizeof c);
  c.dt = PL_BF16;
  c.dispatch = PL_MOE_PIPELINED;
  c.moe_c = 8192;
  c.moe_K_max = 64;
  c.moe_lanes = 2;
  c.knobs = pl_llep_knobs_default();
  c.hp = pl_adamw_hparams_default();
  c.hp.max_grad_norm = 1.0;
  c.oo.bucket = 100000000;
  c.oo.slots = 2;
  c.sco_release = PL_SCO_RELEASE_CONTEXT;
  c.micro = 1;
  c.seed = 1;
  c.attn = (pl_attn_kernels){0}; /* AUTO */
  return c;
}

/* The attention of layer 0 up while the budget lasts, then whole layers. */
void pl_step_keep_layers(const pl_model_cfg *m, int64_t N, int D, pl_dtype dt,
                         pl_keep_budget kb, int *n_attn, int *n_all) {
  *n_attn = *n_all = 0;
  if (kb.mode == PL_KEEP_ATTN || kb.mode == PL_KEEP_ALL) {
    *n_attn = m->L;
    *n_all = kb.mode == PL_KEEP_ALL ? m->L : 0;
    return;
  }
  size_t a, all;
  pl_step_kept_layer(m, N, D, dt, &a, &all);
  const size_t w = all - a;
  if (a == 0)
    return;
  uint64_t left = kb.bytes;
  while (*n_attn < m->L && left >= a)
    (*n_attn)++, left -= a;
  while (*n_attn == m->L && *n_all < m->L && left >= w)
    (*n_all)++, left -= w;
}

void pl_step_kept_layer(const pl_model_cfg *m, int64_t N, int D, pl_dtype dt,
                        size_t *attn, size_t *all) {
  const pl_layer_cfg lc = {
      .H = m->H, .n_q = m->n_q, .n_kv = m->n_kv, .d = m->d, .dt = dt};
  *attn = pl_layer_kept_bytes(&lc, N, D, PL_LAYER_KEEP_ATTN);
  *all = pl_layer_kept_bytes(&lc, N, D, PL_LAYER_KEEP_ALL);
}

size_t pl_step_keep_bytes(const pl_model_cfg *m, int64_t N, int D, pl_dtype dt,
                          int n_attn, int n_all) {
  size_t a, all;
  pl_step_kept_layer(m, N, D, dt, &a, &all);
  return (size_t)(n_attn - n_all) * a + (size_t)n_all * all;
}

const char *pl_part_name(int p) {
  static const char *const n[PL_PART_COUNT] = {
      "attention", "moe",   "head",      "optimizer",   "zero3",
      "sco",       "other", "recompute", "expert_units"};
  return p >= 0 && p < PL_PART_COUNT ? n[p] : "?";
}
