/* test_router.c — the router (model/router.h) on the CPU backend: forward
 * against a double reference (softmax, top-k order, weights), backward against
 * central finite differences in double of L = Σ dw ⊙ w(x, W_r) with the
 * selection held fixed (renorm and plain; with and without the balancing
 * bias), adversarial selections (exact ties, logits merged by expf rounding,
 * k = E, E = 1, huge logits, bias ties), the bias update rule, bad shapes;
 * CUDA against the CPU on a GPU (including the adversarial selections). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "core/internal.h"
#include "model/router.h"

/* double forward with a given selection: w[n,j] for the chosen idx */
static void ref_w(const double *x, const double *W, const int32_t *idx,
                  int64_t N, int64_t H, int E, int k, int renorm, double *w,
                  double *probs) {
  double *l = malloc(sizeof(double) * E);
  for (int64_t n = 0; n < N; n++) {
    double mx = -INFINITY, z = 0;
    for (int e = 0; e < E; e++) {
      double a = 0;
      for (int64_t h = 0; h < H; h++)
        a += x[n * H + h] * W[h * E + e];
      l[e] = a;
      mx = fmax(mx, a);
    }
    for (int e = 0; e < E; e++)
      z += exp(l[e] - mx);
    double ws = 0;
    for (int e = 0; e < E; e++) {
      const double p = exp(l[e] - mx) / z;
      if (probs)
        probs[n * E + e] = p;
    }
    for (int j = 0; j < k; j++) {
      const double p = exp(l[idx[n * k + j]] - mx) / z;
      w[n * k + j] = p;
      ws += p;
    }
    if (renorm)
      for (int j = 0; j < k; j++)
        w[n * k + j] /= ws;
  }
  free(l);
}

static double loss(const double *x, const double *W, const int32_t *idx,
                   const double *dw, int64_t N, int64_t H, int E, int k,
                   int renorm) {
  double *w = malloc(sizeof(double) * N * k), L = 0;
  ref_w(x, W, idx, N, H, E, k, renorm, w, NULL);
  for (int64_t i = 0; i < N * k; i++)
    L += w[i] * dw[i];
  free(w);
  return L;
}

/* the arguments of loss; fd_normwise perturbs one of its arrays in place */
typedef struct fd_loss {
  double *x, *W;
  const int32_t *idx;
  const double *dw;
  int64_t N, H;
  int E, k, renorm;
} fd_loss;

/* max |FD − g| / max |FD| over the n entries of p (x or W of l), central
 * differences of loss with step 1e-5 */
static double fd_normwise(const fd_loss *l, double *p, int64_t n,
                          const float *g) {
  const double eps = 1e-5;
  double maxe = 0, sc = 1e-30;
  for (int64_t i = 0; i < n; i++) {
    const double o = p[i];
    p[i] = o + eps;
    const double lp =
        loss(l->x, l->W, l->idx, l->dw, l->N, l->H, l->E, l->k, l->renorm);
    p[i] = o - eps;
    const double lm =
        loss(l->x, l->W, l->idx, l->dw, l->N, l->H, l->E, l->k, l->renorm);
    p[i] = o;
    const double fd = (lp - lm) / (2 * eps);
    maxe = fmax(maxe, fabs(fd - g[i]));
    sc = fmax(sc, fabs(fd));
  }
  return maxe / sc;
}

