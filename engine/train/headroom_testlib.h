/* headroom_testlib.h — the bit-identity check of the headroom knobs, shared
 * by the CPU test (test_mpi_headroom.c) and the CUDA one
 * (test_mpi_step_cuda.c): a trainer at the base configuration runs `steps`
 * training steps, keeping every step's loss and every parameter's gradient
 * gathered to the full tensor, and its weights after the last step; each
 * variant (optimizer state resident in device memory: half, all; kept
 * activations: attention, whole layers, a budget; with SCO) runs the same
 * steps on the same weights and tokens and must give the same bits — the
 * knobs change where a value lives or whether it is recomputed, never an
 * operation.  The kept runs set keep_verify: every kept activation is also
 * recomputed and compared bit for bit (the forward's determinism asserted on
 * the path itself).  Bit-identity needs a step that is itself reproducible
 * run to run: on CUDA the default attention backward (dQ by bulk fp32
 * reductions) and the embedding's backward (an atomicAdd per token row) add
 * in a run-dependent order, so the CUDA test picks the atomic-free attention
 * backward and tokens that never repeat within a rank's window (hr_distinct):
 * then two runs of the base agree to the bit, and so must the knobs.
 * Included by test files only (static functions). */
#ifndef PLATEAU_TRAIN_HEADROOM_TESTLIB_H
#define PLATEAU_TRAIN_HEADROOM_TESTLIB_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data.h"
#include "train/describe.h"
#include "train/step.h"

typedef struct hr_variant {
  const char *name;
  int resident;        /* 0 none, 1 half of the rank's state's bytes, 2 all */
  pl_keep_budget keep; /* kept activations                                 */
  bool sco_all;        /* every boundary offloaded (kept acts meet restores) */
} hr_variant;

/* The run of one configuration: losses, gradients per step, weights. */
typedef struct hr_run {
  int steps, np;
  double *loss;   /* steps                       */
  float ***grad;  /* [step][param] full tensors  */
  float **weight; /* [param] after the last step */
  size_t *numel;  /* [param]                     */
  int clipped;    /* steps whose gradient norm was clipped */
} hr_run;

static void hr_run_free(hr_run *r) {
  for (int s = 0; s < r->steps && r->grad; s++) {
    for (int i = 0; i < r->np; i++)
      free(r->grad[s][i]);
    free(r->grad[s]);
  }
  for (int i = 0; i < r->np && r->weight; i++)
    free(r->weight[i]);
  free(r->grad), free(r->weight), free(r->numel), free(r->loss);
  memset(r, 0, sizeof *r);
}

/* sc with variant v's knobs at W ranks, this rank (half: 12 bytes times
 * half the parameters this rank updates, whole buckets). */
static pl_step_cfg hr_cfg(const pl_model_cfg *m, const pl_layout_cfg *lc, int W,
                          int rank, int64_t S, const pl_step_cfg *base,
                          const hr_variant *v, pl_backend be) {
  pl_step_cfg sc = *base;
  sc.keep = v->keep;
  sc.keep_verify = v->keep.mode != PL_KEEP_BYTES || v->keep.bytes > 0;
  if (v->sco_all)
    sc.sco = (pl_sco_budget){true, 0};
  if (v->resident == 2)
    sc.oo.resident_all = true;
  if (v->resident == 1) {
    pl_train_desc *d = malloc(sizeof *d);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(pl_train_describe(m, lc, W, rank, S, &sc, be, d), PL_OK);
    sc.oo.resident_bytes = (uint64_t)d->params_rank / 2 * 12;
    free(d);
  }
  return sc;
}

/* Tokens of step s that never repeat within this rank's window (an odd
 * stride modulo V, V a power of two at least the window): the embedding's
 * backward then adds each row once, in no run-dependent order. */
static bool hr_distinct = false;
static void hr_distinct_tokens(pl_trainer *t, const pl_model_cfg *m, int s,
                               int32_t *tok) {
  const int64_t n = pl_trainer_tokens_per_rank(t);
  const int64_t r = pl_trainer_plan(t)->rank;
  ck_assert_msg(n <= m->V, "hr_distinct: %lld tokens > V=%lld", (long long)n,
                (long long)m->V);
  for (int64_t i = 0; i < n; i++)
    tok[i] = (int32_t)((97 * (int64_t)s + 31 * r + 7 * i) % m->V);
}

/* steps steps of trainer t from step 0 of the synthetic stream (seed 21;
 * hr_distinct: hr_distinct_tokens). */
