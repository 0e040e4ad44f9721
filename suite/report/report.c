/* report.c — `plateau report RUN_DIR`: regenerate tables and charts from the
 * result files of a run directory.
 *
 * Why in the binary and not a script: the reader that skips torn rows, checks
 * the schema version and maps older files to the current column names lives
 * here (results_read.c), so the tables are built from exactly the rows the
 * suite considers valid.  Charts are drawn by gnuplot from data files the hooks
 * prepare (one script per figure in analysis/), so a figure can be re-styled
 * without touching C.
 *
 * The run directory is read once: every *.tsv in RUN_DIR and its direct
 * subdirectories (not RUN_DIR/report, no dot files), in path order.  The
 * tables go to the hooks benches.def names (report.h): each report hook once
 * with every table of its benches and peers, the generic table once per bench
 * that has no report of its own, per peer, and per bench benches.def does not
 * list. */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plateau/plateau.h"
#include "report_util.h"
#include "results/schema.h"

/* ---- the hook table (benches.def) ------------------------------------------
 */
typedef struct hook {
  const char *bench, *report;
  pl_report_fn *fn;
  bool peer, feed; /* feed: FEED(bench, report), an extra report */
} hook;

static const hook hooks[] = {
#define BENCH(name, report) {#name, #report, pl_report_##report, false, false},
#define PEER(name, report) {#name, #report, pl_report_##report, true, false},
#define FEED(name, report) {#name, #report, pl_report_##report, false, true},
#include "harness/benches.def"
#undef BENCH
#undef PEER
#undef FEED
};
#define NHOOKS ((int)(sizeof hooks / sizeof hooks[0]))

/* The BENCH or PEER entry of a bench (not its FEED lines). */
static const hook *hook_of(const char *bench) {
  for (int i = 0; i < NHOOKS; i++)
    if (!hooks[i].feed && strcmp(hooks[i].bench, bench) == 0)
      return &hooks[i];
  return NULL;
}

/* Does report hook fn take the files of bench (its entry or a FEED line)? */
static bool takes(pl_report_fn *fn, const char *bench) {
  for (int i = 0; i < NHOOKS; i++)
    if (hooks[i].fn == fn && strcmp(hooks[i].bench, bench) == 0)
      return true;
  return false;
}

/* ---- the generic table
 * -------------------------------------------------------- */
pl_status pl_report_generic(pl_report_ctx *rc, pl_table *const *t, int n) {
  char path[PATH_MAX], name[128];
  snprintf(name, sizeof name, "%s.md", rc->name);
  FILE *f = pl_rep_open(rc, name, path, sizeof path);
  if (!f)
    return PL_EIO;
  pl_rep_md_head(f, rc, rc->name, t, n);
  pl_rep_md_rows(f, t, n, NULL);
  return pl_rep_close(f, path);
}

/* ---- files the reports must not trust blindly ----------------------------
 * An unfinished file (no `# end:` line: the run was killed, or is still
 * running) is reported and marked; when a complete file of the same point
 * exists, the complete one wins and the unfinished one's rows are left out.
 * The same point: the same bench and `point` metadata (jobs/submit's id), or
 * without one, the same bench, ranks and command line (argv). */
typedef struct superseded {
  char *path;         /* the unfinished file left out */
  const pl_table *by; /* the complete rerun that replaces it */
} superseded;

