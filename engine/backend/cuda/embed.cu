/* embed.cu — CUDA twins of the token embedding's kernels
 * (backend/embed_kernels.h): one thread per (token, column) for the row copy,
 * and per (token, column) an f32 atomicAdd into dE for the backward. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/cuda/internal_cuda.h"
#include "backend/embed_kernels.h"

template <typename T>
static __global__ void embed_fwd_kernel(T *x, const T *E, const int32_t *tok,
                                        int64_t N, int64_t H) {
  const int64_t n = N * H;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = i / H, j = i % H;
    x[i] = E[(int64_t)tok[t] * H + j];
  }
}

template <typename T>
static __global__ void embed_bwd_kernel(float *dE, const T *dx,
                                        const int32_t *tok, int64_t N,
                                        int64_t H) {
  const int64_t n = N * H;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = i / H, j = i % H;
    atomicAdd(dE + (int64_t)tok[t] * H + j, pl__cuda_ldt(dx, (size_t)i));
  }
}

extern "C" pl_status pl__cuda_embed_fwd(pl_stream *s, void *x, const void *E,
                                        const int32_t *tok, int64_t N,
                                        int64_t H, pl_dtype dt) {
  if (N == 0)
    return PL_OK;
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const unsigned blocks = pl__cuda_blocks(pl_stream_dev(s), (size_t)(N * H));
  if (dt == PL_BF16)
    embed_fwd_kernel<__nv_bfloat16><<<blocks, PL_CUDA_THREADS, 0, st>>>(
        (__nv_bfloat16 *)x, (const __nv_bfloat16 *)E, tok, N, H);
  else
    embed_fwd_kernel<float><<<blocks, PL_CUDA_THREADS, 0, st>>>(
        (float *)x, (const float *)E, tok, N, H);
  PL_CUDA_CHECK_LAUNCH("embed_fwd_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_embed_bwd(pl_stream *s, float *dE, const void *dx,
                                        const int32_t *tok, int64_t N,
                                        int64_t H, pl_dtype dt) {
  if (N == 0)
    return PL_OK;
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const unsigned blocks = pl__cuda_blocks(pl_stream_dev(s), (size_t)(N * H));
  if (dt == PL_BF16)
    embed_bwd_kernel<__nv_bfloat16><<<blocks, PL_CUDA_THREADS, 0, st>>>(
        dE, (const __nv_bfloat16 *)dx, tok, N, H);
  else
    embed_bwd_kernel<float>
        <<<blocks, PL_CUDA_THREADS, 0, st>>>(dE, (const float *)dx, tok, N, H);
  PL_CUDA_CHECK_LAUNCH("embed_bwd_kernel");
  return PL_OK;
}
