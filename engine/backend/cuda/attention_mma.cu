/* attention_mma.cu — the mma.sync attention kernels: what runs on GPUs
 * without wgmma, for d = 64, and in CUDA_ARCH=90 builds (PL_ATTN_FWD_MMA,
 * PL_ATTN_BWD_MMA, and AUTO there).
 *
 * FlashAttention-2 tiling on tensor cores (mma.sync m16n8k16 bf16 -> f32,
 * operands from shared memory through ldmatrix, tiles loaded with cp.async,
 * double-buffered).  Forward: a block of NW warps owns BM = 32·NW query rows
 * (two 16-row m-tiles per warp) and walks the key blocks of BN keys up to the
 * diagonal with an online softmax in registers, saving LSE.  Backward: a
 * block owns BN = 16·NW keys of one kv head (each warp 16 keys) and walks,
 * for every query head of its group, the query blocks at or past the
 * diagonal: S^T = K Q^T, P^T = exp(S^T·scale − LSE), dP^T = V dO^T,
 * dS^T = P^T∘(dP^T − D); dV += P^T dO and dK += dS^T Q stay in registers (so
 * GQA needs no atomics for dK/dV); dQ += dS K goes through shared memory and
 * fp32 atomics into a workspace, converted to bf16 (×scale) at the end.
 *
 * The mask is a template argument FULL: false is the causal kernel above;
 * true (PL_ATTN_FULL, ring attention's off-diagonal blocks) walks every key
 * block in forward (masking only keys past S) and every query block in
 * backward. */
#include "backend/cuda/attention_common.cuh"

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
    for (; i < n; ++i)
      dq[i] = __float2bfloat16(acc[i] * scale);
  }
}

/* ======================================================================== */
/* MMA forward                                                              */
/* ======================================================================== */

/* grid (ceil(S/BM), n_q, B), NW·32 threads; BM = 32·NW query rows, BN keys
 * per step (double-buffered), consumed BNS keys at a time.  Shared: Q [BM][LD],
 * K and V [2][BN][LD] (LD = D + 8: rows 16 B apart in the bank space, so
 * ldmatrix and cp.async are conflict-free). */
template <int D, int NW, int BN, int BNS, bool FULL>
static __global__ void __launch_bounds__(NW * 32)
    attn_fwd_mma_kernel(AttnParams p) {
  constexpr int MT = 2; /* 16-row m-tiles per warp */
  constexpr int BM = 16 * MT * NW;
  constexpr int LD = D + 8;
  constexpr int NT = NW * 32;
  constexpr int NN = BNS / 8; /* n-tiles of a score sub-tile */
  constexpr int ND = D / 8;   /* n-tiles of the output     */
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

  const int kend = FULL ? S : min(S, q0 + BM);
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
      for (int e = 0; e < 4; ++e)
        o[mt][dt][e] = 0.f;
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
      if (FULL || k0 <= q0 + wrow0 + MT * 16 - 1) {

        /* ---- S = Q K^T (raw scores, fp32) ---- */
        float s[MT][NN][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NN; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              s[mt][nt][e] = 0.f;
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

        /* ---- causal mask on blocks that reach past the tile's first row
         * (FULL: keys past S, which the tile loads zero-filled) ---- */
        if (FULL && k0 + BNS > S) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NN; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                int col = k0 + nt * 8 + 2 * t + (e & 1);
                if (col >= S)
                  s[mt][nt][e] = -INFINITY;
              }
        }
        if (!FULL && k0 + BNS - 1 > q0) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NN; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                int row = q0 + wrow0 + mt * 16 + g + (e >> 1) * 8;
                int col = k0 + nt * 8 + 2 * t + (e & 1);
                if (col > row)
                  s[mt][nt][e] = -INFINITY;
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
            ldsm_x4_t(
                bb, sVb + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD +
                        dt * 8 + (lane >> 4) * 8);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma_bf16(o[mt][dt], a[mt], bb[0], bb[1]);
              mma_bf16(o[mt][dt + 1], a[mt], bb[2], bb[3]);
            }
          }
        }
      }              /* warp has rows at or past k0 */
    }                /* sub-tiles */
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
          __nv_bfloat162 v2 = __floats2bfloat162_rn(
              o[mt][dt][2 * hf] * inv, o[mt][dt][2 * hf + 1] * inv);
          *reinterpret_cast<__nv_bfloat162 *>(orow + dt * 8 + 2 * t) = v2;
        }
        if (t == 0)
          gL[row] = mrow[mt][hf] * p.scale + logf(l);
      }
    }
  }
}
/* ======================================================================== */
/* MMA backward                                                             */
/* ======================================================================== */

