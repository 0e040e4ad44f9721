/* trial.c — one trial of a bench as a child process (trial.h).  Why a
 * process: an out-of-memory trial (or one the kernel kills, or a crash)
 * must not end the search that started it, and the search must hold no CUDA
 * context of the trial's GPU. */
#include "trial.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "results.h"

extern char **environ;

void pl_argv_add(pl_argv *a, const char *fmt, ...) {
  if (a->n + 2 > a->cap) {
    a->cap = a->cap ? 2 * a->cap : 32;
    a->v = realloc(a->v, (size_t)a->cap * sizeof *a->v);
    PL_ASSERT(a->v != NULL);
  }
  va_list ap;
  va_start(ap, fmt);
  char *x = NULL;
  PL_ASSERT(vasprintf(&x, fmt, ap) >= 0);
  va_end(ap);
  a->v[a->n++] = x;
  a->v[a->n] = NULL;
}

void pl_argv_split(pl_argv *a, const char *s) {
  char *copy = strdup(s), *save = NULL;
  PL_ASSERT(copy != NULL);
  for (char *w = strtok_r(copy, " \t", &save); w;
       w = strtok_r(NULL, " \t", &save))
    pl_argv_add(a, "%s", w);
  free(copy);
}

void pl_argv_free(pl_argv *a) {
  for (int i = 0; i < a->n; i++)
    free(a->v[i]);
  free(a->v);
  memset(a, 0, sizeof *a);
}

static bool skipped(const char *name, const char *const *skip) {
  for (int i = 0; skip && skip[i]; i++)
    if (strcmp(skip[i], name) == 0)
      return true;
  return false;
}

void pl_argv_forward(pl_argv *out, const pl_args *a, const pl_opt *opts,
                     const char *const *skip) {
  for (int i = 0; opts && opts[i].name; i++) {
    const pl_opt *o = &opts[i];
    if (skipped(o->name, skip) || !pl_args_given(a, o->name))
      continue;
    char buf[4096] = "";
    switch (o->kind) {
    case PL_OPT_FLAG:
      pl_argv_add(out, "--%s%s", pl_args_flag(a, o->name) ? "" : "no-",
                  o->name);
      continue;
    case PL_OPT_INT:
      snprintf(buf, sizeof buf, "%lld", (long long)pl_args_int(a, o->name));
      break;
    case PL_OPT_SIZE:
      snprintf(buf, sizeof buf, "%llu",
               (unsigned long long)pl_args_size(a, o->name));
      break;
    case PL_OPT_F64:
      snprintf(buf, sizeof buf, "%.17g", pl_args_f64(a, o->name));
      break;
    case PL_OPT_ENUM:
      snprintf(buf, sizeof buf, "%s", pl_args_enum_name(a, o->name));
      break;
    case PL_OPT_STR:
      snprintf(buf, sizeof buf, "%s", pl_args_str(a, o->name));
      break;
    case PL_OPT_SIZE_LIST: {
      uint64_t v[PL_OPT_LIST_MAX];
      int n = pl_args_size_list(a, o->name, v, PL_OPT_LIST_MAX);
      for (int j = 0; j < n; j++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%llu",
                 j ? "," : "", (unsigned long long)v[j]);
      break;
    }
    case PL_OPT_ENUM_LIST: {
      int v[PL_OPT_LIST_MAX];
      int n = pl_args_enum_list(a, o->name, v, PL_OPT_LIST_MAX);
      for (int j = 0; j < n; j++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s",
                 j ? "," : "", o->choices[v[j]]);
      break;
    }
    }
    pl_argv_add(out, "--%s=%s", o->name, buf);
  }
}

