/* compare_cmd.h — `plateau compare NEW REF`: a run against a reference,
 * row by row and metric by metric, ReFrame-style (compare_cmd.c; the column
 * classes and the tolerances in compare_rules.c).  Not to be confused with
 * compare.h, the harness's numeric check of one result against its reference
 * computation.
 *
 * Rows are matched by their configuration key: the bench and every identity
 * column of the schema the row has (variant, ranks, dtype, the shape
 * columns ...; not what a run decided, such as the kernel that ran).  Each
 * metric column has a kind that fixes its direction and default tolerance:
 *   time      lower is better, 5%   (time_ms, fwd_ms, ... the timed parts)
 *   rate      higher is better, 5%  (tflops, *_gbs, tok_s_gpu, gparam_s, ...)
 *   memory    lower is better, 0: exact (the tracked allocator's bytes are
 *             deterministic; pool_peak_bytes, the CUDA pool's high-water, 5%)
 *   capacity  higher is better, 0   (max_ok_tokens of a max-batch search)
 * A tolerance is overridden by `--tol [BENCH:]METRIC_OR_KIND=VALUE` (VALUE
 * 5%, 0.05, 0 or skip) or the same lines in a file (--tol-file, and REF's
 * own `tolerances` file when REF is a directory); the most specific wins.
 * Noise: a time beyond its tolerance whose p10–p90 spread overlaps the
 * reference's (a part of the step — attention_ms, zero3_ms, ... — has no
 * percentiles of its own: a band as wide as its row's time_ms p10-p90,
 * centred on it; rates derived from that time likewise; repeated rows of
 * one key widen the spread to all of them), or — a time without
 * percentiles of its own — that differs from the reference by less than
 * the time floor (--time-floor, PL_CMP_TIME_FLOOR_MS), is reported as
 * within the noise, not as a regression (--noise off: it is one).  A row whose
 * status or check got worse (ok -> oom, pass -> fail) fails.  A metric with a
 * value on one side only (nan, inf, "-", no such column) is a row of its own:
 * NEW without one fails (--allow-missing: NO VALUE), REF without one is NO
 * VALUE; both counted.  A REF row with "-" in key columns NEW's rows fill is
 * matched to the one NEW row that agrees on all its other key columns. */
#ifndef PLATEAU_SUITE_COMPARE_CMD_H
#define PLATEAU_SUITE_COMPARE_CMD_H

#include "plateau/status.h"

/* A time without percentiles of its own (a part of the step, or a run of
 * one iteration) that differs from its reference by less than this many ms
 * is within the noise: a CPU run's sub-millisecond parts move by more than
 * their size with the scheduler (its quantum is 1-4 ms).  time_ms, which
 * has its p10/p90, is judged by them alone, so a microsecond kernel's time
 * is still compared. */
#define PL_CMP_TIME_FLOOR_MS 1.0

/* How compare treats a schema column. */
typedef enum pl_cmp_class {
  PL_CMP_IGNORE = 0, /* neither key nor metric (notes, live sets, outcomes) */
  PL_CMP_KEY,        /* part of the configuration key */
  PL_CMP_TIME,
  PL_CMP_RATE,
  PL_CMP_MEMORY,
  PL_CMP_CAPACITY,
  PL_CMP_UNKNOWN /* not classified: a schema column compare does not know */
} pl_cmp_class;

pl_cmp_class pl__compare_class(const char *col);

/* ---- the tolerances (compare_rules.c), used by compare_cmd.c ------------ */
/* The kind names by class, indexed by pl_cmp_class ("-", "key", "time",
 * "rate", "memory", "capacity", "?"). */
extern const char *const pl__compare_kind_names[];

typedef struct pl__compare_tol {
  char bench[64], name[64]; /* bench "" = any; name a column or a kind */
  double v;                 /* fraction; < 0: skip */
} pl__compare_tol;

typedef struct pl__compare_tols { /* in the order given: later specs win */
  pl__compare_tol *v;
  int n;
} pl__compare_tols;

/* Append the spec "[BENCH:]NAME=VALUE" to ts; a bad spec is PL_EINVAL with
 * a message starting with `where`. */
pl_status pl__compare_tol_parse(const char *spec_in, const char *where,
                                pl__compare_tols *ts);
/* Append the specs of a tolerance file (one a line, # comments): PL_EIO
 * when it cannot be read, PL_EINVAL naming file:line for a bad spec. */
pl_status pl__compare_tol_file(const char *path, pl__compare_tols *ts);
/* The tolerance of (bench, metric of kind c) as a fraction; -1: skip. */
double pl__compare_tol_of(const pl__compare_tols *ts, const char *bench,
                          const char *metric, pl_cmp_class c);

/* Entry for `plateau compare`; argv[0] is "compare".  Exit codes: 0 no
 * regression, 1 a regression (a FAIL; with --strict also a MISSING row), 2
 * usage, 3 I/O (unreadable input, no result files), 4 nothing compared (no
 * metric of a matched row passed or failed: no row of NEW matches REF, or
 * every metric was skipped or without a value). */
int pl_compare_main(int argc, char **argv);

#endif
