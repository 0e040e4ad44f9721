/* trial.c — one trial of a bench as a child process (trial.h).  Why a
 * process: an out-of-memory trial (or one the kernel kills, or a crash)
 * must not end the search that started it, and the search must hold no CUDA
 * context of the trial's GPU. */
#include "trial.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "results/results.h"

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

/* ---- the guard -------------------------------------------------------------
 * Every trial runs under a guard: this program started again as
 * `plateau __trial-guard TIMEOUT -- argv...` (an image of its own, not a fork
 * of the MPI process).  The guard
 *  - asks the kernel for SIGTERM when the search dies, however it dies
 *    (PR_SET_PDEATHSIG: a kill -9 of the search included);
 *  - is a child subreaper (PR_SET_CHILD_SUBREAPER): every process the trial
 *    starts and orphans (an MPI launcher's ranks, which Open MPI puts in
 *    process groups of their own, a daemon that double-forks) becomes its
 *    child instead of init's, so it can find them all in /proc;
 *  - runs the trial in a process group of its own, waits, and on a stop
 *    signal, the search's death or the timeout kills every descendant
 *    (SIGTERM, SIGKILL 5 s later) and reaps them; after a normal exit it
 *    kills whatever the trial left behind;
 *  - writes what happened to fd 3 ("exit N", "signal S", "timeout",
 *    "stopped S", "nostart ERRNO") for the search. */
#define GUARD_CMD "__trial-guard"

static volatile sig_atomic_t guard_stop;
static void guard_on_signal(int sig) {
  guard_stop = sig;
}

/* Our descendants from /proc: pids whose parent chain reaches us.  At most
 * max; returns the count. */
static int descendants(pid_t *out, int max) {
  enum { CAP = 32768 };
  static pid_t pid[CAP], ppid[CAP];
  int n = 0;
  DIR *d = opendir("/proc");
  if (!d)
    return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < CAP) {
    char *end;
    long p = strtol(e->d_name, &end, 10);
    if (*end || p <= 0)
      continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", p);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *rp = strrchr(buf, ')'); /* the name may hold spaces and ')' */
    int pp = 0;
    char st;
    if (!rp || sscanf(rp + 1, " %c %d", &st, &pp) != 2)
      continue;
    pid[n] = (pid_t)p;
    ppid[n] = (pid_t)pp;
    n++;
  }
  closedir(d);
  const pid_t me = getpid();
  int k = 0;
  for (int i = 0; i < n && k < max; i++) {
    pid_t q = ppid[i];
    for (int hops = 0; q > 1 && q != me && hops < 64; hops++) {
      int j = 0;
      while (j < n && pid[j] != q)
        j++;
      q = j < n ? ppid[j] : 0;
    }
    if (q == me)
      out[k++] = pid[i];
  }
  return k;
}

