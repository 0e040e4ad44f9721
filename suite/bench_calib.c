/* bench_calib.c — `plateau bench calib`: the machine's ceilings in one run.
 *
 * Every other bench reports "% of the measured ceiling", so the ceilings are
 * measured here, the same way, on the same launch:
 *   h2d, d2h   pinned host <-> device copies, one direction        (per rank)
 *   bidir      both at once on two streams; bytes = 2·S              (per rank)
 *   d2d        device copy; bytes counted read + write = 2·S         (per rank)
 *   gemm       m = n = k = G; FLOPs 2·G³ (bf16 in/out, fp32 accumulate on
 *              CUDA; fp32 on the CPU backend)                        (per rank)
 *   allreduce  S bytes of f32, sum;     busbw = algbw · 2(n−1)/n    (all ranks)
 *   alltoall   S bytes per rank, equal counts through pl_alltoallv;
 *                                       busbw = algbw · (n−1)/n
 *   sendrecv   ring hop r -> r+1, S bytes each way; busbw = algbw
 * algbw = bytes / time (nccl-tests' definitions, doc/PERFORMANCE.md).  The
 * per-rank tests run on every rank at once (each on its own GPU), which is how
 * the optimizer and the offload use the links; a time is the slowest rank's.
 * --solo runs them on rank 0 alone (one GPU's ceiling, host memory not
 * shared with the other ranks' copies).
 *
 * Every transfer is verified: inputs are counter-RNG draws (never zeros),
 * outputs are poisoned before the run, and after timing each received buffer
 * is compared bit for bit with the draws it must hold (all-reduce: with the
 * sum, within the rounding of n−1 additions in any order).  The GEMM is checked
 * against a double-precision reference on sampled entries with a bound that
 * scales with the dtype and G.  On the CPU backend the "host link" is memcpy
 * between the two arenas and the note says so. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "plateau/hd.h"

enum { T_H2D, T_D2H, T_BIDIR, T_D2D, T_GEMM, T_ALLREDUCE, T_ALLTOALL,
       T_SENDRECV, T_COUNT };
static const char *const test_names[] = {"h2d",       "d2h",      "bidir",
                                         "d2d",       "gemm",     "allreduce",
                                         "alltoall",  "sendrecv", NULL};
static const char *const gemm_dtypes[] = {"bf16", "f32", NULL};

static const pl_opt calib_opts[] = {
    {"sizes", 0, PL_OPT_SIZE_LIST, NULL,
     "transfer sizes per point, list or range lo:hi:xF (default "
     "64Ki:256Mi:x4 on cuda, 4Ki:16Mi:x4 on cpu)",
     4, 68719476736.0, NULL},
    {"gemm-size", 0, PL_OPT_SIZE, NULL,
     "GEMM m = n = k (default 8192 on cuda, 512 on cpu)", 1, 65536, NULL},
    {"gemm-dtype", 0, PL_OPT_ENUM, NULL,
     "GEMM input/output dtype (default bf16 on cuda, f32 on cpu)", 0, 0,
     gemm_dtypes},
    {"tests", 0, PL_OPT_ENUM_LIST,
     "h2d,d2h,bidir,d2d,gemm,allreduce,alltoall,sendrecv",
     "which ceilings to measure", 0, 0, test_names},
    {"solo", 0, PL_OPT_FLAG, NULL,
     "run the per-rank tests (h2d d2h bidir d2d gemm) on rank 0 alone, the "
     "others idle: one GPU's ceiling instead of all GPUs at once",
     0, 0, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

#define CALIB_COLUMNS                                                          \
  "test\tbytes\tranks\tdtype\tmnk\ttime_ms\ttime_p10_ms\ttime_p90_ms\t"        \
  "algbw_gbs\tbusbw_gbs\ttflops"

/* Data of rank q lives at RNG offset q·2^40 (+ element index). */
#define RANK_OFF(q) ((uint64_t)(q) << 40)

/* ---- buffers ------------------------------------------------------------- */
#define MAXBUF 8
typedef struct bufs {
  pl_dev *dev;
  void *p[MAXBUF];
  int n;
} bufs;

static pl_status balloc(bufs *b, pl_arena a, size_t bytes, void **out) {
  PL_ASSERT(b->n < MAXBUF);
  pl_status st = pl_alloc(b->dev, a, bytes, "calib", out);
  if (st == PL_OK) b->p[b->n++] = *out;
  return st;
}
static void bfree(bufs *b) {
  for (int i = 0; i < b->n; i++) pl_free(b->dev, b->p[i]);
  b->n = 0;
}

