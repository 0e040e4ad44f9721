/* results.c — result files (see results.h for the format and guarantees).
 *
 * Why this shape: sweeps run as Slurm array tasks, several ranks or jobs may
 * append to one file, and a job can be killed at any instant.  So a file is
 * created with O_EXCL under a name no other writer can produce, every row is a
 * single write(2) of a whole line under an exclusive flock, and a writer that
 * finds the file not ending in '\n' (someone died mid-row) first closes the
 * fragment with a marker field ("\t!torn\n") so the fragment can never be
 * mistaken for a row, whatever number of fields it happened to have.  Readers
 * accept a line only when it ends in '\n', has exactly the header's number of
 * fields and no torn marker; everything else is counted in nbad. */
#include "results.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "plateau/plateau.h"
#include "schema.h"

#include "plateau_git.h" /* generated: build/gen (jobs/provenance header) */

#define TORN_MARK "!torn"

struct pl_results {
  int fd;
  int ncols;
  char *path;
  char *made; /* the shallowest directory pl_results_create made, or NULL */
};

/* ---- small helpers ------------------------------------------------------- */

static int count_fields(const char *line, size_t len) {
  int n = 1;
  for (size_t i = 0; i < len; i++)
    if (line[i] == '\t') n++;
  return n;
}

/* *made (may be NULL) gets the shallowest directory created, malloc'd. */
static pl_status mkdir_p(const char *dir, char **made) {
  char buf[4096];
  size_t len = strlen(dir);
  if (len == 0 || len >= sizeof buf)
    return pl_set_error(PL_EINVAL, "result dir '%s': empty or too long", dir);
  memcpy(buf, dir, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char c = buf[i];
      buf[i] = '\0';
      if (mkdir(buf, 0775) == 0) {
        if (made && !*made)
          *made = strdup(buf);
      } else if (errno != EEXIST) {
        return pl_set_error(PL_EIO, "mkdir %s: %s", buf, strerror(errno));
      }
      buf[i] = c;
    }
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return pl_set_error(PL_EIO, "result dir %s: not a directory", dir);
  return PL_OK;
}

pl_status pl_results_dir_check(const char *dir) {
  size_t len = dir ? strlen(dir) : 0;
  if (len == 0)
    return pl_set_error(PL_EINVAL, "empty directory name");
  if (len > PL_RESULTS_DIR_MAX)
    return pl_set_error(PL_EINVAL,
                        "too long (%zu characters; allowed: at most %d)", len,
                        PL_RESULTS_DIR_MAX);
  for (const char *c = dir; *c;) { /* each name */
    size_t n = strcspn(c, "/");
    if (n > NAME_MAX)
      return pl_set_error(PL_EINVAL,
                          "the name '%.24s...' is too long (%zu characters; "
                          "allowed: at most %d)",
                          c, n, NAME_MAX);
    c += n;
    while (*c == '/')
      c++;
  }
  /* The existing prefix must be directories; the rest is made by mkdir_p
   * inside the deepest existing one. */
  char buf[PL_RESULTS_DIR_MAX + 1], parent[PL_RESULTS_DIR_MAX + 1] = ".";
  memcpy(buf, dir, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != '\0')
      continue;
    char c = buf[i];
    buf[i] = '\0';
    struct stat st;
    if (stat(buf, &st) != 0) {
      if (errno != ENOENT)
        return pl_set_error(PL_EINVAL, "cannot use '%s' (%s)", buf,
                            strerror(errno));
      break;
    }
    if (!S_ISDIR(st.st_mode))
      return pl_set_error(PL_EINVAL, "'%s' exists and is not a directory", buf);
    snprintf(parent, sizeof parent, "%s", buf);
    buf[i] = c;
  }
  if (dir[0] == '/' && strcmp(parent, ".") == 0)
    snprintf(parent, sizeof parent, "/");
  char probe[PL_RESULTS_DIR_MAX + 64];
  snprintf(probe, sizeof probe, "%s/.plateau-probe-XXXXXX", parent);
  if (!mkdtemp(probe))
    return pl_set_error(PL_EINVAL, "cannot create a directory in '%s' (%s)",
                        parent, strerror(errno));
  rmdir(probe);
  return PL_OK;
}

