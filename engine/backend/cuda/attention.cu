/* attention.cu — causal grouped-query flash attention on sm_90, forward and
 * backward, bf16 in / fp32 accumulate (CUDA twin of backend/cpu/attention_cpu.c).
 *
 * Layouts (model/attention.h): Q, O, dO, dQ [B, S, n_q, d]; K, V, dK, dV
 * [B, S, n_kv, d]; LSE and the row dots D = rowsum(dO∘O) [B, n_q, S] f32.
 * Query head h reads kv head h / (n_q / n_kv).
 *
 * Versions:
 *  - SIMPLE: one warp per query row (forward, dQ) or per key row (dK, dV), the
 *    head dimension split over lanes, an online softmax in fp32.  Slow and
 *    obviously correct: the device tests compare the fast kernels against it.
 *  - MMA: FlashAttention-2 tiling on tensor cores (mma.sync m16n8k16 bf16 ->
 *    f32, operands from shared memory through ldmatrix, tiles loaded with
 *    cp.async, double-buffered).  Forward: a block of NW warps owns BM = 32·NW
 *    query rows (two 16-row m-tiles per warp) and walks the key blocks of BN
 *    keys up to the diagonal with an online softmax in registers, saving LSE.
 *    Backward: a block owns BN = 16·NW keys of one kv head (each warp 16 keys)
 *    and walks, for every query head of its group, the query blocks at or past
 *    the diagonal: S^T = K Q^T, P^T = exp(S^T·scale − LSE), dP^T = V dO^T,
 *    dS^T = P^T∘(dP^T − D); dV += P^T dO and dK += dS^T Q stay in registers
 *    (so GQA needs no atomics for dK/dV); dQ += dS K goes through shared
 *    memory and fp32 atomics into a workspace, converted to bf16 (×scale) at
 *    the end.
 *  - WGMMA (forward, d = 128, sm_90a builds only): Hopper warpgroup MMA from
 *    swizzled shared memory; see its section.  PL_ATTN_AUTO runs it for
 *    d = 128 when the device code has sm_90a (the default build), the MMA
 *    kernel otherwise (validated on the H200 against the SIMPLE kernel:
 *    same errors as MMA; 437-458 TFLOP/s at 64Ki against MMA's 296).  Its V
 *    operand path is chosen by PLATEAU_ATTN_WGMMA_V (read by the launcher):
 *    ovtma (default), transpose (V transposed in shared memory each step,
 *    K-major B), mn (V read as an MN-major B, trans-b = 1, no transposition),
 *    mn128 (mn with 128 keys per step), pipe (mn with the softmax
 *    overlapping the tensor cores, FlashAttention-3 style) or mn128pp
 *    (mn128 with warpgroup 1's QK^T issued after warpgroup 0's, so that one
 *    softmax runs beside the other's QK^T; measured within ±1% of mn128) or
 *    mn128tma (mn128 with the K and V tiles loaded by TMA from thread 0
 *    onto an mbarrier per buffer instead of 16 cp.async per thread per
 *    step: 186 registers against 206; 519-565 TFLOP/s against mn128's
 *    440-452 at 16Ki-128Ki, same lease) or ovtma (K one step ahead of V, so
 *    that each warpgroup's softmax of S_{j+1} runs beside its own PV_j,
 *    FlashAttention-3's intra-warpgroup overlap, with mn128tma's TMA loads;
 *    192 registers; 536-572 against mn128tma's 528-568, +0.2-2.1% in each
 *    of two alternations in one lease: results/reference/h200/2026-11-30-s6-ab).
 *    (The cp.async version of ovtma, "ov", was 2-3% slower than mn128
 *    (439-447 against 452-459, results/reference/h200/2026-11-30-s5-ab) and
 *    was removed; so was "mn128mb", mn128tma with the per-step block
 *    barrier replaced by empty mbarriers, equal to mn128tma.)
 *  - WGMMA backward (d = 128, sm_90a builds; AUTO runs it there): validated
 *    on the H200 against the SIMPLE kernel on every shape of
 *    test_attention_cuda, and with the decoder-layer and Ulysses tests.
 *    Three variants (PLATEAU_ATTN_WGMMA_BWD): bulk (default), one kernel by
 *    key blocks adding each step's dQ tile into a tiled fp32 workspace by
 *    bulk (TMA) reductions; fused, the same with fp32 atomics into a row
 *    workspace; split, a dK/dV kernel by key blocks and a dQ kernel by
 *    query blocks, each recomputing P (no atomics: bit-reproducible).  Also
 *    switchable: the dK/dV kernel's barriers per step
 *    (PLATEAU_ATTN_WGMMA_SYNC = tma (default) | one | two) and its step order
 *    (PLATEAU_ATTN_BWD_WALK = desc (default) | asc).  See its section.
 *
 * Numerics shared by all: scores in fp32, softmax via exp2 with scale·log2e
 * folded in, P rounded to bf16 before P·V (MMA, WGMMA; SIMPLE keeps fp32),
 * the row sum of P in fp32.  Masked keys are −inf; key blocks past the
 * diagonal are never visited. */
#include <cuda.h> /* CUtensorMap (the driver entry point comes through the runtime) */
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "model/attention.h"

typedef __nv_bfloat16 bf16;

#define LOG2E_F 1.4426950408889634f

struct AttnParams {
  const bf16 *q, *k, *v, *o, *dout;
  bf16 *out, *dq, *dk, *dv;
  float *lse;        /* fwd: written; bwd: read                 */
  float *dqacc;      /* bwd: fp32 dQ accumulator [B, S, n_q, d] */
  float *delta;      /* bwd: D [B, n_q, S]                      */
  int S, nq, nkv, group;
  int walk;          /* bwd: BwdWalk order (BWD_WALK_*)          */
  float scale, scale_log2;
};

/* ======================================================================== */
/* PTX helpers                                                              */
/* ======================================================================== */

static __device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16-byte async copy global -> shared; src_bytes = 0 zero-fills the chunk. */
static __device__ __forceinline__ void cp_async16(void *dst, const void *src,
                                                  int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(src_bytes));
}
static __device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
static __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

static __device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4],
                                               const bf16 *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smem_u32(p)));
}
static __device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4],
                                                 const bf16 *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smem_u32(p)));
}

/* c[16x8] += a[16x16] · b[16x8]; fragment layouts of PTX mma.m16n8k16:
 * g = lane/4, t = lane%4;  a0:(g, 2t..2t+1) a1:(g+8, 2t) a2:(g, 2t+8)
 * a3:(g+8, 2t+8);  b0:(k=2t..2t+1, n=g) b1:(k=2t+8, n=g);
 * c0,c1:(g, 2t..2t+1) c2,c3:(g+8, 2t..2t+1). */
static __device__ __forceinline__ void mma_bf16(float (&c)[4],
                                                const uint32_t (&a)[4],
                                                uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

/* Load ROWS rows of D bf16 (global row stride `stride` elements, rows from
 * row0; rows >= S zero-filled) into shared memory with row stride LD. */
template <int ROWS, int D, int LD, int NT>
static __device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src,
                                                 int row0, int S,
                                                 int64_t stride, int tid) {
  constexpr int CPR = D / 8; /* 16-byte chunks per row */
#pragma unroll
  for (int c = tid; c < ROWS * CPR; c += NT) {
    int r = c / CPR, cc = c % CPR;
    int gr = row0 + r;
    const bf16 *g = src + (int64_t)(gr < S ? gr : S - 1) * stride + cc * 8;
    cp_async16(dst + r * LD + cc * 8, g, gr < S ? 16 : 0);
  }
}

/* ======================================================================== */
/* SIMPLE kernels: one warp per row                                         */
/* ======================================================================== */

static __device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

/* grid (ceil(S/4), n_q, B), 128 threads: warp w handles query row 4·bx + w. */
template <int D>
static __global__ void attn_fwd_simple_kernel(AttnParams p) {
  constexpr int E = D / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * 4 + warp;
  if (i >= p.S) return;
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
  for (int j = 0; j <= i; ++j) {
    const bf16 *kj = kb + (int64_t)j * krow, *vj = vb + (int64_t)j * krow;
    float s = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) s += qv[e] * __bfloat162float(kj[lane + 32 * e]);
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
  for (int e = 0; e < E; ++e) oi[lane + 32 * e] = __float2bfloat16(acc[e] * inv);
  if (lane == 0) p.lse[((int64_t)b * p.nq + h) * p.S + i] = m + logf(l);
}

/* D[b,h,i] = Σ_d dO[b,i,h,d]·O[b,i,h,d].  grid (ceil(S/4), n_q, B), 128 thr. */
template <int D>
static __global__ void attn_delta_kernel(AttnParams p) {
  constexpr int E = D / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * 4 + warp;
  if (i >= p.S) return;
  const int h = blockIdx.y, b = blockIdx.z;
  const int64_t off = ((int64_t)b * p.S + i) * p.nq * D + (int64_t)h * D;
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < E; ++e)
    s += __bfloat162float(p.o[off + lane + 32 * e]) *
         __bfloat162float(p.dout[off + lane + 32 * e]);
  s = warp_sum(s);
  if (lane == 0) p.delta[((int64_t)b * p.nq + h) * p.S + i] = s;
}

/* dQ_i = scale · Σ_{j<=i} P_ij (dP_ij − D_i) k_j, P_ij = exp(s_ij − LSE_i),
 * dP_ij = dO_i·v_j.  grid (ceil(S/4), n_q, B), 128 threads. */
template <int D>
static __global__ void attn_bwd_dq_simple_kernel(AttnParams p) {
  constexpr int E = D / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * 4 + warp;
  if (i >= p.S) return;
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
  for (int j = 0; j <= i; ++j) {
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
    for (int e = 0; e < E; ++e) acc[e] += ds * __bfloat162float(kj[lane + 32 * e]);
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
  if (j >= p.S) return;
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
    for (int i = j; i < p.S; ++i) {
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

/* dQ = bf16(scale · dQacc), n elements. */
static __global__ void attn_dq_convert_kernel(const float *acc, bf16 *dq,
                                              int64_t n, float scale) {
  int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
    float4 a = *reinterpret_cast<const float4 *>(acc + i);
    __nv_bfloat162 lo = __floats2bfloat162_rn(a.x * scale, a.y * scale);
    __nv_bfloat162 hi = __floats2bfloat162_rn(a.z * scale, a.w * scale);
    *reinterpret_cast<__nv_bfloat162 *>(dq + i) = lo;
    *reinterpret_cast<__nv_bfloat162 *>(dq + i + 2) = hi;
  } else {
    for (; i < n; ++i) dq[i] = __float2bfloat16(acc[i] * scale);
  }
}

/* dQ = bf16(scale · dQacc) from the tiled dQacc of the BULK wgmma backward
 * (d = 128): [B][n_q][ceil(S/64)] tiles of 64 rows × 128 in the order
 * attn_bwd_dkdv_wgmma_kernel<WGB_DQ_BULK, ·> stages them: float4 1024·wg +
 * 128·j + T' holds the accumulator elements 4j..4j+3 of thread 128·wg + T',
 * i.e. rows r, r + 8 (r = 16·wq + g) at columns c, c + 1 (c = 64·wg + 8j +
 * 2t), T' = 32·wq + 4·g + t.  One thread per float4; ntiles =
 * B·n_q·ceil(S/64). */
static __global__ void attn_dq_convert_tiled_kernel(const float *acc, bf16 *dq, int S, int nq,
                                                    int64_t ntiles, float scale) {
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= ntiles * 2048) return;
  const int64_t tile = idx >> 11;
  const int w = (int)(idx & 2047), wg = w >> 10, j = (w >> 7) & 7, T = w & 127;
  const int nqt = (S + 63) / 64;
  const int qt = (int)(tile % nqt);
  const int64_t bh = tile / nqt;
  const int h = (int)(bh % nq), b = (int)(bh / nq);
  const int wq = T >> 5, g = (T >> 2) & 7, t = T & 3;
  const int row = qt * 64 + wq * 16 + g, col = wg * 64 + 8 * j + 2 * t;
  const float4 a = reinterpret_cast<const float4 *>(acc)[idx];
  bf16 *base = dq + (((int64_t)b * S + row) * nq + h) * 128 + col;
  if (row < S)
    *reinterpret_cast<__nv_bfloat162 *>(base) = __floats2bfloat162_rn(a.x * scale, a.y * scale);
  if (row + 8 < S)
    *reinterpret_cast<__nv_bfloat162 *>(base + (int64_t)8 * nq * 128) =
        __floats2bfloat162_rn(a.z * scale, a.w * scale);
}

/* ======================================================================== */
/* MMA forward                                                              */
/* ======================================================================== */

/* grid (ceil(S/BM), n_q, B), NW·32 threads; BM = 32·NW query rows, BN keys
 * per step (double-buffered), consumed BNS keys at a time.  Shared: Q [BM][LD], K and V [2][BN][LD] (LD = D + 8: rows 16 B
 * apart in the bank space, so ldmatrix and cp.async are conflict-free). */
template <int D, int NW, int BN, int BNS>
static __global__ void __launch_bounds__(NW * 32)
    attn_fwd_mma_kernel(AttnParams p) {
  constexpr int MT = 2;              /* 16-row m-tiles per warp */
  constexpr int BM = 16 * MT * NW;
  constexpr int LD = D + 8;
  constexpr int NT = NW * 32;
  constexpr int NN = BNS / 8;        /* n-tiles of a score sub-tile */
  constexpr int ND = D / 8;          /* n-tiles of the output     */
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16 *sQ = reinterpret_cast<bf16 *>(smem_raw);
  bf16 *sK = sQ + BM * LD;
  bf16 *sV = sK + 2 * BN * LD;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int mblk = gridDim.x - 1 - blockIdx.x; /* longest rows first */
  const int h = blockIdx.y, b = blockIdx.z, hk = h / p.group;
  const int S = p.S;
  const int q0 = mblk * BM;
  const int64_t qstride = (int64_t)p.nq * D, kstride = (int64_t)p.nkv * D;
  const bf16 *gQ = p.q + (int64_t)b * S * qstride + (int64_t)h * D;
  const bf16 *gK = p.k + (int64_t)b * S * kstride + (int64_t)hk * D;
  const bf16 *gV = p.v + (int64_t)b * S * kstride + (int64_t)hk * D;

  const int kend = min(S, q0 + BM);
  const int nkb = (kend + BN - 1) / BN;

  load_tile<BM, D, LD, NT>(sQ, gQ, q0, S, qstride, tid);
  load_tile<BN, D, LD, NT>(sK, gK, 0, S, kstride, tid);
  load_tile<BN, D, LD, NT>(sV, gV, 0, S, kstride, tid);
  cp_async_commit();

  float o[MT][ND][4];
  float mrow[MT][2], lrow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < ND; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.f;
    mrow[mt][0] = mrow[mt][1] = -INFINITY;
    lrow[mt][0] = lrow[mt][1] = 0.f;
  }
  const int wrow0 = warp * MT * 16; /* first row of this warp in the tile */

  for (int kb = 0; kb < nkb; ++kb) {
    const int buf = kb & 1;
    if (kb + 1 < nkb) {
      load_tile<BN, D, LD, NT>(sK + (buf ^ 1) * BN * LD, gK, (kb + 1) * BN, S,
                               kstride, tid);
      load_tile<BN, D, LD, NT>(sV + (buf ^ 1) * BN * LD, gV, (kb + 1) * BN, S,
                               kstride, tid);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    /* the BN-key tile is consumed in sub-tiles of BNS keys: scores for BNS
     * keys fit in registers next to the output accumulator (d = 128) */
#pragma unroll 1
    for (int sb = 0; sb < BN / BNS; ++sb) {
    const bf16 *sKb = sK + buf * BN * LD + sb * BNS * LD;
    const bf16 *sVb = sV + buf * BN * LD + sb * BNS * LD;
    const int k0 = kb * BN + sb * BNS;
    /* a warp whose rows all precede this key sub-tile has nothing to add (no
     * barrier inside, so the warp may skip alone) */
    if (k0 <= q0 + wrow0 + MT * 16 - 1) {

    /* ---- S = Q K^T (raw scores, fp32) ---- */
    float s[MT][NN][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NN; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        ldsm_x4(a[mt], sQ + (wrow0 + mt * 16 + (lane & 15)) * LD + kk * 16 +
                           (lane >> 4) * 8);
#pragma unroll
      for (int nt = 0; nt < NN; nt += 2) {
        uint32_t bb[4];
        ldsm_x4(bb, sKb + (nt * 8 + (lane >> 4) * 8 + (lane & 7)) * LD +
                        kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(s[mt][nt], a[mt], bb[0], bb[1]);
          mma_bf16(s[mt][nt + 1], a[mt], bb[2], bb[3]);
        }
      }
    }

    /* ---- causal mask on blocks that reach past the tile's first row ---- */
    if (k0 + BNS - 1 > q0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NN; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int row = q0 + wrow0 + mt * 16 + g + (e >> 1) * 8;
            int col = k0 + nt * 8 + 2 * t + (e & 1);
            if (col > row) s[mt][nt][e] = -INFINITY;
          }
    }

    /* ---- online softmax (rows g and g+8 of each m-tile; a row lives in
     *      the 4 threads of a quad) ---- */
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = mrow[mt][hf];
#pragma unroll
        for (int nt = 0; nt < NN; ++nt)
          mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hf], s[mt][nt][2 * hf + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float msc = (mx == -INFINITY) ? 0.f : mx * p.scale_log2;
        const float alpha = exp2f(mrow[mt][hf] * p.scale_log2 - msc);
        mrow[mt][hf] = mx;
        float rs = 0.f;
#pragma unroll
        for (int nt = 0; nt < NN; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float pv = exp2f(s[mt][nt][2 * hf + e] * p.scale_log2 - msc);
            s[mt][nt][2 * hf + e] = pv;
            rs += pv;
          }
        }
        lrow[mt][hf] = lrow[mt][hf] * alpha + rs; /* this thread's part */
#pragma unroll
        for (int dt = 0; dt < ND; ++dt) {
          o[mt][dt][2 * hf] *= alpha;
          o[mt][dt][2 * hf + 1] *= alpha;
        }
      }
    }

    /* ---- O += P V (P from the score registers, rounded to bf16) ---- */
#pragma unroll
    for (int kk = 0; kk < BNS / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dt = 0; dt < ND; dt += 2) {
        uint32_t bb[4];
        ldsm_x4_t(bb, sVb + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD +
                          dt * 8 + (lane >> 4) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(o[mt][dt], a[mt], bb[0], bb[1]);
          mma_bf16(o[mt][dt + 1], a[mt], bb[2], bb[3]);
        }
      }
    }
    } /* warp has rows at or past k0 */
    } /* sub-tiles */
    __syncthreads(); /* this buffer is refilled two steps on */
  }
  cp_async_wait<0>();

  /* ---- epilogue: O /= l, LSE = m·scale + ln l ---- */
  bf16 *gO = p.out + (int64_t)b * S * qstride + (int64_t)h * D;
  float *gL = p.lse + ((int64_t)b * p.nq + h) * S;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float l = lrow[mt][hf];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = 1.f / l;
      const int row = q0 + wrow0 + mt * 16 + g + hf * 8;
      if (row < S) {
        bf16 *orow = gO + (int64_t)row * qstride;
#pragma unroll
        for (int dt = 0; dt < ND; ++dt) {
          __nv_bfloat162 v2 = __floats2bfloat162_rn(o[mt][dt][2 * hf] * inv,
                                                    o[mt][dt][2 * hf + 1] * inv);
          *reinterpret_cast<__nv_bfloat162 *>(orow + dt * 8 + 2 * t) = v2;
        }
        if (t == 0) gL[row] = mrow[mt][hf] * p.scale + logf(l);
      }
    }
  }
}

