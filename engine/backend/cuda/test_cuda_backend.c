/* backend/cuda/test_cuda_backend.c — the CUDA backend against the CPU
 * backend, through the public API only (pl_dev_create, pl_alloc, kernels.h).
 *
 * What is checked: RNG fill bits (f32/bf16, uniform/normal, at an offset, on
 * aligned and misaligned pointers); fill of all four dtypes (bits); f32<->bf16
 * convert (bits) and its round trip; scale and axpy for every dtype pair; GEMM
 * for all four transpose combinations over a shape table (1×1×1, odd shapes,
 * m/n/k = 0, batched with padded strides) for f32, bf16-in/f32-out, bf16-out
 * and f32-in/bf16-out, with beta = 0 on a NaN-poisoned C and beta != 0, and
 * padding between rows left untouched; async H2D/D2D/D2H copies through pinned
 * memory on two streams ordered by an event (and a peer copy when two GPUs are
 * present); the pool high-water mark against the tracked peak for a 1 GiB +
 * 2 GiB pair; an absurd allocation returning PL_ENOMEM, with the device still
 * usable afterwards.
 *
 * Float results are compared within a dtype-scaled tolerance and the test
 * prints max abs/rel error and the first bad index.  With no CUDA device it
 * prints "skipped: no CUDA device" and passes.  CK_NOFORK: a CUDA context must
 * never be created before a fork. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "plateau/dev.h"
#include "plateau/host_device.h"
#include "plateau/kernels.h"
#include "plateau/status.h"
#include "plateau/tensor.h"
#include "plateau/timer.h"

static pl_dev *gpu, *cpu;
static pl_stream *gs, *cs; /* default streams */

static void setup(void) {
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CUDA, 0, &gpu), PL_OK);
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &cpu), PL_OK);
  gs = pl_dev_stream(gpu);
  cs = pl_dev_stream(cpu);
}

static void teardown(void) {
  pl_dev_destroy(gpu);
  pl_dev_destroy(cpu);
  gpu = cpu = NULL;
}

/* ---- helpers ----------------------------------------------------------------
 */

#define OK(expr)                                                               \
  do {                                                                         \
    pl_status st_ = (expr);                                                    \
    ck_assert_msg(st_ == PL_OK, "%s -> %s: %s", #expr, pl_strerror(st_),       \
                  pl_last_error());                                            \
  } while (0)

static void *gbuf(size_t bytes) {
  void *p = NULL;
  OK(pl_alloc(gpu, PL_ARENA_DEVICE, bytes, "test", &p));
  return p;
}
static void *hbuf(size_t bytes) { /* CPU-backend memory: plain host memory */
  void *p = NULL;
  OK(pl_alloc(cpu, PL_ARENA_DEVICE, bytes, "test", &p));
  return p;
}
static void h2d(void *d, const void *h, size_t bytes) {
  OK(pl_memcpy_async(gs, d, h, bytes));
  OK(pl_stream_sync(gs));
}
static void d2h(void *h, const void *d, size_t bytes) {
  OK(pl_memcpy_async(gs, h, d, bytes));
  OK(pl_stream_sync(gs));
}
/* All-ones bits: NaN in f32 and bf16. */
static void poison_gpu(void *d, size_t bytes) {
  unsigned char *h = hbuf(bytes);
  memset(h, 0xff, bytes);
  h2d(d, h, bytes);
  pl_free(cpu, h);
}

static double elem(const void *p, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? (double)((const float *)p)[i]
                      : (double)pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
}

/* Bit-exact comparison; reports the first differing element. */
static void check_bits(const char *what, const void *got, const void *ref,
                       size_t es, size_t n) {
  const unsigned char *g = got, *r = ref;
  for (size_t i = 0; i < n; i++)
    if (memcmp(g + i * es, r + i * es, es) != 0) {
      ck_abort_msg("%s: first differing element %zu of %zu", what, i, n);
      return;
    }
  printf("  %s: %zu elements bit-identical\n", what, n);
}

