/* moe_reference.c — the single-rank dense reference of the MoE layer
 * (pl_moe_reference_fwd / _bwd in ops/moe.h), which the tests compare every
 * variant with: host memory, all E experts, route by route with one-row GEMMs
 * on the CPU kernels.  Each route's value is computed alone, so it equals any
 * batched row-deterministic computation bit for bit. */
#include <stdlib.h>
#include <string.h>

#include "backend/moe_kernels.h"
#include "ops/moe.h"

/* Per route (t, j), e = idx[t*k+j]: g = x_t Wg_e, u = x_t Wu_e (1 x I),
 * a = silu(g) * u, y_j = a Wd_e (1 x H); then out_t = sum_j w[t*k+j] y_j in j
 * order (the combine kernel). */
pl_status pl_moe_reference_fwd(const pl_moe_cfg *cf, const void *wg,
                               const void *wu, const void *wd, const void *x,
                               int64_t N, const int32_t *idx, const float *w,
                               void *out) {
  const int64_t H = cf->H, I = cf->I;
  const int k = cf->k;
  const pl_dtype dt = cf->dt;
  const size_t b = pl_dtype_size(dt), HI = (size_t)H * I;
  char *g = malloc(I * b), *u = malloc(I * b), *a = malloc(I * b);
  char *y = malloc((size_t)k * H * b);
  int32_t *slots = malloc((size_t)k * sizeof(int32_t));
  pl_status st = PL_OK;
  if (!g || !u || !a || !y || !slots)
    PL_TRY_GOTO(st, done, pl_set_error(PL_ENOMEM, "moe reference: host"));
  for (int64_t t = 0; t < N; t++) {
    const char *xt = (const char *)x + (size_t)t * H * b;
    for (int j = 0; j < k; j++) {
      int e = idx[t * k + j];
      if (e < 0 || e >= cf->E)
        PL_TRY_GOTO(st, done,
                    pl_set_error(PL_EINVAL,
                                 "moe reference: idx %d out of [0,%d)", e,
                                 cf->E));
      PL_TRY_GOTO(st, done,
                  pl__cpu_moe_gemm(NULL, false, false, 1, I, H, 1.0f, xt, H,
                                   (const char *)wg + e * HI * b, I, 0.0f, g, I,
                                   dt, dt));
      PL_TRY_GOTO(st, done,
                  pl__cpu_moe_gemm(NULL, false, false, 1, I, H, 1.0f, xt, H,
                                   (const char *)wu + e * HI * b, I, 0.0f, u, I,
                                   dt, dt));
      PL_TRY_GOTO(st, done, pl__cpu_moe_swiglu_fwd(NULL, a, g, u, 1, I, dt));
      PL_TRY_GOTO(st, done,
                  pl__cpu_moe_gemm(NULL, false, false, 1, H, I, 1.0f, a, I,
                                   (const char *)wd + e * HI * b, H, 0.0f,
                                   y + (size_t)j * H * b, H, dt, dt));
      slots[j] = j;
    }
    int32_t tt = (int32_t)t;
    PL_TRY_GOTO(
        st, done,
        pl__cpu_moe_combine(NULL, out, &tt, 1, slots, k, w, y, NULL, H, dt));
  }
done:
  free(g), free(u), free(a), free(y), free(slots);
  return st;
}

/* Per route: the forward's g, u, a again, p = dout_t Wd_e^T, dw = <p, a>,
 * dg, du (SwiGLU backward with w), d = w * dout_t; gWd_e += a^T d,
 * gWg_e += x_t^T dg, gWu_e += x_t^T du; dx_t = sum_j (dg Wg_e^T + du Wu_e^T).
 */
