/* fused_ce.h — the single-device blocked fused head (the CCE/Liger-style
 * peer): vocabulary blocks of Vb columns with the online log-sum-exp (Eq. 3),
 * no full logits.  Forward folds strip by strip and keeps only lse per token;
 * backward recomputes each strip and spends it on dX and dW at once.  Live
 * logits: one N×Vb f32 strip (+ its bf16 residual in bf16 mode).
 *
 * This is also what Ring-DTP degenerates to at P = 1 (same meetings). */
#ifndef PLATEAU_BASELINES_FUSED_CE_H
#define PLATEAU_BASELINES_FUSED_CE_H

#include "ops/ce.h"

/* Forward (+ backward when pb->dx, pb->dw set) on stream s; pb->w is h×v.
 * pb->block: columns per strip (0: PL_CE_DEFAULT_BLOCK). */
pl_status pl_fused_ce(pl_stream *s, const pl_ce_problem *pb);

/* The strip bound of the "logits" tag for this problem. */
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
