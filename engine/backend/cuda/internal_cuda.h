/* backend/cuda/internal_cuda.h — what the CUDA backend's .cu files share: the
 * per-device state kept in pl_dev.impl, the checking macros every CUDA and
 * cuBLAS call goes through, and the device-side loads, stores and block sum
 * of the kernels.  The launchers' prototypes are in the family headers
 * (backend/<family>.h).  Included by .cu files only (it needs the CUDA
 * headers).
 *
 * Why the macros: every call is checked and a failure becomes PL_ERUNTIME with
 * a message naming the call, the error and file:line; the non-sticky error
 * state is cleared (cudaGetLastError) so the next call does not see it. */
#ifndef PLATEAU_BACKEND_CUDA_INTERNAL_H
#define PLATEAU_BACKEND_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pl_dev.impl of a CUDA device. */
typedef struct pl__cuda_dev {
  cublasHandle_t blas;
  pthread_mutex_t blas_lock; /* the handle's stream is per call: serialize */
  cudaMemPool_t pool;        /* the device's default pool                   */
  int sm_count;              /* sizes grid-stride launches                  */
  void *cudnn; /* cuDNN handle and cached attention plans (attention_cudnn.cpp),
                  made with the first cuDNN call; NULL until then            */
} pl__cuda_dev;

#define PL_CUDA_IMPL(dev) ((pl__cuda_dev *)(dev)->impl)

/* The cudaStream_t of s; s NULL means the device's default stream (the legacy
 * stream 0 only while the default stream does not exist yet, in init). */
cudaStream_t pl__cuda_stream_of(pl_dev *dev, pl_stream *s);
/* Make dev's GPU current on this thread (several GPUs in one process). */
pl_status pl__cuda_use(const pl_dev *dev);
/* Blocks for a grid-stride launch over `items` work items of 256 threads. */
unsigned pl__cuda_blocks(const pl_dev *dev, size_t items);

#define PL_CUDA_THREADS 256

#define PL_CUDA_TRY(call)                                                      \
  do {                                                                         \
    cudaError_t pl_cu_e_ = (call);                                             \
    if (pl_cu_e_ != cudaSuccess) {                                             \
      (void)cudaGetLastError();                                                \
      return pl_set_error(PL_ERUNTIME, "%s failed: %s (%s) at %s:%d", #call,   \
                          cudaGetErrorName(pl_cu_e_),                          \
                          cudaGetErrorString(pl_cu_e_), __FILE__, __LINE__);   \
    }                                                                          \
  } while (0)

/* After a <<<...>>> launch: the launch configuration and any earlier
 * asynchronous error surface here. */
#define PL_CUDA_CHECK_LAUNCH(name)                                             \
  do {                                                                         \
    cudaError_t pl_cu_e_ = cudaGetLastError();                                 \
    if (pl_cu_e_ != cudaSuccess)                                               \
      return pl_set_error(PL_ERUNTIME, "launch of %s failed: %s (%s)", name,   \
                          cudaGetErrorName(pl_cu_e_),                          \
                          cudaGetErrorString(pl_cu_e_));                       \
  } while (0)

#define PL_CUBLAS_TRY(call)                                                    \
  do {                                                                         \
    cublasStatus_t pl_cb_e_ = (call);                                          \
    if (pl_cb_e_ != CUBLAS_STATUS_SUCCESS) {                                   \
      (void)cudaGetLastError();                                                \
      return pl_set_error(PL_ERUNTIME, "%s failed: %s (%s) at %s:%d", #call,   \
                          cublasGetStatusName(pl_cb_e_),                       \
                          cublasGetStatusString(pl_cb_e_), __FILE__,           \
                          __LINE__);                                           \
    }                                                                          \
  } while (0)

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cuda_bf16.h>

/* Device-side element i of a float or __nv_bfloat16 array as f32, and back
 * (round to nearest even): the loads and stores of kernels templated on the
 * element type. */
template <typename T>
static __device__ __forceinline__ float pl__cuda_ldt(const T *p, size_t i);
template <>
__device__ __forceinline__ float pl__cuda_ldt<float>(const float *p, size_t i) {
  return p[i];
}
template <>
__device__ __forceinline__ float
pl__cuda_ldt<__nv_bfloat16>(const __nv_bfloat16 *p, size_t i) {
  return __bfloat162float(p[i]);
}
template <typename T>
static __device__ __forceinline__ void pl__cuda_stt(T *p, size_t i, float v);
template <>
__device__ __forceinline__ void pl__cuda_stt<float>(float *p, size_t i,
                                                    float v) {
  p[i] = v;
}
template <>
__device__ __forceinline__ void pl__cuda_stt<__nv_bfloat16>(__nv_bfloat16 *p,
                                                            size_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

/* The same with the dtype known at run time only: the element-wise kernels'
 * loads and stores of f32 or bf16 arrays. */
static __device__ __forceinline__ float pl__cuda_ld(const void *p, pl_dtype dt,
                                                    size_t i) {
  return dt == PL_F32 ? pl__cuda_ldt(static_cast<const float *>(p), i)
                      : pl__cuda_ldt(static_cast<const __nv_bfloat16 *>(p), i);
}
static __device__ __forceinline__ void pl__cuda_st(void *p, pl_dtype dt,
                                                   size_t i, float v) {
  if (dt == PL_F32)
    pl__cuda_stt(static_cast<float *>(p), i, v);
  else
    pl__cuda_stt(static_cast<__nv_bfloat16 *>(p), i, v);
}

/* The sum of v over the block (blockDim.x a multiple of 32, at most 1024),
 * returned to every thread; a barrier inside: call it from all threads. */
static __device__ __forceinline__ float pl__cuda_block_sum(float v) {
  __shared__ float warp_sums[32];
  __shared__ float total;
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    warp_sums[warp] = v;
  __syncthreads();
  int nw = blockDim.x >> 5;
  v = lane < nw ? warp_sums[lane] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1)
      v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x == 0)
    total = v;
  __syncthreads();
  return total;
}
#endif
#endif
