/* attention_wgmma_fwd.cu — the attention forward on Hopper wgmma (sm_90a
 * device code, d = 128): what PL_ATTN_FWD_WGMMA and, for d = 128 on an
 * sm_90a build, AUTO run.  The V-operand paths and loading schemes it was
 * chosen over are programs in dev/attention/ (attention_forward.cu), their
 * measurements in doc/performance/attention.md.
 *
 * A block owns BM = 128 query rows of one query head (two consumer
 * warpgroups, 64 rows each, 256 threads; blocks walk the query tiles last to
 * first, so the longest causal rows start first) and walks the key tiles of
 * BN = 128 keys up to the diagonal (FULL, the full mask of ring attention's
 * off-diagonal blocks: all of them, masking only keys at or past S).
 * S = Q K^T runs on m64n128k16 with both
 * operands from swizzled shared memory (K-major), O += P V on m64n128k16
 * with P from registers and V read as loaded, an MN-major B operand.  K and V
 * are loaded by TMA from thread 0 onto one mbarrier per buffer; Q by
 * cp.async from every thread.
 *
 * FlashAttention-3's intra-warpgroup overlap: K runs one step ahead of V, so
 * that each warpgroup's softmax of S_{j+1} runs while its own O += P_j V_j is
 * on the tensor cores, with one S register set (O 64 + S 64 + P 32
 * registers of the 255).  K_j lives in K buffer j%2, V_j in V buffer j%2.
 * Load group L_m (m >= 0: issued in step m, after its barrier) is K_{m+2} (if
 * any) and V_{m+1}, onto mbarrier full[(m+1)%2]; L_{-1} (before the loop) is
 * K_0, K_1, V_0 onto full[0].  Step j (0 <= j < nkb-1):
 *   barrier (both warpgroups done with step j-1: S_j waited, PV_{j-1}
 *     waited, so K buffer j%2 and V buffer (j+1)%2 are free);
 *   thread 0 issues L_j (K_{j+2} -> K buffer j%2, V_{j+1} -> V buffer
 *     (j+1)%2);
 *   wait L_{j-1} (K_{j+1}, V_j) on full[j%2], phase j/2;
 *   issue S_{j+1} = Q K_{j+1}^T (into s: P_j is already packed in a),
 *   issue O += P_j V_j; wait 1 (S_{j+1} done); mask, softmax of s;
 *   wait 0 (PV_j done); O *= alpha; pack P_{j+1} into a.
 * The last PV (V_{nkb-1}, from L_{nkb-2}) is peeled: no branch around
 * wgmma, which would make ptxas serialize the kernel's wgmma. */
#include <string.h>

#include "backend/cuda/attention_common.cuh"

#define WGF_BN 128 /* keys per step */

/* Dynamic shared memory: Q [2][BM][64], K [2 buf][2][BN][64], V [2 buf][2][BN]
 * [64] swizzled; 2 mbarriers (64 B); 1024 B of slack to align the base:
 * 164,928 B (an sm_90 block may have 227 KB). */
static constexpr size_t wgf_smem_bytes() {
  return (size_t)WG_BM * 128 * 2 + (size_t)2 * WGF_BN * 128 * 2 +
         (size_t)2 * WGF_BN * 128 * 2 + 64 + 1024;
}

/* grid (ceil(S/128), n_q, B), 256 threads; tm: K (a) and V (b), rows 128.
 * FULL: the full mask (a template argument: the causal instantiation is the
 * code it was). */
