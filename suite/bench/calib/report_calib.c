/* report_calib.c — the report of `plateau bench calib`: the machine's
 * ceilings (best bandwidth per link and the GEMM rate, over sizes and runs),
 * every row, and two charts: bandwidth per link vs transfer size
 * (analysis/calib.gp, optionally with a dashed ceiling from
 * PLATEAU_CALIB_CEILING=GBS[:label]) and the GEMM rate per run
 * (analysis/calib-gemm.gp). */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plateau/plateau.h"
#include "report/report.h"
#include "report/report_util.h"

static const char *const links[] = {"h2d",       "d2h",      "bidir",    "d2d",
                                    "allreduce", "alltoall", "sendrecv", NULL};
static const char *const tests[] = {
    "h2d",       "d2h",      "bidir",     "d2d",      "gemm",     "mem_read",
    "mem_write", "mem_copy", "allreduce", "alltoall", "sendrecv", NULL};

/* Ceilings: per test, the best bandwidth (or GEMM rate) over sizes and runs,
 * from rows with status ok. */
static void ceilings(FILE *f, pl_table *const *t, int n) {
  fprintf(f, "## Ceilings (best over sizes and runs, status ok rows)\n\n"
             "| test | best busbw GB/s | best algbw GB/s | at bytes | TFLOP/s "
             "| checks |\n|---|---|---|---|---|---|\n");
  for (int k = 0; tests[k]; k++) {
    double best = NAN, best_alg = NAN, best_tf = NAN;
    const char *at = "-";
    int npass = 0, nrows = 0;
    for (int i = 0; i < n; i++)
      for (int r = 0; r < t[i]->nrows; r++) {
        if (strcmp(pl_cell(t[i], r, "variant"), tests[k]) != 0)
          continue;
        nrows++;
        if (strcmp(pl_cell(t[i], r, "check"), "pass") == 0)
          npass++;
        if (strcmp(pl_cell(t[i], r, "status"), "ok") != 0)
          continue;
        double bw = pl_cell_num(t[i], r, "busbw_gbs");
        double tf = pl_cell_num(t[i], r, "tflops");
        if (!isnan(bw) && (isnan(best) || bw > best)) {
          best = bw;
          best_alg = pl_cell_num(t[i], r, "algbw_gbs");
          at = pl_cell(t[i], r, "bytes");
        }
        if (!isnan(tf) && (isnan(best_tf) || tf > best_tf))
          best_tf = tf;
      }
    if (!nrows)
      continue;
    fprintf(f, "| %s | ", tests[k]);
    if (isnan(best))
      fprintf(f, "- | - | - | ");
    else
      fprintf(f, "%.4g | %.4g | %s | ", best, best_alg, at);
    if (isnan(best_tf))
      fprintf(f, "- | ");
    else
      fprintf(f, "%.4g | ", best_tf);
    fprintf(f, "%d/%d pass |\n", npass, nrows);
  }
  fprintf(f, "\nbusbw uses nccl-tests' factors: all-reduce 2(n-1)/n, "
             "all-to-all (n-1)/n, send/recv 1; bidir counts both directions, "
             "d2d counts read + write.\n\n## All rows\n\n");
}

/* Chart data, wide: one line per size, one column per link (busbw GB/s, the
 * best over runs), "-" where absent; `present` gets the links with a point
 * (blank-separated: the chart draws only those).  Returns the number of
 * sizes. */
static int bandwidth_data(FILE *d, const pl_report_ctx *rc, pl_table *const *t,
                          int n, char *present, size_t np) {
  int cap = 0, nb = 0, nl = 0;
  while (links[nl])
    nl++;
  double *bytes = NULL, *bw = NULL; /* bw[nb][nl] */
  for (int i = 0; i < n; i++)
    for (int r = 0; r < t[i]->nrows; r++) {
      if (strcmp(pl_cell(t[i], r, "status"), "ok") != 0)
        continue;
      int l = -1;
      for (int k = 0; k < nl; k++)
        if (strcmp(pl_cell(t[i], r, "variant"), links[k]) == 0)
          l = k;
      double y = pl_cell_num(t[i], r, "busbw_gbs");
      double x = pl_cell_num(t[i], r, "bytes");
      if (l < 0 || isnan(y) || isnan(x))
        continue;
      int b = -1;
      for (int k = 0; k < nb; k++)
        if (bytes[k] == x)
          b = k;
      if (b < 0) {
        if (nb == cap) {
          cap = cap ? 2 * cap : 16;
          bytes = realloc(bytes, (size_t)cap * sizeof *bytes);
          bw = realloc(bw, (size_t)cap * (size_t)nl * sizeof *bw);
          PL_ASSERT(bytes && bw);
        }
        b = nb++;
        bytes[b] = x;
        for (int k = 0; k < nl; k++)
          bw[b * nl + k] = NAN;
      }
      if (isnan(bw[b * nl + l]) || y > bw[b * nl + l])
        bw[b * nl + l] = y;
    }
  for (int a = 1; a < nb; a++) /* by size */
    for (int b = a; b > 0 && bytes[b - 1] > bytes[b]; b--) {
      double tmp = bytes[b];
      bytes[b] = bytes[b - 1];
      bytes[b - 1] = tmp;
      for (int k = 0; k < nl; k++) {
        tmp = bw[b * nl + k];
        bw[b * nl + k] = bw[(b - 1) * nl + k];
        bw[(b - 1) * nl + k] = tmp;
      }
    }
  fprintf(d,
          "# calib bandwidth per link (busbw GB/s, best over %d run%s) vs "
          "transfer size; from plateau report %s\nbytes",
          n, n == 1 ? "" : "s", rc->run_dir);
  present[0] = '\0';
  for (int k = 0; k < nl; k++) {
    fprintf(d, "\t%s", links[k]);
    bool any = false;
    for (int b = 0; b < nb && !any; b++)
      any = !isnan(bw[b * nl + k]);
    if (any)
      snprintf(present + strlen(present), np - strlen(present), "%s%s",
               present[0] ? " " : "", links[k]);
  }
  fprintf(d, "\n");
  for (int b = 0; b < nb; b++) {
    fprintf(d, "%.0f", bytes[b]);
    for (int k = 0; k < nl; k++) {
      if (isnan(bw[b * nl + k]))
        fprintf(d, "\t-");
      else
        fprintf(d, "\t%.6g", bw[b * nl + k]);
    }
    fprintf(d, "\n");
  }
  free(bytes);
  free(bw);
  return nb;
}

