/* attention_simple.cu — the SIMPLE attention kernels (causal or full mask:
 * AttnParams.full, a runtime flag), the row dots D = rowsum(dO∘O) that every
 * backward reads, and the log-sum-exp merge of partial outputs (ring
 * attention).
 *
 * SIMPLE: one warp per query row (forward, dQ) or per key row (dK, dV), the
 * head dimension split over lanes, an online softmax in fp32.  Slow and
 * obviously correct: the device reference the tests and the dev programs
 * check the fast kernels against (PL_ATTN_FWD_SIMPLE, PL_ATTN_BWD_SIMPLE). */
#include "backend/cuda/attention_common.cuh"

/* ======================================================================== */
/* SIMPLE kernels: one warp per row                                         */
/* ======================================================================== */

static __device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

/* grid (ceil(S/4), n_q, B), 128 threads: warp w handles query row 4·bx + w. */
template <int D> static __global__ void attn_fwd_simple_kernel(AttnParams p) {
  constexpr int E = D / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * 4 + warp;
  if (i >= p.S)
    return;
  const int h = blockIdx.y, b = blockIdx.z, hk = h / p.group;
  const int64_t qrow = (int64_t)p.nq * D, krow = (int64_t)p.nkv * D;
  const bf16 *qi = p.q + ((int64_t)b * p.S + i) * qrow + (int64_t)h * D;
  const bf16 *kb = p.k + (int64_t)b * p.S * krow + (int64_t)hk * D;
  const bf16 *vb = p.v + (int64_t)b * p.S * krow + (int64_t)hk * D;
  float qv[E], acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    qv[e] = __bfloat162float(qi[lane + 32 * e]);
    acc[e] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int jend = p.full ? p.S - 1 : i;
  for (int j = 0; j <= jend; ++j) {
    const bf16 *kj = kb + (int64_t)j * krow, *vj = vb + (int64_t)j * krow;
    float s = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e)
      s += qv[e] * __bfloat162float(kj[lane + 32 * e]);
    s = warp_sum(s) * p.scale;
    float mn = fmaxf(m, s);
    float a = expf(m - mn); /* m = -inf on the first key: 0 */
    float pe = expf(s - mn);
    l = l * a + pe;
#pragma unroll
    for (int e = 0; e < E; ++e)
      acc[e] = acc[e] * a + pe * __bfloat162float(vj[lane + 32 * e]);
    m = mn;
  }
  bf16 *oi = p.out + ((int64_t)b * p.S + i) * qrow + (int64_t)h * D;
  float inv = 1.f / l;
#pragma unroll
  for (int e = 0; e < E; ++e)
    oi[lane + 32 * e] = __float2bfloat16(acc[e] * inv);
  if (lane == 0)
    p.lse[((int64_t)b * p.nq + h) * p.S + i] = m + logf(l);
}

/* D[b,h,i] = Σ_d dO[b,i,h,d]·O[b,i,h,d].  grid (ceil(S/4), n_q, B), 128 thr. */
template <int D> static __global__ void attn_delta_kernel(AttnParams p) {
  constexpr int E = D / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * 4 + warp;
  if (i >= p.S)
    return;
  const int h = blockIdx.y, b = blockIdx.z;
  const int64_t off = ((int64_t)b * p.S + i) * p.nq * D + (int64_t)h * D;
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < E; ++e)
    s += __bfloat162float(p.o[off + lane + 32 * e]) *
         __bfloat162float(p.dout[off + lane + 32 * e]);
  s = warp_sum(s);
  if (lane == 0)
    p.delta[((int64_t)b * p.nq + h) * p.S + i] = s;
}

/* dQ_i = scale · Σ_{j<=i} P_ij (dP_ij − D_i) k_j, P_ij = exp(s_ij − LSE_i),
 * dP_ij = dO_i·v_j.  grid (ceil(S/4), n_q, B), 128 threads. */
