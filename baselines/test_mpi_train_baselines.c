/* test_mpi_train_baselines.c — the baselines in the training step
 * (train_baselines.h), CPU backend, f32, under mpirun -np 1..4: the dense
 * head gives the fused head's loss and gradients (P = 1), the
 * vocabulary-parallel head Ring-DTP's (P = W), within f32 tolerance, every
 * parameter's gradient gathered to the full tensor; the dense head's logits
 * are its N×V tensors (tracked "logits" peak >= 3·N·V·4, Ring-DTP's strip far
 * below); the classic offloaded CPU AdamW gives OffloadStreamAdamW's loss
 * curve over 5 steps bit for bit; the names parse. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "train/data.h"
#include "train/step.h"
#include "train_baselines.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

typedef struct run_out {
  double loss[5];
  float **grads;
  int64_t *numel;
  int np;
  size_t logits_peak;
} run_out;

static run_out run(const pl_step_cfg *sc, const pl_layout_cfg *lc, int steps,
                   int grads) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.E = 12;
  m.V = 301; /* not divisible by 2, 3, 4 */
  const int64_t S = 16;
  pl_trainer *t;
  ck_assert_msg(pl_trainer_create(dev, world, &m, lc, S, sc, &t) == PL_OK, "%s",
                pl_last_error());
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(m.V, 3, &d), PL_OK);
  int32_t *tok = malloc((size_t)pl_trainer_tokens_per_rank(t) * 4);
  run_out o;
  memset(&o, 0, sizeof o);
  for (int s = 0; s < steps; s++) {
    ck_assert_int_eq(pl_data_batch(d, pl_trainer_plan(t), sc->micro, s, tok),
                     PL_OK);
    pl_step_result r;
    if (grads) {
      ck_assert_msg(pl_trainer_forward_backward(t, tok, &r) == PL_OK, "%s",
                    pl_last_error());
      for (int i = 0; i < r.dev.n_tags; i++)
        if (!strcmp(r.dev.tag_peak[i].tag, "logits"))
          o.logits_peak = r.dev.tag_peak[i].bytes;
    } else {
      ck_assert_msg(pl_trainer_step(t, tok, &r) == PL_OK, "%s",
                    pl_last_error());
    }
    o.loss[s] = r.loss;
  }
  if (grads) {
    o.np = pl_trainer_nparams(t);
    o.grads = calloc((size_t)o.np, sizeof(float *));
    o.numel = calloc((size_t)o.np, sizeof(int64_t));
    for (int i = 0; i < o.np; i++) {
      pl_param_info in;
      ck_assert_int_eq(pl_trainer_param_info(t, i, &in), PL_OK);
      o.numel[i] = in.rows * in.cols;
      o.grads[i] = malloc((size_t)(in.rows * in.cols) * 4);
      ck_assert_int_eq(pl_trainer_gather(t, i, true, o.grads[i]), PL_OK);
    }
  }
  free(tok);
  pl_data_close(d);
  pl_trainer_destroy(t);
  return o;
}

static void same_grads(run_out *a, run_out *b, const char *what) {
  ck_assert_int_eq(a->np, b->np);
  ck_assert_msg(fabs(a->loss[0] - b->loss[0]) <= 1e-5 * fabs(b->loss[0]),
                "%s: loss %.8g vs %.8g", what, a->loss[0], b->loss[0]);
  const int64_t *sz = a->numel;
  for (int i = 0; i < a->np; i++) {
    double sc = 1e-30, me = 0;
    for (int64_t j = 0; j < sz[i]; j++) {
      sc = fmax(sc, fabs(b->grads[i][j]));
      me = fmax(me, fabs((double)a->grads[i][j] - b->grads[i][j]));
    }
    ck_assert_msg(me <= 1e-4 * sc, "%s: parameter %d differs (%.3g of %.3g)",
                  what, i, me, sc);
  }
  for (int i = 0; i < a->np; i++)
    free(a->grads[i]), free(b->grads[i]);
  free(a->grads), free(b->grads), free(a->numel), free(b->numel);
}

static pl_step_cfg f32(void) {
  pl_step_cfg c = pl_step_cfg_default();
  c.dt = PL_F32;
  c.moe_lanes = 0;
  c.hp.lr = 3e-3;
  return c;
}

START_TEST(dense_equals_fused) {
  pl_step_cfg a = f32(), b = f32();
  a.head = &pl_head_dense, b.head = &pl_head_fused;
  pl_layout_cfg lc = {1, 1, 0, 0, 0};
  run_out ra = run(&a, &lc, 1, 1), rb = run(&b, &lc, 1, 1);
  ck_assert_msg(ra.logits_peak >= 3 * 16 * 301 * 4, "dense logits peak %zu",
                ra.logits_peak);
  ck_assert_msg(rb.logits_peak < ra.logits_peak, "fused strip %zu vs dense %zu",
                rb.logits_peak, ra.logits_peak);
  same_grads(&ra, &rb, "dense vs fused");
}
END_TEST

START_TEST(vp_equals_ring) {
  pl_step_cfg a = f32(), b = f32();
  a.head = &pl_head_vp, b.head = &pl_head_ring;
  pl_layout_cfg lc = {1, size, 0, 0, 0};
  run_out ra = run(&a, &lc, 1, 1), rb = run(&b, &lc, 1, 1);
  same_grads(&ra, &rb, "vp vs ring");
}
END_TEST

START_TEST(cpu_equals_stream) {
  pl_step_cfg a = f32(), b = f32();
  a.optim = &pl_optim_cpu, b.optim = &pl_optim_stream;
  pl_layout_cfg lc = {1, size, 0, 0, 0};
  run_out ra = run(&a, &lc, 5, 0), rb = run(&b, &lc, 5, 0);
  for (int s = 0; s < 5; s++)
    ck_assert_msg(ra.loss[s] == rb.loss[s], "step %d: cpu %.9g vs stream %.9g",
                  s + 1, ra.loss[s], rb.loss[s]);
}
END_TEST

START_TEST(names) {
  const pl_head_ops *h;
  const pl_optim_ops *o;
  const char *hs[4] = {"ring", "fused", "dense", "vp"};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(pl_train_head_parse(hs[i], &h), PL_OK);
    ck_assert_str_eq(h->name, hs[i]);
  }
  const char *os[3] = {"stream", "hybrid", "cpu"};
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(pl_train_optim_parse(os[i], &o), PL_OK);
    ck_assert_str_eq(o->name, os[i]);
  }
  /* the tables: a name list entry is its ops' own name */
  for (int i = 0; pl_train_heads[i] || pl_train_head_names[i]; i++)
    ck_assert_ptr_eq(pl_train_heads[i] ? pl_train_heads[i]->name : NULL,
                     pl_train_head_names[i]);
  for (int i = 0; pl_train_optims[i] || pl_train_optim_names[i]; i++)
    ck_assert_ptr_eq(pl_train_optims[i] ? pl_train_optims[i]->name : NULL,
                     pl_train_optim_names[i]);
  ck_assert_int_eq(pl_train_head_parse("sparse", &h), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "dense"));
  ck_assert_int_eq(pl_train_optim_parse("sgd", &o), PL_EINVAL);
}
END_TEST

int main(int argc, char **argv) {
  const int e = pl_check_world_open(&argc, &argv, "train baselines", &dev,
                                    &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {dense_equals_fused, vp_equals_ring, cpu_equals_stream,
                          names, NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("train_baselines", 300, tests, rank, world));
}
