/* ce.cu — CUDA twins of the vocabulary loss-head kernels (backend/ce_kernels.h;
 * CPU reference in backend/cpu/ce_cpu.c, same signatures).
 *
 * Strip kernels run one block per row (grid-stride over rows), threads over
 * the strip's columns, and read the strip once: the fold keeps a per-thread
 * online (max, sum) pair — Eq. 3 within the thread — and merges the pairs in
 * the block; the residual turns each logit into g·(e^(y−lse) − onehot) as it
 * streams through, stored f32 (in place) or bf16.  The rows kernel of the
 * three-GEMM head reads a full row of f32 or bf16 logits in 16-byte vectors
 * twice: once for the online (max, sum), once to write the residual in place,
 * scaled by the row's gradient factor.  The per-token kernels
 * (merge, finish, rowgrad, lossout) are element-wise; finish and gather reduce
 * Σ nll and the count in one block, in a fixed order, so the statistics are
 * deterministic.  Launchers take the stream and check the launch. */
#include <math.h>

#include "backend/ce_kernels.h"
#include "backend/cuda/internal_cuda.h"
#include "plateau/host_device.h"

#define CE_THREADS 256
#define CE_ROWS_MAX 65535u

/* ---- device helpers -------------------------------------------------------
 */

/* Merge two online-LSE pairs (m, s): the pair of the union. */
__device__ __forceinline__ void lse_combine(float &m, float &s, float m2,
                                            float s2) {
  if (m2 == -INFINITY)
    return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  float M = fmaxf(m, m2);
  s = s * expf(m - M) + s2 * expf(m2 - M);
  m = M;
}

/* Block-wide merge of (m, s); the result is valid in thread 0. */
__device__ __forceinline__ void block_lse(float &m, float &s) {
  __shared__ float sm[32], ss[32]; /* one per warp, up to 1024 threads */
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_down_sync(0xffffffffu, m, o);
    float s2 = __shfl_down_sync(0xffffffffu, s, o);
    lse_combine(m, s, m2, s2);
  }
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (lane == 0)
    sm[wid] = m, ss[wid] = s;
  __syncthreads();
  if (wid == 0) {
    m = lane < (int)(blockDim.x >> 5) ? sm[lane] : -INFINITY;
    s = lane < (int)(blockDim.x >> 5) ? ss[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
      float m2 = __shfl_down_sync(0xffffffffu, m, o);
      float s2 = __shfl_down_sync(0xffffffffu, s, o);
      lse_combine(m, s, m2, s2);
    }
  }
  __syncthreads();
}

/* Block-wide sum (double accumulators for the statistics); valid in thread 0.
 */
template <typename T> __device__ __forceinline__ T block_sum(T v) {
  __shared__ T sh[1024 / 32];
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (lane == 0)
    sh[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = lane < (int)(blockDim.x >> 5) ? sh[lane] : (T)0;
    for (int o = 16; o > 0; o >>= 1)
      v += __shfl_down_sync(0xffffffffu, v, o);
  }
  __syncthreads();
  return v;
}

/* stats[0], stats[1] = the block's sums of sum and cnt (the loss total and
 * the count of target rows) */
static __device__ __forceinline__ void block_stats(double sum, double cnt,
                                                   float *stats) {
  sum = block_sum(sum);
  cnt = block_sum(cnt);
  if (threadIdx.x == 0) {
    stats[0] = (float)sum;
    stats[1] = (float)cnt;
  }
}

/* ---- kernels ----------------------------------------------------------------
 */

static __global__ void ce_fold_kernel(const float *y, int64_t ldy, int64_t n,
                                      int64_t vb, int64_t col0,
                                      const int32_t *t, float *st) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const float *row = y + i * ldy;
    int64_t tc = (int64_t)t[i] - col0;
    float m = -INFINITY, s = 0.0f;
    for (int64_t c = threadIdx.x; c < vb; c += blockDim.x) {
      float v = row[c];
      if (v > m) {
        s = (m == -INFINITY ? 0.0f : s * expf(m - v)) + 1.0f;
        m = v;
      } else {
        s += expf(v - m);
      }
      if (c == tc)
        st[2 * n + i] = v;
    }
    block_lse(m, s);
    if (threadIdx.x == 0) {
      float mo = st[i], zo = st[n + i];
      lse_combine(mo, zo, m, s);
      st[i] = mo;
      st[n + i] = zo;
    }
  }
}

