/* mem_dry.c — the planner's memory of a configuration (pl_plan_memory,
 * pl_plan_memory_dry): the trainer built on a dry device and stepped.
 *
 * Why: a copy of the step's allocation schedule would be a second source of
 * truth to keep in step with the code; a dry device (backend/dry,
 * dry_dev.c) tracks what the step really allocates without backing or
 * running any of it, in milliseconds.  Everything pl_plan_mem says comes
 * from the step and the trainer: the peaks, tags and phase of the peak from
 * the tracker (the step marks its phases, pl_mem_phase_set), the terms from
 * the tracker's classes (term_of below), dev_worst from a second step
 * under adversarial routes, the facts from the step's result and the
 * trainer's description.  One process builds one rank,
 * so a configuration of several ranks is built as the rank view of its run's
 * rank 0 (every group virtual, the expert group too: train/layout.h), as
 * `plateau bench train --backend dry --preset proxy120b --rank-view` does. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dry/dry.h"
#include "model/layer.h"
#include "plan/plan_internal.h"
#include "plateau/timer.h"
#include "train/describe.h"

/* Steps of the trainer measured: one.  The trainer allocates its state
 * (the optimizer's, the resident buckets, SCO's host budget) when it is
 * built, so its first step starts from what every later step starts from:
 * a second step's memory equals the first's, field by field, on every
 * configuration of the planner's grid (test_mpi_plan_dry.c dry_one_step). */
#define DRY_STEPS 1
/* Steps of a system measured through its hook (mem_hook.c): the FSDP2
 * baseline's measurement steps once too (pl_fsdp2_dry_memory). */
#define HOOK_STEPS 1

pl_plan_cfg pl_plan_rank_view_cfg(const pl_plan_cfg *c) {
  pl_plan_cfg b = *c;
  if (c->W > 1) {
    b.lc.W_v = c->lc.W_v > c->W ? c->lc.W_v : c->W;
    b.lc.rank_view = 1;
    b.W = 1;
    b.present = 0;
    b.tokens_step = 0;
  }
  return b;
}

/* ---- terms: each allocation's PL_TERM_* ---------------------------------
 * From its tag and the phase of the step it was made in (the tracker's
 * classes, pl_mem_set_classes): one tag is one term except where the step
 * gives one tag two roles — "boundary" restored by SCO in the backward
 * (else resident), "grads" the head's scratch (else the state's
 * gradients), "activations" outside a step the runner's loss scalar (else a
 * layer's activations).  Made outside a step (no phase, or "states"): the
 * states by their tags. */

static bool in_phase(const pl_mem_phase *ph, const char *what) {
  return ph->what && !strcmp(ph->what, what);
}

static int term_of(void *ctx, const char *tag, const pl_mem_phase *ph) {
  (void)ctx;
  static const struct {
    const char *tag;
    int term;
  } one[] = {
      {"weights", PL_TERM_WEIGHTS}, {"ce_state", PL_TERM_LOGITS},
      {"logits", PL_TERM_LOGITS},   {"ring", PL_TERM_LOGITS},
      {"zero3", PL_TERM_UNITS},     {"zero3_grads", PL_TERM_UNIT_GRADS},
      {"grads_act", PL_TERM_ACTS},  {"kept", PL_TERM_ACTS},
      {"attention", PL_TERM_ATTN},  {"dispatch", PL_TERM_DISPATCH},
      {"expert", PL_TERM_EXPERT},   {"routing", PL_TERM_EXPERT},
      {"router", PL_TERM_EXPERT},   {"output", PL_TERM_RESIDENT},
  };
  const bool state = !ph->what || in_phase(ph, "states");
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
    if (tag[0] == one[i].tag[0] && !strcmp(tag, one[i].tag))
      return one[i].term;
  if (!strncmp(tag, "optim", 5))
    return PL_TERM_OPTIM;
  if (!strncmp(tag, "llep_", 5))
    return PL_TERM_EXPERT;
  if (!strcmp(tag, "boundary"))
    return in_phase(ph, "backward") ? PL_TERM_RESTORED : PL_TERM_RESIDENT;
  if (!strcmp(tag, "grads"))
    return in_phase(ph, "head") ? PL_TERM_LOGITS : PL_TERM_GRADS;
  if (!strcmp(tag, "activations"))
    return state ? PL_TERM_OTHER : PL_TERM_ACTS;
  return PL_TERM_OTHER;
}

