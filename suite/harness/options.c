/* options.c — strict value parsers and the declarative option tables every
 * `plateau` command uses.  Whole-string or nothing: a value is accepted only
 * if every character is understood, and each rejection names the option, the
 * value and what is allowed (the suite turns it into exit code 2). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#include "ops/sco.h"

static const char *opt_name(const char *opt) {
  return opt ? opt : "value";
}

/* Sizes are parsed in exact integer arithmetic (no double: 2^53 + 1 and
 * 2^64 - 1 must not round, 2^64 must not wrap to 0): the mantissa's digits
 * as an integer m with d decimals, trailing zeros dropped, times the
 * suffix's multiplier, divided by 10^d only when that is exact. */
typedef unsigned __int128 pl_u128;
#define SIZE_ALLOWED "0..9223372036854775807"

pl_status pl_parse_size(const char *opt, const char *s, uint64_t *out) {
  if (!s || !*s)
    return pl_set_error(PL_EINVAL,
                        "%s: empty size (expected e.g. 4096, 64Ki, 1G)",
                        opt_name(opt));
  if (*s == '-' || *s == '+' || isspace((unsigned char)*s))
    return pl_set_error(PL_EINVAL,
                        "%s=%s: a size must be a plain non-negative number",
                        opt_name(opt), s);
  const char *p = s;
  pl_u128 m = 0;
  int ndig = 0, dec = -1; /* dec: digits after '.', -1 before it */
  bool big = false;
  for (;; p++) {
    if (*p == '.' && dec < 0) {
      dec = 0;
      continue;
    }
    if (!isdigit((unsigned char)*p))
      break;
    ndig++;
    if (dec >= 0)
      dec++;
    if (m > ((pl_u128)1 << 100))
      big = true; /* far beyond any size: stop */
    else
      m = m * 10 + (pl_u128)(*p - '0');
  }
  if (ndig == 0)
    return pl_set_error(PL_EINVAL,
                        "%s=%s: not a size (digits with an optional suffix K M "
                        "G T Ki Mi Gi Ti)",
                        opt_name(opt), s);
  if (dec < 0)
    dec = 0;
  pl_u128 mult = 1;
  const char *suf = p;
  if (*suf) {
    int e;
    switch (*suf) {
    case 'K':
    case 'k':
      e = 1;
      break;
    case 'M':
      e = 2;
      break;
    case 'G':
    case 'g':
      e = 3;
      break;
    case 'T':
    case 't':
      e = 4;
      break;
    default:
      return pl_set_error(
          PL_EINVAL,
          "%s=%s: unknown size suffix '%s' (allowed: K M G T, Ki Mi Gi Ti)",
          opt_name(opt), s, suf);
    }
    suf++;
    unsigned base = 1000;
    if (*suf == 'i') {
      base = 1024;
      suf++;
    }
    if (*suf == 'B')
      suf++; /* tolerate "GiB" */
    if (*suf)
      return pl_set_error(
          PL_EINVAL,
          "%s=%s: unknown size suffix '%s' (allowed: K M G T, Ki Mi Gi Ti)",
          opt_name(opt), s, p);
    while (e-- > 0)
      mult *= base;
  }
  /* drop the fraction's trailing zeros: "1.000Ki" is 1Ki */
  while (dec > 0 && !big && m % 10 == 0) {
    m /= 10;
    dec--;
  }
  if (big || (m != 0 && m > ((pl_u128)1 << 100) / mult))
    return pl_set_error(PL_EINVAL,
                        "%s=%s: too large (allowed: " SIZE_ALLOWED ")",
                        opt_name(opt), s);
  pl_u128 v = m * mult, pow10 = 1;
  if (dec > 34) /* 10^34 divides no product of a 100-bit m and a suffix */
    return pl_set_error(PL_EINVAL, "%s=%s: not a whole number of units",
                        opt_name(opt), s);
  for (int i = 0; i < dec; i++)
    pow10 *= 10;
  if (v % pow10 != 0)
    return pl_set_error(PL_EINVAL, "%s=%s: not a whole number of units",
                        opt_name(opt), s);
  v /= pow10;
  if (v > (pl_u128)INT64_MAX)
    return pl_set_error(PL_EINVAL,
                        "%s=%s: too large (allowed: " SIZE_ALLOWED ")",
                        opt_name(opt), s);
  *out = (uint64_t)v;
  return PL_OK;
}