/* Write all of buf (a regular file normally takes it in one call; loop for
 * the partial-write case, still under the caller's lock). */
static pl_status write_all(int fd, const char *buf, size_t len,
                           const char *path) {
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return pl_set_error(PL_EIO, "write %s: %s", path, strerror(errno));
    }
    buf += w;
    len -= (size_t)w;
  }
  return PL_OK;
}

/* Growable string. */
typedef struct sbuf {
  char *p;
  size_t len, cap;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    PL_ASSERT(p != NULL);
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}
static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

/* Metadata values live on one "# key: value" line: newlines and tabs become
 * spaces. */
static void sb_put_clean(sbuf *b, const char *s) {
  for (; *s; s++) {
    char c = (*s == '\n' || *s == '\r' || *s == '\t') ? ' ' : *s;
    sb_putn(b, &c, 1);
  }
}

/* Lock, terminate a torn fragment if the file does not end in '\n', write
 * `buf` in one call, unlock. */
static pl_status locked_append(int fd, const char *path, const char *buf,
                               size_t len) {
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR)
      return pl_set_error(PL_EIO, "flock %s: %s", path, strerror(errno));
  }
  pl_status st = PL_OK;
  struct stat sst;
  if (fstat(fd, &sst) != 0) {
    st = pl_set_error(PL_EIO, "fstat %s: %s", path, strerror(errno));
  } else if (sst.st_size > 0) {
    char last = '\n';
    ssize_t r = pread(fd, &last, 1, sst.st_size - 1);
    if (r != 1) {
      st = pl_set_error(PL_EIO, "read %s: %s", path,
                        r < 0 ? strerror(errno) : "short read");
    } else if (last != '\n') {
      static const char mark[] = "\t" TORN_MARK "\n";
      st = write_all(fd, mark, sizeof mark - 1, path);
    }
  }
  if (st == PL_OK) st = write_all(fd, buf, len, path);
  flock(fd, LOCK_UN);
  return st;
}

/* ---- writing ------------------------------------------------------------- */

pl_status pl_results_create(const char *dir, const char *stem,
                            const char *columns, const char *const *meta_kv,
                            pl_results **out) {
  *out = NULL;
  if (!dir || !stem || !columns || !*stem || !*columns)
    return pl_set_error(PL_EINVAL, "pl_results_create: dir, stem and columns "
                                   "must be non-empty");
  if (strchr(stem, '/'))
    return pl_set_error(PL_EINVAL, "result stem '%s': must not contain '/'",
                        stem);
  if (strchr(columns, '\n'))
    return pl_set_error(PL_EINVAL, "result columns must be one line");
  char *made = NULL;
  pl_status mst = mkdir_p(dir, &made);
  if (mst != PL_OK) {
    free(made);
    return mst;
  }

  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  for (char *c = host; *c; c++)
    if (*c == '/' || *c == '.' || *c == ' ') *c = '_';
  char stamp[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);

  size_t plen = strlen(dir) + strlen(stem) + strlen(host) + 96;
  char *path = malloc(plen);
  PL_ASSERT(path != NULL);
  int fd = -1;
  for (int n = 0; n < 100000; n++) {
    snprintf(path, plen, "%s/%s.%s.%s.%ld.%d.tsv", dir, stem, stamp, host,
             (long)getpid(), n);
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0664);
    if (fd >= 0) break;
    if (errno != EEXIST) {
      pl_status st = pl_set_error(PL_EIO, "create %s: %s", path,
                                  strerror(errno));
      free(path);
      free(made);
      return st;
    }
  }
  if (fd < 0) {
    free(path);
    free(made);
    return pl_set_error(PL_EIO, "no free result file name in %s", dir);
  }

  sbuf b = {0};
  char line[64];
  snprintf(line, sizeof line, "# plateau-results: %d\n", PL_RESULTS_SCHEMA);
  sb_puts(&b, line);
  for (int i = 0; meta_kv && meta_kv[i] && meta_kv[i + 1]; i += 2) {
    sb_puts(&b, "# ");
    sb_put_clean(&b, meta_kv[i]);
    sb_puts(&b, ": ");
    sb_put_clean(&b, meta_kv[i + 1]);
    sb_puts(&b, "\n");
  }
  sb_puts(&b, columns);
  sb_puts(&b, "\n");
  pl_status st = locked_append(fd, path, b.p, b.len);
  free(b.p);
  if (st != PL_OK) {
    close(fd);
    free(path);
    free(made);
    return st;
  }
  pl_results *r = calloc(1, sizeof *r);
  PL_ASSERT(r != NULL);
  r->fd = fd;
  r->path = path;
  r->made = made;
  r->ncols = count_fields(columns, strlen(columns));
  *out = r;
  return PL_OK;
}

