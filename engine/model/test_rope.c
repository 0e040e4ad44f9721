/* test_rope.c — rotary position embedding: forward against the formula in
 * double, backward as the exact adjoint (<R x, y> = <x, Rᵀ y>) and inverse
 * (Rᵀ R x = x), odd shapes and a large position offset; CUDA against the CPU
 * when a GPU is present (no fork: CK_NOFORK). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "core/internal.h"
#include "model/rope.h"
#include "plateau/host_device.h"

static double get(const void *p, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? ((const float *)p)[i]
                      : pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
}

static void *rnd(pl_dev *dev, pl_dtype dt, size_t n, uint64_t seed) {
  void *p;
  ck_assert_int_eq(
      pl_alloc(dev, PL_ARENA_DEVICE, n * pl_dtype_size(dt) + 1, "act", &p),
      PL_OK);
  ck_assert_int_eq(pl_rng_fill(pl_dev_stream(dev), p, dt, n, seed, 0,
                               PL_DIST_NORMAL, 0.f, 1.f),
                   PL_OK);
  return p;
}

START_TEST(forward_formula_adjoint_inverse) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  pl_stream *s = pl_dev_stream(dev);
  static const int shp[][5] = {{1, 1, 1, 2, 0},
                               {2, 7, 3, 8, 5},
                               {1, 33, 4, 64, 1 << 20},
                               {1, 5, 2, 128, 12345}};
  const double theta = 10000.0;
  for (int si = 0; si < 4; si++)
    for (int bf = 0; bf < 2; bf++) {
      const pl_dtype dt = bf ? PL_BF16 : PL_F32;
      const int64_t B = shp[si][0], S = shp[si][1], pos0 = shp[si][4];
      const int nh = shp[si][2], d = shp[si][3];
      const size_t n = (size_t)(B * S * nh * d);
      void *x = rnd(dev, dt, n, 10 + si), *x0 = malloc(n * pl_dtype_size(dt));
      memcpy(x0, x, n * pl_dtype_size(dt));
      ck_assert_int_eq(pl_rope_fwd(s, x, dt, B, S, nh, d, pos0, theta), PL_OK);
      double maxerr = 0;
      for (int64_t t = 0; t < B * S; t++)
        for (int h = 0; h < nh; h++)
          for (int i = 0; i < d / 2; i++) {
            const size_t o = (size_t)((t * nh + h) * d);
            const double a = (double)(pos0 + t % S) * pow(theta, -2.0 * i / d);
            const double x1 = get(x0, dt, o + i),
                         x2 = get(x0, dt, o + i + d / 2);
            maxerr = fmax(
                maxerr, fabs(get(x, dt, o + i) - (x1 * cos(a) - x2 * sin(a))));
            maxerr = fmax(maxerr, fabs(get(x, dt, o + i + d / 2) -
                                       (x1 * sin(a) + x2 * cos(a))));
          }
      const double tol = bf ? 3e-2 : 2e-6;
      ck_assert_msg(maxerr < tol, "rope fwd shape %d %s: max err %.3g", si,
                    pl_dtype_name(dt), maxerr);
      if (!bf) {
        /* adjoint: <R x0, y> == <x0, R^T y> */
        void *y = rnd(dev, dt, n, 99 + si), *y0 = malloc(n * 4);
        memcpy(y0, y, n * 4);
        ck_assert_int_eq(pl_rope_bwd(s, y, dt, B, S, nh, d, pos0, theta),
                         PL_OK);
        double l = 0, r = 0, sc = 0;
        for (size_t i = 0; i < n; i++) {
          l += get(x, dt, i) * get(y0, dt, i);
          r += get(x0, dt, i) * get(y, dt, i);
          sc += fabs(get(x, dt, i) * get(y0, dt, i));
        }
        ck_assert_msg(fabs(l - r) <= 1e-5 * sc + 1e-12, "adjoint: %.9g vs %.9g",
                      l, r);
        /* inverse */
        ck_assert_int_eq(pl_rope_bwd(s, x, dt, B, S, nh, d, pos0, theta),
                         PL_OK);
        for (size_t i = 0; i < n; i++)
          ck_assert_msg(fabs(get(x, dt, i) - get(x0, dt, i)) < 1e-5,
                        "inverse at %zu", i);
        pl_free(dev, y);
        free(y0);
      }
      pl_free(dev, x);
      free(x0);
    }
  ck_assert_int_eq(pl_rope_fwd(s, NULL, PL_F32, 1, 1, 1, 3, 0, theta),
                   PL_EINVAL);
  ck_assert_int_eq(pl_rope_fwd(s, NULL, PL_F32, 1, 1, 1, 4, 0, 0.5), PL_EINVAL);
  pl_dev_destroy(dev);
}
END_TEST

START_TEST(cuda_matches_cpu) {
  pl_dev *c, *g;
  if (!pl_check_cpu_and_gpu(&c, &g))
    return;
  const int64_t B = 2, S = 1000, pos0 = 1 << 19;
  const int nh = 4, d = 128;
  for (int bf = 0; bf < 2; bf++) {
    const pl_dtype dt = bf ? PL_BF16 : PL_F32;
    const size_t n = (size_t)(B * S * nh * d), bytes = n * pl_dtype_size(dt);
    void *xc = rnd(c, dt, n, 5), *xg = rnd(g, dt, n, 5), *h = malloc(bytes);
    for (int inv = 0; inv < 2; inv++) {
      ck_assert_int_eq((inv ? pl_rope_bwd : pl_rope_fwd)(
                           pl_dev_stream(c), xc, dt, B, S, nh, d, pos0, 5e5),
                       PL_OK);
      ck_assert_int_eq((inv ? pl_rope_bwd : pl_rope_fwd)(
                           pl_dev_stream(g), xg, dt, B, S, nh, d, pos0, 5e5),
                       PL_OK);
      ck_assert_int_eq(pl_memcpy_async(pl_dev_stream(g), h, xg, bytes), PL_OK);
      ck_assert_int_eq(pl_stream_sync(pl_dev_stream(g)), PL_OK);
      double m = 0;
      for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(get(h, dt, i) - get(xc, dt, i)));
      printf("# rope cuda vs cpu %s %s: max abs %.3g\n", pl_dtype_name(dt),
             inv ? "bwd" : "fwd", m);
      ck_assert_msg(m < (bf ? 2e-2 : 1e-5), "rope cuda vs cpu: %.3g", m);
    }
    pl_free(c, xc);
    pl_free(g, xg);
    free(h);
  }
  pl_dev_destroy(g);
  pl_dev_destroy(c);
}
END_TEST

int main(void) {
  const TTest *tests[] = {forward_formula_adjoint_inverse, cuda_matches_cpu,
                          NULL};
  return pl_check_suite("rope", 0, tests, NULL, NULL, CK_NOFORK, 0) ? 1 : 0;
}
