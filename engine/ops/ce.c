/* ce.c — backend-neutral part of the vocabulary loss head: kernel dispatch
 * (CPU reference or CUDA twin, by the stream's backend) and the "meeting" of
 * one activation batch with one weight shard, strip by strip (ops/ce.h).
 *
 * A meeting never holds more than one n×vb strip of logits (plus its bf16
 * residual in bf16 mode): the forward folds each strip into the online-LSE
 * state (Eq. 3) and drops it; the backward recomputes the same strip from X
 * and W, turns it into dY = g·(softmax − onehot) with the saved lse, and
 * spends it on the two GEMMs dX += dY·W_stripᵀ and dW_strip += Xᵀ·dY.
 *
 * Also here: the three-GEMM head of one device (pl_ce_head3, ce.h): token
 * chunks against the whole vocabulary, each chunk's gradients made from its
 * complete softmax, no recompute. */
#include <math.h>
#include <string.h>

#include "backend/ce_kernels.h"
#include "core/internal.h"
#include "ops/ce.h"

const char *const pl_ce_reduction_names[] = {"mean", "sum", "none", NULL};

const char *pl_ce_reduction_name(pl_ce_reduction r) {
  return (unsigned)r <= PL_CE_NONE ? pl_ce_reduction_names[r] : "?";
}

pl_status pl_ce_reduction_parse(const char *s, pl_ce_reduction *out) {
  for (int i = 0; s && pl_ce_reduction_names[i]; i++)
    if (strcmp(s, pl_ce_reduction_names[i]) == 0) {
      *out = (pl_ce_reduction)i;
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL, "reduction '%s': must be mean, sum or none",
                      s ? s : "(null)");
}

pl_status pl_ce_count(pl_stream *s, int64_t n, const int32_t *t, int32_t ignore,
                      float *stats) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_count(s, n, t, ignore, stats);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_count(s, n, t, ignore, stats);
}

