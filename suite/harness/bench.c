/* bench.c — the harness every `plateau bench <name>` runs through (bench.h):
 * the registry, the command line (common flags, the bench's options, named
 * presets), the run (device, communicator, result file with its metadata),
 * the per-point protocol and the exit code (rows: harness_rows.c; timing,
 * memory, agreement: harness_measure.c).
 *
 * Why one harness: every bench must parse strictly (bad value: message
 * naming the option, exit 2, nothing written), record the same metadata,
 * time, measure memory and compare the same way, and map statuses to the
 * same exit codes.  Order matters: all ranks parse the whole command line and
 * the bench validates it (init) before any file exists, so a usage error
 * leaves no trace on disk.
 *
 * `--dry-run[=RANKS]` stops after validation: the bench's init() and each
 * point's identity on a CPU device as if on RANKS ranks (default: the launch's
 * size), no GPU needed, nothing written (jobs/submit validates every point of
 * a sweep this way before anything is queued).
 *
 * Exit codes: 0 ok, 1 a row with check=fail, 2 usage, 3 runtime error. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "results/results.h"
#include "results/schema.h"

/* ---- registry ------------------------------------------------------------ */
#define BENCH(name, report) extern const pl_bench pl_bench_##name;
#include "benches.def"
#undef BENCH
#undef PEER
#undef FEED

static const pl_bench *const registry[] = {
#define BENCH(name, report) &pl_bench_##name,
#include "benches.def"
#undef BENCH
#undef PEER
#undef FEED
};

int pl_bench_count(void) {
  return (int)(sizeof registry / sizeof registry[0]);
}
const pl_bench *pl_bench_at(int i) {
  return i >= 0 && i < pl_bench_count() ? registry[i] : NULL;
}
const pl_bench *pl_bench_find(const char *name) {
  for (int i = 0; name && i < pl_bench_count(); i++)
    if (strcmp(registry[i]->name, name) == 0)
      return registry[i];
  return NULL;
}

/* ---- options ------------------------------------------------------------- */
static const char *const backend_names[] = {"cpu", "cuda", "dry", NULL};

static const pl_opt common_opts[] = {
    {"backend", 0, PL_OPT_ENUM, NULL,
     "device backend (cuda when a GPU is present, else cpu; dry: memory)", 0, 0,
     backend_names},
    {"iters", 'n', PL_OPT_INT, "20", "timed iterations per point", 1, 1e9,
     NULL},
    {"warmup", 'w', PL_OPT_INT, "5", "untimed warm-up iterations per point", 0,
     1e9, NULL},
    {"seed", 0, PL_OPT_INT, "1", "seed of the input data", 0, 1e18, NULL},
    {"out", 'o', PL_OPT_STR, "results/runs/adhoc", "result directory", 0, 0,
     NULL},
    {"sweep", 0, PL_OPT_STR, NULL, "sweep name: results go to OUT/SWEEP", 0, 0,
     NULL},
    {"check", 0, PL_OPT_FLAG, "1",
     "compare against the reference (--no-check skips it)", 0, 0, NULL},
    {"mem-limit", 0, PL_OPT_SIZE, "0",
     "capacity of the device arena per rank (0 = none); beyond it: oom rows", 0,
     1e18, NULL},
    {"point", 0, PL_OPT_STR, NULL,
     "point id of a sweep (recorded; jobs/submit resumes by it)", 0, 0, NULL},
};
#define N_COMMON ((int)(sizeof common_opts / sizeof common_opts[0]))

/* The options of one run: the common ones, the bench's, and --preset when
 * the bench has presets (choices "auto" and the presets' names). */
typedef struct optset {
  pl_opt *opts;
  int n, nbench, preset; /* preset: index of --preset, or -1 */
  const char **choices;
  char **owned; /* preset values set as defaults */
  int nowned;
} optset;

static int npresets(const pl_bench *b) {
  int n = 0;
  while (b->presets && b->presets[n].name)
    n++;
  return n;
}

