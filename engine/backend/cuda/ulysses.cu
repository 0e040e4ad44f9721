/* ulysses.cu — CUDA twin of the Ulysses pack/unpack
 * (backend/ulysses_kernels.h): transpose01 moves one row per block (a, b) in
 * 16-byte words when the row allows it, else 4-byte words; unpack_sum adds
 * the R replicas of each element in f32, one thread per output element. */
#include <cuda_runtime.h>

#include "backend/cuda/internal_cuda.h"
#include "backend/ulysses_kernels.h"

template <typename W>
static __global__ void transpose01_kernel(W *dst, const W *src, int64_t A,
                                          int64_t B, int64_t words) {
  const int64_t r = blockIdx.x; /* r = a·B + b (source row) */
  const int64_t a = r / B, b = r % B;
  const W *sp = src + r * words;
  W *dp = dst + (b * A + a) * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x)
    dp[i] = sp[i];
}

extern "C" pl_status pl__cuda_transpose01(pl_stream *s, void *dst,
                                          const void *src, int64_t A, int64_t B,
                                          int64_t C, size_t es) {
  const size_t row = (size_t)C * es;
  if (A * B == 0 || row == 0)
    return PL_OK;
  if (A * B > 0x7fffffffLL)
    return pl_set_error(PL_EINVAL, "transpose01: %lld rows: too many",
                        (long long)(A * B));
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const bool v16 =
      row % 16 == 0 && ((uintptr_t)dst % 16 == 0) && ((uintptr_t)src % 16 == 0);
  if (v16)
    transpose01_kernel<uint4><<<(unsigned)(A * B), 128, 0, st>>>(
        (uint4 *)dst, (const uint4 *)src, A, B, (int64_t)(row / 16));
  else if (row % 4 == 0)
    transpose01_kernel<uint32_t><<<(unsigned)(A * B), 128, 0, st>>>(
        (uint32_t *)dst, (const uint32_t *)src, A, B, (int64_t)(row / 4));
  else
    return pl_set_error(
        PL_EINVAL, "transpose01: row of %zu bytes: need a multiple of 4", row);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "transpose01: launch: %s",
                        cudaGetErrorString(e));
  return PL_OK;
}

template <typename T>
static __global__ void unpack_sum_kernel(T *dst, const T *src, int64_t G,
                                         int64_t R, int64_t N, int64_t C) {
  const int64_t total = N * G * C;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = i % C, g = (i / C) % G, n = i / (C * G);
    float acc = 0.f;
    for (int64_t r = 0; r < R; r++)
      acc += pl__cuda_ldt(src, (size_t)(((g * R + r) * N + n) * C + c));
    pl__cuda_stt(dst, (size_t)i, acc);
  }
}

extern "C" pl_status pl__cuda_unpack_sum(pl_stream *s, void *dst,
                                         const void *src, int64_t G, int64_t R,
                                         int64_t N, int64_t C, pl_dtype dt) {
  const int64_t total = N * G * C;
  if (total == 0)
    return PL_OK;
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const int64_t want = (total + 255) / 256;
  const unsigned blocks = (unsigned)(want < 65536 ? want : 65536);
  if (dt == PL_F32)
    unpack_sum_kernel<float>
        <<<blocks, 256, 0, st>>>((float *)dst, (const float *)src, G, R, N, C);
  else if (dt == PL_BF16)
    unpack_sum_kernel<__nv_bfloat16><<<blocks, 256, 0, st>>>(
        (__nv_bfloat16 *)dst, (const __nv_bfloat16 *)src, G, R, N, C);
  else
    return pl_set_error(PL_EINVAL, "unpack_sum: dtype %s: f32 or bf16",
                        pl_dtype_name(dt));
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "unpack_sum: launch: %s",
                        cudaGetErrorString(e));
  return PL_OK;
}
