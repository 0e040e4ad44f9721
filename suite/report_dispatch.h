/* report_dispatch.h — the `plateau report` hook of the dispatch bench
 * (report_dispatch.c): Tables 6 and 8 layouts with the paper's numbers beside
 * ours, all rows, and analysis/dispatch.gp charts.  To be listed in report.c's
 * hook table as {"dispatch", pl_report_dispatch}. */
#ifndef PLATEAU_SUITE_REPORT_DISPATCH_H
#define PLATEAU_SUITE_REPORT_DISPATCH_H

#include "report.h"

pl_status pl_report_dispatch(pl_report_ctx *rc, const char *bench,
                             pl_table *const *tables, int ntables);

#endif
