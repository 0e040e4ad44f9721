/* attention.h — grouped-query flash attention, causal (the default) or with a
 * full mask, forward and backward, and the log-sum-exp merge of partial
 * outputs that ring attention builds on.
 *
 * Shapes (one call covers B sequences of S tokens; token-major, as the layers
 * produce them):
 *   Q, O, dQ, dO  [B, S, n_q,  d]   bf16 (or f32 on the CPU backend)
 *   K, V, dK, dV  [B, S, n_kv, d]
 *   LSE           [B, n_q, S]       f32, natural-log log-sum-exp of each query
 *                                   row's scaled scores (saved by forward)
 * n_kv divides n_q; query head h reads key/value head h / (n_q / n_kv).
 * d is 64 or 128 on CUDA (any d >= 1 on the CPU backend).
 *
 *   O_i = Σ_{j<=i} softmax_j(scale · q_i·k_j) v_j          (causal)
 *   O_i = Σ_{j<S}  softmax_j(scale · q_i·k_j) v_j          (mask FULL)
 *
 * The mask (pl_attn_shape.mask) is causal unless the caller sets
 * PL_ATTN_FULL: the off-diagonal blocks of ring attention, where every query
 * of one sequence chunk sees every key of an earlier chunk.  FULL runs on
 * the CPU kernel and, on CUDA, on SIMPLE, MMA, the wgmma forward and the
 * wgmma (bulk) backward, which AUTO picks for d = 128 as for a causal shape
 * (pl_attn_fwd_kernel / pl_attn_bwd_kernel name what ran); the split
 * backward is causal only: SPLIT with FULL is refused (PL_EUNSUPPORTED).
 *
 * Nothing S×S is ever formed: forward walks key blocks with an online softmax
 * and saves LSE; backward recomputes each score tile from Q, K and LSE
 * (FlashAttention-2).  FLOPs counted by the suite (causal, the usual formula):
 *   fwd = 4·S²·d·n_q/2 per sequence (FULL: 4·S²·d·n_q), bwd = 2.5·fwd.
 *
 * The shape (pl_attn_shape) and the CUDA kernel choice in it
 * (pl_attn_kernels: forward and backward kind, AUTO when zero) are defined in
 * backend/attention_kernels.h, beside the kernels that take them.  The CPU
 * kernels (backend/cpu/attention_cpu.c) are the reference: blocked online
 * softmax in fp32, rounding O/dQ/dK/dV to bf16 at the same storage points as
 * CUDA.  The CUDA kernels (backend/cuda/attention*.cu): SIMPLE (one warp per
 * row; the device reference), MMA (mma.sync, any sm_80+ GPU, d = 64 or 128),
 * WGMMA (Hopper wgmma with TMA loads, d = 128, sm_90a builds) and, for the
 * backward, SPLIT (wgmma without atomics: bit-reproducible dQ).
 * pl_attn_ref_fwd/bwd_f64 are naive double references for small sizes. */
#ifndef PLATEAU_MODEL_ATTENTION_H
#define PLATEAU_MODEL_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "plateau/optypes.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Check a shape (and its kernel choice) for a backend; PL_EINVAL /
 * PL_EUNSUPPORTED with a message naming the value. */
pl_status pl_attn_check(const pl_attn_shape *sh, pl_backend be);
/* scale actually used (sh->scale, or 1/sqrt(d) when 0). */
float pl_attn_scale(const pl_attn_shape *sh);
/* FLOPs of one forward (4·S²·d·n_q/2 per sequence when causal, 4·S²·d·n_q
 * with the full mask) and backward (2.5×). */
double pl_attn_flops_fwd(const pl_attn_shape *sh);
double pl_attn_flops_bwd(const pl_attn_shape *sh);
/* Bytes of device workspace backward needs on backend be (CPU: fp32 dQ, dK,
 * dV accumulators and the row dots D = rowsum(dO∘O); CUDA: the fp32 dQ
 * accumulator, B·n_q·d rows of S rounded up to 64, then D). */
size_t pl_attn_bwd_workspace_bytes(const pl_attn_shape *sh, pl_backend be);

/* Schedule-level entry points: check the shape, dispatch on the stream's
 * backend, allocate the backward workspace through the tracked allocator
 * (tag "attention") and free it stream-ordered. */
pl_status pl_attn_fwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                      const void *k, const void *v, void *o, float *lse);
pl_status pl_attn_bwd(pl_stream *s, const pl_attn_shape *sh, const void *q,
                      const void *k, const void *v, const void *o,
                      const void *dout, const float *lse, void *dq, void *dk,
                      void *dv);

/* The forward / backward kernel pl_attn_fwd / pl_attn_bwd runs for shape on
 * s (AUTO resolved for the device and build): "cpu", "simple", "mma",
 * "wgmma/ovtma" (forward), "wgmma/bulk" or "wgmma/split" (backward), for
 * result rows. */
const char *pl_attn_fwd_kernel(pl_stream *s, const pl_attn_shape *shape);
const char *pl_attn_bwd_kernel(pl_stream *s, const pl_attn_shape *shape);

/* Merge a block's partial output into an accumulator by their log-sum-exps
 * (backend/attention_kernels.h: pl__cpu_attn_merge): rows query rows of n_q
 * heads of d; o_acc [rows, n_q, d] f32 and lse_acc [n_q, rows] f32 updated,
 * o_blk [rows, n_q, d] of dt and lse_blk [n_q, rows] read.  An accumulator
 * started at lse −inf (o 0) takes the first block as it is. */
pl_status pl_attn_merge(pl_stream *s, float *o_acc, float *lse_acc,
                        const void *o_blk, const float *lse_blk, int64_t rows,
                        int n_q, int d, pl_dtype dt);

/* Naive double-precision references on host arrays (f64, same layouts; the
 * shape's mask honoured); for tests at small sizes.  O(B·S²·n_q·d).  lse may
 * be NULL. */
void pl_attn_ref_fwd_f64(const pl_attn_shape *sh, const double *q,
                         const double *k, const double *v, double *o,
                         double *lse);
void pl_attn_ref_bwd_f64(const pl_attn_shape *sh, const double *q,
                         const double *k, const double *v, const double *dout,
                         double *dq, double *dk, double *dv);

#ifdef __cplusplus
}
#endif
#endif