/* GEMM data: one bar per gemm row.  Returns the number of bars. */
static int gemm_data(FILE *d, const pl_report_ctx *rc, pl_table *const *t,
                     int n) {
  fprintf(d,
          "# calib GEMM rate per run; from plateau report %s\n"
          "label\ttflops\n",
          rc->run_dir);
  int ng = 0;
  for (int i = 0; i < n; i++)
    for (int r = 0; r < t[i]->nrows; r++) {
      if (strcmp(pl_cell(t[i], r, "variant"), "gemm") != 0 ||
          strcmp(pl_cell(t[i], r, "status"), "ok") != 0)
        continue;
      double tf = pl_cell_num(t[i], r, "tflops");
      if (isnan(tf))
        continue;
      fprintf(d, "run%d:%s:%s^3\t%.6g\n", i,
              pl_has_col(t[i], "dtype") ? pl_cell(t[i], r, "dtype") : "?",
              pl_has_col(t[i], "mnk") ? pl_cell(t[i], r, "mnk") : "?", tf);
      ng++;
    }
  return ng;
}

pl_status pl_report_calib(pl_report_ctx *rc, pl_table *const *t, int n) {
  char path[PATH_MAX];
  FILE *f = pl_rep_open(rc, "calib.md", path, sizeof path);
  if (!f)
    return PL_EIO;
  pl_rep_md_head(f, rc, "Machine ceilings (calib)", t, n);
  ceilings(f, t, n);
  static const char *const cols[] = {
      "variant",   "bytes",     "ranks",       "dtype",
      "mnk",       "time_ms",   "time_p10_ms", "time_p90_ms",
      "algbw_gbs", "busbw_gbs", "tflops",      "max_err",
      "status",    "check",     "note",        NULL};
  pl_rep_md_rows(f, t, n, cols);
  PL_TRY(pl_rep_close(f, path));

  char data[PATH_MAX], gdata[PATH_MAX], stem[PATH_MAX + 32];
  FILE *d = pl_rep_open(rc, "calib.tsv", data, sizeof data);
  if (!d)
    return PL_EIO;
  char present[128];
  int nb = bandwidth_data(d, rc, t, n, present, sizeof present);
  PL_TRY(pl_rep_close(d, data));
  d = pl_rep_open(rc, "calib-gemm.tsv", gdata, sizeof gdata);
  if (!d)
    return PL_EIO;
  int ngemm = gemm_data(d, rc, t, n);
  PL_TRY(pl_rep_close(d, gdata));

  /* Optional ceiling line on the bandwidth chart: PLATEAU_CALIB_CEILING
   * = "GBS[:label]" (e.g. a reference host-link figure). */
  const char *ceil_env = getenv("PLATEAU_CALIB_CEILING");
  char ceil_v[64] = "-", ceil_l[128] = "ceiling";
  const char *extra[3] = {ceil_v, ceil_l, present};
  int nextra = 3;
  if (ceil_env && *ceil_env) {
    const char *colon = strchr(ceil_env, ':');
    snprintf(ceil_v, sizeof ceil_v, "%.*s",
             (int)(colon ? colon - ceil_env : (long)strlen(ceil_env)),
             ceil_env);
    if (colon)
      snprintf(ceil_l, sizeof ceil_l, "%s", colon + 1);
  }
  snprintf(stem, sizeof stem, "%s/calib-bandwidth", rc->out_dir);
  static const char *const bw[] = {"*", NULL}, *const gemm[] = {"tflops", NULL};
  if (nb > 0 && pl_rep_chart_shows(data, stem, "+bytes", bw))
    PL_TRY(pl_rep_chart(rc, "calib.gp", data, stem, extra, nextra));
  else if (nb == 0)
    printf("%s.svg: not drawn: no ok bandwidth row\n", stem);
  snprintf(stem, sizeof stem, "%s/calib-gemm", rc->out_dir);
  if (ngemm > 0 && pl_rep_chart_shows(gdata, stem, NULL, gemm))
    PL_TRY(pl_rep_chart(rc, "calib-gemm.gp", gdata, stem, NULL, 0));
  else if (ngemm == 0)
    printf("%s.svg: not drawn: no ok gemm row\n", stem);
  return PL_OK;
}
