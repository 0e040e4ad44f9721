/* test_ckpt_layer.c — the decoder layer (model/layer.h) as a layer of the
 * checkpoint runner (pl_decoder_layer_ops, train/ckpt.h) on the CPU backend:
 * the runner's step equals the layers chained by hand, bit for bit. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/check_run.h"
#include "model/layer.h"
#include "train/ckpt.h"

static pl_dev *dev;

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

/* Two decoder layers in the checkpoint runner give the
 * same dx0 and weight gradients, bit for bit, as the layers chained by hand
 * (forward, then backward recomputing from each layer's input). */
START_TEST(in_checkpoint_runner) {
  pl_stream *s = pl_dev_stream(dev);
  const int64_t N = 19, H = CFG.H;
  pl_layer l[2];
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(pl_layer_init(dev, NULL, &l[i], &CFG, 9, i), PL_OK);
  void *const layers[2] = {&l[0], &l[1]};
  pl_ckpt_stack *st;
  ck_assert_int_eq(
      pl_ckpt_create(dev, 2, layers, &pl_decoder_layer_ops, H, PL_F32, &st),
      PL_OK);
  float *x = F(N * H), *g = F(N * H), *dx = F(N * H), *h1 = F(N * H),
        *h2 = F(N * H);
  float *dh1 = F(N * H), *dxm = F(N * H);
  pl_rng_fill(s, x, PL_F32, N * H, 3, 0, PL_DIST_NORMAL, 0.f, 1.f);
  pl_rng_fill(s, g, PL_F32, N * H, 4, 0, PL_DIST_NORMAL, 0.f, 1.f);
  double loss = 0;
  ck_assert_int_eq(pl_ckpt_step(st, NULL, x, g, dx, N, &loss), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  const size_t nqkv = (size_t)(H * (CFG.n_q + 2 * CFG.n_kv) * CFG.d);
  float *gq[2];
  for (int i = 0; i < 2; i++) {
    gq[i] = F(nqkv);
    memcpy(gq[i], l[i].g_qkv, nqkv * 4);
    ck_assert_int_eq(pl_layer_zero_grad(&l[i], s), PL_OK);
  }
  ck_assert_int_eq(pl_layer_forward(&l[0], s, x, h1, N), PL_OK);
  ck_assert_int_eq(pl_layer_forward(&l[1], s, h1, h2, N), PL_OK);
  double lm = 0;
  for (int64_t i = 0; i < N * H; i++)
    lm += (double)h2[i] * g[i];
  ck_assert_msg(fabs(lm - loss) <= 1e-5 * fabs(lm) + 1e-6,
                "loss %.9g vs by hand %.9g", loss, lm);
  ck_assert_int_eq(pl_layer_backward(&l[1], s, h1, g, dh1, N), PL_OK);
  ck_assert_int_eq(pl_layer_backward(&l[0], s, x, dh1, dxm, N), PL_OK);
  ck_assert_msg(memcmp(dx, dxm, (size_t)(N * H) * 4) == 0,
                "dx0 differs from the hand chain");
  for (int i = 0; i < 2; i++)
    ck_assert_msg(memcmp(gq[i], l[i].g_qkv, nqkv * 4) == 0,
                  "layer %d g_qkv differs", i);
  pl_ckpt_destroy(st);
  void *ps[] = {x, g, dx, h1, h2, dh1, dxm, gq[0], gq[1]};
  for (int i = 0; i < 9; i++)
    pl_free(dev, ps[i]);
  for (int i = 0; i < 2; i++)
    pl_layer_free(&l[i]);
}
END_TEST

static void setup(void) {
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
}
static void teardown(void) {
  pl_dev_destroy(dev);
}

int main(void) {
  const TTest *tests[] = {in_checkpoint_runner, NULL};
  return pl_check_suite("ckpt_layer", 300, tests, setup, teardown,
                        CK_FORK_GETENV, 0)
             ? 1
             : 0;
}
