/* mlp_block.c — the dense block's schedule (backend-neutral): GEMMs through
 * pl_gemm, RMSNorm/SwiGLU kernels through the backend twins.  Forward frees
 * its intermediates before returning; backward recomputes them from x (the
 * checkpoint boundary), so nothing but x lives between the two. */
#include <math.h>
#include <string.h>

#include "model/mlp_block.h"

#include "core/internal.h"
#include "model/mlp_block_internal.h"

/* The backend twins of backend/mlp_block_kernels.h, by the stream's backend. */
pl_status pl__rmsnorm_fwd(pl_stream *s, const void *x, const void *w, void *n,
                          int64_t N, int64_t H, float eps, pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_rmsnorm_fwd(s, x, w, n, N, H, eps, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_rmsnorm_fwd(s, x, w, n, N, H, eps, dt);
}

pl_status pl__rmsnorm_bwd(pl_stream *s, const void *x, const void *w,
                          const void *dn, const void *dres, void *dx, float *dw,
                          float *scratch, int64_t N, int64_t H, float eps,
                          pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_rmsnorm_bwd(s, x, w, dn, dres, dx, dw, scratch, N, H, eps,
                                dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_rmsnorm_bwd(s, x, w, dn, dres, dx, dw, scratch, N, H, eps, dt);
}

pl_status pl__swiglu_fwd(pl_stream *s, const void *gu, void *a, int64_t N,
                         int64_t I, pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_swiglu_fwd(s, gu, a, N, I, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_swiglu_fwd(s, gu, a, N, I, dt);
}

pl_status pl__swiglu_bwd(pl_stream *s, const void *gu, const void *da,
                         void *dgu, int64_t N, int64_t I, pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_swiglu_bwd(s, gu, da, dgu, N, I, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_swiglu_bwd(s, gu, da, dgu, N, I, dt);
}

int64_t pl_mlp_block_params(int64_t H, int64_t I) {
  return H + H * 2 * I + I * H;
}

pl_status pl_mlp_block_init(pl_dev *dev, pl_mlp_block *b, int64_t H, int64_t I,
                            pl_dtype dt, uint64_t seed, int layer) {
  memset(b, 0, sizeof *b);
  if (H <= 0 || I <= 0)
    return pl_set_error(PL_EINVAL,
                        "mlp block: H=%lld I=%lld (both must be > 0)",
                        (long long)H, (long long)I);
  if (dt != PL_F32 && dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "mlp block: dtype %s (allowed: f32, bf16)",
                        pl_dtype_name(dt));
  b->dev = dev, b->H = H, b->I = I, b->dt = dt, b->eps = 1e-5f;
  size_t es = pl_dtype_size(dt);
  pl_stream *s = pl_dev_stream(dev);
  const uint64_t ls = seed * 1000003ull + (uint64_t)layer * 7919ull;
  pl_status st = PL_OK;
  PL_TRY_GOTO(
      st, fail,
      pl_alloc(dev, PL_ARENA_DEVICE, (size_t)H * es, "weights", &b->w_norm));
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(H * 2 * I) * es,
                       "weights", &b->w_up));
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(I * H) * es, "weights",
                       &b->w_down));
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, (size_t)H * 4, "grads",
                       (void **)&b->g_norm));
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(H * 2 * I) * 4, "grads",
                       (void **)&b->g_up));
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(I * H) * 4, "grads",
                       (void **)&b->g_down));
  /* scaled like a trained block: unit-ish norm weights, 1/sqrt(fan-in) GEMMs */
  PL_TRY_GOTO(st, fail,
              pl_rng_fill(s, b->w_norm, dt, (size_t)H, ls + 1, 0,
                          PL_DIST_UNIFORM, 0.8f, 1.2f));
  PL_TRY_GOTO(st, fail,
              pl_rng_fill(s, b->w_up, dt, (size_t)(H * 2 * I), ls + 2, 0,
                          PL_DIST_NORMAL, 0, 1.0f / sqrtf((float)H)));
  PL_TRY_GOTO(st, fail,
              pl_rng_fill(s, b->w_down, dt, (size_t)(I * H), ls + 3, 0,
                          PL_DIST_NORMAL, 0, 1.0f / sqrtf((float)I)));
  PL_TRY_GOTO(st, fail, pl_mlp_block_zero_grad(b, s));
  return PL_OK;
fail:
  pl_mlp_block_free(b);
  return st;
}

void pl_mlp_block_free(pl_mlp_block *b) {
  if (!b->dev)
    return;
  pl_free(b->dev, b->w_norm);
  pl_free(b->dev, b->w_up);
  pl_free(b->dev, b->w_down);
  pl_free(b->dev, b->g_norm);
  pl_free(b->dev, b->g_up);
  pl_free(b->dev, b->g_down);
  memset(b, 0, sizeof *b);
}

pl_status pl_mlp_block_zero_grad(pl_mlp_block *b, pl_stream *s) {
  PL_TRY(pl_fill(s, b->g_norm, PL_F32, (size_t)b->H, 0));
  PL_TRY(pl_fill(s, b->g_up, PL_F32, (size_t)(b->H * 2 * b->I), 0));
  return pl_fill(s, b->g_down, PL_F32, (size_t)(b->I * b->H), 0);
}

/* n = rmsnorm(x), gu = n·W_up, a = silu(g)⊙u — shared by forward and the
 * recompute in backward.  On success *n, *gu, *a are live "activations". */