static __global__ void ce_count_kernel(int64_t n, const int32_t *t,
                                       int32_t ignore, float *stats) {
  double c = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    c += t[i] != ignore;
  c = block_sum(c);
  if (threadIdx.x == 0) {
    stats[0] = 0.0f;
    stats[1] = (float)c;
  }
}

static __global__ void ce_merge_kernel(int64_t n, float *st, const float *o) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float m = st[i], z = st[n + i];
    lse_combine(m, z, o[i], o[n + i]);
    st[i] = m;
    st[n + i] = z;
    st[2 * n + i] += o[2 * n + i];
  }
}

/* One block: rows in a fixed grid-stride order, then a fixed tree. */
static __global__ void ce_finish_kernel(int64_t n, const float *st,
                                        const int32_t *t, int32_t ignore,
                                        float *nll, float *lse, float *stats) {
  double sum = 0.0, cnt = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float l = st[i] + logf(st[n + i]);
    lse[i] = l;
    float v = 0.0f;
    if (t[i] != ignore) {
      v = l - st[2 * n + i];
      sum += v;
      cnt += 1.0;
    }
    if (nll)
      nll[i] = v;
  }
  block_stats(sum, cnt, stats);
}

static __global__ void ce_rowgrad_kernel(int64_t n, const int32_t *t,
                                         int32_t ignore, int red,
                                         const float *stats, const float *dloss,
                                         float *g) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v;
    if (t[i] == ignore)
      v = 0.0f;
    else if (red == PL_CE_MEAN)
      v = 1.0f / stats[1];
    else if (red == PL_CE_SUM)
      v = 1.0f;
    else
      v = dloss ? dloss[i] : 1.0f;
    g[i] = v;
  }
}

static __global__ void ce_lossout_kernel(int red, const float *stats,
                                         float *loss) {
  loss[0] = red == PL_CE_MEAN ? stats[0] / stats[1] : stats[0];
}

template <typename D>
static __global__ void ce_residual_kernel(const float *y, int64_t ldy,
                                          int64_t n, int64_t vb, int64_t col0,
                                          const int32_t *t, const float *lse,
                                          const float *g, D *dy, int64_t lddy) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const float *row = y + i * ldy;
    D *o = dy + i * lddy;
    float l = lse[i], gi = g[i];
    int64_t tc = (int64_t)t[i] - col0;
    for (int64_t c = threadIdx.x; c < vb; c += blockDim.x) {
      float v = gi * (expf(row[c] - l) - (c == tc ? 1.0f : 0.0f));
      if constexpr (sizeof(D) == 4)
        o[c] = v;
      else
        o[c] = pl_f32_to_bf16(v);
    }
  }
}

/* Element loads and stores of a logit row as f32. */
__device__ __forceinline__ float ld_logit(const float *p, int64_t c) {
  return p[c];
}
__device__ __forceinline__ float ld_logit(const uint16_t *p, int64_t c) {
  return pl_bf16_to_f32(p[c]);
}
__device__ __forceinline__ void st_logit(float *p, int64_t c, float v) {
  p[c] = v;
}
__device__ __forceinline__ void st_logit(uint16_t *p, int64_t c, float v) {
  p[c] = pl_f32_to_bf16(v);
}

/* Online (max, sum) of one thread over elements of 16-byte vectors. */
__device__ __forceinline__ void lse_add(float &m, float &s, float v) {
  if (v > m) {
    s = (m == -INFINITY ? 0.0f : s * expf(m - v)) + 1.0f;
    m = v;
  } else {
    s += expf(v - m);
  }
}

/* One block per row (grid-stride): pass 1 the row's online (max, sum), pass 2
 * the residual in place, both reading 16-byte vectors (VEC elements) when the
 * row is 16-byte aligned, else one element per thread per step. */
