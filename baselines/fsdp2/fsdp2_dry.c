/* fsdp2_dry.c — the FSDP2 baseline's memory for the planner measured on a
 * dry device (pl_fsdp2_dry_memory, registered as the planner's dry
 * measurement of the fsdp2 system: plan.h, pl_plan_set_dry_measure).
 *
 * Why here: the planner sits below the baselines and cannot build this
 * trainer, and its FSDP2 memory is this measurement of the step itself
 * (the planner has no model of the baseline's allocations).  The baseline is
 * built for the configuration on a dry device (engine/plan/dry_dev.c: the
 * planner's backend as its flavour, its device memory, the balanced routes) and
 * stepped once (the baseline allocates its state when it is built, so a second
 * step measures the same, field by field: test_mpi_fsdp2_dry.c one_step); that
 * step's tracked peaks fill the planner's pl_plan_mem as pl_plan_memory fills
 * plateau's.  One process plays one rank: a configuration of W > 1 ranks is
 * built as the rank view of its run's rank 0 (W = 1, W_v = the run's,
 * rank_view: the CP and EP groups virtual, the router over all E experts;
 * fsdp2.h), as pl_plan_memory_dry builds plateau's: what rank 0 of the real run
 * holds under the balanced routes (test_mpi_fsdp2_rank.c), not the GPU proxy's
 * local routing.  What the tracker cannot see is modelled and named where
 * it is filled. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp2_internal.h"
#include "ops/moe.h"
#include "plan/plan.h"

/* The baseline's knobs of planner configuration b (pl_fsdp2_plan_cfg
 * inverted); PL_EUNSUPPORTED for what the baseline or the dry device does
 * not run. */
static pl_status knobs_of(const pl_plan_cfg *b, pl_fsdp2_cfg *out) {
  pl_fsdp2_cfg c = pl_fsdp2_cfg_default();
  c.cp = b->cp, c.ep = b->ep, c.W_v = b->lc.W_v, c.rank_view = b->lc.rank_view;
  c.ac = b->ac == PL_PLAN_AC_FULL        ? PL_FSDP2_AC_FULL
         : b->ac == PL_PLAN_AC_SELECTIVE ? PL_FSDP2_AC_SELECTIVE
                                         : PL_FSDP2_AC_NONE;
  c.ac_freq = b->ac_freq;
  c.optim = b->offload ? PL_FSDP2_OPTIM_CPU : PL_FSDP2_OPTIM_GPU;
  c.micro = b->sc.micro;
  c.dt = b->sc.dt;
  c.attn = b->sc.attn;
  c.moe_lanes = b->sc.moe_lanes;
  *out = c;
  return PL_OK;
}

/* The budget term of each tag the baseline allocates (the terms
 * pl_plan_fsdp2_term_formula describes, as plateau's measurement books the
 * same tags: mem_dry.c); any other tag is "other". */
static const struct {
  const char *tag;
  int term;
} tag_terms[] = {
    {"weights", PL_TERM_WEIGHTS},
    {"grads", PL_TERM_GRADS},
    {"optim", PL_TERM_OPTIM},
    {"tokens", PL_TERM_OTHER},
    {"fsdp_ag", PL_TERM_UNITS},
    {"zero3", PL_TERM_UNITS},
    {"zero3_grads", PL_TERM_UNIT_GRADS},
    {"cp_kv", PL_TERM_ATTN},
    {"cp_ring", PL_TERM_ATTN},
    {"attention", PL_TERM_ATTN},
    {"saved", PL_TERM_RESIDENT},
    {"boundary", PL_TERM_RESIDENT},
    {"activations", PL_TERM_ACTS},
    {"grads_act", PL_TERM_ACTS},
    {"router", PL_TERM_EXPERT},
    {"routing", PL_TERM_EXPERT},
    {"expert", PL_TERM_EXPERT},
    {"llep_grads", PL_TERM_EXPERT},
    {"dispatch", PL_TERM_DISPATCH},
    {"logits", PL_TERM_LOGITS},
    {"ce_state", PL_TERM_LOGITS},
};
#define N_TAG_TERMS (int)(sizeof tag_terms / sizeof tag_terms[0])

/* A tag name that outlives the device (pl_plan_mem keeps pointers): the
 * table's, else one interned here for the process's life. */
static const char *static_tag(const char *tag) {
  for (int i = 0; i < N_TAG_TERMS; i++)
    if (!strcmp(tag_terms[i].tag, tag))
      return tag_terms[i].tag;
  static char pool[PL_PLAN_MAX_TAGS][32];
  static int n;
  for (int i = 0; i < n; i++)
    if (!strcmp(pool[i], tag))
      return pool[i];
  if (n == PL_PLAN_MAX_TAGS)
    return "other";
  snprintf(pool[n], sizeof pool[n], "%s", tag);
  return pool[n++];
}

