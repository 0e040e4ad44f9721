/* rope.h — rotary position embedding (rotate-half convention, as GPT-NeoX /
 * Llama), forward and backward, in place, on both backends.
 *
 * x [B, S, n_h, d] (token-major, the layout attention takes); token s of a
 * sequence sits at position p = pos0 + s (pos0 lets a sequence shard start
 * mid-sequence).  For i < d/2, with angle a = p · theta^(−2i/d):
 *     y_i       = x_i cos a − x_{i+d/2} sin a
 *     y_{i+d/2} = x_i sin a + x_{i+d/2} cos a
 * Backward applies the transpose (rotation by −a) to dy.  Angles are computed
 * in double on both backends (p up to 2^20 and beyond would lose the phase in
 * fp32); values in fp32, stored as dt (f32 or bf16).  d must be even. */
#ifndef PLATEAU_MODEL_ROPE_H
#define PLATEAU_MODEL_ROPE_H

#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

pl_status pl_rope_fwd(pl_stream *s, void *x, pl_dtype dt, int64_t B, int64_t S,
                      int n_h, int d, int64_t pos0, double theta);
pl_status pl_rope_bwd(pl_stream *s, void *dx, pl_dtype dt, int64_t B, int64_t S,
                      int n_h, int d, int64_t pos0, double theta);

#ifdef __cplusplus
}
#endif
#endif
