/* bench_maxbatch.c — `plateau bench maxbatch --bench sco|train [the
 * target's options]`: the largest tokens per rank N that completes a step
 * (the paper's Table 13; for train the longest context, S = N·D), by
 * doubling then bisection down to a granularity (--step).
 *
 * Every trial is a child process (trial.h): this same binary run as
 * `bench <target> --tokens=N --budgets=B --no-check -o <this run's dir>
 * --point=maxbatch.<pid>.<i>.<k> …`, optionally behind a launcher
 * (--launcher "mpirun -np 2", split at blanks).  An out-of-memory trial is an
 * `oom` row in the child's own result file (or a child the kernel kills), a
 * crash is a signal: neither can end the search.  The search reads the
 * child's exit status and its rows (found by the point id in the metadata),
 * and writes one row per trial (tokens, status, exit code, the child's peaks
 * and speed) and one summary row per budget (largest clean N, first failing
 * N).  The target train has one search per system of its --system list
 * (its --sco-budget is forwarded like its other options): its trials are
 * `bench train --system=X --tokens=N …` and the rows carry the trial's seq,
 * system and model (the summary: its system's, and the largest clean
 * trial's seq and model).  It does not fit the per-point pattern: main() runs
 * the search with the harness's rows and progress.
 *
 * The search is one process (np 1, no mpirun around it): it must not be a
 * rank of the launch it starts, and it must hold no CUDA context (a context
 * costs HBM on the trial's GPU and must never be inherited), so it runs on
 * the CPU backend and the trials get --trial-backend (auto: cuda when a GPU
 * is visible).  Trials run with --no-check: the budget-0 reference step would
 * need the memory that SCO saves.  Monotonicity in N is assumed (a larger N
 * never fits where a smaller one did not). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/sco/bench_sco.h"
#include "maxbatch_search.h"

static const char *const targets[] = {"sco", "train", NULL};
/* maxbatch's own options; the others are a target's, forwarded to its trials */
static const char *const own[] = {
    "bench",         "step",          "start",      "max-tokens", "launcher",
    "trial-backend", "trial-timeout", "max-trials", NULL};
static const char *const trial_backends[] = {"auto", "cpu", "cuda", NULL};

static const pl_opt maxbatch_opts[] = {
    {"bench", 0, PL_OPT_ENUM, "sco", "the bench whose step is searched", 0, 0,
     targets},
    {"step", 0, PL_OPT_SIZE, "1Ki",
     "granularity of the search (tokens per rank)", 1, 1e12, NULL},
    {"start", 0, PL_OPT_SIZE, "0", "first N tried (0: --step), then doubled", 0,
     1e12, NULL},
    {"max-tokens", 0, PL_OPT_SIZE, "1Gi", "stop doubling beyond this N", 1,
     1e12, NULL},
    {"launcher", 0, PL_OPT_STR, NULL,
     "command in front of each trial, split at blanks (e.g. \"mpirun "
     "--allow-run-as-root -np 2\"); default: run the trial directly",
     0, 0, NULL},
    {"trial-backend", 0, PL_OPT_ENUM, "auto",
     "backend of the trials (auto: cuda when a GPU is visible)", 0, 0,
     trial_backends},
    {"trial-timeout", 0, PL_OPT_STR, "auto",
     "seconds before a trial is killed: auto (proportional to the trial's "
     "work: 120 s + its steps' FLOPs at a floor rate of 1e13 FLOP/s on cuda, "
     "1e9 on cpu; doc/guide/benches.md), a number, or 0 (never)",
     0, 0, NULL},
    {"max-trials", 0, PL_OPT_INT, "64", "trials per budget at most", 1, 10000,
     NULL},
    PL_BENCH_SCO_OPTS,
/* train's entries (its layers, hidden, dtype: sco's entries above) */
#define OPT(name, short_name, kind, defval, help, lo, hi, choices)             \
  {name, short_name, kind, defval, help, lo, hi, choices},
#include "bench/train/train_options.def"
#undef OPT
    {0},
};

static const pl_preset maxbatch_presets[] = {
    PL_BENCH_SCO_PRESETS, PL_BENCH_TRAIN_PRESETS, {NULL, NULL}};