pl_status pl_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi,
                       int64_t *out) {
  if (!s || !*s)
    return pl_set_error(PL_EINVAL,
                        "%s: empty value (allowed: an integer %lld..%lld)",
                        opt_name(opt), (long long)lo, (long long)hi);
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (*end || end == s || isspace((unsigned char)*s))
    return pl_set_error(PL_EINVAL,
                        "%s=%s: not an integer (allowed: %lld..%lld)",
                        opt_name(opt), s, (long long)lo, (long long)hi);
  if (errno == ERANGE)
    return pl_set_error(PL_EINVAL, "%s=%s: out of range (allowed: %lld..%lld)",
                        opt_name(opt), s, (long long)lo, (long long)hi);
  if (v < lo || v > hi)
    return pl_set_error(PL_EINVAL, "%s=%s: out of range (allowed: %lld..%lld)",
                        opt_name(opt), s, (long long)lo, (long long)hi);
  *out = v;
  return PL_OK;
}

pl_status pl_parse_f64(const char *opt, const char *s, double lo, double hi,
                       double *out) {
  if (!s || !*s)
    return pl_set_error(PL_EINVAL, "%s: empty value (allowed: a number %g..%g)",
                        opt_name(opt), lo, hi);
  errno = 0;
  char *end = NULL;
  double v = strtod(s, &end);
  if (*end || end == s || isspace((unsigned char)*s))
    return pl_set_error(PL_EINVAL, "%s=%s: not a number (allowed: %g..%g)",
                        opt_name(opt), s, lo, hi);
  if ((errno == ERANGE && fabs(v) > 1) || !isfinite(v)) /* not underflow */
    return pl_set_error(PL_EINVAL, "%s=%s: out of range (allowed: %g..%g)",
                        opt_name(opt), s, lo, hi);
  if (v < lo || v > hi)
    return pl_set_error(PL_EINVAL, "%s=%s: out of range (allowed: %g..%g)",
                        opt_name(opt), s, lo, hi);
  *out = v;
  return PL_OK;
}

static void join_names(const char *const *names, char *buf, size_t len) {
  buf[0] = '\0';
  for (int i = 0; names && names[i]; i++) {
    if (i)
      strncat(buf, " | ", len - strlen(buf) - 1);
    strncat(buf, names[i], len - strlen(buf) - 1);
  }
}

pl_status pl_parse_enum(const char *opt, const char *s,
                        const char *const *names, int *out) {
  for (int i = 0; s && names && names[i]; i++)
    if (!strcmp(s, names[i])) {
      *out = i;
      return PL_OK;
    }
  char allowed[512];
  join_names(names, allowed, sizeof allowed);
  return pl_set_error(PL_EINVAL, "%s=%s: not allowed (allowed: %s)",
                      opt_name(opt), s ? s : "", allowed);
}

