/* rope.cu — CUDA twin of the rotary position embedding kernel
 * (backend/rope_kernels.h): one thread per (token, pair i); angle in double
 * (sincos), values in fp32, all heads of the token rotated with the same (cos,
 * sin). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/cuda/internal_cuda.h"
#include "backend/rope_kernels.h"

template <typename T>
static __global__ void rope_kernel(T *x, int64_t BS, int64_t S, int nh, int d,
                                   int64_t pos0, double theta, double sg) {
  const int half = d / 2;
  const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= BS * half)
    return;
  const int64_t t = idx / half;
  const int i = (int)(idx % half);
  const double p = (double)(pos0 + t % S);
  double sn, cs;
  sincos(p * pow(theta, -2.0 * i / d), &sn, &cs);
  const float c = (float)cs, s = (float)(sg * sn);
  for (int h = 0; h < nh; h++) {
    T *r = x + (t * nh + h) * (int64_t)d +
           i; /* elements i and i + half of the head */
    const float x1 = pl__cuda_ldt(r, 0), x2 = pl__cuda_ldt(r + half, 0);
    pl__cuda_stt(r, 0, x1 * c - x2 * s);
    pl__cuda_stt(r + half, 0, x1 * s + x2 * c);
  }
}

extern "C" pl_status pl__cuda_rope(pl_stream *s, void *x, pl_dtype dt,
                                   int64_t B, int64_t S, int n_h, int d,
                                   int64_t pos0, double theta, int inverse) {
  cudaStream_t st = (cudaStream_t)pl_stream_native(s);
  const int64_t n = B * S * (d / 2);
  const unsigned blocks = (unsigned)((n + 255) / 256);
  const double sg = inverse ? -1.0 : 1.0;
  if (dt == PL_BF16)
    rope_kernel<__nv_bfloat16><<<blocks, 256, 0, st>>>(
        (__nv_bfloat16 *)x, B * S, S, n_h, d, pos0, theta, sg);
  else
    rope_kernel<float>
        <<<blocks, 256, 0, st>>>((float *)x, B * S, S, n_h, d, pos0, theta, sg);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return pl_set_error(PL_ERUNTIME, "rope: launch: %s", cudaGetErrorString(e));
  return PL_OK;
}
