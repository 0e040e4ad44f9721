/* moe_cpu.c — CPU reference kernels of the MoE layer (backend/moe_kernels.h):
 * row gather, combine, SwiGLU forward/backward, row scaling and a
 * row-deterministic GEMM.
 *
 * Why a GEMM of our own next to OpenBLAS: the three dispatch variants feed the
 * expert GEMM different row batches (whole experts, pieces, chunks).  BLAS
 * libraries pick kernels and blockings by shape, so a row's result could change
 * with the batch; here every output element is one fp32 sum in a fixed order,
 * so outputs are bit-identical across variants and equal to the single-rank
 * reference.  Plain C11 + OpenMP; fp32 arithmetic, bf16 rounding only at the
 * stores (the same storage points as the CUDA kernels). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/moe_kernels.h"
#include "core/internal.h"
#include "plateau/host_device.h"

/* Below this much work a kernel runs on the calling thread: under mpirun
 * several ranks share the cores, and waking a thread team per small launch
 * costs more than the work. */
#define PAR_MIN ((int64_t)1 << 16)

static pl_status check_dt(pl_dtype dt, const char *who) {
  if (dt != PL_F32 && dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "%s: dtype %s: allowed f32, bf16", who,
                        pl_dtype_name(dt));
  return PL_OK;
}

pl_status pl__cpu_moe_gather(pl_stream *s, void *dst, const void *src,
                             const int32_t *rows, int64_t n, int64_t H,
                             pl_dtype dt) {
  (void)s;
  PL_TRY(check_dt(dt, "moe_gather"));
  size_t rb = (size_t)H * pl_dtype_size(dt);
#pragma omp parallel for schedule(static) if (n * H > PAR_MIN)
  for (int64_t i = 0; i < n; i++)
    memcpy((char *)dst + (size_t)i * rb,
           (const char *)src + (size_t)rows[i] * rb, rb);
  return PL_OK;
}

pl_status pl__cpu_moe_gather_f32(pl_stream *s, float *dst, const float *src,
                                 const int32_t *idx, int64_t n) {
  (void)s;
  for (int64_t i = 0; i < n; i++)
    dst[i] = src[idx[i]];
  return PL_OK;
}

pl_status pl__cpu_moe_combine(pl_stream *s, void *out, const int32_t *toks,
                              int64_t nt, const int32_t *slots, int k,
                              const float *w, const void *A, const void *B,
                              int64_t H, pl_dtype dt) {
  (void)s;
  PL_TRY(check_dt(dt, "moe_combine"));
#pragma omp parallel if (nt * k * H > PAR_MIN)
  {
    float *acc = malloc((size_t)(H > 0 ? H : 1) * sizeof(float));
#pragma omp for schedule(static)
    for (int64_t q = 0; q < nt; q++) {
      int64_t t = toks[q];
      for (int64_t h = 0; h < H; h++)
        acc[h] = 0.0f;
      for (int j = 0; j < k; j++) {
        int32_t v = slots[q * k + j];
        const void *base = v >= 0 ? A : B;
        int64_t r = v >= 0 ? v : -1 - (int64_t)v;
        float wj = w ? w[t * k + j] : 1.0f;
        for (int64_t h = 0; h < H; h++)
          acc[h] += wj * pl__load_elem(base, dt, r * H + h);
      }
      for (int64_t h = 0; h < H; h++)
        pl__store_elem(out, dt, t * H + h, acc[h]);
    }
    free(acc);
  }
  return PL_OK;
}

pl_status pl__cpu_moe_scatter_f32(pl_stream *s, float *dst, const int32_t *toks,
                                  int64_t nt, const int32_t *slots, int k,
                                  const float *a, const float *b) {
  (void)s;
  for (int64_t q = 0; q < nt; q++)
    for (int j = 0; j < k; j++) {
      int32_t v = slots[q * k + j];
      dst[(int64_t)toks[q] * k + j] = v >= 0 ? a[v] : b[-1 - (int64_t)v];
    }
  return PL_OK;
}

static inline float sigm(float g) {
  return 1.0f / (1.0f + expf(-g));
}

pl_status pl__cpu_moe_swiglu_fwd(pl_stream *s, void *A, const void *G,
                                 const void *U, int64_t n, int64_t I,
                                 pl_dtype dt) {
  (void)s;
  PL_TRY(check_dt(dt, "moe_swiglu_fwd"));
#pragma omp parallel for schedule(static) if (n * I > PAR_MIN)
  for (int64_t i = 0; i < n * I; i++) {
    float g = pl__load_elem(G, dt, i), u = pl__load_elem(U, dt, i);
    pl__store_elem(A, dt, i, g * sigm(g) * u);
  }
  return PL_OK;
}

