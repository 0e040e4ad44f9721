/* dispatch.h — what `plateau bench dispatch` (bench_dispatch.c), its
 * inputs (dispatch_inputs.c: the residents every point shares, the routes of
 * a profile, the ep reference and the check) and its columns
 * (dispatch_row.c) share.  Internal to suite/. */
#ifndef PLATEAU_SUITE_DISPATCH_H
#define PLATEAU_SUITE_DISPATCH_H

#include "bench.h"
#include "ops/moe.h"

typedef struct job {
  pl_moe *m;
  pl_moe_weights W;
  pl_moe_wgrads G;
  void *x, *dout, *out, *dx;
  float *w, *dw;
  int32_t *idx; /* host */
  int64_t N;
  bool bwd;
  pl_moe_stats st;
  int ov_bwd; /* backward chunks overlapped (last iteration) */
  double stage_ms[PL_MOE_NSTAGES]; /* last fwd+bwd */
} job;

typedef struct dpt {
  int variant, profile, chunking, lanes, cblocks;
} dpt;

typedef struct dispatch {
  pl_moe_cfg cfg, vc; /* the layer's, and the point's */
  dpt *pts;
  int resident; /* 1: the residents below exist; -1: they failed */
  pl_status res_st;
  char res_msg[512];
  job j;
  void *ref_out, *ref_dx;
  float *hw;
  int profile; /* of the routes and the reference in place, -1 none */
  bool have_ref;
} dispatch;

/* One forward, and with j->bwd the backward (counters of the last run). */
pl_status pl__dispatch_job(void *j);
/* The layer's shape against what the bench runs (k <= E, E·H·I <= 2^40, E a
 * multiple of the ranks): a usage error naming the options. */
pl_status pl__dispatch_cfg_check(pl_bench_ctx *c, const pl_moe_cfg *g);
/* The inputs of a point of profile (an index of the bench's profiles; name:
 * its name, "router" for the real router): the residents once (inputs, weights, native
 * experts seeded by global expert index, fp32 gradients, outputs and the
 * reference's outputs, every point's), and on a change of profile its routes
 * and, with --check, its reference (ep, lanes 0, into ref_out, ref_dx). */
pl_status pl__dispatch_inputs(pl_bench_ctx *c, dispatch *d, int profile,
                              const char *name);
/* The check of a point: out and dx against the reference; a pipelined
 * point's dispatch peak against its bound. */
pl_status pl__dispatch_check(pl_bench_ctx *c, dispatch *d, pl_check *chk);
/* The columns of a measured point: fwd_ms, the counters of the last run,
 * the stages; the work (w) the rates count. */
pl_status pl__dispatch_columns(pl_bench_ctx *c, dispatch *d, pl_row *row,
                               pl_work *w);
/* Free the residents. */
void pl__dispatch_free(pl_bench_ctx *c, dispatch *d);

#endif
