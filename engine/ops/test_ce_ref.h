/* test_ce_ref.h — test-only helpers for the vocabulary head: deterministic
 * problems (X, W, t from the counter RNG, so every rank of an MPI test can
 * build any rank's slice), the f64 reference of the dense head, device
 * up/download, and a comparison that reports max abs/rel error and the first
 * bad index, and the MPI tests' case table.  Included by the test_*.c files
 * of the vocab head only. */
#ifndef PLATEAU_OPS_TEST_CE_REF_H
#define PLATEAU_OPS_TEST_CE_REF_H

#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "ops/ce.h"
#include "plateau/host_device.h"
#include "plateau/plateau.h"

/* Inputs of a global problem: x (N×H), w (H×V), t (N); values as stored in
 * dtype dt (bf16-rounded when dt is bf16), kept as f32 on the host. */
typedef struct ref_problem {
  int64_t n, h, v;
  pl_dtype dt;
  float *x, *w, *dl;
  int32_t *t;
} ref_problem;

static inline float ref_round(pl_dtype dt, float f) {
  return dt == PL_BF16 ? pl_bf16_to_f32(pl_f32_to_bf16(f)) : f;
}

/* Targets: t[i] uniform in [0, V), except rows i with i % ign_every ==
 * ign_every-1 (ign_every > 0) which get the ignore index; with one_shard_hi
 * > 0, targets are drawn in [one_shard_lo, one_shard_hi) (every target in one
 * shard).  Logit scale `scale` makes softmaxes peaked or flat. */
static inline void ref_make(ref_problem *p, int64_t n, int64_t h, int64_t v,
                            pl_dtype dt, uint64_t seed, int ign_every,
                            int64_t lo, int64_t hi, float scale) {
  p->n = n, p->h = h, p->v = v, p->dt = dt;
  p->x = malloc(sizeof(float) * (size_t)(n * h + 1));
  p->w = malloc(sizeof(float) * (size_t)(h * v + 1));
  p->dl = malloc(sizeof(float) * (size_t)(n + 1));
  p->t = malloc(sizeof(int32_t) * (size_t)(n + 1));
  for (int64_t i = 0; i < n * h; i++)
    p->x[i] = ref_round(dt, pl_rng_uniform(seed, (uint64_t)i, -1.0f, 1.0f));
  float ws = scale / sqrtf((float)h);
  for (int64_t i = 0; i < h * v; i++)
    p->w[i] = ref_round(dt, pl_rng_uniform(seed + 1, (uint64_t)i, -ws, ws));
  if (hi <= lo)
    lo = 0, hi = v;
  for (int64_t i = 0; i < n; i++) {
    p->t[i] = (int32_t)(lo + (int64_t)(pl_rng_u32(seed + 2, (uint64_t)i) %
                                       (uint64_t)(hi - lo)));
    if (ign_every > 0 && i % ign_every == ign_every - 1)
      p->t[i] = PL_CE_IGNORE_INDEX;
    p->dl[i] = pl_rng_uniform(seed + 3, (uint64_t)i, 0.5f, 1.5f);
  }
}

static inline void ref_free(ref_problem *p) {
  free(p->x), free(p->w), free(p->t), free(p->dl);
  memset(p, 0, sizeof *p);
}

/* f64 reference: loss (1 value, or n for none), dx (n×h), dw (h×v) of the
 * whole problem with reduction red (none: upstream gradient dl). */