/* The tracker's class of an allocation: its tag's term (every allocation,
 * from the device's creation on). */
static int term_of(void *ctx, const char *tag, const pl_mem_phase *ph) {
  (void)ctx, (void)ph;
  for (int i = 0; i < N_TAG_TERMS; i++)
    if (!strcmp(tag_terms[i].tag, tag))
      return tag_terms[i].term;
  return PL_TERM_OTHER;
}

static size_t stat_tag(const pl_tag_bytes *l, int n, const char *tag) {
  for (int i = 0; i < n; i++)
    if (l[i].tag && !strcmp(l[i].tag, tag))
      return l[i].bytes;
  return 0;
}

/* The device tags of step r into out: each tag's bytes at the peak and own
 * peak (tags the step never held left out), and each term's bytes at the
 * peak and own peak from the tracker's classes (term_of: each tag is one
 * term). */
static void fill_tags(const pl_mem_stats *d, pl_plan_mem *out) {
  int n = 0;
  for (int i = 0; i < d->n_tags && n < PL_PLAN_MAX_TAGS; i++) {
    const char *name = d->tag_peak[i].tag;
    const size_t pk = d->tag_peak[i].bytes,
                 at = stat_tag(d->at_peak, d->n_tags, name);
    if (!pk && !at)
      continue;
    const char *tag = static_tag(name);
    out->at_peak[n] = (pl_tag_bytes){tag, at};
    out->tag_peak[n] = (pl_tag_bytes){tag, pk};
    n++;
  }
  out->n_tags = n;
  for (int k = 0; k < PL_TERM_COUNT && k < d->n_classes; k++) {
    out->term[k] = d->class_at_peak[k];
    out->term_peak[k] = d->class_peak[k];
  }
}

/* Everything but the tags from the built trainer t, its configuration c
 * (the run's) and the last step r; state: the device bytes after the first
 * step. */
static void fill_facts(const pl_fsdp2 *t, const pl_plan_cfg *c,
                       const pl_plan_machine *mc, const pl_step_result *r,
                       size_t state, pl_plan_mem *out) {
  out->dev_peak = r->dev.peak;
  /* every route local (an EP group of one member): adversarial routing is
   * the balanced; a virtual EP group's is measured apart (worst_peak) */
  out->dev_worst = r->dev.peak;
  pl_mem_phase_str(&r->dev.peak_phase, out->peak_phase, sizeof out->peak_phase);
  out->state = state;
  out->host_pinned = r->host.peak;
  const pl_mem_stats *ar =
      t->c.optim == PL_FSDP2_OPTIM_CPU ? &r->host : &r->dev;
  out->host_optim = t->c.optim == PL_FSDP2_OPTIM_CPU
                        ? stat_tag(ar->now, ar->n_tags, "weights") +
                              stat_tag(ar->now, ar->n_tags, "grads") +
                              stat_tag(ar->now, ar->n_tags, "optim")
                        : 0;
  /* the fp32 gradient shards: one element per parameter the rank updates */
  out->params_rank = (int64_t)(stat_tag(ar->now, ar->n_tags, "grads") / 4);
  out->N = t->N;
  int nmoe = 0;
  for (int l = 0; l < t->m.L; l++)
    nmoe += t->fl[l].moe;
  /* the standard dispatch: one chunk of all N tokens (ops/moe.h) */
  int K = 0;
  int64_t c_eff = 0;
  out->K = nmoe ? r->moe_K : 0;
  if (nmoe &&
      pl_moe_variant_chunking(PL_MOE_EP, t->N, 0, 0, &K, &c_eff) == PL_OK)
    out->c_eff = c_eff;
  /* unpinned host bytes are not tracked: a model of them (per-token loss
   * and batch, router biases and counts, 12 B each) */
  out->host_rank =
      out->host_pinned + (size_t)t->N * 12 + (size_t)nmoe * (size_t)t->E_r * 12;
  const int gpn = mc->gpus_per_node < c->W ? mc->gpus_per_node : c->W;
  out->host_node = (size_t)gpn * out->host_rank;
}

/* steps steps of the baseline f on its dry device; the device bytes after
 * the first (what every later step starts from) into *state, the last
 * step's result into *r.  Token 0 everywhere: a dry device computes
 * nothing, so no allocation depends on the tokens' values (the routes come
 * from its hook). */