/* ---- tag names that outlive the device ---------------------------------
 * A measurement's pl_plan_mem names its tags by pointers that stay valid: the
 * device's interned names die with it, so they are interned once more here, for
 * the life of the process (a few dozen names at most). */

#define DRY_NAMES 128
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static char *names[DRY_NAMES];
static int n_names;

static const char *intern(const char *tag) {
  const char *r = "other";
  pthread_mutex_lock(&names_lock);
  for (int i = 0; i < n_names; i++)
    if (!strcmp(names[i], tag)) {
      r = names[i];
      goto out;
    }
  if (n_names < DRY_NAMES && (names[n_names] = strdup(tag)))
    r = names[n_names++];
out:
  pthread_mutex_unlock(&names_lock);
  return r;
}

/* ---- one measurement -------------------------------------------------- */

/* What a measurement reads from the trainer before it goes. */
typedef struct dry_facts {
  int64_t N;
  int E_route, nmoe;
  bool chunks; /* the dispatch variant runs the chunk pipeline */
} dry_facts;

static void copy_stats(const pl_step_result *r, pl_plan_dry_mem *out) {
  out->dev_peak = r->dev.peak;
  out->host_peak = r->host.peak;
  int n = 0;
  for (int i = 0; i < r->dev.n_tags && n < PL_PLAN_MAX_TAGS; i++, n++) {
    snprintf(out->tags[n].tag, sizeof out->tags[n].tag, "%s",
             r->dev.tag_peak[i].tag);
    out->tags[n].peak = r->dev.tag_peak[i].bytes;
    out->tags[n].at_peak = 0;
    for (int j = 0; j < r->dev.n_tags; j++)
      if (r->dev.at_peak[j].tag &&
          !strcmp(r->dev.at_peak[j].tag, r->dev.tag_peak[i].tag))
        out->tags[n].at_peak = r->dev.at_peak[j].bytes;
  }
  out->n_tags = n;
}

/* A pinned host tag's bytes at the host arena's peak. */
static size_t host_tag(const pl_mem_stats *h, const char *tag) {
  for (int i = 0; i < h->n_tags; i++)
    if (!strcmp(h->at_peak[i].tag, tag))
      return h->at_peak[i].bytes;
  return 0;
}

/* The step's result and the trainer's facts as a pl_plan_mem (c the
 * configuration asked for, b the one built, for rank). */
static pl_status fill_mem(const pl_model_cfg *m, const pl_plan_cfg *c,
                          const pl_plan_cfg *b, const pl_plan_machine *mc,
                          int rank, const pl_step_result *r, const dry_facts *f,
                          pl_plan_mem *out) {
  memset(out, 0, sizeof *out);
  out->dev_peak = r->dev.peak;
  out->peak_rank = rank;
  pl_mem_phase_str(&r->dev.peak_phase, out->peak_phase, sizeof out->peak_phase);
  for (int i = 0; i < r->dev.n_tags && out->n_tags < PL_PLAN_MAX_TAGS; i++) {
    const size_t at = r->dev.at_peak[i].bytes, pk = r->dev.tag_peak[i].bytes;
    if (!at && !pk) /* made and freed before the step (its build's) */
      continue;
    const char *tag = intern(r->dev.at_peak[i].tag);
    out->at_peak[out->n_tags] = (pl_tag_bytes){tag, at};
    out->tag_peak[out->n_tags++] = (pl_tag_bytes){tag, pk};
  }
  for (int k = 0; k < PL_TERM_COUNT; k++) {
    out->term[k] = r->dev.class_at_peak[k];
    out->term_peak[k] = r->dev.class_peak[k];
  }
  out->state = r->dev.current; /* after the step: what the next starts on */
  out->host_pinned = r->host.peak;
  out->host_optim = host_tag(&r->host, "optim");
  out->host_sco = host_tag(&r->host, "boundary");
  /* unpinned host bytes of a rank's state: per-token loss, router biases
   * and counts (train/describe.h's host state is the pinned part) */
  out->host_rank = out->host_pinned + (size_t)f->N * 4 +
                   (size_t)f->nmoe * (size_t)f->E_route * 12;
  const int gpn = mc->gpus_per_node < c->W ? mc->gpus_per_node : c->W;
  out->host_node = (size_t)gpn * out->host_rank;
  out->N = f->N;
  if (f->nmoe) {
    out->K = r->moe_K;
    out->c_eff = r->moe_c_eff;
    out->dispatch_bound = f->chunks ? r->dispatch_bound : 0;
  }
  out->sco_layers = r->sco_layers;
  pl_train_desc *d = malloc(sizeof *d);
  if (!d)
    return pl_set_error(PL_ENOMEM, "the dry device: host");
  pl_status st =
      pl_train_describe(m, &b->lc, b->W, rank, b->S, &b->sc, mc->backend, d);
  if (st == PL_OK)
    out->params_rank = d->params_rank;
  free(d);
  return st;
}

