/* router.cu — CUDA twins of the router's per-token kernels
 * (backend/router_kernels.h): one warp per token.  Softmax over E with warp
 * reductions, and k rounds of a warp arg-max restricted to elements strictly
 * after the previous pick in the order (score desc, index asc) — the CPU's
 * rule, so both select alike: on the logits before the softmax without a bias,
 * on p + b after it with one. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "backend/cuda/internal_cuda.h"
#include "backend/router_kernels.h"

static __device__ __forceinline__ bool before(float sa, int ia, float sb,
                                              int ib) {
  return sa > sb || (sa == sb && ia < ib);
}

/* k rounds of warp arg-max over sc[e] (+ bias[e]); returns pick `lane` on
 * lanes < k (each lane scans only its own strided elements of sc). */
static __device__ int warp_select(const float *sc, const float *bias, int E,
                                  int k, int lane) {
  float ps = INFINITY;
  int pi = -1, mine = -1;
  for (int j = 0; j < k; j++) {
    float bs = -INFINITY;
    int bi = -1;
    for (int e = lane; e < E; e += 32) {
      const float v = sc[e] + (bias ? bias[e] : 0.f);
      if (before(ps, pi, v, e) && (bi < 0 || before(v, e, bs, bi))) {
        bs = v;
        bi = e;
      }
    }
    for (int o = 16; o; o >>= 1) {
      const float os = __shfl_xor_sync(0xffffffffu, bs, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (oi >= 0 && (bi < 0 || before(os, oi, bs, bi))) {
        bs = os;
        bi = oi;
      }
    }
    if (lane == j)
      mine = bi;
    ps = bs;
    pi = bi;
  }
  return mine;
}

static __global__ void router_topk_kernel(float *probs, const float *bias,
                                          int64_t N, int E, int k, int renorm,
                                          int32_t *idx, float *w) {
  const int lane = threadIdx.x & 31;
  const int64_t n =
      (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (n >= N)
    return;
  float *p = probs + n * E;
  int pick = bias ? -1 : warp_select(p, NULL, E, k, lane); /* on the logits */
  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32)
    mx = fmaxf(mx, p[e]);
  for (int o = 16; o; o >>= 1)
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float z = 0.f;
  for (int e = lane; e < E; e += 32) {
    const float v = expf(p[e] - mx);
    p[e] = v;
    z += v;
  }
  for (int o = 16; o; o >>= 1)
    z += __shfl_xor_sync(0xffffffffu, z, o);
  const float iz = 1.f / z;
  for (int e = lane; e < E; e += 32)
    p[e] *= iz;
  __syncwarp();
  if (bias)
    pick = warp_select(p, bias, E, k, lane); /* on p + b */
  /* weights in pick order, summed sequentially as on the CPU */
  float wsum = 0.f, mine = 0.f;
  for (int j = 0; j < k; j++) {
    const int bi = __shfl_sync(0xffffffffu, pick, j);
    const float pw = p[bi];
    wsum += pw;
    if (lane == j)
      mine = pw;
  }
  if (lane < k) {
    idx[n * k + lane] = pick;
    w[n * k + lane] = renorm ? mine / wsum : mine;
  }
}

template <typename T>
static __global__ void router_dlogits_kernel(const float *probs,
                                             const int32_t *idx, const float *w,
                                             const float *dw, int64_t N, int E,
                                             int k, int renorm, T *dl) {
  const int lane = threadIdx.x & 31;
  const int64_t n =
      (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (n >= N)
    return;
  const float *p = probs + n * E;
  const int32_t *id = idx + n * k;
  const float *wn = w + n * k, *g = dw + n * k;
  float dot = 0.f;
  for (int j = 0; j < k; j++)
    dot += wn[j] * g[j];
  for (int e = lane; e < E; e += 32) {
    float v = renorm ? 0.f : -p[e] * dot;
    for (int j = 0; j < k; j++)
      if (id[j] == e)
        v = renorm ? wn[j] * (g[j] - dot) : p[e] * (g[j] - dot);
    pl__cuda_stt(dl, n * E + e, v);
  }
}

static pl_status check(const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "router: %s: %s", what,
                        cudaGetErrorString(e));
  return PL_OK;
}

extern "C" pl_status pl__cuda_router_topk(pl_stream *s, float *probs,
                                          const float *bias, int64_t N, int E,
                                          int k, int renorm, int32_t *idx,
                                          float *w) {
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  router_topk_kernel<<<(unsigned)((N + 7) / 8), 256, 0, st>>>(
      probs, bias, N, E, k, renorm, idx, w);
  return check("topk launch");
}

extern "C" pl_status pl__cuda_router_dlogits(pl_stream *s, const float *probs,
                                             const int32_t *idx, const float *w,
                                             const float *dw, int64_t N, int E,
                                             int k, int renorm, void *dlogits,
                                             pl_dtype dt) {
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const unsigned blocks = (unsigned)((N + 7) / 8);
  if (dt == PL_BF16)
    router_dlogits_kernel<__nv_bfloat16><<<blocks, 256, 0, st>>>(
        probs, idx, w, dw, N, E, k, renorm, (__nv_bfloat16 *)dlogits);
  else
    router_dlogits_kernel<float><<<blocks, 256, 0, st>>>(
        probs, idx, w, dw, N, E, k, renorm, (float *)dlogits);
  return check("dlogits launch");
}
