/* train_rows.h — the row of a `plateau bench train` point (train_rows.c):
 * its identity columns before it runs and its measured columns after.
 * Internal to suite/. */
#ifndef PLATEAU_SUITE_TRAIN_ROWS_H
#define PLATEAU_SUITE_TRAIN_ROWS_H

#include "harness/bench.h"
#include "train_types.h"

/* The identity columns of point u at `ranks` ranks (virtual world Wv, D
 * ranks per sequence): the layout, the model's sizes and parameter counts,
 * and the planner's choice (--config auto) in the note. */
void pl__train_identity(const pl_train_setup *u, int ranks, int Wv, int D,
                        pl_row *row);
/* The columns of a measured point from its steps' results res[0..n) (the
 * first `warmup` are warm-ups): memory, the time breakdown, losses, rates,
 * against the measured median step time_ms.  Collective (max over ranks). */
pl_status pl__train_row(pl_bench_ctx *c, const pl__train_args *a,
                        const pl_train_system *sys, void *h,
                        const pl_train_setup *u, const pl_step_result *res,
                        int n, pl_row *row, pl_work *w);

#endif
