/* compare_cmd.c — `plateau compare NEW REF`: regression test of a run against
 * a reference (the model: ReFrame's reference values with per-variable
 * tolerances), see compare_cmd.h for the rules; the column classes and the
 * tolerance specs are compare_rules.c.
 *
 *   plateau compare NEW REF [--tol [BENCH:]METRIC|KIND=VALUE]... [--tol-file F]
 *                   [--noise on|off] [--strict] [--allow-missing] [--brief]
 *                   [--format text|md|tsv]
 *
 * NEW and REF are result files or run directories (every *.tsv in it and its
 * direct subdirectories except report/, as `plateau report` reads them; v1
 * files mapped to the current names).  Output: per matched configuration
 * the metrics (ref, new, new/ref, tolerance, PASS / FAIL / SKIP / NO VALUE),
 * rows only in NEW (NEW) and rows only in REF of a bench NEW ran (MISSING),
 * then one summary line.  Benches NEW did not run at all are not listed (a
 * regression set is usually a subset of the reference). */
#include "compare_cmd.h"
#include "compare_sides.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/options.h"
#include "plateau/plateau.h"
#include "report/report_util.h"
#include "results/results.h"
#include "results/schema.h"

/* Time and memory are better lower; rate and capacity higher. */
static bool lower_better(pl_cmp_class c) {
  return c == PL_CMP_TIME || c == PL_CMP_MEMORY;
}

/* ---- a metric over the rows of one key
 * ----------------------------------------
 */
typedef struct val {
  double v, lo, hi; /* median over the rows; the spread (NAN: none) */
  int n;
  bool own; /* the spread is the metric's own percentiles (time_ms) */
} val;

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The metric `col` over rows e[0..n): the median of its values and, for a
 * time or a rate, the spread [lo, hi]: time_ms's own p10/p90; any other
 * time of the row (a part of the timed unit: attention_ms, zero3_ms, ...,
 * which has no percentiles of its own) a band as wide as time_ms's p10-p90
 * centred on its value (the step's jitter lands in whichever part runs
 * when it strikes, so a part moves by as much as the step does: a
 * sub-millisecond part can double); a rate of the timed unit the inverse
 * of time_ms's; repeated rows widen it to all of them. */
static val metric(const ent *e, int n, const char *col, pl_cmp_class c) {
  val out = {NAN, NAN, NAN, 0, false};
  double *x = malloc(sizeof *x * (size_t)(n > 0 ? n : 1));
  PL_ASSERT(x != NULL);
  for (int i = 0; i < n; i++) {
    double v = pl_cell_num(e[i].t, e[i].r, col);
    if (!isfinite(v))
      continue;
    x[out.n++] = v;
    double lo = v, hi = v;
    double med = pl_cell_num(e[i].t, e[i].r, "time_ms"),
           p10 = pl_cell_num(e[i].t, e[i].r, "time_p10_ms"),
           p90 = pl_cell_num(e[i].t, e[i].r, "time_p90_ms");
    if (!isnan(med) && med > 0 && !isnan(p10) && !isnan(p90) && p10 > 0) {
      if (c == PL_CMP_TIME && strcmp(col, "time_ms") == 0)
        lo = p10, hi = p90, out.own = true;
      else if (c == PL_CMP_TIME) /* a part of the timed unit */
        lo = fmax(0, v - (p90 - p10) / 2), hi = v + (p90 - p10) / 2;
      else if (c == PL_CMP_RATE) /* a rate of the timed unit: work / time */
        lo = v * med / p90, hi = v * med / p10;
    }
    if (c == PL_CMP_TIME || c == PL_CMP_RATE) {
      out.lo = isnan(out.lo) || lo < out.lo ? lo : out.lo;
      out.hi = isnan(out.hi) || hi > out.hi ? hi : out.hi;
    }
  }
  if (out.n) {
    qsort(x, (size_t)out.n, sizeof *x, cmp_dbl);
    out.v = out.n % 2 ? x[out.n / 2] : 0.5 * (x[out.n / 2 - 1] + x[out.n / 2]);
    if (out.lo == out.hi) /* one point, no spread */
      out.lo = out.hi = NAN;
  }
  free(x);
  return out;
}

