/* bench.c — the harness every `plateau bench <name>` runs through (bench.h).
 *
 * Why one harness: every bench must parse strictly (bad value: message naming
 * the option, exit 2, nothing written), record the same metadata, time the same
 * way (barrier + events per iteration, max over ranks, median and spread), and
 * map statuses to the same exit codes.  Order matters: all ranks parse the
 * whole command line before any device, communicator or file exists, so a
 * usage error leaves no trace on disk.
 *
 * Exit codes: 0 ok, 1 a row with check=fail, 2 usage, 3 runtime error. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results.h"

/* ---- registry ------------------------------------------------------------ */
#define BENCH(name, report) extern const pl_bench pl_bench_##name;
#include "benches.def"
#undef BENCH
#undef PEER

static const pl_bench *const registry[] = {
#define BENCH(name, report) &pl_bench_##name,
#include "benches.def"
#undef BENCH
#undef PEER
};

int pl_bench_count(void) { return (int)(sizeof registry / sizeof registry[0]); }
const pl_bench *pl_bench_at(int i) {
  return i >= 0 && i < pl_bench_count() ? registry[i] : NULL;
}
const pl_bench *pl_bench_find(const char *name) {
  for (int i = 0; name && i < pl_bench_count(); i++)
    if (strcmp(registry[i]->name, name) == 0) return registry[i];
  return NULL;
}

/* ---- common options ------------------------------------------------------ */
static const char *const backend_names[] = {"cpu", "cuda", NULL};

/* The backend default is computed at run time (cuda when a GPU is present),
 * so the merged table is built per call. */
