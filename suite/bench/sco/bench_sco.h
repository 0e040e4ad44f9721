/* bench_sco.h — the options and presets of `plateau bench sco`, shared with
 * `plateau bench maxbatch --bench sco`, whose option table must accept the
 * same names so that it can parse them strictly and forward them to its
 * trials (bench_maxbatch.c).  Internal to suite/. */
#ifndef PLATEAU_SUITE_BENCH_SCO_H
#define PLATEAU_SUITE_BENCH_SCO_H

#include "harness/bench.h"

extern const char *const pl_bench_sco_dtypes[];   /* bf16 f32 */
extern const char *const pl_bench_sco_releases[]; /* context step */
/* none (the options' defaults), small (CPU: seconds on 2 ranks with -n 3
 * -w 0), paper (gpt-oss-20b-like: L=24 H=I=2880 N=64Ki bf16); the entries
 * (no terminator) for maxbatch's table too */
extern const pl_preset pl_bench_sco_presets[];
#define PL_BENCH_SCO_PRESETS                                                   \
  {"none", ""}, {"small", "layers=8 hidden=64 ffn=96 tokens=256 dtype=bf16"},  \
  {                                                                            \
    "paper", "layers=24 hidden=2880 ffn=2880 tokens=64Ki dtype=bf16"           \
  }

/* Entries of the option table (no terminator). */
#define PL_BENCH_SCO_OPTS                                                       \
  {"layers",                                                                    \
   0,                                                                           \
   PL_OPT_INT,                                                                  \
   "24",                                                                        \
   "dense blocks L (boundaries; the paper's gpt-oss-20b has 47)",               \
   1,                                                                           \
   4096,                                                                        \
   NULL},                                                                       \
      {"hidden", 0, PL_OPT_INT, "2880", "hidden size H", 1, 1 << 20, NULL},     \
      {"ffn", 0,       PL_OPT_INT, "2880", "MLP width I (H -> 2I -> H)",        \
       1,     1 << 22, NULL},                                                   \
      {"tokens", 0, PL_OPT_SIZE, "4Ki", "tokens per rank N", 1, 1e12, NULL},    \
      {"dtype", 0, PL_OPT_ENUM,        "bf16", "activation and weight storage", \
       0,       0, pl_bench_sco_dtypes},                                        \
      {"release",                                                               \
       0,                                                                       \
       PL_OPT_ENUM,                                                             \
       "context",                                                               \
       "pinned boundary storage: context (pinned once per point) or step "      \
       "(pinned and released every step, as the paper)",                        \
       0,                                                                       \
       0,                                                                       \
       pl_bench_sco_releases},                                                  \
      {"budgets",                                                               \
       0,                                                                       \
       PL_OPT_STR,                                                              \
       NULL,                                                                    \
       "host budgets per rank, comma list of 0 | all | size (12Gi)",            \
       0,                                                                       \
       0,                                                                       \
       NULL},                                                                   \
  {                                                                             \
    "budget-steps", 0, PL_OPT_INT, NULL,                                        \
        "K: budgets of 0, 1/K, 2/K ... all of the boundaries (default 4 when "  \
        "--budgets is not given)",                                              \
        1, 1024, NULL                                                           \
  }

#endif
