/* ring_attn.h — context parallelism as torchtitan runs it (PyTorch's
 * context_parallel with its defaults: load balance on, KV rotated by one
 * all-gather, f32 merge): causal GQA attention of one sequence of S tokens
 * over a CP group of CP ranks, with the load-balanced split, the partial
 * outputs merged by their log-sum-exp, on our flash kernels.
 *
 * Split: the sequence is cut into 2·CP chunks of c = S / (2·CP) tokens
 * (S not divisible by 2·CP is refused with PL_EINVAL); rank r holds global
 * chunks r and 2·CP − 1 − r (pl_ring_chunk), in that order, as its N = 2c
 * local tokens — every rank gets the same causal work.
 *
 * Forward: the packed local K and V ([K | V], N·n_kv·d each) are
 * all-gathered over the group once; for every source rank j and every pair
 * (local query chunk a, source key chunk b) with global chunks gq, gk the
 * block runs when gq >= gk — causal when gq == gk, the full mask
 * (PL_ATTN_FULL) when gq > gk — and its output and LSE are merged into an
 * f32 accumulator (pl_attn_merge).  Per rank that is 2 causal and 2·CP − 1
 * full c×c blocks (chunk r sees r earlier chunks, chunk 2·CP − 1 − r sees
 * 2·CP − 1 − r): 2·CP·c² score pairs, the same on every rank and exactly the
 * rank's share S²/(2·CP) of the causal work — no block is computed and then
 * masked away.
 * Backward: K and V are all-gathered again; each block's flash backward runs
 * on the final O and LSE (so P is the global softmax); dQ partials add into
 * an f32 accumulator; the dK, dV partials of source j's chunks add into an
 * f32 buffer that travels the ring (PyTorch's all-to-all rotation of the
 * gradient: sent to r + 1 each step, one more hop home at the end) and ends
 * on rank j.  dq, dk, dv are rounded to the model dtype once.
 *
 * Layouts (batch 1): q, o, dout, dq [N, n_q, d]; k, v, dk, dv [N, n_kv, d]
 * (local chunk 0 rows [0, c), chunk 1 rows [c, 2c)); lse [2, n_q, c] f32,
 * chunk-major (chunk a's LSE at lse + a·n_q·c).  The shape's seq is N (the
 * local tokens), its mask causal; its kernel choice applies to every block
 * (AUTO runs the same flash kernels on the full blocks as on the causal ones,
 * the wgmma kernels for d = 128 on sm_90a: model/attention.h; SPLIT, causal
 * only, is refused).
 *
 * Memory (device arena, freed before return; b = bytes of the dtype):
 *   "cp_kv"    the packed local K, V (2·N·n_kv·d·b) and the gathered K, V of
 *              the group (CP·2·N·n_kv·d·b), in forward and again in backward;
 *   "cp_ring"  forward: the f32 output accumulator (N·n_q·d·4) and one
 *              block's output and LSE (c·n_q·d·b + n_q·c·4); backward: the
 *              f32 dQ accumulator (N·n_q·d·4), three f32 dK|dV buffers
 *              (contribution, sent, received: 3·2·N·n_kv·d·4) and one
 *              block's dq, dk, dv (c·(n_q + 2·n_kv)·d·b);
 *   "attention" the flash backward's workspace (model/attention.h), one
 *              block at a time.
 * Streams: the all-gather and the gradient's ring hops run on the context's
 * comm stream, ordered with events against the caller's stream s (the
 * all-gather beside the local blocks, each hop beside the next step's
 * blocks); on the CPU backend in issue order. */
#ifndef PLATEAU_BASELINES_FSDP2_RING_ATTN_H
#define PLATEAU_BASELINES_FSDP2_RING_ATTN_H

#include "model/attention.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Global chunk of local chunk a (0 or 1) of CP-rank r. */
static inline int pl_ring_chunk(int CP, int r, int a) {
  return a ? 2 * CP - 1 - r : r;
}

typedef struct pl_ring_attn pl_ring_attn;

/* cp: the group (borrowed; NULL = one rank).  Creates the comm stream. */
pl_status pl_ring_attn_create(pl_comm *cp, pl_dev *dev, pl_ring_attn **out);
void pl_ring_attn_destroy(pl_ring_attn *ra);
int pl_ring_attn_size(const pl_ring_attn *ra);
int pl_ring_attn_rank(const pl_ring_attn *ra);

/* Checks: batch 1, causal mask, N = sh->seq even (2c tokens per rank) and
 * the shape valid for the backend.  PL_EINVAL naming the value. */
pl_status pl_ring_attn_check(const pl_ring_attn *ra, const pl_attn_shape *sh,
                             pl_backend be);

/* Collective over the group. */
pl_status pl_ring_attn_fwd(pl_ring_attn *ra, pl_stream *s,
                           const pl_attn_shape *sh, const void *q,
                           const void *k, const void *v, void *o, float *lse);
pl_status pl_ring_attn_bwd(pl_ring_attn *ra, pl_stream *s,
                           const pl_attn_shape *sh, const void *q,
                           const void *k, const void *v, const void *o,
                           const void *dout, const float *lse, void *dq,
                           void *dk, void *dv);

#ifdef __cplusplus
}
#endif
#endif
