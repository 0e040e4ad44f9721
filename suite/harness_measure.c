/* harness_measure.c — the harness's measurement (bench.h): timing of a unit
 * (warm-ups, a barrier before each timed run, events around it, the slowest
 * rank's time per iteration, median and spread), the memory of the timed
 * runs (every arena's peak reset before them, read after, max over ranks),
 * agreement of statuses over ranks, and progress.  Written once so that a
 * time or a peak means the same thing in every bench. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

pl_status pl_bench_agree(pl_bench_ctx *ctx, pl_status *st) {
  int64_t v = *st;
  PL_TRY(pl_host_allreduce_i64(ctx->comm, &v, 1, PL_RED_MIN));
  if (v != PL_OK && *st == PL_OK)
    *st = pl_set_error((pl_status)v, "another rank failed: %s",
                       pl_strerror((pl_status)v));
  return PL_OK;
}

/* Timed runs: a barrier, fn between events, the elapsed time.  A failing
 * rank stops calling fn but keeps entering the barriers, so the ranks'
 * collectives stay matched; the status is agreed at the end. */
static pl_status timed(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                       pl_stream *s, int iters, pl_stats *out) {
  double *t = calloc((size_t)iters + 1, sizeof *t);
  PL_ASSERT(t != NULL);
  pl_event *e0 = NULL, *e1 = NULL;
  pl_status st = pl_event_create(ctx->dev, &e0);
  if (st == PL_OK)
    st = pl_event_create(ctx->dev, &e1);
  pl_status comm = PL_OK;
  for (int i = 0; i < iters && comm == PL_OK; i++) {
    comm = pl_barrier(ctx->comm);
    if (st == PL_OK)
      st = pl_event_record(e0, s);
    if (st == PL_OK)
      st = fn(arg);
    if (st == PL_OK)
      st = pl_event_record(e1, s);
    if (st == PL_OK)
      st = pl_event_sync(e1);
    float ms = 0;
    if (st == PL_OK)
      st = pl_event_elapsed_ms(e0, e1, &ms);
    t[i] = ms;
  }
  if (e0)
    pl_event_destroy(e0);
  if (e1)
    pl_event_destroy(e1);
  if (comm == PL_OK)
    comm = pl_bench_agree(ctx, &st);
  /* An iteration lasts as long as its slowest rank. */
  if (comm == PL_OK && st == PL_OK)
    comm = pl_host_allreduce_f64(ctx->comm, t, (size_t)iters, PL_RED_MAX);
  if (comm == PL_OK && st == PL_OK)
    *out = pl_stats_of(t, iters);
  free(t);
  return comm != PL_OK ? comm : st;
}

static pl_status warmups(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                         pl_stream *s, int n) {
  pl_status st = PL_OK;
  for (int i = 0; i < n && st == PL_OK; i++)
    st = fn(arg);
  if (st == PL_OK)
    st = pl_stream_sync(s);
  PL_TRY(pl_bench_agree(ctx, &st));
  return st;
}

pl_status pl_bench_time_n(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                          pl_stream *s, int warmup, int iters, pl_stats *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(warmups(ctx, fn, arg, s, warmup));
  return timed(ctx, fn, arg, s, iters, out);
}

pl_status pl_bench_time(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                        pl_stream *s, pl_stats *out) {
  return pl_bench_time_n(ctx, fn, arg, s, ctx->warmup, ctx->iters, out);
}

pl_status pl_bench_measure(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                           pl_meas *m) {
  memset(m, 0, sizeof *m);
  pl_dev *dev = ctx->dev;
  PL_TRY(warmups(ctx, fn, arg, ctx->stream, ctx->warmup));
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  pl_mem_reset_peak(dev, PL_ARENA_HOST);
  pl_mem_stats ds, hs;
  PL_TRY(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ds));
  int64_t v[3 + PL_BENCH_MAX_TAGS] = {(int64_t)ds.current};
  PL_TRY(timed(ctx, fn, arg, ctx->stream, ctx->iters, &m->t));
  PL_TRY(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ds));
  PL_TRY(pl_mem_stats_get(dev, PL_ARENA_HOST, &hs));
  pl_mem_live_set_str(&ds, m->live_set, sizeof m->live_set);
  /* [0] resident, [1] device peak, [2] host peak, [3] pool, then tags */
  int64_t w[4 + PL_BENCH_MAX_TAGS] = {v[0], (int64_t)ds.peak, (int64_t)hs.peak,
                                      (int64_t)ds.pool_high};
  int nt = 0;
  const char *const *tags = ctx->bench->tags;
  for (; tags && tags[nt] && nt < PL_BENCH_MAX_TAGS; nt++)
    w[4 + nt] = (int64_t)pl_mem_tag_peak(dev, PL_ARENA_DEVICE, tags[nt]);
  PL_TRY(pl_host_allreduce_i64(ctx->comm, w, (size_t)(4 + nt), PL_RED_MAX));
  m->dev_resident = (size_t)w[0];
  m->dev_peak = (size_t)w[1];
  m->host_peak = (size_t)w[2];
  m->pool_peak = (size_t)w[3];
  for (int i = 0; i < nt; i++)
    m->tag_peak[i] = (size_t)w[4 + i];
  return PL_OK;
}

void pl_bench_progress(pl_bench_ctx *ctx, const char *label) {
  ctx->point++;
  if (ctx->rank != 0)
    return;
  double el = pl_elapsed_s(ctx->start_ns);
  char eta[32] = "?";
  if (ctx->point > 1 && ctx->npoints >= ctx->point) {
    double per = el / (ctx->point - 1);
    snprintf(eta, sizeof eta, "%.0fs", per * (ctx->npoints - ctx->point + 1));
  }
  char of[32] = "";
  if (ctx->npoints > 0)
    snprintf(of, sizeof of, "/%s%d", ctx->npoints_bound ? "<=" : "",
             ctx->npoints);
  fprintf(stderr, "[%s] point %d%s  elapsed %.1fs  ETA %s  %s\n",
          ctx->bench->name, ctx->point, of, el, eta, label ? label : "");
  fflush(stderr);
}