/* steps steps of the trainer of b on dd (world dw); the last step's
 * result into *r, the trainer's facts into *f. */
static pl_status run_steps(pl_dev *dd, pl_comm *dw, const pl_model_cfg *m,
                           const pl_plan_cfg *b, int steps, pl_step_result *r,
                           dry_facts *f) {
  pl_trainer *t = NULL;
  pl_status st = pl_trainer_create(dd, dw, m, &b->lc, b->S, &b->sc, &t);
  if (st != PL_OK)
    return pl_error_prefix(st, "the dry device: building the trainer: ");
  const pl_layout_plan *p = pl_trainer_plan(t);
  *f = (dry_facts){.N = p->N, .E_route = p->E_route};
  for (int l = 0; l < m->L; l++)
    f->nmoe += pl_model_layer_is_moe(m, l);
  f->chunks = pl_moe_variant_desc_of(b->sc.dispatch)->chunks;
  /* token 0 everywhere (the routes come from the device's hook) */
  const int64_t n = pl_trainer_tokens_per_rank(t);
  const int32_t *tok = pl_plan_dry_tokens(n);
  if (!tok)
    st = PL_ENOMEM;
  else
    st = pl_dry_set_zero_tokens(dd, tok, n);
  for (int s = 0; s < steps && st == PL_OK; s++) {
    st = pl_trainer_step(t, tok, r);
    if (st != PL_OK)
      st = pl_error_prefix(st, "the dry device: step %d: ", s + 1);
  }
  pl_trainer_destroy(t);
  return st;
}

/* What the planner refuses of c before building it (the trainer's own
 * checks, train/step.c, then name the rest). */
static pl_status check_dry(const pl_plan_cfg *c) {
  if (c->system != PL_PLAN_PLATEAU)
    return pl_set_error(PL_EUNSUPPORTED,
                        "the dry device builds plateau's trainer only (not "
                        "the %s baseline)",
                        pl_plan_system_name(c->system));
  const pl_step_cfg *s = &c->sc;
  if (s->dt != PL_F32 && s->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "plan: dtype %s: f32 or bf16",
                        pl_dtype_name(s->dt));
  if (s->micro < 1)
    return pl_set_error(PL_EINVAL, "plan: micro=%d: must be >= 1", s->micro);
  if (s->moe_c < 0 || s->moe_K_max < 1)
    return pl_set_error(PL_EINVAL,
                        "plan: moe c=%lld K_max=%d: c >= 0 (0: N), K_max >= 1",
                        (long long)s->moe_c, s->moe_K_max);
  if (c->W < 1)
    return pl_set_error(PL_EINVAL, "plan: W=%d GPUs: must be >= 1", c->W);
  if (s->oo.slots < 0 || s->oo.slots > 64)
    return pl_set_error(PL_EINVAL, "plan: slots s=%d: 1..64", s->oo.slots);
  const pl_head_ops *h = s->head ? s->head : &pl_head_ring;
  if (h != &pl_head_ring && h != &pl_head_fused)
    return pl_set_error(PL_EUNSUPPORTED,
                        "plan: head '%s': the planner models the built-in "
                        "heads ring and fused",
                        h->name);
  return PL_OK;
}

