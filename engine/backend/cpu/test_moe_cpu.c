/* test_moe_cpu.c — the CPU MoE kernels (moe_cpu.c) against independent naive
 * references: the row-deterministic GEMM against the backend's reference GEMM
 * for every transpose combination used and odd shapes (f32, bf16), its row
 * independence (a batch equals each row alone, bit for bit), gather / combine
 * / scatter against plain loops (bit-exact), and SwiGLU backward against
 * double-precision derivatives. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernels.h"
#include "backend/moe_kernels.h"
#include "core/check_run.h"
#include "core/internal.h"
#include "plateau/host_device.h"

static float getf(const void *p, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? ((const float *)p)[i]
                      : pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
}
static void fill(void *p, pl_dtype dt, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    float v = pl_rng_normal(seed, i, 0.0f, 1.0f);
    if (dt == PL_F32)
      ((float *)p)[i] = v;
    else
      ((pl_bf16 *)p)[i] = pl_f32_to_bf16(v);
  }
}

START_TEST(gemm_vs_reference) {
  static const int64_t shapes[][3] = {
      {1, 1, 1}, {17, 33, 65}, {5, 8, 3}, {64, 16, 31}, {3, 7, 0}};
  static const int tt[][2] = {{0, 0}, {0, 1}, {1, 0}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int d = 0; d < 2; d++)
      for (int ti = 0; ti < 3; ti++) {
        pl_dtype dt = d ? PL_BF16 : PL_F32;
        int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        bool ta = tt[ti][0], tb = tt[ti][1];
        int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
        size_t na = (size_t)(ta ? k : m) * lda + 1,
               nb = (size_t)(tb ? n : k) * ldb + 1;
        size_t nc = (size_t)m * ldc + 1, es = pl_dtype_size(dt);
        void *A = malloc(na * es), *B = malloc(nb * es);
        float *C = malloc(nc * 4), *R = malloc(nc * 4);
        fill(A, dt, na, 1 + si), fill(B, dt, nb, 2 + si);
        fill(C, PL_F32, nc, 3 + si);
        memcpy(R, C, nc * 4);
        ck_assert_int_eq(pl__cpu_moe_gemm(NULL, ta, tb, m, n, k, 1.5f, A, lda,
                                          B, ldb, 0.5f, C, ldc, dt, PL_F32),
                         PL_OK);
        ck_assert_int_eq(pl__cpu_gemm_ref(ta, tb, m, n, k, 1.5f, A, lda, B, ldb,
                                          0.5f, R, ldc, dt, PL_F32),
                         PL_OK);
        double scale = 1e-30, mx = 0;
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++)
            scale = fmax(scale, fabs(R[i * ldc + j]));
        long bad = -1;
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            double e = fabs((double)C[i * ldc + j] - R[i * ldc + j]) / scale;
            if (e > mx)
              mx = e;
            if (!(e <= 1e-5) && bad < 0)
              bad = (long)(i * ldc + j);
          }
        ck_assert_msg(
            bad < 0,
            "m=%lld n=%lld k=%lld ta=%d tb=%d %s: max err %.3g, first bad %ld",
            (long long)m, (long long)n, (long long)k, ta, tb, pl_dtype_name(dt),
            mx, bad);
        free(A), free(B), free(C), free(R);
      }
}
END_TEST

START_TEST(gemm_rows_independent) {
  enum { m = 9, n = 13, k = 37 };
  for (int d = 0; d < 2; d++)
    for (int tb = 0; tb < 2; tb++) {
      pl_dtype dt = d ? PL_BF16 : PL_F32;
      size_t es = pl_dtype_size(dt);
      void *A = malloc(m * k * es), *B = malloc(k * n * es);
      void *C = malloc(m * n * es), *c1 = malloc(n * es);
      fill(A, dt, m * k, 7), fill(B, dt, k * n, 8);
      ck_assert_int_eq(pl__cpu_moe_gemm(NULL, false, tb, m, n, k, 1.0f, A, k, B,
                                        tb ? k : n, 0.0f, C, n, dt, dt),
                       PL_OK);
      for (int r = 0; r < m; r++) {
        ck_assert_int_eq(pl__cpu_moe_gemm(NULL, false, tb, 1, n, k, 1.0f,
                                          (char *)A + (size_t)r * k * es, k, B,
                                          tb ? k : n, 0.0f, c1, n, dt, dt),
                         PL_OK);
        ck_assert_msg(memcmp(c1, (char *)C + (size_t)r * n * es, n * es) == 0,
                      "row %d differs alone vs in a batch (%s tb=%d)", r,
                      pl_dtype_name(dt), tb);
      }
      free(A), free(B), free(C), free(c1);
    }
}
END_TEST

START_TEST(gather_combine_scatter) {
  enum { N = 11, H = 5, k = 3, nA = 20, nB = 9 };
  for (int d = 0; d < 2; d++) {
    pl_dtype dt = d ? PL_BF16 : PL_F32;
    size_t es = pl_dtype_size(dt);
    char *src = malloc(N * H * es), *dst = malloc(7 * H * es);
    fill(src, dt, N * H, 11);
    int32_t rows[7] = {3, 0, 10, 3, 5, 9, 1};
    ck_assert_int_eq(pl__cpu_moe_gather(NULL, dst, src, rows, 7, H, dt), PL_OK);
    for (int i = 0; i < 7; i++)
      ck_assert(memcmp(dst + i * H * es, src + rows[i] * H * es, H * es) == 0);
    /* combine: tokens {2, 7, 4}, slots mixing A and B rows */
    char *A = malloc(nA * H * es), *B = malloc(nB * H * es),
         *out = malloc(N * H * es);
    fill(A, dt, nA * H, 12), fill(B, dt, nB * H, 13);
    memset(out, 0x55, N * H * es);
    float w[N * k];
    for (int i = 0; i < N * k; i++)
      w[i] = 0.1f * (float)(i % 7) + 0.05f;
    int32_t toks[3] = {2, 7, 4};
    int32_t slots[9] = {0, -1, 19, -9, 5, 6, 2, -3, 1};
    ck_assert_int_eq(
        pl__cpu_moe_combine(NULL, out, toks, 3, slots, k, w, A, B, H, dt),
        PL_OK);
    for (int q = 0; q < 3; q++)
      for (int h = 0; h < H; h++) {
        float acc = 0.0f;
        for (int j = 0; j < k; j++) {
          int32_t v = slots[q * k + j];
          float x = v >= 0 ? getf(A, dt, (size_t)v * H + h)
                           : getf(B, dt, (size_t)(-1 - v) * H + h);
          acc += w[toks[q] * k + j] * x;
        }
        float want = dt == PL_F32 ? acc : pl_bf16_to_f32(pl_f32_to_bf16(acc));
        ck_assert_msg(getf(out, dt, (size_t)toks[q] * H + h) == want,
                      "combine token %d h %d", toks[q], h);
      }
    /* untouched rows keep the poison */
    ck_assert(((unsigned char *)out)[0] == 0x55);
    float a[nA], b[nB], dw[N * k];
    for (int i = 0; i < nA; i++)
      a[i] = (float)i;
    for (int i = 0; i < nB; i++)
      b[i] = -(float)i - 1;
    ck_assert_int_eq(pl__cpu_moe_scatter_f32(NULL, dw, toks, 3, slots, k, a, b),
                     PL_OK);
    for (int q = 0; q < 3; q++)
      for (int j = 0; j < k; j++) {
        int32_t v = slots[q * k + j];
        ck_assert(dw[toks[q] * k + j] == (v >= 0 ? a[v] : b[-1 - v]));
      }
    free(src), free(dst), free(A), free(B), free(out);
  }
}
END_TEST

