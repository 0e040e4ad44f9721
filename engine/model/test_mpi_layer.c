/* test_mpi_layer.c — the decoder layer (model/layer.h) on the CPU backend under
 * mpirun -np 1..4: (1) directional finite differences in f32 of
 * L = Σ y ⊙ g against the analytic backward (dx, and the gradients of W_qkv,
 * W_o and the norm weight) on one rank; (2) with a Ulysses group of D = all
 * ranks (each holding N tokens), forward rows and dx equal the single-rank
 * layer on the whole sequence, and the weight gradients summed over ranks
 * equal its gradients (f32, tolerance for GEMM order), also past D = n_kv
 * (one key/value head replicated to every rank); (3) heads that do not
 * divide by D are refused (np = 3).  (Layers inside the checkpoint runner:
 * engine/train/test_ckpt_layer.c.) */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "core/internal.h"
#include "model/layer.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

static const pl_layer_cfg CFG = {.H = 32,
                                 .I = 48,
                                 .n_q = 8,
                                 .n_kv = 4,
                                 .d = 8,
                                 .rope_theta = 10000.0,
                                 .dt = PL_F32};

static float *F(size_t n) {
  void *p = NULL;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, n * 4 + 4, "act", &p), PL_OK);
  return p;
}

static double loss(pl_layer *l, const float *x, const float *g, float *y,
                   int64_t N) {
  ck_assert_int_eq(pl_layer_forward(l, pl_dev_stream(dev), x, y, N), PL_OK);
  double L = 0;
  for (int64_t i = 0; i < N * l->cfg.H; i++)
    L += (double)y[i] * g[i];
  return L;
}

/* directional derivative of L along u at the parameter array p (n floats) */
static void dir_check(pl_layer *l, float *p, const float *grad, size_t n,
                      const float *x, const float *g, float *y, int64_t N,
                      uint64_t seed, const char *what) {
  float *u = F(n), *p0 = F(n);
  pl_rng_fill(pl_dev_stream(dev), u, PL_F32, n, seed, 0, PL_DIST_NORMAL, 0.f,
              1.f);
  memcpy(p0, p, n * 4);
  double an = 0;
  for (size_t i = 0; i < n; i++)
    an += (double)grad[i] * u[i];
  const double eps = 1e-2;
  for (size_t i = 0; i < n; i++)
    p[i] = p0[i] + (float)eps * u[i];
  const double lp = loss(l, x, g, y, N);
  for (size_t i = 0; i < n; i++)
    p[i] = p0[i] - (float)eps * u[i];
  const double lm = loss(l, x, g, y, N);
  memcpy(p, p0, n * 4);
  const double fd = (lp - lm) / (2 * eps);
  ck_assert_msg(fabs(fd - an) <= 2e-2 * fabs(an) + 1e-3,
                "%s: FD %.6g vs analytic %.6g", what, fd, an);
  pl_free(dev, u);
  pl_free(dev, p0);
}

START_TEST(fd_directional) {
  if (rank != 0)
    return;
  pl_stream *s = pl_dev_stream(dev);
  pl_layer l;
  ck_assert_int_eq(pl_layer_init(dev, NULL, &l, &CFG, 5, 0), PL_OK);
  const int64_t N = 23, H = CFG.H;
  float *x = F(N * H), *g = F(N * H), *y = F(N * H), *dx = F(N * H);
  pl_rng_fill(s, x, PL_F32, N * H, 1, 0, PL_DIST_NORMAL, 0.f, 1.f);
  pl_rng_fill(s, g, PL_F32, N * H, 2, 0, PL_DIST_NORMAL, 0.f, 1.f);
  ck_assert_int_eq(pl_layer_backward(&l, s, x, g, dx, N), PL_OK);
  dir_check(&l, x, dx, (size_t)(N * H), x, g, y, N, 10, "dx");
  const size_t nqkv = (size_t)(H * (CFG.n_q + 2 * CFG.n_kv) * CFG.d);
  dir_check(&l, l.w_qkv, l.g_qkv, nqkv, x, g, y, N, 11, "W_qkv");
  dir_check(&l, l.w_o, l.g_o, (size_t)(CFG.n_q * CFG.d * H), x, g, y, N, 12,
            "W_o");
  dir_check(&l, l.w_n, l.g_n, (size_t)H, x, g, y, N, 13, "w_norm");
  pl_free(dev, x), pl_free(dev, g), pl_free(dev, y), pl_free(dev, dx);
  pl_layer_free(&l);
}
END_TEST