/* grid (ceil(S/BN), n_kv, B), NW·32 threads; BN = 16·NW keys (warp w: keys
 * 16w..16w+15), BM = BN query rows per step.  Shared: K, V [BN][LD];
 * Q, dO [2][BM][LD] (dS^T [BN][BM+8] bf16 reuses the step's Q buffer);
 * LSE·log2e and D [2][BM] f32. */
template <int D, int NW, bool FULL>
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
  bf16 *sQ = sV + BN * LD;      /* [2][BM][LD] */
  bf16 *sdO = sQ + 2 * BM * LD; /* [2][BM][LD] */
  /* dS^T [BN][LDS] lives in the current step's Q buffer: Q is dead once
   * dK += dS^T Q is done (a barrier separates the two), and dropping a
   * separate dS tile keeps d = 128 at two blocks per SM */
  static_assert(BN * LDS <= BM * LD, "dS^T must fit in a Q buffer");
  float *sL = reinterpret_cast<float *>(sdO + 2 * BM * LD); /* [2][BM] */
  float *sD = sL + 2 * BM;                                  /* [2][BM] */

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const BwdBlock<D> blk(p, BN);
  const int hk = blk.hk, b = blk.b, S = blk.S, k0 = blk.k0;
  const int64_t qstride = blk.qstride, kstride = blk.kstride;
  const bf16 *gK = blk.gK, *gV = blk.gV;

  const BwdWalk<BM> walk(p, hk, FULL ? 0 : k0); /* FULL: every query block */
  const int niter = walk.niter;

  /* issue the loads of step `it` into buffer `buf` */
  auto issue = [&](int it, int buf) {
    const int h = walk.head(it);
    const int qs = walk.qs(it);
    load_tile<BM, D, LD, NT>(sQ + buf * BM * LD, blk.q(p, h), qs, S, qstride,
                             tid);
    load_tile<BM, D, LD, NT>(sdO + buf * BM * LD, blk.dout(p, h), qs, S,
                             qstride, tid);
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
    for (int e = 0; e < 4; ++e)
      dk[dt][e] = dv[dt][e] = 0.f;

  const int wk0 = warp * 16; /* this warp's first key in the tile */

  for (int it = 0; it < niter; ++it) {
    const int buf = it & 1;
    if (it + 1 < niter)
      issue(it + 1, buf ^ 1);
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
      for (int e = 0; e < 4; ++e)
        st[nt][e] = dpt[nt][e] = 0.f;
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
    const bool need_mask =
        FULL ? (qs + BM > S) : (qs < k0 + BN - 1) || (qs + BM > S);
#pragma unroll
    for (int nt = 0; nt < NQ; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ql = nt * 8 + 2 * t + (e & 1); /* query in the tile */
        float pr = exp2f(st[nt][e] * p.scale_log2 - cL[ql]);
        if (need_mask) {
          const int key = k0 + wk0 + g + (e >> 1) * 8;
          const int q = qs + ql;
          if ((!FULL && key > q) || q >= S)
            pr = 0.f;
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
          for (int e = 0; e < 4; ++e)
            acc[j][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          uint32_t a[4];
          ldsm_x4_t(a, sdS + (kk * 16 + (lane >> 4) * 8 + (lane & 7)) * LDS +
                           wq0 + ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int j = 0; j < 4; j += 2) {
            uint32_t bk[4];
            ldsm_x4_t(bk,
                      sK + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD +
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
/* launch                                                                   */
/* ======================================================================== */

/* Tile configurations (compile-time; see the kernels' comments). */
#define FWD_NW 4
/* keys per forward step (one barrier interval): 64; scores are computed in
 * sub-tiles of FWD_BNS keys: 32 for d = 128 keeps the score and output tiles
 * in 255 registers without spills */
#define FWD_BN(D) 64
#define FWD_BNS(D) ((D) == 128 ? 32 : 64)
#define BWD_NW 4

template <int D> static constexpr size_t fwd_smem_bytes() {
  return (size_t)(32 * FWD_NW + 4 * FWD_BN(D)) * (D + 8) * sizeof(bf16);
}
template <int D> static constexpr size_t bwd_smem_bytes() {
  return (size_t)(16 * BWD_NW) * (D + 8) * 2 * sizeof(bf16) + /* K, V       */
         (size_t)(16 * BWD_NW) * (D + 8) * 4 * sizeof(bf16) + /* Q, dO ×2   */
         (size_t)4 * (16 * BWD_NW) * sizeof(float);           /* LSE, D ×2 */
}

template <int D, bool FULL>
static pl_status mma_fwd(cudaStream_t st, const AttnParams &p, unsigned B) {
  constexpr int BM = 32 * FWD_NW;
  constexpr size_t smem = fwd_smem_bytes<D>();
  auto kern = attn_fwd_mma_kernel<D, FWD_NW, FWD_BN(D), FWD_BNS(D), FULL>;
  cudaError_t e = cudaFuncSetAttribute(
      kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention fwd: smem %zu B: %s", smem,
                        cudaGetErrorString(e));
  dim3 grid((unsigned)((p.S + BM - 1) / BM), (unsigned)p.nq, B);
  kern<<<grid, FWD_NW * 32, smem, st>>>(p);
  return pl__attn_launched("fwd mma launch");
}

/* dQacc (its first B·S·n_q·D floats) zeroed, the MMA backward adding dS K
 * into it, then bf16(scale · dQacc) */
template <int D, bool FULL>
static pl_status mma_bwd(cudaStream_t st, const AttnParams &p, unsigned B) {
  const int64_t nq_el = (int64_t)B * p.S * (int64_t)p.nq * D;
  cudaError_t e =
      cudaMemsetAsync(p.dqacc, 0, (size_t)nq_el * sizeof(float), st);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention bwd: memset: %s",
                        cudaGetErrorString(e));
  constexpr int BN = 16 * BWD_NW;
  constexpr size_t smem = bwd_smem_bytes<D>();
  auto kern = attn_bwd_mma_kernel<D, BWD_NW, FULL>;
  e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int)smem);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention bwd: smem %zu B: %s", smem,
                        cudaGetErrorString(e));
  dim3 grid((unsigned)((p.S + BN - 1) / BN), (unsigned)p.nkv, B);
  kern<<<grid, BWD_NW * 32, smem, st>>>(p);
  PL_TRY(pl__attn_launched("bwd mma launch"));
  return pl__attn_dq_convert(st, p.dqacc, p.dq, nq_el, p.scale);
}

pl_status pl__attn_mma_fwd(cudaStream_t st, const AttnParams &p, int d,
                           unsigned B) {
  if (p.full)
    return d == 64 ? mma_fwd<64, true>(st, p, B) : mma_fwd<128, true>(st, p, B);
  return d == 64 ? mma_fwd<64, false>(st, p, B) : mma_fwd<128, false>(st, p, B);
}
pl_status pl__attn_mma_bwd(cudaStream_t st, const AttnParams &p, int d,
                           unsigned B) {
  if (p.full)
    return d == 64 ? mma_bwd<64, true>(st, p, B) : mma_bwd<128, true>(st, p, B);
  return d == 64 ? mma_bwd<64, false>(st, p, B) : mma_bwd<128, false>(st, p, B);
}
pl_status pl__attn_dq_convert(cudaStream_t st, const float *acc, bf16 *dq,
                              int64_t n, float scale) {
  const int64_t nthr = (n + 3) / 4;
  attn_dq_convert_kernel<<<(unsigned)((nthr + 255) / 256), 256, 0, st>>>(
      acc, dq, n, scale);
  return pl__attn_launched("bwd dq convert launch");
}