/* The steps of a backward block that owns the keys from k0 of kv head hk
 * (both MMA and wgmma dK/dV kernels): for every query head of the group, the
 * query tiles of BM rows at or past the diagonal, step it at head(it),
 * first query row qs(it); niter steps in all.  Order (p.walk):
 *  - BWD_WALK_ASC: head by head, each from the diagonal tile to the last;
 *  - BWD_WALK_DESC: query tile by query tile from the last down to the
 *    diagonal, every head of the group at each: all the blocks of a wave
 *    then read the same Q, dO tiles and add into the same dQ tiles at about
 *    the same time (L2 hits), where ASC spreads them over the sequence. */
enum { BWD_WALK_ASC = 0, BWD_WALK_DESC = 1, BWD_WALK_COUNT = 2 };
template <int BM> struct BwdWalk {
  int hk, group, qb0, per_head, niter, desc;
  __device__ __forceinline__ BwdWalk(const AttnParams &p, int hk_, int k0)
      : hk(hk_), group(p.group), qb0(k0 / BM), per_head((p.S + BM - 1) / BM - k0 / BM),
        niter(((p.S + BM - 1) / BM - k0 / BM) * p.group), desc(p.walk == BWD_WALK_DESC) {}
  __device__ __forceinline__ int head(int it) const {
    return hk * group + (desc ? it % group : it / per_head);
  }
  __device__ __forceinline__ int qs(int it) const {
    return (desc ? qb0 + per_head - 1 - it / group : qb0 + it % per_head) * BM;
  }
};

/* A dK/dV block's keys and pointers (both MMA and wgmma kernels; grid
 * (ceil(S/BN), n_kv, B)): BN keys from k0 of kv head hk in batch b; q(h),
 * dout(h) the rows of query head h; store_dkdv writes a thread's two key
 * rows of dK (·scale) and dV at the end. */
template <int D> struct BwdBlock {
  int hk, b, S, k0;
  int64_t qstride, kstride;
  const bf16 *gK, *gV;
  __device__ __forceinline__ BwdBlock(const AttnParams &p, int BN)
      : hk(blockIdx.y), b(blockIdx.z), S(p.S), k0(blockIdx.x * BN), qstride((int64_t)p.nq * D),
        kstride((int64_t)p.nkv * D), gK(p.k + (int64_t)b * S * kstride + (int64_t)hk * D),
        gV(p.v + (int64_t)b * S * kstride + (int64_t)hk * D) {}
  __device__ __forceinline__ const bf16 *q(const AttnParams &p, int h) const {
    return p.q + (int64_t)b * S * qstride + (int64_t)h * D;
  }
  __device__ __forceinline__ const bf16 *dout(const AttnParams &p, int h) const {
    return p.dout + (int64_t)b * S * qstride + (int64_t)h * D;
  }
  /* keys key0 and key0 + 8: element 4jd + e of dk, dv is key key0 +
   * 8·(e>>1), head dim 8jd + 2t + (e&1) (the mma / wgmma accumulator
   * layout) */
  __device__ __forceinline__ void store_dkdv(const AttnParams &p, int key0, int t,
                                             const float *dk, const float *dv) const {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int key = key0 + 8 * hf;
      if (key < S) {
        const int64_t off = ((int64_t)b * S + key) * kstride + (int64_t)hk * D;
#pragma unroll
        for (int jd = 0; jd < D / 8; ++jd) {
          *reinterpret_cast<__nv_bfloat162 *>(p.dk + off + jd * 8 + 2 * t) = __floats2bfloat162_rn(
              dk[4 * jd + 2 * hf] * p.scale, dk[4 * jd + 2 * hf + 1] * p.scale);
          *reinterpret_cast<__nv_bfloat162 *>(p.dv + off + jd * 8 + 2 * t) =
              __floats2bfloat162_rn(dv[4 * jd + 2 * hf], dv[4 * jd + 2 * hf + 1]);
        }
      }
    }
  }
};

/* ======================================================================== */
/* MMA backward                                                             */
/* ======================================================================== */

/* grid (ceil(S/BN), n_kv, B), NW·32 threads; BN = 16·NW keys (warp w: keys
 * 16w..16w+15), BM = BN query rows per step.  Shared: K, V [BN][LD];
 * Q, dO [2][BM][LD] (dS^T [BN][BM+8] bf16 reuses the step's Q buffer);
 * LSE·log2e and D [2][BM] f32. */
