/* bench_train.h — what `plateau bench train` (bench_train.c) shares with its
 * helpers (train_args.c: options into a configuration; train_check.c: the
 * finite losses and the reference step; train_rows.c: the row of a point;
 * train_plan.c: the planner's prediction and choice, the pinned-host limit)
 * and with `plateau bench maxbatch --bench train`, whose option table must
 * accept the same names to parse them strictly and forward them to its
 * trials (bench_maxbatch.c).  Internal to suite/.
 *
 * PL_BENCH_TRAIN_OPTS holds every option of the bench except four whose
 * names `bench sco` also has (layers, hidden, dtype, tokens): maxbatch's
 * table lists sco's entries for those (the same kinds: INT, INT, ENUM
 * bf16|f32; tokens is set per trial), the train bench its own; and except
 * the options that make several points of one context (--tune,
 * --tune-micro, --points), which a search cannot take, and the planner's
 * (--config, --step-tokens, --verify: a search measures, its trials are
 * run with --verify). */
#ifndef PLATEAU_SUITE_BENCH_TRAIN_H
#define PLATEAU_SUITE_BENCH_TRAIN_H

#include <stdio.h>

#include "../baselines/train_baselines.h"
#include "harness/bench.h"
#include "train_system.h"


/* The dense bf16 GEMM rate MFU is taken against when neither --gemm-tflops
 * nor --calib gives one: one H200's cuBLAS bf16 8192³ GEMM as
 * `plateau bench calib` measures it (results/reference/h200x2: 685–788). */
#define PL_TRAIN_H200_GEMM_TFLOPS 790.0

/* Entries of the option table (no terminator). */
#define PL_BENCH_TRAIN_OPTS                                                      \
  {"model",                                                                      \
   0,                                                                            \
   PL_OPT_ENUM,                                                                  \
   "tiny",                                                                       \
   "model preset (doc/guide/training.md: Training end "                          \
   "to end)",                                                                    \
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
       "MoE dispatch: " PL_MOE_SHORT_NAMES_JOINED(" | ") " (PipelinedLLEP)",      \
       0,                                                                        \
       0,                                                                        \
       pl_moe_variant_short_names},                                              \
      {"head",                                                                   \
       0,                                                                        \
       PL_OPT_ENUM,                                                              \
       "ring",                                                                   \
       "vocabulary head: ring (Ring-DTP over P) | fused | dense | vp",           \
       0,                                                                        \
       0,                                                                        \
       pl_train_head_names},                                                     \
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
       pl_train_optim_names},                                                    \
      {"chunk-cap",                                                              \
       0,                                                                        \
       PL_OPT_SIZE,                                                              \
       "8Ki",                                                                    \
       "PipelinedLLEP per-source token cap c (0: N, one chunk)",                 \
       0,                                                                        \
       1e12,                                                                     \
       NULL},                                                                    \
      {"lanes", 0, PL_OPT_INT, "2", "extra expert-GEMM streams", 0, 16, NULL},   \
      {"optim-resident",                                                         \
       0,                                                                        \
       PL_OPT_STR,                                                               \
       "0",                                                                      \
       "HBM for the optimizer's fp32 master, m, v (whole buckets, updated "      \
       "there): 0 | all | auto (the plan fills the headroom) | a size",          \
       0,                                                                        \
       0,                                                                        \
       NULL},                                                                    \
      {"keep",                                                                   \
       0,                                                                        \
       PL_OPT_STR,                                                               \
       "0",                                                                      \
       "activations kept for the backward: 0 | attn (attention output + LSE) "   \
       "| all (whole attention halves) | auto (the plan fills) | a size",        \
       0,                                                                        \
       0,                                                                        \
       NULL},                                                                    \
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
       "comma list of training systems, one point each: plateau, fsdp2 "         \
       "(--tune: plateau,fsdp2; --points: fsdp2)",                               \
       0,                                                                        \
       0,                                                                        \
       NULL},                                                                    \
      {"cp",                                                                     \
       0,                                                                        \
       PL_OPT_INT,                                                               \
       "1",                                                                      \
       "fsdp2: context-parallel degree (divides W)",                             \
       1,                                                                        \
       1 << 20,                                                                  \
       NULL},                                                                    \
      {"ep",                                                                     \
       0,                                                                        \
       PL_OPT_INT,                                                               \
       NULL,                                                                     \
       "expert parallelism: fsdp2's degree (divides W_v and E; not given: 1); "  \
       "plateau's "                                                              \
       "expert group (not given: all W_v ranks; Ep < W: groups of Ep ranks, "    \
       "each holding all experts as ZeRO-3 units over the W/Ep groups)",        \
       1,                                                                        \
       1 << 20,                                                                  \
       NULL},                                                                    \
      {"ac",                                                                     \
       0,                                                                        \
       PL_OPT_ENUM,                                                              \
       "full",                                                                   \
       "fsdp2: activation checkpointing per layer: full | selective | none",     \
       0,                                                                        \
       0,                                                                        \
       pl_plan_ac_names},                                                        \
      {"ac-freq",                                                                \
       0,                                                                        \
       PL_OPT_INT,                                                               \
       "2",                                                                      \
       "fsdp2: selective AC checkpoints layer l iff (l + 1) % ac-freq == 0",     \
       1,                                                                        \
       4096,                                                                     \
       NULL},                                                                    \
      {"fsdp2-optim",                                                            \
       0,                                                                        \
       PL_OPT_ENUM,                                                              \
       "gpu",                                                                    \
       "fsdp2: AdamW states on the gpu, or cpu (CPUOffloadPolicy)",              \
       0,                                                                        \
       0,                                                                        \
       pl_fsdp2_optim_names},                                                    \
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
  "model=" model " virtual-world=" wv " seq=128Ki,256Ki,512Ki,1Mi "           \
  "dtype=bf16 head=fused dispatch=pllep optim=stream sco-budget=0 iters=1 "    \
  "warmup=1"
