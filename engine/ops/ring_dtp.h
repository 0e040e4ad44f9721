/* ring_dtp.h — Ring-DTP: the vocabulary projection + cross-entropy over a group
 * of P ranks, no rank ever forming an N×V tensor (DESIGN §1.2).
 *
 * Rank r of the group keeps its own batch X_r (N_r×H), targets t_r and the
 * weight shard W_r = W[:, V_r] (H×|V_r|, balanced: pl_ce_shard).  Every batch
 * meets every shard once, in P ring steps: either the activations move
 * (X, t and a partial online-LSE state circulate; one extra hop brings each
 * state home) or the weights move (W shards circulate P−1 hops; the state
 * stays home).  Auto mode moves the weights when max_r N_r > max_r |V_r|
 * (the per-hop bytes N·H vs H·V/P), the same answer on every rank.
 *
 * Each meeting runs vocabulary block by block (Vb columns, "beyond the paper"):
 * the live logits are one N×Vb strip whatever P is.  Backward replays the same
 * meetings from the saved lse = m + log z; the moving tensor's gradient (dX_j
 * partial, or dW_j partial) travels with it and lands home after the last
 * meeting.  The next hop's send/receive runs on a comm stream while the current
 * meeting computes (double-buffered payloads and gradient partials, events).
 * A strip budget keeps the forward's logit strips (first fit, in meeting
 * order) for the backward, which then skips their recompute GEMM: the same
 * GEMM's bits, so the results do not change.
 *
 * P = 1: forward and backward called apart run the blocked fused head; the
 * fused call pl_dtp_run runs the three-GEMM schedule there (ops/ce.h,
 * pl_ce_head3: token chunks against the whole vocabulary, no recompute) in
 * the same strip bound, unless the schedule asked is "blocked".
 *
 * The objective is that of the concatenated problem: the loss of all P·N
 * tokens against the full W (mean over all the group's non-ignored targets),
 * so dX_r and dW_r are the rows and columns of the dense gradients. */
#ifndef PLATEAU_OPS_RING_DTP_H
#define PLATEAU_OPS_RING_DTP_H

#include "ops/ce.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_dtp_mode {
  PL_DTP_AUTO = 0,
  PL_DTP_MOVE_ACT = 1, /* activations circulate                        */
  PL_DTP_MOVE_W = 2,   /* weight shards circulate                      */
} pl_dtp_mode;

/* The names by the enum, NULL-terminated (the benches' options read them). */
extern const char *const pl_dtp_mode_names[];  /* "auto" "act" "weights"      */
extern const char *const pl_dtp_sched_names[]; /* "auto" "chunked" "blocked"  */
const char *pl_dtp_mode_name(pl_dtp_mode m);
pl_status pl_dtp_mode_parse(const char *s, pl_dtp_mode *out);
/* The mode m resolves to for a group whose largest batch is nmax rows and
 * widest weight shard vmax columns: auto moves the weights when a hop of
 * activations (N·H) outweighs a hop of a shard (H·|V_r|). */
pl_dtp_mode pl_dtp_mode_resolve(pl_dtp_mode m, int64_t nmax, int64_t vmax);

/* What pl_dtp_run runs. */
typedef enum pl_dtp_sched {
  PL_DTP_SCHED_AUTO = 0,    /* chunked at P = 1 when a row of V fits the
                               strip bound, blocked otherwise               */
  PL_DTP_SCHED_CHUNKED = 1, /* three GEMMs, token chunks (P = 1 only)       */
  PL_DTP_SCHED_BLOCKED = 2, /* the ring's meetings, block by block          */
} pl_dtp_sched;

const char *pl_dtp_sched_name(pl_dtp_sched s);
pl_status pl_dtp_sched_parse(const char *s, pl_dtp_sched *out);

typedef struct pl_dtp_opts {
  pl_dtp_mode mode;
  int64_t block; /* columns per strip; 0: pl_ce_default_block(dt)      */
  pl_ce_reduction red;
  int32_t ignore;      /* PL_CE_IGNORE_INDEX                                 */
  int overlap;         /* 1: comm stream + events (default); 0: in-line      */
  pl_dtp_sched sched;  /* of pl_dtp_run (default auto)                       */
  size_t strip_budget; /* blocked schedule: bytes of f32 logit strips kept
                          from the forward for the backward (0: none)       */
} pl_dtp_opts;

void pl_dtp_opts_default(pl_dtp_opts *o);

typedef struct pl_dtp pl_dtp;

/* Collective over c (exchanges every rank's N, checks that all ranks agree on
 * dt, H, V and the options, and picks the mode).  n is this rank's token
 * count (>= 0, may differ per rank), v the FULL vocabulary (>= 1). */
