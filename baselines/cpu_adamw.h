/* cpu_adamw.h — the ZeRO-Offload-style baseline: a SIMD CPU AdamW (AVX-512,
 * AVX2, scalar; chosen at run time; OpenMP threads) and the classic offloaded
 * step built on it (gradients device→host, CPU update of fp32 state in pinned
 * host memory writing bf16 working weights, weights host→device).
 *
 * The SIMD kernel computes exactly the operation order of engine/ops/adamw.h
 * with per-lane IEEE mul/add/sub/div/sqrt (no FMA, no rsqrt approximation), so
 * every path equals pl_adamw_ref_update bit for bit.  The hybrid mode of
 * OffloadStreamAdamW (engine/ops/stream_adamw.c) reuses this kernel for the
 * CPU share of its buckets. */
#ifndef PLATEAU_BASELINES_CPU_ADAMW_H
#define PLATEAU_BASELINES_CPU_ADAMW_H

#include <stddef.h>

#include "ops/adamw.h"
#include "ops/stream_adamw.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_simd_path {
  PL_SIMD_AUTO = 0,   /* PLATEAU_SIMD if set, else the best supported */
  PL_SIMD_SCALAR = 1, /* plain C                                      */
  PL_SIMD_AVX2 = 2,   /* 8 lanes                                      */
  PL_SIMD_AVX512 = 3, /* 16 lanes (AVX-512F)                          */
} pl_simd_path;

const char *pl_simd_path_name(pl_simd_path p);
/* "auto" | "scalar" | "avx2" | "avx512"; PL_EINVAL otherwise. */
pl_status pl_simd_path_parse(const char *s, pl_simd_path *out);
/* 1 if this CPU (and OS) can run the path (scalar and auto always). */
int pl_simd_path_supported(pl_simd_path p);
/* AUTO -> PLATEAU_SIMD (if set and valid) or the best supported path.
 * Forcing an unsupported path gives PL_EUNSUPPORTED with a message. */
pl_status pl_simd_path_resolve(pl_simd_path p, pl_simd_path *out);

/* The SIMD update of n elements in host memory: p, m, v (n, f32) in place,
 * g (n, f32 or bf16) read, w (n, bf16; may be NULL) written.  nthreads <= 0
 * uses OpenMP's default.  Equals pl_adamw_ref_update bit for bit. */
pl_status pl_cpu_adamw_simd(pl_simd_path path, int nthreads, float *p,
                            float *m, float *v, const void *g, pl_dtype gdt,
                            pl_bf16 *w, size_t n, const pl_adamw_scalars *k);

/* ---- the classic offloaded step (the paper's ZeRO-Offload baseline) ------ */
typedef struct pl_cpu_offload_adamw pl_cpu_offload_adamw;

/* params: the rank's parameters (device bf16 weights and device gradients of
 * dtype gdt), borrowed for the optimizer's life.  master/m/v: 12 bytes/param
 * of pinned host memory (tag "optim"); a host copy of the gradients and of the
 * bf16 weights (4 bytes/param with bf16 gradients, tag "optim_offload").
 * comm: clipping norm over its ranks (NULL: this rank alone).  state: borrowed
 * host master/m/v (numel = total params), or NULL to allocate them. */
pl_status pl_cpu_offload_adamw_create(pl_dev *dev, const pl_adamw_hparams *hp,
                                      int nparams,
                                      const pl_adamw_param *params,
                                      pl_dtype gdt, pl_simd_path path,
                                      int nthreads, pl_comm *comm,
                                      const pl_adamw_state *state,
                                      pl_cpu_offload_adamw **out);
void pl_cpu_offload_adamw_destroy(pl_cpu_offload_adamw *o);
/* Flat host state in parameter order (numel = total params). */
pl_adamw_state pl_cpu_offload_adamw_state(pl_cpu_offload_adamw *o);
/* One step on stream s (where the gradients were produced): D2H gradients,
 * wait, norm, SIMD update, H2D weights (left in flight on s). */
pl_status pl_cpu_offload_adamw_step(pl_cpu_offload_adamw *o, pl_stream *s);
/* Last step's gscale, and its phases in ms (d2h+wait, update, h2d issue). */
void pl_cpu_offload_adamw_last(const pl_cpu_offload_adamw *o, float *gscale,
                               double *update_ms);

#ifdef __cplusplus
}
#endif
#endif
