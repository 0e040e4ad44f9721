/* report.h — `plateau report RUN_DIR`: Markdown tables and gnuplot charts from
 * result files (report.c).  Not part of the contract: used by main.c only. */
#ifndef PLATEAU_SUITE_REPORT_H
#define PLATEAU_SUITE_REPORT_H

#include "results.h"

/* Entry for `plateau report RUN_DIR`; argv[0] is "report".  Returns the
 * process exit code (0 ok, also when charts were skipped for want of gnuplot;
 * 2 usage; 3 I/O or no result files). */
int pl_report_main(int argc, char **argv);

/* A bench's report hook: write what the bench wants under out_dir (at least
 * out_dir/<bench>.md) from the tables of that bench; print each path written on
 * stdout.  Return PL_OK, or a status with pl_set_error. */
typedef struct pl_report_ctx {
  const char *run_dir;
  const char *out_dir;      /* RUN_DIR/report */
  const char *analysis_dir; /* where the *.gp scripts are, or NULL */
  int charts_skipped;       /* set by hooks when gnuplot is missing */
} pl_report_ctx;

typedef pl_status (*pl_report_fn)(pl_report_ctx *rc, const char *bench,
                                  pl_table *const *tables, int ntables);

#endif
