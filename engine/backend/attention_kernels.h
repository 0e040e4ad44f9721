/* attention_kernels.h — the causal GQA flash-attention kernels: the shape and
 * kernel choice of one call (the types model/attention.h's API takes) and
 * the CPU and CUDA twins, same signatures, that the model layer dispatches to
 * (backend/cpu/attention_cpu.c, backend/cuda/attention.cu).  Layouts and
 * formulas: model/attention.h.  Not installed; the pl__ functions are not
 * part of the public API. */
#ifndef PLATEAU_BACKEND_ATTENTION_KERNELS_H
#define PLATEAU_BACKEND_ATTENTION_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "plateau/dev.h"
#include "plateau/status.h"
#include "plateau/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PL_HAVE_CUDA
#define PL_HAVE_CUDA 0
#endif

/* Which forward kernel runs on CUDA (the CPU backend has one kernel and
 * ignores the choice).  Zero is AUTO. */
typedef enum pl_attn_fwd_kind {
  PL_ATTN_FWD_AUTO = 0, /* WGMMA for d = 128 on an sm_90a build, else MMA    */
  PL_ATTN_FWD_SIMPLE = 1, /* one warp per query row: the device reference */
  PL_ATTN_FWD_MMA = 2,   /* mma.sync tensor cores (sm_80+, d = 64 or 128)     */
  PL_ATTN_FWD_WGMMA = 3, /* Hopper wgmma, K and V by TMA (d = 128, sm_90a)    */
} pl_attn_fwd_kind;

/* Which backward kernels run on CUDA.  Zero is AUTO. */
typedef enum pl_attn_bwd_kind {
  PL_ATTN_BWD_AUTO = 0, /* WGMMA for d = 128 on an sm_90a build, else MMA    */
  PL_ATTN_BWD_SIMPLE = 1, /* one warp per query row (dQ) and per key (dK, dV) */
  PL_ATTN_BWD_MMA = 2,   /* mma.sync, by key blocks; dQ by fp32 atomics       */
  PL_ATTN_BWD_WGMMA = 3, /* wgmma, by key blocks; dQ by TMA bulk reductions   */
  PL_ATTN_BWD_SPLIT = 4, /* wgmma dK/dV kernel and dQ kernel, no atomics: dQ
                            bit-reproducible run to run (d = 128, sm_90a)     */
} pl_attn_bwd_kind;

typedef struct pl_attn_kernels {
  pl_attn_fwd_kind fwd;
  pl_attn_bwd_kind bwd;
} pl_attn_kernels;

typedef struct pl_attn_shape {
  int64_t batch;           /* B sequences                                  */
  int64_t seq;             /* S tokens per sequence (>= 0)                 */
  int n_q;                 /* query heads                                  */
  int n_kv;                /* key/value heads, divides n_q                 */
  int head_dim;            /* d                                            */
  float scale;             /* softmax scale; 0 means 1/sqrt(d)             */
  pl_dtype dtype;          /* of Q, K, V, O and their gradients            */
  pl_attn_kernels kernels; /* CUDA kernel choice ({0} = AUTO for both)     */
} pl_attn_shape;

/* The softmax scale used: sh->scale, or 1/sqrt(d) when 0. */
static inline float pl__attn_scale(const pl_attn_shape *sh) {
  return sh->scale != 0.f ? sh->scale : 1.f / sqrtf((float)sh->head_dim);
}

/* What the backend's kernels take beyond the rules every backend shares
 * (checked first by pl_attn_check): PL_OK, or PL_EINVAL / PL_EUNSUPPORTED
 * with a message naming the value. */
pl_status pl__cpu_attn_check(const pl_attn_shape *sh);
/* Bytes of device workspace the backward takes as ws. */
size_t pl__cpu_attn_bwd_workspace_bytes(const pl_attn_shape *sh);
/* q [B,S,n_q,d], k, v [B,S,n_kv,d] -> o [B,S,n_q,d], lse [B,n_q,S] (f32). */
pl_status pl__cpu_attn_fwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                           const void *k, const void *v, void *o, float *lse);
/* -> dq, dk, dv (layouts of q, k, v); ws: pl__cpu_attn_bwd_workspace_bytes
 * of device memory (NULL only when B or S is 0). */
pl_status pl__cpu_attn_bwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                           const void *k, const void *v, const void *o,
                           const void *dout, const float *lse, void *dq,
                           void *dk, void *dv, void *ws);
/* Name of the kernel(s) the call runs for sh on s, for result rows. */
const char *pl__cpu_attn_fwd_kernel(pl_stream *s, const pl_attn_shape *sh);
const char *pl__cpu_attn_bwd_kernel(pl_stream *s, const pl_attn_shape *sh);

#if PL_HAVE_CUDA
pl_status pl__cuda_attn_check(const pl_attn_shape *sh);
size_t pl__cuda_attn_bwd_workspace_bytes(const pl_attn_shape *sh);
pl_status pl__cuda_attn_fwd(pl_stream *s, const pl_attn_shape *sh,
                            const void *q, const void *k, const void *v,
                            void *o, float *lse);
pl_status pl__cuda_attn_bwd(pl_stream *s, const pl_attn_shape *sh,
                            const void *q, const void *k, const void *v,
                            const void *o, const void *dout, const float *lse,
                            void *dq, void *dk, void *dv, void *ws);
const char *pl__cuda_attn_fwd_kernel(pl_stream *s, const pl_attn_shape *sh);
const char *pl__cuda_attn_bwd_kernel(pl_stream *s, const pl_attn_shape *sh);
#endif

#ifdef __cplusplus
}
#endif
#endif