static void optset_make(const pl_bench *b, optset *o) {
  memset(o, 0, sizeof *o);
  while (b->opts && b->opts[o->nbench].name)
    o->nbench++;
  int np = npresets(b);
  o->n = N_COMMON + o->nbench + (np ? 1 : 0);
  o->opts = calloc((size_t)o->n + 1, sizeof *o->opts);
  PL_ASSERT(o->opts != NULL);
  memcpy(o->opts, common_opts, sizeof common_opts);
  for (int i = 0; i < o->nbench; i++) {
    for (int j = 0; j < N_COMMON; j++) {
      PL_ASSERT(strcmp(b->opts[i].name, common_opts[j].name) != 0);
      PL_ASSERT(!b->opts[i].short_name ||
                b->opts[i].short_name != common_opts[j].short_name);
    }
    PL_ASSERT(strcmp(b->opts[i].name, "preset") != 0 || !np);
    o->opts[N_COMMON + i] = b->opts[i];
  }
  o->preset = -1;
  if (np) {
    o->choices = calloc((size_t)np + 2, sizeof *o->choices);
    PL_ASSERT(o->choices != NULL);
    o->choices[0] = "auto";
    for (int i = 0; i < np; i++)
      o->choices[i + 1] = b->presets[i].name;
    o->preset = o->n - 1;
    o->opts[o->preset] =
        (pl_opt){"preset",
                 0,
                 PL_OPT_ENUM,
                 "auto",
                 "a named table of option values (below); options given win",
                 0,
                 0,
                 o->choices};
  }
}

static void optset_free(optset *o) {
  for (int i = 0; i < o->nowned; i++)
    free(o->owned[i]);
  free(o->owned);
  free(o->choices);
  free(o->opts);
}

/* The preset's "name=value ..." as the defaults of those options. */
static void apply_preset(optset *o, const pl_preset *p) {
  const char *s = p->values;
  while (*s) {
    while (*s == ' ')
      s++;
    if (!*s)
      break;
    size_t len = strcspn(s, " ");
    char *kv = strndup(s, len), *eq = strchr(kv, '=');
    PL_ASSERT(eq != NULL); /* a preset is "name=value ..." */
    *eq = '\0';
    int k = -1;
    for (int i = 0; i < o->n; i++)
      if (strcmp(o->opts[i].name, kv) == 0)
        k = i;
    if (k < 0)
      fprintf(stderr, "preset %s: no option '%s'\n", p->name, kv);
    PL_ASSERT(k >= 0);
    o->owned = realloc(o->owned, sizeof *o->owned * (size_t)(o->nowned + 1));
    PL_ASSERT(o->owned != NULL);
    o->owned[o->nowned++] = kv;
    o->opts[k].defval = eq + 1;
    s += len;
  }
}

static bool have_gpu(void) {
  return pl_backend_available(PL_BACKEND_CUDA) && pl_cuda_device_count() > 0;
}

/* Is option `name` a word of the group's list ("title: a b c")? */
static bool in_group(const char *group, const char *name) {
  const char *w = strchr(group, ':');
  const size_t n = strlen(name);
  for (w = w ? w + 1 : group; *w;) {
    w += strspn(w, " ");
    const size_t len = strcspn(w, " ");
    if (len == n && strncmp(w, name, n) == 0)
      return true;
    w += len;
  }
  return false;
}

/* The bench's own options of group grp, in the group's order (NULL: those
 * in no group of the bench, in table order; every option when the bench
 * has no groups), under a heading. */
static void group_usage(const pl_bench *b, const optset *o, const char *grp,
                        FILE *f) {
  pl_opt sel[64 + 1];
  int k = 0;
  const char *w = grp ? strchr(grp, ':') : NULL;
  for (w = w ? w + 1 : ""; *w && k < 64;) { /* the group's names */
    w += strspn(w, " ");
    const size_t len = strcspn(w, " ");
    for (int i = N_COMMON; i < o->n && len; i++)
      if (strlen(o->opts[i].name) == len && !strncmp(o->opts[i].name, w, len))
        sel[k++] = o->opts[i];
    w += len;
  }
  for (int i = N_COMMON; !grp && i < o->n && k < 64; i++) {
    bool take = true;
    for (int j = 0; b->groups && b->groups[j] && take; j++)
      take = !in_group(b->groups[j], o->opts[i].name);
    if (take)
      sel[k++] = o->opts[i];
  }
  memset(&sel[k], 0, sizeof sel[k]);
  if (!k)
    return;
  if (b->groups)
    fprintf(f, "\n %.*s:\n", grp ? (int)strcspn(grp, ":") : 5,
            grp ? grp : "other");
  pl_args_usage(sel, f);
}

/* The bench's own options, by its groups (b->groups) when it has them. */
static void own_usage(const pl_bench *b, const optset *o, FILE *f) {
  for (int g = 0; b->groups && b->groups[g]; g++)
    group_usage(b, o, b->groups[g], f);
  group_usage(b, o, NULL, f);
}

