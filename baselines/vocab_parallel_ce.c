/* vocab_parallel_ce.c — Megatron-style vocabulary-parallel cross-entropy
 * (vocab_parallel_ce.h).  The local logits N×|V_r| (tag "logits") live from
 * the forward to the backward, where the residual overwrites them in place
 * (f32) — the equivalent of Megatron saving exp_logits. */
#include "vocab_parallel_ce.h"

#include <math.h>

#include "agree.h"
#include "core/internal.h"

/* One call's buffers (freed by the caller, also after a failure). */
typedef struct vp_bufs {
  float *logits, *st3, *lse, *stats, *nll, *g, *dxacc;
  void *dy;
} vp_bufs;

static const char who[] = "vocab_parallel_ce";

/* The forward: local logits, the two all-reduces, the loss.  A rank that
 * failed skips its own part but never an agreement or a collective: every
 * rank calls this, whatever st (the status so far). */
static pl_status vp_fwd(pl_comm *c, pl_stream *s, const pl_ce_problem *pb,
                        int64_t col0, int64_t vs, vp_bufs *b, pl_status st) {
  pl_dev *dev = pl_stream_dev(s);
  const int64_t n = pb->n, h = pb->h;
  const int64_t ld = vs > 0 ? vs : 1; /* leading dimension of an empty shard */
  const size_t nb = (size_t)n * sizeof(float);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, 2 * sizeof(float), "ce_state", s,
                        (void **)&b->stats);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, 3 * nb, "ce_state", s,
                        (void **)&b->st3);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, nb, "ce_state", s,
                        (void **)&b->lse);
  if (st == PL_OK && pb->red != PL_CE_NONE)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, nb, "ce_state", s,
                        (void **)&b->nll);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, nb * (size_t)vs, "logits", s,
                        (void **)&b->logits);
  /* logits (n×vs) = X · W_r */
  if (st == PL_OK)
    st = pl_gemm(s, false, false, n, vs, h, 1.0f, pb->x, h, pb->w, ld, 0.0f,
                 b->logits, ld, pb->dt, PL_F32);
  /* Max over the group: fold locally for m, all-reduce MAX. */
  float *st3 = b->st3;
  if (st == PL_OK)
    st = pl_ce_state_init(s, st3, n);
  if (st == PL_OK)
    st = pl_ce_fold(s, b->logits, ld, n, vs, col0, pb->t, st3);
  PL_TRY(pl_bl_agree(c, st, who, "all-reduce of the row maxima"));
  PL_TRY(pl_allreduce(c, st3, st3, (size_t)n, PL_F32, PL_RED_MAX, s));
  /* Σ e^(y − M) with the global max M preset, then all-reduce SUM of the sum
   * of exponentials and the target logit (held by one shard, 0 elsewhere). */
  st = pl_fill(s, st3 + n, PL_F32, (size_t)(2 * n), 0.0);
  if (st == PL_OK)
    st = pl_ce_fold(s, b->logits, ld, n, vs, col0, pb->t, st3);
  PL_TRY(pl_bl_agree(c, st, who, "all-reduce of the exponential sums"));
  PL_TRY(pl_allreduce(c, st3 + n, st3 + n, (size_t)(2 * n), PL_F32, PL_RED_SUM,
                      s));
  float *nll = pb->red != PL_CE_NONE ? b->nll : pb->loss;
  PL_TRY(pl_ce_finish(s, n, st3, pb->t, pb->ignore, nll, b->lse, b->stats));
  if (pb->red != PL_CE_NONE)
    PL_TRY(pl_ce_lossout(s, (int)pb->red, b->stats, pb->loss));
  return PL_OK;
}

/* The backward (every rank calls it, whatever st, as vp_fwd): the residual
 * in place of the logits, dW_r, and dX summed over the group. */
static pl_status vp_bwd(pl_comm *c, pl_stream *s, const pl_ce_problem *pb,
                        int64_t col0, int64_t vs, vp_bufs *b, pl_status st) {
  pl_dev *dev = pl_stream_dev(s);
  const int64_t n = pb->n, h = pb->h;
  const int64_t ld = vs > 0 ? vs : 1;
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * sizeof(float),
                        "ce_state", s, (void **)&b->g);
  if (st == PL_OK)
    st = pl_ce_rowgrad(s, n, pb->t, pb->ignore, (int)pb->red, b->stats,
                       pb->dloss, b->g);
  void *gy = b->logits;
  if (st == PL_OK && pb->dt == PL_BF16) {
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * (size_t)vs * 2,
                        "logits", s, &b->dy);
    gy = b->dy;
  }
  if (st == PL_OK)
    st = pl_ce_residual(s, b->logits, ld, n, vs, col0, pb->t, b->lse, b->g, gy,
                        pb->dt, ld);
  void *dx = NULL, *dw = NULL;
  if (st == PL_OK)
    st = pl_ce_grads(s, pb, vs, &dx, &dw);
  /* dW_r (h×vs) = Xᵀ·dY_r */
  if (st == PL_OK)
    st = pl_gemm(s, true, false, h, vs, n, 1.0f, pb->x, h, gy, ld, 0.0f, dw, ld,
                 pb->dt, pb->dt);
  /* dX = Σ_r dY_r·W_rᵀ: f32 partial, all-reduce, then the output dtype. */
  float *dxp = pb->dt == PL_F32 ? (float *)dx : NULL;
  if (st == PL_OK && !dxp) {
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * h * sizeof(float),
                        "grads", s, (void **)&b->dxacc);
    dxp = b->dxacc;
  }
  if (st == PL_OK)
    st = pl_gemm(s, false, true, n, h, vs, 1.0f, gy, ld, pb->w, ld, 0.0f, dxp,
                 h, pb->dt, PL_F32);
  PL_TRY(pl_bl_agree(c, st, who, "all-reduce of dX"));
  PL_TRY(pl_allreduce(c, dxp, dxp, (size_t)(n * h), PL_F32, PL_RED_SUM, s));
  if (pb->dt == PL_BF16)
    PL_TRY(pl_convert(s, dx, PL_BF16, b->dxacc, PL_F32, (size_t)(n * h)));
  return PL_OK;
}

pl_status pl_vocab_parallel_ce(pl_comm *c, pl_stream *s,
                               const pl_ce_problem *pb) {
  PL_TRY(pl_ce_problem_check(pb, who));
  pl_dev *dev = pl_stream_dev(s);
  const int p = pl_comm_size(c), r = pl_comm_rank(c);
  int64_t col0, vs;
  pl_ce_shard(pb->v, p, r, &col0, &vs);
  vp_bufs b = {0};
  pl_status st = vp_fwd(c, s, pb, col0, vs, &b, PL_OK);
  if (pl_ce_problem_bwd(pb))
    st = vp_bwd(c, s, pb, col0, vs, &b, st);
  void *ps[] = {b.dxacc, b.dy, b.g, b.logits, b.nll, b.lse, b.st3, b.stats};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free_async(dev, ps[i], s);
  return st;
}
