/* calib_ops.c — the operations of `plateau bench calib` (calib.h): per
 * test its buffers (and their release), the timed unit and the
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
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "plateau/host_device.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

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

pl_status pl__calib_run(void *st) {
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
pl_status pl__calib_setup(pl_bench_ctx *x, calib *c) {
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
void pl__calib_teardown(pl_bench_ctx *x, calib *c) {
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
void pl__calib_fini(calib *c) {
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

pl_status pl__calib_check(pl_bench_ctx *x, calib *c, pl_check *chk) {
  const int t = c->test, n = x->size;
  if (c->idle)
    return PL_OK;
  if (t == T_GEMM)
    return check_gemm(c, chk);
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
