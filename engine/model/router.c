/* router.c — the router's schedule (model/router.h): the two GEMMs through
 * pl_gemm, the per-token kernels dispatched by backend, and the host-side
 * auxiliary-loss-free bias update (one layer, and a step's layers summed
 * over the group). */
#include "model/router.h"

#include <stdlib.h>
#include <string.h>

#include "backend/router_kernels.h"
#include "core/internal.h"

pl_status pl_router_check(const pl_router_shape *sh) {
  if (!sh)
    return pl_set_error(PL_EINVAL, "router: shape is NULL");
  if (sh->N < 0 || sh->H < 1)
    return pl_set_error(PL_EINVAL, "router: N=%lld H=%lld: need N >= 0, H >= 1",
                        (long long)sh->N, (long long)sh->H);
  if (sh->E < 1 || sh->k < 1 || sh->k > sh->E || sh->k > 32)
    return pl_set_error(PL_EINVAL,
                        "router: E=%d k=%d: need 1 <= k <= min(E, 32)", sh->E,
                        sh->k);
  if (sh->dt != PL_F32 && sh->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "router: dtype %s: f32 or bf16",
                        pl_dtype_name(sh->dt));
  return PL_OK;
}

pl_status pl_router_fwd(pl_stream *s, const pl_router_shape *sh, const void *x,
                        const void *W, const float *bias, float *probs,
                        int32_t *idx, float *w) {
  PL_TRY(pl_router_check(sh));
  if (sh->N == 0)
    return PL_OK;
  /* logits [N,E] = x [N,H] · W [H,E] into probs, fp32 */
  PL_TRY(pl_gemm(s, false, false, sh->N, sh->E, sh->H, 1.f, x, sh->H, W, sh->E,
                 0.f, probs, sh->E, sh->dt, PL_F32));
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_router_topk(s, probs, bias, sh->N, sh->E, sh->k, sh->renorm,
                                idx, w);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_router_topk(s, probs, bias, sh->N, sh->E, sh->k, sh->renorm,
                             idx, w);
}

/* dlogits on the stream's backend (backend/router_kernels.h). */
static pl_status router_dlogits(pl_stream *s, const float *probs,
                                const int32_t *idx, const float *w,
                                const float *dw, int64_t N, int E, int k,
                                int renorm, void *dlogits, pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_router_dlogits(s, probs, idx, w, dw, N, E, k, renorm,
                                   dlogits, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_router_dlogits(s, probs, idx, w, dw, N, E, k, renorm, dlogits,
                                dt);
}

pl_status pl_router_bwd(pl_stream *s, const pl_router_shape *sh, const void *x,
                        const void *W, const float *probs, const int32_t *idx,
                        const float *w, const float *dw, void *dlogits,
                        void *dx, float *dW) {
  PL_TRY(pl_router_check(sh));
  if (sh->N == 0)
    return PL_OK;
  PL_TRY(router_dlogits(s, probs, idx, w, dw, sh->N, sh->E, sh->k, sh->renorm,
                        dlogits, sh->dt));
  /* dx [N,H] = dlogits [N,E] · Wᵀ (W stored [H,E]) */
  PL_TRY(pl_gemm(s, false, true, sh->N, sh->H, sh->E, 1.f, dlogits, sh->E, W,
                 sh->E, 0.f, dx, sh->H, sh->dt, sh->dt));
  /* dW [H,E] += xᵀ [H,N] · dlogits [N,E] */
  return pl_gemm(s, true, false, sh->H, sh->E, sh->N, 1.f, x, sh->H, dlogits,
                 sh->E, 1.f, dW, sh->E, sh->dt, PL_F32);
}

void pl_router_bias_update(float *bias, const int64_t *counts, int E,
                           float gamma) {
  double mean = 0;
  for (int e = 0; e < E; e++)
    mean += (double)counts[e];
  mean /= E > 0 ? E : 1;
  for (int e = 0; e < E; e++) {
    const double c = (double)counts[e];
    bias[e] += c < mean ? gamma : (c > mean ? -gamma : 0.f);
  }
}

pl_status pl_router_bias_step(pl_comm *group, pl_stream *s,
                              const pl_router_bias_slot *slots, int n, int E,
                              float gamma) {
  const size_t eb = (size_t)E * sizeof(int64_t);
  if (n == 0 || gamma == 0) {
    for (int i = 0; i < n; i++)
      memset(slots[i].counts, 0, eb);
    return PL_OK;
  }
  int64_t *all = malloc((size_t)n * eb);
  if (!all)
    return pl_set_error(PL_ENOMEM, "router bias: host");
  for (int i = 0; i < n; i++)
    memcpy(all + (size_t)i * E, slots[i].counts, eb);
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              pl_host_allreduce_i64(group, all, (size_t)n * E, PL_RED_SUM));
  for (int i = 0; i < n; i++) {
    pl_router_bias_update(slots[i].hbias, all + (size_t)i * E, E, gamma);
    memset(slots[i].counts, 0, eb);
    PL_TRY_GOTO(st, done,
                pl_memcpy_async(s, slots[i].bias, slots[i].hbias,
                                (size_t)E * sizeof(float)));
  }
  st = pl_stream_sync(s);
done:
  free(all);
  return st;
}
