/* bench_train.h — what `plateau bench train` (bench_train.c) shares with its
 * helpers (train_args.c: options into a configuration; train_check.c: the
 * reference step; train_rows.c: the row of a point) and with
 * `plateau bench maxbatch --bench train`, whose option table must accept the
 * same names to parse them strictly and forward them to its trials
 * (bench_maxbatch.c).  Internal to suite/.
 *
 * PL_BENCH_TRAIN_OPTS holds every option of the bench except four whose
 * names `bench sco` also has (layers, hidden, dtype, tokens): maxbatch's
 * table lists sco's entries for those (the same kinds: INT, INT, ENUM
 * bf16|f32; tokens is set per trial), the train bench its own. */
#ifndef PLATEAU_SUITE_BENCH_TRAIN_H
#define PLATEAU_SUITE_BENCH_TRAIN_H

#include <stdio.h>

#include "bench.h"
#include "train_system.h"

extern const char *const pl__train_dispatch_names[]; /* ep llep pllep      */
extern const char *const pl__train_head_names[];     /* ring fused dense vp */
extern const char *const pl__train_optim_names[];    /* stream hybrid cpu  */

/* The dense bf16 GEMM rate MFU is taken against when neither --gemm-tflops
 * nor --calib gives one: one H200's cuBLAS bf16 8192³ GEMM as
 * `plateau bench calib` measures it (results/reference/h200: 685–788). */
#define PL_TRAIN_H200_GEMM_TFLOPS 790.0

/* Entries of the option table (no terminator). */
#define PL_BENCH_TRAIN_OPTS                                                      \
  {"model",                                                                      \
   0,                                                                            \
   PL_OPT_ENUM,                                                                  \
   "tiny",                                                                       \
   "model preset (README: Training end to "                                      \
   "end)",                                                                       \
   0,                                                                            \
   0,                                                                            \
   pl_model_preset_names},                                                       \
      {"experts", 0, PL_OPT_INT, NULL, "routed experts E", 0, 1 << 20, NULL},    \
      {"topk", 0, PL_OPT_INT, NULL, "routes per token k", 1, 1024, NULL},        \
      {"vocab", 0, PL_OPT_SIZE, NULL, "vocabulary V", 2, 1 << 30, NULL},         \
      {"expert-ffn", 0,   PL_OPT_SIZE, NULL, "routed expert width I", 1,         \
       1 << 22,      NULL},                                                      \
      {"shared-ffn",                                                             \
       0,                                                                        \
       PL_OPT_SIZE,                                                              \
       NULL,                                                                     \
       "shared expert width (0: no shared expert)",                              \
       0,                                                                        \
       1 << 22,                                                                  \
       NULL},                                                                    \
      {"dense-layers",                                                           \
       0,                                                                        \
       PL_OPT_INT,                                                               \
       NULL,                                                                     \
       "the first N layers have a dense SwiGLU FFN",                             \
       0,                                                                        \
       4096,                                                                     \
       NULL},                                                                    \
      {"dense-ffn", 0, PL_OPT_SIZE, NULL, "dense FFN width", 1, 1 << 22, NULL},  \
      {"heads", 0, PL_OPT_INT, NULL, "query heads n_q", 1, 4096, NULL},          \
      {"kv-heads", 0, PL_OPT_INT, NULL, "key/value heads n_kv", 1, 4096, NULL},  \
      {"head-dim", 0, PL_OPT_INT, NULL, "head dimension d", 2, 512, NULL},       \
      {"D", 'D',     PL_OPT_INT, "1", "ranks sharing one sequence (Ulysses)",    \
       1,   1 << 20, NULL},                                                      \
      {"P", 'P',     PL_OPT_INT, "1", "Ring-DTP group size (vocabulary shards)", \
       1,   1 << 20, NULL},                                                      \
      {"virtual-world",                                                          \
       0,                                                                        \
       PL_OPT_INT,                                                               \
       "0",                                                                      \
       "W_v: each process plays one rank of a W_v-rank run (the one-GPU "        \
       "proxy; 0: the real world)",                                              \
       0,                                                                        \
       1 << 20,                                                                  \
       NULL},                                                                    \
      {"seq",                                                                    \
       0,                                                                        \
       PL_OPT_SIZE_LIST,                                                         \
       "128",                                                                    \
       "contexts S, one point each (N = S/D tokens per rank)",                   \
       1,                                                                        \
       1e12,                                                                     \
       NULL},                                                                    \
      {"micro", 0, PL_OPT_INT, "1", "micro-batches per step", 1, 4096, NULL},    \
      {"dispatch",                                                               \
       0,                                                                        \
       PL_OPT_ENUM,                                                              \
       "pllep",                                                                  \
       "MoE dispatch: ep | llep | pllep (PipelinedLLEP)",                        \
       0,                                                                        \
       0,                                                                        \
       pl__train_dispatch_names},                                                \
      {"head",                                                                   \
       0,                                                                        \
       PL_OPT_ENUM,                                                              \
       "ring",                                                                   \
       "vocabulary head: ring (Ring-DTP over P) | fused | dense | vp",           \
       0,                                                                        \
       0,                                                                        \
       pl__train_head_names},                                                    \
      {"sco-budget",                                                             \
       0,                                                                        \
       PL_OPT_STR,                                                               \
       "0",                                                                      \
       "SCO host budget per rank: 0 | all | a size (24Gi)",                      \
       0,                                                                        \
       0,                                                                        \
       NULL},                                                                    \
      {"optim",                                                                  \
       0,                                                                        \
       PL_OPT_ENUM,                                                              \
       "stream",                                                                 \
       "optimizer: stream (OffloadStreamAdamW) | hybrid | cpu",                  \
       0,                                                                        \
       0,                                                                        \
       pl__train_optim_names},                                                   \
      {"chunk-cap",                                                              \
       0,                                                                        \
       PL_OPT_SIZE,                                                              \
       "8Ki",                                                                    \
       "PipelinedLLEP per-source token cap c (0: N, one chunk)",                 \
       0,                                                                        \
       1e12,                                                                     \
       NULL},                                                                    \
      {"lanes", 0, PL_OPT_INT, "2", "extra expert-GEMM streams", 0, 16, NULL},   \
      {"bucket", 0,    PL_OPT_SIZE, "100M", "optimizer bucket beta (params)",    \
       1,        1e12, NULL},                                                    \
      {"slots", 0, PL_OPT_INT, "2", "optimizer staging slots s", 1, 64, NULL},   \
      {"data",                                                                   \
       0,                                                                        \
       PL_OPT_STR,                                                               \
       "synthetic",                                                              \
       "synthetic | PATH of a token shard (`plateau tokens`)",                   \
       0,                                                                        \
       0,                                                                        \
       NULL},                                                                    \
      {"system",                                                                 \
       0,                                                                        \
       PL_OPT_STR,                                                               \
       "plateau",                                                                \
       "comma list of training systems, one point each (built in: plateau)",     \
       0,                                                                        \
       0,                                                                        \
       NULL},                                                                    \
      {"describe",                                                               \
       0,                                                                        \
       PL_OPT_FLAG,                                                              \
       NULL,                                                                     \
       "print the parameter counts and every state's bytes per rank, run "       \
       "nothing",                                                                \
       0,                                                                        \
       0,                                                                        \
       NULL},                                                                    \
      {"gemm-tflops",                                                            \
       0,                                                                        \
       PL_OPT_F64,                                                               \
       "0",                                                                      \
       "dense GEMM rate for mfu (0: from --calib; else 790, one H200, on "       \
       "cuda)",                                                                  \
       0,                                                                        \
       1e6,                                                                      \
       NULL},                                                                    \
      {"calib",                                                                  \
       0,                                                                        \
       PL_OPT_STR,                                                               \
       NULL,                                                                     \
       "calib result file, or a directory: its newest calib.*.tsv (the best "    \
       "ok gemm row)",                                                           \
       0,                                                                        \
       0,                                                                        \
       NULL},                                                                    \
  {                                                                              \
    "profile", 0, PL_OPT_FLAG, "1",                                              \
        "the per-component time breakdown (--no-profile: off)", 0, 0, NULL       \
  }

