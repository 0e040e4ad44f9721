/* log.c — rank-prefixed, levelled logging to stderr: `[r3 info] text`.
 * One fprintf per line so lines from ranks sharing a terminal do not mix. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plateau/log.h"

static int log_rank = -1;
static int log_level = -1; /* -1: not yet read from PLATEAU_LOG */

void pl_log_set_rank(int rank) {
  log_rank = rank;
}
void pl_log_set_level(pl_log_level level) {
  log_level = (int)level;
}

pl_log_level pl_log_get_level(void) {
  if (log_level < 0) {
    const char *e = getenv("PLATEAU_LOG");
    log_level = PL_LOG_INFO;
    if (e) {
      if (!strcmp(e, "error"))
        log_level = PL_LOG_ERROR;
      else if (!strcmp(e, "warn"))
        log_level = PL_LOG_WARN;
      else if (!strcmp(e, "debug"))
        log_level = PL_LOG_DEBUG;
    }
  }
  return (pl_log_level)log_level;
}

void pl_log(pl_log_level level, const char *fmt, ...) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  if ((int)level > (int)pl_log_get_level())
    return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t n = strlen(msg);
  while (n && msg[n - 1] == '\n')
    msg[--n] = '\0';
  char rank[16];
  if (log_rank >= 0)
    snprintf(rank, sizeof rank, "r%d", log_rank);
  else
    snprintf(rank, sizeof rank, "r?");
  fprintf(stderr, "[%s %s] %s\n", rank, names[level], msg);
}
