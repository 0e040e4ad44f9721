/* moe_kernels.h — the MoE layer's device kernels: row gather (permute), combine
 * (unpermute + weighted sum), SwiGLU forward/backward, per-row scaling, and
 * the expert GEMM.  A CPU launcher pl_cpu_moe_*() in backend/cpu/moe_cpu.c and
 * a CUDA twin pl_cuda_moe_*() with the same signature in backend/cuda/moe.cu;
 * the pl_moe_k_*() dispatchers (engine/ops/moe.c) pick by the stream's backend.
 *
 * Shapes: rows of width H (hidden) or I (expert FFN width), dt storage (f32 or
 * bf16), fp32 arithmetic.  Index arrays are int32 in the stream's device
 * memory.  Every kernel computes each output row from its own inputs in a fixed
 * order, so a row's value does not depend on which other rows share the launch
 * (that is what makes ep / llep / pipelined_llep bit-identical on the CPU). */
#ifndef PLATEAU_OPS_MOE_KERNELS_H
#define PLATEAU_OPS_MOE_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "plateau/dev.h"
#include "plateau/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PL_MOE_KERNELS(P)                                                      \
  /* dst[i, :] = src[rows[i], :], i < n; rows are H wide. */                   \
  pl_status P##moe_gather(pl_stream *s, void *dst, const void *src,           \
                          const int32_t *rows, int64_t n, int64_t H,          \
                          pl_dtype dt);                                        \
  /* dst[i] = src[idx[i]], i < n (per-route scalars). */                       \
  pl_status P##moe_gather_f32(pl_stream *s, float *dst, const float *src,      \
                              const int32_t *idx, int64_t n);                  \
  /* For q < nt, t = toks[q]: out[t, :] = sum_j w[t*k+j] * row(slots[q*k+j]),  \
   * j ascending, where row(v) = A[v, :] if v >= 0 else B[-1-v, :]; w NULL     \
   * means weight 1.  Rows of width H in dt; accumulation in fp32, one        \
   * rounding at the store. */                                                 \
  pl_status P##moe_combine(pl_stream *s, void *out, const int32_t *toks,       \
                           int64_t nt, const int32_t *slots, int k,            \
                           const float *w, const void *A, const void *B,       \
                           int64_t H, pl_dtype dt);                            \
  /* For q < nt, t = toks[q], j < k: dst[t*k+j] = a[v] if v >= 0 else          \
   * b[-1-v], v = slots[q*k+j] (per-route scalars back to their routes). */    \
  pl_status P##moe_scatter_f32(pl_stream *s, float *dst, const int32_t *toks,  \
                               int64_t nt, const int32_t *slots, int k,        \
                               const float *a, const float *b);                \
  /* A = silu(G) * U, n x I. */                                                \
  pl_status P##moe_swiglu_fwd(pl_stream *s, void *A, const void *G,            \
                              const void *U, int64_t n, int64_t I,             \
                              pl_dtype dt);                                    \
  /* Given P = dY_unweighted * Wd^T (n x I), A = silu(G)*U and the route       \
   * weights w (n): dw[r] = sum_i P[r,i]*A[r,i] (the route-weight gradient),   \
   * then with dA = w[r]*P: G <- dA * U * silu'(G), U <- dA * silu(G). */      \
  pl_status P##moe_swiglu_bwd(pl_stream *s, void *G, void *U, const void *P,   \
                              const void *A, const float *w, float *dw,        \
                              int64_t n, int64_t I, pl_dtype dt);              \
  /* X[r, :] *= w[r], r < n, rows of width H. */                               \
  pl_status P##moe_scale_rows(pl_stream *s, void *X, const float *w,           \
                              int64_t n, int64_t H, pl_dtype dt);              \
  /* Row-deterministic GEMM with the meaning of pl_gemm (kernels.h): row r of  \
   * C depends only on row r of op(A) when !ta. */                             \
  pl_status P##moe_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,  \
                        int64_t k, float alpha, const void *A, int64_t lda,    \
                        const void *B, int64_t ldb, float beta, void *C,       \
                        int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt);

PL_MOE_KERNELS(pl_cpu_)
#if PL_HAVE_CUDA
PL_MOE_KERNELS(pl_cuda_)
#endif
PL_MOE_KERNELS(pl_moe_k_)

#ifdef __cplusplus
}
#endif
#endif
