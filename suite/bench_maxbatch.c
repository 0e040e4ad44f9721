/* bench_maxbatch.c — `plateau bench maxbatch --bench sco [sco's options]`:
 * the largest tokens per rank N that completes a step (the paper's Table 13),
 * by doubling then bisection down to a granularity (--step).
 *
 * Every trial is a CHILD PROCESS: this same binary (/proc/self/exe) run as
 * `bench <target> --tokens=N --budgets=B --no-check -o <this run's dir>
 * --point=maxbatch.<pid>.<i>.<k> …`, optionally behind a launcher
 * (--launcher "mpirun -np 2", split at blanks).  An out-of-memory trial is an
 * `oom` row in the child's own result file (or a child the kernel kills), a
 * crash is a signal: neither can kill the search.  The parent reads the
 * child's exit status and its rows (found by the point id in the metadata),
 * records one row per trial (tokens, status, exit code, the child's peak and
 * speed) and one summary row per budget (largest clean N, first failing N).
 *
 * Design: the search is one process (np 1, no mpirun around it): it must not
 * be a rank of the launch it starts, and it must hold no CUDA context (a
 * context costs HBM on the trial's GPU and must never be inherited), so it
 * runs on the CPU backend (--backend cpu, the default without a GPU) and the
 * trials get --trial-backend (auto: cuda when a GPU is visible).  The MPI
 * singleton's own variables (PMIX_*, OMPI_MCA_ess …) are removed from the
 * children's environment so that a launcher inside it starts a fresh job.
 * Trials run with --no-check: the budget-0 reference step would need the
 * memory that SCO saves, so it would fail first.  Monotonicity in N is assumed
 * (a larger N never fits where a smaller one did not). */
#include <errno.h>
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_sco.h"
#include "ops/sco.h"
#include "results.h"

extern char **environ;

static const char *const targets[] = {"sco", NULL};
static const char *const trial_backends[] = {"auto", "cpu", "cuda", NULL};

static const pl_opt maxbatch_opts[] = {
    {"bench", 0, PL_OPT_ENUM, "sco", "the bench whose step is searched", 0, 0, targets},
    {"step", 0, PL_OPT_SIZE, "1Ki", "granularity of the search (tokens per rank)", 1, 1e12, NULL},
    {"start", 0, PL_OPT_SIZE, "0", "first N tried (0: --step), then doubled", 0, 1e12, NULL},
    {"max-tokens", 0, PL_OPT_SIZE, "1Gi", "stop doubling beyond this N", 1, 1e12, NULL},
    {"launcher", 0, PL_OPT_STR, NULL,
     "command in front of each trial, split at blanks (e.g. \"mpirun --allow-run-as-root -np 2\"); "
     "default: run the trial directly",
     0, 0, NULL},
    {"trial-backend", 0, PL_OPT_ENUM, "auto", "backend of the trials (auto: cuda when a GPU is visible)", 0, 0,
     trial_backends},
    {"trial-timeout", 0, PL_OPT_INT, "1800", "seconds before a trial is killed (0: never)", 0, 1e7, NULL},
    {"max-trials", 0, PL_OPT_INT, "64", "trials per budget at most", 1, 10000, NULL},
    PL_BENCH_SCO_OPTS,
    {0},
};

#define MB_COLUMNS                                                             \
  "kind\ttarget\tbudget\ttokens\tranks\texit_code\tdev_peak_bytes\t"           \
  "host_peak_bytes\ttime_ms\ttok_s_gpu\tmax_ok_tokens\tfirst_fail_tokens\t" \
  "trials\ttrial_file"

/* ---- argv of a trial ------------------------------------------------------- */
typedef struct strv {
  char **v;
  int n, cap;
} strv;