template <typename Y>
static __global__ void
ce_rows_kernel(Y *y, int64_t ldy, int64_t n, int64_t v, const int32_t *t,
               int32_t ignore, const float *g, float *nll, float *lse_out) {
  constexpr int VEC = 16 / sizeof(Y);
  __shared__ float lse_sh;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    Y *row = y + i * ldy;
    const bool vec = ((uintptr_t)row % 16) == 0;
    const int64_t nv = vec ? v / VEC : 0; /* whole vectors */
    float m = -INFINITY, s = 0.0f;
    for (int64_t q = threadIdx.x; q < nv; q += blockDim.x) {
      uint4 u = reinterpret_cast<const uint4 *>(row)[q];
      const Y *e = reinterpret_cast<const Y *>(&u);
#pragma unroll
      for (int k = 0; k < VEC; k++)
        lse_add(m, s, ld_logit(e, k));
    }
    for (int64_t c = nv * VEC + threadIdx.x; c < v; c += blockDim.x)
      lse_add(m, s, ld_logit(row, c));
    block_lse(m, s);
    if (threadIdx.x == 0) {
      float l = m + logf(s);
      int ign = t[i] == ignore;
      nll[i] = ign ? 0.0f : l - ld_logit(row, (int64_t)t[i]);
      if (lse_out)
        lse_out[i] = l;
      lse_sh = l;
    }
    __syncthreads();
    const float l = lse_sh;
    if (g) {
      const float gi = g[i];
      const int64_t tc = t[i] == ignore ? -1 : (int64_t)t[i];
      for (int64_t q = threadIdx.x; q < nv; q += blockDim.x) {
        uint4 u = reinterpret_cast<const uint4 *>(row)[q];
        Y *e = reinterpret_cast<Y *>(&u);
#pragma unroll
        for (int k = 0; k < VEC; k++) {
          int64_t c = q * VEC + k;
          st_logit(e, k,
                   gi * (expf(ld_logit(e, k) - l) - (c == tc ? 1.0f : 0.0f)));
        }
        reinterpret_cast<uint4 *>(row)[q] = u;
      }
      for (int64_t c = nv * VEC + threadIdx.x; c < v; c += blockDim.x)
        st_logit(row, c,
                 gi * (expf(ld_logit(row, c) - l) - (c == tc ? 1.0f : 0.0f)));
    }
    __syncthreads(); /* lse_sh is rewritten by the next row */
  }
}

/* One block, a fixed order: Σ nll and the count of the target rows. */
static __global__ void ce_stats_kernel(int64_t n, const float *nll,
                                       const int32_t *t, int32_t ignore,
                                       float *stats) {
  double sum = 0.0, cnt = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    if (t[i] != ignore) {
      sum += nll[i];
      cnt += 1.0;
    }
  block_stats(sum, cnt, stats);
}

static __global__ void ce_logsoftmax_kernel(const float *y, float *logp,
                                            int64_t n, int64_t v) {
  __shared__ float lse_sh;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const float *row = y + i * v;
    float m = -INFINITY, s = 0.0f;
    for (int64_t c = threadIdx.x; c < v; c += blockDim.x) {
      float x = row[c];
      if (x > m) {
        s = (m == -INFINITY ? 0.0f : s * expf(m - x)) + 1.0f;
        m = x;
      } else {
        s += expf(x - m);
      }
    }
    block_lse(m, s);
    if (threadIdx.x == 0)
      lse_sh = m + logf(s);
    __syncthreads();
    float l = lse_sh;
    for (int64_t c = threadIdx.x; c < v; c += blockDim.x)
      logp[i * v + c] = row[c] - l;
    __syncthreads();
  }
}

static __global__ void ce_nllgrad_kernel(int64_t n, int64_t v, const int32_t *t,
                                         const float *g, float *gl) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    int32_t ti = t[i];
    for (int64_t c = threadIdx.x; c < v; c += blockDim.x)
      gl[i * v + c] = c == ti ? -g[i] : 0.0f;
  }
}

static __global__ void ce_logsoftmax_bwd_kernel(const float *gl,
                                                const float *lp, float *out,
                                                int64_t n, int64_t v) {
  __shared__ float sum_sh;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < v; c += blockDim.x)
      s += gl[i * v + c];
    s = block_sum(s);
    if (threadIdx.x == 0)
      sum_sh = s;
    __syncthreads();
    float sf = sum_sh;
    for (int64_t c = threadIdx.x; c < v; c += blockDim.x)
      out[i * v + c] = gl[i * v + c] - expf(lp[i * v + c]) * sf;
    __syncthreads();
  }
}

