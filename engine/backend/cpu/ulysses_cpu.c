/* ulysses_cpu.c — CPU twin of the Ulysses pack/unpack
 * (backend/ulysses_kernels.h): dst [B][A][C] = src [A][B][C], rows of C·es
 * bytes moved with memcpy. */
#include <string.h>

#include "backend/ulysses_kernels.h"

pl_status pl__cpu_transpose01(pl_stream *s, void *dst, const void *src,
                              int64_t A, int64_t B, int64_t C, size_t es) {
  (void)s;
  const size_t row = (size_t)C * es;
#pragma omp parallel for schedule(static)
  for (int64_t a = 0; a < A; a++)
    for (int64_t b = 0; b < B; b++)
      memcpy((char *)dst + ((size_t)b * A + a) * row, (const char *)src + ((size_t)a * B + b) * row,
             row);
  return PL_OK;
}
