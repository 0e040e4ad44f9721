/* train_check.h — `plateau bench train --check` (train_check.c): every
 * step's loss finite, and where it applies one forward + backward against
 * the single-rank reference step.  Internal to suite/. */
#ifndef PLATEAU_SUITE_TRAIN_CHECK_H
#define PLATEAU_SUITE_TRAIN_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/bench.h"
#include "train_system.h"

/* Every step's loss res[0..n) finite (the check of every point). */
void pl__train_check_losses(const pl_step_result *res, int n, pl_check *chk);
/* Does the reference step apply (why not: into why)? */
bool pl__train_check_applies(pl_bench_ctx *c, const pl_train_system *sys,
                             const pl_train_setup *u, char *why, size_t n);
/* One forward + backward of the system at step index st against the
 * single-rank reference on the same weights and sequences: loss and every
 * gradient (normwise, 1e-4; loss 1e-5).  Collective. */
pl_status pl__train_check_reference(pl_bench_ctx *c, const pl_train_system *sys,
                                    void *h, const pl_train_setup *u,
                                    pl_data *data, int64_t st, pl_check *chk);

#endif
