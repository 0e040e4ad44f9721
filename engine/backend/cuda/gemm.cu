/* backend/cuda/gemm.cu — pl_gemm_strided_batched on CUDA: the row-major GEMM
 * of kernels.h mapped onto column-major cuBLAS, plus a plain kernel for the
 * two cases cuBLAS does not cover as specified.
 *
 * Mapping: a row-major m×n matrix with leading dimension ld is, read as
 * column-major, its n×m transpose with the same ld.  So
 *     C = op(A)·op(B)   (row-major)   <=>   Cᵀ = op(B)ᵀ·op(A)ᵀ   (col-major)
 * is one cuBLAS call with the operands swapped (B first, A second), m and n
 * swapped, and each op unchanged: ta -> CUBLAS_OP_T on A, tb -> CUBLAS_OP_T on
 * B.  The leading dimensions pass through unchanged.
 *
 * Numerics: CUBLAS_COMPUTE_32F (fp32 accumulation; the handle's math mode
 * forbids TF32 and reduced-precision split-K reductions, see dev.cu), or
 * CUBLAS_COMPUTE_32F_FAST_TF32 for f32 operands on a stream that asked for
 * TF32 (pl_stream_set_tf32: the operands enter the tensor cores as TF32,
 * accumulation stays fp32; the plain kernel ignores it), A and B
 * CUDA_R_32F or CUDA_R_16BF, C CUDA_R_32F or CUDA_R_16BF.  cuBLAS has no
 * f32-in/bf16-out GEMM, and for k == 0 the contract is C = beta·C (C not read
 * when beta == 0) regardless of alpha: both go to gemm_plain_kernel, an fp32
 * loop over k per output element (slow; these cases are small or rare).
 *
 * Shapes (row-major, per batch entry): op(A) m×k, op(B) k×n, C m×n.
 */
#include <limits.h>
#include <stdint.h>

#include <stdlib.h>
#include <string.h>

#include "backend/cuda/internal_cuda.h"
#include "backend/kernels.h"
#include "backend/moe_kernels.h"
#include "plateau/host_device.h"

/* ---- kernel -----------------------------------------------------------------
 */

__device__ __forceinline__ float gload(const float *p) {
  return *p;
}
__device__ __forceinline__ float gload(const pl_bf16 *p) {
  return pl_bf16_to_f32(*p);
}
__device__ __forceinline__ void gstore(float *p, float v) {
  *p = v;
}
__device__ __forceinline__ void gstore(pl_bf16 *p, float v) {
  *p = pl_f32_to_bf16(v);
}

/* One thread per C element (grid-stride over batch·m·n):
 *   C[b][i][j] = alpha · Σ_p op(A)[b][i][p] · op(B)[b][p][j] + beta ·
 * C[b][i][j] with C not read when beta == 0, and alpha ignored when k == 0. */
template <typename TAB, typename TC>
static __global__ void
gemm_plain_kernel(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  float alpha, const TAB *A, int64_t lda, int64_t sa,
                  const TAB *B, int64_t ldb, int64_t sb, float beta, TC *C,
                  int64_t ldc, int64_t sc, int64_t batch) {
  size_t total = (size_t)batch * (size_t)m * (size_t)n;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (size_t)gridDim.x * blockDim.x) {
    int64_t b = (int64_t)(idx / ((size_t)m * n));
    int64_t r = (int64_t)(idx % ((size_t)m * n));
    int64_t i = r / n, j = r % n;
    const TAB *a = A + b * sa, *bb = B + b * sb;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; p++) {
      float x = gload(ta ? a + p * lda + i : a + i * lda + p);
      float y = gload(tb ? bb + j * ldb + p : bb + p * ldb + j);
      acc = __fmaf_rn(x, y, acc);
    }
    TC *c = C + b * sc + i * ldc + j;
    float v = k > 0 ? __fmul_rn(alpha, acc) : 0.0f;
    if (beta != 0.0f)
      v = __fadd_rn(v, __fmul_rn(beta, gload(c)));
    gstore(c, v);
  }
}

/* ---- launcher ---------------------------------------------------------------
 */