START_TEST(forward_and_fd_gradients) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  pl_stream *s = pl_dev_stream(dev);
  const int64_t N = 19, H = 12;
  const int E = 9, k = 3;
  for (int renorm = 0; renorm < 2; renorm++)
    for (int use_bias = 0; use_bias < 2; use_bias++) {
      pl_router_shape sh = {
          .N = N, .H = H, .E = E, .k = k, .renorm = renorm, .dt = PL_F32};
      float *x = malloc(4 * N * H), *W = malloc(4 * H * E),
            *probs = malloc(4 * N * E);
      float *w = malloc(4 * N * k), *dw = malloc(4 * N * k),
            *bias = malloc(4 * E);
      float *dl = malloc(4 * N * E), *dx = malloc(4 * N * H),
            *dW = calloc(H * E, 4);
      int32_t *idx = malloc(4 * N * k);
      pl_rng_fill(s, x, PL_F32, N * H, 1 + renorm, 0, PL_DIST_NORMAL, 0.f, 1.f);
      pl_rng_fill(s, W, PL_F32, H * E, 2, 0, PL_DIST_NORMAL, 0.f, 0.5f);
      pl_rng_fill(s, dw, PL_F32, N * k, 3, 0, PL_DIST_NORMAL, 0.f, 1.f);
      pl_rng_fill(s, bias, PL_F32, E, 4, 0, PL_DIST_UNIFORM, -0.2f, 0.2f);
      ck_assert_int_eq(
          pl_router_fwd(s, &sh, x, W, use_bias ? bias : NULL, probs, idx, w),
          PL_OK);
      double *xd = malloc(8 * N * H), *Wd = malloc(8 * H * E),
             *dwd = malloc(8 * N * k);
      double *wr = malloc(8 * N * k), *pr = malloc(8 * N * E);
      for (int64_t i = 0; i < N * H; i++)
        xd[i] = x[i];
      for (int64_t i = 0; i < H * E; i++)
        Wd[i] = W[i];
      for (int64_t i = 0; i < N * k; i++)
        dwd[i] = dw[i];
      ref_w(xd, Wd, idx, N, H, E, k, renorm, wr, pr);
      /* selection: the k largest p + b in order, ties to the lower index */
      for (int64_t n = 0; n < N; n++) {
        for (int j = 0; j < k; j++) {
          const int e = idx[n * k + j];
          ck_assert(e >= 0 && e < E);
          const double se = pr[n * E + e] + (use_bias ? bias[e] : 0);
          int better =
              0; /* experts ranked above e must be exactly the first j picks */
          for (int f = 0; f < E; f++) {
            const double sf = pr[n * E + f] + (use_bias ? bias[f] : 0);
            if (sf > se + 1e-6)
              better++;
          }
          ck_assert_msg(better == j,
                        "token %lld pick %d: expert %d has %d better",
                        (long long)n, j, e, better);
          ck_assert_msg(fabs(w[n * k + j] - wr[n * k + j]) < 1e-5, "w[%lld,%d]",
                        (long long)n, j);
        }
      }
      ck_assert_int_eq(
          pl_router_bwd(s, &sh, x, W, probs, idx, w, dw, dl, dx, dW), PL_OK);
      /* finite differences in double */
      const fd_loss fl = {xd, Wd, idx, dwd, N, H, E, k, renorm};
      const double ex = fd_normwise(&fl, xd, N * H, dx),
                   eW = fd_normwise(&fl, Wd, H * E, dW);
      ck_assert_msg(ex < 1e-3, "dx vs FD: normwise %.3g (renorm %d bias %d)",
                    ex, renorm, use_bias);
      ck_assert_msg(eW < 1e-3, "dW vs FD: normwise %.3g (renorm %d bias %d)",
                    eW, renorm, use_bias);
      free(x), free(W), free(probs), free(w), free(dw), free(bias), free(dl),
          free(dx), free(dW);
      free(idx), free(xd), free(Wd), free(dwd), free(wr), free(pr);
    }
  pl_dev_destroy(dev);
}
END_TEST

START_TEST(bias_update_and_refusals) {
  float b[4] = {0, 0, 0, 0};
  const int64_t c[4] = {10, 30, 20, 20}; /* mean 20 */
  pl_router_bias_update(b, c, 4, 0.5f);
  ck_assert(b[0] == 0.5f && b[1] == -0.5f && b[2] == 0.f && b[3] == 0.f);
  pl_router_shape sh = {.N = 4, .H = 8, .E = 4, .k = 5, .dt = PL_F32};
  ck_assert_int_eq(pl_router_check(&sh), PL_EINVAL);
  sh.k = 0;
  ck_assert_int_eq(pl_router_check(&sh), PL_EINVAL);
  sh.k = 2;
  sh.dt = PL_I32;
  ck_assert_int_eq(pl_router_check(&sh), PL_EINVAL);
  sh.dt = PL_BF16;
  ck_assert_int_eq(pl_router_check(&sh), PL_OK);
}
END_TEST

/* one token, H = 1, x = 1: the logits are W exactly (no GEMM rounding); on a
 * GPU the same call on CUDA must give the same picks and weights */
