/* bench_calib.c — `plateau bench calib`: the machine's ceilings in one run.
 *
 * Every other bench reports "% of the measured ceiling", so the ceilings are
 * measured here, the same way, on the same launch (`variant` is the test):
 *   h2d, d2h   pinned host <-> device copies, one direction        (per rank)
 *   bidir      both at once on two streams; bytes = 2·S              (per rank)
 *   d2d        device copy; bytes counted read + write = 2·S         (per rank)
 *   gemm       m = n = k = G; FLOPs 2·G³ (bf16 in/out, fp32 accumulate on
 *              CUDA; fp32 on the CPU backend)                        (per rank)
 *   allreduce  S bytes of f32, sum;     busbw = algbw · 2(n−1)/n    (all ranks)
 *   alltoall   S bytes per rank, equal counts through pl_alltoallv;
 *                                       busbw = algbw · (n−1)/n
 *   sendrecv   ring hop r -> r+1, S bytes each way; busbw = algbw
 * algbw = bytes / time (nccl-tests' definitions).  The per-rank tests run on
 * every rank at once (each on its own GPU), as the optimizer and the offload
 * use the links; --solo runs them on rank 0 alone (one GPU's ceiling).
 *
 * Every transfer is verified: inputs are counter-RNG draws (never zeros),
 * outputs poisoned before the run, and after timing each received buffer is
 * compared bit for bit with the draws it must hold (all-reduce: with their
 * sum, reduction length n).  The GEMM is compared with a double-precision
 * reference on 256 sampled entries (reduction length G).  On the CPU backend
 * the "host link" is memcpy between the two arenas and the note says so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "plateau/hd.h"

enum {
  T_H2D,
  T_D2H,
  T_BIDIR,
  T_D2D,
  T_GEMM,
  T_ALLREDUCE,
  T_ALLTOALL,
  T_SENDRECV,
  T_COUNT
};
static const char *const test_names[] = {"h2d",      "d2h",      "bidir",
                                         "d2d",      "gemm",     "allreduce",
                                         "alltoall", "sendrecv", NULL};
/* per test: source and destination on the device, nccl-tests' bus factor
 * (n: ranks; 0 = 1), the note on CUDA and on the CPU */
static const struct {
  int src_dev, dst_dev, bus;
  const char *cuda, *cpu;
} tdef[T_COUNT] = {
    {0, 1, 0, "pinned host", "cpu backend: memcpy between arenas"},
    {1, 0, 0, "pinned host", "cpu backend: memcpy between arenas"},
    {0, 1, 0, "pinned host, two streams; bytes each way, bw counts both",
     "cpu backend: memcpy, streams serialize; bw counts both"},
    {1, 1, 0, "bw counts read+write",
     "cpu backend: memcpy; bw counts "
     "read+write"},
    {1, 1, 0, "fp32 accumulate", "cpu backend: BLAS"},
    {1, 1, 2, "busbw = algbw*2(n-1)/n", "busbw = algbw*2(n-1)/n"},
    {1, 1, 1, "pl_alltoallv equal counts; busbw = algbw*(n-1)/n",
     "pl_alltoallv equal counts; busbw = algbw*(n-1)/n"},
    {1, 1, 0, "ring hop; busbw = algbw", "ring hop; busbw = algbw"},
};
static const char *const gemm_dtypes[] = {"bf16", "f32", NULL};

