/* ulysses.h — Ulysses sequence parallelism over a group of D ranks: an
 * all-to-all trades the sequence shard for a head shard around attention
 * (DESIGN §1.5), and back after; backward does the reverse.
 *
 * Rank r of the group holds tokens [r·N, (r+1)·N) of one sequence of S = D·N
 * tokens, all h heads: x [N, h, d].  After seq_to_head it holds all S tokens
 * of heads [r·h/D, (r+1)·h/D): y [S, h/D, d].  h must divide by D, or D by h
 * (refused otherwise with PL_EINVAL).  When D = R·h (R > 1: more ranks than
 * heads, the key/value heads of GQA past D = n_kv) each head is replicated
 * to R ranks: rank r holds all S tokens of head r / R, y [S, 1, d], and
 * head_to_seq, seq_to_head's adjoint, adds the R copies in rank order (f32,
 * rounded once): the gradient of a replicated head.  For attention n_q must
 * divide by D and n_kv by D or D by n_kv, so query head h' on rank r reads
 * the kv head of its own group on the same rank: the forward per head is
 * exactly the single-rank computation (bit-exact on the CPU backend), and so
 * are dQ and, when D <= n_kv, dK and dV; past n_kv, dK and dV are sums of R
 * partials (each over n_q/D query heads), equal to the single-rank ones up
 * to the order of that summation.
 *
 * Memory: each call needs one scratch of N·h·d elements (seq_to_head: the
 * packed send blocks) or N·D·(h/D or 1)·d (head_to_seq: the received
 * blocks), allocated here under tag "attention"; the head-sharded tensors
 * are S·(h/D) = N·h elements, or S = N·D when replicated. */
#ifndef PLATEAU_MODEL_ULYSSES_H
#define PLATEAU_MODEL_ULYSSES_H

#include "model/attention.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Heads per rank of h heads over D ranks: h/D, 1 when D = R·h (replicated),
 * 0 when neither divides the other. */
int pl_ulysses_heads_per_rank(int h, int D);

/* x [N, h, d] -> y [D·N, h/D or 1, d] */
pl_status pl_ulysses_seq_to_head(pl_comm *c, pl_stream *s, const void *x,
                                 void *y, int64_t N, int h, int d, pl_dtype dt);
/* y [D·N, h/D or 1, d] -> x [N, h, d] (replicas summed) */
pl_status pl_ulysses_head_to_seq(pl_comm *c, pl_stream *s, const void *y,
                                 void *x, int64_t N, int h, int d, pl_dtype dt);

/* Causal GQA attention of one sequence sharded over the group: sh->seq = N
 * (local tokens), sh->batch = 1, heads as in the model.  q, o, dout, dq
 * [N, n_q, d]; k, v, dk, dv [N, n_kv, d] (this rank's tokens); lse
 * [n_q/D, D·N] f32: the head-sharded LSE this rank's attention saved. */
pl_status pl_ulysses_attn_fwd(pl_comm *c, pl_stream *s, const pl_attn_shape *sh,
                              const void *q, const void *k, const void *v,
                              void *o, float *lse);
pl_status pl_ulysses_attn_bwd(pl_comm *c, pl_stream *s, const pl_attn_shape *sh,
                              const void *q, const void *k, const void *v,
                              const void *o, const void *dout, const float *lse,
                              void *dq, void *dk, void *dv);

#ifdef __cplusplus
}
#endif
#endif