/* ---- output
 * -------------------------------------------------------------------
 */
typedef enum fmt { F_TEXT, F_MD, F_TSV } fmt;

typedef struct out {
  fmt f;
  bool brief, allow_missing;
  /* novalue: metrics with a value on one side only that did not fail */
  int pass, noise, fail, nnew, missing, skipped, novalue, keys;
} out;

static void label(char *buf, size_t n, const char *key) {
  const char *sp = strchr(key, ' ');
  snprintf(buf, n, "%s", sp ? sp + 1 : "(no key columns)");
}

static void group_head(out *o, const char *key) {
  if (o->f != F_TEXT)
    return;
  char b[1024];
  label(b, sizeof b, key);
  size_t bl = strcspn(key, " ");
  printf("== %.*s  %s\n", (int)bl, key, b);
}

static void line(out *o, const char *key, const char *metric, const char *ref,
                 const char *new, const char *ratio, const char *tolb,
                 const char *result, const char *note) {
  char b[1024];
  size_t bl = strcspn(key, " ");
  label(b, sizeof b, key);
  switch (o->f) {
  case F_TEXT:
    printf("   %-20s %14s %14s %8s %8s  %-8s%s%s\n", metric, ref, new, ratio,
           tolb, result, note[0] ? " " : "", note);
    break;
  case F_MD:
    printf("| %.*s | ", (int)bl, key);
    pl_rep_md_text(stdout, b);
    printf(" | %s | %s | %s | %s | %s | %s | ", metric, ref, new, ratio, tolb,
           result);
    pl_rep_md_text(stdout, note);
    printf(" |\n");
    break;
  case F_TSV:
    printf("%.*s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", (int)bl, key, b, metric,
           ref, new, ratio, tolb, result, note);
    break;
  }
}

static const char *num(char *b, size_t n, double v) {
  if (isnan(v))
    snprintf(b, n, "-");
  else
    snprintf(b, n, "%.6g", v);
  return b;
}

/* A metric of kind k beyond its tolerance (ref r, new n): is it within the
 * noise?  With noise on, yes when the spreads overlap or, for a time
 * without percentiles of its own (a part of the step, or a run of one
 * iteration), when it differs by less than floor_ms (below what the clock
 * and the scheduler resolve).  note gets why, either way ("" when nothing
 * is known of the spread). */
static bool within_noise(val r, val n, pl_cmp_class k, bool noise,
                         double floor_ms, char *note, size_t nn) {
  bool overlap = false;
  if (!isnan(r.lo) && !isnan(n.lo))
    overlap = lower_better(k) ? n.lo <= r.hi : n.hi >= r.lo;
  const bool tiny =
      k == PL_CMP_TIME && !(r.own && n.own) && fabs(n.v - r.v) < floor_ms;
  note[0] = '\0';
  if (overlap && noise)
    snprintf(note, nn,
             "within the noise: spread ref [%.4g, %.4g], new [%.4g, %.4g]",
             r.lo, r.hi, n.lo, n.hi);
  else if (tiny && noise)
    snprintf(note, nn, "within the noise: %+.3g ms, under the %g ms floor",
             n.v - r.v, floor_ms);
  else if (overlap || tiny)
    snprintf(note, nn, "%s (--noise off)",
             overlap ? "spreads overlap" : "under the time floor");
  else if (!isnan(r.lo) && !isnan(n.lo))
    snprintf(note, nn, "beyond the spread: ref [%.4g, %.4g], new [%.4g, %.4g]",
             r.lo, r.hi, n.lo, n.hi);
  return noise && (overlap || tiny);
}

/* What a side's latest row holds instead of a number in column col: "no
 * column", or its cell ("-", "nan", "inf", text). */