static void sv_add(strv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sv_add(strv *s, const char *fmt, ...) {
  if (s->n + 2 > s->cap) {
    s->cap = s->cap ? 2 * s->cap : 32;
    s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
    PL_ASSERT(s->v != NULL);
  }
  va_list ap;
  va_start(ap, fmt);
  char *x = NULL;
  PL_ASSERT(vasprintf(&x, fmt, ap) >= 0);
  va_end(ap);
  s->v[s->n++] = x;
  s->v[s->n] = NULL;
}
static void sv_free(strv *s) {
  for (int i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* Options of the target given on our command line, as text again. */
static void forward_opts(const pl_args *a, const pl_opt *opts, strv *out) {
  for (int i = 0; opts && opts[i].name; i++) {
    const pl_opt *o = &opts[i];
    if (!strcmp(o->name, "tokens") || !strcmp(o->name, "budgets") || !strcmp(o->name, "budget-steps")) continue;
    if (!pl_args_given(a, o->name)) continue;
    switch (o->kind) {
    case PL_OPT_FLAG: sv_add(out, "--%s%s", pl_args_flag(a, o->name) ? "" : "no-", o->name); break;
    case PL_OPT_INT: sv_add(out, "--%s=%lld", o->name, (long long)pl_args_int(a, o->name)); break;
    case PL_OPT_SIZE: sv_add(out, "--%s=%llu", o->name, (unsigned long long)pl_args_size(a, o->name)); break;
    case PL_OPT_F64: sv_add(out, "--%s=%.17g", o->name, pl_args_f64(a, o->name)); break;
    case PL_OPT_ENUM: sv_add(out, "--%s=%s", o->name, pl_args_enum_name(a, o->name)); break;
    case PL_OPT_STR: sv_add(out, "--%s=%s", o->name, pl_args_str(a, o->name)); break;
    case PL_OPT_SIZE_LIST: {
      uint64_t v[PL_OPT_LIST_MAX];
      int n = pl_args_size_list(a, o->name, v, PL_OPT_LIST_MAX);
      char buf[PL_OPT_LIST_MAX * 24] = "";
      for (int j = 0; j < n; j++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%llu", j ? "," : "", (unsigned long long)v[j]);
      sv_add(out, "--%s=%s", o->name, buf);
      break;
    }
    case PL_OPT_ENUM_LIST: {
      int v[PL_OPT_LIST_MAX];
      int n = pl_args_enum_list(a, o->name, v, PL_OPT_LIST_MAX);
      char buf[4096] = "";
      for (int j = 0; j < n; j++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", j ? "," : "", o->choices[v[j]]);
      sv_add(out, "--%s=%s", o->name, buf);
      break;
    }
    }
  }
}

/* Our environment minus what the MPI singleton (or a launcher around us)
 * put there: a launcher in the child must start a job of its own. */
static bool launch_private(const char *e) {
  static const char *const pfx[] = {"PMIX_", "PMI_", "OMPI_COMM_WORLD_", "OMPI_MCA_orte_", "OMPI_MCA_ess=",
                                    "OMPI_MCA_pmix=", "OMPI_APP_CTX_", "OMPI_COMMAND=", "OMPI_ARGV=",
                                    "OMPI_UNIVERSE_SIZE=", "OMPI_FILE_LOCATION=", "OMPI_FIRST_RANKS=",
                                    "OMPI_NUM_APP_CTX=", "OMPI_MCA_initial_wdir=", "OMPI_MCA_ess_base_",
                                    "OMPI_MCA_shmem_RUNTIME_QUERY_hint=", NULL};
  for (int i = 0; pfx[i]; i++)
    if (!strncmp(e, pfx[i], strlen(pfx[i]))) return true;
  return false;
}

/* ---- one trial ------------------------------------------------------------- */
typedef struct trial {
  int64_t N;
  char status[16]; /* ok | oom | infeasible | error */
  char note[512];
  int exit_code;   /* -signal when killed */
  int ranks;
  char dev_peak[32], host_pinned[32], ms[32], tok_s[32];
  char file[1024];
} trial;

static bool ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

/* The child's rows: its result file is the one whose `point` is ours. */
static void read_child_rows(const char *dir, const char *bench, const char *point, trial *t) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  size_t blen = strlen(bench);
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, bench, blen) || e->d_name[blen] != '.' || !ends_with(e->d_name, ".tsv")) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    pl_table tb;
    if (pl_table_read(path, &tb) != PL_OK) continue;
    const char *p = pl_table_meta(&tb, "point");
    if (p && !strcmp(p, point)) {
      snprintf(t->file, sizeof t->file, "%s", e->d_name);
      int cs = pl_table_col(&tb, "status"), cn = pl_table_col(&tb, "note");
      int cols[5] = {pl_table_col(&tb, "dev_peak_bytes"), pl_table_col(&tb, "host_peak_bytes"),
                     pl_table_col(&tb, "time_ms"), pl_table_col(&tb, "tok_s_gpu"), pl_table_col(&tb, "ranks")};
      char *dst[4] = {t->dev_peak, t->host_pinned, t->ms, t->tok_s};
      bool any = false;
      for (int r = 0; r < tb.nrows && cs >= 0; r++) {
        const char *st = tb.rows[r][cs];
        if (!any || (!strcmp(t->status, "ok") && strcmp(st, "ok"))) { /* first row, or the first failing row */
          snprintf(t->status, sizeof t->status, "%s", st);
          if (cn >= 0 && strcmp(tb.rows[r][cn], "-")) snprintf(t->note, sizeof t->note, "%s", tb.rows[r][cn]);
          for (int k = 0; k < 4; k++)
            snprintf(dst[k], 32, "%s", cols[k] >= 0 ? tb.rows[r][cols[k]] : "-");
          if (cols[4] >= 0) t->ranks = atoi(tb.rows[r][cols[4]]);
        }
        any = true;
      }
      if (!any) t->status[0] = '\0';
      pl_table_free(&tb);
      break;
    }
    pl_table_free(&tb);
  }
  closedir(d);
}

static double now_s(void) { return (double)pl_now_ns() / 1e9; }

/* A trial runs in its own process group (so that a timeout can kill the
 * launcher and all its ranks): a SIGINT/SIGTERM/SIGHUP sent to the search
 * (Ctrl-C, `timeout`, a Slurm time limit) is passed on to the running trial's
 * group, then the search ends with that signal, leaving no trial behind on the
 * GPUs. */
static volatile sig_atomic_t trial_pgid, got_signal;
static void on_signal(int sig) {
  got_signal = sig;
  if (trial_pgid > 0) kill(-(pid_t)trial_pgid, SIGTERM);
}
static const int fwd_signals[] = {SIGINT, SIGTERM, SIGHUP};
static void forward_signals(bool on, struct sigaction *old) {
  for (int i = 0; i < 3; i++) {
    if (on) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_signal;
      sigemptyset(&sa.sa_mask);
      sigaction(fwd_signals[i], &sa, &old[i]);
    } else {
      sigaction(fwd_signals[i], &old[i], NULL);
    }
  }
}

