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
#include <unistd.h>

#include "bench.h"
#include "bench_sco.h"
#include "bench_train.h"
#include "ops/sco.h"
#include "results.h"
#include "trial.h"

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
     "1e9 on cpu; README), a number, or 0 (never)",
     0, 0, NULL},
    {"max-trials", 0, PL_OPT_INT, "64", "trials per budget at most", 1, 10000,
     NULL},
    PL_BENCH_SCO_OPTS,
    PL_BENCH_TRAIN_OPTS, /* train's layers, hidden, dtype: sco's entries */
    {0},
};

static const pl_preset maxbatch_presets[] = {
    PL_BENCH_SCO_PRESETS, PL_BENCH_TRAIN_PRESETS, {NULL, NULL}};

typedef struct search {
  char budgets[64][32];
  int nb;
  const pl_bench *target;
  char dir[PL_RESULTS_DIR_MAX + 512];
  pl_argv base; /* argv up to the per-trial options */
  char **envp;
  int timeout_s, max_trials, ntrials, index;
  bool timeout_auto;
  double step_flops; /* per token of a trial's step: 24*L*H*I */
  double rate;       /* the floor rate of the auto timeout, FLOP/s */
  int steps;         /* a trial's warm-ups + timed steps */
  pl_model_cfg model; /* train: the trial's model preset */
  int D, micro;       /* train: ranks per sequence, micro-batches */
  const char *budget;
  bool train;          /* the target is train: --tokens only per trial */
  char ok_vals[3][32]; /* seq, system, model of the largest clean trial */
  char systems[PL_TRAIN_MAX_SYS][16]; /* train: one search each */
  const char *system;                 /* train: this search's */
} search;

/* The auto trial timeout: a floor for start-up and set-up, plus the
 * trial's steps at a rate far below any device's (1e13 FLOP/s on a GPU,
 * 1e9 on the CPU backend), so that only a hung or stopped trial reaches it.
 * A step's FLOPs: sco 24*L*N*H*I (an MLP block's forward, recomputation and
 * backward); train twice the model's (pl_model_flops_per_token at S = N*D,
 * for recomputation and options beyond the preset) times the
 * micro-batches. */
static int trial_timeout(const search *s, int64_t N) {
  if (!s->timeout_auto)
    return s->timeout_s;
  double per_token = s->step_flops;
  if (s->train)
    per_token = 2.0 * s->micro *
                pl_model_flops_per_token(&s->model, N * (int64_t)s->D);
  double t = 120.0 + s->steps * per_token * (double)N / s->rate;
  return t > 1e7 ? 10000000 : (int)t;
}

static const char *const trial_cols[] = {
    "dev_peak_bytes", "host_peak_bytes", "time_ms", "tok_s_gpu", "seq",
    "system",         "model",           NULL}; /* [4..6]: train */

static pl_status trial_at(pl_bench_ctx *c, search *s, int64_t N, char *status,
                          size_t slen) {
  pl_trial_result t;
  char point[128], label[128];
  snprintf(point, sizeof point, "maxbatch.%ld.%d.%d", (long)getpid(), s->index,
           s->ntrials);
  pl_argv argv = {0};
  for (int i = 0; i < s->base.n; i++)
    pl_argv_add(&argv, "%s", s->base.v[i]);
  pl_argv_add(&argv, "--tokens=%lld", (long long)N);
  if (!s->train)
    pl_argv_add(&argv, "--budgets=%s", s->budget);
  else
    pl_argv_add(&argv, "--system=%s", s->system);
  pl_argv_add(&argv, "--point=%s", point);
  snprintf(label, sizeof label, "%s%sbudget=%s N=%lld",
           s->train ? s->system : "", s->train ? " " : "", s->budget,
           (long long)N);
  pl_bench_progress(c, label);
  const int timeout = trial_timeout(s, N);
  pl_status st = pl_trial_run(argv.v, s->envp, timeout, &t.ex);
  pl_argv_free(&argv);
  s->ntrials++;
  if (st != PL_OK)
    return st;
  pl_trial_read(s->dir, s->target->name, point, trial_cols, timeout, &t);
  pl_row *r = pl_row_new(c);
  pl_row_str(r, "kind", "trial");
  pl_row_str(r, "target", s->target->name);
  pl_row_str(r, "budget", s->budget);
  pl_row_i64(r, "tokens", N);
  if (t.ranks > 0)
    pl_row_i64(r, "ranks", t.ranks);
  pl_row_i64(r, "exit_code", t.ex.code);
  for (int k = 0; trial_cols[k]; k++)
    pl_row_str(r, trial_cols[k], t.vals[k]);
  if (!strcmp(t.status, "ok")) /* N grows only while trials pass */
    for (int k = 0; k < 3; k++)
      memcpy(s->ok_vals[k], t.vals[4 + k], sizeof s->ok_vals[k]);
  pl_row_str(r, "trial_file", t.file);
  pl_row_status(r, t.status, t.note[0] ? t.note : NULL);
  snprintf(status, slen, "%s", t.status);
  return pl_row_emit(r);
}

