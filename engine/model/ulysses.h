/* ulysses.h — Ulysses sequence parallelism over a group of D ranks: an
 * all-to-all trades the sequence shard for a head shard around attention
 * (DESIGN §1.5), and back after; backward does the reverse.
 *
 * Rank r of the group holds tokens [r·N, (r+1)·N) of one sequence of S = D·N
 * tokens, all h heads: x [N, h, d].  After seq_to_head it holds all S tokens
 * of heads [r·h/D, (r+1)·h/D): y [S, h/D, d].  h must divide by D (for
 * attention both n_q and n_kv; refused otherwise with PL_EINVAL), so query
 * head h' on rank r reads the kv head of its own group on the same rank, and
 * attention per head is exactly the single-rank computation (bit-exact on the
 * CPU backend).
 *
 * Memory: each call needs one scratch of N·h·d elements (the packed send or
 * received blocks), allocated here under tag "attention"; the head-sharded
 * tensors are as large as the sequence-sharded ones (S·h/D = N·h). */
#ifndef PLATEAU_MODEL_ULYSSES_H
#define PLATEAU_MODEL_ULYSSES_H

#include "model/attention.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x [N, h, d] -> y [D·N, h/D, d] */
pl_status pl_ulysses_seq_to_head(pl_comm *c, pl_stream *s, const void *x, void *y, int64_t N,
                                 int h, int d, pl_dtype dt);
/* y [D·N, h/D, d] -> x [N, h, d] */
pl_status pl_ulysses_head_to_seq(pl_comm *c, pl_stream *s, const void *y, void *x, int64_t N,
                                 int h, int d, pl_dtype dt);

/* Causal GQA attention of one sequence sharded over the group: sh->seq = N
 * (local tokens), sh->batch = 1, heads as in the model.  q, o, dout, dq
 * [N, n_q, d]; k, v, dk, dv [N, n_kv, d] (this rank's tokens); lse
 * [n_q/D, D·N] f32: the head-sharded LSE this rank's attention saved. */
pl_status pl_ulysses_attn_fwd(pl_comm *c, pl_stream *s, const pl_attn_shape *sh, const void *q,
                              const void *k, const void *v, void *o, float *lse);
pl_status pl_ulysses_attn_bwd(pl_comm *c, pl_stream *s, const pl_attn_shape *sh, const void *q,
                              const void *k, const void *v, const void *o, const void *dout,
                              const float *lse, void *dq, void *dk, void *dv);

#ifdef __cplusplus
}
#endif
#endif
