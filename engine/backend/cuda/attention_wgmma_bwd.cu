/* attention_wgmma_bwd.cu — the wgmma attention backward (sm_90a, d = 128). */
#include <string.h>

#include "backend/cuda/attention_common.cuh"

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


/* ======================================================================== */
/* launch                                                                   */
/* ======================================================================== */

template <int SY> static void (*dkdv_kernel(int mode))(AttnParams, AttnTma) {
  return mode == WGB_DQ_NONE     ? attn_bwd_dkdv_wgmma_kernel<WGB_DQ_NONE, SY>
         : mode == WGB_DQ_ATOMIC ? attn_bwd_dkdv_wgmma_kernel<WGB_DQ_ATOMIC, SY>
                                 : attn_bwd_dkdv_wgmma_kernel<WGB_DQ_BULK, SY>;
}

/* The wgmma backward after the delta kernel.  split: dK/dV, then dQ
 * (independent; both read D and LSE; dQ written directly).  fused, bulk:
 * dQacc (acc_el floats) zeroed, the dK/dV kernel adding dS K into it (row
 * layout, its first nq_el floats, or tiled for bulk), then the bf16
 * conversion. */
pl_status pl__attn_wgmma_bwd(cudaStream_t st, const AttnParams &p, unsigned B, int64_t nq_el,
                             size_t acc_el, int mode, int sy) {
  const bool fused = mode != WGB_DQ_NONE;
  const size_t smem_kv = wgb_dkdv_smem_bytes(mode, sy), smem_q = wgb_dq_smem_bytes();
  auto kv = sy == WGB_SYNC_TWO   ? dkdv_kernel<WGB_SYNC_TWO>(mode)
            : sy == WGB_SYNC_ONE ? dkdv_kernel<WGB_SYNC_ONE>(mode)
                                 : dkdv_kernel<WGB_SYNC_TMA>(mode);
  AttnTma tm;
  memset(&tm, 0, sizeof tm);
  if (sy == WGB_SYNC_TMA) {
    PL_TRY(pl__attn_tma_map_bshd(&tm.a, p.q, p.nq, p.S, B, WGB_BM));
    PL_TRY(pl__attn_tma_map_bshd(&tm.b, p.dout, p.nq, p.S, B, WGB_BM));
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
  PL_TRY(pl__attn_launched("bwd dkdv wgmma launch"));
  if (mode == WGB_DQ_BULK) {
    const int64_t ntiles = (int64_t)B * p.nq * ((p.S + 63) / 64);
    attn_dq_convert_tiled_kernel<<<(unsigned)(ntiles * 2048 / 256), 256, 0, st>>>(
        p.dqacc, p.dq, p.S, p.nq, ntiles, p.scale);
    return pl__attn_launched("bwd dq convert (tiled) launch");
  }
  if (fused) return pl__attn_dq_convert(st, p.dqacc, p.dq, nq_el, p.scale);
  dim3 gq((unsigned)((p.S + WGQ_BM - 1) / WGQ_BM), (unsigned)p.nq, B);
  attn_bwd_dq_wgmma_kernel<<<gq, 256, smem_q, st>>>(p);
  return pl__attn_launched("bwd dq wgmma launch");
}
