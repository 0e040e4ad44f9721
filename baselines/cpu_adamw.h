/* cpu_adamw.h — the ZeRO-Offload-style baseline: the classic offloaded step
 * (gradients device→host, CPU update of fp32 state in pinned host memory
 * writing bf16 working weights, weights host→device), its update run by the
 * CPU backend's SIMD AdamW (backend/adamw.h: AVX-512, AVX2 or scalar, chosen
 * at run time; OpenMP threads), which equals pl_adamw_ref_update bit for
 * bit.  As ZeRO-Offload, the transfers are pipelined with the update piece by
 * piece (gradient copies ahead, weight copies behind), and the clipping norm
 * is taken on the device (cpu_adamw.c has the schedule). */
#ifndef PLATEAU_BASELINES_CPU_ADAMW_H
#define PLATEAU_BASELINES_CPU_ADAMW_H

#include <stddef.h>

#include "backend/adamw.h"
#include "ops/adamw.h"
#include "ops/stream_adamw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the classic offloaded step (the paper's ZeRO-Offload baseline) ------ */
typedef struct pl_cpu_offload_adamw pl_cpu_offload_adamw;

/* Elements per pipelined piece by default (64 MiB of bf16 gradients). */
#define PL_CPU_OFFLOAD_BUCKET ((size_t)32 << 20)

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
/* Pieces of at most `bucket` elements (>= 1; default PL_CPU_OFFLOAD_BUCKET)
 * for the pipeline; waits for the device.  The number of pieces. */
pl_status pl_cpu_offload_adamw_set_bucket(pl_cpu_offload_adamw *o,
                                          size_t bucket);
size_t pl_cpu_offload_adamw_npieces(const pl_cpu_offload_adamw *o);
/* Flat host state in parameter order (numel = total params). */
pl_adamw_state pl_cpu_offload_adamw_state(pl_cpu_offload_adamw *o);
/* One step on stream s (where the gradients were produced): gradient copies
 * of every piece, the device norm (one host wait), then piece by piece the
 * SIMD update after its gradient arrives and its weights' copy to the device;
 * s waits for the last (left in flight). */
pl_status pl_cpu_offload_adamw_step(pl_cpu_offload_adamw *o, pl_stream *s);
/* Last step's gscale, and the ms of its update loop (from the first piece's
 * gradient wait to the last piece's weights issued). */
void pl_cpu_offload_adamw_last(const pl_cpu_offload_adamw *o, float *gscale,
                               double *update_ms);

#ifdef __cplusplus
}
#endif
#endif