static void hr_record(pl_trainer *t, const pl_model_cfg *m, int steps,
                      hr_run *r) {
  memset(r, 0, sizeof *r);
  r->steps = steps;
  r->np = pl_trainer_nparams(t);
  r->loss = calloc((size_t)steps, sizeof *r->loss);
  r->grad = calloc((size_t)steps, sizeof *r->grad);
  r->weight = calloc((size_t)r->np, sizeof *r->weight);
  r->numel = calloc((size_t)r->np, sizeof *r->numel);
  ck_assert(r->loss && r->grad && r->weight && r->numel);
  for (int i = 0; i < r->np; i++) {
    pl_param_info in;
    ck_assert_int_eq(pl_trainer_param_info(t, i, &in), PL_OK);
    r->numel[i] = (size_t)(in.rows * in.cols);
  }
  pl_data *data;
  ck_assert_int_eq(pl_data_synthetic(m->V, 21, &data), PL_OK);
  int32_t *tok = malloc((size_t)pl_trainer_tokens_per_rank(t) * 4);
  ck_assert_ptr_nonnull(tok);
  for (int s = 0; s < steps; s++) {
    pl_step_result res;
    if (hr_distinct)
      hr_distinct_tokens(t, m, s, tok);
    else
      ck_assert_int_eq(pl_data_batch(data, pl_trainer_plan(t), 1, s, tok),
                       PL_OK);
    ck_assert_msg(pl_trainer_forward_backward(t, tok, &res) == PL_OK, "%s",
                  pl_last_error());
    r->loss[s] = res.loss;
    r->grad[s] = calloc((size_t)r->np, sizeof(float *));
    for (int i = 0; i < r->np; i++) {
      r->grad[s][i] = malloc(r->numel[i] * 4 + 4);
      ck_assert_int_eq(pl_trainer_gather(t, i, true, r->grad[s][i]), PL_OK);
    }
    ck_assert_msg(pl_trainer_update(t, &res) == PL_OK, "%s", pl_last_error());
    r->clipped += res.gscale < 1.0f;
  }
  for (int i = 0; i < r->np; i++) {
    r->weight[i] = malloc(r->numel[i] * 4 + 4);
    ck_assert_int_eq(pl_trainer_gather(t, i, false, r->weight[i]), PL_OK);
  }
  free(tok);
  pl_data_close(data);
}

/* The first difference of run b from run a ("" when bit-identical). */
static void hr_diff(const hr_run *a, const hr_run *b, pl_trainer *t, char *msg,
                    size_t n) {
  msg[0] = '\0';
  for (int s = 0; s < a->steps; s++) {
    if (memcmp(&a->loss[s], &b->loss[s], sizeof(double))) {
      snprintf(msg, n, "step %d: loss %.17g vs %.17g", s + 1, b->loss[s],
               a->loss[s]);
      return;
    }
    for (int i = 0; i < a->np; i++)
      if (memcmp(a->grad[s][i], b->grad[s][i], a->numel[i] * 4)) {
        pl_param_info in;
        pl_trainer_param_info(t, i, &in);
        snprintf(msg, n, "step %d: gradient of %s differs", s + 1, in.name);
        return;
      }
  }
  for (int i = 0; i < a->np; i++)
    if (memcmp(a->weight[i], b->weight[i], a->numel[i] * 4)) {
      pl_param_info in;
      pl_trainer_param_info(t, i, &in);
      snprintf(msg, n, "after %d steps: weights of %s differ", a->steps,
               in.name);
      return;
    }
}

/* Every variant against the first (the base), on dev and world; rank 0
 * prints one line per variant; returns the steps the base clipped.
 * Collective. */
static int hr_check(pl_dev *dev, pl_comm *world, const pl_model_cfg *m,
                    const pl_layout_cfg *lc, int64_t S, const pl_step_cfg *base,
                    const hr_variant *v, int nv, int steps, const char *what) {
  const int W = pl_comm_size(world), rank = pl_comm_rank(world);
  const pl_backend be = pl_dev_backend(dev);
  hr_run ref;
  pl_trainer *t0 = NULL;
  int clipped = 0;
  for (int k = 0; k < nv; k++) {
    pl_step_cfg sc = hr_cfg(m, lc, W, rank, S, base, &v[k], be);
    pl_trainer *t = NULL;
    ck_assert_msg(pl_trainer_create(dev, world, m, lc, S, &sc, &t) == PL_OK,
                  "%s %s: %s", what, v[k].name, pl_last_error());
    hr_run r;
    hr_record(t, m, steps, &r);
    char msg[200] = "";
    if (k == 0) {
      ref = r;
      t0 = t;
      clipped = r.clipped;
      if (rank == 0)
        printf("# %s: %-34s losses %.6f ... %.6f, clipped %d of %d steps "
               "(the base)\n",
               what, v[k].name, r.loss[0], r.loss[steps - 1], r.clipped, steps);
      continue;
    }
    hr_diff(&ref, &r, t, msg, sizeof msg);
    if (rank == 0)
      printf("# %s: %-34s %s\n", what, v[k].name,
             msg[0] ? msg : "bit-identical losses, gradients and weights");
    ck_assert_msg(!msg[0], "%s, %s: %s", what, v[k].name, msg);
    hr_run_free(&r);
    pl_trainer_destroy(t);
  }
  hr_run_free(&ref);
  pl_trainer_destroy(t0);
  return clipped;
}

#endif
