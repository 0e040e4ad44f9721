/* plan_mem.h — `plateau plan`'s memory output (plan_mem.c): the byte counts
 * in words, the live set, the result-schema TSV row, how the memory was
 * measured.  Internal to suite/cli. */
#ifndef PLATEAU_SUITE_PLAN_MEM_H
#define PLATEAU_SUITE_PLAN_MEM_H

#include <stdbool.h>
#include <stdio.h>

#include "plan/plan.h"

/* v bytes in words: "36.64 GiB", "12.00 MiB", "8 B". */
const char *pl__plan_hb(double v, char *buf, size_t n);
/* The live set at the peak, largest first: "tag=36.64 GiB ..." for the
 * table; compact ("tag=36.64GiB", single spaces), for --format tsv. */
void pl__plan_live_set(const pl_plan_mem *mem, bool compact, char *buf,
                       size_t n);
/* The plan as one row of the result schema's names, with its header. */
void pl__plan_print_tsv(FILE *f, const pl_model_cfg *m, const pl_plan_cfg *c,
                        const pl_plan_machine *mc, const pl_plan_verdict *v,
                        const pl_plan_time *t);

/* After the table: how the memory above was measured (the system's step
 * on a dry device, the rank view of a run of several ranks, the routes'
 * skew) and, s given, the search's count of measurements in seconds. */
void pl__plan_measured_print(FILE *f, const pl_plan_cfg *c,
                             const pl_plan_machine *mc, const pl_plan_search *s,
                             double seconds);

#endif