static void no_value(char *b, size_t n, const ent *e, int ne, const char *col) {
  const ent *l = &e[ne - 1];
  if (pl_table_col(l->t, col) < 0)
    snprintf(b, n, "no column");
  else
    snprintf(b, n, "%s", pl_cell(l->t, l->r, col));
}

/* A metric with a value on one side only (ra or nb_ the side without one,
 * NULL the side with it): a visible row, counted.  NEW without a value
 * fails (a bench that stopped filling a metric, a timer that returned NaN)
 * unless --allow-missing; REF without one (a metric the reference predates)
 * is not compared.  A skipped metric stays skipped. */
static void one_sided(out *o, const char *key, const char *col, double tol,
                      const ent *ra, int na, const ent *nb_, int nb, val r,
                      val n, bool *shown) {
  char rb[32], nbuf[32], note[160];
  const pl_cmp_class k = pl__compare_class(col);
  const bool bytes = k == PL_CMP_MEMORY || k == PL_CMP_CAPACITY;
  if (ra)
    no_value(rb, sizeof rb, ra, na, col);
  else if (bytes) /* exact integers */
    snprintf(rb, sizeof rb, "%.0f", r.v);
  else
    num(rb, sizeof rb, r.v);
  if (nb_)
    no_value(nbuf, sizeof nbuf, nb_, nb, col);
  else if (bytes)
    snprintf(nbuf, sizeof nbuf, "%.0f", n.v);
  else
    num(nbuf, sizeof nbuf, n.v);
  const char *res;
  if (tol < 0) {
    res = "SKIP";
    snprintf(note, sizeof note, "%s has no value", nb_ ? "NEW" : "REF");
    o->skipped++;
  } else if (nb_ && !o->allow_missing) {
    res = "FAIL";
    snprintf(note, sizeof note,
             "NEW has no value: not compared (--allow-missing accepts it)");
    o->fail++;
  } else {
    res = "NO VALUE";
    snprintf(note, sizeof note, "%s has no value: not compared%s",
             nb_ ? "NEW" : "REF", nb_ ? " (--allow-missing)" : "");
    o->novalue++;
  }
  if (o->brief && tol < 0)
    return;
  if (!*shown)
    group_head(o, key);
  *shown = true;
  line(o, key, col, rb, nbuf, "-", tol < 0 ? "skip" : "-", res, note);
}

/* Compare the rows of one key: a[0..na) of REF, b[0..nb) of NEW; a metric
 * beyond its tolerance fails unless within_noise. */
/* Every column of either side's rows of one key, REF's first, once each:
 * the metrics compare_key walks.  Returns how many (at most max). */
static int columns_of(const ent *a, int na, const ent *b, int nb,
                      const char **cols, int max) {
  int ncols = 0;
  for (int s = 0; s < na + nb; s++) {
    const pl_table *t = s < na ? a[s].t : b[s - na].t;
    for (int c = 0; c < t->ncols && ncols < max; c++) {
      int j = 0;
      while (j < ncols && strcmp(cols[j], t->cols[c]) != 0)
        j++;
      if (j == ncols)
        cols[ncols++] = t->cols[c];
    }
  }
  return ncols;
}

