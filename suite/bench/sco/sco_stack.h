/* sco_stack.h — what `plateau bench sco` (bench_sco.c) and its stack
 * (sco_stack.c: the L dense blocks, their inputs, the gradients' reset and
 * dx0's host copy) share.  Internal to suite/. */
#ifndef PLATEAU_SUITE_SCO_STACK_H
#define PLATEAU_SUITE_SCO_STACK_H

#include "harness/bench.h"
#include "model/mlp_block.h"
#include "train/ckpt.h"

#define MAX_BUDGETS 128

typedef struct budget_pt {
  char text[32]; /* as reported: "0", "all", "1.5Gi" or bytes */
  pl_sco_budget b;
} budget_pt;

typedef struct sco_bench {
  int64_t L, H, I, N;
  pl_dtype dt;
  pl_sco_release rel;
  int nb;
  budget_pt budgets[MAX_BUDGETS];
  /* the stack, made once (stack_st: its status, a failure is every row's) */
  int made;
  pl_status stack_st;
  char stack_msg[512];
  pl_mlp_block *blocks;
  void **layers;
  void *x0, *g, *dx0;
  pl_ckpt_stack *stack;
  double ref_loss;
  void *ref_dx; /* host; NULL: no reference (ref_why says why) */
  char ref_why[512];
  /* the point */
  pl_sco *sco;
  double loss;
} sco_bench;

/* Bytes of one boundary, N·H·b. */
static inline size_t pl__sco_nhb(const sco_bench *b) {
  return (size_t)b->N * (size_t)b->H * pl_dtype_size(b->dt);
}

/* The stack and its inputs (each rank its own tokens). */
pl_status pl__sco_make_stack(pl_bench_ctx *c, sco_bench *b);
/* Zero the gradients; poison dx0 so that a step writing nothing fails. */
pl_status pl__sco_zero_grads(pl_bench_ctx *c, sco_bench *b);
/* dx0 into a new host buffer (a comparison copy, not tensor memory). */
pl_status pl__sco_fetch_dx0(pl_bench_ctx *c, sco_bench *b, void **out);
/* Free the stack, its inputs and the reference's copy. */
void pl__sco_free_stack(pl_bench_ctx *c, sco_bench *b);

#endif
