/* report.c — `plateau report RUN_DIR`: regenerate tables and charts from the
 * result files of a run directory.
 *
 * Why in the binary and not a script: the reader that skips torn rows and
 * checks the schema already lives here (results.c), so the tables are built
 * from exactly the rows the suite considers valid.  Charts are drawn by
 * gnuplot from data files this command prepares (one script per figure in
 * analysis/), so a figure can be re-styled without touching C.
 *
 * Layout: every *.tsv in RUN_DIR and in its direct subdirectories (not
 * RUN_DIR/report) is read; tables are grouped by their `bench` metadata; each
 * bench has a hook (default: one Markdown table of all columns) that writes
 * RUN_DIR/report/<bench>.md and any charts.  Later benches add a hook to
 * `hooks[]` with their paper-vs-ours tables. */
#include "report.h"
#include "report_adam.h"
#include "report_attention.h"
#include "report_dispatch.h"
#include "report_sco.h"
#include "report_util.h"
#include "report_vocab.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plateau/plateau.h"

/* ---- gnuplot ------------------------------------------------------------- */

/* One chart in both formats: svg and png.  Returns PL_OK, also when gnuplot
 * is missing (rc->charts_skipped is set); a failing gnuplot is PL_ERUNTIME. */
static pl_status chart(pl_report_ctx *rc, const char *script_name,
                       const char *data, const char *out_stem,
                       const char *const *extra, int nextra) {
  if (rc->charts_skipped) return PL_OK;
  if (!rc->analysis_dir) {
    fprintf(stderr, "plateau report: warning: no analysis/ directory found "
                    "(set PLATEAU_ROOT): charts skipped\n");
    rc->charts_skipped = 1;
    return PL_OK;
  }
  char script[PATH_MAX];
  snprintf(script, sizeof script, "%s/%s", rc->analysis_dir, script_name);
  if (access(script, R_OK) != 0)
    return pl_set_error(PL_EIO, "chart script %s: %s", script, strerror(errno));
  return pl_rep_chart(script, data, out_stem, extra, nextra,
                      "charts skipped (tables are written)",
                      &rc->charts_skipped);
}

/* ---- Markdown ------------------------------------------------------------ */
static const char *meta_or(const pl_table *t, const char *k, const char *d) {
  const char *v = pl_table_meta(t, k);
  return v ? v : d;
}

/* One line per file: where the numbers came from. */
static void md_provenance(FILE *f, pl_table *const *t, int n) {
  fprintf(f, "| run | file | device | backend | ranks | git sha | start (UTC) "
             "| rows | torn | finished |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) {
    const char *base = strrchr(t[i]->path, '/');
    const char *dirty = meta_or(t[i], "git_dirty", "0");
    fprintf(f, "| %d | ", i);
    pl_rep_md_text(f, base ? base + 1 : t[i]->path);
    fprintf(f, " | ");
    pl_rep_md_text(f, meta_or(t[i], "device", "-"));
    fprintf(f, " | %s | %s | %s%s | %s | %d | %d | %s |\n",
            meta_or(t[i], "backend", "-"), meta_or(t[i], "ranks", "-"),
            meta_or(t[i], "git_sha", "-"),
            strcmp(dirty, "1") == 0 ? " (dirty)" : "",
            meta_or(t[i], "start_utc", "-"), t[i]->nrows, t[i]->nbad,
            t[i]->finished ? "yes" : "no (killed or running)");
  }
  fprintf(f, "\n");
}

/* All rows of the tables whose header equals t[first]'s, columns `cols`
 * (NULL: all of them); a leading `run` column names the file. */
static void md_rows(FILE *f, pl_table *const *t, int n, const char *const *cols) {
  bool *done = calloc((size_t)n, sizeof *done);
  PL_ASSERT(done != NULL);
  for (int a = 0; a < n; a++) {
    if (done[a]) continue;
    int idx[64], nc = 0;
    if (cols) {
      for (int c = 0; cols[c] && nc < 64; c++) {
        int k = pl_table_col(t[a], cols[c]);
        if (k >= 0) idx[nc++] = k;
      }
    } else {
      for (int c = 0; c < t[a]->ncols && nc < 64; c++) idx[nc++] = c;
    }
    fprintf(f, "| run |");
    for (int c = 0; c < nc; c++) {
      fputc(' ', f);
      pl_rep_md_text(f, t[a]->cols[idx[c]]);
      fprintf(f, " |");
    }
    fprintf(f, "\n|---|");
    for (int c = 0; c < nc; c++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int b = a; b < n; b++) {
      if (done[b] || t[b]->ncols != t[a]->ncols) continue;
      bool same = true;
      for (int c = 0; same && c < t[a]->ncols; c++)
        same = strcmp(t[a]->cols[c], t[b]->cols[c]) == 0;
      if (!same) continue;
      done[b] = true;
      for (int r = 0; r < t[b]->nrows; r++) {
        fprintf(f, "| %d |", b);
        for (int c = 0; c < nc; c++) {
          fputc(' ', f);
          pl_rep_md_text(f, t[b]->rows[r][idx[c]]);
          fprintf(f, " |");
        }
        fprintf(f, "\n");
      }
    }
    fprintf(f, "\n");
  }
  free(done);
}

