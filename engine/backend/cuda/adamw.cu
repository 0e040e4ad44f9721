/* adamw.cu — the CUDA twins of the CPU AdamW kernels (backend/adamw_kernels.h):
 * the fused AdamW + bf16 working-weight refresh over one staged bucket piece,
 * and the fixed-order gradient sum of squares.
 *
 * Exactness: the update runs pl__adamw_elem, whose every operation on the
 * device is an explicit round-to-nearest intrinsic (__fmul_rn, __fadd_rn,
 * __fsub_rn, __fdiv_rn, __fsqrt_rn) that nvcc never contracts into an FMA, and
 * the build keeps denormals (no -ftz, no fast-math): the results equal the CPU
 * reference bit for bit, which the CUDA test asserts.  The sum of squares uses
 * one warp per chunk of PL_ADAMW_NORM_CHUNK elements: lane l adds elements
 * l, l+32, ... in order in double (g·g is exact in double), then the fixed
 * tree lane[l] += lane[l+off], off = 16..1 (a shuffle-down gives exactly that
 * sum in lane l) — the order ops/adamw.h documents, so the norm is
 * bit-identical too. */
#include "backend/adamw_kernels.h"
#include "backend/cuda/internal_cuda.h"

/* ---- kernels ----------------------------------------------------------------
 */

template <bool BF16>
__global__ void
adamw_update_kernel(float *__restrict__ p, float *__restrict__ m,
                    float *__restrict__ v, const void *__restrict__ g,
                    pl_bf16 *__restrict__ w, size_t n, pl_adamw_scalars k) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float mi = m[i], vi = v[i];
    float pn = pl__adamw_elem(p[i], &mi, &vi, pl__adamw_load_g(g, BF16, i), &k);
    p[i] = pn;
    m[i] = mi;
    v[i] = vi;
    if (w)
      w[i] = pl_f32_to_bf16(pn);
  }
}

template <bool BF16>
__global__ void adamw_sumsq_kernel(const void *__restrict__ g, size_t n,
                                   size_t nchunks, double *__restrict__ part) {
  size_t chunk = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (chunk >= nchunks)
    return; /* whole warps leave together */
  size_t lo = chunk * PL_ADAMW_NORM_CHUNK;
  size_t hi = lo + PL_ADAMW_NORM_CHUNK < n ? lo + PL_ADAMW_NORM_CHUNK : n;
  double acc = 0.0;
  for (size_t i = lo + lane; i < hi; i += 32) {
    double x = (double)pl__adamw_load_g(g, BF16, i);
    acc = __dadd_rn(acc, __dmul_rn(x, x));
  }
  for (int off = 16; off >= 1; off /= 2)
    acc = __dadd_rn(acc, __shfl_down_sync(0xffffffffu, acc, off));
  if (lane == 0)
    part[chunk] = acc;
}

/* ---- launchers
 * --------------------------------------------------------------- */

extern "C" pl_status pl__cuda_adamw_update(pl_stream *s, float *p, float *m,
                                           float *v, const void *g,
                                           pl_dtype gdt, pl_bf16 *w, size_t n,
                                           const pl_adamw_scalars *k) {
  if (n == 0)
    return PL_OK;
  pl_dev *dev = pl_stream_dev(s);
  PL_TRY(pl__cuda_use(dev));
  cudaStream_t cs = pl__cuda_stream_of(dev, s);
  const int threads = PL_CUDA_THREADS;
  unsigned blocks = pl__cuda_blocks(dev, n);
  if (gdt == PL_BF16)
    adamw_update_kernel<true><<<blocks, threads, 0, cs>>>(p, m, v, g, w, n, *k);
  else
    adamw_update_kernel<false>
        <<<blocks, threads, 0, cs>>>(p, m, v, g, w, n, *k);
  PL_CUDA_CHECK_LAUNCH("adamw_update_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_adamw_sumsq(pl_stream *s, const void *g,
                                          pl_dtype gdt, size_t n,
                                          double *partials) {
  if (n == 0)
    return PL_OK;
  pl_dev *dev = pl_stream_dev(s);
  PL_TRY(pl__cuda_use(dev));
  cudaStream_t cs = pl__cuda_stream_of(dev, s);
  size_t nc = pl__adamw_nchunks(n);
  const int threads = 256, per_block = threads / 32;
  unsigned blocks = (unsigned)((nc + per_block - 1) / per_block);
  if (gdt == PL_BF16)
    adamw_sumsq_kernel<true><<<blocks, threads, 0, cs>>>(g, n, nc, partials);
  else
    adamw_sumsq_kernel<false><<<blocks, threads, 0, cs>>>(g, n, nc, partials);
  PL_CUDA_CHECK_LAUNCH("adamw_sumsq_kernel");
  return PL_OK;
}

extern "C" pl_status pl__cuda_adamw_bind_thread(pl_dev *dev) {
  return pl__cuda_use(dev);
}
