/* backend/ulysses_kernels.h — the pack/unpack around Ulysses' all-to-all
 * (model/ulysses.h), a CPU twin (backend/cpu/ulysses_cpu.c) and a CUDA twin
 * (backend/cuda/ulysses.cu) with one signature.
 *
 * dst [B][A][C] = src [A][B][C]: C elements of es bytes, C·es a multiple of 4
 * (PL_EINVAL otherwise on CUDA); dst and src do not overlap.  Not installed. */
#ifndef PLATEAU_BACKEND_ULYSSES_KERNELS_H
#define PLATEAU_BACKEND_ULYSSES_KERNELS_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

pl_status pl__cpu_transpose01(pl_stream *s, void *dst, const void *src,
                              int64_t A, int64_t B, int64_t C, size_t es);
#if PL_HAVE_CUDA
pl_status pl__cuda_transpose01(pl_stream *s, void *dst, const void *src,
                               int64_t A, int64_t B, int64_t C, size_t es);
#endif

#ifdef __cplusplus
}
#endif
#endif