#define PL_BENCH_TRAIN_PRESETS                                                 \
  {"cpu", PL__TRAIN_PRESET_CPU},                                               \
      {"proxy120b", PL__TRAIN_PROXY("120b", "16")},                            \
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

/* ---- train_args.c ----------------------------------------------------------
 */
/* The bench's options (NULL-terminated), --help's groups of them (bench.h:
 * a new option goes into one list) and its presets. */
extern const pl_opt pl__train_opts[];
extern const char *const pl__train_groups[];
extern const pl_preset pl__train_presets[];
#define PL_TRAIN_MAX_SYS 4

/* One point of the run: a system at one context with its knobs. */
typedef struct pl__train_point {
  const pl_train_system *sys;
  pl_train_setup u;  /* S, the model, the knobs of this point */
  int warmup, iters; /* a --points point's (-1: the command line's) */
} pl__train_point;

/* What the command line asks for. */
typedef struct pl__train_args {
  pl_train_setup u; /* S unset: one per point */
  int64_t seq[PL_OPT_LIST_MAX];
  int nseq;
  const pl_train_system *sys[PL_TRAIN_MAX_SYS];
  int nsys;
  pl__train_point *pts; /* every point, in order (owned) */
  int npts;
  bool describe;
  double gemm_tflops; /* 0: unknown */
  char gemm_src[160]; /* where it came from */
  pl_data *data;      /* the stream of vocabulary data_V, owned */
  int64_t data_V;
  /* the planner (train_plan.c) */
  pl_plan_machine mc;  /* the run's machine, the same on every rank */
  bool verify;         /* run points predicted not to fit              */
  bool auto_cfg;       /* --config auto                                 */
  int64_t step_tokens; /* --step-tokens (0: one pass, --micro)          */
} pl__train_args;

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

/* ---- train_plan.c ----------------------------------------------------------
 */
/* The planner's prediction of a point. */
typedef struct pl__train_pred {
  bool have;             /* the planner models the point              */
  bool fits;             /* device and host within the run's machine  */
  size_t dev_peak, host; /* device peak, pinned host bytes per rank   */
  double time_ms;        /* the step on the run's machine             */
  char binding[40];      /* the term that binds ("" when it fits)     */
  char why[320];         /* "plan: fits (...)", "plan: does not fit,
                            binding term ...", or why none            */
  /* a proxy (W_v > W): the W_v-rank run it plays (pl_plan_proxy_comm) */
  bool have_proj;        /* a proxy whose W_v-rank run was predicted  */
  double comm_ms;        /* its exposed communication less the proxy's */
  double proj_run_ms;    /* its whole predicted step                  */
  double comm_lo_ms, comm_hi_ms; /* comm_ms with ib_gbs scaled by 1 ∓
                                    PL_PLAN_LINK_FRAC (NAN: none)     */
  int proj_gpn;          /* GPUs per node it was projected on         */
} pl__train_pred;

/* The run's machine for the planner (collective): the defaults of the
 * backend's target with calib (a calib result file; NULL: none) read in,
 * device memory --mem-limit or the device's (less the planner's reserve on
 * a GPU), host memory the host's available RAM (less the 2 GiB the bench
 * keeps), the ranks sharing a host; the smallest over the ranks. */
