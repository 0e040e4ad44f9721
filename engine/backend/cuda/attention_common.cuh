/* attention_common.cuh — what the CUDA GQA flash-attention kernels
 * share: the kernel parameters, the PTX wrappers (cp.async, ldmatrix,
 * mma.sync, wgmma, mbarriers, TMA, bulk reductions), tile loads, the step
 * walk of the backward's key blocks, the wgmma register-tile helpers (mask,
 * online softmax, rescale, P packing, stores), the wgmma backward's tile
 * geometry, and the host declarations of the kernel files' launch functions.
 * Included by the kernel files (attention_simple.cu, attention_mma.cu,
 * attention_wgmma_fwd.cu, attention_wgmma_bwd.cu), the launcher
 * (attention.cu) and the dev/attention programs, so that no helper exists
 * twice.
 *
 * Layouts (model/attention.h): Q, O, dO, dQ [B, S, n_q, d]; K, V, dK, dV
 * [B, S, n_kv, d]; LSE and the row dots D = rowsum(dO∘O) [B, n_q, S] f32.
 * Query head h reads kv head h / (n_q / n_kv).
 *
 * Numerics shared by every kernel: bf16 in, fp32 scores and accumulators,
 * softmax via exp2 with scale·log2e folded in, P rounded to bf16 before P·V
 * (the tensor-core kernels; SIMPLE keeps fp32), the row sum of P in fp32.
 * Masked keys are −inf; key blocks past the diagonal are never visited.
 * The full mask (PL_ATTN_FULL, AttnParams.full) is taken by SIMPLE (a
 * runtime flag), MMA, the wgmma forward and the wgmma (bulk) backward (a
 * template argument FULL, so the causal instantiation is the code it was:
 * every key tile is walked and only keys at or past S are masked); the split
 * backward is causal only. */
#ifndef PLATEAU_BACKEND_CUDA_ATTENTION_COMMON_CUH
#define PLATEAU_BACKEND_CUDA_ATTENTION_COMMON_CUH

#include <cuda.h> /* CUtensorMap (the driver entry point comes through the runtime) */
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "backend/attention_kernels.h"
#include "plateau/status.h"

typedef __nv_bfloat16 bf16;

#define LOG2E_F 1.4426950408889634f

