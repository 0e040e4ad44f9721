/* maxbatch_search.c — the search of `plateau bench maxbatch`
 * (maxbatch_search.h): one trial (the child's command with its tokens,
 * budget or system and point id, run under its timeout, its rows read back
 * into a trial row) and the search of one budget (doubling, then bisection
 * of the largest clean N and the first failing one down to --step; its
 * summary row says what bound was found and why).  Monotonicity in N is
 * assumed (a larger N never fits where a smaller one did not). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "maxbatch_search.h"

/* The auto trial timeout: a floor for start-up and set-up, plus the
 * trial's steps at a rate far below any device's (1e13 FLOP/s on a GPU,
 * 1e9 on the CPU backend), so that only a hung or stopped trial reaches it.
 * A step's FLOPs: sco 24*L*N*H*I (an MLP block's forward, recomputation and
 * backward); train twice the model's (pl_model_flops_per_token at S = N*D,
 * for recomputation and options beyond the preset) times the
 * micro-batches. */
static int trial_timeout(const pl__maxbatch_search *s, int64_t N) {
  if (!s->timeout_auto)
    return s->timeout_s;
  double per_token = s->step_flops;
  if (s->train)
    per_token =
        2.0 * s->micro * pl_model_flops_per_token(&s->model, N * (int64_t)s->D);
  double t = 120.0 + s->steps * per_token * (double)N / s->rate;
  return t > 1e7 ? 10000000 : (int)t;
}

static const char *const trial_cols[] = {
    "dev_peak_bytes", "host_peak_bytes", "time_ms", "tok_s_gpu", "seq",
    "system",         "model",           NULL}; /* [4..6]: train */

/* A forwarded "--NAME[=VALUE]" that is a knob of another training system
 * than this search's: its trials would refuse it (bench train runs one
 * system per trial here), so it goes only to that system's search. */
static bool other_systems_knob(const char *arg, const char *system) {
  if (strncmp(arg, "--", 2))
    return false;
  char name[64];
  size_t n = strcspn(arg + 2, "=");
  if (n >= sizeof name)
    return false;
  memcpy(name, arg + 2, n);
  name[n] = '\0';
  const char *owner = pl__train_knob_owner(name);
  return owner && strcmp(owner, system);
}

static pl_status trial_at(pl_bench_ctx *c, pl__maxbatch_search *s, int64_t N,
                          char *status, size_t slen) {
  pl_trial_result t;
  char point[128], label[128];
  snprintf(point, sizeof point, "maxbatch.%ld.%d.%d", (long)getpid(), s->index,
           s->ntrials);
  pl_argv argv = {0};
  for (int i = 0; i < s->base.n; i++)
    if (!(s->train && other_systems_knob(s->base.v[i], s->system)))
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
pl_status pl__maxbatch_run(pl_bench_ctx *c, pl__maxbatch_search *s,
                           int64_t step, int64_t start, int64_t max_tokens) {
  int64_t lo = 0, hi = 0,
          N = start > 0 ? (start + step - 1) / step * step : step;
  pl_status st = PL_OK;
  bool capped = false;
  char tst[16] = "", hi_status[16] = "-"; /* the status of the trial at hi */
  pl_row *r;
  while (!hi) {
    if (N > max_tokens || s->ntrials >= s->max_trials) {
      capped = true;
      break;
    }
    PL_TRY_GOTO(st, done, trial_at(c, s, N, tst, sizeof tst));
    if (!strcmp(tst, "ok"))
      lo = N, N *= 2;
    else
      hi = N, memcpy(hi_status, tst, sizeof hi_status);
  }
  while (hi && hi - lo > step && s->ntrials < s->max_trials) {
    int64_t mid = lo + (hi - lo) / step / 2 * step;
    PL_TRY_GOTO(st, done, trial_at(c, s, mid, tst, sizeof tst));
    if (!strcmp(tst, "ok"))
      lo = mid;
    else
      hi = mid, memcpy(hi_status, tst, sizeof hi_status);
  }
done:
  r = pl_row_new(c);
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