static void point_key(const pl_table *t, char *buf, size_t n) {
  const char *pt = pl_table_meta(t, "point");
  if (pt && strcmp(pt, "-") != 0)
    snprintf(buf, n, "%s\npoint %s", t->bench, pt);
  else
    snprintf(buf, n, "%s\nranks %s\nargv %s", t->bench,
             pl_rep_meta(t, "ranks", "-"), pl_rep_meta(t, "argv", "-"));
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* What this run's reader dropped and found (one report per process). */
static struct {
  superseded *sup;
  int nsup;
  bool mixed; /* files of more than one schema version */
} R;

/* Drop the unfinished tables a complete one supersedes; returns the new
 * count, the dropped ones in sup[*nsup]. */
static int supersede(pl_table **t, int nt, superseded *sup, int *nsup) {
  char ka[8192], kb[8192];
  int k = 0;
  for (int i = 0; i < nt; i++) {
    const pl_table *by = NULL;
    if (!t[i]->finished) {
      point_key(t[i], ka, sizeof ka);
      for (int j = 0; j < nt && !by; j++) {
        if (j == i || !t[j]->finished)
          continue;
        point_key(t[j], kb, sizeof kb);
        if (strcmp(ka, kb) == 0)
          by = t[j];
      }
    }
    if (by) {
      fprintf(stderr,
              "plateau report: %s: unfinished (no '# end:' line) and "
              "superseded by %s, a complete run of the same point: its rows "
              "are left out\n",
              t[i]->path, by->path);
      sup[*nsup].path = strdup(t[i]->path);
      sup[*nsup].by = by;
      (*nsup)++;
      pl_table_free(t[i]);
      free(t[i]);
    } else {
      if (!t[i]->finished)
        fprintf(stderr,
                "plateau report: %s: unfinished (no '# end:' line: killed or "
                "still running); its rows are reported and marked\n",
                t[i]->path);
      t[k++] = t[i];
    }
  }
  return k;
}

/* After a report is written: what the reader did with its files, appended
 * to RUN_DIR/report/<name>.md when there is anything to say. */
static void append_notes(const pl_report_ctx *rc, pl_table **group, int ng,
                         const superseded *sup, int nsup, bool mixed) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s.md", rc->out_dir, rc->name);
  FILE *f = NULL;
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < (pass == 1 ? nsup : ng); i++) {
      const char *line = NULL;
      char buf[PATH_MAX * 2 + 256];
      if (pass == 0 && !group[i]->finished) {
        snprintf(buf, sizeof buf,
                 "- `%s`: unfinished (no `# end:` line: the run was killed "
                 "or is still running); %s",
                 base_name(group[i]->path),
                 group[i]->nrows ? "its rows are in the tables above"
                                 : "no complete row");
        line = buf;
      } else if (pass == 1) {
        for (int g = 0; g < ng && !line; g++)
          if (sup[i].by == group[g]) {
            snprintf(buf, sizeof buf,
                     "- `%s`: unfinished; superseded by `%s`, a complete run "
                     "of the same point: its rows are left out",
                     base_name(sup[i].path), base_name(sup[i].by->path));
            line = buf;
          }
      } else if (pass == 2 && mixed && group[i]->version != PL_RESULTS_SCHEMA) {
        snprintf(buf, sizeof buf,
                 "- `%s`: result schema version %d, read through the "
                 "version-%d column mapping (the run mixes versions)",
                 base_name(group[i]->path), group[i]->version,
                 group[i]->version);
        line = buf;
      }
      if (!line)
        continue;
      if (!f) { /* the report just renamed into place: never a link */
        const int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
          return; /* the hook wrote no report of this name (none of its
                     rows were in these files): the notes are on stderr */
        f = fd >= 0 ? fdopen(fd, "a") : NULL;
        if (!f) {
          fprintf(stderr, "plateau report: notes of %s: %s\n", path,
                  strerror(errno));
          if (fd >= 0)
            close(fd);
          return;
        }
        fprintf(f, "\n## Files: unfinished, superseded, older schema\n\n");
      }
      fprintf(f, "%s\n", line);
    }
  if (f)
    fclose(f);
}

/* Call fn once with the tables t[i] that `take` selects (none: no call). */
static pl_status call(pl_report_ctx *rc, pl_report_fn *fn, const char *name,
                      pl_table **t, int nt, const bool *take,
                      pl_table **group) {
  int ng = 0;
  for (int i = 0; i < nt; i++)
    if (take[i])
      group[ng++] = t[i];
  if (!ng)
    return PL_OK;
  rc->name = name;
  /* every file of the report's own bench without a complete row (a run
   * killed in its first point): the report still exists and says so */
  bool own = false, rows = false;
  for (int i = 0; i < ng; i++) {
    const hook *k = hook_of(group[i]->bench);
    own |= fn == pl_report_generic || (k && k->fn == fn);
    rows |= group[i]->nrows > 0;
  }
  char file[128];
  snprintf(file, sizeof file, "%s.md", name);
  pl_status st =
      own && !rows
          ? pl_rep_no_rows(rc, file, name, group, ng,
                           "no complete row was recorded (the run was killed "
                           "before its first row, or is still running)")
          : fn(rc, group, ng);
  if (st != PL_OK)
    fprintf(stderr, "plateau report: %s: %s\n", name, pl_last_error());
  else
    append_notes(rc, group, ng, R.sup, R.nsup, R.mixed);
  return st;
}