template <int D>
static __global__ void attn_bwd_dq_simple_kernel(AttnParams p) {
  constexpr int E = D / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * 4 + warp;
  if (i >= p.S)
    return;
  const int h = blockIdx.y, b = blockIdx.z, hk = h / p.group;
  const int64_t qrow = (int64_t)p.nq * D, krow = (int64_t)p.nkv * D;
  const int64_t qoff = ((int64_t)b * p.S + i) * qrow + (int64_t)h * D;
  const bf16 *kb = p.k + (int64_t)b * p.S * krow + (int64_t)hk * D;
  const bf16 *vb = p.v + (int64_t)b * p.S * krow + (int64_t)hk * D;
  float qv[E], dov[E], acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    qv[e] = __bfloat162float(p.q[qoff + lane + 32 * e]);
    dov[e] = __bfloat162float(p.dout[qoff + lane + 32 * e]);
    acc[e] = 0.f;
  }
  const int64_t r = ((int64_t)b * p.nq + h) * p.S + i;
  const float lse = p.lse[r], dlt = p.delta[r];
  const int jend = p.full ? p.S - 1 : i;
  for (int j = 0; j <= jend; ++j) {
    const bf16 *kj = kb + (int64_t)j * krow, *vj = vb + (int64_t)j * krow;
    float s = 0.f, dp = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      s += qv[e] * __bfloat162float(kj[lane + 32 * e]);
      dp += dov[e] * __bfloat162float(vj[lane + 32 * e]);
    }
    s = warp_sum(s);
    dp = warp_sum(dp);
    float pr = expf(s * p.scale - lse);
    float ds = pr * (dp - dlt);
#pragma unroll
    for (int e = 0; e < E; ++e)
      acc[e] += ds * __bfloat162float(kj[lane + 32 * e]);
  }
#pragma unroll
  for (int e = 0; e < E; ++e)
    p.dq[qoff + lane + 32 * e] = __float2bfloat16(acc[e] * p.scale);
}

/* dV_j = Σ_h Σ_{i>=j} P_ij dO_i ;  dK_j = scale · Σ_h Σ_{i>=j} dS_ij q_i over
 * the query heads h of kv head hk.  grid (ceil(S/4), n_kv, B), 128 threads. */
template <int D>
static __global__ void attn_bwd_dkdv_simple_kernel(AttnParams p) {
  constexpr int E = D / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int j = blockIdx.x * 4 + warp;
  if (j >= p.S)
    return;
  const int hk = blockIdx.y, b = blockIdx.z;
  const int64_t qrow = (int64_t)p.nq * D, krow = (int64_t)p.nkv * D;
  const int64_t koff = ((int64_t)b * p.S + j) * krow + (int64_t)hk * D;
  float kv[E], vv[E], dk[E], dv[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    kv[e] = __bfloat162float(p.k[koff + lane + 32 * e]);
    vv[e] = __bfloat162float(p.v[koff + lane + 32 * e]);
    dk[e] = 0.f;
    dv[e] = 0.f;
  }
  for (int hh = 0; hh < p.group; ++hh) {
    const int h = hk * p.group + hh;
    for (int i = p.full ? 0 : j; i < p.S; ++i) {
      const int64_t qoff = ((int64_t)b * p.S + i) * qrow + (int64_t)h * D;
      float s = 0.f, dp = 0.f, qv[E], dov[E];
#pragma unroll
      for (int e = 0; e < E; ++e) {
        qv[e] = __bfloat162float(p.q[qoff + lane + 32 * e]);
        dov[e] = __bfloat162float(p.dout[qoff + lane + 32 * e]);
        s += qv[e] * kv[e];
        dp += dov[e] * vv[e];
      }
      s = warp_sum(s);
      dp = warp_sum(dp);
      const int64_t r = ((int64_t)b * p.nq + h) * p.S + i;
      float pr = expf(s * p.scale - p.lse[r]);
      float ds = pr * (dp - p.delta[r]);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        dv[e] += pr * dov[e];
        dk[e] += ds * qv[e];
      }
    }
  }
#pragma unroll
  for (int e = 0; e < E; ++e) {
    p.dk[koff + lane + 32 * e] = __float2bfloat16(dk[e] * p.scale);
    p.dv[koff + lane + 32 * e] = __float2bfloat16(dv[e]);
  }
}

/* o_acc, lse_acc merged with o_blk, lse_blk (backend/attention_kernels.h):
 * one warp per (row, head), lanes over the head dimension. */
