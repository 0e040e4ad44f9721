/* ckpt.h — the checkpointed layer runner, generic over a layer's forward and
 * backward.  Forward keeps only each layer's input h_ℓ (the boundary, tag
 * "boundary"); backward recomputes layer ℓ from h_ℓ.  With an SCO context the
 * selected boundaries go to pinned host memory on a copy stream after they
 * are produced and come back one layer ahead of the backward that needs them
 * (DESIGN §1.3).  SCO changes no arithmetic: loss and gradients are
 * bit-identical with and without it. */
#ifndef PLATEAU_TRAIN_CKPT_H
#define PLATEAU_TRAIN_CKPT_H

#include <stdbool.h>

#include "ops/sco.h"
#include "plateau/plateau.h"

typedef struct pl_layer_ops {
  /* y = f(x), x and y N×H of the stack's dtype, distinct buffers */
  pl_status (*forward)(void *layer, pl_stream *s, const void *x, void *y,
                       int64_t N);
  /* recompute from x; dx = dL/dx from dy; accumulate weight grads.  dx and dy
   * are distinct buffers. */
  pl_status (*backward)(void *layer, pl_stream *s, const void *x,
                        const void *dy, void *dx, int64_t N);
} pl_layer_ops;

typedef struct pl_ckpt_stack pl_ckpt_stack;

/* layers[ℓ] is passed to ops; borrowed for the life of the stack. */
pl_status pl_ckpt_create(pl_dev *dev, int L, void *const *layers,
                         const pl_layer_ops *ops, int64_t H, pl_dtype dt,
                         pl_ckpt_stack **out);
void pl_ckpt_destroy(pl_ckpt_stack *st);

/* One step: forward through L layers from x0 (N×H), loss = Σ h_L ⊙ g
 * (fp32 accumulation; g plays the loss gradient), backward to dx0 (N×H).
 * sco may be NULL (every boundary stays on the device).  *loss on the host. */
pl_status pl_ckpt_step(pl_ckpt_stack *st, pl_sco *sco, const void *x0,
                       const void *g, void *dx0, int64_t N, double *loss);

/* The loss at the top of a stack (a model's head): from the last layer's
 * output h_L (N×H) compute the loss (*loss, on the host) and write dL/dh_L
 * into dh (N×H, the runner's buffer, tag "grads_act").  Runs on the compute
 * stream (the device's default) between the forward and the backward. */
typedef struct pl_ckpt_head {
  pl_status (*run)(void *ctx, pl_stream *s, const void *hL, void *dh, int64_t N,
                   double *loss);
  void *ctx;
} pl_ckpt_head;

/* pl_ckpt_step with a head instead of the dot product with g. */
pl_status pl_ckpt_step_head(pl_ckpt_stack *st, pl_sco *sco, const void *x0,
                            const pl_ckpt_head *head, void *dx0, int64_t N,
                            double *loss);

/* Time SCO's copies with events (off by default): after a step,
 * pl_ckpt_copy_ms gives the milliseconds of its boundary offloads (D2H) and
 * restores (H2D), each summed over layers (they run beside the compute). */
void pl_ckpt_set_profile(pl_ckpt_stack *st, bool on);

/* Agree over c (borrowed; NULL: none, the default) at the layer boundaries:
 * before each layer's forward, the head, and each layer's backward, every
 * rank passes its status so far (plateau/comm.h pl_agree), so a rank that
 * failed in a layer after its last collective, or in the runner's own
 * allocations, ends the step on every rank of c before any enters the next
 * layer's collectives.  The ranks of c run their steps together (the same
 * layers, in order).  A failure in layer 0's backward or after it is
 * returned as is: the caller agrees before its next collective. */
void pl_ckpt_set_agree(pl_ckpt_stack *st, pl_comm *c);
/* Each layer's kind ("moe", "dense": L static strings, copied) for the
 * tracker's phase (pl_mem_phase_set): the runner marks "forward layer l
 * (kind)", "head" and "backward layer l (kind)" as it goes; without kinds
 * the layers' phases name no kind. */
pl_status pl_ckpt_set_kinds(pl_ckpt_stack *st, const char *const *kind);
void pl_ckpt_copy_ms(const pl_ckpt_stack *st, double *d2h_ms, double *h2d_ms);

/* The model's layers as runner layers (the runner sits above the model, so
 * the adapters live here): the dense block (model/mlp_block.h; layers[ℓ] a
 * pl_mlp_block *) and the decoder layer (model/layer.h; a pl_layer *). */
extern const pl_layer_ops pl_mlp_block_layer_ops;
extern const pl_layer_ops pl_decoder_layer_ops;

#endif