static void compare_key(out *o, const pl__compare_tols *ts, bool noise,
                        double floor_ms, const ent *a, int na, const ent *b,
                        int nb) {
  const char *key = a->key, *bench = a->t->bench;
  bool shown = false;
#define HEAD()                                                                 \
  do {                                                                         \
    if (!shown)                                                                \
      group_head(o, key);                                                      \
    shown = true;                                                              \
  } while (0)
  o->keys++;
  const ent *la = &a[na - 1], *lb = &b[nb - 1]; /* the latest row of each */
  const char *sa = pl_cell(la->t, la->r, "status"),
             *sb = pl_cell(lb->t, lb->r, "status");
  const char *ca = pl_cell(la->t, la->r, "check"),
             *cb = pl_cell(lb->t, lb->r, "check");
  if (strcmp(sa, "ok") == 0 && strcmp(sb, "ok") != 0) {
    HEAD();
    line(o, key, "status", sa, sb, "-", "-", "FAIL",
         pl_cell(lb->t, lb->r, "note"));
    o->fail++;
    return;
  }
  if (strcmp(sa, "ok") != 0) { /* nothing measured in the reference */
    if (!o->brief) {
      HEAD();
      line(o, key, "status", sa, sb, "-", "-",
           strcmp(sb, "ok") == 0 ? "PASS" : "PASS",
           "the reference row was not ok: no metric to compare");
    }
    o->pass++;
    return;
  }
  if (strcmp(ca, "pass") == 0 && strcmp(cb, "fail") == 0) {
    HEAD();
    line(o, key, "check", ca, cb, "-", "-", "FAIL",
         pl_cell(lb->t, lb->r, "note"));
    o->fail++;
  }
  if (a->relaxed) {
    HEAD();
    line(o, key, "key", "-", "-", "-", "-", "MATCHED", a->relaxed);
  }
  const char *cols[512];
  const int ncols = columns_of(a, na, b, nb, cols, 512);
  for (int c = 0; c < ncols; c++) {
    const char *col = cols[c];
    pl_cmp_class k = pl__compare_class(col);
    if (k != PL_CMP_TIME && k != PL_CMP_RATE && k != PL_CMP_MEMORY &&
        k != PL_CMP_CAPACITY)
      continue;
    double t = pl__compare_tol_of(ts, bench, col, k);
    val r = metric(a, na, col, k), n = metric(b, nb, col, k);
    if (!r.n && !n.n) /* neither side measures it in this configuration */
      continue;
    char rb[32], nbuf[32], qb[32], tb[32], note[160] = "";
    if (!r.n || !n.n) { /* a value on one side only: never a silent PASS */
      one_sided(o, key, col, t, r.n ? NULL : a, na, n.n ? NULL : b, nb, r, n,
                &shown);
      continue;
    }
    const bool bytes = k == PL_CMP_MEMORY || k == PL_CMP_CAPACITY;
    if (bytes) { /* exact integers */
      snprintf(rb, sizeof rb, "%.0f", r.v);
      snprintf(nbuf, sizeof nbuf, "%.0f", n.v);
    } else {
      num(rb, sizeof rb, r.v);
      num(nbuf, sizeof nbuf, n.v);
    }
    if (r.v != 0)
      snprintf(qb, sizeof qb, "%.3f", n.v / r.v);
    else
      snprintf(qb, sizeof qb, n.v == 0 ? "1.000" : "inf");
    if (t < 0) {
      snprintf(tb, sizeof tb, "skip");
      o->skipped++;
      if (!o->brief) {
        HEAD();
        line(o, key, col, rb, nbuf, qb, tb, "SKIP", "");
      }
      continue;
    }
    if (t == 0)
      snprintf(tb, sizeof tb, "exact");
    else
      snprintf(tb, sizeof tb, "%s%g%%", lower_better(k) ? "+" : "-", 100.0 * t);
    bool worse =
        lower_better(k) ? n.v > r.v * (1.0 + t) + 0.0 : n.v < r.v * (1.0 - t);
    const char *res = "PASS";
    if (worse) {
      if (within_noise(r, n, k, noise, floor_ms, note, sizeof note)) {
        o->noise++;
        o->pass++;
      } else {
        res = "FAIL";
        if (!note[0] && bytes)
          snprintf(note, sizeof note, "%+.0f", n.v - r.v);
        o->fail++;
      }
    } else {
      bool better =
          lower_better(k) ? n.v < r.v * (1.0 - t) - 0.0 : n.v > r.v * (1.0 + t);
      if (better)
        snprintf(note, sizeof note, "better");
      o->pass++;
    }
    if (!o->brief || strcmp(res, "PASS") != 0 || note[0] == 'w') {
      HEAD();
      line(o, key, col, rb, nbuf, qb, tb, res, note);
    }
  }
#undef HEAD
}

/* ---- the command
 * ---------------------------------------------------------------
 */