/* ---- host side of the data: the draws, and comparisons -------------------- */
static void host_fill(float *p, size_t n, uint64_t seed, uint64_t off) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) p[i] = pl_rng_uniform(seed, off + i, -1.f, 1.f);
}

/* Elements of got[0..n) whose bits differ from draw(seed, off + i); *first
 * gets the first such index, or -1. */
static int64_t cmp_draws(const float *got, size_t n, uint64_t seed,
                         uint64_t off, int64_t *first) {
  int64_t bad = 0, f = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(+ : bad) reduction(min : f)
  for (size_t i = 0; i < n; i++) {
    float e = pl_rng_uniform(seed, off + i, -1.f, 1.f);
    if (memcmp(&e, &got[i], sizeof e) != 0) {
      if ((int64_t)i < f) f = (int64_t)i;
      bad++;
    }
  }
  *first = f == INT64_MAX ? -1 : f;
  return bad;
}

/* All-reduce (sum over n ranks of their draws): elements off by more than
 * tol (NaN counts as off); *max_err the largest error seen. */
static int64_t cmp_allreduce(const float *got, size_t ne, uint64_t seed, int n,
                             double tol, int64_t *first, double *max_err) {
  int64_t bad = 0, f = INT64_MAX;
  double mx = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad) reduction(min : f) reduction(max : mx)
  for (size_t i = 0; i < ne; i++) {
    float e = 0.f;
    for (int q = 0; q < n; q++)
      e += pl_rng_uniform(seed, RANK_OFF(q) + i, -1.f, 1.f);
    double err = fabs((double)got[i] - (double)e);
    if (isnan(err)) err = INFINITY;
    if (!(err <= tol)) {
      if ((int64_t)i < f) f = (int64_t)i;
      bad++;
    }
    if (err > mx) mx = err;
  }
  *first = f == INT64_MAX ? -1 : f;
  *max_err = mx;
  return bad;
}

/* Fault injection for the suite's own tests (PLATEAU_CALIB_INJECT_FAULT=1):
 * flip an exponent bit of element k of a received buffer just before it is
 * compared, so a test can show that a wrong transfer or GEMM fails its row. */
static void inject_fault(void *buf, size_t k, size_t elem_size) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("PLATEAU_CALIB_INJECT_FAULT");
    on = e && *e && strcmp(e, "0") != 0;
  }
  if (on) ((unsigned char *)buf)[k * elem_size + elem_size - 1] ^= 0x40;
}

/* ---- timed bodies -------------------------------------------------------- */
typedef struct job {
  int test;
  pl_comm *comm;
  pl_stream *s, *s2;
  pl_event *ev0, *ev1;
  void *dst, *src, *dst2, *src2;
  size_t bytes;   /* copies */
  size_t count;   /* collectives: f32 elements (alltoall: per peer) */
  size_t *scounts, *sdispls;
  int next, prev;
  int64_t G;
  pl_dtype dt;
  bool idle; /* --solo: a rank other than 0 on a per-rank test */
} job;

static pl_status job_fn(void *arg) {
  job *j = arg;
  if (j->idle) return PL_OK;
  switch (j->test) {
  case T_H2D:
  case T_D2H:
  case T_D2D:
    return pl_memcpy_async(j->s, j->dst, j->src, j->bytes);
  case T_BIDIR:
    /* s2 starts when s reaches this point; s then waits for s2's copy, so an
     * event pair on s brackets both directions. */
    PL_TRY(pl_event_record(j->ev0, j->s));
    PL_TRY(pl_stream_wait(j->s2, j->ev0));
    PL_TRY(pl_memcpy_async(j->s, j->dst, j->src, j->bytes));
    PL_TRY(pl_memcpy_async(j->s2, j->dst2, j->src2, j->bytes));
    PL_TRY(pl_event_record(j->ev1, j->s2));
    return pl_stream_wait(j->s, j->ev1);
  case T_GEMM:
    return pl_gemm(j->s, false, false, j->G, j->G, j->G, 1.0f, j->src, j->G,
                   j->src2, j->G, 0.0f, j->dst, j->G, j->dt, j->dt);
  case T_ALLREDUCE:
    return pl_allreduce(j->comm, j->src, j->dst, j->count, PL_F32, PL_RED_SUM,
                        j->s);
  case T_ALLTOALL:
    return pl_alltoallv(j->comm, j->src, j->scounts, j->sdispls, j->dst,
                        j->scounts, j->sdispls, PL_F32, j->s);
  case T_SENDRECV:
    return pl_sendrecv(j->comm, j->src, j->count, j->next, j->dst, j->count,
                       j->prev, PL_F32, j->s);
  }
  return pl_set_error(PL_EINVAL, "calib: unknown test %d", j->test);
}