/* What the MPI singleton (or a launcher around us) put in the environment. */
static bool launch_private(const char *e) {
  static const char *const pfx[] = {"PMIX_",
                                    "PMI_",
                                    "OMPI_COMM_WORLD_",
                                    "OMPI_MCA_orte_",
                                    "OMPI_MCA_ess=",
                                    "OMPI_MCA_pmix=",
                                    "OMPI_APP_CTX_",
                                    "OMPI_COMMAND=",
                                    "OMPI_ARGV=",
                                    "OMPI_UNIVERSE_SIZE=",
                                    "OMPI_FILE_LOCATION=",
                                    "OMPI_FIRST_RANKS=",
                                    "OMPI_NUM_APP_CTX=",
                                    "OMPI_MCA_initial_wdir=",
                                    "OMPI_MCA_ess_base_",
                                    "OMPI_MCA_shmem_RUNTIME_QUERY_hint=",
                                    NULL};
  for (int i = 0; pfx[i]; i++)
    if (!strncmp(e, pfx[i], strlen(pfx[i])))
      return true;
  return false;
}

char **pl_trial_env(void) {
  int ne = 0;
  while (environ[ne])
    ne++;
  char **env = calloc((size_t)ne + 1, sizeof *env);
  PL_ASSERT(env != NULL);
  for (int i = 0, k = 0; i < ne; i++)
    if (!launch_private(environ[i]))
      env[k++] = environ[i];
  return env;
}

static bool executable(const char *f) {
  struct stat st;
  return stat(f, &st) == 0 && S_ISREG(st.st_mode) && access(f, X_OK) == 0;
}

bool pl_trial_program_found(const char *prog) {
  if (!prog || !*prog)
    return false;
  if (strchr(prog, '/'))
    return executable(prog);
  const char *path = getenv("PATH");
  for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
    size_t n = strcspn(p, ":");
    char f[4096];
    snprintf(f, sizeof f, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", prog);
    if (executable(f))
      return true;
    p += n;
    if (*p == ':')
      p++;
  }
  return false;
}

static double now_s(void) {
  return (double)pl_now_ns() / 1e9;
}

static void nap(long ns) {
  nanosleep(&(struct timespec){0, ns}, NULL);
}

/* A stop signal to us goes to the running trial's group. */
static volatile sig_atomic_t trial_pgid, got_signal;
static void on_signal(int sig) {
  got_signal = sig;
  if (trial_pgid > 0)
    kill(-(pid_t)trial_pgid, SIGTERM);
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

/* SIGTERM to the group, SIGKILL after 10 s, reaped. */
static void stop(pid_t pid, int *ws) {
  kill(-pid, SIGTERM);
  double t1 = now_s();
  while (waitpid(pid, ws, WNOHANG) == 0 && now_s() - t1 < 10)
    nap(50000000);
  kill(-pid, SIGKILL);
  waitpid(pid, ws, 0);
}

pl_status pl_trial_run(char *const *argv, char **envp, int timeout_s,
                       pl_trial_exit *out) {
  memset(out, 0, sizeof *out);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, 2, 1); /* its table: our stderr */
  posix_spawnattr_init(&at);
  posix_spawnattr_setpgroup(&at, 0); /* a timeout kills the whole launch */
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
    return pl_set_error(PL_ERUNTIME, "cannot start %s: %s", argv[0],
                        strerror(rc));
  }
  trial_pgid = pid;
  if (got_signal)
    kill(-pid, SIGTERM); /* arrived while it was starting */
  double t0 = now_s(), sig_at = 0;
  int ws = 0;
  for (;;) {
    pid_t w = waitpid(pid, &ws, WNOHANG);
    if (w == pid)
      break;
    if (w < 0 && errno != EINTR) {
      trial_pgid = 0;
      forward_signals(false, old);
      return pl_set_error(PL_ERUNTIME, "waitpid: %s", strerror(errno));
    }
    if (got_signal && sig_at == 0)
      sig_at = now_s();
    if (sig_at > 0 && now_s() - sig_at > 10) { /* it ignored SIGTERM */
      kill(-pid, SIGKILL);
      waitpid(pid, &ws, 0);
      break;
    }
    if (timeout_s > 0 && now_s() - t0 > timeout_s) {
      out->timed_out = true;
      stop(pid, &ws);
      break;
    }
    nap(20000000);
  }
  trial_pgid = 0;
  forward_signals(false, old);
  if (got_signal) { /* we were told to stop */
    int sig = got_signal;
    fprintf(stderr, "plateau: %s: the trial was stopped; stopping\n",
            strsignal(sig));
    raise(sig); /* the previous disposition: normally the end of us */
    return pl_set_error(PL_ERUNTIME, "stopped by %s", strsignal(sig));
  }
  out->code = WIFEXITED(ws)     ? WEXITSTATUS(ws)
              : WIFSIGNALED(ws) ? -WTERMSIG(ws)
                                : -1;
  return PL_OK;
}

