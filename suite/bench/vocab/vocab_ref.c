/* vocab_ref.c — the helpers of `plateau bench vocab` (vocab.h): one
 * iteration of each variant, a point's inputs (W and its shards from one set
 * of draws), the check of a variant against the blocked fused head (itself
 * tested against the f64 reference, baselines/test_ce.c), Ring-DTP's analytic
 * floor and the columns a measured point adds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../baselines/dense_ce.h"
#include "../baselines/fused_ce.h"
#include "../baselines/vocab_parallel_ce.h"
#include "plateau/host_device.h"
#include "vocab.h"

/* One forward + backward; the previous iteration's gradients are freed first
 * (so they are not part of this iteration's peak). */
pl_status pl__vocab_iter(void *arg) {
  pl__vocab_point *p = arg;
  pl__vocab_free_grads(p);
  pl_ce_problem pb = {.dt = p->dt,
                      .n = p->n,
                      .h = p->h,
                      .v = p->v,
                      .red = PL_CE_MEAN,
                      .ignore = PL_CE_IGNORE_INDEX,
                      .block = p->block,
                      .x = p->x,
                      .t = p->t,
                      .w = p->w,
                      .loss = p->loss,
                      .dx_alloc = &p->dx,
                      .dw_alloc = &p->dw};
  switch (p->variant) {
  case V_DENSE:
    return pl_dense_ce(p->s, &pb);
  case V_FUSED:
    return pl_fused_ce(p->s, &pb);
  case V_BLOCKED:
    return pl_fused_ce_blocked(p->s, &pb);
  case V_CHUNK:
    return pl_fused_ce_chunked(p->s, &pb);
  case V_VP:
    return pl_vocab_parallel_ce(p->ctx->comm, p->s, &pb);
  default:
    break;
  }
  /* Ring-DTP writes its gradients from the first meeting of the backward on
   * (the first chunk at P = 1): allocate them there (what autograd would hold
   * by then; the blocked forward's kept strips are counted before them). */
  pl_dev *dev = p->ctx->dev;
  size_t es = pl_dtype_size(p->dt);
  const int apart = pl_dtp_sched_of(p->dtp) != PL_DTP_SCHED_CHUNKED;
  if (apart)
    PL_TRY(pl_dtp_forward(p->dtp, p->s, p->x, p->t, p->w, p->loss));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(p->n * p->h) * es,
                        "grads", p->s, &p->dx));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(p->h * p->vs) * es,
                        "grads", p->s, &p->dw));
  if (apart)
    return pl_dtp_backward(p->dtp, p->s, p->x, p->t, p->w, NULL, p->dx, p->dw);
  return pl_dtp_run(p->dtp, p->s, p->x, p->t, p->w, NULL, p->loss, p->dx,
                    p->dw);
}

/* The code path that ran (the kernel column): the schedule of fused and
 * ring, the variant otherwise. */
static const char *vocab_kernel(const pl__vocab_point *p) {
  static const char *const names[V_COUNT] = {"dense", "fused", "blocked",
                                             "chunk", "vp",    "ring"};
  if (p->variant == V_RING && p->dtp)
    return pl_dtp_sched_name(pl_dtp_sched_of(p->dtp));
  if (p->variant == V_FUSED) {
    pl_ce_problem q = {.dt = p->dt, .n = p->n, .v = p->v, .block = p->block};
    return pl_ce_head3_rows(&q) >= 1 ? "chunked" : "blocked";
  }
  return names[p->variant];
}

void pl__vocab_free_grads(pl__vocab_point *p) {
  pl_dev *dev = p->ctx->dev;
  if (p->dx)
    pl_free(dev, p->dx);
  if (p->dw)
    pl_free(dev, p->dw);
  p->dx = p->dw = NULL;
}

/* W (h×v global, row-major) columns [col0, col0+vs): counter-RNG draws at the
 * global index k·v + col0 + q, so every shard is a slice of the same W. */
