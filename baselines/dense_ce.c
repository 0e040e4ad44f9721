/* dense_ce.c — dense logits cross-entropy (the paper's baseline; see
 * dense_ce.h): y = X·W (N×V), logp = log_softmax(y), nll = −logp[t];
 * backward grad_logp = −g·onehot(t), grad = log_softmax_bwd(grad_logp, logp),
 * dX = grad·Wᵀ, dW = Xᵀ·grad.  Lifetimes follow PyTorch's autograd: logits
 * are freed once log_softmax has run, logp and grad_logp once the log_softmax
 * backward has produced grad. */
#include "dense_ce.h"

#include "core/internal.h"

typedef struct dbuf {
  pl_dev *dev;
  pl_stream *s;
} dbuf;

static pl_status dalloc(dbuf *b, size_t bytes, const char *tag, void **out) {
  return pl_alloc_async(b->dev, PL_ARENA_DEVICE, bytes, tag, b->s, out);
}
static void dfree(dbuf *b, void *p) {
  if (p)
    pl_free_async(b->dev, p, b->s);
}

pl_status pl_dense_ce(pl_stream *s, const pl_ce_problem *pb) {
  PL_TRY(pl_ce_problem_check(pb, "dense_ce"));
  if (pb->v < 1)
    return pl_set_error(PL_EINVAL, "dense_ce: v=%lld: must be >= 1",
                        (long long)pb->v);
  dbuf b = {pl_stream_dev(s), s};
  const int64_t n = pb->n, h = pb->h, v = pb->v;
  const size_t nv = (size_t)n * (size_t)v;
  float *logits = NULL, *logp = NULL, *grad_logp = NULL, *grad = NULL;
  void *logits_bf = NULL, *grad_bf = NULL;
  float *nll = NULL, *stats = NULL, *g = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              dalloc(&b, 2 * sizeof(float), "ce_state", (void **)&stats));
  if (pb->red != PL_CE_NONE)
    PL_TRY_GOTO(
        st, done,
        dalloc(&b, (size_t)n * sizeof(float), "ce_state", (void **)&nll));
  else
    nll = pb->loss;
  /* ---- forward ---- */
  if (pb->dt == PL_BF16) {
    /* logits in bf16 (the GEMM's output), then .float() */
    PL_TRY_GOTO(st, done, dalloc(&b, nv * 2, "logits", &logits_bf));
    PL_TRY_GOTO(st, done,
                pl_gemm(s, false, false, n, v, h, 1.0f, pb->x, h, pb->w, v,
                        0.0f, logits_bf, v, PL_BF16, PL_BF16));
    PL_TRY_GOTO(st, done, dalloc(&b, nv * 4, "logits", (void **)&logits));
    PL_TRY_GOTO(st, done,
                pl_convert(s, logits, PL_F32, logits_bf, PL_BF16, nv));
    dfree(&b, logits_bf);
    logits_bf = NULL;
  } else {
    PL_TRY_GOTO(st, done, dalloc(&b, nv * 4, "logits", (void **)&logits));
    PL_TRY_GOTO(st, done,
                pl_gemm(s, false, false, n, v, h, 1.0f, pb->x, h, pb->w, v,
                        0.0f, logits, v, PL_F32, PL_F32));
  }
  PL_TRY_GOTO(st, done, dalloc(&b, nv * 4, "logits", (void **)&logp));
  PL_TRY_GOTO(st, done, pl_ce_logsoftmax(s, logits, logp, n, v));
  dfree(&b, logits);
  logits = NULL;
  PL_TRY_GOTO(st, done,
              pl_ce_gather(s, logp, n, v, pb->t, pb->ignore, nll, stats));
  if (pb->red != PL_CE_NONE)
    PL_TRY_GOTO(st, done, pl_ce_lossout(s, (int)pb->red, stats, pb->loss));
  if (!pl_ce_problem_bwd(pb))
    goto done;
  /* ---- backward ---- */
  PL_TRY_GOTO(st, done,
              dalloc(&b, (size_t)n * sizeof(float), "ce_state", (void **)&g));
  PL_TRY_GOTO(st, done,
              pl_ce_rowgrad(s, n, pb->t, pb->ignore, (int)pb->red, stats,
                            pb->dloss, g));
  PL_TRY_GOTO(st, done, dalloc(&b, nv * 4, "logits", (void **)&grad_logp));
  PL_TRY_GOTO(st, done, pl_ce_nllgrad(s, n, v, pb->t, g, grad_logp));
  PL_TRY_GOTO(st, done, dalloc(&b, nv * 4, "logits", (void **)&grad));
  PL_TRY_GOTO(st, done, pl_ce_logsoftmax_bwd(s, grad_logp, logp, grad, n, v));
  dfree(&b, grad_logp);
  grad_logp = NULL;
  dfree(&b, logp);
  logp = NULL;
  const void *gy = grad;
  if (pb->dt == PL_BF16) {
    PL_TRY_GOTO(st, done, dalloc(&b, nv * 2, "logits", &grad_bf));
    PL_TRY_GOTO(st, done, pl_convert(s, grad_bf, PL_BF16, grad, PL_F32, nv));
    dfree(&b, grad);
    grad = NULL;
    gy = grad_bf;
  }
  /* dX (n×h) = grad (n×v) · Wᵀ;  dW (h×v) = Xᵀ · grad */
  void *dx, *dw;
  PL_TRY_GOTO(st, done, pl_ce_grads(s, pb, v, &dx, &dw));
  PL_TRY_GOTO(st, done,
              pl_gemm(s, false, true, n, h, v, 1.0f, gy, v, pb->w, v, 0.0f, dx,
                      h, pb->dt, pb->dt));
  PL_TRY_GOTO(st, done,
              pl_gemm(s, true, false, h, v, n, 1.0f, pb->x, h, gy, v, 0.0f, dw,
                      v, pb->dt, pb->dt));
done:
  dfree(&b, logits_bf);
  dfree(&b, logits);
  dfree(&b, logp);
  dfree(&b, grad_logp);
  dfree(&b, grad);
  dfree(&b, grad_bf);
  dfree(&b, g);
  if (pb->red != PL_CE_NONE)
    dfree(&b, nll);
  dfree(&b, stats);
  return st;
}
