/* bench.h — the harness every `plateau bench <name>` runs through, and what
 * a bench provides (the model: nccl-tests' src/common.{h,cu} with one small
 * file per operation).
 *
 * A bench describes itself in a `const pl_bench pl_bench_<name>` (one
 * BENCH(name, report) line in suite/harness/benches.def): its options and named
 * presets, its result columns (names from suite/results/schema.def), the points
 * it enumerates, and per point its setup, the timed unit (run), the reference
 * comparison (check), the work (FLOPs, bytes) and teardown.  The harness does
 * the rest, the same way for every bench:
 *
 *   parse    common flags + the bench's options, the preset's values as
 *            defaults (given options win); a bad value or an init() refusal
 *            (PL_EINVAL) prints a message and exits 2 before anything exists
 *            (init() may answer the command itself — --describe — and set
 *            c->done: exit 0, nothing written)
 *   per point, on every rank, in order:
 *     point()     identity columns of the row, the progress label;
 *                 PL_EINFEASIBLE: an `infeasible` row, the next point
 *     setup()     allocations and inputs; a failure on any rank (agreed over
 *                 ranks) is an oom / infeasible / error row, and the sweep
 *                 goes on
 *     measure     -w warm-ups of run() (more while the last is much slower
 *                 than the one before, and a first timed run much slower
 *                 than the rest becomes one: first-use costs never reach a
 *                 result; the note says so); the peaks of every arena reset; -n
 *                 timed runs, each after a barrier, bracketed by events on
 *                 the device stream (the monotonic clock on the CPU), an
 *                 iteration's time the slowest rank's; median, p10, p90;
 *                 device and pinned-host peaks, each tag's peak, the pool
 *                 high-water (max over ranks) and rank 0's live set
 *     check()     (--check) compare with the reference through compare.h; the
 *                 harness agrees it over ranks: max_err, check, the note
 *     finish()    bench columns of the measurement (parts timed with
 *                 pl_bench_time, counters) and the work: tflops from
 *                 w.flops, the `rate` column from w.bytes
 *     teardown()  frees what setup() made
 *   rows     the standard columns the bench lists (time_ms, time_p10_ms,
 *            time_p90_ms, dev_peak_bytes, op_peak_bytes, host_peak_bytes,
 *            pool_peak_bytes, live_set, <tag>_bytes, tflops, max_err) are
 *            filled by the harness unless finish() set them; rank 0 writes
 *            the row to the result file and a human line to stdout; on the
 *            CPU backend an ok row's note says "CPU backend: times are CPU
 *            times"
 *   exit     0 ok, 1 a row with check=fail, 2 usage, 3 runtime error (the
 *            run itself: no result file, a communication failure, main()
 *            failing); oom, infeasible and error rows are results
 *
 * A bench that does not fit the per-point pattern (maxbatch: trials in child
 * processes) gives main() instead and uses the same rows, progress, timing,
 * memory and check helpers. */
#ifndef PLATEAU_SUITE_BENCH_H
#define PLATEAU_SUITE_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "compare.h"
#include "options.h"
#include "plateau/plateau.h"

struct pl_results;
struct pl_bench;

/* A named table of option values, "name=value name=value": defaults of
 * the bench's (or common) options, applied under --preset NAME; options
 * given on the command line win. */
typedef struct pl_preset {
  const char *name, *values;
} pl_preset;

/* What the unit of a point does, per rank: FLOPs (tflops column) and bytes
 * moved (the bench's `rate` column), both per timed run.  0: not reported. */
typedef struct pl_work {
  double flops, bytes;
} pl_work;

#define PL_BENCH_MAX_TAGS 8
/* The most runs the harness adds as warm-ups to a point whose warm-ups had
 * not converged (harness_measure.c). */
#define PL_BENCH_EXTRA_WARMUPS 4