static __device__ __forceinline__ float to_f32(bf16 x) {
  return __bfloat162float(x);
}
static __device__ __forceinline__ float to_f32(float x) {
  return x;
}

template <typename T>
static __global__ void attn_merge_kernel(float *o_acc, float *lse_acc,
                                         const T *o_blk, const float *lse_blk,
                                         int64_t rows, int nq, int d) {
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= rows * nq)
    return;
  const int64_t r = w / nq;
  const int h = (int)(w % nq);
  const float la = lse_acc[(int64_t)h * rows + r],
              lb = lse_blk[(int64_t)h * rows + r];
  const float m = fmaxf(la, lb);
  if (m == -INFINITY)
    return;
  const float ea = expf(la - m), eb = expf(lb - m), z = ea + eb;
  const float wa = ea / z, wb = eb / z;
  float *oa = o_acc + w * d;
  const T *ob = o_blk + w * d;
  for (int c = lane; c < d; c += 32)
    oa[c] = oa[c] * wa + to_f32(ob[c]) * wb;
  if (lane == 0)
    lse_acc[(int64_t)h * rows + r] = m + logf(z);
}

extern "C" pl_status pl__cuda_attn_merge(pl_stream *s, float *o_acc,
                                         float *lse_acc, const void *o_blk,
                                         const float *lse_blk, int64_t rows,
                                         int n_q, int d, pl_dtype dt) {
  if (dt != PL_F32 && dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "attention merge: dtype %s: f32 or bf16",
                        pl_dtype_name(dt));
  const int64_t warps = rows * n_q;
  if (warps == 0)
    return PL_OK;
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const unsigned grid = (unsigned)((warps * 32 + 255) / 256);
  if (dt == PL_BF16)
    attn_merge_kernel<bf16><<<grid, 256, 0, st>>>(
        o_acc, lse_acc, (const bf16 *)o_blk, lse_blk, rows, n_q, d);
  else
    attn_merge_kernel<float><<<grid, 256, 0, st>>>(
        o_acc, lse_acc, (const float *)o_blk, lse_blk, rows, n_q, d);
  return pl__attn_launched("merge launch");
}

/* ======================================================================== */
/* launch                                                                   */
/* ======================================================================== */

template <int D>
static pl_status simple_fwd(cudaStream_t st, const AttnParams &p, unsigned B) {
  dim3 grid((unsigned)((p.S + 3) / 4), (unsigned)p.nq, B);
  attn_fwd_simple_kernel<D><<<grid, 128, 0, st>>>(p);
  return pl__attn_launched("fwd simple launch");
}

template <int D>
static pl_status delta(cudaStream_t st, const AttnParams &p, unsigned B) {
  dim3 rows((unsigned)((p.S + 3) / 4), (unsigned)p.nq, B);
  attn_delta_kernel<D><<<rows, 128, 0, st>>>(p);
  return pl__attn_launched("bwd delta launch");
}

template <int D>
static pl_status simple_bwd(cudaStream_t st, const AttnParams &p, unsigned B) {
  dim3 rows((unsigned)((p.S + 3) / 4), (unsigned)p.nq, B);
  attn_bwd_dq_simple_kernel<D><<<rows, 128, 0, st>>>(p);
  PL_TRY(pl__attn_launched("bwd dq simple launch"));
  dim3 krows((unsigned)((p.S + 3) / 4), (unsigned)p.nkv, B);
  attn_bwd_dkdv_simple_kernel<D><<<krows, 128, 0, st>>>(p);
  return pl__attn_launched("bwd dkdv simple launch");
}

pl_status pl__attn_simple_fwd(cudaStream_t st, const AttnParams &p, int d,
                              unsigned B) {
  return d == 64 ? simple_fwd<64>(st, p, B) : simple_fwd<128>(st, p, B);
}
pl_status pl__attn_delta(cudaStream_t st, const AttnParams &p, int d,
                         unsigned B) {
  return d == 64 ? delta<64>(st, p, B) : delta<128>(st, p, B);
}
pl_status pl__attn_simple_bwd(cudaStream_t st, const AttnParams &p, int d,
                              unsigned B) {
  return d == 64 ? simple_bwd<64>(st, p, B) : simple_bwd<128>(st, p, B);
}
