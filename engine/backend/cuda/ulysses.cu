/* ulysses.cu — CUDA twin of the Ulysses pack/unpack
 * (backend/ulysses_kernels.h): dst [B][A][C] = src [A][B][C]; one block row per
 * (a, b), moved in 16-byte words when the row allows it, else 4-byte words. */
#include <cuda_runtime.h>

#include "backend/ulysses_kernels.h"

template <typename W>
static __global__ void transpose01_kernel(W *dst, const W *src, int64_t A, int64_t B,
                                          int64_t words) {
  const int64_t r = blockIdx.x; /* r = a·B + b (source row) */
  const int64_t a = r / B, b = r % B;
  const W *sp = src + r * words;
  W *dp = dst + (b * A + a) * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dp[i] = sp[i];
}

extern "C" pl_status pl__cuda_transpose01(pl_stream *s, void *dst, const void *src, int64_t A, int64_t B, int64_t C, size_t es) {
  const size_t row = (size_t)C * es;
  if (A * B == 0 || row == 0) return PL_OK;
  if (A * B > 0x7fffffffLL)
    return pl_set_error(PL_EINVAL, "transpose01: %lld rows: too many", (long long)(A * B));
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const bool v16 = row % 16 == 0 && ((uintptr_t)dst % 16 == 0) && ((uintptr_t)src % 16 == 0);
  if (v16)
    transpose01_kernel<uint4><<<(unsigned)(A * B), 128, 0, st>>>(
        (uint4 *)dst, (const uint4 *)src, A, B, (int64_t)(row / 16));
  else if (row % 4 == 0)
    transpose01_kernel<uint32_t><<<(unsigned)(A * B), 128, 0, st>>>(
        (uint32_t *)dst, (const uint32_t *)src, A, B, (int64_t)(row / 4));
  else
    return pl_set_error(PL_EINVAL, "transpose01: row of %zu bytes: need a multiple of 4", row);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "transpose01: launch: %s", cudaGetErrorString(e));
  return PL_OK;
}
