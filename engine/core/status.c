/* status.c — status names, the thread-local last-error message, and the
 * status -> exit-code mapping the suite uses. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "plateau/status.h"

static _Thread_local char last_msg[1024];

const char *pl_strerror(pl_status s) {
  switch (s) {
  case PL_OK:
    return "PL_OK";
  case PL_EINVAL:
    return "PL_EINVAL";
  case PL_ENOMEM:
    return "PL_ENOMEM";
  case PL_ERUNTIME:
    return "PL_ERUNTIME";
  case PL_ECOMM:
    return "PL_ECOMM";
  case PL_ETIMEOUT:
    return "PL_ETIMEOUT";
  case PL_EUNSUPPORTED:
    return "PL_EUNSUPPORTED";
  case PL_EIO:
    return "PL_EIO";
  case PL_ECHECK:
    return "PL_ECHECK";
  case PL_EINFEASIBLE:
    return "PL_EINFEASIBLE";
  }
  return "PL_E?";
}

const char *pl_last_error(void) {
  return last_msg;
}

void pl_clear_error(void) {
  last_msg[0] = '\0';
}

pl_status pl_set_error(pl_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_msg, sizeof last_msg, fmt, ap);
  va_end(ap);
  return s;
}

pl_status pl_error_prefix(pl_status s, const char *fmt, ...) {
  char why[sizeof last_msg];
  snprintf(why, sizeof why, "%s", last_msg);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(last_msg, sizeof last_msg, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof last_msg)
    snprintf(last_msg + n, sizeof last_msg - (size_t)n, "%s", why);
  return s;
}

int pl_status_exit_code(pl_status s) {
  switch (s) {
  case PL_OK:
    return 0;
  case PL_ECHECK:
    return 1;
  case PL_EINVAL:
    return 2;
  default:
    return 3;
  }
}

void pl_assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "plateau: internal invariant broken: %s (%s:%d)\n", expr,
          file, line);
  fflush(stderr);
  abort();
}