static pl_status run_trial(char *const *argv, char **envp, int timeout_s, const char *dir, const char *bench,
                           const char *point, trial *t) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, 2, 1); /* the child's table goes to our stderr */
  posix_spawnattr_init(&at);
  posix_spawnattr_setpgroup(&at, 0); /* its own group: a timeout kills the whole launch */
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  fflush(stdout);
  fflush(stderr);
  pid_t pid;
  struct sigaction old[3];
  got_signal = 0;
  forward_signals(true, old);
  int rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (rc != 0) {
    forward_signals(false, old);
    return pl_set_error(PL_ERUNTIME, "maxbatch: cannot start %s: %s", argv[0], strerror(rc));
  }
  trial_pgid = pid;
  if (got_signal) kill(-pid, SIGTERM); /* arrived while it was being started */
  double t0 = now_s();
  int ws = 0;
  bool timed_out = false;
  double sig_at = 0;
  for (;;) {
    pid_t w = waitpid(pid, &ws, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      trial_pgid = 0;
      forward_signals(false, old);
      return pl_set_error(PL_ERUNTIME, "maxbatch: waitpid: %s", strerror(errno));
    }
    if (got_signal && sig_at == 0) sig_at = now_s();
    if (sig_at > 0 && now_s() - sig_at > 10) { /* the trial ignored SIGTERM */
      kill(-pid, SIGKILL);
      waitpid(pid, &ws, 0);
      break;
    }
    if (timeout_s > 0 && !timed_out && now_s() - t0 > timeout_s) {
      timed_out = true;
      kill(-pid, SIGTERM);
      double t1 = now_s();
      while (waitpid(pid, &ws, WNOHANG) == 0 && now_s() - t1 < 10) nanosleep(&(struct timespec){0, 50000000}, NULL);
      kill(-pid, SIGKILL);
      waitpid(pid, &ws, 0);
      break;
    }
    nanosleep(&(struct timespec){0, 20000000}, NULL);
  }
  trial_pgid = 0;
  forward_signals(false, old);
  if (got_signal) { /* the search itself was told to stop */
    int sig = got_signal;
    fprintf(stderr, "plateau bench maxbatch: %s: the trial was stopped; stopping the search\n", strsignal(sig));
    raise(sig); /* the previous disposition: normally the end of this process */
    return pl_set_error(PL_ERUNTIME, "maxbatch: stopped by %s", strsignal(sig));
  }
  t->exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? -WTERMSIG(ws) : -1;
  read_child_rows(dir, bench, point, t);
  if (timed_out) {
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note, "killed after --trial-timeout=%d s", timeout_s);
  } else if (WIFSIGNALED(ws)) {
    int sig = WTERMSIG(ws);
    snprintf(t->status, sizeof t->status, sig == SIGKILL ? "oom" : "error");
    snprintf(t->note, sizeof t->note, "killed by signal %d (%s)%s", sig, strsignal(sig),
             sig == SIGKILL ? ": taken as the host's OOM killer" : "");
  } else if (!t->status[0] && t->exit_code == 128 + SIGKILL) { /* a launcher reporting a rank's SIGKILL */
    snprintf(t->status, sizeof t->status, "oom");
    snprintf(t->note, sizeof t->note, "exit 137 and no rows: a rank killed by SIGKILL, taken as the host's OOM killer");
  } else if (!t->status[0]) {
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note, "exit %d and no rows (see its stderr above)", t->exit_code);
  } else if (t->exit_code != 0 && !strcmp(t->status, "ok")) {
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note, "exit %d with ok rows", t->exit_code);
  }
  return PL_OK;
}

