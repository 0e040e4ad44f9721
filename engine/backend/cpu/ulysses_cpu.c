/* ulysses_cpu.c — CPU twin of the Ulysses pack/unpack
 * (backend/ulysses_kernels.h): transpose01 moves rows of C·es bytes with
 * memcpy; unpack_sum adds the R replicas' rows in f32, in order. */
#include <string.h>

#include "backend/ulysses_kernels.h"

pl_status pl__cpu_transpose01(pl_stream *s, void *dst, const void *src,
                              int64_t A, int64_t B, int64_t C, size_t es) {
  (void)s;
  const size_t row = (size_t)C * es;
#pragma omp parallel for schedule(static)
  for (int64_t a = 0; a < A; a++)
    for (int64_t b = 0; b < B; b++)
      memcpy((char *)dst + ((size_t)b * A + a) * row,
             (const char *)src + ((size_t)a * B + b) * row, row);
  return PL_OK;
}

pl_status pl__cpu_unpack_sum(pl_stream *s, void *dst, const void *src,
                             int64_t G, int64_t R, int64_t N, int64_t C,
                             pl_dtype dt) {
  (void)s;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++)
    for (int64_t g = 0; g < G; g++)
      for (int64_t c = 0; c < C; c++) {
        float acc = 0.f;
        for (int64_t r = 0; r < R; r++)
          acc +=
              pl__load_elem(src, dt, (size_t)(((g * R + r) * N + n) * C + c));
        pl__store_elem(dst, dt, (size_t)((n * G + g) * C + c), acc);
      }
  return PL_OK;
}
