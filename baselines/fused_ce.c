/* fused_ce.c — fused cross-entropy on one device (fused_ce.h): the
 * three-GEMM schedule (engine/ops/ce.c) with the blocked one as its fallback,
 * the blocked schedule, and the token-chunked variant with an f32 dW.
 * Tags: "logits" the strip (and bf16 residual), "ce_state" the per-token
 * state, lse and row factors, "grads" the f32 dX accumulator in bf16 mode. */
#include "fused_ce.h"

#include <math.h>

#include "core/internal.h"

static int64_t eff_block(const pl_ce_problem *pb) {
  int64_t vb = pb->block > 0 ? pb->block : pl_ce_default_block(pb->dt);
  if (vb > pb->v)
    vb = pb->v;
  return vb < 1 ? 1 : vb;
}

size_t pl_fused_ce_logits_bound(const pl_ce_problem *pb) {
  return (size_t)pb->n * (size_t)eff_block(pb) * (pb->dt == PL_BF16 ? 6 : 4);
}

pl_status pl_fused_ce(pl_stream *s, const pl_ce_problem *pb) {
  PL_TRY(pl_ce_problem_check(pb, "fused_ce"));
  if (pb->v >= 1 && pl_ce_head3_rows(pb) >= 1)
    return pl_ce_head3(s, pb);
  return pl_fused_ce_blocked(s, pb);
}

pl_status pl_fused_ce_blocked(pl_stream *s, const pl_ce_problem *pb) {
  PL_TRY(pl_ce_problem_check(pb, "fused_ce"));
  if (pb->v < 1)
    return pl_set_error(PL_EINVAL, "fused_ce: v=%lld: must be >= 1",
                        (long long)pb->v);
  pl_dev *dev = pl_stream_dev(s);
  const int64_t n = pb->n, h = pb->h, v = pb->v, vb = eff_block(pb);
  float *st3 = NULL, *strip = NULL, *lse = NULL, *stats = NULL, *nll = NULL,
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
                             (size_t)n * vb * sizeof(float), "logits", s,
                             (void **)&strip));
  /* ---- forward: fold every strip ---- */
  PL_TRY_GOTO(st, done, pl_ce_state_init(s, st3, n));
  pl_ce_meet mt = {.dt = pb->dt,
                   .n = n,
                   .h = h,
                   .x = pb->x,
                   .t = pb->t,
                   .w = pb->w,
                   .ldw = v,
                   .vs = v,
                   .col0 = 0,
                   .vb = vb,
                   .strip = strip,
                   .dy = NULL};
  PL_TRY_GOTO(st, done, pl_ce_meet_fwd(s, &mt, st3));
  PL_TRY_GOTO(st, done,
              pl_ce_finish(s, n, st3, pb->t, pb->ignore, nll, lse, stats));
  if (pb->red != PL_CE_NONE)
    PL_TRY_GOTO(st, done, pl_ce_lossout(s, (int)pb->red, stats, pb->loss));
  pl_free_async(dev, st3, s);
  st3 = NULL;
  if (!pl_ce_problem_bwd(pb))
    goto done;
  /* ---- backward: replay the strips from lse ---- */
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * sizeof(float),
                             "ce_state", s, (void **)&g));
  PL_TRY_GOTO(st, done,
              pl_ce_rowgrad(s, n, pb->t, pb->ignore, (int)pb->red, stats,
                            pb->dloss, g));
  if (pb->dt == PL_BF16) {
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * vb * 2,
                               "logits", s, (void **)&dy));
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE,
                               (size_t)n * h * sizeof(float), "grads", s,
                               (void **)&dxacc));
  }
  mt.dy = dy;
  void *dx, *dw;
  PL_TRY_GOTO(st, done, pl_ce_grads(s, pb, v, &dx, &dw));
  /* Each dW column range is written once (beta 0), straight in pb->dt. */
  PL_TRY_GOTO(st, done,
              pl_ce_meet_bwd(s, &mt, lse, g,
                             pb->dt == PL_F32 ? (float *)dx : dxacc, 0.0f, dw,
                             pb->dt, v, 0.0f));
  if (pb->dt == PL_BF16)
    PL_TRY_GOTO(st, done,
                pl_convert(s, dx, PL_BF16, dxacc, PL_F32, (size_t)(n * h)));
done:
  pl_free_async(dev, dxacc, s);
  pl_free_async(dev, dy, s);
  pl_free_async(dev, g, s);
  if (pb->red != PL_CE_NONE)
    pl_free_async(dev, nll, s);
  pl_free_async(dev, strip, s);
  pl_free_async(dev, lse, s);
  pl_free_async(dev, st3, s);
  pl_free_async(dev, stats, s);
  return st;
}

/* ---- token-chunked variant (Liger-style) ----------------------------------
 */

int64_t pl_fused_ce_chunk_rows(const pl_ce_problem *pb) {
  int64_t vb = eff_block(pb);
  int64_t nc = pb->v > 0 ? (pb->n * vb) / pb->v : pb->n;
  if (nc < 1)
    nc = 1;
  if (nc > pb->n && pb->n > 0)
    nc = pb->n;
  return nc;
}

size_t pl_fused_ce_chunked_logits_bound(const pl_ce_problem *pb) {
  return (size_t)pl_fused_ce_chunk_rows(pb) * (size_t)pb->v *
         (pb->dt == PL_BF16 ? 6 : 4);
}