template <int D, int NW>
static __global__ void __launch_bounds__(NW * 32)
    attn_bwd_mma_kernel(AttnParams p) {
  constexpr int BN = 16 * NW;
  constexpr int BM = BN;
  constexpr int LD = D + 8;
  constexpr int LDS = BM + 8;
  constexpr int NT = NW * 32;
  constexpr int NQ = BM / 8; /* n-tiles over queries */
  constexpr int ND = D / 8;  /* n-tiles over the head dim */
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16 *sK = reinterpret_cast<bf16 *>(smem_raw);
  bf16 *sV = sK + BN * LD;
  bf16 *sQ = sV + BN * LD;       /* [2][BM][LD] */
  bf16 *sdO = sQ + 2 * BM * LD;  /* [2][BM][LD] */
  /* dS^T [BN][LDS] lives in the current step's Q buffer: Q is dead once
   * dK += dS^T Q is done (a barrier separates the two), and dropping a
   * separate dS tile keeps d = 128 at two blocks per SM */
  static_assert(BN * LDS <= BM * LD, "dS^T must fit in a Q buffer");
  float *sL = reinterpret_cast<float *>(sdO + 2 * BM * LD); /* [2][BM] */
  float *sD = sL + 2 * BM;                               /* [2][BM] */

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const BwdBlock<D> blk(p, BN);
  const int hk = blk.hk, b = blk.b, S = blk.S, k0 = blk.k0;
  const int64_t qstride = blk.qstride, kstride = blk.kstride;
  const bf16 *gK = blk.gK, *gV = blk.gV;

  const BwdWalk<BM> walk(p, hk, k0);
  const int niter = walk.niter;

  /* issue the loads of step `it` into buffer `buf` */
  auto issue = [&](int it, int buf) {
    const int h = walk.head(it);
    const int qs = walk.qs(it);
    load_tile<BM, D, LD, NT>(sQ + buf * BM * LD, blk.q(p, h), qs, S, qstride, tid);
    load_tile<BM, D, LD, NT>(sdO + buf * BM * LD, blk.dout(p, h), qs, S, qstride, tid);
    const int64_t r0 = ((int64_t)b * p.nq + h) * S;
    for (int i = tid; i < BM; i += NT) {
      const int q = qs + i;
      sL[buf * BM + i] = q < S ? p.lse[r0 + q] * LOG2E_F : 0.f;
      sD[buf * BM + i] = q < S ? p.delta[r0 + q] : 0.f;
    }
  };

  load_tile<BN, D, LD, NT>(sK, gK, k0, S, kstride, tid);
  load_tile<BN, D, LD, NT>(sV, gV, k0, S, kstride, tid);
  issue(0, 0);
  cp_async_commit();

  float dk[ND][4], dv[ND][4];
#pragma unroll
  for (int dt = 0; dt < ND; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.f;

  const int wk0 = warp * 16; /* this warp's first key in the tile */

  for (int it = 0; it < niter; ++it) {
    const int buf = it & 1;
    if (it + 1 < niter) issue(it + 1, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const int h = walk.head(it);
    const int qs = walk.qs(it);
    const bf16 *cQ = sQ + buf * BM * LD, *cdO = sdO + buf * BM * LD;
    const float *cL = sL + buf * BM, *cD = sD + buf * BM;

    /* ---- S^T = K Q^T and dP^T = V dO^T (16 keys × BM queries per warp) */
    float st[NQ][4], dpt[NQ][4];
#pragma unroll
    for (int nt = 0; nt < NQ; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[nt][e] = dpt[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ak[4], av[4];
      ldsm_x4(ak, sK + (wk0 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
      ldsm_x4(av, sV + (wk0 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int nt = 0; nt < NQ; nt += 2) {
        uint32_t bq[4], bo[4];
        const int off = (nt * 8 + (lane >> 4) * 8 + (lane & 7)) * LD + kk * 16 +
                        ((lane >> 3) & 1) * 8;
        ldsm_x4(bq, cQ + off);
        ldsm_x4(bo, cdO + off);
        mma_bf16(st[nt], ak, bq[0], bq[1]);
        mma_bf16(st[nt + 1], ak, bq[2], bq[3]);
        mma_bf16(dpt[nt], av, bo[0], bo[1]);
        mma_bf16(dpt[nt + 1], av, bo[2], bo[3]);
      }
    }

    /* ---- P^T = exp2(S^T·scale·log2e − LSE·log2e), masked; dS^T ---- */
    const bool need_mask = (qs < k0 + BN - 1) || (qs + BM > S);
#pragma unroll
    for (int nt = 0; nt < NQ; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ql = nt * 8 + 2 * t + (e & 1); /* query in the tile */
        float pr = exp2f(st[nt][e] * p.scale_log2 - cL[ql]);
        if (need_mask) {
          const int key = k0 + wk0 + g + (e >> 1) * 8;
          const int q = qs + ql;
          if (key > q || q >= S) pr = 0.f;
        }
        st[nt][e] = pr;
        dpt[nt][e] = pr * (dpt[nt][e] - cD[ql]); /* dS^T */
      }
    }

    /* ---- dV += P^T dO, dK += dS^T Q (A from registers, B = dO / Q) ---- */
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t ap[4], as[4];
      ap[0] = pack_bf16(st[2 * kk][0], st[2 * kk][1]);
      ap[1] = pack_bf16(st[2 * kk][2], st[2 * kk][3]);
      ap[2] = pack_bf16(st[2 * kk + 1][0], st[2 * kk + 1][1]);
      ap[3] = pack_bf16(st[2 * kk + 1][2], st[2 * kk + 1][3]);
      as[0] = pack_bf16(dpt[2 * kk][0], dpt[2 * kk][1]);
      as[1] = pack_bf16(dpt[2 * kk][2], dpt[2 * kk][3]);
      as[2] = pack_bf16(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]);
      as[3] = pack_bf16(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3]);
#pragma unroll
      for (int dt = 0; dt < ND; dt += 2) {
        uint32_t bo[4], bq[4];
        const int off = (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD +
                        dt * 8 + (lane >> 4) * 8;
        ldsm_x4_t(bo, cdO + off);
        ldsm_x4_t(bq, cQ + off);
        mma_bf16(dv[dt], ap, bo[0], bo[1]);
        mma_bf16(dv[dt + 1], ap, bo[2], bo[3]);
        mma_bf16(dk[dt], as, bq[0], bq[1]);
        mma_bf16(dk[dt + 1], as, bq[2], bq[3]);
      }
    }

    /* ---- dS^T to shared (bf16, over this step's Q buffer once every warp
     *      is done with Q), then dQ += dS K by query rows ---- */
    __syncthreads();
    bf16 *sdS = sQ + buf * BM * LD;
#pragma unroll
    for (int nt = 0; nt < NQ; ++nt) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        *reinterpret_cast<uint32_t *>(sdS + (wk0 + g + hf * 8) * LDS + nt * 8 +
                                      2 * t) =
            pack_bf16(dpt[nt][2 * hf], dpt[nt][2 * hf + 1]);
      }
    }
    __syncthreads();
    {
      const int wq0 = warp * 16; /* this warp's queries in the tile */
      float *gdq = p.dqacc + (int64_t)b * S * qstride + (int64_t)h * D;
#pragma unroll
      for (int dc = 0; dc < D / 32; ++dc) { /* 32 head dims at a time */
        float acc[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          uint32_t a[4];
          ldsm_x4_t(a, sdS + (kk * 16 + (lane >> 4) * 8 + (lane & 7)) * LDS +
                           wq0 + ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int j = 0; j < 4; j += 2) {
            uint32_t bk[4];
            ldsm_x4_t(bk, sK + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD +
                              dc * 32 + j * 8 + (lane >> 4) * 8);
            mma_bf16(acc[j], a, bk[0], bk[1]);
            mma_bf16(acc[j + 1], a, bk[2], bk[3]);
          }
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int q = qs + wq0 + g + hf * 8;
          if (q < S) {
            float *row = gdq + (int64_t)q * qstride + dc * 32 + 2 * t;
#pragma unroll
            for (int j = 0; j < 4; ++j) /* one 8-byte vector atomic (sm_90) */
              atomicAdd(reinterpret_cast<float2 *>(row + j * 8),
                        make_float2(acc[j][2 * hf], acc[j][2 * hf + 1]));
          }
        }
      }
    }
    __syncthreads(); /* sdS and this Q/dO buffer are rewritten next */
  }
  cp_async_wait<0>();

  /* ---- write dK (·scale) and dV for this warp's 16 keys ---- */
  blk.store_dkdv(p, k0 + wk0 + g, t, &dk[0][0], &dv[0][0]);
}

/* ======================================================================== */
/* WGMMA forward (sm_90a)                                                   */
/* ======================================================================== */
/* d = 128.  Two consumer warpgroups (256 threads), BM = 128 query rows (64
 * per warpgroup), BN keys per step (64; 128 on the mn128 V path).  S = Q K^T
 * runs on wgmma with both operands from shared memory (m64n64k16 or
 * m64n128k16), O += P V on m64n128k16 with P from registers.  Q and K tiles
 * (and V on the mn paths) are stored with the 128-byte swizzle wgmma expects
 * (load_tile_sw128: two 64-column halves of the head dim, 128-byte rows,
 * 8-row groups 1024 B apart, 16-byte chunk c of row r at c ^ (r % 8));
 * cp.async writes them there directly.  V paths (template parameter VM,
 * chosen by PLATEAU_ATTN_WGMMA_V in the launcher):
 *  - transpose: V staged row-major (padded) and transposed each step into
 *    Vt [d][key] (ldmatrix.trans + st.shared, one more barrier per step), a
 *    K-major B operand like K;
 *  - mn: V stored like K, [half][key][64 d] swizzled, and read as it is: an
 *    MN-major B operand (trans-b = 1); no transposition, one barrier a step;
 *  - mn128: mn with BN = 128 (half the steps and barriers, twice the score
 *    registers);
 *  - pipe: mn with S_{j+1} and PV_{j-1} in flight during the softmax of
 *    step j (its own kernel, attn_fwd_wgmma_pipe_kernel; see there);
 *  - mn128pp: mn128 with warpgroup 1's S issued after warpgroup 0's;
 *  - mn128tma: mn128 with K and V loaded by TMA (thread 0, mbarriers);
 *  - ovtma (default): mn128tma's loads, K one step ahead of V, each
 *    warpgroup's softmax of S_{j+1} beside its own PV_j (see there).
 * The accumulator and register-A fragments of wgmma have, per warp, the
 * layouts of mma.sync m16n8k16, so masking and online softmax are the MMA
 * kernel's.
 *
 * Ordering rules of the PTX ISA the kernel relies on:
 *  - cp.async and st.shared write shared memory through the generic proxy,
 *    wgmma reads it through the async proxy: each writing thread runs
 *    fence.proxy.async once its writes are complete (after
 *    cp.async.wait_group) and before the barrier that precedes the wgmma;
 *  - wgmma.fence goes before the first wgmma of a batch and after any other
 *    instruction wrote its accumulator or A registers (rescaling O by alpha,
 *    packing P);
 *  - accumulators are read only after wgmma.wait_group.  The asm statement
 *    of an asynchronous wgmma looks synchronous to the compiler, which may
 *    legally move register arithmetic across the (register-less) fence and
 *    wait statements; wg_hold, an empty asm that "redefines" the registers,
 *    pins those reads and writes on the right side of them (what CUTLASS's
 *    warpgroup_fence_operand does). */

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PL_WGMMA_OK 1
#else
#define PL_WGMMA_OK 0
#endif

#if PL_WGMMA_OK /* helpers exist only where wgmma does */
/* Shared-memory matrix descriptor (PTX ISA, wgmma "Matrix Descriptor
 * Format"): bits 0-13 start address >> 4; 16-29 leading-dimension byte offset
 * (LBO) >> 4; 32-45 stride-dimension byte offset (SBO) >> 4; 49-51 base
 * offset, 0 here (every swizzle atom we address starts 1024-byte aligned);
 * 62-63 swizzle mode, 1 = 128-byte.  In the 128-byte swizzle the hardware
 * XORs address bits 4-6 (16-byte chunk) with bits 7-9 (row in the 8-row,
 * 1024-byte atom) of each final address, so tiles are 1024-byte aligned and
 * a k16 slice inside the 128-byte rows is addressed by adding its byte
 * offset (32 B per slice) to the start address. */
static __device__ __forceinline__ uint64_t wg_desc(const void *p, uint32_t lbo, uint32_t sbo) {
  const uint64_t a = smem_u32(p);
  return ((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
         ((uint64_t)1 << 62);
}

/* K-major operand (Q, K, Vt; trans = 0): the M or N index runs over the
 * 128-byte rows, 8-row groups SBO = 1024 B apart; a k16 slice (32 B) lies
 * inside one row, so LBO is not used by swizzled K-major layouts (set to
 * 16 B, the value CUTLASS writes).  Canonical layout in 16-byte units:
 * ((8 rows, n groups), 2 chunks) : ((8, SBO), 1). */
static __device__ __forceinline__ uint64_t wg_desc_k(const void *p) {
  return wg_desc(p, 16, 1024);
}

/* MN-major operand: B of P·V read from V as loaded (trans-b = 1).  B is
 * K × N = 16 keys × 128 d.  The canonical MN-major 128-byte-swizzle layout
 * (PTX ISA canonical layouts; CUTLASS make_gmma_desc<Major::MN>) is, in
 * 16-byte units, ((8 chunks, n), (8 k-rows, k)) : ((1, LBO), (8, SBO)): a
 * swizzle atom holds 64 consecutive MN elements (one 128-byte row) for each
 * of 8 consecutive k, rows 128 B apart; the next 64 MN elements are LBO bytes
 * on, the next 8 k SBO bytes on.  Our V tile [half][BN keys][64 d] has a key
 * per 128-byte row, so
 *   SBO = 1024 B (keys 8..15 of the slice follow keys 0..7),
 *   LBO = BN·128 B (from d 0..63 to d 64..127: the next half),
 *   start of the 16-key slice kk = tile + kk·16·128 B, 1024-byte aligned, so
 *   the base offset stays 0 and the hardware's XOR by (key & 7) undoes the
 *   one load_tile_sw128 applied.
 * (For MN-major operands LBO and SBO swap roles compared with K-major: LBO
 * steps along MN, SBO along K.) */
static __device__ __forceinline__ uint64_t wg_desc_mn(const void *p, uint32_t half_bytes) {
  return wg_desc(p, half_bytes, 1024);
}

static __device__ __forceinline__ void wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void wg_wait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/* all but the newest committed wgmma group complete */
static __device__ __forceinline__ void wg_wait1() {
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
static __device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* named barrier id among n threads: wait (sync) or only count this warp's
 * threads in (arrive); whole warps only */
static __device__ __forceinline__ void named_bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
static __device__ __forceinline__ void named_bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

/* Pin wgmma operand registers between the fence / wait statements (see the
 * section comment): the compiler must assume the empty asm reads and
 * rewrites each register, and does not reorder volatile asm statements. */
template <int N>
static __device__ __forceinline__ void wg_hold(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
static __device__ __forceinline__ void wg_hold(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

/* d[32] (+)= A(desc) · B(desc), m64n64k16; TA, TB = trans-a, trans-b: 0 for a
 * K-major operand (the default), 1 for an MN-major one; accumulate = 0
 * overwrites d */
template <int TA = 0, int TB = 0>
static __device__ __forceinline__ void wg_m64n64_ss(float (&d)[32], uint64_t da, uint64_t db,
                                                   int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
      "%32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
        "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
}

/* The 64 accumulator operands of an m64n128 wgmma ("+f", in register order). */
#define WG_ACC4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define WG_ACC16(d, i) WG_ACC4(d, i), WG_ACC4(d, i + 4), WG_ACC4(d, i + 8), WG_ACC4(d, i + 12)
#define WG_ACC64(d) WG_ACC16(d, 0), WG_ACC16(d, 16), WG_ACC16(d, 32), WG_ACC16(d, 48)

/* d[64] (+)= A(desc) · B(desc), m64n128k16, both K-major (trans-a = trans-b = 0);
 * accumulate = 0 overwrites d */
static __device__ __forceinline__ void wg_m64n128_ss(float (&d)[64], uint64_t da, uint64_t db,
                                                   int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : WG_ACC64(d)
      : "l"(da), "l"(db), "r"(accumulate));
}

/* d[64] += A(regs a[4]) · B(desc), m64n128k16; TB = trans-b: 0 for a K-major B
 * (Vt), 1 for an MN-major B (V as loaded) */
template <int TB>
static __device__ __forceinline__ void wg_m64n128_rs(float (&d)[64], const uint32_t (&a)[4],
                                                   uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "{%64,%65,%66,%67}, %68, p, 1, 1, %70;\n}\n"
      : WG_ACC64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(TB));
}


/* ROWS rows × 128 bf16 from global into the swizzled layout:
 * [half (d/64)][ROWS][128 B], chunk c of row r at (c ^ (r & 7)). */
template <int ROWS, int NT>
static __device__ __forceinline__ void load_tile_sw128(bf16 *dst, const bf16 *src, int row0,
                                                       int S, int64_t stride, int tid) {
  static_assert(ROWS * 16 % NT == 0, "whole chunks per thread (a loop nvcc fully unrolls)");
#pragma unroll
  for (int i = 0; i < ROWS * 16 / NT; ++i) {
    const int c = tid + i * NT;
    const int r = c >> 4, ch = c & 15; /* 16 chunks of 8 bf16 per row */
    const int half = ch >> 3, cc = ch & 7;
    const int gr = row0 + r;
    const bf16 *g = src + (int64_t)(gr < S ? gr : S - 1) * stride + ch * 8;
    bf16 *d = dst + half * (ROWS * 64) + r * 64 + ((cc ^ (r & 7)) * 8);
    cp_async16(d, g, gr < S ? 16 : 0);
  }
}

/* mbarriers (the TMA schemes of the mn128tma forward and the dK/dV kernel):
 * init with one arrival,
 * arrival with the transaction bytes to expect, wait for a phase (bounded:
 * a load that never lands traps instead of hanging) */
static __device__ __forceinline__ void mbar_init(uint64_t *bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bar)) : "memory");
}
static __device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
static __device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  for (long n = 0;; ++n) {
    uint32_t done;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
    if (done) return;
    if (n > (1L << 24)) __trap();
  }
}
/* TMA: the box of tensor map *map at coordinates (c0, c1, c2, c3) into
 * shared memory at dst, completing transaction bytes on *bar */
static __device__ __forceinline__ void tma_load4(void *dst, const CUtensorMap *map, int c0, int c1,
                                                 int c2, int c3, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
      "r"(smem_u32(bar))
      : "memory");
}
#endif /* PL_WGMMA_OK */

/* TMA descriptors of two [B][S][heads][128] bf16 tensors, each a 4-D tensor
 * map (d, heads, S, B) with box (64, 1, rows, 1) and the 128-byte swizzle of
 * load_tile_sw128, rows past S zero-filled (see tma_map_bshd): K and V for
 * the mn128tma forward (rows 128), Q and dO for the dK/dV kernel's TMA
 * scheme (rows 64); unused (zero) otherwise */
struct AttnTma {
  CUtensorMap a, b;
};

#if PL_WGMMA_OK
/* thread 0 of a block: n mbarriers of one arrival each, their
 * initialization made visible to the async proxy (TMA) */
static __device__ __forceinline__ void mbar_init_n(uint64_t *bar, int n) {
  for (int i = 0; i < n; ++i) mbar_init(bar + i);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/* thread 0: the ROWS-row tiles at rows row0.. of head `head`, batch bb, of
 * the two tensors of tm (maps a, b; both d halves of each) into dA, dB in
 * load_tile_sw128's layout, completing their bytes on *bar */
template <int ROWS>
static __device__ __forceinline__ void tma_load_tile(bf16 *dst, const CUtensorMap *map, int head,
                                                     int row0, int bb, uint64_t *bar) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) tma_load4(dst + hf * ROWS * 64, map, hf * 64, head, row0, bb, bar);
}
template <int ROWS>
static __device__ __forceinline__ void tma_load_pair(bf16 *dA, bf16 *dB, const AttnTma &tm,
                                                     int head, int row0, int bb, uint64_t *bar) {
  mbar_expect_tx(bar, 2 * ROWS * 128 * 2);
  tma_load_tile<ROWS>(dA, &tm.a, head, row0, bb, bar);
  tma_load_tile<ROWS>(dB, &tm.b, head, row0, bb, bar);
}
#endif

/* V paths of the wgmma forward (PLATEAU_ATTN_WGMMA_V) */
enum {
  WG_V_TRANSPOSE = 0,
  WG_V_MN = 1,
  WG_V_MN128 = 2,
  WG_V_PIPE = 3,
  WG_V_MN128PP = 4,
  WG_V_MN128TMA = 5,
  WG_V_OVTMA = 6,
  WG_V_COUNT = 7
};
static const char *const wg_v_names[WG_V_COUNT] = {"transpose", "mn",       "mn128", "pipe",
                                                   "mn128pp",   "mn128tma", "ovtma"};

#define WG_BM 128
#define WG_LDV (128 + 8)
/* keys per step of the pipe path (64 or 128; see attn_fwd_wgmma_pipe_kernel) */
#define WG_PIPE_BN 64

/* keys per step */
static constexpr int wg_bn(int vm) {
  return vm == WG_V_MN128 || vm == WG_V_MN128PP || vm == WG_V_MN128TMA || vm == WG_V_OVTMA
             ? 128
         : vm == WG_V_PIPE                                           ? WG_PIPE_BN
                                                                     : 64;
}

/* Dynamic shared memory: Q [2][BM][64] and K ×2 [2][BN][64] swizzled; then V
 * ×2 swizzled (mn, mn128, mn128pp), V ×3 swizzled (pipe: a PV wgmma stays in flight
 * into the next step, see its kernel) or Vt [128][BN] swizzled + V staging ×2
 * [BN][LDV] (transpose); mn128tma 2 mbarriers (64 B); 1024 B of slack to
 * align the base.  transpose 117,760 B, mn 99,328 B, mn128 164,864 B,
 * mn128tma 164,928 B, pipe 115,712 B (BN = 64; 197,632 B with 128) (an
 * sm_90 block may have 227 KB). */
static constexpr size_t wg_smem_bytes(int vm) {
  return (size_t)WG_BM * 128 * 2 + (size_t)2 * wg_bn(vm) * 128 * 2 +
         (vm == WG_V_TRANSPOSE
              ? (size_t)128 * wg_bn(vm) * 2 + (size_t)2 * wg_bn(vm) * WG_LDV * 2
              : (size_t)(vm == WG_V_PIPE ? 3 : 2) * wg_bn(vm) * 128 * 2) +
         (vm == WG_V_MN128TMA || vm == WG_V_OVTMA ? 64 : 0) + 1024;
}

/* A wgmma forward block's indices and head pointers: 256 threads, two
 * warpgroups of four warps; blocks walk the query tiles last to first (the
 * longest causal rows start first). */
struct WgBlock {
  int tid, wg, wq, g, t, h, b, q0, nkb;
  int64_t qstride, kstride;
  const bf16 *gQ, *gK, *gV;
};
template <int BN>
static __device__ __forceinline__ WgBlock wg_block(const AttnParams &p) {
  constexpr int D = 128, BM = WG_BM;
  WgBlock w;
  w.tid = threadIdx.x;
  const int warp = w.tid >> 5, lane = w.tid & 31;
  w.wg = warp >> 2; /* warpgroup */
  w.wq = warp & 3;  /* warp in it */
  w.g = lane >> 2;
  w.t = lane & 3;
  w.h = blockIdx.y;
  w.b = blockIdx.z;
  const int hk = w.h / p.group, S = p.S;
  w.q0 = (gridDim.x - 1 - blockIdx.x) * BM;
  w.qstride = (int64_t)p.nq * D;
  w.kstride = (int64_t)p.nkv * D;
  w.gQ = p.q + (int64_t)w.b * S * w.qstride + (int64_t)w.h * D;
  w.gK = p.k + (int64_t)w.b * S * w.kstride + (int64_t)hk * D;
  w.gV = p.v + (int64_t)w.b * S * w.kstride + (int64_t)hk * D;
  w.nkb = (min(S, w.q0 + BM) + BN - 1) / BN;
  return w;
}

/* Shared by the wgmma kernels (register layouts of the m64nN accumulator:
 * s[4j + e] is (row g + 8·(e>>1), col 8j + 2t + (e&1)) of this warp's 16 rows).
 * Causal mask of a score tile whose first key is k0. */
template <int BN>
static __device__ __forceinline__ void wg_mask(float (&s)[BN / 2], int k0, int r0, int g,
                                               int t) {
#pragma unroll
  for (int jn = 0; jn < BN / 8; ++jn)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = r0 + g + (e >> 1) * 8;
      const int col = k0 + jn * 8 + 2 * t + (e & 1);
      if (col > row) s[4 * jn + e] = -INFINITY;
    }
}

/* Online softmax of one score tile: P in place of S, the running max and sum
 * updated, alpha[hf] the factor the output rows hf must be rescaled by. */
