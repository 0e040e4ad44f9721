/* train_baselines.h — the baselines in the training step's interfaces
 * (engine/train/head.h, optim.h), so `plateau bench train` can ablate each
 * operator against what it replaces: the dense-logits head and the
 * Megatron-style vocabulary-parallel head instead of Ring-DTP, and the
 * classic offloaded SIMD CPU AdamW instead of OffloadStreamAdamW.  Above the
 * engine: libplateau never references these.
 *
 *   pl_head_dense  the full H×V weight on every rank (vocab_parallel 0), the
 *                  rank's own N×V logits (dense_ce.h: PyTorch's tensors);
 *   pl_head_vp     the P-group's shards (vocab_parallel 1): every rank of
 *                  the group holds the group's P·N tokens (all-gathered
 *                  hidden states, targets and dloss, tag "head_gather"),
 *                  computes its N·P × |V_r| logits and the all-reduced dX of
 *                  all P·N rows, and keeps its own N rows — Megatron's
 *                  sequence-parallel gather before a vocabulary-parallel
 *                  head;
 *   pl_optim_cpu   pl_cpu_offload_adamw on the step's host state (f32
 *                  gradients down, the SIMD update, bf16 weights up). */
#ifndef PLATEAU_BASELINES_TRAIN_BASELINES_H
#define PLATEAU_BASELINES_TRAIN_BASELINES_H

#include "train/head.h"
#include "train/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const pl_head_ops pl_head_dense;
extern const pl_head_ops pl_head_vp;
extern const pl_optim_ops pl_optim_cpu;

/* Every head and optimizer of the training step, the one table of each:
 * the ops and their names in the same order, NULL-terminated (the built-in
 * ones first; the names are the ops' own name pointers, train/head.h):
 * `plateau bench train`'s --head and --optim, `plateau plan`'s and the
 * rows' variant strings read them. */
extern const pl_head_ops *const pl_train_heads[];
extern const char *const pl_train_head_names[]; /* ring fused dense vp */
extern const pl_optim_ops *const pl_train_optims[];
extern const char *const pl_train_optim_names[]; /* stream hybrid cpu   */

/* A name of the tables -> its ops; PL_EINVAL naming it and the allowed
 * ones otherwise. */
pl_status pl_train_head_parse(const char *name, const pl_head_ops **out);
pl_status pl_train_optim_parse(const char *name, const pl_optim_ops **out);

#ifdef __cplusplus
}
#endif
#endif
