/* trainer_testlib.h — the set-ups the two trainers' MPI tests share: the
 * composed step's (train/step.h: test_mpi_step.c, test_mpi_step_cuda.c,
 * and tt_cfg for test_mpi_describe.c, test_mpi_vgroups.c) and the FSDP2
 * baseline's (baselines/fsdp2: test_mpi_fsdp2.c, test_mpi_fsdp2_cuda.c),
 * which ask the same questions of two trainers.
 *
 *   tt_cpu_main   a CPU test's main: the CPU device, the world and each
 *                 rank alone (self), the tests run, everything freed;
 *   tt_cuda_main  a CUDA-vs-CPU test's main: the CPU device and world, and
 *                 when every rank has a GPU the CUDA device and world too
 *                 (else "skipped" printed and *have_gpus 0);
 *   tt_grads_close  every parameter's gradient of the CUDA trainer gathered
 *                 to the full tensor against the CPU trainer's, normwise
 *                 (max |a − b| / max |b|) within bf16 tolerance: 8e-2 for
 *                 dense parameters, 0.12 for the embedding (each of its
 *                 rows is the sum of dx over every occurrence of a token:
 *                 the rounding of every attention kernel upstream adds up
 *                 there), 0.2 for the router and the experts (a route near
 *                 a top-k tie may go another way on the other backend);
 *                 each printed on rank 0;
 *   tt_ratio      the normwise closeness both trainers' reference tests
 *                 measure;
 *   tt_cuda_model the tiny model of CUDA shapes the CUDA-vs-CPU tests
 *                 train;
 *   tt_step_ops   the composed step's trainer as tt_grads_close sees it;
 *   tt_cfg        a composed trainer's configuration as a test varies it
 *                 (tt_cfg_tiny: the tiny preset and the step's defaults).
 * Included by test files only (static inline functions). */
#ifndef PLATEAU_TRAIN_TRAINER_TESTLIB_H
#define PLATEAU_TRAIN_TRAINER_TESTLIB_H

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "train/step.h"

static inline int tt_cpu_main(int argc, char **argv, const char *name,
                              double timeout_s, const TTest *const *tests,
                              pl_dev **dev, pl_comm **world, pl_comm **self,
                              int *rank, int *size) {
  const int e = pl_check_world_open(&argc, &argv, name, dev, world, rank, size);
  if (e)
    return e;
  if (pl_comm_split(*world, *rank, 0, self) != PL_OK)
    return 3;
  const int nf = pl_check_run(name, timeout_s, tests, *rank, *world);
  pl_comm_destroy(*self);
  return pl_check_world_close(*dev, *world, nf);
}

static inline int tt_cuda_main(int argc, char **argv, const char *name,
                               double timeout_s, const TTest *const *tests,
                               pl_dev **cdev, pl_dev **gdev, pl_comm **cworld,
                               pl_comm **gworld, int *rank, int *size,
                               int *have_gpus) {
  if (pl_init(&argc, &argv) != PL_OK)
    return 2;
  *rank = pl_world_rank();
  *size = pl_world_size();
  int64_t enough = pl_cuda_device_count() >= *size;
  if (pl_dev_create(PL_BACKEND_CPU, 0, cdev) != PL_OK ||
      pl_comm_world(*cdev, cworld) != PL_OK)
    return 3;
  if (pl_host_allreduce_i64(*cworld, &enough, 1, PL_RED_MIN) != PL_OK)
    return 3;
  *have_gpus = (int)enough;
  if (!*have_gpus && *rank == 0)
    printf("skipped: no CUDA device for each of the %d ranks\n", *size);
  if (*have_gpus && (pl_dev_create(PL_BACKEND_CUDA, -1, gdev) != PL_OK ||
                     pl_comm_world(*gdev, gworld) != PL_OK)) {
    fprintf(stderr, "cuda setup: %s\n", pl_last_error());
    return 3;
  }
  const int nf = pl_check_run(name, timeout_s, tests, *rank, *cworld);
  if (*gworld)
    pl_comm_destroy(*gworld);
  if (*gdev)
    pl_dev_destroy(*gdev);
  pl_comm_destroy(*cworld);
  pl_dev_destroy(*cdev);
  pl_finalize();
  return nf ? 1 : 0;
}

