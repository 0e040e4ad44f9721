/* attention_kernels.h — the GQA flash-attention kernels: the shape, mask and
 * CPU and CUDA twins (the shape, mask and kernel choice of one call are
 * public types: plateau/optypes.h), same signatures, that the model layer
 * dispatches to (backend/cpu/attention_cpu.c, backend/cuda/attention.cu), plus
 * the merge of two partial attention outputs by their log-sum-exp (ring
 * attention). Layouts and formulas: model/attention.h.  Not installed; the pl__
 * functions are not part of the public API. */
#ifndef PLATEAU_BACKEND_ATTENTION_KERNELS_H
#define PLATEAU_BACKEND_ATTENTION_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "plateau/dev.h"
#include "plateau/optypes.h"
#include "plateau/status.h"
#include "plateau/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PL_HAVE_CUDA
#define PL_HAVE_CUDA 0
#endif

/* The softmax scale used: sh->scale, or 1/sqrt(d) when 0. */
static inline float pl__attn_scale(const pl_attn_shape *sh) {
  return sh->scale != 0.f ? sh->scale : 1.f / sqrtf((float)sh->head_dim);
}

/* The backward workspace cuDNN's fused flash attention asks for (cuDNN 9.19
 * on Hopper, measured over every shape of the CUDA test: causal and full,
 * GQA, d 64 and 128, S from 129 to 2^20): two fp32 buffers of dQ's size,
 * the fp32 row sums and 256 bytes. */
static inline size_t pl__attn_cudnn_bwd_ws_bytes(const pl_attn_shape *sh) {
  const size_t rows = (size_t)sh->batch * (size_t)sh->seq * (size_t)sh->n_q;
  return rows * (size_t)sh->head_dim * 8 + rows * 4 + 256;
}

/* 1 when the CUDA backend's backward for sh is planned as cuDNN's: the
 * kernel chosen is cuDNN's or AUTO, and the shape is one cuDNN takes (bf16,
 * d 64 or 128, S >= 2).  The planner assumes a build with cuDNN, the default
 * wherever cuDNN is installed; a build without it uses less (our kernels'
 * workspace), so the plan's attention term is then an upper bound. */
static inline int pl__attn_planned_cudnn(const pl_attn_shape *sh) {
  return (sh->kernels.bwd == PL_ATTN_BWD_AUTO ||
          sh->kernels.bwd == PL_ATTN_BWD_CUDNN) &&
         sh->dtype == PL_BF16 && (sh->head_dim == 64 || sh->head_dim == 128) &&
         sh->seq >= 2;
}

/* The backward workspace the CUDA backend is planned to allocate for sh,
 * with no device at hand (the planner, a dry device of the CUDA flavour):
 * cuDNN's where the backward is planned as cuDNN's, else our kernels': the
 * fp32 dQ accumulator of B·n_q·d rows of S rounded up to 64 (the wgmma
 * backward's tiles), then D [B, n_q, S] in fp32.  The CUDA backend's
 * pl__cuda_attn_bwd_workspace_bytes is the same; what a GPU allocates can
 * be more where cuDNN's plan asks for more (pl__cuda_attn_bwd_workspace_on). */
static inline size_t pl__attn_cuda_bwd_ws_planned(const pl_attn_shape *sh) {
  if (pl__attn_planned_cudnn(sh))
    return pl__attn_cudnn_bwd_ws_bytes(sh);
  const size_t B = (size_t)sh->batch, S = (size_t)sh->seq;
  return (B * ((S + 63) / 64 * 64) * (size_t)sh->n_q * (size_t)sh->head_dim +
          B * (size_t)sh->n_q * S) *
         4;
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
/* what pl_attn_bwd allocates on s: the size above, or more where the kernel
 * that runs (cuDNN's plan) asks for more */
size_t pl__cuda_attn_bwd_workspace_on(pl_stream *s, const pl_attn_shape *sh);
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