pl_status pl__vocab_fill_w(pl__vocab_point *p, void *w, int64_t col0,
                           int64_t vs, uint64_t seed) {
  float a = 1.0f / sqrtf((float)p->h);
  size_t es = pl_dtype_size(p->dt);
  if (vs == p->v)
    return pl_rng_fill(p->s, w, p->dt, (size_t)(p->h * p->v), seed, 0,
                       PL_DIST_UNIFORM, -a, a);
  for (int64_t k = 0; k < p->h; k++)
    PL_TRY(pl_rng_fill(p->s, (char *)w + (size_t)(k * vs) * es, p->dt,
                       (size_t)vs, seed, (uint64_t)(k * p->v + col0),
                       PL_DIST_UNIFORM, -a, a));
  return PL_OK;
}

static pl_status download_f32(pl_dev *dev, pl_stream *s, const void *src,
                              pl_dtype dt, size_t n, float **out) {
  *out = malloc(sizeof(float) * (n + 1));
  if (!*out)
    return pl_set_error(PL_ENOMEM, "vocab check: host memory");
  void *tmp = malloc(n * pl_dtype_size(dt) + 1);
  if (!tmp)
    return pl_set_error(PL_ENOMEM, "vocab check: host memory");
  PL_TRY(pl_stream_sync(s));
  if (n)
    PL_TRY(pl_memcpy_async(s, tmp, src, n * pl_dtype_size(dt)));
  PL_TRY(pl_stream_sync(s));
  for (size_t i = 0; i < n; i++)
    (*out)[i] =
        dt == PL_BF16 ? pl_bf16_to_f32(((pl_bf16 *)tmp)[i]) : ((float *)tmp)[i];
  free(tmp);
  (void)dev;
  return PL_OK;
}

/* The fused head on pb in f32 math (TF32 off, then back as it was). */
static pl_status reference_f32(pl__vocab_point *p, pl_ce_problem *pb) {
  pl_stream_set_tf32(p->s, 0);
  pl_status st = pl_fused_ce_blocked(p->s, pb);
  pl_stream_set_tf32(p->s, p->tf32);
  return st;
}

/* The check: loss and dX of the variant against the fused head with sum
 * reduction on the same inputs (full W), rescaled by the count of targets
 * the variant averages over; reduction length V. */
pl_status pl__vocab_check(pl__vocab_point *p, pl_check *chk) {
  pl_bench_ctx *ctx = p->ctx;
  pl_dev *dev = ctx->dev;
  float *got_loss = NULL, *got_dx = NULL, *ref_dx = NULL, *ref_loss = NULL;
  void *wfull = NULL, *rdx = NULL, *rdw = NULL;
  float *rl = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, download_f32(dev, p->s, p->loss, PL_F32, 1, &got_loss));
  PL_TRY_GOTO(
      st, done,
      download_f32(dev, p->s, p->dx, p->dt, (size_t)(p->n * p->h), &got_dx));
  pl__vocab_free_grads(p);
  if (p->variant == V_VP || p->variant == V_RING) {
    pl_free(dev, p->w);
    p->w = NULL;
    PL_TRY_GOTO(st, done,
                pl_alloc(dev, PL_ARENA_DEVICE,
                         (size_t)(p->h * p->v) * pl_dtype_size(p->dt),
                         "weights", &wfull));
    PL_TRY_GOTO(st, done, pl__vocab_fill_w(p, wfull, 0, p->v, ctx->seed + 1));
  }
  PL_TRY_GOTO(st, done,
              pl_alloc(dev, PL_ARENA_DEVICE, 2 * sizeof(float), "ce_state",
                       (void **)&rl));
  pl_ce_problem pb = {.dt = p->dt,
                      .n = p->n,
                      .h = p->h,
                      .v = p->v,
                      .red = PL_CE_SUM,
                      .ignore = PL_CE_IGNORE_INDEX,
                      .block = p->block,
                      .x = p->x,
                      .t = p->t,
                      .w = wfull ? wfull : p->w,
                      .loss = rl,
                      .dx_alloc = &rdx,
                      .dw_alloc = &rdw};
  PL_TRY_GOTO(st, done, reference_f32(p, &pb));
  PL_TRY_GOTO(st, done, download_f32(dev, p->s, rl, PL_F32, 1, &ref_loss));
  PL_TRY_GOTO(
      st, done,
      download_f32(dev, p->s, rdx, p->dt, (size_t)(p->n * p->h), &ref_dx));
  /* The count the variant averages over: the group's targets for ring, this
   * rank's batch otherwise (vp: the same batch everywhere). */
  int64_t cnt = 0;
  for (int64_t i = 0; i < p->n; i++)
    cnt += p->th[i] != PL_CE_IGNORE_INDEX;
  double sums[2] = {ref_loss[0], (double)cnt};
  if (p->variant == V_RING)
    PL_TRY_GOTO(st, done,
                pl_host_allreduce_f64(ctx->comm, sums, 2, PL_RED_SUM));
  double want_loss = sums[0] / sums[1];
  /* TF32 operands carry 10 mantissa bits: judged with bf16's tolerance */
  pl_dtype tol = p->tf32 && p->dt == PL_F32 ? PL_BF16 : p->dt;
  pl_check_arrays(chk, "loss", got_loss, PL_ELEM_F32, &want_loss, PL_ELEM_F64,
                  1, tol, p->v);
  pl_check_scaled(chk, "dX", got_dx, PL_ELEM_F32, ref_dx, PL_ELEM_F32,
                  1.0 / sums[1], (size_t)(p->n * p->h), tol, p->v);
