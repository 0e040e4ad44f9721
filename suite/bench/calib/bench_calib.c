/* bench_calib.c — `plateau bench calib`: the machine's ceilings in one run.
 *
 * Every other bench reports "% of the measured ceiling", so the ceilings are
 * measured here, the same way, on the same launch (`variant` is the test):
 *   h2d, d2h   pinned host <-> device copies, one direction        (per rank)
 *   bidir      both at once on two streams; bytes = 2·S              (per rank)
 *   d2d        device copy; bytes counted read + write = 2·S         (per rank)
 *   gemm       m = n = k = G; FLOPs 2·G³ (bf16 in/out, fp32 accumulate on
 *              CUDA; fp32 on the CPU backend)                        (per rank)
 *   mem_read   host memory (the pinned arena the optimizer's state lives in),
 *              every OpenMP thread over its contiguous range: a sum of M
 *              bytes of 64-bit words; bytes = M                      (per rank)
 *   mem_write  the same with non-temporal 16-byte stores; bytes = M
 *   mem_copy   loads and non-temporal stores; bytes counted read + write = 2·M
 *              (the CPU AdamW update streams 14 bytes read and 14 written a
 *              parameter through this memory: its floor is 28·Θ / copy rate)
 *   allreduce  S bytes of f32, sum;     busbw = algbw · 2(n−1)/n    (all ranks)
 *   alltoall   S bytes per rank, equal counts through pl_alltoallv;
 *                                       busbw = algbw · (n−1)/n
 *   sendrecv   ring hop r -> r+1, S bytes each way; busbw = algbw
 *   alloc      the device arena's allocatable ceiling under a step's
 *              pattern (pl_mem_probe_ceiling: blocks of 1 GiB down to 64 MiB,
 *              under --mem-limit L of L/16 down to L/256, until refused, every
 * other one freed, one block as large as the holes, blocks again); bytes = the
 * smaller ceiling of two probes before the timed loop, everything live in the
 * arena counted; nothing is timed.  The planner reads it as hbm_alloc (the
 * smallest of the ranks' rows) algbw = bytes / time (nccl-tests' definitions).
 * The per-rank tests run on every rank at once (each on its own GPU), as the
 * optimizer and the offload use the links; --solo runs them on rank 0 alone
 * (one GPU's ceiling).
 *
 * Every transfer is verified: inputs are counter-RNG draws (never zeros),
 * outputs poisoned before the run, and after timing each received buffer is
 * compared bit for bit with the draws it must hold (all-reduce: with their
 * sum, reduction length n).  The GEMM is compared with a double-precision
 * reference on 256 sampled entries (reduction length G); the host-memory
 * passes with the sum, value or copy they must have produced.  On the CPU
 * backend the "host link" is memcpy between the two arenas and the note says
 * so.  The host-memory tests are in the cuda preset and on request
 * (--tests mem_read,mem_write,mem_copy), one point each of --mem-size bytes. */
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "calib.h"
#include "harness/bench.h"
#include "plateau/host_device.h"

enum {
  T_H2D,
  T_D2H,
  T_BIDIR,
  T_D2D,
  T_GEMM,
  T_MREAD,  /* host memory: read, all cores        */
  T_MWRITE, /* host memory: non-temporal write     */
  T_MCOPY,  /* host memory: copy (read + write)    */
  T_ALLREDUCE,
  T_ALLTOALL,
  T_SENDRECV,
  T_ALLOC, /* the device's allocatable ceiling        */
  T_COUNT
};

/* Data of rank q lives at RNG offset q·2^40 (+ element index). */
#define RANK_OFF(q) ((uint64_t)(q) << 40)

typedef struct calib {
  uint64_t sizes[PL_OPT_LIST_MAX];
  int nsizes, tests[T_COUNT], ntests;
  int64_t G;
  pl_dtype gdt;
  size_t msize;  /* bytes of a host-memory test buffer */
  uint64_t msum; /* mem_read: the sum the timed reads computed */
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
  size_t ceiling; /* alloc: the smallest ceiling of the runs (0: none yet) */
  size_t before;  /* alloc: the arena's bytes in use before the probe    */
  size_t pbig, pgrain; /* alloc: the probe's block and grain */
} calib;

static const char *const test_names[] = {
    "h2d",      "d2h",       "bidir",    "d2d",       "gemm",
    "mem_read", "mem_write", "mem_copy", "allreduce", "alltoall",
    "sendrecv", "alloc",     NULL};
