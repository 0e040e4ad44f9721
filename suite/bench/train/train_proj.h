/* train_proj.h — a proxy's projection of the W_v-rank run it plays
 * (train_proj.c): compute and memory measured, communication modelled.
 * Internal to suite/. */
#ifndef PLATEAU_SUITE_TRAIN_PROJ_H
#define PLATEAU_SUITE_TRAIN_PROJ_H

#include "harness/bench.h"
#include "train_types.h"

/* The columns standin_ms, standin_side_ms (the virtual groups' stand-ins,
 * median over the timed steps, max over ranks; profile on), compute_ms =
 * time_ms − standin_ms, comm_model_ms (pr->comm_ms), step_proj_ms =
 * compute_ms + comm_model_ms, tok_s_gpu_proj and tflops_proj at
 * step_proj_ms, pred_proj_ms (the planner's whole step of that run), and
 * the note saying so.  Nothing for a real run (W_v = W).  Collective. */
pl_status pl__train_proj_row(pl_bench_ctx *c, const pl__train_args *a,
                             const pl_train_system *sys,
                             const pl_train_setup *u, const pl__train_pred *pr,
                             const pl_step_result *res, int n, pl_row *row);

#endif
