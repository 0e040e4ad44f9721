/* rope_cpu.c — CPU twin of the rotary position embedding kernel
 * (backend/rope_kernels.h): angles in double, values in fp32, stored as dt.
 * OpenMP over tokens. */
#include <math.h>

#include "backend/rope_kernels.h"
#include "plateau/host_device.h"

pl_status pl__cpu_rope(pl_stream *s, void *x, pl_dtype dt, int64_t B, int64_t S,
                       int n_h, int d, int64_t pos0, double theta,
                       int inverse) {
  (void)s;
  const int half = d / 2;
  const int bf = dt == PL_BF16;
  const double sg = inverse ? -1.0 : 1.0;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < B * S; t++) {
    const double p = (double)(pos0 + t % S);
    for (int i = 0; i < half; i++) {
      const double a = p * pow(theta, -2.0 * i / d);
      const float c = (float)cos(a), sn = (float)(sg * sin(a));
      for (int h = 0; h < n_h; h++) {
        const int64_t o = (t * n_h + h) * (int64_t)d;
        float x1, x2;
        if (bf) {
          x1 = pl_bf16_to_f32(((pl_bf16 *)x)[o + i]);
          x2 = pl_bf16_to_f32(((pl_bf16 *)x)[o + i + half]);
          ((pl_bf16 *)x)[o + i] = pl_f32_to_bf16(x1 * c - x2 * sn);
          ((pl_bf16 *)x)[o + i + half] = pl_f32_to_bf16(x1 * sn + x2 * c);
        } else {
          x1 = ((float *)x)[o + i];
          x2 = ((float *)x)[o + i + half];
          ((float *)x)[o + i] = x1 * c - x2 * sn;
          ((float *)x)[o + i + half] = x1 * sn + x2 * c;
        }
      }
    }
  }
  return PL_OK;
}
