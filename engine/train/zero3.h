/* zero3.h — ZeRO-3 units (FSDP-style): a unit's parameters are sharded over
 * the ranks that share it; before use its weights are all-gathered to the
 * full unit on a comm stream (the next unit prefetched while the current one
 * computes), freed after use, gathered again for backward; its gradient is
 * accumulated in a full-size f32 buffer and reduce-scattered into the
 * rank's f32 gradient shard.
 *
 * Shards: a unit of n parameters over a group of G real ranks and a virtual
 * group of G_v ranks (G_v a multiple of G; G_v = G is a real run, see
 * train/layout.h for the one-GPU proxy) has shards of s = ⌈n / G_v⌉
 * parameters; rank r of the group holds elements [r·s, (r+1)·s) (zero
 * padding past n).  The full unit is G_v·s elements: the all-gather over the
 * G ranks fills [0, G·s) and, when G_v > G, that block is tiled over the
 * rest (a stand-in for the absent ranks' shards).  The reduce-scatter sums
 * [0, G·s) over the G ranks (the absent ranks' blocks are dropped).
 *
 * Dtypes: weights in the model dtype (bf16 on the GPU; f32 in the exactness
 * tests); gradients reduced in f32 (as torchtitan's default mixed precision
 * for FSDP2: bf16 parameters, f32 reduce): a bf16 reduce-scatter would round
 * every partial sum over up to W ranks, and the f32 shard is what AdamW
 * reads anyway.
 *
 * Memory (tags): shards "weights" (s elements of the weight dtype) and
 * "grads" (s f32), persistent; gathered units "zero3" — at most
 * max_resident (2: the unit in use and the next one prefetched) at a time,
 * refused beyond, so zero3 <= 2·max_u(G_v·s_u)·b; the full f32 gradient of
 * the unit in backward and the reduce-scatter's f32 shard "zero3_grads" —
 * the full gradient is freed (stream-ordered) when its reduce-scatter is
 * issued, so the tracked zero3_grads <= max_u 4·G_v·s_u + one f32 shard
 * (on CUDA the pool may hold the previous unit's gradient until its
 * reduce-scatter has run: at most one more).
 *
 * Streams: gathers and reduce-scatters run on the unit set's comm stream;
 * before each it waits for the caller's stream as issued so far, and the
 * caller's stream waits for a gather's event before using the unit.  On
 * the CPU backend the same schedule runs in issue order.
 *
 * The knobs (pl_zero3_opts) are where PyTorch FSDP2's units, as
 * fully_shard keeps them (the FSDP2 baseline, baselines/fsdp2), differ from
 * the trainer's; the shards, the gather's tiling, the reduce-scatter and the
 * schedule above are the same:
 *   fp32_master  the shard is the fp32 master (the optimizer's), with
 *                AdamW's m and v beside it (tag "optim", s·4 each): a gather
 *                casts the shard to the weight dtype into this rank's block
 *                of an all-gather buffer G_v·s·b (tag "fsdp_ag"), gathers in
 *                place and copies the unit out into its parameters (numel·b,
 *                "zero3": the unit is briefly held twice, as FSDP2's
 *                all-gather output and split copy); the reduce-scatter's f32
 *                output is its own s·4 buffer ("zero3_grads"), copied or
 *                added into the gradient shard (MixedPrecisionPolicy
 *                (param_dtype=bf16, reduce_dtype=fp32));
 *   host_state   fp32_master: the shards, their gradients and the moments
 *                in pinned host memory (CPUOffloadPolicy): each gather
 *                copies the shard to the device first (s·4, "fsdp_ag"),
 *                each reduction copies the new gradient shard back (with
 *                accumulation, the sum on the device: one more s·4);
 *   max_resident gathered units at a time (2 for the trainer: the unit in
 *                use and the next; 0: no bound, FSDP2's per-layer
 *                schedule frees what it gathered itself). */
#ifndef PLATEAU_TRAIN_ZERO3_H
#define PLATEAU_TRAIN_ZERO3_H

#include <stdbool.h>
#include <stddef.h>

#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_zero3_unit_cfg {
  const char *name; /* for messages ("layer3", "head")                  */
  size_t numel;     /* parameters of the full unit (>= 1)               */
  pl_comm *comm;    /* the real ranks sharing it (borrowed); NULL: alone */
  int vsize;        /* virtual group size, a multiple of comm's size (0:
                       comm's size)                                      */
} pl_zero3_unit_cfg;