static __global__ void ce_gather_kernel(const float *logp, int64_t n, int64_t v,
                                        const int32_t *t, int32_t ignore,
                                        float *nll, float *stats) {
  double sum = 0.0, cnt = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float val = 0.0f;
    if (t[i] != ignore && t[i] >= 0 && t[i] < v) {
      val = -logp[i * v + t[i]];
      sum += val;
      cnt += 1.0;
    }
    if (nll)
      nll[i] = val;
  }
  block_stats(sum, cnt, stats);
}

/* ---- launchers
 * ---------------------------------------------------------------- */

static pl_status begin(pl_stream *s, const char *op, cudaStream_t *cs) {
  if (!s || !s->dev)
    return pl_set_error(PL_EINVAL, "%s: stream is NULL", op);
  PL_TRY(pl__cuda_use(s->dev));
  *cs = (cudaStream_t)s->native;
  return PL_OK;
}

static unsigned rows_grid(int64_t n) {
  return (unsigned)(n < (int64_t)CE_ROWS_MAX ? (n > 0 ? n : 1) : CE_ROWS_MAX);
}

static unsigned elem_grid(pl_stream *s, int64_t n) {
  size_t b = pl__cuda_blocks(s->dev, (size_t)(n > 0 ? n : 1));
  return (unsigned)(b > 0 ? b : 1);
}

extern "C" pl_status pl__cuda_ce_count(pl_stream *s, int64_t n,
                                       const int32_t *t, int32_t ignore,
                                       float *stats) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_count", &cs));
  ce_count_kernel<<<1, 1024, 0, cs>>>(n, t, ignore, stats);
  PL_CUDA_CHECK_LAUNCH("ce_count_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_fold(pl_stream *s, const float *y, int64_t ldy,
                                      int64_t n, int64_t vb, int64_t col0,
                                      const int32_t *t, float *st) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_fold", &cs));
  if (n == 0 || vb == 0)
    return PL_OK;
  ce_fold_kernel<<<rows_grid(n), CE_THREADS, 0, cs>>>(y, ldy, n, vb, col0, t,
                                                      st);
  PL_CUDA_CHECK_LAUNCH("ce_fold_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_merge(pl_stream *s, int64_t n, float *st,
                                       const float *other) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_merge", &cs));
  if (n == 0)
    return PL_OK;
  ce_merge_kernel<<<elem_grid(s, n), PL_CUDA_THREADS, 0, cs>>>(n, st, other);
  PL_CUDA_CHECK_LAUNCH("ce_merge_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_finish(pl_stream *s, int64_t n,
                                        const float *st, const int32_t *t,
                                        int32_t ignore, float *nll, float *lse,
                                        float *stats) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_finish", &cs));
  ce_finish_kernel<<<1, 1024, 0, cs>>>(n, st, t, ignore, nll, lse, stats);
  PL_CUDA_CHECK_LAUNCH("ce_finish_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_rowgrad(pl_stream *s, int64_t n,
                                         const int32_t *t, int32_t ignore,
                                         int red, const float *stats,
                                         const float *dloss, float *g) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_rowgrad", &cs));
  if (n == 0)
    return PL_OK;
  ce_rowgrad_kernel<<<elem_grid(s, n), PL_CUDA_THREADS, 0, cs>>>(
      n, t, ignore, red, stats, dloss, g);
  PL_CUDA_CHECK_LAUNCH("ce_rowgrad_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_lossout(pl_stream *s, int red,
                                         const float *stats, float *loss) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_lossout", &cs));
  ce_lossout_kernel<<<1, 1, 0, cs>>>(red, stats, loss);
  PL_CUDA_CHECK_LAUNCH("ce_lossout_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_residual(pl_stream *s, const float *y,
                                          int64_t ldy, int64_t n, int64_t vb,
                                          int64_t col0, const int32_t *t,
                                          const float *lse, const float *g,
                                          void *dy, pl_dtype dy_dt,
                                          int64_t lddy) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_residual", &cs));
  if (n == 0 || vb == 0)
    return PL_OK;
  if (dy_dt == PL_F32)
    ce_residual_kernel<float><<<rows_grid(n), CE_THREADS, 0, cs>>>(
        y, ldy, n, vb, col0, t, lse, g, (float *)dy, lddy);
  else if (dy_dt == PL_BF16)
    ce_residual_kernel<uint16_t><<<rows_grid(n), CE_THREADS, 0, cs>>>(
        y, ldy, n, vb, col0, t, lse, g, (uint16_t *)dy, lddy);
  else
    return pl_set_error(PL_EINVAL, "ce_residual: dtype %d: must be f32 or bf16",
                        (int)dy_dt);
  PL_CUDA_CHECK_LAUNCH("ce_residual_kernel");
  return PL_OK;
}