/* ---- one point ----------------------------------------------------------- */
typedef struct point_result {
  pl_status st;      /* set-up or run status of this rank */
  int64_t bad;       /* mismatching elements (check) */
  int64_t first_bad; /* first bad index, -1 if none */
  double max_err;    /* gemm / allreduce: max abs error */
  double max_tol_ratio; /* max |err| / tol */
  pl_stats t;
  size_t bytes;      /* bytes the bandwidth counts */
} point_result;

/* Copy n f32 from device to a pinned host buffer and wait. */
static pl_status to_host(pl_stream *s, void *host, const void *dev,
                         size_t bytes) {
  PL_TRY(pl_memcpy_async(s, host, dev, bytes));
  return pl_stream_sync(s);
}

/* Set up buffers for (test, S), verify afterwards.  Returns the status of the
 * set-up (oom is a result) in r->st; a runtime failure while timing is
 * returned (fatal). */
static bool per_rank_test(int t) { return t <= T_GEMM; }

static pl_status run_point(pl_bench_ctx *ctx, int test, size_t S, int64_t G,
                           pl_dtype gdt, bool solo, pl_stream *s2,
                           pl_event *ev0, pl_event *ev1, point_result *r) {
  memset(r, 0, sizeof *r);
  r->first_bad = -1;
  pl_dev *dev = ctx->dev;
  pl_stream *s = pl_dev_stream(dev);
  int n = ctx->size, me = ctx->rank;
  uint64_t seed = ctx->seed;
  bufs b = {.dev = dev};
  job j = {.test = test, .comm = ctx->comm, .s = s, .s2 = s2, .ev0 = ev0,
           .ev1 = ev1, .G = G, .dt = gdt,
           .idle = solo && per_rank_test(test) && ctx->rank != 0};
  size_t *sc = NULL, *sd = NULL;
  void *chk = NULL;
  size_t ne = S / 4; /* f32 elements */
  pl_status st = PL_OK;

  /* -- set-up (allocation failures are results) -- */
  switch (j.idle ? -1 : test) {
  case T_H2D:
  case T_D2H:
  case T_D2D:
  case T_BIDIR: {
    r->bytes = ne * 4;
    j.bytes = ne * 4;
    pl_arena src_a = test == T_D2H || test == T_D2D ? PL_ARENA_DEVICE
                                                    : PL_ARENA_HOST;
    pl_arena dst_a = test == T_H2D || test == T_D2D || test == T_BIDIR
                         ? PL_ARENA_DEVICE
                         : PL_ARENA_HOST;
    st = balloc(&b, src_a, j.bytes, &j.src);
    if (st == PL_OK) st = balloc(&b, dst_a, j.bytes, &j.dst);
    if (st == PL_OK && test == T_BIDIR) {
      st = balloc(&b, PL_ARENA_DEVICE, j.bytes, &j.src2);
      if (st == PL_OK) st = balloc(&b, PL_ARENA_HOST, j.bytes, &j.dst2);
    }
    if (st == PL_OK && dst_a == PL_ARENA_DEVICE)
      st = balloc(&b, PL_ARENA_HOST, j.bytes, &chk);
    if (st != PL_OK) break;
    /* inputs: draws; outputs: poisoned */
    if (src_a == PL_ARENA_HOST)
      host_fill(j.src, ne, seed, RANK_OFF(me));
    else
      st = pl_rng_fill(s, j.src, PL_F32, ne, seed, RANK_OFF(me),
                       PL_DIST_UNIFORM, -1.f, 1.f);
    if (st == PL_OK && dst_a == PL_ARENA_HOST) memset(j.dst, 0xff, j.bytes);
    if (st == PL_OK && dst_a == PL_ARENA_DEVICE)
      st = pl_fill(s, j.dst, PL_F32, ne, NAN);
    if (st == PL_OK && test == T_BIDIR) {
      st = pl_rng_fill(s, j.src2, PL_F32, ne, seed, RANK_OFF(me) + ne,
                       PL_DIST_UNIFORM, -1.f, 1.f);
      memset(j.dst2, 0xff, j.bytes);
      r->bytes = 2 * ne * 4;
    }
    if (test == T_D2D) r->bytes = 2 * ne * 4; /* read + write */
    break;
  }
  case T_GEMM: {
    size_t el = (size_t)G * (size_t)G, bytes = el * pl_dtype_size(gdt);
    r->bytes = 3 * bytes;
    st = balloc(&b, PL_ARENA_DEVICE, bytes, &j.src);
    if (st == PL_OK) st = balloc(&b, PL_ARENA_DEVICE, bytes, &j.src2);
    if (st == PL_OK) st = balloc(&b, PL_ARENA_DEVICE, bytes, &j.dst);
    if (st == PL_OK) st = balloc(&b, PL_ARENA_HOST, 3 * bytes, &chk);
    if (st != PL_OK) break;
    st = pl_rng_fill(s, j.src, gdt, el, seed, RANK_OFF(me), PL_DIST_UNIFORM,
                     -1.f, 1.f);
    if (st == PL_OK)
      st = pl_rng_fill(s, j.src2, gdt, el, seed, RANK_OFF(me) + el,
                       PL_DIST_UNIFORM, -1.f, 1.f);
    if (st == PL_OK) st = pl_fill(s, j.dst, gdt, el, NAN);
    break;
  }
  case T_ALLREDUCE:
  case T_SENDRECV: {
    j.count = ne;
    r->bytes = ne * 4;
    st = balloc(&b, PL_ARENA_DEVICE, ne * 4, &j.src);
    if (st == PL_OK) st = balloc(&b, PL_ARENA_DEVICE, ne * 4, &j.dst);
    if (st == PL_OK) st = balloc(&b, PL_ARENA_HOST, ne * 4, &chk);
    if (st != PL_OK) break;
    st = pl_rng_fill(s, j.src, PL_F32, ne, seed, RANK_OFF(me), PL_DIST_UNIFORM,
                     -1.f, 1.f);
    if (st == PL_OK) st = pl_fill(s, j.dst, PL_F32, ne, NAN);
    j.next = (me + 1) % n;
    j.prev = (me + n - 1) % n;
    break;
  }
  case T_ALLTOALL: {
    size_t c = ne / (size_t)n; /* per peer */
    j.count = c;
    r->bytes = c * (size_t)n * 4;
    sc = calloc((size_t)n, sizeof *sc);
    sd = calloc((size_t)n, sizeof *sd);
    PL_ASSERT(sc && sd);
    for (int q = 0; q < n; q++) {
      sc[q] = c;
      sd[q] = (size_t)q * c;
    }
    j.scounts = sc;
    j.sdispls = sd;
    size_t tot = c * (size_t)n;
    st = balloc(&b, PL_ARENA_DEVICE, tot * 4, &j.src);
    if (st == PL_OK) st = balloc(&b, PL_ARENA_DEVICE, tot * 4, &j.dst);
    if (st == PL_OK) st = balloc(&b, PL_ARENA_HOST, tot * 4, &chk);
    if (st != PL_OK) break;
    st = pl_rng_fill(s, j.src, PL_F32, tot, seed, RANK_OFF(me),
                     PL_DIST_UNIFORM, -1.f, 1.f);
    if (st == PL_OK) st = pl_fill(s, j.dst, PL_F32, tot, NAN);
    break;
  }
  }
  if (st == PL_OK) st = pl_stream_sync(s);

  /* All ranks agree before any collective: a rank that could not set up makes
   * the whole point a result row (oom/error), never a hang. */
  int64_t flag = st == PL_OK ? 0 : st == PL_ENOMEM ? 1 : 2;
  pl_status cst = pl_host_allreduce_i64(ctx->comm, &flag, 1, PL_RED_MAX);
  if (cst != PL_OK) {
    bfree(&b);
    free(sc);
    free(sd);
    return cst;
  }
  if (flag) {
    if (st == PL_OK)
      r->st = pl_set_error(flag == 1 ? PL_ENOMEM : PL_ERUNTIME,
                           "set-up failed on another rank");
    else
      r->st = st;
    bfree(&b);
    free(sc);
    free(sd);
    return PL_OK;
  }

  /* -- timing (a failure here is fatal: the bench stops) -- */
  st = pl_bench_time(ctx, job_fn, &j, s, &r->t);
  if (st == PL_OK) st = pl_stream_sync(s);
  if (st == PL_OK) st = pl_stream_sync(s2);

  /* -- check -- */
  if (st == PL_OK && ctx->check) {
    switch (j.idle ? -1 : test) {
    case T_H2D:
    case T_D2D:
      st = to_host(s, chk, j.dst, ne * 4);
      if (st != PL_OK) break;
      inject_fault(chk, ne / 2, 4);
      r->bad = cmp_draws(chk, ne, seed, RANK_OFF(me), &r->first_bad);
      break;
    case T_D2H:
      inject_fault(j.dst, ne / 2, 4);
      r->bad = cmp_draws(j.dst, ne, seed, RANK_OFF(me), &r->first_bad);
      break;
    case T_BIDIR: {
      st = to_host(s, chk, j.dst, ne * 4);
      if (st == PL_OK) {
        int64_t f1, f2;
        inject_fault(j.dst2, ne / 2, 4);
        r->bad = cmp_draws(chk, ne, seed, RANK_OFF(me), &f1) +
                 cmp_draws(j.dst2, ne, seed, RANK_OFF(me) + ne, &f2);
        r->first_bad = f1 >= 0 ? f1 : f2;
      }
      break;
    }
    case T_SENDRECV:
      st = to_host(s, chk, j.dst, ne * 4);
      if (st != PL_OK) break;
      inject_fault(chk, ne / 2, 4);
      r->bad = cmp_draws(chk, ne, seed, RANK_OFF(j.prev), &r->first_bad);
      break;
    case T_ALLTOALL: {
      size_t c = j.count;
      st = to_host(s, chk, j.dst, c * (size_t)n * 4);
      if (st == PL_OK) inject_fault(chk, c * (size_t)n / 2, 4);
      for (int q = 0; st == PL_OK && q < n; q++) {
        int64_t f;
        int64_t bq = cmp_draws((float *)chk + (size_t)q * c, c, seed,
                               RANK_OFF(q) + (uint64_t)me * c, &f);
        if (bq && r->first_bad < 0) r->first_bad = (int64_t)((size_t)q * c) + f;
        r->bad += bq;
      }
      break;
    }
    case T_ALLREDUCE: {
      st = to_host(s, chk, j.dst, ne * 4);
      if (st != PL_OK) break;
      /* Any summation order of n values in [-1, 1): error <= (n-1)·n·u per
       * side, u = 2^-24; ours and theirs: twice that. */
      double tol = 2.0 * n * (n - 1) * ldexp(1.0, -24) + 0.0;
      inject_fault(chk, ne / 2, 4);
      r->bad = cmp_allreduce(chk, ne, seed, n, tol, &r->first_bad,
                             &r->max_err);
      break;
    }
    case T_GEMM: {
      size_t el = (size_t)G * (size_t)G, es = pl_dtype_size(gdt);
      char *hA = chk, *hB = hA + el * es, *hC = hB + el * es;
      st = to_host(s, hA, j.src, el * es);
      if (st == PL_OK) st = to_host(s, hB, j.src2, el * es);
      if (st == PL_OK) st = to_host(s, hC, j.dst, el * es);
      if (st != PL_OK) break;
      inject_fault(hC, 0, es); /* C[0][0] is always sampled */
#define GET(p, idx)                                                            \
  (gdt == PL_BF16 ? (double)pl_bf16_to_f32(((const pl_bf16 *)(p))[idx])       \
                  : (double)((const float *)(p))[idx])
      /* |C - ref| <= u_out·|ref| + 2·G·2^-24·Σ|a·b| (fp32 accumulation in
       * any order, then one rounding to the output dtype). */
      double u_out = gdt == PL_BF16 ? ldexp(1.0, -8) : ldexp(1.0, -24);
      int samples = 256;
      for (int t = 0; t < samples; t++) {
        size_t i = pl_rng_u32(seed ^ 0x9e37u, 2 * (uint64_t)t) % (uint64_t)G;
        size_t jj = pl_rng_u32(seed ^ 0x9e37u, 2 * (uint64_t)t + 1) % (uint64_t)G;
        if (t == 0) i = jj = 0;
        if (t == 1) i = jj = (size_t)G - 1;
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < G; k++) {
          double p = GET(hA, i * (size_t)G + (size_t)k) *
                     GET(hB, (size_t)k * (size_t)G + jj);
          ref += p;
          mag += fabs(p);
        }
        double got = GET(hC, i * (size_t)G + jj);
        double tol = u_out * fabs(ref) + 2.0 * (double)G * ldexp(1.0, -24) * mag +
                     1e-30;
        double err = fabs(got - ref);
        if (!(err <= tol)) {
          if (r->first_bad < 0) r->first_bad = (int64_t)(i * (size_t)G + jj);
          r->bad++;
        }
        if (err > r->max_err || isnan(err)) r->max_err = err;
        if (err / tol > r->max_tol_ratio || isnan(err))
          r->max_tol_ratio = err / tol;
      }
#undef GET
      break;
    }
    }
  }
  bfree(&b);
  free(sc);
  free(sd);
  return st;
}