typedef struct pl_zero3_opts {
  bool fp32_master; /* fp32 shard and moments, cast-and-copy-out gathers */
  bool host_state;  /* fp32_master: shard state in pinned host memory    */
  int max_resident; /* gathered units at a time (0: no bound)            */
} pl_zero3_opts;

/* The trainer's units: shards in the weight dtype, at most 2 gathered. */
pl_zero3_opts pl_zero3_opts_default(void);

typedef struct pl_zero3 pl_zero3;

/* Allocates the shards (zeroed: weights, gradients, moments).  All units'
 * communicators must belong to dev.  Collective over nothing.
 * pl_zero3_create takes pl_zero3_opts_default(). */
pl_status pl_zero3_create(pl_dev *dev, pl_dtype wdt, int nunits,
                          const pl_zero3_unit_cfg *units, pl_zero3 **out);
pl_status pl_zero3_create_opts(pl_dev *dev, pl_dtype wdt,
                               const pl_zero3_opts *o, int nunits,
                               const pl_zero3_unit_cfg *units, pl_zero3 **out);
void pl_zero3_destroy(pl_zero3 *z);

int pl_zero3_nunits(const pl_zero3 *z);
/* This rank's shard of unit u: weights (wdt; f32 with fp32_master), f32
 * gradient, s elements, first element's index in the full unit (r·s). */
void pl_zero3_shard(pl_zero3 *z, int u, void **w, float **g, size_t *s,
                    size_t *offset);
/* fp32_master: AdamW's m and v of the shard (NULL otherwise). */
void pl_zero3_moments(pl_zero3 *z, int u, float **m, float **v);
/* The unit's real group (NULL: alone). */
pl_comm *pl_zero3_comm(const pl_zero3 *z, int u);
/* Elements of the gathered unit (G_v·s, >= numel; fp32_master: numel). */
size_t pl_zero3_full_numel(const pl_zero3 *z, int u);
/* Bytes of the largest gathered unit (weights) and of its f32 gradient. */
size_t pl_zero3_max_unit_bytes(const pl_zero3 *z);
size_t pl_zero3_max_grad_bytes(const pl_zero3 *z);

/* Issue the gather of u on the comm stream, ordered after the work issued
 * so far on s, unless u is resident or in flight.  PL_EINVAL if that would
 * make more than max_resident units resident. */
pl_status pl_zero3_prefetch(pl_zero3 *z, int u, pl_stream *s);
/* Prefetch if needed; s waits for the gather; *full = the full unit. */
pl_status pl_zero3_acquire(pl_zero3 *z, int u, pl_stream *s, void **full);
/* Free u's full weights after the work issued on s (no-op if not resident). */
void pl_zero3_release(pl_zero3 *z, int u, pl_stream *s);
bool pl_zero3_resident(const pl_zero3 *z, int u);

/* The full f32 gradient of u, zeroed on s when opened (the same buffer
 * until it is reduced). */
pl_status pl_zero3_grad_acquire(pl_zero3 *z, int u, pl_stream *s, float **full);
/* Reduce-scatter (sum, f32) u's full gradient on the comm stream after the
 * work issued on s, into the gradient shard (overwrite, or += when
 * accumulate), and free it.  No-op if no gradient is open. */
pl_status pl_zero3_grad_reduce(pl_zero3 *z, int u, pl_stream *s,
                               bool accumulate);
/* s waits for everything issued on the comm stream. */
pl_status pl_zero3_sync(pl_zero3 *z, pl_stream *s);
/* After a failed step: s waits for the comm stream, every gathered unit
 * and open gradient is freed (no communication). */
void pl_zero3_reset(pl_zero3 *z, pl_stream *s);
/* The comm stream (timing, tests). */
pl_stream *pl_zero3_stream(pl_zero3 *z);

/* Timing of the comm stream's work (events around each gather and each
 * reduce-scatter) when on.  pl_zero3_take_stats adds up the events recorded
 * since the last call (the device must have finished them) and resets. */
typedef struct pl_zero3_stats {
  int gathers, reduces;
  size_t gather_bytes, reduce_bytes; /* sent + received by this rank       */
  double gather_ms, reduce_ms;
} pl_zero3_stats;
void pl_zero3_set_profile(pl_zero3 *z, bool on);
pl_status pl_zero3_take_stats(pl_zero3 *z, pl_zero3_stats *out);

#ifdef __cplusplus
}
#endif
#endif
