/* fsdp_units.h — FSDP2's parameter units as PyTorch's fully_shard keeps
 * them (internal to baselines/fsdp2): a unit's parameters are sharded over
 * the ranks of its group as fp32 (the sharded parameter is the optimizer's
 * master), cast to the model dtype and all-gathered before use (the next
 * unit prefetched on a comm stream), freed after use, gathered again for
 * backward; the unit's gradient, unsharded, is reduce-scattered in fp32
 * into the fp32 gradient shard (MixedPrecisionPolicy(param_dtype=bf16,
 * reduce_dtype=fp32), torchtitan's default).  With offload (CPUOffloadPolicy)
 * the fp32 shards, their gradients and AdamW's moments live in pinned host
 * memory: each gather copies the shard to the device first, each reduction
 * copies the new gradient shard back.
 *
 * Shards (as train/zero3.h): a unit of n parameters over G real ranks and a
 * virtual group of G_v (a multiple of G; G_v = G is a real run) has shards
 * of s = ⌈n / G_v⌉; rank r holds elements [r·s, (r+1)·s) (zero past n).
 * The gather fills [0, G·s) and tiles it over the absent ranks' blocks; the
 * reduce-scatter sums [0, G·s) over the G ranks.
 *
 * Memory by tag (b = bytes of the model dtype):
 *   persistent, device (offload: the pinned host arena instead)
 *     "weights"      s·4   the fp32 shard
 *     "grads"        s·4   its fp32 gradient
 *     "optim"        s·8   AdamW's m and v
 *   transient, device
 *     "fsdp_ag"      the all-gather buffer G_v·s·b (this rank's block is
 *                    the cast shard, the collective runs in place), live
 *                    until its copy-out into the unit's parameters (FSDP2's
 *                    all-gather output and split copy: the unit is briefly
 *                    held twice); with offload also the shard's fp32 copy
 *                    on the device (s·4) until the cast
 *     "zero3"        the gathered unit, numel·b, from its gather to its
 *                    release
 *     "zero3_grads"  the unsharded fp32 gradient G_v·s·4 from the unit's
 *                    backward until its reduce-scatter, then the
 *                    reduce-scatter's fp32 output s·4 (with offload and
 *                    accumulation, one more s·4 for the sum on the device)
 * FSDP2 differs in the gradient's dtype: autograd leaves the unsharded
 * gradient in bf16 (2·n during the backward) and FSDP2 copies it into an
 * fp32 reduce-scatter input (2·n + 4·n at the reduction); the engine's
 * kernels accumulate weight gradients in fp32, so here the unsharded
 * gradient is fp32 from the start (4·n throughout).
 *
 * Streams: gathers and reductions run on the comm stream, each after the
 * work issued so far on the caller's stream; the caller's stream waits for a
 * gather's event before using the unit.  On the CPU backend in issue
 * order. */
#ifndef PLATEAU_BASELINES_FSDP2_FSDP_UNITS_H
#define PLATEAU_BASELINES_FSDP2_FSDP_UNITS_H

#include <stdbool.h>
#include <stddef.h>

#include "plateau/plateau.h"

typedef struct pl__fsdp_unit_cfg {
  const char *name; /* "layer3", "layer3.experts", "embed", "head"      */
  size_t numel;     /* >= 1                                             */
  pl_comm *comm;    /* the real ranks sharing it (borrowed; NULL: alone) */
  int vsize;        /* virtual group (0: comm's size)                   */
} pl__fsdp_unit_cfg;

typedef struct pl__fsdp pl__fsdp;

/* Shards zeroed (weights, gradients, moments). */
pl_status pl__fsdp_create(pl_dev *dev, pl_dtype dt, bool offload, int n,
                          const pl__fsdp_unit_cfg *units, pl__fsdp **out);
void pl__fsdp_destroy(pl__fsdp *f);

int pl__fsdp_nunits(const pl__fsdp *f);
/* The shard of unit u: fp32 weights, gradient, m, v (device, or pinned host
 * with offload), s elements starting at element *offset of the unit. */
void pl__fsdp_shard(pl__fsdp *f, int u, float **w, float **g, float **m,
                    float **v, size_t *s, size_t *offset);
size_t pl__fsdp_numel(const pl__fsdp *f, int u);
/* The unit's real group (NULL: alone) and virtual size. */
pl_comm *pl__fsdp_comm(const pl__fsdp *f, int u);
int pl__fsdp_vsize(const pl__fsdp *f, int u);

/* Issue the gather of u on the comm stream (after the work issued on s)
 * unless u is gathered or in flight. */
pl_status pl__fsdp_prefetch(pl__fsdp *f, int u, pl_stream *s);
/* Prefetch if needed; s waits for the gather; *full = the unit (dt). */
pl_status pl__fsdp_acquire(pl__fsdp *f, int u, pl_stream *s, void **full);
/* Free u's gathered parameters after the work issued on s. */
void pl__fsdp_release(pl__fsdp *f, int u, pl_stream *s);
bool pl__fsdp_resident(const pl__fsdp *f, int u);
/* The unsharded fp32 gradient of u (G_v·s), zeroed on s when opened. */
pl_status pl__fsdp_grad_acquire(pl__fsdp *f, int u, pl_stream *s, float **full);
/* Reduce-scatter u's open gradient on the comm stream after the work on s
 * into the gradient shard (overwrite, or += when accumulate) and free it. */
pl_status pl__fsdp_grad_reduce(pl__fsdp *f, int u, pl_stream *s,
                               bool accumulate);
/* After a failed step: s waits for the comm stream, every gathered unit
 * and open gradient is freed (no communication). */
void pl__fsdp_reset(pl__fsdp *f, pl_stream *s);
/* s waits for everything issued on the comm stream. */
pl_status pl__fsdp_sync(pl__fsdp *f, pl_stream *s);

/* Comm-stream time (events around each gather and reduction; profile on),
 * summed since the last take (the device must have finished them). */
void pl__fsdp_set_profile(pl__fsdp *f, bool on);
pl_status pl__fsdp_take_ms(pl__fsdp *f, double *gather_ms, double *reduce_ms);

#endif
