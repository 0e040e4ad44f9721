/* compare_sides.c — the two sides of `plateau compare`: result files read
 * into rows, each row keyed by its configuration, and REF's rows from before
 * a key column existed matched to NEW's (compare_sides.h). */
#include "compare_sides.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compare_cmd.h"
#include "harness/options.h"
#include "report/report_util.h"
#include "results/results.h"
#include "results/schema.h"

/* ---- rows and keys
 * ------------------------------------------------------------
 */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}
static int cmp_ent(const void *a, const void *b) {
  const ent *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  if (c)
    return c;
  c = strcmp(x->t->path, y->t->path); /* files by name = time order */
  return c ? c : x->r - y->r;
}

/* The key columns of one bench: those every table of the bench, in NEW and
 * in REF, has (a column added by a later schema is left out of the key
 * rather than making every row NEW or MISSING). */
typedef struct kset {
  const char *bench;
  const char *cols[128];
  int n;
} kset;

static kset *kset_of(kset *ks, int *nks, const char *bench) {
  for (int i = 0; i < *nks; i++)
    if (strcmp(ks[i].bench, bench) == 0)
      return &ks[i];
  return NULL;
}

static void kset_add(kset *ks, int *nks, int max, const pl_table *t) {
  kset *k = kset_of(ks, nks, t->bench);
  if (!k) {
    if (*nks >= max)
      return;
    k = &ks[(*nks)++];
    k->bench = t->bench;
    k->n = 0;
    for (int c = 0; c < t->ncols && k->n < 128; c++)
      if (strcmp(t->cols[c], "bench") != 0 &&
          pl__compare_class(t->cols[c]) == PL_CMP_KEY)
        k->cols[k->n++] = t->cols[c];
    qsort(k->cols, (size_t)k->n, sizeof *k->cols, cmp_str);
    return;
  }
  int m = 0;
  for (int i = 0; i < k->n; i++)
    if (pl_table_col(t, k->cols[i]) >= 0)
      k->cols[m++] = k->cols[i];
  k->n = m;
}

/* A file whose environment chose a code path (older files selected kernels
 * by PLATEAU_ATTN_* variables, recorded as env. metadata) is another
 * configuration than the default's: those variables join the key. */
static bool env_selects(const char *key) {
  return strncmp(key, "env.PLATEAU_ATTN_", 17) == 0 ||
         strncmp(key, "env.PLATEAU_TEST_", 17) == 0;
}

static char *row_key(const pl_table *t, int r, const kset *k) {
  size_t len = strlen(t->bench) + 2;
  for (int i = 0; k && i < k->n; i++)
    len += strlen(k->cols[i]) + strlen(pl_cell(t, r, k->cols[i])) + 2;
  for (int i = 0; i < t->nmeta; i++)
    if (env_selects(t->meta_keys[i]))
      len += strlen(t->meta_keys[i]) + strlen(t->meta_vals[i]) + 2;
  char *key = malloc(len + 1);
  PL_ASSERT(key != NULL);
  strcpy(key, t->bench);
  for (int i = 0; k && i < k->n; i++) {
    const char *v = pl_cell(t, r, k->cols[i]);
    if (strcmp(v, "-") == 0 || !*v)
      continue;
    strcat(key, " ");
    strcat(key, k->cols[i]);
    strcat(key, "=");
    strcat(key, v);
  }
  for (int i = 0; i < t->nmeta; i++)
    if (env_selects(t->meta_keys[i])) {
      strcat(key, " ");
      strcat(key, t->meta_keys[i]);
      strcat(key, "=");
      strcat(key, t->meta_vals[i]);
    }
  return key;
}

static bool add_file(side *s, const char *path, bool quiet_fail) {
  pl_table *x = calloc(1, sizeof *x);
  PL_ASSERT(x != NULL);
  if (pl_table_read(path, x) != PL_OK) {
    if (!quiet_fail)
      return free(x), false;
    fprintf(stderr, "plateau compare: skipping %s: %s\n", path,
            pl_last_error());
    free(x);
    return true;
  }
  s->t = realloc(s->t, sizeof *s->t * (size_t)(s->nt + 1));
  PL_ASSERT(s->t != NULL);
  s->t[s->nt++] = x;
  return true;
}

