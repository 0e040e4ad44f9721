/* attention_wgmma_bwd.cu — the attention backward on Hopper wgmma (sm_90a
 * device code, d = 128): what PL_ATTN_BWD_WGMMA (and, for d = 128 on an
 * sm_90a build, AUTO) and PL_ATTN_BWD_SPLIT run, after the delta kernel
 * (attention_simple.cu).  The variants these were chosen over (dQ by fp32
 * atomics, other barrier and load schemes, the other step order) and the
 * probes that priced dQ are programs in dev/attention/
 * (attention_backward.cu), their measurements in
 * doc/performance/attention.md.
 *
 * FlashAttention-2's backward on wgmma, with the forward's operand
 * conventions (attention_common.cuh).  The bulk backward also takes the full
 * mask (ring attention's off-diagonal blocks: every query tile of every key
 * block, only keys and queries at or past S masked); split is causal only.
 *
 *  - attn_bwd_dkdv_wgmma_kernel: a block owns BN = 128 keys of one kv head
 *    (warpgroup wg: keys 64wg..64wg+63) with K and V resident, and walks, for
 *    every query head of the group, the query tiles of 64 rows at or past the
 *    diagonal (BwdWalk, last tile first; Q, dO, LSE and D triple-buffered):
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
 *    With DQ (the bulk backward) it also stores bf16(dS^T) to shared memory
 *    (double-buffered), and after the block barrier each warpgroup computes
 *    half the head dims of dQ = dS K for the step's 64 queries (m64n64, both
 *    operands MN-major from shared memory), left in flight over the next
 *    step's start; then it stages the tile in a 32 KB shared stage (float4
 *    per thread, conflict-free, each warpgroup's half contiguous) and its
 *    warpgroup's leader adds its 16 KB half to a tiled fp32 dQacc
 *    ([B][n_q][ceil(S/64)] tiles in the stage's order) with one
 *    cp.reduce.async.bulk .add.f32 (the TMA engine, reduced in L2), as
 *    FlashAttention-3 does.  dQacc is zeroed before and converted to
 *    bf16(scale·dQacc) after (attn_dq_convert_tiled_kernel).  5 GEMMs per
 *    tile.
 *  - attn_bwd_dq_wgmma_kernel (split, with the dK/dV kernel without DQ): a
 *    block owns BM = 128 query rows of one query head (64 per warpgroup, Q
 *    and dO resident) and walks the key tiles of 64 up to the diagonal (K, V
 *    double-buffered):
 *        S = Q K^T, dP = dO V^T    m64n64, all K-major (S as in the forward)
 *        P = exp2(S·scale·log2e − LSE·log2e) (−inf mask of the forward),
 *        dS = P ∘ (dP − D)         (LSE, D per row: registers)
 *        dQ += dS K                m64n128, A = bf16(dS), B = K (MN-major)
 *    and writes bf16(scale·dQ).  dQ needs no workspace and no atomics, and
 *    each dQ element is summed in one fixed order: bit-reproducible run to
 *    run.  The price is S and dP computed twice (7 GEMMs per tile against
 *    5; the FLOP count stays 2.5 × forward).
 *  In the dK/dV kernel S^T and dP^T are separate wgmma groups, so that P^T
 *  is computed and dV issued while dP^T runs, and dS^T computed while dV
 *  runs (FlashAttention-3's intra-warpgroup overlap).
 *
 * Synchronization.  The dQ kernel: one __syncthreads per step, K and V
 * double-buffered (after the barrier of step j no wgmma of step j−1 on
 * buffer (j+1)%2 is pending, and it is refilled for step j+1, overlapping
 * step j).  The dK/dV kernel: one block barrier per step, in its middle
 * (before dQ, which needs both warpgroups' dS^T).  Q, dO, LSE and D are
 * triple-buffered and loaded two steps ahead — after the barrier of step j
 * both warpgroups are done with step j−1, so buffer (j+2)%3 is refilled for
 * step j+2, and step j+1's tiles, waited for by every thread before that
 * barrier, are in place.  Thread 0 loads the Q and dO tiles by TMA (a 4-D
 * tensor map per tensor, rows past S zero-filled) onto an mbarrier per
 * buffer, which every thread waits on before the step's S^T; LSE and D come
 * by cp.async, landed by the barrier.  A barrier is preceded in every thread
 * by cp.async.wait_group and fence.proxy.async (the generic-proxy writes —
 * cp.async, dS^T's and the dQ stage's stores — ordered before the
 * async-proxy reads of wgmma and the bulk reductions after it).  Every wgmma
 * batch that reads a buffered Q, dO (or K, V) tile is waited for inside its
 * step; the one batch left in flight across a step boundary, dQ, reads only
 * K and its own dS^T buffer (double-buffered: a warpgroup may still read
 * buffer j&1 while the other writes the other one in step j+1).  The
 * resident tiles are never rewritten.  wgmma.fence precedes each batch (the
 * A fragments were just packed by ordinary instructions, the accumulators
 * last touched by the previous batch); wg_hold pins the accumulator and A
 * registers around fence / wait.  In the dQ kernel a warpgroup whose whole
 * 64×64 tile lies above the diagonal (all keys after all queries) skips the
 * step's wgmma; the dK/dV kernel computes such a tile (masked to 0, one per
 * key block), since a branch around its wgmma makes ptxas serialize them
 * (C7520). */
