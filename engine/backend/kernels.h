/* backend/kernels.h — the two backends' twins of the shared kernels of
 * plateau/kernels.h (RNG fill, fill, convert, scale, axpy, strided batched
 * GEMM, copies), which the ops tables point at, and the CPU's naive GEMM that
 * test references call directly.  Meanings and argument rules are those of
 * plateau/kernels.h; core/dev.c has checked the arguments (dtypes allowed,
 * sizes >= 0, n > 0) before a twin runs.  Not installed. */
#ifndef PLATEAU_BACKEND_KERNELS_H
#define PLATEAU_BACKEND_KERNELS_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU (backend/cpu/cpu_backend.c): run to completion on the caller ---- */
pl_status pl__cpu_rng_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                           uint64_t seed, uint64_t offset, pl_dist dist,
                           float a, float b);
pl_status pl__cpu_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                       double value);
pl_status pl__cpu_convert(pl_stream *s, void *dst, pl_dtype dst_dt,
                          const void *src, pl_dtype src_dt, size_t n);
pl_status pl__cpu_scale(pl_stream *s, void *x, pl_dtype dt, size_t n,
                        float alpha);
pl_status pl__cpu_axpy(pl_stream *s, void *y, pl_dtype y_dt, const void *x,
                       pl_dtype x_dt, size_t n, float alpha);
pl_status pl__cpu_gemm_strided_batched(pl_stream *s, bool ta, bool tb,
                                       int64_t m, int64_t n, int64_t k,
                                       float alpha, const void *A, int64_t lda,
                                       int64_t sa, const void *B, int64_t ldb,
                                       int64_t sb, float beta, void *C,
                                       int64_t ldc, int64_t sc, int64_t batch,
                                       pl_dtype ab_dt, pl_dtype c_dt);
pl_status pl__cpu_memcpy_async(pl_stream *s, void *dst, const void *src,
                               size_t bytes);
pl_status pl__cpu_memcpy_peer_async(pl_stream *s, void *dst,
                                    const pl_dev *dst_dev, const void *src,
                                    const pl_dev *src_dev, size_t bytes);

/* C = alpha·op(A)·op(B) + beta·C (row-major, pl_gemm's conventions) in
 * double, one output at a time: the slow, obviously right GEMM that tests
 * compare both backends with.  Host memory; no stream. */
pl_status pl__cpu_gemm_ref(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                           float alpha, const void *A, int64_t lda,
                           const void *B, int64_t ldb, float beta, void *C,
                           int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt);

#if PL_HAVE_CUDA
/* ---- CUDA (backend/cuda/kernels.cu, gemm.cu): enqueued on s's stream ---- */
pl_status pl__cuda_rng_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                            uint64_t seed, uint64_t offset, pl_dist dist,
                            float a, float b);
pl_status pl__cuda_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                        double value);
pl_status pl__cuda_convert(pl_stream *s, void *dst, pl_dtype dst_dt,
                           const void *src, pl_dtype src_dt, size_t n);
pl_status pl__cuda_scale(pl_stream *s, void *x, pl_dtype dt, size_t n,
                         float alpha);
pl_status pl__cuda_axpy(pl_stream *s, void *y, pl_dtype y_dt, const void *x,
                        pl_dtype x_dt, size_t n, float alpha);
pl_status pl__cuda_gemm_strided_batched(pl_stream *s, bool ta, bool tb,
                                        int64_t m, int64_t n, int64_t k,
                                        float alpha, const void *A, int64_t lda,
                                        int64_t sa, const void *B, int64_t ldb,
                                        int64_t sb, float beta, void *C,
                                        int64_t ldc, int64_t sc, int64_t batch,
                                        pl_dtype ab_dt, pl_dtype c_dt);
pl_status pl__cuda_memcpy_async(pl_stream *s, void *dst, const void *src,
                                size_t bytes);
pl_status pl__cuda_memcpy_peer_async(pl_stream *s, void *dst,
                                     const pl_dev *dst_dev, const void *src,
                                     const pl_dev *src_dev, size_t bytes);
#endif

#ifdef __cplusplus
}
#endif
#endif
