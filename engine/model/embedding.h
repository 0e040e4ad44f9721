/* embedding.h — the token embedding on the stream's backend (the CPU or
 * CUDA kernel of backend/embed.h, whose comment gives the arithmetic and
 * the order of the backward's sums), for the trainers' first unit:
 *
 *   forward   x[t][:] = E[tok[t]][:]             x: N×H, E: V×H (dt)
 *   backward  dE[tok[t]][:] += dx[t][:]          dE: V×H f32, dx: N×H (dt)
 *
 * Token ids are the caller's to check (0 <= tok < V); tok is device
 * memory of s's backend. */
#ifndef PLATEAU_MODEL_EMBEDDING_H
#define PLATEAU_MODEL_EMBEDDING_H

#include <stdint.h>

#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

pl_status pl_embedding_forward(pl_stream *s, void *x, const void *E,
                               const int32_t *tok, int64_t N, int64_t H,
                               pl_dtype dt);
pl_status pl_embedding_backward(pl_stream *s, float *dE, const void *dx,
                                const int32_t *tok, int64_t N, int64_t H,
                                pl_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