/* Doubling from start, then bisection of (largest ok, first failing). */
static pl_status run_search(pl_bench_ctx *c, search *s, int64_t step,
                            int64_t start, int64_t max_tokens) {
  int64_t lo = 0, hi = 0,
          N = start > 0 ? (start + step - 1) / step * step : step;
  pl_status st = PL_OK;
  bool capped = false;
  char tst[16] = "", hi_status[16] = "-"; /* the status of the trial at hi */
  while (!hi && st == PL_OK) {
    if (N > max_tokens || s->ntrials >= s->max_trials) {
      capped = true;
      break;
    }
    st = trial_at(c, s, N, tst, sizeof tst);
    if (st == PL_OK && !strcmp(tst, "ok"))
      lo = N, N *= 2;
    else if (st == PL_OK)
      hi = N, memcpy(hi_status, tst, sizeof hi_status);
  }
  while (st == PL_OK && hi && hi - lo > step && s->ntrials < s->max_trials) {
    int64_t mid = lo + (hi - lo) / step / 2 * step;
    st = trial_at(c, s, mid, tst, sizeof tst);
    if (st == PL_OK && !strcmp(tst, "ok"))
      lo = mid;
    else if (st == PL_OK)
      hi = mid, memcpy(hi_status, tst, sizeof hi_status);
  }
  pl_row *r = pl_row_new(c);
  pl_row_str(r, "kind", "summary");
  pl_row_str(r, "target", s->target->name);
  pl_row_str(r, "budget", s->budget);
  pl_row_i64(r, "max_ok_tokens", lo);
  if (hi)
    pl_row_i64(r, "first_fail_tokens", hi);
  pl_row_i64(r, "trials", s->ntrials);
  pl_row_i64(r, "tokens", lo);
  for (int k = 0; k < 3 && lo > 0; k++)
    pl_row_str(r, trial_cols[4 + k], s->ok_vals[k]);
  if (s->train)
    pl_row_str(r, "system", s->system);
  char note[256];
  bool failed = false;
  if (st != PL_OK) {
    pl_row_status_from(r, st);
  } else if (capped && !hi) {
    snprintf(note, sizeof note,
             "no failure up to N=%lld (--max-tokens or "
             "--max-trials)",
             (long long)(N / 2));
    pl_row_status(r, "ok", note);
  } else if (hi - lo > step) {
    snprintf(note, sizeof note,
             "--max-trials reached: the bound is within "
             "(%lld, %lld)",
             (long long)lo, (long long)hi);
    pl_row_status(r, "ok", note);
  } else if (strcmp(hi_status, "oom") != 0 && lo > 0) {
    /* the bound is not a memory bound: a trial failed otherwise */
    snprintf(note, sizeof note,
             "largest clean N %lld; the first failing N %lld failed with %s, "
             "not out of memory (see its trial row): no memory bound found",
             (long long)lo, (long long)hi, hi_status);
    pl_row_status(r, "error", note);
  } else if (lo == 0) {
    /* not even N = --step: a result when it is out of memory, else the
     * trials could not run at all (launcher, options): an error */
    snprintf(note, sizeof note,
             "no N >= %lld completed a step (first failing "
             "trial: %s)",
             (long long)hi, hi_status);
    failed = strcmp(hi_status, "oom") != 0;
    pl_row_status(r, failed ? "error" : "oom", note);
  } else {
    snprintf(note, sizeof note,
             "largest clean N %lld, first failing N %lld "
             "(%s; granularity %lld)",
             (long long)lo, (long long)hi, hi_status, (long long)step);
    pl_row_status(r, "ok", note);
  }
  pl_status e = pl_row_emit(r);
  if (st == PL_OK && e == PL_OK && failed)
    return pl_set_error(PL_ERUNTIME,
                        "maxbatch: budget %s: no trial "
                        "completed and the first failed with %s "
                        "(see the trial rows)",
                        s->budget, hi_status);
  return st != PL_OK ? st : e;
}

