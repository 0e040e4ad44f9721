/* test_mpi_headroom.c — the headroom knobs of the training step (train/step.h)
 * change no bit: optimizer-state residency (none, half, all of the rank's
 * fp32 master, m and v in device memory) and kept activations (none, every
 * layer's attention output and log-sum-exp, every layer's whole attention
 * half, a budget of one or two layers' attention, with SCO restoring the
 * boundaries the kept layers meet again) give the same losses, the same
 * gradients of every parameter and the same weights over 3 steps as the
 * all-streamed, all-recomputed step; gradient-norm clipping over all ranks
 * included (the clip is active at these sizes).  CPU backend, f32 (the
 * weights then equal the fp32 master bit for bit) and bf16, mpirun -np 1 and
 * 2 (at 3 and 4 ranks it says skipped: the layouts are those of 2 ranks, at
 * CPU cost): every layout the world allows (D = 1; D = 2 with Ulysses; P over
 * the ranks with Ring-DTP).  The kept runs assert on the path itself that each
 * kept activation equals its recompute (keep_verify). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "model/layer.h"
#include "train/headroom_testlib.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

static const hr_variant variants[] = {
    {"all streamed, nothing kept", 0, {PL_KEEP_BYTES, 0}, false},
    {"the same again (reproducible)", 0, {PL_KEEP_BYTES, 0}, false},
    {"optimizer state half resident", 1, {PL_KEEP_BYTES, 0}, false},
    {"optimizer state all resident", 2, {PL_KEEP_BYTES, 0}, false},
    {"keep attention (o, lse)", 0, {PL_KEEP_ATTN, 0}, false},
    {"keep whole attention halves", 0, {PL_KEEP_ALL, 0}, false},
    {"keep 20 KiB budget + half + sco all", 1, {PL_KEEP_BYTES, 20480}, true},
    {"keep all + all resident + sco all", 2, {PL_KEEP_ALL, 0}, true},
};
#define NV ((int)(sizeof variants / sizeof variants[0]))

static pl_model_cfg model(void) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.E = 12; /* divisible by 1..4 ranks */
  return m;
}

static pl_step_cfg step_cfg(pl_dtype dt) {
  pl_step_cfg sc = pl_step_cfg_default();
  sc.dt = dt;
  sc.moe_lanes = 0;
  sc.moe_c = 32; /* two chunks */
  sc.hp.lr = 3e-3;
  sc.oo.bucket = 8192; /* several buckets of the tiny model's shard */
  return sc;
}

static void layouts(pl_dtype dt) {
  const pl_model_cfg m = model();
  const pl_step_cfg sc = step_cfg(dt);
  const pl_layout_cfg lcs[3] = {
      {1, size, 0, 0, 0}, {2, 1, 0, 0, 0}, {1, 1, 0, 0, 0}};
  const char *names[3] = {"D=1, P=W (ring)", "D=2 (Ulysses), P=1", "D=1 P=1"};
  for (int i = 0; i < 3; i++) {
    if ((i == 1 && size % 2) || (i == 0 && size == 1))
      continue;
    pl_step_cfg c = sc;
    c.head = lcs[i].P > 1 ? &pl_head_ring : &pl_head_fused;
    char what[64];
    snprintf(what, sizeof what, "%s %s, %d rank(s)", pl_dtype_name(dt),
             names[i], size);
    const int clipped =
        hr_check(dev, world, &m, &lcs[i], 64, &c, variants, NV, 3, what);
    ck_assert_msg(clipped > 0,
                  "%s: the gradient norm was never clipped: the "
                  "test would not cover the clip",
                  what);
  }
}

START_TEST(f32_bit_identical) {
  layouts(PL_F32);
}
END_TEST

START_TEST(bf16_bit_identical) {
  layouts(PL_BF16);
}
END_TEST

/* The check can fail: a learning rate 1 float ulp larger changes the
 * weights. */
START_TEST(check_detects_a_change) {
  const pl_model_cfg m = model();
  pl_step_cfg sc = step_cfg(PL_F32);
  const pl_layout_cfg lc = {1, 1, 0, 0, 0};
  hr_run r[2];
  pl_trainer *t[2];
  for (int k = 0; k < 2; k++) {
    if (k)
      sc.hp.lr = nextafterf((float)sc.hp.lr, 1.0f);
    ck_assert_int_eq(pl_trainer_create(dev, world, &m, &lc, 64, &sc, &t[k]),
                     PL_OK);
    hr_record(t[k], &m, 2, &r[k]);
  }
  char msg[200];
  hr_diff(&r[0], &r[1], t[0], msg, sizeof msg);
  ck_assert_msg(msg[0], "a changed learning rate went unnoticed");
  for (int k = 0; k < 2; k++) {
    hr_run_free(&r[k]);
    pl_trainer_destroy(t[k]);
  }
}
END_TEST

