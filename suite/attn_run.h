/* attn_run.h — what `plateau bench attention` (bench_attention.c) and its
 * run (attn_run.c: the point's tensors, one forward [+ backward], the
 * check against a reference) share.  Internal to suite/. */
#ifndef PLATEAU_SUITE_ATTN_RUN_H
#define PLATEAU_SUITE_ATTN_RUN_H

#include "bench.h"
#include "model/attention.h"

typedef struct attn_run {
  pl_attn_shape sh; /* this rank's: seq = S/D tokens, all heads */
  pl_comm *sp;      /* Ulysses group (the run's ranks) when D > 1, else NULL */
  pl_stream *s;
  void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float *lse;
  int bwd;
  uint64_t off; /* first token of this rank × d: the RNG offset of its shard */
} attn_run;

/* One forward, and with r->bwd the backward (Ulysses over r->sp when set). */
pl_status pl__attn_run(void *r);
/* The point's tensors, N(0,1) inputs at the rank's offset; the gradients and
 * dout with with_grads. */
pl_status pl__attn_alloc(pl_dev *dev, attn_run *r, int with_grads);
void pl__attn_free(pl_dev *dev, attn_run *r);
/* The check of one rank's point (attn_run.c): against the SIMPLE kernels
 * (CUDA, S <= 16Ki) or the double reference (CPU, S <= 1Ki), else skipped. */
pl_status pl__attn_check(pl_bench_ctx *c, attn_run *r, pl_check *chk);

#endif
