/* train_args.h — the command line of `plateau bench train` (train_args.c):
 * its option table (the entries maxbatch shares are train_options.def),
 * --help's groups, the presets, the options into a configuration and its
 * points, the token stream and --describe.  Internal to suite/. */
#ifndef PLATEAU_SUITE_TRAIN_ARGS_H
#define PLATEAU_SUITE_TRAIN_ARGS_H

#include <stdio.h>

#include "harness/bench.h"
#include "train_types.h"

/* Presets (entries, no terminator): cpu, the tiny model at small contexts
 * (f32, so that --check compares with the reference step); proxy120b,
 * proxy241b, proxy667b, one rank of the paper's 16-, 32- and 64-GPU runs of
 * its three models on one GPU at the paper's contexts 128K–1M (D and P
 * beyond one rank are virtual groups, train/layout.h).  These are the knobs
 * maxbatch's trials take as given; `bench train` adds config=auto to the
 * proxies (PL_BENCH_TRAIN_AUTO), so there the planner chooses D, P, c, β,
 * the SCO budget and the optimizer per context for the W_v-rank run unless
 * the command line gives them. */
#define PL__TRAIN_PRESET_CPU "model=tiny seq=64,128 dtype=f32 iters=3 warmup=1"
#define PL__TRAIN_PROXY(model, wv)                                             \
  "model=" model " virtual-world=" wv " seq=128Ki,256Ki,512Ki,1Mi "            \
  "dtype=bf16 head=fused dispatch=pllep optim=stream sco-budget=0 iters=1 "    \
  "warmup=1"
#define PL_BENCH_TRAIN_PRESETS                                                 \
  {"cpu", PL__TRAIN_PRESET_CPU}, {"proxy120b", PL__TRAIN_PROXY("120b", "16")}, \
      {"proxy241b", PL__TRAIN_PROXY("241b", "32")}, {                          \
    "proxy667b", PL__TRAIN_PROXY("667b", "64")                                 \
  }
#define PL_BENCH_TRAIN_AUTO " config=auto"
/* bench train's presets: the proxies with config=auto. */
#define PL_BENCH_TRAIN_AUTO_PRESETS                                            \
  {"cpu", PL__TRAIN_PRESET_CPU},                                               \
      {"proxy120b", PL__TRAIN_PROXY("120b", "16") PL_BENCH_TRAIN_AUTO},        \
      {"proxy241b", PL__TRAIN_PROXY("241b", "32") PL_BENCH_TRAIN_AUTO}, {      \
    "proxy667b", PL__TRAIN_PROXY("667b", "64") PL_BENCH_TRAIN_AUTO             \
  }

/* The bench's options (NULL-terminated), --help's groups of them (bench.h:
 * a new option goes into one list) and its presets. */
extern const pl_opt pl__train_opts[];
extern const char *const pl__train_groups[];
extern const pl_preset pl__train_presets[];

/* Parse and validate (PL_EINVAL with a message: exit 2, nothing written):
 * the points are every context × system (--tune: fsdp2 at every point of
 * pl_fsdp2_tune_points; --points FILE: the file's points instead of the
 * contexts). */
pl_status pl__train_parse(pl_bench_ctx *c, pl__train_args *a);
/* The system whose knob option NAME (without "--") is: "fsdp2" (cp, ep, ac,
 * ac-freq, fsdp2-optim), "plateau" (D, P, head, dispatch, sco-budget, optim,
 * chunk-cap, bucket, slots), NULL for an option every system reads.  Given
 * on the command line with its system not in --system, it is refused. */
const char *pl__train_knob_owner(const char *name);
void pl__train_args_free(pl__train_args *a);
/* a->data: --data (synthetic, seeded by --seed, or a token shard) for a
 * model of vocabulary V, opened again when V differs from the last. */
pl_status pl__train_data(pl_bench_ctx *c, pl__train_args *a, int64_t V);
/* --describe: every system's description of every point on f. */
pl_status pl__train_describe(pl_bench_ctx *c, const pl__train_args *a, FILE *f);

#endif
