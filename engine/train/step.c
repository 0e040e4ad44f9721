/* step.c — the training step of a trainer (train/step.h): one micro-batch
 * (embedding, the checkpointed decoder layers with SCO, the head, backward),
 * the step's forward + backward over its micro-batches, the optimizer and the
 * router-bias update, and runs of steps, with the time and memory of each step.
 * The per-layer schedule and the head phase are in step_layer.c, building a
 * trainer in step_build.c, parameter access in step_params.c (step_internal.h),
 * the configuration in step_cfg.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dry/dry.h"
#include "core/internal.h"
#include "model/embedding_internal.h"
#include "model/router.h"
#include "train/data.h"
#include "train/step_internal.h"

void pl_step_result_other(pl_step_result *r) {
  double in = 0;
  for (int i = PL_PART_ATTENTION; i <= PL_PART_OPTIM; i++)
    in += r->part_ms[i];
  in += r->standin_ms;
  r->part_ms[PL_PART_OTHER] = r->time_ms > in ? r->time_ms - in : 0;
}

/* ---- the step
 * ---------------------------------------------------------------------- */

/* One micro-batch.  Between the embedding's collectives and the runner's
 * layers, a rank that failed skips its own part up to the next agreement
 * (pl__step_agree), never the agreement: before the layers, before the
 * embedding's gradient reduction, and at the end (the next micro-batch's or
 * the step's collectives follow). */
static pl_status micro_batch(pl_trainer *t, const int32_t *tok,
                             double *nll_sum) {
  pl_stream *s = pl_dev_stream(t->dev);
  const int64_t N = t->N, H = t->H;
  pl_dev *dev = t->dev;
  void *x0 = NULL, *dx0 = NULL, *E;
  float *gE;
  double loss = 0;
  pl_mem_phase_set(dev, "embedding", -1, NULL);
  PL_TRY(pl_memcpy_async(s, t->d_tok, tok, (size_t)N * 4));
  PL_TRY(pl_memcpy_async(s, t->d_tgt, tok + 1, (size_t)N * 4));
  /* the embedding: gathered, rows copied, freed (the first layer's unit
   * prefetched meanwhile) */
  PL_TRY(pl_zero3_acquire(t->units, t->u_emb, s, &E));
  PL_TRY(pl_zero3_prefetch(t->units, 1, s));
  bool held = true; /* the embedding's unit, until its rows are copied */
  pl_ckpt_head head = {pl__step_head_run, t};
  pl_status st =
      pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * H) * t->elem_bytes,
                     "activations", s, &x0);
  if (st == PL_OK)
    st = pl__embedding_fwd(s, x0, E, t->d_tok, N, H, t->dt);
  if (st == PL_OK) {
    pl_zero3_release(t->units, t->u_emb, s);
    held = false;
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * H) * t->elem_bytes,
                        "activations", s, &dx0);
  }
  PL_TRY_GOTO(st, done, pl__step_agree(t, st, "the layers", -1));
  st = pl_ckpt_step_head(t->ckpt, t->sco, x0, &head, dx0, N, &loss);
  if (st == PL_OK) {
    pl_free_async(dev, x0, s);
    x0 = NULL;
  }
  /* the embedding's gradient: rows added into the unit's full f32 gradient */
  pl_mem_phase_set(dev, "embedding backward", -1, NULL);
  if (st == PL_OK)
    st = pl_zero3_grad_acquire(t->units, t->u_emb, s, &gE);
  if (st == PL_OK)
    st = pl__embedding_bwd(s, gE, dx0, t->d_tok, N, H, t->dt);
  PL_TRY_GOTO(st, done,
              pl__step_agree(t, st, "the embedding's gradient reduction", -1));
  st = pl_zero3_grad_reduce(t->units, t->u_emb, s, t->micro_i > 0);
  st = pl__step_agree(t, st, "the end of the micro-batch", -1);
done:
  if (held)
    pl_zero3_release(t->units, t->u_emb, s);
  pl_free_async(dev, x0, s);
  pl_free_async(dev, dx0, s);
  *nll_sum += loss;
  return st;
}

