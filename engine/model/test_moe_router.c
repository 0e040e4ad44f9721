/* test_moe_router.c — the router (model/router.h, renorm = 1, as the MoE
 * dispatch bench's `router` profile calls it) feeding the MoE layer's dense
 * reference (ops/moe.h) on the CPU backend, f32:
 *  - selection against the double logits: the k largest in order, ties to the
 *    lower index; weights against softmax over the k chosen logits;
 *  - the gradient of L = Σ dout ⊙ moe(x, router(x, W_r)) through both paths:
 *    dx = dx_moe (expert FFNs) + dx_router (from the route-weight gradient dw
 *    that the MoE backward returns), dW_r from the router, against central
 *    finite differences of the f32 forward itself (selection re-run at each
 *    step; entries whose step changes a selection are skipped and counted);
 *  - the router term matters: dx_moe alone misses the finite differences;
 *  - the router allocates nothing: the device peak is the caller's buffers
 *    (tag "router", exact bytes).
 * It sits with the router in model/: a test includes nothing above the layer
 * of the code it tests. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "model/router.h"
#include "ops/moe.h"
#include "plateau/host_device.h"

enum { N = 6, H = 8, I = 5, E = 10, k = 3 };

typedef struct bufs {
  float *probs, *w, *dlogits; /* [N,E], [N,k], [N,E] (tracked, "router") */
  int32_t *idx;               /* [N,k] */
} bufs;

static pl_moe_cfg moe_cfg(void) {
  pl_moe_cfg c = pl_moe_cfg_default();
  c.H = H, c.I = I, c.E = E, c.k = k, c.dt = PL_F32;
  return c;
}

static const pl_router_shape rsh = {
    .N = N, .H = H, .E = E, .k = k, .renorm = 1, .dt = PL_F32};

/* L = Σ dout ⊙ out, the f32 forward (router, then the MoE reference) */
static double loss(pl_stream *s, const bufs *b, const float *x, const float *Wr,
                   const float *wg, const float *wu, const float *wd,
                   const float *dout, int32_t *idx_out) {
  float out[N * H];
  const pl_moe_cfg c = moe_cfg();
  ck_assert_int_eq(pl_router_fwd(s, &rsh, x, Wr, NULL, b->probs, b->idx, b->w),
                   PL_OK);
  ck_assert_int_eq(
      pl_moe_reference_fwd(&c, wg, wu, wd, x, N, b->idx, b->w, out), PL_OK);
  memcpy(idx_out, b->idx, sizeof(int32_t) * N * k);
  double L = 0;
  for (int i = 0; i < N * H; i++)
    L += (double)dout[i] * out[i];
  return L;
}

/* the arguments of loss; fd_compare perturbs x or Wr in place */
typedef struct fd_args {
  pl_stream *s;
  const bufs *b;
  float *x, *Wr;
  const float *wg, *wu, *wd, *dout;
  const int32_t *idx; /* the routing of the unperturbed forward */
} fd_args;
typedef struct fd_res {
  double mx, mx2, scale; /* max |FD − g|, max |FD − g2|, max |FD| */
  int first_bad;         /* where mx is */
} fd_res;

/* Central differences (step 1e-2) of loss over the n entries of p (a->x or
 * a->Wr) against g (and g2 when not NULL); an entry whose perturbation
 * changes the routing is skipped (the loss has a kink there).  Counts the
 * entries checked and skipped. */
static fd_res fd_compare(const fd_args *a, float *p, int n, const float *g,
                         const float *g2, int *checked, int *skipped) {
  const float hstep = 1e-2f;
  fd_res r = {0, 0, 1e-30, -1};
  for (int i = 0; i < n; i++) {
    const float o = p[i];
    int32_t i1[N * k], i2[N * k];
    p[i] = o + hstep;
    const double Lp =
        loss(a->s, a->b, a->x, a->Wr, a->wg, a->wu, a->wd, a->dout, i1);
    p[i] = o - hstep;
    const double Lm =
        loss(a->s, a->b, a->x, a->Wr, a->wg, a->wu, a->wd, a->dout, i2);
    p[i] = o;
    if (memcmp(i1, a->idx, sizeof i1) || memcmp(i2, a->idx, sizeof i2)) {
      (*skipped)++;
      continue;
    }
    (*checked)++;
    const double fd = (Lp - Lm) / (2 * hstep);
    if (fabs(fd - g[i]) > r.mx)
      r.mx = fabs(fd - g[i]), r.first_bad = i;
    if (g2)
      r.mx2 = fmax(r.mx2, fabs(fd - g2[i]));
    r.scale = fmax(r.scale, fabs(fd));
  }
  return r;
}

/* The router's selection and weights against the double logits: the top k
 * experts in order, weights the softmax over the chosen. */
static void check_selection(const float *x, const float *Wr, const int32_t *idx,
                            const float *w) {
  for (int t = 0; t < N; t++) {
    double z[E];
    for (int e = 0; e < E; e++) {
      z[e] = 0;
      for (int h = 0; h < H; h++)
        z[e] += (double)x[t * H + h] * Wr[h * E + e];
    }
    double den = 0;
    for (int j = 0; j < k; j++) {
      const int e = idx[t * k + j];
      ck_assert_msg(e >= 0 && e < E, "token %d pick %d: expert %d", t, j, e);
      int above =
          0; /* experts with a larger logit must be exactly the first j picks */
      for (int f = 0; f < E; f++)
        above += z[f] > z[e] + 1e-5;
      ck_assert_msg(above == j,
                    "token %d pick %d: expert %d has %d larger logits", t, j, e,
                    above);
      den += exp(z[e]);
    }
    for (int j = 0; j < k; j++) {
      const double ref = exp(z[idx[t * k + j]]) / den;
      ck_assert_msg(fabs(w[t * k + j] - ref) < 1e-5,
                    "w[%d,%d] = %.7g, softmax over chosen %.7g", t, j,
                    w[t * k + j], ref);
    }
  }
}

