/* ce.h — the vocabulary loss head (projection + cross-entropy) shared by
 * Ring-DTP (ring_dtp.h) and the baselines (dense, vocab-parallel, fused).
 *
 * The head maps X (N×H), targets t (N, int32) and the weight W (H×V, row-major,
 * logits Y = X·W) to a loss, dX (N×H) and dW (H×V).  Reductions as PyTorch's
 * cross_entropy: mean over the non-ignored targets (NaN when there are none),
 * sum, or none (one loss per token, 0 for an ignored one); targets equal to
 * ignore_index (-100) add nothing to the loss or the mean's count.
 *
 * What is here: the per-token running state of the online log-sum-exp
 * (DESIGN §1.2, Eq. 3) and the kernels over one logit strip (N×Vb): the fold,
 * the merge of two states, the finish (NLL = m + log z − y_t), and the
 * softmax residual dY = g·(softmax − onehot(t)) restricted to the strip.  Each
 * kernel has a CPU reference (backend/cpu/ce_cpu.c) and a CUDA twin
 * (backend/cuda/ce.cu) with the same signature; pl_ce_<kernel> dispatches on
 * the stream's backend.  On top of the kernels: "meetings" — one activation
 * batch X_j meeting one weight shard W_r, strip by strip, in forward (fold) and
 * backward (recompute the strip, residual, two GEMMs) — which Ring-DTP and the
 * blocked fused head both run.
 *
 * Dtypes: X, W, dX, dW are f32 or bf16 (all the same).  Strips, states and
 * the GEMMs' accumulation are f32; in bf16 mode the residual is rounded to
 * bf16 once, for the two backward GEMMs (bf16 in, f32 accumulate), the same
 * storage points on both backends.  A gradient that sums over strips (dX) is
 * accumulated in f32; one whose column blocks are each written by one GEMM
 * (dW) may be given in its storage dtype (dw_dt). */
#ifndef PLATEAU_OPS_CE_H
#define PLATEAU_OPS_CE_H

#include <stdbool.h>
#include <stdint.h>

#include "plateau/optypes.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PL_CE_IGNORE_INDEX (-100)

/* "mean" "sum" "none" by the enum, NULL-terminated (the one table of the
 * reductions' names: the operators' messages, the benches' options). */
extern const char *const pl_ce_reduction_names[];
const char *pl_ce_reduction_name(pl_ce_reduction r);
pl_status pl_ce_reduction_parse(const char *s, pl_ce_reduction *out);

/* ---- the head's kernels on the stream's backend ----------------------------
 * Each runs the CPU reference or the CUDA twin of backend/ce_kernels.h (the
 * meaning of every argument and the state layout are written there); an empty
 * strip (n or the width 0) returns PL_OK without a launch. */
pl_status pl_ce_count(pl_stream *s, int64_t n, const int32_t *t, int32_t ignore,
                      float *stats);
pl_status pl_ce_fold(pl_stream *s, const float *y, int64_t ldy, int64_t n,
                     int64_t vb, int64_t col0, const int32_t *t, float *st);
pl_status pl_ce_merge(pl_stream *s, int64_t n, float *st, const float *other);
pl_status pl_ce_finish(pl_stream *s, int64_t n, const float *st,
                       const int32_t *t, int32_t ignore, float *nll, float *lse,
                       float *stats);
pl_status pl_ce_rowgrad(pl_stream *s, int64_t n, const int32_t *t,
                        int32_t ignore, int red, const float *stats,
                        const float *dloss, float *g);
pl_status pl_ce_lossout(pl_stream *s, int red, const float *stats, float *loss);
pl_status pl_ce_residual(pl_stream *s, const float *y, int64_t ldy, int64_t n,
                         int64_t vb, int64_t col0, const int32_t *t,
                         const float *lse, const float *g, void *dy,
                         pl_dtype dy_dt, int64_t lddy);
pl_status pl_ce_rows(pl_stream *s, void *y, pl_dtype ydt, int64_t ldy,
                     int64_t n, int64_t v, const int32_t *t, int32_t ignore,
                     const float *g, float *nll, float *lse_out);
pl_status pl_ce_stats(pl_stream *s, int64_t n, const float *nll,
                      const int32_t *t, int32_t ignore, float *stats);
pl_status pl_ce_logsoftmax(pl_stream *s, const float *y, float *logp, int64_t n,
                           int64_t v);
pl_status pl_ce_nllgrad(pl_stream *s, int64_t n, int64_t v, const int32_t *t,
                        const float *g, float *grad_logp);
pl_status pl_ce_logsoftmax_bwd(pl_stream *s, const float *grad_logp,
                               const float *logp, float *grad, int64_t n,
                               int64_t v);
pl_status pl_ce_gather(pl_stream *s, const float *logp, int64_t n, int64_t v,
                       const int32_t *t, int32_t ignore, float *nll,
                       float *stats);