static bool listed(const pl_opt *opts, const char *name) {
  for (int i = 0; opts && opts[i].name; i++)
    if (!strcmp(opts[i].name, name))
      return true;
  return false;
}

/* Every option given is maxbatch's own or the target's (not the other
 * target's), the preset is the target's, and the searched size is not
 * given (each trial gets its --tokens). */
static pl_status target_options(const pl_args *a, const pl_bench *target) {
  for (int i = 0; maxbatch_opts[i].name; i++) {
    const char *n = maxbatch_opts[i].name;
    bool is_own = false;
    for (int k = 0; own[k]; k++)
      is_own |= !strcmp(own[k], n);
    if (is_own || !pl_args_given(a, n))
      continue;
    if (!listed(target->opts, n))
      return pl_set_error(PL_EINVAL,
                          "maxbatch: --%s is not an option of bench %s", n,
                          target->name);
    if (!strcmp(n, "tokens") || !strcmp(n, "seq"))
      return pl_set_error(PL_EINVAL,
                          "maxbatch: --%s is what the search sets (each "
                          "trial's --tokens); bound it with --start, --step "
                          "and --max-tokens",
                          n);
  }
  if (pl_args_given(a, "preset")) {
    const char *p = pl_args_enum_name(a, "preset");
    bool ok = !strcmp(p, "auto");
    for (int i = 0; target->presets && target->presets[i].name; i++)
      ok |= !strcmp(target->presets[i].name, p);
    if (!ok)
      return pl_set_error(PL_EINVAL,
                          "maxbatch: --preset=%s is not a preset of bench %s",
                          p, target->name);
  }
  return PL_OK;
}

