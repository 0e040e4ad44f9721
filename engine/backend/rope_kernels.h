/* backend/rope_kernels.h — the rotary position embedding kernel (model/rope.h),
 * a CPU twin (backend/cpu/rope_cpu.c) and a CUDA twin (backend/cuda/rope.cu)
 * with one signature.
 *
 * x [B, S, n_h, d] in place, stored as dt (f32 or bf16), d even; token s sits
 * at position pos0 + s; angles p · theta^(−2i/d) in double, values in fp32.
 * inverse = 0 rotates by +a (forward), 1 by −a (backward: the transpose).
 * model/rope.c has checked the arguments.  Not installed. */
#ifndef PLATEAU_BACKEND_ROPE_KERNELS_H
#define PLATEAU_BACKEND_ROPE_KERNELS_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

pl_status pl__cpu_rope(pl_stream *s, void *x, pl_dtype dt, int64_t B, int64_t S,
                       int n_h, int d, int64_t pos0, double theta, int inverse);
#if PL_HAVE_CUDA
pl_status pl__cuda_rope(pl_stream *s, void *x, pl_dtype dt, int64_t B,
                        int64_t S, int n_h, int d, int64_t pos0, double theta,
                        int inverse);
#endif

#ifdef __cplusplus
}
#endif
#endif