/* |got - ref| <= rtol·max(|ref|, |got|) + atol·bound[i] (bound NULL: 1).
 * NaN anywhere fails. */
static void check_close(const char *what, const void *got, const void *ref,
                        pl_dtype dt, size_t n, double rtol, double atol,
                        const double *bound) {
  double max_abs = 0, max_rel = 0;
  size_t bad = 0, first = (size_t)-1;
  for (size_t i = 0; i < n; i++) {
    double g = elem(got, dt, i), r = elem(ref, dt, i), e = fabs(g - r);
    double tol = rtol * fmax(fabs(r), fabs(g)) + atol * (bound ? bound[i] : 1);
    if (!(e <= tol)) {
      if (!bad)
        first = i;
      bad++;
    }
    if (e > max_abs || isnan(e))
      max_abs = e;
    if (r != 0 && e / fabs(r) > max_rel)
      max_rel = e / fabs(r);
  }
  printf("  %s: n=%zu max_abs=%.3g max_rel=%.3g bad=%zu", what, n, max_abs,
         max_rel, bad);
  if (bad)
    printf(" first_bad=%zu (got %.9g, ref %.9g)", first, elem(got, dt, first),
           elem(ref, dt, first));
  printf("\n");
  ck_assert_msg(bad == 0, "%s: %zu of %zu out of tolerance, first at %zu", what,
                bad, n, first);
}

/* ---- RNG, fill, convert ---------------------------------------------------
 */

START_TEST(test_info) {
  pl_dev_info in;
  OK(pl_dev_info_get(gpu, &in));
  printf("  %s: %zu bytes, %d SMs, driver %s, runtime %s, %s\n", in.name,
         in.total_bytes, in.sm_count, in.driver, in.runtime, in.blas);
  ck_assert_int_eq(in.backend, PL_BACKEND_CUDA);
  ck_assert(in.name[0] != '\0');
  ck_assert(in.total_bytes > 0);
  ck_assert(in.sm_count > 0);
  ck_assert(strchr(in.driver, '.') != NULL);
  ck_assert(strchr(in.runtime, '.') != NULL);
  ck_assert(strncmp(in.blas, "cuBLAS ", 7) == 0);
}
END_TEST

START_TEST(test_rng) {
  const size_t n = 1000003; /* not a multiple of any vector width */
  const pl_dtype dts[2] = {PL_F32, PL_BF16};
  const pl_dist dists[2] = {PL_DIST_UNIFORM, PL_DIST_NORMAL};
  for (int a = 0; a < 2; a++)
    for (int d = 0; d < 2; d++)
      for (int mis = 0; mis < 2; mis++) { /* mis: start one element in */
        size_t es = pl_dtype_size(dts[a]), bytes = (n + 1) * es;
        unsigned char *g = gbuf(bytes), *h = hbuf(bytes), *r = hbuf(bytes);
        poison_gpu(g, bytes);
        float p0 = d ? 0.5f : -2.0f, p1 = d ? 2.0f : 3.0f;
        OK(pl_rng_fill(gs, g + mis * es, dts[a], n, 42, 123457, dists[d], p0,
                       p1));
        OK(pl_rng_fill(cs, r + mis * es, dts[a], n, 42, 123457, dists[d], p0,
                       p1));
        d2h(h, g, bytes);
        char what[96];
        snprintf(what, sizeof what, "rng %s %s%s", pl_dtype_name(dts[a]),
                 d ? "normal" : "uniform", mis ? " misaligned" : "");
        check_bits(what, h + mis * es, r + mis * es, es, n);
        /* Independently of the CPU backend: the first draws equal
         * host_device.h's generator evaluated here, and neighbours mostly
         * differ (not a constant or a repeated block). */
        const unsigned char *v = h + mis * es;
        size_t differ = 0;
        for (size_t i = 0; i < 1000; i++) {
          float f = d ? pl_rng_normal(42, 123457 + i, p0, p1)
                      : pl_rng_uniform(42, 123457 + i, p0, p1);
          if (dts[a] == PL_F32)
            ck_assert_msg(memcmp(&f, v + i * 4, 4) == 0, "%s: draw %zu", what,
                          i);
          else {
            pl_bf16 hb = pl_f32_to_bf16(f);
            ck_assert_msg(memcmp(&hb, v + i * 2, 2) == 0, "%s: draw %zu", what,
                          i);
          }
        }
        for (size_t i = 0; i + 1 < n; i++)
          differ += memcmp(v + i * es, v + (i + 1) * es, es) != 0;
        ck_assert_msg(differ > n / 5 * 4,
                      "%s: only %zu of %zu neighbours "
                      "differ",
                      what, differ, n - 1);
        pl_free(gpu, g);
        pl_free(cpu, h);
        pl_free(cpu, r);
      }
}
END_TEST