/* The header line of an existing file (first line not starting with '#'). */
static FILE *open_regular(const char *path, pl_status *st);

static pl_status read_header(const char *path, char **header) {
  pl_status ost;
  FILE *f = open_regular(path, &ost);
  if (!f) return ost;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  pl_status st = pl_set_error(PL_EINVAL, "%s: no header line", path);
  while ((n = getline(&line, &cap, f)) > 0) {
    if (line[0] == '#') continue;
    if (line[n - 1] != '\n') break;
    line[n - 1] = '\0';
    *header = line;
    line = NULL;
    st = PL_OK;
    pl_clear_error();
    break;
  }
  free(line);
  fclose(f);
  return st;
}

pl_status pl_results_open_append(const char *path, const char *columns,
                                 pl_results **out) {
  *out = NULL;
  char *header = NULL;
  PL_TRY(read_header(path, &header));
  if (strcmp(header, columns) != 0) {
    pl_status st = pl_set_error(PL_EINVAL,
                                "%s: header '%s' differs from columns '%s'",
                                path, header, columns);
    free(header);
    return st;
  }
  free(header);
  int fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0) return pl_set_error(PL_EIO, "open %s: %s", path, strerror(errno));
  pl_results *r = calloc(1, sizeof *r);
  PL_ASSERT(r != NULL);
  r->fd = fd;
  r->path = strdup(path);
  r->ncols = count_fields(columns, strlen(columns));
  *out = r;
  return PL_OK;
}

pl_status pl_results_append(pl_results *r, const char *line) {
  if (!r || !line) return pl_set_error(PL_EINVAL, "pl_results_append: NULL");
  size_t len = strlen(line);
  if (memchr(line, '\n', len) || line[0] == '#')
    return pl_set_error(PL_EINVAL, "%s: a row must be one line not starting "
                        "with '#'", r->path);
  int nf = count_fields(line, len);
  if (nf != r->ncols)
    return pl_set_error(PL_EINVAL, "%s: row has %d fields, header has %d",
                        r->path, nf, r->ncols);
  char *buf = malloc(len + 2);
  PL_ASSERT(buf != NULL);
  memcpy(buf, line, len);
  buf[len] = '\n';
  pl_status st = locked_append(r->fd, r->path, buf, len + 1);
  free(buf);
  return st;
}

pl_status pl_results_close(pl_results *r, const char *end_status) {
  if (!r) return PL_OK;
  char stamp[32], line[128];
  pl_utc_stamp(stamp, sizeof stamp);
  snprintf(line, sizeof line, "# end: %s %s\n",
           end_status && *end_status ? end_status : "ok", stamp);
  pl_status st = locked_append(r->fd, r->path, line, strlen(line));
  if (close(r->fd) != 0 && st == PL_OK)
    st = pl_set_error(PL_EIO, "close %s: %s", r->path, strerror(errno));
  free(r->path);
  free(r->made);
  free(r);
  return st;
}

void pl_results_discard(pl_results *r) {
  if (!r)
    return;
  close(r->fd);
  unlink(r->path);
  /* the directories made for it, deepest first, while empty */
  char *dir = strdup(r->path);
  PL_ASSERT(dir != NULL);
  for (char *slash = strrchr(dir, '/'); r->made && slash;
       slash = strrchr(dir, '/')) {
    *slash = '\0';
    if (strlen(dir) < strlen(r->made) || rmdir(dir) != 0)
      break;
  }
  free(dir);
  free(r->path);
  free(r->made);
  free(r);
}

const char *pl_results_path(const pl_results *r) { return r ? r->path : NULL; }

/* ---- reading ------------------------------------------------------------- */

