/* report_util.h — what every `plateau report` hook uses (report_util.c): the
 * one cell accessor (by column name, text or number), Markdown and number
 * formatting, output files, and the one chart helper (a gnuplot script from
 * analysis/, a data file, SVG + PNG).  Internal to suite/. */
#ifndef PLATEAU_SUITE_REPORT_UTIL_H
#define PLATEAU_SUITE_REPORT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "report.h"
#include "results/results.h"

/* ---- cells ----------------------------------------------------------------
 */
/* The text of column `col` in row r of t; "-" when t has no such column.
 * Column names are the current schema's (the reader maps v1 files). */
const char *pl_cell(const pl_table *t, int r, const char *col);
/* The same as a number: NAN when absent, "-", empty or not wholly a number. */
double pl_cell_num(const pl_table *t, int r, const char *col);
/* Does t have column col? */
bool pl_has_col(const pl_table *t, const char *col);
/* Are the columns cols[0..] (NULL-terminated) of row r, which a report
 * groups or sorts its rows by, all finite numbers?  If one is not ("-",
 * "nan", text, or the column missing), a warning naming the file, its line,
 * the column and the value goes to stderr and the answer is false: the
 * report leaves the row out rather than compare NaN keys (which never equal
 * themselves: a group loop would never advance) or convert them. */
bool pl_rep_keys_ok(const char *report, const pl_table *t, int r,
                    const char *const *cols);
/* The whole string as a number; NAN for NULL, "", "-" or trailing text. */
double pl_rep_num(const char *s);

/* ---- Markdown and formats ---------------------------------------------------
 */
/* s into a Markdown table cell: '|' escaped. */
void pl_rep_md_text(FILE *f, const char *s);
/* printf(fmt, v) into buf, or `nan` when v is NaN; returns buf. */
const char *pl_rep_fmt(char *buf, size_t n, const char *fmt, double v,
                       const char *nan);
/* A measured quantity (ms, tok/s, TFLOP/s, a percentage) in the one format
 * every report uses for it: 4 significant digits, never fewer than its
 * integer digits and never an exponent for it ("44266", "187.2", "23.70",
 * "0.0004123"), `nan` for NaN; returns buf.  A CPU run's tiny rates stay
 * readable (not "0.0") and a GPU run's large ones are not rounded to a
 * power of ten. */
const char *pl_rep_q(char *buf, size_t n, double v, const char *nan);
/* Bytes in the largest binary unit that keeps them >= 1 ("1.50 GiB",
 * "512 B"), "-" for NaN; returns buf. */
const char *pl_rep_bytes(char *buf, size_t n, double bytes);
/* The binary unit that shows bytes up to max as a number in [1, 1024) ("B",
 * "KiB", "MiB", "GiB", "TiB"; "B" for max < 1024 or NaN); *div gets its size
 * in bytes.  Charts pick their memory axis with it, so a KiB-sized CPU run
 * is not drawn as 0.000001 GiB. */
const char *pl_rep_unit(double max, double *div);
/* A metadata value of t, or d. */
const char *pl_rep_meta(const pl_table *t, const char *key, const char *d);

/* The title every report's Markdown file starts with ("# title"), the
 * provenance of its files (one line each) and, when a file ran on the CPU
 * backend, the note that its times are CPU times. */
void pl_rep_md_head(FILE *f, const pl_report_ctx *rc, const char *title,
                    pl_table *const *t, int n);

/* Every row of the tables, one Markdown table per distinct header, columns
 * `cols` (NULL-terminated; NULL: all); a leading `run` column is the file's
 * index in t. */
void pl_rep_md_rows(FILE *f, pl_table *const *t, int n,
                    const char *const *cols);

/* ---- output files -----------------------------------------------------------
 * Written under a new temporary name beside the target and renamed over it
 * on close: a symbolic link (or anything else) at the target is replaced,
 * never written through (a warning names it), and a failed write leaves the
 * previous file whole. */
/* Open rc->out_dir/name for writing; *path gets its path.  NULL with
 * pl_set_error on failure. */
FILE *pl_rep_open(const pl_report_ctx *rc, const char *name, char *path,
                  size_t n);
/* Close f (from pl_rep_open), put it in place at path and print path (the
 * report lists what it wrote). */