static FILE *open_md(pl_report_ctx *rc, const char *bench, char *path,
                     size_t len) {
  snprintf(path, len, "%s/%s.md", rc->out_dir, bench);
  FILE *f = fopen(path, "w");
  if (!f) pl_set_error(PL_EIO, "write %s: %s", path, strerror(errno));
  return f;
}

static pl_status close_md(FILE *f, const char *path) {
  if (fclose(f) != 0)
    return pl_set_error(PL_EIO, "write %s: %s", path, strerror(errno));
  printf("%s\n", path);
  return PL_OK;
}

static void md_title(FILE *f, pl_report_ctx *rc, const char *bench,
                     pl_table *const *t, int n) {
  fprintf(f, "# %s\n\nGenerated by `plateau report %s` from %d result file%s "
             "(rows with a torn or malformed line are not shown; their count "
             "is in `torn`).\n\n",
          bench, rc->run_dir, n, n == 1 ? "" : "s");
  md_provenance(f, t, n);
  bool cpu = false;
  for (int i = 0; i < n; i++)
    if (strcmp(meta_or(t[i], "backend", ""), "cpu") == 0) cpu = true;
  if (cpu)
    fprintf(f, "> CPU backend runs: memory columns are exact; time and "
               "bandwidth columns are CPU times, not GPU figures.\n\n");
}

/* Default hook: every column of every row. */
static pl_status report_generic(pl_report_ctx *rc, const char *bench,
                                pl_table *const *t, int n) {
  char path[PATH_MAX];
  FILE *f = open_md(rc, bench, path, sizeof path);
  if (!f) return PL_EIO;
  md_title(f, rc, bench, t, n);
  md_rows(f, t, n, NULL);
  return close_md(f, path);
}

/* ---- calib --------------------------------------------------------------- */
static const char *const calib_links[] = {"h2d",  "d2h",       "bidir",
                                          "d2d",  "allreduce", "alltoall",
                                          "sendrecv", NULL};

