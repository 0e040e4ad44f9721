/* train_system.c — the registry of training systems `plateau bench train`
 * measures (train_system.h): plateau, the composed step of engine/train
 * (step.h) with its switches from the command line, and fsdp2, the FSDP2
 * baseline (baselines/fsdp2/fsdp2.h) with its knobs (cp, ep, AC, optimizer
 * placement) — both on the same model, token stream, micro-batches, W_v,
 * dtype and seed, so their rows and reference checks compare one to one —
 * and each as the planner's configuration (plan/plan.h), so the bench can
 * predict a point before launching it and take the planner's choice. */
#include "train_system.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- plateau ----------------------------------------------------------------
 */
static pl_status plateau_validate(const pl_train_setup *u, int W) {
  pl_layout_plan p;
  return pl_layout_plan_make(&u->m, &u->lc, W, 0, u->S, &p);
}

/* The variant: dispatch/head/optim/sco=budget/mbN, and /res=R/keep=K when
 * either headroom knob was asked for (as given: auto stays auto), /ep=N
 * when --ep gave plateau's expert groups (or the planner chose them). */
static void plateau_identity(const pl_train_setup *u, pl_row *row) {
  char v[192], hr[80] = "", ep[24] = "";
  if (strcmp(u->resident_text, "0") || strcmp(u->keep_text, "0"))
    snprintf(hr, sizeof hr, "/res=%s/keep=%s", u->resident_text, u->keep_text);
  if (u->lc.Ep && u->lc.Ep != u->lc.W_v) /* given, and not the proxy's world */
    snprintf(ep, sizeof ep, "/ep=%d", u->lc.Ep);
  snprintf(v, sizeof v, "%s/%s/%s/sco=%s/mb%d%s%s", u->dispatch, u->head,
           u->optim, u->sco_text, u->sc.micro, hr, ep);
  pl_row_str(row, "variant", v);
  pl_row_str(row, "optim_resident", u->resident_text);
  pl_row_str(row, "keep", u->keep_text);
  pl_row_str(row, "dispatch", u->dispatch);
  pl_row_str(row, "head", u->head);
  pl_row_str(row, "optim", u->optim);
  pl_row_str(row, "budget", u->sco_text);
  pl_row_i64(row, "cap", u->sc.moe_c);
  pl_row_i64(row, "P", u->lc.P);
}

static pl_status plateau_create(pl_dev *dev, pl_comm *world,
                                const pl_train_setup *u, void **out) {
  return pl_trainer_create(dev, world, &u->m, &u->lc, u->S, &u->sc,
                           (pl_trainer **)out);
}

static int plateau_seq_ranks(const pl_train_setup *u) {
  return u->lc.D;
}

static void plateau_destroy(void *h) {
  pl_trainer_destroy(h);
}

static int64_t plateau_tokens(const void *h) {
  return pl_trainer_tokens_per_rank(h);
}

static pl_status plateau_batch(void *h, pl_data *d, int64_t st,
                               int32_t *tokens) {
  pl_trainer *t = h;
  const pl_layout_plan *p = pl_trainer_plan(t);
  return pl_data_batch(d, p, (int)(pl_trainer_tokens_per_rank(t) / (p->N + 1)),
                       st, tokens);
}

static pl_status plateau_step(void *h, const int32_t *tokens,
                              pl_step_result *r) {
  return pl_trainer_step(h, tokens, r);
}

static void plateau_result(void *h, const pl_step_result *r, pl_row *row) {
  const pl_layout_plan *p = pl_trainer_plan(h);
  if (p->ep_grouped) /* expert groups smaller than the world */
    pl_row_i64(row, "ep", p->Ep);
  pl_row_i64(row, "selected", r->sco_layers);
  if (r->moe_K > 0)
    pl_row_i64(row, "K", r->moe_K);
}

static pl_status plateau_describe(const pl_train_setup *u, int W, int rank,
                                  pl_backend be, pl_train_desc *out) {
  return pl_train_describe(&u->m, &u->lc, W, rank, u->S, &u->sc, be, out);
}

static int plateau_sequences(const void *h) {
  const pl_layout_plan *p = pl_trainer_plan(h);
  return (int)(pl_trainer_tokens_per_rank(h) / (p->N + 1)) * p->n_groups;
}

