/* attention_backward.cu — the causal GQA attention backward, every version:
 * the engine's (SIMPLE, MMA, the wgmma backward AUTO runs on sm_90a with dQ
 * by bulk reductions, and split with bit-reproducible dQ), the same kernels
 * in the other step order, the wgmma dK/dV kernel's variants the engine's
 * was chosen over, and probes that price its dQ.  Runs the CPU reference
 * (the engine's CPU kernels), then each version on the reference's O and LSE:
 * validates dQ, dK, dV against it, and only then times it (llm.c's dev/cuda
 * style); a probe gives wrong dQ on purpose and is timed only.
 *
 *     make dev && build/dev/attention/attention_backward [-v N] [--seq 64Ki]
 *
 * Needs a GPU; the wgmma versions need sm_90a device code (CUDA_ARCH=90a,
 * the default).  Times include the delta kernel (D = rowsum(dO∘O)), as the
 * engine's backward does.  Measurements: doc/performance/attention.md.
 *
 * The dK/dV kernel's variants (dev_bwd_dkdv_kernel<FQ, SY, PROBE>; its
 * algorithm, tiles and registers are the engine's attn_bwd_dkdv_wgmma_kernel,
 * attention_wgmma_bwd.cu):
 *  - FQ, how dQ += dS K reaches the fp32 workspace: WGB_DQ_ATOMIC ("fused")
 *    by float2 atomics into its row layout [B, S, n_q, d], converted by
 *    pl__attn_dq_convert; WGB_DQ_BULK as the engine (tiled layout, one bulk
 *    reduction per warpgroup half); WGB_DQ_NONE, no dQ (split's kernel).
 *  - SY, how a step loads and synchronizes: WGB_SYNC_TMA as the engine (one
 *    block barrier per step, in its middle; Q, dO, LSE, D triple-buffered
 *    and loaded two steps ahead, Q and dO by TMA onto an mbarrier per
 *    buffer); WGB_SYNC_ONE the same with Q and dO by cp.async from every
 *    thread (8 per thread per step); WGB_SYNC_TWO two block barriers per step
 *    (one at its start, tiles double-buffered and loaded one step ahead; with
 *    bulk dQ, thread 0 reduces the whole 32 KB tile after the middle
 *    barrier).
 *  - PROBE: PROBE_NO_ADD leaves out the step's add of the dQ tile to the
 *    workspace (atomics or reductions), PROBE_NO_DQ_GEMM the dQ GEMM (the
 *    stage and its adds of whatever the registers hold stay): the time each
 *    costs is the difference to the unprobed kernel.
 * The engine's kernels walk the query tiles from the last down with every
 * head of the group at each (BWD_WALK_DESC), so that the blocks of a wave
 * read the same Q, dO tiles and add into the same dQ tiles at about the same
 * time; BWD_WALK_ASC walks head by head from the diagonal (AttnParams.walk,
 * a field the engine's kernels read: versions 5 and 6 run them with it). */
#include "common.h"

/* dQ modes (FQ), synchronization schemes (SY) and probes (PROBE) */
enum { WGB_DQ_NONE = 0, WGB_DQ_ATOMIC = 1, WGB_DQ_BULK = 2 };
enum { WGB_SYNC_TWO = 0, WGB_SYNC_ONE = 1, WGB_SYNC_TMA = 2 };
enum { PROBE_NONE = 0, PROBE_NO_ADD = 1, PROBE_NO_DQ_GEMM = 2 };
/* Q, dO (and LSE, D) buffers under scheme sy: 2 with two barriers per step,
 * 3 (loaded two steps ahead) with one */
static constexpr int wgb_nbuf(int sy) {
  return sy == WGB_SYNC_TWO ? 2 : 3;
}
/* K, V [2][128][64] + Q, dO [nb buf][2][64][64] swizzled; with dQ dS^T [2
 * buf][128][64] swizzled; with bulk dQ the stage [2][8][128][4] f32; LSE, D
 * [nb buf][64] f32; with TMA 3 mbarriers (64 B); 1024 B to align.  Two
 * buffers: 133,120 B (split), 165,888 B (fused), 198,656 B (bulk); three:
 * 166,400 / 199,168 / 231,936 B, TMA 64 B more (the opt-in limit is
 * 232,448). */
