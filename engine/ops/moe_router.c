/* moe_router.c — softmax top-k router, forward and backward (see
 * moe_router.h).  GEMMs on the device through pl_gemm; top-k, softmax and its
 * backward on the host over the copied logits (the layer plans on the host). */
#include "ops/moe_router.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static pl_status check_args(int64_t N, int64_t H, int E, int k, pl_dtype dt) {
  if (N < 0 || H < 1)
    return pl_set_error(PL_EINVAL, "router: N=%lld, H=%lld: need N >= 0, H >= 1",
                        (long long)N, (long long)H);
  if (k < 1 || k > E)
    return pl_set_error(PL_EINVAL, "router: k=%d: must be in [1, E=%d]", k, E);
  if (dt != PL_F32 && dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "router: dtype %s: allowed f32, bf16",
                        pl_dtype_name(dt));
  return PL_OK;
}

pl_status pl_moe_router_fwd(pl_dev *dev, pl_stream *s, const void *x, int64_t N,
                            int64_t H, const void *Wr, int E, int k,
                            pl_dtype dt, int32_t *idx, float *w) {
  PL_TRY(check_args(N, H, E, k, dt));
  if (N == 0) return PL_OK;
  size_t nz = (size_t)N * E;
  float *z = NULL;
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nz * sizeof(float), "router", (void **)&z));
  float *hz = malloc(nz * sizeof(float));
  float *hw = malloc((size_t)N * k * sizeof(float));
  pl_status st = (!hz || !hw) ? pl_set_error(PL_ENOMEM, "router: host") : PL_OK;
  if (st == PL_OK)
    st = pl_gemm(s, false, false, N, E, H, 1.0f, x, H, Wr, E, 0.0f, z, E, dt,
                 PL_F32);
  if (st == PL_OK) st = pl_memcpy_async(s, hz, z, nz * sizeof(float));
  if (st == PL_OK) st = pl_stream_sync(s);
  for (int64_t t = 0; st == PL_OK && t < N; t++) {
    const float *zt = hz + (size_t)t * E;
    int32_t *it = idx + t * k;
    /* k largest by selection (k is small); ties to the lower expert id */
    for (int j = 0; j < k; j++) {
      int best = -1;
      for (int e = 0; e < E; e++) {
        bool used = false;
        for (int q = 0; q < j; q++) used |= it[q] == e;
        if (used) continue;
        if (best < 0 || zt[e] > zt[best]) best = e;
      }
      it[j] = best;
    }
    float mx = zt[it[0]], sum = 0.0f;
    for (int j = 0; j < k; j++) {
      float v = expf(zt[it[j]] - mx);
      hw[t * k + j] = v;
      sum += v;
    }
    for (int j = 0; j < k; j++) hw[t * k + j] /= sum;
  }
  if (st == PL_OK)
    st = pl_memcpy_async(s, w, hw, (size_t)N * k * sizeof(float));
  if (st == PL_OK) st = pl_stream_sync(s);
  free(hz);
  free(hw);
  pl_free(dev, z);
  return st;
}

pl_status pl_moe_router_bwd(pl_dev *dev, pl_stream *s, const void *x, int64_t N,
                            int64_t H, const void *Wr, int E, int k,
                            pl_dtype dt, const int32_t *idx, const float *w,
                            const float *dw, void *dx, float *dWr) {
  PL_TRY(check_args(N, H, E, k, dt));
  if (N == 0) return PL_OK;
  size_t nz = (size_t)N * E, nk = (size_t)N * k;
  float *hw = malloc(nk * sizeof(float)), *hd = malloc(nk * sizeof(float));
  float *hz = calloc(nz, sizeof(float));
  void *dz = NULL;
  pl_status st = (!hw || !hd || !hz) ? pl_set_error(PL_ENOMEM, "router: host")
                                     : PL_OK;
  if (st == PL_OK)
    st = pl_alloc(dev, PL_ARENA_DEVICE, nz * pl_dtype_size(dt), "router", &dz);
  if (st == PL_OK) st = pl_memcpy_async(s, hw, w, nk * sizeof(float));
  if (st == PL_OK) st = pl_memcpy_async(s, hd, dw, nk * sizeof(float));
  if (st == PL_OK) st = pl_stream_sync(s);
  for (int64_t t = 0; st == PL_OK && t < N; t++) {
    float dot = 0.0f;
    for (int j = 0; j < k; j++) dot += hw[t * k + j] * hd[t * k + j];
    for (int j = 0; j < k; j++)
      hz[(size_t)t * E + idx[t * k + j]] += hw[t * k + j] * (hd[t * k + j] - dot);
  }
  /* dz to the device in the storage dtype (bf16 rounds here, as every
   * stored activation gradient does) */
  float *zf = NULL;
  if (st == PL_OK)
    st = pl_alloc(dev, PL_ARENA_DEVICE, nz * sizeof(float), "router", (void **)&zf);
  if (st == PL_OK) st = pl_memcpy_async(s, zf, hz, nz * sizeof(float));
  if (st == PL_OK) st = pl_convert(s, dz, dt, zf, PL_F32, nz);
  if (st == PL_OK && dx)
    st = pl_gemm(s, false, true, N, H, E, 1.0f, dz, E, Wr, E, 1.0f, dx, H, dt,
                 dt);
  if (st == PL_OK && dWr)
    st = pl_gemm(s, true, false, H, E, N, 1.0f, x, H, dz, E, 1.0f, dWr, E, dt,
                 PL_F32);
  if (st == PL_OK) st = pl_stream_sync(s);
  pl_free(dev, zf);
  pl_free(dev, dz);
  free(hw), free(hd), free(hz);
  return st;
}