template <int BN>
static __device__ __forceinline__ void wg_softmax(float (&s)[BN / 2], float (&mrow)[2],
                                                  float (&lrow)[2], float (&alpha)[2],
                                                  float scale_log2) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float mx = mrow[hf];
#pragma unroll
    for (int jn = 0; jn < BN / 8; ++jn)
      mx = fmaxf(mx, fmaxf(s[4 * jn + 2 * hf], s[4 * jn + 2 * hf + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float msc = (mx == -INFINITY) ? 0.f : mx * scale_log2;
    alpha[hf] = exp2f(mrow[hf] * scale_log2 - msc);
    mrow[hf] = mx;
    float rs = 0.f;
#pragma unroll
    for (int jn = 0; jn < BN / 8; ++jn)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pv = exp2f(s[4 * jn + 2 * hf + e] * scale_log2 - msc);
        s[4 * jn + 2 * hf + e] = pv;
        rs += pv;
      }
    lrow[hf] = lrow[hf] * alpha[hf] + rs;
  }
}

/* O *= alpha: the online softmax's rescale of this thread's output rows
 * (row half hf of every 8-column block) */
template <int D>
static __device__ __forceinline__ void wg_rescale(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int jd = 0; jd < D / 8; ++jd) {
      o[4 * jd + 2 * hf] *= alpha[hf];
      o[4 * jd + 2 * hf + 1] *= alpha[hf];
    }
}

/* P (fp32 scores) to the bf16 A fragments of P·V, 16 keys per fragment. */
template <int BN>
static __device__ __forceinline__ void wg_pack_p(uint32_t (&a)[BN / 16][4],
                                                 const float (&s)[BN / 2]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    a[kk][0] = pack_bf16(s[8 * kk + 0], s[8 * kk + 1]);
    a[kk][1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
    a[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
    a[kk][3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

/* O / l to the output rows (bf16) and the log-sum-exp of this warp's rows. */
template <int D>
static __device__ __forceinline__ void wg_store(const AttnParams &p, const float (&o)[D / 2],
                                                const float (&mrow)[2], const float (&lrow)[2],
                                                int b, int h, int row0, int t) {
  const int S = p.S;
  const int64_t qstride = (int64_t)p.nq * D;
  bf16 *gO = p.out + (int64_t)b * S * qstride + (int64_t)h * D;
  float *gL = p.lse + ((int64_t)b * p.nq + h) * S;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float l = lrow[hf];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = 1.f / l;
    const int row = row0 + hf * 8;
    if (row < S) {
      bf16 *orow = gO + (int64_t)row * qstride;
#pragma unroll
      for (int jd = 0; jd < D / 8; ++jd)
        *reinterpret_cast<__nv_bfloat162 *>(orow + jd * 8 + 2 * t) =
            __floats2bfloat162_rn(o[4 * jd + 2 * hf] * inv, o[4 * jd + 2 * hf + 1] * inv);
      if (t == 0) gL[row] = mrow[hf] * p.scale + logf(l);
    }
  }
}

/* acc (m64nN) = A B^T over the head dim (K = 128), both operands K-major
 * from swizzled shared memory: aw a warpgroup's 64 rows of an [2][AR][64]
 * tile, b an [2][N][64] tile (S = Q K^T in the forward and the dQ kernel,
 * S^T = K Q^T and dP^T = V dO^T in the dK/dV kernel); the caller fences
 * before and commits after. */
template <int N, int AR = WG_BM>
static __device__ __forceinline__ void wg_issue_qk(float (&s)[N / 2], const bf16 *aw,
                                                   const bf16 *b) {
#if PL_WGMMA_OK
#pragma unroll
  for (int kk = 0; kk < 128 / 16; ++kk) {
    const uint64_t da = wg_desc_k(aw + (kk >> 2) * (AR * 64) + (kk & 3) * 16);
    const uint64_t db = wg_desc_k(b + (kk >> 2) * (N * 64) + (kk & 3) * 16);
    if constexpr (N == 64)
      wg_m64n64_ss(s, da, db, kk > 0);
    else
      wg_m64n128_ss(s, da, db, kk > 0);
  }
#endif
}

/* acc (m64n128) += A · B as one committed wgmma group: A = a, K = KR rows
 * (16 per fragment) from registers, B = a [2][KR][64] swizzled tile read as
 * MN-major (its rows the K index; LBO = one d half, KR·128 B) */
#if PL_WGMMA_OK
template <int KR>
static __device__ __forceinline__ void wg_issue_rs_mn(float (&acc)[64],
                                                      uint32_t (&a)[KR / 16][4],
                                                      const bf16 *tile) {
  wg_hold(acc);
  wg_hold(a);
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < KR / 16; ++kk)
    wg_m64n128_rs<1>(acc, a[kk], wg_desc_mn(tile + kk * 16 * 64, KR * 128));
  wg_commit();
}
#endif

template <int VM>
static __global__ void __launch_bounds__(256, 1)
    attn_fwd_wgmma_kernel(AttnParams p, const __grid_constant__ AttnTma tm) {
#if PL_WGMMA_OK
  constexpr int D = 128, BM = WG_BM, BN = wg_bn(VM), NT = 256;
  constexpr bool MN = VM != WG_V_TRANSPOSE, TMA = VM == WG_V_MN128TMA;
  constexpr bool OV = VM == WG_V_OVTMA; /* its own loop and TMA scheme, below */
  static_assert(MN || BN == 64, "the transposition below assumes 64 keys per step");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  /* swizzled tiles need 1024-byte alignment (of the shared-window address) */
  unsigned char *base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sQ = reinterpret_cast<bf16 *>(base); /* [2][BM][64]                  */
  bf16 *sK = sQ + BM * 128;                  /* [2 buf][2][BN][64]           */
  bf16 *sVt = sK + 2 * BN * 128;             /* transpose: [128][BN]         */
  bf16 *sV = MN ? sVt : sVt + 128 * BN;      /* mn: [2 buf][2][BN][64];
                                                transpose: [2 buf][BN][LDV]  */
  uint64_t *full = reinterpret_cast<uint64_t *>(sV + 2 * BN * 128); /* [2] (TMA) */

  const WgBlock w = wg_block<BN>(p);
  const int tid = w.tid, wg = w.wg, wq = w.wq, g = w.g, t = w.t, h = w.h, b = w.b;
  const int warp = tid >> 5, lane = tid & 31; /* the V transposition's */
  const int S = p.S, q0 = w.q0, nkb = w.nkb;
  const int64_t qstride = w.qstride, kstride = w.kstride;
  const bf16 *gQ = w.gQ, *gK = w.gK, *gV = w.gV;

  /* mn128tma: the K and V tiles of step kb into buffer kbuf by TMA, from
   * thread 0, onto mbarrier full[kbuf] (the other paths: cp.async by every
   * thread) */
  auto tma_kv = [&](int kb, int kbuf) {
    if (tid == 0)
      tma_load_pair<BN>(sK + kbuf * BN * 128, sV + kbuf * BN * 128, tm, h / p.group, kb * BN, b,
                        full + kbuf);
  };
  if ((TMA || OV) && tid == 0) mbar_init_n(full, 2);
  load_tile_sw128<BM, NT>(sQ, gQ, q0, S, qstride, tid);
  if constexpr (OV) { /* L_{-1} (see below): K_0, K_1, V_0 onto full[0] */
    if (tid == 0) {
      mbar_expect_tx(full, (nkb > 1 ? 3 : 2) * BN * 128 * 2);
      tma_load_tile<BN>(sK, &tm.a, h / p.group, 0, b, full);
      if (nkb > 1) tma_load_tile<BN>(sK + BN * 128, &tm.a, h / p.group, BN, b, full);
      tma_load_tile<BN>(sV, &tm.b, h / p.group, 0, b, full);
    }
  } else if constexpr (TMA) {
    tma_kv(0, 0);
  } else {
    load_tile_sw128<BN, NT>(sK, gK, 0, S, kstride, tid);
    if constexpr (MN)
      load_tile_sw128<BN, NT>(sV, gV, 0, S, kstride, tid);
    else
      load_tile<BN, D, WG_LDV, NT>(sV, gV, 0, S, kstride, tid);
  }
  cp_async_commit();

  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const int wrow0 = wg * 64 + wq * 16; /* this warp's first row in the tile */

  if constexpr (OV) {
    /* ovtma: FlashAttention-3's intra-warpgroup overlap with one S register
     * set (o 64 + s 64 + a 32): K one step ahead of V, so that each
     * warpgroup's softmax of S_{j+1} runs while its O += P_j V_j is on the
     * tensor cores; K, V by TMA from thread 0.  K_j in K buffer j%2, V_j in
     * V buffer j%2.  Load group L_m (m >= 0: issued in step m, after its
     * barrier) is K_{m+2} (if any) and V_{m+1}, onto mbarrier full[(m+1)%2];
     * L_{-1} (before the loop) is K_0, K_1, V_0 onto full[0].  Step j
     * (0 <= j < nkb-1):
     *   barrier (both warpgroups done with step j-1: S_j waited, PV_{j-1}
     *     waited, so K buffer j%2 and V buffer (j+1)%2 are free);
     *   thread 0 issues L_j (K_{j+2} -> K buffer j%2, V_{j+1} -> V buffer
     *     (j+1)%2);
     *   wait L_{j-1} (K_{j+1}, V_j) on full[j%2], phase j/2;
     *   issue S_{j+1} = Q K_{j+1}^T (into s: P_j is already packed in a),
     *   issue O += P_j V_j; wait 1 (S_{j+1} done); mask, softmax of s;
     *   wait 0 (PV_j done); O *= alpha; pack P_{j+1} into a.
     * The last PV (V_{nkb-1}, from L_{nkb-2}) is peeled: no branch around
     * wgmma.  (The cp.async version of this scheme, "ov", measured 2-3%
     * slower than mn128 at 224 registers.) */
    const int hk = h / p.group;
    cp_async_commit();
    cp_async_wait<0>(); /* Q; and the mbarriers' initialization seen by all */
    fence_proxy_async();
    __syncthreads();
    float s[BN / 2];
    uint32_t a[BN / 16][4];
    float alpha[2];
    auto issue_s = [&](const bf16 *cK) {
      wg_fence();
      wg_issue_qk<BN>(s, sQ + wg * 64 * 64, cK);
      wg_commit();
    };
    mbar_wait(full, 0u); /* L_{-1} */
    issue_s(sK);
    wg_wait0();
    wg_hold(s);
    if (BN - 1 > q0 + wrow0) wg_mask<BN>(s, 0, q0 + wrow0, g, t);
    wg_softmax<BN>(s, mrow, lrow, alpha, p.scale_log2); /* (O is 0: no rescale) */
    wg_pack_p<BN>(a, s);
    for (int kb = 0; kb + 1 < nkb; ++kb) {
      const int buf = kb & 1;
      __syncthreads();
      if (tid == 0) { /* L_kb */
        uint64_t *bar = full + ((kb + 1) & 1);
        mbar_expect_tx(bar, (kb + 2 < nkb ? 2 : 1) * BN * 128 * 2);
        if (kb + 2 < nkb) tma_load_tile<BN>(sK + buf * BN * 128, &tm.a, hk, (kb + 2) * BN, b, bar);
        tma_load_tile<BN>(sV + (buf ^ 1) * BN * 128, &tm.b, hk, (kb + 1) * BN, b, bar);
      }
      mbar_wait(full + buf, (uint32_t)(kb >> 1) & 1u); /* L_{kb-1}: K_{kb+1}, V_kb */
      issue_s(sK + (buf ^ 1) * BN * 128);
      wg_issue_rs_mn<BN>(o, a, sV + buf * BN * 128);
      wg_wait1(); /* S_{kb+1} done; PV_kb may still run */
      wg_hold(s);
      const int k1 = (kb + 1) * BN;
      if (k1 + BN - 1 > q0 + wrow0) wg_mask<BN>(s, k1, q0 + wrow0, g, t);
      wg_softmax<BN>(s, mrow, lrow, alpha, p.scale_log2);
      wg_wait0(); /* PV_kb done: o and a free */
      wg_hold(o);
      wg_hold(a);
      wg_rescale<D>(o, alpha);
      wg_pack_p<BN>(a, s);
    }
    mbar_wait(full + ((nkb - 1) & 1), (uint32_t)((nkb - 1) >> 1) & 1u); /* V_{nkb-1} */
    wg_issue_rs_mn<BN>(o, a, sV + ((nkb - 1) & 1) * BN * 128);
    wg_wait0();
    wg_hold(o);
    wg_store<D>(p, o, mrow, lrow, b, h, q0 + wrow0 + g, t);
  } else {
    for (int kb = 0; kb < nkb; ++kb) {
      const int buf = kb & 1;
      /* After this barrier the tiles of step kb are in place (each thread
       * waited for its own cp.async and fenced them for the async proxy) and
       * both warpgroups are done with step kb-1 (its wgmma waited for), so
       * buffer buf^1 and Vt may be rewritten: one barrier per step. */
      cp_async_wait<0>();
      fence_proxy_async();
      __syncthreads();
      if (kb + 1 < nkb) { /* prefetch step kb+1, overlapping this step */
        if constexpr (TMA) {
          tma_kv(kb + 1, buf ^ 1);
        } else {
          load_tile_sw128<BN, NT>(sK + (buf ^ 1) * BN * 128, gK, (kb + 1) * BN, S, kstride, tid);
          if constexpr (MN)
            load_tile_sw128<BN, NT>(sV + (buf ^ 1) * BN * 128, gV, (kb + 1) * BN, S, kstride, tid);
          else
            load_tile<BN, D, WG_LDV, NT>(sV + (buf ^ 1) * BN * WG_LDV, gV, (kb + 1) * BN, S,
                                         kstride, tid);
        }
        cp_async_commit();
      }
      if constexpr (TMA) mbar_wait(full + buf, (uint32_t)(kb >> 1) & 1u); /* step kb's K, V landed */
      if constexpr (!MN) {
        /* V [key][d] -> Vt [d][key] (K-major, swizzled): each ldmatrix.trans
         * 8×8 block gives a thread keys 2t, 2t+1 of head dim 8·m + g */
        const bf16 *cV = sV + buf * BN * WG_LDV;
#pragma unroll
        for (int it = 0; it < (BN / 8) * (D / 8) / 4 / 8; ++it) { /* 128 blocks / 4 / 8 warps */
          const int blk4 = it * 8 + warp; /* group of 4 blocks along d */
          const int kc = blk4 / (D / 32), dm4 = blk4 % (D / 32);
          /* blocks: keys 8·kc.., d 8·(4·dm4 + j), j = lane/8 */
          const int j = lane >> 3;
          uint32_t r[4];
          ldsm_x4_t(r, cV + (kc * 8 + (lane & 7)) * WG_LDV + (dm4 * 4 + j) * 8);
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
            const int n = (dm4 * 4 + jj) * 8 + g; /* head dim = Vt row */
            const int chunk = kc ^ (n & 7);
            *reinterpret_cast<uint32_t *>(sVt + n * 64 + chunk * 8 + 2 * t) = r[jj];
          }
        }
        fence_proxy_async(); /* st.shared writes -> wgmma reads */
        __syncthreads();
      }

      const bf16 *cK = sK + buf * BN * 128;
      const int k0 = kb * BN;
      /* S = Q K^T for this warpgroup's 64 rows.  mn128pp: warpgroup 1 issues
       * its S only once warpgroup 0 has issued its own (named barrier 1), so
       * the tensor cores finish warpgroup 0's first and its softmax runs
       * beside warpgroup 1's S (FlashAttention-3's ping-pong, within a step) */
      float s[BN / 2];
      if constexpr (VM == WG_V_MN128PP)
        if (wg == 1) named_bar_sync(1, 256);
      wg_fence();
      wg_issue_qk<BN>(s, sQ + wg * 64 * 64, cK);
      wg_commit();
      if constexpr (VM == WG_V_MN128PP)
        if (wg == 0) named_bar_arrive(1, 256);
      wg_wait0();
      wg_hold(s);

      /* mask (blocks that reach the diagonal), online softmax, rescale O */
      if (k0 + BN - 1 > q0 + wrow0) wg_mask<BN>(s, k0, q0 + wrow0, g, t);
      float alpha[2];
      wg_softmax<BN>(s, mrow, lrow, alpha, p.scale_log2);
      wg_rescale<D>(o, alpha);
      /* O += P V: P from registers, 16 keys per wgmma (A fragment kk = score
       * n-tiles 2kk, 2kk+1); B = V (MN-major) or Vt (K-major) */
      uint32_t a[BN / 16][4];
      wg_pack_p<BN>(a, s);
      if constexpr (MN) { /* V buffer buf */
        wg_issue_rs_mn<BN>(o, a, sV + buf * BN * 128);
      } else {
        wg_hold(o);
        wg_hold(a);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) wg_m64n128_rs<0>(o, a[kk], wg_desc_k(sVt + kk * 16));
        wg_commit();
      }
      wg_wait0();
      wg_hold(o);
    }
    cp_async_wait<0>();

    wg_store<D>(p, o, mrow, lrow, b, h, q0 + wrow0 + g, t);
  }
#else
  __trap(); /* built without sm_90a: the launcher refuses before this */
#endif
}