START_TEST(swiglu_bwd_derivatives) {
  enum { n = 4, I = 9 };
  float G[n * I], U[n * I], P[n * I], A[n * I], w[n] = {0.3f, 1.0f, 0.7f, 0.1f},
                                                dw[n];
  fill(G, PL_F32, n * I, 21), fill(U, PL_F32, n * I, 22),
      fill(P, PL_F32, n * I, 23);
  float G0[n * I], U0[n * I];
  memcpy(G0, G, sizeof G), memcpy(U0, U, sizeof U);
  ck_assert_int_eq(pl__cpu_moe_swiglu_fwd(NULL, A, G, U, n, I, PL_F32), PL_OK);
  ck_assert_int_eq(
      pl__cpu_moe_swiglu_bwd(NULL, G, U, P, A, w, dw, n, I, PL_F32), PL_OK);
  for (int r = 0; r < n; r++) {
    double sdw = 0;
    for (int i = 0; i < I; i++) {
      int o = r * I + i;
      double g = G0[o], u = U0[o], sg = 1.0 / (1.0 + exp(-g));
      double a = g * sg * u;
      ck_assert_msg(fabs(A[o] - a) <= 1e-6 * (1 + fabs(a)), "A %d", o);
      sdw += P[o] * a;
      /* d/dg [g*sig(g)*u] and d/du, times w*P */
      double h = 1e-4;
      double fp = (g + h) / (1 + exp(-(g + h))) * u,
             fm = (g - h) / (1 + exp(-(g - h))) * u;
      double dg = w[r] * P[o] * (fp - fm) / (2 * h);
      double du = w[r] * P[o] * g * sg;
      ck_assert_msg(fabs(G[o] - dg) <= 1e-4 * (1 + fabs(dg)), "dG %d: %g vs %g",
                    o, G[o], dg);
      ck_assert_msg(fabs(U[o] - du) <= 1e-5 * (1 + fabs(du)), "dU %d: %g vs %g",
                    o, U[o], du);
    }
    ck_assert_msg(fabs(dw[r] - sdw) <= 1e-5 * (1 + fabs(sdw)), "dw %d", r);
  }
  /* scale_rows */
  float X[n * I];
  memcpy(X, P, sizeof X);
  ck_assert_int_eq(pl__cpu_moe_scale_rows(NULL, X, w, n, I, PL_F32), PL_OK);
  for (int o = 0; o < n * I; o++)
    ck_assert(X[o] == w[o / I] * P[o]);
}
END_TEST

int main(void) {
  const TTest *tests[] = {gemm_vs_reference, gemm_rows_independent,
                          gather_combine_scatter, swiglu_bwd_derivatives, NULL};
  return pl_check_suite("moe_cpu", 0, tests, NULL, NULL, CK_FORK_GETENV, 0) ? 1
                                                                            : 0;
}
