/* adamw_cpu.c — the CPU backend's AdamW kernels: the reference element
 * function (adamw_kernels.h) over OpenMP threads, and the fixed-order sum of
 * squares.  The "device" of the CPU backend is ordinary memory, and work runs
 * at once in issue order, so these are plain loops.  Every element is
 * independent, so threading does not change a bit: the results equal
 * pl_adamw_ref_update exactly (tested). */
#include "core/internal.h"
#include "ops/adamw_kernels.h"

pl_status pl_cpu_adamw_update(pl_stream *s, float *p, float *m, float *v,
                              const void *g, pl_dtype gdt, pl_bf16 *w,
                              size_t n, const pl_adamw_scalars *k) {
  (void)s;
  const int is_bf16 = gdt == PL_BF16;
  const pl_adamw_scalars kk = *k;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    float pn = pl_adamw_elem(p[i], &m[i], &v[i],
                             pl_adamw_load_g(g, is_bf16, i), &kk);
    p[i] = pn;
    if (w) w[i] = pl_f32_to_bf16(pn);
  }
  return PL_OK;
}

pl_status pl_cpu_adamw_sumsq(pl_stream *s, const void *g, pl_dtype gdt,
                             size_t n, double *partials) {
  (void)s;
  pl_adamw_ref_sumsq_partials(g, gdt, n, partials);
  return PL_OK;
}
