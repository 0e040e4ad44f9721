/* vocab_parallel_ce.c — Megatron-style vocabulary-parallel cross-entropy
 * (vocab_parallel_ce.h).  The local logits N×|V_r| (tag "logits") live from
 * the forward to the backward, where the residual overwrites them in place
 * (f32) — the equivalent of Megatron saving exp_logits. */
#include "vocab_parallel_ce.h"

#include <math.h>

#include "core/internal.h"

pl_status pl_vocab_parallel_ce(pl_comm *c, pl_stream *s,
                               const pl_ce_problem *pb) {
  PL_TRY(pl_ce_problem_check(pb, "vocab_parallel_ce"));
  pl_dev *dev = pl_stream_dev(s);
  const int p = pl_comm_size(c), r = pl_comm_rank(c);
  int64_t col0, vs;
  pl_ce_shard(pb->v, p, r, &col0, &vs);
  const int64_t n = pb->n, h = pb->h;
  const int64_t ld = vs > 0 ? vs : 1; /* leading dimension of an empty shard */
  float *logits = NULL, *st3 = NULL, *lse = NULL, *stats = NULL, *nll = NULL,
        *g = NULL, *dxacc = NULL;
  void *dy = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, 2 * sizeof(float),
                             "ce_state", s, (void **)&stats));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE,
                             (size_t)n * 3 * sizeof(float), "ce_state", s,
                             (void **)&st3));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * sizeof(float),
                             "ce_state", s, (void **)&lse));
  if (pb->red != PL_CE_NONE)
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * sizeof(float),
                               "ce_state", s, (void **)&nll));
  else
    nll = pb->loss;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE,
                             (size_t)n * (size_t)vs * sizeof(float), "logits",
                             s, (void **)&logits));
  /* logits (n×vs) = X · W_r */
  PL_TRY_GOTO(st, done,
              pl_gemm(s, false, false, n, vs, h, 1.0f, pb->x, h, pb->w, ld,
                      0.0f, logits, ld, pb->dt, PL_F32));
  /* Max over the group: fold locally for m, all-reduce MAX. */
  PL_TRY_GOTO(st, done, pl_ce_state_init(s, st3, n));
  PL_TRY_GOTO(st, done, pl_ce_fold(s, logits, ld, n, vs, col0, pb->t, st3));
  PL_TRY_GOTO(st, done,
              pl_allreduce(c, st3, st3, (size_t)n, PL_F32, PL_RED_MAX, s));
  /* Σ e^(y − M) with the global max M preset, then all-reduce SUM of the sum
   * of exponentials and the target logit (held by one shard, 0 elsewhere). */
  PL_TRY_GOTO(st, done, pl_fill(s, st3 + n, PL_F32, (size_t)(2 * n), 0.0));
  PL_TRY_GOTO(st, done, pl_ce_fold(s, logits, ld, n, vs, col0, pb->t, st3));
  PL_TRY_GOTO(st, done,
              pl_allreduce(c, st3 + n, st3 + n, (size_t)(2 * n), PL_F32,
                           PL_RED_SUM, s));
  PL_TRY_GOTO(st, done,
              pl_ce_finish(s, n, st3, pb->t, pb->ignore, nll, lse, stats));
  if (pb->red != PL_CE_NONE)
    PL_TRY_GOTO(st, done, pl_ce_lossout(s, (int)pb->red, stats, pb->loss));
  if (!pl_ce_problem_bwd(pb))
    goto done;
  /* ---- backward ---- */
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * sizeof(float),
                             "ce_state", s, (void **)&g));
  PL_TRY_GOTO(st, done,
              pl_ce_rowgrad(s, n, pb->t, pb->ignore, (int)pb->red, stats,
                            pb->dloss, g));
  void *gy = logits;
  if (pb->dt == PL_BF16) {
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * (size_t)vs * 2,
                               "logits", s, (void **)&dy));
    gy = dy;
  }
  PL_TRY_GOTO(st, done,
              pl_ce_residual(s, logits, ld, n, vs, col0, pb->t, lse, g, gy,
                             pb->dt, ld));
  void *dx, *dw;
  PL_TRY_GOTO(st, done, pl_ce_grads(s, pb, vs, &dx, &dw));
  /* dW_r (h×vs) = Xᵀ·dY_r */
  PL_TRY_GOTO(st, done,
              pl_gemm(s, true, false, h, vs, n, 1.0f, pb->x, h, gy, ld, 0.0f,
                      dw, ld, pb->dt, pb->dt));
  /* dX = Σ_r dY_r·W_rᵀ: f32 partial, all-reduce, then the output dtype. */
  float *dxp = pb->dt == PL_F32 ? (float *)dx : NULL;
  if (!dxp) {
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE,
                               (size_t)n * h * sizeof(float), "grads", s,
                               (void **)&dxacc));
    dxp = dxacc;
  }
  PL_TRY_GOTO(st, done,
              pl_gemm(s, false, true, n, h, vs, 1.0f, gy, ld, pb->w, ld, 0.0f,
                      dxp, h, pb->dt, PL_F32));
  PL_TRY_GOTO(
      st, done,
      pl_allreduce(c, dxp, dxp, (size_t)(n * h), PL_F32, PL_RED_SUM, s));
  if (pb->dt == PL_BF16)
    PL_TRY_GOTO(st, done,
                pl_convert(s, dx, PL_BF16, dxacc, PL_F32, (size_t)(n * h)));
done:
  pl_free_async(dev, dxacc, s);
  pl_free_async(dev, dy, s);
  pl_free_async(dev, g, s);
  pl_free_async(dev, logits, s);
  if (pb->red != PL_CE_NONE)
    pl_free_async(dev, nll, s);
  pl_free_async(dev, lse, s);
  pl_free_async(dev, st3, s);
  pl_free_async(dev, stats, s);
  return st;
}