#include <string.h>

#include "backend/cuda/attention_common.cuh"

#define WGB_NB                                                                 \
  3 /* Q, dO, LSE, D buffers of the dK/dV kernel (two steps ahead) */

/* K, V [2][128][64] + Q, dO [3 buf][2][64][64] swizzled; with DQ dS^T [2
 * buf][128][64] swizzled and the dQ stage [2][8][128][4] f32; LSE, D [3
 * buf][64] f32; 3 mbarriers (64 B); 1024 B to align: 166,464 B (split),
 * 232,000 B (bulk; the opt-in limit is 232,448). */
static constexpr size_t wgb_dkdv_smem_bytes(bool dq) {
  return (size_t)2 * WGB_BN * 128 * 2 + (size_t)WGB_NB * 2 * WGB_BM * 128 * 2 +
         (dq ? (size_t)2 * WGB_BN * WGB_BM * 2 : 0) +
         (dq ? (size_t)WGB_BM * 128 * 4 : 0) + (size_t)WGB_NB * 2 * WGB_BM * 4 +
         64 + 1024;
}
static_assert(wgb_dkdv_smem_bytes(true) <= 232448,
              "the dK/dV kernel's shared memory");
/* Q, dO [2][128][64] + K, V [2 buf][2][64][64] swizzled; 1024 B to align:
 * 132,096 B */
static constexpr size_t wgb_dq_smem_bytes() {
  return (size_t)2 * WGQ_BM * 128 * 2 + (size_t)2 * 2 * WGQ_BN * 128 * 2 + 1024;
}

/* dQ = bf16(scale · dQacc) from the tiled dQacc of the BULK wgmma backward
 * (d = 128): [B][n_q][ceil(S/64)] tiles of 64 rows × 128 in the order
 * attn_bwd_dkdv_wgmma_kernel<true> stages them: float4 1024·wg +
 * 128·j + T' holds the accumulator elements 4j..4j+3 of thread 128·wg + T',
 * i.e. rows r, r + 8 (r = 16·wq + g) at columns c, c + 1 (c = 64·wg + 8j +
 * 2t), T' = 32·wq + 4·g + t.  One thread per float4; ntiles =
 * B·n_q·ceil(S/64). */
static __global__ void attn_dq_convert_tiled_kernel(const float *acc, bf16 *dq,
                                                    int S, int nq,
                                                    int64_t ntiles,
                                                    float scale) {
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= ntiles * 2048)
    return;
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
    *reinterpret_cast<__nv_bfloat162 *>(base) =
        __floats2bfloat162_rn(a.x * scale, a.y * scale);
  if (row + 8 < S)
    *reinterpret_cast<__nv_bfloat162 *>(base + (int64_t)8 * nq * 128) =
        __floats2bfloat162_rn(a.z * scale, a.w * scale);
}

