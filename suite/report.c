/* report.c — `plateau report RUN_DIR`: regenerate tables and charts from the
 * result files of a run directory.
 *
 * Why in the binary and not a script: the reader that skips torn rows, checks
 * the schema version and maps older files to the current column names lives
 * here (results.c), so the tables are built from exactly the rows the suite
 * considers valid.  Charts are drawn by gnuplot from data files the hooks
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

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plateau/plateau.h"
#include "report_util.h"

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
#include "benches.def"
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

/* ---- the run directory, read once
 * -------------------------------------------- */
typedef struct files {
  char **v;
  int n, cap;
} files;

static void scan(const char *dir, int depth, files *fs) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char p[PATH_MAX];
    int len = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (len <= 0 || len >= (int)sizeof p)
      continue;
    size_t nl = strlen(e->d_name);
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
      if (depth == 0 && strcmp(e->d_name, "report") != 0)
        scan(p, 1, fs);
    } else if (nl > 4 && strcmp(e->d_name + nl - 4, ".tsv") == 0) {
      if (fs->n == fs->cap) {
        fs->cap = fs->cap ? 2 * fs->cap : 16;
        fs->v = realloc(fs->v, (size_t)fs->cap * sizeof *fs->v);
        PL_ASSERT(fs->v != NULL);
      }
      fs->v[fs->n++] = strdup(p);
    }
  }
  closedir(d);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
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
  pl_status st = fn(rc, group, ng);
  if (st != PL_OK)
    fprintf(stderr, "plateau report: %s: %s\n", name, pl_last_error());
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

pl_status pl_report_run(const char *run_dir, int *charts_skipped) {
  files fs = {0};
  scan(run_dir, 0, &fs);
  if (fs.n > 1)
    qsort(fs.v, (size_t)fs.n, sizeof *fs.v, cmp_str);
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
  for (int i = 0; i < fs.n; i++)
    free(fs.v[i]);
  free(fs.v);
  pl_status st = PL_OK;
  char out_dir[PATH_MAX];
  snprintf(out_dir, sizeof out_dir, "%s/report", run_dir);
  pl_report_ctx rc = {.run_dir = run_dir,
                      .out_dir = out_dir,
                      .analysis_dir = pl_rep_analysis_dir()};
  if (nt == 0)
    st = pl_set_error(PL_EIO, "no result files in %s", run_dir);
  else if (mkdir(out_dir, 0775) != 0 && errno != EEXIST)
    st = pl_set_error(PL_EIO, "mkdir %s: %s", out_dir, strerror(errno));
  else
    st = report_tables(&rc, t, nt);
  for (int i = 0; i < nt; i++) {
    pl_table_free(t[i]);
    free(t[i]);
  }
  free(t);
  if (charts_skipped)
    *charts_skipped = rc.charts_skipped;
  return st;
}

/* ---- the command
 * -------------------------------------------------------------- */
static void report_usage(FILE *f) {
  fprintf(f,
          "usage: plateau report RUN_DIR\n"
          "  Read every *.tsv result file in RUN_DIR and its direct "
          "subdirectories\n"
          "  (older schema versions mapped to the current column names), "
          "group the\n"
          "  rows by the report their bench names (suite/benches.def) and "
          "write\n"
          "  RUN_DIR/report/<report>.md (Markdown tables with where each "
          "number came\n"
          "  from, the paper's printed values beside ours) and the charts, "
          "drawn by\n"
          "  gnuplot from $PLATEAU_ROOT/analysis, <binary>/../../analysis or "
          "./analysis.\n"
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
  struct stat sb;
  if (stat(run_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "plateau report: RUN_DIR '%s': not a directory\n", run_dir);
    return 2;
  }
  int skipped = 0;
  pl_status st = pl_report_run(run_dir, &skipped);
  if (skipped)
    fprintf(stderr, "plateau report: warning: charts were skipped\n");
  if (st == PL_EIO && strstr(pl_last_error(), "no result files")) {
    fprintf(stderr, "plateau report: %s\n", pl_last_error());
    return 3;
  }
  return st == PL_OK ? 0 : 3;
}