/* per test: nccl-tests' bus factor (n: ranks; 0 = 1), the note on CUDA and
 * on the CPU */
static const struct {
  int bus;
  const char *cuda, *cpu;
} tdef[T_COUNT] = {
    {0, "pinned host", "cpu backend: memcpy between arenas"},
    {0, "pinned host", "cpu backend: memcpy between arenas"},
    {0, "pinned host, two streams; bytes each way, bw counts both",
     "cpu backend: memcpy, streams serialize; bw counts both"},
    {0, "bw counts read+write", "cpu backend: memcpy; bw counts read+write"},
    {0, "fp32 accumulate", "cpu backend: BLAS"},
    {0, "host memory (pinned), OpenMP threads", "host memory, OpenMP threads"},
    {0, "host memory (pinned), non-temporal stores",
     "host memory, non-temporal stores"},
    {0, "host memory (pinned), non-temporal stores; bw counts read+write",
     "host memory, non-temporal stores; bw counts read+write"},
    {2, "busbw = algbw*2(n-1)/n", "busbw = algbw*2(n-1)/n"},
    {1, "pl_alltoallv equal counts; busbw = algbw*(n-1)/n",
     "pl_alltoallv equal counts; busbw = algbw*(n-1)/n"},
    {0, "ring hop; busbw = algbw", "ring hop; busbw = algbw"},
    {0, "bytes: allocatable ceiling of the device arena (step pattern)",
     "bytes: allocatable ceiling of the device arena under its limit"},
};
static const char *const gemm_dtypes[] = {"bf16", "f32", NULL};

static const pl_opt calib_opts[] = {
    {"sizes", 0, PL_OPT_SIZE_LIST, NULL,
     "transfer sizes per point, list or range lo:hi:xF", 4, 68719476736.0,
     NULL},
    {"gemm-size", 0, PL_OPT_SIZE, NULL, "GEMM m = n = k", 1, 65536, NULL},
    {"gemm-dtype", 0, PL_OPT_ENUM, NULL, "GEMM input/output dtype", 0, 0,
     gemm_dtypes},
    {"mem-size", 0, PL_OPT_SIZE, NULL,
     "bytes of a host-memory test buffer (mem_read, mem_write, mem_copy)", 4096,
     1e13, NULL},
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
    {"cuda", "sizes=64Ki:256Mi:x4 gemm-size=8192 gemm-dtype=bf16 "
             "mem-size=2Gi tests=h2d,d2h,bidir,d2d,gemm,mem_read,mem_write,"
             "mem_copy,allreduce,alltoall,sendrecv,alloc"},
    {"cpu", "sizes=4Ki:16Mi:x4 gemm-size=512 gemm-dtype=f32 mem-size=64Mi"},
    {NULL, NULL},
};

static bool per_rank(int t) {
  return t <= T_MCOPY || t == T_ALLOC;
}

/* one point (not one per transfer size) */
static bool single(int t) {
  return t == T_GEMM || (t >= T_MREAD && t <= T_MCOPY) || t == T_ALLOC;
}

#define PROBE_BIG ((size_t)1 << 30)
#define PROBE_GRAIN ((size_t)64 << 20)

static size_t dev_in_use(pl_dev *dev) {
  pl_mem_stats s;
  return pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s) == PL_OK ? s.current : 0;
}

/* ---- the operations -------------------------------------------------------
 * Per test its buffers (and their release), the timed unit and the
 * verification.  Inputs are counter-RNG draws (never zeros) and outputs are
 * poisoned before the run; after timing every received buffer is compared
 * bit for bit with the draws it must hold (all-reduce: with their sum,
 * reduction length n), the GEMM on 256 sampled entries with a double dot
 * product (reduction length G), all through compare.h.  The host-memory
 * passes: each OpenMP thread streams its contiguous 64-byte-aligned range (a
 * static schedule, so the threads that first touched a page in the draws
 * also read it) with 16-byte SSE2 loads (four independent 64-bit sums for
 * mem_read) and non-temporal stores (mem_write, mem_copy: no
 * read-for-ownership, as a streaming kernel writes); checked against the
 * serial sum, the value and the source. */

#define MEM_FILL 0x5a5a5a5a5a5a5a5aull /* mem_write's value */

/* [lo, hi) of thread t of T over n 64-byte lines, in 64-bit words */
static void mem_range(size_t words, int t, int T, size_t *lo, size_t *hi) {
  size_t lines = words / 8;
  *lo = lines * (size_t)t / (size_t)T * 8;
  *hi = lines * (size_t)(t + 1) / (size_t)T * 8;
}

