/* backend/cuda/kernels.cu — the CUDA twins of the CPU backend's element-wise
 * kernels (kernels.h): RNG fill, constant fill, f32<->bf16 convert, scale,
 * axpy, and the async copies (same device and peer).
 *
 * Every value is computed with the helpers of plateau/host_device.h (the
 * counter-based RNG, pl_f32_to_bf16 rounding, __f*_rn arithmetic that the
 * compiler cannot contract into an FMA), so the bits equal the CPU backend's
 * for the same inputs.  Kernels are grid-stride loops; when every pointer is
 * aligned they move 16 bytes per load/store (V elements of the widest dtype
 * involved) and finish the n % V tail element by element.  Launchers take the
 * explicit stream, make the stream's GPU current, and check the launch. */
#include <stdint.h>
#include <string.h>

#include "backend/cuda/internal_cuda.h"
#include "backend/kernels.h"
#include "plateau/host_device.h"

/* ---- device helpers ------------------------------------------------------ */

/* V consecutive elements, aligned so one access moves sizeof(T)·V bytes. */
template <typename T, int V> struct alignas(sizeof(T) * V) pack { T v[V]; };

__device__ __forceinline__ float ld_f(float x) {
  return x;
}
__device__ __forceinline__ float ld_f(pl_bf16 x) {
  return pl_bf16_to_f32(x);
}
template <typename T> __device__ __forceinline__ T st_f(float v);
template <> __device__ __forceinline__ float st_f<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ pl_bf16 st_f<pl_bf16>(float v) {
  return pl_f32_to_bf16(v);
}