done:
  free(got_loss), free(got_dx), free(ref_dx), free(ref_loss);
  if (rdx)
    pl_free(dev, rdx);
  if (rdw)
    pl_free(dev, rdw);
  if (rl)
    pl_free(dev, rl);
  if (wfull)
    pl_free(dev, wfull);
  return st;
}

/* Analytic floor of Ring-DTP's peak (the backward's live set): what the
 * overlapped schedule needs, in the storage dtype unless said otherwise —
 *   X_r + W_r + dX_r + dW_r
 *   + the moving tensor's hop buffers: one at P = 2 (step 0 computes on the
 *     rank's own input, already counted), two beyond (receive the next while
 *     computing on the current); move-act: X_j with t_j and its (lse, g)
 *   + its gradient partial, f32 (a meeting sums its strips into it): two
 *     buffers, one sent while the other is received and accumulated into
 *   + the backward's strip (rows×Vb f32, + rows×Vb bf16 residual)
 *   + the logit strips kept under the strip budget (pl_dtp_kept_bytes).
 * Not counted: the saved (lse, g) of the rank's own rows and the loss
 * scalars (8 bytes a row), and — an excess, reported as such — the f32
 * accumulator of nc = N/8 dX rows that bf16 move-W needs (every strip adds to
 * dX_r: pl_dtp_grads_scratch). */
static double ring_floor(const pl__vocab_point *p, const pl_dtp *d) {
  double es = (double)pl_dtype_size(p->dt);
  double base =
      (double)(p->n * p->h) * es * 2 + (double)(p->h * p->vs) * es * 2;
  int P = p->ctx->size;
  bool act = pl_dtp_mode_of(d) == PL_DTP_MOVE_ACT;
  /* the largest visitor (every rank has N rows; shards are balanced) */
  double nmax = (double)p->n, vmax = (double)((p->v + P - 1) / P);
  double payload =
      act ? nmax * ((double)p->h * es + 4 + 8) : (double)p->h * vmax * es;
  double grad = act ? nmax * (double)p->h * 4 : (double)p->h * vmax * 4;
  /* the backward's strip: rows × Vb f32 (+ bf16 residual); bf16 move-W
   * works on row chunks (pl_dtp_chunk_rows) */
  double rows = P == 1 ? (double)p->n
                : act  ? nmax
                       : (double)pl_dtp_chunk_rows(d);
  double strip = rows * (double)pl_dtp_block(d) * (p->dt == PL_BF16 ? 6 : 4);
  return base + (P > 1 ? (P == 2 ? 1 : 2) * payload + 2 * grad : 0) + strip +
         (double)pl_dtp_kept_bytes(d);
}

/* Inputs: X (this rank's batch; vp: the same batch on every rank), W or its
 * shard, the targets (a few ignored); Ring-DTP's schedule. */
