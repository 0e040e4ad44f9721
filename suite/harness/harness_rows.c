/* harness_rows.c — rows of the harness (bench.h): one per measurement, the
 * columns the bench lists between the harness's `bench` and its status,
 * check and note; written by rank 0 as a TSV line of the result file and a
 * human line on stdout.  One run per process: the columns live here from
 * pl__rows_begin to pl__rows_end. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "harness.h"
#include "results/results.h"

static struct {
  const char *bench;
  int ncols;
  char **cols; /* bench, the bench's columns (status, check, note apart) */
  int *widths; /* human table */
  int nfail, nrows;
} H;

void pl__rows_begin(const char *bench, const char *columns) {
  memset(&H, 0, sizeof H);
  H.bench = bench;
  H.ncols = 2;
  for (const char *c = columns; *c; c++)
    if (*c == '\t')
      H.ncols++;
  H.cols = calloc((size_t)H.ncols, sizeof *H.cols);
  H.widths = calloc((size_t)H.ncols, sizeof *H.widths);
  PL_ASSERT(H.cols && H.widths);
  H.cols[0] = strdup("bench");
  const char *s = columns;
  for (int i = 1; i < H.ncols; i++) {
    const char *t = strchr(s, '\t');
    size_t len = t ? (size_t)(t - s) : strlen(s);
    H.cols[i] = strndup(s, len);
    s = t ? t + 1 : s + len;
  }
  for (int i = 0; i < H.ncols; i++) {
    int len = (int)strlen(H.cols[i]);
    H.widths[i] = len + 2 > 11 ? len + 2 : 11;
  }
}

void pl__rows_end(void) {
  for (int i = 0; i < H.ncols; i++)
    free(H.cols[i]);
  free(H.cols);
  free(H.widths);
  memset(&H, 0, sizeof H);
}

void pl__rows_counts(int *nrows, int *nfail) {
  *nrows = H.nrows;
  *nfail = H.nfail;
}

char *pl__rows_header(void) {
  size_t len = 32;
  for (int i = 0; i < H.ncols; i++)
    len += strlen(H.cols[i]) + 1;
  char *h = malloc(len);
  PL_ASSERT(h != NULL);
  h[0] = '\0';
  for (int i = 0; i < H.ncols; i++) {
    strcat(h, H.cols[i]);
    strcat(h, "\t");
  }
  strcat(h, "status\tcheck\tnote");
  return h;
}

void pl__rows_print_header(void) {
  printf("#");
  for (int i = 0; i < H.ncols; i++)
    printf(" %*s", H.widths[i] - (i == 0 ? 2 : 1), H.cols[i]);
  printf("  %-6s %-5s %s\n", "status", "check", "note");
  fflush(stdout);
}

/* ---- rows ---------------------------------------------------------------- */
struct pl_row {
  pl_bench_ctx *ctx;
  char **vals;
  char status[16];
  char check[8];
  char note[1024];
};

/* Fields are tab-separated single lines: tabs and newlines become spaces. */
static char *clean_dup(const char *v) {
  char *d = strdup(v && *v ? v : "-");
  PL_ASSERT(d != NULL);
  for (char *c = d; *c; c++)
    if (*c == '\t' || *c == '\n' || *c == '\r')
      *c = ' ';
  return d;
}

static int col_index(const char *col) {
  for (int i = 0; i < H.ncols; i++)
    if (strcmp(H.cols[i], col) == 0)
      return i;
  return -1;
}

pl_row *pl_row_new(pl_bench_ctx *ctx) {
  pl_row *r = calloc(1, sizeof *r);
  PL_ASSERT(r != NULL);
  r->ctx = ctx;
  r->vals = calloc((size_t)H.ncols, sizeof *r->vals);
  PL_ASSERT(r->vals != NULL);
  r->vals[0] = clean_dup(H.bench);
  strcpy(r->status, "ok");
  strcpy(r->check, "skip");
  return r;
}