__device__ __forceinline__ size_t grid_tid() {
  return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t grid_stride() {
  return (size_t)gridDim.x * blockDim.x;
}

__device__ __forceinline__ float rng_draw(uint64_t seed, uint64_t i, int dist,
                                          float a, float b) {
  return dist == PL_DIST_UNIFORM ? pl_rng_uniform(seed, i, a, b)
                                 : pl_rng_normal(seed, i, a, b);
}

/* ---- kernels ------------------------------------------------------------- */
/* Each processes n elements: n / V packs in a grid-stride loop, then the
 * n % V tail (V == 1: no tail). */

/* dst[i] = draw(seed, offset + i) rounded to T. */
template <typename T, int V>
static __global__ void rng_fill_kernel(T *dst, size_t n, uint64_t seed,
                                       uint64_t offset, int dist, float a,
                                       float b) {
  size_t np = n / V;
  for (size_t p = grid_tid(); p < np; p += grid_stride()) {
    pack<T, V> r;
#pragma unroll
    for (int j = 0; j < V; j++)
      r.v[j] = st_f<T>(rng_draw(seed, offset + p * V + j, dist, a, b));
    reinterpret_cast<pack<T, V> *>(dst)[p] = r;
  }
  for (size_t i = np * V + grid_tid(); i < n; i += grid_stride())
    dst[i] = st_f<T>(rng_draw(seed, offset + i, dist, a, b));
}

/* dst[i] = v, by bit pattern (U is an unsigned integer of the element size). */
template <typename U, int V>
static __global__ void fill_kernel(U *dst, size_t n, U v) {
  size_t np = n / V;
  pack<U, V> r;
#pragma unroll
  for (int j = 0; j < V; j++)
    r.v[j] = v;
  for (size_t p = grid_tid(); p < np; p += grid_stride())
    reinterpret_cast<pack<U, V> *>(dst)[p] = r;
  for (size_t i = np * V + grid_tid(); i < n; i += grid_stride())
    dst[i] = v;
}

/* dst[i] = D(src[i]) through f32 (f32 -> bf16 rounds to nearest even). */
template <typename D, typename S, int V>
static __global__ void convert_kernel(D *dst, const S *src, size_t n) {
  size_t np = n / V;
  for (size_t p = grid_tid(); p < np; p += grid_stride()) {
    pack<S, V> x = reinterpret_cast<const pack<S, V> *>(src)[p];
    pack<D, V> r;
#pragma unroll
    for (int j = 0; j < V; j++)
      r.v[j] = st_f<D>(ld_f(x.v[j]));
    reinterpret_cast<pack<D, V> *>(dst)[p] = r;
  }
  for (size_t i = np * V + grid_tid(); i < n; i += grid_stride())
    dst[i] = st_f<D>(ld_f(src[i]));
}

/* x[i] = T(x[i] · alpha), computed in f32. */
template <typename T, int V>
static __global__ void scale_kernel(T *x, size_t n, float alpha) {
  size_t np = n / V;
  for (size_t p = grid_tid(); p < np; p += grid_stride()) {
    pack<T, V> r = reinterpret_cast<pack<T, V> *>(x)[p];
#pragma unroll
    for (int j = 0; j < V; j++)
      r.v[j] = st_f<T>(PL_FMUL(ld_f(r.v[j]), alpha));
    reinterpret_cast<pack<T, V> *>(x)[p] = r;
  }
  for (size_t i = np * V + grid_tid(); i < n; i += grid_stride())
    x[i] = st_f<T>(PL_FMUL(ld_f(x[i]), alpha));
}

/* y[i] = Y(y[i] + alpha · x[i]), computed in f32, no FMA contraction. */
template <typename Y, typename X, int V>
static __global__ void axpy_kernel(Y *y, const X *x, size_t n, float alpha) {
  size_t np = n / V;
  for (size_t p = grid_tid(); p < np; p += grid_stride()) {
    pack<Y, V> r = reinterpret_cast<pack<Y, V> *>(y)[p];
    pack<X, V> a = reinterpret_cast<const pack<X, V> *>(x)[p];
#pragma unroll
    for (int j = 0; j < V; j++)
      r.v[j] = st_f<Y>(PL_FADD(ld_f(r.v[j]), PL_FMUL(alpha, ld_f(a.v[j]))));
    reinterpret_cast<pack<Y, V> *>(y)[p] = r;
  }
  for (size_t i = np * V + grid_tid(); i < n; i += grid_stride())
    y[i] = st_f<Y>(PL_FADD(ld_f(y[i]), PL_FMUL(alpha, ld_f(x[i]))));
}

/* ---- launchers ----------------------------------------------------------- */

static inline bool aligned(const void *p, size_t a) {
  return ((uintptr_t)p % a) == 0;
}

/* The stream's device, current on this thread; EINVAL for a NULL stream. */
static pl_status begin(pl_stream *s, const char *op, cudaStream_t *cs,
                       pl_dev **dev) {
  if (!s || !s->dev)
    return pl_set_error(PL_EINVAL,
                        "%s: stream is NULL (pass a stream of a "
                        "CUDA device)",
                        op);
  PL_TRY(pl__cuda_use(s->dev));
  *cs = (cudaStream_t)s->native;
  *dev = s->dev;
  return PL_OK;
}

static bool float_dtype(pl_dtype dt) {
  return dt == PL_F32 || dt == PL_BF16;
}

/* Launch kernel<..., V> when `ok` (all pointers aligned for V), else <..., 1>.
 * Blocks are sized by the vector pack count. */
#define PL_LAUNCH_VEC(ok, V, kname, kvec, kone, dev, cs, n, ...)               \
  do {                                                                         \
    if (ok)                                                                    \
      kvec<<<pl__cuda_blocks(dev, (n) / (V) + 1), PL_CUDA_THREADS, 0, cs>>>(   \
          __VA_ARGS__);                                                        \
    else                                                                       \
      kone<<<pl__cuda_blocks(dev, n), PL_CUDA_THREADS, 0, cs>>>(__VA_ARGS__);  \
    PL_CUDA_CHECK_LAUNCH(kname);                                               \
  } while (0)

extern "C" pl_status pl__cuda_rng_fill(pl_stream *s, void *dst, pl_dtype dt,
                                       size_t n, uint64_t seed, uint64_t offset,
                                       pl_dist dist, float a, float b) {
  cudaStream_t cs = 0;
  pl_dev *dev = NULL;
  PL_TRY(begin(s, "pl_rng_fill", &cs, &dev));
  if (!float_dtype(dt))
    return pl_set_error(PL_EINVAL, "pl_rng_fill: dtype %s: must be f32 or bf16",
                        pl_dtype_name(dt));
  if (dist != PL_DIST_UNIFORM && dist != PL_DIST_NORMAL)
    return pl_set_error(PL_EINVAL,
                        "pl_rng_fill: dist %d: must be "
                        "PL_DIST_UNIFORM or PL_DIST_NORMAL",
                        (int)dist);
  if (n == 0)
    return PL_OK;
  bool ok = aligned(dst, 16);
  if (dt == PL_F32)
    PL_LAUNCH_VEC(ok, 4, "rng_fill_kernel<f32>", (rng_fill_kernel<float, 4>),
                  (rng_fill_kernel<float, 1>), dev, cs, n, (float *)dst, n,
                  seed, offset, (int)dist, a, b);
  else
    PL_LAUNCH_VEC(ok, 8, "rng_fill_kernel<bf16>", (rng_fill_kernel<pl_bf16, 8>),
                  (rng_fill_kernel<pl_bf16, 1>), dev, cs, n, (pl_bf16 *)dst, n,
                  seed, offset, (int)dist, a, b);
  return PL_OK;
}

extern "C" pl_status pl__cuda_fill(pl_stream *s, void *dst, pl_dtype dt,
                                   size_t n, double value) {
  cudaStream_t cs = 0;
  pl_dev *dev = NULL;
  PL_TRY(begin(s, "pl_fill", &cs, &dev));
  bool ok = aligned(dst, 16);
  switch (dt) {
  case PL_F32: {
    float f = (float)value;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (n)
      PL_LAUNCH_VEC(ok, 4, "fill_kernel<f32>", (fill_kernel<uint32_t, 4>),
                    (fill_kernel<uint32_t, 1>), dev, cs, n, (uint32_t *)dst, n,
                    u);
    return PL_OK;
  }
  case PL_BF16: {
    uint16_t u = pl_f32_to_bf16((float)value);
    if (n)
      PL_LAUNCH_VEC(ok, 8, "fill_kernel<bf16>", (fill_kernel<uint16_t, 8>),
                    (fill_kernel<uint16_t, 1>), dev, cs, n, (uint16_t *)dst, n,
                    u);
    return PL_OK;
  }
  case PL_I32: {
    if (!(value >= -2147483648.0 && value <= 2147483647.0))
      return pl_set_error(PL_EINVAL, "pl_fill: value %g: must fit in i32",
                          value);
    int32_t i = (int32_t)value;
    uint32_t u;
    memcpy(&u, &i, 4);
    if (n)
      PL_LAUNCH_VEC(ok, 4, "fill_kernel<i32>", (fill_kernel<uint32_t, 4>),
                    (fill_kernel<uint32_t, 1>), dev, cs, n, (uint32_t *)dst, n,
                    u);
    return PL_OK;
  }
  case PL_I64: {
    /* 2^63 itself is out of range; -2^63 is in. */
    if (!(value >= -9223372036854775808.0 && value < 9223372036854775808.0))
      return pl_set_error(PL_EINVAL, "pl_fill: value %g: must fit in i64",
                          value);
    int64_t i = (int64_t)value;
    uint64_t u;
    memcpy(&u, &i, 8);
    if (n)
      PL_LAUNCH_VEC(ok, 2, "fill_kernel<i64>", (fill_kernel<uint64_t, 2>),
                    (fill_kernel<uint64_t, 1>), dev, cs, n, (uint64_t *)dst, n,
                    u);
    return PL_OK;
  }
  }
  return pl_set_error(PL_EINVAL,
                      "pl_fill: dtype %d: must be f32, bf16, i32 "
                      "or i64",
                      (int)dt);
}

extern "C" pl_status pl__cuda_convert(pl_stream *s, void *dst, pl_dtype dst_dt,
                                      const void *src, pl_dtype src_dt,
                                      size_t n) {
  cudaStream_t cs = 0;
  pl_dev *dev = NULL;
  PL_TRY(begin(s, "pl_convert", &cs, &dev));
  if (dst_dt == src_dt) {
    size_t es = pl_dtype_size(dst_dt);
    if (es == 0)
      return pl_set_error(PL_EINVAL, "pl_convert: dtype %d: unknown",
                          (int)dst_dt);
    if (n && dst != src)
      PL_CUDA_TRY(cudaMemcpyAsync(dst, src, n * es, cudaMemcpyDefault, cs));
    return PL_OK;
  }
  if (!float_dtype(dst_dt) || !float_dtype(src_dt))
    return pl_set_error(PL_EINVAL,
                        "pl_convert: %s -> %s: only f32 <-> bf16 "
                        "(or a copy between equal dtypes)",
                        pl_dtype_name(src_dt), pl_dtype_name(dst_dt));
  if (n == 0)
    return PL_OK;
  /* 4 elements per pack: 16 bytes of f32, 8 of bf16. */
  bool ok = aligned(dst, 16) && aligned(src, 16);
  if (dst_dt == PL_BF16)
    PL_LAUNCH_VEC(ok, 4, "convert_kernel<bf16,f32>",
                  (convert_kernel<pl_bf16, float, 4>),
                  (convert_kernel<pl_bf16, float, 1>), dev, cs, n,
                  (pl_bf16 *)dst, (const float *)src, n);
  else
    PL_LAUNCH_VEC(ok, 4, "convert_kernel<f32,bf16>",
                  (convert_kernel<float, pl_bf16, 4>),
                  (convert_kernel<float, pl_bf16, 1>), dev, cs, n, (float *)dst,
                  (const pl_bf16 *)src, n);
  return PL_OK;
}

extern "C" pl_status pl__cuda_scale(pl_stream *s, void *x, pl_dtype dt,
                                    size_t n, float alpha) {
  cudaStream_t cs = 0;
  pl_dev *dev = NULL;
  PL_TRY(begin(s, "pl_scale", &cs, &dev));
  if (!float_dtype(dt))
    return pl_set_error(PL_EINVAL, "pl_scale: dtype %s: must be f32 or bf16",
                        pl_dtype_name(dt));
  if (n == 0)
    return PL_OK;
  bool ok = aligned(x, 16);
  if (dt == PL_F32)
    PL_LAUNCH_VEC(ok, 4, "scale_kernel<f32>", (scale_kernel<float, 4>),
                  (scale_kernel<float, 1>), dev, cs, n, (float *)x, n, alpha);
  else
    PL_LAUNCH_VEC(ok, 8, "scale_kernel<bf16>", (scale_kernel<pl_bf16, 8>),
                  (scale_kernel<pl_bf16, 1>), dev, cs, n, (pl_bf16 *)x, n,
                  alpha);
  return PL_OK;
}

extern "C" pl_status pl__cuda_axpy(pl_stream *s, void *y, pl_dtype y_dt,
                                   const void *x, pl_dtype x_dt, size_t n,
                                   float alpha) {
  cudaStream_t cs = 0;
  pl_dev *dev = NULL;
  PL_TRY(begin(s, "pl_axpy", &cs, &dev));
  if (n == 0 && float_dtype(y_dt) && float_dtype(x_dt) &&
      !(y_dt == PL_BF16 && x_dt == PL_F32))
    return PL_OK;
  if (y_dt == PL_F32 && x_dt == PL_F32) {
    bool ok = aligned(y, 16) && aligned(x, 16);
    PL_LAUNCH_VEC(ok, 4, "axpy_kernel<f32,f32>", (axpy_kernel<float, float, 4>),
                  (axpy_kernel<float, float, 1>), dev, cs, n, (float *)y,
                  (const float *)x, n, alpha);
  } else if (y_dt == PL_BF16 && x_dt == PL_BF16) {
    bool ok = aligned(y, 16) && aligned(x, 16);
    PL_LAUNCH_VEC(ok, 8, "axpy_kernel<bf16,bf16>",
                  (axpy_kernel<pl_bf16, pl_bf16, 8>),
                  (axpy_kernel<pl_bf16, pl_bf16, 1>), dev, cs, n, (pl_bf16 *)y,
                  (const pl_bf16 *)x, n, alpha);
  } else if (y_dt == PL_F32 && x_dt == PL_BF16) {
    bool ok = aligned(y, 16) && aligned(x, 8);
    PL_LAUNCH_VEC(ok, 4, "axpy_kernel<f32,bf16>",
                  (axpy_kernel<float, pl_bf16, 4>),
                  (axpy_kernel<float, pl_bf16, 1>), dev, cs, n, (float *)y,
                  (const pl_bf16 *)x, n, alpha);
  } else {
    return pl_set_error(PL_EINVAL,
                        "pl_axpy: y %s, x %s: allowed are f32/f32, "
                        "bf16/bf16 and y f32 with x bf16",
                        pl_dtype_name(y_dt), pl_dtype_name(x_dt));
  }
  return PL_OK;
}

/* ---- copies -------------------------------------------------------------- */

extern "C" pl_status pl__cuda_memcpy_async(pl_stream *s, void *dst,
                                           const void *src, size_t bytes) {
  cudaStream_t cs = 0;
  pl_dev *dev = NULL;
  PL_TRY(begin(s, "pl_memcpy_async", &cs, &dev));
  if (bytes == 0)
    return PL_OK;
  /* cudaMemcpyDefault: the direction comes from unified addressing. */
  PL_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cs));
  return PL_OK;
}

