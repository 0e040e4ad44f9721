/* results_read.c — the reader of result files (results.h): pl_table_read
 * and the mapping of version-1 files to the current column names.  A line
 * is a row only when it ends in '\n', has exactly the header's number of
 * fields and no torn marker (results.c's head comment says why); every
 * other line is counted in nbad.  The writer is results.c (which uses
 * this file's field count and regular-file open, never the other way). */
#include <dirent.h>
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
#include "results.h"
#include "results_internal.h"
#include "schema.h"

/* The fields of a tab-separated line (the writer counts its columns too). */
int pl__results_count_fields(const char *line, size_t len) {
  int n = 1;
  for (size_t i = 0; i < len; i++)
    if (line[i] == '\t')
      n++;
  return n;
}

/* ---- reading ------------------------------------------------------------- */

static char **split_tabs(const char *s, size_t len, int *n) {
  int nf = pl__results_count_fields(s, len);
  char **f = calloc((size_t)nf, sizeof *f);
  PL_ASSERT(f != NULL);
  size_t start = 0;
  int k = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == '\t') {
      f[k] = strndup(s + start, i - start);
      PL_ASSERT(f[k] != NULL);
      k++;
      start = i + 1;
    }
  }
  *n = nf;
  return f;
}

static void free_fields(char **f, int n) {
  for (int i = 0; i < n; i++)
    free(f[i]);
  free(f);
}

/* ---- version 1 -> 2 ------------------------------------------------------ */

/* Insert column `name` at position `at` with the values vals[r] (owned). */
static void insert_col(pl_table *t, int at, const char *name, char **vals) {
  char **cols = malloc(sizeof(char *) * (size_t)(t->ncols + 1));
  PL_ASSERT(cols != NULL);
  memcpy(cols, t->cols, sizeof(char *) * (size_t)at);
  cols[at] = strdup(name);
  memcpy(cols + at + 1, t->cols + at, sizeof(char *) * (size_t)(t->ncols - at));
  free(t->cols);
  t->cols = cols;
  for (int r = 0; r < t->nrows; r++) {
    char **row = malloc(sizeof(char *) * (size_t)(t->ncols + 1));
    PL_ASSERT(row != NULL);
    memcpy(row, t->rows[r], sizeof(char *) * (size_t)at);
    row[at] = vals[r];
    memcpy(row + at + 1, t->rows[r] + at,
           sizeof(char *) * (size_t)(t->ncols - at));
    free(t->rows[r]);
    t->rows[r] = row;
  }
  t->ncols++;
}

static void drop_col(pl_table *t, int c) {
  free(t->cols[c]);
  memmove(t->cols + c, t->cols + c + 1,
          sizeof(char *) * (size_t)(t->ncols - c - 1));
  for (int r = 0; r < t->nrows; r++) {
    free(t->rows[r][c]);
    memmove(t->rows[r] + c, t->rows[r] + c + 1,
            sizeof(char *) * (size_t)(t->ncols - c - 1));
  }
  t->ncols--;
}

/* The text after `key` in a v1 note up to the next ',' or ';', or NULL. */
static char *note_after(const char *note, const char *key) {
  const char *p = note ? strstr(note, key) : NULL;
  if (!p)
    return NULL;
  p += strlen(key);
  return strndup(p, strcspn(p, ",;"));
}

/* A derived column (before `status`) from each row's note. */
static void derive(pl_table *t, const char *name,
                   char *(*from_note)(const pl_table *t, char **row)) {
  if (pl_table_col(t, name) >= 0)
    return;
  char **vals = calloc((size_t)t->nrows + 1, sizeof *vals);
  PL_ASSERT(vals != NULL);
  for (int r = 0; r < t->nrows; r++)
    vals[r] = from_note(t, t->rows[r]);
  int at = pl_table_col(t, "status");
  insert_col(t, at >= 0 ? at : t->ncols, name, vals);
  free(vals);
}

static const char *row_note(const pl_table *t, char **row) {
  int c = pl_table_col(t, "note");
  return c >= 0 ? row[c] : NULL;
}

/* attention: "fwd kernel A, bwd kernel B" -> A+B; "?" for a part the note
 * does not name (fwdbwd rows have both parts). */
static char *attention_kernel(const pl_table *t, char **row) {
  int cp = pl_table_col(t, "pass");
  const char *note = row_note(t, row);
  char *f = note_after(note, "fwd kernel "),
       *b = note_after(note, "bwd kernel ");
  char *k = NULL;
  if (cp >= 0 && strcmp(row[cp], "fwd") != 0)
    PL_ASSERT(asprintf(&k, "%s+%s", f ? f : "?", b ? b : "?") >= 0);
  else
    k = strdup(f ? f : "?");
  free(f);
  free(b);
  return k;
}