static inline void ref_solve(const ref_problem *p, pl_ce_reduction red,
                             double *loss, double *dx, double *dw) {
  const int64_t n = p->n, h = p->h, v = p->v;
  double *y = malloc(sizeof(double) * (size_t)(v + 1));
  double sum = 0, cnt = 0;
  for (int64_t i = 0; i < n; i++)
    if (p->t[i] != PL_CE_IGNORE_INDEX)
      cnt += 1;
  memset(dx, 0, sizeof(double) * (size_t)(n * h));
  memset(dw, 0, sizeof(double) * (size_t)(h * v));
  for (int64_t i = 0; i < n; i++) {
    double mx = -INFINITY;
    for (int64_t c = 0; c < v; c++) {
      double a = 0;
      for (int64_t k = 0; k < h; k++)
        a += (double)p->x[i * h + k] * (double)p->w[k * v + c];
      y[c] = a;
      if (a > mx)
        mx = a;
    }
    double z = 0;
    for (int64_t c = 0; c < v; c++)
      z += exp(y[c] - mx);
    double lse = mx + log(z);
    int ign = p->t[i] == PL_CE_IGNORE_INDEX;
    double nll = ign ? 0.0 : lse - y[p->t[i]];
    if (red == PL_CE_NONE)
      loss[i] = nll;
    sum += nll;
    double g = ign                 ? 0.0
               : red == PL_CE_MEAN ? 1.0 / cnt
               : red == PL_CE_SUM  ? 1.0
                                   : (double)p->dl[i];
    if (g == 0.0)
      continue;
    for (int64_t c = 0; c < v; c++) {
      double dy = g * (exp(y[c] - lse) - (c == p->t[i] ? 1.0 : 0.0));
      for (int64_t k = 0; k < h; k++) {
        dx[i * h + k] += dy * (double)p->w[k * v + c];
        dw[k * v + c] += (double)p->x[i * h + k] * dy;
      }
    }
  }
  if (red == PL_CE_MEAN)
    loss[0] = sum / cnt;
  if (red == PL_CE_SUM)
    loss[0] = sum;
  free(y);
}

/* ---- device buffers -------------------------------------------------------
 */

/* Upload n f32 host values as dtype dt (f32, bf16) into a new device buffer. */
static inline void *dev_up(pl_dev *dev, const float *src, size_t n, pl_dtype dt,
                           const char *tag) {
  void *d = NULL;
  size_t es = pl_dtype_size(dt);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, n * es, tag, &d), PL_OK);
  void *tmp = malloc(n * es + 1);
  for (size_t i = 0; i < n; i++) {
    if (dt == PL_BF16)
      ((pl_bf16 *)tmp)[i] = pl_f32_to_bf16(src[i]);
    else
      ((float *)tmp)[i] = src[i];
  }
  pl_stream *s = pl_dev_stream(dev);
  ck_assert_int_eq(pl_memcpy_async(s, d, tmp, n * es), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  free(tmp);
  return d;
}

static inline void *dev_up_raw(pl_dev *dev, const void *src, size_t bytes,
                               const char *tag) {
  void *d = NULL;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes, tag, &d), PL_OK);
  pl_stream *s = pl_dev_stream(dev);
  if (bytes)
    ck_assert_int_eq(pl_memcpy_async(s, d, src, bytes), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  return d;
}

/* A device buffer of n values of dt poisoned with NaN (outputs are poisoned
 * before running so an unwritten element fails the comparison). */
static inline void *dev_poison(pl_dev *dev, size_t n, pl_dtype dt,
                               const char *tag) {
  void *d = NULL;
  ck_assert_int_eq(
      pl_alloc(dev, PL_ARENA_DEVICE, n * pl_dtype_size(dt), tag, &d), PL_OK);
  ck_assert_int_eq(pl_fill(pl_dev_stream(dev), d, dt, n, NAN), PL_OK);
  return d;
}

