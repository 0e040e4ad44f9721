/* model/mlp_block_internal.h — the RMSNorm of the model's blocks on the
 * stream's backend (the dense block's norm and the decoder layer's attention
 * norm) and SwiGLU: the CPU or CUDA twin of backend/mlp_block_kernels.h, whose
 * comments give the arguments' meaning.  Defined in mlp_block.c.  Not
 * installed. */
#ifndef PLATEAU_MODEL_MLP_BLOCK_INTERNAL_H
#define PLATEAU_MODEL_MLP_BLOCK_INTERNAL_H

#include "backend/mlp_block_kernels.h"

pl_status pl__rmsnorm_fwd(pl_stream *s, const void *x, const void *w, void *n,
                          int64_t N, int64_t H, float eps, pl_dtype dt);
pl_status pl__rmsnorm_bwd(pl_stream *s, const void *x, const void *w,
                          const void *dn, const void *dres, void *dx, float *dw,
                          float *scratch, int64_t N, int64_t H, float eps,
                          pl_dtype dt);

/* a = silu(g) ⊙ u for gu = [g | u] (N×2I), and its backward. */
pl_status pl__swiglu_fwd(pl_stream *s, const void *gu, void *a, int64_t N,
                         int64_t I, pl_dtype dt);
pl_status pl__swiglu_bwd(pl_stream *s, const void *gu, const void *da,
                         void *dgu, int64_t N, int64_t I, pl_dtype dt);

#endif
