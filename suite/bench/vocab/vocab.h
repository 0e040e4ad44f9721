/* vocab.h — what `plateau bench vocab` (bench_vocab.c) and its reference
 * (vocab_ref.c: a point's inputs and W's shards, the check against the fused
 * head, the columns with Ring-DTP's analytic floor) share.  Internal to
 * suite/. */
#ifndef PLATEAU_SUITE_VOCAB_H
#define PLATEAU_SUITE_VOCAB_H

#include "harness/bench.h"
#include "ops/ring_dtp.h"

enum { V_DENSE, V_FUSED, V_BLOCKED, V_CHUNK, V_VP, V_RING, V_COUNT };

/* ---- one point ----------------------------------------------------------- */

typedef struct pl__vocab_point {
  pl_bench_ctx *ctx;
  int variant;
  pl_dtype dt;
  int64_t n, h, v, block;
  pl_dtp_mode mode;
  pl_dtp_sched sched; /* ring: what pl_dtp_run runs (asked)              */
  size_t budget;      /* ring: strip budget (bytes of kept logit strips) */
  int overlap;
  int tf32; /* f32 GEMMs in TF32 math (--tf32)                 */
  pl_stream *s;
  /* inputs */
  void *x, *w;
  int32_t *t;       /* device */
  int32_t *th;      /* host copy */
  int64_t col0, vs; /* shard (ring, vp); whole vocab otherwise */
  float *loss;
  void *dx, *dw; /* gradients of the last iteration */
  pl_dtp *dtp;
} pl__vocab_point;

/* The gradients of the last iteration, freed. */
void pl__vocab_free_grads(pl__vocab_point *p);
/* One forward + backward of the point's variant (the timed unit). */
pl_status pl__vocab_iter(void *p);
/* W (h×v global, row-major) columns [col0, col0+vs): counter-RNG draws at
 * the global index k·v + col0 + q, so every shard is a slice of the same W. */
pl_status pl__vocab_fill_w(pl__vocab_point *p, void *w, int64_t col0,
                           int64_t vs, uint64_t seed);
/* Loss and dX against the blocked fused head (f32 strips; in f32 math even
 * when the point ran TF32, then with bf16's tolerance) with sum reduction on
 * the same inputs (full W), rescaled by the count of targets the variant
 * averages over; reduction length V. */
pl_status pl__vocab_check(pl__vocab_point *p, pl_check *chk);
/* The point's inputs: X (this rank's batch; vp: the same batch on every
 * rank), W or its shard, the targets (a few ignored); Ring-DTP's schedule. */
pl_status pl__vocab_inputs(pl_bench_ctx *c, pl__vocab_point *p);
/* The columns of a measured point: the kernel, Ring-DTP's mode, hop and sent
 * bytes and analytic floor (bound_bytes), the note on each variant's batch. */
pl_status pl__vocab_columns(pl_bench_ctx *c, pl__vocab_point *p, pl_row *row);
/* Free the point's inputs, gradients and schedule; the point zeroed. */
void pl__vocab_free(pl_bench_ctx *c, pl__vocab_point *p);

#endif
