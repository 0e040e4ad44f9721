/* kernels.h — the shared kernels every backend implements with the same
 * signature: RNG fill, constant fill, bf16<->f32 convert, scale, axpy, GEMM
 * (all transpose combinations; bf16 in with fp32 accumulation, or fp32), and
 * async copies.  They take a stream; the backend is the stream's.
 *
 * Pointers are raw device (or pinned host, for copies) memory of the stream's
 * device.  Counts are elements.  On the CPU backend each call runs to
 * completion before it returns (issue order); on CUDA it is enqueued on the
 * stream and the launch is checked. */
#ifndef PLATEAU_KERNELS_H
#define PLATEAU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plateau/dev.h"
#include "plateau/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_dist {
  PL_DIST_UNIFORM = 0, /* [a, b)                       */
  PL_DIST_NORMAL = 1,  /* mean a, std b (pl_rng_normal) */
} pl_dist;

/* dst[i] = draw(seed, offset + i), i < n, stored as dt (f32 or bf16; the bf16
 * value is the rounded f32 draw).  Identical bits on CPU and CUDA. */
pl_status pl_rng_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                      uint64_t seed, uint64_t offset, pl_dist dist, float a,
                      float b);
/* dst[i] = value (f32, bf16, i32, i64). */
pl_status pl_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n, double value);
/* dst = convert(src): f32<->bf16 (round to nearest even), or a copy when the
 * dtypes match. */
pl_status pl_convert(pl_stream *s, void *dst, pl_dtype dst_dt, const void *src,
                     pl_dtype src_dt, size_t n);
/* x[i] *= alpha (f32 or bf16; bf16 computed in f32 and rounded). */
pl_status pl_scale(pl_stream *s, void *x, pl_dtype dt, size_t n, float alpha);
/* y[i] += alpha * x[i]; x and y of the same dtype (f32 or bf16), or y f32 and
 * x bf16 (accumulating a bf16 gradient into an f32 buffer). */
pl_status pl_axpy(pl_stream *s, void *y, pl_dtype y_dt, const void *x,
                  pl_dtype x_dt, size_t n, float alpha);

/* Row-major GEMM:  C[m×n] = alpha · op(A) · op(B) + beta · C
 *   op(A) is m×k: A is stored m×k (lda >= k) or, if ta, k×m (lda >= m);
 *   op(B) is k×n: B is stored k×n (ldb >= n) or, if tb, n×k (ldb >= k);
 *   C is m×n with ldc >= n.
 * ab_dt is the dtype of A and B (f32 or bf16), c_dt of C (f32 or bf16);
 * accumulation is always fp32 (on CUDA: CUBLAS_COMPUTE_32F, no TF32).  beta
 * == 0 never reads C.  m, n or k == 0 is allowed (k == 0 gives beta·C). */
pl_status pl_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,
                  int64_t k, float alpha, const void *A, int64_t lda,
                  const void *B, int64_t ldb, float beta, void *C, int64_t ldc,
                  pl_dtype ab_dt, pl_dtype c_dt);
/* `batch` independent GEMMs with element strides between consecutive A, B, C.
 */
pl_status pl_gemm_strided_batched(pl_stream *s, bool ta, bool tb, int64_t m,
                                  int64_t n, int64_t k, float alpha,
                                  const void *A, int64_t lda, int64_t stride_a,
                                  const void *B, int64_t ldb, int64_t stride_b,
                                  float beta, void *C, int64_t ldc,
                                  int64_t stride_c, int64_t batch,
                                  pl_dtype ab_dt, pl_dtype c_dt);

/* Copy `bytes` between any two of: this device's memory, pinned host memory,
 * ordinary host memory (direction inferred; async when both ends allow). */
pl_status pl_memcpy_async(pl_stream *s, void *dst, const void *src,
                          size_t bytes);
/* Copy from another device (peer) — D2D across GPUs on one node. */
pl_status pl_memcpy_peer_async(pl_stream *s, void *dst, const pl_dev *dst_dev,
                               const void *src, const pl_dev *src_dev,
                               size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