void pl_row_str(pl_row *r, const char *col, const char *v) {
  int i = col_index(col);
  if (i < 0) {
    fprintf(stderr, "pl_row: column '%s' is not in the columns of bench %s\n",
            col, H.bench);
    PL_ASSERT(!"row column not in the bench's list");
  }
  free(r->vals[i]);
  r->vals[i] = clean_dup(v);
}

bool pl__rows_listed(const char *col) {
  return col_index(col) >= 0;
}

bool pl_row_has(const pl_row *r, const char *col) {
  int i = col_index(col);
  return i >= 0 && r->vals[i] != NULL;
}

void pl_row_i64(pl_row *r, const char *col, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  pl_row_str(r, col, buf);
}

void pl_row_f64(pl_row *r, const char *col, double v) {
  char buf[48];
  if (isnan(v))
    strcpy(buf, "nan");
  else
    snprintf(buf, sizeof buf, "%.6g", v);
  pl_row_str(r, col, buf);
}

void pl_row_note(pl_row *r, const char *fmt, ...) {
  size_t len = strlen(r->note);
  if (len && len + 2 < sizeof r->note) {
    strcat(r->note, "; ");
    len += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->note + len, sizeof r->note - len, fmt, ap);
  va_end(ap);
}

const char *pl_row_note_text(const pl_row *r) { return r->note; }

void pl_row_status(pl_row *r, const char *status, const char *note) {
  PL_ASSERT(status &&
            (strcmp(status, "ok") == 0 || strcmp(status, "oom") == 0 ||
             strcmp(status, "infeasible") == 0 ||
             strcmp(status, "error") == 0));
  snprintf(r->status, sizeof r->status, "%s", status);
  if (note)
    snprintf(r->note, sizeof r->note, "%s", note);
}

void pl_row_status_from(pl_row *r, pl_status s) {
  const char *st = s == PL_OK            ? "ok"
                   : s == PL_ENOMEM      ? "oom"
                   : s == PL_EINFEASIBLE ? "infeasible"
                                         : "error";
  if (s == PL_OK) {
    pl_row_status(r, st, NULL);
    return;
  }
  const char *msg = pl_last_error();
  char note[1024];
  if (s == PL_EINFEASIBLE && msg && *msg) /* the reason says it all */
    snprintf(note, sizeof note, "%s", msg);
  else if (msg && *msg)
    snprintf(note, sizeof note, "%s: %s", pl_strerror(s), msg);
  else
    snprintf(note, sizeof note, "%s", pl_strerror(s));
  pl_row_status(r, st, note);
}

void pl_row_check(pl_row *r, const char *check) {
  PL_ASSERT(check &&
            (strcmp(check, "pass") == 0 || strcmp(check, "fail") == 0 ||
             strcmp(check, "skip") == 0));
  snprintf(r->check, sizeof r->check, "%s", check);
}

pl_status pl_row_emit(pl_row *r) {
  pl_status st = PL_OK;
  if (r->ctx->rank == 0) {
    char *note = clean_dup(r->note);
    size_t len = strlen(r->status) + strlen(r->check) + strlen(note) + 8;
    for (int i = 0; i < H.ncols; i++)
      len += (r->vals[i] ? strlen(r->vals[i]) : 1) + 1;
    char *line = malloc(len);
    PL_ASSERT(line != NULL);
    line[0] = '\0';
    for (int i = 0; i < H.ncols; i++) {
      strcat(line, r->vals[i] ? r->vals[i] : "-");
      strcat(line, "\t");
    }
    strcat(line, r->status);
    strcat(line, "\t");
    strcat(line, r->check);
    strcat(line, "\t");
    strcat(line, note);
    for (int i = 0; i < H.ncols; i++) /* always one space between columns */
      printf(" %*s", H.widths[i] - 1, r->vals[i] ? r->vals[i] : "-");
    printf("  %-6s %-5s %s\n", r->status, r->check, note);
    fflush(stdout);
    if (r->ctx->res)
      st = pl_results_append(r->ctx->res, line);
    free(line);
    free(note);
    H.nrows++;
    if (strcmp(r->check, "fail") == 0)
      H.nfail++;
  }
  for (int i = 0; i < H.ncols; i++)
    free(r->vals[i]);
  free(r->vals);
  free(r);
  return st;
}
