/* router_cpu.c — CPU twins of the router's per-token kernels
 * (backend/router_kernels.h): softmax in place over E logits, top-k with ties
 * to the lower index (the same total order as CUDA: each pick is the best
 * element strictly after the previous pick in that order), route weights, and
 * the backward to dlogits. Without a bias the picks are ranked by the logits
 * themselves, before the softmax (the softmax is monotone, so it is the same
 * top-k, but rounding in expf can merge two distinct logits into one
 * probability: ranking the logits keeps "the k largest logits, ties to the
 * lower index" exact); with a bias they are ranked by p + b after it. */
#include <math.h>

#include "backend/router_kernels.h"
#include "plateau/host_device.h"

/* a before b in the selection order: larger score, then lower index */
static inline int before(float sa, int ia, float sb, int ib) {
  return sa > sb || (sa == sb && ia < ib);
}

/* the k first of sc[e] (+ bias[e]) in the order above, into id[0..k) */
static void select_topk(const float *sc, const float *bias, int E, int k,
                        int32_t *id) {
  float ps = INFINITY;
  int pi = -1;
  for (int j = 0; j < k; j++) {
    float bs = -INFINITY;
    int bi = -1;
    for (int e = 0; e < E; e++) {
      const float v = sc[e] + (bias ? bias[e] : 0.f);
      if (before(ps, pi, v, e) && (bi < 0 || before(v, e, bs, bi))) {
        bs = v;
        bi = e;
      }
    }
    id[j] = bi;
    ps = bs;
    pi = bi;
  }
}

pl_status pl__cpu_router_topk(pl_stream *s, float *probs, const float *bias,
                              int64_t N, int E, int k, int renorm, int32_t *idx,
                              float *w) {
  (void)s;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    float *p = probs + n * E;
    int32_t *id = idx + n * k;
    if (!bias)
      select_topk(p, NULL, E, k, id); /* on the logits */
    float mx = -INFINITY;
    for (int e = 0; e < E; e++)
      mx = fmaxf(mx, p[e]);
    float z = 0.f;
    for (int e = 0; e < E; e++) {
      p[e] = expf(p[e] - mx);
      z += p[e];
    }
    const float iz = 1.f / z;
    for (int e = 0; e < E; e++)
      p[e] *= iz;
    if (bias)
      select_topk(p, bias, E, k, id); /* on p + b */
    float wsum = 0.f;
    for (int j = 0; j < k; j++) {
      w[n * k + j] = p[id[j]];
      wsum += p[id[j]];
    }
    if (renorm) {
      const float iw = 1.f / wsum;
      for (int j = 0; j < k; j++)
        w[n * k + j] *= iw;
    }
  }
  return PL_OK;
}

pl_status pl__cpu_router_dlogits(pl_stream *s, const float *probs,
                                 const int32_t *idx, const float *w,
                                 const float *dw, int64_t N, int E, int k,
                                 int renorm, void *dlogits, pl_dtype dt) {
  (void)s;
  const int bf = dt == PL_BF16;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float *p = probs + n * E;
    const int32_t *id = idx + n * k;
    const float *wn = w + n * k, *g = dw + n * k;
    float dot = 0.f;
    for (int j = 0; j < k; j++)
      dot += wn[j] * g[j];
    for (int e = 0; e < E; e++) {
      float v = renorm ? 0.f : -p[e] * dot;
      for (int j = 0; j < k; j++)
        if (id[j] == e)
          v = renorm ? wn[j] * (g[j] - dot) : p[e] * (g[j] - dot);
      if (bf)
        ((pl_bf16 *)dlogits)[n * E + e] = pl_f32_to_bf16(v);
      else
        ((float *)dlogits)[n * E + e] = v;
    }
  }
  return PL_OK;
}
