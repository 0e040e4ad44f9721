/* model/embedding_internal.h — the token embedding on the stream's backend:
 * the CPU or CUDA twin of backend/embed_kernels.h (whose comment gives the
 * arithmetic, the shapes and the order of the backward's sums), for the
 * trainers' first unit.  Token ids are the caller's to check.  Defined in
 * embedding.c.  Not installed. */
#ifndef PLATEAU_MODEL_EMBEDDING_INTERNAL_H
#define PLATEAU_MODEL_EMBEDDING_INTERNAL_H

#include "backend/embed_kernels.h"

pl_status pl__embedding_fwd(pl_stream *s, void *x, const void *E,
                            const int32_t *tok, int64_t N, int64_t H,
                            pl_dtype dt);
pl_status pl__embedding_bwd(pl_stream *s, float *dE, const void *dx,
                            const int32_t *tok, int64_t N, int64_t H,
                            pl_dtype dt);

#endif