static char **split_tabs(const char *s, size_t len, int *n) {
  int nf = count_fields(s, len);
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
  for (int i = 0; i < n; i++) free(f[i]);
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
  memmove(t->cols + c, t->cols + c + 1, sizeof(char *) * (size_t)(t->ncols - c - 1));
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
  if (!p) return NULL;
  p += strlen(key);
  return strndup(p, strcspn(p, ",;"));
}

/* A derived column (before `status`) from each row's note. */
static void derive(pl_table *t, const char *name,
                   char *(*from_note)(const pl_table *t, char **row)) {
  if (pl_table_col(t, name) >= 0) return;
  char **vals = calloc((size_t)t->nrows + 1, sizeof *vals);
  PL_ASSERT(vals != NULL);
  for (int r = 0; r < t->nrows; r++) vals[r] = from_note(t, t->rows[r]);
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
  char *f = note_after(note, "fwd kernel "), *b = note_after(note, "bwd kernel ");
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
        if (end == s || *end) continue; /* "-", "nan" stay */
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
      if (strchr(v, '/') || strcmp(v, "-") == 0) continue;
      PL_ASSERT(asprintf(&t->rows[r][c], "%s/auto", v) >= 0);
      free(v);
    }
  }
  if (strcmp(t->bench, "adam") == 0) derive(t, "cpu_share", adam_cpu_share);
  if (pl_table_col(t, "bench") < 0) {
    char **vals = calloc((size_t)t->nrows + 1, sizeof *vals);
    PL_ASSERT(vals != NULL);
    for (int r = 0; r < t->nrows; r++) vals[r] = strdup(t->bench);
    insert_col(t, 0, "bench", vals);
    free(vals);
  }
}

/* Open path for reading only if it is a regular file: opened without
 * blocking (a FIFO named *.tsv would wait for a writer forever), checked,
 * then read normally. */