pl_status pl_fused_ce_chunked(pl_stream *s, const pl_ce_problem *pb) {
  PL_TRY(pl_ce_problem_check(pb, "fused_ce_chunked"));
  if (pb->v < 1)
    return pl_set_error(PL_EINVAL, "fused_ce_chunked: v=%lld: must be >= 1",
                        (long long)pb->v);
  pl_dev *dev = pl_stream_dev(s);
  const int64_t n = pb->n, h = pb->h, v = pb->v;
  const int64_t nc = pl_fused_ce_chunk_rows(pb);
  const size_t es = pl_dtype_size(pb->dt);
  const int bwd = pl_ce_problem_bwd(pb);
  float *stats = NULL, *cstats = NULL, *st3 = NULL, *lse = NULL, *nll = NULL,
        *g = NULL, *logits = NULL, *dwacc = NULL;
  void *dy = NULL, *dx = NULL, *dw = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, 2 * sizeof(float),
                             "ce_state", s, (void **)&stats));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, 2 * sizeof(float),
                             "ce_state", s, (void **)&cstats));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE,
                             (size_t)nc * 3 * sizeof(float), "ce_state", s,
                             (void **)&st3));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)nc * sizeof(float),
                             "ce_state", s, (void **)&lse));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * sizeof(float),
                             "ce_state", s, (void **)&g));
  if (pb->red != PL_CE_NONE)
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)n * sizeof(float),
                               "ce_state", s, (void **)&nll));
  else
    nll = pb->loss;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE,
                             (size_t)nc * (size_t)v * sizeof(float), "logits",
                             s, (void **)&logits));
  if (bwd && pb->dt == PL_BF16)
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)nc * (size_t)v * 2,
                               "logits", s, (void **)&dy));
  /* The mean's count before any gradient. */
  PL_TRY_GOTO(st, done, pl_ce_count(s, n, pb->t, pb->ignore, stats));
  PL_TRY_GOTO(st, done,
              pl_ce_rowgrad(s, n, pb->t, pb->ignore, (int)pb->red, stats,
                            pb->dloss, g));
  if (bwd) {
    PL_TRY_GOTO(st, done, pl_ce_grads(s, pb, v, &dx, &dw));
    if (pb->dt == PL_F32)
      dwacc = dw;
    else
      PL_TRY_GOTO(st, done,
                  pl_alloc_async(dev, PL_ARENA_DEVICE,
                                 (size_t)(h * v) * sizeof(float), "grads", s,
                                 (void **)&dwacc));
    if (n == 0)
      PL_TRY_GOTO(st, done, pl_fill(s, dwacc, PL_F32, (size_t)(h * v), 0.0));
  }
  for (int64_t r0 = 0; r0 < n; r0 += nc) {
    const int64_t m = n - r0 < nc ? n - r0 : nc;
    const void *xr = (const char *)pb->x + (size_t)(r0 * h) * es;
    const int32_t *tr = pb->t + r0;
    /* logits (m×v) = X[r0:r0+m] · W */
    PL_TRY_GOTO(st, done,
                pl_gemm(s, false, false, m, v, h, 1.0f, xr, h, pb->w, v, 0.0f,
                        logits, v, pb->dt, PL_F32));
    PL_TRY_GOTO(st, done, pl_ce_state_init(s, st3, m));
    PL_TRY_GOTO(st, done, pl_ce_fold(s, logits, v, m, v, 0, tr, st3));
    PL_TRY_GOTO(st, done,
                pl_ce_finish(s, m, st3, tr, pb->ignore, nll + r0, lse, cstats));
    PL_TRY_GOTO(
        st, done,
        pl_axpy(s, stats, PL_F32, cstats, PL_F32, 1, 1.0f)); /* Σ nll only */
    if (!bwd)
      continue;
    void *gy = pb->dt == PL_F32 ? (void *)logits : dy;
    PL_TRY_GOTO(
        st, done,
        pl_ce_residual(s, logits, v, m, v, 0, tr, lse, g + r0, gy, pb->dt, v));
    /* dX rows (m×h) = dY·Wᵀ: complete in one GEMM, straight in dt */
    PL_TRY_GOTO(st, done,
                pl_gemm(s, false, true, m, h, v, 1.0f, gy, v, pb->w, v, 0.0f,
                        (char *)dx + (size_t)(r0 * h) * es, h, pb->dt, pb->dt));
    /* dW (h×v) (+)= X_chunkᵀ · dY */
    PL_TRY_GOTO(st, done,
                pl_gemm(s, true, false, h, v, m, 1.0f, xr, h, gy, v,
                        r0 == 0 ? 0.0f : 1.0f, dwacc, v, pb->dt, PL_F32));
  }
  if (pb->red != PL_CE_NONE)
    PL_TRY_GOTO(st, done, pl_ce_lossout(s, (int)pb->red, stats, pb->loss));
  if (bwd && pb->dt == PL_BF16)
    PL_TRY_GOTO(st, done,
                pl_convert(s, dw, PL_BF16, dwacc, PL_F32, (size_t)(h * v)));
done:
  if (pb->dt == PL_BF16)
    pl_free_async(dev, dwacc, s);
  pl_free_async(dev, dy, s);
  pl_free_async(dev, logits, s);
  if (pb->red != PL_CE_NONE)
    pl_free_async(dev, nll, s);
  pl_free_async(dev, g, s);
  pl_free_async(dev, lse, s);
  pl_free_async(dev, st3, s);
  pl_free_async(dev, cstats, s);
  pl_free_async(dev, stats, s);
  return st;
}
