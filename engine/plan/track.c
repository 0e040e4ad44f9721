/* track.c — the symbolic tracked allocator the planner replays schedules on:
 * the same bookkeeping as engine/core/mem.c (current, peak, each tag's
 * current and peak, the live set by tag when the peak was set), without
 * memory, plus the Eq. 6 term of every byte and the phase of the peak. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_internal.h"

void pl__sym_init(pl__sym_track *t) {
  memset(t, 0, sizeof *t);
}

static int tag_lookup(pl__sym_track *t, const char *tag) {
  for (int i = 0; i < t->n; i++) /* the replays pass static strings */
    if (t->tag[i] == tag)
      return i;
  for (int i = 0; i < t->n; i++)
    if (!strcmp(t->tag[i], tag))
      return i;
  PL_ASSERT(t->n < PL_PLAN_MAX_TAGS);
  t->tag[t->n] = tag; /* static strings only */
  return t->n++;
}

/* The index of tag: the pointer's slot first (a string literal has one
 * address per translation unit, so one name may come with several). */
static int tag_index(pl__sym_track *t, const char *tag) {
  const unsigned h = (unsigned)(((uintptr_t)tag >> 3) ^ ((uintptr_t)tag >> 9)) &
                     (PL__SYM_HASH - 1);
  if (t->hkey[h] == tag)
    return t->hidx[h] - 1;
  const int i = tag_lookup(t, tag);
  t->hkey[h] = tag, t->hidx[h] = i + 1;
  return i;
}

pl__sym_buf pl__sym_alloc(pl__sym_track *t, const char *tag, int term,
                          size_t bytes) {
  PL_ASSERT(term >= 0 && term < PL_TERM_COUNT);
  pl__sym_buf b = {tag_index(t, tag), term, bytes, true};
  t->cur += bytes;
  t->now[b.tag] += bytes;
  if (t->now[b.tag] > t->tpeak[b.tag])
    t->tpeak[b.tag] = t->now[b.tag];
  t->term_now[term] += bytes;
  if (t->term_now[term] > t->term_peak[term])
    t->term_peak[term] = t->term_now[term];
  if (t->cur > t->phase_high)
    t->phase_high = t->cur;
  if (t->cur > t->peak) {
    t->peak = t->cur;
    memcpy(t->at_peak, t->now, sizeof t->now);
    memcpy(t->term_at_peak, t->term_now, sizeof t->term_now);
    t->peak_what = t->what, t->peak_kind = t->kind, t->peak_layer = t->layer;
  }
  return b;
}

void pl__sym_free(pl__sym_track *t, pl__sym_buf *b) {
  if (!b->live)
    return;
  t->cur -= b->bytes;
  t->now[b->tag] -= b->bytes;
  t->term_now[b->term] -= b->bytes;
  b->live = false;
}

void pl__sym_reset_peak(pl__sym_track *t) {
  t->peak = t->cur;
  memcpy(t->at_peak, t->now, sizeof t->now);
  memcpy(t->tpeak, t->now, sizeof t->now);
  memcpy(t->term_at_peak, t->term_now, sizeof t->term_now);
  memcpy(t->term_peak, t->term_now, sizeof t->term_now);
  t->peak_what = t->what, t->peak_kind = t->kind, t->peak_layer = t->layer;
}

void pl__sym_phase(pl__sym_track *t, const char *what, int layer,
                   const char *kind) {
  if (t->bins && t->what)
    pl__bins_phase(t->bins, t->what, t->layer, t->phase_high);
  t->what = what, t->layer = layer, t->kind = kind;
  t->phase_high = t->cur;
}

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

void pl__sym_export(const pl__sym_track *t, pl_plan_mem *out) {
  out->dev_peak = t->peak;
  out->n_tags = t->n;
  for (int i = 0; i < t->n; i++) {
    out->at_peak[i] = (pl_tag_bytes){t->tag[i], t->at_peak[i]};
    out->tag_peak[i] = (pl_tag_bytes){t->tag[i], t->tpeak[i]};
  }
  memcpy(out->term, t->term_at_peak, sizeof out->term);
  memcpy(out->term_peak, t->term_peak, sizeof out->term_peak);
  char ph[48]; /* the phase as the replay's own buffer held it */
  if (!t->peak_what)
    ph[0] = 0;
  else if (t->peak_layer >= 0)
    snprintf(ph, sizeof ph, "%s layer %d (%s)", t->peak_what, t->peak_layer,
             t->peak_kind);
  else
    snprintf(ph, sizeof ph, "%s", t->peak_what);
  snprintf(out->peak_phase, sizeof out->peak_phase, "%s", ph);
}

void pl__sym_apply(pl__sym_track *t, const pl__sym_track *s, int *map) {
  int m[PL_PLAN_MAX_TAGS];
  for (int i = 0; i < s->n; i++)
    m[i] = tag_lookup(t, s->tag[i]);
  /* s's peak is its first highest point: where t's last new peak within
   * the schedule would be taken */
  if (t->cur + s->peak > t->phase_high)
    t->phase_high = t->cur + s->peak;
  if (s->peak > 0 && t->cur + s->peak > t->peak) {
    t->peak = t->cur + s->peak;
    memcpy(t->at_peak, t->now, sizeof t->now);
    for (int i = 0; i < s->n; i++)
      t->at_peak[m[i]] += s->at_peak[i];
    for (int k = 0; k < PL_TERM_COUNT; k++)
      t->term_at_peak[k] = t->term_now[k] + s->term_at_peak[k];
    t->peak_what = t->what, t->peak_kind = t->kind, t->peak_layer = t->layer;
  }
  for (int i = 0; i < s->n; i++) {
    if (t->now[m[i]] + s->tpeak[i] > t->tpeak[m[i]])
      t->tpeak[m[i]] = t->now[m[i]] + s->tpeak[i];
    t->now[m[i]] += s->now[i];
  }
  for (int k = 0; k < PL_TERM_COUNT; k++) {
    if (t->term_now[k] + s->term_peak[k] > t->term_peak[k])
      t->term_peak[k] = t->term_now[k] + s->term_peak[k];
    t->term_now[k] += s->term_now[k];
  }
  t->cur += s->cur;
  if (map)
    memcpy(map, m, sizeof(int) * (size_t)s->n);
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
