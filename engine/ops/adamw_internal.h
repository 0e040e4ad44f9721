/* ops/adamw_internal.h — the AdamW kernels of backend/adamw_kernels.h on the
 * stream's backend, shared by the reference module (adamw.c, which defines
 * them) and OffloadStreamAdamW (stream_adamw.c).  Not installed. */
#ifndef PLATEAU_OPS_ADAMW_INTERNAL_H
#define PLATEAU_OPS_ADAMW_INTERNAL_H

#include "ops/adamw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pl__cpu_adamw_update or its CUDA twin; PL_EINVAL for a gradient dtype
 * other than f32 or bf16. */
pl_status pl__adamw_update(pl_stream *s, float *p, float *m, float *v,
                           const void *g, pl_dtype gdt, pl_bf16 *w, size_t n,
                           const pl_adamw_scalars *k);
/* pl__cpu_adamw_sumsq or its CUDA twin. */
pl_status pl__adamw_sumsq(pl_stream *s, const void *g, pl_dtype gdt, size_t n,
                          double *partials);
/* Make dev's GPU current in the calling thread; nothing on the CPU backend. */
pl_status pl__adamw_bind_thread(pl_dev *dev);

#ifdef __cplusplus
}
#endif
#endif