static void bench_usage(const pl_bench *b, const optset *o, FILE *f) {
  fprintf(f, "usage: plateau bench %s [options]\n  %s\n\noptions of %s:\n",
          b->name, b->summary, b->name);
  own_usage(b, o, f);
  if (npresets(b)) {
    fprintf(f, "\npresets (--preset NAME; auto: %s on cpu, %s on cuda):\n",
            b->preset_cpu ? b->preset_cpu : "none",
            b->preset_cuda ? b->preset_cuda : "none");
    for (int i = 0; b->presets[i].name; i++)
      fprintf(f, "  %-8s %s\n", b->presets[i].name,
              *b->presets[i].values ? b->presets[i].values
                                    : "(the options' own defaults)");
  }
  fprintf(f, "\ncommon options:\n");
  pl_opt common[N_COMMON + 1];
  memcpy(common, o->opts, sizeof(pl_opt) * N_COMMON);
  memset(&common[N_COMMON], 0, sizeof common[N_COMMON]);
  pl_args_usage(common, f);
  fprintf(f, "  --dry-run[=RANKS]  parse and validate the options and list the "
             "points as on\n                     RANKS ranks (default: this "
             "launch's), then exit: no device\n                     work, no "
             "file (exit 0 valid, 2 not)\n");
  char *h = pl__rows_header();
  fprintf(f,
          "\nrows (--columns prints them): %s\n"
          "  every column is in the result schema table (`plateau "
          "schema`) of doc/guide/results.md\n"
          "exit: 0 ok, 1 a check failed, 2 usage, 3 runtime error\n",
          h);
  free(h);
}

/* Usage errors: every rank parsed the same argv, so every rank exits 2; only
 * rank 0 speaks. */
static int usage_exit(int rank, const char *fmt, const char *a, const char *b) {
  if (rank == 0) {
    fprintf(stderr, "plateau bench: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
  }
  return 2;
}

static void list_benches(FILE *f) {
  fprintf(f, "benches:\n");
  for (int i = 0; i < pl_bench_count(); i++)
    fprintf(f, "  %-10s %s\n", registry[i]->name, registry[i]->summary);
}

/* Parse argv into *args with the preset's values as defaults.  Returns 0,
 * or the exit code (help: 0 with *args NULL; usage: 2). */
static int parse(const pl_bench *b, optset *o, int argc, char **argv, int rank,
                 pl_args **args, const char **preset) {
  *args = NULL;
  *preset = NULL;
  static char backend_default[8];
  snprintf(backend_default, sizeof backend_default, "%s",
           have_gpu() ? "cuda" : "cpu");
  o->opts[0].defval = backend_default;
  bool help = false;
  pl_status st = pl_args_parse(o->opts, argc, argv, 0, args, &help);
  if (help) {
    if (rank == 0)
      bench_usage(b, o, stdout);
    pl_args_free(*args);
    *args = NULL;
    return -1;
  }
  if (st != PL_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pl_last_error());
    return usage_exit(rank, "%s: %s", b->name, msg);
  }
  if (o->preset < 0)
    return 0;
  const char *name = pl_args_enum_name(*args, "preset");
  if (strcmp(name, "auto") == 0)
    name = strcmp(pl_args_enum_name(*args, "backend"), "cpu") != 0
               ? b->preset_cuda
               : b->preset_cpu;
  if (!name)
    return 0;
  for (int i = 0; b->presets[i].name; i++)
    if (strcmp(b->presets[i].name, name) == 0) {
      apply_preset(o, &b->presets[i]);
      *preset = b->presets[i].name;
    }
  PL_ASSERT(*preset != NULL); /* preset_cpu / preset_cuda name presets */
  pl_args_free(*args);
  st = pl_args_parse(o->opts, argc, argv, 0, args, &help);
  if (st != PL_OK) { /* a preset value out of its option's range */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pl_last_error());
    return usage_exit(rank, "%s: preset: %s", b->name, msg);
  }
  return 0;
}

/* ---- a point --------------------------------------------------------------
 */
/* Set col to v when the bench lists it and has not set it itself. */
static void fill_i64(pl_row *r, const char *col, int64_t v) {
  if (pl__rows_listed(col) && !pl_row_has(r, col))
    pl_row_i64(r, col, v);
}
static void fill_f64(pl_row *r, const char *col, double v) {
  if (pl__rows_listed(col) && !pl_row_has(r, col))
    pl_row_f64(r, col, v);
}