static pl_status run_steps(pl_fsdp2 *f, int steps, size_t *state,
                           pl_step_result *r) {
  const int32_t *tok = pl_plan_dry_tokens(pl_fsdp2_tokens_per_rank(f));
  if (!tok)
    return PL_ENOMEM;
  pl_status st = PL_OK;
  for (int i = 0; i < steps && st == PL_OK; i++) {
    st = pl_fsdp2_step(f, tok, i + 1 == steps ? r : NULL);
    pl_mem_stats ms;
    if (st == PL_OK && i == 0 &&
        (st = pl_mem_stats_get(f->dev, PL_ARENA_DEVICE, &ms)) == PL_OK)
      *state = ms.current;
  }
  if (st != PL_OK)
    pl_error_prefix(st, "the dry device: a step: ");
  return st;
}

/* The baseline k built for b on a fresh dry device with routes `routes`
 * and stepped steps times; with facts, *out filled from the last step (else
 * only its device peak into *peak). */
static pl_status measure(const pl_model_cfg *m, const pl_plan_cfg *c,
                         const pl_plan_cfg *b, const pl_fsdp2_cfg *k,
                         const pl_plan_machine *mc, pl_plan_routes routes,
                         int steps, pl_plan_mem *out, size_t *peak,
                         int *ep_virtual) {
  pl_dev *dd = NULL;
  pl_comm *world = NULL, *self = NULL;
  pl_fsdp2 *f = NULL;
  pl_step_result *r = calloc(1, sizeof *r);
  if (!r)
    return pl_set_error(PL_ENOMEM, "the dry device: host");
  pl_status st = PL_OK;
  /* balanced routes skewed by imb toward the rank measured (the router's
   * imbalance, which plain EP receives), or adversarial */
  if (routes == PL_PLAN_ROUTES_BALANCED && b->imb > 1 && m->E > 0 && b->ep > 1)
    st = pl_plan_dry_device_skewed(mc->backend, (size_t)mc->hbm_bytes, b->ep,
                                   b->imb, &dd);
  else
    st = pl_plan_dry_device_routed(mc->backend, (size_t)mc->hbm_bytes, 0,
                                   routes, &dd);
  if (st != PL_OK)
    goto done;
  PL_TRY_GOTO(
      st, done,
      pl_mem_set_classes(dd, PL_ARENA_DEVICE, PL_TERM_COUNT, term_of, NULL));
  /* one rank of its own whatever the MPI world, and no MPI: a world of one
   * (a virtual group of one member), so any thread may measure */
  PL_TRY_GOTO(st, done, pl_comm_virtual(dd, 1, &world));
  PL_TRY_GOTO(st, done, pl_comm_split(world, 0, 0, &self));
  st = pl_fsdp2_create(dd, self, m, k, b->S, &f);
  if (st != PL_OK) {
    pl_error_prefix(st, "the dry device: building the FSDP2 baseline: ");
    st = pl_plan_dry_beyond_reach(st);
    goto done;
  }
  size_t state = 0;
  PL_TRY_GOTO(st, done,
              pl_plan_dry_beyond_reach(run_steps(f, steps, &state, r)));
  *peak = r->dev.peak;
  *ep_virtual = f->ep_virtual;
  if (out) {
    fill_facts(f, c, mc, r, state, out);
    fill_tags(&r->dev, out); /* before the device (its tag names) goes */
  }
done:
  free(r);
  pl_fsdp2_destroy(f);
  if (self)
    pl_comm_destroy(self);
  if (world)
    pl_comm_destroy(world);
  pl_dev_destroy(dd);
  return st;
}

pl_status pl_fsdp2_dry_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                              const pl_plan_machine *mc, pl_plan_mem *out) {
  return pl_fsdp2_dry_memory_steps(m, c, mc, 1, out);
}

pl_status pl_fsdp2_dry_memory_steps(const pl_model_cfg *m, const pl_plan_cfg *c,
                                    const pl_plan_machine *mc, int steps,
                                    pl_plan_mem *out) {
  memset(out, 0, sizeof *out);
  if (steps < 1)
    return pl_set_error(PL_EINVAL, "steps=%d: must be >= 1", steps);
  const pl_plan_cfg b = pl_plan_rank_view_cfg(c);
  pl_fsdp2_cfg k;
  PL_TRY(knobs_of(&b, &k));
  size_t peak = 0;
  int ep_virtual = 0;
  PL_TRY(measure(m, c, &b, &k, mc, PL_PLAN_ROUTES_BALANCED, steps, out, &peak,
                 &ep_virtual));
  if (!ep_virtual)
    return PL_OK;
  /* the rank view's EP group spans absent members: the worst case
   * (dev_worst), every member's routes to this rank's
   * experts (the dry device's adversarial routes: experts 0..k-1), built
   * and stepped again */
  int unused;
  return measure(m, c, &b, &k, mc, PL_PLAN_ROUTES_ADVERSARIAL, steps, NULL,
                 &out->dev_worst, &unused);
}

void pl_fsdp2_register_dry(void) {
  pl_plan_set_dry_measure(PL_PLAN_FSDP2, pl_fsdp2_dry_memory);
}
