/* cpu_adamw.h — the ZeRO-Offload-style baseline: the classic offloaded step
 * (gradients device→host, CPU update of fp32 state in pinned host memory
 * writing bf16 working weights, weights host→device), its update run by the
 * CPU backend's SIMD AdamW (backend/adamw_kernels.h: AVX-512, AVX2 or scalar,
 * chosen at run time; OpenMP threads), which equals pl_adamw_ref_update bit for
 * bit.  As ZeRO-Offload, the transfers are pipelined with the update piece by
 * piece (gradient copies ahead, weight copies behind), and the clipping norm
 * is taken on the device (cpu_adamw.c has the schedule). */
#ifndef PLATEAU_BASELINES_CPU_ADAMW_H
#define PLATEAU_BASELINES_CPU_ADAMW_H

#include <stddef.h>

#include "backend/adamw_kernels.h"
#include "ops/adamw.h"
#include "ops/stream_adamw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the classic offloaded step (the paper's ZeRO-Offload baseline) ------ */
typedef struct pl_cpu_offload_adamw pl_cpu_offload_adamw;

/* Host staging of the gradients and the bf16 weights (set_staging):
 *   full  every gradient and weight has its host copy (as ZeRO-Offload keeps
 *         them): (gsz + 2)·Θ bytes of pinned host memory.
 *   ring  `slots` pieces reused in turn: slots·piece·(gsz + 2) bytes (a
 *         slot holds the longest piece: a tensor may be shorter).  Piece
 *         q+slots's gradient is fetched into piece q's slot once its update
 *         has read it, and a slot's weights are rewritten once their copy to
 *         the device is done.  The default (3 slots of PL_CPU_OFFLOAD_BUCKET
 *         elements: 384 MiB with bf16 gradients instead of 4 bytes a
 *         parameter at 2.625 G).
 * Either way the host memory traffic is the same: the DMA writes a
 * gradient, the update reads it, writes the weight with non-temporal stores
 * and the DMA reads it: 2·(gsz + 2) bytes a parameter beside the update's
 * 24 of p, m, v.  Except for a ring of at most PL_CPU_OFFLOAD_CACHED_BYTES:
 * slots that small stay in the last-level cache between their copies and
 * the update, so its weights are written with ordinary stores
 * (PL_SIMD_W_CACHED) for the copy to read them there, and the gradients the
 * DMA lands there may be read from it (the pieces are short: more of them
 * to pay for).
 * Elements per pipelined piece by default: 64 MiB of bf16 gradients. */
#define PL_CPU_OFFLOAD_BUCKET ((size_t)32 << 20)
#define PL_CPU_OFFLOAD_CACHED_BYTES ((size_t)8 << 20)
#define PL_CPU_OFFLOAD_RING_SLOTS 3

/* params: the rank's parameters (device bf16 weights and device gradients of
 * dtype gdt), borrowed for the optimizer's life.  master/m/v: 12 bytes/param
 * of pinned host memory (tag "optim"); the staging of the gradients and of
 * the bf16 weights (tag "optim_offload"): a ring of
 * PL_CPU_OFFLOAD_RING_SLOTS pieces of PL_CPU_OFFLOAD_BUCKET elements.
 * comm: clipping norm over its ranks (NULL: this rank alone).  state: borrowed
 * host master/m/v (numel = total params), or NULL to allocate them. */
pl_status pl_cpu_offload_adamw_create(pl_dev *dev, const pl_adamw_hparams *hp,
                                      int nparams, const pl_adamw_param *params,
                                      pl_dtype gdt, pl_simd_path path,
                                      int nthreads, pl_comm *comm,
                                      const pl_adamw_state *state,
                                      pl_cpu_offload_adamw **out);
void pl_cpu_offload_adamw_destroy(pl_cpu_offload_adamw *o);
/* Pieces of at most `bucket` elements (>= 1) for the pipeline, the staging
 * kept (a ring's slots hold `bucket` elements each); waits for the device.
 * The number of pieces. */
pl_status pl_cpu_offload_adamw_set_bucket(pl_cpu_offload_adamw *o,
                                          size_t bucket);
/* The staging: slots 0 is full staging, slots >= 1 a ring of that many
 * pieces; bucket: elements per piece (0: PL_CPU_OFFLOAD_BUCKET).  Waits for
 * the device; on error (bad value, host memory) the optimizer keeps no
 * staging and must be destroyed. */
pl_status pl_cpu_offload_adamw_set_staging(pl_cpu_offload_adamw *o, int slots,
                                           size_t bucket);
size_t pl_cpu_offload_adamw_npieces(const pl_cpu_offload_adamw *o);
/* Ring slots (0: full staging), elements per piece, and whether the ring is
 * small enough to be kept in cache (PL_CPU_OFFLOAD_CACHED_BYTES). */
int pl_cpu_offload_adamw_slots(const pl_cpu_offload_adamw *o);
size_t pl_cpu_offload_adamw_bucket(const pl_cpu_offload_adamw *o);
int pl_cpu_offload_adamw_cached(const pl_cpu_offload_adamw *o);
/* Flat host state in parameter order (numel = total params). */
pl_adamw_state pl_cpu_offload_adamw_state(pl_cpu_offload_adamw *o);
/* One step on stream s (where the gradients were produced): gradient copies
 * of every piece (a ring: of its first pieces, then each one as a slot
 * frees), the device norm (one host wait), then piece by piece the SIMD
 * update after its gradient arrives and its weights' copy to the device; s
 * waits for the last (left in flight). */
pl_status pl_cpu_offload_adamw_step(pl_cpu_offload_adamw *o, pl_stream *s);
/* Last step's gscale, and the ms of its update loop (from the first piece's
 * gradient wait to the last piece's weights issued). */
void pl_cpu_offload_adamw_last(const pl_cpu_offload_adamw *o, float *gscale,
                               double *update_ms);

#ifdef __cplusplus
}
#endif
#endif
