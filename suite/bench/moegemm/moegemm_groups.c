/* moegemm_groups.c — the GEMMs of `plateau bench moegemm` (moegemm.h): one
 * point's grouped GEMMs through pl__moe_gemm as ops/moe_expert.c issues
 * them, round-robin over the lanes, or the dense GEMM of equal FLOPs; the
 * buffers of
 * the largest point and the lanes' streams and events. */
#include <stdio.h>
#include <stdlib.h>

#include "moegemm.h"

/* One GEMM, row-major with pl_gemm's meaning:
 * C (m x n) = op(A) op(B) + beta C, op(A) m x k, op(B) k x n. */
typedef struct gemm_desc {
  int64_t m, n, k;
  const void *A, *B;
  void *C;
  int64_t lda, ldb, ldc;
} gemm_desc;

/* GEMM g of the point (the dense one: g 0 with all G·m rows), as
 * ops/moe_expert.c issues it: up (m x H)(H x I), down (m x I)(I x H), wgrad
 * dW (H x I, fp32) += X^T (rows x H)^T dG (rows x I). */
static gemm_desc gemm_of(const gjob *j, int g) {
  const size_t b = pl_dtype_size(j->dt);
  const int64_t H = j->H, I = j->I;
  const int64_t rows = j->dense ? (int64_t)j->G * j->m : j->m;
  const char *Wg = (const char *)j->W + (j->dense ? 0 : (size_t)g * H * I * b);
  const size_t r0 = j->dense ? 0 : (size_t)g * (size_t)j->m;
  const char *X = (const char *)j->X, *C = (const char *)j->C;
  if (j->kind == 0)
    return (gemm_desc){rows, I, H, X + r0 * H * b, Wg, (char *)C + r0 * I * b,
                       H,    I, I};
  if (j->kind == 1)
    return (gemm_desc){rows, H, I, X + r0 * I * b, Wg, (char *)C + r0 * H * b,
                       I,    H, H};
  return (gemm_desc){H,
                     I,
                     rows,
                     X + r0 * H * b,
                     C + r0 * I * b,
                     (float *)j->W + (j->dense ? 0 : (size_t)g * H * I),
                     H,
                     I,
                     I};
}

pl_status pl__moegemm_run(void *arg) {
  gjob *j = arg;
  const int n = j->dense ? 1 : j->G;
  const int nl = j->dense ? 0 : j->nl;
  const bool wg = j->kind == 2;
  if (nl) {
    PL_TRY(pl_event_record(j->evf, j->s));
    for (int l = 0; l < nl; l++)
      PL_TRY(pl_stream_wait(j->ln[l], j->evf));
  }
  for (int g = 0; g < n; g++) {
    pl_stream *q = g % (nl + 1) == 0 ? j->s : j->ln[g % (nl + 1) - 1];
    const gemm_desc d = gemm_of(j, g);
    PL_TRY(pl__moe_gemm(q, wg, false, d.m, d.n, d.k, 1.0f, d.A, d.lda, d.B,
                        d.ldb, wg ? 1.0f : 0.0f, d.C, d.ldc, j->dt,
                        wg ? PL_F32 : j->dt));
  }
  for (int l = 0; l < nl; l++) {
    PL_TRY(pl_event_record(j->evj[l], j->ln[l]));
    PL_TRY(pl_stream_wait(j->s, j->evj[l]));
  }
  return PL_OK;
}

void pl__moegemm_release(pl_bench_ctx *c, moegemm *m) {
  gjob *j = &m->j;
  for (int l = 0; l < PL_MOE_MAX_LANES; l++) {
    if (j->ln[l])
      pl_stream_destroy(j->ln[l]);
    if (j->evj[l])
      pl_event_destroy(j->evj[l]);
    j->ln[l] = NULL;
    j->evj[l] = NULL;
  }
  if (j->evf)
    pl_event_destroy(j->evf);
  pl_free(c->dev, j->X);
  pl_free(c->dev, j->C);
  pl_free(c->dev, j->W);
  j->evf = NULL;
  j->X = j->C = j->W = NULL;
}

/* The buffers, the largest point's, and the lanes' streams. */
pl_status pl__moegemm_make(pl_bench_ctx *c, moegemm *m) {
  gjob *j = &m->j;
  pl_dev *dev = c->dev;
  const size_t G = (size_t)m->Gseg, HI = (size_t)m->H * (size_t)m->I;
  {
    size_t b = pl_dtype_size(j->dt), xr = G * (size_t)m->mmax;
    size_t wd = m->H > m->I ? (size_t)m->H : (size_t)m->I;
    j->s = c->stream;
    j->H = m->H;
    j->I = m->I;
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, xr * wd * b, "bench", &j->X));
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, xr * wd * b, "bench", &j->C));
    /* bf16 weights, or fp32 gradients for wgrad: room for both */
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, G * HI * 4, "bench", &j->W));
    PL_TRY(pl_rng_fill(j->s, j->X, j->dt, xr * wd, c->seed + 1, 0,
                       PL_DIST_NORMAL, 0, 1));
    PL_TRY(pl_rng_fill(j->s, j->C, j->dt, xr * wd, c->seed + 2, 0,
                       PL_DIST_NORMAL, 0, 1));
    PL_TRY(pl_event_create(dev, &j->evf));
    for (int l = 0; l < PL_MOE_MAX_LANES; l++) {
      PL_TRY(pl_stream_create(dev, &j->ln[l]));
      PL_TRY(pl_event_create(dev, &j->evj[l]));
    }
    PL_TRY(pl_stream_sync(j->s));
  }
  return PL_OK;
}
