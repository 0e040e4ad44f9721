/* backend/adamw_kernels.h — the AdamW element function every implementation
 * shares (host C and CUDA C compile the same text), the fixed order of the
 * gradient sum of squares, and the kernels of the two backends: the CPU update
 * and sum of squares (backend/cpu/adamw_cpu.c), the SIMD CPU update
 * (backend/cpu/adamw_simd.c) and their CUDA twins (backend/cuda/adamw.cu).
 * The operation order, the reference they all equal and the norm's order are
 * documented in ops/adamw.h.
 *
 * pl__adamw_elem is that operation order.  On the device every operation is
 * an explicit round-to-nearest intrinsic (__fmul_rn, __fadd_rn, __fsub_rn,
 * __fdiv_rn, __fsqrt_rn), which nvcc never contracts into an FMA; on the host
 * C11 ISO mode keeps gcc from contracting (and the SIMD paths use only
 * mul/add/sub/div/sqrt, each IEEE-exact per lane).  With denormals kept (the
 * default: no -ftz, no fast-math) every backend therefore produces the same
 * bits, which the tests assert.  Not installed. */
#ifndef PLATEAU_BACKEND_ADAMW_KERNELS_H
#define PLATEAU_BACKEND_ADAMW_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"
#include "plateau/optypes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Chunk partials of a tensor of n elements: ceil(n / PL_ADAMW_NORM_CHUNK). */
static inline size_t pl__adamw_nchunks(size_t n) {
  return (n + PL_ADAMW_NORM_CHUNK - 1) / PL_ADAMW_NORM_CHUNK;
}

#if defined(__CUDA_ARCH__)
#define PL_ADAMW_DIV(a, b) __fdiv_rn((a), (b))
#define PL_ADAMW_SQRT(a) __fsqrt_rn(a)
#else
#define PL_ADAMW_DIV(a, b) ((a) / (b))
#define PL_ADAMW_SQRT(a) sqrtf(a)
#endif

/* Gradient element i of an f32 or bf16 array, as f32 (bf16 -> f32 is exact). */
PL_HD float pl__adamw_load_g(const void *g, int is_bf16, size_t i) {
  return is_bf16 ? pl_bf16_to_f32(((const pl_bf16 *)g)[i])
                 : ((const float *)g)[i];
}

/* One element: returns the new p; *m and *v updated in place (ops/adamw.h). */
PL_HD float pl__adamw_elem(float p, float *m, float *v, float graw,
                           const pl_adamw_scalars *k) {
  float g = PL_FMUL(graw, k->gscale);
  float mn = PL_FADD(PL_FMUL(k->b1, *m), PL_FMUL(k->omb1, g));
  float vn = PL_FADD(PL_FMUL(k->b2, *v), PL_FMUL(k->omb2, PL_FMUL(g, g)));
  float mhat = PL_ADAMW_DIV(mn, k->bc1);
  float vhat = PL_ADAMW_DIV(vn, k->bc2);
  float den = PL_FADD(PL_ADAMW_SQRT(vhat), k->eps);
  float u = PL_FADD(PL_ADAMW_DIV(mhat, den), PL_FMUL(k->wd, p));
  *m = mn;
  *v = vn;
  return PL_FSUB(p, PL_FMUL(k->lr, u));
}

/* ---- kernels: same signature on both backends ------------------------------
 * Pointers are memory of the stream's device (device arena, or for the CPU
 * backend any host memory).  update: p, m, v (n, f32) in place, g (n, f32 or
 * bf16) read, w (n, bf16) written (may be NULL: no refresh).  sumsq:
 * partials[c] (double, device memory) for c < pl__adamw_nchunks(n), the fixed
 * order. */
pl_status pl__cpu_adamw_update(pl_stream *s, float *p, float *m, float *v,
                               const void *g, pl_dtype gdt, pl_bf16 *w,
                               size_t n, const pl_adamw_scalars *k);
pl_status pl__cpu_adamw_sumsq(pl_stream *s, const void *g, pl_dtype gdt,
                              size_t n, double *partials);
/* The fixed-order chunk partials of n host elements (OpenMP over chunks,
 * which changes no bit): the body of pl__cpu_adamw_sumsq and of the
 * reference's pl_adamw_ref_sumsq_partials. */
void pl__cpu_adamw_partials(const void *g, pl_dtype gdt, size_t n,
                            double *partials);
#if PL_HAVE_CUDA
pl_status pl__cuda_adamw_update(pl_stream *s, float *p, float *m, float *v,
                                const void *g, pl_dtype gdt, pl_bf16 *w,
                                size_t n, const pl_adamw_scalars *k);
pl_status pl__cuda_adamw_sumsq(pl_stream *s, const void *g, pl_dtype gdt,
                               size_t n, double *partials);
/* Make dev's GPU current in the calling thread (helper threads that enqueue
 * copies on the device's streams). */
pl_status pl__cuda_adamw_bind_thread(pl_dev *dev);
#endif

/* ---- the SIMD CPU update (host memory, any thread): pl_simd_path in
 * plateau/optypes.h ----------------------------------------------------------
 */

/* The update of n elements in host memory: p, m, v (n, f32) in place, g (n,
 * f32 or bf16) read, w (n, bf16; may be NULL) written.  nthreads <= 0 uses
 * OpenMP's default.  Equals pl_adamw_ref_update bit for bit. */
pl_status pl__cpu_adamw_simd(pl_simd_path path, int nthreads, float *p,
                             float *m, float *v, const void *g, pl_dtype gdt,
                             pl_bf16 *w, size_t n, const pl_adamw_scalars *k);
/* flags of pl__cpu_adamw_simd_ex.  PL_SIMD_W_CACHED: w is a small buffer
 * that a copy reads soon after (a staging ring): written with ordinary
 * stores, which keep it in cache, instead of non-temporal ones, which send
 * it to memory (the default: w is written once and not read by the CPU). */
#define PL_SIMD_W_CACHED 1u
/* pl__cpu_adamw_simd with flags (0: the same); PL_EINVAL for an unknown
 * flag.  The same bits whatever the flags. */
pl_status pl__cpu_adamw_simd_ex(pl_simd_path path, int nthreads, float *p,
                                float *m, float *v, const void *g, pl_dtype gdt,
                                pl_bf16 *w, size_t n, const pl_adamw_scalars *k,
                                unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