/* ---- the bench ----------------------------------------------------------- */
static pl_status calib_run(pl_bench_ctx *ctx, void *state) {
  (void)state;
  pl_args *a = ctx->args;
  bool cuda = pl_dev_backend(ctx->dev) == PL_BACKEND_CUDA;
  uint64_t sizes[PL_OPT_LIST_MAX];
  int nsizes;
  if (pl_args_given(a, "sizes")) {
    nsizes = pl_args_size_list(a, "sizes", sizes, PL_OPT_LIST_MAX);
  } else {
    PL_TRY(pl_parse_size_list("--sizes", cuda ? "64Ki:256Mi:x4" : "4Ki:16Mi:x4",
                              sizes, PL_OPT_LIST_MAX, &nsizes));
  }
  int64_t G = pl_args_given(a, "gemm-size") ? (int64_t)pl_args_size(a, "gemm-size")
                                            : (cuda ? 8192 : 512);
  pl_dtype gdt = cuda ? PL_BF16 : PL_F32;
  if (pl_args_given(a, "gemm-dtype"))
    gdt = pl_args_enum(a, "gemm-dtype") == 0 ? PL_BF16 : PL_F32;
  int tests[T_COUNT], ntests = pl_args_enum_list(a, "tests", tests, T_COUNT);
  bool solo = pl_args_flag(a, "solo");
  bool want[T_COUNT] = {false};
  for (int i = 0; i < ntests; i++) want[tests[i]] = true;

  ctx->npoints = 0;
  for (int t = 0; t < T_COUNT; t++)
    if (want[t]) ctx->npoints += t == T_GEMM ? 1 : nsizes;

  pl_stream *s2 = NULL;
  pl_event *ev0 = NULL, *ev1 = NULL;
  PL_TRY(pl_stream_create(ctx->dev, &s2));
  pl_status st = pl_event_create(ctx->dev, &ev0);
  if (st == PL_OK) st = pl_event_create(ctx->dev, &ev1);
  int n = ctx->size;

  for (int t = 0; st == PL_OK && t < T_COUNT; t++) {
    if (!want[t]) continue;
    for (int si = 0; st == PL_OK && si < (t == T_GEMM ? 1 : nsizes); si++) {
      size_t S = (size_t)sizes[si];
      char label[96];
      if (t == T_GEMM)
        snprintf(label, sizeof label, "gemm %s %lld^3", pl_dtype_name(gdt),
                 (long long)G);
      else
        snprintf(label, sizeof label, "%s %zu bytes", test_names[t], S);
      pl_bench_progress(ctx, label);

      point_result r;
      if (t == T_ALLTOALL && S / 4 < (size_t)n) {
        pl_row *row = pl_row_new(ctx);
        pl_row_str(row, "test", test_names[t]);
        pl_row_i64(row, "bytes", (int64_t)S);
        pl_row_i64(row, "ranks", n);
        pl_row_status(row, "infeasible", "fewer than one f32 per peer");
        st = pl_row_emit(row);
        continue;
      }
      st = run_point(ctx, t, S, G, gdt, solo, s2, ev0, ev1, &r);
      if (st != PL_OK) break;

      /* Checks over ranks: any bad element anywhere fails the row. */
      int64_t agg[2] = {r.bad, r.st != PL_OK};
      double errs[2] = {r.max_err, r.max_tol_ratio};
      st = pl_host_allreduce_i64(ctx->comm, agg, 2, PL_RED_MAX);
      if (st == PL_OK)
        st = pl_host_allreduce_f64(ctx->comm, errs, 2, PL_RED_MAX);
      if (st != PL_OK) break;

      bool alone = solo && per_rank_test(t);
      pl_row *row = pl_row_new(ctx);
      pl_row_str(row, "test", test_names[t]);
      pl_row_i64(row, "ranks", alone ? 1 : n);
      pl_row_str(row, "dtype", t == T_GEMM ? pl_dtype_name(gdt) : "f32");
      if (t == T_GEMM) {
        pl_row_i64(row, "bytes", (int64_t)r.bytes);
        pl_row_i64(row, "mnk", G);
      } else {
        pl_row_i64(row, "bytes", (int64_t)(t == T_BIDIR || t == T_D2D
                                               ? r.bytes / 2 : r.bytes));
      }
      char note[256] = "";
      if (r.st != PL_OK) {
        pl_row_status_from(row, r.st);
      } else {
        double sec = r.t.median * 1e-3;
        pl_row_f64(row, "time_ms", r.t.median);
        pl_row_f64(row, "time_p10_ms", r.t.p10);
        pl_row_f64(row, "time_p90_ms", r.t.p90);
        if (t == T_GEMM) {
          pl_row_f64(row, "tflops", 2.0 * (double)G * G * G / sec / 1e12);
        } else {
          double algbw = (double)r.bytes / sec / 1e9;
          double f = t == T_ALLREDUCE  ? 2.0 * (n - 1) / n
                     : t == T_ALLTOALL ? (double)(n - 1) / n
                                       : 1.0;
          pl_row_f64(row, "algbw_gbs", algbw);
          pl_row_f64(row, "busbw_gbs", algbw * f);
        }
        const char *what = "";
        switch (t) {
        case T_H2D: case T_D2H: case T_BIDIR:
          what = cuda ? "pinned host"
                      : "cpu backend: memcpy between arenas";
          if (t == T_BIDIR) what = cuda ? "pinned host, two streams; bytes each way, bw counts both"
                                        : "cpu backend: memcpy, streams serialize; bw counts both";
          break;
        case T_D2D: what = cuda ? "bw counts read+write" : "cpu backend: memcpy; bw counts read+write"; break;
        case T_GEMM: what = cuda ? "fp32 accumulate" : "cpu backend: BLAS"; break;
        case T_ALLREDUCE: what = "busbw = algbw*2(n-1)/n"; break;
        case T_ALLTOALL: what = "pl_alltoallv equal counts; busbw = algbw*(n-1)/n"; break;
        case T_SENDRECV: what = "ring hop; busbw = algbw"; break;
        }
        snprintf(note, sizeof note, "%s", what);
        if (per_rank_test(t))
          snprintf(note + strlen(note), sizeof note - strlen(note), "; %s",
                   alone ? "rank 0 alone" : n > 1 ? "per rank, all ranks at once" : "one rank");
        if (!ctx->check) {
          pl_row_check(row, "skip");
        } else if (agg[0] == 0) {
          pl_row_check(row, "pass");
          if (t == T_GEMM || t == T_ALLREDUCE)
            snprintf(note + strlen(note), sizeof note - strlen(note),
                     "; max abs err %.3g", errs[0]);
        } else {
          pl_row_check(row, "fail");
          snprintf(note + strlen(note), sizeof note - strlen(note),
                   "; CHECK FAILED: %lld bad elements (max over ranks), first "
                   "bad index on rank 0: %lld, max abs err %.3g",
                   (long long)agg[0], (long long)r.first_bad, errs[0]);
        }
        pl_row_status(row, "ok", note);
      }
      st = pl_row_emit(row);
    }
  }
  if (ev0) pl_event_destroy(ev0);
  if (ev1) pl_event_destroy(ev1);
  pl_stream_destroy(s2);
  return st;
}

const pl_bench pl_bench_calib = {
    .name = "calib",
    .summary = "the machine's ceilings: host link each way and both, device "
               "copy, GEMM rate, all-reduce / all-to-all / send-recv bandwidth",
    .opts = calib_opts,
    .columns = CALIB_COLUMNS,
    .main = calib_run,
};