/* ---- the search ------------------------------------------------------------ */
typedef struct search {
  pl_bench_ctx *ctx;
  const char *bench, *budget, *dir;
  strv base; /* argv up to the per-trial options */
  char **envp;
  int timeout_s, max_trials, ntrials, index;
} search;

static pl_status trial_at(search *s, int64_t N, bool *ok, char *status, size_t slen) {
  trial t;
  memset(&t, 0, sizeof t);
  t.N = N;
  char point[128];
  snprintf(point, sizeof point, "maxbatch.%ld.%d.%d", (long)getpid(), s->index, s->ntrials);
  strv argv = {0};
  for (int i = 0; i < s->base.n; i++) sv_add(&argv, "%s", s->base.v[i]);
  sv_add(&argv, "--tokens=%lld", (long long)N);
  sv_add(&argv, "--budgets=%s", s->budget);
  sv_add(&argv, "--point=%s", point);
  char label[128];
  snprintf(label, sizeof label, "budget=%s N=%lld", s->budget, (long long)N);
  pl_bench_progress(s->ctx, label);
  pl_status st = run_trial(argv.v, s->envp, s->timeout_s, s->dir, s->bench, point, &t);
  sv_free(&argv);
  s->ntrials++;
  if (st != PL_OK) return st;
  pl_row *r = pl_row_new(s->ctx);
  pl_row_str(r, "kind", "trial");
  pl_row_str(r, "target", s->bench);
  pl_row_str(r, "budget", s->budget);
  pl_row_i64(r, "tokens", N);
  if (t.ranks > 0) pl_row_i64(r, "ranks", t.ranks);
  pl_row_i64(r, "exit_code", t.exit_code);
  pl_row_str(r, "dev_peak_bytes", t.dev_peak[0] ? t.dev_peak : "-");
  pl_row_str(r, "host_peak_bytes", t.host_pinned[0] ? t.host_pinned : "-");
  pl_row_str(r, "time_ms", t.ms[0] ? t.ms : "-");
  pl_row_str(r, "tok_s_gpu", t.tok_s[0] ? t.tok_s : "-");
  pl_row_str(r, "trial_file", t.file[0] ? t.file : "-");
  pl_row_status(r, t.status, t.note[0] ? t.note : NULL);
  *ok = !strcmp(t.status, "ok");
  snprintf(status, slen, "%s", t.status);
  return pl_row_emit(r);
}

