/* train_plan.h — `plateau bench train`'s planning (train_plan.c): the run's
 * machine, the planner's prediction and verdict of a point before it runs,
 * --config auto's choice and the headroom fill, the pinned-host limit of a
 * point, and the planner's budget for --describe.  Internal to suite/. */
#ifndef PLATEAU_SUITE_TRAIN_PLAN_H
#define PLATEAU_SUITE_TRAIN_PLAN_H

#include <stdbool.h>
#include <stdio.h>

#include "harness/bench.h"
#include "train_types.h"

/* The run's machine for the planner (collective): the defaults of the
 * backend's target with calib (a calib result file; NULL: none) read in,
 * device memory --mem-limit or the device's (less the planner's reserve on
 * a GPU), host memory the host's available RAM (less the 2 GiB the bench
 * keeps), the ranks sharing a host; the smallest over the ranks. */
pl_status pl__train_machine(pl_bench_ctx *c, const char *calib,
                            pl_plan_machine *mc);
/* The prediction of point u of sys at W ranks on a->mc (out->have false,
 * the reason in out->why, when the planner does not model it). */
void pl__train_predict(const pl__train_args *a, const pl_train_system *sys,
                       const pl_train_setup *u, int W, pl__train_pred *out);
/* Point u before launch (the same verdict on every rank: a->mc is agreed):
 * the prediction into *pr and the row's pred_* columns; a point predicted
 * not to fit is PL_EINFEASIBLE (an infeasible row naming the binding term)
 * unless --verify; else the verdict goes to the row's note. */
pl_status pl__train_plan_point(pl_bench_ctx *c, const pl__train_args *a,
                               const pl_train_system *sys,
                               const pl_train_setup *u, pl_row *row,
                               pl__train_pred *pr);
/* A failure st of a predicted point (create, a step): its message with the
 * plan's verdict appended (st unchanged; PL_OK passes). */
pl_status pl__train_plan_fail(const pl__train_pred *pr, pl_status st);
/* The pinned-host limit of a point (on: set, off: lifted): one process
 * alone on its host gets MemAvailable less 2 GiB on top of what the arena
 * holds (an allocation beyond it is an oom row, not the kernel's OOM
 * killer); several ranks: no limit. */
void pl__train_host_limit(pl_bench_ctx *c, bool on);
/* --config auto: the planner's choice (pl_plan_auto) of the knobs of sys
 * the command line leaves, written into u (u->chosen says what, u->fill the
 * headroom fill; nothing fits: the closest, whose row is then infeasible).
 * PL_EINVAL naming the point when the planner cannot search it. */
pl_status pl__train_auto(const pl__train_args *a, const pl_args *args,
                         const pl_train_system *sys, pl_train_setup *u, int W);
/* --optim-resident auto, --keep auto (without --config auto): the
 * planner's fill of the headroom of point u with its other knobs as given
 * (pl_plan_fill), written into u->sc and u->fill.  PL_EINVAL naming the
 * point when the planner cannot model it. */
pl_status pl__train_fill(const pl__train_args *a, const pl_train_system *sys,
                         pl_train_setup *u, int W);
/* --describe: the planner's budget of u (plateau plan's table) on f. */
void pl__train_plan_describe(const pl__train_args *a,
                             const pl_train_system *sys,
                             const pl_train_setup *u, int W, FILE *f);

#endif