static pl_status report_tables(pl_report_ctx *rc, pl_table **t, int nt) {
  bool *take = calloc((size_t)nt + 1, sizeof *take);
  bool *generic_done = calloc((size_t)nt + 1, sizeof *generic_done);
  pl_table **group = calloc((size_t)nt + 1, sizeof *group);
  PL_ASSERT(take && generic_done && group);
  pl_status ret = PL_OK;
  /* each report hook once, in benches.def order */
  for (int h = 0; h < NHOOKS; h++) {
    if (hooks[h].fn == pl_report_generic)
      continue;
    bool first = true;
    for (int g = 0; g < h && first; g++)
      if (hooks[g].fn == hooks[h].fn)
        first = false;
    if (!first)
      continue;
    for (int i = 0; i < nt; i++)
      take[i] = takes(hooks[h].fn, t[i]->bench);
    if (call(rc, hooks[h].fn, hooks[h].report, t, nt, take, group) != PL_OK)
      ret = PL_ERUNTIME;
  }
  /* the generic table of each bench without a report, peer, unknown bench */
  for (int a = 0; a < nt; a++) {
    const hook *k = hook_of(t[a]->bench);
    if (generic_done[a] || (k && !k->peer && k->fn != pl_report_generic))
      continue;
    for (int i = 0; i < nt; i++) {
      take[i] = strcmp(t[i]->bench, t[a]->bench) == 0;
      generic_done[i] |= take[i];
    }
    char name[64];
    snprintf(name, sizeof name, "%s", t[a]->bench);
    for (char *c = name; *c; c++)
      if (*c == '/' || *c == ' ')
        *c = '_';
    if (call(rc, pl_report_generic, name, t, nt, take, group) != PL_OK)
      ret = PL_ERUNTIME;
  }
  free(take);
  free(generic_done);
  free(group);
  return ret;
}

/* RUN_DIR/report, made when missing.  A symbolic link there (or anything
 * but a directory) is refused: the report writes only into a directory of
 * the run, never through a link to somewhere else. */
static pl_status out_dir_make(const char *out_dir) {
  struct stat st;
  if (lstat(out_dir, &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      char to[PATH_MAX] = "?";
      const ssize_t k = readlink(out_dir, to, sizeof to - 1);
      to[k > 0 ? k : 1] = '\0';
      return pl_set_error(PL_EINVAL,
                          "%s is a symbolic link (to %s): the report writes "
                          "only into a directory of the run (remove the link "
                          "or make it a directory)",
                          out_dir, to);
    }
    if (!S_ISDIR(st.st_mode))
      return pl_set_error(PL_EINVAL,
                          "%s exists and is not a directory: the report "
                          "writes its files there (move it away)",
                          out_dir);
    if (access(out_dir, W_OK | X_OK) != 0)
      return pl_set_error(PL_EIO, "cannot write into %s: %s", out_dir,
                          strerror(errno));
    return PL_OK;
  }
  if (mkdir(out_dir, 0775) != 0)
    return pl_set_error(PL_EIO, "cannot make %s: %s", out_dir, strerror(errno));
  return PL_OK;
}

pl_status pl_report_run(const char *run_dir, int *charts_skipped) {
  return pl_report_run_as(run_dir, PL_REPORT_MD, charts_skipped);
}

pl_status pl_report_run_as(const char *run_dir, pl_report_format fmt,
                           int *charts_skipped) {
  struct {
    char **v;
    int n;
  } fs; /* the run directory's result files, read once */
  pl_results_scan(run_dir, &fs.v, &fs.n);
  pl_table **t = calloc((size_t)fs.n + 1, sizeof *t);
  PL_ASSERT(t != NULL);
  int nt = 0;
  for (int i = 0; i < fs.n; i++) {
    pl_table *x = calloc(1, sizeof *x);
    PL_ASSERT(x != NULL);
    if (pl_table_read(fs.v[i], x) != PL_OK) {
      fprintf(stderr, "plateau report: skipping %s: %s\n", fs.v[i],
              pl_last_error());
      free(x);
      continue;
    }
    if (x->nbad)
      fprintf(stderr,
              "plateau report: %s: %d torn or malformed line%s "
              "skipped\n",
              fs.v[i], x->nbad, x->nbad == 1 ? "" : "s");
    t[nt++] = x;
  }
  pl_results_scan_free(fs.v, fs.n);
  memset(&R, 0, sizeof R);
  R.sup = calloc((size_t)nt + 1, sizeof *R.sup);
  PL_ASSERT(R.sup != NULL);
  nt = supersede(t, nt, R.sup, &R.nsup);
  int nold = 0;
  for (int i = 0; i < nt; i++)
    nold += t[i]->version != PL_RESULTS_SCHEMA;
  R.mixed = nold > 0 && nold < nt;
  if (R.mixed)
    fprintf(stderr,
            "plateau report: %s mixes result schema versions: %d file%s of an "
            "older version, read through its column mapping and listed under "
            "'Files' in each report\n",
            run_dir, nold, nold == 1 ? "" : "s");
  pl_status st = PL_OK;
  char out_dir[PATH_MAX];
  snprintf(out_dir, sizeof out_dir, "%s/report", run_dir);
  pl_rep_claims *claims = calloc(1, sizeof *claims);
  PL_ASSERT(claims != NULL);
  pl_report_ctx rc = {.run_dir = run_dir,
                      .out_dir = out_dir,
                      .analysis_dir = pl_rep_analysis_dir(),
                      .claims = claims};
  /* a sweep whose every point failed has no result file but a status */
  char pstatus[PATH_MAX];
  snprintf(pstatus, sizeof pstatus, "%s/points.status", run_dir);
  struct stat sb;
  const bool points = stat(pstatus, &sb) == 0;
  if (nt == 0 && !points)
    PL_TRY_GOTO(st, done,
                pl_set_error(PL_EIO, "no result files in %s", run_dir));
  PL_TRY_GOTO(st, done, out_dir_make(out_dir));
  if (fmt != PL_REPORT_MD) {
    st = nt ? pl__report_export(&rc, t, nt, fmt == PL_REPORT_JSON) : PL_OK;
  } else {
    st = nt ? report_tables(&rc, t, nt) : PL_OK;
    if (pl__report_points(&rc, t, nt) != PL_OK) {
      fprintf(stderr, "plateau report: points: %s\n", pl_last_error());
      st = PL_ERUNTIME;
    }
    if (pl__report_summary(&rc) != PL_OK) {
      fprintf(stderr, "plateau report: summary: %s\n", pl_last_error());
      st = PL_ERUNTIME;
    }
  }
done:
  free(claims);
  for (int i = 0; i < nt; i++) {
    pl_table_free(t[i]);
    free(t[i]);
  }
  free(t);
  for (int i = 0; i < R.nsup; i++)
    free(R.sup[i].path);
  free(R.sup);
  memset(&R, 0, sizeof R);
  if (charts_skipped)
    *charts_skipped = rc.charts_skipped;
  return st;
}

