/* plan.h — `plateau plan` (plan.c): the per-rank budget of a training
 * configuration before launch, its feasibility, the automatic choice and
 * the paper's projection table, on top of engine/plan.  Used by main.c
 * only; the suite's benches and jobs/submit call the engine's
 * pl_plan_check (plan/plan.h) directly. */
#ifndef PLATEAU_SUITE_PLAN_H
#define PLATEAU_SUITE_PLAN_H

/* argv[0] is "plan".  Exit code: 0 the configuration fits (or a table was
 * written), 1 it does not fit, 2 usage or bad input (nothing written), 3 a
 * runtime error. */
int pl_plan_main(int argc, char **argv);

#endif