pl_status pl_parse_size_list(const char *opt, const char *s, uint64_t *out,
                             int max, int *n) {
  if (!s || !*s)
    return pl_set_error(PL_EINVAL, "%s: empty list", opt_name(opt));
  char buf[1024];
  if (strlen(s) >= sizeof buf)
    return pl_set_error(PL_EINVAL, "%s: list too long", opt_name(opt));
  strcpy(buf, s);
  *n = 0;
  if (strchr(buf, ':')) { /* lo:hi:xF or lo:hi:+S */
    char *a = buf, *b = strchr(a, ':');
    *b++ = '\0';
    char *c = strchr(b, ':');
    if (!c || strchr(c + 1, ':'))
      return pl_set_error(PL_EINVAL, "%s=%s: a range is lo:hi:xF or lo:hi:+S",
                          opt_name(opt), s);
    *c++ = '\0';
    uint64_t lo, hi;
    if (pl_parse_size(opt, a, &lo) != PL_OK ||
        pl_parse_size(opt, b, &hi) != PL_OK) {
      return pl_error_prefix(PL_EINVAL, "%s=%s: range bound: ", opt_name(opt),
                             s);
    }
    if (hi < lo)
      return pl_set_error(PL_EINVAL, "%s=%s: range end below its start",
                          opt_name(opt), s);
    if (*c == 'x') {
      /* the factor is its own number: a bad one is named as the factor */
      char *end = NULL;
      errno = 0;
      unsigned long long f = strtoull(c + 1, &end, 10);
      if (!isdigit((unsigned char)c[1]) || *end || errno == ERANGE || f < 2 ||
          f > 1024)
        return pl_set_error(
            PL_EINVAL,
            "%s=%s: the factor '%s' is not allowed (allowed: x2..x1024)",
            opt_name(opt), s, c);
      if (lo == 0)
        return pl_set_error(PL_EINVAL,
                            "%s=%s: a geometric range cannot start at 0",
                            opt_name(opt), s);
      /* v <= hi <= INT64_MAX and f <= 1024: v * f never wraps before the
       * v > hi / f test stops the walk */
      for (uint64_t v = lo; v <= hi; v *= f) {
        if (*n >= max)
          return pl_set_error(PL_EINVAL, "%s=%s: more than %d values",
                              opt_name(opt), s, max);
        out[(*n)++] = v;
        if (v > hi / f)
          break;
      }
    } else if (*c == '+') {
      uint64_t st;
      if (pl_parse_size(opt, c + 1, &st) != PL_OK) {
        return pl_error_prefix(PL_EINVAL,
                               "%s=%s: the step '%s': ", opt_name(opt), s, c);
      }
      if (st == 0)
        return pl_set_error(PL_EINVAL, "%s=%s: the step '%s' must be > 0",
                            opt_name(opt), s, c);
      /* v, st <= INT64_MAX: v + st never wraps a uint64 */
      for (uint64_t v = lo; v <= hi; v += st) {
        if (*n >= max)
          return pl_set_error(PL_EINVAL, "%s=%s: more than %d values",
                              opt_name(opt), s, max);
        out[(*n)++] = v;
      }
    } else {
      return pl_set_error(PL_EINVAL,
                          "%s=%s: range step must be xF (times) or +S (plus)",
                          opt_name(opt), s);
    }
    return PL_OK;
  }
  if (s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
    return pl_set_error(PL_EINVAL, "%s=%s: empty list element", opt_name(opt),
                        s);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    if (*n >= max)
      return pl_set_error(PL_EINVAL, "%s=%s: more than %d values",
                          opt_name(opt), s, max);
    PL_TRY(pl_parse_size(opt, tok, &out[(*n)++]));
  }
  if (*n == 0)
    return pl_set_error(PL_EINVAL, "%s=%s: empty list element", opt_name(opt),
                        s);
  return PL_OK;
}

pl_status pl_parse_enum_list(const char *opt, const char *s,
                             const char *const *names, int *out, int max,
                             int *n) {
  if (!s || !*s || s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
    return pl_set_error(PL_EINVAL, "%s=%s: empty list element", opt_name(opt),
                        s ? s : "");
  char buf[1024];
  if (strlen(s) >= sizeof buf)
    return pl_set_error(PL_EINVAL, "%s: list too long", opt_name(opt));
  strcpy(buf, s);
  *n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    if (*n >= max)
      return pl_set_error(PL_EINVAL, "%s=%s: more than %d values",
                          opt_name(opt), s, max);
    PL_TRY(pl_parse_enum(opt, tok, names, &out[(*n)++]));
  }
  return PL_OK;
}

/* ---- tables ---------------------------------------------------------------
 */

typedef struct pl_argval {
  int set, given;
  int64_t i;
  uint64_t u;
  double f;
  int e;
  const char *s;
  int nlist;
  uint64_t ulist[PL_OPT_LIST_MAX];
  int elist[PL_OPT_LIST_MAX];
} pl_argval;