static void route1(const float *z, const float *bias, int E, int k, int renorm,
                   int32_t *idx, float *w) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  const float one = 1.f;
  float *probs = malloc(sizeof(float) * E);
  for (int j = 0; j < k; j++)
    idx[j] = -7, w[j] = NAN; /* poison */
  pl_router_shape sh = {
      .N = 1, .H = 1, .E = E, .k = k, .renorm = renorm, .dt = PL_F32};
  ck_assert_int_eq(
      pl_router_fwd(pl_dev_stream(dev), &sh, &one, z, bias, probs, idx, w),
      PL_OK);
  free(probs);
  pl_dev_destroy(dev);
  if (pl_cuda_device_count() == 0)
    return;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CUDA, -1, &dev), PL_OK);
  pl_stream *s = pl_dev_stream(dev);
  void *d[6] = {0};
  const size_t sz[6] = {4,
                        4 * (size_t)E,
                        4 * (size_t)E,
                        4 * (size_t)E,
                        4 * (size_t)k,
                        4 * (size_t)k};
  for (int i = 0; i < 6; i++)
    ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, sz[i], "act", &d[i]),
                     PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s, d[0], &one, 4), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s, d[1], z, sz[1]), PL_OK);
  if (bias)
    ck_assert_int_eq(pl_memcpy_async(s, d[2], bias, sz[2]), PL_OK);
  ck_assert_int_eq(
      pl_router_fwd(s, &sh, d[0], d[1], bias ? d[2] : NULL, d[3], d[4], d[5]),
      PL_OK);
  int32_t gi[32];
  float gw[32];
  ck_assert_int_eq(pl_memcpy_async(s, gi, d[4], sz[4]), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s, gw, d[5], sz[5]), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  for (int j = 0; j < k; j++) {
    ck_assert_msg(gi[j] == idx[j], "cuda pick %d: %d, cpu %d", j, gi[j],
                  idx[j]);
    ck_assert_msg(fabsf(gw[j] - w[j]) <= 1e-6f * fabsf(w[j]) + 1e-37f,
                  "cuda w[%d] %.9g, cpu %.9g", j, gw[j], w[j]);
  }
  for (int i = 0; i < 6; i++)
    pl_free(dev, d[i]);
  pl_dev_destroy(dev);
}

/* adversarial selections: exact ties go to the lower index; two distinct
 * logits that expf rounds to one probability are still ranked by the logit
 * (no bias); k = E; E = 1; huge logits; ties of p + b with a bias */
START_TEST(selection_ties_and_extremes) {
  int32_t idx[8];
  float w[8];
  const float tie[6] = {0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f};
  for (int renorm = 0; renorm < 2; renorm++) {
    route1(tie, NULL, 6, 3, renorm, idx, w);
    for (int j = 0; j < 3; j++) {
      ck_assert_msg(idx[j] == j, "ties: pick %d is %d, want %d", j, idx[j], j);
      const float want = renorm ? 1.f / 3 : 1.f / 6;
      ck_assert_msg(fabsf(w[j] - want) < 1e-6f, "ties: w[%d] %.7g want %.7g", j,
                    w[j], want);
    }
  }
  /* z1 < z2 by one ulp, both ~e^-100 after the softmax: one denormal */
  const float near[3] = {0.f, -100.f, nextafterf(-100.f, 0.f)};
  const int merged = expf(near[1]) == expf(near[2]);
  route1(near, NULL, 3, 2, 1, idx, w);
  ck_assert_msg(idx[0] == 0 && idx[1] == 2,
                "near-tie (expf merged: %d): picks %d %d, want 0 2", merged,
                idx[0], idx[1]);
  ck_assert(w[0] == 1.f && w[1] >= 0.f && w[1] < 1e-30f);
  /* k = E: every expert, by logit descending */
  const float all[5] = {0.3f, -1.f, 2.f, 0.3f, 1.f};
  const int order[5] = {2, 4, 0, 3, 1};
  route1(all, NULL, 5, 5, 1, idx, w);
  float ws = 0.f;
  for (int j = 0; j < 5; j++) {
    ck_assert_msg(idx[j] == order[j], "k = E: pick %d is %d, want %d", j,
                  idx[j], order[j]);
    ws += w[j];
  }
  ck_assert_msg(fabsf(ws - 1.f) < 1e-6f, "k = E: weights sum %.7g", ws);
  const float one_e[1] = {-3.f};
  route1(one_e, NULL, 1, 1, 0, idx, w);
  ck_assert(idx[0] == 0 && w[0] == 1.f);
  /* huge logits: no overflow, no NaN */
  const float huge[3] = {1e30f, -1e30f, 3e29f};
  route1(huge, NULL, 3, 2, 1, idx, w);
  ck_assert_msg(idx[0] == 0 && idx[1] == 2 && w[0] == 1.f && w[1] == 0.f,
                "huge: picks %d %d w %g %g", idx[0], idx[1], w[0], w[1]);
  /* bias: equal logits, p + b ties resolved to the lower index; weights
   * from p only (uniform) */
  const float eq[4] = {1.f, 1.f, 1.f, 1.f}, b[4] = {0.f, 0.1f, 0.1f, 0.f};
  route1(eq, b, 4, 3, 1, idx, w);
  ck_assert_msg(idx[0] == 1 && idx[1] == 2 && idx[2] == 0,
                "bias ties: picks %d %d %d", idx[0], idx[1], idx[2]);
  for (int j = 0; j < 3; j++)
    ck_assert(fabsf(w[j] - 1.f / 3) < 1e-6f);
}
END_TEST