pl_status pl__train_machine(pl_bench_ctx *c, const char *calib,
                            pl_plan_machine *mc);
/* The prediction of point u of sys at W ranks on a->mc (out->have false,
 * the reason in out->why, when the planner does not model it). */
void pl__train_predict(const pl__train_args *a, const pl_train_system *sys,
                       const pl_train_setup *u, int W, pl__train_pred *out);
/* Point u before launch (the same verdict on every rank: a->mc is agreed):
 * the prediction into *pr and the row's pred_* columns; a point predicted
 * not to fit is PL_EINFEASIBLE (an infeasible row naming the binding term)
 * unless --verify; else the verdict goes to the row's note. */
pl_status pl__train_plan_point(pl_bench_ctx *c, const pl__train_args *a,
                               const pl_train_system *sys,
                               const pl_train_setup *u, pl_row *row,
                               pl__train_pred *pr);
/* A failure st of a predicted point (create, a step): its message with the
 * plan's verdict appended (st unchanged; PL_OK passes). */
pl_status pl__train_plan_fail(const pl__train_pred *pr, pl_status st);
/* The pinned-host limit of a point (on: set, off: lifted): one process
 * alone on its host gets MemAvailable less 2 GiB on top of what the arena
 * holds (an allocation beyond it is an oom row, not the kernel's OOM
 * killer); several ranks: no limit. */
void pl__train_host_limit(pl_bench_ctx *c, bool on);
/* --config auto: the planner's choice (pl_plan_auto) of the knobs of sys
 * the command line leaves, written into u (u->chosen says what, u->fill the
 * headroom fill; nothing fits: the closest, whose row is then infeasible).
 * PL_EINVAL naming the point when the planner cannot search it. */
pl_status pl__train_auto(const pl__train_args *a, const pl_args *args,
                         const pl_train_system *sys, pl_train_setup *u, int W);
/* --optim-resident auto, --keep auto (without --config auto): the
 * planner's fill of the headroom of point u with its other knobs as given
 * (pl_plan_fill), written into u->sc and u->fill.  PL_EINVAL naming the
 * point when the planner cannot model it. */
pl_status pl__train_fill(const pl__train_args *a, const pl_train_system *sys,
                         pl_train_setup *u, int W);
/* --describe: the planner's budget of u (plateau plan's table) on f. */
void pl__train_plan_describe(const pl__train_args *a,
                             const pl_train_system *sys,
                             const pl_train_setup *u, int W, FILE *f);

/* ---- train_proj.c ----------------------------------------------------------
 * A proxy's projection of the W_v-rank run it plays: compute and memory
 * measured, communication modelled.  The columns standin_ms,
 * standin_side_ms (the virtual groups' stand-ins, median over the timed
 * steps, max over ranks; profile on), compute_ms = time_ms − standin_ms,
 * comm_model_ms (pr->comm_ms), step_proj_ms = compute_ms + comm_model_ms,
 * tok_s_gpu_proj and tflops_proj at step_proj_ms, pred_proj_ms (the
 * planner's whole step of that run), and the note saying so.  Nothing for a
 * real run (W_v = W).  Collective. */
pl_status pl__train_proj_row(pl_bench_ctx *c, const pl__train_args *a,
                             const pl_train_system *sys,
                             const pl_train_setup *u, const pl__train_pred *pr,
                             const pl_step_result *res, int n, pl_row *row);

/* ---- train_check.c ---------------------------------------------------------
 */
/* Every step's loss res[0..n) finite (the check of every point). */
void pl__train_check_losses(const pl_step_result *res, int n, pl_check *chk);
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
/* The identity columns of point u at `ranks` ranks (virtual world Wv, D
 * ranks per sequence): the layout, the model's sizes and parameter counts,
 * and the planner's choice (--config auto) in the note. */
void pl__train_identity(const pl_train_setup *u, int ranks, int Wv, int D,
                        pl_row *row);
/* The columns of a measured point from its steps' results res[0..n) (the
 * first `warmup` are warm-ups): memory, the time breakdown, losses, rates,
 * against the measured median step time_ms.  Collective (max over ranks). */
pl_status pl__train_row(pl_bench_ctx *c, const pl__train_args *a,
                        const pl_train_system *sys, void *h,
                        const pl_train_setup *u, const pl_step_result *res,
                        int n, pl_row *row, pl_work *w);

#endif
