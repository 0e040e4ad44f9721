/* train_system.c — the registry of training systems `plateau bench train`
 * measures (train_system.h) and the built-in one: plateau, the composed
 * step of engine/train (step.h) with its switches from the command line.
 * A system built elsewhere (baselines/fsdp2) joins with its entry in
 * pl__train_systems. */
#include "train_system.h"

#include <string.h>

/* ---- plateau ----------------------------------------------------------------
 */
static pl_status plateau_validate(const pl_train_setup *u, int W) {
  pl_layout_plan p;
  return pl_layout_plan_make(&u->m, &u->lc, W, 0, u->S, &p);
}

static void plateau_identity(const pl_train_setup *u, pl_row *row) {
  char v[96];
  snprintf(v, sizeof v, "%s/%s/%s/sco=%s/mb%d", u->dispatch, u->head, u->optim,
           u->sco_text, u->sc.micro);
  pl_row_str(row, "variant", v);
  pl_row_str(row, "dispatch", u->dispatch);
  pl_row_str(row, "head", u->head);
  pl_row_str(row, "optim", u->optim);
  pl_row_str(row, "budget", u->sco_text);
  pl_row_i64(row, "cap", u->sc.moe_c);
}

static pl_status plateau_create(pl_dev *dev, pl_comm *world,
                                const pl_train_setup *u, void **out) {
  return pl_trainer_create(dev, world, &u->m, &u->lc, u->S, &u->sc,
                           (pl_trainer **)out);
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

static const pl_train_system plateau = {
    .name = "plateau",
    .validate = plateau_validate,
    .identity = plateau_identity,
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
};

/* ---- the registry -----------------------------------------------------------
 */
const pl_train_system *const pl__train_systems[] = {&plateau, NULL};

const pl_train_system *pl__train_system_find(const char *name) {
  for (int i = 0; name && pl__train_systems[i]; i++)
    if (!strcmp(pl__train_systems[i]->name, name))
      return pl__train_systems[i];
  return NULL;
}
