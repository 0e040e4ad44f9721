/* embed_cpu.c — CPU twins of the token embedding's kernels
 * (backend/embed_kernels.h): a row copy forward; backward, the rows of dx added
 * into dE in token order (OpenMP over column blocks, so the order per element
 * is the token order whatever the threads). */
#include <string.h>

#include "backend/embed_kernels.h"
#include "core/internal.h"

pl_status pl__cpu_embed_fwd(pl_stream *s, void *x, const void *E,
                            const int32_t *tok, int64_t N, int64_t H,
                            pl_dtype dt) {
  (void)s;
  const size_t row = (size_t)H * pl_dtype_size(dt);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < N; t++)
    memcpy((char *)x + (size_t)t * row, (const char *)E + (size_t)tok[t] * row,
           row);
  return PL_OK;
}

pl_status pl__cpu_embed_bwd(pl_stream *s, float *dE, const void *dx,
                            const int32_t *tok, int64_t N, int64_t H,
                            pl_dtype dt) {
  (void)s;
  const int64_t B = 64;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < H; j0 += B) {
    const int64_t j1 = j0 + B < H ? j0 + B : H;
    for (int64_t t = 0; t < N; t++) {
      float *d = dE + (size_t)tok[t] * (size_t)H;
      for (int64_t j = j0; j < j1; j++)
        d[j] += pl__load_elem(dx, dt, (size_t)(t * H + j));
    }
  }
  return PL_OK;
}