/* Peer access between two GPUs of this process is enabled once per ordered
 * pair (process-wide, like the CUDA state it mirrors): the contexts' peer
 * mappings, and access of each device to the other's default pool (pool
 * memory is not covered by cudaDeviceEnablePeerAccess).  Without it the copy
 * still works, staged by the driver; with it, it goes over NVLink. */
#define PL_CUDA_MAX_PEERS 64
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char peer_done[PL_CUDA_MAX_PEERS][PL_CUDA_MAX_PEERS];

/* Let device `from` access memory of device `to` (both in this process). */
static pl_status enable_peer(const pl_dev *from, const pl_dev *to) {
  int can = 0;
  PL_CUDA_TRY(cudaDeviceCanAccessPeer(&can, from->ordinal, to->ordinal));
  if (!can)
    return PL_OK;
  PL_TRY(pl__cuda_use(from));
  cudaError_t e = cudaDeviceEnablePeerAccess(to->ordinal, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled)
    (void)cudaGetLastError();
  else
    PL_CUDA_TRY(e);
  cudaMemAccessDesc d = {};
  d.location.type = cudaMemLocationTypeDevice;
  d.location.id = from->ordinal;
  d.flags = cudaMemAccessFlagsProtReadWrite;
  PL_CUDA_TRY(cudaMemPoolSetAccess(PL_CUDA_IMPL(to)->pool, &d, 1));
  return PL_OK;
}

