/* epgroups.h — expert groups smaller than the world (train/layout.h's
 * Ep < W_v): the trainer's expert units.  Internal to engine/train.
 *
 * With Ep = W_v (the default) rank r holds experts [r·E/W_v, (r+1)·E/W_v)
 * of every MoE layer whole and the dispatch spans all ranks.  With Ep < W_v
 * the W ranks form W / Ep expert groups of Ep consecutive ranks; each group
 * holds all E experts — rank j of a group the E_l = E / Ep experts
 * [j·E_l, (j+1)·E_l) — so a token's routes stay inside its group (one node
 * when Ep is the node's GPUs: the all-to-all on NVLink).  The W_v / Ep ranks
 * holding the same experts (one per group, rank ≡ j mod Ep) shard them
 * ZeRO-3-style: per MoE layer one unit of the three tensors
 *
 *   [ wg: E_l×H×I | wu: E_l×H×I | wd: E_l×I×H ]   (each at a multiple of
 *                                                  PL__UNIT_ALIGN elements)
 *
 * over the replica group (train/zero3.h: a shard of ⌈n / (W_v/Ep)⌉
 * elements, the f32 gradient shard and the optimizer state of the shard
 * only).  The unit is gathered before the layer's FFN slot (issued when the
 * layer starts, behind its attention half), released after it; in backward
 * gathered again, its full f32 gradient accumulated by the MoE backward and
 * reduce-scattered over the replica group (the partial sums of the W / Ep
 * groups added in the collective's fixed order).  The units form a ZeRO-3
 * set of their own (comm stream, at most one gathered at a time by this
 * schedule), so the dense units' two-unit prefetch is unchanged.
 *
 * Exact: the same model (the parameter table, the seeds and the data are
 * those of Ep = W_v), the same sums — an expert's gradient is summed over
 * the groups' partial gradients instead of computed in one group — so
 * losses, gradients and weights equal Ep = W_v's to reduction-order
 * rounding (test_mpi_epgroups.c).
 *
 * Memory per rank and MoE layer (b: weight bytes): shard weights
 * 3·E_l·H·I·b / (W_v/Ep) and f32 gradients 4× that / b (states); at a time
 * one gathered unit 3·E_l·H·I·b (tag "zero3") and in backward its f32
 * gradient 12·E_l·H·I + one f32 shard ("zero3_grads"); the dispatch bound
 * becomes 2·Ep·k·c·H·b (the group's size).
 *
 * A proxy (W_v > W) works when Ep divides W: the groups are real (present
 * ranks), the replica group is virtual (W / Ep present of W_v / Ep), its
 * gathers tiled as the dense units' are. */
#ifndef PLATEAU_TRAIN_EPGROUPS_H
#define PLATEAU_TRAIN_EPGROUPS_H

#include <stddef.h>
#include <stdint.h>

#include "train/units.h"

/* Offsets of wg, wu, wd in a layer's expert unit of E_l experts and its
 * size in elements. */
static inline size_t pl__ep_unit(int64_t H, int64_t I, int E_l, size_t off[3]) {
  const size_t n = (size_t)E_l * (size_t)H * (size_t)I;
  size_t o = 0;
  for (int j = 0; j < 3; j++) {
    off[j] = o;
    o = (o + n + PL__UNIT_ALIGN - 1) / PL__UNIT_ALIGN * PL__UNIT_ALIGN;
  }
  return o;
}

#endif
