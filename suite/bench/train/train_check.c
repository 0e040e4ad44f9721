/* train_check.c — `plateau bench train --check` (train_check.h): every
 * step's loss finite, and the reference step: one forward + backward of the
 * measured system against a single-rank, unsharded plateau trainer of the same
 * model — the reference of engine/train/test_mpi_step.c (one rank, D = P = 1,
 * the fused head, the ep dispatch, no SCO, every sequence of the step as one of
 * its micro-batches) — on the same weights (the system's, gathered to full
 * tensors after its timed steps, with its router biases) and the same
 * sequences (the next step's).  Compared: the loss (relative 1e-5) and every
 * parameter's gradient gathered to the full tensor (normwise: max |a − b| ≤
 * 1e-4 · max |b|, the engine test's tolerances for f32 sums in another
 * order).
 *
 * It applies where it can: the CPU backend, f32, a real run (W_v = W: a
 * proxy's full tensors are not on the present ranks) and a small model (the
 * reference holds all of it on every rank).  Elsewhere the row's check is
 * the finite loss of every step alone, and the note says why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_check.h"

/* Parameters the reference may hold on every rank. */
#define CHECK_MAX_PARAMS 20000000

void pl__train_check_losses(const pl_step_result *res, int n, pl_check *chk) {
  int bad = -1;
  for (int k = 0; k < n && bad < 0; k++)
    if (!isfinite(res[k].loss))
      bad = k;
  pl_check_that(chk, bad < 0, "step %d: loss %g is not finite", bad + 1,
                bad < 0 ? 0.0 : res[bad].loss);
}

bool pl__train_check_applies(pl_bench_ctx *c, const pl_train_system *sys,
                             const pl_train_setup *u, char *why, size_t n) {
  const pl_model_params mp = pl_model_count(&u->m);
  const char *no = c->cuda              ? "the CUDA backend"
                   : u->sc.dt != PL_F32 ? "bf16 (the check needs f32)"
                   : u->lc.W_v && u->lc.W_v != c->size ? "a proxy (W_v > W)"
                   : mp.total > CHECK_MAX_PARAMS       ? "a model over 20M "
                                                         "parameters"
                   : !sys->gather || !sys->forward_backward
                       ? "a system without parameter access"
                       : NULL;
  if (no)
    snprintf(why, n, "reference step skipped: %s", no);
  return no == NULL;
}

/* Normwise error of a against b. */
static double normwise(const float *a, const float *b, size_t n) {
  double sc = 0, me = 0;
  for (size_t i = 0; i < n; i++)
    sc = fmax(sc, fabs(b[i]));
  for (size_t i = 0; i < n; i++) {
    const double e = fabs((double)a[i] - b[i]);
    me = e > me || isnan(e) ? e : me;
  }
  return sc > 0 ? me / sc : me;
}

/* Parameter i of the system (gathered to the full tensor) into ref. */
static pl_status copy_param(const pl_train_system *sys, void *h, int i,
                            pl_trainer *ref) {
  pl_param_info in;
  PL_TRY(sys->param_info(h, i, &in));
  float *w = malloc((size_t)(in.rows * in.cols) * 4 + 4);
  if (!w)
    return pl_set_error(PL_ENOMEM, "check: host");
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, sys->gather(h, i, false, w));
  st = pl_trainer_set(ref, i, w);
done:
  free(w);
  return st;
}

/* The reference trainer with the system's weights and router biases. */
static pl_status make_reference(pl_bench_ctx *c, const pl_train_system *sys,
                                void *h, const pl_train_setup *u, int nseq,
                                pl_comm *self, pl_trainer **out) {
  pl_step_cfg sc = u->sc;
  sc.dispatch = PL_MOE_EP;
  sc.head = &pl_head_fused;
  sc.sco = (pl_sco_budget){false, 0};
  sc.micro = nseq;
  sc.profile = false;
  const pl_layout_cfg lc = {1, 1, 0, 0, 0};
  pl_status st = pl_trainer_create(c->dev, self, &u->m, &lc, u->S, &sc, out);
  PL_TRY(pl_bench_agree(c, &st)); /* the gathers below are collective */
  for (int i = 0; i < sys->nparams(h); i++)
    PL_TRY(copy_param(sys, h, i, *out));
  for (int l = 0; l < u->m.L; l++)
    if (sys->router_bias(h, l))
      PL_TRY(pl_trainer_set_router_bias(*out, l, sys->router_bias(h, l)));
  return PL_OK;
}

