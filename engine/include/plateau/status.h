/* status.h — error codes, their names, and the last-error message.
 *
 * Every engine function that can fail returns a pl_status: 0 is success, the
 * negative values below are the only failures.  A failing function also leaves
 * a human message (which value, what is allowed) in a thread-local buffer that
 * pl_last_error() returns, so callers can report it without threading strings
 * through every signature.  The library never exits; suite/ maps statuses to
 * process exit codes (pl_status_exit_code). */
#ifndef PLATEAU_STATUS_H
#define PLATEAU_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_status {
  PL_OK = 0,
  PL_EINVAL = -1,       /* bad input: a value outside what is allowed       */
  PL_ENOMEM = -2,       /* out of memory in a tracked arena (a result: oom) */
  PL_ERUNTIME = -3,     /* a backend call failed (CUDA, cuBLAS, BLAS)       */
  PL_ECOMM = -4,        /* a communicator call failed (MPI, NCCL)           */
  PL_ETIMEOUT = -5,     /* a collective or wait did not finish in time      */
  PL_EUNSUPPORTED = -6, /* not available in this build or on this machine   */
  PL_EIO = -7,          /* file system error                                */
  PL_ECHECK = -8,       /* a correctness check failed                       */
  PL_EINFEASIBLE = -9,  /* the configuration cannot fit (a result)          */
} pl_status;

/* Short constant name of a status ("PL_ENOMEM"); never NULL. */
const char *pl_strerror(pl_status s);

/* The message recorded by the most recent failing call on this thread, or ""
 * when there is none.  Valid until the next pl_set_error on this thread. */
const char *pl_last_error(void);

/* Record a message for status s (printf format) and return s, so library code
 * can write `return pl_set_error(PL_EINVAL, "N=%d: must be >= 0", n);`. */
pl_status pl_set_error(pl_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Pass a failure up with what was being done: the last-error message
 * becomes fmt's text followed by the message it held ("--out=x: " + why);
 * returns s.  The one way to prefix an error. */
pl_status pl_error_prefix(pl_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clear the last-error message of this thread. */
void pl_clear_error(void);

/* Exit code the suite uses for a status: 0 ok, 1 check failed, 2 usage or bad
 * input, 3 any runtime error (oom and infeasible are results, not exit codes,
 * when a bench records them as rows; used bare they map to 3). */
int pl_status_exit_code(pl_status s);

/* Propagate a failing status. */
#define PL_TRY(expr)                                                           \
  do {                                                                         \
    pl_status pl_try_s_ = (expr);                                              \
    if (pl_try_s_ != PL_OK)                                                    \
      return pl_try_s_;                                                        \
  } while (0)

/* Propagate a failing status through a function's cleanup: st = expr, and
 * on failure jump to label (where the function frees what it holds and
 * returns st).  Every name it uses is an argument. */
#define PL_TRY_GOTO(st, label, expr)                                           \
  do {                                                                         \
    if (((st) = (expr)) != PL_OK)                                              \
      goto label;                                                              \
  } while (0)

/* Broken invariant (a bug, never bad input): print file:line and abort. */
void pl_assert_fail(const char *expr, const char *file, int line);
#define PL_ASSERT(cond)                                                        \
  do {                                                                         \
    if (!(cond))                                                               \
      pl_assert_fail(#cond, __FILE__, __LINE__);                               \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
