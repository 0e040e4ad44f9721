/* options.h — the `plateau` program's command line: strict parsing of option
 * values and a declarative option table (the suite's, not part of
 * libplateau).
 *
 * Every parser rejects the whole string or accepts it: trailing garbage, empty
 * strings, overflow, negative sizes and out-of-range values return PL_EINVAL
 * with a message naming the option, the value and what is allowed, e.g.
 *   --tokens=12Q: unknown size suffix 'Q' (allowed: K M G T, Ki Mi Gi Ti)
 * The suite turns PL_EINVAL into exit code 2 before anything is written.
 *
 * Sizes: an integer with an optional suffix K M G T (powers of 1000) or
 * Ki Mi Gi Ti (powers of 1024); a decimal mantissa is allowed when the product
 * is an integer ("1.5Ki" = 1536).  Parsed in exact integer arithmetic and at
 * most INT64_MAX (2^63 - 1: every consumer holds a size in an int64_t or a
 * size_t), so 2^64 - 1 or 16777216Ti (2^64) is an error naming the allowed
 * range, never a wrapped or rounded value.  Lists: comma-separated
 * ("1K,4K,16K", no empty element) or a geometric range "lo:hi:xF" (F in
 * 2..1024; a bad factor is named as the factor) / arithmetic "lo:hi:+S".
 * A table's bounds (pl_opt lo, hi) are clamped to the value's type before
 * any conversion. */
#ifndef PLATEAU_SUITE_OPTIONS_H
#define PLATEAU_SUITE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plateau/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `opt` is only used in messages (e.g. "--tokens"). */
pl_status pl_parse_size(const char *opt, const char *s, uint64_t *out);
pl_status pl_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi,
                       int64_t *out);
pl_status pl_parse_f64(const char *opt, const char *s, double lo, double hi,
                       double *out);
/* names is NULL-terminated; *out is the index. */
pl_status pl_parse_enum(const char *opt, const char *s,
                        const char *const *names, int *out);
/* Up to max sizes; *n receives the count (>= 1). */
pl_status pl_parse_size_list(const char *opt, const char *s, uint64_t *out,
                             int max, int *n);
/* Comma-separated enum values; *n receives the count (>= 1). */
pl_status pl_parse_enum_list(const char *opt, const char *s,
                             const char *const *names, int *out, int max,
                             int *n);

/* ---- declarative option tables ----------------------------------------- */

typedef enum pl_opt_kind {
  PL_OPT_FLAG = 0,  /* no value; present = 1                              */
  PL_OPT_INT,       /* integer in [lo, hi]                                */
  PL_OPT_SIZE,      /* size with suffixes in [lo, hi]                     */
  PL_OPT_F64,       /* real in [lo, hi]                                   */
  PL_OPT_ENUM,      /* one of choices                                     */
  PL_OPT_STR,       /* free string                                        */
  PL_OPT_SIZE_LIST, /* list or range of sizes, each in [lo, hi]           */
  PL_OPT_ENUM_LIST, /* comma-separated choices                            */
} pl_opt_kind;

#define PL_OPT_LIST_MAX 64

typedef struct pl_opt {
  const char *name; /* long name without dashes: "tokens"       */
  char short_name;  /* 'n', or 0                                 */
  pl_opt_kind kind;
  const char *defval; /* default as text (NULL: no default)        */
  const char *help;
  double lo, hi;              /* range for INT, SIZE, F64 and SIZE_LIST    */
  const char *const *choices; /* NULL-terminated, for ENUM and ENUM_LIST   */
} pl_opt;

/* Parsed values of one table; query by long name. */
typedef struct pl_args pl_args;

/* Parse argv[0..argc) against `opts` (terminated by an entry with name NULL):
 * --name=value, --name value, -x value, --flag.  Unknown options, missing
 * values, bad values and stray positional arguments are PL_EINVAL with a
 * message; so is a value taken from the next word that looks like an option
 * ("--out --sweep": write --out=--sweep to mean it; "-5" is a value).
 * `--help`/`-h` sets *help and returns PL_OK.  Positional arguments
 * are allowed only when max_positional > 0. */
pl_status pl_args_parse(const pl_opt *opts, int argc, char **argv,
                        int max_positional, pl_args **out, bool *help);
void pl_args_free(pl_args *a);
/* Print "  --name=VALUE  help (default: x)" lines for a table. */
void pl_args_usage(const pl_opt *opts, void *file /* FILE* */);

/* Accessors abort (PL_ASSERT) on a name not in the table or of another kind:
 * that is a programming error, not bad input. */
bool pl_args_flag(const pl_args *a, const char *name);
int64_t pl_args_int(const pl_args *a, const char *name);
uint64_t pl_args_size(const pl_args *a, const char *name);
double pl_args_f64(const pl_args *a, const char *name);
int pl_args_enum(const pl_args *a, const char *name);
const char *pl_args_enum_name(const pl_args *a, const char *name);
const char *pl_args_str(const pl_args *a, const char *name); /* NULL if unset */
/* List accessors return the count and fill at most max values. */
int pl_args_size_list(const pl_args *a, const char *name, uint64_t *out,
                      int max);
int pl_args_enum_list(const pl_args *a, const char *name, int *out, int max);
/* Was the option given on the command line (not its default)? */
bool pl_args_given(const pl_args *a, const char *name);
int pl_args_npositional(const pl_args *a);
const char *pl_args_positional(const pl_args *a, int i);

/* ---- engine values from option strings ---------------------------------- */

/* SCO's host budget (ops/sco.h): "0", "all", or a size with suffixes
 * ("12Gi"); PL_EINVAL naming opt otherwise. */
struct pl_sco_budget;
pl_status pl_sco_parse_budget(const char *opt, const char *s,
                              struct pl_sco_budget *out);

/* A headroom budget: the optimizer state resident in HBM
 * (--optim-resident) or the kept activations (--keep): "0", "all", "auto"
 * (the planner fills it), a size ("24Gi"), and with attn_ok "attn" (every
 * layer's attention output and LSE).  PL_EINVAL naming opt and the allowed
 * values otherwise. */
typedef enum pl_headroom_mode {
  PL_HEADROOM_BYTES = 0,
  PL_HEADROOM_ATTN = 1,
  PL_HEADROOM_ALL = 2,
  PL_HEADROOM_AUTO = 3
} pl_headroom_mode;
pl_status pl_headroom_parse(const char *opt, const char *s, bool attn_ok,
                            pl_headroom_mode *mode, uint64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