pl_status pl_dtp_create(pl_comm *c, pl_dtype dt, int64_t n, int64_t h,
                        int64_t v, const pl_dtp_opts *o, pl_dtp **out);
void pl_dtp_destroy(pl_dtp *d);

/* The schedule chosen (never AUTO), and this rank's shard. */
pl_dtp_mode pl_dtp_mode_of(const pl_dtp *d);
void pl_dtp_shard(const pl_dtp *d, int64_t *col0, int64_t *width);
/* Columns per strip actually used. */
int64_t pl_dtp_block(const pl_dtp *d);
/* The schedule pl_dtp_run runs (never AUTO). */
pl_dtp_sched pl_dtp_sched_of(const pl_dtp *d);
/* Strips the blocked schedule keeps from the forward for the backward under
 * the strip budget (the plan, fixed at create: first fit in meeting order),
 * and their bytes (<= the budget). */
int64_t pl_dtp_kept_strips(const pl_dtp *d);
size_t pl_dtp_kept_bytes(const pl_dtp *d);
/* Largest bytes one hop sends (forward; backward incl. the gradient). */
void pl_dtp_hop_bytes(const pl_dtp *d, size_t *fwd, size_t *bwd);
/* The strip bound of the "logits" tag: max rows of a meeting × Vb × (4, +2
 * in bf16 for the residual), plus the kept strips (pl_dtp_kept_bytes).  The
 * chunked schedule of pl_dtp_run keeps within the same strip bound. */
size_t pl_dtp_logits_bound(const pl_dtp *d);

/* The bound of the "ring" tag (hop buffers): payload buffers (one at P = 2,
 * two beyond: the step-0 payload is the rank's own input) and the f32
 * partials: forward three online-LSE states (receiving, computing, sending;
 * 3·N floats each), backward two gradient partials (one sent while the
 * other is received and accumulated into in place); the larger of the
 * forward and the backward; 0 at P = 1. */
size_t pl_dtp_ring_bound(const pl_dtp *d);

/* Rows of X_r a backward meeting works on at a time: N_r, or in bf16 when the
 * weights move ceil(N_r / 8) (its dX rows are summed in f32 over the strips;
 * the backward's strip is then rows × Vb). */
int64_t pl_dtp_chunk_rows(const pl_dtp *d);

/* Bytes of "grads" scratch the backward allocates beside the caller's dx and
 * dw: an f32 N_r×H accumulator for dX in bf16 when the weights move (every
 * strip of every meeting adds to dX_r) or at P = 1; 0 otherwise (dW_r and
 * the travelling total are written straight into dw / dx). */
size_t pl_dtp_grads_scratch(const pl_dtp *d);

/* Forward: loss (device: 1 value for mean/sum — the group's, identical on
 * every rank — or N_r values for none).  Saves lse and the group's
 * [Σ nll, count] for the backward.  x: N_r×H, t: N_r, w: H×|V_r|. */
pl_status pl_dtp_forward(pl_dtp *d, pl_stream *s, const void *x,
                         const int32_t *t, const void *w, float *loss);
/* Backward of the last forward (same x, t, w): dx (N_r×H) and dw (H×|V_r|) in
 * the dtype of the head.  dloss: none only (device N_r values; NULL = ones).
 * The gradients are written in place: the stationary one (dw moving
 * activations, dx moving weights in f32) accumulates in it over the meetings
 * (in bf16: one rounding per meeting), the travelling one's total lands in
 * it with the return hop.  Scratch in bf16: an f32 N_r×H accumulator for dx
 * when the weights move (every strip adds to it), or at P = 1. */
pl_status pl_dtp_backward(pl_dtp *d, pl_stream *s, const void *x,
                          const int32_t *t, const void *w, const float *dloss,
                          void *dx, void *dw);

/* Forward and backward in one call (what a training step runs): the chunked
 * schedule at P = 1 (pl_dtp_sched_of; no saved state, no scratch: every
 * chunk's gradients are made from its complete softmax), otherwise
 * pl_dtp_forward then pl_dtp_backward.  Arguments as those two. */
pl_status pl_dtp_run(pl_dtp *d, pl_stream *s, const void *x, const int32_t *t,
                     const void *w, const float *dloss, float *loss, void *dx,
                     void *dw);

/* Bytes sent by this rank in the last forward / backward (payload + state or
 * gradient partials). */
void pl_dtp_bytes_sent(const pl_dtp *d, size_t *fwd, size_t *bwd);

#ifdef __cplusplus
}
#endif
#endif