START_TEST(test_fill) {
  const size_t n = 4099;
  const pl_dtype dts[4] = {PL_F32, PL_BF16, PL_I32, PL_I64};
  for (int a = 0; a < 4; a++)
    for (int mis = 0; mis < 2; mis++) {
      size_t es = pl_dtype_size(dts[a]), bytes = (n + 1) * es;
      unsigned char *g = gbuf(bytes), *h = hbuf(bytes), *r = hbuf(bytes);
      poison_gpu(g, bytes);
      memset(r, 0xff, bytes);
      double v = dts[a] >= PL_I32 ? -123456.0 : -1.2345678;
      OK(pl_fill(gs, g + mis * es, dts[a], n, v));
      OK(pl_fill(cs, r + mis * es, dts[a], n, v));
      d2h(h, g, bytes);
      char what[64];
      snprintf(what, sizeof what, "fill %s%s", pl_dtype_name(dts[a]),
               mis ? " misaligned" : "");
      check_bits(what, h, r, es, n + 1); /* includes the untouched element */
      pl_free(gpu, g);
      pl_free(cpu, h);
      pl_free(cpu, r);
    }
}
END_TEST

START_TEST(test_convert) {
  const size_t n = 300007;
  float *src = hbuf(n * 4), *back = hbuf(n * 4), *back_ref = hbuf(n * 4);
  pl_bf16 *half = hbuf(n * 2), *half_ref = hbuf(n * 2);
  OK(pl_rng_fill(cs, src, PL_F32, n, 7, 0, PL_DIST_NORMAL, 0.0f, 100.0f));
  /* Adversarial values: ties, NaN, infinities, the largest finite, tiny. */
  const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u,
                              0x7f800000u, 0xff800000u, 0x7f7fffffu,
                              0x00000001u, 0x80000000u, 0x3f80ffffu};
  memcpy(src, special, sizeof special);
  float *gsrc = gbuf(n * 4), *gback = gbuf(n * 4);
  pl_bf16 *ghalf = gbuf(n * 2);
  h2d(gsrc, src, n * 4);
  poison_gpu(ghalf, n * 2);
  poison_gpu(gback, n * 4);
  OK(pl_convert(gs, ghalf, PL_BF16, gsrc, PL_F32, n));
  OK(pl_convert(gs, gback, PL_F32, ghalf, PL_BF16, n));
  OK(pl_convert(cs, half_ref, PL_BF16, src, PL_F32, n));
  OK(pl_convert(cs, back_ref, PL_F32, half_ref, PL_BF16, n));
  d2h(half, ghalf, n * 2);
  d2h(back, gback, n * 4);
  check_bits("convert f32->bf16", half, half_ref, 2, n);
  check_bits("convert bf16->f32", back, back_ref, 4, n);
  /* Round trip bf16 -> f32 -> bf16 is the identity. */
  pl_bf16 *ghalf2 = gbuf(n * 2), *half2 = hbuf(n * 2);
  OK(pl_convert(gs, ghalf2, PL_BF16, gback, PL_F32, n));
  d2h(half2, ghalf2, n * 2);
  check_bits("convert bf16->f32->bf16 round trip", half2, half, 2, n);
  /* Same-dtype convert is a copy (misaligned by one element). */
  poison_gpu(gback, n * 4);
  OK(pl_convert(gs, gback + 1, PL_F32, gsrc + 1, PL_F32, n - 1));
  d2h(back, gback, n * 4);
  check_bits("convert f32->f32 copy", back + 1, src + 1, 4, n - 1);
  pl_free(gpu, gsrc);
  pl_free(gpu, gback);
  pl_free(gpu, ghalf);
  pl_free(gpu, ghalf2);
  pl_free(cpu, src);
  pl_free(cpu, back);
  pl_free(cpu, back_ref);
  pl_free(cpu, half);
  pl_free(cpu, half_ref);
  pl_free(cpu, half2);
}
END_TEST