/* The pipe path (PLATEAU_ATTN_WGMMA_V = pipe): the operands of the mn path
 * (Q, K K-major; V MN-major, trans-b = 1), BN = WG_PIPE_BN = 64 keys per step
 * (128 spills: O 64 + two S sets 2·64 + P 32 registers), with the softmax on
 * the CUDA cores overlapping the tensor cores (FlashAttention-3 §3.2,
 * intra-warpgroup overlapping).  The mn kernel waits for each wgmma right
 * after issuing it, so a warpgroup's tensor work stops during its softmax;
 * here, per warpgroup, step j (0 <= j < nkb) runs
 *
 *   (1) cp.async.wait_group 0, fence.proxy.async, __syncthreads     [B_j]
 *   (2) cp.async K_{j+2} -> K buffer j%2, V_{j+1} -> V buffer (j+1)%3
 *   (3) wgmma.fence; issue S_{j+1} = Q K_{j+1}^T into s[(j+1)%2]; commit
 *   (4) mask and softmax of S_j (s[j%2], complete since (5) of step j-1):
 *       row max, P_j = exp2, row sums, alpha_j = exp2(m_{j-1} - m_j);
 *       O is not touched
 *   (5) wgmma.wait_group 0: PV_{j-1} (issued in (7) of step j-1) and S_{j+1}
 *       complete
 *   (6) O *= alpha_j; pack P_j to bf16 A fragments a[]
 *   (7) wgmma.fence; issue O += P_j V_j; commit; not waited for until (5)
 *       of step j+1 (after the loop for the last step)
 *
 * so the softmax (4) of each warpgroup runs while its PV_{j-1} and S_{j+1}
 * are on the tensor cores; those idle (for this warpgroup) only from (5) to
 * (7), the rescale and packing.  In the sm_90a SASS (CUDA 13) each step
 * reads: 8 HGMMA (S_{j+1}) interleaved with the 34 MUFU.EX2 of the softmax,
 * one WARPGROUP.DEPBAR, 64 FMUL (rescale), 16 F2FP (pack), 4 HGMMA (PV_j).
 * Why each register is safe:
 *  - O is the accumulator of PV_{j-1} until (5); it is read and written
 *    (the alpha rescale, deferred past the softmax) only in (6), after that
 *    wait and before the wgmma.fence of (7): never while a wgmma writing O
 *    is in flight;
 *  - a[] (A of PV_{j-1}) is rewritten only in (6), after (5); wg_hold(a) in
 *    (5) keeps its registers live (not reused) through the softmax;
 *  - s[] is ping-pong: S_{j+1} writes s[(j+1)%2] while (4) reads s[j%2];
 *    s[(j+1)%2] held P_{j-1}, last read by the packing of step j-1, and is
 *    read next in step j+1, after (5).
 * Why (5) waits for both groups (wgmma.wait_group N: at most the N newest
 * groups pending, all older ones complete; here PV_{j-1} is older than
 * S_{j+1}): wait_group 1 there (PV_{j-1} only) and wait_group 1 after (7)
 * (S_{j+1} only) would keep S_{j+1} in flight through (6)-(7), but then
 * ptxas (CUDA 13) serializes every wgmma of the kernel (C7514: accumulator
 * registers read inside a pipeline stage), as it does (C7515) when (3) is
 * skipped on the last step; so (3) is unconditional: on the last step it
 * recomputes Q K_j^T into s[(j+1)%2] (never read; K_j's buffer is not
 * rewritten any more), half a step of tensor work per block.
 * Shared memory: K_{j+1} and V_j are loaded in (2) of step j-1 (K_1, V_0
 * before the loop) and visible at B_j; Q is never rewritten.  After B_j
 * every wgmma reading K_j (S_j, waited in (5) of step j-1) and V_{j-2}
 * (PV_{j-2}, waited in (5) of step j-1) is complete in both warpgroups, so
 * (2) may overwrite their buffers; in flight or still to be issued until
 * B_{j+1} are K_{j+1} (S_{j+1}), V_{j-1} (PV_{j-1}) and V_j (PV_j): two K
 * buffers and three V buffers (cp.async writes are fenced for the async
 * proxy in (1)).  Before the loop: Q, K_0 (one cp.async group), K_1, V_0 (a
 * second one); S_0 issued once the first group landed and waited for at
 * once.  nkb = 1 runs one step with no (2); the causal mask, the diagonal
 * block and rows or keys past S are the mn kernel's. */

template <int BN>
static __global__ void __launch_bounds__(256, 1) attn_fwd_wgmma_pipe_kernel(AttnParams p) {
#if PL_WGMMA_OK
  constexpr int D = 128, BM = WG_BM, NT = 256, NS = BN / 2;
  static_assert(BN == 64 || BN == 128, "m64n64 or m64n128 score tiles");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  /* swizzled tiles need 1024-byte alignment (of the shared-window address) */
  unsigned char *base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sQ = reinterpret_cast<bf16 *>(base); /* [2][BM][64]          */
  bf16 *sK = sQ + BM * 128;                  /* [2 buf][2][BN][64]   */
  bf16 *sV = sK + 2 * BN * 128;              /* [3 buf][2][BN][64]   */

  const WgBlock w = wg_block<BN>(p);
  const int tid = w.tid, wg = w.wg, wq = w.wq, g = w.g, t = w.t, h = w.h, b = w.b;
  const int S = p.S, q0 = w.q0, nkb = w.nkb;
  const int64_t qstride = w.qstride, kstride = w.kstride;
  const bf16 *gQ = w.gQ, *gK = w.gK, *gV = w.gV;
  const bf16 *sQw = sQ + wg * 64 * 64; /* this warpgroup's 64 query rows */

  load_tile_sw128<BM, NT>(sQ, gQ, q0, S, qstride, tid);
  load_tile_sw128<BN, NT>(sK, gK, 0, S, kstride, tid);
  cp_async_commit();
  if (nkb > 1) load_tile_sw128<BN, NT>(sK + BN * 128, gK, BN, S, kstride, tid);
  load_tile_sw128<BN, NT>(sV, gV, 0, S, kstride, tid);
  cp_async_commit();

  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  float s[2][NS];
#pragma unroll
  for (int i = 0; i < NS; ++i) s[0][i] = s[1][i] = 0.f;
  uint32_t a[BN / 16][4]; /* P of the step whose PV may be in flight */
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e) a[kk][e] = 0u;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const int wrow0 = wg * 64 + wq * 16; /* this warp's first row in the tile */

  /* S_0 once Q and K_0 are in (K_1, V_0 may still be landing) */
  cp_async_wait<1>();
  fence_proxy_async();
  __syncthreads();
  wg_hold(s[0]);
  wg_fence();
  wg_issue_qk<BN>(s[0], sQw, sK);
  wg_commit();
  wg_wait0();
  wg_hold(s[0]);

  /* two steps per iteration so that s[j % 2] is a compile-time register set */
#pragma unroll 1
  for (int j0 = 0; j0 < nkb; j0 += 2) {
#pragma unroll
    for (int par = 0; par < 2; ++par) {
      const int j = j0 + par;
      if (j >= nkb) break;
      float(&sc)[NS] = s[par];     /* S_j, complete */
      float(&sn)[NS] = s[par ^ 1]; /* S_{j+1}, in flight from (3) to (5) */
      const bool more = j + 1 < nkb;
      /* (1) */
      cp_async_wait<0>();
      fence_proxy_async();
      __syncthreads();
      /* (2) */
      if (more) {
        if (j + 2 < nkb)
          load_tile_sw128<BN, NT>(sK + (j & 1) * BN * 128, gK, (j + 2) * BN, S, kstride, tid);
        load_tile_sw128<BN, NT>(sV + ((j + 1) % 3) * BN * 128, gV, (j + 1) * BN, S, kstride,
                                tid);
        cp_async_commit();
      }
      /* (3) unconditional: on the last step it recomputes S_j from K_j (its
       * buffer is stable until the end), never read */
      wg_hold(sn);
      wg_fence();
      wg_issue_qk<BN>(sn, sQw, sK + ((more ? j + 1 : j) & 1) * BN * 128);
      wg_commit();
      /* (4) mask, online softmax: sc[4j + e] is (row g + 8·(e>>1), col 8j +
       * 2t + (e&1)).  The mask is applied on every step (a no-op below the
       * diagonal), without the mn kernel's branch: after a branch between
       * (3) and (5) ptxas hoists the wait of (5) to the join, above the
       * softmax, and nothing overlaps any more (checked in the SASS) */
      wg_mask<BN>(sc, j * BN, q0 + wrow0, g, t);
      float alpha[2];
      wg_softmax<BN>(sc, mrow, lrow, alpha, p.scale_log2);
      /* (5) the holds before the wait keep the softmax above it: the
       * compiler may otherwise sink that register arithmetic past the
       * (register-less) wait, serializing it behind the tensor cores */
      wg_hold(sc);
      wg_hold(alpha);
      wg_hold(lrow);
      wg_wait0();
      wg_hold(o);
      wg_hold(a);
      wg_hold(sn);
      /* (6) */
      wg_rescale<D>(o, alpha);
      wg_pack_p<BN>(a, sc);
      /* (7) V buffer j%3 */
      wg_issue_rs_mn<BN>(o, a, sV + (j % 3) * BN * 128);
    }
  }
  wg_wait0(); /* PV of the last step */
  wg_hold(o);
  cp_async_wait<0>();

  wg_store<D>(p, o, mrow, lrow, b, h, q0 + wrow0 + g, t);
#else
  __trap(); /* built without sm_90a: the launcher refuses before this */
#endif
}

/* ======================================================================== */
/* WGMMA backward (sm_90a, d = 128)                                         */
/* ======================================================================== */
/* FlashAttention-2's backward on wgmma, fused (FQ: dQ added into a workspace
 * by bulk reductions or atomics) or split in two kernels, with the
 * forward's operand conventions (Q, K, V, dO tiles loaded by load_tile_sw128
 * into [half][rows][64] 128-byte-swizzled shared memory; a tile serves as a
 * K-major operand when its rows are the M or N index, and as an MN-major B
 * operand, trans-b = 1, when its rows are the K index, as V in the forward):
 *
 *  - attn_bwd_dkdv_wgmma_kernel: a block owns BN = 128 keys of one kv head
 *    (warpgroup wg: keys 64wg..64wg+63) with K and V resident, and walks, for
 *    every query head of the group, the query tiles of 64 rows at or past the
 *    diagonal (Q, dO, LSE and D double- or triple-buffered):
 *        S^T  = K Q^T          m64n64, A = K (K-major), B = Q (K-major)
 *        dP^T = V dO^T         m64n64, A = V, B = dO
 *        P^T  = exp2(S^T·scale·log2e − LSE·log2e), 0 where key > query
 *        dS^T = P^T ∘ (dP^T − D)
 *        dV  += P^T dO         m64n128, A = bf16(P^T) from registers, B = dO
 *                              (MN-major, trans-b = 1)
 *        dK  += dS^T Q         m64n128, A = bf16(dS^T), B = Q (MN-major)
 *    dK, dV (64 + 64 accumulator registers) stay in registers over all
 *    steps: no atomics, GQA included; dK is multiplied by scale at the end
 *    (S = scale·QK^T, so dK = scale·dS^T Q, as the MMA and SIMPLE kernels).
 *    In S^T and dP^T the query is the column: LSE and D are per column,
 *    read from shared memory (cp.async, 4 bytes each, zero past S).
 *  - attn_bwd_dq_wgmma_kernel: a block owns BM = 128 query rows of one query
 *    head (64 per warpgroup, Q and dO resident) and walks the key tiles of 64
 *    up to the diagonal (K, V double-buffered):
 *        S = Q K^T, dP = dO V^T    m64n64, all K-major (S as in the forward)
 *        P = exp2(S·scale·log2e − LSE·log2e) (−inf mask of the forward),
 *        dS = P ∘ (dP − D)         (LSE, D per row: registers)
 *        dQ += dS K                m64n128, A = bf16(dS), B = K (MN-major)
 *    and writes bf16(scale·dQ).  dQ needs no workspace and no atomics; the
 *    price is S and dP computed twice (7 GEMMs where the fused MMA kernel
 *    runs 5; the FLOP count stays 2.5 × forward).
 *  - fused (attn_bwd_dkdv_wgmma_kernel<WGB_DQ_ATOMIC, ·>): the dK/dV kernel
 *    also stores bf16(dS^T) to shared memory (double-buffered), and after a
 *    barrier each warpgroup computes half the head dims of dQ = dS K for the
 *    step's 64 queries (m64n64, both operands MN-major from shared memory),
 *    left in flight over the next step's start and added into the fp32
 *    dQacc by float2 atomics before the next S^T, dP^T; dQacc is zeroed
 *    before and converted to bf16(scale·dQacc) after, as for the MMA
 *    backward.  5 GEMMs per tile against split's 7.  The atomics are its
 *    main cost (64Ki, 64/8 heads, fwd+bwd, two barriers: 669 ms as is, 496
 *    ms with the atomics left out, 465 ms without dQ at all;
 *    analysis/device/attn_dq_probe.sh, results/reference/h200/
 *    2026-11-30-s5-ab/v1/probe).
 *  - bulk (attn_bwd_dkdv_wgmma_kernel<WGB_DQ_BULK, ·>, the default): as
 *    fused, but the dQ tile goes to a 32 KB shared stage (float4 per
 *    thread, conflict-free, each warpgroup's half contiguous) and is added
 *    to a tiled dQacc ([B][n_q][ceil(S/64)] tiles in the stage's order,
 *    converted by attn_dq_convert_tiled_kernel) by cp.reduce.async.bulk
 *    .add.f32 (the TMA engine, reductions in L2), as FlashAttention-3 does:
 *    one 32 KB reduction by thread 0 after the middle barrier (two
 *    barriers), or one 16 KB reduction per warpgroup by its leader thread
 *    right after the warpgroup's stores and a warpgroup barrier (one
 *    barrier).  (A per-row variant, 64 reductions of 512 B per step, was
 *    slower than the atomics: results/reference/h200/2026-11-30-s4; a
 *    double-buffered stage gained nothing: 375-392 against 372-393 TFLOP/s;
 *    nor did the leader waiting for its reduction's read at the next
 *    stage, behind a warpgroup barrier, instead of before the block
 *    barrier: 387-407 against 391-412; nor a reduction per warp, 4 KB by
 *    its lane 0 after a __syncwarp, instead of the warpgroup barrier:
 *    403-414 against 409-420.)  What dQ still costs (64Ki, one
 *    barrier, fwd+bwd): 612 ms as is, 571 ms with the reductions left out,
 *    544 ms with the dQ GEMM left out (stage and reductions kept);
 *    attn_dq_probe.sh VARIANT=bulk, results/reference/h200/
 *    2026-11-30-s5-ab/v6/probe.
 *  All: S^T and dP^T are separate wgmma groups, so that P^T is computed and
 *  dV issued while dP^T runs, and dS^T computed while dV runs (FA3's
 *  intra-warpgroup overlap).
 *
 * Step order of the dK/dV kernels (BwdWalk, also the MMA one's;
 * PLATEAU_ATTN_BWD_WALK): desc (default) walks the query tiles from the last
 * down, every head of the group at each, so the blocks of a wave read the
 * same Q, dO tiles and add into the same dQ tiles at about the same time
 * (L2 hit rate of the bulk kernel 53% → 62%, DRAM throughput 29% → 22% of
 * peak at 16Ki: attention_ncu_l2.txt); asc walks head by head from the
 * diagonal.  desc: +1-3% fwd+bwd with bulk.
 *
 * Synchronization (the dQ kernel and the forward mn kernel: one
 * __syncthreads per step; the dK/dV kernel: two per step, or one,
 * PLATEAU_ATTN_WGMMA_SYNC).  A barrier is preceded in every thread by
 * cp.async.wait_group (its own copies of the next tiles landed) and
 * fence.proxy.async (those generic-proxy writes, and dS^T's and the dQ
 * stage's stores, ordered before the async-proxy reads of wgmma and the bulk
 * reductions of any thread after the barrier).  Every wgmma batch that
 * reads a buffered Q, dO (or K, V) tile is waited for (wgmma.wait_group)
 * inside its step.  With one barrier per step (at the start of the step:
 * the dQ kernel, the forward, and the dK/dV kernel with SYNC two, which adds
 * the middle barrier before dQ) tiles are double-buffered: after the barrier
 * of step j no wgmma of step j−1 on buffer (j+1)%2 is pending and it is
 * refilled for step j+1, overlapping step j.  The dK/dV kernel with SYNC one
 * keeps only the middle barrier (before dQ, which needs both warpgroups'
 * dS^T): Q, dO, LSE and D are triple-buffered and loaded two steps ahead —
 * after the middle barrier of step j, both warpgroups are done with step
 * j−1, so buffer (j+2)%3 is refilled for step j+2, and step j+1's tiles,
 * waited for by every thread before that barrier, are in place; one
 * barrier fewer per step measured +5-10% (bulk fwd+bwd 404-412 against
 * 382-383 TFLOP/s at 16Ki-64Ki, results/reference/h200/2026-11-30-s5-ab).
 * SYNC tma (the default; 245 registers against 255; fwd+bwd +0.4-1.6%
 * over one at 16Ki-128Ki, one/tma/tma/one in one lease; within ±1.5% in
 * two earlier leases: results/reference/h200/2026-11-30-s6-ab): as
 * one, but thread 0 loads the Q and dO tiles with TMA (a 4-D tensor map per
 * tensor, the 128-byte swizzle of load_tile_sw128, rows past S zero-filled)
 * onto an mbarrier per buffer, which every thread waits on before the
 * step's S^T; the threads no longer issue 8 cp.async each per step
 * (LSE and D stay on cp.async, landed by the middle barrier as before).
 * The one batch left in flight across a step boundary, dQ, reads only K and
 * its own dS^T buffer (double-buffered: a warpgroup may still read buffer
 * j&1 while the other writes the other one in step j+1).  The resident tiles
 * are never rewritten.  (Issuing a step's dQ at the start of the next, before
 * its S^T and dP^T, so that the tensor pipe would not drain at the step
 * boundary, gained nothing: 406-413 against 412.)  wgmma.fence precedes each
 * batch (the A fragments were just packed by ordinary instructions, the
 * accumulators last touched by the previous batch); wg_hold pins the
 * accumulator and A registers around fence / wait as in the forward.  In
 * the dQ kernel a warpgroup whose whole 64×64 tile lies above the diagonal
 * (all keys after all queries) skips the step's wgmma; the dK/dV kernel
 * computes such a tile (masked to 0, one per key block) since a branch
 * around its wgmma made ptxas serialize them (C7520). */