static const pl_opt common_opts[] = {
    {"backend", 0, PL_OPT_ENUM, NULL,
     "device backend (cuda when a GPU is present, else cpu)", 0, 0,
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

static pl_opt *merged_opts(const pl_bench *b) {
  int nb = 0;
  while (b->opts && b->opts[nb].name) nb++;
  pl_opt *o = calloc((size_t)(N_COMMON + nb + 1), sizeof *o);
  PL_ASSERT(o != NULL);
  memcpy(o, common_opts, sizeof common_opts);
  for (int i = 0; i < nb; i++) {
    for (int j = 0; j < N_COMMON; j++) {
      PL_ASSERT(strcmp(b->opts[i].name, common_opts[j].name) != 0);
      PL_ASSERT(!b->opts[i].short_name ||
                b->opts[i].short_name != common_opts[j].short_name);
    }
    o[N_COMMON + i] = b->opts[i];
  }
  return o; /* terminated by the zeroed entry */
}

static bool have_gpu(void) {
  return pl_backend_available(PL_BACKEND_CUDA) && pl_cuda_device_count() > 0;
}

static void bench_usage(const pl_bench *b, const pl_opt *opts, FILE *f) {
  fprintf(f, "usage: plateau bench %s [options]\n  %s\n\noptions of %s:\n",
          b->name, b->summary, b->name);
  pl_args_usage(opts + N_COMMON, f);
  fprintf(f, "\ncommon options:\n");
  pl_opt common[N_COMMON + 1];
  memcpy(common, opts, sizeof(pl_opt) * N_COMMON);
  memset(&common[N_COMMON], 0, sizeof common[N_COMMON]);
  pl_args_usage(common, f);
  fprintf(f,
          "\nrows: %s\tstatus\tcheck\tnote\n"
          "exit: 0 ok, 1 a check failed, 2 usage, 3 runtime error\n",
          b->columns);
}

/* ---- harness state (one run per process) ---------------------------------- */
static struct {
  int ncols;
  char **cols;  /* the bench's column names */
  int *widths;  /* human table */
  int nfail, nrows;
} H;

static void parse_columns(const char *columns) {
  H.ncols = 1;
  for (const char *c = columns; *c; c++)
    if (*c == '\t') H.ncols++;
  H.cols = calloc((size_t)H.ncols, sizeof *H.cols);
  H.widths = calloc((size_t)H.ncols, sizeof *H.widths);
  PL_ASSERT(H.cols && H.widths);
  const char *s = columns;
  for (int i = 0; i < H.ncols; i++) {
    const char *t = strchr(s, '\t');
    size_t len = t ? (size_t)(t - s) : strlen(s);
    H.cols[i] = strndup(s, len);
    H.widths[i] = (int)len + 2 > 11 ? (int)len + 2 : 11;
    s = t ? t + 1 : s + len;
  }
}

static void free_columns(void) {
  for (int i = 0; i < H.ncols; i++) free(H.cols[i]);
  free(H.cols);
  free(H.widths);
  memset(&H, 0, sizeof H);
}

/* ---- rows ---------------------------------------------------------------- */
struct pl_row {
  pl_bench_ctx *ctx;
  char **vals;
  char status[16];
  char check[8];
  char note[512];
};

pl_row *pl_row_new(pl_bench_ctx *ctx) {
  pl_row *r = calloc(1, sizeof *r);
  PL_ASSERT(r != NULL);
  r->ctx = ctx;
  r->vals = calloc((size_t)H.ncols, sizeof *r->vals);
  PL_ASSERT(r->vals != NULL);
  strcpy(r->status, "ok");
  strcpy(r->check, "skip");
  return r;
}

/* Fields are tab-separated single lines: tabs and newlines become spaces. */
static char *clean_dup(const char *v) {
  char *d = strdup(v ? v : "-");
  PL_ASSERT(d != NULL);
  for (char *c = d; *c; c++)
    if (*c == '\t' || *c == '\n' || *c == '\r') *c = ' ';
  if (!*d) {
    free(d);
    d = strdup("-");
  }
  return d;
}

void pl_row_str(pl_row *r, const char *col, const char *v) {
  for (int i = 0; i < H.ncols; i++) {
    if (strcmp(H.cols[i], col) == 0) {
      free(r->vals[i]);
      r->vals[i] = clean_dup(v);
      return;
    }
  }
  fprintf(stderr, "pl_row: column '%s' is not in the columns of bench %s\n",
          col, r->ctx->bench->name);
  PL_ASSERT(!"row column not in the bench's list");
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

void pl_row_status(pl_row *r, const char *status, const char *note) {
  PL_ASSERT(status && (strcmp(status, "ok") == 0 || strcmp(status, "oom") == 0 ||
                       strcmp(status, "infeasible") == 0 ||
                       strcmp(status, "error") == 0));
  snprintf(r->status, sizeof r->status, "%s", status);
  if (note) snprintf(r->note, sizeof r->note, "%s", note);
}

void pl_row_status_from(pl_row *r, pl_status s) {
  const char *st = s == PL_OK            ? "ok"
                   : s == PL_ENOMEM      ? "oom"
                   : s == PL_EINFEASIBLE ? "infeasible"
                                         : "error";
  const char *msg = s == PL_OK ? NULL : pl_last_error();
  char note[512];
  if (msg && *msg)
    snprintf(note, sizeof note, "%s: %s", pl_strerror(s), msg);
  else if (s != PL_OK)
    snprintf(note, sizeof note, "%s", pl_strerror(s));
  pl_row_status(r, st, s == PL_OK ? NULL : note);
}

void pl_row_check(pl_row *r, const char *check) {
  PL_ASSERT(check && (strcmp(check, "pass") == 0 || strcmp(check, "fail") == 0 ||
                      strcmp(check, "skip") == 0));
  snprintf(r->check, sizeof r->check, "%s", check);
}

static void print_table_header(void) {
  printf("#");
  for (int i = 0; i < H.ncols; i++)
    printf(" %*s", H.widths[i] - (i == 0 ? 2 : 1), H.cols[i]);
  printf("  %-6s %-5s %s\n", "status", "check", "note");
  fflush(stdout);
}

pl_status pl_row_emit(pl_row *r) {
  pl_status st = PL_OK;
  pl_bench_ctx *ctx = r->ctx;
  if (ctx->rank == 0) {
    char *note = clean_dup(r->note[0] ? r->note : "-");
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
    /* Human line. */
    for (int i = 0; i < H.ncols; i++) /* always one space between columns */
      printf(" %*s", H.widths[i] - 1, r->vals[i] ? r->vals[i] : "-");
    printf("  %-6s %-5s %s\n", r->status, r->check, note);
    fflush(stdout);
    if (ctx->res) st = pl_results_append(ctx->res, line);
    free(line);
    free(note);
    H.nrows++;
    if (strcmp(r->check, "fail") == 0) H.nfail++;
  }
  for (int i = 0; i < H.ncols; i++) free(r->vals[i]);
  free(r->vals);
  free(r);
  return st;
}

/* ---- timing --------------------------------------------------------------- */
pl_status pl_bench_time(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                        pl_stream *s, pl_stats *out) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < ctx->warmup; i++) PL_TRY(fn(arg));
  PL_TRY(pl_stream_sync(s));
  int n = ctx->iters;
  double *t = calloc((size_t)n, sizeof *t);
  PL_ASSERT(t != NULL);
  pl_event *e0 = NULL, *e1 = NULL;
  pl_status st = pl_event_create(ctx->dev, &e0);
  if (st == PL_OK) st = pl_event_create(ctx->dev, &e1);
  for (int i = 0; st == PL_OK && i < n; i++) {
    st = pl_barrier(ctx->comm);
    if (st == PL_OK) st = pl_event_record(e0, s);
    if (st == PL_OK) st = fn(arg);
    if (st == PL_OK) st = pl_event_record(e1, s);
    if (st == PL_OK) st = pl_event_sync(e1);
    float ms = 0;
    if (st == PL_OK) st = pl_event_elapsed_ms(e0, e1, &ms);
    t[i] = ms;
  }
  if (e0) pl_event_destroy(e0);
  if (e1) pl_event_destroy(e1);
  /* An iteration lasts as long as its slowest rank. */
  if (st == PL_OK) st = pl_host_allreduce_f64(ctx->comm, t, (size_t)n, PL_RED_MAX);
  if (st == PL_OK) *out = pl_stats_of(t, n);
  free(t);
  return st;
}

void pl_bench_progress(pl_bench_ctx *ctx, const char *label) {
  ctx->point++;
  if (ctx->rank != 0) return;
  double el = pl_elapsed_s(ctx->start_ns);
  char eta[32] = "?";
  if (ctx->point > 1 && ctx->npoints >= ctx->point) {
    double per = el / (ctx->point - 1);
    snprintf(eta, sizeof eta, "%.0fs", per * (ctx->npoints - ctx->point + 1));
  }
  fprintf(stderr, "[%s] point %d/%d  elapsed %.1fs  ETA %s  %s\n",
          ctx->bench->name, ctx->point, ctx->npoints, el, eta,
          label ? label : "");
  fflush(stderr);
}

/* ---- main ---------------------------------------------------------------- */

/* Usage errors: every rank parsed the same argv, so every rank exits 2; only
 * rank 0 speaks. */
static int usage_exit(int rank, const char *fmt, const char *a, const char *b) {
  if (rank == 0) {
    fprintf(stderr, "plateau bench: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
  }
  pl_finalize();
  return 2;
}

static void list_benches(FILE *f) {
  fprintf(f, "benches:\n");
  for (int i = 0; i < pl_bench_count(); i++)
    fprintf(f, "  %-10s %s\n", registry[i]->name, registry[i]->summary);
}

int pl_bench_main(int argc, char **argv) {
  /* argv as main received it: argv[0] the program, then optionally "bench",
   * then the bench name and its options. */
  pl_status st = pl_init(&argc, &argv);
  if (st != PL_OK) {
    fprintf(stderr, "plateau bench: %s\n", pl_last_error());
    return pl_status_exit_code(st);
  }
  int full_argc = argc; /* recorded as the run's argv */
  char **full_argv = argv;
  int rank = pl_world_rank();
  int i0 = 1;
  if (i0 < argc && strcmp(argv[i0], "bench") == 0) i0++;
  if (i0 >= argc || argv[i0][0] == '-') {
    if (i0 < argc && (strcmp(argv[i0], "--help") == 0 ||
                      strcmp(argv[i0], "-h") == 0)) {
      if (rank == 0) {
        printf("usage: plateau bench <name> [options]   "
               "(plateau bench <name> --help for its options)\n");
        list_benches(stdout);
      }
      pl_finalize();
      return 0;
    }
    if (rank == 0) list_benches(stderr);
    return usage_exit(rank, "missing bench name%s%s", "", "");
  }
  const pl_bench *b = pl_bench_find(argv[i0]);
  if (!b) {
    if (rank == 0) list_benches(stderr);
    return usage_exit(rank, "unknown bench '%s'%s", argv[i0], "");
  }

  /* 1. Parse everything, on every rank, before creating anything. */
  pl_opt *opts = merged_opts(b);
  static char backend_default[8];
  snprintf(backend_default, sizeof backend_default, "%s",
           have_gpu() ? "cuda" : "cpu");
  opts[0].defval = backend_default;
  pl_args *args = NULL;
  bool help = false;
  st = pl_args_parse(opts, argc - i0 - 1, argv + i0 + 1, 0, &args, &help);
  if (help) {
    if (rank == 0) bench_usage(b, opts, stdout);
    pl_args_free(args);
    free(opts);
    pl_finalize();
    return 0;
  }
  if (st != PL_OK) {
    free(opts);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pl_last_error());
    return usage_exit(rank, "%s: %s", b->name, msg);
  }
  pl_backend be = PL_BACKEND_CPU;
  st = pl_backend_parse(pl_args_enum_name(args, "backend"), &be);
  if (st == PL_OK && be == PL_BACKEND_CUDA && !have_gpu()) {
    pl_args_free(args);
    free(opts);
    return usage_exit(rank, "--backend=cuda: %s (allowed here: cpu)",
                      pl_backend_available(PL_BACKEND_CUDA)
                          ? "no CUDA device visible"
                          : "this build has no CUDA backend",
                      "");
  }
  if (st != PL_OK) {
    pl_args_free(args);
    free(opts);
    return usage_exit(rank, "%s%s", pl_last_error(), "");
  }
  const char *outdir = pl_args_str(args, "out");
  const char *sweep = pl_args_str(args, "sweep");
  if (!outdir || !*outdir) {
    pl_args_free(args);
    free(opts);
    return usage_exit(rank, "--out: empty directory name%s%s", "", "");
  }
  if (sweep && (!*sweep || strchr(sweep, '/') || strcmp(sweep, "..") == 0)) {
    pl_args_free(args);
    free(opts);
    return usage_exit(rank, "--sweep=%s: must be a plain name (no '/')%s",
                      sweep, "");
  }

  pl_bench_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.bench = b;
  ctx.args = args;
  ctx.iters = (int)pl_args_int(args, "iters");
  ctx.warmup = (int)pl_args_int(args, "warmup");
  ctx.seed = (uint64_t)pl_args_int(args, "seed");
  ctx.check = pl_args_flag(args, "check");
  ctx.start_ns = pl_now_ns();
  parse_columns(b->columns);

  /* 2. Device, communicator, result file. */
  int code = 0;
  pl_dev *dev = NULL;
  pl_comm *comm = NULL;
  pl_results *res = NULL;
  st = pl_dev_create(be, -1, &dev);
  if (st != PL_OK) {
    fprintf(stderr, "plateau bench %s: rank %d: device: %s\n", b->name, rank,
            pl_last_error());
    code = 3;
    goto done; /* other ranks fail in pl_comm_world's watchdog, or also here */
  }
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, (size_t)pl_args_size(args, "mem-limit"));
  st = pl_comm_world(dev, &comm);
  if (st != PL_OK) {
    fprintf(stderr, "plateau bench %s: rank %d: communicator: %s\n", b->name,
            rank, pl_last_error());
    code = 3;
    goto done;
  }
  ctx.dev = dev;
  ctx.comm = comm;
  ctx.rank = pl_comm_rank(comm);
  ctx.size = pl_comm_size(comm);

  int64_t created = 1;
  if (ctx.rank == 0) {
    char dir[4096];
    if (sweep)
      snprintf(dir, sizeof dir, "%s/%s", outdir, sweep);
    else
      snprintf(dir, sizeof dir, "%s", outdir);
    size_t clen = strlen(b->columns) + 32;
    char *cols = malloc(clen);
    PL_ASSERT(cols != NULL);
    snprintf(cols, clen, "%s\tstatus\tcheck\tnote", b->columns);
    const char *const *meta =
        pl_results_meta(dev, comm, b->name, full_argc, full_argv);
    /* The harness' own keys after the common ones. */
    static char v_iters[24], v_warm[24], v_seed[24], v_lim[24];
    snprintf(v_iters, sizeof v_iters, "%d", ctx.iters);
    snprintf(v_warm, sizeof v_warm, "%d", ctx.warmup);
    snprintf(v_seed, sizeof v_seed, "%llu", (unsigned long long)ctx.seed);
    snprintf(v_lim, sizeof v_lim, "%llu",
             (unsigned long long)pl_args_size(args, "mem-limit"));
    const char *extra[] = {"iters", v_iters, "warmup", v_warm, "seed", v_seed,
                           "check", ctx.check ? "on" : "off",
                           "mem_limit_bytes", v_lim,
                           "sweep", sweep ? sweep : "-",
                           "point", pl_args_str(args, "point")
                                        ? pl_args_str(args, "point") : "-"};
    int nm = 0;
    while (meta[nm]) nm++;
    int ne = (int)(sizeof extra / sizeof extra[0]);
    const char **kv = calloc((size_t)(nm + ne + 1), sizeof *kv);
    PL_ASSERT(kv != NULL);
    memcpy(kv, meta, sizeof(char *) * (size_t)nm);
    memcpy(kv + nm, extra, sizeof(char *) * (size_t)ne);
    st = pl_results_create(dir, b->name, cols, kv, &res);
    if (st != PL_OK) {
      fprintf(stderr, "plateau bench %s: %s\n", b->name, pl_last_error());
      created = 0;
    } else {
      /* Human view: the metadata as '#' lines, then the table header. */
      for (int i = 0; kv[i]; i += 2) printf("# %s: %s\n", kv[i], kv[i + 1]);
      printf("# result file: %s\n", pl_results_path(res));
      print_table_header();
    }
    free(kv);
    free(cols);
  }
  st = pl_host_allreduce_i64(comm, &created, 1, PL_RED_MIN);
  if (st != PL_OK || !created) {
    code = 3;
    goto done;
  }
  ctx.res = res;

  /* 3. Run. */
  pl_status run_st = b->run(&ctx);
  if (run_st != PL_OK)
    fprintf(stderr, "plateau bench %s: rank %d: %s: %s\n", b->name, ctx.rank,
            pl_strerror(run_st), pl_last_error());
  int64_t agg[4] = {run_st != PL_OK, H.nfail, run_st == PL_EINVAL, H.nrows};
  st = pl_host_allreduce_i64(comm, agg, 4, PL_RED_MAX);
  if (st != PL_OK) agg[0] = 1;
  code = agg[0] ? 3 : agg[1] ? 1 : 0;
  if (st == PL_OK && agg[2] && agg[3] == 0) {
    /* bad input the bench could only see once running (e.g. a budget list):
     * a usage error, and nothing is left half-written */
    code = 2;
    if (ctx.rank == 0 && res) {
      char path[4096];
      snprintf(path, sizeof path, "%s", pl_results_path(res));
      pl_results_close(res, "error");
      res = NULL;
      unlink(path);
    }
  }
  if (ctx.rank == 0 && res) {
    char path[4096];
    snprintf(path, sizeof path, "%s", pl_results_path(res));
    if (pl_results_close(res, agg[0] ? "error" : "ok") != PL_OK) {
      fprintf(stderr, "plateau bench %s: %s\n", b->name, pl_last_error());
      if (!code) code = 3;
    }
    res = NULL;
    printf("# rows: %d, check failed: %d\n", H.nrows, H.nfail);
    printf("%s\n", path);
    fflush(stdout);
  }

done:
  if (res) pl_results_close(res, "error");
  if (comm) pl_comm_destroy(comm);
  if (dev) pl_dev_destroy(dev);
  pl_args_free(args);
  free(opts);
  free_columns();
  pl_finalize();
  return code;
}