pl_status pl_moe_reference_bwd(const pl_moe_cfg *cf, const void *wg,
                               const void *wu, const void *wd, const void *x,
                               int64_t N, const int32_t *idx, const float *w,
                               const void *dout, void *dx, float *dw,
                               float *gwg, float *gwu, float *gwd) {
  const int64_t H = cf->H, I = cf->I;
  const int k = cf->k;
  const pl_dtype dt = cf->dt;
  const size_t b = pl_dtype_size(dt), HI = (size_t)H * I;
  char *g = malloc(I * b), *u = malloc(I * b), *a = malloc(I * b),
       *p = malloc(I * b), *d = malloc(H * b);
  char *dxr = malloc((size_t)k * H * b);
  int32_t *slots = malloc((size_t)k * sizeof(int32_t));
  pl_status st = PL_OK;
  if (!g || !u || !a || !p || !d || !dxr || !slots)
    PL_TRY_GOTO(st, done, pl_set_error(PL_ENOMEM, "moe reference: host"));
  for (int64_t t = 0; t < N; t++) {
    const char *xt = (const char *)x + (size_t)t * H * b;
    for (int j = 0; j < k; j++) {
      int e = idx[t * k + j];
      if (e < 0 || e >= cf->E)
        PL_TRY_GOTO(st, done,
                    pl_set_error(PL_EINVAL,
                                 "moe reference: idx %d out of [0,%d)", e,
                                 cf->E));
      const char *Wg = (const char *)wg + e * HI * b;
      const char *Wu = (const char *)wu + e * HI * b;
      const char *Wd = (const char *)wd + e * HI * b;
      float wr = w[t * k + j], dwr = 0;
      memcpy(d, (const char *)dout + (size_t)t * H * b, H * b);
      PL_TRY_GOTO(st, done,
                  pl__cpu_moe_gemm(NULL, false, false, 1, I, H, 1.0f, xt, H, Wg,
                                   I, 0.0f, g, I, dt, dt));
      PL_TRY_GOTO(st, done,
                  pl__cpu_moe_gemm(NULL, false, false, 1, I, H, 1.0f, xt, H, Wu,
                                   I, 0.0f, u, I, dt, dt));
      PL_TRY_GOTO(st, done,
                  pl__cpu_moe_gemm(NULL, false, true, 1, I, H, 1.0f, d, H, Wd,
                                   H, 0.0f, p, I, dt, dt));
      PL_TRY_GOTO(st, done, pl__cpu_moe_swiglu_fwd(NULL, a, g, u, 1, I, dt));
      PL_TRY_GOTO(
          st, done,
          pl__cpu_moe_swiglu_bwd(NULL, g, u, p, a, &wr, &dwr, 1, I, dt));
      dw[t * k + j] = dwr;
      PL_TRY_GOTO(st, done, pl__cpu_moe_scale_rows(NULL, d, &wr, 1, H, dt));
      if (gwd)
        PL_TRY_GOTO(st, done,
                    pl__cpu_moe_gemm(NULL, true, false, I, H, 1, 1.0f, a, I, d,
                                     H, 1.0f, gwd + e * HI, H, dt, PL_F32));
      if (gwg)
        PL_TRY_GOTO(st, done,
                    pl__cpu_moe_gemm(NULL, true, false, H, I, 1, 1.0f, xt, H, g,
                                     I, 1.0f, gwg + e * HI, I, dt, PL_F32));
      if (gwu)
        PL_TRY_GOTO(st, done,
                    pl__cpu_moe_gemm(NULL, true, false, H, I, 1, 1.0f, xt, H, u,
                                     I, 1.0f, gwu + e * HI, I, dt, PL_F32));
      char *dxj = dxr + (size_t)j * H * b;
      PL_TRY_GOTO(st, done,
                  pl__cpu_moe_gemm(NULL, false, true, 1, H, I, 1.0f, g, I, Wg,
                                   I, 0.0f, dxj, H, dt, dt));
      PL_TRY_GOTO(st, done,
                  pl__cpu_moe_gemm(NULL, false, true, 1, H, I, 1.0f, u, I, Wu,
                                   I, 1.0f, dxj, H, dt, dt));
      slots[j] = j;
    }
    int32_t tt = (int32_t)t;
    PL_TRY_GOTO(st, done,
                pl__cpu_moe_combine(NULL, dx, &tt, 1, slots, k, NULL, dxr, NULL,
                                    H, dt));
  }
done:
  free(g), free(u), free(a), free(p), free(d), free(dxr), free(slots);
  return st;
}
