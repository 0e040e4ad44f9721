/* adamw_cpu.c — the CPU backend's AdamW kernels (backend/adamw_kernels.h): the
 * element function over OpenMP threads, and the fixed-order sum of squares.
 * The "device" of the CPU backend is ordinary memory, and work runs at once
 * in issue order, so these are plain loops.  Every element is independent, so
 * threading does not change a bit: the results equal pl_adamw_ref_update
 * exactly (tested). */
#include "backend/adamw_kernels.h"

pl_status pl__cpu_adamw_update(pl_stream *s, float *p, float *m, float *v,
                               const void *g, pl_dtype gdt, pl_bf16 *w,
                               size_t n, const pl_adamw_scalars *k) {
  (void)s;
  const int is_bf16 = gdt == PL_BF16;
  const pl_adamw_scalars kk = *k;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    float pn = pl__adamw_elem(p[i], &m[i], &v[i],
                              pl__adamw_load_g(g, is_bf16, i), &kk);
    p[i] = pn;
    if (w)
      w[i] = pl_f32_to_bf16(pn);
  }
  return PL_OK;
}

/* One chunk [lo, hi): lanes by index mod 32, each in index order, then the
 * fixed tree (adamw.h).  The 32 lane chains are interleaved (independent
 * accumulators, each still adding its own elements in index order), which
 * changes no bit and lets the compiler overlap them. */
static double chunk_sumsq(const void *g, int is_bf16, size_t lo, size_t hi) {
  double lane[PL_ADAMW_NORM_LANES] = {0};
  size_t i = lo;
  for (; i + PL_ADAMW_NORM_LANES <= hi; i += PL_ADAMW_NORM_LANES)
    for (int l = 0; l < PL_ADAMW_NORM_LANES; l++) {
      double x = (double)pl__adamw_load_g(g, is_bf16, i + (size_t)l);
      lane[l] = lane[l] + x * x;
    }
  for (int l = 0; i < hi; i++, l++) {
    double x = (double)pl__adamw_load_g(g, is_bf16, i);
    lane[l] = lane[l] + x * x;
  }
  for (int off = PL_ADAMW_NORM_LANES / 2; off >= 1; off /= 2)
    for (int l = 0; l < off; l++)
      lane[l] = lane[l] + lane[l + off];
  return lane[0];
}

void pl__cpu_adamw_partials(const void *g, pl_dtype gdt, size_t n,
                            double *partials) {
  int is_bf16 = gdt == PL_BF16;
  size_t nc = pl__adamw_nchunks(n);
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < nc; c++) {
    size_t lo = c * PL_ADAMW_NORM_CHUNK;
    size_t hi = lo + PL_ADAMW_NORM_CHUNK < n ? lo + PL_ADAMW_NORM_CHUNK : n;
    partials[c] = chunk_sumsq(g, is_bf16, lo, hi);
  }
}

pl_status pl__cpu_adamw_sumsq(pl_stream *s, const void *g, pl_dtype gdt,
                              size_t n, double *partials) {
  (void)s;
  pl__cpu_adamw_partials(g, gdt, n, partials);
  return PL_OK;
}
