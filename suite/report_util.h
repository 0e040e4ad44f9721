/* report_util.h — helpers shared by the `plateau report` hooks (report.c and
 * report_<bench>.c): finding and reading a run's result files, cells and
 * numbers of a row, Markdown escaping, number formatting, and drawing one
 * chart (SVG + PNG) with gnuplot from a script in analysis/.  Internal to
 * suite/ (not part of the contract). */
#ifndef PLATEAU_SUITE_REPORT_UTIL_H
#define PLATEAU_SUITE_REPORT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "results.h"

/* ---- files ---------------------------------------------------------------- */
bool pl_rep_is_dir(const char *path);

/* Paths of the *.tsv in run_dir and its direct subdirectories (not
 * run_dir/report, no dot files), sorted by strcmp.  *paths is malloc'd (free
 * with pl_rep_free_paths); returns the count. */
int pl_rep_scan_tsv(const char *run_dir, char ***paths);
void pl_rep_free_paths(char **paths, int n);

/* Every file of pl_rep_scan_tsv that pl_table_read accepts, in that order
 * (failed reads are dropped).  *tables is calloc'd (free with
 * pl_rep_free_tables); returns the count. */
int pl_rep_read_tables(const char *run_dir, pl_table **tables);
void pl_rep_free_tables(pl_table *tables, int n);

/* mkdir out_dir (0775); an existing directory is fine. */
pl_status pl_rep_mkdir(const char *out_dir);

/* ---- cells ---------------------------------------------------------------- */
/* The cell of column `col` in `row` of t, "-" when t has no such column. */
const char *pl_rep_cell(const pl_table *t, char **row, const char *col);
/* The whole string as a number; NAN for NULL, "", "-" or trailing text. */
double pl_rep_num(const char *s);
/* The number at the start of s (the rest ignored); NAN for NULL, "", "-". */
double pl_rep_num_lead(const char *s);

/* ---- Markdown and formats --------------------------------------------------- */
/* s into a Markdown table cell: '|' escaped. */
void pl_rep_md_text(FILE *f, const char *s);
/* printf(fmt, v) into buf, or `nan` when v is NaN; returns buf. */
const char *pl_rep_fmt(char *buf, size_t n, const char *fmt, double v,
                       const char *nan);

/* ---- charts ------------------------------------------------------------------ */
/* The analysis/ directory holding the *.gp scripts: $PLATEAU_ROOT/analysis,
 * <binary>/../../analysis, or ./analysis; NULL when none exists. */
const char *pl_rep_analysis_dir(void);

/* Run `$PLATEAU_GNUPLOT (default gnuplot) -c script args...`: 0 ok, 127 not
 * installed, -1 fork/wait failed, else its exit status. */
int pl_rep_gnuplot(const char *script, const char *const *args, int nargs);

/* One chart in both formats: out_stem.svg then out_stem.png, each drawn by
 * `gnuplot -c script data out extra...` and its path printed.  gnuplot
 * missing: "plateau report: warning: gnuplot not found: <skipped>" on
 * stderr, *charts_skipped = 1, PL_OK.  A failing gnuplot is PL_ERUNTIME. */
pl_status pl_rep_chart(const char *script, const char *data,
                       const char *out_stem, const char *const *extra,
                       int nextra, const char *skipped, int *charts_skipped);

#endif
