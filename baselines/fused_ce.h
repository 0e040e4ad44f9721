/* fused_ce.h — the single-device fused heads (the CCE/Liger-style peers):
 * no N×V logits.
 *
 * pl_fused_ce: the three-GEMM schedule (ops/ce.h, pl_ce_head3): token chunks
 * against the whole vocabulary, each chunk's residual formed in place from its
 * complete softmax and spent on dX and dW at once — no recompute — within the
 * blocked schedule's strip bound (N·Vb·(6|4) bytes).  When not even one row of
 * V fits that bound (tiny N·Vb), it runs the blocked schedule instead.  This
 * is what Ring-DTP runs at P = 1 (ring_dtp.h, pl_dtp_run).
 *
 * pl_fused_ce_blocked: vocabulary blocks of Vb columns with the online
 * log-sum-exp (Eq. 3).  Forward folds strip by strip and keeps only lse per
 * token; backward recomputes each strip and spends it on dX and dW at once:
 * four GEMMs.  Live logits: one N×Vb f32 strip (+ its bf16 residual in bf16
 * mode).  What Ring-DTP's meetings run at P > 1. */
#ifndef PLATEAU_BASELINES_FUSED_CE_H
#define PLATEAU_BASELINES_FUSED_CE_H

#include "ops/ce.h"

/* Forward (+ backward when pb->dx, pb->dw set) on stream s; pb->w is h×v.
 * pb->block: columns per strip (0: pl_ce_default_block(dt)), which sets the
 * bound of both schedules. */
pl_status pl_fused_ce(pl_stream *s, const pl_ce_problem *pb);
pl_status pl_fused_ce_blocked(pl_stream *s, const pl_ce_problem *pb);

/* The strip bound of the "logits" tag for this problem (both schedules). */
size_t pl_fused_ce_logits_bound(const pl_ce_problem *pb);

/* The token-chunked variant (the Liger-style peer): chunks of Nc rows meet
 * the FULL vocabulary, Nc = max(1, ⌊N·Vb/V⌋) so a chunk's logits (Nc×V) take
 * what one N×Vb strip takes.  Each chunk's softmax is complete, so its
 * gradients are made at once — 3 GEMMs of 2·Nc·H·V FLOPs per chunk against
 * the blocked head's 4 (no recompute) — and dW is accumulated over chunks (f32;
 * in bf16 mode an f32 H×V accumulator, tag "grads").  Needs the mean's count
 * first (pl_ce_count).  Forward and backward in one pass. */
pl_status pl_fused_ce_chunked(pl_stream *s, const pl_ce_problem *pb);
/* Rows per chunk and the "logits" bound (Nc·V·(4|6) bytes). */
int64_t pl_fused_ce_chunk_rows(const pl_ce_problem *pb);
size_t pl_fused_ce_chunked_logits_bound(const pl_ce_problem *pb);

#endif