/* A phase of the dry step ended: gathered into its bin. */
static void watch(void *ctx, const pl_mem_phase *ended, size_t high) {
  pl__bins_phase(ctx, ended->what, ended->layer, high);
}

pl_status pl_plan_dry_beyond_reach(pl_status st) {
  return st == PL_ENOMEM
             ? pl_error_prefix(PL_EINFEASIBLE,
                               "does not fit: its step asks for more than a "
                               "dry device can even reserve: ")
             : st;
}

/* The dry device of a measurement: its routes balanced, skewed by c's imb
 * toward the rank measured (the router's imbalance: what the dispatch makes
 * of it is measured), or adversarial. */
static pl_status dry_device(const pl_model_cfg *m, const pl_plan_cfg *c,
                            const pl_plan_cfg *b, const pl_plan_machine *mc,
                            int rank, pl_plan_routes routes, pl_dev **dd) {
  if (routes == PL_PLAN_ROUTES_BALANCED && c->imb > 1 && m->E > 0) {
    pl_layout_plan lp;
    PL_TRY(pl_layout_plan_make(m, &b->lc, b->W, 0, b->S, &lp));
    return pl_plan_dry_device_skewed(mc->backend, (size_t)mc->hbm_bytes, lp.Ep,
                                     c->imb, dd);
  }
  return pl_plan_dry_device_routed(mc->backend, (size_t)mc->hbm_bytes, rank,
                                   routes, dd);
}

/* One measurement of b (built for c) on a dry device with routes, the
 * last of steps steps: the pl_plan_mem of rank into *mem, the raw peaks and
 * tags into *dm (NULL: not wanted). */
static pl_status measure(const pl_model_cfg *m, const pl_plan_cfg *c,
                         const pl_plan_cfg *b, const pl_plan_machine *mc,
                         int rank, pl_plan_routes routes, int steps,
                         pl_plan_mem *mem, pl_plan_dry_mem *dm) {
  pl_dev *dd = NULL;
  pl_comm *dw = NULL;
  PL_TRY(dry_device(m, c, b, mc, rank, routes, &dd));
  pl_status st =
      pl_mem_set_classes(dd, PL_ARENA_DEVICE, PL_TERM_COUNT, term_of, NULL);
  pl__bins bins;
  pl__bins_init(&bins, m->L);
  pl_mem_watch_phases(dd, watch, &bins);
  if (st == PL_OK) /* a world of one without MPI: any thread may measure */
    st = pl_comm_virtual(dd, 1, &dw);
  pl_step_result *r = calloc(1, sizeof *r);
  dry_facts f = {0};
  if (st == PL_OK && !r)
    st = pl_set_error(PL_ENOMEM, "the dry device: host");
  if (st == PL_OK) /* the step's own running out: a verdict */
    st = pl_plan_dry_beyond_reach(run_steps(dd, dw, m, b, steps, r, &f));
  if (st == PL_OK) /* before the device (its tag names) goes */
    st = fill_mem(m, c, b, mc, rank, r, &f, mem);
  if (st == PL_OK)
    memcpy(mem->layer_high, bins.high, sizeof mem->layer_high);
  if (st == PL_OK && dm)
    copy_stats(r, dm);
  free(r);
  if (dw)
    pl_comm_destroy(dw);
  pl_dev_destroy(dd);
  return st;
}

/* dev_worst and layer_high_worst: the device peak of c measured under
 * adversarial routes, the worst case the bound describes: every source's
 * routes to this rank's experts and kept there (LLEP would spread them: its
 * plan is what the routes do, the bound what any routes could). */
static pl_status measure_worst(const pl_model_cfg *m, const pl_plan_cfg *c,
                               const pl_plan_cfg *b, const pl_plan_machine *mc,
                               int rank, int steps, pl_plan_mem *out) {
  pl_plan_mem *w = malloc(sizeof *w);
  if (!w)
    return pl_set_error(PL_ENOMEM, "the dry device: host");
  pl_plan_cfg bw = *b;
  bw.sc.knobs.native = true;
  pl_status st =
      measure(m, c, &bw, mc, rank, PL_PLAN_ROUTES_ADVERSARIAL, steps, w, NULL);
  if (st == PL_OK) {
    out->dev_worst = w->dev_peak;
    memcpy(out->layer_high_worst, w->layer_high, sizeof out->layer_high_worst);
  }
  free(w);
  return st;
}