struct pl_args {
  const pl_opt *opts;
  int nopts;
  pl_argval *vals;
  int npos;
  char **pos;
};

/* A table's bounds are doubles (1e9 reads better than 1000000000); they are
 * clamped to what the value's type holds before any conversion. */
static int64_t bound_i64(double x) {
  if (!(x > -9223372036854775808.0))
    return INT64_MIN;
  if (x >= 9223372036854775808.0)
    return INT64_MAX;
  return (int64_t)x;
}
static uint64_t bound_size(double x) {
  if (!(x > 0))
    return 0;
  if (x >= 9223372036854775808.0)
    return INT64_MAX; /* sizes: pl_parse_size */
  return (uint64_t)x;
}

static pl_status set_value(const pl_opt *o, pl_argval *v, const char *text) {
  char name[96];
  snprintf(name, sizeof name, "--%s", o->name);
  const uint64_t slo = bound_size(o->lo), shi = bound_size(o->hi);
  switch (o->kind) {
  case PL_OPT_FLAG:
    v->i = 1;
    break;
  case PL_OPT_INT:
    PL_TRY(pl_parse_i64(name, text, bound_i64(o->lo), bound_i64(o->hi), &v->i));
    break;
  case PL_OPT_SIZE:
    PL_TRY(pl_parse_size(name, text, &v->u));
    if (v->u < slo || v->u > shi)
      return pl_set_error(
          PL_EINVAL, "%s=%s: out of range (allowed: %llu..%llu)", name, text,
          (unsigned long long)slo, (unsigned long long)shi);
    break;
  case PL_OPT_F64:
    PL_TRY(pl_parse_f64(name, text, o->lo, o->hi, &v->f));
    break;
  case PL_OPT_ENUM:
    PL_TRY(pl_parse_enum(name, text, o->choices, &v->e));
    break;
  case PL_OPT_STR:
    if (!text || !*text)
      return pl_set_error(PL_EINVAL, "%s: empty value", name);
    v->s = text;
    break;
  case PL_OPT_SIZE_LIST:
    PL_TRY(
        pl_parse_size_list(name, text, v->ulist, PL_OPT_LIST_MAX, &v->nlist));
    for (int i = 0; i < v->nlist; i++)
      if (v->ulist[i] < slo || v->ulist[i] > shi)
        return pl_set_error(
            PL_EINVAL, "%s=%s: value %llu out of range (allowed: %llu..%llu)",
            name, text, (unsigned long long)v->ulist[i],
            (unsigned long long)slo, (unsigned long long)shi);
    break;
  case PL_OPT_ENUM_LIST:
    PL_TRY(pl_parse_enum_list(name, text, o->choices, v->elist, PL_OPT_LIST_MAX,
                              &v->nlist));
    break;
  }
  v->set = 1;
  return PL_OK;
}

/* A value taken from the next word must not look like an option: `--out
 * --sweep` is a forgotten value, not a directory named --sweep (write
 * --out=--sweep to mean it).  A negative number ("-5") is a value. */
static bool looks_like_option(const char *w) {
  return w[0] == '-' && (w[1] == '-' || isalpha((unsigned char)w[1]));
}

static int find_long(const pl_opt *opts, const char *name, size_t len) {
  for (int i = 0; opts[i].name; i++)
    if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
      return i;
  return -1;
}

