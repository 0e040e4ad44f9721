/* report_adam.h — the optimizer's report (suite/report_adam.c): Table 4 and
 * Table 14 layouts (paper's printed values beside ours), the targets, and the
 * step-time vs β × s chart with the host-link floor dashed.
 *
 * Wiring into `plateau report` (suite/report.c, hooks[]):
 *   {"adam", pl_report_adam_hook},
 * The hook ignores the tables it is handed and reads run_dir itself, because
 * it also needs the torch peer files (torch_adamw.*.tsv). */
#ifndef PLATEAU_SUITE_REPORT_ADAM_H
#define PLATEAU_SUITE_REPORT_ADAM_H

#include "report.h"

/* Reads adam.*.tsv and torch_adamw.*.tsv under run_dir (and one level
 * below); writes out_dir/adam.md, adam_sweep.csv and, with gnuplot,
 * adam_sweep.svg/.png (script: $PLATEAU_ANALYSIS_DIR or ./analysis); prints
 * each path.  PL_EIO when there is no ok row. */
pl_status pl_report_adam(const char *run_dir, const char *out_dir);
/* The same with report.c's hook signature (charts from rc->analysis_dir). */
pl_status pl_report_adam_hook(pl_report_ctx *rc, const char *bench,
                              pl_table *const *tables, int ntables);

#endif
