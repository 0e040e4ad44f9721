/* test_ckpt_head.c — the checkpoint runner with a head (train/ckpt.h,
 * pl_ckpt_step_head), CPU backend: a head computing loss = Σ h_L ⊙ g and
 * dL/dh_L = g gives the same loss, input gradient and weight gradients, bit
 * for bit, as pl_ckpt_step with g (f32 and bf16, SCO budget 0 and all, L = 1
 * and 3); the head sees the last layer's output; with profiling on, SCO's
 * copies are timed (>= 0, zero without SCO); a failing head fails the step. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "model/mlp_block.h"
#include "train/ckpt.h"

static pl_dev *dev;
enum { H = 16, I = 24 };

typedef struct dot_head {
  const void *g;
  pl_dtype dt;
  int calls;
  int fail;
} dot_head;

static pl_status dot_run(void *ctx, pl_stream *s, const void *hL, void *dh,
                         int64_t N, double *loss) {
  dot_head *d = ctx;
  d->calls++;
  if (d->fail)
    return pl_set_error(PL_ERUNTIME, "head failed on purpose");
  float *l = NULL;
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, 4, "test", (void **)&l));
  PL_TRY(pl_gemm(s, false, false, 1, 1, N * H, 1.0f, hL, N * H, d->g, 1, 0.0f,
                 l, 1, d->dt, PL_F32));
  *loss = *l;
  pl_free(dev, l);
  return pl_memcpy_async(s, dh, d->g, (size_t)(N * H) * pl_dtype_size(d->dt));
}

static void run(int L, pl_dtype dt, const char *budget) {
  pl_stream *s = pl_dev_stream(dev);
  const int64_t N = 13;
  const size_t bytes = (size_t)N * H * pl_dtype_size(dt);
  pl_mlp_block b[2][3];
  void *layers[2][3];
  for (int v = 0; v < 2; v++)
    for (int l = 0; l < L; l++) {
      ck_assert_int_eq(pl_mlp_block_init(dev, &b[v][l], H, I, dt, 7, l), PL_OK);
      layers[v][l] = &b[v][l];
    }
  void *x0, *g, *dx[2];
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes, "test", &x0), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes, "test", &g), PL_OK);
  for (int v = 0; v < 2; v++)
    ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes, "test", &dx[v]),
                     PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, x0, dt, N * H, 1, 0, PL_DIST_NORMAL, 0, 1),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, g, dt, N * H, 2, 0, PL_DIST_NORMAL, 0, 1),
                   PL_OK);
  pl_sco_budget sb = {.all = strcmp(budget, "all") == 0, .bytes = 0};
  double loss[2];
  dot_head dh = {g, dt, 0, 0};
  for (int v = 0; v < 2; v++) {
    pl_ckpt_stack *st;
    pl_sco *sco;
    ck_assert_int_eq(
        pl_ckpt_create(dev, L, layers[v], &pl_mlp_block_layer_ops, H, dt, &st),
        PL_OK);
    ck_assert_int_eq(
        pl_sco_create(dev, NULL, L, N, H, dt, sb, PL_SCO_RELEASE_CONTEXT, &sco),
        PL_OK);
    pl_ckpt_set_profile(st, true);
    if (v == 0) {
      ck_assert_int_eq(pl_ckpt_step(st, sco, x0, g, dx[v], N, &loss[v]), PL_OK);
    } else {
      pl_ckpt_head head = {dot_run, &dh};
      ck_assert_int_eq(
          pl_ckpt_step_head(st, sco, x0, &head, dx[v], N, &loss[v]), PL_OK);
      ck_assert_int_eq(dh.calls, 1);
      dh.fail = 1;
      ck_assert_int_eq(
          pl_ckpt_step_head(st, sco, x0, &head, dx[v], N, &loss[v]),
          PL_ERUNTIME);
      dh.fail = 0;
      ck_assert_int_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "boundary"), 0);
      ck_assert_int_eq(pl_mlp_block_zero_grad(&b[v][0], s), PL_OK);
      for (int l = 1; l < L; l++)
        ck_assert_int_eq(pl_mlp_block_zero_grad(&b[v][l], s), PL_OK);
      ck_assert_int_eq(
          pl_ckpt_step_head(st, sco, x0, &head, dx[v], N, &loss[v]), PL_OK);
    }
    double d2h, h2d;
    pl_ckpt_copy_ms(st, &d2h, &h2d);
    ck_assert(d2h >= 0 && h2d >= 0);
    if (pl_sco_count(sco) == 0)
      ck_assert(d2h == 0 && h2d == 0);
    pl_sco_destroy(sco);
    pl_ckpt_destroy(st);
  }
  ck_assert_msg(loss[0] == loss[1], "loss %.9g vs head %.9g", loss[0], loss[1]);
  ck_assert(memcmp(dx[0], dx[1], bytes) == 0);
  for (int l = 0; l < L; l++) {
    ck_assert(memcmp(b[0][l].g_up, b[1][l].g_up, (size_t)H * 2 * I * 4) == 0);
    ck_assert(memcmp(b[0][l].g_norm, b[1][l].g_norm, (size_t)H * 4) == 0);
  }
  for (int v = 0; v < 2; v++) {
    for (int l = 0; l < L; l++)
      pl_mlp_block_free(&b[v][l]);
    pl_free(dev, dx[v]);
  }
  pl_free(dev, x0);
  pl_free(dev, g);
}

START_TEST(head_equals_dot) {
  const pl_dtype dts[2] = {PL_F32, PL_BF16};
  const char *budgets[2] = {"0", "all"};
  const int Ls[2] = {1, 3};
  for (int a = 0; a < 2; a++)
    for (int c = 0; c < 2; c++)
      for (int l = 0; l < 2; l++)
        run(Ls[l], dts[a], budgets[c]);
}
END_TEST

int main(void) {
  if (pl_dev_create(PL_BACKEND_CPU, 0, &dev) != PL_OK)
    return 3;
  const TTest *tests[] = {head_equals_dot, NULL};
  int nf = pl_check_suite("ckpt_head", 60, tests, NULL, NULL, CK_NOFORK, 0);
  pl_dev_destroy(dev);
  return nf ? 1 : 0;
}
