/* backend/mlp_block_kernels.h — the dense block's kernels (model/mlp_block.h,
 * and the decoder layer's attention norm): RMSNorm and SwiGLU, forward and
 * backward, a CPU twin (backend/cpu/mlp_block_cpu.c) and a CUDA twin
 * (backend/cuda/mlp_block.cu) of each with one signature.
 *
 * x, w, n, dn, dres, dx, gu, a, da, dgu are stored as dt (f32 or bf16) and
 * computed in fp32, rounded to dt at the same points on both backends.
 * Shapes: x, n, dn, dx N×H; w H; gu, dgu N×2I ([g | u]); a, da N×I.
 * Not installed. */
#ifndef PLATEAU_BACKEND_MLP_BLOCK_KERNELS_H
#define PLATEAU_BACKEND_MLP_BLOCK_KERNELS_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* f32 elements of the scratch pl__cuda_rmsnorm_bwd needs for N rows of H: the
 * N row rstd values and the 64-row partial sums of dw. */
size_t pl__rmsnorm_bwd_scratch(int64_t N, int64_t H);

/* n = x · rstd · w, rstd = 1/sqrt(mean_j x_j² + eps). */
pl_status pl__cpu_rmsnorm_fwd(pl_stream *s, const void *x, const void *w,
                              void *n, int64_t N, int64_t H, float eps,
                              pl_dtype dt);
/* dx = dres + rmsnorm_bwd(x, w, dn) (dres may be NULL, and may alias dx);
 * dw (H, f32) += Σ_rows dn ⊙ x·rstd, in a fixed order so results are
 * deterministic.  scratch: f32 of pl__rmsnorm_bwd_scratch(N, H) elements, or
 * NULL on the CPU backend. */
pl_status pl__cpu_rmsnorm_bwd(pl_stream *s, const void *x, const void *w,
                              const void *dn, const void *dres, void *dx,
                              float *dw, float *scratch, int64_t N, int64_t H,
                              float eps, pl_dtype dt);
/* a = silu(g) ⊙ u for gu = [g | u]. */
pl_status pl__cpu_swiglu_fwd(pl_stream *s, const void *gu, void *a, int64_t N,
                             int64_t I, pl_dtype dt);
/* dgu = [da ⊙ u ⊙ silu'(g) | da ⊙ silu(g)]. */
pl_status pl__cpu_swiglu_bwd(pl_stream *s, const void *gu, const void *da,
                             void *dgu, int64_t N, int64_t I, pl_dtype dt);

#if PL_HAVE_CUDA
pl_status pl__cuda_rmsnorm_fwd(pl_stream *s, const void *x, const void *w,
                               void *n, int64_t N, int64_t H, float eps,
                               pl_dtype dt);
pl_status pl__cuda_rmsnorm_bwd(pl_stream *s, const void *x, const void *w,
                               const void *dn, const void *dres, void *dx,
                               float *dw, float *scratch, int64_t N, int64_t H,
                               float eps, pl_dtype dt);
pl_status pl__cuda_swiglu_fwd(pl_stream *s, const void *gu, void *a, int64_t N,
                              int64_t I, pl_dtype dt);
pl_status pl__cuda_swiglu_bwd(pl_stream *s, const void *gu, const void *da,
                              void *dgu, int64_t N, int64_t I, pl_dtype dt);
#endif

#ifdef __cplusplus
}
#endif
#endif
