/* test_layer_cuda.c — the decoder layer (model/layer.h) on CUDA against the
 * same layer on the CPU backend, bf16, same weights and inputs (the counter
 * RNG gives the same bits on both): forward y and backward dx and the weight
 * gradients within bf16 tolerance (normwise), for GQA 4 at d = 128 and
 * d = 64.  Without a GPU: "skipped: no CUDA device".  No fork (CK_NOFORK). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "core/internal.h"
#include "model/layer.h"
#include "plateau/host_device.h"

static double getv(const void *p, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? ((const float *)p)[i]
                      : pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
}

/* normwise error of a (device, copied to host) against b (CPU) */
static double nerr(pl_stream *gs, const void *a_dev, const void *b, pl_dtype dt,
                   size_t n) {
  const size_t bytes = n * pl_dtype_size(dt);
  void *h = malloc(bytes);
  ck_assert_int_eq(pl_memcpy_async(gs, h, a_dev, bytes), PL_OK);
  ck_assert_int_eq(pl_stream_sync(gs), PL_OK);
  double me = 0, sc = 1e-30;
  for (size_t i = 0; i < n; i++) {
    sc = fmax(sc, fabs(getv(b, dt, i)));
    const double e = fabs(getv(h, dt, i) - getv(b, dt, i));
    me = isnan(e) ? INFINITY : fmax(me, e);
  }
  free(h);
  return me / sc;
}

START_TEST(cuda_layer_matches_cpu) {
  pl_dev *c, *g;
  if (!pl_check_cpu_and_gpu(&c, &g))
    return;
  pl_stream *cs = pl_dev_stream(c), *gs = pl_dev_stream(g);
  static const int dims[2] = {128, 64};
  for (int di = 0; di < 2; di++) {
    const pl_layer_cfg cfg = {.H = 256,
                              .I = 512,
                              .n_q = 8,
                              .n_kv = 2,
                              .d = dims[di],
                              .rope_theta = 10000.0,
                              .dt = PL_BF16};
    const int64_t N = 300, H = cfg.H;
    pl_layer lc, lg;
    ck_assert_int_eq(pl_layer_init(c, NULL, &lc, &cfg, 7, 0), PL_OK);
    ck_assert_int_eq(pl_layer_init(g, NULL, &lg, &cfg, 7, 0), PL_OK);
    void *x[2], *dy[2], *y[2], *dx[2];
    pl_dev *devs[2] = {c, g};
    for (int b = 0; b < 2; b++) {
      pl_stream *s = pl_dev_stream(devs[b]);
      ck_assert_int_eq(
          pl_alloc(devs[b], PL_ARENA_DEVICE, (size_t)(N * H) * 2, "act", &x[b]),
          PL_OK);
      ck_assert_int_eq(pl_alloc(devs[b], PL_ARENA_DEVICE, (size_t)(N * H) * 2,
                                "act", &dy[b]),
                       PL_OK);
      ck_assert_int_eq(
          pl_alloc(devs[b], PL_ARENA_DEVICE, (size_t)(N * H) * 2, "act", &y[b]),
          PL_OK);
      ck_assert_int_eq(pl_alloc(devs[b], PL_ARENA_DEVICE, (size_t)(N * H) * 2,
                                "act", &dx[b]),
                       PL_OK);
      pl_rng_fill(s, x[b], PL_BF16, (size_t)(N * H), 11, 0, PL_DIST_NORMAL, 0.f,
                  1.f);
      pl_rng_fill(s, dy[b], PL_BF16, (size_t)(N * H), 12, 0, PL_DIST_NORMAL,
                  0.f, 1.f);
    }
    ck_assert_int_eq(pl_layer_forward(&lc, cs, x[0], y[0], N), PL_OK);
    ck_assert_int_eq(pl_layer_backward(&lc, cs, x[0], dy[0], dx[0], N), PL_OK);
    pl_status st = pl_layer_forward(&lg, gs, x[1], y[1], N);
    ck_assert_msg(st == PL_OK, "cuda layer fwd: %s", pl_last_error());
    st = pl_layer_backward(&lg, gs, x[1], dy[1], dx[1], N);
    ck_assert_msg(st == PL_OK, "cuda layer bwd: %s", pl_last_error());
    const size_t nqkv = (size_t)(H * (cfg.n_q + 2 * cfg.n_kv) * cfg.d);
    const double ey = nerr(gs, y[1], y[0], PL_BF16, (size_t)(N * H));
    const double ex = nerr(gs, dx[1], dx[0], PL_BF16, (size_t)(N * H));
    const double eq = nerr(gs, lg.g_qkv, lc.g_qkv, PL_F32, nqkv);
    const double eo =
        nerr(gs, lg.g_o, lc.g_o, PL_F32, (size_t)(cfg.n_q * cfg.d * H));
    const double en = nerr(gs, lg.g_n, lc.g_n, PL_F32, (size_t)H);
    printf("# layer cuda vs cpu d=%d: y %.3g dx %.3g g_qkv %.3g g_o %.3g "
           "g_norm %.3g (normwise)\n",
           cfg.d, ey, ex, eq, eo, en);
    fflush(stdout);
    ck_assert_msg(ey < 3e-2 && ex < 5e-2 && eq < 5e-2 && eo < 5e-2 && en < 5e-2,
                  "layer cuda vs cpu beyond bf16 tolerance (d=%d)", cfg.d);
    for (int b = 0; b < 2; b++) {
      pl_free(devs[b], x[b]);
      pl_free(devs[b], dy[b]);
      pl_free(devs[b], y[b]);
      pl_free(devs[b], dx[b]);
    }
    pl_layer_free(&lc);
    pl_layer_free(&lg);
  }
  pl_dev_destroy(g);
  pl_dev_destroy(c);
}
END_TEST

int main(void) {
  const TTest *tests[] = {cuda_layer_matches_cpu, NULL};
  return pl_check_suite("layer_cuda", 300, tests, NULL, NULL, CK_NOFORK, 0) ? 1
                                                                            : 0;
}
