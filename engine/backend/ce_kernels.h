/* backend/ce_kernels.h — the kernels of the vocabulary loss head (ops/ce.h): a
 * CPU reference (backend/cpu/ce_cpu.c) and a CUDA twin (backend/cuda/ce.cu) of
 * each, with one signature.
 *
 * State layout: one f32 buffer of 3·n values [m(n) | z(n) | yt(n)]: running
 * max, running sum of e^(y−m), and the target logit (0 until the strip holding
 * the target column is folded).  Init (−inf, 0, 0).  Pointers are memory of
 * the stream's device; n, v, vb are rows and columns (>= 0; the dispatchers of
 * ops/ce.c skip empty strips).  Not installed. */
#ifndef PLATEAU_BACKEND_CE_KERNELS_H
#define PLATEAU_BACKEND_CE_KERNELS_H

#include <stdint.h>

#include "core/internal.h"
#include "plateau/optypes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* stats[0] = 0, stats[1] = count of t != ignore (the mean's denominator,
 * needed before any row's gradient when gradients are made in one pass). */
pl_status pl__cpu_ce_count(pl_stream *s, int64_t n, const int32_t *t,
                           int32_t ignore, float *stats);

/* Fold the strip y (n×vb, row stride ldy, f32) whose column 0 is global column
 * col0 into st (3n):  m' = max(m, max y);  z' = e^(m−m')·z + Σ e^(y−m');
 * yt = y[t − col0] when t ∈ [col0, col0+vb). */
pl_status pl__cpu_ce_fold(pl_stream *s, const float *y, int64_t ldy, int64_t n,
                          int64_t vb, int64_t col0, const int32_t *t,
                          float *st);

/* st (3n) := merge(st, other): the state of the union of both column sets.
 * yt adds (only one side owns the target). */
pl_status pl__cpu_ce_merge(pl_stream *s, int64_t n, float *st,
                           const float *other);

/* From a complete state: nll[i] = m + log z − yt (0 for t == ignore), lse[i] =
 * m + log z, and stats[0] = Σ nll, stats[1] = count of t != ignore (written,
 * not accumulated).  nll may be NULL. */
pl_status pl__cpu_ce_finish(pl_stream *s, int64_t n, const float *st,
                            const int32_t *t, int32_t ignore, float *nll,
                            float *lse, float *stats);

/* Row gradient factors: g[i] = 0 if t[i] == ignore, else (mean) 1/stats[1],
 * (sum) 1, (none) dloss ? dloss[i] : 1; red is a pl_ce_reduction.  stats is
 * device memory (the group-wide [Σ nll, count]); dloss may be NULL. */
pl_status pl__cpu_ce_rowgrad(pl_stream *s, int64_t n, const int32_t *t,
                             int32_t ignore, int red, const float *stats,
                             const float *dloss, float *g);

/* loss := (mean) stats[0]/stats[1] | (sum) stats[0] — one value; for none the
 * caller uses nll directly. */
pl_status pl__cpu_ce_lossout(pl_stream *s, int red, const float *stats,
                             float *loss);

/* Softmax residual over the strip y (n×vb, ldy, f32):
 *   dy[i][c] = g[i] · (e^(y[i][c] − lse[i]) − [col0 + c == t[i]])
 * stored as dy_dt (f32 or bf16) at row stride lddy; dy may alias y when dy_dt
 * is f32 and lddy == ldy (in place). */
pl_status pl__cpu_ce_residual(pl_stream *s, const float *y, int64_t ldy,
                              int64_t n, int64_t vb, int64_t col0,
                              const int32_t *t, const float *lse,
                              const float *g, void *dy, pl_dtype dy_dt,
                              int64_t lddy);

/* Full rows of the three-GEMM head (ops/ce.h, pl_ce_head3): y (n×v logits
 * of dtype ydt, f32 or bf16, row stride ldy; every column of the vocabulary)
 * is read once for the row's max and Σ e^(y−max) and once more for the
 * residual:  lse = max + log Σ;  nll[i] = lse − y[t] (0 when t == ignore);
 * lse_out[i] = lse (lse_out may be NULL); and when g is not NULL, in place,
 *   y[i][c] = g[i] · (e^(y[i][c] − lse) − [c == t[i]])   stored as ydt.
 * t is in [0, v) or ignore.  The softmax of a row is complete here, so no
 * online state is needed. */