/* Σ of the 64-bit words (mod 2^64: any order gives the same sum). */
static uint64_t mem_read(const uint64_t *a, size_t words) {
  uint64_t total = 0;
#pragma omp parallel reduction(+ : total)
  {
    size_t lo, hi;
    mem_range(words, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
#if defined(__x86_64__)
    __m128i s0 = _mm_setzero_si128(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = lo; i < hi; i += 8) {
      s0 = _mm_add_epi64(s0, _mm_load_si128((const __m128i *)(a + i)));
      s1 = _mm_add_epi64(s1, _mm_load_si128((const __m128i *)(a + i + 2)));
      s2 = _mm_add_epi64(s2, _mm_load_si128((const __m128i *)(a + i + 4)));
      s3 = _mm_add_epi64(s3, _mm_load_si128((const __m128i *)(a + i + 6)));
    }
    uint64_t lane[2];
    _mm_storeu_si128((__m128i *)lane, _mm_add_epi64(_mm_add_epi64(s0, s1),
                                                    _mm_add_epi64(s2, s3)));
    total += lane[0] + lane[1];
#else
    for (size_t i = lo; i < hi; i++)
      total += a[i];
#endif
  }
  return total;
}

/* dst := src (src NULL: the value MEM_FILL), non-temporal stores. */
void pl__calib_mem_store(uint64_t *dst, const uint64_t *src, size_t words) {
#pragma omp parallel
  {
    size_t lo, hi;
    mem_range(words, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
#if defined(__x86_64__)
    const __m128i f = _mm_set1_epi64x((long long)MEM_FILL);
    for (size_t i = lo; i < hi; i += 8)
      for (int q = 0; q < 8; q += 2)
        _mm_stream_si128((__m128i *)(dst + i + q),
                         src ? _mm_load_si128((const __m128i *)(src + i + q))
                             : f);
    _mm_sfence();
#else
    for (size_t i = lo; i < hi; i++)
      dst[i] = src ? src[i] : MEM_FILL;
#endif
  }
}

static bool host_mem(int t) {
  return t >= T_MREAD && t <= T_MCOPY;
}

/* sources and destinations on the device (else pinned host) */
static bool src_dev(int t) {
  return t != T_H2D && t != T_BIDIR;
}
static bool dst_dev(int t) {
  return t != T_D2H;
}

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
  case T_MREAD:
    c->msum = mem_read(c->src, c->ne / 2);
    return PL_OK;
  case T_MWRITE:
    pl__calib_mem_store(c->dst, NULL, c->ne / 2);
    return PL_OK;
  case T_MCOPY:
    pl__calib_mem_store(c->dst, c->src, c->ne / 2);
    return PL_OK;
  case T_ALLREDUCE:
    return pl_allreduce(c->comm, c->src, c->dst, c->ne, PL_F32, PL_RED_SUM,
                        c->s);
  case T_ALLTOALL:
    return pl_alltoallv(c->comm, c->src, c->counts, c->displs, c->dst,
                        c->counts, c->displs, PL_F32, c->s);
  case T_ALLOC: /* probed once in setup: the timed loop has nothing to do */
    return PL_OK;
  default: /* T_SENDRECV: ring hop */
    return pl_sendrecv(c->comm, c->src, c->ne, (c->rank + 1) % c->n, c->dst,
                       c->ne, (c->rank + c->n - 1) % c->n, PL_F32, c->s);
  }
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
  if (t == T_ALLOC) { /* the probe takes and frees its own blocks */
    pl_mem_stats ms;
    PL_TRY(pl_mem_stats_get(x->dev, PL_ARENA_DEVICE, &ms));
    c->ceiling = 0;
    c->before = dev_in_use(x->dev);
    /* under --mem-limit the blocks scale with it (a CPU run) */
    c->pbig =
        ms.limit ? (ms.limit / 16 > 4096 ? ms.limit / 16 : 4096) : PROBE_BIG;
    c->pgrain = ms.limit ? c->pbig / 16 : PROBE_GRAIN;
    /* twice (the first also takes the pool's memory from the driver), the
     * smaller ceiling kept; once per point, not per timed iteration */
    for (int k = 0; k < 2; k++) {
      size_t got;
      PL_TRY(pl_mem_probe_ceiling(x->dev, PL_ARENA_DEVICE, c->pbig, c->pgrain,
                                  &got));
      if (!c->ceiling || got < c->ceiling)
        c->ceiling = got;
    }
    return PL_OK;
  }
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
  if (host_mem(t)) { /* pinned host buffers, drawn by the OpenMP threads */
    PL_TRY(alloc(x, false, c->ne * 4, &c->src));
    host_draws(c->src, c->ne, seed, me);
    if (t != T_MREAD) {
      PL_TRY(alloc(x, false, c->ne * 4, &c->dst));
      unsigned char *d = c->dst; /* poisoned, each thread its own range */
#pragma omp parallel
      {
        size_t lo, hi;
        mem_range(c->ne / 2, omp_get_thread_num(), omp_get_num_threads(), &lo,
                  &hi);
        memset(d + lo * 8, 0xff, (hi - lo) * 8);
      }
    }
    return PL_OK;
  }
  size_t n = t == T_ALLTOALL ? c->ne * (size_t)x->size : c->ne;
  bool sdev = src_dev(t), ddev = dst_dev(t);
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

/* The point's buffers, freed (setup's, whichever it allocated). */
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

/* The second stream and the events of the run (the first setup's). */
static void fini(pl_bench_ctx *x, void *st) {
  calib *c = st;
  if (c->ev0)
    pl_event_destroy(c->ev0);
  if (c->ev1)
    pl_event_destroy(c->ev1);
  if (c->s2)
    pl_stream_destroy(c->s2);
}

/* Fault injection for the suite's own tests (PLATEAU_CALIB_INJECT_FAULT=1):
 * flip an exponent bit of element k of a received buffer just before it is
 * compared, so a test can show that a wrong transfer or GEMM fails its row. */
static void inject_fault(void *buf, size_t k, size_t elem_size) {
  const char *e = getenv("PLATEAU_CALIB_INJECT_FAULT");
  if (e && *e && strcmp(e, "0") != 0)
    ((unsigned char *)buf)[k * elem_size + elem_size - 1] ^= 0x40;
}

/* got against the draws it must hold, after the injected fault */
static void compare_draws(pl_check *chk, const char *what, float *got, size_t n,
                          size_t len, uint64_t seed, const uint64_t *offs) {
  inject_fault(got, n / 2, 4);
  pl_check_draws(chk, what, got, n, len, seed, offs);
}

/* 256 sampled entries of C against a double dot product (compare.h) */
static pl_status check_gemm(calib *c, pl_check *chk) {
  const size_t el = (size_t)c->G * (size_t)c->G, es = pl_dtype_size(c->gdt);
  char *hA = c->host, *hB = hA + el * es, *hC = hB + el * es;
  PL_TRY(pl_memcpy_async(c->s, hA, c->src, el * es));
  PL_TRY(pl_memcpy_async(c->s, hB, c->src2, el * es));
  PL_TRY(pl_memcpy_async(c->s, hC, c->dst, el * es));
  PL_TRY(pl_stream_sync(c->s));
  inject_fault(hC, 0, es); /* C[0][0] is always sampled */
  pl_check_gemm(chk, "C (sampled)", hA, hB, hC, c->gdt, c->G, 256,
                c->seed ^ 0x9e37u);
  return PL_OK;
}

static pl_status check(pl_bench_ctx *x, void *st, int p, pl_check *chk) {
  calib *c = st;
  const int t = c->test, n = x->size;
  if (c->idle)
    return PL_OK;
  if (t == T_GEMM)
    return check_gemm(c, chk);
  if (t == T_ALLOC) {
    pl_dev_info info;
    PL_TRY(pl_dev_info_get(x->dev, &info));
    const size_t after = dev_in_use(x->dev);
    pl_check_that(chk, c->ceiling > c->before,
                  "alloc: ceiling %zu bytes, not above the %zu in use before",
                  c->ceiling, c->before);
    pl_check_that(chk, !x->cuda || c->ceiling <= info.total_bytes,
                  "alloc: ceiling %zu bytes beyond the device's %zu",
                  c->ceiling, info.total_bytes);
    pl_check_that(chk, after == c->before,
                  "alloc: %zu bytes in use after the probe, %zu before", after,
                  c->before);
    return PL_OK;
  }
  if (host_mem(t)) {
    const uint64_t *a = c->src, *b = c->dst;
    size_t words = c->ne / 2, bad = 0;
    if (t == T_MREAD) {
      uint64_t want = 0;
      for (size_t i = 0; i < words; i++)
        want += a[i];
      uint64_t got = c->msum;
      inject_fault(&got, 0, 8);
      pl_check_that(chk, got == want,
                    "mem_read: sum %llx, the words sum to %llx",
                    (unsigned long long)got, (unsigned long long)want);
      return PL_OK;
    }
    inject_fault(c->dst, words / 2, 8);
    for (size_t i = 0; i < words; i++)
      bad += b[i] != (t == T_MWRITE ? MEM_FILL : a[i]);
    pl_check_that(chk, bad == 0, "%s: %zu of %zu words wrong",
                  t == T_MWRITE ? "mem_write" : "mem_copy", bad, words);
    return PL_OK;
  }
  const size_t ne = t == T_ALLTOALL ? c->ne * (size_t)n : c->ne;
  float *got = c->dst;
  if (dst_dev(t)) {
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

/* ---- the bench ------------------------------------------------------------
 */

static pl_status init(pl_bench_ctx *x, void *st) {
  calib *c = st;
  c->nsizes = pl_args_size_list(x->args, "sizes", c->sizes, PL_OPT_LIST_MAX);
  c->G = (int64_t)pl_args_size(x->args, "gemm-size");
  c->gdt = pl_args_enum(x->args, "gemm-dtype") == 0 ? PL_BF16 : PL_F32;
  c->msize = (size_t)pl_args_size(x->args, "mem-size") / 64 * 64;
  c->ntests = pl_args_enum_list(x->args, "tests", c->tests, T_COUNT);
  c->solo = pl_args_flag(x->args, "solo");
  c->seed = x->seed;
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
      x->npoints += single(t) ? 1 : c->nsizes;
    }
  return PL_OK;
}

/* Point p: the test, and the size index within it. */
static int point_test(const calib *c, int p, size_t *S) {
  for (int i = 0; i < c->ntests; i++) {
    int t = c->tests[i], n = single(t) ? 1 : c->nsizes;
    if (p < n) {
      *S = t == T_GEMM ? 0 : single(t) ? c->msize : (size_t)c->sizes[p];
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
  if (c->test == T_ALLOC) {
    snprintf(label, n, "alloc ceiling");
    pl_row_str(row, "dtype", "-");
    return PL_OK;
  }
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
  pl_row_str(row, "dtype",
             c->test >= T_MREAD && c->test <= T_MCOPY ? "-" : "f32");
  pl_row_i64(row, "bytes", (int64_t)(c->ne * 4));
  if (c->test == T_ALLTOALL && c->ne < (size_t)x->size)
    return pl_set_error(PL_EINFEASIBLE, "fewer than one f32 per peer");
  if (c->test == T_ALLTOALL)
    c->ne /= (size_t)x->size; /* per peer */
  return PL_OK;
}

static pl_status finish(pl_bench_ctx *x, void *st, int p, pl_row *row,
                        pl_work *w) {
  calib *c = st;
  const int t = c->test, n = x->size;
  if (t == T_GEMM) {
    w->flops = 2.0 * (double)c->G * c->G * c->G;
  } else if (t == T_ALLOC) {
    pl_row_i64(row, "bytes", (int64_t)c->ceiling);
    pl_row_note(row, "blocks of %zu bytes down to %zu; nothing timed", c->pbig,
                c->pgrain);
  } else {
    const double sec = x->meas->t.median * 1e-3;
    const size_t ne = t == T_ALLTOALL ? c->ne * (size_t)n : c->ne;
    w->bytes =
        (double)ne * 4 * (t == T_BIDIR || t == T_D2D || t == T_MCOPY ? 2 : 1);
    const double f = tdef[t].bus == 2   ? 2.0 * (n - 1) / n
                     : tdef[t].bus == 1 ? (double)(n - 1) / n
                                        : 1.0;
    pl_row_i64(row, "bytes", (int64_t)(ne * 4));
    pl_row_f64(row, "busbw_gbs", w->bytes / sec / 1e9 * f);
  }
  pl_row_note(row, "%s", x->cuda ? tdef[t].cuda : tdef[t].cpu);
  if (t >= T_MREAD && t <= T_MCOPY)
    pl_row_note(row, "%d threads", omp_get_max_threads());
  if (per_rank(t))
    pl_row_note(row, "%s",
                c->solo ? "rank 0 alone"
                : n > 1 ? "per rank, all ranks at once"
                        : "one rank");
  return PL_OK;
}

const pl_bench pl_bench_calib = {
    .name = "calib",
    .summary = "the machine's ceilings: host link each way and both, device "
               "copy, GEMM rate, host memory read / write / copy, all-reduce "
               "/ all-to-all / send-recv bandwidth",
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
