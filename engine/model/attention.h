/* attention.h — causal grouped-query flash attention, forward and backward.
 *
 * Shapes (one call covers B sequences of S tokens; token-major, as the layers
 * produce them):
 *   Q, O, dQ, dO  [B, S, n_q,  d]   bf16 (or f32 on the CPU backend)
 *   K, V, dK, dV  [B, S, n_kv, d]
 *   LSE           [B, n_q, S]       f32, natural-log log-sum-exp of each query
 *                                   row's scaled scores (saved by forward)
 * n_kv divides n_q; query head h reads key/value head h / (n_q / n_kv).
 * d is 64 or 128 on CUDA (any d >= 1 on the CPU backend).
 *
 *   O_i = Σ_{j<=i} softmax_j(scale · q_i·k_j) v_j          (causal)
 *
 * Nothing S×S is ever formed: forward walks key blocks with an online softmax
 * and saves LSE; backward recomputes each score tile from Q, K and LSE
 * (FlashAttention-2).  FLOPs counted by the suite (causal, the usual formula):
 *   fwd = 4·S²·d·n_q/2 per sequence, bwd = 2.5·fwd.
 *
 * The CPU kernels (backend/cpu/attention_cpu.c) are the reference: blocked
 * online softmax in fp32, rounding O/dQ/dK/dV to bf16 at the same storage
 * points as CUDA.  pl_attn_ref_fwd/bwd_f64 are naive double references for
 * small sizes (tests).  The CUDA kernels (backend/cuda/attention.cu) come in
 * two versions: SIMPLE (one warp per row; obviously correct, slow) and MMA
 * (tensor cores, mma.sync m16n8k16 bf16, ldmatrix, cp.async). */
#ifndef PLATEAU_MODEL_ATTENTION_H
#define PLATEAU_MODEL_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_attn_algo {
  PL_ATTN_AUTO = 0,   /* MMA where supported, else SIMPLE                */
  PL_ATTN_SIMPLE = 1, /* CUDA: one warp per row (reference on the device) */
  PL_ATTN_MMA = 2,    /* CUDA: tensor-core flash attention               */
  PL_ATTN_WGMMA = 3,  /* CUDA: forward and backward with Hopper wgmma
                         (d = 128; needs a CUDA_ARCH=90a build).  What
                         AUTO runs for d = 128 on such builds. */
} pl_attn_algo;

typedef struct pl_attn_shape {
  int64_t batch;  /* B sequences                                  */
  int64_t seq;    /* S tokens per sequence (>= 0)                 */
  int n_q;        /* query heads                                  */
  int n_kv;       /* key/value heads, divides n_q                 */
  int head_dim;   /* d                                            */
  float scale;    /* softmax scale; 0 means 1/sqrt(d)             */
  pl_dtype dtype; /* of Q, K, V, O and their gradients            */
  pl_attn_algo algo;
} pl_attn_shape;

/* Check a shape for a backend; PL_EINVAL / PL_EUNSUPPORTED with a message. */
pl_status pl_attn_check(const pl_attn_shape *sh, pl_backend be);
/* scale actually used (sh->scale, or 1/sqrt(d) when 0). */
float pl_attn_scale(const pl_attn_shape *sh);
/* Causal FLOPs of one forward (4·S²·d·n_q/2 per sequence) and backward (2.5×). */
double pl_attn_flops_fwd(const pl_attn_shape *sh);
double pl_attn_flops_bwd(const pl_attn_shape *sh);
/* Bytes of device workspace backward needs on backend be (CUDA: the fp32 dQ
 * accumulator, pl_attn_dqacc_elems floats, then the row dots
 * D = rowsum(dO∘O), B·n_q·S floats). */
size_t pl_attn_bwd_workspace_bytes(const pl_attn_shape *sh, pl_backend be);
/* Floats of the CUDA backward's fp32 dQ accumulator: B·n_q·d rows of S
 * rounded up to 64 (the bulk wgmma backward's tiles of 64 rows; the other
 * kernels use the first B·S·n_q·d). */
size_t pl_attn_dqacc_elems(const pl_attn_shape *sh);

/* Schedule-level entry points: dispatch on the stream's backend, allocate the
 * backward workspace through the tracked allocator (tag "attention") and
 * free it stream-ordered. */
pl_status pl_attn_fwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                      const void *k, const void *v, void *o, float *lse);
pl_status pl_attn_bwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                      const void *k, const void *v, const void *o,
                      const void *dout, const float *lse, void *dq, void *dk,
                      void *dv);

/* Backend kernels, same signatures.  `ws` is pl_attn_bwd_workspace_bytes of
 * device memory (may be NULL when that is 0). */
pl_status pl_cpu_attn_fwd(pl_stream *s, const pl_attn_shape *sh,
                          const void *q, const void *k, const void *v,
                          void *o, float *lse);
pl_status pl_cpu_attn_bwd(pl_stream *s, const pl_attn_shape *sh,
                          const void *q, const void *k, const void *v,
                          const void *o, const void *dout, const float *lse,
                          void *dq, void *dk, void *dv, void *ws);
#if PL_HAVE_CUDA
pl_status pl_cuda_attn_fwd(pl_stream *s, const pl_attn_shape *sh,
                           const void *q, const void *k, const void *v,
                           void *o, float *lse);
pl_status pl_cuda_attn_bwd(pl_stream *s, const pl_attn_shape *sh,
                           const void *q, const void *k, const void *v,
                           const void *o, const void *dout, const float *lse,
                           void *dq, void *dk, void *dv, void *ws);
const char *pl_cuda_attn_fwd_kernel(pl_stream *s, const pl_attn_shape *sh);
const char *pl_cuda_attn_bwd_kernel(pl_stream *s, const pl_attn_shape *sh);
#endif
/* The forward / backward kernel pl_attn_fwd / pl_attn_bwd would run for shape
 * on s: "cpu", "simple", "mma", "wgmma" ("wgmma/<V path>" for the forward),
 * for result notes. */
const char *pl_attn_fwd_kernel(pl_stream *s, const pl_attn_shape *shape);
const char *pl_attn_bwd_kernel(pl_stream *s, const pl_attn_shape *shape);

/* Naive double-precision references on host arrays (f64, same layouts); for
 * tests at small sizes.  O(B·S²·n_q·d). */
void pl_attn_ref_fwd_f64(const pl_attn_shape *sh, const double *q,
                         const double *k, const double *v, double *o,
                         double *lse);
void pl_attn_ref_bwd_f64(const pl_attn_shape *sh, const double *q,
                         const double *k, const double *v, const double *dout,
                         double *dq, double *dk, double *dv);

#ifdef __cplusplus
}
#endif
#endif