/* grid (ceil(S/128), n_kv, B), 256 threads (two warpgroups); tm: Q (a) and
 * dO (b), rows 64.  DQ: also dQ += dS K into p.dqacc's tiles by bulk
 * reductions (see attn_dq_convert_tiled_kernel).  FULL: the full mask (every
 * query tile of the sequence, keys at or past S masked; a template argument,
 * so the causal instantiations are the code they were). */
template <bool DQ, bool FULL>
static __global__ void __launch_bounds__(256, 1)
    attn_bwd_dkdv_wgmma_kernel(AttnParams p,
                               const __grid_constant__ AttnTma tm) {
#if PL_WGMMA_OK
  constexpr int D = 128, BN = WGB_BN, BM = WGB_BM, NT = 256, NB = WGB_NB;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char *base =
      smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sK = reinterpret_cast<bf16 *>(base); /* [2][BN][64]         */
  bf16 *sV = sK + BN * 128;                  /* [2][BN][64]         */
  bf16 *sQ = sV + BN * 128;                  /* [NB buf][2][BM][64] */
  bf16 *sdO = sQ + NB * BM * 128;            /* [NB buf][2][BM][64] */
  bf16 *sdS = sdO + NB * BM * 128;           /* [2 buf][BN][64] (DQ) */
  float *sdQ = reinterpret_cast<float *>(
      sdS + (DQ ? 2 * BN * BM : 0));     /* [2][8][128][4] */
  float *sL = sdQ + (DQ ? BM * 128 : 0); /* [NB buf][BM] LSE */
  float *sDl = sL + NB * BM;             /* [NB buf][BM] D   */
  uint64_t *full = reinterpret_cast<uint64_t *>(sDl + NB * BM); /* [NB] */

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = warp >> 2, wq = warp & 3, g = lane >> 2, t = lane & 3;
  const bool leader =
      (tid & 127) == 0;         /* issues its warpgroup's bulk reductions */
  const BwdBlock<D> blk(p, BN); /* longest key blocks (most queries) first */
  const int hk = blk.hk, b = blk.b, S = blk.S, k0 = blk.k0;
  const int kw0 = k0 + wg * 64; /* this warpgroup's first key */
  const int64_t kstride = blk.kstride;
  const bf16 *gK = blk.gK, *gV = blk.gV;

  const BwdWalk<BM> walk(p, hk, FULL ? 0 : k0); /* FULL: every query tile */
  const int niter = walk.niter;

  /* loads of step `it` into buffer `buf`: Q, dO tiles (TMA by thread 0 onto
   * mbarrier full[buf]); LSE and D of its 64 queries (threads 0..127, one
   * float each; 0 past S) */
  auto issue = [&](int it, int buf) {
    const int h = walk.head(it);
    const int qs = walk.qs(it);
    if (tid == 0)
      tma_load_pair<BM>(sQ + buf * BM * 128, sdO + buf * BM * 128, tm, h, qs, b,
                        full + buf);
    if (tid < 2 * BM) {
      const int i = tid & (BM - 1), q = qs + i;
      const float *src =
          (tid < BM ? p.lse : p.delta) + ((int64_t)b * p.nq + h) * S;
      float *dst = (tid < BM ? sL : sDl) + buf * BM + i;
      cp_async4(dst, src + (q < S ? q : S - 1), q < S ? 4 : 0);
    }
  };

  if (tid == 0)
    mbar_init_n(full, NB);
  load_tile_sw128<BN, NT>(sK, gK, k0, S, kstride, tid);
  load_tile_sw128<BN, NT>(sV, gV, k0, S, kstride, tid);
  issue(0, 0);
  cp_async_commit();
  /* two steps ahead: step 1 now, step it + 2 after step it's barrier */
  if (niter > 1)
    issue(1, 1);
  cp_async_commit();

  float dk[64], dv[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    dk[i] = dv[i] = 0.f;
  const int key_r =
      kw0 + wq * 16 + g; /* this thread's keys: key_r, key_r + 8 */
  /* DQ: the dQ tile of a step (query tile pend_q of head pend_h; -1: none)
   * stays in flight over the barrier into the next step, which stores it to
   * the stage sdQ, from which each warpgroup's leader adds its 16 KB half to
   * dQacc's tile at once */
  float dqp[32];
  int pend_q = -1, pend_h = 0;
  /* the stage and dQacc's tiles hold dqp[4j..4j+3] of thread T = 128·wg +
   * T' at float4 1024·wg + 128·j + T': 16-byte stores, conflict-free, each
   * warpgroup's half contiguous */
  auto dq_stage = [&]() {
    float4 *s4 = reinterpret_cast<float4 *>(sdQ) + wg * 1024 + (tid & 127);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      s4[j * 128] = make_float4(dqp[4 * j], dqp[4 * j + 1], dqp[4 * j + 2],
                                dqp[4 * j + 3]);
  };
  /* after a warpgroup barrier past dq_stage: by the leader of warpgroup
   * `half`.  (half < 0, the whole tile by one thread, is never asked for
   * here; without that branch the kernel compiles to other machine code, 242
   * registers instead of 245, which has not been measured, so it stays.) */
  auto dq_bulk = [&](int q0, int h, int half) {
    const int nqt = (S + BM - 1) / BM;
    const int64_t off = (((int64_t)b * p.nq + h) * nqt + q0 / BM) * (BM * D);
    if (half < 0)
      bulk_add_f32(p.dqacc + off, sdQ, BM * D * 4);
    else
      bulk_add_f32(p.dqacc + off + half * (BM * D / 2),
                   sdQ + half * (BM * D / 2), BM * D * 2);
    bulk_commit();
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
      wg_m64n64_ss<1, 1>(
          dqp, wg_desc_mn(sdS + dsb * BN * BM + kk * 16 * 64, BM * 128),
          wg_desc_mn(sK + wg * (BN * 64) + kk * 16 * 64, BN * 128), kk > 0);
    wg_commit();
  };

  for (int it = 0; it < niter; ++it) {
    const int buf = it % NB;
    if (it == 0) {
      /* step 0's K, V tiles, LSE and D in place and fenced for the async
       * proxy */
      cp_async_wait<1>();
      fence_proxy_async();
      __syncthreads();
    }
    const int qs = walk.qs(it);
    /* (the diagonal tile's second warpgroup has every key after every query:
     * its P^T is all masked, 0; computed anyway, as a branch around wgmma
     * makes ptxas serialize the kernel's wgmma) */
    const bf16 *cQ = sQ + buf * BM * 128, *cdO = sdO + buf * BM * 128;
    uint32_t ap[BM / 16][4], as[BM / 16][4];
    float st[32], dpt[32];
    bf16 *cdS = sdS + (it & 1) * BN * BM;
    if (DQ) { /* the previous step's dQ, run over the barrier, to the stage */
      wg_wait0();
      wg_hold(dqp);
      if (pend_q >= 0) {
        dq_stage();
        /* this warpgroup's half, reduced at once by its leader */
        fence_proxy_async();
        named_bar_sync(1 + wg, 128);
        if (leader)
          dq_bulk(pend_q, pend_h, wg);
      }
    }
    /* step it's Q, dO landed; waited for after the previous dQ's
     * wgmma.wait_group, as a spin loop with a wgmma in flight makes ptxas
     * inject a wait of its own (C7517) */
    mbar_wait(full + buf, (uint32_t)(it / NB) & 1u);
    /* S^T = K Q^T, dP^T = V dO^T (this warpgroup's 64 keys × 64 queries), one
     * group each: P^T is computed and dV issued while dP^T runs, dS^T while
     * dV runs.  (Adding the previous dQ to dQacc beside them instead, after a
     * wait_group that leaves them running, makes ptxas serialize the
     * kernel's wgmma: C7514.) */
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
    const bool need_mask = FULL ? (qs + BM > S) || (kw0 + 64 > S)
                                : (qs < kw0 + 63) || (qs + BM > S);
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
      const float2 l2 = *reinterpret_cast<const float2 *>(cL + 8 * j + 2 * t);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float pr = exp2f(st[4 * j + e] * p.scale_log2 -
                         ((e & 1) ? l2.y : l2.x) * LOG2E_F);
        if (need_mask) {
          const int key = key_r + 8 * (e >> 1),
                    q = qs + 8 * j + 2 * t + (e & 1);
          if ((FULL ? key >= S : key > q) || q >= S)
            pr = 0.f;
        }
        st[4 * j + e] = pr;
      }
    }
    /* dV += P^T dO: A from registers (16 queries per fragment), B = the dO
     * tile as MN-major (rows = queries = K index; LBO = one d half, BM·128 B)
     */
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
        dpt[4 * j + e] =
            st[4 * j + e] * (dpt[4 * j + e] - ((e & 1) ? d2.y : d2.x));
    }
    wg_pack_p<BM>(as, dpt);
    if (DQ) {
      /* dS^T to shared memory, [key][64 queries] 128-byte-swizzled (a
       * query pair per 32-bit store: as[kk][2hf + j] holds key key_r + 8hf,
       * queries 16kk + 8j + 2t, +1), the A operand of dQ += dS K below */
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = key_r - k0 + 8 * (i & 1), ch = 2 * kk + (i >> 1);
          *reinterpret_cast<uint32_t *>(
              cdS + key * 64 + ((ch ^ (key & 7)) * 8) + 2 * t) = as[kk][i];
        }
    }
    /* dK += dS^T Q: B = the Q tile as MN-major */
    wg_issue_rs_mn<BM>(dk, as, cQ);
    if (!DQ) {
      wg_wait0();
      wg_hold(dv);
      wg_hold(dk);
    }
    /* the block barrier: both warpgroups' dS^T stored (DQ); step it+1's
     * tiles landed (each thread's own copies waited for, then fenced) and
     * step it-1 done with buffer (it+2) % 3, refilled right after; a
     * leader's last bulk reduction has read its stage (rewritten next step) */
    cp_async_wait<0>();
    if (DQ && leader)
      bulk_wait_read<0>();
    fence_proxy_async(); /* (DQ: also the stage's stores before the bulk read)
                          */
    __syncthreads();
    if (it + 2 < niter)
      issue(it + 2, (it + 2) % NB);
    cp_async_commit();
    if (DQ) {
      /* dQ of this step (both warpgroups' dS^T halves: hence the barrier
       * above), issued now and left in flight, flushed by the next step (or
       * after the loop); dS^T is double-buffered, as a warpgroup may still
       * read buffer it&1 when the other writes the other one in the next
       * step. */
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
  if (DQ) { /* the last step's dQ; then every bulk reduction complete (the
               leaders waited for their last read before the last barrier) */
    wg_wait0();
    wg_hold(dqp);
    if (pend_q >= 0)
      dq_stage();
    fence_proxy_async();
    named_bar_sync(1 + wg, 128);
    if (leader) {
      if (pend_q >= 0)
        dq_bulk(pend_q, pend_h, wg);
      bulk_wait0();
    }
  }
  cp_async_wait<0>();

  blk.store_dkdv(p, key_r, t, dk, dv); /* this thread's keys key_r, key_r + 8 */
#else
  __trap(); /* built without sm_90a: the launcher refuses before this */
#endif
}

