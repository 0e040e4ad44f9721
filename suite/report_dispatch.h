/* report_dispatch.h — the dispatch bench's report (suite/report_dispatch.c):
 * the layouts of the paper's Tables 6 and 8 with the paper's printed numbers
 * beside ours, every row, and charts of peak memory and time per variant and
 * profile (analysis/dispatch.gp).  Not part of the contract; `plateau report`
 * calls it (OPERATOR_REPORT(report_dispatch, pl_report_dispatch) and
 * {"dispatch", report_dispatch} in suite/report.c's hooks). */
#ifndef PLATEAU_SUITE_REPORT_DISPATCH_H
#define PLATEAU_SUITE_REPORT_DISPATCH_H

#include "plateau/status.h"

/* Reads every *.tsv in run_dir and its direct subdirectories (not report/)
 * whose bench is dispatch; writes out_dir/dispatch.md and, per shape,
 * out_dir/dispatch-<N>-<H>.{tsv,svg,png} (charts skipped with a warning when
 * gnuplot is missing); prints each path written.  PL_EIO when run_dir holds
 * no dispatch rows. */
pl_status pl_report_dispatch(const char *run_dir, const char *out_dir);

#endif
