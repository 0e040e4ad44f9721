/* report_sco.h — SCO's report (suite/report_sco.c): the paper's Tables 3 and
 * 13 beside ours, from the result files of `plateau bench sco` and
 * `plateau bench maxbatch --bench sco` in a run directory.  Not part of the
 * contract; `plateau report` calls it. */
#ifndef PLATEAU_SUITE_REPORT_SCO_H
#define PLATEAU_SUITE_REPORT_SCO_H

#include "plateau/status.h"

/* Reads every *.tsv in run_dir and its direct subdirectories (not report/),
 * writes out_dir/sco.md and the chart out_dir/sco-budget[-k].{svg,png}
 * (analysis/sco.gp; skipped with a warning when gnuplot is missing) and
 * prints each path written.  PL_EIO when run_dir holds no sco or maxbatch
 * rows. */
pl_status pl_report_sco(const char *run_dir, const char *out_dir);

#endif
