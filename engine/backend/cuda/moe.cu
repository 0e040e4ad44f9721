/* moe.cu — CUDA twins of the MoE layer's kernels (backend/moe_kernels.h; the
 * CPU references are in backend/cpu/moe_cpu.c): row gather (permute), combine
 * (unpermute + weighted sum over a token's k routes, fixed j order, fp32
 * accumulation, one rounding), per-route scalar gather/scatter, SwiGLU forward
 * and backward (with the route-weight gradient as a per-row reduction), row
 * scaling, and the expert GEMM.
 *
 * The expert GEMM is a loop of cuBLAS GEMMs (pl_gemm: cublasGemmEx, bf16 in,
 * fp32 accumulate) over the groups of a chunk, issued by ops/moe_expert.c.
 * The group sizes are known on the host (every rank holds every count after
 * planning), so no size is read back from the device, and a plain loop needs
 * none of the device-side size arrays of cublasGemmGroupedBatchedEx, which is
 * also the slower of the two for large expert groups (the comparison is in
 * doc/performance/moe.md).
 *
 * The gathers, combines and scatters size their grids by the stream's grid
 * cap (pl_stream_set_grid_cap), which the layer sets on its comm stream from
 * cfg.comm_blocks; the SwiGLU and scaling kernels run on the compute stream. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backend/cuda/internal_cuda.h"
#include "backend/moe_kernels.h"

namespace {

/* One block per destination row; 16-byte words when the row allows. */
__global__ void moe_gather_kernel(void *dst, const void *src,
                                  const int32_t *rows, int64_t n,
                                  size_t row_bytes) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const char *s =
        static_cast<const char *>(src) + (size_t)rows[i] * row_bytes;
    char *d = static_cast<char *>(dst) + (size_t)i * row_bytes;
    if ((row_bytes & 15) == 0 &&
        ((reinterpret_cast<uintptr_t>(s) | reinterpret_cast<uintptr_t>(d)) &
         15) == 0) {
      const uint4 *__restrict__ s4 = reinterpret_cast<const uint4 *>(s);
      uint4 *__restrict__ d4 = reinterpret_cast<uint4 *>(d);
      const size_t nw = row_bytes / 16, step = blockDim.x;
      size_t w = threadIdx.x;
      for (; w + 3 * step < nw; w += 4 * step) { /* 4 loads in flight */
        uint4 a = s4[w], b = s4[w + step], c = s4[w + 2 * step],
              e = s4[w + 3 * step];
        d4[w] = a, d4[w + step] = b, d4[w + 2 * step] = c, d4[w + 3 * step] = e;
      }
      for (; w < nw; w += step)
        d4[w] = s4[w];
    } else {
      for (size_t b = threadIdx.x; b < row_bytes; b += blockDim.x)
        d[b] = s[b];
    }
  }
}

__global__ void moe_gather_f32_kernel(float *dst, const float *src,
                                      const int32_t *idx, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = src[idx[i]];
}

/* One block per token of the chunk. */
__global__ void moe_combine_kernel(void *out, const int32_t *toks, int64_t nt,
                                   const int32_t *slots, int k, const float *w,
                                   const void *A, const void *B, int64_t H,
                                   pl_dtype dt) {
  for (int64_t q = blockIdx.x; q < nt; q += gridDim.x) {
    int64_t t = toks[q];
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
      float acc = 0.0f;
      for (int j = 0; j < k; j++) {
        int32_t v = slots[q * k + j];
        const void *base = v >= 0 ? A : B;
        int64_t r = v >= 0 ? v : -1 - (int64_t)v;
        float wj = w ? w[t * k + j] : 1.0f;
        acc = __fadd_rn(
            acc, __fmul_rn(wj, pl__cuda_ld(base, dt, (size_t)(r * H + h))));
      }
      pl__cuda_st(out, dt, (size_t)(t * H + h), acc);
    }
  }
}

/* The bf16 combine, 8 values (16 bytes) per thread and load: the same
 * arithmetic per element as moe_combine_kernel (routes in j order, one fp32
 * product and sum each, one rounding), so the same bits. */
__global__ void moe_combine_bf16x8_kernel(__nv_bfloat16 *out,
                                          const int32_t *toks, int64_t nt,
                                          const int32_t *slots, int k,
                                          const float *w, const void *A,
                                          const void *B, int64_t H) {
  const int64_t nv = H / 8;
  for (int64_t q = blockIdx.x; q < nt; q += gridDim.x) {
    int64_t t = toks[q];
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
      float acc[8];
#pragma unroll
      for (int e = 0; e < 8; e++)
        acc[e] = 0.0f;
      for (int j = 0; j < k; j++) {
        int32_t s = slots[q * k + j];
        const void *base = s >= 0 ? A : B;
        int64_t r = s >= 0 ? s : -1 - (int64_t)s;
        float wj = w ? w[t * k + j] : 1.0f;
        uint4 u = reinterpret_cast<const uint4 *>(base)[r * nv + v];
        const __nv_bfloat16 *x = reinterpret_cast<const __nv_bfloat16 *>(&u);
#pragma unroll
        for (int e = 0; e < 8; e++)
          acc[e] = __fadd_rn(acc[e], __fmul_rn(wj, __bfloat162float(x[e])));
      }
      uint4 o;
      __nv_bfloat16 *y = reinterpret_cast<__nv_bfloat16 *>(&o);
#pragma unroll
      for (int e = 0; e < 8; e++)
        y[e] = __float2bfloat16_rn(acc[e]);
      reinterpret_cast<uint4 *>(out)[t * nv + v] = o;
    }
  }
}