static constexpr size_t wgb_dkdv_smem_bytes(int fq, int sy) {
  return (size_t)2 * WGB_BN * 128 * 2 +
         (size_t)wgb_nbuf(sy) * 2 * WGB_BM * 128 * 2 +
         (fq ? (size_t)2 * WGB_BN * WGB_BM * 2 : 0) +
         (fq == WGB_DQ_BULK ? (size_t)WGB_BM * 128 * 4 : 0) +
         (size_t)wgb_nbuf(sy) * 2 * WGB_BM * 4 + (sy == WGB_SYNC_TMA ? 64 : 0) +
         1024;
}

/* grid (ceil(S/128), n_kv, B), 256 threads (two warpgroups).  FQ (a
 * WGB_DQ_* mode): also dQ += dS K into p.dqacc, by fp32 atomics into its row
 * layout (ATOMIC, the fused variant) or by bulk reductions into its tiled
 * layout (BULK; see attn_dq_convert_tiled_kernel).  SY (a WGB_SYNC_*
 * scheme): two block barriers per step (at its start and before dQ; 2 Q, dO
 * (and LSE, D) buffers), or one (before dQ; 3 buffers; see the header).
 * PROBE (a PROBE_* value): leave out dQ's adds or its GEMM. */
template <int FQ, int SY, int PROBE>
static __global__ void __launch_bounds__(256, 1)
    dev_bwd_dkdv_kernel(AttnParams p, const __grid_constant__ AttnTma tm) {
#if PL_WGMMA_OK
  constexpr int D = 128, BN = WGB_BN, BM = WGB_BM, NT = 256;
  constexpr bool BULK = FQ == WGB_DQ_BULK, ONEBAR = SY != WGB_SYNC_TWO,
                 TMA = SY == WGB_SYNC_TMA;
  constexpr int NB = wgb_nbuf(SY);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char *base =
      smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sK = reinterpret_cast<bf16 *>(base); /* [2][BN][64]         */
  bf16 *sV = sK + BN * 128;                  /* [2][BN][64]         */
  bf16 *sQ = sV + BN * 128;                  /* [NB buf][2][BM][64] */
  bf16 *sdO = sQ + NB * BM * 128;            /* [NB buf][2][BM][64] */
  bf16 *sdS = sdO + NB * BM * 128;           /* [2 buf][BN][64] (FQ) */
  float *sdQ = reinterpret_cast<float *>(
      sdS + (FQ ? 2 * BN * BM : 0));       /* [2][8][128][4] */
  float *sL = sdQ + (BULK ? BM * 128 : 0); /* [NB buf][BM] LSE */
  float *sDl = sL + NB * BM;               /* [NB buf][BM] D   */
  uint64_t *full = reinterpret_cast<uint64_t *>(sDl + NB * BM); /* [NB] (TMA) */

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = warp >> 2, wq = warp & 3, g = lane >> 2, t = lane & 3;
  const bool leader =
      (tid & 127) == 0; /* issues its warpgroup's bulk reductions (ONEBAR) */
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
        tma_load_pair<BM>(sQ + buf * BM * 128, sdO + buf * BM * 128, tm, h, qs,
                          b, full + buf);
    } else {
      load_tile_sw128<BM, NT>(sQ + buf * BM * 128, blk.q(p, h), qs, S, qstride,
                              tid);
      load_tile_sw128<BM, NT>(sdO + buf * BM * 128, blk.dout(p, h), qs, S,
                              qstride, tid);
    }
    if (tid < 2 * BM) {
      const int i = tid & (BM - 1), q = qs + i;
      const float *src =
          (tid < BM ? p.lse : p.delta) + ((int64_t)b * p.nq + h) * S;
      float *dst = (tid < BM ? sL : sDl) + buf * BM + i;
      cp_async4(dst, src + (q < S ? q : S - 1), q < S ? 4 : 0);
    }
  };

  if (TMA && tid == 0)
    mbar_init_n(full, NB);
  load_tile_sw128<BN, NT>(sK, gK, k0, S, kstride, tid);
  load_tile_sw128<BN, NT>(sV, gV, k0, S, kstride, tid);
  issue(0, 0);
  cp_async_commit();
  if (ONEBAR) { /* two steps ahead: step 1 now, step it + 2 after step it's
                   barrier */
    if (niter > 1)
      issue(1, 1);
    cp_async_commit();
  }

  float dk[64], dv[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    dk[i] = dv[i] = 0.f;
  const int key_r =
      kw0 + wq * 16 + g; /* this thread's keys: key_r, key_r + 8 */
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
      s4[j * 128] = make_float4(dqp[4 * j], dqp[4 * j + 1], dqp[4 * j + 2],
                                dqp[4 * j + 3]);
  };
  /* after a barrier past dq_stage: half -1 (all) by thread 0, else by the
   * leader of warpgroup `half` */
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
  /* element 4j + e: query q0 + 16wq + g + 8·(e>>1), d 64wg + 8j + 2t + (e&1) */
  auto dq_flush = [&](int q0, int h) {
    float *gdq =
        p.dqacc + (int64_t)b * S * qstride + (int64_t)h * D + wg * 64 + 2 * t;
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
      if (PROBE != PROBE_NO_DQ_GEMM)
        wg_m64n64_ss<1, 1>(
            dqp, wg_desc_mn(sdS + dsb * BN * BM + kk * 16 * 64, BM * 128),
            wg_desc_mn(sK + wg * (BN * 64) + kk * 16 * 64, BN * 128), kk > 0);
    wg_commit();
  };

  for (int it = 0; it < niter; ++it) {
    const int buf = it % NB;
    if (!ONEBAR || it == 0) {
      /* step it's tiles in place and fenced for the async proxy; step it-1
       * (both warpgroups) done with buffer buf^1 (two barriers) */
      cp_async_wait<ONEBAR ? 1 : 0>();
      if (BULK && !ONEBAR && tid == 0)
        bulk_wait_read<0>(); /* the stage is free */
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
    if (FQ) { /* the previous step's dQ, run over the barrier, to dQacc or the
                 stage */
      wg_wait0();
      wg_hold(dqp);
      if (FQ == WGB_DQ_ATOMIC && pend_q >= 0 && PROBE != PROBE_NO_ADD)
        dq_flush(pend_q, pend_h);
      if (BULK && pend_q >= 0) {
        dq_stage();
        if (ONEBAR) { /* this warpgroup's half, reduced at once by its leader */
          fence_proxy_async();
          named_bar_sync(1 + wg, 128);
          if (leader && PROBE != PROBE_NO_ADD)
            dq_bulk(pend_q, pend_h, wg);
        }
      }
    }
    /* (TMA: step it's Q, dO landed; waited for after the previous dQ's
     * wgmma.wait_group, as a spin loop with a wgmma in flight made ptxas
     * inject a wait of its own: C7517) */
    if (TMA)
      mbar_wait(full + buf, (uint32_t)(it / NB) & 1u);
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
        float pr = exp2f(st[4 * j + e] * p.scale_log2 -
                         ((e & 1) ? l2.y : l2.x) * LOG2E_F);
        if (need_mask) {
          const int key = key_r + 8 * (e >> 1),
                    q = qs + 8 * j + 2 * t + (e & 1);
          if (key > q || q >= S)
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
    if (FQ) {
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
      if (ONEBAR)
        cp_async_wait<0>();
      if (BULK && ONEBAR && leader)
        bulk_wait_read<0>();
      fence_proxy_async(); /* (BULK: also the stage's stores before the bulk
                              read) */
      __syncthreads();
      if (ONEBAR) {
        if (it + 2 < niter)
          issue(it + 2, (it + 2) % NB);
        cp_async_commit();
      }
    }
    if (FQ) {
      /* dQ of this step (both warpgroups' dS^T halves: hence the barrier
       * above), issued now and left in flight, flushed by the next step (or
       * after the loop); dS^T is
       * double-buffered, as a warpgroup may still read buffer it&1 when the
       * other writes the other one in the next step. */
      if (BULK && !ONEBAR && tid == 0 && pend_q >= 0 && PROBE != PROBE_NO_ADD)
        dq_bulk(pend_q, pend_h, -1);
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
    if (pend_q >= 0)
      dq_flush(pend_q, pend_h);
  }
  if (BULK) { /* the last step's dQ; then every bulk reduction complete */
    wg_wait0();
    wg_hold(dqp);
    if (!ONEBAR) {
      if (tid == 0)
        bulk_wait_read<0>();
      __syncthreads();
    } /* (one barrier: the leaders waited before the last step's barrier) */
    if (pend_q >= 0)
      dq_stage();
    fence_proxy_async();
    if (ONEBAR) {
      named_bar_sync(1 + wg, 128);
      if (leader) {
        if (pend_q >= 0)
          dq_bulk(pend_q, pend_h, wg);
        bulk_wait0();
      }
    } else {
      __syncthreads();
      if (tid == 0) {
        if (pend_q >= 0)
          dq_bulk(pend_q, pend_h, -1);
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

/* ======================================================================== */
/* versions                                                                 */
/* ======================================================================== */

static AttnParams params(const pl_attn_shape *sh, dev_bufs *b) {
  AttnParams p = pl__attn_params(sh);
  p.q = (const bf16 *)b->q;
  p.k = (const bf16 *)b->k;
  p.v = (const bf16 *)b->v;
  p.o = (const bf16 *)b->o;
  p.dout = (const bf16 *)b->dout;
  p.lse = b->lse;
  p.dq = (bf16 *)b->dq;
  p.dk = (bf16 *)b->dk;
  p.dv = (bf16 *)b->dv;
  p.dqacc = (float *)b->ws;
  p.delta = p.dqacc + pl__attn_dqacc_elems(sh);
  return p;
}

/* an engine backward through the public API */
template <pl_attn_bwd_kind K>
static pl_status engine_bwd(pl_stream *s, const pl_attn_shape *sh,
                            dev_bufs *b) {
  pl_attn_shape k = *sh;
  k.kernels.bwd = K;
  return pl_attn_bwd(s, &k, b->q, b->k, b->v, b->o, b->dout, b->lse, b->dq,
                     b->dk, b->dv);
}

/* the engine's MMA (K = MMA) or bulk wgmma backward (K = WGMMA) kernels with
 * the step order BWD_WALK_ASC */
template <pl_attn_bwd_kind K>
static pl_status engine_bwd_asc(pl_stream *s, const pl_attn_shape *sh,
                                dev_bufs *b) {
  if (K == PL_ATTN_BWD_WGMMA)
    PL_TRY(dev_need_wgmma(s, sh));
  AttnParams p = params(sh, b);
  p.walk = BWD_WALK_ASC;
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const unsigned B = (unsigned)sh->batch;
  PL_TRY(pl__attn_delta(st, p, 128, B));
  if (K == PL_ATTN_BWD_MMA)
    return pl__attn_mma_bwd(st, p, 128, B);
  return pl__attn_wgmma_bwd(st, p, B, pl__attn_dqacc_elems(sh), false);
}

/* a dev dK/dV kernel variant, with the delta kernel before and the dQ
 * conversion after */
template <int FQ, int SY, int PR>
static pl_status dev_bwd(pl_stream *s, const pl_attn_shape *sh, dev_bufs *b) {
  PL_TRY(dev_need_wgmma(s, sh));
  AttnParams p = params(sh, b);
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const unsigned B = (unsigned)sh->batch;
  PL_TRY(pl__attn_delta(st, p, 128, B));
  constexpr size_t smem = wgb_dkdv_smem_bytes(FQ, SY);
  auto kern = dev_bwd_dkdv_kernel<FQ, SY, PR>;
  AttnTma tm;
  memset(&tm, 0, sizeof tm);
  if (SY == WGB_SYNC_TMA) {
    PL_TRY(pl__attn_tma_map_bshd(&tm.a, p.q, p.nq, p.S, B, WGB_BM));
    PL_TRY(pl__attn_tma_map_bshd(&tm.b, p.dout, p.nq, p.S, B, WGB_BM));
  }
  cudaError_t e = cudaFuncSetAttribute(
      kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e == cudaSuccess && FQ != WGB_DQ_NONE)
    e = cudaMemsetAsync(p.dqacc, 0, pl__attn_dqacc_elems(sh) * sizeof(float),
                        st);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "dev bwd: smem %zu B, memset: %s", smem,
                        cudaGetErrorString(e));
  dim3 grid((unsigned)((p.S + WGB_BN - 1) / WGB_BN), (unsigned)p.nkv, B);
  kern<<<grid, 256, smem, st>>>(p, tm);
  PL_TRY(pl__attn_launched("dev bwd dkdv launch"));
  if (FQ == WGB_DQ_BULK)
    return pl__attn_dq_convert_tiled(st, p.dqacc, p.dq, p.S, p.nq, B, p.scale);
  if (FQ == WGB_DQ_ATOMIC)
    return pl__attn_dq_convert(st, p.dqacc, p.dq, (int64_t)B * p.S * p.nq * 128,
                               p.scale);
  return pl__attn_wgmma_dq(st, p, B); /* split: the engine's dQ kernel */
}

#define SLOWER "measured slower than 3: see doc/performance/attention.md"
#define LOST_WITH_3                                                            \
  "the scheme that lost with 3: see doc/performance/attention.md"
#define PROBED "probe (wrong dQ by design): timed, not validated"
static const dev_version versions[] = {
    {1, "simple", "engine: one warp per query row / key row",
     "the device reference", engine_bwd<PL_ATTN_BWD_SIMPLE>, 0, 1},
    {2, "mma", "engine: mma.sync by key blocks, dQ by fp32 atomics",
     "engine: sm_80+, d = 64, CUDA_ARCH=90", engine_bwd<PL_ATTN_BWD_MMA>, 0, 0},
    {3, "wgmma/bulk", "engine: wgmma by key blocks, dQ by bulk reductions",
     "engine: the default on sm_90a", engine_bwd<PL_ATTN_BWD_WGMMA>, 0, 0},
    {4, "wgmma/split", "engine: dK/dV kernel and dQ kernel, no atomics",
     "engine: bit-reproducible dQ", engine_bwd<PL_ATTN_BWD_SPLIT>, 0, 0},
    {5, "mma/asc", "2 with the query tiles walked head by head, upwards",
     "the step order that lost with 3: see doc/performance/attention.md",
     engine_bwd_asc<PL_ATTN_BWD_MMA>, 0, 0},
    {6, "wgmma/bulk/asc", "3 with the query tiles walked head by head, upwards",
     SLOWER, engine_bwd_asc<PL_ATTN_BWD_WGMMA>, 0, 0},
    {7, "wgmma/fused", "3 with dQ by fp32 atomics into a row workspace", SLOWER,
     dev_bwd<WGB_DQ_ATOMIC, WGB_SYNC_TMA, PROBE_NONE>, 0, 0},
    {8, "wgmma/bulk/cp", "3 with Q and dO by cp.async from every thread",
     SLOWER, dev_bwd<WGB_DQ_BULK, WGB_SYNC_ONE, PROBE_NONE>, 0, 0},
    {9, "wgmma/bulk/2bar", "3 with two block barriers per step", SLOWER,
     dev_bwd<WGB_DQ_BULK, WGB_SYNC_TWO, PROBE_NONE>, 0, 0},
    {10, "wgmma/fused/2bar", "7 with two block barriers per step", SLOWER,
     dev_bwd<WGB_DQ_ATOMIC, WGB_SYNC_TWO, PROBE_NONE>, 0, 0},
    {11, "wgmma/fused/cp", "7 with Q and dO by cp.async from every thread",
     SLOWER, dev_bwd<WGB_DQ_ATOMIC, WGB_SYNC_ONE, PROBE_NONE>, 0, 0},
    {12, "wgmma/split/cp", "4 with Q and dO by cp.async from every thread",
     LOST_WITH_3, dev_bwd<WGB_DQ_NONE, WGB_SYNC_ONE, PROBE_NONE>, 0, 0},
    {13, "wgmma/split/2bar", "4 with two block barriers per step", LOST_WITH_3,
     dev_bwd<WGB_DQ_NONE, WGB_SYNC_TWO, PROBE_NONE>, 0, 0},
    {14, "probe bulk -add", "3 without the dQ reductions", PROBED,
     dev_bwd<WGB_DQ_BULK, WGB_SYNC_TMA, PROBE_NO_ADD>, 1, 0},
    {15, "probe bulk -gemm", "3 without the dQ GEMM", PROBED,
     dev_bwd<WGB_DQ_BULK, WGB_SYNC_TMA, PROBE_NO_DQ_GEMM>, 1, 0},
    {16, "probe fused -add", "7 without the dQ atomics", PROBED,
     dev_bwd<WGB_DQ_ATOMIC, WGB_SYNC_TMA, PROBE_NO_ADD>, 1, 0},
    {17, "probe fused -gemm", "7 without the dQ GEMM", PROBED,
     dev_bwd<WGB_DQ_ATOMIC, WGB_SYNC_TMA, PROBE_NO_DQ_GEMM>, 1, 0},
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

  /* the CPU reference on the same inputs (pl_rng_fill: the same bits); every
   * version runs on its O and LSE */
  pl_attn_shape vs = {1, o.check_seq, 8, 2, 128, 0.f, PL_BF16, {}};
  const size_t nqe = (size_t)(vs.seq * vs.n_q * 128),
               nke = (size_t)(vs.seq * vs.n_kv * 128);
  const size_t nr = (size_t)(vs.seq * vs.n_q);
  dev_bufs g = dev_bufs_new(gpu, &vs, 42), c = dev_bufs_new(cpu, &vs, 42);
  plCheck(pl_attn_fwd(cs, &vs, c.q, c.k, c.v, c.o, c.lse));
  plCheck(pl_attn_bwd(cs, &vs, c.q, c.k, c.v, c.o, c.dout, c.lse, c.dq, c.dk,
                      c.dv));
  plCheck(pl_memcpy_async(gs, g.o, c.o, nqe * 2));
  plCheck(pl_memcpy_async(gs, g.lse, c.lse, nr * 4));
  printf(
      "# validation: B=1 S=%lld n_q=8 n_kv=2 d=128 against the CPU reference\n",
      (long long)vs.seq);
  int ok[NVERSIONS], failed = 0;
  for (int i = 0; i < NVERSIONS; i++) {
    const dev_version *v = &versions[i];
    ok[i] = 0;
    if (o.version && v->num != o.version)
      continue;
    plCheck(pl_fill(gs, g.dq, PL_BF16, nqe, NAN));
    plCheck(pl_fill(gs, g.dk, PL_BF16, nke, NAN));
    plCheck(pl_fill(gs, g.dv, PL_BF16, nke, NAN));
    pl_status st = v->run(gs, &vs, &g);
    if (st == PL_OK)
      st = pl_stream_sync(gs);
    if (st != PL_OK) {
      printf("# %3d %-18s %s: %s\n", v->num, v->name, pl_strerror(st),
             pl_last_error());
      failed |= st != PL_EUNSUPPORTED;
      continue;
    }
    printf("# %3d %-18s%s\n", v->num, v->name,
           v->probe ? " (probe: not validated)" : "");
    if (v->probe) {
      ok[i] = 1;
      continue;
    }
    ok[i] = dev_validate(gs, "dQ", g.dq, c.dq, PL_BF16, nqe, 4e-2);
    ok[i] &= dev_validate(gs, "dK", g.dk, c.dk, PL_BF16, nke, 4e-2);
    ok[i] &= dev_validate(gs, "dV", g.dv, c.dv, PL_BF16, nke, 4e-2);
    if (!ok[i])
      printf("#     MISMATCH: not timed\n");
    failed |= !ok[i];
  }
  dev_bufs_free(gpu, &g);
  dev_bufs_free(cpu, &c);

  /* timing: O and LSE from the engine's forward */
  pl_attn_shape ts = {1, o.seq, o.nq, o.nkv, 128, 0.f, PL_BF16, {}};
  dev_bufs t = dev_bufs_new(gpu, &ts, 7);
  plCheck(pl_attn_fwd(gs, &ts, t.q, t.k, t.v, t.o, t.lse));
  printf("# timing: B=1 S=%lld n_q=%d n_kv=%d d=128, backward, median of %d "
         "after %d warm-ups\n",
         (long long)ts.seq, ts.n_q, ts.n_kv, o.iters, o.warmup);
  printf("%-4s %-18s %10s %8s\n", "ver", "name", "ms", "TFLOP/s");
  for (int i = 0; i < NVERSIONS; i++) {
    const dev_version *v = &versions[i];
    if (!ok[i])
      continue;
    const double ms = dev_time_ms(gs, &ts, &t, v, v->slow ? 0 : o.warmup,
                                  v->slow ? 1 : o.iters);
    printf("%-4d %-18s %10.3f %8.1f\n", v->num, v->name, ms,
           pl_attn_flops_bwd(&ts) / ms * 1e-9);
  }
  dev_bufs_free(gpu, &t);
  pl_dev_destroy(cpu);
  pl_dev_destroy(gpu);
  return failed ? 1 : 0;
}