/* What the harness measured at a point (max over ranks). */
typedef struct pl_meas {
  pl_stats t;          /* the timed unit, ms                       */
  int warmups;         /* warm-ups run: -w, or more when they had not
                          converged (harness_measure.c)            */
  double slow;         /* then the first slow run over the one before
                          or the runs after it (0: converged)      */
  size_t dev_peak;     /* tracked device peak                      */
  size_t dev_resident; /* device bytes live when the unit started  */
  size_t host_peak;    /* tracked pinned-host peak                 */
  size_t pool_peak;    /* pool high-water (= dev_peak on the CPU)  */
  size_t tag_peak[PL_BENCH_MAX_TAGS]; /* bench->tags, device arena       */
  char live_set[512]; /* rank 0's live set at its device peak     */
} pl_meas;

typedef struct pl_bench_ctx {
  const struct pl_bench *bench;
  pl_dev *dev;
  pl_comm *comm;     /* world */
  pl_stream *stream; /* the device's stream: events of the timed unit */
  int rank, size;
  bool cuda;     /* the CUDA backend, or a dry device playing it */
  pl_args *args; /* the bench's own options plus the common ones */
  int iters, warmup;
  uint64_t seed;
  bool check;         /* --check: compare with the reference (default on) */
  const char *preset; /* the preset applied, or NULL */
  int npoints;        /* init() sets it */
  bool npoints_bound; /* npoints is an upper bound (a search), not a count */
  bool dry_run;       /* --dry-run: validation only, maybe on another machine */
  bool done; /* init() did the whole command (--describe): exit 0, no file */
  const pl_meas *meas; /* during check() and finish(): this point's */
  /* the harness's own */
  struct pl_results *res; /* rank 0 only */
  int point;
  uint64_t start_ns;
} pl_bench_ctx;

typedef struct pl_row pl_row;

typedef struct pl_bench {
  const char *name;
  const char *summary; /* one line for `plateau --help` */
  const pl_opt *opts;  /* the bench's own options, or NULL */
  /* --help lists opts in these groups, each "title: name name ..." (long
   * names without dashes), in this order; an option no group names is
   * listed under "other" (a new option shows even before it is grouped).
   * NULL-terminated; NULL: opts in table order. */
  const char *const *groups;
  const pl_preset *presets;             /* terminated by {NULL}, or NULL */
  const char *preset_cpu, *preset_cuda; /* default preset per backend */
  /* Its columns, tab-separated, every name from suite/results/schema.def; the
   * harness adds `bench` first and status, check, note last. */
  const char *columns;
  const char *const *tags; /* device tags reported as <tag>_bytes */
  const char *rate;        /* column of w.bytes / time (GB/s), or NULL */
  size_t state;            /* size of the bench's state (zeroed) */
  /* Each run changes what the next one computes (a training step updates
   * the weights the next step routes with): on the CPU backend, where a
   * slow run comes from other work on the cores, the harness adds no
   * warm-ups, so the measured steps, and their exact memory, are those of
   * -w (harness_measure.c). */
  bool stateful;
  /* Takes --backend dry: a dry device playing a GPU (backend/dry/dry.h),
   * whose rows carry what the step allocates (the memory columns), no
   * time. */
  bool dry;

  /* Parse the bench's options, validate (PL_EINVAL: a usage error, nothing
   * written), enumerate the points: set c->npoints. */
  pl_status (*init)(pl_bench_ctx *c, void *st);
  /* Point p's identity columns and progress label (`label`, n bytes). */
  pl_status (*point)(pl_bench_ctx *c, void *st, int p, pl_row *row, char *label,
                     size_t n);
  pl_status (*setup)(pl_bench_ctx *c, void *st, int p);
  pl_status (*run)(void *st); /* the timed unit */
  pl_status (*check)(pl_bench_ctx *c, void *st, int p, pl_check *chk);
  pl_status (*finish)(pl_bench_ctx *c, void *st, int p, pl_row *row,
                      pl_work *w);
  void (*teardown)(pl_bench_ctx *c, void *st, int p);
  void (*fini)(pl_bench_ctx *c, void *st); /* after the last point */
  /* Instead of point ... teardown: a bench that runs its own loop. */
  pl_status (*main)(pl_bench_ctx *c, void *st);
} pl_bench;