static pl_status plateau_fb(void *h, const int32_t *tokens, pl_step_result *r) {
  return pl_trainer_forward_backward(h, tokens, r);
}

static int plateau_nparams(const void *h) {
  return pl_trainer_nparams(h);
}

static pl_status plateau_param_info(const void *h, int i, pl_param_info *out) {
  return pl_trainer_param_info(h, i, out);
}

static pl_status plateau_gather(void *h, int i, bool grad, float *out) {
  return pl_trainer_gather(h, i, grad, out);
}

static const float *plateau_bias(const void *h, int l) {
  return pl_trainer_router_bias(h, l);
}

/* The planner models the built-in heads ring and fused (a baseline head:
 * no prediction). */
static pl_status plateau_plan(const pl_train_setup *u, int W,
                              pl_plan_cfg *out) {
  *out = pl_plan_cfg_plateau(W, u->S);
  out->lc = u->lc;
  out->sc = u->sc;
  const pl_head_ops *h = u->sc.head ? u->sc.head : &pl_head_ring;
  if (h != &pl_head_ring && h != &pl_head_fused)
    return pl_set_error(PL_EUNSUPPORTED,
                        "the planner models the heads ring and fused, not %s",
                        h->name);
  return PL_OK;
}

/* --head fixes P (fused is P = 1; the search sets the head by P). */
static void plateau_free(const pl_args *a, pl_plan_free *fr) {
  memset(fr, 0, sizeof *fr);
  fr->D = !pl_args_given(a, "D");
  fr->P = !pl_args_given(a, "P") && !pl_args_given(a, "head");
  fr->c = !pl_args_given(a, "chunk-cap");
  fr->beta = !pl_args_given(a, "bucket");
  fr->sco = !pl_args_given(a, "sco-budget");
  fr->optim = !pl_args_given(a, "optim");
  fr->ep = !pl_args_given(a, "ep");
  /* the headroom: free unless a budget is given (auto is free) */
  const char *r = pl_args_str(a, "optim-resident"), *k = pl_args_str(a, "keep");
  fr->resident = !pl_args_given(a, "optim-resident") || !strcmp(r, "auto");
  fr->keep = !pl_args_given(a, "keep") || !strcmp(k, "auto");
}

static void plateau_apply(const pl_plan_cfg *c, pl_train_setup *u) {
  u->lc.D = c->lc.D, u->lc.P = c->lc.P, u->lc.Ep = c->lc.Ep;
  u->sc.head = c->sc.head, u->sc.moe_c = c->sc.moe_c;
  u->sc.oo.bucket = c->sc.oo.bucket, u->sc.sco = c->sc.sco;
  u->sc.optim = c->sc.optim, u->sc.micro = c->sc.micro;
  u->sc.oo.resident_all = c->sc.oo.resident_all;
  u->sc.oo.resident_bytes = c->sc.oo.resident_bytes;
  u->sc.keep = c->sc.keep;
  /* a headroom knob the plan filled reads auto (a given budget is kept) */
  if ((c->sc.oo.resident_all || c->sc.oo.resident_bytes) &&
      !strcmp(u->resident_text, "0"))
    snprintf(u->resident_text, sizeof u->resident_text, "auto");
  if ((c->sc.keep.mode != PL_KEEP_BYTES || c->sc.keep.bytes) &&
      !strcmp(u->keep_text, "0"))
    snprintf(u->keep_text, sizeof u->keep_text, "auto");
  u->head = c->sc.head ? c->sc.head->name : pl_head_name_ring;
  u->optim = c->sc.optim ? c->sc.optim->name : pl_optim_name_stream;
  if (c->sc.sco.all)
    snprintf(u->sco_text, sizeof u->sco_text, "all");
  else
    snprintf(u->sco_text, sizeof u->sco_text, "%llu",
             (unsigned long long)c->sc.sco.bytes);
}

static const pl_train_system plateau = {
    .name = PL_PLAN_NAME_PLATEAU,
    .validate = plateau_validate,
    .identity = plateau_identity,
    .seq_ranks = plateau_seq_ranks,
    .create = plateau_create,
    .destroy = plateau_destroy,
    .tokens_per_rank = plateau_tokens,
    .batch = plateau_batch,
    .step = plateau_step,
    .result = plateau_result,
    .describe = plateau_describe,
    .sequences = plateau_sequences,
    .forward_backward = plateau_fb,
    .nparams = plateau_nparams,
    .param_info = plateau_param_info,
    .gather = plateau_gather,
    .router_bias = plateau_bias,
    .plan = plateau_plan,
    .plan_free = plateau_free,
    .plan_apply = plateau_apply,
};

