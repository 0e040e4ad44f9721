/* thread_exit.c — releases run when a thread ends (core/internal.h):
 * per-thread caches (the dry device's shared routes, the MoE plan's memos)
 * let go of what they hold when their thread exits, through one thread key
 * whose destructor runs every release registered. */
#include <pthread.h>

#include "core/internal.h"

#define RELEASES 8

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t exit_mu = PTHREAD_MUTEX_INITIALIZER;
static void (*releases[RELEASES])(void);
static int nreleases;
static _Thread_local void (*t_armed[RELEASES])(void); /* this thread's */

static void run_releases(void *unused) {
  (void)unused;
  pthread_mutex_lock(&exit_mu);
  const int n = nreleases;
  pthread_mutex_unlock(&exit_mu);
  for (int i = 0; i < n; i++)
    releases[i]();
}

static void key_make(void) {
  (void)pthread_key_create(&exit_key, run_releases);
}

void pl__at_thread_exit(void (*release)(void)) {
  int j = 0;
  for (; j < RELEASES && t_armed[j]; j++)
    if (t_armed[j] == release)
      return; /* armed in this thread already */
  pthread_once(&exit_once, key_make);
  pthread_mutex_lock(&exit_mu);
  int i = 0;
  while (i < nreleases && releases[i] != release)
    i++;
  PL_ASSERT(i < RELEASES);
  if (i == nreleases)
    releases[nreleases++] = release;
  pthread_mutex_unlock(&exit_mu);
  if (j < RELEASES)
    t_armed[j] = release;
  (void)pthread_setspecific(exit_key, &exit_key); /* non-NULL: run at exit */
}