/* The row of a measured point: the standard columns, the check, the note. */
static void fill(pl_bench_ctx *ctx, pl_row *row, const pl_meas *m,
                 const pl_check *chk, const pl_work *w) {
  const pl_bench *b = ctx->bench;
  /* a dry device computes nothing: its times are not the step's */
  const bool timed = pl_dev_backend(ctx->dev) != PL_BACKEND_DRY;
  if (timed) {
    fill_f64(row, "time_ms", m->t.median);
    fill_f64(row, "time_p10_ms", m->t.p10);
    fill_f64(row, "time_p90_ms", m->t.p90);
  }
  fill_i64(row, "dev_peak_bytes", (int64_t)m->dev_peak);
  fill_i64(row, "op_peak_bytes", (int64_t)(m->dev_peak - m->dev_resident));
  fill_i64(row, "host_peak_bytes", (int64_t)m->host_peak);
  fill_i64(row, "pool_peak_bytes", (int64_t)m->pool_peak);
  if (pl__rows_listed("live_set") && !pl_row_has(row, "live_set"))
    pl_row_str(row, "live_set", m->live_set);
  for (int i = 0; b->tags && b->tags[i] && i < PL_BENCH_MAX_TAGS; i++) {
    char col[64];
    snprintf(col, sizeof col, "%s_bytes", b->tags[i]);
    fill_i64(row, col, (int64_t)m->tag_peak[i]);
  }
  double sec = timed ? m->t.median * 1e-3 : 0;
  if (w->flops > 0 && sec > 0)
    fill_f64(row, "tflops", w->flops / sec / 1e12);
  if (b->rate && w->bytes > 0 && sec > 0)
    fill_f64(row, b->rate, w->bytes / sec / 1e9);
  if (chk->compared) {
    fill_f64(row, "max_err", chk->max_rel);
    pl_row_check(row, chk->failed ? "fail" : "pass");
    char note[600];
    pl_check_note(chk, note, sizeof note);
    if (note[0])
      pl_row_note(row, "%s", note);
  }
  if (m->warmups > ctx->warmup)
    pl_row_note(row,
                "warm-ups: %d (-w %d had not converged: a run up to %.1fx "
                "slower than the one before or the ones after; %d more run "
                "as warm-ups)",
                m->warmups, ctx->warmup, m->slow, m->warmups - ctx->warmup);
  if (!ctx->cuda || pl_dev_backend(ctx->dev) == PL_BACKEND_DRY)
    pl_row_note(row, "%s", pl__bench_dev_note(ctx->dev));
}

static pl_status run_point(pl_bench_ctx *ctx, void *S, int p) {
  const pl_bench *b = ctx->bench;
  pl_row *row = pl_row_new(ctx);
  char label[256] = "";
  pl_status st =
      b->point ? b->point(ctx, S, p, row, label, sizeof label) : PL_OK;
  const bool described = st == PL_OK;
  pl_bench_progress(ctx, label);
  if (st == PL_OK && b->setup)
    st = b->setup(ctx, S, p);
  pl_status comm = pl_bench_agree(ctx, &st);
  pl_meas m;
  pl_check chk;
  pl_work w = {0, 0};
  memset(&m, 0, sizeof m);
  memset(&chk, 0, sizeof chk);
  if (comm == PL_OK && st == PL_OK)
    st = pl_bench_measure(ctx, b->run, S, &m);
  ctx->meas = &m;
  if (comm == PL_OK && st == PL_OK && ctx->check && b->check) {
    st = b->check(ctx, S, p, &chk);
    comm = pl_bench_agree(ctx, &st);
    if (comm == PL_OK && st == PL_OK)
      comm = pl_check_agree(ctx->comm, &chk);
  }
  if (comm == PL_OK && st == PL_OK && b->finish) {
    st = b->finish(ctx, S, p, row, &w);
    comm = pl_bench_agree(ctx, &st);
  }
  if (st == PL_OK)
    fill(ctx, row, &m, &chk, &w);
  else
    pl_row_status_from(row, st);
  ctx->meas = NULL;
  if (described && b->teardown)
    b->teardown(ctx, S, p);
  if (comm != PL_OK) {
    pl_row_status_from(row, comm);
    pl_row_emit(row);
    return comm;
  }
  return pl_row_emit(row);
}

static pl_status run_points(pl_bench_ctx *ctx, void *S) {
  pl_status st = PL_OK;
  for (int p = 0; p < ctx->npoints && st == PL_OK; p++)
    st = run_point(ctx, S, p);
  return st;
}

/* ---- the run ----------------------------------------------------------------
 */