/* ---- fsdp2 ------------------------------------------------------------------
 * The handle keeps the world size and the configuration beside the trainer:
 * a step's sequences are micro · W / cp (pl_fsdp2_batch). */
typedef struct f2_handle {
  pl_fsdp2 *t;
  pl_fsdp2_cfg c;
  int W;
} f2_handle;

pl_fsdp2_cfg pl__train_fsdp2_cfg(const pl_train_setup *u) {
  pl_fsdp2_cfg c = pl_fsdp2_cfg_default();
  c.hp = u->sc.hp; /* --lr and its schedule: one AdamW for both systems */
  c.cp = u->f2.cp, c.ep = u->f2.ep;
  c.ac = u->f2.ac, c.ac_freq = u->f2.ac_freq;
  c.optim = u->f2.optim;
  c.micro = u->sc.micro;
  c.W_v = u->lc.W_v;
  c.rank_view = u->lc.rank_view; /* --rank-view: the EP group virtual too */
  c.dt = u->sc.dt;
  c.seed = u->sc.seed;
  c.profile = u->sc.profile;
  c.moe_lanes = u->sc.moe_lanes;
  return c;
}

/* A context the load-balanced split cannot cut (S not a multiple of 2·cp)
 * is this point's infeasibility; every other refusal is a usage error. */
static pl_status fsdp2_validate(const pl_train_setup *u, int W) {
  const pl_fsdp2_cfg c = pl__train_fsdp2_cfg(u);
  const int Wv = c.W_v ? c.W_v : W;
  const bool cp_ok =
      c.cp > 1 && (W % c.cp == 0 || (Wv % W == 0 && Wv % (W * c.cp) == 0));
  if (cp_ok && u->S >= 1 && u->S % (2 * c.cp))
    return pl_set_error(PL_EINFEASIBLE,
                        "fsdp2: S=%lld over cp=%d: the load-balanced split "
                        "needs S divisible by 2·cp = %d",
                        (long long)u->S, c.cp, 2 * c.cp);
  return pl_fsdp2_check(&u->m, &c, W, u->S);
}

static void fsdp2_identity(const pl_train_setup *u, pl_row *row) {
  const pl_fsdp2_cfg c = pl__train_fsdp2_cfg(u);
  char v[96];
  pl_fsdp2_cfg_name(&c, v, sizeof v);
  pl_row_str(row, "variant", v);
  pl_row_str(row, "dispatch", "ep"); /* the standard all-to-all */
  pl_row_str(row, "head", "dense");  /* dense CE on the full logits */
  pl_row_str(row, "optim", pl_fsdp2_optim_name(c.optim));
  pl_row_i64(row, "cp", c.cp);
  pl_row_i64(row, "ep", c.ep);
  pl_row_str(row, "ac", pl_fsdp2_ac_name(c.ac));
  if (c.ac == PL_FSDP2_AC_SELECTIVE && c.ac_freq && c.ac_freq != 2)
    pl_row_note(row, "ac_freq %d", c.ac_freq);
}

static int fsdp2_seq_ranks(const pl_train_setup *u) {
  return u->f2.cp;
}

static pl_status fsdp2_create(pl_dev *dev, pl_comm *world,
                              const pl_train_setup *u, void **out) {
  f2_handle *h = calloc(1, sizeof *h);
  if (!h)
    return pl_set_error(PL_ENOMEM, "fsdp2: host");
  h->c = pl__train_fsdp2_cfg(u);
  h->W = pl_comm_size(world);
  pl_status st = pl_fsdp2_create(dev, world, &u->m, &h->c, u->S, &h->t);
  if (st != PL_OK) {
    free(h);
    return st;
  }
  *out = h;
  return PL_OK;
}

static void fsdp2_destroy(void *h) {
  f2_handle *x = h;
  pl_fsdp2_destroy(x->t);
  free(x);
}

static int64_t fsdp2_tokens(const void *h) {
  return pl_fsdp2_tokens_per_rank(((const f2_handle *)h)->t);
}