/* ---- scale, axpy ------------------------------------------------------------
 */

/* Both backends compute y + alpha·x (and x·alpha) as separately rounded f32
 * operations (no FMA: __f*_rn on the device, ISO C without contraction on the
 * host) and round to bf16 with pl_f32_to_bf16, so the bits must agree; the
 * element before the misaligned range must stay untouched. */
START_TEST(test_scale_axpy) {
  const size_t n = 123461;
  const pl_dtype pairs[3][2] = {
      {PL_F32, PL_F32}, {PL_BF16, PL_BF16}, {PL_F32, PL_BF16}}; /* {y, x} */
  for (int p = 0; p < 3; p++)
    for (int mis = 0; mis < 2; mis++) {
      pl_dtype ydt = pairs[p][0], xdt = pairs[p][1];
      size_t ys = pl_dtype_size(ydt), xs = pl_dtype_size(xdt);
      unsigned char *y = hbuf((n + 1) * ys), *x = hbuf((n + 1) * xs);
      unsigned char *yr = hbuf((n + 1) * ys), *got = hbuf((n + 1) * ys);
      OK(pl_rng_fill(cs, y, ydt, n + 1, 11, 0, PL_DIST_NORMAL, 1.0f, 3.0f));
      OK(pl_rng_fill(cs, x, xdt, n + 1, 12, 0, PL_DIST_UNIFORM, -4.0f, 4.0f));
      memcpy(yr, y, (n + 1) * ys);
      unsigned char *gy = gbuf((n + 1) * ys), *gx = gbuf((n + 1) * xs);
      h2d(gy, y, (n + 1) * ys);
      h2d(gx, x, (n + 1) * xs);
      size_t oy = mis * ys, ox = mis * xs;
      char what[96];
      if (ydt == xdt) { /* scale, on y */
        OK(pl_scale(gs, gy + oy, ydt, n, -0.3f));
        OK(pl_scale(cs, yr + oy, ydt, n, -0.3f));
        d2h(got, gy, (n + 1) * ys);
        snprintf(what, sizeof what, "scale %s%s", pl_dtype_name(ydt),
                 mis ? " misaligned" : "");
        check_bits(what, got, yr, ys, n + 1);
      }
      OK(pl_axpy(gs, gy + oy, ydt, gx + ox, xdt, n, 0.7f));
      OK(pl_axpy(cs, yr + oy, ydt, x + ox, xdt, n, 0.7f));
      d2h(got, gy, (n + 1) * ys);
      snprintf(what, sizeof what, "axpy y %s x %s%s", pl_dtype_name(ydt),
               pl_dtype_name(xdt), mis ? " misaligned" : "");
      check_bits(what, got, yr, ys, n + 1);
      pl_free(gpu, gy);
      pl_free(gpu, gx);
      pl_free(cpu, y);
      pl_free(cpu, x);
      pl_free(cpu, yr);
      pl_free(cpu, got);
    }
}
END_TEST

/* ---- GEMM -------------------------------------------------------------------
 */

