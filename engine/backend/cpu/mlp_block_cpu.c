/* mlp_block_cpu.c — CPU twins of the dense block's kernels (RMSNorm and
 * SwiGLU, forward and backward; backend/mlp_block_kernels.h).  fp32 arithmetic,
 * values rounded to the storage dtype at the same points as the CUDA kernels;
 * reductions over H in row order, the weight-gradient reduction over rows in
 * row order. */
#include <math.h>
#include <stdlib.h>

#include "backend/mlp_block_kernels.h"

size_t pl__rmsnorm_bwd_scratch(int64_t N, int64_t H) {
  return (size_t)N +
         (size_t)((N + 63) / 64) * (size_t)H; /* rstd + partial sums */
}

static float row_rstd(const void *x, size_t base, int64_t H, float eps,
                      pl_dtype dt) {
  float ss = 0.0f;
  for (int64_t j = 0; j < H; j++) {
    float v = pl__load_elem(x, dt, base + (size_t)j);
    ss += v * v;
  }
  return 1.0f / sqrtf(ss / (float)H + eps);
}

pl_status pl__cpu_rmsnorm_fwd(pl_stream *s, const void *x, const void *w,
                              void *n, int64_t N, int64_t H, float eps,
                              pl_dtype dt) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < N; r++) {
    size_t base = (size_t)(r * H);
    float rstd = row_rstd(x, base, H, eps, dt);
    for (int64_t j = 0; j < H; j++)
      pl__store_elem(n, dt, base + (size_t)j,
                     pl__load_elem(x, dt, base + (size_t)j) * rstd *
                         pl__load_elem(w, dt, (size_t)j));
  }
  return PL_OK;
}

pl_status pl__cpu_rmsnorm_bwd(pl_stream *s, const void *x, const void *w,
                              const void *dn, const void *dres, void *dx,
                              float *dw, float *scratch, int64_t N, int64_t H,
                              float eps, pl_dtype dt) {
  /* dx_j = rstd·w_j·dn_j − rstd³/H · x_j · Σ_k w_k·dn_k·x_k */
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < N; r++) {
    size_t base = (size_t)(r * H);
    float rstd = row_rstd(x, base, H, eps, dt);
    float dot = 0.0f;
    for (int64_t j = 0; j < H; j++)
      dot += pl__load_elem(w, dt, (size_t)j) *
             pl__load_elem(dn, dt, base + (size_t)j) *
             pl__load_elem(x, dt, base + (size_t)j);
    float c = rstd * rstd * rstd / (float)H * dot;
    for (int64_t j = 0; j < H; j++) {
      float v = rstd * pl__load_elem(w, dt, (size_t)j) *
                    pl__load_elem(dn, dt, base + (size_t)j) -
                c * pl__load_elem(x, dt, base + (size_t)j);
      if (dres)
        v += pl__load_elem(dres, dt, base + (size_t)j);
      pl__store_elem(dx, dt, base + (size_t)j, v);
    }
  }
  /* dw_j += Σ_r dn_rj · x_rj · rstd_r, rows in order (deterministic) */
  float *rs = malloc(sizeof(float) * (size_t)(N > 0 ? N : 1));
  if (!rs)
    return pl_set_error(PL_ENOMEM, "rmsnorm_bwd: out of host memory");
  for (int64_t r = 0; r < N; r++)
    rs[r] = row_rstd(x, (size_t)(r * H), H, eps, dt);
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < H; j++) {
    float acc = 0.0f;
    for (int64_t r = 0; r < N; r++)
      acc += pl__load_elem(dn, dt, (size_t)(r * H + j)) *
             pl__load_elem(x, dt, (size_t)(r * H + j)) * rs[r];
    dw[j] += acc;
  }
  free(rs);
  return PL_OK;
}

static inline float silu(float g) {
  return g / (1.0f + expf(-g));
}

pl_status pl__cpu_swiglu_fwd(pl_stream *s, const void *gu, void *a, int64_t N,
                             int64_t I, pl_dtype dt) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < N; r++)
    for (int64_t j = 0; j < I; j++) {
      float g = pl__load_elem(gu, dt, (size_t)(r * 2 * I + j)),
            u = pl__load_elem(gu, dt, (size_t)(r * 2 * I + I + j));
      pl__store_elem(a, dt, (size_t)(r * I + j), silu(g) * u);
    }
  return PL_OK;
}

pl_status pl__cpu_swiglu_bwd(pl_stream *s, const void *gu, const void *da,
                             void *dgu, int64_t N, int64_t I, pl_dtype dt) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < N; r++)
    for (int64_t j = 0; j < I; j++) {
      float g = pl__load_elem(gu, dt, (size_t)(r * 2 * I + j)),
            u = pl__load_elem(gu, dt, (size_t)(r * 2 * I + I + j));
      float d = pl__load_elem(da, dt, (size_t)(r * I + j));
      float sg = 1.0f / (1.0f + expf(-g));
      float dsilu = sg * (1.0f + g * (1.0f - sg));
      pl__store_elem(dgu, dt, (size_t)(r * 2 * I + j), d * u * dsilu);
      pl__store_elem(dgu, dt, (size_t)(r * 2 * I + I + j), d * g * sg);
    }
  return PL_OK;
}