static FILE *open_regular(const char *path, pl_status *st) {
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
  FILE *f = open_regular(path, &ost);
  if (!f) return ost;
  out->path = strdup(path);
  char vraw[64] = "";
  char *line = NULL;
  size_t cap = 0, rows_cap = 0, meta_cap = 0;
  ssize_t n;
  bool have_schema = false;
  while ((n = getline(&line, &cap, f)) > 0) {
    if (line[n - 1] != '\n') { /* torn last line: no newline yet */
      out->nbad++;
      break;
    }
    size_t len = (size_t)n - 1;
    line[len] = '\0';
    if (len == 0) continue;
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
          out->meta_keys[out->nmeta] = strndup(line + 2, (size_t)(colon - line - 2));
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
      if (strcmp(fields[i], TORN_MARK) == 0) ok = false;
    if (!ok) {
      free_fields(fields, nf);
      out->nbad++;
      continue;
    }
    if (out->nrows == (int)rows_cap) {
      rows_cap = rows_cap ? 2 * rows_cap : 64;
      out->rows = realloc(out->rows, rows_cap * sizeof(char **));
      PL_ASSERT(out->rows != NULL);
    }
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
  if (out->version == 1) v1_to_v2(out);
  return PL_OK;
}

void pl_table_free(pl_table *t) {
  if (!t) return;
  free(t->path);
  free(t->bench);
  if (t->cols) free_fields(t->cols, t->ncols);
  for (int i = 0; i < t->nrows; i++) free_fields(t->rows[i], t->ncols);
  free(t->rows);
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
    if (strcmp(t->cols[i], name) == 0) return i;
  return -1;
}

const char *pl_table_meta(const pl_table *t, const char *key) {
  for (int i = t->nmeta - 1; i >= 0; i--) /* last one wins */
    if (strcmp(t->meta_keys[i], key) == 0) return t->meta_vals[i];
  return NULL;
}

/* ---- metadata ------------------------------------------------------------ */

extern char **environ;

#define META_MAX 128
static char meta_store[META_MAX][512];
static const char *meta_kv[2 * META_MAX + 1];

/* The environment variables a result file records: only those that change
 * what this program measures, by exact name, never a prefix (a prefix
 * would record PLATEAU_API_TOKEN or NCCL_IB_..._PASSWORD verbatim):
 * the PLATEAU_* variables the program reads, the NCCL_* tuning variables
 * NCCL reads for our communicators (they change collective times), Slurm's
 * ids, and the device and thread counts. */
static const char *const env_recorded[] = {"PLATEAU_COMM_TIMEOUT",
                                           "PLATEAU_LOG",
                                           "PLATEAU_SIMD",
                                           "PLATEAU_NCCL_CTA_POLICY",
                                           "PLATEAU_NCCL_MAX_CTAS",
                                           "PLATEAU_CALIB_INJECT_FAULT",
                                           "NCCL_ALGO",
                                           "NCCL_PROTO",
                                           "NCCL_NVLS_ENABLE",
                                           "NCCL_P2P_LEVEL",
                                           "NCCL_P2P_DISABLE",
                                           "NCCL_SHM_DISABLE",
                                           "NCCL_IB_DISABLE",
                                           "NCCL_NET",
                                           "NCCL_SOCKET_IFNAME",
                                           "NCCL_IB_HCA",
                                           "NCCL_MIN_NCHANNELS",
                                           "NCCL_MAX_NCHANNELS",
                                           "NCCL_BUFFSIZE",
                                           "NCCL_NTHREADS",
                                           "NCCL_CUMEM_ENABLE",
                                           "NCCL_DEBUG",
                                           "SLURM_JOB_ID",
                                           "SLURM_ARRAY_JOB_ID",
                                           "SLURM_ARRAY_TASK_ID",
                                           "SLURM_STEP_ID",
                                           "SLURM_NTASKS",
                                           "SLURM_JOB_NODELIST",
                                           "SLURM_JOB_PARTITION",
                                           "CUDA_VISIBLE_DEVICES",
                                           "OMP_NUM_THREADS",
                                           "OPENBLAS_NUM_THREADS",
                                           NULL};

bool pl__env_secret_like(const char *name, size_t len) {
  static const char *const words[] = {
      "TOKEN",      "PASSWORD", "PASSWD",  "SECRET", "KEY",
      "CREDENTIAL", "AUTH",     "PRIVATE", "COOKIE", NULL};
  char up[128];
  if (len >= sizeof up)
    return true; /* too long to judge: say nothing */
  for (size_t i = 0; i < len; i++)
    up[i] = (char)toupper((unsigned char)name[i]);
  up[len] = '\0';
  for (int i = 0; words[i]; i++)
    if (strstr(up, words[i]))
      return true;
  return false;
}

const char *pl__env_recorded(const char *name, size_t len, const char *value) {
  for (int i = 0; env_recorded[i]; i++)
    if (strlen(env_recorded[i]) == len &&
        strncmp(env_recorded[i], name, len) == 0)
      return pl__env_secret_like(name, len) ? "<redacted>" : value;
  return NULL;
}

/* argv as one line a shell reads back into the same words: plain words as
 * they are, others in single quotes ('\'' for a quote), and words with a
 * control character (a tab, a newline: a metadata line holds none) in
 * bash's $'...' with escapes.  malloc'd. */
char *pl__shell_quote_argv(int argc, char **argv) {
  sbuf b = {0};
  sb_puts(&b, "");
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i] ? argv[i] : "";
    bool plain = *a != '\0', ctrl = false;
    for (const char *c = a; *c; c++) {
      unsigned char u = (unsigned char)*c;
      if (u < 0x20 || u == 0x7f)
        ctrl = true;
      if (!(strchr("-_=.,:/+@%", *c) || isalnum(u)))
        plain = false;
    }
    if (i)
      sb_puts(&b, " ");
    if (plain) {
      sb_puts(&b, a);
    } else if (!ctrl) {
      sb_puts(&b, "'");
      for (const char *c = a; *c; c++)
        sb_puts(&b, *c == '\'' ? "'\\''" : (char[]){*c, '\0'});
      sb_puts(&b, "'");
    } else {
      sb_puts(&b, "$'");
      for (const char *c = a; *c; c++) {
        unsigned char u = (unsigned char)*c;
        char e[8];
        if (*c == '\t')
          sb_puts(&b, "\\t");
        else if (*c == '\n')
          sb_puts(&b, "\\n");
        else if (*c == '\r')
          sb_puts(&b, "\\r");
        else if (*c == '\\' || *c == '\'')
          sb_puts(&b, *c == '\\' ? "\\\\" : "\\'");
        else if (u < 0x20 || u == 0x7f) {
          snprintf(e, sizeof e, "\\x%02x", u);
          sb_puts(&b, e);
        } else
          sb_putn(&b, c, 1);
      }
      sb_puts(&b, "'");
    }
  }
  return b.p;
}

