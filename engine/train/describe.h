/* describe.h — what one rank of the training step holds, before launch: the
 * model's parameter counts and the bytes of every state on the device and
 * in pinned host memory, by the allocator's tags, for a model, a layout
 * (W ranks, this rank) and a step configuration.  A pure function (no
 * device, no MPI): `plateau bench train --describe` prints it and the
 * planner builds on it.
 *
 * Three kinds of items:
 *   state     persistent for the trainer's life, exact (the tracked bytes of
 *             the tag right after pl_trainer_create): shards of the ZeRO-3
 *             units and of the experts (weights, f32 gradients), router
 *             biases, optimizer staging and norm partials, SCO's pinned
 *             boundaries, the fp32 master/m/v;
 *   bound     a transient tag's peak during a step is at most this (asserted
 *             in the tests): gathered units (2), the unsharded f32 gradient,
 *             boundaries on the device (Eq. 4), the runner's gradient
 *             buffers, the dispatch bound of pipelined_llep (Eq. 1: with ep
 *             or llep the receive is router-decided: the item then gives the
 *             balanced routing's size and says it is not a bound), the head's
 *             strips and hop buffers (the built-in heads);
 *   estimate  the intermediates of one layer's forward or backward at a time
 *             (activations, attention workspace, router, expert
 *             intermediates), as the layer code allocates them.
 * The device total is the states plus the sum of the transients: an upper
 * estimate of the peak (not every transient is alive at once). */
#ifndef PLATEAU_TRAIN_DESCRIBE_H
#define PLATEAU_TRAIN_DESCRIBE_H

#include <stdio.h>

#include "train/step.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_desc_kind {
  PL_DESC_STATE,
  PL_DESC_BOUND,
  PL_DESC_ESTIMATE
} pl_desc_kind;

typedef struct pl_desc_item {
  const char *tag; /* the allocator tag                                    */
  pl_arena arena;
  pl_desc_kind kind;
  size_t bytes;
  char what[112]; /* the formula in words                                 */
} pl_desc_item;

#define PL_DESC_MAX 40

typedef struct pl_train_desc {
  pl_model_params params; /* the whole model                                 */
  pl_layout_plan plan;
  int64_t params_rank;     /* parameters this rank updates: its unit shards and
                              experts (padding included)                      */
  size_t unit_max_bytes;   /* the largest gathered unit (weights)            */
  double flops_per_token;  /* pl_model_flops_per_token at S (D = 1 context)   */
  int sco_layers;          /* |S|                                             */
  int64_t resident_params; /* parameters whose optimizer state is resident
                              on the device (tag optim_resident)            */
  int keep_attn, keep_all; /* layers keeping o+lse / the whole attention
                              half (pl_step_keep_layers)                    */
  int n;
  pl_desc_item item[PL_DESC_MAX];
  size_t dev_state, dev_transient, host_state;
} pl_train_desc;

/* W ranks, this rank, sequence length S, the backend (the attention
 * workspace differs).  sc->head / sc->optim NULL: ring / stream.  PL_EINVAL
 * as pl_layout_plan_make. */
pl_status pl_train_describe(const pl_model_cfg *m, const pl_layout_cfg *lc,
                            int W, int rank, int64_t S, const pl_step_cfg *sc,
                            pl_backend be, pl_train_desc *out);

/* The bytes of a tag's items (0 if the tag is not described): all of them,
 * or its states only. */
size_t pl_train_desc_bytes(const pl_train_desc *d, const char *tag,
                           pl_arena arena);
size_t pl_train_desc_state(const pl_train_desc *d, const char *tag,
                           pl_arena arena);

/* The step's ZeRO-3 units in order — the embedding, the L decoder layers,
 * the head (L + 2 of them) — with each unit's parameters and the virtual
 * group its shards are over (train/zero3.h: a rank holds ceil(numel /
 * vsize) of them, a gathered unit is vsize times that).  head_vp: the head
 * is vocabulary-parallel (its unit is this rank's H×|V_r| columns over the
 * W_v / P holders of the shard). */
void pl_train_units(const pl_model_cfg *m, const pl_layout_plan *p, int head_vp,
                    size_t *numel, int *vsize);

/* A human table (one line per item, GiB/MiB/KiB by magnitude) with the
 * counts, the layout and the totals. */
void pl_train_desc_print(const pl_train_desc *d, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