/* The rows of the child's result file: the first, or the first failing. */
static void child_rows(const char *dir, const char *bench, const char *point,
                       const char *const *cols, pl_trial_result *t) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  size_t blen = strlen(bench);
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, bench, blen) || e->d_name[blen] != '.' || len < 4 ||
        strcmp(e->d_name + len - 4, ".tsv"))
      continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    pl_table tb;
    if (pl_table_read(path, &tb) != PL_OK)
      continue;
    const char *p = pl_table_meta(&tb, "point");
    bool mine = p && !strcmp(p, point);
    int cs = pl_table_col(&tb, "status"), cn = pl_table_col(&tb, "note");
    for (int r = 0; mine && r < tb.nrows && cs >= 0; r++) {
      const char *st = tb.rows[r][cs];
      if (r && !(strcmp(t->status, "ok") == 0 && strcmp(st, "ok") != 0))
        continue;
      snprintf(t->status, sizeof t->status, "%s", st);
      if (cn >= 0 && strcmp(tb.rows[r][cn], "-"))
        snprintf(t->note, sizeof t->note, "%s", tb.rows[r][cn]);
      for (int k = 0; cols[k] && k < PL_TRIAL_MAX_COLS; k++) {
        int c = pl_table_col(&tb, cols[k]);
        snprintf(t->vals[k], sizeof t->vals[k], "%s",
                 c >= 0 ? tb.rows[r][c] : "-");
      }
      int cr = pl_table_col(&tb, "ranks");
      if (cr >= 0)
        t->ranks = atoi(tb.rows[r][cr]);
    }
    if (mine)
      snprintf(t->file, sizeof t->file, "%s", e->d_name);
    pl_table_free(&tb);
    if (mine)
      break;
  }
  closedir(d);
}

void pl_trial_read(const char *dir, const char *bench, const char *point,
                   const char *const *cols, int timeout_s, pl_trial_result *t) {
  pl_trial_exit ex = t->ex;
  memset(t, 0, sizeof *t);
  t->ex = ex;
  child_rows(dir, bench, point, cols, t);
  const int code = ex.code;
  if (ex.timed_out) {
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note, "killed after --trial-timeout=%d s",
             timeout_s);
  } else if (code < 0 && code != -1) {
    int sig = -code;
    snprintf(t->status, sizeof t->status, sig == SIGKILL ? "oom" : "error");
    snprintf(t->note, sizeof t->note, "killed by signal %d (%s)%s", sig,
             strsignal(sig),
             sig == SIGKILL ? ": taken as the host's OOM killer" : "");
  } else if (!t->status[0] && code == 128 + SIGKILL) { /* a launcher's rank */
    snprintf(t->status, sizeof t->status, "oom");
    snprintf(t->note, sizeof t->note,
             "exit 137 and no rows: a rank killed by "
             "SIGKILL, taken as the host's OOM killer");
  } else if (!t->status[0]) {
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note,
             "exit %d and no rows (see its stderr above)", code);
  } else if (code != 0 && !strcmp(t->status, "ok")) {
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note, "exit %d with ok rows", code);
  }
}
