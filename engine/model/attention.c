/* attention.c — the backend-neutral side of GQA flash attention:
 * shape checks, the FLOP count the suite reports, the backward workspace,
 * dispatch to the CPU and CUDA kernels (backend/attention_kernels.h) by the
 * stream's backend — the workspace goes through the tracked allocator under
 * tag "attention", so the attention live set shows in every peak — and the
 * naive double-precision references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/attention_kernels.h"
#include "core/internal.h"
#include "model/attention.h"

float pl_attn_scale(const pl_attn_shape *sh) {
  return pl__attn_scale(sh);
}

/* The rules every backend shares, then the backend's own. */
pl_status pl_attn_check(const pl_attn_shape *sh, pl_backend be) {
  if (!sh)
    return pl_set_error(PL_EINVAL, "attention: shape is NULL");
  if (sh->batch < 0 || sh->seq < 0)
    return pl_set_error(PL_EINVAL, "attention: B=%lld S=%lld: must be >= 0",
                        (long long)sh->batch, (long long)sh->seq);
  if (sh->n_q < 1 || sh->n_kv < 1 || sh->n_q % sh->n_kv != 0)
    return pl_set_error(
        PL_EINVAL, "attention: n_q=%d n_kv=%d: need n_kv >= 1 dividing n_q",
        sh->n_q, sh->n_kv);
  if (sh->head_dim < 1)
    return pl_set_error(PL_EINVAL, "attention: d=%d: must be >= 1",
                        sh->head_dim);
  if (!(sh->scale >= 0.f) || isinf(sh->scale))
    return pl_set_error(
        PL_EINVAL, "attention: scale=%g: must be finite >= 0 (0 = 1/sqrt(d))",
        (double)sh->scale);
  if (sh->kernels.fwd < PL_ATTN_FWD_AUTO || sh->kernels.fwd > PL_ATTN_FWD_CUDNN)
    return pl_set_error(
        PL_EINVAL,
        "attention: kernels.fwd=%d: must be 0 (auto), 1 (simple), 2 (mma), "
        "3 (wgmma) or 4 (cudnn)",
        (int)sh->kernels.fwd);
  if (sh->mask != PL_ATTN_CAUSAL && sh->mask != PL_ATTN_FULL)
    return pl_set_error(PL_EINVAL,
                        "attention: mask=%d: must be 0 (causal) or 1 (full)",
                        (int)sh->mask);
  if (sh->kernels.bwd < PL_ATTN_BWD_AUTO || sh->kernels.bwd > PL_ATTN_BWD_CUDNN)
    return pl_set_error(
        PL_EINVAL,
        "attention: kernels.bwd=%d: must be 0 (auto), 1 (simple), 2 (mma), "
        "3 (wgmma), 4 (split) or 5 (cudnn)",
        (int)sh->kernels.bwd);
  if (be == PL_BACKEND_CUDA) {
#if PL_HAVE_CUDA
    return pl__cuda_attn_check(sh);
#else
    return pl_set_error(PL_EUNSUPPORTED,
                        "attention: this build has no CUDA backend");
#endif
  }
  return pl__cpu_attn_check(sh);
}

double pl_attn_flops_fwd(const pl_attn_shape *sh) {
  double S = (double)sh->seq;
  const double f = 4.0 * S * S * sh->head_dim * sh->n_q * (double)sh->batch;
  return sh->mask == PL_ATTN_FULL ? f : f / 2.0;
}

double pl_attn_flops_bwd(const pl_attn_shape *sh) {
  return 2.5 * pl_attn_flops_fwd(sh);
}

size_t pl_attn_bwd_workspace_bytes(const pl_attn_shape *sh, pl_backend be) {
  if (be == PL_BACKEND_CUDA) {
#if PL_HAVE_CUDA
    return pl__cuda_attn_bwd_workspace_bytes(sh);
#else
    return pl__attn_cuda_bwd_ws_planned(sh); /* a dry device's, the plan's */
#endif
  }
  return pl__cpu_attn_bwd_workspace_bytes(sh);
}

pl_status pl_attn_fwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                      const void *k, const void *v, void *o, float *lse) {
  PL_TRY(pl_attn_check(sh, pl_stream_backend(s)));
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_attn_fwd(s, sh, q, k, v, o, lse);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_attn_fwd(s, sh, q, k, v, o, lse);
}

pl_status pl_attn_bwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                      const void *k, const void *v, const void *o,
                      const void *dout, const float *lse, void *dq, void *dk,
                      void *dv) {
  PL_TRY(pl_attn_check(sh, pl_stream_backend(s)));
  if (sh->seq == 0 || sh->batch == 0)
    return PL_OK;
  pl_dev *dev = pl_stream_dev(s);
  void *ws = NULL;
  size_t ws_bytes = pl_attn_bwd_workspace_bytes(sh, pl__alloc_backend(s));
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    ws_bytes = pl__cuda_attn_bwd_workspace_on(s, sh);
#endif
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, ws_bytes, "attention", s, &ws));
  pl_status st = PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    st = pl__cuda_attn_bwd(s, sh, q, k, v, o, dout, lse, dq, dk, dv, ws);
  else
#endif
      if (!pl__on_dry(s))
    st = pl__cpu_attn_bwd(s, sh, q, k, v, o, dout, lse, dq, dk, dv, ws);
  pl_free_async(dev, ws, s);
  return st;
}

const char *pl_attn_fwd_kernel(pl_stream *s, const pl_attn_shape *sh) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_attn_fwd_kernel(s, sh);
#endif
  return pl__cpu_attn_fwd_kernel(s, sh);
}

