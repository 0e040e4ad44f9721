/* report_export.c — `plateau report RUN_DIR --format csv|json`: every result
 * file of a run or sweep directory as one tidy table per bench (one row per
 * result row, one column per quantity), for pandas, R or a spreadsheet.
 *
 * Why in `plateau report` and not a command of its own: the export must hold
 * exactly the rows the tables hold — the same scan of RUN_DIR and its
 * subdirectories, the reader that skips torn rows and maps older schema
 * versions to the current column names, unfinished files superseded by a
 * complete rerun left out (report.c) — so it is another output of the one
 * reading.
 *
 * Each table: the metadata columns first (file, machine = the host name,
 * device, backend, commit = git sha with "+dirty" when the tree was dirty,
 * date = the run's start in UTC, sweep, point, file_ranks = the ranks of
 * the process group that wrote the file,
 * finished = whether the file has its "# end:" line),
 * then the union of the bench's columns in the order they first appear (a
 * metadata name the bench also has as a column becomes "file_<name>").
 * Units: a CSV header cell is "name (unit)" where the schema gives the
 * column a unit (memory in bytes, times in ms: the result file's own
 * numbers, never rescaled); JSON has {"bench", "columns": [{"name", "unit"}],
 * "rows": [{name: value}]} with numbers as numbers and "-" as null. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plateau/plateau.h"
#include "report.h"
#include "report_util.h"
#include "results/schema.h"

#define NMETA 10
static const char *const META[NMETA] = {
    "file", "machine", "device", "backend",    "commit",
    "date", "sweep",   "point",  "file_ranks", "finished"};

/* The metadata cell k of table t. */
static const char *meta_of(const pl_table *t, int k, char *b, size_t n) {
  switch (k) {
  case 0: {
    const char *s = strrchr(t->path, '/');
    return s ? s + 1 : t->path;
  }
  case 1:
    return pl_rep_meta(t, "hostname", "-");
  case 2:
    return pl_rep_meta(t, "device", "-");
  case 3:
    return pl_rep_meta(t, "backend", "-");
  case 4:
    snprintf(b, n, "%s%s", pl_rep_meta(t, "git_sha", "-"),
             strcmp(pl_rep_meta(t, "git_dirty", "0"), "1") == 0 ? "+dirty"
                                                                : "");
    return b;
  case 5:
    return pl_rep_meta(t, "start_utc", "-");
  case 6:
    return pl_rep_meta(t, "sweep", "-");
  case 7:
    return pl_rep_meta(t, "point", "-");
  case 8:
    return pl_rep_meta(t, "ranks", "-");
  default: /* no "# end:" line: killed or still running */
    return t->finished ? "yes" : "no";
  }
}

/* The name of metadata column k in a table whose own columns are
 * cols[0..nc): "file_<name>" where the bench has a column of that name (a
 * peer's "backend"), so no name is written twice. */
static const char *meta_name(int k, const char *const *cols, int nc, char *b,
                             size_t n) {
  for (int i = 0; i < nc; i++)
    if (!strcmp(cols[i], META[k])) {
      snprintf(b, n, "file_%s", META[k]);
      return b;
    }
  return META[k];
}

/* The schema's unit of a column, or NULL (none, "-", or not in the schema). */
static const char *unit_of(const char *col) {
  const pl_col_def *d = pl_schema_find(col);
  return d && strcmp(d->unit, "-") ? d->unit : NULL;
}

static void csv_cell(FILE *f, const char *v) {
  if (!v || !strcmp(v, "-")) /* missing: an empty cell */
    return;
  if (!strpbrk(v, ",\"\n\r")) {
    fputs(v, f);
    return;
  }
  fputc('"', f);
  for (const char *c = v; *c; c++) {
    if (*c == '"')
      fputc('"', f);
    fputc(*c, f);
  }
  fputc('"', f);
}

static void json_str(FILE *f, const char *v) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
    if (*c == '"' || *c == '\\')
      fprintf(f, "\\%c", *c);
    else if (*c < 0x20)
      fprintf(f, "\\u%04x", *c);
    else
      fputc(*c, f);
  }
  fputc('"', f);
}

/* Is v a number as JSON spells one (-?int(.frac)?(e[+-]?exp)?, no leading
 * zero, no "nan", "inf", "+1" or ".5")? */
static bool json_number(const char *v) {
  const char *c = v;
  if (*c == '-')
    c++;
  if (*c == '0')
    c++;
  else if (*c >= '1' && *c <= '9')
    while (*c >= '0' && *c <= '9')
      c++;
  else
    return false;
  if (*c == '.') {
    c++;
    if (*c < '0' || *c > '9')
      return false;
    while (*c >= '0' && *c <= '9')
      c++;
  }
  if (*c == 'e' || *c == 'E') {
    c++;
    if (*c == '+' || *c == '-')
      c++;
    if (*c < '0' || *c > '9')
      return false;
    while (*c >= '0' && *c <= '9')
      c++;
  }
  return *c == '\0';
}

