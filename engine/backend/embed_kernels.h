/* backend/embed_kernels.h — the token embedding's kernels, CPU and CUDA twins
 * with the same signature (engine/train/step.c calls them):
 *
 *   forward   x[t][:] = E[tok[t]][:]             x: N×H, E: V×H (dt)
 *   backward  dE[tok[t]][:] += dx[t][:]          dE: V×H f32, dx: N×H (dt)
 *
 * Token ids are checked by the caller (0 <= tok < V).  The CPU backward adds
 * the tokens in index order (deterministic); the CUDA backward uses f32
 * atomics (the order of a row's additions varies run to run: within f32
 * rounding of the CPU sum). */
#ifndef PLATEAU_BACKEND_EMBED_KERNELS_H
#define PLATEAU_BACKEND_EMBED_KERNELS_H

#include "plateau/dev.h"
#include "plateau/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

pl_status pl__cpu_embed_fwd(pl_stream *s, void *x, const void *E,
                            const int32_t *tok, int64_t N, int64_t H,
                            pl_dtype dt);
pl_status pl__cpu_embed_bwd(pl_stream *s, float *dE, const void *dx,
                            const int32_t *tok, int64_t N, int64_t H,
                            pl_dtype dt);
#if PL_HAVE_CUDA
pl_status pl__cuda_embed_fwd(pl_stream *s, void *x, const void *E,
                             const int32_t *tok, int64_t N, int64_t H,
                             pl_dtype dt);
pl_status pl__cuda_embed_bwd(pl_stream *s, float *dE, const void *dx,
                             const int32_t *tok, int64_t N, int64_t H,
                             pl_dtype dt);
#endif

#ifdef __cplusplus
}
#endif
#endif
