/* harness_measure.c — the harness's measurement (bench.h): timing of a unit
 * (warm-ups until they converge, a barrier before each timed run, events
 * around it, the slowest rank's time per iteration, median and spread), the
 * memory of the timed runs (every arena's peak reset before them, read
 * after, max over ranks), agreement of statuses over ranks, and progress.
 * Written once so that a time or a peak means the same thing in every
 * bench. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

/* ---- first-use costs -------------------------------------------------------
 * A unit's first runs can pay once for what later runs reuse (GEMM
 * heuristics, pool growth, lazily made state); the warm-ups must absorb
 * that, or a one-time cost is reported as the unit's time.  The harness
 * checks that they did: another warm-up runs while the last one was more
 * than SLOW_RATIO x slower than the one before (a cost that appeared late),
 * and a first timed run more than SLOW_RATIO x slower than the median of
 * the ones after it becomes a warm-up, replaced by one more timed run (a
 * cost still decaying); at most EXTRA_MAX runs in all, none when -w 0 asks
 * for cold runs.  The point's row says how many warm-ups it took. */
#define SLOW_RATIO 1.5
#define EXTRA_MAX PL_BENCH_EXTRA_WARMUPS

/* PLATEAU_INJECT_SLOW_RUNS=N:MS (tests): the first N runs of each point's
 * unit take MS ms longer on every rank, a first-use cost to be absorbed. */
static struct {
  int n, done;
  double ms;
} inject;

static void inject_reset(void) {
  inject.n = inject.done = 0;
  const char *e = getenv("PLATEAU_INJECT_SLOW_RUNS");
  if (e && sscanf(e, "%d:%lf", &inject.n, &inject.ms) != 2)
    inject.n = 0;
}

static pl_status call(pl_bench_fn fn, void *arg) {
  if (inject.done < inject.n && inject.ms > 0) {
    const double s = inject.ms * 1e-3;
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
  }
  inject.done++;
  return fn(arg);
}

pl_status pl_bench_agree(pl_bench_ctx *ctx, pl_status *st) {
  int64_t v = *st;
  PL_TRY(pl_host_allreduce_i64(ctx->comm, &v, 1, PL_RED_MIN));
  if (v != PL_OK && *st == PL_OK)
    *st = pl_set_error((pl_status)v, "another rank failed: %s",
                       pl_strerror((pl_status)v));
  return PL_OK;
}

/* Two events, *e0 and *e1. */
static pl_status events(pl_dev *dev, pl_event **e0, pl_event **e1) {
  PL_TRY(pl_event_create(dev, e0));
  return pl_event_create(dev, e1);
}

/* fn once between e0 and e1 on s: *ms its time. */
static pl_status one_run(pl_bench_fn fn, void *arg, pl_stream *s, pl_event *e0,
                         pl_event *e1, float *ms) {
  PL_TRY(pl_event_record(e0, s));
  PL_TRY(call(fn, arg));
  PL_TRY(pl_event_record(e1, s));
  PL_TRY(pl_event_sync(e1));
  return pl_event_elapsed_ms(e0, e1, ms);
}

/* Timed runs into t[0..iters): a barrier, fn between events, the elapsed
 * time, the slowest rank's.  A failing rank stops calling fn but keeps
 * entering the barriers, so the ranks' collectives stay matched; the
 * status is agreed at the end. */
static pl_status timed_runs(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                            pl_stream *s, int iters, double *t) {
  pl_event *e0 = NULL, *e1 = NULL;
  pl_status st = events(ctx->dev, &e0, &e1);
  pl_status comm = PL_OK;
  for (int i = 0; i < iters && comm == PL_OK; i++) {
    comm = pl_barrier(ctx->comm);
    float ms = 0;
    if (st == PL_OK) /* a failing rank only enters the barriers */
      st = one_run(fn, arg, s, e0, e1, &ms);
    t[i] = ms;
  }
  if (e0)
    pl_event_destroy(e0);
  if (e1)
    pl_event_destroy(e1);
  PL_TRY(comm);
  PL_TRY(pl_bench_agree(ctx, &st));
  PL_TRY(st);
  /* An iteration lasts as long as its slowest rank. */
  return pl_host_allreduce_f64(ctx->comm, t, (size_t)iters, PL_RED_MAX);
}

