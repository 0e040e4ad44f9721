/* test_cpu_kernels.c — the CPU backend's shared kernels against naive
 * references: GEMM for every transpose combination and odd shapes (f32, bf16
 * in / f32 out, bf16 out, batched), RNG fill, convert, scale, axpy, copies,
 * streams and events. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernels.h"
#include "core/check_run.h"
#include "core/internal.h"
#include "plateau/host_device.h"

static pl_dev *dev;
static pl_stream *st;
static void setup(void) {
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  st = pl_dev_stream(dev);
}
static void teardown(void) {
  pl_dev_destroy(dev);
}

static float getf(const void *p, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? ((const float *)p)[i]
                      : pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
}

/* Normwise check: max |got - ref| over the matrix relative to max |ref|
 * (elementwise relative error is meaningless where sums cancel); reports the
 * error and the first bad index. */
static void expect_close(const void *got, const void *ref, pl_dtype dt,
                         int64_t m, int64_t n, int64_t ld, double tol,
                         const char *what) {
  double scale = 1e-30, max_err = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++)
      scale = fmax(scale, fabs(getf(ref, dt, (size_t)(i * ld + j))));
  long first_bad = -1;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double g = getf(got, dt, (size_t)(i * ld + j)),
             r = getf(ref, dt, (size_t)(i * ld + j));
      double err = fabs(g - r) / scale;
      if (!(err <= tol) && first_bad < 0)
        first_bad = (long)(i * ld + j);
      if (err > max_err)
        max_err = err;
    }
  ck_assert_msg(first_bad < 0,
                "%s: max normwise err %.3g > %.3g, first bad index %ld", what,
                max_err, tol, first_bad);
}

START_TEST(gemm_all_transposes_and_shapes) {
  static const int64_t shapes[][3] = {{1, 1, 1},   {17, 33, 65}, {64, 48, 32},
                                      {3, 1, 129}, {1, 70, 5},   {31, 29, 0},
                                      {0, 5, 5}};
  pl_dtype abs[] = {PL_F32, PL_BF16, PL_BF16}, cs[] = {PL_F32, PL_F32, PL_BF16};
  uint64_t seed = 11;
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int dti = 0; dti < 3; dti++)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
          int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
          pl_dtype ab = abs[dti], cd = cs[dti];
          /* padded leading dimensions catch stride bugs */
          int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
          int64_t arows = ta ? k : m, brows = tb ? n : k;
          size_t esz = pl_dtype_size(ab), csz = pl_dtype_size(cd);
          void *A = malloc((size_t)(arows * lda + 1) * esz),
               *B = malloc((size_t)(brows * ldb + 1) * esz);
          void *C = malloc((size_t)(m * ldc + 1) * csz),
               *R = malloc((size_t)(m * ldc + 1) * csz);
          pl_rng_fill(st, A, ab, (size_t)(arows * lda + 1), seed++, 0,
                      PL_DIST_NORMAL, 0, 1);
          pl_rng_fill(st, B, ab, (size_t)(brows * ldb + 1), seed++, 0,
                      PL_DIST_NORMAL, 0, 1);
          pl_rng_fill(st, C, cd, (size_t)(m * ldc + 1), seed, 0,
                      PL_DIST_UNIFORM, -1, 1);
          pl_rng_fill(st, R, cd, (size_t)(m * ldc + 1), seed++, 0,
                      PL_DIST_UNIFORM, -1, 1);
          float alpha = 0.75f, beta = (si % 2) ? 0.5f : 0.0f;
          ck_assert_int_eq(pl_gemm(st, ta, tb, m, n, k, alpha, A, lda, B, ldb,
                                   beta, C, ldc, ab, cd),
                           PL_OK);
          pl__cpu_gemm_ref(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, R, ldc,
                           ab, cd);
          char what[96];
          snprintf(what, sizeof what, "gemm %lldx%lldx%lld %s->%s ta=%d tb=%d",
                   (long long)m, (long long)n, (long long)k, pl_dtype_name(ab),
                   pl_dtype_name(cd), ta, tb);
          expect_close(C, R, cd, m, n, ldc, cd == PL_BF16 ? 8e-3 : 2e-6, what);
          free(A), free(B), free(C), free(R);
        }
}
END_TEST

