/* report.h — `plateau report RUN_DIR`: Markdown tables and gnuplot charts from
 * the result files of a run directory (report.c), and the signature every
 * report hook has.
 *
 * The run directory is read once (report.c): every *.tsv in RUN_DIR and its
 * direct subdirectories (not RUN_DIR/report) that the reader accepts, v1 files
 * mapped to the current column names.  The tables are grouped by the report
 * that suite/harness/benches.def names for their `bench` metadata, and each
 * report's hook is called once with its group.  A hook writes under
 * rc->out_dir, prints each path it writes, and reads cells through the
 * accessors of report_util.h. */
#ifndef PLATEAU_SUITE_REPORT_H
#define PLATEAU_SUITE_REPORT_H

#include <stdbool.h>

#include "plateau/status.h"
#include "results/results.h"

typedef struct pl_report_ctx {
  const char *run_dir;
  const char *out_dir;      /* RUN_DIR/report */
  const char *analysis_dir; /* where the *.gp scripts are, or NULL */
  const char *name;         /* the report; for `generic`, the bench */
  int charts_skipped;       /* set by pl_rep_chart when a chart was skipped */
  struct pl_rep_claims *claims; /* the summary's figures (pl_rep_claim), or
                                   NULL: none are kept */
} pl_report_ctx;

/* A report hook: t[0..n) are the tables of every bench and peer whose
 * benches.def entry names this report (t[i]->bench tells them apart), in
 * file-name order.  Returns PL_OK, or a status with pl_set_error. */
typedef pl_status pl_report_fn(pl_report_ctx *rc, pl_table *const *t, int n);

/* The hooks, one per report named in benches.def (suite/report_<name>.c);
 * pl_report_generic is the table of every row of one bench. */
#define BENCH(name, report) pl_report_fn pl_report_##report;
#define PEER(name, report) pl_report_fn pl_report_##report;
#include "harness/benches.def"
#undef BENCH
#undef PEER
#undef FEED
pl_report_fn pl_report_generic;

/* report/points.md: the sweep's points that are not done (RUN_DIR/
 * points.status, from jobs/status --write) and every row not ok
 * (report_points.c); nothing when there is neither. */
pl_status pl__report_points(pl_report_ctx *rc, pl_table *const *t, int n);

/* report/summary.md: the paper's claims, one row each (report/paper.h),
 * with ours where a report hook gave it (pl_rep_claim) and "not run here"
 * where none did, then links to the charts that answer them
 * (report_summary.c).  Written after every hook. */
pl_status pl__report_summary(pl_report_ctx *rc);

/* What `plateau report` writes: the Markdown tables, charts and summary, or
 * the rows as one CSV or JSON table per bench (report_export.c). */
typedef enum { PL_REPORT_MD, PL_REPORT_CSV, PL_REPORT_JSON } pl_report_format;

/* Every row of the tables t[0..nt) as one table per bench,
 * rc->out_dir/<bench>.csv or .json (report_export.c). */
pl_status pl__report_export(pl_report_ctx *rc, pl_table *const *t, int nt,
                            bool json);

/* The whole report of run_dir into run_dir/report; *charts_skipped (may be
 * NULL) says whether a chart was skipped.  PL_EIO when nothing was read. */
pl_status pl_report_run(const char *run_dir, int *charts_skipped);
/* The same in the format asked for. */
pl_status pl_report_run_as(const char *run_dir, pl_report_format fmt,
                           int *charts_skipped);

/* Entry for `plateau report RUN_DIR`; argv[0] is "report".  Returns the
 * process exit code (0 ok, also when charts were skipped for want of gnuplot;
 * 2 usage; 3 I/O or no result files). */
int pl_report_main(int argc, char **argv);

#endif
