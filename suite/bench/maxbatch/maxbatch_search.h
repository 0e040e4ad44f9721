/* maxbatch_search.h — what `plateau bench maxbatch` (bench_maxbatch.c: the
 * options, the validation, the searches one budget after another) shares
 * with its search (maxbatch_search.c: a trial and the doubling then
 * bisection of one budget) and its command line (maxbatch_args.c: the
 * target's options, the budget and system lists, the trials' command): the
 * search's state.  Internal to suite/. */
#ifndef PLATEAU_SUITE_MAXBATCH_SEARCH_H
#define PLATEAU_SUITE_MAXBATCH_SEARCH_H

#include "bench/train/bench_train.h"
#include "harness/bench.h"
#include "harness/trial.h"
#include "results/results.h"

/* The search: its budgets (train: one per system), the trials' command and
 * timeout, and the state of the budget being searched. */
typedef struct pl__maxbatch_search {
  char budgets[64][32];
  int nb;
  const pl_bench *target;
  char dir[PL_RESULTS_DIR_MAX + 512];
  pl_argv base; /* argv up to the per-trial options */
  char **envp;
  int timeout_s, max_trials, ntrials, index;
  bool timeout_auto;
  double step_flops;  /* per token of a trial's step: 24*L*H*I */
  double rate;        /* the floor rate of the auto timeout, FLOP/s */
  int steps;          /* a trial's warm-ups + timed steps */
  pl_model_cfg model; /* train: the trial's model preset */
  int D, micro;       /* train: ranks per sequence, micro-batches */
  const char *budget;
  bool train;          /* the target is train: --tokens only per trial */
  char ok_vals[3][32]; /* seq, system, model of the largest clean trial */
  char systems[PL_TRAIN_MAX_SYS][16]; /* train: one search each */
  const char *system;                 /* train: this search's */
} pl__maxbatch_search;

/* ---- maxbatch_search.c ------------------------------------------------- */
/* The search of budget s->budget (train: system s->system): doubling from
 * start (rounded up to a multiple of step), then bisection of (largest ok,
 * first failing) down to step, at most s->max_trials trials; a row per
 * trial and a summary row.  A search where no trial completed and the first
 * failed other than out of memory is an error (PL_ERUNTIME). */
pl_status pl__maxbatch_run(pl_bench_ctx *c, pl__maxbatch_search *s,
                           int64_t step, int64_t start, int64_t max_tokens);

/* ---- maxbatch_args.c --------------------------------------------------- */
/* Every option given is maxbatch's own (own) or the target's (opts:
 * maxbatch's table), the preset is the target's, and the searched size is
 * not given. */
pl_status pl__maxbatch_target_options(const pl_args *a, const pl_bench *target,
                                      const pl_opt *opts,
                                      const char *const *own);
/* The budgets searched into s->budgets, s->nb: sco's --budgets (default 0);
 * train: one per system of --system, each --sco-budget.  PL_EINVAL naming a
 * bad list. */
pl_status pl__maxbatch_budgets(const pl_args *a, pl__maxbatch_search *s);
/* s->base, the trials' command up to the per-trial options, and s->dir,
 * where they write (opts: maxbatch's table; the target's options it does
 * not list are not forwarded). */
pl_status pl__maxbatch_base_argv(pl_bench_ctx *c, pl__maxbatch_search *s,
                                 const pl_opt *opts);

#endif
