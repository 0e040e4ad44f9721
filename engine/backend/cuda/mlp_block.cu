/* mlp_block.cu — CUDA twins of the dense block's kernels (RMSNorm and SwiGLU,
 * forward and backward; backend/mlp_block_kernels.h), same signatures as
 * backend/cpu/mlp_block_cpu.c.
 * fp32 arithmetic, rounding to the storage dtype at the same points; the
 * weight-gradient reduction is two-pass in a fixed order (64-row partial sums,
 * then chunks in order), so results are deterministic run to run. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/cuda/internal_cuda.h"
#include "backend/mlp_block_kernels.h"

namespace {

constexpr int kRows = 64; /* rows per partial sum of dw */

__global__ void rmsnorm_fwd_kernel(const void *x, const void *w, void *n,
                                   int64_t H, float eps, pl_dtype dt) {
  size_t base = static_cast<size_t>(blockIdx.x) * H;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    float v = pl__cuda_ld(x, dt, base + j);
    ss += v * v;
  }
  float rstd = rsqrtf(pl__cuda_block_sum(ss) / static_cast<float>(H) + eps);
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x)
    pl__cuda_st(n, dt, base + j,
                pl__cuda_ld(x, dt, base + j) * rstd * pl__cuda_ld(w, dt, j));
}

__global__ void rmsnorm_bwd_dx_kernel(const void *x, const void *w,
                                      const void *dn, const void *dres,
                                      void *dx, float *rstd_out, int64_t H,
                                      float eps, pl_dtype dt) {
  size_t base = static_cast<size_t>(blockIdx.x) * H;
  float ss = 0.0f, dot = 0.0f;
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    float xv = pl__cuda_ld(x, dt, base + j);
    ss += xv * xv;
    dot += pl__cuda_ld(w, dt, j) * pl__cuda_ld(dn, dt, base + j) * xv;
  }
  float rstd = rsqrtf(pl__cuda_block_sum(ss) / static_cast<float>(H) + eps);
  dot = pl__cuda_block_sum(dot);
  float c = rstd * rstd * rstd / static_cast<float>(H) * dot;
  if (threadIdx.x == 0)
    rstd_out[blockIdx.x] = rstd;
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    float v = rstd * pl__cuda_ld(w, dt, j) * pl__cuda_ld(dn, dt, base + j) -
              c * pl__cuda_ld(x, dt, base + j);
    if (dres)
      v += pl__cuda_ld(dres, dt, base + j);
    pl__cuda_st(dx, dt, base + j, v);
  }
}

/* partial[chunk][j] = Σ_{r in chunk} dn_rj · x_rj · rstd_r (rows in order) */
__global__ void rmsnorm_dw_partial_kernel(const void *x, const void *dn,
                                          const float *rstd, float *partial,
                                          int64_t N, int64_t H, pl_dtype dt) {
  int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t chunk = blockIdx.y;
  if (j >= H)
    return;
  int64_t r0 = chunk * kRows, r1 = min(N, r0 + kRows);
  float acc = 0.0f;
  for (int64_t r = r0; r < r1; r++)
    acc += pl__cuda_ld(dn, dt, static_cast<size_t>(r * H + j)) *
           pl__cuda_ld(x, dt, static_cast<size_t>(r * H + j)) * rstd[r];
  partial[chunk * H + j] = acc;
}

__global__ void rmsnorm_dw_reduce_kernel(const float *partial, float *dw,
                                         int64_t chunks, int64_t H) {
  int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= H)
    return;
  float acc = 0.0f;
  for (int64_t c = 0; c < chunks; c++)
    acc += partial[c * H + j];
  dw[j] += acc;
}

__global__ void swiglu_fwd_kernel(const void *gu, void *a, int64_t N, int64_t I,
                                  pl_dtype dt) {
  size_t total = static_cast<size_t>(N) * I;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    size_t r = i / I, j = i % I;
    float g = pl__cuda_ld(gu, dt, r * 2 * I + j),
          u = pl__cuda_ld(gu, dt, r * 2 * I + I + j);
    pl__cuda_st(a, dt, i, g / (1.0f + expf(-g)) * u);
  }
}