/* adam hybrid rows: "...; cpu share 0.320" */
static char *adam_cpu_share(const pl_table *t, char **row) {
  char *v = note_after(row_note(t, row), "cpu share ");
  return v ? v : strdup("-");
}

static void v1_to_v2(pl_table *t) {
  for (int c = 0; c < t->ncols;) {
    const pl_v1_map *m = pl_schema_v1(t->bench, t->cols[c]);
    if (m && !m->to) {
      drop_col(t, c);
      continue;
    }
    if (m && pl_table_col(t, m->to) < 0) { /* a name already current stays */
      free(t->cols[c]);
      t->cols[c] = strdup(m->to);
      for (int r = 0; m->scale != 1 && r < t->nrows; r++) {
        char *end, *s = t->rows[r][c];
        double v = strtod(s, &end);
        if (end == s || *end)
          continue; /* "-", "nan" stay */
        free(s);
        PL_ASSERT(asprintf(&t->rows[r][c], "%.17g", v * m->scale) >= 0);
      }
    }
    c++;
  }
  if (strcmp(t->bench, "attention") == 0) {
    derive(t, "kernel", attention_kernel);
    /* v1's algo chose the forward kernel alone (the backward was AUTO's):
     * the v2 variant is "fwd/bwd", so "wgmma" reads "wgmma/auto" */
    const int c = pl_table_col(t, "variant");
    for (int r = 0; c >= 0 && r < t->nrows; r++) {
      char *v = t->rows[r][c];
      if (strchr(v, '/') || strcmp(v, "-") == 0)
        continue;
      PL_ASSERT(asprintf(&t->rows[r][c], "%s/auto", v) >= 0);
      free(v);
    }
  }
  if (strcmp(t->bench, "adam") == 0)
    derive(t, "cpu_share", adam_cpu_share);
  if (pl_table_col(t, "bench") < 0) {
    char **vals = calloc((size_t)t->nrows + 1, sizeof *vals);
    PL_ASSERT(vals != NULL);
    for (int r = 0; r < t->nrows; r++)
      vals[r] = strdup(t->bench);
    insert_col(t, 0, "bench", vals);
    free(vals);
  }
}

/* Open path for reading only if it is a regular file: opened without
 * blocking (a FIFO named *.tsv would wait for a writer forever), checked,
 * then read normally. */