static const pl_opt calib_opts[] = {
    {"sizes", 0, PL_OPT_SIZE_LIST, NULL,
     "transfer sizes per point, list or range lo:hi:xF", 4, 68719476736.0,
     NULL},
    {"gemm-size", 0, PL_OPT_SIZE, NULL, "GEMM m = n = k", 1, 65536, NULL},
    {"gemm-dtype", 0, PL_OPT_ENUM, NULL, "GEMM input/output dtype", 0, 0,
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

static const pl_preset calib_presets[] = {
    {"cuda", "sizes=64Ki:256Mi:x4 gemm-size=8192 gemm-dtype=bf16"},
    {"cpu", "sizes=4Ki:16Mi:x4 gemm-size=512 gemm-dtype=f32"},
    {NULL, NULL},
};

/* Data of rank q lives at RNG offset q·2^40 (+ element index). */
#define RANK_OFF(q) ((uint64_t)(q) << 40)

typedef struct calib {
  uint64_t sizes[PL_OPT_LIST_MAX];
  int nsizes, tests[T_COUNT], ntests;
  int64_t G;
  pl_dtype gdt;
  bool solo;
  pl_stream *s, *s2;
  pl_event *ev0, *ev1;
  /* the point */
  int test;
  bool idle; /* --solo: a rank other than 0 on a per-rank test */
  size_t ne; /* f32 elements of a transfer (alltoall: per peer) */
  void *src, *dst, *src2, *dst2, *host; /* host: device results read back */
  size_t *counts, *displs;
  pl_comm *comm;
  int rank, n;
  uint64_t seed;
} calib;

static pl_status run(void *st) {
  calib *c = st;
  if (c->idle)
    return PL_OK;
  switch (c->test) {
  case T_H2D:
  case T_D2H:
  case T_D2D:
    return pl_memcpy_async(c->s, c->dst, c->src, c->ne * 4);
  case T_BIDIR:
    /* s2 starts when s reaches this point; s then waits for s2's copy, so an
     * event pair on s brackets both directions. */
    PL_TRY(pl_event_record(c->ev0, c->s));
    PL_TRY(pl_stream_wait(c->s2, c->ev0));
    PL_TRY(pl_memcpy_async(c->s, c->dst, c->src, c->ne * 4));
    PL_TRY(pl_memcpy_async(c->s2, c->dst2, c->src2, c->ne * 4));
    PL_TRY(pl_event_record(c->ev1, c->s2));
    return pl_stream_wait(c->s, c->ev1);
  case T_GEMM:
    return pl_gemm(c->s, false, false, c->G, c->G, c->G, 1.0f, c->src, c->G,
                   c->src2, c->G, 0.0f, c->dst, c->G, c->gdt, c->gdt);
  case T_ALLREDUCE:
    return pl_allreduce(c->comm, c->src, c->dst, c->ne, PL_F32, PL_RED_SUM,
                        c->s);
  case T_ALLTOALL:
    return pl_alltoallv(c->comm, c->src, c->counts, c->displs, c->dst,
                        c->counts, c->displs, PL_F32, c->s);
  default: /* T_SENDRECV: ring hop */
    return pl_sendrecv(c->comm, c->src, c->ne, (c->rank + 1) % c->n, c->dst,
                       c->ne, (c->rank + c->n - 1) % c->n, PL_F32, c->s);
  }
}

static bool per_rank(int t) {
  return t <= T_GEMM;
}

static pl_status init(pl_bench_ctx *x, void *st) {
  calib *c = st;
  c->nsizes = pl_args_size_list(x->args, "sizes", c->sizes, PL_OPT_LIST_MAX);
  c->G = (int64_t)pl_args_size(x->args, "gemm-size");
  c->gdt = pl_args_enum(x->args, "gemm-dtype") == 0 ? PL_BF16 : PL_F32;
  c->ntests = pl_args_enum_list(x->args, "tests", c->tests, T_COUNT);
  c->solo = pl_args_flag(x->args, "solo");
  c->comm = x->comm;
  c->rank = x->rank;
  c->n = x->size;
  c->s = x->stream;
  x->npoints = 0; /* tests in their table order, sizes within */
  bool want[T_COUNT] = {false};
  for (int i = 0; i < c->ntests; i++)
    want[c->tests[i]] = true;
  c->ntests = 0;
  for (int t = 0; t < T_COUNT; t++)
    if (want[t]) {
      c->tests[c->ntests++] = t;
      x->npoints += t == T_GEMM ? 1 : c->nsizes;
    }
  return PL_OK;
}

/* Point p: the test, and the size index within it. */
static int point_test(const calib *c, int p, size_t *S) {
  for (int i = 0; i < c->ntests; i++) {
    int t = c->tests[i], n = t == T_GEMM ? 1 : c->nsizes;
    if (p < n) {
      *S = t == T_GEMM ? 0 : (size_t)c->sizes[p];
      return t;
    }
    p -= n;
  }
  PL_ASSERT(!"point out of range");
  return -1;
}

static pl_status point(pl_bench_ctx *x, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  calib *c = st;
  size_t S = 0;
  c->test = point_test(c, p, &S);
  c->idle = c->solo && per_rank(c->test) && x->rank != 0;
  c->ne = S / 4;
  bool alone = c->solo && per_rank(c->test);
  pl_row_str(row, "variant", test_names[c->test]);
  pl_row_i64(row, "ranks", alone ? 1 : x->size);
  if (c->test == T_GEMM) {
    snprintf(label, n, "gemm %s %lld^3", pl_dtype_name(c->gdt),
             (long long)c->G);
    pl_row_str(row, "dtype", pl_dtype_name(c->gdt));
    pl_row_i64(row, "mnk", c->G);
    pl_row_i64(
        row, "bytes",
        (int64_t)(3 * (size_t)c->G * (size_t)c->G * pl_dtype_size(c->gdt)));
    return PL_OK;
  }
  snprintf(label, n, "%s %zu bytes", test_names[c->test], S);
  pl_row_str(row, "dtype", "f32");
  pl_row_i64(row, "bytes", (int64_t)(c->ne * 4));
  if (c->test == T_ALLTOALL && c->ne < (size_t)x->size)
    return pl_set_error(PL_EINFEASIBLE, "fewer than one f32 per peer");
  if (c->test == T_ALLTOALL)
    c->ne /= (size_t)x->size; /* per peer */
  return PL_OK;
}

static pl_status alloc(pl_bench_ctx *x, bool dev, size_t bytes, void **out) {
  return pl_alloc(x->dev, dev ? PL_ARENA_DEVICE : PL_ARENA_HOST, bytes, "calib",
                  out);
}

static void host_draws(float *f, size_t n, uint64_t seed, uint64_t off) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++)
    f[i] = pl_rng_uniform(seed, off + i, -1.f, 1.f);
}