typedef struct gemm_shape {
  int64_t m, n, k, batch;
} gemm_shape;

static const gemm_shape shapes[] = {
    {1, 1, 1, 1},   {17, 33, 65, 1}, {64, 48, 32, 1}, {33, 1, 129, 1},
    {1, 40, 7, 1},  {0, 5, 7, 1},    {5, 0, 7, 1},    {5, 7, 0, 1},
    {9, 13, 31, 3}, {16, 8, 24, 2},  {4, 6, 0, 2},    {3, 3, 3, 0},
};

static void gemm_case(bool ta, bool tb, gemm_shape sh, pl_dtype ab,
                      pl_dtype cdt, float beta, uint64_t seed) {
  const int64_t m = sh.m, n = sh.n, k = sh.k, batch = sh.batch, pad = 2;
  const float alpha = 0.75f;
  int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
  int64_t rows_a = ta ? k : m, rows_b = tb ? n : k;
  int64_t sa = rows_a * lda + 7, sb = rows_b * ldb + 5, sc = m * ldc + 3;
  int64_t nb = batch > 0 ? batch : 1;
  size_t na = (size_t)((nb - 1) * sa + rows_a * lda) + 1;
  size_t nbb = (size_t)((nb - 1) * sb + rows_b * ldb) + 1;
  size_t nc = (size_t)((nb - 1) * sc + m * ldc) + 1;
  size_t es = pl_dtype_size(ab), cs_ = pl_dtype_size(cdt);
  void *A = hbuf(na * es), *B = hbuf(nbb * es), *C = hbuf(nc * cs_);
  void *C0 = hbuf(nc * cs_), *got = hbuf(nc * cs_);
  OK(pl_rng_fill(cs, A, ab, na, seed, 0, PL_DIST_UNIFORM, -1.0f, 1.0f));
  OK(pl_rng_fill(cs, B, ab, nbb, seed + 1, 0, PL_DIST_UNIFORM, -1.0f, 1.0f));
  if (beta != 0.0f)
    OK(pl_rng_fill(cs, C, cdt, nc, seed + 2, 0, PL_DIST_UNIFORM, -1.0f, 1.0f));
  else
    memset(C, 0xff, nc * cs_); /* NaN: must never be read */
  memcpy(C0, C, nc * cs_);
  void *gA = gbuf(na * es), *gB = gbuf(nbb * es), *gC = gbuf(nc * cs_);
  h2d(gA, A, na * es);
  h2d(gB, B, nbb * es);
  h2d(gC, C, nc * cs_);
  if (batch == 1) {
    OK(pl_gemm(gs, ta, tb, m, n, k, alpha, gA, lda, gB, ldb, beta, gC, ldc, ab,
               cdt));
    OK(pl_gemm(cs, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, ab,
               cdt));
  } else {
    OK(pl_gemm_strided_batched(gs, ta, tb, m, n, k, alpha, gA, lda, sa, gB, ldb,
                               sb, beta, gC, ldc, sc, batch, ab, cdt));
    OK(pl_gemm_strided_batched(cs, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb,
                               sb, beta, C, ldc, sc, batch, ab, cdt));
  }
  d2h(got, gC, nc * cs_);
  /* Per element: bound = |alpha|·Σ|op(A)||op(B)| + |beta·C0| scales the
   * accumulation-order error; elements outside the m×n blocks (padding,
   * gaps between batch entries) must keep their old bits. */
  double *bound = calloc(nc, sizeof *bound);
  unsigned char *inside = calloc(nc, 1);
  ck_assert(bound && inside);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++) {
          size_t ia = (size_t)(b * sa + (ta ? p * lda + i : i * lda + p));
          size_t ib = (size_t)(b * sb + (tb ? j * ldb + p : p * ldb + j));
          s += fabs(elem(A, ab, ia) * elem(B, ab, ib));
        }
        size_t ic = (size_t)(b * sc + i * ldc + j);
        bound[ic] = fabs(alpha) * s +
                    (beta != 0.0f ? fabs(beta * elem(C0, cdt, ic)) : 0.0);
        inside[ic] = 1;
      }
  size_t n_in = 0;
  for (size_t i = 0; i < nc; i++) {
    if (inside[i]) {
      n_in++;
      continue;
    }
    ck_assert_msg(memcmp((char *)got + i * cs_, (char *)C0 + i * cs_, cs_) == 0,
                  "gemm ta=%d tb=%d %lldx%lldx%lld batch %lld: element %zu "
                  "outside C was written",
                  ta, tb, (long long)m, (long long)n, (long long)k,
                  (long long)batch, i);
  }
  /* Compact the inside elements to compare them. */
  void *gi = hbuf((n_in ? n_in : 1) * cs_), *ri = hbuf((n_in ? n_in : 1) * cs_);
  double *bi = calloc(n_in ? n_in : 1, sizeof *bi);
  for (size_t i = 0, o = 0; i < nc; i++)
    if (inside[i]) {
      memcpy((char *)gi + o * cs_, (char *)got + i * cs_, cs_);
      memcpy((char *)ri + o * cs_, (char *)C + i * cs_, cs_);
      bi[o++] = bound[i];
    }
  char what[160];
  snprintf(what, sizeof what,
           "gemm %s->%s ta=%d tb=%d m=%lld n=%lld k=%lld batch=%lld beta=%g",
           pl_dtype_name(ab), pl_dtype_name(cdt), ta, tb, (long long)m,
           (long long)n, (long long)k, (long long)batch, beta);
  /* fp32 accumulation in another order: ~1e-5 of the bound; bf16 output
   * may round the other way: one bf16 ulp (2^-7 relative). */
  double rtol = cdt == PL_BF16 ? 1.0 / 128 : 1e-5;
  check_close(what, gi, ri, cdt, n_in, rtol, 1e-5, bi);
  free(bound);
  free(inside);
  free(bi);
  pl_free(cpu, gi);
  pl_free(cpu, ri);
  pl_free(gpu, gA);
  pl_free(gpu, gB);
  pl_free(gpu, gC);
  pl_free(cpu, A);
  pl_free(cpu, B);
  pl_free(cpu, C);
  pl_free(cpu, C0);
  pl_free(cpu, got);
}