/* ---- meetings: one batch X_j (n×h) meets one shard (h×vs, columns
 * [col0, col0+vs) of W) strip by strip, block vb columns at a time ----------
 */

typedef struct pl_ce_meet {
  pl_dtype dt;      /* of x, w, and the residual for the GEMMs             */
  int64_t n, h;     /* rows of the batch, hidden                            */
  const void *x;    /* n×h                                                  */
  const int32_t *t; /* n                                                    */
  const void *w;    /* h×vs shard, row stride ldw (>= vs)                   */
  int64_t ldw, vs, col0;
  int64_t vb;   /* block: columns per strip (>= 1)                      */
  float *strip; /* workspace n×vb f32 (tag "logits")                    */
  void *dy;     /* bf16: workspace n×vb bf16 (tag "logits"); f32: NULL  */
  /* Optional (NULL: none): per strip c (columns [c·vb, c·vb + w_c)), a
   * buffer of n×w_c f32 (row stride w_c) that holds this strip's logits
   * from the forward to the backward, or NULL.  The forward's GEMM writes a
   * kept strip there instead of the workspace; the backward reads it instead
   * of recomputing (the same GEMM, so the same bits) and, in f32 mode, forms
   * the residual in place in it. */
  float *const *kept;
  /* Optional (NULL: none): events the stream waits for right before the
   * first GEMM that writes dx / dw (Ring-DTP accumulates into a gradient
   * partial that is still arriving: its hop overlaps the strip's recompute
   * and the GEMMs before the first write). */
  pl_event *dx_wait, *dw_wait;
} pl_ce_meet;

/* Forward: fold every strip into st (3n, f32). */
pl_status pl_ce_meet_fwd(pl_stream *s, const pl_ce_meet *mt, float *st);
/* Backward: for every strip recompute y, dY = residual(y, lse, g);
 *   dx (n×h f32) = (dx_beta)·dx + Σ dY·W_stripᵀ   (dx may be NULL: skipped)
 *   dw (h×vs, dtype dw_dt, row stride lddw) = dw_beta·dw + Xᵀ·dY per strip
 *     (each column range is written by one GEMM: 0 overwrites, 1 accumulates;
 *     dw may be NULL).
 * dx_beta and dw_beta are 0 or 1.  With vs == 0 or n == 0 the outputs are
 * zeroed (beta 0) or left alone (beta 1). */
pl_status pl_ce_meet_bwd(pl_stream *s, const pl_ce_meet *mt, const float *lse,
                         const float *g, float *dx, float dx_beta, void *dw,
                         pl_dtype dw_dt, int64_t lddw, float dw_beta);

/* ---- single-device heads (baselines/) and the group head (ring_dtp.h) share
 * this description of the problem -------------------------------------------
 * Each call is forward and backward together (what the benches time): loss,
 * then dx and dw (both may be NULL for forward only).  loss is device memory:
 * one value (mean, sum) or n values (none).  dloss (none only; device, n
 * values, NULL = ones) is the upstream gradient of the per-token losses. */
typedef struct pl_ce_problem {
  pl_dtype dt;     /* f32 or bf16: x, w, dx, dw                          */
  int64_t n, h, v; /* tokens, hidden, vocabulary (of w: see each head)   */
  pl_ce_reduction red;
  int32_t ignore;   /* PL_CE_IGNORE_INDEX                                 */
  int64_t block;    /* vocabulary block (columns per strip); 0: default  */
  const void *x;    /* n×h                                                */
  const int32_t *t; /* n, in [0, v) or == ignore                          */
  const void *w;    /* h×v (or the rank's shard h×|V_r|)                  */
  const float *dloss;
  float *loss;
  void *dx, *dw;
  /* Alternative to dx/dw (both NULL): the head allocates the gradients itself
   * (tag "grads", dtype dt) at the point its schedule first writes them — as
   * PyTorch's autograd does, so a dense peak measured here is PyTorch's — and
   * stores the pointers here; the caller pl_free()s them (also on failure when
   * non-NULL). */
  void **dx_alloc, **dw_alloc;
} pl_ce_problem;

/* Does pb ask for the backward?  (dx and dw given, or dx_alloc and dw_alloc.)
 */