static pl_status ensure_peers(const pl_dev *a, const pl_dev *b) {
  if (a->ordinal >= PL_CUDA_MAX_PEERS || b->ordinal >= PL_CUDA_MAX_PEERS)
    return PL_OK; /* no cache slot: the copy is still correct, just staged */
  pl_status st = PL_OK;
  pthread_mutex_lock(&peer_lock);
  if (!peer_done[a->ordinal][b->ordinal]) {
    PL_TRY_GOTO(st, done, enable_peer(a, b));
    PL_TRY_GOTO(st, done, enable_peer(b, a));
    peer_done[a->ordinal][b->ordinal] = peer_done[b->ordinal][a->ordinal] = 1;
  }
done:
  pthread_mutex_unlock(&peer_lock);
  return st;
}

extern "C" pl_status pl__cuda_memcpy_peer_async(pl_stream *s, void *dst,
                                                const pl_dev *dst_dev,
                                                const void *src,
                                                const pl_dev *src_dev,
                                                size_t bytes) {
  cudaStream_t cs = 0;
  pl_dev *dev = NULL;
  PL_TRY(begin(s, "pl_memcpy_peer_async", &cs, &dev));
  if (!dst_dev || !src_dev || dst_dev->backend != PL_BACKEND_CUDA ||
      src_dev->backend != PL_BACKEND_CUDA)
    return pl_set_error(PL_EINVAL, "pl_memcpy_peer_async: both devices must be "
                                   "CUDA devices of this process");
  if (bytes == 0)
    return PL_OK;
  if (dst_dev->ordinal == src_dev->ordinal) {
    PL_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cs));
    return PL_OK;
  }
  PL_TRY(ensure_peers(dst_dev, src_dev));
  PL_TRY(pl__cuda_use(dev)); /* ensure_peers switched devices */
  PL_CUDA_TRY(cudaMemcpyPeerAsync(dst, dst_dev->ordinal, src, src_dev->ordinal,
                                  bytes, cs));
  return PL_OK;
}