#define WGB_BN 128 /* dK/dV kernel: keys per block (two warpgroups)      */
#define WGB_BM 64  /* dK/dV kernel: queries per step                     */
#define WGQ_BM 128 /* dQ kernel: query rows per block (two warpgroups)   */
#define WGQ_BN 64  /* dQ kernel: keys per step                           */

/* dQ modes of the dK/dV kernel (its template argument FQ), one per variant
 * of the wgmma backward (PLATEAU_ATTN_WGMMA_BWD, see wgb_names) */
enum { WGB_DQ_NONE = 0, WGB_DQ_ATOMIC = 1, WGB_DQ_BULK = 2, WGB_DQ_COUNT = 3 };
/* synchronization schemes of the dK/dV kernel (its template argument SY;
 * PLATEAU_ATTN_WGMMA_SYNC, see sync_names) */
enum { WGB_SYNC_TWO = 0, WGB_SYNC_ONE = 1, WGB_SYNC_TMA = 2, WGB_SYNC_COUNT = 3 };
/* Q, dO (and LSE, D) buffers of the dK/dV kernel under scheme sy: 2 with
 * two barriers per step, 3 (loaded two steps ahead) with one */
static constexpr int wgb_nbuf(int sy) { return sy == WGB_SYNC_TWO ? 2 : 3; }
/* K, V [2][128][64] + Q, dO [nb buf][2][64][64] swizzled; with dQ dS^T [2
 * buf][128][64] swizzled; with bulk dQ the stage [2][8][128][4] f32; LSE, D
 * [nb buf][64] f32; with TMA 3 mbarriers (64 B); 1024 B to align.  Two
 * buffers: 133,120 B (split), 165,888 B (fused), 198,656 B (bulk); three:
 * 166,400 / 199,168 / 231,936 B, TMA 64 B more (the opt-in limit is
 * 232,448). */
static constexpr size_t wgb_dkdv_smem_bytes(int fq, int sy) {
  return (size_t)2 * WGB_BN * 128 * 2 + (size_t)wgb_nbuf(sy) * 2 * WGB_BM * 128 * 2 +
         (fq ? (size_t)2 * WGB_BN * WGB_BM * 2 : 0) +
         (fq == WGB_DQ_BULK ? (size_t)WGB_BM * 128 * 4 : 0) +
         (size_t)wgb_nbuf(sy) * 2 * WGB_BM * 4 + (sy == WGB_SYNC_TMA ? 64 : 0) + 1024;
}
static_assert(wgb_dkdv_smem_bytes(WGB_DQ_BULK, WGB_SYNC_TMA) <= 232448,
              "the dK/dV kernel's shared memory");
/* Q, dO [2][128][64] + K, V [2 buf][2][64][64] swizzled; 1024 B to align:
 * 132,096 B */
static constexpr size_t wgb_dq_smem_bytes() {
  return (size_t)2 * WGQ_BM * 128 * 2 + (size_t)2 * 2 * WGQ_BN * 128 * 2 + 1024;
}

#if PL_WGMMA_OK
/* 4-byte async copy global -> shared (cp-size 4 needs .ca); src_bytes = 0
 * zero-fills */
static __device__ __forceinline__ void cp_async4(void *dst, const void *src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(src_bytes));
}
/* Bulk (TMA engine) reduction: gdst[0..bytes/4) += ssrc[...] in fp32, done in
 * L2 by whole lines (bytes a multiple of 16, both addresses 16-byte aligned);
 * tracked by this thread's bulk groups. */
static __device__ __forceinline__ void bulk_add_f32(float *gdst, const float *ssrc,
                                                    uint32_t bytes) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gdst),
      "r"(smem_u32(ssrc)), "r"(bytes)
      : "memory");
}
static __device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
/* this thread's bulk operations have read their shared-memory source */
template <int N> static __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
/* ... and are complete (their global writes performed) */
static __device__ __forceinline__ void bulk_wait0() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
#endif



/* grid (ceil(S/128), n_kv, B), 256 threads (two warpgroups).  FQ (a
 * WGB_DQ_* mode): also dQ += dS K into p.dqacc, by fp32 atomics into its row
 * layout (ATOMIC, the fused variant) or by bulk reductions into its tiled
 * layout (BULK; see attn_dq_convert_tiled_kernel).  SY (a WGB_SYNC_*
 * scheme): two block barriers per step (at its start and before dQ; 2 Q, dO
 * (and LSE, D) buffers), or one (before dQ; 3 buffers; see
 * "Synchronization" above). */
template <int FQ, int SY>
static __global__ void __launch_bounds__(256, 1)
    attn_bwd_dkdv_wgmma_kernel(AttnParams p, const __grid_constant__ AttnTma tm) {
#if PL_WGMMA_OK
  constexpr int D = 128, BN = WGB_BN, BM = WGB_BM, NT = 256;
  constexpr bool BULK = FQ == WGB_DQ_BULK, ONEBAR = SY != WGB_SYNC_TWO, TMA = SY == WGB_SYNC_TMA;
  constexpr int NB = wgb_nbuf(SY);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char *base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sK = reinterpret_cast<bf16 *>(base);                       /* [2][BN][64]         */
  bf16 *sV = sK + BN * 128;                                        /* [2][BN][64]         */
  bf16 *sQ = sV + BN * 128;                                        /* [NB buf][2][BM][64] */
  bf16 *sdO = sQ + NB * BM * 128;                                  /* [NB buf][2][BM][64] */
  bf16 *sdS = sdO + NB * BM * 128; /* [2 buf][BN][64] (FQ) */
  float *sdQ = reinterpret_cast<float *>(sdS + (FQ ? 2 * BN * BM : 0)); /* [2][8][128][4] */
  float *sL = sdQ + (BULK ? BM * 128 : 0); /* [NB buf][BM] LSE */
  float *sDl = sL + NB * BM;               /* [NB buf][BM] D   */
  uint64_t *full = reinterpret_cast<uint64_t *>(sDl + NB * BM); /* [NB] (TMA) */

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = warp >> 2, wq = warp & 3, g = lane >> 2, t = lane & 3;
  const bool leader = (tid & 127) == 0; /* issues its warpgroup's bulk reductions (ONEBAR) */
  const BwdBlock<D> blk(p, BN); /* longest key blocks (most queries) first */
  const int hk = blk.hk, b = blk.b, S = blk.S, k0 = blk.k0;
  const int kw0 = k0 + wg * 64; /* this warpgroup's first key */
  const int64_t qstride = blk.qstride, kstride = blk.kstride;
  const bf16 *gK = blk.gK, *gV = blk.gV;

  const BwdWalk<BM> walk(p, hk, k0);
  const int niter = walk.niter;

  /* loads of step `it` into buffer `buf`: Q, dO tiles (cp.async by every
   * thread, or TMA by thread 0 onto mbarrier full[buf]); LSE and D of its 64
   * queries (threads 0..127, one float each; 0 past S) */
  auto issue = [&](int it, int buf) {
    const int h = walk.head(it);
    const int qs = walk.qs(it);
    if (TMA) {
      if (tid == 0)
        tma_load_pair<BM>(sQ + buf * BM * 128, sdO + buf * BM * 128, tm, h, qs, b, full + buf);
    } else {
      load_tile_sw128<BM, NT>(sQ + buf * BM * 128, blk.q(p, h), qs, S, qstride, tid);
      load_tile_sw128<BM, NT>(sdO + buf * BM * 128, blk.dout(p, h), qs, S, qstride, tid);
    }
    if (tid < 2 * BM) {
      const int i = tid & (BM - 1), q = qs + i;
      const float *src = (tid < BM ? p.lse : p.delta) + ((int64_t)b * p.nq + h) * S;
      float *dst = (tid < BM ? sL : sDl) + buf * BM + i;
      cp_async4(dst, src + (q < S ? q : S - 1), q < S ? 4 : 0);
    }
  };

  if (TMA && tid == 0) mbar_init_n(full, NB);
  load_tile_sw128<BN, NT>(sK, gK, k0, S, kstride, tid);
  load_tile_sw128<BN, NT>(sV, gV, k0, S, kstride, tid);
  issue(0, 0);
  cp_async_commit();
  if (ONEBAR) { /* two steps ahead: step 1 now, step it + 2 after step it's barrier */
    if (niter > 1) issue(1, 1);
    cp_async_commit();
  }

  float dk[64], dv[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) dk[i] = dv[i] = 0.f;
  const int key_r = kw0 + wq * 16 + g; /* this thread's keys: key_r, key_r + 8 */
  /* FQ: the dQ tile of a step (query tile pend_q of head pend_h; -1: none)
   * stays in flight over the barrier into the next step, which adds it to
   * dQacc (ATOMIC) or stores it to the stage sdQ, from which bulk reductions
   * add it to dQacc's tile (BULK): thread 0 after the middle barrier, all
   * 32 KB (two barriers), or each warpgroup's leader its 16 KB half at once
   * (one barrier) */
  float dqp[32];
  int pend_q = -1, pend_h = 0;
  /* BULK: the stage and dQacc's tiles hold dqp[4j..4j+3] of thread T =
   * 128·wg + T' at float4 1024·wg + 128·j + T': 16-byte stores,
   * conflict-free, each warpgroup's half contiguous */
  auto dq_stage = [&]() {
    float4 *s4 = reinterpret_cast<float4 *>(sdQ) + wg * 1024 + (tid & 127);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      s4[j * 128] = make_float4(dqp[4 * j], dqp[4 * j + 1], dqp[4 * j + 2], dqp[4 * j + 3]);
  };
  /* after a barrier past dq_stage: half -1 (all) by thread 0, else by the
   * leader of warpgroup `half` */
  auto dq_bulk = [&](int q0, int h, int half) {
    const int nqt = (S + BM - 1) / BM;
    const int64_t off = (((int64_t)b * p.nq + h) * nqt + q0 / BM) * (BM * D);
    if (half < 0)
      bulk_add_f32(p.dqacc + off, sdQ, BM * D * 4);
    else
      bulk_add_f32(p.dqacc + off + half * (BM * D / 2), sdQ + half * (BM * D / 2), BM * D * 2);
    bulk_commit();
  };
  /* element 4j + e: query q0 + 16wq + g + 8·(e>>1), d 64wg + 8j + 2t + (e&1) */
  auto dq_flush = [&](int q0, int h) {
    float *gdq = p.dqacc + (int64_t)b * S * qstride + (int64_t)h * D + wg * 64 + 2 * t;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int q = q0 + wq * 16 + g + 8 * hf;
      if (q < S) {
        float *row = gdq + (int64_t)q * qstride;
#pragma unroll
        for (int j = 0; j < 8; ++j)
          atomicAdd(reinterpret_cast<float2 *>(row + 8 * j),
                    make_float2(dqp[4 * j + 2 * hf], dqp[4 * j + 2 * hf + 1]));
      }
    }
  };

  /* dQ (64 queries × 128 d) = dS (64 × 128 keys) K (128 × 128) from dS^T
   * buffer dsb, both warpgroups' halves (so after a barrier past their
   * stores); warpgroup wg takes d half wg, m64n64, A = dS^T as MN-major (rows
   * = keys = K index, 64 queries per row), B = the K tile's half wg as
   * MN-major (all 128 keys, also on the diagonal tile where the second half
   * of dS is 0: no branch around wgmma).  One committed group. */
  auto dq_issue = [&](int dsb) {
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wg_m64n64_ss<1, 1>(dqp, wg_desc_mn(sdS + dsb * BN * BM + kk * 16 * 64, BM * 128),
                           wg_desc_mn(sK + wg * (BN * 64) + kk * 16 * 64, BN * 128), kk > 0);
    wg_commit();
  };

  for (int it = 0; it < niter; ++it) {
    const int buf = it % NB;
    if (!ONEBAR || it == 0) {
      /* step it's tiles in place and fenced for the async proxy; step it-1
       * (both warpgroups) done with buffer buf^1 (two barriers) */
      cp_async_wait<ONEBAR ? 1 : 0>();
      if (BULK && !ONEBAR && tid == 0) bulk_wait_read<0>(); /* the stage is free */
      fence_proxy_async();
      __syncthreads();
      if (!ONEBAR && it + 1 < niter) {
        issue(it + 1, buf ^ 1);
        cp_async_commit();
      }
    }
    const int qs = walk.qs(it);
    /* (the diagonal tile's second warpgroup has every key after every query:
     * its P^T is all masked, 0; computed anyway, as a branch around wgmma
     * makes ptxas serialize the kernel's wgmma) */
    const bf16 *cQ = sQ + buf * BM * 128, *cdO = sdO + buf * BM * 128;
    uint32_t ap[BM / 16][4], as[BM / 16][4];
    float st[32], dpt[32];
    bf16 *cdS = sdS + (it & 1) * BN * BM;
    if (FQ) { /* the previous step's dQ, run over the barrier, to dQacc or the stage */
      wg_wait0();
      wg_hold(dqp);
      if (FQ == WGB_DQ_ATOMIC && pend_q >= 0) dq_flush(pend_q, pend_h);
      if (BULK && pend_q >= 0) {
        dq_stage();
        if (ONEBAR) { /* this warpgroup's half, reduced at once by its leader */
          fence_proxy_async();
          named_bar_sync(1 + wg, 128);
          if (leader) dq_bulk(pend_q, pend_h, wg);
        }
      }
    }
    /* (TMA: step it's Q, dO landed; waited for after the previous dQ's
     * wgmma.wait_group, as a spin loop with a wgmma in flight made ptxas
     * inject a wait of its own: C7517) */
    if (TMA) mbar_wait(full + buf, (uint32_t)(it / NB) & 1u);
    /* S^T = K Q^T, dP^T = V dO^T (this warpgroup's 64 keys × 64 queries), one
     * group each: P^T is computed and dV issued while dP^T runs, dS^T while
     * dV runs (FlashAttention-3's intra-warpgroup overlap).  (Adding the
     * previous dQ to dQacc beside them instead, after a wait_group that
     * leaves them running, makes ptxas serialize the kernel's wgmma: C7514.) */
    wg_fence();
    wg_issue_qk<BM, BN>(st, sK + wg * 64 * 64, cQ);
    wg_commit();
    wg_issue_qk<BM, BN>(dpt, sV + wg * 64 * 64, cdO);
    wg_commit();
    wg_wait1(); /* S^T done; dP^T may still run */
    wg_hold(st);

    /* P^T: element 4j + e is key key_r + 8·(e>>1), query qs + 8j + 2t +
     * (e&1); LSE and D of that query from shared memory */
    const float *cL = sL + buf * BM, *cD = sDl + buf * BM;
    const bool need_mask = (qs < kw0 + 63) || (qs + BM > S);
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
      const float2 l2 = *reinterpret_cast<const float2 *>(cL + 8 * j + 2 * t);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float pr = exp2f(st[4 * j + e] * p.scale_log2 - ((e & 1) ? l2.y : l2.x) * LOG2E_F);
        if (need_mask) {
          const int key = key_r + 8 * (e >> 1), q = qs + 8 * j + 2 * t + (e & 1);
          if (key > q || q >= S) pr = 0.f;
        }
        st[4 * j + e] = pr;
      }
    }
    /* dV += P^T dO: A from registers (16 queries per fragment), B = the dO
     * tile as MN-major (rows = queries = K index; LBO = one d half, BM·128 B) */
    wg_pack_p<BM>(ap, st);
    wg_issue_rs_mn<BM>(dv, ap, cdO);
    wg_wait1(); /* dP^T done; dV may still run */
    wg_hold(dpt);
    /* dS^T = P^T ∘ (dP^T − D) */
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
      const float2 d2 = *reinterpret_cast<const float2 *>(cD + 8 * j + 2 * t);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dpt[4 * j + e] = st[4 * j + e] * (dpt[4 * j + e] - ((e & 1) ? d2.y : d2.x));
    }
    wg_pack_p<BM>(as, dpt);
    if (FQ) {
      /* dS^T to shared memory, [key][64 queries] 128-byte-swizzled (a
       * query pair per 32-bit store: as[kk][2hf + j] holds key key_r + 8hf,
       * queries 16kk + 8j + 2t, +1), the A operand of dQ += dS K below */
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = key_r - k0 + 8 * (i & 1), ch = 2 * kk + (i >> 1);
          *reinterpret_cast<uint32_t *>(cdS + key * 64 + ((ch ^ (key & 7)) * 8) + 2 * t) =
              as[kk][i];
        }
    }
    /* dK += dS^T Q: B = the Q tile as MN-major */
    wg_issue_rs_mn<BM>(dk, as, cQ);
    if (!FQ) {
      wg_wait0();
      wg_hold(dv);
      wg_hold(dk);
    }
    if (FQ || ONEBAR) {
      /* the middle barrier: both warpgroups' dS^T stored (FQ); with one
       * barrier per step also step it+1's tiles landed (each thread's own
       * copies waited for, then fenced) and step it-1 done with buffer
       * (it+2) % 3, refilled right after; a leader's last bulk reduction has
       * read its stage (rewritten next step) */
      if (ONEBAR) cp_async_wait<0>();
      if (BULK && ONEBAR && leader) bulk_wait_read<0>();
      fence_proxy_async(); /* (BULK: also the stage's stores before the bulk read) */
      __syncthreads();
      if (ONEBAR) {
        if (it + 2 < niter) issue(it + 2, (it + 2) % NB);
        cp_async_commit();
      }
    }
    if (FQ) {
      /* dQ of this step (both warpgroups' dS^T halves: hence the barrier
       * above), issued now and left in flight, flushed by the next step (or
       * after the loop); dS^T is
       * double-buffered, as a warpgroup may still read buffer it&1 when the
       * other writes the other one in the next step. */
      if (BULK && !ONEBAR && tid == 0 && pend_q >= 0) dq_bulk(pend_q, pend_h, -1);
      dq_issue(it & 1);
      wg_wait1(); /* dV, dK done: ap, as and the Q, dO buffer free */
      wg_hold(dv);
      wg_hold(dk);
      wg_hold(ap);
      wg_hold(as);
      pend_q = qs;
      pend_h = walk.head(it);
    }
  }
  if (FQ == WGB_DQ_ATOMIC) {
    wg_wait0();
    wg_hold(dqp);
    if (pend_q >= 0) dq_flush(pend_q, pend_h);
  }
  if (BULK) { /* the last step's dQ; then every bulk reduction complete */
    wg_wait0();
    wg_hold(dqp);
    if (!ONEBAR) {
      if (tid == 0) bulk_wait_read<0>();
      __syncthreads();
    } /* (one barrier: the leaders waited before the last step's barrier) */
    if (pend_q >= 0) dq_stage();
    fence_proxy_async();
    if (ONEBAR) {
      named_bar_sync(1 + wg, 128);
      if (leader) {
        if (pend_q >= 0) dq_bulk(pend_q, pend_h, wg);
        bulk_wait0();
      }
    } else {
      __syncthreads();
      if (tid == 0) {
        if (pend_q >= 0) dq_bulk(pend_q, pend_h, -1);
        bulk_wait0();
      }
    }
  }
  cp_async_wait<0>();

  blk.store_dkdv(p, key_r, t, dk, dv); /* this thread's keys key_r, key_r + 8 */
