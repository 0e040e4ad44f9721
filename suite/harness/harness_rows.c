/* harness_rows.c — rows of the harness (bench.h): one per measurement, the
 * columns the bench lists between the harness's `bench` and its status,
 * check and note; written by rank 0 as a TSV line of the result file and a
 * short human line on stdout (what ran, time, rates, peak, status).  One run
 * per process: the columns live here from pl__rows_begin to pl__rows_end. */
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
  PL_ASSERT(H.cols);
  H.cols[0] = strdup("bench");
  const char *s = columns;
  for (int i = 1; i < H.ncols; i++) {
    const char *t = strchr(s, '\t');
    size_t len = t ? (size_t)(t - s) : strlen(s);
    H.cols[i] = strndup(s, len);
    s = t ? t + 1 : s + len;
  }
}

void pl__rows_end(void) {
  for (int i = 0; i < H.ncols; i++)
    free(H.cols[i]);
  free(H.cols);
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
  printf("# one line per row: what ran: time, rates, device peak; status "
         "check (every column is in the result file)\n");
  fflush(stdout);
}

/* ---- the human line ------------------------------------------------------
 * What a person reads while a bench runs: what ran (the row's identity
 * words and its sizes), its time, its rates, its device peak, status and
 * check, the note cut short.  The row itself, every column, is the result
 * file's line; nothing parses this one. */

/* The value of column name in vals, or NULL when absent or "-". */
static const char *val(char **vals, const char *name) {
  for (int i = 0; i < H.ncols; i++)
    if (!strcmp(H.cols[i], name))
      return vals[i] && strcmp(vals[i], "-") ? vals[i] : NULL;
  return NULL;
}

/* A count as a size: 131072 -> "128K", 1048576 -> "1M", else as written. */
static void count_text(const char *v, char *b, size_t n) {
  char *end;
  const double x = strtod(v, &end);
  if (*end || !isfinite(x) || x < 1024)
    snprintf(b, n, "%s", v);
  else if (fmod(x, 1048576) == 0)
    snprintf(b, n, "%.0fM", x / 1048576);
  else if (fmod(x, 1024) == 0)
    snprintf(b, n, "%.0fK", x / 1024);
  else
    snprintf(b, n, "%s", v);
}

/* A measured number: 4 significant digits, no exponent. */
static void q_text(const char *v, char *b, size_t n) {
  char *end;
  const double x = strtod(v, &end);
  if (*end || !isfinite(x)) {
    snprintf(b, n, "%s", v);
    return;
  }
  const double a = fabs(x);
  const int dec = a >= 1000  ? 0
                  : a >= 100 ? 1
                  : a >= 10  ? 2
                  : a >= 1   ? 3
                  : a == 0   ? 0
                             : 3 - (int)floor(log10(a));
  snprintf(b, n, "%.*f", dec, x);
}

static void bytes_text(const char *v, char *b, size_t n) {
  const double x = strtod(v, NULL);
  if (x >= 1024.0 * 1024 * 1024)
    snprintf(b, n, "%.2f GiB", x / (1024.0 * 1024 * 1024));
  else if (x >= 1024.0 * 1024)
    snprintf(b, n, "%.2f MiB", x / (1024.0 * 1024));
  else if (x >= 1024)
    snprintf(b, n, "%.2f KiB", x / 1024);
  else
    snprintf(b, n, "%.0f B", x);
}

static void human_line(char **vals, const char *status, const char *check,
                       const char *note) {
  /* identity words, then sizes as label=value */
  static const char *const words[] = {"bench",   "system", "model", "variant",
                                      "profile", "gemm",   "pass",  "kind",
                                      "dtype",   "mode",   NULL};
  /* a named model implies its sizes: the context and the ranks say the rest */
  const bool model = val(vals, "model") != NULL;
  static const char *const model_sizes[] = {
      "hidden", "vocab", "experts", "layers", "params", "budget", "K", NULL};
  static const char *const sizes[][2] = {
      {"seq", "S"},         {"tokens", "N"},         {"hidden", "H"},
      {"vocab", "V"},       {"experts", "E"},        {"layers", "L"},
      {"params", "params"}, {"bytes", "bytes"},      {"budget", "budget"},
      {"bucket", "bucket"}, {"slots", "slots"},      {"K", "K"},
      {"ranks", "ranks"},   {"virtual_world", "W_v"}};
  static const char *const rates[][2] = {{"tok_s_gpu", "tok/s/GPU"},
                                         {"tflops", "TFLOP/s"},
                                         {"gparam_s", "Gparam/s"},
                                         {"algbw_gbs", "GB/s"},
                                         {"busbw_gbs", "GB/s bus"}};
  char line[1024] = " ", b[64], c[160];
  for (int i = 0; words[i]; i++) {
    const char *v = val(vals, words[i]);
    if (v && strlen(line) + strlen(v) + 2 < 200)
      strcat(strcat(line, " "), v);
  }
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const char *v = val(vals, sizes[i][0]);
    bool skip = !v;
    for (int k = 0; model && !skip && model_sizes[k]; k++)
      skip = !strcmp(sizes[i][0], model_sizes[k]);
    /* N when it is not S; W_v when it is not the ranks */
    if (!skip && !strcmp(sizes[i][0], "tokens") && val(vals, "seq"))
      skip = !strcmp(v, val(vals, "seq"));
    if (!skip && !strcmp(sizes[i][0], "virtual_world") && val(vals, "ranks"))
      skip = !strcmp(v, val(vals, "ranks"));
    if (skip)
      continue;
    count_text(v, b, sizeof b);
    snprintf(c, sizeof c, " %s=%s", sizes[i][1], b);
    if (strlen(line) + strlen(c) < 240)
      strcat(line, c);
  }
  strcat(line, ":");
  const char *t = val(vals, "time_ms");
  int parts = 0;
  if (t) {
    q_text(t, b, sizeof b);
    snprintf(c, sizeof c, " %s ms", b);
    strcat(line, c), parts++;
  }
  for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
    const char *v = val(vals, rates[i][0]);
    if (!v)
      continue;
    q_text(v, b, sizeof b);
    snprintf(c, sizeof c, "%s %s %s", parts++ ? "," : "", b, rates[i][1]);
    strcat(line, c);
  }
  const char *pk = val(vals, "dev_peak_bytes");
  if (pk) {
    bytes_text(pk, b, sizeof b);
    snprintf(c, sizeof c, "%s peak %s", parts++ ? "," : "", b);
    strcat(line, c);
  }
  printf("%s  %s %s", line, status, check);
  /* the backend's note is the file line's: the header says the backend */
  char shown[1024];
  snprintf(shown, sizeof shown, "%s", note ? note : "");
  static const char cpu_note[] = "CPU backend: times are CPU times";
  char *at = strstr(shown, cpu_note);
  if (at) {
    char *end = at + sizeof cpu_note - 1;
    if (at >= shown + 2 && at[-2] == ';')
      at -= 2;
    else if (!strncmp(end, "; ", 2))
      end += 2;
    memmove(at, end, strlen(end) + 1);
  }
  if (*shown && strcmp(shown, "-")) {
    const int len = (int)strlen(shown);
    printf(": %.*s%s", len > 100 ? 97 : len, shown, len > 100 ? "..." : "");
  }
  printf("\n");
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

const char *pl_row_note_text(const pl_row *r) {
  return r->note;
}

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
    human_line(r->vals, r->status, r->check, note);
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
