/* attention.cu — the CUDA attention launcher: the shapes the CUDA kernels
 * take, the kernel choice (the shape's pl_attn_kernels, AUTO resolved for the
 * device code the build has), the backward workspace and the entry points
 * backend/attention_kernels.h declares.  Kernels and
 * their launches live in the kernel files (attention_common.cuh lists them):
 *
 *   forward    CUDNN    attention_cudnn.cpp      cuDNN's fused flash
 *                                               attention (AUTO where built
 *                                               and the shape runs there)
 *              SIMPLE   attention_simple.cu     the device reference
 *              MMA      attention_mma.cu        sm_80+, d = 64 or 128
 *              WGMMA    attention_wgmma_fwd.cu  sm_90a, d = 128 (AUTO there)
 *   backward   CUDNN    attention_cudnn.cpp      (AUTO as forward)
 *              SIMPLE   attention_simple.cu
 *              MMA      attention_mma.cu        dQ by fp32 atomics
 *              WGMMA    attention_wgmma_bwd.cu  dQ by bulk reductions (AUTO)
 *              SPLIT    attention_wgmma_bwd.cu  dK/dV and dQ kernels, no
 *                                               atomics: bit-reproducible dQ
 *
 * Every backward of ours first computes D = rowsum(dO∘O) (attention_simple.cu);
 * cuDNN's computes its own inside its workspace.  The
 * library reads no environment variable: the caller's pl_attn_kernels is the
 * only switch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/attention_kernels.h"
#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_cudnn.h"

/* 1 when the device code was built for sm_90a (wgmma available) */
static __global__ void wgmma_probe_kernel(int *out) {
  *out = PL_WGMMA_OK;
}

/* The CUDA kernels: bf16, d = 64 or 128 (the wgmma kernels 128 only),
 * S <= 2^30 (int indices), B and n_q within a grid dimension. */
extern "C" pl_status pl__cuda_attn_check(const pl_attn_shape *sh) {
  if (sh->kernels.fwd == PL_ATTN_FWD_CUDNN ||
      sh->kernels.bwd == PL_ATTN_BWD_CUDNN)
    PL_TRY(pl__cudnn_attn_check(sh));
  if (sh->dtype != PL_BF16)
    return pl_set_error(PL_EUNSUPPORTED,
                        "attention: dtype %s: CUDA takes bf16 only",
                        pl_dtype_name(sh->dtype));
  if (sh->head_dim != 64 && sh->head_dim != 128)
    return pl_set_error(PL_EUNSUPPORTED,
                        "attention: d=%d: CUDA kernels take 64 or 128",
                        sh->head_dim);
  if (sh->kernels.fwd == PL_ATTN_FWD_WGMMA && sh->head_dim != 128)
    return pl_set_error(PL_EUNSUPPORTED,
                        "attention: d=%d: the wgmma forward takes d = 128 only",
                        sh->head_dim);
  if (sh->mask == PL_ATTN_FULL && sh->kernels.bwd == PL_ATTN_BWD_SPLIT)
    return pl_set_error(PL_EUNSUPPORTED,
                        "attention: the split backward is causal only: the "
                        "full mask runs on simple, mma, wgmma (or auto)");
  if ((sh->kernels.bwd == PL_ATTN_BWD_WGMMA ||
       sh->kernels.bwd == PL_ATTN_BWD_SPLIT) &&
      sh->head_dim != 128)
    return pl_set_error(
        PL_EUNSUPPORTED,
        "attention: d=%d: the wgmma and split backwards take d = 128 only",
        sh->head_dim);
  if (sh->seq > (int64_t)1 << 30)
    return pl_set_error(PL_EINVAL,
                        "attention: S=%lld: CUDA kernels take S <= 2^30",
                        (long long)sh->seq);
  if (sh->batch > 65535 || sh->n_q > 65535)
    return pl_set_error(PL_EINVAL,
                        "attention: B=%lld n_q=%d: CUDA grid takes <= 65535",
                        (long long)sh->batch, sh->n_q);
  return PL_OK;
}

/* Floats of the fp32 dQ accumulator: B·n_q·d rows of S rounded up to WGB_BM
 * (the bulk backward's tiles; the MMA backward uses the first B·S·n_q·d). */
size_t pl__attn_dqacc_elems(const pl_attn_shape *sh) {
  const size_t S = (size_t)sh->seq;
  return (size_t)sh->batch * ((S + WGB_BM - 1) / WGB_BM * WGB_BM) *
         (size_t)sh->n_q * (size_t)sh->head_dim;
}

/* Our kernels' workspace: the dQ accumulator, then D [B, n_q, S]. */
static size_t ours_bwd_workspace_bytes(const pl_attn_shape *sh) {
  return (pl__attn_dqacc_elems(sh) +
          (size_t)sh->batch * (size_t)sh->n_q * (size_t)sh->seq) *
         sizeof(float);
}