START_TEST(gemm_batched_and_bad_args) {
  int64_t m = 5, n = 7, k = 9, batch = 3;
  float *A = malloc(sizeof(float) * (size_t)(batch * m * k)),
        *B = malloc(sizeof(float) * (size_t)(batch * k * n));
  float *C = malloc(sizeof(float) * (size_t)(batch * m * n)),
        *R = malloc(sizeof(float) * (size_t)(m * n));
  pl_rng_fill(st, A, PL_F32, (size_t)(batch * m * k), 1, 0, PL_DIST_NORMAL, 0,
              1);
  pl_rng_fill(st, B, PL_F32, (size_t)(batch * k * n), 2, 0, PL_DIST_NORMAL, 0,
              1);
  pl_fill(st, C, PL_F32, (size_t)(batch * m * n),
          NAN); /* poison: beta = 0 must not read C */
  ck_assert_int_eq(pl_gemm_strided_batched(st, false, false, m, n, k, 1, A, k,
                                           m * k, B, n, k * n, 0, C, n, m * n,
                                           batch, PL_F32, PL_F32),
                   PL_OK);
  for (int64_t b = 0; b < batch; b++) {
    pl__cpu_gemm_ref(false, false, m, n, k, 1, A + b * m * k, k, B + b * k * n,
                     n, 0, R, n, PL_F32, PL_F32);
    expect_close(C + b * m * n, R, PL_F32, m, n, n, 1e-5, "batched");
  }
  ck_assert_int_eq(pl_gemm(st, false, false, m, n, k, 1, A, k - 1, B, n, 0, C,
                           n, PL_F32, PL_F32),
                   PL_EINVAL);
  ck_assert_int_eq(pl_gemm(st, false, false, -1, n, k, 1, A, k, B, n, 0, C, n,
                           PL_F32, PL_F32),
                   PL_EINVAL);
  ck_assert_int_eq(pl_gemm(st, false, false, m, n, k, 1, A, k, B, n, 0, C, n,
                           PL_I32, PL_F32),
                   PL_EINVAL);
  free(A), free(B), free(C), free(R);
}
END_TEST

/* TF32 math on a stream: its f32 GEMMs equal the reference GEMM of the
 * operands rounded to TF32 (nearest, ties away), differ from plain f32, and
 * other streams and bf16 GEMMs are unaffected. */
static float tf32_ref(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u + 0x1000u) & ~0x1fffu;
  memcpy(&x, &u, 4);
  return x;
}