/* The result file (rank 0) with the metadata; its human view on stdout. */
static pl_status open_results(pl_bench_ctx *ctx, const char *dir,
                              const char *sweep, int argc, char **argv) {
  const pl_bench *b = ctx->bench;
  const char *const *meta =
      pl_results_meta(ctx->dev, ctx->comm, b->name, argc, argv);
  static char v_iters[24], v_warm[24], v_seed[24], v_lim[24];
  snprintf(v_iters, sizeof v_iters, "%d", ctx->iters);
  snprintf(v_warm, sizeof v_warm, "%d", ctx->warmup);
  snprintf(v_seed, sizeof v_seed, "%llu", (unsigned long long)ctx->seed);
  snprintf(v_lim, sizeof v_lim, "%llu",
           (unsigned long long)pl_args_size(ctx->args, "mem-limit"));
  const char *point = pl_args_str(ctx->args, "point");
  const char *extra[] = {"iters",
                         v_iters,
                         "warmup",
                         v_warm,
                         "seed",
                         v_seed,
                         "check",
                         ctx->check ? "on" : "off",
                         "mem_limit_bytes",
                         v_lim,
                         "preset",
                         ctx->preset ? ctx->preset : "-",
                         "sweep",
                         sweep ? sweep : "-",
                         "point",
                         point ? point : "-"};
  int nm = 0, ne = (int)(sizeof extra / sizeof extra[0]);
  while (meta[nm])
    nm++;
  const char **kv = calloc((size_t)(nm + ne + 1), sizeof *kv);
  PL_ASSERT(kv != NULL);
  memcpy(kv, meta, sizeof(char *) * (size_t)nm);
  memcpy(kv + nm, extra, sizeof(char *) * (size_t)ne);
  char *cols = pl__rows_header();
  pl_status st = pl_results_create(dir, b->name, cols, kv, &ctx->res);
  if (st == PL_OK) {
    /* the metadata is the file's; the terminal gets what ran where */
    const char *dev = "-", *be = "-", *sha = "-", *dirty = "0";
    for (int i = 0; kv[i]; i += 2) {
      if (!strcmp(kv[i], "device"))
        dev = kv[i + 1];
      else if (!strcmp(kv[i], "backend"))
        be = kv[i + 1];
      else if (!strcmp(kv[i], "git_sha"))
        sha = kv[i + 1];
      else if (!strcmp(kv[i], "git_dirty"))
        dirty = kv[i + 1];
    }
    printf("# plateau bench %s: backend %s (%s), %d rank%s, git %s%s%s%s\n",
           b->name, be, dev, ctx->size, ctx->size == 1 ? "" : "s", sha,
           strcmp(dirty, "1") ? "" : " (dirty)", point ? ", point " : "",
           point ? point : "");
    printf("# result file: %s\n", pl_results_path(ctx->res));
    pl__rows_print_header();
  }
  free(cols);
  free(kv);
  return st;
}

/* Every column of the bench is in the schema, once (a programming error
 * otherwise: suite/results/test_schema.sh checks every bench's). */
static void assert_schema(const pl_bench *b) {
  char *h = pl__rows_header(), *save = NULL;
  int n = 0;
  const char *seen[256];
  for (char *c = strtok_r(h, "\t", &save); c; c = strtok_r(NULL, "\t", &save)) {
    if (!pl_schema_find(c))
      fprintf(stderr,
              "bench %s: column '%s' is not in suite/results/schema.def\n",
              b->name, c);
    PL_ASSERT(pl_schema_find(c) != NULL);
    for (int i = 0; i < n; i++)
      PL_ASSERT(strcmp(seen[i], c) != 0);
    if (n < 256)
      seen[n++] = c;
  }
  free(h);
}

/* `--dry-run[=RANKS]`: argv's position of it, or -1; *ranks gets RANKS (0:
 * the launch's size); -2 when its value is not a positive integer. */
static int find_dry_run(int argc, char **argv, int *ranks) {
  *ranks = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--dry-run") == 0)
      return i;
    if (strncmp(argv[i], "--dry-run=", 10) == 0) {
      char *end;
      long v = strtol(argv[i] + 10, &end, 10);
      if (*end || end == argv[i] + 10 || v < 1 || v > 1000000)
        return -2;
      *ranks = (int)v;
      return i;
    }
  }
  return -1;
}

/* The dry run: init() and every point's identity as on ctx->size ranks;
 * infeasible points are listed (a result, not an error).  Rank 0 prints
 * "# dry run: ..." lines and a closing "dry run: ok, N points (M infeasible)
 * on R ranks"; returns the exit code (2: the bench refused its options). */