static pl_status report_calib(pl_report_ctx *rc, const char *bench,
                              pl_table *const *t, int n) {
  char path[PATH_MAX];
  FILE *f = open_md(rc, bench, path, sizeof path);
  if (!f) return PL_EIO;
  md_title(f, rc, bench, t, n);

  /* Ceilings: per test, the best bandwidth (or GEMM rate) over sizes and runs,
   * from rows with status ok. */
  fprintf(f, "## Ceilings (best over sizes and runs, status ok rows)\n\n"
             "| test | best busbw GB/s | best algbw GB/s | at bytes | TFLOP/s "
             "| checks |\n|---|---|---|---|---|---|\n");
  static const char *const all_tests[] = {"h2d",       "d2h",      "bidir",
                                          "d2d",       "gemm",     "allreduce",
                                          "alltoall",  "sendrecv", NULL};
  for (int k = 0; all_tests[k]; k++) {
    double best = NAN, best_alg = NAN, best_tf = NAN;
    const char *at = "-";
    int npass = 0, nrows = 0;
    for (int i = 0; i < n; i++) {
      int ct = pl_table_col(t[i], "test"), cs = pl_table_col(t[i], "status"),
          cb = pl_table_col(t[i], "busbw_gbs"),
          ca = pl_table_col(t[i], "algbw_gbs"),
          cf = pl_table_col(t[i], "tflops"), cy = pl_table_col(t[i], "bytes"),
          cc = pl_table_col(t[i], "check");
      if (ct < 0 || cs < 0) continue;
      for (int r = 0; r < t[i]->nrows; r++) {
        char **row = t[i]->rows[r];
        if (strcmp(row[ct], all_tests[k]) != 0) continue;
        nrows++;
        if (cc >= 0 && strcmp(row[cc], "pass") == 0) npass++;
        if (strcmp(row[cs], "ok") != 0) continue;
        double bw = cb >= 0 ? pl_rep_num(row[cb]) : NAN;
        double ab = ca >= 0 ? pl_rep_num(row[ca]) : NAN;
        double tf = cf >= 0 ? pl_rep_num(row[cf]) : NAN;
        if (!isnan(bw) && (isnan(best) || bw > best)) {
          best = bw;
          best_alg = ab;
          at = cy >= 0 ? row[cy] : "-";
        }
        if (!isnan(tf) && (isnan(best_tf) || tf > best_tf)) best_tf = tf;
      }
    }
    if (!nrows) continue;
    fprintf(f, "| %s | ", all_tests[k]);
    if (isnan(best)) fprintf(f, "- | - | - | ");
    else fprintf(f, "%.4g | %.4g | %s | ", best, best_alg, at);
    if (isnan(best_tf)) fprintf(f, "- | ");
    else fprintf(f, "%.4g | ", best_tf);
    fprintf(f, "%d/%d pass |\n", npass, nrows);
  }
  fprintf(f, "\nbusbw uses nccl-tests' factors: all-reduce 2(n-1)/n, "
             "all-to-all (n-1)/n, send/recv 1; bidir counts both directions, "
             "d2d counts read + write.\n\n## All rows\n\n");
  static const char *const cols[] = {"test",      "bytes",     "ranks",
                                     "dtype",     "mnk",       "time_ms",
                                     "time_p10_ms", "time_p90_ms",
                                     "algbw_gbs", "busbw_gbs", "tflops",
                                     "status",    "check",     "note", NULL};
  md_rows(f, t, n, cols);
  pl_status st = close_md(f, path);
  if (st != PL_OK) return st;

  /* Chart data, wide: one line per size, one column per link (busbw, GB/s;
   * the best over runs), "-" where absent. */
  int cap = 0, nb = 0;
  double *bytes = NULL, *bw = NULL; /* bw[nb][7] */
  int nl = 0;
  while (calib_links[nl]) nl++;
  for (int i = 0; i < n; i++) {
    int ct = pl_table_col(t[i], "test"), cs = pl_table_col(t[i], "status"),
        cb = pl_table_col(t[i], "busbw_gbs"), cy = pl_table_col(t[i], "bytes");
    if (ct < 0 || cs < 0 || cb < 0 || cy < 0) continue;
    for (int r = 0; r < t[i]->nrows; r++) {
      char **row = t[i]->rows[r];
      if (strcmp(row[cs], "ok") != 0) continue;
      int l = -1;
      for (int k = 0; k < nl; k++)
        if (strcmp(row[ct], calib_links[k]) == 0) l = k;
      double y = pl_rep_num(row[cb]), x = pl_rep_num(row[cy]);
      if (l < 0 || isnan(y) || isnan(x)) continue;
      int b = -1;
      for (int k = 0; k < nb; k++)
        if (bytes[k] == x) b = k;
      if (b < 0) {
        if (nb == cap) {
          cap = cap ? 2 * cap : 16;
          bytes = realloc(bytes, (size_t)cap * sizeof *bytes);
          bw = realloc(bw, (size_t)cap * (size_t)nl * sizeof *bw);
          PL_ASSERT(bytes && bw);
        }
        b = nb++;
        bytes[b] = x;
        for (int k = 0; k < nl; k++) bw[b * nl + k] = NAN;
      }
      if (isnan(bw[b * nl + l]) || y > bw[b * nl + l]) bw[b * nl + l] = y;
    }
  }
  /* sort by size */
  for (int a = 1; a < nb; a++)
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
  char data[PATH_MAX], gdata[PATH_MAX], stem[PATH_MAX];
  snprintf(data, sizeof data, "%s/calib.tsv", rc->out_dir);
  FILE *d = fopen(data, "w");
  if (!d) {
    free(bytes);
    free(bw);
    return pl_set_error(PL_EIO, "write %s: %s", data, strerror(errno));
  }
  fprintf(d, "# calib bandwidth per link (busbw GB/s, best over %d run%s) vs "
             "transfer size; from plateau report %s\n",
          n, n == 1 ? "" : "s", rc->run_dir);
  fprintf(d, "bytes");
  for (int k = 0; k < nl; k++) fprintf(d, "\t%s", calib_links[k]);
  fprintf(d, "\n");
  for (int b = 0; b < nb; b++) {
    fprintf(d, "%.0f", bytes[b]);
    for (int k = 0; k < nl; k++) {
      if (isnan(bw[b * nl + k])) fprintf(d, "\t-");
      else fprintf(d, "\t%.6g", bw[b * nl + k]);
    }
    fprintf(d, "\n");
  }
  free(bytes);
  free(bw);
  if (fclose(d) != 0) return pl_set_error(PL_EIO, "write %s", data);
  printf("%s\n", data);

  /* GEMM data: one bar per gemm row. */
  snprintf(gdata, sizeof gdata, "%s/calib-gemm.tsv", rc->out_dir);
  d = fopen(gdata, "w");
  if (!d) return pl_set_error(PL_EIO, "write %s: %s", gdata, strerror(errno));
  fprintf(d, "# calib GEMM rate per run; from plateau report %s\nlabel\ttflops\n",
          rc->run_dir);
  int ngemm = 0;
  for (int i = 0; i < n; i++) {
    int ct = pl_table_col(t[i], "test"), cs = pl_table_col(t[i], "status"),
        cf = pl_table_col(t[i], "tflops"), cd = pl_table_col(t[i], "dtype"),
        cm = pl_table_col(t[i], "mnk");
    if (ct < 0 || cs < 0 || cf < 0) continue;
    for (int r = 0; r < t[i]->nrows; r++) {
      char **row = t[i]->rows[r];
      if (strcmp(row[ct], "gemm") != 0 || strcmp(row[cs], "ok") != 0) continue;
      double tf = pl_rep_num(row[cf]);
      if (isnan(tf)) continue;
      fprintf(d, "run%d:%s:%s^3\t%.6g\n", i, cd >= 0 ? row[cd] : "?",
              cm >= 0 ? row[cm] : "?", tf);
      ngemm++;
    }
  }
  if (fclose(d) != 0) return pl_set_error(PL_EIO, "write %s", gdata);
  printf("%s\n", gdata);

  /* Optional ceiling line on the bandwidth chart: PLATEAU_CALIB_CEILING
   * = "GBS[:label]" (e.g. a reference host-link figure). */
  const char *ceil_env = getenv("PLATEAU_CALIB_CEILING");
  char ceil_v[64] = "", ceil_l[128] = "ceiling";
  const char *extra[2];
  int nextra = 0;
  if (ceil_env && *ceil_env) {
    const char *colon = strchr(ceil_env, ':');
    snprintf(ceil_v, sizeof ceil_v, "%.*s",
             (int)(colon ? colon - ceil_env : (long)strlen(ceil_env)), ceil_env);
    if (colon) snprintf(ceil_l, sizeof ceil_l, "%s", colon + 1);
    extra[0] = ceil_v;
    extra[1] = ceil_l;
    nextra = 2;
  }
  if (nb > 0) {
    snprintf(stem, sizeof stem, "%s/calib-bandwidth", rc->out_dir);
    PL_TRY(chart(rc, "calib.gp", data, stem, extra, nextra));
  }
  if (ngemm > 0) {
    snprintf(stem, sizeof stem, "%s/calib-gemm", rc->out_dir);
    PL_TRY(chart(rc, "calib-gemm.gp", gdata, stem, NULL, 0));
  }
  return PL_OK;
}