START_TEST(test_gemm) {
  const pl_dtype combos[4][2] = {{PL_F32, PL_F32},
                                 {PL_BF16, PL_F32},
                                 {PL_BF16, PL_BF16},
                                 {PL_F32, PL_BF16}};
  uint64_t seed = 100;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int c = 0; c < 4; c++)
      for (int t = 0; t < 4; t++)
        for (int bz = 0; bz < 2; bz++)
          gemm_case(t & 1, (t >> 1) & 1, shapes[s], combos[c][0], combos[c][1],
                    bz ? 0.5f : 0.0f, seed++);
}
END_TEST

/* A larger GEMM exercising cuBLAS's tensor-core paths (bf16 in, f32 out). */
START_TEST(test_gemm_large) {
  gemm_shape sh = {257, 384, 1000, 1};
  gemm_case(false, true, sh, PL_BF16, PL_F32, 0.0f, 9);
  gemm_case(true, false, sh, PL_BF16, PL_BF16, 0.5f, 10);
  gemm_case(false, false, sh, PL_F32, PL_F32, 0.5f, 11);
}
END_TEST

/* ---- copies, streams, events ------------------------------------------------
 */

START_TEST(test_copies) {
  const size_t bytes = (64u << 20) + 13;
  unsigned char *hsrc = NULL, *hdst = NULL;
  OK(pl_alloc(gpu, PL_ARENA_HOST, bytes, "test", (void **)&hsrc));
  OK(pl_alloc(gpu, PL_ARENA_HOST, bytes, "test", (void **)&hdst));
  for (size_t i = 0; i < bytes; i++)
    hsrc[i] = (unsigned char)pl_rng_u32(5, i);
  memset(hdst, 0xab, bytes);
  pl_stream *s1, *s2;
  pl_event *e0, *e1, *e2;
  OK(pl_stream_create(gpu, &s1));
  OK(pl_stream_create(gpu, &s2));
  OK(pl_event_create(gpu, &e0));
  OK(pl_event_create(gpu, &e1));
  OK(pl_event_create(gpu, &e2));
  void *da = NULL, *db = NULL;
  OK(pl_alloc_async(gpu, PL_ARENA_DEVICE, bytes, "test", s1, &da));
  OK(pl_alloc_async(gpu, PL_ARENA_DEVICE, bytes, "test", s1, &db));
  OK(pl_event_record(e0, s1));
  OK(pl_memcpy_async(s1, da, hsrc, bytes)); /* H2D */
  OK(pl_event_record(e1, s1));
  OK(pl_stream_wait(s2, e1));
  OK(pl_memcpy_async(s2, db, da, bytes));   /* D2D, after the H2D */
  OK(pl_memcpy_async(s2, hdst, db, bytes)); /* D2H */
  OK(pl_event_record(e2, s2));
  OK(pl_event_sync(e2));
  ck_assert_int_eq(pl_event_done(e2), 1);
  float ms = -1;
  OK(pl_event_elapsed_ms(e0, e2, &ms));
  printf("  copies: %zu bytes H2D+D2D+D2H in %.3f ms\n", bytes, ms);
  ck_assert(ms > 0);
  size_t bad = bytes;
  for (size_t i = 0; i < bytes && bad == bytes; i++)
    if (hsrc[i] != hdst[i])
      bad = i;
  ck_assert_msg(bad == bytes, "copy round trip: first bad byte %zu", bad);

  if (pl_cuda_device_count() >= 2) { /* peer copy to a second GPU and back */
    pl_dev *g1;
    OK(pl_dev_create(PL_BACKEND_CUDA, 1, &g1));
    void *dc = NULL;
    OK(pl_alloc(g1, PL_ARENA_DEVICE, bytes, "test", &dc));
    OK(pl_dev_sync(g1));
    memset(hdst, 0xcd, bytes);
    OK(pl_memcpy_peer_async(s2, dc, g1, db, gpu, bytes));
    OK(pl_memcpy_peer_async(s2, da, gpu, dc, g1, bytes));
    OK(pl_memcpy_async(s2, hdst, da, bytes));
    OK(pl_stream_sync(s2));
    for (size_t i = 0; i < bytes && bad == bytes; i++)
      if (hsrc[i] != hdst[i])
        bad = i;
    ck_assert_msg(bad == bytes, "peer round trip: first bad byte %zu", bad);
    printf("  peer copy GPU0 -> GPU1 -> GPU0: %zu bytes identical\n", bytes);
    pl_free(g1, dc);
    pl_dev_destroy(g1);
  }
  pl_free_async(gpu, da, s2);
  pl_free_async(gpu, db, s2);
  OK(pl_stream_sync(s2));
  pl_event_destroy(e0);
  pl_event_destroy(e1);
  pl_event_destroy(e2);
  pl_stream_destroy(s1);
  pl_stream_destroy(s2);
  pl_free(gpu, hsrc);
  pl_free(gpu, hdst);
}
END_TEST