static void mem_stats(pl_trainer *t, pl_step_result *r) {
  pl_mem_stats_get(t->dev, PL_ARENA_DEVICE, &r->dev);
  pl_mem_stats_get(t->dev, PL_ARENA_HOST, &r->host);
}

/* The parts after the device has finished: spans, zero3 and SCO streams;
 * the attention spans cover whole layers: the FFN slot's time inside is
 * moved to moe. */
static pl_status take_parts(pl_trainer *t, pl_step_result *r) {
  double part[PL_PART_COUNT] = {0};
  PL_TRY(pl_timeline_take(&t->tline, part));
  part[PL_PART_ATTENTION] -= part[PL_PART_MOE];
  pl_zero3_stats zs;
  PL_TRY(pl_zero3_take_stats(t->units, &zs));
  part[PL_PART_ZERO3] = zs.gather_ms + zs.reduce_ms;
  if (t->expert_units) {
    PL_TRY(pl_zero3_take_stats(t->expert_units, &zs));
    part[PL_PART_EXPERT_UNITS] = zs.gather_ms + zs.reduce_ms;
  }
  /* virtual groups: the stand-ins apart from the part they ran in */
  pl_stream *s = pl_dev_stream(t->dev);
  double on[2] = {0, 0}, side[2] = {0, 0};
  if (t->lay->sp)
    PL_TRY(pl_comm_take_standin_ms(t->lay->sp, s, &on[0], &side[0]));
  PL_TRY(pl_comm_take_standin_ms(t->lay->vp, s, &on[1], &side[1]));
  part[PL_PART_ATTENTION] -= on[0];
  part[PL_PART_HEAD] -= on[1];
  r->standin_ms += on[0] + on[1];
  r->standin_side_ms += side[0] + side[1];
  for (int i = 0; i < PL_PART_COUNT; i++)
    r->part_ms[i] += part[i];
  return PL_OK;
}