/* c's memory measured (balanced routes), with_worst: dev_worst measured
 * again under adversarial ones.  c's layout is checked on its own ranks
 * first: the rank view (b) has one, so its refusal of a group would name
 * W=1 where the run has W. */
static pl_status measure_all(const pl_model_cfg *m, const pl_plan_cfg *c,
                             const pl_plan_cfg *b, const pl_plan_machine *mc,
                             int rank, bool with_worst, int steps,
                             pl_plan_mem *out, pl_plan_dry_mem *dm) {
  if (b->W != c->W) {
    pl_layout_plan lp;
    PL_TRY(pl_layout_plan_make(m, &c->lc, c->W, 0, c->S, &lp));
  }
  PL_TRY(measure(m, c, b, mc, rank, PL_PLAN_ROUTES_BALANCED, steps, out, dm));
  return with_worst ? measure_worst(m, c, b, mc, rank, steps, out) : PL_OK;
}

pl_status pl__plan_memory_dry_worst(const pl_model_cfg *m, const pl_plan_cfg *c,
                                    const pl_plan_machine *mc, int rank,
                                    pl_plan_mem *out) {
  PL_TRY(check_dry(c));
  const pl_plan_cfg b = pl_plan_rank_view_cfg(c);
  return measure_worst(m, c, &b, mc, rank < 0 ? 0 : rank, DRY_STEPS, out);
}

pl_status pl__plan_memory_dry_steps(const pl_model_cfg *m, const pl_plan_cfg *c,
                                    const pl_plan_machine *mc, int rank,
                                    bool with_worst, int steps,
                                    pl_plan_mem *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(check_dry(c));
  const pl_plan_cfg b = pl_plan_rank_view_cfg(c);
  return measure_all(m, c, &b, mc, rank < 0 ? 0 : rank, with_worst, steps, out,
                     NULL);
}

pl_status pl__plan_memory_dry(const pl_model_cfg *m, const pl_plan_cfg *c,
                              const pl_plan_machine *mc, int rank,
                              bool with_worst, pl_plan_mem *out) {
  return pl__plan_memory_dry_steps(m, c, mc, rank, with_worst, DRY_STEPS, out);
}

/* Ranks differ only in their vocabulary shard (pl_ce_shard: rank 0's is
 * the widest, so its head unit and gradient are the largest): the rank
 * measured is rank 0, the others refused. */
pl_status pl__plan_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                          const pl_plan_machine *mc, int rank, bool with_worst,
                          pl_plan_mem *out) {
  memset(out, 0, sizeof *out);
  if (rank > 0)
    return pl_set_error(PL_EUNSUPPORTED,
                        "plan: rank %d: the planner measures rank 0 (the "
                        "widest vocabulary shard, the peak)",
                        rank);
  if (c->system != PL_PLAN_PLATEAU)
    return pl_plan_dry_measure(m, c, mc, out); /* its verdicts its own */
  return pl__plan_memory_dry(m, c, mc, 0, with_worst, out);
}

pl_status pl_plan_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                         const pl_plan_machine *mc, int rank,
                         pl_plan_mem *out) {
  return pl__plan_memory(m, c, mc, rank, true, out);
}

/* A system the engine does not own (the FSDP2 baseline): its measurement
 * through the hook it registered (mem_hook.c), the raw peaks from it. */
static pl_status measure_hooked(const pl_model_cfg *m, const pl_plan_cfg *c,
                                const pl_plan_machine *mc,
                                pl_plan_dry_mem *out) {
  PL_TRY(pl_plan_dry_measure(m, c, mc, &out->mem));
  const pl_plan_mem *pm = &out->mem;
  out->dev_peak = pm->dev_peak;
  out->host_peak = pm->host_pinned;
  out->n_tags = pm->n_tags;
  for (int i = 0; i < pm->n_tags; i++) {
    snprintf(out->tags[i].tag, sizeof out->tags[i].tag, "%s",
             pm->tag_peak[i].tag);
    out->tags[i].peak = pm->tag_peak[i].bytes;
    out->tags[i].at_peak = pl_plan_mem_tag(pm, pm->tag_peak[i].tag);
  }
  return PL_OK;
}