/* Normwise closeness of a to b (n elements): the worst |a − b| over
 * tol · max |b|, *bad its index (-1: none differs). */
static inline double tt_ratio(const float *a, const float *b, size_t n,
                              double tol, int64_t *bad) {
  double sc = 1e-30, me = 0;
  *bad = -1;
  for (size_t i = 0; i < n; i++)
    sc = fmax(sc, fabs(b[i]));
  for (size_t i = 0; i < n; i++) {
    const double e = fabs((double)a[i] - b[i]);
    if (!(e <= me))
      me = e, *bad = (int64_t)i;
  }
  return me / (tol * sc);
}

/* A trainer as tt_grads_close sees it. */
typedef struct tt_trainer_ops {
  int (*nparams)(const void *t);
  pl_status (*info)(const void *t, int i, pl_param_info *out);
  pl_status (*gather)(void *t, int i, bool grad, float *out);
} tt_trainer_ops;

/* 1 if every gradient of gpu is within tolerance of cpu's (asserts the
 * calls; prints each parameter's error on rank 0). */
static inline int tt_grads_close(const tt_trainer_ops *o, void *cpu, void *gpu,
                                 int rank) {
  int ok = 1;
  for (int i = 0; i < o->nparams(cpu); i++) {
    pl_param_info in;
    ck_assert_int_eq(o->info(cpu, i, &in), PL_OK);
    const size_t n = (size_t)(in.rows * in.cols);
    float *a = malloc(n * 4), *c = malloc(n * 4);
    ck_assert_int_eq(o->gather(cpu, i, true, c), PL_OK);
    ck_assert_int_eq(o->gather(gpu, i, true, a), PL_OK);
    double me = 0, sc = 1e-30;
    for (size_t j = 0; j < n; j++) {
      sc = fmax(sc, fabs(c[j]));
      const double e = fabs((double)a[j] - c[j]);
      me = isnan(e) ? INFINITY : fmax(me, e);
    }
    const double tol = strstr(in.name, "experts") || strstr(in.name, "router")
                           ? 0.2
                       : !strcmp(in.name, "embed") ? 0.12
                                                   : 8e-2;
    if (rank == 0)
      printf("#   %-22s normwise %.3g (tolerance %.2g)\n", in.name, me / sc,
             tol);
    if (!(me / sc <= tol))
      ok = 0;
    free(a), free(c);
  }
  return ok;
}

/* The tiny model with CUDA shapes: H 256, head dim d (64 or 128), GQA 2:1
 * (4 query heads, 2 KV heads), two layers (a dense first layer of width
 * 128, a MoE layer of 8 experts, top-2, expert and shared widths 64), the
 * preset's vocabulary. */
static inline void tt_cuda_model(int d, pl_model_cfg *m) {
  ck_assert_int_eq(pl_model_preset("tiny", m), PL_OK);
  m->H = 256, m->n_q = 4, m->n_kv = 2, m->d = d;
  m->E = 8, m->k = 2, m->I = 64, m->I_shared = 64, m->I_dense = 128, m->L = 2,
  m->dense_layers = 1;
}

/* The composed step's trainer (train/step.h) as tt_grads_close sees it. */
static inline int tt_step_nparams(const void *t) {
  return pl_trainer_nparams(t);
}
static inline pl_status tt_step_info(const void *t, int i, pl_param_info *out) {
  return pl_trainer_param_info(t, i, out);
}
static inline pl_status tt_step_gather(void *t, int i, bool grad, float *out) {
  return pl_trainer_gather(t, i, grad, out);
}
static const tt_trainer_ops tt_step_ops = {tt_step_nparams, tt_step_info,
                                           tt_step_gather};

/* A composed trainer's configuration as a test varies it: the model, the
 * layout, the step and the sequence length. */
typedef struct tt_cfg {
  pl_model_cfg m;
  pl_layout_cfg lc;
  pl_step_cfg sc;
  int64_t S;
} tt_cfg;

/* The tiny preset and the step's defaults; the layout and S zero (the
 * caller's). */
static inline tt_cfg tt_cfg_tiny(void) {
  tt_cfg c;
  memset(&c, 0, sizeof c);
  ck_assert_int_eq(pl_model_preset("tiny", &c.m), PL_OK);
  c.sc = pl_step_cfg_default();
  return c;
}

#endif
