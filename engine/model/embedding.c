/* embedding.c — the token embedding's kernels picked by the stream's
 * backend (model/embedding_internal.h). */
#include "model/embedding_internal.h"

#include "core/internal.h"

pl_status pl__embedding_fwd(pl_stream *s, void *x, const void *E,
                            const int32_t *tok, int64_t N, int64_t H,
                            pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_embed_fwd(s, x, E, tok, N, H, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_embed_fwd(s, x, E, tok, N, H, dt);
}

pl_status pl__embedding_bwd(pl_stream *s, float *dE, const void *dx,
                            const int32_t *tok, int64_t N, int64_t H,
                            pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_embed_bwd(s, dE, dx, tok, N, H, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_embed_bwd(s, dE, dx, tok, N, H, dt);
}
