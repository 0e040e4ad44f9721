/* dispatch.h — what `plateau bench dispatch` (bench_dispatch.c) and its
 * inputs (dispatch_inputs.c: the residents every point shares, the routes of
 * a profile, the ep reference) share.  Internal to suite/. */
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
/* Inputs, weights (native experts, seeded by global expert index), fp32
 * gradients, outputs and the reference's outputs, every point's. */
pl_status pl__dispatch_residents(pl_bench_ctx *c, dispatch *d);
/* The routes of profile (an index of the bench's profiles; 4: the router). */
pl_status pl__dispatch_routes(pl_bench_ctx *c, dispatch *d, int profile,
                              const char *name);
/* The reference of the routes in place: ep (lanes 0) into ref_out, ref_dx. */
pl_status pl__dispatch_reference(pl_bench_ctx *c, dispatch *d);
/* Free the residents. */
void pl__dispatch_free(pl_bench_ctx *c, dispatch *d);

#endif