pl_status pl_rep_close(FILE *f, const char *path);
/* RUN_DIR/report/<name> for a report with no row to show (a run killed in
 * its first point: metadata and header, no complete row): the title, the
 * files it came from, and "No rows: <why>."  Printed as pl_rep_close. */
pl_status pl_rep_no_rows(const pl_report_ctx *rc, const char *name,
                         const char *title, pl_table *const *t, int n,
                         const char *why);
/* Close f and remove its temporary file: the target is left as it was. */
void pl_rep_discard(FILE *f);
/* Rename the finished temporary file tmp over path (a link at path is
 * replaced, not followed; a directory there is an error); tmp is removed on
 * failure. */
pl_status pl__rep_commit(const char *tmp, const char *path);

/* ---- the summary's claims --------------------------------------------------
 * A report hook that computes one of the paper's claimed quantities gives it
 * to the summary (report_summary.c) under the claim's id ("reach:120b",
 * "ratio:120b:131072", "dispatch", ...: the ids report_summary.c lists).
 * A figure from a CPU-backend file is shown as what it is and never judged
 * against the paper's GPU figure. */
typedef struct pl_rep_claim_t {
  char id[40];
  double ours;     /* the figure compared with the paper's; NAN: none */
  char text[200];  /* ours as the summary writes it */
  char hw[128];    /* where it ran: device, ranks */
  char basis[128]; /* measured per rank / projected (plan) / ... */
  bool cpu;        /* from a CPU-backend file */
} pl_rep_claim_t;
#define PL_REP_MAX_CLAIMS 64
typedef struct pl_rep_claims {
  pl_rep_claim_t v[PL_REP_MAX_CLAIMS];
  int n;
} pl_rep_claims;
/* Give claim `id` ours (NAN: no number) and its text, from table t (its
 * device, backend and ranks make the hardware cell), measured or projected
 * as basis says; a later call for the same id replaces an earlier one.  A
 * no-op when rc keeps no claims. */
void pl_rep_claim(pl_report_ctx *rc, const char *id, double ours,
                  const char *text, const pl_table *t, const char *basis);
/* Is t from the CPU backend (its times are not GPU times)? */
bool pl_rep_is_cpu(const pl_table *t);

/* ---- charts
 * ------------------------------------------------------------------ */
/* The analysis/ directory holding the *.gp scripts: $PLATEAU_ROOT/analysis,
 * <binary>/../../analysis (a build tree), <binary>/../share/plateau/analysis
 * (make install), or ./analysis; NULL when none exists. */
const char *pl_rep_analysis_dir(void);

/* One chart in both formats: out_stem.svg then out_stem.png, each drawn by
 * `$PLATEAU_GNUPLOT (default gnuplot) -c ANALYSIS/script data out extra...`,
 * each path printed; gnuplot writes a temporary file beside the chart,
 * renamed over it (as pl_rep_close does).  gnuplot or analysis/ missing: a
 * warning on stderr (once per report), rc->charts_skipped = 1, PL_OK (the
 * tables are what a report must write).  A failing gnuplot is PL_ERUNTIME. */
pl_status pl_rep_chart(pl_report_ctx *rc, const char *script, const char *data,
                       const char *out_stem, const char *const *extra,
                       int nextra);
/* A context (token count) in binary units as the tables write it: "128K",
 * "1M", or the plain number when it is no whole multiple; b of n. */
const char *pl_rep_ctx(char *b, size_t n, double s);

/* Has the chart data file (a header line of column names after '#' lines;
 * fields split by tabs, else commas, else blanks, as the header is)
 * something to show in every panel: for each entry of panels (NULL-
 * terminated; blank-separated column names, "*_ms" any column ending in
 * _ms, "*" any but x) a line whose column x (NULL: none, bars by line) and
 * one of the panel's columns are numbers, finite and within +-1e300 (a
 * script's range around them must stay finite; x written "+name": a
 * logarithmic axis, x > 0 too)?  If not, "<out_stem>.svg: not drawn: ..."
 * is printed (where the report lists what it wrote) and the answer is
 * false: gnuplot, which fails on a panel without a point, is not run. */
bool pl_rep_chart_shows(const char *data, const char *out_stem, const char *x,
                        const char *const *panels);

#endif