/* What the planner counts (no device at hand): cuDNN's workspace where the
 * backward is planned as cuDNN's (pl__attn_planned_cudnn), else ours. */
extern "C" size_t pl__cuda_attn_bwd_workspace_bytes(const pl_attn_shape *sh) {
  return pl__attn_planned_cudnn(sh) ? pl__attn_cudnn_bwd_ws_bytes(sh)
                                    : ours_bwd_workspace_bytes(sh);
}

AttnParams pl__attn_params(const pl_attn_shape *sh) {
  AttnParams p;
  memset(&p, 0, sizeof p);
  p.S = (int)sh->seq;
  p.nq = sh->n_q;
  p.nkv = sh->n_kv;
  p.group = sh->n_q / sh->n_kv;
  p.scale = pl__attn_scale(sh);
  p.scale_log2 = p.scale * LOG2E_F;
  p.walk = BWD_WALK_DESC;
  p.full = sh->mask == PL_ATTN_FULL;
  return p;
}

/* Was the device code built for sm_90a?  Probed once (a one-int kernel). */
static int wgmma_avail = -1;
static pl_status wgmma_available(pl_stream *s) {
  int &avail = wgmma_avail;
  if (avail < 0) {
    cudaStream_t st = (cudaStream_t)pl_stream_native(s);
    pl_dev *dev = pl_stream_dev(s);
    void *d = NULL;
    int h = 0;
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, sizeof(int), "attention", &d));
    wgmma_probe_kernel<<<1, 1, 0, st>>>((int *)d);
    cudaError_t e =
        cudaMemcpyAsync(&h, d, sizeof(int), cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(st);
    pl_free(dev, d);
    if (e != cudaSuccess)
      return pl_set_error(PL_ERUNTIME, "attention: wgmma probe: %s",
                          cudaGetErrorString(e));
    avail = h;
  }
  if (!avail)
    return pl_set_error(PL_EUNSUPPORTED,
                        "attention: the wgmma kernels need device code for "
                        "sm_90a: rebuild with CUDA_ARCH=90a");
  return PL_OK;
}

/* 1 if the wgmma kernels can run on s's device (quietly: 0 on any failure). */
static int wgmma_built(pl_stream *s) {
  if (wgmma_available(s) == PL_OK)
    return 1;
  pl_clear_error();
  return 0;
}

/* 1 if cuDNN runs sh's forward and backward on s's device (quietly: 0 in a
 * build without cuDNN, or when cuDNN builds no plan for either: AUTO keeps
 * the two directions on one kernel family, so an LSE and a workspace never
 * cross families by accident). */
static int cudnn_runs(pl_stream *s, const pl_attn_shape *sh) {
  if (!PL_HAVE_CUDNN)
    return 0;
  if (pl__cudnn_attn_ready(s, sh, 0) == PL_OK &&
      pl__cudnn_attn_ready(s, sh, 1) == PL_OK)
    return 1;
  pl_clear_error();
  return 0;
}

/* The kinds that run for sh on s: AUTO is cuDNN where this build has it and
 * cuDNN builds a plan for the shape, else WGMMA (the bulk backward) for a
 * d = 128 shape, causal or full, when the device code has sm_90a, else
 * MMA. */
static pl_attn_fwd_kind fwd_kind(pl_stream *s, const pl_attn_shape *sh) {
  if (sh->kernels.fwd != PL_ATTN_FWD_AUTO)
    return sh->kernels.fwd;
  if (cudnn_runs(s, sh))
    return PL_ATTN_FWD_CUDNN;
  return sh->head_dim == 128 && wgmma_built(s) ? PL_ATTN_FWD_WGMMA
                                               : PL_ATTN_FWD_MMA;
}
static pl_attn_bwd_kind bwd_kind(pl_stream *s, const pl_attn_shape *sh) {
  if (sh->kernels.bwd != PL_ATTN_BWD_AUTO)
    return sh->kernels.bwd;
  if (cudnn_runs(s, sh))
    return PL_ATTN_BWD_CUDNN;
  return sh->head_dim == 128 && wgmma_built(s) ? PL_ATTN_BWD_WGMMA
                                               : PL_ATTN_BWD_MMA;
}

/* Bytes pl_attn_bwd allocates for sh on s: those of the kernel that runs
 * (cuDNN's: what the planner counts, or its plan's need should a cuDNN
 * version ask for more). */
extern "C" size_t pl__cuda_attn_bwd_workspace_on(pl_stream *s,
                                                 const pl_attn_shape *sh) {
  if (sh->seq == 0 || sh->batch == 0 || bwd_kind(s, sh) != PL_ATTN_BWD_CUDNN)
    return ours_bwd_workspace_bytes(sh);
  const size_t planned = pl__attn_cudnn_bwd_ws_bytes(sh),
               need = pl__cudnn_attn_need(s, sh, 1);
  return need > planned ? need : planned;
}