START_TEST(gemm_tf32_stream) {
  int64_t m = 9, n = 11, k = 37;
  float *A = malloc(sizeof(float) * (size_t)(m * k)),
        *B = malloc(sizeof(float) * (size_t)(k * n));
  float *At = malloc(sizeof(float) * (size_t)(m * k)),
        *Bt = malloc(sizeof(float) * (size_t)(k * n));
  float *C = malloc(sizeof(float) * (size_t)(m * n)),
        *R = malloc(sizeof(float) * (size_t)(m * n));
  float *F = malloc(sizeof(float) * (size_t)(m * n));
  pl_rng_fill(st, A, PL_F32, (size_t)(m * k), 5, 0, PL_DIST_NORMAL, 0, 1);
  pl_rng_fill(st, B, PL_F32, (size_t)(k * n), 6, 0, PL_DIST_NORMAL, 0, 1);
  for (int64_t i = 0; i < m * k; i++)
    At[i] = tf32_ref(A[i]);
  for (int64_t i = 0; i < k * n; i++)
    Bt[i] = tf32_ref(B[i]);
  ck_assert_float_eq(tf32_ref(1.0f + 0x1p-11f),
                     1.0f + 0x1p-10f); /* tie: away */
  pl_stream *s2;
  ck_assert_int_eq(pl_stream_create(dev, &s2), PL_OK);
  ck_assert_int_eq(pl_stream_tf32(s2), 0);
  pl_stream_set_tf32(s2, 7);
  ck_assert_int_eq(pl_stream_tf32(s2), 1);
  ck_assert_int_eq(pl_stream_tf32(st), 0);
  ck_assert_int_eq(
      pl_gemm(s2, false, true, m, n, k, 1, A, k, B, k, 0, C, n, PL_F32, PL_F32),
      PL_OK);
  pl__cpu_gemm_ref(false, true, m, n, k, 1, At, k, Bt, k, 0, R, n, PL_F32,
                   PL_F32);
  expect_close(C, R, PL_F32, m, n, n, 2e-6, "tf32 gemm vs rounded operands");
  ck_assert_int_eq(
      pl_gemm(st, false, true, m, n, k, 1, A, k, B, k, 0, F, n, PL_F32, PL_F32),
      PL_OK);
  double diff = 0;
  for (int64_t i = 0; i < m * n; i++)
    diff = fmax(diff, fabs((double)F[i] - C[i]));
  ck_assert_msg(diff > 1e-4,
                "tf32 GEMM equals the f32 GEMM (diff %g): not rounded", diff);
  pl_stream_set_tf32(s2, 0);
  ck_assert_int_eq(
      pl_gemm(s2, false, true, m, n, k, 1, A, k, B, k, 0, C, n, PL_F32, PL_F32),
      PL_OK);
  ck_assert_int_eq(memcmp(C, F, sizeof(float) * (size_t)(m * n)), 0);
  pl_stream_destroy(s2);
  free(A), free(B), free(At), free(Bt), free(C), free(R), free(F);
}
END_TEST

START_TEST(rng_convert_scale_axpy) {
  enum { N = 1001 };
  float f[N], g[N];
  pl_bf16 h[N];
  ck_assert_int_eq(
      pl_rng_fill(st, f, PL_F32, N, 9, 100, PL_DIST_UNIFORM, -2, 3), PL_OK);
  for (int i = 0; i < N; i++)
    ck_assert(f[i] == pl_rng_uniform(9, 100 + (uint64_t)i, -2, 3));
  ck_assert_int_eq(pl_rng_fill(st, h, PL_BF16, N, 9, 100, PL_DIST_NORMAL, 1, 2),
                   PL_OK);
  for (int i = 0; i < N; i++)
    ck_assert(h[i] ==
              pl_f32_to_bf16(pl_rng_normal(9, 100 + (uint64_t)i, 1, 2)));
  ck_assert_int_eq(pl_convert(st, h, PL_BF16, f, PL_F32, N), PL_OK);
  ck_assert_int_eq(pl_convert(st, g, PL_F32, h, PL_BF16, N), PL_OK);
  for (int i = 0; i < N; i++)
    ck_assert(g[i] == pl_bf16_to_f32(pl_f32_to_bf16(f[i])));
  ck_assert_int_eq(pl_convert(st, g, PL_F32, h, PL_I32, N), PL_EINVAL);
  memcpy(g, f, sizeof f);
  ck_assert_int_eq(pl_scale(st, g, PL_F32, N, -0.5f), PL_OK);
  for (int i = 0; i < N; i++)
    ck_assert(g[i] == f[i] * -0.5f);
  ck_assert_int_eq(pl_axpy(st, g, PL_F32, f, PL_F32, N, 2.0f), PL_OK);
  for (int i = 0; i < N; i++)
    ck_assert(g[i] == f[i] * -0.5f + 2.0f * f[i]);
  float y[N];
  pl_fill(st, y, PL_F32, N, 1.0);
  ck_assert_int_eq(pl_axpy(st, y, PL_F32, h, PL_BF16, N, 1.0f), PL_OK);
  for (int i = 0; i < N; i++)
    ck_assert(y[i] == 1.0f + pl_bf16_to_f32(h[i]));
  ck_assert_int_eq(pl_axpy(st, h, PL_BF16, y, PL_F32, N, 1.0f), PL_EINVAL);
  int64_t ii[5];
  pl_fill(st, ii, PL_I64, 5, -3);
  ck_assert(ii[4] == -3);
  ck_assert_int_eq(pl_rng_fill(st, ii, PL_I64, 5, 1, 0, PL_DIST_UNIFORM, 0, 1),
                   PL_EINVAL);
}
END_TEST