FILE *pl__results_open_regular(const char *path, pl_status *st) {
  *st = PL_EIO;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    pl_set_error(PL_EIO, "open %s: %s", path, strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    *st = pl_set_error(PL_EINVAL, "%s: not a regular file", path);
    close(fd);
    return NULL;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  FILE *f = fdopen(fd, "r");
  if (!f) {
    pl_set_error(PL_EIO, "open %s: %s", path, strerror(errno));
    close(fd);
  }
  return f;
}

/* "# plateau-results: N": N digits (blanks around allowed), else -1 with
 * the text kept for the message. */
static int parse_version(const char *s, char *raw, size_t n) {
  while (*s == ' ')
    s++;
  snprintf(raw, n, "%s", s);
  size_t len = strlen(raw);
  while (len && raw[len - 1] == ' ')
    raw[--len] = '\0';
  if (len == 0 || len > 6 || strspn(raw, "0123456789") != len)
    return -1;
  return atoi(raw);
}

pl_status pl_table_read(const char *path, pl_table *out) {
  memset(out, 0, sizeof *out);
  pl_status ost;
  FILE *f = pl__results_open_regular(path, &ost);
  if (!f)
    return ost;
  out->path = strdup(path);
  char vraw[64] = "";
  char *line = NULL;
  size_t cap = 0, rows_cap = 0, meta_cap = 0;
  ssize_t n;
  bool have_schema = false;
  int lineno = 0;
  while ((n = getline(&line, &cap, f)) > 0) {
    lineno++;
    if (line[n - 1] != '\n') { /* torn last line: no newline yet */
      out->nbad++;
      break;
    }
    size_t len = (size_t)n - 1;
    line[len] = '\0';
    if (len == 0)
      continue;
    if (line[0] == '#') {
      if (strncmp(line, "# plateau-results:", 18) == 0) {
        have_schema = true;
        out->version = parse_version(line + 18, vraw, sizeof vraw);
      } else if (strncmp(line, "# end:", 6) == 0) {
        out->finished = 1;
      } else {
        char *colon = strstr(line, ": ");
        if (colon && line[1] == ' ') {
          if (out->nmeta == (int)meta_cap) {
            meta_cap = meta_cap ? 2 * meta_cap : 32;
            out->meta_keys = realloc(out->meta_keys, meta_cap * sizeof(char *));
            out->meta_vals = realloc(out->meta_vals, meta_cap * sizeof(char *));
            PL_ASSERT(out->meta_keys && out->meta_vals);
          }
          out->meta_keys[out->nmeta] =
              strndup(line + 2, (size_t)(colon - line - 2));
          out->meta_vals[out->nmeta] = strdup(colon + 2);
          out->nmeta++;
        }
      }
      continue;
    }
    if (!out->cols) {
      out->cols = split_tabs(line, len, &out->ncols);
      continue;
    }
    int nf;
    char **fields = split_tabs(line, len, &nf);
    bool ok = nf == out->ncols;
    for (int i = 0; ok && i < nf; i++)
      if (strcmp(fields[i], PL__TORN_MARK) == 0)
        ok = false;
    if (!ok) {
      free_fields(fields, nf);
      out->nbad++;
      continue;
    }
    if (out->nrows == (int)rows_cap) {
      rows_cap = rows_cap ? 2 * rows_cap : 64;
      out->rows = realloc(out->rows, rows_cap * sizeof(char **));
      out->lines = realloc(out->lines, rows_cap * sizeof(int));
      PL_ASSERT(out->rows != NULL && out->lines != NULL);
    }
    out->lines[out->nrows] = lineno;
    out->rows[out->nrows++] = fields;
  }
  free(line);
  bool err = ferror(f);
  fclose(f);
  if (err) {
    pl_status st = pl_set_error(PL_EIO, "read %s: I/O error", path);
    pl_table_free(out);
    return st;
  }
  if (!have_schema || !out->cols) {
    pl_status st = pl_set_error(
        PL_EINVAL, "%s: not a plateau result file (%s)", path,
        !have_schema ? "no '# plateau-results:' line" : "no header line");
    pl_table_free(out);
    return st;
  }
  if (out->version < 1 || out->version > PL_RESULTS_SCHEMA) {
    pl_status st =
        out->version < 0
            ? pl_set_error(PL_EINVAL,
                           "%s: result schema version '%s' is not one this "
                           "plateau reads (1 to %d)",
                           path, vraw, PL_RESULTS_SCHEMA)
            : pl_set_error(PL_EINVAL,
                           "%s: result schema version %d is not one this "
                           "plateau reads (1 to %d; a newer plateau wrote it?)",
                           path, out->version, PL_RESULTS_SCHEMA);
    pl_table_free(out);
    return st;
  }
  const char *b = pl_table_meta(out, "bench");
  out->bench = strdup(b ? b : "unknown");
  PL_ASSERT(out->bench != NULL);
  if (out->version == 1)
    v1_to_v2(out);
  return PL_OK;
}

void pl_table_free(pl_table *t) {
  if (!t)
    return;
  free(t->path);
  free(t->bench);
  if (t->cols)
    free_fields(t->cols, t->ncols);
  for (int i = 0; i < t->nrows; i++)
    free_fields(t->rows[i], t->ncols);
  free(t->rows);
  free(t->lines);
  for (int i = 0; i < t->nmeta; i++) {
    free(t->meta_keys[i]);
    free(t->meta_vals[i]);
  }
  free(t->meta_keys);
  free(t->meta_vals);
  memset(t, 0, sizeof *t);
}

int pl_table_col(const pl_table *t, const char *name) {
  for (int i = 0; i < t->ncols; i++)
    if (strcmp(t->cols[i], name) == 0)
      return i;
  return -1;
}

const char *pl_table_meta(const pl_table *t, const char *key) {
  for (int i = t->nmeta - 1; i >= 0; i--) /* last one wins */
    if (strcmp(t->meta_keys[i], key) == 0)
      return t->meta_vals[i];
  return NULL;
}

/* ---- the result files of a run directory ---------------------------------
 */
static void scan_dir(const char *dir, int depth, char ***v, int *n, int *cap) {
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
    if (depth == 0 && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
      if (strcmp(e->d_name, "report") != 0)
        scan_dir(p, 1, v, n, cap);
    } else if (nl > 4 && strcmp(e->d_name + nl - 4, ".tsv") == 0) {
      if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *v = realloc(*v, (size_t)*cap * sizeof **v);
        PL_ASSERT(*v != NULL);
      }
      (*v)[(*n)++] = strdup(p);
      PL_ASSERT((*v)[*n - 1] != NULL);
    }
  }
  closedir(d);
}

static int cmp_path(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void pl_results_scan(const char *dir, char ***paths, int *n) {
  int cap = 0;
  *paths = NULL;
  *n = 0;
  scan_dir(dir, 0, paths, n, &cap);
  if (*n > 1)
    qsort(*paths, (size_t)*n, sizeof **paths, cmp_path);
}

void pl_results_scan_free(char **paths, int n) {
  for (int i = 0; i < n; i++)
    free(paths[i]);
  free(paths);
}