/* ---- memory: pool high-water mark, OOM --------------------------------------
 */

START_TEST(test_pool_high) {
  pl_dev_info in;
  OK(pl_dev_info_get(gpu, &in));
  const size_t GiB = (size_t)1 << 30;
  if (in.total_bytes < 8 * GiB) {
    printf("  pool high: skipped (%zu bytes of device memory)\n",
           in.total_bytes);
    return;
  }
  OK(pl_dev_sync(gpu));
  pl_mem_reset_peak(gpu, PL_ARENA_DEVICE);
  void *a = NULL, *b = NULL;
  OK(pl_alloc(gpu, PL_ARENA_DEVICE, 1 * GiB, "one", &a));
  OK(pl_alloc(gpu, PL_ARENA_DEVICE, 2 * GiB, "two", &b));
  OK(pl_fill(gs, b, PL_F32, 2 * GiB / 4, 1.0));
  pl_free(gpu, a);
  pl_free(gpu, b);
  OK(pl_dev_sync(gpu));
  pl_mem_stats st;
  OK(pl_mem_stats_get(gpu, PL_ARENA_DEVICE, &st));
  printf("  pool high: tracked peak %zu, pool high-water %zu (%.2f GiB)\n",
         st.peak, st.pool_high, (double)st.pool_high / GiB);
  ck_assert(st.peak >= 3 * GiB);
  ck_assert_msg(st.pool_high >= st.peak, "pool high %zu < tracked peak %zu",
                st.pool_high, st.peak);
  ck_assert_uint_eq(pl_mem_tag_peak(gpu, PL_ARENA_DEVICE, "two"), 2 * GiB);
}
END_TEST