/* Presets (entries, no terminator): cpu, the tiny model at small contexts
 * (f32, so that --check compares with the reference step); proxy120b, one
 * rank of the 16-GPU 120B run on one GPU at 32K and 128K. */
#define PL_BENCH_TRAIN_PRESETS                                                 \
  {"cpu", "model=tiny seq=64,128 dtype=f32 iters=3 warmup=1"}, {               \
    "proxy120b",                                                               \
        "model=120b virtual-world=16 seq=32Ki,128Ki dtype=bf16 head=fused "    \
        "dispatch=pllep optim=stream sco-budget=0 iters=3 warmup=1"            \
  }

/* ---- train_args.c ----------------------------------------------------------
 */
#define PL_TRAIN_MAX_SYS 4

/* What the command line asks for. */
typedef struct pl__train_args {
  pl_train_setup u; /* S unset: one per point */
  int64_t seq[PL_OPT_LIST_MAX];
  int nseq;
  const pl_train_system *sys[PL_TRAIN_MAX_SYS];
  int nsys;
  bool describe;
  double gemm_tflops; /* 0: unknown */
  char gemm_src[160]; /* where it came from */
  pl_data *data;      /* opened, owned */
} pl__train_args;

/* Parse and validate (PL_EINVAL with a message: exit 2, nothing written). */
pl_status pl__train_parse(pl_bench_ctx *c, pl__train_args *a);
/* --describe: every system's description of every point on f. */
pl_status pl__train_describe(pl_bench_ctx *c, const pl__train_args *a, FILE *f);

/* ---- train_check.c ---------------------------------------------------------
 */
/* Does the reference step apply (why not: into why)? */
bool pl__train_check_applies(pl_bench_ctx *c, const pl_train_system *sys,
                             const pl_train_setup *u, char *why, size_t n);
/* One forward + backward of the system at step index st against the
 * single-rank reference on the same weights and sequences: loss and every
 * gradient (normwise, 1e-4; loss 1e-5).  Collective. */
pl_status pl__train_check_reference(pl_bench_ctx *c, const pl_train_system *sys,
                                    void *h, const pl_train_setup *u,
                                    pl_data *data, int64_t st, pl_check *chk);

/* ---- train_rows.c ----------------------------------------------------------
 */
/* The columns of a measured point from its steps' results res[0..n) (the
 * first `warmup` are warm-ups): memory, the time breakdown, losses, rates,
 * against the measured median step time_ms.  Collective (max over ranks). */
pl_status pl__train_row(pl_bench_ctx *c, const pl__train_args *a,
                        const pl_train_system *sys, void *h,
                        const pl_train_setup *u, const pl_step_result *res,
                        int n, pl_row *row, pl_work *w);

#endif