/* Fill n f32 at p (device or host) with the draws at offset off. */
static pl_status draws(calib *c, bool dev, void *p, size_t n, uint64_t seed,
                       uint64_t off) {
  if (dev)
    return pl_rng_fill(c->s, p, PL_F32, n, seed, off, PL_DIST_UNIFORM, -1.f,
                       1.f);
  host_draws(p, n, seed, off);
  return PL_OK;
}

/* Inputs: draws; outputs: poisoned.  An allocation failure is a row. */
static pl_status setup(pl_bench_ctx *x, void *st, int p) {
  calib *c = st;
  const uint64_t seed = x->seed, me = RANK_OFF(x->rank);
  if (!c->s2) {
    PL_TRY(pl_stream_create(x->dev, &c->s2));
    PL_TRY(pl_event_create(x->dev, &c->ev0));
    PL_TRY(pl_event_create(x->dev, &c->ev1));
  }
  if (c->idle)
    return PL_OK;
  const int t = c->test;
  if (t == T_GEMM) {
    size_t el = (size_t)c->G * (size_t)c->G, b = el * pl_dtype_size(c->gdt);
    PL_TRY(alloc(x, true, b, &c->src));
    PL_TRY(alloc(x, true, b, &c->src2));
    PL_TRY(alloc(x, true, b, &c->dst));
    PL_TRY(alloc(x, false, 3 * b, &c->host));
    PL_TRY(pl_rng_fill(c->s, c->src, c->gdt, el, seed, me, PL_DIST_UNIFORM,
                       -1.f, 1.f));
    PL_TRY(pl_rng_fill(c->s, c->src2, c->gdt, el, seed, me + el,
                       PL_DIST_UNIFORM, -1.f, 1.f));
    PL_TRY(pl_fill(c->s, c->dst, c->gdt, el, NAN));
    return pl_stream_sync(c->s);
  }
  size_t n = t == T_ALLTOALL ? c->ne * (size_t)x->size : c->ne;
  bool sdev = tdef[t].src_dev, ddev = tdef[t].dst_dev;
  PL_TRY(alloc(x, sdev, n * 4, &c->src));
  PL_TRY(alloc(x, ddev, n * 4, &c->dst));
  if (ddev)
    PL_TRY(alloc(x, false, n * 4, &c->host));
  PL_TRY(draws(c, sdev, c->src, n, seed, me));
  if (ddev)
    PL_TRY(pl_fill(c->s, c->dst, PL_F32, n, NAN));
  else
    memset(c->dst, 0xff, n * 4);
  if (t == T_BIDIR) {
    PL_TRY(alloc(x, true, n * 4, &c->src2));
    PL_TRY(alloc(x, false, n * 4, &c->dst2));
    PL_TRY(draws(c, true, c->src2, n, seed, me + n));
    memset(c->dst2, 0xff, n * 4);
  }
  if (t == T_ALLTOALL) {
    c->counts = calloc((size_t)x->size, sizeof *c->counts);
    c->displs = calloc((size_t)x->size, sizeof *c->displs);
    PL_ASSERT(c->counts && c->displs);
    for (int q = 0; q < x->size; q++) {
      c->counts[q] = c->ne;
      c->displs[q] = (size_t)q * c->ne;
    }
  }
  return pl_stream_sync(c->s);
}