static pl_status fsdp2_batch(void *h, pl_data *d, int64_t st, int32_t *tok) {
  return pl_fsdp2_batch(((f2_handle *)h)->t, d, st, tok);
}

static pl_status fsdp2_step(void *h, const int32_t *tok, pl_step_result *r) {
  return pl_fsdp2_step(((f2_handle *)h)->t, tok, r);
}

static void fsdp2_result(void *h, const pl_step_result *r, pl_row *row) {
  if (r->moe_K > 0)
    pl_row_i64(row, "K", r->moe_K);
}

static int fsdp2_sequences(const void *h) {
  const f2_handle *x = h;
  return x->c.micro * (x->W % x->c.cp ? x->W : x->W / x->c.cp); /* virtual:
                                                      a sequence per rank */
}

static pl_status fsdp2_fb(void *h, const int32_t *tok, pl_step_result *r) {
  return pl_fsdp2_forward_backward(((f2_handle *)h)->t, tok, r);
}

static int fsdp2_nparams(const void *h) {
  return pl_fsdp2_nparams(((const f2_handle *)h)->t);
}

static pl_status fsdp2_param_info(const void *h, int i, pl_param_info *out) {
  return pl_fsdp2_param_info(((const f2_handle *)h)->t, i, out);
}

static pl_status fsdp2_gather(void *h, int i, bool grad, float *out) {
  return pl_fsdp2_gather(((f2_handle *)h)->t, i, grad, out);
}

static const float *fsdp2_bias(const void *h, int l) {
  return pl_fsdp2_router_bias(((const f2_handle *)h)->t, l);
}

static pl_status fsdp2_plan(const pl_train_setup *u, int W, pl_plan_cfg *out) {
  const pl_fsdp2_cfg c = pl__train_fsdp2_cfg(u);
  *out = pl_fsdp2_plan_cfg(&u->m, &c, W, u->S);
  return PL_OK;
}

static void fsdp2_free(const pl_args *a, pl_plan_free *fr) {
  memset(fr, 0, sizeof *fr);
  fr->cp = !pl_args_given(a, "cp");
  fr->ep = !pl_args_given(a, "ep");
  fr->ac = !pl_args_given(a, "ac");
  fr->offload = !pl_args_given(a, "fsdp2-optim");
}

static void fsdp2_apply(const pl_plan_cfg *c, pl_train_setup *u) {
  u->f2.cp = c->cp, u->f2.ep = c->ep;
  u->f2.ac = c->ac == PL_PLAN_AC_FULL        ? PL_FSDP2_AC_FULL
             : c->ac == PL_PLAN_AC_SELECTIVE ? PL_FSDP2_AC_SELECTIVE
                                             : PL_FSDP2_AC_NONE;
  u->f2.optim = c->offload ? PL_FSDP2_OPTIM_CPU : PL_FSDP2_OPTIM_GPU;
  u->sc.micro = c->sc.micro;
}

static const pl_train_system fsdp2 = {
    .name = PL_PLAN_NAME_FSDP2,
    .validate = fsdp2_validate,
    .identity = fsdp2_identity,
    .seq_ranks = fsdp2_seq_ranks,
    .create = fsdp2_create,
    .destroy = fsdp2_destroy,
    .tokens_per_rank = fsdp2_tokens,
    .batch = fsdp2_batch,
    .step = fsdp2_step,
    .result = fsdp2_result,
    .describe = NULL, /* no pl_train_desc of the baseline: bound_bytes - */
    .sequences = fsdp2_sequences,
    .forward_backward = fsdp2_fb,
    .nparams = fsdp2_nparams,
    .param_info = fsdp2_param_info,
    .gather = fsdp2_gather,
    .router_bias = fsdp2_bias,
    .plan = fsdp2_plan,
    .plan_free = fsdp2_free,
    .plan_apply = fsdp2_apply,
};

/* ---- the registry -----------------------------------------------------------
 */
const pl_train_system *const pl__train_systems[] = {&plateau, &fsdp2, NULL};

const pl_train_system *pl__train_system_find(const char *name) {
  for (int i = 0; name && pl__train_systems[i]; i++)
    if (!strcmp(pl__train_systems[i]->name, name))
      return pl__train_systems[i];
  return NULL;
}