extern "C" pl_status pl__cuda_attn_fwd(pl_stream *s, const pl_attn_shape *sh,
                                       const void *q, const void *k,
                                       const void *v, void *o, float *lse) {
  PL_TRY(pl__cuda_attn_check(sh));
  if (sh->seq == 0 || sh->batch == 0)
    return PL_OK;
  AttnParams p = pl__attn_params(sh);
  p.q = (const bf16 *)q;
  p.k = (const bf16 *)k;
  p.v = (const bf16 *)v;
  p.out = (bf16 *)o;
  p.lse = lse;
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const unsigned B = (unsigned)sh->batch;
  const int d = sh->head_dim;
  switch (fwd_kind(s, sh)) {
  case PL_ATTN_FWD_CUDNN:
    return pl__cudnn_attn_fwd(s, sh, q, k, v, o, lse);
  case PL_ATTN_FWD_WGMMA:
    PL_TRY(wgmma_available(s));
    return pl__attn_wgmma_fwd(st, p, B);
  case PL_ATTN_FWD_MMA:
    return pl__attn_mma_fwd(st, p, d, B);
  default:
    return pl__attn_simple_fwd(st, p, d, B);
  }
}

extern "C" pl_status pl__cuda_attn_bwd(pl_stream *s, const pl_attn_shape *sh,
                                       const void *q, const void *k,
                                       const void *v, const void *o,
                                       const void *dout, const float *lse,
                                       void *dq, void *dk, void *dv, void *ws) {
  PL_TRY(pl__cuda_attn_check(sh));
  if (sh->seq == 0 || sh->batch == 0)
    return PL_OK;
  if (!ws)
    return pl_set_error(PL_EINVAL,
                        "attention bwd: workspace is NULL (need %zu bytes)",
                        pl__cuda_attn_bwd_workspace_on(s, sh));
  AttnParams p = pl__attn_params(sh);
  p.q = (const bf16 *)q;
  p.k = (const bf16 *)k;
  p.v = (const bf16 *)v;
  p.o = (const bf16 *)o;
  p.dout = (const bf16 *)dout;
  p.lse = (float *)lse;
  p.dq = (bf16 *)dq;
  p.dk = (bf16 *)dk;
  p.dv = (bf16 *)dv;
  p.dqacc = (float *)ws;
  p.delta = p.dqacc + pl__attn_dqacc_elems(sh);
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const unsigned B = (unsigned)sh->batch;
  const int d = sh->head_dim;
  const pl_attn_bwd_kind kind = bwd_kind(s, sh);
  if (kind == PL_ATTN_BWD_CUDNN)
    return pl__cudnn_attn_bwd(s, sh, q, k, v, o, dout, lse, dq, dk, dv, ws,
                              pl__cuda_attn_bwd_workspace_on(s, sh));
  if (kind == PL_ATTN_BWD_WGMMA || kind == PL_ATTN_BWD_SPLIT)
    PL_TRY(wgmma_available(s));
  PL_TRY(pl__attn_delta(st, p, d, B));
  switch (kind) {
  case PL_ATTN_BWD_WGMMA:
    return pl__attn_wgmma_bwd(st, p, B, pl__attn_dqacc_elems(sh), false);
  case PL_ATTN_BWD_SPLIT:
    return pl__attn_wgmma_bwd(st, p, B, pl__attn_dqacc_elems(sh), true);
  case PL_ATTN_BWD_MMA:
    return pl__attn_mma_bwd(st, p, d, B);
  default:
    return pl__attn_simple_bwd(st, p, d, B);
  }
}

/* "wgmma (unavailable)" when the wgmma kernels were asked for and the device
 * code lacks sm_90a (the call then fails with PL_EUNSUPPORTED) */
extern "C" const char *pl__cuda_attn_fwd_kernel(pl_stream *s,
                                                const pl_attn_shape *sh) {
  switch (fwd_kind(s, sh)) {
  case PL_ATTN_FWD_CUDNN:
    return cudnn_runs(s, sh) ? "cudnn" : "cudnn (unavailable)";
  case PL_ATTN_FWD_WGMMA:
    return wgmma_built(s) ? "wgmma/ovtma" : "wgmma (unavailable)";
  case PL_ATTN_FWD_MMA:
    return "mma";
  default:
    return "simple";
  }
}

extern "C" const char *pl__cuda_attn_bwd_kernel(pl_stream *s,
                                                const pl_attn_shape *sh) {
  switch (bwd_kind(s, sh)) {
  case PL_ATTN_BWD_CUDNN:
    return cudnn_runs(s, sh) ? "cudnn" : "cudnn (unavailable)";
  case PL_ATTN_BWD_WGMMA:
    return wgmma_built(s) ? "wgmma/bulk" : "wgmma (unavailable)";
  case PL_ATTN_BWD_SPLIT:
    return wgmma_built(s) ? "wgmma/split" : "wgmma/split (unavailable)";
  case PL_ATTN_BWD_MMA:
    return "mma";
  default:
    return "simple";
  }
}