/* Fault injection for the suite's own tests (PLATEAU_CALIB_INJECT_FAULT=1):
 * flip an exponent bit of element k of a received buffer just before it is
 * compared, so a test can show that a wrong transfer or GEMM fails its row. */
static void inject_fault(void *buf, size_t k, size_t elem_size) {
  const char *e = getenv("PLATEAU_CALIB_INJECT_FAULT");
  if (e && *e && strcmp(e, "0") != 0)
    ((unsigned char *)buf)[k * elem_size + elem_size - 1] ^= 0x40;
}

/* got (n f32 on the host) against the draws it must hold: seeds and offsets
 * per block of len elements (alltoall: one block per source rank). */
static void compare_draws(pl_check *chk, const char *what, float *got, size_t n,
                          size_t len, uint64_t seed, const uint64_t *offs) {
  float *want = malloc(n * 4 + 4);
  PL_ASSERT(want != NULL);
  for (size_t b = 0; b * len < n; b++)
    host_draws(want + b * len, len, seed, offs[b]);
  inject_fault(got, n / 2, 4);
  pl_check_arrays(chk, what, got, PL_ELEM_F32, want, PL_ELEM_F32, n, PL_F32,
                  PL_CHECK_EXACT);
  free(want);
}

/* 256 sampled entries of C (the corners always) against a double dot
 * product of the same bf16/f32 inputs; reduction length G. */
static pl_status check_gemm(calib *c, pl_check *chk) {
  const size_t G = (size_t)c->G, el = G * G, es = pl_dtype_size(c->gdt);
  char *hA = c->host, *hB = hA + el * es, *hC = hB + el * es;
  PL_TRY(pl_memcpy_async(c->s, hA, c->src, el * es));
  PL_TRY(pl_memcpy_async(c->s, hB, c->src2, el * es));
  PL_TRY(pl_memcpy_async(c->s, hC, c->dst, el * es));
  PL_TRY(pl_stream_sync(c->s));
  inject_fault(hC, 0, es); /* C[0][0] is always sampled */
  const pl_elem e = pl_elem_of(c->gdt);
#define GET(p, k)                                                              \
  (e == PL_ELEM_BF16 ? (double)pl_bf16_to_f32(((const pl_bf16 *)(p))[k])       \
                     : (double)((const float *)(p))[k])
  double got[256], ref[256];
  for (int t = 0; t < 256; t++) {
    size_t i = pl_rng_u32(c->seed ^ 0x9e37u, 2 * (uint64_t)t) % G;
    size_t j = pl_rng_u32(c->seed ^ 0x9e37u, 2 * (uint64_t)t + 1) % G;
    if (t < 2)
      i = j = t ? G - 1 : 0;
    ref[t] = 0;
    for (size_t k = 0; k < G; k++)
      ref[t] += GET(hA, i * G + k) * GET(hB, k * G + j);
    got[t] = GET(hC, i * G + j);
  }
#undef GET
  pl_check_arrays(chk, "C (sampled)", got, PL_ELEM_F64, ref, PL_ELEM_F64, 256,
                  c->gdt, c->G);
  return PL_OK;
}

