/* train_types.h — the types the units of `plateau bench train` pass one
 * another: what the command line asks for and the points it makes
 * (train_args.c fills them; the planning, the rows and the projection read
 * them) and the planner's prediction of a point (train_plan.c fills it; the
 * bench and the projection read it).  Types only: each unit's functions are
 * declared in its own header.  Internal to suite/. */
#ifndef PLATEAU_SUITE_TRAIN_TYPES_H
#define PLATEAU_SUITE_TRAIN_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/bench.h"
#include "plan/plan.h"
#include "train_system.h"

/* Training systems one run measures at most (--system's list). */
#define PL_TRAIN_MAX_SYS 4

/* One point of the run: a system at one context with its knobs. */
typedef struct pl__train_point {
  const pl_train_system *sys;
  pl_train_setup u;  /* S, the model, the knobs of this point */
  int warmup, iters; /* a --points point's (-1: the command line's) */
} pl__train_point;

/* What the command line asks for. */
typedef struct pl__train_args {
  pl_train_setup u; /* S unset: one per point */
  int64_t seq[PL_OPT_LIST_MAX];
  int nseq;
  const pl_train_system *sys[PL_TRAIN_MAX_SYS];
  int nsys;
  pl__train_point *pts; /* every point, in order (owned) */
  int npts;
  bool describe;
  double gemm_tflops; /* 0: unknown */
  char gemm_src[160]; /* where it came from */
  pl_data *data;      /* the stream of vocabulary data_V, owned */
  int64_t data_V;
  /* the planner (train_plan.c) */
  pl_plan_machine mc;  /* the run's machine, the same on every rank */
  bool verify;         /* run points predicted not to fit              */
  bool auto_cfg;       /* --config auto                                 */
  int64_t step_tokens; /* --step-tokens (0: one pass, --micro)          */
} pl__train_args;

/* The planner's prediction of a point. */
typedef struct pl__train_pred {
  bool have;             /* the planner models the point              */
  bool fits;             /* device and host within the run's machine  */
  size_t dev_peak, host; /* device peak, pinned host bytes per rank   */
  double time_ms;        /* the step on the run's machine             */
  char binding[40];      /* the term that binds ("" when it fits)     */
  char why[320];         /* "plan: fits (...)", "plan: does not fit,
                            binding term ...", or why none            */
  /* a proxy (W_v > W): the W_v-rank run it plays (pl_plan_proxy_comm) */
  bool have_proj;     /* a proxy whose W_v-rank run was predicted  */
  double comm_ms;     /* its exposed communication less the proxy's */
  double proj_run_ms; /* its whole predicted step                  */
  double comm_lo_ms, comm_hi_ms; /* comm_ms with ib_gbs scaled by 1 ∓
                                    PL_PLAN_LINK_FRAC (NAN: none)     */
  int proj_gpn;                  /* GPUs per node it was projected on         */
} pl__train_pred;

#endif
