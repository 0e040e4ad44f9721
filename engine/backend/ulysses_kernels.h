/* backend/ulysses_kernels.h — the pack/unpack around Ulysses' all-to-all
 * (model/ulysses.h), a CPU twin (backend/cpu/ulysses_cpu.c) and a CUDA twin
 * (backend/cuda/ulysses.cu) with one signature each.  Not installed.
 *
 * transpose01: dst [B][A][C] = src [A][B][C]: C elements of es bytes, C·es a
 * multiple of 4 (PL_EINVAL otherwise on CUDA); dst and src do not overlap.
 *
 * unpack_sum: dst [N][G][C] = Σ_{r<R} src [G][R][N][C], dtype dt (f32 or
 * bf16), summed in f32 in the order r = 0, 1, …, R−1 and rounded once: the
 * adjoint of a head replicated to R ranks (the gradient of a key/value head
 * that R query-head shards read).  dst and src do not overlap. */
#ifndef PLATEAU_BACKEND_ULYSSES_KERNELS_H
#define PLATEAU_BACKEND_ULYSSES_KERNELS_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

pl_status pl__cpu_transpose01(pl_stream *s, void *dst, const void *src,
                              int64_t A, int64_t B, int64_t C, size_t es);
pl_status pl__cpu_unpack_sum(pl_stream *s, void *dst, const void *src,
                             int64_t G, int64_t R, int64_t N, int64_t C,
                             pl_dtype dt);
#if PL_HAVE_CUDA
pl_status pl__cuda_transpose01(pl_stream *s, void *dst, const void *src,
                               int64_t A, int64_t B, int64_t C, size_t es);
pl_status pl__cuda_unpack_sum(pl_stream *s, void *dst, const void *src,
                              int64_t G, int64_t R, int64_t N, int64_t C,
                              pl_dtype dt);
#endif

#ifdef __cplusplus
}
#endif
#endif