START_TEST(streams_events_copies) {
  pl_stream *s2;
  pl_event *a, *b;
  ck_assert_int_eq(pl_stream_create(dev, &s2), PL_OK);
  /* grid cap: 0 by default, kept when positive, negative means none */
  ck_assert_int_eq(pl_stream_grid_cap(s2), 0);
  pl_stream_set_grid_cap(s2, 24);
  ck_assert_int_eq(pl_stream_grid_cap(s2), 24);
  pl_stream_set_grid_cap(s2, -5);
  ck_assert_int_eq(pl_stream_grid_cap(s2), 0);
  ck_assert_int_eq(pl_event_create(dev, &a), PL_OK);
  ck_assert_int_eq(pl_event_create(dev, &b), PL_OK);
  float ms;
  ck_assert_int_eq(pl_event_elapsed_ms(a, b, &ms),
                   PL_EINVAL); /* not recorded */
  void *h, *d, *d2;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_HOST, 1 << 20, "x", &h), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 1 << 20, "x", &d), PL_OK);
  ck_assert_int_eq(pl_alloc_async(dev, PL_ARENA_DEVICE, 1 << 20, "x", s2, &d2),
                   PL_OK);
  pl_rng_fill(st, h, PL_F32, (1 << 18), 5, 0, PL_DIST_UNIFORM, 0, 1);
  ck_assert_int_eq(pl_event_record(a, s2), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s2, d, h, 1 << 20), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s2, d2, d, 1 << 20), PL_OK);
  ck_assert_int_eq(pl_event_record(b, s2), PL_OK);
  ck_assert_int_eq(pl_stream_wait(st, b), PL_OK);
  ck_assert_int_eq(pl_event_sync(b), PL_OK);
  ck_assert(pl_event_done(b));
  ck_assert_int_eq(pl_event_elapsed_ms(a, b, &ms), PL_OK);
  ck_assert(ms >= 0);
  ck_assert_int_eq(memcmp(h, d2, 1 << 20), 0);
  pl_free_async(dev, d2, s2);
  pl_free(dev, d);
  pl_free(dev, h);
  pl_event_destroy(a);
  pl_event_destroy(b);
  pl_stream_destroy(s2);
  pl_dev_info info;
  ck_assert_int_eq(pl_dev_info_get(dev, &info), PL_OK);
  ck_assert_int_eq(info.backend, PL_BACKEND_CPU);
  ck_assert(info.sm_count >= 1);
#if !defined(PL_HAVE_BLAS) || PL_HAVE_BLAS
  ck_assert_ptr_nonnull(strstr(info.blas, "OpenBLAS"));
#else
  ck_assert_ptr_nonnull(strstr(info.blas, "none"));
#endif
}
END_TEST

START_TEST(cuda_refused_cleanly_without_gpu) {
  if (pl_cuda_device_count() > 0)
    return; /* covered by the CUDA tests */
  pl_dev *d = (pl_dev *)0x1;
  pl_status s = pl_dev_create(PL_BACKEND_CUDA, -1, &d);
  ck_assert_int_eq(s, PL_EUNSUPPORTED);
  ck_assert_ptr_null(d);
  ck_assert_msg(strlen(pl_last_error()) > 10, "%s", pl_last_error());
}
END_TEST

int main(void) {
  const TTest *tests[] = {gemm_all_transposes_and_shapes,
                          gemm_batched_and_bad_args,
                          gemm_tf32_stream,
                          rng_convert_scale_axpy,
                          streams_events_copies,
                          cuda_refused_cleanly_without_gpu,
                          NULL};
  return pl_check_suite("cpu_kernels", 120, tests, setup, teardown, CK_NOFORK,
                        0)
             ? 1
             : 0;
}