static pl_status run_search(search *s, int64_t step, int64_t start, int64_t max_tokens) {
  int64_t lo = 0, hi = 0, N = start > 0 ? (start + step - 1) / step * step : step;
  pl_status st = PL_OK;
  bool ok = false, capped = false;
  char tstat[16] = "", hi_status[16] = "-"; /* the status of the trial at hi */
  while (!hi && st == PL_OK) {
    if (N > max_tokens || s->ntrials >= s->max_trials) {
      capped = true;
      break;
    }
    st = trial_at(s, N, &ok, tstat, sizeof tstat);
    if (st != PL_OK) break;
    if (ok)
      lo = N, N *= 2;
    else
      hi = N, memcpy(hi_status, tstat, sizeof hi_status);
  }
  while (st == PL_OK && hi && hi - lo > step && s->ntrials < s->max_trials) {
    int64_t mid = lo + (hi - lo) / step / 2 * step;
    st = trial_at(s, mid, &ok, tstat, sizeof tstat);
    if (st != PL_OK) break;
    if (ok)
      lo = mid;
    else
      hi = mid, memcpy(hi_status, tstat, sizeof hi_status);
  }
  pl_row *r = pl_row_new(s->ctx);
  pl_row_str(r, "kind", "summary");
  pl_row_str(r, "target", s->bench);
  pl_row_str(r, "budget", s->budget);
  pl_row_i64(r, "max_ok_tokens", lo);
  if (hi) pl_row_i64(r, "first_fail_tokens", hi);
  pl_row_i64(r, "trials", s->ntrials);
  pl_row_i64(r, "tokens", lo);
  char note[256];
  bool failed = false;
  if (st != PL_OK) {
    pl_row_status_from(r, st);
  } else if (capped && !hi) {
    snprintf(note, sizeof note, "no failure up to N=%lld (--max-tokens or --max-trials)", (long long)(N / 2));
    pl_row_status(r, "ok", note);
  } else if (hi - lo > step) {
    snprintf(note, sizeof note, "--max-trials reached: the bound is within (%lld, %lld)", (long long)lo,
             (long long)hi);
    pl_row_status(r, "ok", note);
  } else if (lo == 0) {
    /* not even N = --step: a result when it is out of memory, else the
     * trials could not run at all (launcher, options): an error */
    snprintf(note, sizeof note, "no N >= %lld completed a step (first failing trial: %s)", (long long)hi, hi_status);
    failed = strcmp(hi_status, "oom") != 0;
    pl_row_status(r, failed ? "error" : "oom", note);
  } else {
    snprintf(note, sizeof note, "largest clean N %lld, first failing N %lld (%s; granularity %lld)", (long long)lo,
             (long long)hi, hi_status, (long long)step);
    pl_row_status(r, "ok", note);
  }
  pl_status e = pl_row_emit(r);
  if (st == PL_OK && e == PL_OK && failed)
    return pl_set_error(PL_ERUNTIME, "maxbatch: budget %s: no trial completed and the first failed with %s (see the trial rows)",
                        s->budget, hi_status);
  return st != PL_OK ? st : e;
}

static pl_status usage_error(pl_bench_ctx *ctx, pl_status st) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", pl_last_error());
  if (ctx->rank == 0 && ctx->res) remove(pl_results_path(ctx->res)); /* nothing measured: no file */
  return pl_set_error(st, "%s", msg);
}