#else
  __trap(); /* built without sm_90a: the launcher refuses before this */
#endif
}

/* grid (ceil(S/128), n_q, B), 256 threads (two warpgroups). */
static __global__ void __launch_bounds__(256, 1) attn_bwd_dq_wgmma_kernel(AttnParams p) {
#if PL_WGMMA_OK
  constexpr int D = 128, BM = WGQ_BM, BN = WGQ_BN, NT = 256;
  static_assert(BM == WG_BM, "wg_block's query tiles");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char *base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sQ = reinterpret_cast<bf16 *>(base); /* [2][BM][64]         */
  bf16 *sdO = sQ + BM * 128;                 /* [2][BM][64]         */
  bf16 *sK = sdO + BM * 128;                 /* [2 buf][2][BN][64]  */
  bf16 *sV = sK + 2 * BN * 128;              /* [2 buf][2][BN][64]  */

  const WgBlock w = wg_block<BN>(p); /* query tiles last to first */
  const int tid = w.tid, wg = w.wg, wq = w.wq, g = w.g, t = w.t, h = w.h, b = w.b;
  const int S = p.S, q0 = w.q0, nkb = w.nkb;
  const int64_t qstride = w.qstride, kstride = w.kstride;
  const bf16 *gK = w.gK, *gV = w.gV;
  const bf16 *gdO = p.dout + (int64_t)b * S * qstride + (int64_t)h * D;

  load_tile_sw128<BM, NT>(sQ, w.gQ, q0, S, qstride, tid);
  load_tile_sw128<BM, NT>(sdO, gdO, q0, S, qstride, tid);
  load_tile_sw128<BN, NT>(sK, gK, 0, S, kstride, tid);
  load_tile_sw128<BN, NT>(sV, gV, 0, S, kstride, tid);
  cp_async_commit();

  const int wrow0 = wg * 64 + wq * 16; /* this warp's first row in the tile */
  const int row = q0 + wrow0 + g;      /* this thread's rows: row, row + 8  */
  float lrow[2], drow[2];              /* LSE·log2e and D of those rows     */
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = row + 8 * hf;
    const int64_t i = ((int64_t)b * p.nq + h) * S + (r < S ? r : S - 1);
    lrow[hf] = r < S ? p.lse[i] * LOG2E_F : 0.f;
    drow[hf] = r < S ? p.delta[i] : 0.f;
  }
  float dq[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) dq[i] = 0.f;

  for (int kb = 0; kb < nkb; ++kb) {
    const int buf = kb & 1;
    /* step kb's K, V in place and fenced; step kb-1 done with buf^1 */
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    if (kb + 1 < nkb) {
      load_tile_sw128<BN, NT>(sK + (buf ^ 1) * BN * 128, gK, (kb + 1) * BN, S, kstride, tid);
      load_tile_sw128<BN, NT>(sV + (buf ^ 1) * BN * 128, gV, (kb + 1) * BN, S, kstride, tid);
      cp_async_commit();
    }
    const int k0 = kb * BN;
    if (k0 > q0 + wg * 64 + 63) continue; /* every key after every row of this warpgroup */
    const bf16 *cK = sK + buf * BN * 128, *cV = sV + buf * BN * 128;

    /* S = Q K^T, dP = dO V^T for this warpgroup's 64 rows */
    float s[32], dp[32];
    wg_fence();
    wg_issue_qk<BN, BM>(s, sQ + wg * 64 * 64, cK);
    wg_issue_qk<BN, BM>(dp, sdO + wg * 64 * 64, cV);
    wg_commit();
    wg_wait0();
    wg_hold(s);
    wg_hold(dp);

    /* causal mask (−inf: P = exp2(−inf) = 0), P, dS in place of dP */
    if (k0 + BN - 1 > q0 + wrow0) wg_mask<BN>(s, k0, q0 + wrow0, g, t);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int hf = (i >> 1) & 1; /* row g + 8·hf */
      const float pr = exp2f(s[i] * p.scale_log2 - lrow[hf]);
      dp[i] = pr * (dp[i] - drow[hf]);
    }

    /* dQ += dS K: A = bf16(dS) from registers, B = the K tile as MN-major
     * (rows = keys = K index; LBO = one d half, BN·128 B) */
    uint32_t a[BN / 16][4];
    wg_pack_p<BN>(a, dp);
    wg_issue_rs_mn<BN>(dq, a, cK);
    wg_wait0();
    wg_hold(dq);
  }
  cp_async_wait<0>();

  bf16 *gdQ = p.dq + (int64_t)b * S * qstride + (int64_t)h * D;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = row + 8 * hf;
    if (r < S) {
      bf16 *qr = gdQ + (int64_t)r * qstride;
#pragma unroll
      for (int jd = 0; jd < D / 8; ++jd)
        *reinterpret_cast<__nv_bfloat162 *>(qr + jd * 8 + 2 * t) = __floats2bfloat162_rn(
            dq[4 * jd + 2 * hf] * p.scale, dq[4 * jd + 2 * hf + 1] * p.scale);
    }
  }
#else
  __trap(); /* built without sm_90a: the launcher refuses before this */
#endif
}

/* 1 when the device code was built for sm_90a (wgmma available) */
static __global__ void wgmma_probe_kernel(int *out) { *out = PL_WGMMA_OK; }

/* ======================================================================== */
/* launchers                                                                */
/* ======================================================================== */

/* Tile configurations (compile-time; see the kernels' comments). */
#define FWD_NW 4
/* keys per forward step (one barrier interval): 64; scores are computed in
 * sub-tiles of FWD_BNS keys: 32 for d = 128 keeps the score and output tiles
 * in 255 registers without spills */
#define FWD_BN(D) 64
#define FWD_BNS(D) ((D) == 128 ? 32 : 64)
#define BWD_NW 4

template <int D>
static constexpr size_t fwd_smem_bytes() {
  return (size_t)(32 * FWD_NW + 4 * FWD_BN(D)) * (D + 8) * sizeof(bf16);
}
template <int D>
static constexpr size_t bwd_smem_bytes() {
  return (size_t)(16 * BWD_NW) * (D + 8) * 2 * sizeof(bf16) + /* K, V       */
         (size_t)(16 * BWD_NW) * (D + 8) * 4 * sizeof(bf16) + /* Q, dO ×2   */
         (size_t)4 * (16 * BWD_NW) * sizeof(float);            /* LSE, D ×2 */
}

static pl_status cuda_check(const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention: %s: %s", what,
                        cudaGetErrorString(e));
  return PL_OK;
}

static AttnParams make_params(const pl_attn_shape *sh) {
  AttnParams p;
  memset(&p, 0, sizeof p);
  p.S = (int)sh->seq;
  p.nq = sh->n_q;
  p.nkv = sh->n_kv;
  p.group = sh->n_q / sh->n_kv;
  p.scale = pl_attn_scale(sh);
  p.scale_log2 = p.scale * LOG2E_F;
  return p;
}

static bool use_mma(const pl_attn_shape *sh) {
  return sh->algo != PL_ATTN_SIMPLE;
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
    cudaError_t e = cudaMemcpyAsync(&h, d, sizeof(int), cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    pl_free(dev, d);
    if (e != cudaSuccess)
      return pl_set_error(PL_ERUNTIME, "attention: wgmma probe: %s", cudaGetErrorString(e));
    avail = h;
  }
  if (!avail)
    return pl_set_error(PL_EUNSUPPORTED, "attention: the wgmma kernel needs device code for "
                                         "sm_90a: rebuild with CUDA_ARCH=90a");
  return PL_OK;
}

/* 1 if the wgmma kernel can run on s's device (quietly: 0 on any failure). */
static int wgmma_built(pl_stream *s) {
  if (wgmma_available(s) == PL_OK) return 1;
  pl_clear_error();
  return 0;
}

/* *out = the index in names[0..n) of environment variable var's value, or
 * dflt when var is unset or empty; another value is refused, naming them. */
static pl_status env_choice(const char *var, const char *const *names, int n, int dflt,
                            int *out) {
  const char *e = getenv(var);
  *out = dflt;
  if (!e || !*e) return PL_OK;
  for (int i = 0; i < n; i++)
    if (!strcmp(e, names[i])) {
      *out = i;
      return PL_OK;
    }
  char allowed[128] = "";
  for (int i = 0; i < n; i++)
    snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%s",
             i ? (i + 1 < n ? ", " : " or ") : "", names[i]);
  return pl_set_error(PL_EINVAL, "attention: %s=%s: must be %s", var, e, allowed);
}

/* PLATEAU_ATTN_WGMMA_V = ovtma (default) | mn128tma | mn128 | mn128pp | pipe |
 * mn | transpose: the V path of the wgmma forward (see its section).  Read
 * by the launcher at each wgmma launch, never by device code, as model/attention.c reads
 * PLATEAU_ATTN_FWD (so a test can switch paths with setenv). */
static pl_status wgmma_v_path(int *vm) {
  return env_choice("PLATEAU_ATTN_WGMMA_V", wg_v_names, WG_V_COUNT, WG_V_OVTMA, vm);
}

/* *m = the TMA descriptor of a [B][S][heads][128] bf16 tensor at ptr, box
 * rows × 64 (see AttnTma); the driver's encoder is found through the
 * runtime (no libcuda link) */
static pl_status tma_map_bshd(CUtensorMap *m, const void *ptr, int heads, int S, unsigned B,
                              int rows) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
  if (!encode) {
    cudaDriverEntryPointQueryResult q;
    void *fn = NULL;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn)
      return pl_set_error(PL_ERUNTIME, "attention (tma): cuTensorMapEncodeTiled not found: %s",
                          cudaGetErrorString(e));
    encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
  }
  const cuuint64_t dims[4] = {128, (cuuint64_t)heads, (cuuint64_t)S, B};
  const cuuint64_t strides[3] = {128 * 2, (cuuint64_t)heads * 128 * 2,
                                 (cuuint64_t)S * heads * 128 * 2};
  const cuuint32_t box[4] = {64, 1, (cuuint32_t)rows, 1}, estr[4] = {1, 1, 1, 1};
  CUresult r = encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void *>(ptr), dims,
                      strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return pl_set_error(PL_ERUNTIME, "attention (tma): cuTensorMapEncodeTiled: error %d", (int)r);
  return PL_OK;
}