static int dry_run(pl_bench_ctx *ctx, void *S) {
  const pl_bench *b = ctx->bench;
  pl_status st = b->init ? b->init(ctx, S) : PL_OK;
  if (st != PL_OK) {
    if (ctx->rank == 0)
      fprintf(stderr, "plateau bench %s: %s\n", b->name, pl_last_error());
    return pl_status_exit_code(st == PL_EINVAL ? PL_EINVAL : PL_ERUNTIME);
  }
  int infeasible = 0;
  if (b->main) {
    if (ctx->rank == 0)
      printf("# dry run: %s runs its own loop (no points to list)\n", b->name);
  } else {
    /* the rows are built and dropped unseen: a context of another rank */
    pl_bench_ctx quiet = *ctx;
    quiet.rank = 1;
    quiet.res = NULL;
    for (int p = 0; p < ctx->npoints; p++) {
      pl_row *row = pl_row_new(&quiet);
      char label[256] = "";
      pl_status ps =
          b->point ? b->point(ctx, S, p, row, label, sizeof label) : PL_OK;
      if (ps == PL_EINFEASIBLE)
        infeasible++;
      if (ctx->rank == 0) {
        if (ps == PL_OK && *pl_row_note_text(row)) /* e.g. the plan's verdict */
          printf("# dry run: point %d/%d %s: %s\n", p + 1, ctx->npoints, label,
                 pl_row_note_text(row));
        else if (ps == PL_OK)
          printf("# dry run: point %d/%d %s\n", p + 1, ctx->npoints, label);
        else
          printf("# dry run: point %d/%d %s: %s: %s\n", p + 1, ctx->npoints,
                 label, ps == PL_EINFEASIBLE ? "infeasible" : "error",
                 pl_last_error());
      }
      pl_row_emit(row);
      if (ps != PL_OK && ps != PL_EINFEASIBLE) {
        if (b->fini)
          b->fini(ctx, S);
        return pl_status_exit_code(ps == PL_EINVAL ? PL_EINVAL : PL_ERUNTIME);
      }
    }
  }
  if (b->fini)
    b->fini(ctx, S);
  if (ctx->rank == 0) {
    printf("dry run: ok, %d point%s (%d infeasible) on %d rank%s, backend "
           "%s: nothing written\n",
           ctx->npoints, ctx->npoints == 1 ? "" : "s", infeasible, ctx->size,
           ctx->size == 1 ? "" : "s", ctx->cuda ? "cuda" : "cpu");
    fflush(stdout);
  }
  return 0;
}

/* The command line of a run, on every rank before anything is created:
 * --dry-run[=RANKS] taken out of argv (*dry: its index, -1 without), the
 * options parsed, the backend (*be), --out and --sweep checked.  0 with *args
 * set; or the exit code with *args NULL (0 after --help). */
static int parse_run_args(const pl_bench *b, optset *o, int argc, char **argv,
                          int rank, pl_args **args, const char **preset,
                          int *dry, int *dry_ranks, pl_backend *be) {
  *args = NULL;
  *dry_ranks = 0;
  *dry = find_dry_run(argc, argv, dry_ranks);
  if (*dry == -2)
    return usage_exit(rank,
                      "--dry-run=RANKS: RANKS must be a positive "
                      "integer%s%s",
                      "", "");
  char **av = argv;
  if (*dry >= 0) {
    av = calloc((size_t)argc + 1, sizeof *av);
    PL_ASSERT(av != NULL);
    for (int i = 0, k = 0; i < argc; i++)
      if (i != *dry)
        av[k++] = argv[i];
    argc--;
  }
  int code = parse(b, o, argc, av, rank, args, preset);
  if (av != argv)
    free(av);
  if (code != 0 || !*args)
    return code < 0 ? 0 : code;
  pl_status st = pl_backend_parse(pl_args_enum_name(*args, "backend"), be);
  const char *outdir = pl_args_str(*args, "out"),
             *sweep = pl_args_str(*args, "sweep");
  if (st == PL_OK && *be == PL_BACKEND_CUDA && !have_gpu() && *dry < 0)
    code = usage_exit(rank, "--backend=cuda: %s (allowed here: cpu)",
                      pl_backend_available(PL_BACKEND_CUDA)
                          ? "no CUDA device visible"
                          : "this build has no CUDA backend",
                      "");
  else if (st != PL_OK || (*be == PL_BACKEND_DRY && !b->dry))
    code = usage_exit(rank, "%s%s", st ? pl_last_error() : "--backend=dry: ",
                      st ? "" : "this bench measures time, a dry device none");
  else if (!outdir || !*outdir)
    code = usage_exit(rank, "--out: empty directory name%s%s", "", "");
  else if (sweep && (!*sweep || strchr(sweep, '/') ||
                     strcmp(sweep, "..") == 0 || strcmp(sweep, ".") == 0))
    code = usage_exit(rank, "--sweep=%s: must be a plain name (no '/')%s",
                      sweep, "");
  if (code) {
    pl_args_free(*args);
    *args = NULL;
  }
  return code;
}

/* The device and the communicator of a run (a dry run validates on a CPU
 * device: no GPU needed where sweeps are submitted).  0, or exit code 3 with
 * the reason printed (other ranks fail in pl_comm_world's watchdog, or also
 * here). */