START_TEST(cuda_matches_cpu) {
  pl_dev *c, *g;
  if (!pl_check_cpu_and_gpu(&c, &g))
    return;
  pl_stream *cs = pl_dev_stream(c), *gs = pl_dev_stream(g);
  const int64_t N = 1000, H = 256;
  const int E = 128, k = 8;
  pl_router_shape sh = {
      .N = N, .H = H, .E = E, .k = k, .renorm = 1, .dt = PL_F32};
  pl_dev *devs[2] = {c, g};
  void *b[2][9];
  const size_t sz[9] = {4 * N * H, 4 * H * E, 4 * N * E, 4 * N * k, 4 * N * k,
                        4 * N * k, 4 * N * E, 4 * N * H, 4 * H * E};
  for (int d = 0; d < 2; d++) {
    for (int i = 0; i < 9; i++)
      ck_assert_int_eq(
          pl_alloc(devs[d], PL_ARENA_DEVICE, sz[i], "act", &b[d][i]), PL_OK);
    pl_stream *s = pl_dev_stream(devs[d]);
    pl_rng_fill(s, b[d][0], PL_F32, N * H, 7, 0, PL_DIST_NORMAL, 0.f, 1.f);
    pl_rng_fill(s, b[d][1], PL_F32, H * E, 8, 0, PL_DIST_NORMAL, 0.f, 0.1f);
    pl_rng_fill(s, b[d][5], PL_F32, N * k, 9, 0, PL_DIST_NORMAL, 0.f, 1.f);
    pl_fill(s, b[d][8], PL_F32, H * E, 0.0);
    ck_assert_int_eq(pl_router_fwd(s, &sh, b[d][0], b[d][1], NULL, b[d][2],
                                   b[d][3], b[d][4]),
                     PL_OK);
    ck_assert_int_eq(pl_router_bwd(s, &sh, b[d][0], b[d][1], b[d][2], b[d][3],
                                   b[d][4], b[d][5], b[d][6], b[d][7], b[d][8]),
                     PL_OK);
    ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  }
  (void)cs;
  int mism = 0;
  int32_t *gi = malloc(sz[3]);
  pl_memcpy_async(gs, gi, b[1][3], sz[3]);
  float *gx = malloc(sz[7]);
  pl_memcpy_async(gs, gx, b[1][7], sz[7]);
  pl_stream_sync(gs);
  for (int64_t i = 0; i < N * k; i++)
    mism += gi[i] != ((int32_t *)b[0][3])[i];
  double m = 0, scl = 1e-30;
  for (int64_t i = 0; i < N * H; i++) {
    m = fmax(m, fabs(gx[i] - ((float *)b[0][7])[i]));
    scl = fmax(scl, fabs(((float *)b[0][7])[i]));
  }
  printf("# router cuda vs cpu: %d of %lld picks differ; dx normwise %.3g\n",
         mism, (long long)(N * k), m / scl);
  ck_assert_msg(mism <= N * k / 1000, "router picks differ: %d", mism);
  ck_assert_msg(m / scl < 1e-3 || mism > 0, "router dx normwise %.3g", m / scl);
  free(gi);
  free(gx);
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < 9; i++)
      pl_free(devs[d], b[d][i]);
  pl_dev_destroy(g);
  pl_dev_destroy(c);
}
END_TEST

int main(void) {
  const TTest *tests[] = {forward_and_fd_gradients, bias_update_and_refusals,
                          selection_ties_and_extremes, cuda_matches_cpu, NULL};
  return pl_check_suite("router", 120, tests, NULL, NULL, CK_NOFORK, 0) ? 1 : 0;
}