/* The plans of the budget: the attention of layer 0 up, then whole layers;
 * ATTN and ALL every layer. */
START_TEST(keep_plan) {
  const pl_model_cfg m = model();
  const pl_layer_cfg lc = {
      .H = m.H, .n_q = m.n_q, .n_kv = m.n_kv, .d = m.d, .dt = PL_BF16};
  const size_t a = pl_layer_kept_bytes(&lc, 64, 1, PL_LAYER_KEEP_ATTN),
               w = pl_layer_kept_bytes(&lc, 64, 1, PL_LAYER_KEEP_ALL);
  ck_assert_uint_eq(a, (size_t)64 * m.n_q * m.d * 2 + (size_t)64 * m.n_q * 4);
  ck_assert_uint_eq(w - a, (size_t)64 *
                               (2 * (size_t)m.H + (size_t)m.n_q * m.d +
                                2 * (size_t)m.n_kv * m.d) *
                               2);
  int na, nw;
  pl_step_keep_layers(&m, 64, 1, PL_BF16,
                      (pl_keep_budget){PL_KEEP_BYTES, a - 1}, &na, &nw);
  ck_assert_int_eq(na, 0);
  pl_step_keep_layers(&m, 64, 1, PL_BF16,
                      (pl_keep_budget){PL_KEEP_BYTES, 2 * a + 7}, &na, &nw);
  ck_assert_int_eq(na, 2);
  ck_assert_int_eq(nw, 0);
  pl_step_keep_layers(&m, 64, 1, PL_BF16,
                      (pl_keep_budget){PL_KEEP_BYTES, m.L * a + (w - a)}, &na,
                      &nw);
  ck_assert_int_eq(na, m.L);
  ck_assert_int_eq(nw, 1);
  ck_assert_uint_eq(pl_step_keep_bytes(&m, 64, 1, PL_BF16, na, nw),
                    (size_t)m.L * a + (w - a));
  pl_step_keep_layers(&m, 64, 1, PL_BF16, (pl_keep_budget){PL_KEEP_ATTN, 0},
                      &na, &nw);
  ck_assert_int_eq(na, m.L);
  ck_assert_int_eq(nw, 0);
  pl_step_keep_layers(&m, 64, 1, PL_BF16, (pl_keep_budget){PL_KEEP_ALL, 0}, &na,
                      &nw);
  ck_assert_int_eq(na, m.L);
  ck_assert_int_eq(nw, m.L);
}
END_TEST

/* The state's bytes where the description says: 12 B per resident
 * parameter on the device (tag optim_resident), the rest pinned (tag
 * optim), whole buckets from the end; the hybrid too. */
START_TEST(resident_bytes_as_described) {
  const pl_model_cfg m = model();
  pl_step_cfg sc = step_cfg(PL_F32);
  sc.optim = &pl_optim_hybrid;
  sc.oo.share = 0.5;
  const pl_layout_cfg lc = {1, 1, 0, 0, 0};
  pl_train_desc *d = malloc(sizeof *d);
  ck_assert_int_eq(
      pl_train_describe(&m, &lc, size, rank, 64, &sc, PL_BACKEND_CPU, d),
      PL_OK);
  sc.oo.resident_bytes = (uint64_t)d->params_rank * 12 / 3;
  ck_assert_int_eq(
      pl_train_describe(&m, &lc, size, rank, 64, &sc, PL_BACKEND_CPU, d),
      PL_OK);
  const size_t R = (size_t)d->resident_params, theta = (size_t)d->params_rank;
  ck_assert_uint_eq((theta - R) % sc.oo.bucket, 0);
  ck_assert(R > 0 && R * 12 <= sc.oo.resident_bytes &&
            (R + sc.oo.bucket) * 12 > sc.oo.resident_bytes);
  pl_trainer *t = NULL;
  ck_assert_int_eq(pl_trainer_create(dev, world, &m, &lc, 64, &sc, &t), PL_OK);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "optim_resident"),
                    R * 12);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim"),
                    (theta - R) * 12);
  ck_assert_uint_eq(pl_train_desc_state(d, "optim_resident", PL_ARENA_DEVICE),
                    R * 12);
  pl_trainer_destroy(t);
  free(d);
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "headroom", &dev, &world, &rank, &size);
  if (e)
    return e;
  if (size > 2) {
    if (rank == 0)
      printf("skipped: the headroom knobs are checked on 1 and 2 ranks\n");
    return pl_check_world_close(dev, world, 0);
  }
  const TTest *tests[] = {f32_bit_identical,           bf16_bit_identical,
                          check_detects_a_change,      keep_plan,
                          resident_bytes_as_described, NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("headroom", 600, tests, rank, world));
}