/* ---- the command
 * -------------------------------------------------------------- */
static void report_usage(FILE *f) {
  fprintf(
      f,
      "usage: plateau report RUN_DIR [--format md|csv|json]\n"
      "  Read every *.tsv result file in RUN_DIR and its direct "
      "subdirectories\n"
      "  (older schema versions mapped to the current column names), "
      "group the\n"
      "  rows by the report their bench names (suite/harness/benches.def) and "
      "write\n"
      "  RUN_DIR/report/<report>.md (Markdown tables with where each "
      "number came\n"
      "  from, the paper's printed values beside ours) and the charts, "
      "drawn by\n"
      "  gnuplot from $PLATEAU_ROOT/analysis, <binary>/../../analysis, "
      "<binary>/../share/plateau/analysis\n  (make install) or ./analysis.\n"
      "  Prints each path written.  Without gnuplot the tables are still "
      "written\n  (a warning says the charts were skipped; exit 0).\n"
      "  RUN_DIR/report/summary.md: the paper's claims against this run, "
      "one row each.\n"
      "  --format csv|json: instead, every row of the same files as one "
      "tidy table per\n  bench, RUN_DIR/report/<bench>.csv or .json: "
      "metadata columns (file, machine,\n  device, backend, commit, date, "
      "sweep, point, file_ranks, finished) then the bench's columns,\n  units "
      "in the "
      "header (CSV: \"time_ms (ms)\"; JSON: \"columns\": "
      "[{name, unit}]).\n"
      "  env: PLATEAU_GNUPLOT (program), PLATEAU_CALIB_CEILING=GBS[:label] "
      "(dashed line)\n");
}

int pl_report_main(int argc, char **argv) {
  const char *run_dir = NULL;
  pl_report_format fmt = PL_REPORT_MD;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      report_usage(stdout);
      return 0;
    }
    const char *fv = NULL;
    if (strncmp(argv[i], "--format=", 9) == 0)
      fv = argv[i] + 9;
    else if (strcmp(argv[i], "--format") == 0) {
      if (i + 1 == argc) {
        fprintf(stderr, "plateau report: --format needs a value: md, csv "
                        "or json\n");
        return 2;
      }
      fv = argv[++i];
    }
    if (fv) {
      if (!strcmp(fv, "md"))
        fmt = PL_REPORT_MD;
      else if (!strcmp(fv, "csv"))
        fmt = PL_REPORT_CSV;
      else if (!strcmp(fv, "json"))
        fmt = PL_REPORT_JSON;
      else {
        fprintf(stderr,
                "plateau report: --format '%s': allowed md, csv, "
                "json\n",
                fv);
        return 2;
      }
      continue;
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
  struct stat sb;
  if (stat(run_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "plateau report: RUN_DIR '%s': not a directory\n", run_dir);
    return 2;
  }
  int skipped = 0;
  pl_status st = pl_report_run_as(run_dir, fmt, &skipped);
  if (skipped)
    fprintf(stderr, "plateau report: warning: charts were skipped\n");
  if (st == PL_EINVAL || st == PL_EIO)
    fprintf(stderr, "plateau report: %s\n", pl_last_error());
  return st == PL_OK ? 0 : st == PL_EINVAL ? 2 : 3;
}