static pl_status recompute(pl_mlp_block *b, pl_stream *s, const void *x,
                           int64_t N, void **n, void **gu, void **a) {
  size_t es = pl_dtype_size(b->dt);
  int64_t H = b->H, I = b->I;
  *n = *gu = *a = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, fail,
              pl_alloc_async(b->dev, PL_ARENA_DEVICE, (size_t)(N * H) * es,
                             "activations", s, n));
  PL_TRY_GOTO(st, fail,
              pl__rmsnorm_fwd(s, x, b->w_norm, *n, N, H, b->eps, b->dt));
  PL_TRY_GOTO(st, fail,
              pl_alloc_async(b->dev, PL_ARENA_DEVICE, (size_t)(N * 2 * I) * es,
                             "activations", s, gu));
  PL_TRY_GOTO(st, fail,
              pl_gemm(s, false, false, N, 2 * I, H, 1.0f, *n, H, b->w_up, 2 * I,
                      0.0f, *gu, 2 * I, b->dt, b->dt));
  PL_TRY_GOTO(st, fail,
              pl_alloc_async(b->dev, PL_ARENA_DEVICE, (size_t)(N * I) * es,
                             "activations", s, a));
  PL_TRY_GOTO(st, fail, pl__swiglu_fwd(s, *gu, *a, N, I, b->dt));
  return PL_OK;
fail:
  pl_free_async(b->dev, *n, s), pl_free_async(b->dev, *gu, s),
      pl_free_async(b->dev, *a, s);
  *n = *gu = *a = NULL;
  return st;
}

pl_status pl_mlp_block_forward(pl_mlp_block *b, pl_stream *s, const void *x,
                               void *y, int64_t N) {
  if (N < 0)
    return pl_set_error(PL_EINVAL, "mlp block: N=%lld (must be >= 0)",
                        (long long)N);
  if (N == 0)
    return PL_OK;
  void *n, *gu, *a;
  PL_TRY(recompute(b, s, x, N, &n, &gu, &a));
  pl_free_async(b->dev, n, s);
  pl_free_async(b->dev, gu, s);
  /* y = x + a·W_down */
  pl_status st = PL_OK;
  PL_TRY_GOTO(
      st, done,
      pl_memcpy_async(s, y, x, (size_t)(N * b->H) * pl_dtype_size(b->dt)));
  st = pl_gemm(s, false, false, N, b->H, b->I, 1.0f, a, b->I, b->w_down, b->H,
               1.0f, y, b->H, b->dt, b->dt);
done:
  pl_free_async(b->dev, a, s);
  return st;
}

pl_status pl_mlp_block_backward(pl_mlp_block *b, pl_stream *s, const void *x,
                                const void *dy, void *dx, int64_t N) {
  if (N < 0)
    return pl_set_error(PL_EINVAL, "mlp block: N=%lld (must be >= 0)",
                        (long long)N);
  if (N == 0)
    return PL_OK;
  int64_t H = b->H, I = b->I;
  size_t es = pl_dtype_size(b->dt);
  void *n, *gu, *a, *da = NULL, *dgu = NULL, *dn = NULL;
  float *scratch = NULL;
  PL_TRY(recompute(b, s, x, N, &n, &gu, &a));
  pl_status st = PL_OK;
  /* dW_down += aᵀ·dy (I×H);  da = dy·W_downᵀ (N×I) */
  PL_TRY_GOTO(st, done,
              pl_gemm(s, true, false, I, H, N, 1.0f, a, I, dy, H, 1.0f,
                      b->g_down, H, b->dt, PL_F32));
  pl_free_async(b->dev, a, s), a = NULL;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(b->dev, PL_ARENA_DEVICE, (size_t)(N * I) * es,
                             "activations", s, &da));
  PL_TRY_GOTO(st, done,
              pl_gemm(s, false, true, N, I, H, 1.0f, dy, H, b->w_down, H, 0.0f,
                      da, I, b->dt, b->dt));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(b->dev, PL_ARENA_DEVICE, (size_t)(N * 2 * I) * es,
                             "activations", s, &dgu));
  PL_TRY_GOTO(st, done, pl__swiglu_bwd(s, gu, da, dgu, N, I, b->dt));
  pl_free_async(b->dev, da, s), da = NULL;
  pl_free_async(b->dev, gu, s), gu = NULL;
  /* dW_up += nᵀ·dgu (H×2I);  dn = dgu·W_upᵀ (N×H) */
  PL_TRY_GOTO(st, done,
              pl_gemm(s, true, false, H, 2 * I, N, 1.0f, n, H, dgu, 2 * I, 1.0f,
                      b->g_up, 2 * I, b->dt, PL_F32));
  pl_free_async(b->dev, n, s), n = NULL;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(b->dev, PL_ARENA_DEVICE, (size_t)(N * H) * es,
                             "activations", s, &dn));
  PL_TRY_GOTO(st, done,
              pl_gemm(s, false, true, N, H, 2 * I, 1.0f, dgu, 2 * I, b->w_up,
                      2 * I, 0.0f, dn, H, b->dt, b->dt));
  pl_free_async(b->dev, dgu, s), dgu = NULL;
  if (pl__allocs_as_cuda(s))
    PL_TRY_GOTO(st, done,
                pl_alloc_async(b->dev, PL_ARENA_DEVICE,
                               pl__rmsnorm_bwd_scratch(N, H) * 4, "activations",
                               s, (void **)&scratch));
  /* dx = dy (residual) + rmsnorm_bwd(dn); dx may alias dy: the kernel reads
   * dres[i] before writing dx[i] in the same thread */
  st = pl__rmsnorm_bwd(s, x, b->w_norm, dn, dy, dx, b->g_norm, scratch, N, H,
                       b->eps, b->dt);
done:
  pl_free_async(b->dev, n, s), pl_free_async(b->dev, gu, s),
      pl_free_async(b->dev, a, s);
  pl_free_async(b->dev, da, s), pl_free_async(b->dev, dgu, s),
      pl_free_async(b->dev, dn, s);
  pl_free_async(b->dev, scratch, s);
  return st;
}