pl_status pl__cpu_moe_swiglu_bwd(pl_stream *s, void *G, void *U, const void *P,
                                 const void *A, const float *w, float *dw,
                                 int64_t n, int64_t I, pl_dtype dt) {
  (void)s;
  PL_TRY(check_dt(dt, "moe_swiglu_bwd"));
#pragma omp parallel for schedule(static) if (n * I > PAR_MIN)
  for (int64_t r = 0; r < n; r++) {
    float acc = 0.0f;
    for (int64_t i = 0; i < I; i++)
      acc += pl__load_elem(P, dt, r * I + i) * pl__load_elem(A, dt, r * I + i);
    dw[r] = acc;
    float wr = w[r];
    for (int64_t i = 0; i < I; i++) {
      int64_t o = r * I + i;
      float g = pl__load_elem(G, dt, o), u = pl__load_elem(U, dt, o);
      float da = wr * pl__load_elem(P, dt, o);
      float sg = sigm(g);
      float silu = g * sg;
      float dsilu = sg * (1.0f + g * (1.0f - sg));
      pl__store_elem(G, dt, o, da * u * dsilu);
      pl__store_elem(U, dt, o, da * silu);
    }
  }
  return PL_OK;
}

pl_status pl__cpu_moe_scale_rows(pl_stream *s, void *X, const float *w,
                                 int64_t n, int64_t H, pl_dtype dt) {
  (void)s;
  PL_TRY(check_dt(dt, "moe_scale_rows"));
#pragma omp parallel for schedule(static) if (n * H > PAR_MIN)
  for (int64_t r = 0; r < n; r++)
    for (int64_t h = 0; h < H; h++)
      pl__store_elem(X, dt, r * H + h, w[r] * pl__load_elem(X, dt, r * H + h));
  return PL_OK;
}

/* C = alpha * op(A) * op(B) + beta * C.  Every element is a single fp32 sum
 * over the inner index in ascending order, then scaled and added to beta*C. */
pl_status pl__cpu_moe_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, float alpha, const void *A, int64_t lda,
                           const void *B, int64_t ldb, float beta, void *C,
                           int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt) {
  (void)s;
  PL_TRY(check_dt(ab_dt, "moe_gemm A/B"));
  PL_TRY(check_dt(c_dt, "moe_gemm C"));
  if (m < 0 || n < 0 || k < 0)
    return pl_set_error(PL_EINVAL,
                        "moe_gemm: m=%lld n=%lld k=%lld must be >= 0",
                        (long long)m, (long long)n, (long long)k);
  if (m == 0 || n == 0)
    return PL_OK;
  /* op(B) as fp32, k x n row-major (converts bf16 once, transposes if tb). */
  float *Bf = malloc((size_t)(k > 0 ? k : 1) * (size_t)n * sizeof(float));
  if (!Bf)
    return pl_set_error(PL_ENOMEM, "moe_gemm: scratch %lld x %lld",
                        (long long)k, (long long)n);
  const bool par = m * n * k > 64 * PAR_MIN;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t kk = 0; kk < k; kk++)
    for (int64_t j = 0; j < n; j++)
      Bf[kk * n + j] = tb ? pl__load_elem(B, ab_dt, j * ldb + kk)
                          : pl__load_elem(B, ab_dt, kk * ldb + j);
  pl_status rc = PL_OK;
#pragma omp parallel if (par)
  {
    float *acc = malloc((size_t)n * sizeof(float));
    if (!acc) {
#pragma omp atomic write
      rc = PL_ENOMEM;
    }
#pragma omp for schedule(static)
    for (int64_t r = 0; r < m; r++) {
      if (!acc)
        continue;
      for (int64_t j = 0; j < n; j++)
        acc[j] = 0.0f;
      for (int64_t kk = 0; kk < k; kk++) {
        float a = ta ? pl__load_elem(A, ab_dt, kk * lda + r)
                     : pl__load_elem(A, ab_dt, r * lda + kk);
        const float *b = Bf + kk * n;
        for (int64_t j = 0; j < n; j++)
          acc[j] += a * b[j];
      }
      for (int64_t j = 0; j < n; j++) {
        float v = alpha * acc[j];
        if (beta != 0.0f)
          v += beta * pl__load_elem(C, c_dt, r * ldc + j);
        pl__store_elem(C, c_dt, r * ldc + j, v);
      }
    }
    free(acc);
  }
  free(Bf);
  if (rc != PL_OK)
    return pl_set_error(rc, "moe_gemm: row scratch");
  return PL_OK;
}