pl_status pl_args_parse(const pl_opt *opts, int argc, char **argv,
                        int max_positional, pl_args **out, bool *help) {
  *out = NULL;
  if (help)
    *help = false;
  pl_args *a = calloc(1, sizeof *a);
  if (!a)
    return pl_set_error(PL_ENOMEM, "out of host memory parsing options");
  a->opts = opts;
  while (opts[a->nopts].name)
    a->nopts++;
  a->vals = calloc((size_t)a->nopts + 1, sizeof *a->vals);
  a->pos = calloc((size_t)argc + 1, sizeof *a->pos);
  if (!a->vals || !a->pos) {
    pl_args_free(a);
    return pl_set_error(PL_ENOMEM, "out of host memory parsing options");
  }
  pl_status st = PL_OK;
  for (int i = 0; i < a->nopts && st == PL_OK; i++)
    if (opts[i].defval) {
      st = set_value(&opts[i], &a->vals[i], opts[i].defval);
      if (st != PL_OK)
        PL_ASSERT(!"bad default in an option table");
    }
  for (int i = 0; i < argc && st == PL_OK; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      if (help)
        *help = true;
      continue;
    }
    int idx = -1;
    const char *val = NULL;
    if (!strncmp(arg, "--", 2) && arg[2]) {
      const char *name = arg + 2, *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      idx = find_long(opts, name, len);
      if (idx < 0 && !strncmp(name, "no-", 3)) {
        int j = find_long(opts, name + 3, len - 3);
        if (j >= 0 && opts[j].kind == PL_OPT_FLAG && eq) {
          st = pl_set_error(PL_EINVAL, "option --%.*s takes no value", (int)len,
                            name);
          break;
        }
        if (j >= 0 && opts[j].kind == PL_OPT_FLAG) {
          a->vals[j].i = 0;
          a->vals[j].set = a->vals[j].given = 1;
          continue;
        }
      }
      if (idx < 0) {
        st = pl_set_error(PL_EINVAL, "unknown option '--%.*s' (see --help)",
                          (int)len, name);
        break;
      }
      if (eq)
        val = eq + 1;
      if (opts[idx].kind == PL_OPT_FLAG && val) {
        st = pl_set_error(PL_EINVAL, "option --%s takes no value",
                          opts[idx].name);
        break;
      }
    } else if (arg[0] == '-' && arg[1] && !arg[2] &&
               !isdigit((unsigned char)arg[1])) {
      for (int j = 0; opts[j].name; j++)
        if (opts[j].short_name == arg[1])
          idx = j;
      if (idx < 0) {
        st = pl_set_error(PL_EINVAL, "unknown option '%s' (see --help)", arg);
        break;
      }
    } else {
      if (a->npos >= max_positional) {
        st = pl_set_error(PL_EINVAL, "unexpected argument '%s' (see --help)",
                          arg);
        break;
      }
      a->pos[a->npos++] = argv[i];
      continue;
    }
    if (opts[idx].kind != PL_OPT_FLAG && !val) {
      if (i + 1 >= argc) {
        st = pl_set_error(PL_EINVAL, "option --%s needs a value",
                          opts[idx].name);
        break;
      }
      if (looks_like_option(argv[i + 1])) {
        st = pl_set_error(PL_EINVAL,
                          "option --%s needs a value, got the option '%s' "
                          "(write --%s=%s if that is the value)",
                          opts[idx].name, argv[i + 1], opts[idx].name,
                          argv[i + 1]);
        break;
      }
      val = argv[++i];
    }
    st = set_value(&opts[idx], &a->vals[idx], val);
    a->vals[idx].given = 1;
  }
  if (st != PL_OK) {
    pl_args_free(a);
    return st;
  }
  *out = a;
  return PL_OK;
}

void pl_args_free(pl_args *a) {
  if (!a)
    return;
  free(a->vals);
  free(a->pos);
  free(a);
}

void pl_args_usage(const pl_opt *opts, void *file) {
  FILE *f = file ? (FILE *)file : stdout;
  static const char *kinds[] = {"",       "INT",  "SIZE",  "X",
                                "CHOICE", "TEXT", "SIZES", "CHOICES"};
  for (int i = 0; opts && opts[i].name; i++) {
    const pl_opt *o = &opts[i];
    char left[96];
    if (o->short_name)
      snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->name,
               o->kind == PL_OPT_FLAG ? "" : "=", kinds[o->kind]);
    else
      snprintf(left, sizeof left, "    --%s%s%s", o->name,
               o->kind == PL_OPT_FLAG ? "" : "=", kinds[o->kind]);
    fprintf(f, "  %-30s %s", left, o->help ? o->help : "");
    if (o->choices) {
      char allowed[512];
      join_names(o->choices, allowed, sizeof allowed);
      fprintf(f, " [%s]", allowed);
    }
    if (o->defval)
      fprintf(f, " (default: %s)", o->defval);
    fputc('\n', f);
  }
}