/* A value: null for "-" or empty, a number when JSON can write it as one,
 * else a string (so "nan" stays text). */
static void json_val(FILE *f, const char *v) {
  if (!v || !*v || !strcmp(v, "-"))
    fputs("null", f);
  else if (json_number(v))
    fputs(v, f);
  else
    json_str(f, v);
}

/* The union of the columns of t[0..n) in first-seen order into cols. */
static int union_cols(pl_table *const *t, int n, const char **cols, int cap) {
  int nc = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < t[i]->ncols; j++) {
      bool seen = false;
      for (int k = 0; k < nc && !seen; k++)
        seen = !strcmp(cols[k], t[i]->cols[j]);
      if (!seen && nc < cap)
        cols[nc++] = t[i]->cols[j];
    }
  return nc;
}

/* One bench's tables t[0..n) into report/<name>.<ext>. */
static pl_status export_one(pl_report_ctx *rc, const char *name,
                            pl_table *const *t, int n, bool json) {
  const char **cols = calloc(4096, sizeof *cols);
  PL_ASSERT(cols != NULL);
  const int nc = union_cols(t, n, cols, 4096);
  char fname[160], path[PATH_MAX], b[128], mb[64];
  snprintf(fname, sizeof fname, "%s.%s", name, json ? "json" : "csv");
  FILE *f = pl_rep_open(rc, fname, path, sizeof path);
  if (!f) {
    free(cols);
    return PL_EIO;
  }
  if (json) {
    fputs("{\"bench\": ", f);
    json_str(f, t[0]->bench);
    fputs(", \"run_dir\": ", f);
    json_str(f, rc->run_dir);
    fputs(",\n \"columns\": [", f);
    for (int k = 0; k < NMETA + nc; k++) {
      const char *c =
          k < NMETA ? meta_name(k, cols, nc, mb, sizeof mb) : cols[k - NMETA];
      const char *u = k < NMETA ? NULL : unit_of(c);
      fputs(k ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
      json_str(f, c);
      fputs(", \"unit\": ", f);
      if (u)
        json_str(f, u);
      else
        fputs("null", f);
      fputc('}', f);
    }
    fputs("],\n \"rows\": [", f);
  } else {
    for (int k = 0; k < NMETA + nc; k++) {
      const char *c =
          k < NMETA ? meta_name(k, cols, nc, mb, sizeof mb) : cols[k - NMETA];
      const char *u = k < NMETA ? NULL : unit_of(c);
      char h[256];
      snprintf(h, sizeof h, u ? "%s (%s)" : "%s", c, u);
      if (k)
        fputc(',', f);
      csv_cell(f, h);
    }
    fputc('\n', f);
  }
  int nr = 0;
  for (int i = 0; i < n; i++)
    for (int r = 0; r < t[i]->nrows; r++, nr++) {
      if (json)
        fputs(nr ? ",\n  {" : "\n  {", f);
      for (int k = 0; k < NMETA + nc; k++) {
        const char *c =
            k < NMETA ? meta_name(k, cols, nc, mb, sizeof mb) : cols[k - NMETA];
        const char *v =
            k < NMETA ? meta_of(t[i], k, b, sizeof b) : pl_cell(t[i], r, c);
        if (json) {
          if (k)
            fputs(", ", f);
          json_str(f, c);
          fputs(": ", f);
          /* metadata as text: a commit or a point id is not a number */
          if (k < NMETA)
            !strcmp(v, "-") ? fputs("null", f) : json_str(f, v);
          else
            json_val(f, v);
        } else {
          if (k)
            fputc(',', f);
          csv_cell(f, v);
        }
      }
      if (json)
        fputc('}', f);
      else
        fputc('\n', f);
    }
  if (json)
    fputs("]}\n", f);
  free(cols);
  return pl_rep_close(f, path);
}

pl_status pl__report_export(pl_report_ctx *rc, pl_table *const *t, int nt,
                            bool json) {
  bool *done = calloc((size_t)nt + 1, sizeof *done);
  pl_table **group = calloc((size_t)nt + 1, sizeof *group);
  PL_ASSERT(done && group);
  pl_status st = PL_OK;
  for (int a = 0; a < nt && st == PL_OK; a++) {
    if (done[a])
      continue;
    int ng = 0;
    for (int i = a; i < nt; i++)
      if (!done[i] && !strcmp(t[i]->bench, t[a]->bench))
        group[ng++] = t[i], done[i] = true;
    char name[64];
    snprintf(name, sizeof name, "%s", t[a]->bench);
    for (char *c = name; *c; c++)
      if (*c == '/' || *c == ' ' || *c == '.')
        *c = '_';
    st = export_one(rc, name, group, ng, json);
  }
  free(done);
  free(group);
  return st;
}