/* Validated before any file exists: a usage error writes nothing. */
static pl_status init(pl_bench_ctx *c, void *st) {
  search *s = st;
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
  PL_TRY(target_options(a, s->target));
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
  if (s->train) { /* one search per system; --sco-budget to the trials */
    pl_sco_budget b;
    char list[256], *save = NULL;
    const char *sl = pl_args_str(a, "system");
    if (sl[0] == ',' || sl[strlen(sl) - 1] == ',' || strstr(sl, ",,"))
      return pl_set_error(PL_EINVAL,
                          "--system=%s: empty list element (allowed: plateau, "
                          "fsdp2)",
                          sl);
    snprintf(list, sizeof list, "%s", pl_args_str(a, "system"));
    for (char *w = strtok_r(list, ",", &save); w && s->nb < PL_TRAIN_MAX_SYS;
         w = strtok_r(NULL, ",", &save)) {
      if (!pl__train_system_find(w))
        return pl_set_error(PL_EINVAL,
                            "--system=%s: '%s' is not a system of bench train "
                            "(plateau, fsdp2)",
                            pl_args_str(a, "system"), w);
      snprintf(s->systems[s->nb], sizeof s->systems[0], "%s", w);
      snprintf(s->budgets[s->nb], sizeof s->budgets[0], "%s",
               pl_args_str(a, "sco-budget"));
      PL_TRY(pl_sco_parse_budget("--sco-budget", s->budgets[s->nb++], &b));
    }
    if (!s->nb)
      return pl_set_error(PL_EINVAL, "--system: empty");
  }
  const char *list = s->train ? NULL : pl_args_str(a, "budgets");
  for (const char *p = list ? list : s->train ? NULL : "0"; p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    pl_sco_budget b;
    if (s->nb == 64)
      return pl_set_error(PL_EINVAL, "--budgets=%s: more than 64 budgets",
                          list);
    if (len == 0)
      return pl_set_error(PL_EINVAL,
                          "--budgets=%s: empty list element (allowed: 0, all, "
                          "or a size such as 12Gi)",
                          list);
    if (len >= sizeof s->budgets[0])
      return pl_set_error(PL_EINVAL,
                          "--budgets=%s: an entry of %zu characters (allowed: "
                          "0, all, or a size such as 12Gi)",
                          list, len);
    memcpy(s->budgets[s->nb], p, len);
    s->budgets[s->nb][len] = '\0';
    PL_TRY(pl_sco_parse_budget("--budgets", s->budgets[s->nb++], &b));
    p = comma ? comma + 1 : NULL;
  }
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

/* The trials' command: launcher, this program, the target, our options. */
static pl_status base_argv(pl_bench_ctx *c, search *s) {
  const pl_args *a = c->args;
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return pl_set_error(PL_ERUNTIME, "maxbatch: cannot find this program "
                                     "(/proc/self/exe)");
  exe[n] = '\0';
  snprintf(s->dir, sizeof s->dir, "%s",
           c->res ? pl_results_path(c->res) : "./x");
  *strrchr(s->dir, '/') = '\0';
  int tbe = pl_args_enum(a, "trial-backend");
  bool gpu =
      pl_backend_available(PL_BACKEND_CUDA) && pl_cuda_device_count() > 0;
  pl_argv *b = &s->base;
  if (pl_args_str(a, "launcher"))
    pl_argv_split(b, pl_args_str(a, "launcher"));
  pl_argv_add(b, "%s", exe);
  pl_argv_add(b, "bench");
  pl_argv_add(b, "%s", s->target->name);
  pl_argv_add(b, "--backend=%s",
              tbe == 1   ? "cpu"
              : tbe == 2 ? "cuda"
              : gpu      ? "cuda"
                         : "cpu");
  pl_argv_add(b, "-o");
  pl_argv_add(b, "%s", s->dir);
  pl_argv_add(b, "--no-check");
  if (s->train) /* a search measures: its trials run what the plan refuses */
    pl_argv_add(b, "--verify");
  pl_argv_add(b, "--iters=%d", pl_args_given(a, "iters") ? c->iters : 1);
  pl_argv_add(b, "--warmup=%d", pl_args_given(a, "warmup") ? c->warmup : 0);
  if (pl_args_given(a, "seed"))
    pl_argv_add(b, "--seed=%llu", (unsigned long long)c->seed);
  if (pl_args_given(a, "mem-limit"))
    pl_argv_add(b, "--mem-limit=%llu",
                (unsigned long long)pl_args_size(a, "mem-limit"));
  if (pl_args_given(a, "preset"))
    pl_argv_add(b, "--preset=%s", pl_args_enum_name(a, "preset"));
  /* not forwarded: what each trial sets, and the target's options that
   * maxbatch's table does not list (train's --tune, --points: several
   * points per context, which no search takes; never given here) */
  static const char *const per_trial[] = {"tokens", "budgets", "budget-steps",
                                          "system", NULL};
  const char *skip[128];
  int ns = 0;
  for (int i = 0; per_trial[i]; i++)
    skip[ns++] = per_trial[i];
  for (int i = 0; s->target->opts[i].name && ns < 127; i++)
    if (!listed(maxbatch_opts, s->target->opts[i].name))
      skip[ns++] = s->target->opts[i].name;
  skip[ns] = NULL;
  pl_argv_forward(b, a, s->target->opts, skip);
  return PL_OK;
}

static pl_status search_all(pl_bench_ctx *c, void *st) {
  search *s = st;
  PL_TRY(base_argv(c, s));
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
    rs = run_search(c, s, step, start, maxt);
  }
  return rs;
}

static void fini(pl_bench_ctx *c, void *st) {
  search *s = st;
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
    .state = sizeof(search),
    .init = init,
    .main = search_all,
    .fini = fini,
};
