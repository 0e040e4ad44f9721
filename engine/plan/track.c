/* track.c — what the planner's memory answers share: the phase bins a
 * measurement gathers each phase's high into (pl__bins), a memory's tags,
 * and the Eq. 6 terms' names and formulas. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_internal.h"

void pl__bins_init(pl__bins *b, int L) {
  memset(b, 0, sizeof *b);
  b->L = L;
}

void pl__bins_phase(pl__bins *b, const char *what, int layer, size_t high) {
  int i = -1;
  if (what && !strcmp(what, "head"))
    i = PL_PLAN_BINS;
  else if (what && layer >= 0 && layer < b->L &&
           (!strcmp(what, "forward") || !strcmp(what, "backward")))
    i = (int)((int64_t)layer * PL_PLAN_BINS / b->L);
  if (i >= 0 && high > b->high[i])
    b->high[i] = high;
}

int pl__bins_first(int L, int i) {
  return (int)(((int64_t)i * L + PL_PLAN_BINS - 1) / PL_PLAN_BINS);
}

size_t pl_plan_mem_tag(const pl_plan_mem *m, const char *tag) {
  for (int i = 0; i < m->n_tags; i++)
    if (!strcmp(m->at_peak[i].tag, tag))
      return m->at_peak[i].bytes;
  return 0;
}

size_t pl_plan_mem_tag_peak(const pl_plan_mem *m, const char *tag) {
  for (int i = 0; i < m->n_tags; i++)
    if (!strcmp(m->tag_peak[i].tag, tag))
      return m->tag_peak[i].bytes;
  return 0;
}

/* Each term's name, its formula in plateau's budget (Eq. 6) and in the FSDP2
 * baseline (its allocation schedule, baselines/fsdp2/fsdp2.h). */
static const struct {
  const char *name, *formula, *fsdp2;
} terms[PL_TERM_COUNT] = {
    {"weights", "4Θ/W (bf16 half): weights of the shards and experts",
     "fp32 shards Σ s_u·4, router biases (shards on the host with "
     "offload)"},
    {"grads", "4Θ/W (f32 half): gradients of the shards and experts",
     "fp32 gradient shards Σ s_u·4 (host with offload)"},
    {"optim", "s·β·16: optimizer staging (s·β·12) and norm partials",
     "AdamW m, v Σ s_u·8 and the norm's partials (host with offload)"},
    {"attention", "O(N·H·b): attention workspace (+ Ulysses buffers)",
     "attention workspace; ring attention's K/V and fp32 accumulators"},
    {"dispatch", "2·Ep·k·c_eff·H·b: dispatch buffers",
     "the EP dispatch's send and receive rows"},
    {"logits", "O(N·V·b/P): logit strips, ring hops, CE state",
     "dense CE on full logits: bf16 N·V·2, then 3·N·V·4"},
    {"restored", "2·N·H·b: boundaries restored by SCO", "-"},
    {"resident", "(L−|S|)·N·H·b: boundaries kept on the device",
     "boundaries (L + 1)·N·H·b and the saved sets of layers without AC"},
    {"units", "two gathered units (ZeRO-3 / FSDP)",
     "gathered bf16 units and all-gather buffers (current, next, the head)"},
    {"unit_grads", "an unsharded unit gradient + reduce-scatter shard",
     "fp32 unsharded unit gradients, reduce-scatter shards, the head's bf16"},
    {"acts", "one layer's activations and their gradients",
     "a layer's forward set (recomputed or not kept) and its gradients"},
    {"expert", "expert intermediates, router, routing indices",
     "router scores' gradients, routing context, expert intermediates"},
    {"other", "tokens and small state", "token buffers 4·N·4"},
};

const char *pl_plan_term_name(int t) {
  return t >= 0 && t < PL_TERM_COUNT ? terms[t].name : "?";
}
const char *pl_plan_term_formula(int t) {
  return t >= 0 && t < PL_TERM_COUNT ? terms[t].formula : "?";
}
const char *pl_plan_fsdp2_term_formula(int t) {
  return t >= 0 && t < PL_TERM_COUNT ? terms[t].fsdp2 : "?";
}
