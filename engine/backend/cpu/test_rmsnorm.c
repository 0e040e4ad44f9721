/* test_rmsnorm.c — the CPU backend's RMSNorm (backend/mlp_block_kernels.h, the
 * norm of the dense block and the decoder layer): forward against the formula
 * in double, backward (dx, dw, with and without the residual) against central
 * finite differences in double of L = Σ dn ⊙ rmsnorm(x)·w + Σ dres ⊙ x. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/mlp_block_kernels.h"
#include "core/check_run.h"

static double ref_loss(const double *x, const double *w, const double *dn,
                       const double *dres, int64_t N, int64_t H, double eps) {
  double L = 0;
  for (int64_t r = 0; r < N; r++) {
    double ss = 0;
    for (int64_t j = 0; j < H; j++)
      ss += x[r * H + j] * x[r * H + j];
    const double rstd = 1.0 / sqrt(ss / H + eps);
    for (int64_t j = 0; j < H; j++) {
      L += dn[r * H + j] * x[r * H + j] * rstd * w[j];
      if (dres)
        L += dres[r * H + j] * x[r * H + j];
    }
  }
  return L;
}

START_TEST(fd_gradients) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  pl_stream *s = pl_dev_stream(dev);
  const int64_t N = 7, H = 33;
  const float eps = 1e-5f;
  float *x, *w, *n, *dn, *dres, *dx, *dw, *scr;
  void *p[8];
  const size_t sz[8] = {N * H, H,     N * H, N * H,
                        N * H, N * H, H,     pl__rmsnorm_bwd_scratch(N, H)};
  for (int i = 0; i < 8; i++)
    ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, sz[i] * 4, "act", &p[i]),
                     PL_OK);
  x = p[0], w = p[1], n = p[2], dn = p[3], dres = p[4], dx = p[5], dw = p[6],
  scr = p[7];
  pl_rng_fill(s, x, PL_F32, N * H, 1, 0, PL_DIST_NORMAL, 0.f, 2.f);
  pl_rng_fill(s, w, PL_F32, H, 2, 0, PL_DIST_NORMAL, 1.f, 0.3f);
  pl_rng_fill(s, dn, PL_F32, N * H, 3, 0, PL_DIST_NORMAL, 0.f, 1.f);
  pl_rng_fill(s, dres, PL_F32, N * H, 4, 0, PL_DIST_NORMAL, 0.f, 1.f);
  double *xd = malloc(8 * N * H), *wd = malloc(8 * H), *dnd = malloc(8 * N * H),
         *drd = malloc(8 * N * H);
  for (int64_t i = 0; i < N * H; i++)
    xd[i] = x[i], dnd[i] = dn[i], drd[i] = dres[i];
  for (int64_t i = 0; i < H; i++)
    wd[i] = w[i];
  ck_assert_int_eq(pl__cpu_rmsnorm_fwd(s, x, w, n, N, H, eps, PL_F32), PL_OK);
  for (int64_t r = 0; r < N; r++) {
    double ss = 0;
    for (int64_t j = 0; j < H; j++)
      ss += xd[r * H + j] * xd[r * H + j];
    const double rstd = 1.0 / sqrt(ss / H + eps);
    for (int64_t j = 0; j < H; j++)
      ck_assert_msg(fabs(n[r * H + j] - xd[r * H + j] * rstd * wd[j]) < 1e-5,
                    "fwd %lld", (long long)(r * H + j));
  }
  for (int with_res = 0; with_res < 2; with_res++) {
    pl_fill(s, dw, PL_F32, H, 0.0);
    pl_fill(s, dx, PL_F32, N * H, NAN);
    ck_assert_int_eq(pl__cpu_rmsnorm_bwd(s, x, w, dn, with_res ? dres : NULL,
                                         dx, dw, scr, N, H, eps, PL_F32),
                     PL_OK);
    const double h = 1e-5;
    double me = 0, sc = 1e-30;
    for (int64_t i = 0; i < N * H; i++) {
      const double o = xd[i];
      xd[i] = o + h;
      const double lp = ref_loss(xd, wd, dnd, with_res ? drd : NULL, N, H, eps);
      xd[i] = o - h;
      const double lm = ref_loss(xd, wd, dnd, with_res ? drd : NULL, N, H, eps);
      xd[i] = o;
      const double fd = (lp - lm) / (2 * h);
      me = fmax(me, fabs(fd - dx[i]));
      sc = fmax(sc, fabs(fd));
    }
    ck_assert_msg(me / sc < 1e-4, "dx vs FD normwise %.3g (res %d)", me / sc,
                  with_res);
    me = 0, sc = 1e-30;
    for (int64_t i = 0; i < H; i++) {
      const double o = wd[i];
      wd[i] = o + h;
      const double lp = ref_loss(xd, wd, dnd, NULL, N, H, eps);
      wd[i] = o - h;
      const double lm = ref_loss(xd, wd, dnd, NULL, N, H, eps);
      wd[i] = o;
      const double fd = (lp - lm) / (2 * h);
      me = fmax(me, fabs(fd - dw[i]));
      sc = fmax(sc, fabs(fd));
    }
    ck_assert_msg(me / sc < 1e-4, "dw vs FD normwise %.3g", me / sc);
  }
  free(xd), free(wd), free(dnd), free(drd);
  for (int i = 0; i < 8; i++)
    pl_free(dev, p[i]);
  pl_dev_destroy(dev);
}
END_TEST

int main(void) {
  const TTest *tests[] = {fd_gradients, NULL};
  return pl_check_suite("rmsnorm", 0, tests, NULL, NULL, CK_FORK_GETENV, 0) ? 1
                                                                            : 0;
}
