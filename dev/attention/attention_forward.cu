/* attention_forward.cu — the causal GQA attention forward, every version:
 * the engine's three (SIMPLE, MMA, and the wgmma forward AUTO runs on sm_90a)
 * and the wgmma V-operand paths and loading schemes the engine's was chosen
 * over, kept here to be re-measured on new hardware.  Runs the CPU reference
 * (the engine's CPU kernel), then each version: validates O and LSE against
 * it, and only then times it (llm.c's dev/cuda style).
 *
 *     make dev && build/dev/attention/attention_forward [-v N] [--seq 64Ki]
 *
 * Needs a GPU; the wgmma versions need sm_90a device code (CUDA_ARCH=90a,
 * the default).  Measurements: doc/performance/attention.md.
 *
 * The dev V paths (the engine's wgmma forward and attention_common.cuh for
 * the shared operand conventions; d = 128, two consumer warpgroups, BM = 128
 * query rows, 64 per warpgroup; S = Q K^T on wgmma from shared memory, O +=
 * P V on m64n128k16 with P from registers):
 *  - transpose: V staged row-major (padded) and transposed each step into
 *    Vt [d][key] (ldmatrix.trans + st.shared, one more barrier per step), a
 *    K-major B operand like K; 64 keys per step;
 *  - mn: V stored like K, [half][key][64 d] swizzled, and read as it is: an
 *    MN-major B operand (trans-b = 1); no transposition, one barrier a step;
 *  - mn128: mn with 128 keys per step (half the steps and barriers, twice the
 *    score registers);
 *  - pipe: mn with S_{j+1} and PV_{j-1} in flight during the softmax of
 *    step j (its own kernel, dev_fwd_wgmma_pipe_kernel; see there);
 *  - mn128pp: mn128 with warpgroup 1's S issued after warpgroup 0's, so that
 *    one warpgroup's softmax runs beside the other's S (FlashAttention-3's
 *    ping-pong, within a step);
 *  - mn128tma: mn128 with K and V loaded by TMA from thread 0 onto an
 *    mbarrier per buffer instead of cp.async from every thread.
 * The engine's forward is mn128tma's loads with K one step ahead of V, so
 * that each warpgroup's softmax of S_{j+1} runs beside its own PV_j. */
#include "common.h"

/* V paths (the dev kernel's template argument VM) */
enum {
  WG_V_TRANSPOSE = 0,
  WG_V_MN = 1,
  WG_V_MN128 = 2,
  WG_V_PIPE = 3,
  WG_V_MN128PP = 4,
  WG_V_MN128TMA = 5,
};

#define WG_LDV (128 + 8)
/* keys per step of the pipe path (64 or 128; see dev_fwd_wgmma_pipe_kernel) */
#define WG_PIPE_BN 64

/* keys per step */
static constexpr int wg_bn(int vm) {
  return vm == WG_V_MN128 || vm == WG_V_MN128PP || vm == WG_V_MN128TMA ? 128
         : vm == WG_V_PIPE ? WG_PIPE_BN
                           : 64;
}

/* Dynamic shared memory: Q [2][BM][64] and K ×2 [2][BN][64] swizzled; then V
 * ×2 swizzled (mn, mn128, mn128pp, mn128tma), V ×3 swizzled (pipe: a PV
 * wgmma stays in flight into the next step, see its kernel) or Vt [128][BN]
 * swizzled + V staging ×2 [BN][LDV] (transpose); mn128tma 2 mbarriers (64 B);
 * 1024 B of slack to align the base.  transpose 117,760 B, mn 99,328 B,
 * mn128 164,864 B, mn128tma 164,928 B, pipe 115,712 B (BN = 64; 197,632 B
 * with 128) (an sm_90 block may have 227 KB). */
static constexpr size_t wg_smem_bytes(int vm) {
  return (size_t)WG_BM * 128 * 2 + (size_t)2 * wg_bn(vm) * 128 * 2 +
         (vm == WG_V_TRANSPOSE
              ? (size_t)128 * wg_bn(vm) * 2 + (size_t)2 * wg_bn(vm) * WG_LDV * 2
              : (size_t)(vm == WG_V_PIPE ? 3 : 2) * wg_bn(vm) * 128 * 2) +
         (vm == WG_V_MN128TMA ? 64 : 0) + 1024;
}

