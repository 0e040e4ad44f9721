/* bench.h — the benchmark harness every `plateau bench <name>` uses.
 *
 * A bench is a table entry (name, options, columns, run function) listed in
 * suite/benches.def.  The harness (bench.c) does everything else the same way
 * for all of them: pl_init, device (--backend) and world communicator, the
 * common flags (-n iters, -w warm-ups, --seed, -o output dir, --check,
 * --sweep, --mem-limit), strict parsing of the bench's own options (bad value:
 * message + exit 2, nothing written), the result file with its metadata record
 * (rank 0), progress on stderr, and the exit code.
 *
 * A bench's run function computes rows and emits them with the row builder;
 * only rank 0 writes, other ranks' pl_row_emit calls are no-ops, so benches
 * may call it on every rank.  A point that runs out of memory is a row with
 * status `oom` (pl_row_status_from), never a crash. */
#ifndef PLATEAU_SUITE_BENCH_H
#define PLATEAU_SUITE_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "options.h"
#include "plateau/plateau.h"

struct pl_results;
struct pl_bench;

typedef struct pl_bench_ctx {
  const struct pl_bench *bench;
  pl_dev *dev;
  pl_comm *comm; /* world */
  int rank, size;
  pl_args *args; /* the bench's own options plus the common ones */
  int iters, warmup;
  uint64_t seed;
  bool check;     /* --check: compare against the reference (default on) */
  struct pl_results *res; /* rank 0 only; NULL elsewhere */
  int point, npoints;     /* progress */
  uint64_t start_ns;
} pl_bench_ctx;

typedef struct pl_bench {
  const char *name;
  const char *summary;  /* one line for `plateau --help`          */
  const pl_opt *opts;   /* the bench's own options, or NULL        */
  /* Tab-separated column names of its rows; the harness appends
   * "status\tcheck\tnote" to every file's header. */
  const char *columns;
  pl_status (*run)(pl_bench_ctx *ctx);
} pl_bench;

/* ---- rows ---------------------------------------------------------------- */
typedef struct pl_row pl_row;

pl_row *pl_row_new(pl_bench_ctx *ctx);
/* Setting a column not in the bench's list aborts (programming error). */
void pl_row_str(pl_row *r, const char *col, const char *v);
void pl_row_i64(pl_row *r, const char *col, int64_t v);
void pl_row_f64(pl_row *r, const char *col, double v); /* %.6g; NaN -> "nan" */
/* status: "ok" | "oom" | "infeasible" | "error"; note may be NULL. */
void pl_row_status(pl_row *r, const char *status, const char *note);
/* status from a pl_status: PL_OK ok, PL_ENOMEM oom, PL_EINFEASIBLE infeasible,
 * anything else error (the note gets pl_last_error()). */
void pl_row_status_from(pl_row *r, pl_status s);
/* check: "pass" | "fail" | "skip" (default "skip"). */
void pl_row_check(pl_row *r, const char *check);
/* Print a human line on stdout (rank 0), write the row (rank 0), free r.
 * Unset columns are written as "-". */
pl_status pl_row_emit(pl_row *r);

/* ---- timing --------------------------------------------------------------- */
typedef pl_status (*pl_bench_fn)(void *arg);

/* Run fn ctx->warmup times, then ctx->iters timed times on stream s: before
 * each timed iteration a barrier over ctx->comm, then events around fn on s
 * (the monotonic clock on the CPU backend); an iteration's time is the max
 * over ranks.  *out gets the median and spread in milliseconds.  The first
 * failing status of fn is returned (and no stats). */
pl_status pl_bench_time(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                        pl_stream *s, pl_stats *out);

/* "[bench] point i/n  elapsed 12.3s  ETA 40s  label" on stderr (rank 0). */
void pl_bench_progress(pl_bench_ctx *ctx, const char *label);

/* The registry (benches.def). */
const pl_bench *pl_bench_find(const char *name);
int pl_bench_count(void);
const pl_bench *pl_bench_at(int i);

/* Entry for `plateau bench <name> [options]`; returns the process exit code. */
int pl_bench_main(int argc, char **argv);

#endif