__global__ void moe_scatter_f32_kernel(float *dst, const int32_t *toks,
                                       int64_t nt, const int32_t *slots, int k,
                                       const float *a, const float *b) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nt * k;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t q = i / k;
    int j = (int)(i % k);
    int32_t v = slots[i];
    dst[(int64_t)toks[q] * k + j] = v >= 0 ? a[v] : b[-1 - (int64_t)v];
  }
}

__device__ __forceinline__ float sigm(float g) {
  return 1.0f / (1.0f + expf(-g));
}

template <typename T>
__global__ void swiglu_fwd_t(T *A, const T *G, const T *U, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float g = pl__cuda_ldt(G, i), u = pl__cuda_ldt(U, i);
    pl__cuda_stt(A, i, g * sigm(g) * u);
  }
}

/* One block per row: dw[r] = sum_i P*A (block reduction), then the
 * elementwise dG, dU in place. */
template <typename T>
__global__ void swiglu_bwd_t(T *G, T *U, const T *P, const T *A, const float *w,
                             float *dw, int64_t n, int64_t I) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    size_t base = (size_t)r * I;
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < I; i += blockDim.x)
      acc += pl__cuda_ldt(P, base + i) * pl__cuda_ldt(A, base + i);
    float s = pl__cuda_block_sum(acc);
    if (threadIdx.x == 0)
      dw[r] = s;
    float wr = w[r];
    for (int64_t i = threadIdx.x; i < I; i += blockDim.x) {
      size_t o = base + i;
      float g = pl__cuda_ldt(G, o), u = pl__cuda_ldt(U, o);
      float da = wr * pl__cuda_ldt(P, o);
      float sg = sigm(g);
      float silu = g * sg;
      float dsilu = sg * (1.0f + g * (1.0f - sg));
      pl__cuda_stt(G, o, da * u * dsilu);
      pl__cuda_stt(U, o, da * silu);
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void scale_rows_t(T *X, const float *w, int64_t n, int64_t H) {
  size_t tot = (size_t)n * H;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot;
       i += (size_t)gridDim.x * blockDim.x)
    pl__cuda_stt(X, i, w[i / H] * pl__cuda_ldt(X, i));
}

unsigned grid_of(size_t items, unsigned per_block) {
  size_t b = (items + per_block - 1) / per_block;
  if (b < 1)
    b = 1;
  if (b > 65535u * 8)
    b = 65535u * 8;
  return (unsigned)b;
}

pl_status dtype_ok(pl_dtype dt, const char *who) {
  if (dt != PL_F32 && dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "%s: dtype %s: allowed f32, bf16", who,
                        pl_dtype_name(dt));
  return PL_OK;
}

cudaStream_t native(pl_stream *s) {
  return static_cast<cudaStream_t>(pl_stream_native(s));
}

/* g blocks, at most the stream's grid cap (all these kernels grid-stride). */
unsigned capped(pl_stream *s, unsigned g) {
  int c = pl_stream_grid_cap(s);
  return c > 0 && g > (unsigned)c ? (unsigned)c : g;
}

} // namespace