static pl_status maxbatch_run(pl_bench_ctx *ctx, void *state) {
  (void)state;
  const pl_args *a = ctx->args;
  if (ctx->size != 1) {
    pl_set_error(PL_EINVAL,
                 "maxbatch: run the search as one process (no mpirun around it; %d ranks here) and give the "
                 "trials' launcher with --launcher",
                 ctx->size);
    return usage_error(ctx, PL_EINVAL);
  }
  if (pl_dev_backend(ctx->dev) != PL_BACKEND_CPU) {
    pl_set_error(PL_EINVAL,
                 "maxbatch: the search process must hold no CUDA context: run it with --backend cpu "
                 "(the trials use --trial-backend, default cuda when a GPU is visible)");
    return usage_error(ctx, PL_EINVAL);
  }
  if (pl_args_given(a, "budget-steps")) {
    pl_set_error(PL_EINVAL, "maxbatch: --budget-steps is not searched; give the budgets with --budgets (one search each)");
    return usage_error(ctx, PL_EINVAL);
  }
  const char *bench = pl_args_enum_name(a, "bench");
  const pl_bench *tb = pl_bench_find(bench);
  PL_ASSERT(tb != NULL);
  /* budgets: each validated now, before any trial */
  char budgets[64][32];
  int nb = 0;
  const char *list = pl_args_str(a, "budgets");
  if (!list) list = "0";
  for (const char *p = list; nb < 64;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    pl_sco_budget b;
    if (len == 0 || len >= sizeof budgets[0]) {
      pl_set_error(PL_EINVAL, "--budgets=%s: empty or overlong entry (allowed: 0, all, or a size such as 12Gi)", list);
      return usage_error(ctx, PL_EINVAL);
    }
    memcpy(budgets[nb], p, len);
    budgets[nb][len] = '\0';
    pl_status st = pl_sco_parse_budget("--budgets", budgets[nb], &b);
    if (st != PL_OK) return usage_error(ctx, st);
    nb++;
    if (!comma) break;
    p = comma + 1;
  }
  int tbe = pl_args_enum(a, "trial-backend");
  const char *trial_be = tbe == 1 ? "cpu" : tbe == 2 ? "cuda"
                         : (pl_backend_available(PL_BACKEND_CUDA) && pl_cuda_device_count() > 0) ? "cuda"
                                                                                                  : "cpu";
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return pl_set_error(PL_ERUNTIME, "maxbatch: cannot find this program (/proc/self/exe)");
  exe[n] = '\0';
  char dir[1024] = ".";
  if (ctx->res) {
    snprintf(dir, sizeof dir, "%s", pl_results_path(ctx->res));
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
  }

  search s;
  memset(&s, 0, sizeof s);
  s.ctx = ctx;
  s.bench = bench;
  s.dir = dir;
  s.timeout_s = (int)pl_args_int(a, "trial-timeout");
  s.max_trials = (int)pl_args_int(a, "max-trials");
  const char *launcher = pl_args_str(a, "launcher");
  if (launcher) {
    char *copy = strdup(launcher), *save = NULL;
    PL_ASSERT(copy != NULL);
    for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) sv_add(&s.base, "%s", w);
    free(copy);
  }
  sv_add(&s.base, "%s", exe);
  sv_add(&s.base, "bench");
  sv_add(&s.base, "%s", bench);
  sv_add(&s.base, "--backend=%s", trial_be);
  sv_add(&s.base, "-o");
  sv_add(&s.base, "%s", dir);
  sv_add(&s.base, "--no-check");
  sv_add(&s.base, "--iters=%lld", pl_args_given(a, "iters") ? (long long)ctx->iters : 1LL);
  sv_add(&s.base, "--warmup=%lld", pl_args_given(a, "warmup") ? (long long)ctx->warmup : 0LL);
  if (pl_args_given(a, "seed")) sv_add(&s.base, "--seed=%llu", (unsigned long long)ctx->seed);
  if (pl_args_given(a, "mem-limit"))
    sv_add(&s.base, "--mem-limit=%llu", (unsigned long long)pl_args_size(a, "mem-limit"));
  forward_opts(a, tb->opts, &s.base);
  /* the environment without the singleton's launch variables */
  int ne = 0;
  while (environ[ne]) ne++;
  s.envp = calloc((size_t)ne + 1, sizeof *s.envp);
  PL_ASSERT(s.envp != NULL);
  for (int i = 0, k = 0; i < ne; i++)
    if (!launch_private(environ[i])) s.envp[k++] = environ[i];
  if (ctx->rank == 0) {
    printf("# trial command:");
    for (int i = 0; i < s.base.n; i++) printf(" %s", s.base.v[i]);
    printf(" --tokens=N --budgets=B --point=…\n");
    fflush(stdout);
  }

  int64_t step = (int64_t)pl_args_size(a, "step");
  int64_t start = (int64_t)pl_args_size(a, "start");
  int64_t maxt = (int64_t)pl_args_size(a, "max-tokens");
  ctx->npoints = 0;
  pl_status st = PL_OK;
  for (int i = 0; i < nb && st == PL_OK; i++) {
    s.budget = budgets[i];
    s.index = i;
    s.ntrials = 0;
    st = run_search(&s, step, start, maxt);
  }
  free(s.envp);
  sv_free(&s.base);
  return st;
}

const pl_bench pl_bench_maxbatch = {
    .name = "maxbatch",
    .summary = "largest tokens per rank that completes a step (trials in child processes; Table 13)",
    .opts = maxbatch_opts,
    .columns = MB_COLUMNS,
    .main = maxbatch_run,
};