/* ---- rows ---------------------------------------------------------------- */
/* Only rank 0 writes; other ranks' rows are discarded by pl_row_emit, so
 * benches build them on every rank.  Setting a column the bench does not
 * list aborts (a programming error). */
pl_row *pl_row_new(pl_bench_ctx *ctx);
void pl_row_str(pl_row *r, const char *col, const char *v);
void pl_row_i64(pl_row *r, const char *col, int64_t v);
void pl_row_f64(pl_row *r, const char *col, double v); /* %.6g; NaN "nan" */
bool pl_row_has(const pl_row *r, const char *col);     /* set already? */
/* Append to the row's note ("; " between parts). */
void pl_row_note(pl_row *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *pl_row_note_text(const pl_row *r); /* the note so far ("" none) */
/* status: "ok" | "oom" | "infeasible" | "error"; note (may be NULL)
 * replaces the note. */
void pl_row_status(pl_row *r, const char *status, const char *note);
/* From a pl_status: PL_OK ok, PL_ENOMEM oom, PL_EINFEASIBLE infeasible,
 * anything else error; the note gets pl_last_error(). */
void pl_row_status_from(pl_row *r, pl_status s);
/* check: "pass" | "fail" | "skip" (default "skip"). */
void pl_row_check(pl_row *r, const char *check);
/* Print the human line on stdout and write the row (rank 0); free r.
 * Unset columns are written as "-". */
pl_status pl_row_emit(pl_row *r);

/* ---- timing, memory, agreement --------------------------------------------
 */
typedef pl_status (*pl_bench_fn)(void *arg);

/* Run fn ctx->warmup times, then ctx->iters timed times on stream s: before
 * each timed run a barrier over ctx->comm, then events around fn on s;
 * an iteration's time is the max over ranks.  *out gets the median and
 * spread in ms.  A failure on a rank stops its runs but not its barriers;
 * the status is agreed over ranks (every rank returns the worst). */
pl_status pl_bench_time(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                        pl_stream *s, pl_stats *out);
/* The same with explicit warm-ups and iterations. */
pl_status pl_bench_time_n(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                          pl_stream *s, int warmup, int iters, pl_stats *out);
/* The measurement of a point (the harness's, for main() benches too):
 * warm-ups, the peaks reset, timed runs, the memory of the timed runs. */
pl_status pl_bench_measure(pl_bench_ctx *ctx, pl_bench_fn fn, void *arg,
                           pl_meas *m);

/* Every rank learns the worst status of any rank so that all take the same
 * branch (none is left in a collective): *st becomes it, with a message
 * when another rank failed.  Returns a communication failure (fatal). */
pl_status pl_bench_agree(pl_bench_ctx *ctx, pl_status *st);

/* "[bench] point i/n  elapsed 12.3s  ETA 40s  label" on stderr (rank 0). */
void pl_bench_progress(pl_bench_ctx *ctx, const char *label);

/* ---- the registry and the command ------------------------------------------
 */
const pl_bench *pl_bench_find(const char *name);
int pl_bench_count(void);
const pl_bench *pl_bench_at(int i);

/* Entry for `plateau bench <name> [options]`; returns the process exit code
 * (pl_init and pl_finalize around pl_bench_run). */
int pl_bench_main(int argc, char **argv);
/* Run bench b with its options argv[0..argc) in an initialized process;
 * record_argc/argv go to the metadata.  Returns the exit code. */
int pl_bench_run(const pl_bench *b, int argc, char **argv, int record_argc,
                 char **record_argv);

#endif