static pl_status check(pl_bench_ctx *x, void *st, int p, pl_check *chk) {
  calib *c = st;
  const int t = c->test, n = x->size;
  if (c->idle)
    return PL_OK;
  if (t == T_GEMM)
    return check_gemm(c, chk);
  c->seed = x->seed;
  const size_t ne = t == T_ALLTOALL ? c->ne * (size_t)n : c->ne;
  float *got = c->dst;
  if (tdef[t].dst_dev) {
    PL_TRY(pl_memcpy_async(c->s, c->host, c->dst, ne * 4));
    PL_TRY(pl_stream_sync(c->s));
    got = c->host;
  }
  uint64_t offs[PL_OPT_LIST_MAX + 1], me = RANK_OFF(x->rank);
  if (t == T_ALLREDUCE) { /* the sum of every rank's draws, in rank order */
    float *want = calloc(ne + 1, sizeof *want), *one = malloc(ne * 4 + 4);
    PL_ASSERT(want && one);
    for (int q = 0; q < n; q++) {
      host_draws(one, ne, x->seed, RANK_OFF(q));
      for (size_t i = 0; i < ne; i++)
        want[i] += one[i];
    }
    inject_fault(got, ne / 2, 4);
    pl_check_arrays(chk, "sum", got, PL_ELEM_F32, want, PL_ELEM_F32, ne, PL_F32,
                    n);
    free(want);
    free(one);
    return PL_OK;
  }
  if (t == T_ALLTOALL) { /* block q: rank q's draws for this rank */
    for (int q = 0; q < n && q < PL_OPT_LIST_MAX; q++)
      offs[q] = RANK_OFF(q) + (uint64_t)x->rank * c->ne;
    compare_draws(chk, "received", got, ne, c->ne, x->seed, offs);
    return PL_OK;
  }
  offs[0] = t == T_SENDRECV ? RANK_OFF((x->rank + n - 1) % n) : me;
  compare_draws(chk, "received", got, ne, ne, x->seed, offs);
  if (t == T_BIDIR) {
    offs[0] = me + ne;
    compare_draws(chk, "received d2h", c->dst2, ne, ne, x->seed, offs);
  }
  return PL_OK;
}

static pl_status finish(pl_bench_ctx *x, void *st, int p, pl_row *row,
                        pl_work *w) {
  calib *c = st;
  const int t = c->test, n = x->size;
  if (t == T_GEMM) {
    w->flops = 2.0 * (double)c->G * c->G * c->G;
  } else {
    const double sec = x->meas->t.median * 1e-3;
    const size_t ne = t == T_ALLTOALL ? c->ne * (size_t)n : c->ne;
    w->bytes = (double)ne * 4 * (t == T_BIDIR || t == T_D2D ? 2 : 1);
    const double f = tdef[t].bus == 2   ? 2.0 * (n - 1) / n
                     : tdef[t].bus == 1 ? (double)(n - 1) / n
                                        : 1.0;
    pl_row_i64(row, "bytes", (int64_t)(ne * 4));
    pl_row_f64(row, "busbw_gbs", w->bytes / sec / 1e9 * f);
  }
  pl_row_note(row, "%s", x->cuda ? tdef[t].cuda : tdef[t].cpu);
  if (per_rank(t))
    pl_row_note(row, "%s",
                c->solo ? "rank 0 alone"
                : n > 1 ? "per rank, all ranks at once"
                        : "one rank");
  return PL_OK;
}

static void teardown(pl_bench_ctx *x, void *st, int p) {
  calib *c = st;
  void **ps[] = {&c->src, &c->dst, &c->src2, &c->dst2, &c->host};
  for (int i = 0; i < 5; i++) {
    pl_free(x->dev, *ps[i]);
    *ps[i] = NULL;
  }
  free(c->counts);
  free(c->displs);
  c->counts = c->displs = NULL;
}

static void fini(pl_bench_ctx *x, void *st) {
  calib *c = st;
  if (c->ev0)
    pl_event_destroy(c->ev0);
  if (c->ev1)
    pl_event_destroy(c->ev1);
  if (c->s2)
    pl_stream_destroy(c->s2);
}

const pl_bench pl_bench_calib = {
    .name = "calib",
    .summary = "the machine's ceilings: host link each way and both, device "
               "copy, GEMM rate, all-reduce / all-to-all / send-recv bandwidth",
    .opts = calib_opts,
    .presets = calib_presets,
    .preset_cpu = "cpu",
    .preset_cuda = "cuda",
    .columns = "variant\tbytes\tranks\tdtype\tmnk\ttime_ms\ttime_p10_ms\t"
               "time_p90_ms\talgbw_gbs\tbusbw_gbs\ttflops\tmax_err",
    .rate = "algbw_gbs",
    .state = sizeof(calib),
    .init = init,
    .point = point,
    .setup = setup,
    .run = run,
    .check = check,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