/* Validated before any file exists: a usage error writes nothing. */
static pl_status init(pl_bench_ctx *c, void *st) {
  pl__maxbatch_search *s = st;
  const pl_args *a = c->args;
  if (c->size != 1)
    return pl_set_error(PL_EINVAL,
                        "maxbatch: run the search as one process "
                        "(no mpirun around it; %d ranks here) and give the "
                        "trials' launcher with --launcher",
                        c->size);
  if (c->cuda)
    return pl_set_error(PL_EINVAL,
                        "maxbatch: the search process must hold no "
                        "CUDA context: run it with --backend cpu (the trials "
                        "use --trial-backend, default cuda when a GPU is "
                        "visible)");
  s->target = pl_bench_find(pl_args_enum_name(a, "bench"));
  PL_ASSERT(s->target != NULL);
  s->train = !strcmp(s->target->name, "train");
  PL_TRY(pl__maxbatch_target_options(a, s->target, maxbatch_opts, own));
  if (pl_args_given(a, "budget-steps"))
    return pl_set_error(PL_EINVAL,
                        "maxbatch: --budget-steps is not searched; "
                        "give the budgets with --budgets (one search each)");
  const uint64_t step = pl_args_size(a, "step"),
                 start = pl_args_size(a, "start"),
                 maxt = pl_args_size(a, "max-tokens");
  const uint64_t first = start > 0 ? (start + step - 1) / step * step : step;
  if (start > maxt)
    return pl_set_error(PL_EINVAL,
                        "--start=%llu is above --max-tokens=%llu: no N would "
                        "be tried",
                        (unsigned long long)start, (unsigned long long)maxt);
  if (first > maxt)
    return pl_set_error(
        PL_EINVAL,
        "--step=%llu is above --max-tokens=%llu: the first N (%llu, --start "
        "rounded up to a multiple of --step) would not be tried",
        (unsigned long long)step, (unsigned long long)maxt,
        (unsigned long long)first);
  /* what this machine has (a dry run may validate on another: skipped) */
  if (!c->dry_run && pl_args_enum(a, "trial-backend") == 2 &&
      !(pl_backend_available(PL_BACKEND_CUDA) && pl_cuda_device_count() > 0))
    return pl_set_error(PL_EINVAL,
                        "--trial-backend=cuda: %s (allowed here: auto, cpu)",
                        pl_backend_available(PL_BACKEND_CUDA)
                            ? "no CUDA device visible"
                            : "this build has no CUDA backend");
  const char *launcher = pl_args_str(a, "launcher");
  if (launcher && !c->dry_run) {
    char prog[1024] = "";
    sscanf(launcher, " %1023s", prog);
    if (!prog[0] || !pl_trial_program_found(prog))
      return pl_set_error(PL_EINVAL,
                          "--launcher=%s: '%s' is not a program (not found in "
                          "PATH or not executable)",
                          launcher, prog);
  }
  PL_TRY(pl__maxbatch_budgets(a, s));
  const char *tt = pl_args_str(a, "trial-timeout");
  s->timeout_auto = strcmp(tt, "auto") == 0;
  if (!s->timeout_auto) {
    int64_t v;
    if (pl_parse_i64("--trial-timeout", tt, 0, 10000000, &v) != PL_OK)
      return pl_set_error(PL_EINVAL,
                          "--trial-timeout=%s: not allowed (allowed: auto, or "
                          "seconds 0..10000000; 0: never)",
                          tt);
    s->timeout_s = (int)v;
  }
  const int tbe = pl_args_enum(a, "trial-backend");
  const bool gpu =
      pl_backend_available(PL_BACKEND_CUDA) && pl_cuda_device_count() > 0;
  s->rate = tbe == 2 || (tbe == 0 && gpu) ? 1e13 : 1e9;
  s->step_flops = 24.0 * (double)pl_args_int(a, "layers") *
                  (double)pl_args_int(a, "hidden") *
                  (double)pl_args_int(a, "ffn");
  s->steps = (pl_args_given(a, "iters") ? c->iters : 1) +
             (pl_args_given(a, "warmup") ? c->warmup : 0);
  if (s->train) {
    PL_TRY(pl_model_preset(pl_args_enum_name(a, "model"), &s->model));
    s->D = (int)pl_args_int(a, "D");
    s->micro = (int)pl_args_int(a, "micro");
  }
  s->max_trials = (int)pl_args_int(a, "max-trials");
  /* progress: at most this many trials (doubling from the first N to
   * --max-tokens, then bisection down to --step), per budget */
  int bound = 1;
  for (uint64_t n = first; n <= maxt / 2; n *= 2)
    bound++;
  for (uint64_t w = maxt / step; w > 1; w = (w + 1) / 2)
    bound++;
  c->npoints = s->nb * (bound < s->max_trials ? bound : s->max_trials);
  c->npoints_bound = true;
  return PL_OK;
}

static pl_status search_all(pl_bench_ctx *c, void *st) {
  pl__maxbatch_search *s = st;
  PL_TRY(pl__maxbatch_base_argv(c, s, maxbatch_opts));
  s->envp = pl_trial_env();
  printf("# trial command:");
  for (int i = 0; i < s->base.n; i++)
    printf(" %s", s->base.v[i]);
  printf(" --tokens=N --budgets=B --point=…\n");
  fflush(stdout);
  int64_t step = (int64_t)pl_args_size(c->args, "step");
  int64_t start = (int64_t)pl_args_size(c->args, "start");
  int64_t maxt = (int64_t)pl_args_size(c->args, "max-tokens");
  pl_status rs = PL_OK;
  for (int i = 0; i < s->nb && rs == PL_OK; i++) {
    s->budget = s->budgets[i];
    s->system = s->systems[i];
    s->index = i;
    s->ntrials = 0;
    rs = pl__maxbatch_run(c, s, step, start, maxt);
  }
  return rs;
}

static void fini(pl_bench_ctx *c, void *st) {
  pl__maxbatch_search *s = st;
  free(s->envp);
  pl_argv_free(&s->base);
}

const pl_bench pl_bench_maxbatch = {
    .name = "maxbatch",
    .summary = "largest tokens per rank that completes a step (trials in child "
               "processes; Table 13)",
    .opts = maxbatch_opts,
    .presets = maxbatch_presets,
    .preset_cpu = "none",
    .preset_cuda = "none",
    .columns =
        "kind\ttarget\tbudget\ttokens\tseq\tranks\texit_code\t"
        "dev_peak_bytes\thost_peak_bytes\ttime_ms\ttok_s_gpu\tmax_ok_tokens\t"
        "first_fail_tokens\ttrials\tsystem\tmodel\ttrial_file",
    .state = sizeof(pl__maxbatch_search),
    .stateful = true,
    .init = init,
    .main = search_all,
    .fini = fini,
};
