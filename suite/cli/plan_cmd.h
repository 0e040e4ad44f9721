/* plan_cmd.h — `plateau plan` (plan_cmd.c): the per-rank budget of a training
 * configuration before launch, its feasibility, the automatic choice and
 * the paper's projection table, on top of engine/plan.  main.c runs the
 * command; `bench train --describe` prints a budget with it; the benches
 * and jobs/submit call the engine's pl_plan_check (plan/plan.h). */
#ifndef PLATEAU_SUITE_PLAN_CMD_H
#define PLATEAU_SUITE_PLAN_CMD_H

#include <stdio.h>

#include "plan/plan.h"

/* argv[0] is "plan".  Exit code: 0 the configuration fits (or a table was
 * written), 1 it does not fit, 2 usage or bad input (nothing written), 3 a
 * runtime error. */
int pl_plan_main(int argc, char **argv);

/* The per-rank budget of configuration c as `plateau plan` prints it: each
 * term at the peak and at its own peak with its formula, the live set by
 * tag, the host per node, fits or the binding term, and (when it fits) the
 * predicted step by part.  `plateau bench train --describe` prints it for
 * the FSDP2 baseline, which has no pl_train_describe. */
void pl_plan_print_budget(FILE *f, const pl_model_cfg *m, const pl_plan_cfg *c,
                          const pl_plan_machine *mc, const pl_plan_verdict *v,
                          const pl_plan_time *t);

#endif