/* ---- hooks --------------------------------------------------------------- */
/* Operator reports keep a plain (run_dir, out_dir) entry of their own
 * (suite/report_<bench>.c); they read the run's files themselves. */
#define OPERATOR_REPORT(name, fn)                                              \
  static pl_status name(pl_report_ctx *rc, const char *bench,                  \
                        pl_table *const *tables, int ntables) {                \
    (void)bench, (void)tables, (void)ntables;                                  \
    return fn(rc->run_dir, rc->out_dir);                                       \
  }
OPERATOR_REPORT(report_sco, pl_report_sco)
OPERATOR_REPORT(report_vocab, pl_report_vocab)
OPERATOR_REPORT(report_dispatch, pl_report_dispatch)
OPERATOR_REPORT(report_attention, pl_report_attention)

static const struct {
  const char *bench;
  pl_report_fn fn;
} hooks[] = {
    {"calib", report_calib},
    {"sco", report_sco},
    {"maxbatch", report_sco},
    {"vocab", report_vocab},
    {"dispatch", report_dispatch},
    {"adam", pl_report_adam_hook},
    {"attention", report_attention},
};

static pl_report_fn hook_for(const char *bench) {
  for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
    if (strcmp(hooks[i].bench, bench) == 0) return hooks[i].fn;
  return report_generic;
}