pl_status pl_ce_fold(pl_stream *s, const float *y, int64_t ldy, int64_t n,
                     int64_t vb, int64_t col0, const int32_t *t, float *st) {
  if (n == 0 || vb == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_fold(s, y, ldy, n, vb, col0, t, st);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_fold(s, y, ldy, n, vb, col0, t, st);
}

pl_status pl_ce_merge(pl_stream *s, int64_t n, float *st, const float *other) {
  if (n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_merge(s, n, st, other);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_merge(s, n, st, other);
}

pl_status pl_ce_finish(pl_stream *s, int64_t n, const float *st,
                       const int32_t *t, int32_t ignore, float *nll, float *lse,
                       float *stats) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_finish(s, n, st, t, ignore, nll, lse, stats);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_finish(s, n, st, t, ignore, nll, lse, stats);
}

pl_status pl_ce_rowgrad(pl_stream *s, int64_t n, const int32_t *t,
                        int32_t ignore, int red, const float *stats,
                        const float *dloss, float *g) {
  if (n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_rowgrad(s, n, t, ignore, red, stats, dloss, g);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_rowgrad(s, n, t, ignore, red, stats, dloss, g);
}

pl_status pl_ce_lossout(pl_stream *s, int red, const float *stats,
                        float *loss) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_lossout(s, red, stats, loss);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_lossout(s, red, stats, loss);
}

pl_status pl_ce_residual(pl_stream *s, const float *y, int64_t ldy, int64_t n,
                         int64_t vb, int64_t col0, const int32_t *t,
                         const float *lse, const float *g, void *dy,
                         pl_dtype dy_dt, int64_t lddy) {
  if (n == 0 || vb == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_residual(s, y, ldy, n, vb, col0, t, lse, g, dy, dy_dt,
                                lddy);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_residual(s, y, ldy, n, vb, col0, t, lse, g, dy, dy_dt,
                             lddy);
}

pl_status pl_ce_rows(pl_stream *s, void *y, pl_dtype ydt, int64_t ldy,
                     int64_t n, int64_t v, const int32_t *t, int32_t ignore,
                     const float *g, float *nll, float *lse_out) {
  if (n == 0 || v == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_rows(s, y, ydt, ldy, n, v, t, ignore, g, nll, lse_out);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_rows(s, y, ydt, ldy, n, v, t, ignore, g, nll, lse_out);
}

pl_status pl_ce_stats(pl_stream *s, int64_t n, const float *nll,
                      const int32_t *t, int32_t ignore, float *stats) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_stats(s, n, nll, t, ignore, stats);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_stats(s, n, nll, t, ignore, stats);
}

pl_status pl_ce_logsoftmax(pl_stream *s, const float *y, float *logp, int64_t n,
                           int64_t v) {
  if (n == 0 || v == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_logsoftmax(s, y, logp, n, v);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_logsoftmax(s, y, logp, n, v);
}

pl_status pl_ce_nllgrad(pl_stream *s, int64_t n, int64_t v, const int32_t *t,
                        const float *g, float *grad_logp) {
  if (n == 0 || v == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_nllgrad(s, n, v, t, g, grad_logp);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_nllgrad(s, n, v, t, g, grad_logp);
}

pl_status pl_ce_logsoftmax_bwd(pl_stream *s, const float *grad_logp,
                               const float *logp, float *grad, int64_t n,
                               int64_t v) {
  if (n == 0 || v == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_logsoftmax_bwd(s, grad_logp, logp, grad, n, v);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_logsoftmax_bwd(s, grad_logp, logp, grad, n, v);
}

pl_status pl_ce_gather(pl_stream *s, const float *logp, int64_t n, int64_t v,
                       const int32_t *t, int32_t ignore, float *nll,
                       float *stats) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_ce_gather(s, logp, n, v, t, ignore, nll, stats);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_ce_gather(s, logp, n, v, t, ignore, nll, stats);
}

/* Element pointer `off` elements past p for dtype dt. */
static const void *cptr(const void *p, pl_dtype dt, int64_t off) {
  return (const char *)p + (size_t)off * pl_dtype_size(dt);
}

pl_status pl_ce_meet_fwd(pl_stream *s, const pl_ce_meet *mt, float *st) {
  if (mt->n == 0 || mt->vs == 0)
    return PL_OK;
  PL_ASSERT(mt->vb >= 1);
  for (int64_t c0 = 0; c0 < mt->vs; c0 += mt->vb) {
    int64_t vb = mt->vs - c0 < mt->vb ? mt->vs - c0 : mt->vb;
    float *kept = mt->kept ? mt->kept[c0 / mt->vb] : NULL;
    float *y = kept ? kept : mt->strip;
    /* y (n×vb, f32) = X (n×h) · W[:, c0:c0+vb] */
    PL_TRY(pl_gemm(s, false, false, mt->n, vb, mt->h, 1.0f, mt->x, mt->h,
                   cptr(mt->w, mt->dt, c0), mt->ldw, 0.0f, y, vb, mt->dt,
                   PL_F32));
    PL_TRY(pl_ce_fold(s, y, vb, mt->n, vb, mt->col0 + c0, mt->t, st));
  }
  return PL_OK;
}

pl_status pl_ce_meet_bwd(pl_stream *s, const pl_ce_meet *mt, const float *lse,
                         const float *g, float *dx, float dx_beta, void *dw,
                         pl_dtype dw_dt, int64_t lddw, float dw_beta) {
  const int64_t n = mt->n, h = mt->h;
  if (mt->vs == 0 || n == 0) {
    /* Nothing meets: the sums are empty. */
    if (dx && mt->dx_wait)
      PL_TRY(pl_stream_wait(s, mt->dx_wait));
    if (dw && mt->dw_wait)
      PL_TRY(pl_stream_wait(s, mt->dw_wait));
    if (dx && dx_beta == 0.0f)
      PL_TRY(pl_fill(s, dx, PL_F32, (size_t)(n * h), 0.0));
    if (dw && dw_beta == 0.0f && mt->vs > 0) {
      if (lddw == mt->vs)
        PL_TRY(pl_fill(s, dw, dw_dt, (size_t)(h * mt->vs), 0.0));
      else
        for (int64_t r = 0; r < h; r++)
          PL_TRY(pl_fill(s,
                         (char *)dw + (size_t)(r * lddw) * pl_dtype_size(dw_dt),
                         dw_dt, (size_t)mt->vs, 0.0));
    }
    return PL_OK;
  }
  PL_ASSERT(mt->vb >= 1);
  for (int64_t c0 = 0; c0 < mt->vs; c0 += mt->vb) {
    int64_t vb = mt->vs - c0 < mt->vb ? mt->vs - c0 : mt->vb;
    const void *wstrip = cptr(mt->w, mt->dt, c0);
    float *kept = mt->kept ? mt->kept[c0 / mt->vb] : NULL;
    float *y = kept ? kept : mt->strip;
    if (!kept) /* recompute the strip (kept: the forward's, same bits) */
      PL_TRY(pl_gemm(s, false, false, n, vb, h, 1.0f, mt->x, h, wstrip, mt->ldw,
                     0.0f, y, vb, mt->dt, PL_F32));
    void *dy = mt->dt == PL_F32 ? (void *)y : mt->dy;
    PL_TRY(pl_ce_residual(s, y, vb, n, vb, mt->col0 + c0, mt->t, lse, g, dy,
                          mt->dt, vb));
    if (dw && c0 == 0 && mt->dw_wait)
      PL_TRY(pl_stream_wait(s, mt->dw_wait));
    if (dw) /* dW[:, c0:c0+vb] (h×vb) = beta·dW + Xᵀ (h×n) · dY (n×vb) */
      PL_TRY(pl_gemm(s, true, false, h, vb, n, 1.0f, mt->x, h, dy, vb, dw_beta,
                     (char *)dw + (size_t)c0 * pl_dtype_size(dw_dt), lddw,
                     mt->dt, dw_dt));
    if (dx && c0 == 0 && mt->dx_wait)
      PL_TRY(pl_stream_wait(s, mt->dx_wait));
    if (dx) /* dX (n×h) = beta·dX + dY (n×vb) · W_stripᵀ (vb×h) */
      PL_TRY(pl_gemm(s, false, true, n, h, vb, 1.0f, dy, vb, wstrip, mt->ldw,
                     c0 == 0 ? dx_beta : 1.0f, dx, h, mt->dt, PL_F32));
  }
  return PL_OK;
}

pl_status pl_ce_state_init(pl_stream *s, float *st, int64_t n) {
  if (n == 0)
    return PL_OK;
  PL_TRY(pl_fill(s, st, PL_F32, (size_t)n, -INFINITY));
  return pl_fill(s, st + n, PL_F32, (size_t)(2 * n), 0.0);
}

pl_status pl_ce_problem_check(const pl_ce_problem *pb, const char *who) {
  if (pb->dt != PL_F32 && pb->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "%s: dtype %s: must be f32 or bf16", who,
                        pl_dtype_name(pb->dt));
  if (pb->n < 0 || pb->h < 1 || pb->v < 0)
    return pl_set_error(
        PL_EINVAL, "%s: n=%lld h=%lld v=%lld: need n >= 0, h >= 1, v >= 0", who,
        (long long)pb->n, (long long)pb->h, (long long)pb->v);
  if (pb->block < 0)
    return pl_set_error(PL_EINVAL, "%s: block=%lld: must be >= 0 (0: default)",
                        who, (long long)pb->block);
  if ((unsigned)pb->red > PL_CE_NONE)
    return pl_set_error(PL_EINVAL,
                        "%s: reduction %d: must be mean, sum or none", who,
                        (int)pb->red);
  if (!pb->loss || (pb->n > 0 && (!pb->x || !pb->t)) || (pb->v > 0 && !pb->w))
    return pl_set_error(PL_EINVAL, "%s: NULL x, t, w or loss", who);
  if ((pb->dx == NULL) != (pb->dw == NULL) ||
      (pb->dx_alloc == NULL) != (pb->dw_alloc == NULL) ||
      (pb->dx && pb->dx_alloc))
    return pl_set_error(
        PL_EINVAL,
        "%s: give dx and dw (fwd+bwd), or dx_alloc and dw_alloc "
        "(the head allocates them), or none (forward only)",
        who);
  if (pb->dx_alloc)
    *pb->dx_alloc = *pb->dw_alloc = NULL;
  return PL_OK;
}

pl_status pl_ce_grads(pl_stream *s, const pl_ce_problem *pb, int64_t dw_cols,
                      void **dx, void **dw) {
  if (pb->dx) {
    *dx = pb->dx;
    *dw = pb->dw;
    return PL_OK;
  }
  pl_dev *dev = pl_stream_dev(s);
  size_t es = pl_dtype_size(pb->dt);
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(pb->n * pb->h) * es,
                        "grads", s, pb->dx_alloc));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(pb->h * dw_cols) * es,
                        "grads", s, pb->dw_alloc));
  *dx = *pb->dx_alloc;
  *dw = *pb->dw_alloc;
  return PL_OK;
}

