/* ce_cpu.c — CPU reference kernels of the vocabulary loss head
 * (backend/ce_kernels.h): online log-sum-exp fold over a logit strip (DESIGN
 * §1.2, Eq. 3), state merge, finish, row gradient factors, the softmax residual
 * restricted to a strip, the full rows of the three-GEMM head (loss and
 * residual in place), and the dense-baseline row kernels (log_softmax
 * forward/backward, NLL gradient, target gather).
 *
 * Plain C11 + OpenMP over rows; f32 arithmetic with double only where a row
 * sum would otherwise lose digits against the f64 reference of the tests
 * (the Σ e^(y−m') of the fold; the CUDA twin uses f32 tree sums, which are as
 * accurate for the strip widths used).  Work runs at once, in issue order. */
#include <math.h>
#include <string.h>

#include "backend/ce_kernels.h"
#include "core/internal.h"
#include "plateau/host_device.h"

pl_status pl__cpu_ce_count(pl_stream *s, int64_t n, const int32_t *t,
                           int32_t ignore, float *stats) {
  (void)s;
  int64_t c = 0;
  for (int64_t i = 0; i < n; i++)
    c += t[i] != ignore;
  stats[0] = 0.0f;
  stats[1] = (float)c;
  return PL_OK;
}

pl_status pl__cpu_ce_fold(pl_stream *s, const float *y, int64_t ldy, int64_t n,
                          int64_t vb, int64_t col0, const int32_t *t,
                          float *st) {
  (void)s;
  float *m = st, *z = st + n, *yt = st + 2 * n;
#pragma omp parallel for schedule(static) if (n * vb > 65536)
  for (int64_t i = 0; i < n; i++) {
    const float *row = y + i * ldy;
    float mx = m[i];
    for (int64_t c = 0; c < vb; c++)
      if (row[c] > mx)
        mx = row[c];
    if (mx == -INFINITY)
      continue; /* nothing finite yet */
    double acc = 0.0;
    for (int64_t c = 0; c < vb; c++)
      acc += exp((double)row[c] - mx);
    z[i] = (float)((double)z[i] * exp((double)m[i] - mx) + acc);
    m[i] = mx;
    int64_t tc = (int64_t)t[i] - col0;
    if (tc >= 0 && tc < vb)
      yt[i] = row[tc];
  }
  return PL_OK;
}

pl_status pl__cpu_ce_merge(pl_stream *s, int64_t n, float *st,
                           const float *other) {
  (void)s;
  float *m = st, *z = st + n, *yt = st + 2 * n;
  const float *m2 = other, *z2 = other + n, *yt2 = other + 2 * n;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; i++) {
    float mx = m[i] > m2[i] ? m[i] : m2[i];
    if (mx == -INFINITY) {
      z[i] += z2[i];
    } else {
      z[i] = (float)((double)z[i] * exp((double)m[i] - mx) +
                     (double)z2[i] * exp((double)m2[i] - mx));
    }
    m[i] = mx;
    yt[i] += yt2[i];
  }
  return PL_OK;
}

pl_status pl__cpu_ce_finish(pl_stream *s, int64_t n, const float *st,
                            const int32_t *t, int32_t ignore, float *nll,
                            float *lse, float *stats) {
  (void)s;
  const float *m = st, *z = st + n, *yt = st + 2 * n;
  double sum = 0.0, cnt = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : sum, cnt) if (n > 65536)
  for (int64_t i = 0; i < n; i++) {
    float l = (float)((double)m[i] + log((double)z[i]));
    lse[i] = l;
    float v = 0.0f;
    if (t[i] != ignore) {
      v = l - yt[i];
      sum += v;
      cnt += 1.0;
    }
    if (nll)
      nll[i] = v;
  }
  stats[0] = (float)sum;
  stats[1] = (float)cnt;
  return PL_OK;
}

pl_status pl__cpu_ce_rowgrad(pl_stream *s, int64_t n, const int32_t *t,
                             int32_t ignore, int red, const float *stats,
                             const float *dloss, float *g) {
  (void)s;
  for (int64_t i = 0; i < n; i++) {
    float v;
    if (t[i] == ignore)
      v = 0.0f;
    else if (red == PL_CE_MEAN)
      v = 1.0f / stats[1];
    else if (red == PL_CE_SUM)
      v = 1.0f;
    else
      v = dloss ? dloss[i] : 1.0f;
    g[i] = v;
  }
  return PL_OK;
}

pl_status pl__cpu_ce_lossout(pl_stream *s, int red, const float *stats,
                             float *loss) {
  (void)s;
  loss[0] = red == PL_CE_MEAN ? stats[0] / stats[1] : stats[0];
  return PL_OK;
}