static inline int pl_ce_problem_bwd(const pl_ce_problem *pb) {
  return (pb->dx && pb->dw) || (pb->dx_alloc && pb->dw_alloc);
}
/* ---- the three-GEMM head: one device, the whole vocabulary ----------------
 * Token chunks of Nc rows meet the full W (Liger's schedule): per chunk
 *   Y (Nc×V) = X_c·W                         GEMM 1 (logits, stored in dt)
 *   the rows kernel: lse, nll, and in place Y := g·(softmax(Y) − onehot(t))
 *   dX_c (Nc×H, dt) = Y·Wᵀ                   GEMM 2 (complete: k = V)
 *   dW (H×V, dt)   (+)= X_cᵀ·Y               GEMM 3 (beta 0 at the first
 *                                              chunk, 1 after)
 * — three GEMMs of 2·N·H·V FLOPs each and no recompute, against the blocked
 * schedule's four.  The row factors g (the mean's count, or dloss) are known
 * before the first chunk (pl_ce_count), so each chunk's gradients are made at
 * once; dX needs no accumulator.
 *
 * Memory bound: the chunk's logits are the one "logits" allocation, Nc·V
 * values of dt (bf16: 2 bytes, f32: 4), and Nc is the largest row count with
 * Nc·V·(2|4) <= N·Vb·(6|4) bytes — the blocked schedule's strip bound (an
 * N×Vb f32 strip, plus its bf16 residual in bf16 mode; Vb = the problem's
 * block, default pl_ce_default_block(dt), at most V): the same bound, three
 * GEMMs instead of four.  Chunks are balanced (K = ceil(N/Nc_max), Nc =
 * ceil(N/K) rounded up to 16 within the bound).  Beyond the strip: the row
 * factors and per-token losses (8 bytes a row, "ce_state") and the caller's dX,
 * dW.
 *
 * Numerics: the logits are stored in dt — in bf16 rounded once (the GEMM's
 * output, as PyTorch's bf16 linear and Liger's head), so the loss's tolerance
 * is the dense baseline's; the residual is formed from them in f32 and stored
 * in dt; GEMMs accumulate in f32; in bf16 dW is rounded once per chunk (K
 * roundings, as Liger's bf16 addmm accumulation), in f32 it accumulates in
 * f32. */

/* Rows per chunk for pb (n, v, dt, block); 0 when not even one row of V fits
 * the strip bound (the caller then runs the blocked schedule). */
int64_t pl_ce_head3_rows(const pl_ce_problem *pb);
/* The strip bound both schedules keep: N·Vb·(6|4) bytes. */
size_t pl_ce_strip_bound(const pl_ce_problem *pb);
/* Forward (+ backward when pb asks for it) by the three-GEMM schedule; pb->w
 * is H×V.  PL_EINVAL when pl_ce_head3_rows(pb) is 0. */
pl_status pl_ce_head3(pl_stream *s, const pl_ce_problem *pb);

/* Resolve the gradient outputs: pb's buffers, or new ones (dx_alloc mode). */
pl_status pl_ce_grads(pl_stream *s, const pl_ce_problem *pb, int64_t dw_cols,
                      void **dx, void **dw);

/* Validation shared by the heads: dtype, sizes, pointers.  PL_EINVAL with a
 * message naming the value. */
pl_status pl_ce_problem_check(const pl_ce_problem *pb, const char *who);

/* The online log-sum-exp state of n rows (3·n f32: running max, sum of
 * exponentials, target logit) set to its start: −inf, 0, 0. */
pl_status pl_ce_state_init(pl_stream *s, float *st, int64_t n);

/* Shard of a vocabulary of v columns for rank r of p: balanced, the first
 * v % p shards one column wider (V not divisible by P). */
static inline void pl_ce_shard(int64_t v, int p, int r, int64_t *col0,
                               int64_t *width) {
  int64_t q = v / p, rem = v % p;
  *width = q + (r < rem ? 1 : 0);
  *col0 = (int64_t)r * q + (r < rem ? r : rem);
}

/* Default block (columns per strip) when the caller gives 0: the whole shard
 * would be the paper; we default to 4096 columns (a strip of N×4096 f32) in
 * bf16 and to 16384 in f32.  The three-GEMM head takes its token chunks from
 * the same bound (Nc·V·(2|4) <= N·Vb·(6|4)), so at Vb 4096 an f32 chunk has
 * a third of a bf16 chunk's rows while each chunk re-reads and re-writes an
 * accumulator dW twice as large (f32): at H 7168, V 200,000, N 16K that was
 * 49 chunks of 335 rows, 560 GB of dW read-modify-write, and a dX GEMM of
 * 335 rows too thin to fill the GPU.  At 16384 an f32 chunk has about the
 * rows of a bf16 one at 4096 (16K: 13 chunks of 1264). */
#define PL_CE_DEFAULT_BLOCK 4096
#define PL_CE_DEFAULT_BLOCK_F32 16384

/* The default block of dtype dt (f32: PL_CE_DEFAULT_BLOCK_F32, else
 * PL_CE_DEFAULT_BLOCK). */
static inline int64_t pl_ce_default_block(pl_dtype dt) {
  return dt == PL_F32 ? PL_CE_DEFAULT_BLOCK_F32 : PL_CE_DEFAULT_BLOCK;
}

#ifdef __cplusplus
}
#endif
#endif