/* ---- the three-GEMM head (ce.h) --------------------------------------------
 */

static int64_t strip_block(const pl_ce_problem *pb) {
  int64_t vb = pb->block > 0 ? pb->block : pl_ce_default_block(pb->dt);
  if (vb > pb->v)
    vb = pb->v;
  return vb < 1 ? 1 : vb;
}

size_t pl_ce_strip_bound(const pl_ce_problem *pb) {
  return (size_t)pb->n * (size_t)strip_block(pb) * (pb->dt == PL_BF16 ? 6 : 4);
}

int64_t pl_ce_head3_rows(const pl_ce_problem *pb) {
  if (pb->n < 1 || pb->v < 1)
    return pb->v < 1 ? 0 : 1;
  const size_t row = (size_t)pb->v * pl_dtype_size(pb->dt);
  const int64_t cap = (int64_t)(pl_ce_strip_bound(pb) / row);
  if (cap < 1)
    return 0;
  if (cap >= pb->n)
    return pb->n;
  const int64_t k = (pb->n + cap - 1) / cap;
  int64_t nc = (pb->n + k - 1) / k;
  const int64_t up = (nc + 15) / 16 * 16;
  return up <= cap ? up : nc;
}

pl_status pl_ce_head3(pl_stream *s, const pl_ce_problem *pb) {
  PL_TRY(pl_ce_problem_check(pb, "ce_head3"));
  const int64_t nc = pl_ce_head3_rows(pb);
  if (nc < 1)
    return pl_set_error(PL_EINVAL,
                        "ce_head3: n=%lld v=%lld block=%lld: no row of the "
                        "vocabulary fits the strip bound of %zu bytes",
                        (long long)pb->n, (long long)pb->v,
                        (long long)pb->block, pl_ce_strip_bound(pb));
  pl_dev *dev = pl_stream_dev(s);
  const int64_t n = pb->n, h = pb->h, v = pb->v;
  const pl_dtype dt = pb->dt;
  const size_t es = pl_dtype_size(dt);
  const int bwd = pl_ce_problem_bwd(pb);
  float *stats = NULL, *g = NULL, *nll = NULL;
  void *y = NULL, *dx = NULL, *dw = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, 2 * sizeof(float),
                             "ce_state", s, (void **)&stats));
  if (bwd)
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
              pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)nc * (size_t)v * es,
                             "logits", s, (void **)&y));
  if (bwd) {
    /* the mean's count before any gradient */
    PL_TRY_GOTO(st, done, pl_ce_count(s, n, pb->t, pb->ignore, stats));
    PL_TRY_GOTO(st, done,
                pl_ce_rowgrad(s, n, pb->t, pb->ignore, (int)pb->red, stats,
                              pb->dloss, g));
    PL_TRY_GOTO(st, done, pl_ce_grads(s, pb, v, &dx, &dw));
    if (n == 0)
      PL_TRY_GOTO(st, done, pl_fill(s, dw, dt, (size_t)(h * v), 0.0));
  }
  for (int64_t r0 = 0; r0 < n; r0 += nc) {
    const int64_t m = n - r0 < nc ? n - r0 : nc;
    const void *xc = cptr(pb->x, dt, r0 * h);
    /* GEMM 1: Y (m×v) = X_c (m×h) · W (h×v), stored in dt */
    PL_TRY_GOTO(st, done,
                pl_gemm(s, false, false, m, v, h, 1.0f, xc, h, pb->w, v, 0.0f,
                        y, v, dt, dt));
    PL_TRY_GOTO(st, done,
                pl_ce_rows(s, y, dt, v, m, v, pb->t + r0, pb->ignore,
                           bwd ? g + r0 : NULL, nll + r0, NULL));
    if (!bwd)
      continue;
    /* GEMM 2: dX_c (m×h) = dY (m×v) · Wᵀ, complete, straight in dt */
    PL_TRY_GOTO(st, done,
                pl_gemm(s, false, true, m, h, v, 1.0f, y, v, pb->w, v, 0.0f,
                        (char *)dx + (size_t)(r0 * h) * es, h, dt, dt));
    /* GEMM 3: dW (h×v) (+)= X_cᵀ (h×m) · dY (m×v) */
    PL_TRY_GOTO(st, done,
                pl_gemm(s, true, false, h, v, m, 1.0f, xc, h, y, v,
                        r0 == 0 ? 0.0f : 1.0f, dw, v, dt, dt));
  }
  PL_TRY_GOTO(st, done, pl_ce_stats(s, n, nll, pb->t, pb->ignore, stats));
  if (pb->red != PL_CE_NONE)
    PL_TRY_GOTO(st, done, pl_ce_lossout(s, (int)pb->red, stats, pb->loss));
done:
  pl_free_async(dev, y, s);
  if (pb->red != PL_CE_NONE)
    pl_free_async(dev, nll, s);
  pl_free_async(dev, g, s);
  pl_free_async(dev, stats, s);
  return st;
}
