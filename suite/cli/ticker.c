/* ticker.c — the CLI's progress lines (ticker.h). */
#include "ticker.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plateau/timer.h"

static void *ticker_main(void *p) {
  pl__ticker *t = p;
  pthread_mutex_lock(&t->mu);
  while (!t->done) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 2;
    while (!t->done && pthread_cond_timedwait(&t->cv, &t->mu, &ts) == 0)
      ;
    if (!t->done) {
      fprintf(stderr, "%s: elapsed %.1fs\n", t->what, pl_elapsed_s(t->t0));
      fflush(stderr);
    }
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

bool pl__ticker_start(pl__ticker *t, const char *what) {
  memset(t, 0, sizeof *t);
  if (!isatty(STDERR_FILENO))
    return false;
  t->what = what;
  t->t0 = pl_now_ns();
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  if (pthread_create(&t->th, NULL, ticker_main, t) == 0)
    return true;
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  return false; /* no progress lines: the output is the same */
}

void pl__ticker_stop(pl__ticker *t) {
  pthread_mutex_lock(&t->mu);
  t->done = true;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->th, NULL);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
}