START_TEST(test_oom) {
  const size_t PiB = (size_t)1 << 50;
  for (int a = 0; a < 2; a++) {
    pl_arena arena = a ? PL_ARENA_HOST : PL_ARENA_DEVICE;
    void *p = (void *)1;
    pl_clear_error();
    pl_status st = pl_alloc(gpu, arena, PiB, "absurd", &p);
    printf("  1 PiB in arena %d: %s: %s\n", a, pl_strerror(st),
           pl_last_error());
    ck_assert_int_eq(st, PL_ENOMEM);
    ck_assert(pl_last_error()[0] != '\0');
    /* The device still works: allocate, launch, copy back. */
    float *q = NULL, h[3];
    OK(pl_alloc(gpu, PL_ARENA_DEVICE, 3 * sizeof(float), "after", (void **)&q));
    OK(pl_fill(gs, q, PL_F32, 3, 2.5));
    d2h(h, q, sizeof h);
    ck_assert(h[0] == 2.5f && h[1] == 2.5f && h[2] == 2.5f);
    pl_free(gpu, q);
  }
  OK(pl_dev_sync(gpu));
}
END_TEST

START_TEST(test_bad_input) {
  void *p = gbuf(64);
  ck_assert_int_eq(pl_rng_fill(gs, p, PL_I32, 4, 1, 0, PL_DIST_UNIFORM, 0, 1),
                   PL_EINVAL);
  ck_assert_int_eq(pl_axpy(gs, p, PL_BF16, p, PL_F32, 4, 1.0f), PL_EINVAL);
  ck_assert_int_eq(pl_gemm(gs, false, false, 2, 2, 2, 1.0f, p, 1, p, 2, 0.0f, p,
                           2, PL_F32, PL_F32),
                   PL_EINVAL); /* lda 1 < k 2 */
  OK(pl_dev_sync(gpu));
  pl_free(gpu, p);
}
END_TEST

int main(void) {
#if PL_HAVE_CUDA
  /* A CUDA build whose binary lacks the backend would skip silently on a
   * machine with GPUs too: fail instead (e.g. weak references that did not pull
   * engine/backend/cuda/dev.cu.o out of libplateau.a). */
  if (!pl_backend_available(PL_BACKEND_CUDA)) {
    printf("FAIL: built with PL_HAVE_CUDA=1 but the CUDA backend is not linked "
           "into this binary (pl_backend_available(cuda) == 0)\n");
    return 1;
  }
#endif
  if (pl_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return 0;
  }
  const TTest *tests[] = {test_info,       test_rng,        test_fill,
                          test_convert,    test_scale_axpy, test_gemm,
                          test_gemm_large, test_copies,     test_pool_high,
                          test_oom,        test_bad_input,  NULL};
  return pl_check_suite("cuda_backend", 600, tests, setup, teardown, CK_NOFORK,
                        0)
             ? 1
             : 0; /* CUDA: no fork after a context */
}
