/* sco.h — SCO, selective checkpoint offload (DESIGN §1.3, Eq. 4).
 *
 * A checkpointed stack keeps each layer's input h_ℓ (the boundary).  SCO moves
 * the boundaries of a selected set S to pinned host memory within a budget B:
 * S is chosen greedily first-layers-first (their boundaries are needed last in
 * backward, so their restores have the most time to hide) and identically on
 * all ranks (each rank counts how many of its boundaries fit its budget; the
 * group takes the minimum).  The bounds the runner keeps:
 *     device boundary bytes ≤ 2·N·H·b + (L − |S|)·N·H·b,   host ≤ |S|·N·H·b.
 *
 * Feasibility is decided before any step: a budget beyond physical host RAM,
 * or a pinned allocation that fails on any rank, is refused on every rank with
 * the same status (the ranks agree through an all-reduce, so none is left in a
 * collective: no deadlock).
 *
 * Pinned storage: by default it is pinned once when the SCO context is created
 * and reused by every step (pinning GBs costs seconds; a training loop would
 * not repeat it).  PL_SCO_RELEASE_STEP pins at the start of each step and
 * releases at its end, as the paper describes; the selection and the refusal
 * rules are the same. */
#ifndef PLATEAU_OPS_SCO_H
#define PLATEAU_OPS_SCO_H

#include <stdbool.h>

#include "plateau/plateau.h"

typedef struct pl_sco pl_sco;

typedef struct pl_sco_budget {
  bool all;       /* every boundary (B = "all")   */
  uint64_t bytes; /* otherwise the budget, bytes */
} pl_sco_budget;

typedef enum pl_sco_release {
  PL_SCO_RELEASE_CONTEXT = 0, /* pinned once, released by pl_sco_destroy */
  PL_SCO_RELEASE_STEP = 1,    /* pinned per step, released at its end     */
} pl_sco_release;

/* comm may be NULL (one rank).  N: this rank's tokens (may be 0); boundary
 * bytes per layer are N·H·dtype_size. */
pl_status pl_sco_create(pl_dev *dev, pl_comm *comm, int L, int64_t N, int64_t H,
                        pl_dtype dt, pl_sco_budget budget, pl_sco_release rel,
                        pl_sco **out);
void pl_sco_destroy(pl_sco *sco);
/* |S| and membership (S = layers 0..|S|−1). */
int pl_sco_count(const pl_sco *sco);
bool pl_sco_selected(const pl_sco *sco, int layer);
/* Pinned slot of layer ℓ ∈ S (valid between begin and end of a step). */
void *pl_sco_slot(pl_sco *sco, int layer);
/* Pin (RELEASE_STEP) / check; collective over comm when pinning. */
pl_status pl_sco_begin_step(pl_sco *sco);
/* Release (RELEASE_STEP) after the step's copies have completed. */
pl_status pl_sco_end_step(pl_sco *sco);
/* Host bytes this rank holds pinned for boundaries now. */
size_t pl_sco_pinned_bytes(const pl_sco *sco);

#endif