static void reap_all(void) {
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

/* SIGTERM to every descendant, SIGKILL to those left after grace_s; the
 * orphans are our children (subreaper) and are reaped. */
static void kill_descendants(double grace_s) {
  pid_t d[4096];
  int n = descendants(d, 4096);
  for (int i = 0; i < n; i++)
    kill(d[i], SIGTERM);
  double t0 = now_s();
  while (n > 0 && now_s() - t0 < grace_s) {
    nap(20000000);
    reap_all();
    n = descendants(d, 4096);
  }
  for (int round = 0; round < 50 && n > 0; round++) {
    for (int i = 0; i < n; i++)
      kill(d[i], SIGKILL);
    nap(20000000);
    reap_all();
    n = descendants(d, 4096);
  }
}

int pl_trial_guard_main(int argc, char **argv) {
  /* argv: plateau __trial-guard TIMEOUT -- trial... */
  if (argc < 5 || strcmp(argv[1], GUARD_CMD) || strcmp(argv[3], "--"))
    return 2;
  const double timeout_s = atof(argv[2]);
  char **targv = argv + 4;
  FILE *rep = fdopen(3, "w");
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
  for (int i = 0; i < 3; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = guard_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sigs[i], &sa, NULL);
  }
  if (getppid() == 1) /* the search died before we could ask to be told */
    guard_stop = SIGTERM;
  pid_t pid = guard_stop ? -1 : fork();
  if (pid == 0) {
    setpgid(0, 0); /* a stop signal to a terminal's group is ours to pass */
    for (int i = 0; i < 3; i++)
      signal(sigs[i], SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    dup2(2, 1); /* its table: the search's stderr */
    close(3);
    execvp(targv[0], targv);
    fprintf(stderr, "plateau: cannot start %s: %s\n", targv[0],
            strerror(errno));
    _exit(127);
  }
  int ws = 0, err = errno;
  const char *what = NULL;
  double t0 = now_s();
  while (pid > 0) {
    pid_t w = waitpid(pid, &ws, WNOHANG);
    if (w == pid)
      break;
    if (w < 0 && errno != EINTR) {
      what = "nostart";
      break;
    }
    if (guard_stop) {
      what = "stopped";
      break;
    }
    if (timeout_s > 0 && now_s() - t0 > timeout_s) {
      what = "timeout";
      break;
    }
    nap(20000000);
  }
  /* what the trial left running (stray daemons, orphaned ranks), or the
   * whole trial on a stop or a timeout */
  kill_descendants(what ? 5.0 : 2.0);
  if (rep) {
    if (pid < 0 && !guard_stop)
      fprintf(rep, "nostart %d\n", err);
    else if (what && strcmp(what, "stopped") == 0)
      fprintf(rep, "stopped %d\n", (int)guard_stop);
    else if (what)
      fprintf(rep, "%s 0\n", what);
    else if (WIFSIGNALED(ws))
      fprintf(rep, "signal %d\n", WTERMSIG(ws));
    else
      fprintf(rep, "exit %d\n", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    fclose(rep);
  }
  return 0;
}

/* A stop signal to the search goes to the running trial's guard. */
static volatile sig_atomic_t guard_pid, got_signal;
static void on_signal(int sig) {
  got_signal = sig;
  if (guard_pid > 0)
    kill((pid_t)guard_pid, SIGTERM);
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

pl_status pl_trial_run(char *const *argv, char **envp, int timeout_s,
                       pl_trial_exit *out) {
  memset(out, 0, sizeof *out);
  out->code = -1;
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return pl_set_error(PL_ERUNTIME, "cannot find this program "
                                     "(/proc/self/exe) to guard the trial");
  exe[n] = '\0';
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return pl_set_error(PL_ERUNTIME, "pipe: %s", strerror(errno));
  pl_argv g = {0};
  char tmo[32];
  snprintf(tmo, sizeof tmo, "%d", timeout_s);
  pl_argv_add(&g, "%s", exe);
  pl_argv_add(&g, "%s", GUARD_CMD);
  pl_argv_add(&g, "%s", tmo);
  pl_argv_add(&g, "--");
  for (int i = 0; argv[i]; i++)
    pl_argv_add(&g, "%s", argv[i]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 3); /* its report */
  fflush(stdout);
  fflush(stderr);
  struct sigaction old[3];
  got_signal = 0;
  forward_signals(true, old);
  pid_t pid;
  int rc = posix_spawn(&pid, exe, &fa, NULL, g.v, envp);
  posix_spawn_file_actions_destroy(&fa);
  pl_argv_free(&g);
  close(fds[1]);
  if (rc != 0) {
    forward_signals(false, old);
    close(fds[0]);
    return pl_set_error(PL_ERUNTIME, "cannot start the trial's guard %s: %s",
                        exe, strerror(rc));
  }
  guard_pid = pid;
  if (got_signal)
    kill(pid, SIGTERM); /* arrived while it was starting */
  int ws = 0;
  double sig_at = 0;
  for (;;) {
    pid_t w = waitpid(pid, &ws, WNOHANG);
    if (w == pid)
      break;
    if (w < 0 && errno != EINTR) {
      guard_pid = 0;
      forward_signals(false, old);
      close(fds[0]);
      return pl_set_error(PL_ERUNTIME, "waitpid: %s", strerror(errno));
    }
    if (got_signal && sig_at == 0)
      sig_at = now_s();
    if (sig_at > 0 && now_s() - sig_at > 30) { /* a guard that hangs */
      kill(pid, SIGKILL);
      waitpid(pid, &ws, 0);
      break;
    }
    nap(20000000);
  }
  guard_pid = 0;
  forward_signals(false, old);
  char rep[64] = "";
  ssize_t r = read(fds[0], rep, sizeof rep - 1);
  close(fds[0]);
  rep[r > 0 ? r : 0] = '\0';
  char what[16] = "";
  int v = 0;
  sscanf(rep, "%15s %d", what, &v);
  if (got_signal) { /* we were told to stop: the trial is gone */
    int sig = got_signal;
    fprintf(stderr, "plateau: %s: the trial was stopped; stopping\n",
            strsignal(sig));
    raise(sig); /* the previous disposition: normally the end of us */
    return pl_set_error(PL_ERUNTIME, "stopped by %s", strsignal(sig));
  }
  if (strcmp(what, "exit") == 0)
    out->code = v;
  else if (strcmp(what, "signal") == 0)
    out->code = -v;
  else if (strcmp(what, "timeout") == 0)
    out->timed_out = true;
  else if (strcmp(what, "nostart") == 0)
    return pl_set_error(PL_ERUNTIME, "cannot start %s: %s", argv[0],
                        strerror(v));
  else
    return pl_set_error(PL_ERUNTIME,
                        "the trial's guard ended without a report (%s)",
                        WIFSIGNALED(ws) ? strsignal(WTERMSIG(ws)) : "exit");
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
    char path[PL_RESULTS_DIR_MAX + 1024];
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
  /* Only the trial's own rows say out of memory (the tracked allocator's
   * status); a signal is an error whatever it is, SIGKILL included (the
   * host's OOM killer is one sender among many: a person, a scheduler). */
  if (ex.timed_out) {
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note,
             "killed after the trial timeout of %d s (--trial-timeout)",
             timeout_s);
  } else if (code < -1) {
    int sig = -code;
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note, "killed by signal %d (%s)", sig,
             strsignal(sig));
  } else if (code > 128 && code < 128 + 65 && strcmp(t->status, "oom") != 0) {
    /* a launcher reporting a rank killed by a signal (mpirun: 128 + s) */
    int sig = code - 128;
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note,
             "exit %d: a rank killed by signal %d (%s)", code, sig,
             strsignal(sig));
  } else if (!t->status[0]) {
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note,
             "exit %d and no rows (see its stderr above)", code);
  } else if (code != 0 && !strcmp(t->status, "ok")) {
    snprintf(t->status, sizeof t->status, "error");
    snprintf(t->note, sizeof t->note, "exit %d with ok rows", code);
  }
}