__global__ void swiglu_bwd_kernel(const void *gu, const void *da, void *dgu,
                                  int64_t N, int64_t I, pl_dtype dt) {
  size_t total = static_cast<size_t>(N) * I;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    size_t r = i / I, j = i % I;
    float g = pl__cuda_ld(gu, dt, r * 2 * I + j),
          u = pl__cuda_ld(gu, dt, r * 2 * I + I + j);
    float d = pl__cuda_ld(da, dt, i);
    float sg = 1.0f / (1.0f + expf(-g));
    float dsilu = sg * (1.0f + g * (1.0f - sg));
    pl__cuda_st(dgu, dt, r * 2 * I + j, d * u * dsilu);
    pl__cuda_st(dgu, dt, r * 2 * I + I + j, d * g * sg);
  }
}

pl_status check_launch(const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "%s launch: %s", what,
                        cudaGetErrorString(e));
  return PL_OK;
}

int grid_for(size_t total) {
  size_t g = (total + 255) / 256;
  return static_cast<int>(g < 65535 * 8 ? (g > 0 ? g : 1) : 65535 * 8);
}

} // namespace

extern "C" pl_status pl__cuda_rmsnorm_fwd(pl_stream *s, const void *x,
                                          const void *w, void *n, int64_t N,
                                          int64_t H, float eps, pl_dtype dt) {
  if (N == 0)
    return PL_OK;
  cudaStream_t cs = static_cast<cudaStream_t>(pl_stream_native(s));
  rmsnorm_fwd_kernel<<<static_cast<unsigned>(N), 256, 0, cs>>>(x, w, n, H, eps,
                                                               dt);
  return check_launch("rmsnorm_fwd_kernel");
}

extern "C" pl_status pl__cuda_rmsnorm_bwd(pl_stream *s, const void *x,
                                          const void *w, const void *dn,
                                          const void *dres, void *dx, float *dw,
                                          float *scratch, int64_t N, int64_t H,
                                          float eps, pl_dtype dt) {
  if (N == 0)
    return PL_OK;
  if (!scratch)
    return pl_set_error(
        PL_EINVAL,
        "rmsnorm_bwd: CUDA needs scratch of pl__rmsnorm_bwd_scratch() floats");
  cudaStream_t cs = static_cast<cudaStream_t>(pl_stream_native(s));
  float *rstd = scratch, *partial = scratch + N;
  rmsnorm_bwd_dx_kernel<<<static_cast<unsigned>(N), 256, 0, cs>>>(
      x, w, dn, dres, dx, rstd, H, eps, dt);
  PL_TRY(check_launch("rmsnorm_bwd_dx_kernel"));
  int64_t chunks = (N + kRows - 1) / kRows;
  dim3 grid(static_cast<unsigned>((H + 127) / 128),
            static_cast<unsigned>(chunks));
  rmsnorm_dw_partial_kernel<<<grid, 128, 0, cs>>>(x, dn, rstd, partial, N, H,
                                                  dt);
  PL_TRY(check_launch("rmsnorm_dw_partial_kernel"));
  rmsnorm_dw_reduce_kernel<<<static_cast<unsigned>((H + 127) / 128), 128, 0,
                             cs>>>(partial, dw, chunks, H);
  return check_launch("rmsnorm_dw_reduce_kernel");
}

extern "C" pl_status pl__cuda_swiglu_fwd(pl_stream *s, const void *gu, void *a,
                                         int64_t N, int64_t I, pl_dtype dt) {
  size_t total = static_cast<size_t>(N) * I;
  if (total == 0)
    return PL_OK;
  cudaStream_t cs = static_cast<cudaStream_t>(pl_stream_native(s));
  swiglu_fwd_kernel<<<grid_for(total), 256, 0, cs>>>(gu, a, N, I, dt);
  return check_launch("swiglu_fwd_kernel");
}

extern "C" pl_status pl__cuda_swiglu_bwd(pl_stream *s, const void *gu,
                                         const void *da, void *dgu, int64_t N,
                                         int64_t I, pl_dtype dt) {
  size_t total = static_cast<size_t>(N) * I;
  if (total == 0)
    return PL_OK;
  cudaStream_t cs = static_cast<cudaStream_t>(pl_stream_native(s));
  swiglu_bwd_kernel<<<grid_for(total), 256, 0, cs>>>(gu, da, dgu, N, I, dt);
  return check_launch("swiglu_bwd_kernel");
}