static void usage(FILE *f) {
  fprintf(
      f,
      "usage: plateau compare NEW REF [options]\n"
      "  Compare the result rows of NEW (a run directory or result file) with "
      "REF's,\n"
      "  matched by configuration (bench, variant, ranks, dtype, shape ...), "
      "metric by\n"
      "  metric: time (lower is better, 5%%), rate (higher, 5%%), memory "
      "(lower, exact;\n"
      "  pool_peak_bytes 5%%), capacity (max_ok_tokens: higher, exact).  A "
      "time beyond\n"
      "  its tolerance whose p10-p90 spread overlaps the reference's (a "
      "part of the\n"
      "  step: a band as wide as time_ms's), or that differs by less than "
      "the time\n"
      "  floor (a time without percentiles of its own), is within the "
      "noise.\n"
      "  A status or check that got worse (ok -> oom, pass -> fail) fails.  "
      "A metric with\n"
      "  a value on one side only is listed: NEW without one fails, REF "
      "without one is\n"
      "  NO VALUE (not compared); both without one: not this "
      "configuration's metric.\n\n"
      "options:\n"
      "  --tol [BENCH:]METRIC|KIND=VALUE  tolerance (5%%, 0.05, 0 = exact, "
      "skip); repeatable;\n"
      "                                   the most specific wins "
      "(BENCH:METRIC > BENCH:KIND >\n"
      "                                   METRIC > KIND)\n"
      "  --tol-file FILE                  the same, one per line (# "
      "comments); REF's own\n"
      "                                   REF/tolerances is read first when "
      "REF is a directory\n"
      "  --noise on|off                   spreads and the time floor decide "
      "within-noise\n"
      "                                   (default on)\n"
      "  --time-floor MS                  a time without percentiles of its "
      "own differing\n"
      "                                   by less is within the noise "
      "(default %g ms)\n"
      "  --strict                         a reference row missing from NEW "
      "fails too\n"
      "  --allow-missing                  a metric NEW has no value for "
      "(nan, -, no column)\n"
      "                                   is NO VALUE, not a failure\n"
      "  --brief                          print only FAIL, within-noise, "
      "NEW and MISSING lines\n"
      "  --format text|md|tsv             the table's format (default "
      "text)\n"
      "  --classify COLUMN...             print how each column is treated "
      "(key, time, rate,\n"
      "                                   memory, capacity, ignored) and "
      "exit\n\n"
      "output: per configuration: metric, ref, new, new/ref, tolerance, "
      "PASS | FAIL |\n"
      "  SKIP | NO VALUE; rows only in NEW: NEW; rows of REF missing in NEW "
      "(benches NEW\n"
      "  ran): MISSING; a REF row without a value in some key columns matched "
      "by the\n"
      "  others to the one NEW row: MATCHED; then a summary line.\n"
      "exit: 0 no regression, 1 regression, 2 usage, 3 I/O, 4 nothing "
      "compared (no\n"
      "  metric of a matched row passed or failed)\n",
      PL_CMP_TIME_FLOOR_MS);
}

/* What the command line of `plateau compare` asks. */
typedef struct {
  const char *paths[2], *tolfiles[16]; /* NEW, REF; --tol-file in order */
  int np, ntf;
  pl__compare_tols cli; /* --tol, in order (owned) */
  bool noise, strict;
  double floor_ms;
} cmp_args;

/* Parse argv into a and o (--format, --brief): 0, -1 after --help (printed),
 * or 2 for a usage error (printed). */