struct AttnParams {
  const bf16 *q, *k, *v, *o, *dout;
  bf16 *out, *dq, *dk, *dv;
  float *lse;        /* fwd: written; bwd: read                 */
  float *dqacc;      /* bwd: fp32 dQ accumulator [B, S, n_q, d] */
  float *delta;      /* bwd: D [B, n_q, S]                      */
  int S, nq, nkv, group;
  int walk;          /* bwd: BwdWalk order (BWD_WALK_*); a field,
                        not a template argument: one kernel serves both */
  float scale, scale_log2;
  int full;          /* mask PL_ATTN_FULL (SIMPLE; the launchers of
                        MMA and wgmma pick the FULL instantiation) */
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
/* wgmma (sm_90a)                                                           */
/* ======================================================================== */
/* Operands of wgmma come from shared memory tiles stored with the 128-byte
 * swizzle (load_tile_sw128, or TMA with CU_TENSOR_MAP_SWIZZLE_128B: two
 * 64-column halves of the head dim, 128-byte rows, 8-row groups 1024 B
 * apart, 16-byte chunk c of row r at c ^ (r % 8)).  A tile serves as a
 * K-major operand when its rows are the M or N index, and as an MN-major B
 * operand (trans-b = 1) when its rows are the K index.  The accumulator and
 * register-A fragments of wgmma have, per warp, the layouts of mma.sync
 * m16n8k16, so masking and the online softmax are those of the MMA kernels.
 *
 * Ordering rules of the PTX ISA the kernels rely on:
 *  - cp.async and st.shared write shared memory through the generic proxy,
 *    wgmma and the bulk copies read it through the async proxy: each writing
 *    thread runs fence.proxy.async once its writes are complete (after
 *    cp.async.wait_group) and before the barrier that precedes the reads;
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

/* mbarriers (the TMA loads of the wgmma forward and dK/dV kernels): init
 * with one arrival, arrival with the transaction bytes to expect, wait for a phase (bounded:
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
 * load_tile_sw128, rows past S zero-filled (pl__attn_tma_map_bshd): K and V
 * for the wgmma forward (rows 128), Q and dO for the wgmma dK/dV kernel
 * (rows 64) */
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

#define WG_BM 128

/* A wgmma forward block's indices and head pointers: 256 threads, two
 * warpgroups of four warps; blocks walk the query tiles last to first (the
 * longest causal rows start first).  nkb: the key tiles up to the diagonal,
 * or (FULL) all of them. */
struct WgBlock {
  int tid, wg, wq, g, t, h, b, q0, nkb;
  int64_t qstride, kstride;
  const bf16 *gQ, *gK, *gV;
};
template <int BN, bool FULL = false>
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
  w.nkb = ((FULL ? S : min(S, w.q0 + BM)) + BN - 1) / BN;
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

/* The full mask's only mask: keys at or past S (a tile that reaches past the
 * sequence; TMA and load_tile_sw128 zero-fill those rows, whose score 0 must
 * not count) of a score tile whose first key is k0. */
template <int BN>
static __device__ __forceinline__ void wg_mask_tail(float (&s)[BN / 2], int k0, int S, int t) {
#pragma unroll
  for (int jn = 0; jn < BN / 8; ++jn)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = k0 + jn * 8 + 2 * t + (e & 1);
      if (col >= S) s[4 * jn + e] = -INFINITY;
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

/* Tiles of the wgmma backward (d = 128).  WGB_BM is also the row count of
 * the bulk backward's dQ workspace tiles (pl__cuda_attn_bwd_workspace_bytes
 * rounds S up to it). */
#define WGB_BN 128 /* dK/dV kernel: keys per block (two warpgroups)      */
#define WGB_BM 64  /* dK/dV kernel: queries per step                     */
#define WGQ_BM 128 /* dQ kernel: query rows per block (two warpgroups)   */
#define WGQ_BN 64  /* dQ kernel: keys per step                           */

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


/* ======================================================================== */
/* host: the kernel files' launch functions (stream st, B sequences)        */
/* ======================================================================== */
/* Each checks its launches; none checks the shape (pl__cuda_attn_check has). */

/* PL_OK, or PL_ERUNTIME naming `what` when the last launch failed */
pl_status pl__attn_launched(const char *what);
/* The kernel parameters of shape sh (pointers NULL, walk BWD_WALK_DESC) */
AttnParams pl__attn_params(const pl_attn_shape *sh);
/* Floats of the backward's fp32 dQ accumulator, the workspace's first part
 * (D follows): B·n_q·d rows of S rounded up to WGB_BM */
size_t pl__attn_dqacc_elems(const pl_attn_shape *sh);
/* *m = the TMA descriptor of a [B][S][heads][128] bf16 tensor at ptr, box
 * rows × 64 (see AttnTma) */
pl_status pl__attn_tma_map_bshd(CUtensorMap *m, const void *ptr, int heads, int S, unsigned B,
                                int rows);
/* attention_simple.cu (d = 64 or 128): SIMPLE forward; D = rowsum(dO∘O)
 * into p.delta, which every backward reads; SIMPLE backward after it. */
pl_status pl__attn_simple_fwd(cudaStream_t st, const AttnParams &p, int d, unsigned B);
pl_status pl__attn_delta(cudaStream_t st, const AttnParams &p, int d, unsigned B);
pl_status pl__attn_simple_bwd(cudaStream_t st, const AttnParams &p, int d, unsigned B);
/* attention_mma.cu (d = 64 or 128): MMA forward; MMA backward after the
 * delta kernel (dQ through p.dqacc's first B·S·n_q·d floats); dq[i] =
 * bf16(scale · acc[i]), i < n. */
pl_status pl__attn_mma_fwd(cudaStream_t st, const AttnParams &p, int d, unsigned B);
pl_status pl__attn_mma_bwd(cudaStream_t st, const AttnParams &p, int d, unsigned B);
pl_status pl__attn_dq_convert(cudaStream_t st, const float *acc, bf16 *dq, int64_t n,
                              float scale);
/* attention_wgmma_fwd.cu (d = 128, sm_90a device code) */
pl_status pl__attn_wgmma_fwd(cudaStream_t st, const AttnParams &p, unsigned B);
/* attention_wgmma_bwd.cu (d = 128, sm_90a device code), after the delta
 * kernel: split, or bulk (p.dqacc: acc_el floats, zeroed here); dq =
 * bf16(scale · dQacc) from bulk's tiled dQacc layout. */
pl_status pl__attn_wgmma_bwd(cudaStream_t st, const AttnParams &p, unsigned B, size_t acc_el,
                             bool split);
pl_status pl__attn_dq_convert_tiled(cudaStream_t st, const float *acc, bf16 *dq, int S, int nq,
                                    unsigned B, float scale);
/* split's dQ kernel alone (after the delta kernel; writes p.dq) */
pl_status pl__attn_wgmma_dq(cudaStream_t st, const AttnParams &p, unsigned B);

#endif
