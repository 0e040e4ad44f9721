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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/attention_common.cuh"
#include "backend/internal.h"
#include "model/attention.h"

/* 1 when the device code was built for sm_90a (wgmma available) */
static __global__ void wgmma_probe_kernel(int *out) { *out = PL_WGMMA_OK; }

/* ======================================================================== */
/* launchers                                                                */
/* ======================================================================== */

pl_status pl__attn_launched(const char *what) {
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
pl_status pl__attn_tma_map_bshd(CUtensorMap *m, const void *ptr, int heads, int S, unsigned B,
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

static pl_status fwd_launch(pl_stream *ps, const pl_attn_shape *sh, AttnParams p) {
  cudaStream_t st = (cudaStream_t)pl_stream_native(ps);
  const unsigned B = (unsigned)sh->batch;
  const int D = sh->head_dim;
  if (D == 128 && (sh->algo == PL_ATTN_WGMMA ||
                   (sh->algo == PL_ATTN_AUTO && wgmma_built(ps)))) {
    PL_TRY(wgmma_available(ps));
    int vm = WG_V_TRANSPOSE;
    PL_TRY(wgmma_v_path(&vm));
    return pl__attn_wgmma_fwd(st, p, B, vm);
  }
  if (use_mma(sh)) return pl__attn_mma_fwd(st, p, D, B);
  return pl__attn_simple_fwd(st, p, D, B);
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

/* PLATEAU_ATTN_WGMMA_SYNC = tma (default) | one | two: the wgmma dK/dV
 * kernel's synchronization scheme (see "Synchronization"; tma: one barrier,
 * Q and dO loaded by TMA onto mbarriers). */
static const char *const sync_names[WGB_SYNC_COUNT] = {"two", "one", "tma"};
static pl_status wgmma_bwd_sync(int *sy) {
  return env_choice("PLATEAU_ATTN_WGMMA_SYNC", sync_names, WGB_SYNC_COUNT, WGB_SYNC_TMA, sy);
}

/* PL_ATTN_WGMMA runs the wgmma backward (d = 128, sm_90a builds; refused
 * otherwise), AUTO too for d = 128 on sm_90a builds; MMA (and AUTO
 * otherwise) the MMA backward. */
static pl_status bwd_launch(pl_stream *ps, const pl_attn_shape *sh, AttnParams p) {
  cudaStream_t st = (cudaStream_t)pl_stream_native(ps);
  const unsigned B = (unsigned)sh->batch;
  const int D = sh->head_dim;
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
  PL_TRY(pl__attn_delta(st, p, D, B));
  if (wg) return pl__attn_wgmma_bwd(st, p, B, nq_el, pl_attn_dqacc_elems(sh), mode, sy);
  if (!use_mma(sh)) return pl__attn_simple_bwd(st, p, D, B);
  return pl__attn_mma_bwd(st, p, D, B);
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
  return fwd_launch(s, sh, p);
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
  return bwd_launch(s, sh, p);
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

