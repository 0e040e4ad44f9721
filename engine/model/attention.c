/* attention.c — the backend-neutral side of causal GQA flash attention:
 * shape checks, the FLOP count the suite reports, the backward workspace, and
 * dispatch to pl_cpu_attn_* / pl_cuda_attn_* by the stream's backend (the
 * workspace goes through the tracked allocator under tag "attention", so the
 * attention live set shows in every peak). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "model/attention.h"

float pl_attn_scale(const pl_attn_shape *sh) {
  return sh->scale != 0.f ? sh->scale : 1.f / sqrtf((float)sh->head_dim);
}

pl_status pl_attn_check(const pl_attn_shape *sh, pl_backend be) {
  if (!sh) return pl_set_error(PL_EINVAL, "attention: shape is NULL");
  if (sh->batch < 0 || sh->seq < 0)
    return pl_set_error(PL_EINVAL, "attention: B=%lld S=%lld: must be >= 0",
                        (long long)sh->batch, (long long)sh->seq);
  if (sh->n_q < 1 || sh->n_kv < 1 || sh->n_q % sh->n_kv != 0)
    return pl_set_error(PL_EINVAL,
                        "attention: n_q=%d n_kv=%d: need n_kv >= 1 dividing n_q",
                        sh->n_q, sh->n_kv);
  if (sh->head_dim < 1)
    return pl_set_error(PL_EINVAL, "attention: d=%d: must be >= 1", sh->head_dim);
  if (!(sh->scale >= 0.f) || isinf(sh->scale))
    return pl_set_error(PL_EINVAL, "attention: scale=%g: must be finite >= 0 (0 = 1/sqrt(d))",
                        (double)sh->scale);
  if (sh->algo < PL_ATTN_AUTO || sh->algo > PL_ATTN_WGMMA)
    return pl_set_error(PL_EINVAL,
                        "attention: algo=%d: must be 0 (auto), 1 (simple), 2 (mma) or 3 (wgmma)",
                        (int)sh->algo);
  if (be == PL_BACKEND_CPU) {
    if (sh->dtype != PL_F32 && sh->dtype != PL_BF16)
      return pl_set_error(PL_EINVAL, "attention: dtype %s: CPU takes f32 or bf16",
                          pl_dtype_name(sh->dtype));
    return PL_OK;
  }
  if (sh->dtype != PL_BF16)
    return pl_set_error(PL_EUNSUPPORTED, "attention: dtype %s: CUDA takes bf16 only",
                        pl_dtype_name(sh->dtype));
  if (sh->head_dim != 64 && sh->head_dim != 128)
    return pl_set_error(PL_EUNSUPPORTED, "attention: d=%d: CUDA kernels take 64 or 128",
                        sh->head_dim);
  if (sh->algo == PL_ATTN_WGMMA && sh->head_dim != 128)
    return pl_set_error(PL_EUNSUPPORTED, "attention: d=%d: the wgmma kernel takes d = 128 only",
                        sh->head_dim);
  if (sh->seq > (int64_t)1 << 30)
    return pl_set_error(PL_EINVAL, "attention: S=%lld: CUDA kernels take S <= 2^30",
                        (long long)sh->seq);
  if (sh->batch > 65535 || sh->n_q > 65535)
    return pl_set_error(PL_EINVAL, "attention: B=%lld n_q=%d: CUDA grid takes <= 65535",
                        (long long)sh->batch, sh->n_q);
  return PL_OK;
}

double pl_attn_flops_fwd(const pl_attn_shape *sh) {
  double S = (double)sh->seq;
  return 4.0 * S * S * sh->head_dim * sh->n_q / 2.0 * (double)sh->batch;
}

double pl_attn_flops_bwd(const pl_attn_shape *sh) { return 2.5 * pl_attn_flops_fwd(sh); }

size_t pl_attn_bwd_workspace_bytes(const pl_attn_shape *sh, pl_backend be) {
  size_t B = (size_t)sh->batch, S = (size_t)sh->seq, d = (size_t)sh->head_dim;
  size_t dq = B * S * (size_t)sh->n_q * d, rows = B * (size_t)sh->n_q * S;
  if (be == PL_BACKEND_CPU) /* fp32 dQ, dK, dV accumulators and D */
    return (dq + 2 * B * S * (size_t)sh->n_kv * d + rows) * sizeof(float);
  return (pl_attn_dqacc_elems(sh) + rows) * sizeof(float);
}

