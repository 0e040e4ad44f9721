/* rope.c — checks and backend dispatch of rotary position embedding
 * (model/rope.h). */
#include "model/rope.h"

#include "backend/rope_kernels.h"
#include "core/internal.h"

static pl_status rope_check(pl_dtype dt, int64_t B, int64_t S, int n_h, int d,
                            int64_t pos0, double theta) {
  if (dt != PL_F32 && dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "rope: dtype %s: f32 or bf16",
                        pl_dtype_name(dt));
  if (B < 0 || S < 0 || n_h < 0 || pos0 < 0)
    return pl_set_error(PL_EINVAL,
                        "rope: B=%lld S=%lld n_h=%d pos0=%lld: must be >= 0",
                        (long long)B, (long long)S, n_h, (long long)pos0);
  if (d < 2 || d % 2)
    return pl_set_error(PL_EINVAL, "rope: d=%d: must be even and >= 2", d);
  if (!(theta > 1.0))
    return pl_set_error(PL_EINVAL, "rope: theta=%g: must be > 1", theta);
  return PL_OK;
}

static pl_status rope(pl_stream *s, void *x, pl_dtype dt, int64_t B, int64_t S,
                      int n_h, int d, int64_t pos0, double theta, int inverse) {
  PL_TRY(rope_check(dt, B, S, n_h, d, pos0, theta));
  if (B * S * n_h == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_rope(s, x, dt, B, S, n_h, d, pos0, theta, inverse);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_rope(s, x, dt, B, S, n_h, d, pos0, theta, inverse);
}

pl_status pl_rope_fwd(pl_stream *s, void *x, pl_dtype dt, int64_t B, int64_t S,
                      int n_h, int d, int64_t pos0, double theta) {
  return rope(s, x, dt, B, S, n_h, d, pos0, theta, 0);
}

pl_status pl_rope_bwd(pl_stream *s, void *dx, pl_dtype dt, int64_t B, int64_t S,
                      int n_h, int d, int64_t pos0, double theta) {
  return rope(s, dx, dt, B, S, n_h, d, pos0, theta, 1);
}
