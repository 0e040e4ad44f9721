/* moegemm_groups.c — the GEMMs of `plateau bench moegemm` (moegemm.h): one
 * point's grouped GEMMs through pl__moe_gemm as ops/moe_expert.c issues
 * them, round-robin over the lanes, or the dense GEMM of equal FLOPs; the
 * buffers of the largest point and the lanes' streams and events. */
#include "moegemm.h"
#include "ops/moe_internal.h"

pl_status pl__moegemm_run(void *arg) {
  gjob *j = arg;
  size_t b = pl_dtype_size(j->dt);
  const int64_t H = j->H, I = j->I;
  int n = j->dense ? 1 : j->G;
  int64_t rows = j->dense ? (int64_t)j->G * j->m : j->m;
  const int nl = j->dense ? 0 : j->nl;
  if (nl) {
    PL_TRY(pl_event_record(j->evf, j->s));
    for (int l = 0; l < nl; l++)
      PL_TRY(pl_stream_wait(j->ln[l], j->evf));
  }
  for (int g = 0; g < n; g++) {
    pl_stream *q = g % (nl + 1) == 0 ? j->s : j->ln[g % (nl + 1) - 1];
    const char *Wg =
        (const char *)j->W + (j->dense ? 0 : (size_t)g * H * I * b);
    size_t r0 = j->dense ? 0 : (size_t)g * (size_t)j->m;
    pl_status st;
    if (j->kind == 0)
      st = pl__moe_gemm(q, false, false, rows, I, H, 1.0f,
                        (const char *)j->X + r0 * H * b, H, Wg, I, 0.0f,
                        (char *)j->C + r0 * I * b, I, j->dt, j->dt);
    else if (j->kind == 1)
      st = pl__moe_gemm(q, false, false, rows, H, I, 1.0f,
                        (const char *)j->X + r0 * I * b, I, Wg, H, 0.0f,
                        (char *)j->C + r0 * H * b, H, j->dt, j->dt);
    else /* dW (H x I, fp32) += X^T (rows x H)^T dG (rows x I) */
      st = pl__moe_gemm(
          q, true, false, H, I, rows, 1.0f, (const char *)j->X + r0 * H * b, H,
          (const char *)j->C + r0 * I * b, I, 1.0f,
          (float *)j->W + (j->dense ? 0 : (size_t)g * H * I), I, j->dt, PL_F32);
    if (st != PL_OK)
      return st;
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