/* grid (ceil(S/128), n_q, B), 256 threads (two warpgroups). */
static __global__ void __launch_bounds__(256, 1)
    attn_bwd_dq_wgmma_kernel(AttnParams p) {
#if PL_WGMMA_OK
  constexpr int D = 128, BM = WGQ_BM, BN = WGQ_BN, NT = 256;
  static_assert(BM == WG_BM, "wg_block's query tiles");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char *base =
      smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sQ = reinterpret_cast<bf16 *>(base); /* [2][BM][64]         */
  bf16 *sdO = sQ + BM * 128;                 /* [2][BM][64]         */
  bf16 *sK = sdO + BM * 128;                 /* [2 buf][2][BN][64]  */
  bf16 *sV = sK + 2 * BN * 128;              /* [2 buf][2][BN][64]  */

  const WgBlock w = wg_block<BN>(p); /* query tiles last to first */
  const int tid = w.tid, wg = w.wg, wq = w.wq, g = w.g, t = w.t, h = w.h,
            b = w.b;
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
  for (int i = 0; i < 64; ++i)
    dq[i] = 0.f;

  for (int kb = 0; kb < nkb; ++kb) {
    const int buf = kb & 1;
    /* step kb's K, V in place and fenced; step kb-1 done with buf^1 */
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    if (kb + 1 < nkb) {
      load_tile_sw128<BN, NT>(sK + (buf ^ 1) * BN * 128, gK, (kb + 1) * BN, S,
                              kstride, tid);
      load_tile_sw128<BN, NT>(sV + (buf ^ 1) * BN * 128, gV, (kb + 1) * BN, S,
                              kstride, tid);
      cp_async_commit();
    }
    const int k0 = kb * BN;
    if (k0 > q0 + wg * 64 + 63)
      continue; /* every key after every row of this warpgroup */
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
    if (k0 + BN - 1 > q0 + wrow0)
      wg_mask<BN>(s, k0, q0 + wrow0, g, t);
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
        *reinterpret_cast<__nv_bfloat162 *>(qr + jd * 8 + 2 * t) =
            __floats2bfloat162_rn(dq[4 * jd + 2 * hf] * p.scale,
                                  dq[4 * jd + 2 * hf + 1] * p.scale);
    }
  }
