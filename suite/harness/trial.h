/* trial.h — running one trial of a bench as a child process (trial.c), for
 * benches whose trials may run out of memory or crash (maxbatch): an argv
 * builder, the options given on our command line as text again, the
 * environment without our MPI launch's private variables, and the run
 * itself in its own process group with a timeout and the search's stop
 * signals passed on.  Internal to suite/. */
#ifndef PLATEAU_SUITE_TRIAL_H
#define PLATEAU_SUITE_TRIAL_H

#include <stdbool.h>

#include "options.h"
#include "plateau/plateau.h"

typedef struct pl_argv {
  char **v; /* NULL-terminated */
  int n, cap;
} pl_argv;

void pl_argv_add(pl_argv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Words of s split at blanks. */
void pl_argv_split(pl_argv *a, const char *s);
void pl_argv_free(pl_argv *a);
/* The options of `opts` given on the command line (pl_args_given) as
 * --name=value, except those named in skip (NULL-terminated, may be NULL). */
void pl_argv_forward(pl_argv *out, const pl_args *args, const pl_opt *opts,
                     const char *const *skip);

/* Our environment minus what an MPI singleton or a launcher around us put
 * there (PMIX_*, OMPI_COMM_WORLD_* ...): a launcher in the child must start
 * a job of its own.  A malloc'd NULL-terminated array of borrowed strings. */
char **pl_trial_env(void);

/* Is prog a file we may execute (a path with '/') or one found in PATH? */
bool pl_trial_program_found(const char *prog);

typedef struct pl_trial_exit {
  int code;       /* the exit status, -signal when killed, -1 unknown */
  bool timed_out; /* killed after timeout_s */
} pl_trial_exit;

/* Run argv (argv[0] looked up in PATH) with envp under a guard (this
 * program again as `plateau __trial-guard`, trial.c): the trial in its own
 * process group, its stdout to our stderr; after timeout_s (0: never), on a
 * SIGINT/SIGTERM/SIGHUP to us (passed on, then re-raised here: normally
 * the end of this process) or when this process dies however it dies (kill
 * -9 included), the guard kills every process the trial started (an MPI
 * launcher's ranks and daemons in process groups of their own included)
 * and reaps them.  PL_ERUNTIME when it cannot start. */
pl_status pl_trial_run(char *const *argv, char **envp, int timeout_s,
                       pl_trial_exit *out);
/* `plateau __trial-guard TIMEOUT -- argv...` (main.c, before anything else):
 * the guard's own process; its report goes to fd 3.  Returns its exit. */
int pl_trial_guard_main(int argc, char **argv);

/* What one trial did: the status of its rows (the first row, or the first
 * failing one), their note and the values of the columns asked for, the
 * ranks it ran on, its result file; classified with its exit: only the
 * trial's own oom rows (the allocator's status) are oom; a trial killed by
 * any signal (SIGKILL included, or a launcher's exit 128 + s) or after the
 * timeout is an error naming it, one with no rows or a failing exit with
 * ok rows an error. */
#define PL_TRIAL_MAX_COLS 8
typedef struct pl_trial_result {
  pl_trial_exit ex;
  char status[16]; /* ok | oom | infeasible | error */
  char note[512];
  int ranks;
  char vals[PL_TRIAL_MAX_COLS][32];
  char file[1024]; /* its name in dir */
} pl_trial_result;

/* The result file in dir of bench `bench` whose metadata `point` is point;
 * cols: NULL-terminated.  t->ex is the trial's exit (pl_trial_run). */
void pl_trial_read(const char *dir, const char *bench, const char *point,
                   const char *const *cols, int timeout_s, pl_trial_result *t);

#endif