const char *pl_attn_bwd_kernel(pl_stream *s, const pl_attn_shape *sh) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_attn_bwd_kernel(s, sh);
#endif
  return pl__cpu_attn_bwd_kernel(s, sh);
}

pl_status pl_attn_merge(pl_stream *s, float *o_acc, float *lse_acc,
                        const void *o_blk, const float *lse_blk, int64_t rows,
                        int n_q, int d, pl_dtype dt) {
  if (rows < 0 || n_q < 1 || d < 1)
    return pl_set_error(PL_EINVAL, "attention merge: rows=%lld n_q=%d d=%d",
                        (long long)rows, n_q, d);
  if (rows == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_attn_merge(s, o_acc, lse_acc, o_blk, lse_blk, rows, n_q, d,
                               dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_attn_merge(s, o_acc, lse_acc, o_blk, lse_blk, rows, n_q, d,
                            dt);
}

/* ---- naive double references ------------------------------------------ */

void pl_attn_ref_fwd_f64(const pl_attn_shape *sh, const double *q,
                         const double *k, const double *v, double *o,
                         double *lse) {
  const int64_t B = sh->batch, S = sh->seq;
  const int nq = sh->n_q, nkv = sh->n_kv, d = sh->head_dim, grp = nq / nkv;
  const double scale = (double)pl__attn_scale(sh);
  const int full = sh->mask == PL_ATTN_FULL;
  double *sc = malloc(sizeof(double) * (size_t)(S > 0 ? S : 1));
  PL_ASSERT(sc);
  for (int64_t b = 0; b < B; b++)
    for (int h = 0; h < nq; h++)
      for (int64_t i = 0; i < S; i++) {
        const double *qi = q + ((b * S + i) * nq + h) * (int64_t)d;
        const int64_t jend = full ? S - 1 : i; /* last key seen */
        double mx = -INFINITY;
        for (int64_t j = 0; j <= jend; j++) {
          const double *kj = k + ((b * S + j) * nkv + h / grp) * (int64_t)d;
          double x = 0;
          for (int c = 0; c < d; c++)
            x += qi[c] * kj[c];
          sc[j] = x * scale;
          if (sc[j] > mx)
            mx = sc[j];
        }
        double z = 0;
        for (int64_t j = 0; j <= jend; j++)
          z += exp(sc[j] - mx);
        double *oi = o + ((b * S + i) * nq + h) * (int64_t)d;
        for (int c = 0; c < d; c++)
          oi[c] = 0;
        for (int64_t j = 0; j <= jend; j++) {
          const double p = exp(sc[j] - mx) / z;
          const double *vj = v + ((b * S + j) * nkv + h / grp) * (int64_t)d;
          for (int c = 0; c < d; c++)
            oi[c] += p * vj[c];
        }
        if (lse)
          lse[(b * nq + h) * S + i] = mx + log(z);
      }
  free(sc);
}

void pl_attn_ref_bwd_f64(const pl_attn_shape *sh, const double *q,
                         const double *k, const double *v, const double *dout,
                         double *dq, double *dk, double *dv) {
  const int64_t B = sh->batch, S = sh->seq;
  const int nq = sh->n_q, nkv = sh->n_kv, d = sh->head_dim, grp = nq / nkv;
  const double scale = (double)pl__attn_scale(sh);
  const int full = sh->mask == PL_ATTN_FULL;
  memset(dq, 0, sizeof(double) * (size_t)(B * S * nq * d));
  memset(dk, 0, sizeof(double) * (size_t)(B * S * nkv * d));
  memset(dv, 0, sizeof(double) * (size_t)(B * S * nkv * d));
  double *p = malloc(sizeof(double) * (size_t)(S > 0 ? S : 1));
  double *dp = malloc(sizeof(double) * (size_t)(S > 0 ? S : 1));
  PL_ASSERT(p && dp);
  for (int64_t b = 0; b < B; b++)
    for (int h = 0; h < nq; h++)
      for (int64_t i = 0; i < S; i++) {
        const double *qi = q + ((b * S + i) * nq + h) * (int64_t)d;
        const double *doi = dout + ((b * S + i) * nq + h) * (int64_t)d;
        const int64_t jend = full ? S - 1 : i;
        double mx = -INFINITY;
        for (int64_t j = 0; j <= jend; j++) {
          const double *kj = k + ((b * S + j) * nkv + h / grp) * (int64_t)d;
          const double *vj = v + ((b * S + j) * nkv + h / grp) * (int64_t)d;
          double x = 0, y = 0;
          for (int c = 0; c < d; c++) {
            x += qi[c] * kj[c];
            y += doi[c] * vj[c];
          }
          p[j] = x * scale;
          dp[j] = y;
          if (p[j] > mx)
            mx = p[j];
        }
        double z = 0;
        for (int64_t j = 0; j <= jend; j++)
          z += exp(p[j] - mx);
        double D = 0;
        for (int64_t j = 0; j <= jend; j++) {
          p[j] = exp(p[j] - mx) / z;
          D += p[j] * dp[j];
        }
        double *dqi = dq + ((b * S + i) * nq + h) * (int64_t)d;
        for (int64_t j = 0; j <= jend; j++) {
          const int64_t kvo = ((b * S + j) * nkv + h / grp) * (int64_t)d;
          const double ds = p[j] * (dp[j] - D) * scale;
          for (int c = 0; c < d; c++) {
            dqi[c] += ds * k[kvo + c];
            dk[kvo + c] += ds * qi[c];
            dv[kvo + c] += p[j] * doi[c];
          }
        }
      }
  free(p);
  free(dp);
}