static int parse_args(int argc, char **argv, cmp_args *a, out *o) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *v = NULL;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout);
      return -1;
    }
    if (arg[0] != '-') {
      if (a->np == 2) {
        fprintf(stderr, "plateau compare: one NEW and one REF (got '%s' too)\n",
                arg);
        return 2;
      }
      a->paths[a->np++] = arg;
      continue;
    }
    const char *opts[] = {"--tol",    "--tol-file",   "--noise",
                          "--format", "--time-floor", NULL};
    int k = -1;
    for (int j = 0; opts[j]; j++) {
      size_t l = strlen(opts[j]);
      if (strncmp(arg, opts[j], l) == 0 && (arg[l] == '=' || !arg[l])) {
        k = j;
        if (arg[l] == '=')
          v = arg + l + 1;
        else if (i + 1 < argc)
          v = argv[++i];
      }
    }
    if (k < 0 && strcmp(arg, "--strict") == 0) {
      a->strict = true;
      continue;
    }
    if (k < 0 && strcmp(arg, "--allow-missing") == 0) {
      o->allow_missing = true;
      continue;
    }
    if (k < 0 && strcmp(arg, "--brief") == 0) {
      o->brief = true;
      continue;
    }
    if (k < 0) {
      fprintf(stderr, "plateau compare: unknown option '%s' (--help)\n", arg);
      return 2;
    }
    if (!v) {
      fprintf(stderr, "plateau compare: %s needs a value\n", arg);
      return 2;
    }
    if (k == 0 && pl__compare_tol_parse(v, "--tol", &a->cli) != PL_OK) {
      fprintf(stderr, "plateau compare: %s\n", pl_last_error());
      return 2;
    }
    if (k == 1 && a->ntf < 16)
      a->tolfiles[a->ntf++] = v;
    if (k == 2) {
      if (strcmp(v, "on") && strcmp(v, "off")) {
        fprintf(stderr, "plateau compare: --noise=%s: on or off\n", v);
        return 2;
      }
      a->noise = strcmp(v, "on") == 0;
    }
    if (k == 4 &&
        pl_parse_f64("--time-floor", v, 0, 1e6, &a->floor_ms) != PL_OK) {
      fprintf(stderr, "plateau compare: %s\n", pl_last_error());
      return 2;
    }
    if (k == 3) {
      if (strcmp(v, "text") == 0)
        o->f = F_TEXT;
      else if (strcmp(v, "md") == 0)
        o->f = F_MD;
      else if (strcmp(v, "tsv") == 0)
        o->f = F_TSV;
      else {
        fprintf(stderr, "plateau compare: --format=%s: text, md or tsv\n", v);
        return 2;
      }
    }
  }
  if (a->np != 2) {
    usage(stderr);
    return 2;
  }
  return 0;
}

/* The tolerances into ts: REF's own file, then --tol-file, then --tol (later
 * wins).  0, or the exit code (2 a bad file, 3 one that cannot be read) with
 * the reason printed. */
static int load_tolerances(const cmp_args *a, pl__compare_tols *ts) {
  struct stat sb;
  char own[PATH_MAX];
  snprintf(own, sizeof own, "%s/tolerances", a->paths[1]);
  pl_status st = PL_OK;
  if (stat(a->paths[1], &sb) == 0 && S_ISDIR(sb.st_mode) && stat(own, &sb) == 0)
    st = pl__compare_tol_file(own, ts);
  for (int i = 0; st == PL_OK && i < a->ntf; i++)
    st = pl__compare_tol_file(a->tolfiles[i], ts);
  if (st != PL_OK) {
    fprintf(stderr, "plateau compare: %s\n", pl_last_error());
    return st == PL_EIO ? 3 : 2;
  }
  for (int i = 0; i < a->cli.n; i++) {
    ts->v = realloc(ts->v, sizeof *ts->v * (size_t)(ts->n + 1));
    PL_ASSERT(ts->v != NULL);
    ts->v[ts->n++] = a->cli.v[i];
  }
  return 0;
}

/* The " col=val" tokens of a key after its bench (a value with a blank
 * continues its token): up to max, each a copy; returns the count. */