pl_status pl_plan_memory_dry(const pl_model_cfg *m, const pl_plan_cfg *c,
                             const pl_plan_machine *mc, bool with_worst,
                             pl_plan_cfg *built, pl_plan_dry_mem *out) {
  memset(out, 0, sizeof *out);
  *built = pl_plan_rank_view_cfg(c);
  const uint64_t t0 = pl_now_ns();
  if (c->system != PL_PLAN_PLATEAU) {
    pl_status st = measure_hooked(m, c, mc, out);
    if (st == PL_OK)
      out->steps = HOOK_STEPS;
    out->seconds = pl_elapsed_s(t0);
    return st;
  }
  PL_TRY(check_dry(c));
  pl_status st =
      measure_all(m, c, built, mc, 0, with_worst, DRY_STEPS, &out->mem, out);
  if (st == PL_OK)
    out->steps = DRY_STEPS;
  out->seconds = pl_elapsed_s(t0);
  return st;
}

/* ---- two memories field by field -------------------------------------- */

typedef struct diffs {
  char (*lines)[PL_PLAN_DIFF_LEN];
  int n, max;
} diffs;

static void differ(diffs *d, const char *field, double a, double b) {
  if (a == b)
    return;
  if (d->n < d->max)
    snprintf(d->lines[d->n], PL_PLAN_DIFF_LEN, "%s: %.0f / %.0f", field, a, b);
  d->n++;
}

/* Every tag of x, in y by name: its bytes at the peak and own peak. */
static void tags_differ(diffs *d, const pl_plan_mem *x, const pl_plan_mem *y,
                        bool x_first) {
  for (int i = 0; i < x->n_tags; i++) {
    const char *tag = x->at_peak[i].tag;
    bool seen = false;
    for (int j = 0; !x_first && j < y->n_tags; j++)
      seen = seen || !strcmp(y->at_peak[j].tag, tag);
    if (seen) /* the second pass: only tags the first did not see */
      continue;
    const size_t xa = x->at_peak[i].bytes, xp = x->tag_peak[i].bytes;
    const size_t ya = pl_plan_mem_tag(y, tag),
                 yp = pl_plan_mem_tag_peak(y, tag);
    char f[64];
    snprintf(f, sizeof f, "tag %.32s at the peak", tag);
    differ(d, f, x_first ? (double)xa : (double)ya,
           x_first ? (double)ya : (double)xa);
    snprintf(f, sizeof f, "tag %.32s own peak", tag);
    differ(d, f, x_first ? (double)xp : (double)yp,
           x_first ? (double)yp : (double)xp);
  }
}

int pl_plan_mem_diff(const pl_plan_mem *a, const pl_plan_mem *b,
                     char (*lines)[PL_PLAN_DIFF_LEN], int max) {
  diffs d = {lines, 0, max};
#define F(x) differ(&d, #x, (double)a->x, (double)b->x)
  F(dev_peak), F(dev_worst), F(peak_rank), F(state), F(host_pinned);
  F(host_optim), F(host_sco), F(host_rank), F(host_node), F(N), F(K);
  F(c_eff), F(sco_layers), F(params_rank), F(dispatch_bound);
#undef F
  if (strcmp(a->peak_phase, b->peak_phase)) {
    if (d.n < max)
      snprintf(lines[d.n], PL_PLAN_DIFF_LEN, "peak_phase: %s / %s",
               a->peak_phase, b->peak_phase);
    d.n++;
  }
  for (int k = 0; k < PL_TERM_COUNT; k++) {
    char f[48];
    snprintf(f, sizeof f, "term %s at the peak", pl_plan_term_name(k));
    differ(&d, f, (double)a->term[k], (double)b->term[k]);
    snprintf(f, sizeof f, "term %s own peak", pl_plan_term_name(k));
    differ(&d, f, (double)a->term_peak[k], (double)b->term_peak[k]);
  }
  tags_differ(&d, a, b, true);
  tags_differ(&d, b, a, false);
  return d.n;
}