/* grid (ceil(S/128), n_q, B), 256 threads; tm (mn128tma): K (a), V (b) */
template <int VM>
static __global__ void __launch_bounds__(256, 1)
    dev_fwd_wgmma_kernel(AttnParams p, const __grid_constant__ AttnTma tm) {
#if PL_WGMMA_OK
  constexpr int D = 128, BM = WG_BM, BN = wg_bn(VM), NT = 256;
  constexpr bool MN = VM != WG_V_TRANSPOSE, TMA = VM == WG_V_MN128TMA;
  static_assert(MN || BN == 64,
                "the transposition below assumes 64 keys per step");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  /* swizzled tiles need 1024-byte alignment (of the shared-window address) */
  unsigned char *base =
      smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sQ = reinterpret_cast<bf16 *>(base); /* [2][BM][64]                  */
  bf16 *sK = sQ + BM * 128;                  /* [2 buf][2][BN][64]           */
  bf16 *sVt = sK + 2 * BN * 128;             /* transpose: [128][BN]         */
  bf16 *sV = MN ? sVt : sVt + 128 * BN;      /* mn: [2 buf][2][BN][64];
                                                transpose: [2 buf][BN][LDV]  */
  uint64_t *full =
      reinterpret_cast<uint64_t *>(sV + 2 * BN * 128); /* [2] (TMA) */

  const WgBlock w = wg_block<BN>(p);
  const int tid = w.tid, wg = w.wg, wq = w.wq, g = w.g, t = w.t, h = w.h,
            b = w.b;
  const int warp = tid >> 5, lane = tid & 31; /* the V transposition's */
  const int S = p.S, q0 = w.q0, nkb = w.nkb;
  const int64_t qstride = w.qstride, kstride = w.kstride;
  const bf16 *gQ = w.gQ, *gK = w.gK, *gV = w.gV;

  /* mn128tma: the K and V tiles of step kb into buffer kbuf by TMA, from
   * thread 0, onto mbarrier full[kbuf] (the other paths: cp.async by every
   * thread) */
  auto tma_kv = [&](int kb, int kbuf) {
    if (tid == 0)
      tma_load_pair<BN>(sK + kbuf * BN * 128, sV + kbuf * BN * 128, tm,
                        h / p.group, kb * BN, b, full + kbuf);
  };
  if (TMA && tid == 0)
    mbar_init_n(full, 2);
  load_tile_sw128<BM, NT>(sQ, gQ, q0, S, qstride, tid);
  if constexpr (TMA) {
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
  for (int i = 0; i < 64; ++i)
    o[i] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const int wrow0 = wg * 64 + wq * 16; /* this warp's first row in the tile */

  {
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
          load_tile_sw128<BN, NT>(sK + (buf ^ 1) * BN * 128, gK, (kb + 1) * BN,
                                  S, kstride, tid);
          if constexpr (MN)
            load_tile_sw128<BN, NT>(sV + (buf ^ 1) * BN * 128, gV,
                                    (kb + 1) * BN, S, kstride, tid);
          else
            load_tile<BN, D, WG_LDV, NT>(sV + (buf ^ 1) * BN * WG_LDV, gV,
                                         (kb + 1) * BN, S, kstride, tid);
        }
        cp_async_commit();
      }
      if constexpr (TMA)
        mbar_wait(full + buf,
                  (uint32_t)(kb >> 1) & 1u); /* step kb's K, V landed */
      if constexpr (!MN) {
        /* V [key][d] -> Vt [d][key] (K-major, swizzled): each ldmatrix.trans
         * 8×8 block gives a thread keys 2t, 2t+1 of head dim 8·m + g */
        const bf16 *cV = sV + buf * BN * WG_LDV;
#pragma unroll
        for (int it = 0; it < (BN / 8) * (D / 8) / 4 / 8;
             ++it) {                      /* 128 blocks / 4 / 8 warps */
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
            *reinterpret_cast<uint32_t *>(sVt + n * 64 + chunk * 8 + 2 * t) =
                r[jj];
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
        if (wg == 1)
          named_bar_sync(1, 256);
      wg_fence();
      wg_issue_qk<BN>(s, sQ + wg * 64 * 64, cK);
      wg_commit();
      if constexpr (VM == WG_V_MN128PP)
        if (wg == 0)
          named_bar_arrive(1, 256);
      wg_wait0();
      wg_hold(s);

      /* mask (blocks that reach the diagonal), online softmax, rescale O */
      if (k0 + BN - 1 > q0 + wrow0)
        wg_mask<BN>(s, k0, q0 + wrow0, g, t);
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
        for (int kk = 0; kk < BN / 16; ++kk)
          wg_m64n128_rs<0>(o, a[kk], wg_desc_k(sVt + kk * 16));
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

/* The pipe path (version 7): the operands of the mn path
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
static __global__ void __launch_bounds__(256, 1)
    dev_fwd_wgmma_pipe_kernel(AttnParams p) {
#if PL_WGMMA_OK
  constexpr int D = 128, BM = WG_BM, NT = 256, NS = BN / 2;
  static_assert(BN == 64 || BN == 128, "m64n64 or m64n128 score tiles");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  /* swizzled tiles need 1024-byte alignment (of the shared-window address) */
  unsigned char *base =
      smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sQ = reinterpret_cast<bf16 *>(base); /* [2][BM][64]          */
  bf16 *sK = sQ + BM * 128;                  /* [2 buf][2][BN][64]   */
  bf16 *sV = sK + 2 * BN * 128;              /* [3 buf][2][BN][64]   */

  const WgBlock w = wg_block<BN>(p);
  const int tid = w.tid, wg = w.wg, wq = w.wq, g = w.g, t = w.t, h = w.h,
            b = w.b;
  const int S = p.S, q0 = w.q0, nkb = w.nkb;
  const int64_t qstride = w.qstride, kstride = w.kstride;
  const bf16 *gQ = w.gQ, *gK = w.gK, *gV = w.gV;
  const bf16 *sQw = sQ + wg * 64 * 64; /* this warpgroup's 64 query rows */

  load_tile_sw128<BM, NT>(sQ, gQ, q0, S, qstride, tid);
  load_tile_sw128<BN, NT>(sK, gK, 0, S, kstride, tid);
  cp_async_commit();
  if (nkb > 1)
    load_tile_sw128<BN, NT>(sK + BN * 128, gK, BN, S, kstride, tid);
  load_tile_sw128<BN, NT>(sV, gV, 0, S, kstride, tid);
  cp_async_commit();

  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    o[i] = 0.f;
  float s[2][NS];
#pragma unroll
  for (int i = 0; i < NS; ++i)
    s[0][i] = s[1][i] = 0.f;
  uint32_t a[BN / 16][4]; /* P of the step whose PV may be in flight */
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      a[kk][e] = 0u;
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
      if (j >= nkb)
        break;
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
          load_tile_sw128<BN, NT>(sK + (j & 1) * BN * 128, gK, (j + 2) * BN, S,
                                  kstride, tid);
        load_tile_sw128<BN, NT>(sV + ((j + 1) % 3) * BN * 128, gV, (j + 1) * BN,
                                S, kstride, tid);
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
/* versions                                                                 */
/* ======================================================================== */

/* an engine kernel through the public API */
template <pl_attn_fwd_kind K>
static pl_status engine_fwd(pl_stream *s, const pl_attn_shape *sh,
                            dev_bufs *b) {
  pl_attn_shape k = *sh;
  k.kernels.fwd = K;
  return pl_attn_fwd(s, &k, b->q, b->k, b->v, b->o, b->lse);
}

template <int VM>
static pl_status dev_fwd(pl_stream *s, const pl_attn_shape *sh, dev_bufs *b) {
  PL_TRY(dev_need_wgmma(s, sh));
  AttnParams p = pl__attn_params(sh);
  p.q = (const bf16 *)b->q;
  p.k = (const bf16 *)b->k;
  p.v = (const bf16 *)b->v;
  p.out = (bf16 *)b->o;
  p.lse = b->lse;
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const unsigned B = (unsigned)sh->batch;
  constexpr size_t smem = wg_smem_bytes(VM);
  const void *kern;
  if constexpr (VM == WG_V_PIPE)
    kern = (const void *)dev_fwd_wgmma_pipe_kernel<WG_PIPE_BN>;
  else
    kern = (const void *)dev_fwd_wgmma_kernel<VM>;
  cudaError_t e = cudaFuncSetAttribute(
      kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "dev fwd: smem %zu B: %s", smem,
                        cudaGetErrorString(e));
  dim3 grid((unsigned)((p.S + WG_BM - 1) / WG_BM), (unsigned)p.nq, B);
  if constexpr (VM == WG_V_PIPE) {
    dev_fwd_wgmma_pipe_kernel<WG_PIPE_BN><<<grid, 256, smem, st>>>(p);
  } else {
    AttnTma tm;
    memset(&tm, 0, sizeof tm);
    if (VM == WG_V_MN128TMA) {
      PL_TRY(pl__attn_tma_map_bshd(&tm.a, p.k, p.nkv, p.S, B, wg_bn(VM)));
      PL_TRY(pl__attn_tma_map_bshd(&tm.b, p.v, p.nkv, p.S, B, wg_bn(VM)));
    }
    dev_fwd_wgmma_kernel<VM><<<grid, 256, smem, st>>>(p, tm);
  }
  return pl__attn_launched("dev fwd launch");
}

#define SLOWER "measured slower than 3: see doc/performance/attention.md"
static const dev_version versions[] = {
    {1, "simple", "engine: one warp per query row", "the device reference",
     engine_fwd<PL_ATTN_FWD_SIMPLE>, 0, 1},
    {2, "mma", "engine: mma.sync, 64 keys per step",
     "engine: sm_80+, d = 64, CUDA_ARCH=90", engine_fwd<PL_ATTN_FWD_MMA>, 0, 0},
    {3, "wgmma/ovtma", "engine: wgmma, K and V by TMA, K a step ahead of V",
     "engine: the default on sm_90a", engine_fwd<PL_ATTN_FWD_WGMMA>, 0, 0},
    {4, "transpose", "wgmma, V transposed in shared memory each step", SLOWER,
     dev_fwd<WG_V_TRANSPOSE>, 0, 0},
    {5, "mn", "wgmma, V read as an MN-major operand, 64 keys per step", SLOWER,
     dev_fwd<WG_V_MN>, 0, 0},
    {6, "mn128", "mn with 128 keys per step", SLOWER, dev_fwd<WG_V_MN128>, 0,
     0},
    {7, "pipe", "mn with S(j+1) and PV(j-1) beside the softmax", SLOWER,
     dev_fwd<WG_V_PIPE>, 0, 0},
    {8, "mn128pp", "mn128, warpgroup 1's S after warpgroup 0's", SLOWER,
     dev_fwd<WG_V_MN128PP>, 0, 0},
    {9, "mn128tma", "mn128 with K and V by TMA from one thread", SLOWER,
     dev_fwd<WG_V_MN128TMA>, 0, 0},
};
#define NVERSIONS (int)(sizeof versions / sizeof versions[0])

int main(int argc, char **argv) {
  const dev_opts o = dev_parse(argc, argv, argv[0]);
  dev_print_table(versions, NVERSIONS);
  if (o.list)
    return 0;
  pl_dev *gpu, *cpu;
  plCheck(pl_dev_create(PL_BACKEND_CUDA, -1, &gpu));
  plCheck(pl_dev_create(PL_BACKEND_CPU, 0, &cpu));
  pl_stream *gs = pl_dev_stream(gpu), *cs = pl_dev_stream(cpu);

  /* the CPU reference on the same inputs (pl_rng_fill: the same bits) */
  pl_attn_shape vs = {1, o.check_seq, 8, 2, 128, 0.f, PL_BF16, {}};
  const size_t nqe = (size_t)(vs.seq * vs.n_q * 128),
               nr = (size_t)(vs.seq * vs.n_q);
  dev_bufs g = dev_bufs_new(gpu, &vs, 42), c = dev_bufs_new(cpu, &vs, 42);
  plCheck(pl_attn_fwd(cs, &vs, c.q, c.k, c.v, c.o, c.lse));
  printf(
      "# validation: B=1 S=%lld n_q=8 n_kv=2 d=128 against the CPU reference\n",
      (long long)vs.seq);
  int ok[NVERSIONS], failed = 0;
  for (int i = 0; i < NVERSIONS; i++) {
    const dev_version *v = &versions[i];
    ok[i] = 0;
    if (o.version && v->num != o.version)
      continue;
    plCheck(pl_fill(gs, g.o, PL_BF16, nqe, NAN));
    plCheck(pl_fill(gs, g.lse, PL_F32, nr, NAN));
    pl_status st = v->run(gs, &vs, &g);
    if (st == PL_OK)
      st = pl_stream_sync(gs);
    if (st != PL_OK) {
      printf("# %3d %-12s %s: %s\n", v->num, v->name, pl_strerror(st),
             pl_last_error());
      failed |= st != PL_EUNSUPPORTED;
      continue;
    }
    printf("# %3d %-12s\n", v->num, v->name);
    ok[i] = dev_validate(gs, "O", g.o, c.o, PL_BF16, nqe, 2.5e-2);
    ok[i] &= dev_validate(gs, "LSE", g.lse, c.lse, PL_F32, nr, 1e-3);
    if (!ok[i])
      printf("#     MISMATCH: not timed\n");
    failed |= !ok[i];
  }
  dev_bufs_free(gpu, &g);
  dev_bufs_free(cpu, &c);

  pl_attn_shape ts = {1, o.seq, o.nq, o.nkv, 128, 0.f, PL_BF16, {}};
  dev_bufs t = dev_bufs_new(gpu, &ts, 7);
  printf("# timing: B=1 S=%lld n_q=%d n_kv=%d d=128, median of %d after %d "
         "warm-ups\n",
         (long long)ts.seq, ts.n_q, ts.n_kv, o.iters, o.warmup);
  printf("%-4s %-12s %10s %8s\n", "ver", "name", "ms", "TFLOP/s");
  for (int i = 0; i < NVERSIONS; i++) {
    const dev_version *v = &versions[i];
    if (!ok[i])
      continue;
    const double ms = dev_time_ms(gs, &ts, &t, v, v->slow ? 0 : o.warmup,
                                  v->slow ? 1 : o.iters);
    printf("%-4d %-12s %10.3f %8.1f\n", v->num, v->name, ms,
           pl_attn_flops_fwd(&ts) / ms * 1e-9);
  }
  dev_bufs_free(gpu, &t);
  pl_dev_destroy(cpu);
  pl_dev_destroy(gpu);
  return failed ? 1 : 0;
}