extern "C" pl_status pl__cuda_moe_gather(pl_stream *s, void *dst,
                                         const void *src, const int32_t *rows,
                                         int64_t n, int64_t H, pl_dtype dt) {
  PL_TRY(dtype_ok(dt, "moe_gather"));
  if (n == 0 || H == 0)
    return PL_OK;
  unsigned g = n > 65535 * 4 ? 65535u * 4 : (unsigned)n;
  moe_gather_kernel<<<capped(s, g), 128, 0, native(s)>>>(
      dst, src, rows, n, (size_t)H * pl_dtype_size(dt));
  PL_CUDA_CHECK_LAUNCH("moe_gather_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_moe_gather_f32(pl_stream *s, float *dst,
                                             const float *src,
                                             const int32_t *idx, int64_t n) {
  if (n == 0)
    return PL_OK;
  moe_gather_f32_kernel<<<capped(s, grid_of((size_t)n, 256)), 256, 0,
                          native(s)>>>(dst, src, idx, n);
  PL_CUDA_CHECK_LAUNCH("moe_gather_f32_kernel");
  return PL_OK;
}

extern "C" pl_status
pl__cuda_moe_combine(pl_stream *s, void *out, const int32_t *toks, int64_t nt,
                     const int32_t *slots, int k, const float *w, const void *A,
                     const void *B, int64_t H, pl_dtype dt) {
  PL_TRY(dtype_ok(dt, "moe_combine"));
  if (nt == 0)
    return PL_OK;
  unsigned g = nt > 65535 * 4 ? 65535u * 4 : (unsigned)nt;
  const uintptr_t al = reinterpret_cast<uintptr_t>(out) |
                       reinterpret_cast<uintptr_t>(A) |
                       reinterpret_cast<uintptr_t>(B);
  if (dt == PL_BF16 && H % 8 == 0 && (al & 15) == 0) {
    int th = H / 8 >= 256 ? 256 : (int)((H / 8 + 31) / 32 * 32);
    moe_combine_bf16x8_kernel<<<capped(s, g), th, 0, native(s)>>>(
        static_cast<__nv_bfloat16 *>(out), toks, nt, slots, k, w, A, B, H);
    PL_CUDA_CHECK_LAUNCH("moe_combine_bf16x8_kernel");
    return PL_OK;
  }
  moe_combine_kernel<<<capped(s, g), 256, 0, native(s)>>>(out, toks, nt, slots,
                                                          k, w, A, B, H, dt);
  PL_CUDA_CHECK_LAUNCH("moe_combine_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_moe_scatter_f32(pl_stream *s, float *dst,
                                              const int32_t *toks, int64_t nt,
                                              const int32_t *slots, int k,
                                              const float *a, const float *b) {
  if (nt == 0)
    return PL_OK;
  moe_scatter_f32_kernel<<<capped(s, grid_of((size_t)nt * k, 256)), 256, 0,
                           native(s)>>>(dst, toks, nt, slots, k, a, b);
  PL_CUDA_CHECK_LAUNCH("moe_scatter_f32_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_moe_swiglu_fwd(pl_stream *s, void *A,
                                             const void *G, const void *U,
                                             int64_t n, int64_t I,
                                             pl_dtype dt) {
  PL_TRY(dtype_ok(dt, "moe_swiglu_fwd"));
  size_t tot = (size_t)n * I;
  if (tot == 0)
    return PL_OK;
  if (dt == PL_F32)
    swiglu_fwd_t<float><<<grid_of(tot, 256), 256, 0, native(s)>>>(
        static_cast<float *>(A), static_cast<const float *>(G),
        static_cast<const float *>(U), tot);
  else
    swiglu_fwd_t<__nv_bfloat16><<<grid_of(tot, 256), 256, 0, native(s)>>>(
        static_cast<__nv_bfloat16 *>(A), static_cast<const __nv_bfloat16 *>(G),
        static_cast<const __nv_bfloat16 *>(U), tot);
  PL_CUDA_CHECK_LAUNCH("swiglu_fwd_t");
  return PL_OK;
}

extern "C" pl_status pl__cuda_moe_swiglu_bwd(pl_stream *s, void *G, void *U,
                                             const void *P, const void *A,
                                             const float *w, float *dw,
                                             int64_t n, int64_t I,
                                             pl_dtype dt) {
  PL_TRY(dtype_ok(dt, "moe_swiglu_bwd"));
  if (n == 0)
    return PL_OK;
  unsigned g = n > 65535 * 4 ? 65535u * 4 : (unsigned)n;
  if (dt == PL_F32)
    swiglu_bwd_t<float><<<g, 256, 0, native(s)>>>(
        static_cast<float *>(G), static_cast<float *>(U),
        static_cast<const float *>(P), static_cast<const float *>(A), w, dw, n,
        I);
  else
    swiglu_bwd_t<__nv_bfloat16><<<g, 256, 0, native(s)>>>(
        static_cast<__nv_bfloat16 *>(G), static_cast<__nv_bfloat16 *>(U),
        static_cast<const __nv_bfloat16 *>(P),
        static_cast<const __nv_bfloat16 *>(A), w, dw, n, I);
  PL_CUDA_CHECK_LAUNCH("swiglu_bwd_t");
  return PL_OK;
}

extern "C" pl_status pl__cuda_moe_scale_rows(pl_stream *s, void *X,
                                             const float *w, int64_t n,
                                             int64_t H, pl_dtype dt) {
  PL_TRY(dtype_ok(dt, "moe_scale_rows"));
  size_t tot = (size_t)n * H;
  if (tot == 0)
    return PL_OK;
  if (dt == PL_F32)
    scale_rows_t<float><<<grid_of(tot, 256), 256, 0, native(s)>>>(
        static_cast<float *>(X), w, n, H);
  else
    scale_rows_t<__nv_bfloat16><<<grid_of(tot, 256), 256, 0, native(s)>>>(
        static_cast<__nv_bfloat16 *>(X), w, n, H);
  PL_CUDA_CHECK_LAUNCH("scale_rows_t");
  return PL_OK;
}

/* cuBLAS through the core's pl_gemm (one cublasGemmEx per group). */
extern "C" pl_status pl__cuda_moe_gemm(pl_stream *s, bool ta, bool tb,
                                       int64_t m, int64_t n, int64_t k,
                                       float alpha, const void *A, int64_t lda,
                                       const void *B, int64_t ldb, float beta,
                                       void *C, int64_t ldc, pl_dtype ab_dt,
                                       pl_dtype c_dt) {
  return pl_gemm(s, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, ab_dt,
                 c_dt);
}