pl_status pl_trainer_forward_backward(pl_trainer *t, const int32_t *tokens,
                                      pl_step_result *res) {
  pl_step_result local;
  pl_step_result *r = res ? res : &local;
  memset(r, 0, sizeof *r);
  const uint64_t t0 = pl_now_ns();
  const int64_t N = t->N, per = N + 1;
  pl_stream *s = pl_dev_stream(t->dev);
  /* the tokens: every input in [0, V) (it indexes the embedding); the
   * ignore index only where a token is a target and no input, the last of
   * a micro-batch's N + 1 */
  int64_t T = 0, bad = -1;
  /* tokens a dry device knows are zeros: their range without reading them */
  const bool zeros =
      pl_dry_zero_tokens(t->dev, tokens, (int64_t)t->cfg.micro * per);
  for (int mi = 0; mi < t->cfg.micro && bad < 0; mi++) {
    /* the inputs' range first (one pass the compiler vectorizes): when every
     * input is in [0, V), none is the ignore index, so the targets are
     * positions 1..N-1 and the last unless it is ignored */
    const int32_t *tk = tokens + mi * per;
    int32_t lo = 0, hi = 0;
    const int64_t M = zeros ? 0 : N; /* the inputs read */
    if (M > 0)
      lo = hi = tk[0];
#pragma omp simd reduction(min : lo) reduction(max : hi)
    for (int64_t i = 1; i < M; i++) {
      lo = tk[i] < lo ? tk[i] : lo;
      hi = tk[i] > hi ? tk[i] : hi;
    }
    const int32_t last = zeros ? 0 : tk[N];
    if (lo >= 0 && (int64_t)hi < t->model.V &&
        ((last >= 0 && last < t->model.V) || last == PL_CE_IGNORE_INDEX)) {
      T += (N > 0 ? N - 1 : 0) + (N > 0 && last != PL_CE_IGNORE_INDEX);
      continue;
    }
    for (int64_t i = 0; i < per && bad < 0; i++) { /* the first bad one */
      const int32_t v = tk[i];
      if (!((v >= 0 && v < t->model.V) || (i == N && v == PL_CE_IGNORE_INDEX)))
        bad = mi * per + i;
    }
  }
  int64_t flags[2] = {bad >= 0, T};
  PL_TRY(pl_host_allreduce_i64(t->world, flags, 1, PL_RED_MAX));
  PL_TRY(pl_host_allreduce_i64(t->world, flags + 1, 1, PL_RED_SUM));
  if (flags[0])
    return bad >= 0
               ? pl_set_error(PL_EINVAL,
                              "trainer: token at micro-batch %lld, position "
                              "%lld is %d: must be in [0, V=%lld) (the "
                              "ignore index %d only at position N=%lld, a "
                              "target and no input)",
                              (long long)(bad / per), (long long)(bad % per),
                              tokens[bad], (long long)t->model.V,
                              PL_CE_IGNORE_INDEX, (long long)N)
               : pl_set_error(PL_EINVAL,
                              "trainer: another rank passed an invalid token");
  T = flags[1];
  PL_TRY(pl_dev_sync(t->dev));
  pl_mem_phase_set(t->dev, "states", -1, NULL); /* what the step starts on */
  pl_mem_reset_peak(t->dev, PL_ARENA_DEVICE);
  pl_mem_reset_peak(t->dev, PL_ARENA_HOST);
  pl_timeline_clear(&t->tline);
  pl_zero3_stats zs;
  PL_TRY(pl_zero3_take_stats(t->units, &zs));
  if (t->expert_units)
    PL_TRY(pl_zero3_take_stats(t->expert_units, &zs));
  for (int l = 0; l < t->model.L; l++)
    for (int j = 0; t->layers[l].moe && !t->expert_units && j < 3; j++)
      PL_TRY(pl_fill(
          s, t->layers[l].eg[j], PL_F32,
          (size_t)t->plan.E_local * (size_t)(t->model.H * t->model.I), 0.0));
  PL_TRY(
      pl_fill(s, t->d_dloss, PL_F32, (size_t)N, T > 0 ? 1.0 / (double)T : 0.0));
  double nll = 0, sco_ms = 0;
  for (t->micro_i = 0; t->micro_i < t->cfg.micro; t->micro_i++) {
    PL_TRY(micro_batch(t, tokens + (int64_t)t->micro_i * per, &nll));
    double d2h, h2d;
    pl_ckpt_copy_ms(t->ckpt, &d2h, &h2d);
    sco_ms += d2h + h2d;
  }
  pl_status st = pl_zero3_sync(t->units, s);
  if (st == PL_OK && t->expert_units)
    st = pl_zero3_sync(t->expert_units, s);
  if (st == PL_OK)
    st = pl_dev_sync(t->dev);
  PL_TRY(pl__step_agree(t, st, "the loss's all-reduce", -1));
  PL_TRY(pl_host_allreduce_f64(t->world, &nll, 1, PL_RED_SUM));
  r->step = t->step_no + 1;
  r->loss = T > 0 ? nll / (double)T : NAN;
  r->tokens = T;
  r->sco_layers = pl_sco_count(t->sco);
  for (int l = 0; l < t->model.L; l++) {
    const pl__tlayer *x = &t->layers[l];
    if (!x->moe)
      continue;
    const size_t b = pl_moe_dispatch_bound(pl_moe_get_cfg(t->moe),
                                           t->plan.ep_span, x->ffn.stats.c_eff);
    if (b > r->dispatch_bound)
      r->dispatch_bound = b;
    r->moe_K = x->ffn.stats.K;
    r->moe_c_eff = x->ffn.stats.c_eff;
    r->moe_spilled += x->ffn.stats.n_spilled;
    if (x->ffn.stats.imb_native > r->moe_imbalance)
      r->moe_imbalance = x->ffn.stats.imb_native;
  }
  if (t->cfg.profile) {
    PL_TRY(take_parts(t, r));
    r->part_ms[PL_PART_SCO] = sco_ms;
  }
  mem_stats(t, r);
  r->time_ms = pl_elapsed_s(t0) * 1e3;
  t->fb_ms = r->time_ms;
  return PL_OK;
}