size_t pl_attn_dqacc_elems(const pl_attn_shape *sh) {
  const size_t S = (size_t)sh->seq;
  return (size_t)sh->batch * ((S + 63) / 64 * 64) * (size_t)sh->n_q * (size_t)sh->head_dim;
}

/* PL_ATTN_AUTO stays AUTO (the CUDA launchers then run the wgmma forward and
 * backward for d = 128 on an sm_90a build, the MMA kernels otherwise) unless
 * the environment names a kernel:
 * PLATEAU_ATTN_FWD / PLATEAU_ATTN_BWD = simple | mma | wgmma (a field switch should a
 * fast kernel misbehave on some machine: the SIMPLE kernels are the device
 * reference).  An explicit algo in the shape always wins. */
static pl_attn_shape resolve(const pl_attn_shape *sh, const char *env) {
  pl_attn_shape r = *sh;
  if (r.algo == PL_ATTN_AUTO) {
    const char *e = getenv(env);
    if (e && !strcmp(e, "simple")) r.algo = PL_ATTN_SIMPLE;
    if (e && !strcmp(e, "mma")) r.algo = PL_ATTN_MMA;
    if (e && !strcmp(e, "wgmma")) r.algo = PL_ATTN_WGMMA;
  }
  return r;
}

pl_status pl_attn_fwd(pl_stream *s, const pl_attn_shape *shape, const void *q, const void *k,
                      const void *v, void *o, float *lse) {
  pl_backend be = pl_stream_backend(s);
  PL_TRY(pl_attn_check(shape, be));
  const pl_attn_shape r = resolve(shape, "PLATEAU_ATTN_FWD"), *sh = &r;
#if PL_HAVE_CUDA
  if (be == PL_BACKEND_CUDA) return pl_cuda_attn_fwd(s, sh, q, k, v, o, lse);
#endif
  return pl_cpu_attn_fwd(s, sh, q, k, v, o, lse);
}

/* The kernel name of the pass whose switch is env (bwd: the backward). */
static const char *kernel_name(pl_stream *s, const pl_attn_shape *shape, const char *env,
                               bool bwd) {
  const pl_attn_shape r = resolve(shape, env);
#if PL_HAVE_CUDA
  if (pl_stream_backend(s) == PL_BACKEND_CUDA)
    return bwd ? pl_cuda_attn_bwd_kernel(s, &r) : pl_cuda_attn_fwd_kernel(s, &r);
#endif
  (void)r, (void)s, (void)bwd;
  return "cpu";
}

const char *pl_attn_fwd_kernel(pl_stream *s, const pl_attn_shape *shape) {
  return kernel_name(s, shape, "PLATEAU_ATTN_FWD", false);
}

const char *pl_attn_bwd_kernel(pl_stream *s, const pl_attn_shape *shape) {
  return kernel_name(s, shape, "PLATEAU_ATTN_BWD", true);
}

pl_status pl_attn_bwd(pl_stream *s, const pl_attn_shape *shape, const void *q, const void *k,
                      const void *v, const void *o, const void *dout, const float *lse,
                      void *dq, void *dk, void *dv) {
  pl_backend be = pl_stream_backend(s);
  PL_TRY(pl_attn_check(shape, be));
  const pl_attn_shape r = resolve(shape, "PLATEAU_ATTN_BWD"), *sh = &r;
  if (sh->seq == 0 || sh->batch == 0) return PL_OK;
  pl_dev *dev = pl_stream_dev(s);
  void *ws = NULL;
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, pl_attn_bwd_workspace_bytes(sh, be), "attention",
                        s, &ws));
  pl_status st;
#if PL_HAVE_CUDA
  if (be == PL_BACKEND_CUDA)
    st = pl_cuda_attn_bwd(s, sh, q, k, v, o, dout, lse, dq, dk, dv, ws);
  else
#endif
    st = pl_cpu_attn_bwd(s, sh, q, k, v, o, dout, lse, dq, dk, dv, ws);
  pl_free_async(dev, ws, s);
  return st;
}