#else
  __trap(); /* built without sm_90a: the launcher refuses before this */
#endif
}

/* ======================================================================== */
/* launch                                                                   */
/* ======================================================================== */

pl_status pl__attn_dq_convert_tiled(cudaStream_t st, const float *acc, bf16 *dq,
                                    int S, int nq, unsigned B, float scale) {
  const int64_t ntiles = (int64_t)B * nq * ((S + WGB_BM - 1) / WGB_BM);
  attn_dq_convert_tiled_kernel<<<(unsigned)(ntiles * 2048 / 256), 256, 0, st>>>(
      acc, dq, S, nq, ntiles, scale);
  return pl__attn_launched("bwd dq convert (tiled) launch");
}

/* the dQ kernel alone (split's second half) */
pl_status pl__attn_wgmma_dq(cudaStream_t st, const AttnParams &p, unsigned B) {
  constexpr size_t smem = wgb_dq_smem_bytes();
  cudaError_t e = cudaFuncSetAttribute(
      attn_bwd_dq_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      (int)smem);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention bwd dq wgmma: smem %zu B: %s",
                        smem, cudaGetErrorString(e));
  dim3 gq((unsigned)((p.S + WGQ_BM - 1) / WGQ_BM), (unsigned)p.nq, B);
  attn_bwd_dq_wgmma_kernel<<<gq, 256, smem, st>>>(p);
  return pl__attn_launched("bwd dq wgmma launch");
}