template <int VM>
static pl_status fwd_wgmma_launch(cudaStream_t st, AttnParams p, unsigned B) {
  constexpr size_t smem = wg_smem_bytes(VM);
  const void *kern;
  if constexpr (VM == WG_V_PIPE)
    kern = (const void *)attn_fwd_wgmma_pipe_kernel<WG_PIPE_BN>;
  else
    kern = (const void *)attn_fwd_wgmma_kernel<VM>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)smem);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention fwd wgmma (V path %s): smem %zu B: %s",
                        wg_v_names[VM], smem, cudaGetErrorString(e));
  dim3 grid((unsigned)((p.S + WG_BM - 1) / WG_BM), (unsigned)p.nq, B);
  if constexpr (VM == WG_V_PIPE) {
    attn_fwd_wgmma_pipe_kernel<WG_PIPE_BN><<<grid, 256, smem, st>>>(p);
  } else {
    AttnTma tm;
    memset(&tm, 0, sizeof tm);
    if (VM == WG_V_MN128TMA || VM == WG_V_OVTMA) {
      PL_TRY(tma_map_bshd(&tm.a, p.k, p.nkv, p.S, B, wg_bn(VM)));
      PL_TRY(tma_map_bshd(&tm.b, p.v, p.nkv, p.S, B, wg_bn(VM)));
    }
    attn_fwd_wgmma_kernel<VM><<<grid, 256, smem, st>>>(p, tm);
  }
  return cuda_check("fwd wgmma launch");
}

template <int D>
static pl_status fwd_launch(pl_stream *ps, const pl_attn_shape *sh, AttnParams p) {
  cudaStream_t st = (cudaStream_t)pl_stream_native(ps);
  const unsigned B = (unsigned)sh->batch;
  if (D == 128 && (sh->algo == PL_ATTN_WGMMA ||
                   (sh->algo == PL_ATTN_AUTO && wgmma_built(ps)))) {
    PL_TRY(wgmma_available(ps));
    int vm = WG_V_TRANSPOSE;
    PL_TRY(wgmma_v_path(&vm));
    if (vm == WG_V_MN) return fwd_wgmma_launch<WG_V_MN>(st, p, B);
    if (vm == WG_V_MN128) return fwd_wgmma_launch<WG_V_MN128>(st, p, B);
    if (vm == WG_V_PIPE) return fwd_wgmma_launch<WG_V_PIPE>(st, p, B);
    if (vm == WG_V_MN128PP) return fwd_wgmma_launch<WG_V_MN128PP>(st, p, B);
    if (vm == WG_V_MN128TMA) return fwd_wgmma_launch<WG_V_MN128TMA>(st, p, B);
    if (vm == WG_V_OVTMA) return fwd_wgmma_launch<WG_V_OVTMA>(st, p, B);
    return fwd_wgmma_launch<WG_V_TRANSPOSE>(st, p, B);
  }
  if (use_mma(sh)) {
    constexpr int BM = 32 * FWD_NW;
    constexpr size_t smem = fwd_smem_bytes<D>();
    auto kern = attn_fwd_mma_kernel<D, FWD_NW, FWD_BN(D), FWD_BNS(D)>;
    cudaError_t e = cudaFuncSetAttribute(
        kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
      return pl_set_error(PL_ERUNTIME, "attention fwd: smem %zu B: %s", smem,
                          cudaGetErrorString(e));
    dim3 grid((unsigned)((p.S + BM - 1) / BM), (unsigned)p.nq, B);
    kern<<<grid, FWD_NW * 32, smem, st>>>(p);
    return cuda_check("fwd mma launch");
  }
  dim3 grid((unsigned)((p.S + 3) / 4), (unsigned)p.nq, B);
  attn_fwd_simple_kernel<D><<<grid, 128, 0, st>>>(p);
  return cuda_check("fwd simple launch");
}

/* Variants of the wgmma backward (PLATEAU_ATTN_WGMMA_BWD), indexed by the
 * dK/dV kernel's dQ mode: split (a dK/dV and a dQ kernel, P recomputed in
 * each, no atomics), fused (one kernel, dQ through fp32 atomics into the
 * workspace) or bulk (fused with one bulk reduction per step into a tiled
 * workspace; the default). */
static const char *const wgb_names[WGB_DQ_COUNT] = {"split", "fused", "bulk"};
static pl_status wgmma_bwd_variant(int *mode) {
  return env_choice("PLATEAU_ATTN_WGMMA_BWD", wgb_names, WGB_DQ_COUNT, WGB_DQ_BULK, mode);
}

/* PLATEAU_ATTN_BWD_WALK = desc (default) | asc: the order of the dK/dV
 * kernels' steps (BwdWalk). */
static const char *const walk_names[BWD_WALK_COUNT] = {"asc", "desc"};
static pl_status bwd_walk_order(int *w) {
  return env_choice("PLATEAU_ATTN_BWD_WALK", walk_names, BWD_WALK_COUNT, BWD_WALK_DESC, w);
}

/* The wgmma backward after the delta kernel.  split: dK/dV, then dQ
 * (independent; both read D and LSE; dQ written directly).  fused, bulk:
 * dQacc (acc_el floats) zeroed, the dK/dV kernel adding dS K into it (row
 * layout, its first nq_el floats, or tiled for bulk), then the bf16
 * conversion. */
template <int SY> static void (*dkdv_kernel(int mode))(AttnParams, AttnTma) {
  return mode == WGB_DQ_NONE     ? attn_bwd_dkdv_wgmma_kernel<WGB_DQ_NONE, SY>
         : mode == WGB_DQ_ATOMIC ? attn_bwd_dkdv_wgmma_kernel<WGB_DQ_ATOMIC, SY>
                                 : attn_bwd_dkdv_wgmma_kernel<WGB_DQ_BULK, SY>;
}

/* PLATEAU_ATTN_WGMMA_SYNC = tma (default) | one | two: the wgmma dK/dV
 * kernel's synchronization scheme (see "Synchronization"; tma: one barrier,
 * Q and dO loaded by TMA onto mbarriers). */
static const char *const sync_names[WGB_SYNC_COUNT] = {"two", "one", "tma"};
static pl_status wgmma_bwd_sync(int *sy) {
  return env_choice("PLATEAU_ATTN_WGMMA_SYNC", sync_names, WGB_SYNC_COUNT, WGB_SYNC_TMA, sy);
}

static pl_status bwd_wgmma_launch(cudaStream_t st, AttnParams p, unsigned B, int64_t nq_el,
                                  size_t acc_el, int mode, int sy) {
  const bool fused = mode != WGB_DQ_NONE;
  const size_t smem_kv = wgb_dkdv_smem_bytes(mode, sy), smem_q = wgb_dq_smem_bytes();
  auto kv = sy == WGB_SYNC_TWO   ? dkdv_kernel<WGB_SYNC_TWO>(mode)
            : sy == WGB_SYNC_ONE ? dkdv_kernel<WGB_SYNC_ONE>(mode)
                                 : dkdv_kernel<WGB_SYNC_TMA>(mode);
  AttnTma tm;
  memset(&tm, 0, sizeof tm);
  if (sy == WGB_SYNC_TMA) {
    PL_TRY(tma_map_bshd(&tm.a, p.q, p.nq, p.S, B, WGB_BM));
    PL_TRY(tma_map_bshd(&tm.b, p.dout, p.nq, p.S, B, WGB_BM));
  }
  cudaError_t e =
      cudaFuncSetAttribute(kv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_kv);
  if (e == cudaSuccess && !fused)
    e = cudaFuncSetAttribute(attn_bwd_dq_wgmma_kernel,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_q);
  if (e == cudaSuccess && fused)
    e = cudaMemsetAsync(p.dqacc, 0, acc_el * sizeof(float), st);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention bwd wgmma: smem %zu / %zu B, memset: %s",
                        smem_kv, smem_q, cudaGetErrorString(e));
  dim3 gkv((unsigned)((p.S + WGB_BN - 1) / WGB_BN), (unsigned)p.nkv, B);
  kv<<<gkv, 256, smem_kv, st>>>(p, tm);
  PL_TRY(cuda_check("bwd dkdv wgmma launch"));
  if (mode == WGB_DQ_BULK) {
    const int64_t ntiles = (int64_t)B * p.nq * ((p.S + 63) / 64);
    attn_dq_convert_tiled_kernel<<<(unsigned)(ntiles * 2048 / 256), 256, 0, st>>>(
        p.dqacc, p.dq, p.S, p.nq, ntiles, p.scale);
    return cuda_check("bwd dq convert (tiled) launch");
  }
  if (fused) {
    const int64_t nthr = (nq_el + 3) / 4;
    attn_dq_convert_kernel<<<(unsigned)((nthr + 255) / 256), 256, 0, st>>>(p.dqacc, p.dq, nq_el,
                                                                           p.scale);
    return cuda_check("bwd dq convert launch");
  }
  dim3 gq((unsigned)((p.S + WGQ_BM - 1) / WGQ_BM), (unsigned)p.nq, B);
  attn_bwd_dq_wgmma_kernel<<<gq, 256, smem_q, st>>>(p);
  return cuda_check("bwd dq wgmma launch");
}

/* PL_ATTN_WGMMA runs the wgmma backward (d = 128, sm_90a builds; refused
 * otherwise), AUTO too for d = 128 on sm_90a builds; MMA (and AUTO
 * otherwise) the MMA backward. */
template <int D>
static pl_status bwd_launch(pl_stream *ps, const pl_attn_shape *sh, AttnParams p) {
  cudaStream_t st = (cudaStream_t)pl_stream_native(ps);
  const unsigned B = (unsigned)sh->batch;
  const bool wg = D == 128 && (sh->algo == PL_ATTN_WGMMA ||
                                (sh->algo == PL_ATTN_AUTO && wgmma_built(ps)));
  int mode = WGB_DQ_BULK, sy = WGB_SYNC_TMA;
  if (wg) {
    PL_TRY(wgmma_available(ps));
    PL_TRY(wgmma_bwd_variant(&mode));
    PL_TRY(wgmma_bwd_sync(&sy));
  }
  PL_TRY(bwd_walk_order(&p.walk));
  const int64_t nq_el = sh->batch * sh->seq * (int64_t)sh->n_q * D;
  dim3 rows((unsigned)((p.S + 3) / 4), (unsigned)p.nq, B);
  attn_delta_kernel<D><<<rows, 128, 0, st>>>(p);
  PL_TRY(cuda_check("bwd delta launch"));
  if (wg) return bwd_wgmma_launch(st, p, B, nq_el, pl_attn_dqacc_elems(sh), mode, sy);
  if (!use_mma(sh)) {
    attn_bwd_dq_simple_kernel<D><<<rows, 128, 0, st>>>(p);
    PL_TRY(cuda_check("bwd dq simple launch"));
    dim3 krows((unsigned)((p.S + 3) / 4), (unsigned)p.nkv, B);
    attn_bwd_dkdv_simple_kernel<D><<<krows, 128, 0, st>>>(p);
    return cuda_check("bwd dkdv simple launch");
  }
  cudaError_t e = cudaMemsetAsync(p.dqacc, 0, (size_t)nq_el * sizeof(float), st);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention bwd: memset: %s",
                        cudaGetErrorString(e));
  constexpr int BN = 16 * BWD_NW;
  constexpr size_t smem = bwd_smem_bytes<D>();
  auto kern = attn_bwd_mma_kernel<D, BWD_NW>;
  e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int)smem);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention bwd: smem %zu B: %s", smem,
                        cudaGetErrorString(e));
  dim3 grid((unsigned)((p.S + BN - 1) / BN), (unsigned)p.nkv, B);
  kern<<<grid, BWD_NW * 32, smem, st>>>(p);
  PL_TRY(cuda_check("bwd mma launch"));
  const int64_t nthr = (nq_el + 3) / 4;
  attn_dq_convert_kernel<<<(unsigned)((nthr + 255) / 256), 256, 0, st>>>(
      p.dqacc, p.dq, nq_el, p.scale);
  return cuda_check("bwd dq convert launch");
}

extern "C" pl_status pl_cuda_attn_fwd(pl_stream *s, const pl_attn_shape *sh,
                                      const void *q, const void *k,
                                      const void *v, void *o, float *lse) {
  PL_TRY(pl_attn_check(sh, PL_BACKEND_CUDA));
  if (sh->seq == 0 || sh->batch == 0) return PL_OK;
  AttnParams p = make_params(sh);
  p.q = (const bf16 *)q;
  p.k = (const bf16 *)k;
  p.v = (const bf16 *)v;
  p.out = (bf16 *)o;
  p.lse = lse;
  if (sh->head_dim == 64) return fwd_launch<64>(s, sh, p);
  return fwd_launch<128>(s, sh, p);
}

extern "C" pl_status pl_cuda_attn_bwd(pl_stream *s, const pl_attn_shape *sh,
                                      const void *q, const void *k,
                                      const void *v, const void *o,
                                      const void *dout, const float *lse,
                                      void *dq, void *dk, void *dv, void *ws) {
  PL_TRY(pl_attn_check(sh, PL_BACKEND_CUDA));
  if (sh->seq == 0 || sh->batch == 0) return PL_OK;
  if (!ws)
    return pl_set_error(PL_EINVAL, "attention bwd: workspace is NULL (need "
                                   "%zu bytes)",
                        pl_attn_bwd_workspace_bytes(sh, PL_BACKEND_CUDA));
  AttnParams p = make_params(sh);
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
  p.delta = p.dqacc + pl_attn_dqacc_elems(sh);
  if (sh->head_dim == 64) return bwd_launch<64>(s, sh, p);
  return bwd_launch<128>(s, sh, p);
}

/* 1 when the wgmma kernels run for sh on s; else 0 with *name the kernel
 * that runs (for the result notes below). */
static int wgmma_runs(pl_stream *s, const pl_attn_shape *sh, const char **name) {
  const bool want = sh->algo == PL_ATTN_WGMMA || sh->algo == PL_ATTN_AUTO;
  if (sh->algo == PL_ATTN_SIMPLE)
    *name = "simple";
  else if (sh->head_dim != 128 || !want || !wgmma_built(s))
    *name = sh->algo == PL_ATTN_WGMMA ? "wgmma (unavailable)" : "mma";
  else
    return 1;
  return 0;
}

/* The forward kernel pl_cuda_attn_fwd runs for sh on s (sh->algo already
 * resolved from PLATEAU_ATTN_FWD), for result notes. */
extern "C" const char *pl_cuda_attn_fwd_kernel(pl_stream *s, const pl_attn_shape *sh) {
  static const char *const wg[WG_V_COUNT] = {
      "wgmma/transpose", "wgmma/mn",       "wgmma/mn128", "wgmma/pipe",
      "wgmma/mn128pp",   "wgmma/mn128tma", "wgmma/ovtma"};
  const char *name;
  if (!wgmma_runs(s, sh, &name)) return name;
  int vm = WG_V_OVTMA;
  if (wgmma_v_path(&vm) != PL_OK) {
    pl_clear_error();
    return "wgmma (bad PLATEAU_ATTN_WGMMA_V)";
  }
  return wg[vm];
}

/* The backward kernels pl_cuda_attn_bwd runs for sh on s (sh->algo resolved
 * from PLATEAU_ATTN_BWD), for result notes. */
extern "C" const char *pl_cuda_attn_bwd_kernel(pl_stream *s, const pl_attn_shape *sh) {
  const char *name;
  if (!wgmma_runs(s, sh, &name)) return name;
  int mode = WGB_DQ_BULK, sy = WGB_SYNC_TMA, walk = BWD_WALK_DESC;
  if (wgmma_bwd_variant(&mode) != PL_OK || wgmma_bwd_sync(&sy) != PL_OK ||
      bwd_walk_order(&walk) != PL_OK) {
    pl_clear_error();
    return "wgmma (bad PLATEAU_ATTN_WGMMA_BWD, _SYNC or PLATEAU_ATTN_BWD_WALK)";
  }
  /* the variant, then what differs from the defaults: "/2bar" (two
   * barriers per step, cp.async loads), "/cp" (one barrier, Q and dO by
   * cp.async instead of TMA), "/asc" (step order) */
  static const char *const names[WGB_DQ_COUNT][WGB_SYNC_COUNT][BWD_WALK_COUNT] = {
      {{"wgmma/split/2bar/asc", "wgmma/split/2bar"},
       {"wgmma/split/cp/asc", "wgmma/split/cp"},
       {"wgmma/split/asc", "wgmma/split"}},
      {{"wgmma/fused/2bar/asc", "wgmma/fused/2bar"},
       {"wgmma/fused/cp/asc", "wgmma/fused/cp"},
       {"wgmma/fused/asc", "wgmma/fused"}},
      {{"wgmma/bulk/2bar/asc", "wgmma/bulk/2bar"},
       {"wgmma/bulk/cp/asc", "wgmma/bulk/cp"},
       {"wgmma/bulk/asc", "wgmma/bulk"}}};
  return names[mode][sy][walk];
}