pl_status pl__vocab_inputs(pl_bench_ctx *c, pl__vocab_point *p) {
  pl_dev *dev = c->dev;
  const size_t es = pl_dtype_size(p->dt);
  p->col0 = 0;
  p->vs = p->v;
  if (p->variant == V_VP || p->variant == V_RING)
    pl_ce_shard(p->v, c->size, c->rank, &p->col0, &p->vs);
  uint64_t xoff = p->variant == V_VP ? 0 : (uint64_t)c->rank << 40;
  p->th = malloc(sizeof(int32_t) * (size_t)(p->n + 1));
  if (!p->th)
    return pl_set_error(PL_ENOMEM, "vocab: host memory");
  for (int64_t k = 0; k < p->n; k++) {
    p->th[k] =
        (int32_t)(pl_rng_u32(c->seed + 2, xoff + (uint64_t)k) % (uint64_t)p->v);
    if (k % 61 == 60)
      p->th[k] = PL_CE_IGNORE_INDEX;
  }
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(p->n * p->h) * es, "inputs",
                  &p->x));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(p->h * p->vs) * es, "weights",
                  &p->w));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, sizeof(int32_t) * (size_t)p->n,
                  "inputs", (void **)&p->t));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, sizeof(float) * 2, "ce_state",
                  (void **)&p->loss));
  PL_TRY(pl_rng_fill(p->s, p->x, p->dt, (size_t)(p->n * p->h), c->seed, xoff,
                     PL_DIST_UNIFORM, -1.0f, 1.0f));
  PL_TRY(pl__vocab_fill_w(p, p->w, p->col0, p->vs, c->seed + 1));
  if (p->n)
    PL_TRY(pl_memcpy_async(p->s, p->t, p->th, sizeof(int32_t) * (size_t)p->n));
  PL_TRY(pl_stream_sync(p->s));
  if (p->variant != V_RING)
    return PL_OK;
  pl_dtp_opts o;
  pl_dtp_opts_default(&o);
  o.mode = p->mode;
  o.block = p->block;
  o.overlap = p->overlap;
  o.sched = p->sched;
  o.strip_budget = p->budget;
  return pl_dtp_create(c->comm, p->dt, p->n, p->h, p->v, &o, &p->dtp);
}

/* Ring-DTP's schedule, hop bytes and floor; what each variant's batch is. */
pl_status pl__vocab_columns(pl_bench_ctx *c, pl__vocab_point *p, pl_row *row) {
  const int P = c->size;
  pl_row_str(row, "kernel", vocab_kernel(p));
  if (p->variant == V_RING)
    pl_row_i64(row, "kept_strips", pl_dtp_kept_strips(p->dtp));
  if (p->variant == V_RING) {
    size_t hf, hb, sf, sb;
    pl_dtp_hop_bytes(p->dtp, &hf, &hb);
    pl_dtp_bytes_sent(p->dtp, &sf, &sb);
    pl_row_str(row, "mode", pl_dtp_mode_name(pl_dtp_mode_of(p->dtp)));
    pl_row_i64(row, "hop_bytes", (int64_t)hf);
    pl_row_i64(row, "sent_bytes", (int64_t)(sf + sb));
    pl_row_i64(row, "bound_bytes", (int64_t)ring_floor(p, p->dtp));
    pl_row_note(row, "P=%d; each rank its own batch; %s%s", P,
                P > 1 ? "hops overlap compute on a comm stream"
                : pl_dtp_sched_of(p->dtp) == PL_DTP_SCHED_CHUNKED
                    ? "P=1: the three-GEMM head"
                    : "P=1: the blocked fused head",
                P > 1 && !p->overlap ? " (disabled: --no-overlap)" : "");
  } else if (p->variant == V_VP) {
    pl_row_note(row,
                "P=%d ranks share ONE batch of N tokens (P-fold fewer "
                "distinct tokens than ring)",
                P);
  } else if (p->variant == V_CHUNK || p->variant == V_FUSED) {
    pl_ce_problem q = {.n = p->n, .v = p->v, .block = p->block, .dt = p->dt};
    int64_t rows = p->variant == V_CHUNK ? pl_fused_ce_chunk_rows(&q)
                                         : pl_ce_head3_rows(&q);
    pl_row_note(row,
                "every rank its own batch, full W; token chunks of %lld "
                "rows",
                (long long)rows);
  } else {
    pl_row_note(row, "every rank its own batch, full W");
  }
  return PL_OK;
}

void pl__vocab_free(pl_bench_ctx *c, pl__vocab_point *p) {
  pl__vocab_free_grads(p);
  if (p->dtp)
    pl_dtp_destroy(p->dtp);
  pl_free(c->dev, p->x);
  pl_free(c->dev, p->w);
  pl_free(c->dev, p->t);
  pl_free(c->dev, p->loss);
  free(p->th);
  memset(p, 0, sizeof *p);
}