#define CE_ROWS_THREADS 512

extern "C" pl_status pl__cuda_ce_rows(pl_stream *s, void *y, pl_dtype ydt,
                                      int64_t ldy, int64_t n, int64_t v,
                                      const int32_t *t, int32_t ignore,
                                      const float *g, float *nll,
                                      float *lse_out) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_rows", &cs));
  if (n == 0 || v == 0)
    return PL_OK;
  if (ydt == PL_F32)
    ce_rows_kernel<float><<<rows_grid(n), CE_ROWS_THREADS, 0, cs>>>(
        (float *)y, ldy, n, v, t, ignore, g, nll, lse_out);
  else if (ydt == PL_BF16)
    ce_rows_kernel<uint16_t><<<rows_grid(n), CE_ROWS_THREADS, 0, cs>>>(
        (uint16_t *)y, ldy, n, v, t, ignore, g, nll, lse_out);
  else
    return pl_set_error(PL_EINVAL, "ce_rows: dtype %d: must be f32 or bf16",
                        (int)ydt);
  PL_CUDA_CHECK_LAUNCH("ce_rows_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_stats(pl_stream *s, int64_t n,
                                       const float *nll, const int32_t *t,
                                       int32_t ignore, float *stats) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_stats", &cs));
  ce_stats_kernel<<<1, 1024, 0, cs>>>(n, nll, t, ignore, stats);
  PL_CUDA_CHECK_LAUNCH("ce_stats_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_logsoftmax(pl_stream *s, const float *y,
                                            float *logp, int64_t n, int64_t v) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_logsoftmax", &cs));
  if (n == 0 || v == 0)
    return PL_OK;
  ce_logsoftmax_kernel<<<rows_grid(n), CE_THREADS, 0, cs>>>(y, logp, n, v);
  PL_CUDA_CHECK_LAUNCH("ce_logsoftmax_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_nllgrad(pl_stream *s, int64_t n, int64_t v,
                                         const int32_t *t, const float *g,
                                         float *grad_logp) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_nllgrad", &cs));
  if (n == 0 || v == 0)
    return PL_OK;
  ce_nllgrad_kernel<<<rows_grid(n), CE_THREADS, 0, cs>>>(n, v, t, g, grad_logp);
  PL_CUDA_CHECK_LAUNCH("ce_nllgrad_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_logsoftmax_bwd(pl_stream *s,
                                                const float *grad_logp,
                                                const float *logp, float *grad,
                                                int64_t n, int64_t v) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_logsoftmax_bwd", &cs));
  if (n == 0 || v == 0)
    return PL_OK;
  ce_logsoftmax_bwd_kernel<<<rows_grid(n), CE_THREADS, 0, cs>>>(grad_logp, logp,
                                                                grad, n, v);
  PL_CUDA_CHECK_LAUNCH("ce_logsoftmax_bwd_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_ce_gather(pl_stream *s, const float *logp,
                                        int64_t n, int64_t v, const int32_t *t,
                                        int32_t ignore, float *nll,
                                        float *stats) {
  cudaStream_t cs;
  PL_TRY(begin(s, "ce_gather", &cs));
  ce_gather_kernel<<<1, 1024, 0, cs>>>(logp, n, v, t, ignore, nll, stats);
  PL_CUDA_CHECK_LAUNCH("ce_gather_kernel");
  return PL_OK;
}