pl_status pl__cpu_ce_residual(pl_stream *s, const float *y, int64_t ldy,
                              int64_t n, int64_t vb, int64_t col0,
                              const int32_t *t, const float *lse,
                              const float *g, void *dy, pl_dtype dy_dt,
                              int64_t lddy) {
  (void)s;
#pragma omp parallel for schedule(static) if (n * vb > 65536)
  for (int64_t i = 0; i < n; i++) {
    const float *row = y + i * ldy;
    float l = lse[i], gi = g[i];
    int64_t tc = (int64_t)t[i] - col0;
    if (dy_dt == PL_F32) {
      float *o = (float *)dy + i * lddy;
      for (int64_t c = 0; c < vb; c++)
        o[c] = gi * (expf(row[c] - l) - (c == tc ? 1.0f : 0.0f));
    } else {
      pl_bf16 *o = (pl_bf16 *)dy + i * lddy;
      for (int64_t c = 0; c < vb; c++)
        o[c] =
            pl_f32_to_bf16(gi * (expf(row[c] - l) - (c == tc ? 1.0f : 0.0f)));
    }
  }
  return PL_OK;
}

pl_status pl__cpu_ce_rows(pl_stream *s, void *y, pl_dtype ydt, int64_t ldy,
                          int64_t n, int64_t v, const int32_t *t,
                          int32_t ignore, const float *g, float *nll,
                          float *lse_out) {
  (void)s;
#pragma omp parallel for schedule(static) if (n * v > 65536)
  for (int64_t i = 0; i < n; i++) {
    void *row = (char *)y + (size_t)(i * ldy) * pl_dtype_size(ydt);
    float mx = -INFINITY;
    for (int64_t c = 0; c < v; c++) {
      float a = pl__load_elem(row, ydt, (size_t)c);
      if (a > mx)
        mx = a;
    }
    double acc = 0.0;
    for (int64_t c = 0; c < v; c++)
      acc += exp((double)pl__load_elem(row, ydt, (size_t)c) - mx);
    float l = (float)((double)mx + log(acc));
    int ign = t[i] == ignore;
    nll[i] = ign ? 0.0f : l - pl__load_elem(row, ydt, (size_t)t[i]);
    if (lse_out)
      lse_out[i] = l;
    if (!g)
      continue;
    float gi = g[i];
    int64_t tc = ign ? -1 : (int64_t)t[i];
    for (int64_t c = 0; c < v; c++)
      pl__store_elem(row, ydt, (size_t)c,
                     gi * (expf(pl__load_elem(row, ydt, (size_t)c) - l) -
                           (c == tc ? 1.0f : 0.0f)));
  }
  return PL_OK;
}

pl_status pl__cpu_ce_stats(pl_stream *s, int64_t n, const float *nll,
                           const int32_t *t, int32_t ignore, float *stats) {
  (void)s;
  double sum = 0.0, cnt = 0.0;
  for (int64_t i = 0; i < n; i++)
    if (t[i] != ignore) {
      sum += nll[i];
      cnt += 1.0;
    }
  stats[0] = (float)sum;
  stats[1] = (float)cnt;
  return PL_OK;
}

pl_status pl__cpu_ce_logsoftmax(pl_stream *s, const float *y, float *logp,
                                int64_t n, int64_t v) {
  (void)s;
#pragma omp parallel for schedule(static) if (n * v > 65536)
  for (int64_t i = 0; i < n; i++) {
    const float *row = y + i * v;
    float *o = logp + i * v;
    float mx = -INFINITY;
    for (int64_t c = 0; c < v; c++)
      if (row[c] > mx)
        mx = row[c];
    double acc = 0.0;
    for (int64_t c = 0; c < v; c++)
      acc += exp((double)row[c] - mx);
    float l = (float)((double)mx + log(acc));
    for (int64_t c = 0; c < v; c++)
      o[c] = row[c] - l;
  }
  return PL_OK;
}

pl_status pl__cpu_ce_nllgrad(pl_stream *s, int64_t n, int64_t v,
                             const int32_t *t, const float *g,
                             float *grad_logp) {
  (void)s;
#pragma omp parallel for schedule(static) if (n * v > 65536)
  for (int64_t i = 0; i < n; i++) {
    float *o = grad_logp + i * v;
    memset(o, 0, (size_t)v * sizeof(float));
    if (t[i] >= 0 && t[i] < v)
      o[t[i]] = -g[i];
  }
  return PL_OK;
}

pl_status pl__cpu_ce_logsoftmax_bwd(pl_stream *s, const float *grad_logp,
                                    const float *logp, float *grad, int64_t n,
                                    int64_t v) {
  (void)s;
#pragma omp parallel for schedule(static) if (n * v > 65536)
  for (int64_t i = 0; i < n; i++) {
    const float *gl = grad_logp + i * v, *lp = logp + i * v;
    float *o = grad + i * v;
    double sum = 0.0;
    for (int64_t c = 0; c < v; c++)
      sum += gl[c];
    float sf = (float)sum;
    for (int64_t c = 0; c < v; c++)
      o[c] = gl[c] - expf(lp[c]) * sf;
  }
  return PL_OK;
}

pl_status pl__cpu_ce_gather(pl_stream *s, const float *logp, int64_t n,
                            int64_t v, const int32_t *t, int32_t ignore,
                            float *nll, float *stats) {
  (void)s;
  double sum = 0.0, cnt = 0.0;
  for (int64_t i = 0; i < n; i++) {
    float val = 0.0f;
    if (t[i] != ignore && t[i] >= 0 && t[i] < v) {
      val = -logp[i * v + t[i]];
      sum += val;
      cnt += 1.0;
    }
    if (nll)
      nll[i] = val;
  }
  stats[0] = (float)sum;
  stats[1] = (float)cnt;
  return PL_OK;
}