/* Read NEW or REF: a file (must be a result file) or a directory. */
pl_status pl__cmp_side_read(const char *path, side *s) {
  struct stat st;
  if (stat(path, &st) != 0)
    return pl_set_error(PL_EIO, "%s: %s", path, strerror(errno));
  if (S_ISDIR(st.st_mode)) {
    char **v;
    int n;
    pl_results_scan(path, &v, &n);
    for (int i = 0; i < n; i++)
      add_file(s, v[i], true);
    pl_results_scan_free(v, n);
    if (!s->nt)
      return pl_set_error(PL_EIO, "%s: no result files", path);
  } else if (!add_file(s, path, false)) {
    return pl_error_prefix(PL_EIO, "%s: ", path);
  }
  return PL_OK;
}

/* The rows of a side as (key, row), sorted by key then file. */
static void side_keys(side *s, kset *ks, int nks) {
  for (int i = 0; i < s->nt; i++) {
    const kset *k = kset_of(ks, &nks, s->t[i]->bench);
    for (int r = 0; r < s->t[i]->nrows; r++) {
      s->e = realloc(s->e, sizeof *s->e * (size_t)(s->ne + 1));
      PL_ASSERT(s->e != NULL);
      s->e[s->ne++] = (ent){row_key(s->t[i], r, k), s->t[i], r, NULL};
    }
  }
  if (s->ne > 1)
    qsort(s->e, (size_t)s->ne, sizeof *s->e, cmp_ent);
}

void pl__cmp_side_free(side *s) {
  for (int i = 0; i < s->ne; i++) {
    free(s->e[i].key);
    free(s->e[i].relaxed);
  }
  for (int i = 0; i < s->nt; i++) {
    pl_table_free(s->t[i]);
    free(s->t[i]);
  }
  free(s->e);
  free(s->t);
}

static int key_tokens(const char *key, char **tok, int max) {
  int n = 0;
  const char *p = strchr(key, ' ');
  while (p && *p) {
    const char *q = strchr(p + 1, ' ');
    while (q && !memchr(q + 1, '=', strcspn(q + 1, " ")))
      q = strchr(q + 1, ' ');
    size_t len = q ? (size_t)(q - p) : strlen(p);
    if (n < max)
      tok[n++] = strndup(p, len);
    p = q;
  }
  return n;
}

/* Is every token of key a (same bench) in key b, and b longer? */
static bool key_within(const char *a, const char *b) {
  size_t ba = strcspn(a, " "), bb = strcspn(b, " ");
  if (ba != bb || strncmp(a, b, ba) != 0 || strlen(a) >= strlen(b))
    return false;
  char *ta[128], *tb[128];
  int na = key_tokens(a, ta, 128), nb = key_tokens(b, tb, 128);
  bool in = na < nb;
  for (int i = 0; i < na && in; i++) {
    bool f = false;
    for (int j = 0; j < nb && !f; j++)
      f = strcmp(ta[i], tb[j]) == 0;
    in = f;
  }
  for (int i = 0; i < na; i++)
    free(ta[i]);
  for (int j = 0; j < nb; j++)
    free(tb[j]);
  return in;
}

