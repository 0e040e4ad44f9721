/* vocab_parallel_ce.h — Megatron-style vocabulary-parallel cross-entropy (the
 * second baseline of DESIGN §1.2).
 *
 * W is column-sharded over the P ranks of a group, and every rank holds the
 * SAME batch X (N×H) and targets: rank r computes its logits N×|V_r| in full
 * and the group agrees on the max (all-reduce MAX), the sum of exponentials and
 * the target logit (all-reduce SUM), then the loss.  Backward: dY_r =
 * softmax − onehot on the local logits (kept from the forward, in place),
 * dW_r = Xᵀ·dY_r, dX = all-reduce SUM of dY_r·W_rᵀ.
 *
 * Memory N·|V_r| per rank like Ring-DTP's P-fold split, but the price is the
 * batch: the P ranks together process N distinct tokens, where Ring-DTP's P
 * ranks process P·N (each its own).  Benches report tokens per rank so the
 * two are compared on what they actually compute. */
#ifndef PLATEAU_BASELINES_VOCAB_PARALLEL_CE_H
#define PLATEAU_BASELINES_VOCAB_PARALLEL_CE_H

#include "ops/ce.h"

/* pb->v is the FULL vocabulary; pb->w and pb->dw are this rank's shard
 * h×|V_r| (pl_ce_shard(v, P, r)); x, t, dloss, loss, dx identical on all
 * ranks.  Collective over c. */
pl_status pl_vocab_parallel_ce(pl_comm *c, pl_stream *s,
                               const pl_ce_problem *pb);

#endif