static int open_device(const pl_bench *b, pl_backend be, bool dry,
                       size_t mem_limit, int rank, pl_dev **dev,
                       pl_comm **comm) {
  pl_status st = pl__bench_dev_create(dry ? PL_BACKEND_CPU : be, rank, dev);
  if (st != PL_OK) {
    fprintf(stderr, "plateau bench %s: rank %d: device: %s\n", b->name, rank,
            pl_last_error());
    return 3;
  }
  pl_mem_set_limit(*dev, PL_ARENA_DEVICE, mem_limit);
  st = pl_comm_world(*dev, comm);
  if (st != PL_OK) {
    fprintf(stderr, "plateau bench %s: rank %d: communicator: %s\n", b->name,
            rank, pl_last_error());
    return 3;
  }
  return 0;
}

/* The result directory, where rank 0 will write (--out, or --out/--sweep,
 * into dir): checked (nothing created) before anything is, so that a bad
 * --out is a usage error.  st: the bench's init status, kept when not OK. */
static pl_status check_results_dir(const pl_bench_ctx *ctx, pl_status st,
                                   const char *outdir, const char *sweep,
                                   char *dir, size_t len) {
  if (sweep)
    snprintf(dir, len, "%s/%s", outdir, sweep);
  else
    snprintf(dir, len, "%s", outdir);
  if (st == PL_OK && !ctx->done && ctx->rank == 0 &&
      pl_results_dir_check(dir) != PL_OK) {
    const bool longer = strlen(outdir) > 200; /* the message stays short */
    st = pl_error_prefix(PL_EINVAL, "--out=%.*s%s%s%s: ", longer ? 40 : 200,
                         outdir, longer ? "..." : "", sweep ? " --sweep=" : "",
                         sweep ? sweep : "");
  }
  return st;
}

/* Run the points (or the bench's main), agree over ranks on how it went and
 * close the result file: the exit code (0 ok, 1 a check failed, 2 bad input
 * the bench saw only once running, 3 a runtime error). */
static int run_and_close(pl_bench_ctx *ctx, void *S) {
  const pl_bench *b = ctx->bench;
  pl_status run_st = b->main ? b->main(ctx, S) : run_points(ctx, S);
  if (run_st != PL_OK)
    fprintf(stderr, "plateau bench %s: rank %d: %s: %s\n", b->name, ctx->rank,
            pl_strerror(run_st), pl_last_error());
  int nrows = 0, nfail = 0;
  pl__rows_counts(&nrows, &nfail);
  int64_t agg[4] = {run_st != PL_OK, nfail, run_st == PL_EINVAL, nrows};
  pl_status st = pl_host_allreduce_i64(ctx->comm, agg, 4, PL_RED_MAX);
  if (st != PL_OK)
    agg[0] = 1;
  int code = agg[0] ? 3 : agg[1] ? 1 : 0;
  if (st == PL_OK && agg[2] && agg[3] == 0) {
    /* bad input a bench could only see once running (every bench checks in
     * init: this is the safety net): a usage error, and the file and the
     * directories made for it are removed */
    code = 2;
    if (ctx->rank == 0 && ctx->res) {
      pl_results_discard(ctx->res);
      ctx->res = NULL;
    }
  }
  if (ctx->rank == 0 && ctx->res) {
    char path[4096];
    snprintf(path, sizeof path, "%s", pl_results_path(ctx->res));
    if (pl_results_close(ctx->res, agg[0] ? "error" : "ok") != PL_OK) {
      fprintf(stderr, "plateau bench %s: %s\n", b->name, pl_last_error());
      if (!code)
        code = 3;
    }
    ctx->res = NULL;
    printf("# rows: %d, check failed: %d\n", nrows, nfail);
    printf("%s\n", path);
    fflush(stdout);
  }
  return code;
}

/* --columns: the bench's header line (rank 0), nothing else. */
static bool print_columns(int argc, char **argv, int rank) {
  for (int i = 0; i < argc; i++)
    if (strcmp(argv[i], "--columns") == 0) {
      if (rank == 0) {
        char *h = pl__rows_header();
        printf("%s\n", h);
        free(h);
      }
      return true;
    }
  return false;
}