static bool has_key(const side *s, const char *key) {
  ent k = {(char *)key, NULL, 0, NULL};
  for (int lo = 0, hi = s->ne; lo < hi;) { /* s->e sorted by key first */
    int mid = (lo + hi) / 2, c = strcmp(s->e[mid].key, k.key);
    if (c == 0)
      return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

/* A reference row written before a key column was filled for its
 * configuration has "-" there, so its key lacks the column and no NEW row
 * matches it: the configuration would be one NEW and one MISSING row, never
 * compared.  Such a REF key is matched to the NEW key that has all its
 * columns with the same values, when that pairing is one to one (no other
 * NEW key contains it, no other REF key is contained in that NEW key); the
 * comparison says which columns it matched without. */
static void relax_keys(const side *n, side *r) {
  const char **ro = NULL, **no = NULL; /* distinct keys of one side only */
  int nro = 0, nno = 0;
  for (int i = 0; i < r->ne; i++)
    if ((i == 0 || strcmp(r->e[i].key, r->e[i - 1].key)) &&
        !has_key(n, r->e[i].key)) {
      ro = realloc(ro, sizeof *ro * (size_t)(nro + 1));
      PL_ASSERT(ro != NULL);
      ro[nro++] = r->e[i].key;
    }
  for (int j = 0; j < n->ne; j++)
    if ((j == 0 || strcmp(n->e[j].key, n->e[j - 1].key)) &&
        !has_key(r, n->e[j].key)) {
      no = realloc(no, sizeof *no * (size_t)(nno + 1));
      PL_ASSERT(no != NULL);
      no[nno++] = n->e[j].key;
    }
  int *match = malloc(sizeof *match * (size_t)(nro + 1));
  PL_ASSERT(match != NULL);
  for (int i = 0; i < nro; i++) {
    int cand = 0, back = 0;
    match[i] = -1;
    for (int j = 0; j < nno; j++)
      if (key_within(ro[i], no[j]))
        match[i] = j, cand++;
    for (int k = 0; cand == 1 && k < nro; k++)
      back += key_within(ro[k], no[match[i]]);
    if (cand != 1 || back != 1)
      match[i] = -1;
  }
  bool changed = false;
  for (int i = 0; i < nro; i++) {
    if (match[i] < 0)
      continue;
    const char *nk = no[match[i]];
    /* the columns REF lacks, for the note */
    char *tb[128], *ta[128], cols[512] = "";
    int nb = key_tokens(nk, tb, 128), na = key_tokens(ro[i], ta, 128);
    for (int q = 0; q < nb; q++) {
      bool f = false;
      for (int p = 0; p < na && !f; p++)
        f = strcmp(ta[p], tb[q]) == 0;
      size_t l = strlen(cols);
      if (!f && l < sizeof cols - 1)
        snprintf(cols + l, sizeof cols - l, "%s%.*s", l ? ", " : "",
                 (int)strcspn(tb[q] + 1, "="), tb[q] + 1);
    }
    for (int q = 0; q < nb; q++)
      free(tb[q]);
    for (int p = 0; p < na; p++)
      free(ta[p]);
    char note[640];
    snprintf(note, sizeof note,
             "REF has no value in %s: matched by the other key columns", cols);
    char *old = strdup(ro[i]);
    PL_ASSERT(old != NULL);
    for (int e = 0; e < r->ne; e++)
      if (strcmp(r->e[e].key, old) == 0) {
        free(r->e[e].key);
        r->e[e].key = strdup(nk);
        r->e[e].relaxed = strdup(note);
        PL_ASSERT(r->e[e].key && r->e[e].relaxed);
      }
    free(old);
    changed = true;
  }
  free(match);
  free(ro);
  free(no);
  if (changed && r->ne > 1)
    qsort(r->e, (size_t)r->ne, sizeof *r->e, cmp_ent);
}

/* Both sides' keys over the union of their tables' identity columns. */
void pl__cmp_key_both(side *n, side *r) {
  enum { MAXB = 64 };
  kset ks[MAXB];
  int nks = 0;
  for (int i = 0; i < n->nt; i++)
    kset_add(ks, &nks, MAXB, n->t[i]);
  for (int i = 0; i < r->nt; i++)
    kset_add(ks, &nks, MAXB, r->t[i]);
  side_keys(n, ks, nks);
  side_keys(r, ks, nks);
  relax_keys(n, r);
}

/* Walk both sorted lists of keys: a key in both compared metric by metric,
 * one only in NEW new, one only in REF missing when NEW ran its bench. */