/* Download n values of dt as f64. */
static inline double *dev_down(pl_dev *dev, const void *d, size_t n,
                               pl_dtype dt) {
  size_t es = pl_dtype_size(dt);
  void *tmp = malloc(n * es + 1);
  double *out = malloc(sizeof(double) * (n + 1));
  pl_stream *s = pl_dev_stream(dev);
  ck_assert_int_eq(pl_dev_sync(dev), PL_OK);
  if (n)
    ck_assert_int_eq(pl_memcpy_async(s, tmp, d, n * es), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  for (size_t i = 0; i < n; i++)
    out[i] =
        dt == PL_BF16 ? pl_bf16_to_f32(((pl_bf16 *)tmp)[i]) : ((float *)tmp)[i];
  free(tmp);
  return out;
}

/* max |a−b| ≤ tol·max(max|b|, floor): relative to the tensor's scale (an
 * element-wise relative error is meaningless for gradients near zero).  NaN
 * anywhere fails.  Prints max abs/rel error and the first bad index. */
static inline int ref_close(const char *what, const double *a, const double *b,
                            size_t n, double tol) {
  double scale = 1e-30, maxabs = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(b[i]) > scale)
      scale = fabs(b[i]);
  long first = -1;
  for (size_t i = 0; i < n; i++) {
    double e = fabs(a[i] - b[i]);
    if (!(e <= tol * scale)) {
      if (first < 0)
        first = (long)i;
    }
    if (e > maxabs || isnan(e))
      maxabs = isnan(e) ? INFINITY : e;
  }
  if (first >= 0) {
    fprintf(stderr,
            "%s: max abs err %.3e, rel %.3e (scale %.3e, tol %.1e); first bad "
            "index %ld: got %.9g want %.9g\n",
            what, maxabs, maxabs / scale, scale, tol, first, a[first],
            b[first]);
    return 0;
  }
  return 1;
}

/* The case table of the MPI tests of the vocabulary-parallel heads
 * (test_mpi_ring_dtp.c, baselines/test_mpi_ce_heads.c): rank r's tokens,
 * the shape, the block and the targets of each case. */
typedef struct rcase {
  int64_t
      n_base; /* N_r = n_base + r·n_step, or 0 on the last rank if zero_last */
  int64_t n_step;
  int zero_last;
  int64_t h, v, block;
  int ign_every;
  int64_t lo, hi; /* target range (0,0: all of V) */
  float scale;
} rcase;

static const rcase cases[] = {
    {7, 1, 0, 8, 37, 5, 4, 0, 0, 1.0f},   /* N ≤ V/P mostly, V % P != 0    */
    {30, 2, 0, 6, 20, 3, 5, 0, 0, 2.0f},  /* N > V/P: auto moves weights   */
    {9, 0, 1, 5, 23, 4, 3, 0, 0, 1.0f},   /* N = 0 on the last rank        */
    {11, 0, 0, 7, 40, 6, 0, 0, 3, 3.0f},  /* every target in shard 0       */
    {5, 1, 0, 4, 3, 2, 2, 0, 0, 1.0f},    /* V < P at P = 4: empty shards  */
    {4, 3, 0, 16, 150, 0, 6, 0, 0, 1.5f}, /* default block (whole shard)   */
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* The main of those MPI tests: the devices (CUDA when every rank can have
 * its own GPU, else the CPU backend), the world, the tests run as suite
 * name (label printed on rank 0), everything freed.  Returns main's exit
 * status. */
static inline int ref_mpi_main(int argc, char **argv, const char *name,
                               const char *label, double timeout_s,
                               const TTest *const *tests, pl_dev **dev,
                               pl_comm **comm, int *P, int *R) {
  if (pl_init(&argc, &argv) != PL_OK) {
    fprintf(stderr, "pl_init: %s\n", pl_last_error());
    return 1;
  }
  *P = pl_world_size();
  *R = pl_world_rank();
  /* Tiny problems, and more ranks than cores: more threads only thrash. */
  if (*P > 1)
    omp_set_num_threads(1);
  int64_t ngpu = pl_cuda_device_count();
  pl_backend be = ngpu >= *P ? PL_BACKEND_CUDA : PL_BACKEND_CPU;
  if (pl_dev_create(be, -1, dev) != PL_OK ||
      pl_comm_world(*dev, comm) != PL_OK) {
    fprintf(stderr, "setup: %s\n", pl_last_error());
    return 1;
  }
  if (*R == 0)
    printf("# %s tests on %s, %d ranks\n", label, pl_backend_name(be), *P);
  const int nf = pl_check_run(name, timeout_s, tests, *R, *comm);
  pl_comm_destroy(*comm);
  pl_dev_destroy(*dev);
  pl_finalize();
  return nf ? 1 : 0;
}

#endif