static void expect_close(const float *a, const float *b, size_t n, double tol,
                         const char *what) {
  double me = 0, sc = 1e-30;
  long bad = -1;
  for (size_t i = 0; i < n; i++)
    sc = fmax(sc, fabs(b[i]));
  for (size_t i = 0; i < n; i++) {
    const double e = fabs((double)a[i] - b[i]);
    if (!(e <= tol * sc) && bad < 0)
      bad = (long)i;
    me = fmax(me, e);
  }
  ck_assert_msg(bad < 0, "%s (D=%d): max abs %.3g normwise %.3g, first bad %ld",
                what, size, me, me / sc, bad);
}

static void layer_case(const pl_layer_cfg *cfg) {
  const pl_layer_cfg CFG = *cfg;
  pl_stream *s = pl_dev_stream(dev);
  pl_layer ls;
  const int64_t Nl = 13, N = Nl * size, H = CFG.H;
  pl_layer lf;
  ck_assert_int_eq(pl_layer_init(dev, NULL, &lf, &CFG, 5, 0), PL_OK);
  ck_assert_int_eq(pl_layer_init(dev, world, &ls, &CFG, 5, 0), PL_OK);
  float *x = F(N * H), *g = F(N * H), *y = F(N * H), *dx = F(N * H);
  float *yl = F(Nl * H), *dxl = F(Nl * H);
  pl_rng_fill(s, x, PL_F32, N * H, 1, 0, PL_DIST_NORMAL, 0.f, 1.f);
  pl_rng_fill(s, g, PL_F32, N * H, 2, 0, PL_DIST_NORMAL, 0.f, 1.f);
  ck_assert_int_eq(pl_layer_forward(&lf, s, x, y, N), PL_OK);
  ck_assert_int_eq(pl_layer_backward(&lf, s, x, g, dx, N), PL_OK);
  const float *xl = x + rank * Nl * H, *gl = g + rank * Nl * H;
  ck_assert_int_eq(pl_layer_forward(&ls, s, xl, yl, Nl), PL_OK);
  ck_assert_int_eq(pl_layer_backward(&ls, s, xl, gl, dxl, Nl), PL_OK);
  expect_close(yl, y + rank * Nl * H, (size_t)(Nl * H), 1e-5, "y");
  expect_close(dxl, dx + rank * Nl * H, (size_t)(Nl * H), 1e-4, "dx");
  const size_t nqkv = (size_t)(H * (CFG.n_q + 2 * CFG.n_kv) * CFG.d);
  float *gs[3] = {ls.g_qkv, ls.g_o, ls.g_n},
        *gf[3] = {lf.g_qkv, lf.g_o, lf.g_n};
  const size_t gn[3] = {nqkv, (size_t)(CFG.n_q * CFG.d * H), (size_t)H};
  const char *nm[3] = {"g_qkv", "g_o", "g_norm"};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(
        pl_allreduce(world, gs[i], gs[i], gn[i], PL_F32, PL_RED_SUM, s), PL_OK);
    expect_close(gs[i], gf[i], gn[i], 1e-4, nm[i]);
  }
  ck_assert_int_eq(pl_allreduce(world, ls.mlp.g_up, ls.mlp.g_up,
                                (size_t)(H * 2 * CFG.I), PL_F32, PL_RED_SUM, s),
                   PL_OK);
  expect_close(ls.mlp.g_up, lf.mlp.g_up, (size_t)(H * 2 * CFG.I), 1e-4,
               "mlp g_up");
  pl_free(dev, x), pl_free(dev, g), pl_free(dev, y), pl_free(dev, dx),
      pl_free(dev, yl), pl_free(dev, dxl);
  pl_layer_free(&lf);
  pl_layer_free(&ls);
}

START_TEST(ulysses_layer_equals_single_rank) {
  pl_layer ls;
  if (CFG.n_q % size) {
    ck_assert_int_eq(pl_layer_init(dev, world, &ls, &CFG, 5, 0), PL_EINVAL);
    ck_assert_ptr_nonnull(strstr(pl_last_error(), "divide"));
    return;
  }
  layer_case(&CFG);
  if (size > 1) { /* one key/value head on every rank of the group */
    pl_layer_cfg rep = CFG;
    rep.n_kv = 1;
    layer_case(&rep);
  }
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "layer", &dev, &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {fd_directional, ulysses_layer_equals_single_rank,
                          NULL};
  return pl_check_world_close(dev, world,
                              pl_check_run("layer", 300, tests, rank, world));
}
