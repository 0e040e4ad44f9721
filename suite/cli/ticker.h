/* ticker.h — a progress line on stderr every 2 s while a long computation
 * runs, when stderr is a terminal (a log, or a file that also takes stdout,
 * stays the output alone).  Internal to the CLI. */
#ifndef PLATEAU_SUITE_CLI_TICKER_H
#define PLATEAU_SUITE_CLI_TICKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct pl__ticker {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  uint64_t t0;
  const char *what; /* "WHAT: elapsed 4.0s" (borrowed)                     */
} pl__ticker;

/* true when the ticker runs (pl__ticker_stop then ends it); false when
 * stderr is no terminal or no thread could start: no lines, nothing else
 * differs. */
bool pl__ticker_start(pl__ticker *t, const char *what);
void pl__ticker_stop(pl__ticker *t);

#endif
