/* attention_kernels.h — the GQA flash-attention kernels: the shape, mask and
 * kernel choice of one call (the types model/attention.h's API takes) and
 * the CPU and CUDA twins, same signatures, that the model layer dispatches to
 * (backend/cpu/attention_cpu.c, backend/cuda/attention.cu), plus the merge of
 * two partial attention outputs by their log-sum-exp (ring attention).
 * Layouts and formulas: model/attention.h.  Not installed; the pl__
 * functions are not part of the public API. */
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

/* Which keys a query attends to.  Zero is causal, so every shape written
 * before the mask existed keeps its meaning. */
typedef enum pl_attn_mask {
  PL_ATTN_CAUSAL = 0, /* query i attends to keys j <= i                     */
  PL_ATTN_FULL = 1,   /* query i attends to every key of the block (ring
                         attention's blocks of earlier sequence chunks)     */
} pl_attn_mask;

typedef struct pl_attn_shape {
  int64_t batch;           /* B sequences                                  */
  int64_t seq;             /* S tokens per sequence (>= 0)                 */
  int n_q;                 /* query heads                                  */
  int n_kv;                /* key/value heads, divides n_q                 */
  int head_dim;            /* d                                            */
  float scale;             /* softmax scale; 0 means 1/sqrt(d)             */
  pl_dtype dtype;          /* of Q, K, V, O and their gradients            */
  pl_attn_kernels kernels; /* CUDA kernel choice ({0} = AUTO for both)     */
  pl_attn_mask mask;       /* causal (0, the default) or full              */
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

/* Merge a block's partial attention into an accumulator, rows r < rows of
 * n_q heads of dimension d: with l = LSE, m = max(l_acc, l_blk),
 *   l'    = m + log(exp(l_acc − m) + exp(l_blk − m))
 *   o_acc = o_acc·exp(l_acc − l') + o_blk·exp(l_blk − l')
 * (a side whose LSE is −inf contributes nothing).  o_acc [rows, n_q, d] f32,
 * lse_acc and lse_blk [n_q, rows] f32, o_blk [rows, n_q, d] of dt (f32 or
 * bf16). */
pl_status pl__cpu_attn_merge(pl_stream *s, float *o_acc, float *lse_acc,
                             const void *o_blk, const float *lse_blk,
                             int64_t rows, int n_q, int d, pl_dtype dt);

#if PL_HAVE_CUDA
pl_status pl__cuda_attn_merge(pl_stream *s, float *o_acc, float *lse_acc,
                              const void *o_blk, const float *lse_blk,
                              int64_t rows, int n_q, int d, pl_dtype dt);
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
