/* moe_kernels.h — the MoE layer's device kernels: row gather (permute), combine
 * (unpermute + weighted sum), per-route scalar gather and scatter, SwiGLU
 * forward/backward, per-row scaling, and the expert GEMM.  Each kernel has a
 * CPU launcher pl__cpu_moe_*() in backend/cpu/moe_cpu.c and a CUDA twin
 * pl__cuda_moe_*() with the same signature in backend/cuda/moe.cu; the MoE
 * operator (engine/ops/moe*.c) picks one by the stream's backend.  The CPU
 * launchers run on the calling thread and ignore s (the single-rank reference
 * calls them with s NULL).  Not installed.
 *
 * Shapes: rows of width H (hidden) or I (expert FFN width), dt storage (f32 or
 * bf16), fp32 arithmetic.  Index arrays are int32 in the stream's device
 * memory.  Every kernel computes each output row from its own inputs in a fixed
 * order, so a row's value does not depend on which other rows share the launch
 * (that is what makes ep / llep / pipelined_llep bit-identical on the CPU). */
#ifndef PLATEAU_BACKEND_MOE_KERNELS_H
#define PLATEAU_BACKEND_MOE_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "plateau/dev.h"
#include "plateau/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i, :] = src[rows[i], :], i < n; rows are H wide. */
pl_status pl__cpu_moe_gather(pl_stream *s, void *dst, const void *src,
                             const int32_t *rows, int64_t n, int64_t H,
                             pl_dtype dt);
#if PL_HAVE_CUDA
pl_status pl__cuda_moe_gather(pl_stream *s, void *dst, const void *src,
                              const int32_t *rows, int64_t n, int64_t H,
                              pl_dtype dt);
#endif

/* dst[i] = src[idx[i]], i < n (per-route scalars). */
pl_status pl__cpu_moe_gather_f32(pl_stream *s, float *dst, const float *src,
                                 const int32_t *idx, int64_t n);
#if PL_HAVE_CUDA
pl_status pl__cuda_moe_gather_f32(pl_stream *s, float *dst, const float *src,
                                  const int32_t *idx, int64_t n);
#endif

/* For q < nt, t = toks[q]: out[t, :] = sum_j w[t*k+j] * row(slots[q*k+j]),
 * j ascending, where row(v) = A[v, :] if v >= 0 else B[-1-v, :]; w NULL means
 * weight 1.  Rows of width H in dt; accumulation in fp32, one rounding at the
 * store. */
pl_status pl__cpu_moe_combine(pl_stream *s, void *out, const int32_t *toks,
                              int64_t nt, const int32_t *slots, int k,
                              const float *w, const void *A, const void *B,
                              int64_t H, pl_dtype dt);
#if PL_HAVE_CUDA
pl_status pl__cuda_moe_combine(pl_stream *s, void *out, const int32_t *toks,
                               int64_t nt, const int32_t *slots, int k,
                               const float *w, const void *A, const void *B,
                               int64_t H, pl_dtype dt);
#endif

/* For q < nt, t = toks[q], j < k: dst[t*k+j] = a[v] if v >= 0 else b[-1-v],
 * v = slots[q*k+j] (per-route scalars back to their routes). */
pl_status pl__cpu_moe_scatter_f32(pl_stream *s, float *dst, const int32_t *toks,
                                  int64_t nt, const int32_t *slots, int k,
                                  const float *a, const float *b);
#if PL_HAVE_CUDA
pl_status pl__cuda_moe_scatter_f32(pl_stream *s, float *dst,
                                   const int32_t *toks, int64_t nt,
                                   const int32_t *slots, int k, const float *a,
                                   const float *b);
#endif

/* A = silu(G) * U, n x I. */
pl_status pl__cpu_moe_swiglu_fwd(pl_stream *s, void *A, const void *G,
                                 const void *U, int64_t n, int64_t I,
                                 pl_dtype dt);
#if PL_HAVE_CUDA
pl_status pl__cuda_moe_swiglu_fwd(pl_stream *s, void *A, const void *G,
                                  const void *U, int64_t n, int64_t I,
                                  pl_dtype dt);
#endif

/* Given P = dY_unweighted * Wd^T (n x I), A = silu(G)*U and the route weights
 * w (n): dw[r] = sum_i P[r,i]*A[r,i] (the route-weight gradient), then with
 * dA = w[r]*P: G <- dA * U * silu'(G), U <- dA * silu(G). */
pl_status pl__cpu_moe_swiglu_bwd(pl_stream *s, void *G, void *U, const void *P,
                                 const void *A, const float *w, float *dw,
                                 int64_t n, int64_t I, pl_dtype dt);
#if PL_HAVE_CUDA
pl_status pl__cuda_moe_swiglu_bwd(pl_stream *s, void *G, void *U, const void *P,
                                  const void *A, const float *w, float *dw,
                                  int64_t n, int64_t I, pl_dtype dt);
#endif

/* X[r, :] *= w[r], r < n, rows of width H. */
pl_status pl__cpu_moe_scale_rows(pl_stream *s, void *X, const float *w,
                                 int64_t n, int64_t H, pl_dtype dt);
#if PL_HAVE_CUDA
pl_status pl__cuda_moe_scale_rows(pl_stream *s, void *X, const float *w,
                                  int64_t n, int64_t H, pl_dtype dt);
#endif

/* Row-deterministic GEMM with the meaning of pl_gemm (kernels.h): C (m x n) =
 * alpha op(A) op(B) + beta C, row-major; row r of C depends only on row r of
 * op(A) when !ta. */
pl_status pl__cpu_moe_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, float alpha, const void *A, int64_t lda,
                           const void *B, int64_t ldb, float beta, void *C,
                           int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt);
#if PL_HAVE_CUDA
pl_status pl__cuda_moe_gemm(pl_stream *s, bool ta, bool tb, int64_t m,
                            int64_t n, int64_t k, float alpha, const void *A,
                            int64_t lda, const void *B, int64_t ldb, float beta,
                            void *C, int64_t ldc, pl_dtype ab_dt,
                            pl_dtype c_dt);
#endif

#ifdef __cplusplus
}
#endif
#endif
