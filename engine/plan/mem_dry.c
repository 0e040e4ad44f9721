/* mem_dry.c — the planner's memory of a configuration measured by the step
 * itself (pl_plan_memory_dry): the trainer built on a dry device and run.
 *
 * Why: the replay (mem_step.c, mem_ops.c) copies, allocation by allocation,
 * what the step does; a dry device (backend/dry, dry_dev.c) tracks what the
 * step really allocates without backing or running any of it, in about the
 * time of a replay per step.  `plateau plan --memory dry|both` asks this
 * for the configuration its search chose, so the two answers can be set
 * side by side before the replay is retired.  One process builds one rank,
 * so a configuration of several ranks is built as the rank view of its run's
 * rank 0 (every group virtual, the expert group too: train/layout.h), as
 * `plateau bench train --backend dry --preset proxy120b --rank-view` does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "plateau/timer.h"
#include "train/data.h"

/* Steps of the trainer: the second starts from what the first left (the
 * optimizer's state, the kept buffers), the state the replay assumes. */
#define DRY_STEPS 2

/* The configuration one process builds for c: c itself on one rank, else
 * the rank view of c's run (W = 1, W_v = the run's ranks). */
static pl_plan_cfg proxy_of(const pl_plan_cfg *c) {
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

/* DRY_STEPS steps of the trainer of b on dd (world dw); the last step's
 * result into *r. */
static pl_status run_steps(pl_dev *dd, pl_comm *dw, const pl_model_cfg *m,
                           const pl_plan_cfg *b, pl_step_result *r) {
  pl_trainer *t = NULL;
  pl_status st = pl_trainer_create(dd, dw, m, &b->lc, b->S, &b->sc, &t);
  if (st != PL_OK)
    return pl_error_prefix(st, "the dry device: building the trainer: ");
  pl_data *data = NULL;
  int32_t *tok = NULL;
  st = pl_data_synthetic(m->V, 9, &data);
  if (st == PL_OK) {
    tok = malloc((size_t)pl_trainer_tokens_per_rank(t) * sizeof *tok);
    if (!tok)
      st = pl_set_error(PL_ENOMEM, "the dry device: host tokens");
  }
  for (int s = 0; s < DRY_STEPS && st == PL_OK; s++) {
    st = pl_data_batch(data, pl_trainer_plan(t), b->sc.micro, s, tok);
    if (st == PL_OK)
      st = pl_trainer_step(t, tok, r);
    if (st != PL_OK)
      st = pl_error_prefix(st, "the dry device: step %d: ", s + 1);
  }
  free(tok);
  if (data)
    pl_data_close(data);
  pl_trainer_destroy(t);
  return st;
}

pl_status pl_plan_memory_dry(const pl_model_cfg *m, const pl_plan_cfg *c,
                             const pl_plan_machine *mc, pl_plan_cfg *built,
                             pl_plan_dry_mem *out) {
  memset(out, 0, sizeof *out);
  *built = proxy_of(c);
  if (c->system != PL_PLAN_PLATEAU)
    return pl_set_error(PL_EUNSUPPORTED,
                        "the dry device builds plateau's trainer only (not "
                        "the %s baseline)",
                        pl_plan_system_name(c->system));
  if (c->imb > 1)
    return pl_set_error(PL_EUNSUPPORTED,
                        "imb=%g: the dry device routes by the balanced "
                        "profile (imb 1)",
                        c->imb);
  const uint64_t t0 = pl_now_ns();
  PL_TRY(pl_init(NULL, NULL));
  if (pl_world_size() != 1)
    return pl_set_error(PL_EUNSUPPORTED,
                        "the dry device: one process builds one rank (this "
                        "is one of %d MPI ranks)",
                        pl_world_size());
  pl_dev *dd = NULL;
  pl_comm *dw = NULL;
  PL_TRY(pl_plan_dry_device(mc->backend, (size_t)mc->hbm_bytes, 0, &dd));
  pl_status st = pl_comm_world(dd, &dw);
  pl_step_result *r = calloc(1, sizeof *r);
  if (st == PL_OK && !r)
    st = pl_set_error(PL_ENOMEM, "the dry device: host");
  if (st == PL_OK)
    st = run_steps(dd, dw, m, built, r);
  if (st == PL_OK) {
    copy_stats(r, out); /* before the device (its tag names) goes */
    out->steps = DRY_STEPS;
  }
  free(r);
  if (dw)
    pl_comm_destroy(dw);
  pl_dev_destroy(dd);
  out->seconds = pl_elapsed_s(t0);
  return st;
}
