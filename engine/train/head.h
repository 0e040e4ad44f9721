/* head.h — the vocabulary head of the training step behind one small
 * interface, so the step can run Ring-DTP (ring, over the layout's P-group),
 * the fused head (fused: Ring-DTP at P = 1, the three-GEMM schedule) or a
 * head the suite fills from baselines/ (dense logits, Megatron-style
 * vocabulary-parallel CE), which libplateau does not link.
 *
 * A head maps this rank's final hidden states x (n×h, after the final
 * RMSNorm), targets t (n, int32, device) and its weight — the full H×V
 * (vocab_parallel 0) or this rank's shard H×|V_r| of its P-group
 * (vocab_parallel 1, pl_ce_shard(V, P, r)) — to the per-token NLL (nll, n
 * f32, 0 for an ignored target) and the gradients of Σ_t dloss[t]·nll[t]:
 * dx (n×h) and dw (the weight's shape), both in the model dtype and
 * overwritten.  The step passes dloss = 1/T (T: the step's non-ignored
 * targets over all ranks and micro-batches), so the gradients are those of
 * the mean over the whole batch whatever the group. */
#ifndef PLATEAU_TRAIN_HEAD_H
#define PLATEAU_TRAIN_HEAD_H

#include "ops/ce.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_head_shape {
  pl_dtype dt;
  int64_t n, h, v; /* this rank's tokens, hidden, the FULL vocabulary */
  int32_t ignore;  /* PL_CE_IGNORE_INDEX                              */
  int64_t block;   /* vocabulary block of blocked heads (0: default)  */
} pl_head_shape;

typedef struct pl_head_ops {
  const char *name;   /* "ring", "fused", "dense", "vp"                   */
  int vocab_parallel; /* 1: the weight is sharded over the P-group       */
  /* group: the P-group (vocab_parallel) or this rank alone; collective
   * over it. */
  pl_status (*create)(pl_comm *group, const pl_head_shape *sh, void **ctx);
  void (*destroy)(void *ctx);
  /* Forward and backward on stream s (the device's default stream). */
  pl_status (*run)(void *ctx, pl_stream *s, const void *x, const int32_t *t,
                   const void *w, const float *dloss, float *nll, void *dx,
                   void *dw);
  /* Bytes of the head's own transient device memory bound (its "logits"
   * and "ring" tags), for the step's description; NULL: unknown. */
  size_t (*logits_bound)(void *ctx);
} pl_head_ops;

/* Ring-DTP over the P-group (auto mode, blocked strips). */
extern const pl_head_ops pl_head_ring;
/* The fused head: Ring-DTP over this rank alone, the full vocabulary (the
 * three-GEMM schedule when a row of V fits the strip bound). */
extern const pl_head_ops pl_head_fused;

/* The sum of the N per-token losses nll (device, f32) in index order,
 * through the host buffer h_nll (N floats); s synchronized. */
pl_status pl_head_nll_sum(pl_stream *s, const float *nll, float *h_nll,
                          int64_t N, double *sum);

/* The heads' names, each written once: a head's ops point at its name, and
 * every list of names (the built-in heads' below, every head's in
 * baselines/train_baselines.h: the options of the trainer's bench and the
 * planner, the rows' variant strings) holds these pointers. */
extern const char pl_head_name_ring[];  /* "ring"  */
extern const char pl_head_name_fused[]; /* "fused" */
/* The built-in heads and their names, in the same order, NULL-terminated. */
extern const pl_head_ops *const pl_head_builtins[];
extern const char *const pl_head_builtin_names[];

/* "ring" | "fused" -> the built-in heads (the suite adds "dense", "vp"). */
pl_status pl_head_builtin(const char *name, const pl_head_ops **out);

#ifdef __cplusplus
}
#endif
#endif
