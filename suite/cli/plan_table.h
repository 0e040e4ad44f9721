/* plan_table.h — `plateau plan --table paper` (plan_table.c): the planner's
 * projection of the paper's end-to-end points beside its printed figures.
 * Used by plan_cmd.c only. */
#ifndef PLATEAU_SUITE_PLAN_TABLE_H
#define PLATEAU_SUITE_PLAN_TABLE_H

#include <stdbool.h>

#include "plan/plan.h"

/* Can --table paper write into dir?  Checked before the half minute of
 * computing, nothing created: the directory (pl_results_dir_check: every
 * existing part a directory, a new entry creatable) and each output name
 * there new or a regular file.  PL_EINVAL naming --out and the part. */
pl_status pl_plan_table_check_out(const char *dir);

/* 120B / 241B / 667B on 16 / 32 / 64 GPUs at 32K…1M for plateau and
 * FSDP2-best: Markdown on stdout (tsv: the rows), or with out_dir the files
 * plan_paper.md, plan_paper.tsv, plan_reach.tsv and, when gnuplot is
 * installed, plan_reach.svg and plan_reach.png (analysis/plan_reach.gp),
 * each written under a temporary name and renamed into place when all are
 * complete.  Progress, one line per point, on stderr.  Every candidate's
 * memory is measured by a step on a dry device (the points' searches on
 * OpenMP's threads).  Returns the exit code (0, or 3 when a file cannot be
 * written). */
int pl_plan_table_paper(const pl_plan_machine *mc, const char *out_dir,
                        bool tsv);

#endif