static void walk(out *o, const cmp_args *a, const pl__compare_tols *ts,
                 const side *n, const side *r) {
  int i = 0, j = 0;
  while (i < r->ne || j < n->ne) {
    int ia = i, jb = j;
    int c = i >= r->ne ? 1 : j >= n->ne ? -1 : strcmp(r->e[i].key, n->e[j].key);
    const char *key = c <= 0 ? r->e[i].key : n->e[j].key;
    while (ia < r->ne && strcmp(r->e[ia].key, key) == 0)
      ia++;
    while (jb < n->ne && strcmp(n->e[jb].key, key) == 0)
      jb++;
    if (c == 0) {
      compare_key(o, ts, a->noise, a->floor_ms, &r->e[i], ia - i, &n->e[j],
                  jb - j);
    } else if (c > 0) {
      group_head(o, key);
      line(o, key, "-", "-", "-", "-", "-", "NEW", "no reference row");
      o->nnew++;
    } else {
      bool ran = false; /* is the bench one NEW ran? */
      for (int k = 0; k < n->nt && !ran; k++)
        ran = strcmp(n->t[k]->bench, r->e[i].t->bench) == 0;
      if (ran) {
        group_head(o, key);
        line(o, key, "-", "-", "-", "-", "-", "MISSING",
             a->strict ? "not in NEW (--strict: a failure)" : "not in NEW");
        o->missing++;
      }
    }
    i = c <= 0 ? ia : i;
    j = c >= 0 ? jb : j;
  }
}

int pl_compare_main(int argc, char **argv) {
  cmp_args a = {.noise = true, .floor_ms = PL_CMP_TIME_FLOOR_MS};
  pl__compare_tols ts = {0};
  out o;
  memset(&o, 0, sizeof o);
  if (argc > 1 && strcmp(argv[1], "--classify") == 0) {
    /* how each named column is treated (for the tests and the curious) */
    for (int i = 2; i < argc; i++) {
      pl_cmp_class c = pl__compare_class(argv[i]);
      printf("%s %s\n",
             c == PL_CMP_UNKNOWN  ? "unknown"
             : c == PL_CMP_IGNORE ? "ignored"
                                  : pl__compare_kind_names[c],
             argv[i]);
    }
    return 0;
  }
  int code = parse_args(argc, argv, &a, &o);
  if (code == 0)
    code = load_tolerances(&a, &ts);
  if (code != 0) {
    free(a.cli.v);
    free(ts.v);
    return code < 0 ? 0 : code;
  }

  side n = {0}, r = {0};
  if (pl__cmp_side_read(a.paths[0], &n) != PL_OK ||
      pl__cmp_side_read(a.paths[1], &r) != PL_OK) {
    fprintf(stderr, "plateau compare: %s\n", pl_last_error());
    pl__cmp_side_free(&n);
    pl__cmp_side_free(&r);
    free(a.cli.v);
    free(ts.v);
    return 3;
  }
  pl__cmp_key_both(&n, &r);
  if (o.f == F_MD)
    printf("| bench | configuration | metric | ref | new | new/ref | "
           "tolerance | result | note |\n|---|---|---|---|---|---|---|---|"
           "---|\n");
  if (o.f == F_TSV)
    printf("bench\tconfiguration\tmetric\tref\tnew\tratio\ttolerance\tresult"
           "\tnote\n");
  if (o.f == F_TEXT)
    printf("# plateau compare %s %s\n#    metric                        ref  "
           "          new    ratio      tol  result\n",
           a.paths[0], a.paths[1]);
  walk(&o, &a, &ts, &n, &r);
  const bool regress = o.fail > 0 || (a.strict && o.missing > 0);
  const int nm = o.pass + o.fail + o.novalue;
  printf("%scompare: %d configuration%s matched, %d metric%s: %d pass (%d "
         "within the noise), %d fail, %d skipped, %d without a value; %d new, "
         "%d missing -> %s\n",
         o.f == F_TEXT ? "# "
         : o.f == F_MD ? "\n"
                       : "# ",
         o.keys, o.keys == 1 ? "" : "s", nm, nm == 1 ? "" : "s", o.pass,
         o.noise, o.fail, o.skipped, o.novalue, o.nnew, o.missing,
         regress  ? "REGRESSION"
         : o.pass ? "PASS"
                  : "NOTHING COMPARED");
  pl__cmp_side_free(&n);
  pl__cmp_side_free(&r);
  free(a.cli.v);
  free(ts.v);
  return regress ? 1 : o.pass ? 0 : 4;
}
