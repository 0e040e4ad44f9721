/* router_cpu.c — CPU twins of the router's per-token kernels (model/router.h):
 * softmax in place over E logits, top-k by (p + b) descending with ties to the
 * lower index (the same total order as CUDA: each pick is the best element
 * strictly after the previous pick in that order), route weights, and the
 * backward to dlogits. */
#include <math.h>

#include "backend/internal.h"
#include "model/router.h"
#include "plateau/hd.h"

/* a before b in the selection order: larger score, then lower index */
static inline int before(float sa, int ia, float sb, int ib) {
  return sa > sb || (sa == sb && ia < ib);
}

pl_status pl_cpu_router_topk(PL_ROUTER_TOPK_ARGS) {
  (void)s;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    float *p = probs + n * E;
    float mx = -INFINITY;
    for (int e = 0; e < E; e++) mx = fmaxf(mx, p[e]);
    float z = 0.f;
    for (int e = 0; e < E; e++) {
      p[e] = expf(p[e] - mx);
      z += p[e];
    }
    const float iz = 1.f / z;
    for (int e = 0; e < E; e++) p[e] *= iz;
    float ps = INFINITY;
    int pi = -1;
    float wsum = 0.f;
    for (int j = 0; j < k; j++) {
      float bs = -INFINITY;
      int bi = -1;
      for (int e = 0; e < E; e++) {
        const float sc = p[e] + (bias ? bias[e] : 0.f);
        if (before(ps, pi, sc, e) && (bi < 0 || before(sc, e, bs, bi))) {
          bs = sc;
          bi = e;
        }
      }
      idx[n * k + j] = bi;
      w[n * k + j] = p[bi];
      wsum += p[bi];
      ps = bs;
      pi = bi;
    }
    if (renorm) {
      const float iw = 1.f / wsum;
      for (int j = 0; j < k; j++) w[n * k + j] *= iw;
    }
  }
  return PL_OK;
}

pl_status pl_cpu_router_dlogits(PL_ROUTER_DLOGITS_ARGS) {
  (void)s;
  const int bf = dt == PL_BF16;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const float *p = probs + n * E;
    const int32_t *id = idx + n * k;
    const float *wn = w + n * k, *g = dw + n * k;
    float dot = 0.f;
    for (int j = 0; j < k; j++) dot += wn[j] * g[j];
    for (int e = 0; e < E; e++) {
      float v = renorm ? 0.f : -p[e] * dot;
      for (int j = 0; j < k; j++)
        if (id[j] == e) v = renorm ? wn[j] * (g[j] - dot) : p[e] * (g[j] - dot);
      if (bf)
        ((pl_bf16 *)dlogits)[n * E + e] = pl_f32_to_bf16(v);
      else
        ((float *)dlogits)[n * E + e] = v;
    }
  }
  return PL_OK;
}