static cudaDataType cuda_type(pl_dtype dt) {
  return dt == PL_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static pl_status launch_plain(pl_stream *s, bool ta, bool tb, int64_t m,
                              int64_t n, int64_t k, float alpha, const void *A,
                              int64_t lda, int64_t sa, const void *B,
                              int64_t ldb, int64_t sb, float beta, void *C,
                              int64_t ldc, int64_t sc, int64_t batch,
                              pl_dtype ab_dt, pl_dtype c_dt) {
  cudaStream_t cs = (cudaStream_t)s->native;
  unsigned blocks = pl__cuda_blocks(s->dev, (size_t)batch * m * n);
#define PL_GEMM_PLAIN(TAB, TC)                                                 \
  gemm_plain_kernel<TAB, TC><<<blocks, PL_CUDA_THREADS, 0, cs>>>(              \
      ta, tb, m, n, k, alpha, (const TAB *)A, lda, sa, (const TAB *)B, ldb,    \
      sb, beta, (TC *)C, ldc, sc, batch)
  if (ab_dt == PL_F32 && c_dt == PL_F32)
    PL_GEMM_PLAIN(float, float);
  else if (ab_dt == PL_F32)
    PL_GEMM_PLAIN(float, pl_bf16);
  else if (c_dt == PL_F32)
    PL_GEMM_PLAIN(pl_bf16, float);
  else
    PL_GEMM_PLAIN(pl_bf16, pl_bf16);
#undef PL_GEMM_PLAIN
  PL_CUDA_CHECK_LAUNCH("gemm_plain_kernel");
  return PL_OK;
}

/* Each stream's own cuBLAS workspace (32 MiB, the size cuBLAS recommends for
 * Hopper), allocated at the stream's first GEMM.  One handle serves all the
 * device's streams; cublasSetStream resets the handle to its default
 * workspace, which GEMMs running at once on two streams would share, so the
 * stream's own is bound after it (the MoE layer runs expert GEMMs on several
 * streams at once).  Outside the tracked allocator: a fixed 32 MiB per stream
 * that has run a GEMM. */
#define PL_CUBLAS_WS_BYTES ((size_t)32 << 20)

static pl_status stream_workspace(pl_stream *s) {
  if (s->blas_ws)
    return PL_OK;
  PL_CUDA_TRY(cudaMalloc(&s->blas_ws, PL_CUBLAS_WS_BYTES));
  return PL_OK;
}

/* The cuBLAS call, with the handle's stream and the stream's workspace set
 * under the lock (one handle per device, shared by its streams and host
 * threads). */
static pl_status call_cublas(pl_stream *s, bool ta, bool tb, int64_t m,
                             int64_t n, int64_t k, float alpha, const void *A,
                             int64_t lda, int64_t sa, const void *B,
                             int64_t ldb, int64_t sb, float beta, void *C,
                             int64_t ldc, int64_t sc, int64_t batch,
                             pl_dtype ab_dt, pl_dtype c_dt) {
  pl__cuda_dev *cd = PL_CUDA_IMPL(s->dev);
  cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cudaDataType tab = cuda_type(ab_dt), tc = cuda_type(c_dt);
  /* pl_stream_set_tf32: f32 operands through the TF32 tensor cores */
  cublasComputeType_t ct = ab_dt == PL_F32 && s->tf32
                               ? CUBLAS_COMPUTE_32F_FAST_TF32
                               : CUBLAS_COMPUTE_32F;
  bool small = m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX &&
               ldb <= INT_MAX && ldc <= INT_MAX && batch <= INT_MAX;
  cublasStatus_t st;
  PL_TRY(stream_workspace(s));
  pthread_mutex_lock(&cd->blas_lock);
  st = cublasSetStream(cd->blas, (cudaStream_t)s->native);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasSetWorkspace(cd->blas, s->blas_ws, PL_CUBLAS_WS_BYTES);
  if (st == CUBLAS_STATUS_SUCCESS) {
    /* Column-major: Cᵀ (n×m) = op(B)ᵀ (n×k) · op(A)ᵀ (k×m). */
    if (batch == 1 && small)
      st = cublasGemmEx(cd->blas, opB, opA, (int)n, (int)m, (int)k, &alpha, B,
                        tab, (int)ldb, A, tab, (int)lda, &beta, C, tc, (int)ldc,
                        ct, CUBLAS_GEMM_DEFAULT);
    else if (batch == 1)
      st =
          cublasGemmEx_64(cd->blas, opB, opA, n, m, k, &alpha, B, tab, ldb, A,
                          tab, lda, &beta, C, tc, ldc, ct, CUBLAS_GEMM_DEFAULT);
    else if (small)
      st = cublasGemmStridedBatchedEx(
          cd->blas, opB, opA, (int)n, (int)m, (int)k, &alpha, B, tab, (int)ldb,
          (long long)sb, A, tab, (int)lda, (long long)sa, &beta, C, tc,
          (int)ldc, (long long)sc, (int)batch, ct, CUBLAS_GEMM_DEFAULT);
    else
      st = cublasGemmStridedBatchedEx_64(
          cd->blas, opB, opA, n, m, k, &alpha, B, tab, ldb, (long long)sb, A,
          tab, lda, (long long)sa, &beta, C, tc, ldc, (long long)sc, batch, ct,
          CUBLAS_GEMM_DEFAULT);
  }
  pthread_mutex_unlock(&cd->blas_lock);
  if (st != CUBLAS_STATUS_SUCCESS) {
    (void)cudaGetLastError();
    return pl_set_error(
        PL_ERUNTIME,
        "%s (m=%lld n=%lld k=%lld batch=%lld, %s in, %s out, "
        "ta=%d tb=%d) failed: %s (%s)",
        batch == 1 ? "cublasGemmEx" : "cublasGemmStridedBatchedEx",
        (long long)m, (long long)n, (long long)k, (long long)batch,
        pl_dtype_name(ab_dt), pl_dtype_name(c_dt), (int)ta, (int)tb,
        cublasGetStatusName(st), cublasGetStatusString(st));
  }
  PL_CUDA_CHECK_LAUNCH("cuBLAS GEMM");
  return PL_OK;
}

extern "C" pl_status pl__cuda_gemm_strided_batched(
    pl_stream *s, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
    float alpha, const void *A, int64_t lda, int64_t sa, const void *B,
    int64_t ldb, int64_t sb, float beta, void *C, int64_t ldc, int64_t sc,
    int64_t batch, pl_dtype ab_dt, pl_dtype c_dt) {
  if (!s || !s->dev)
    return pl_set_error(PL_EINVAL, "pl_gemm: stream is NULL");
  if ((ab_dt != PL_F32 && ab_dt != PL_BF16) ||
      (c_dt != PL_F32 && c_dt != PL_BF16))
    return pl_set_error(PL_EINVAL,
                        "pl_gemm: ab_dt %s, c_dt %s: each must be "
                        "f32 or bf16",
                        pl_dtype_name(ab_dt), pl_dtype_name(c_dt));
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return pl_set_error(PL_EINVAL,
                        "pl_gemm: m=%lld n=%lld k=%lld batch=%lld: "
                        "must all be >= 0",
                        (long long)m, (long long)n, (long long)k,
                        (long long)batch);
  if (m == 0 || n == 0 || batch == 0)
    return PL_OK;
  int64_t need_a = ta ? m : k, need_b = tb ? k : n;
  if (lda < need_a || ldb < need_b || ldc < n)
    return pl_set_error(PL_EINVAL,
                        "pl_gemm: lda=%lld ldb=%lld ldc=%lld: need "
                        "lda >= %lld (%s), ldb >= %lld (%s), ldc >= n = %lld",
                        (long long)lda, (long long)ldb, (long long)ldc,
                        (long long)need_a, ta ? "m, A transposed" : "k",
                        (long long)need_b, tb ? "k, B transposed" : "n",
                        (long long)n);
  if (batch > 1 && (sa < 0 || sb < 0 || sc < 0))
    return pl_set_error(PL_EINVAL,
                        "pl_gemm: strides %lld %lld %lld: must be "
                        ">= 0",
                        (long long)sa, (long long)sb, (long long)sc);
  PL_TRY(pl__cuda_use(s->dev));
  if (k == 0 || (ab_dt == PL_F32 && c_dt == PL_BF16))
    return launch_plain(s, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta,
                        C, ldc, sc, batch, ab_dt, c_dt);
  return call_cublas(s, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C,
                     ldc, sc, batch, ab_dt, c_dt);
}