pl_status pl__cpu_ce_rows(pl_stream *s, void *y, pl_dtype ydt, int64_t ldy,
                          int64_t n, int64_t v, const int32_t *t,
                          int32_t ignore, const float *g, float *nll,
                          float *lse_out);

/* stats[0] = Σ nll over rows with t != ignore, stats[1] = their count
 * (written, not accumulated; a fixed order). */
pl_status pl__cpu_ce_stats(pl_stream *s, int64_t n, const float *nll,
                           const int32_t *t, int32_t ignore, float *stats);

/* Dense-baseline kernels (the PyTorch sequence, full rows of width v):
 * logp = y − lse(y) (rows, n×v). */
pl_status pl__cpu_ce_logsoftmax(pl_stream *s, const float *y, float *logp,
                                int64_t n, int64_t v);

/* grad_logp (n×v) = −g·onehot(t) (dense). */
pl_status pl__cpu_ce_nllgrad(pl_stream *s, int64_t n, int64_t v,
                             const int32_t *t, const float *g,
                             float *grad_logp);

/* grad = grad_logp − e^(logp)·Σ_c grad_logp (log_softmax backward, n×v). */
pl_status pl__cpu_ce_logsoftmax_bwd(pl_stream *s, const float *grad_logp,
                                    const float *logp, float *grad, int64_t n,
                                    int64_t v);

/* nll[i] = −logp[i][t[i]] (0 when ignored), stats as finish. */
pl_status pl__cpu_ce_gather(pl_stream *s, const float *logp, int64_t n,
                            int64_t v, const int32_t *t, int32_t ignore,
                            float *nll, float *stats);
#if PL_HAVE_CUDA
/* The CUDA twins: enqueued on s, launch checked. */

pl_status pl__cuda_ce_count(pl_stream *s, int64_t n, const int32_t *t,
                            int32_t ignore, float *stats);

pl_status pl__cuda_ce_fold(pl_stream *s, const float *y, int64_t ldy, int64_t n,
                           int64_t vb, int64_t col0, const int32_t *t,
                           float *st);

pl_status pl__cuda_ce_merge(pl_stream *s, int64_t n, float *st,
                            const float *other);

pl_status pl__cuda_ce_finish(pl_stream *s, int64_t n, const float *st,
                             const int32_t *t, int32_t ignore, float *nll,
                             float *lse, float *stats);

pl_status pl__cuda_ce_rowgrad(pl_stream *s, int64_t n, const int32_t *t,
                              int32_t ignore, int red, const float *stats,
                              const float *dloss, float *g);

pl_status pl__cuda_ce_lossout(pl_stream *s, int red, const float *stats,
                              float *loss);

pl_status pl__cuda_ce_residual(pl_stream *s, const float *y, int64_t ldy,
                               int64_t n, int64_t vb, int64_t col0,
                               const int32_t *t, const float *lse,
                               const float *g, void *dy, pl_dtype dy_dt,
                               int64_t lddy);

pl_status pl__cuda_ce_rows(pl_stream *s, void *y, pl_dtype ydt, int64_t ldy,
                           int64_t n, int64_t v, const int32_t *t,
                           int32_t ignore, const float *g, float *nll,
                           float *lse_out);

pl_status pl__cuda_ce_stats(pl_stream *s, int64_t n, const float *nll,
                            const int32_t *t, int32_t ignore, float *stats);

pl_status pl__cuda_ce_logsoftmax(pl_stream *s, const float *y, float *logp,
                                 int64_t n, int64_t v);

pl_status pl__cuda_ce_nllgrad(pl_stream *s, int64_t n, int64_t v,
                              const int32_t *t, const float *g,
                              float *grad_logp);

pl_status pl__cuda_ce_logsoftmax_bwd(pl_stream *s, const float *grad_logp,
                                     const float *logp, float *grad, int64_t n,
                                     int64_t v);

pl_status pl__cuda_ce_gather(pl_stream *s, const float *logp, int64_t n,
                             int64_t v, const int32_t *t, int32_t ignore,
                             float *nll, float *stats);

#endif

#ifdef __cplusplus
}
#endif
#endif