/* *e: the normwise error of parameter i's gradient (n elements) against the
 * reference's. */
static pl_status grad_error(const pl_train_system *sys, void *h,
                            pl_trainer *ref, int i, size_t n, double *e) {
  float *g = malloc(n * 4 + 4), *gr = malloc(n * 4 + 4);
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              g && gr ? PL_OK : pl_set_error(PL_ENOMEM, "check: host"));
  PL_TRY_GOTO(st, done, sys->gather(h, i, true, g));
  PL_TRY_GOTO(st, done, pl_trainer_gather(ref, i, true, gr));
  *e = normwise(g, gr, n);
done:
  free(g), free(gr);
  return st;
}

static pl_status compare(pl_bench_ctx *c, const pl_train_system *sys, void *h,
                         pl_trainer *ref, pl_check *chk) {
  for (int i = 0; i < sys->nparams(h); i++) {
    pl_param_info in, ir;
    PL_TRY(sys->param_info(h, i, &in));
    PL_TRY(pl_trainer_param_info(ref, i, &ir));
    if (strcmp(in.name, ir.name) || in.rows != ir.rows || in.cols != ir.cols) {
      pl_check_that(chk, false, "parameter %d: %s vs the reference's %s", i,
                    in.name, ir.name);
      return PL_OK;
    }
    double e = 0;
    PL_TRY(grad_error(sys, h, ref, i, (size_t)(in.rows * in.cols), &e));
    chk->max_rel = fmax(chk->max_rel, e);
    pl_check_that(chk, e <= 1e-4, "gradient of %s: normwise error %.3g > 1e-4",
                  in.name, e);
  }
  return PL_OK;
}

pl_status pl__train_check_reference(pl_bench_ctx *c, const pl_train_system *sys,
                                    void *h, const pl_train_setup *u,
                                    pl_data *data, int64_t st_index,
                                    pl_check *chk) {
  const int q = sys->sequences(h);
  const int64_t S = u->S;
  int32_t *tok = malloc((size_t)sys->tokens_per_rank(h) * 4 + 4),
          *rtok = malloc((size_t)q * (size_t)(S + 1) * 4 + 4);
  pl_comm *self = NULL;
  pl_trainer *ref = NULL;
  pl_step_result ra, rr;
  /* no --mem-limit here: the limit is the measured point's */
  pl_mem_stats ms;
  pl_mem_stats_get(c->dev, PL_ARENA_DEVICE, &ms);
  pl_mem_set_limit(c->dev, PL_ARENA_DEVICE, 0);
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              tok && rtok ? PL_OK : pl_set_error(PL_ENOMEM, "check: host"));
  PL_TRY_GOTO(st, done, pl_comm_split(c->comm, c->rank, 0, &self));
  PL_TRY_GOTO(st, done, make_reference(c, sys, h, u, q, self, &ref));
  PL_TRY_GOTO(st, done, sys->batch(h, data, st_index, tok));
  for (int i = 0; i < q; i++)
    PL_TRY_GOTO(st, done,
                pl_data_read(data, st_index * q + i, S, 0, S + 1,
                             rtok + (size_t)i * (size_t)(S + 1)));
  PL_TRY_GOTO(st, done, sys->forward_backward(h, tok, &ra));
  PL_TRY_GOTO(st, done, pl_trainer_forward_backward(ref, rtok, &rr));
  const double e = fabs(ra.loss - rr.loss) / fmax(fabs(rr.loss), 1e-30);
  chk->max_rel = fmax(chk->max_rel, e);
  pl_check_that(chk, e <= 1e-5 && ra.tokens == rr.tokens,
                "loss %.9g vs the reference's %.9g (%lld vs %lld targets)",
                ra.loss, rr.loss, (long long)ra.tokens, (long long)rr.tokens);
  st = compare(c, sys, h, ref, chk);
done:
  pl_trainer_destroy(ref);
  if (self)
    pl_comm_destroy(self);
  pl_mem_set_limit(c->dev, PL_ARENA_DEVICE, ms.limit);
  free(tok), free(rtok);
  return st;
}