static const pl_argval *get(const pl_args *a, const char *name, pl_opt_kind k) {
  for (int i = 0; i < a->nopts; i++)
    if (!strcmp(a->opts[i].name, name)) {
      PL_ASSERT(a->opts[i].kind == k);
      return &a->vals[i];
    }
  pl_assert_fail(name, __FILE__, __LINE__);
  return NULL;
}

bool pl_args_flag(const pl_args *a, const char *name) {
  return get(a, name, PL_OPT_FLAG)->i != 0;
}
int64_t pl_args_int(const pl_args *a, const char *name) {
  return get(a, name, PL_OPT_INT)->i;
}
uint64_t pl_args_size(const pl_args *a, const char *name) {
  return get(a, name, PL_OPT_SIZE)->u;
}
double pl_args_f64(const pl_args *a, const char *name) {
  return get(a, name, PL_OPT_F64)->f;
}
int pl_args_enum(const pl_args *a, const char *name) {
  return get(a, name, PL_OPT_ENUM)->e;
}
const char *pl_args_enum_name(const pl_args *a, const char *name) {
  for (int i = 0; i < a->nopts; i++)
    if (!strcmp(a->opts[i].name, name))
      return a->opts[i].choices[get(a, name, PL_OPT_ENUM)->e];
  return NULL;
}
const char *pl_args_str(const pl_args *a, const char *name) {
  const pl_argval *v = get(a, name, PL_OPT_STR);
  return v->set ? v->s : NULL;
}
int pl_args_size_list(const pl_args *a, const char *name, uint64_t *out,
                      int max) {
  const pl_argval *v = get(a, name, PL_OPT_SIZE_LIST);
  for (int i = 0; i < v->nlist && i < max; i++)
    out[i] = v->ulist[i];
  return v->nlist;
}
int pl_args_enum_list(const pl_args *a, const char *name, int *out, int max) {
  const pl_argval *v = get(a, name, PL_OPT_ENUM_LIST);
  for (int i = 0; i < v->nlist && i < max; i++)
    out[i] = v->elist[i];
  return v->nlist;
}
bool pl_args_given(const pl_args *a, const char *name) {
  for (int i = 0; i < a->nopts; i++)
    if (!strcmp(a->opts[i].name, name))
      return a->vals[i].given != 0;
  pl_assert_fail(name, __FILE__, __LINE__);
  return false;
}
int pl_args_npositional(const pl_args *a) {
  return a->npos;
}
const char *pl_args_positional(const pl_args *a, int i) {
  return (i >= 0 && i < a->npos) ? a->pos[i] : NULL;
}

/* ---- engine values from option strings ---------------------------------- */

pl_status pl_sco_parse_budget(const char *opt, const char *s,
                              pl_sco_budget *out) {
  memset(out, 0, sizeof *out);
  if (s && !strcmp(s, "all")) {
    out->all = true;
    return PL_OK;
  }
  pl_status st = pl_parse_size(opt, s, &out->bytes);
  if (st != PL_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", pl_last_error());
    return pl_set_error(
        PL_EINVAL, "%s (a host budget is 0, all, or a size such as 12Gi)", why);
  }
  return PL_OK;
}

pl_status pl_headroom_parse(const char *opt, const char *s, bool attn_ok,
                            pl_headroom_mode *mode, uint64_t *bytes) {
  *mode = PL_HEADROOM_BYTES;
  *bytes = 0;
  static const char *const words[] = {"attn", "all", "auto"};
  for (int i = 0; s && i < 3; i++)
    if (!strcmp(s, words[i]) && (i || attn_ok)) {
      *mode = (pl_headroom_mode)(i + 1);
      return PL_OK;
    }
  pl_status st = pl_parse_size(opt, s, bytes);
  if (st != PL_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", pl_last_error());
    return pl_set_error(PL_EINVAL,
                        "%s (allowed: 0, %sall, auto, or a device "
                        "budget such as 24Gi)",
                        why, attn_ok ? "attn, " : "");
  }
  return PL_OK;
}