static double median_of(const double *x, int n) {
  double *y = malloc(sizeof *y * (size_t)(n + 1));
  PL_ASSERT(y != NULL);
  memcpy(y, x, sizeof *y * (size_t)n);
  const pl_stats st = pl_stats_of(y, n);
  free(y);
  return st.median;
}

/* iters timed runs into *out, after the warm-ups: while the first timed run
 * is more than SLOW_RATIO x the median of the rest (the warm-ups had not
 * converged) and *extra < EXTRA_MAX, it counts as a warm-up (++*extra) and
 * one more run is timed in its place; *slow gets the largest such ratio. */
static pl_status timed(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                       pl_stream *s, int iters, bool converge, int *extra,
                       double *slow, pl_stats *out) {
  double *t = calloc((size_t)iters + 1, sizeof *t);
  PL_ASSERT(t != NULL);
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, timed_runs(ctx, fn, arg, s, iters, t));
  while (converge && iters >= 2 && *extra < EXTRA_MAX) {
    const double rest = median_of(t + 1, iters - 1);
    if (!(t[0] > SLOW_RATIO * rest)) /* every rank sees the same times */
      break;
    *slow = fmax(*slow, t[0] / rest);
    memmove(t, t + 1, sizeof *t * (size_t)(iters - 1));
    ++*extra;
    PL_TRY_GOTO(st, done, timed_runs(ctx, fn, arg, s, 1, &t[iters - 1]));
  }
  *out = pl_stats_of(t, iters);
done:
  free(t);
  return st;
}

/* Whether the harness may add warm-ups (pl_bench.stateful). */
static bool may_extend(const pl_bench_ctx *ctx) {
  return !(ctx->bench && ctx->bench->stateful && !ctx->cuda);
}

/* fn once, then s drained. */
static pl_status run_sync(pl_bench_fn fn, void *arg, pl_stream *s) {
  PL_TRY(call(fn, arg));
  return pl_stream_sync(s);
}

/* n warm-ups, then more while the last was more than SLOW_RATIO x slower
 * than the one before (each timed on the host after a stream sync, the
 * slowest rank's, so every rank decides alike); ++*extra for each more. */
static pl_status warmups(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                         pl_stream *s, int n, int *extra, double *slow) {
  double prev = 0;
  for (int i = 0; i < n + *extra; i++) {
    const uint64_t t0 = pl_now_ns();
    pl_status st = run_sync(fn, arg, s);
    double ms = (double)(pl_now_ns() - t0) * 1e-6;
    PL_TRY(pl_bench_agree(ctx, &st));
    PL_TRY(st);
    PL_TRY(pl_host_allreduce_f64(ctx->comm, &ms, 1, PL_RED_MAX));
    if (i == n + *extra - 1 && i > 0 && ms > SLOW_RATIO * prev &&
        *extra < EXTRA_MAX &&
        may_extend(ctx)) { /* the last was slower: not converged */
      *slow = fmax(*slow, ms / prev);
      ++*extra;
    }
    prev = ms;
  }
  return PL_OK;
}

pl_status pl_bench_time_n(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                          pl_stream *s, int warmup, int iters, pl_stats *out) {
  memset(out, 0, sizeof *out);
  int extra = 0;
  double slow = 0;
  PL_TRY(warmups(ctx, fn, arg, s, warmup, &extra, &slow));
  return timed(ctx, fn, arg, s, iters, warmup > 0 && may_extend(ctx), &extra,
               &slow, out);
}

pl_status pl_bench_time(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                        pl_stream *s, pl_stats *out) {
  return pl_bench_time_n(ctx, fn, arg, s, ctx->warmup, ctx->iters, out);
}

pl_status pl_bench_measure(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                           pl_meas *m) {
  memset(m, 0, sizeof *m);
  pl_dev *dev = ctx->dev;
  inject_reset();
  int extra = 0;
  PL_TRY(warmups(ctx, fn, arg, ctx->stream, ctx->warmup, &extra, &m->slow));
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  pl_mem_reset_peak(dev, PL_ARENA_HOST);
  pl_mem_stats ds, hs;
  PL_TRY(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ds));
  int64_t v[3 + PL_BENCH_MAX_TAGS] = {(int64_t)ds.current};
  PL_TRY(timed(ctx, fn, arg, ctx->stream, ctx->iters,
               ctx->warmup > 0 && may_extend(ctx), &extra, &m->slow, &m->t));
  m->warmups = ctx->warmup + extra;
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