static void report_usage(FILE *f) {
  fprintf(f,
          "usage: plateau report RUN_DIR\n"
          "  Read every *.tsv result file in RUN_DIR and its direct "
          "subdirectories,\n"
          "  group the rows by bench, and write RUN_DIR/report/<bench>.md "
          "(Markdown\n"
          "  tables with where each number came from) and, for calib, the "
          "charts\n"
          "  calib-bandwidth.{svg,png} and calib-gemm.{svg,png} through "
          "gnuplot\n"
          "  (scripts from $PLATEAU_ROOT/analysis, <binary>/../../analysis or "
          "./analysis).\n"
          "  Prints each path written.  Without gnuplot the tables are still "
          "written\n  (a warning says the charts were skipped; exit 0).\n"
          "  env: PLATEAU_GNUPLOT (program), PLATEAU_CALIB_CEILING=GBS[:label] "
          "(dashed line)\n");
}

int pl_report_main(int argc, char **argv) {
  const char *run_dir = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      report_usage(stdout);
      return 0;
    }
    if (argv[i][0] == '-') {
      fprintf(stderr, "plateau report: unknown option '%s'\n", argv[i]);
      return 2;
    }
    if (run_dir) {
      fprintf(stderr, "plateau report: one RUN_DIR only (got '%s' and '%s')\n",
              run_dir, argv[i]);
      return 2;
    }
    run_dir = argv[i];
  }
  if (!run_dir) {
    report_usage(stderr);
    return 2;
  }
  if (!pl_rep_is_dir(run_dir)) {
    fprintf(stderr, "plateau report: RUN_DIR '%s': not a directory\n", run_dir);
    return 2;
  }
  char **files;
  int nfiles = pl_rep_scan_tsv(run_dir, &files);
  pl_table **tabs = calloc((size_t)nfiles + 1, sizeof *tabs);
  PL_ASSERT(tabs != NULL);
  int nt = 0;
  for (int i = 0; i < nfiles; i++) {
    pl_table *t = calloc(1, sizeof *t);
    PL_ASSERT(t != NULL);
    if (pl_table_read(files[i], t) != PL_OK) {
      fprintf(stderr, "plateau report: skipping %s: %s\n", files[i],
              pl_last_error());
      free(t);
      continue;
    }
    if (t->nbad)
      fprintf(stderr, "plateau report: %s: %d torn or malformed line%s "
                      "skipped\n", files[i], t->nbad, t->nbad == 1 ? "" : "s");
    tabs[nt++] = t;
  }
  pl_rep_free_paths(files, nfiles);
  int code = 0;
  if (nt == 0) {
    fprintf(stderr, "plateau report: no result files in %s\n", run_dir);
    code = 3;
    goto out;
  }
  char out_dir[PATH_MAX];
  snprintf(out_dir, sizeof out_dir, "%s/report", run_dir);
  if (mkdir(out_dir, 0775) != 0 && errno != EEXIST) {
    fprintf(stderr, "plateau report: mkdir %s: %s\n", out_dir, strerror(errno));
    code = 3;
    goto out;
  }
  pl_report_ctx rc = {.run_dir = run_dir, .out_dir = out_dir,
                      .analysis_dir = pl_rep_analysis_dir()};
  bool *done = calloc((size_t)nt, sizeof *done);
  pl_table **group = calloc((size_t)nt, sizeof *group);
  PL_ASSERT(done && group);
  for (int a = 0; a < nt; a++) {
    if (done[a]) continue;
    const char *bench = meta_or(tabs[a], "bench", "unknown");
    int ng = 0;
    for (int b = a; b < nt; b++) {
      if (!done[b] && strcmp(meta_or(tabs[b], "bench", "unknown"), bench) == 0) {
        done[b] = true;
        group[ng++] = tabs[b];
      }
    }
    char safe[64];
    snprintf(safe, sizeof safe, "%s", bench);
    for (char *c = safe; *c; c++)
      if (*c == '/' || *c == ' ') *c = '_';
    pl_status st = hook_for(safe)(&rc, safe, group, ng);
    if (st != PL_OK) {
      fprintf(stderr, "plateau report: %s: %s\n", safe, pl_last_error());
      code = 3;
    }
  }
  if (rc.charts_skipped)
    fprintf(stderr, "plateau report: warning: charts were skipped\n");
  free(done);
  free(group);
out:
  for (int i = 0; i < nt; i++) {
    pl_table_free(tabs[i]);
    free(tabs[i]);
  }
  free(tabs);
  return code;
}