/* f32 weights from the fp32 master after an update. */
static pl_status refresh_f32(pl_trainer *t) {
  pl_stream *s = pl_dev_stream(t->dev);
  for (int i = 0; i < t->nadam; i++)
    PL_TRY(pl__step_master_get(t, s, t->adam_off[i], (float *)t->adam[i].weight,
                               t->adam[i].numel));
  return pl_stream_sync(s);
}

/* The router biases from the step's global expert loads. */
static pl_status bias_update(pl_trainer *t) {
  pl_router_bias_slot *sl = malloc(((size_t)t->model.L + 1) * sizeof *sl);
  if (!sl)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  int n = 0;
  for (int l = 0; l < t->model.L; l++)
    if (t->layers[l].moe)
      sl[n++] = (pl_router_bias_slot){t->layers[l].ffn.counts,
                                      t->layers[l].hbias, t->layers[l].bias};
  /* every rank's loads (an expert group sees only its own tokens) */
  pl_status st = pl_router_bias_step(t->world, pl_dev_stream(t->dev), sl, n,
                                     t->plan.E_route, t->model.bias_gamma);
  free(sl);
  return st;
}

pl_status pl_trainer_update(pl_trainer *t, pl_step_result *res) {
  pl_step_result local;
  pl_step_result *r = res ? res : &local;
  if (!res)
    memset(r, 0, sizeof *r);
  const uint64_t t0 = pl_now_ns();
  pl_stream *s = pl_dev_stream(t->dev);
  int a, b;
  pl_mem_phase_set(t->dev, "optimizer", -1, NULL);
  PL_TRY(pl_timeline_mark(&t->tline, s, &a));
  PL_TRY(t->optim->step(t->opt, s));
  PL_TRY(pl_timeline_mark(&t->tline, s, &b));
  PL_TRY(pl_timeline_span(&t->tline, PL_PART_OPTIM, a, b));
  PL_TRY(pl_dev_sync(t->dev));
  if (t->dt == PL_F32)
    PL_TRY(refresh_f32(t));
  PL_TRY(bias_update(t));
  t->step_no++;
  r->gscale = t->optim->gscale(t->opt);
  if (t->cfg.profile)
    PL_TRY(take_parts(t, r));
  mem_stats(t, r);
  r->time_ms += pl_elapsed_s(t0) * 1e3;
  return PL_OK;
}

pl_status pl_step_run(void *trainer, int64_t tokens_per_rank,
                      pl_step_batch_fn batch, pl_step_fn step, pl_data *data,
                      int64_t first, int steps, double *losses,
                      pl_step_result *res) {
  int32_t *tok = malloc((size_t)tokens_per_rank * sizeof(int32_t));
  if (!tok)
    return pl_set_error(PL_ENOMEM, "trainer: host tokens");
  pl_status st = PL_OK;
  for (int i = 0; i < steps; i++) {
    pl_step_result r;
    PL_TRY_GOTO(st, done, batch(trainer, data, first + i, tok));
    PL_TRY_GOTO(st, done, step(trainer, tok, &r));
    if (losses)
      losses[i] = r.loss;
    if (res)
      res[i] = r;
  }
done:
  free(tok);
  return st;
}

pl_status pl_trainer_step(pl_trainer *t, const int32_t *tokens,
                          pl_step_result *res) {
  pl_step_result local;
  pl_step_result *r = res ? res : &local;
  PL_TRY(pl_trainer_forward_backward(t, tokens, r));
  PL_TRY(pl_trainer_update(t, r));
  if (t->cfg.profile)
    pl_step_result_other(r);
  return PL_OK;
}

/* the trainer in pl_step_run */
static pl_status batch_of(const void *t, pl_data *data, int64_t step,
                          int32_t *tok) {
  const pl_trainer *x = t;
  return pl_data_batch(data, &x->plan, x->cfg.micro, step, tok);
}
static pl_status step_of(void *t, const int32_t *tok, pl_step_result *r) {
  return pl_trainer_step(t, tok, r);
}

pl_status pl_trainer_run(pl_trainer *t, pl_data *data, int64_t first, int steps,
                         double *losses, pl_step_result *res) {
  return pl_step_run(t, pl_trainer_tokens_per_rank(t), batch_of, step_of, data,
                     first, steps, losses, res);
}