int pl_bench_run(const pl_bench *b, int argc, char **argv, int record_argc,
                 char **record_argv) {
  int rank = pl_world_rank();
  pl__rows_begin(b->name, b->columns);
  assert_schema(b);
  if (print_columns(argc, argv, rank)) {
    pl__rows_end();
    return 0;
  }

  /* 1. Parse everything, on every rank, before creating anything. */
  optset o;
  optset_make(b, &o);
  pl_args *args = NULL;
  const char *preset = NULL;
  int dry = -1, dry_ranks = 0;
  pl_backend be = PL_BACKEND_CPU;
  int code = parse_run_args(b, &o, argc, argv, rank, &args, &preset, &dry,
                            &dry_ranks, &be);
  if (!args) {
    optset_free(&o);
    pl__rows_end();
    return code;
  }
  const char *outdir = pl_args_str(args, "out"),
             *sweep = pl_args_str(args, "sweep");

  pl_bench_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.bench = b;
  ctx.args = args;
  ctx.iters = (int)pl_args_int(args, "iters");
  ctx.warmup = (int)pl_args_int(args, "warmup");
  ctx.seed = (uint64_t)pl_args_int(args, "seed");
  ctx.check = pl_args_flag(args, "check");
  ctx.preset = preset;
  ctx.cuda = be == PL_BACKEND_CUDA || be == PL_BACKEND_DRY; /* dry plays one */
  ctx.start_ns = pl_now_ns();
  void *S = calloc(1, b->state ? b->state : 1);
  PL_ASSERT(S != NULL);

  /* 2. Device, communicator; the bench validates its options. */
  pl_dev *dev = NULL;
  pl_comm *comm = NULL;
  bool inited = false;
  code = open_device(b, be, dry >= 0, (size_t)pl_args_size(args, "mem-limit"),
                     rank, &dev, &comm);
  if (code)
    goto done;
  ctx.dev = dev;
  ctx.comm = comm;
  ctx.stream = pl_dev_stream(dev);
  ctx.rank = pl_comm_rank(comm);
  ctx.size = pl_comm_size(comm);
  if (dry >= 0) {
    ctx.dry_run = true;
    if (dry_ranks > 0)
      ctx.size = dry_ranks;
    code = dry_run(&ctx, S);
    goto done; /* not inited: no fini */
  }
  pl_status st = b->init ? b->init(&ctx, S) : PL_OK;
  inited = true;
  char dir[PL_RESULTS_DIR_MAX + 512];
  st = check_results_dir(&ctx, st, outdir, sweep, dir, sizeof dir);
  if (pl_bench_agree(&ctx, &st) != PL_OK) {
    code = 3;
    goto done;
  }
  if (st != PL_OK) {
    if (ctx.rank == 0)
      fprintf(stderr, "plateau bench %s: %s\n", b->name, pl_last_error());
    code = pl_status_exit_code(st == PL_EINVAL ? PL_EINVAL : PL_ERUNTIME);
    goto done;
  }
  if (ctx.done) /* the bench's init() answered the command */
    goto done;

  /* 3. The result file (rank 0), every rank told whether it exists. */
  int64_t created = 1;
  if (ctx.rank == 0) {
    if (open_results(&ctx, dir, sweep, record_argc, record_argv) != PL_OK) {
      fprintf(stderr, "plateau bench %s: %s\n", b->name, pl_last_error());
      created = 0;
    }
  }
  if (pl_host_allreduce_i64(comm, &created, 1, PL_RED_MIN) != PL_OK ||
      !created) {
    code = 3;
    goto done;
  }

  /* 4. Run. */
  code = run_and_close(&ctx, S);

done:
  if (inited && b->fini)
    b->fini(&ctx, S);
  if (ctx.res)
    pl_results_close(ctx.res, "error");
  if (comm)
    pl_comm_destroy(comm);
  if (dev)
    pl_dev_destroy(dev);
  free(S);
  pl_args_free(args);
  optset_free(&o);
  pl__rows_end();
  return code;
}

int pl_bench_main(int argc, char **argv) {
  /* argv as main received it: argv[0] the program, then optionally "bench",
   * then the bench name and its options. */
  pl_status st = pl_init(&argc, &argv);
  if (st != PL_OK) {
    fprintf(stderr, "plateau bench: %s\n", pl_last_error());
    return pl_status_exit_code(st);
  }
  int rank = pl_world_rank(), code;
  int i0 = 1;
  if (i0 < argc && strcmp(argv[i0], "bench") == 0)
    i0++;
  const pl_bench *b = i0 < argc ? pl_bench_find(argv[i0]) : NULL;
  if (i0 < argc &&
      (strcmp(argv[i0], "--help") == 0 || strcmp(argv[i0], "-h") == 0)) {
    if (rank == 0) {
      printf("usage: plateau bench <name> [options]   "
             "(plateau bench <name> --help for its options)\n");
      list_benches(stdout);
    }
    code = 0;
  } else if (i0 >= argc || argv[i0][0] == '-') {
    if (rank == 0)
      list_benches(stderr);
    code = usage_exit(rank, "missing bench name%s%s", "", "");
  } else if (!b) {
    if (rank == 0)
      list_benches(stderr);
    code = usage_exit(rank, "unknown bench '%s'%s", argv[i0], "");
  } else {
    code = pl_bench_run(b, argc - i0 - 1, argv + i0 + 1, argc, argv);
  }
  pl_finalize();
  return code;
}