/* split: the dK/dV kernel, then the dQ kernel (independent; both read D and
 * LSE; dQ written directly).  bulk: dQacc (acc_el floats) zeroed, the dK/dV
 * kernel adding dS K into its tiles, then the bf16 conversion. */
pl_status pl__attn_wgmma_bwd(cudaStream_t st, const AttnParams &p, unsigned B,
                             size_t acc_el, bool split) {
  const size_t smem_kv = wgb_dkdv_smem_bytes(!split);
  auto kv = split    ? attn_bwd_dkdv_wgmma_kernel<false, false>
            : p.full ? attn_bwd_dkdv_wgmma_kernel<true, true>
                     : attn_bwd_dkdv_wgmma_kernel<true, false>;
  AttnTma tm;
  memset(&tm, 0, sizeof tm);
  PL_TRY(pl__attn_tma_map_bshd(&tm.a, p.q, p.nq, p.S, B, WGB_BM));
  PL_TRY(pl__attn_tma_map_bshd(&tm.b, p.dout, p.nq, p.S, B, WGB_BM));
  cudaError_t e = cudaFuncSetAttribute(
      kv, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_kv);
  if (e == cudaSuccess && !split)
    e = cudaMemsetAsync(p.dqacc, 0, acc_el * sizeof(float), st);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME,
                        "attention bwd wgmma: smem %zu B, memset: %s", smem_kv,
                        cudaGetErrorString(e));
  dim3 gkv((unsigned)((p.S + WGB_BN - 1) / WGB_BN), (unsigned)p.nkv, B);
  kv<<<gkv, 256, smem_kv, st>>>(p, tm);
  PL_TRY(pl__attn_launched("bwd dkdv wgmma launch"));
  if (!split)
    return pl__attn_dq_convert_tiled(st, p.dqacc, p.dq, p.S, p.nq, B, p.scale);
  return pl__attn_wgmma_dq(st, p, B);
}