template <bool FULL>
static __global__ void __launch_bounds__(256, 1)
    attn_fwd_wgmma_kernel(AttnParams p, const __grid_constant__ AttnTma tm) {
#if PL_WGMMA_OK
  constexpr int D = 128, BM = WG_BM, BN = WGF_BN, NT = 256;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  /* swizzled tiles need 1024-byte alignment (of the shared-window address) */
  unsigned char *base =
      smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  bf16 *sQ = reinterpret_cast<bf16 *>(base); /* [2][BM][64]        */
  bf16 *sK = sQ + BM * 128;                  /* [2 buf][2][BN][64] */
  bf16 *sV = sK + 2 * BN * 128;              /* [2 buf][2][BN][64] */
  uint64_t *full = reinterpret_cast<uint64_t *>(sV + 2 * BN * 128); /* [2] */

  const WgBlock w = wg_block<BN, FULL>(p);
  const int tid = w.tid, wg = w.wg, wq = w.wq, g = w.g, t = w.t, h = w.h,
            b = w.b;
  const int S = p.S, q0 = w.q0, nkb = w.nkb;

  if (tid == 0)
    mbar_init_n(full, 2);
  load_tile_sw128<BM, NT>(sQ, w.gQ, q0, S, w.qstride, tid);
  if (tid == 0) { /* L_{-1}: K_0, K_1, V_0 onto full[0] */
    mbar_expect_tx(full, (nkb > 1 ? 3 : 2) * BN * 128 * 2);
    tma_load_tile<BN>(sK, &tm.a, h / p.group, 0, b, full);
    if (nkb > 1)
      tma_load_tile<BN>(sK + BN * 128, &tm.a, h / p.group, BN, b, full);
    tma_load_tile<BN>(sV, &tm.b, h / p.group, 0, b, full);
  }
  cp_async_commit();

  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    o[i] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const int wrow0 = wg * 64 + wq * 16; /* this warp's first row in the tile */

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
  if (FULL) {
    if (BN > S)
      wg_mask_tail<BN>(s, 0, S, t);
  } else if (BN - 1 > q0 + wrow0) {
    wg_mask<BN>(s, 0, q0 + wrow0, g, t);
  }
  wg_softmax<BN>(s, mrow, lrow, alpha, p.scale_log2); /* (O is 0: no rescale) */
  wg_pack_p<BN>(a, s);
  for (int kb = 0; kb + 1 < nkb; ++kb) {
    const int buf = kb & 1;
    __syncthreads();
    if (tid == 0) { /* L_kb */
      uint64_t *bar = full + ((kb + 1) & 1);
      mbar_expect_tx(bar, (kb + 2 < nkb ? 2 : 1) * BN * 128 * 2);
      if (kb + 2 < nkb)
        tma_load_tile<BN>(sK + buf * BN * 128, &tm.a, hk, (kb + 2) * BN, b,
                          bar);
      tma_load_tile<BN>(sV + (buf ^ 1) * BN * 128, &tm.b, hk, (kb + 1) * BN, b,
                        bar);
    }
    mbar_wait(full + buf,
              (uint32_t)(kb >> 1) & 1u); /* L_{kb-1}: K_{kb+1}, V_kb */
    issue_s(sK + (buf ^ 1) * BN * 128);
    wg_issue_rs_mn<BN>(o, a, sV + buf * BN * 128);
    wg_wait1(); /* S_{kb+1} done; PV_kb may still run */
    wg_hold(s);
    const int k1 = (kb + 1) * BN;
    if (FULL) {
      if (k1 + BN > S)
        wg_mask_tail<BN>(s, k1, S, t);
    } else if (k1 + BN - 1 > q0 + wrow0) {
      wg_mask<BN>(s, k1, q0 + wrow0, g, t);
    }
    wg_softmax<BN>(s, mrow, lrow, alpha, p.scale_log2);
    wg_wait0(); /* PV_kb done: o and a free */
    wg_hold(o);
    wg_hold(a);
    wg_rescale<D>(o, alpha);
    wg_pack_p<BN>(a, s);
  }
  mbar_wait(full + ((nkb - 1) & 1),
            (uint32_t)((nkb - 1) >> 1) & 1u); /* V_{nkb-1} */
  wg_issue_rs_mn<BN>(o, a, sV + ((nkb - 1) & 1) * BN * 128);
  wg_wait0();
  wg_hold(o);
  wg_store<D>(p, o, mrow, lrow, b, h, q0 + wrow0 + g, t);
#else
  __trap(); /* built without sm_90a: the launcher refuses before this */
#endif
}

/* ======================================================================== */
/* launch                                                                   */
/* ======================================================================== */

pl_status pl__attn_wgmma_fwd(cudaStream_t st, const AttnParams &p, unsigned B) {
  constexpr size_t smem = wgf_smem_bytes();
  auto kern =
      p.full ? attn_fwd_wgmma_kernel<true> : attn_fwd_wgmma_kernel<false>;
  cudaError_t e = cudaFuncSetAttribute(
      kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "attention fwd wgmma: smem %zu B: %s",
                        smem, cudaGetErrorString(e));
  AttnTma tm;
  memset(&tm, 0, sizeof tm);
  PL_TRY(pl__attn_tma_map_bshd(&tm.a, p.k, p.nkv, p.S, B, WGF_BN));
  PL_TRY(pl__attn_tma_map_bshd(&tm.b, p.v, p.nkv, p.S, B, WGF_BN));
  dim3 grid((unsigned)((p.S + WG_BM - 1) / WG_BM), (unsigned)p.nq, B);
  kern<<<grid, 256, smem, st>>>(p, tm);
  return pl__attn_launched("fwd wgmma launch");
}
