/* test_moe_router.c — the softmax top-k router (moe_router.c) on the CPU
 * backend: top-k against a sort, weights against softmax renormalized over the
 * chosen experts, and both gradients (dx, dW_r) against central finite
 * differences of L = sum c * w (c random: the route-weight gradient a layer
 * would pass back), f32. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ops/moe_router.h"
#include "plateau/hd.h"

enum { N = 6, H = 8, E = 10, k = 3 };

static double loss(pl_dev *dev, const float *x, const float *Wr,
                   const float *c, int32_t *idx_out) {
  float w[N * k];
  int32_t idx[N * k];
  ck_assert_int_eq(pl_moe_router_fwd(dev, pl_dev_stream(dev), x, N, H, Wr, E,
                                     k, PL_F32, idx, w), PL_OK);
  if (idx_out) memcpy(idx_out, idx, sizeof idx);
  double L = 0;
  for (int i = 0; i < N * k; i++) L += (double)c[i] * w[i];
  return L;
}

START_TEST(router_grads) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  float x[N * H], Wr[H * E], c[N * k];
  for (int i = 0; i < N * H; i++) x[i] = pl_rng_normal(1, i, 0, 1);
  for (int i = 0; i < H * E; i++) Wr[i] = pl_rng_normal(2, i, 0, 1);
  for (int i = 0; i < N * k; i++) c[i] = pl_rng_normal(3, i, 0, 1);
  int32_t idx[N * k];
  float w[N * k];
  ck_assert_int_eq(pl_moe_router_fwd(dev, pl_dev_stream(dev), x, N, H, Wr, E,
                                     k, PL_F32, idx, w), PL_OK);
  /* top-k and weights against a direct computation */
  for (int t = 0; t < N; t++) {
    double z[E];
    for (int e = 0; e < E; e++) {
      z[e] = 0;
      for (int h = 0; h < H; h++) z[e] += (double)x[t * H + h] * Wr[h * E + e];
    }
    double prev = INFINITY, den = 0;
    for (int j = 0; j < k; j++) {
      double v = z[idx[t * k + j]];
      ck_assert_msg(v <= prev + 1e-9, "token %d: top-k not descending", t);
      prev = v;
      for (int e = 0; e < E; e++) {
        bool chosen = false;
        for (int q = 0; q < k; q++) chosen |= idx[t * k + q] == e;
        if (!chosen) ck_assert_msg(z[e] <= v + 1e-5, "token %d: expert %d beats a chosen one", t, e);
      }
      den += exp(z[idx[t * k + j]]);
    }
    for (int j = 0; j < k; j++)
      ck_assert(fabs(w[t * k + j] - exp(z[idx[t * k + j]]) / den) < 1e-5);
  }
  /* analytic gradients */
  float dx[N * H], dWr[H * E];
  memset(dx, 0, sizeof dx);
  memset(dWr, 0, sizeof dWr);
  ck_assert_int_eq(pl_moe_router_bwd(dev, pl_dev_stream(dev), x, N, H, Wr, E,
                                     k, PL_F32, idx, w, c, dx, dWr), PL_OK);
  /* finite differences (the selection is stable for these small steps) */
  const float hstep = 1e-2f;
  double mx = 0, scale = 1e-30;
  int checked = 0;
  for (int i = 0; i < N * H; i++) {
    float s = x[i];
    int32_t i1[N * k], i2[N * k];
    x[i] = s + hstep;
    double Lp = loss(dev, x, Wr, c, i1);
    x[i] = s - hstep;
    double Lm = loss(dev, x, Wr, c, i2);
    x[i] = s;
    if (memcmp(i1, idx, sizeof i1) || memcmp(i2, idx, sizeof i2)) continue;
    checked++;
    double fd = (Lp - Lm) / (2 * hstep);
    mx = fmax(mx, fabs(fd - dx[i]));
    scale = fmax(scale, fabs(fd));
  }
  ck_assert_msg(mx / scale < 2e-2, "dx: max err %.3g (scale %.3g)", mx, scale);
  mx = 0, scale = 1e-30;
  for (int i = 0; i < H * E; i++) {
    float s = Wr[i];
    int32_t i1[N * k], i2[N * k];
    Wr[i] = s + hstep;
    double Lp = loss(dev, x, Wr, c, i1);
    Wr[i] = s - hstep;
    double Lm = loss(dev, x, Wr, c, i2);
    Wr[i] = s;
    if (memcmp(i1, idx, sizeof i1) || memcmp(i2, idx, sizeof i2)) continue;
    checked++;
    double fd = (Lp - Lm) / (2 * hstep);
    mx = fmax(mx, fabs(fd - dWr[i]));
    scale = fmax(scale, fabs(fd));
  }
  ck_assert_msg(mx / scale < 2e-2, "dWr: max err %.3g (scale %.3g)", mx, scale);
  ck_assert_msg(checked > (N * H + H * E) / 2, "only %d of %d entries checked",
                checked, N * H + H * E);
  ck_assert_int_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "router"), 0);
  /* k > E refused */
  ck_assert_int_eq(pl_moe_router_fwd(dev, pl_dev_stream(dev), x, N, H, Wr, E,
                                     E + 1, PL_F32, idx, w), PL_EINVAL);
  pl_dev_destroy(dev);
}
END_TEST

int main(void) {
  Suite *s = suite_create("moe_router");
  TCase *tc = tcase_create("router");
  tcase_add_test(tc, router_grads);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