START_TEST(router_through_moe_grads) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  pl_stream *s = pl_dev_stream(dev);
  bufs b;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, sizeof(float) * N * E,
                            "router", (void **)&b.probs),
                   PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, sizeof(float) * N * E,
                            "router", (void **)&b.dlogits),
                   PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, sizeof(float) * N * k,
                            "router", (void **)&b.w),
                   PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, sizeof(int32_t) * N * k,
                            "router", (void **)&b.idx),
                   PL_OK);
  const size_t rbytes =
      sizeof(float) * (2 * N * E + N * k) + sizeof(int32_t) * N * k;
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  pl_mem_stats m0;
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &m0), PL_OK);

  static float x[N * H], Wr[H * E], dout[N * H];
  static float wg[E * H * I], wu[E * H * I], wd[E * I * H];
  for (int i = 0; i < N * H; i++)
    x[i] = pl_rng_normal(1, i, 0, 1);
  for (int i = 0; i < H * E; i++)
    Wr[i] = pl_rng_normal(2, i, 0, 0.5f);
  for (int i = 0; i < N * H; i++)
    dout[i] = pl_rng_normal(3, i, 0, 1);
  for (int i = 0; i < E * H * I; i++) {
    wg[i] = pl_rng_normal(4, i, 0, 0.4f);
    wu[i] = pl_rng_normal(5, i, 0, 0.4f);
    wd[i] = pl_rng_normal(6, i, 0, 0.4f);
  }
  /* poison the outputs */
  for (int i = 0; i < N * k; i++)
    b.idx[i] = -7, b.w[i] = NAN;
  int32_t idx[N * k];
  loss(s, &b, x, Wr, wg, wu, wd, dout, idx);

  check_selection(x, Wr, idx, b.w);

  /* analytic: MoE reference backward (dx_moe, dw), then the router's */
  const pl_moe_cfg c = moe_cfg();
  float dx_moe[N * H], dw[N * k], dx_r[N * H], dWr[H * E], dx[N * H];
  for (int i = 0; i < N * H; i++)
    dx_moe[i] = dx_r[i] = NAN;
  for (int i = 0; i < N * k; i++)
    dw[i] = NAN;
  memset(dWr, 0, sizeof dWr); /* accumulated */
  ck_assert_int_eq(pl_moe_reference_bwd(&c, wg, wu, wd, x, N, b.idx, b.w, dout,
                                        dx_moe, dw, NULL, NULL, NULL),
                   PL_OK);
  ck_assert_int_eq(pl_router_bwd(s, &rsh, x, Wr, b.probs, b.idx, b.w, dw,
                                 b.dlogits, dx_r, dWr),
                   PL_OK);
  for (int i = 0; i < N * H; i++)
    dx[i] = dx_moe[i] + dx_r[i];
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  pl_mem_stats m1;
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &m1), PL_OK);
  ck_assert_msg(m1.peak == m0.current && m0.current == rbytes,
                "router allocated: peak %zu, caller's buffers %zu", m1.peak,
                rbytes);
  ck_assert_uint_eq(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "router"), rbytes);

  /* central finite differences of the f32 forward */
  int checked = 0, skipped = 0;
  const fd_args fa = {s, &b, x, Wr, wg, wu, wd, dout, idx};
  const fd_res rx = fd_compare(&fa, x, N * H, dx, dx_moe, &checked, &skipped);
  printf("# router+moe dx vs FD: normwise %.3g (max abs %.3g at %d); without "
         "the router term "
         "%.3g\n",
         rx.mx / rx.scale, rx.mx, rx.first_bad, rx.mx2 / rx.scale);
  ck_assert_msg(rx.mx / rx.scale < 1e-2,
                "dx: normwise %.3g (max abs %.3g at %d)", rx.mx / rx.scale,
                rx.mx, rx.first_bad);
  ck_assert_msg(rx.mx2 / rx.scale > 1e-1,
                "dx_moe alone matches FD (%.3g): the test cannot see "
                "the router's gradient",
                rx.mx2 / rx.scale);
  const fd_res rW = fd_compare(&fa, Wr, H * E, dWr, NULL, &checked, &skipped);
  printf("# router+moe dW_r vs FD: normwise %.3g (max abs %.3g at %d); %d "
         "checked, %d skipped\n",
         rW.mx / rW.scale, rW.mx, rW.first_bad, checked, skipped);
  ck_assert_msg(rW.scale > 1e-3, "dW_r finite differences all ~0 (%.3g)",
                rW.scale);
  ck_assert_msg(rW.mx / rW.scale < 1e-2,
                "dW_r: normwise %.3g (max abs %.3g at %d)", rW.mx / rW.scale,
                rW.mx, rW.first_bad);
  ck_assert_msg(checked > (N * H + H * E) / 2, "only %d of %d entries checked",
                checked, N * H + H * E);
  /* k > E refused, naming the value */
  pl_router_shape bad = rsh;
  bad.k = E + 1;
  ck_assert_int_eq(pl_router_fwd(s, &bad, x, Wr, NULL, b.probs, b.idx, b.w),
                   PL_EINVAL);
  pl_free(dev, b.probs), pl_free(dev, b.dlogits), pl_free(dev, b.w),
      pl_free(dev, b.idx);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "router"), 0);
  pl_dev_destroy(dev);
}
END_TEST

int main(void) {
  const TTest *tests[] = {router_through_moe_grads, NULL};
  return pl_check_suite("moe_router", 60, tests, NULL, NULL, CK_FORK_GETENV, 0)
             ? 1
             : 0;
}