const char *const *pl_results_meta(struct pl_dev *dev, struct pl_comm *comm,
                                   const char *bench, int argc, char **argv) {
  int nkv = 0, nstore = 0;
#define PUT(k, ...)                                                            \
  do {                                                                         \
    if (nkv / 2 < META_MAX - 1 && nstore < META_MAX) {                         \
      snprintf(meta_store[nstore], sizeof meta_store[nstore], __VA_ARGS__);    \
      meta_kv[nkv++] = (k);                                                    \
      meta_kv[nkv++] = meta_store[nstore++];                                   \
    }                                                                          \
  } while (0)

  PUT("bench", "%s", bench ? bench : "-");
  PUT("plateau_version", "%s", PLATEAU_VERSION);
  /* of the tree this binary was compiled from (jobs/provenance header):
   * dirty -1 = built without a git repository; tree_hash identifies the
   * sources either way (jobs/provenance verify FILE) */
  PUT("git_sha", "%s", PL_GIT_SHA);
  if (PL_GIT_DIRTY < 0)
    PUT("git_dirty", "%s", "-");
  else
    PUT("git_dirty", "%d", PL_GIT_DIRTY);
  PUT("tree_hash", "%s", PL_TREE_HASH);
  pl_dev_info info;
  memset(&info, 0, sizeof info);
  if (dev && pl_dev_info_get(dev, &info) == PL_OK) {
    PUT("backend", "%s", pl_backend_name(info.backend));
    PUT("device", "%s", info.name);
    PUT("device_ordinal", "%d", info.ordinal);
    PUT("device_memory_bytes", "%zu", info.total_bytes);
    PUT("device_units", "%d", info.sm_count);
    PUT("driver", "%s", info.driver);
    PUT("cuda_runtime", "%s", info.runtime);
    PUT("blas", "%s", info.blas);
  } else {
    PUT("backend", "%s", "-");
    PUT("device", "%s", "-");
  }
  PUT("nccl", "%s", pl_nccl_version());
  PUT("mpi", "%s", pl_mpi_version());
  PUT("ranks", "%d", comm ? pl_comm_size(comm) : pl_world_size());
  char host[256] = "-";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  PUT("hostname", "%s", host);
  const char *jid = getenv("SLURM_JOB_ID");
  const char *ajid = getenv("SLURM_ARRAY_JOB_ID");
  const char *atid = getenv("SLURM_ARRAY_TASK_ID");
  PUT("slurm_job_id", "%s", jid ? jid : "-");
  PUT("slurm_array_job_id", "%s", ajid ? ajid : "-");
  PUT("slurm_array_task_id", "%s", atid ? atid : "-");
  char stamp[32];
  pl_utc_stamp(stamp, sizeof stamp);
  PUT("start_utc", "%s", stamp);

  /* argv, whole and quoted so that the line can be pasted back into a
   * shell (the previous call's copy is freed here). */
  static char *argv_line;
  free(argv_line);
  argv_line = pl__shell_quote_argv(argc, argv);
  if (nkv / 2 < META_MAX - 1) {
    meta_kv[nkv++] = "argv";
    meta_kv[nkv++] = argv_line;
  }

  /* The recorded environment (env_recorded; secret-looking names
   * redacted), one key per variable: env.NAME */
  static char env_keys[META_MAX][80];
  int nenv = 0;
  for (char **e = environ; e && *e && nenv < 48; e++) {
    const char *eq = strchr(*e, '=');
    if (!eq)
      continue;
    size_t len = (size_t)(eq - *e);
    const char *v = len <= 70 ? pl__env_recorded(*e, len, eq + 1) : NULL;
    if (!v)
      continue;
    snprintf(env_keys[nenv], sizeof env_keys[nenv], "env.%.*s", (int)len, *e);
    PUT(env_keys[nenv], "%s", v);
    nenv++;
  }
#undef PUT
  meta_kv[nkv] = NULL;
  return meta_kv;
}
