/* ahead.c — ranking in order, measuring ahead on two threads
 * (plan_internal.h).
 *
 * The search ranks its candidates one after another, each decision
 * depending on the ranking so far.  What costs is each candidate's memory
 * measurements, and those are pure: so a second thread, and the search
 * itself while the candidate it is at is still being measured, each take
 * the next candidate nobody has (at most AHEAD past the one the search is
 * at) and rank it on a copy of the search's ranking as it is, through a
 * view of the search's memo that leaves what it measures in the memo's
 * store.  The copies are thrown away; the search then ranks each
 * candidate in turn and finds its measurements made. */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

#define AHEAD 6
enum { C_OPEN, C_TAKEN, C_DONE };

struct pl__ahead {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t th;
  pl__guess_fn guess;
  void *ctx;
  int n;               /* candidates */
  int at;              /* the candidate the search ranks next */
  bool stop;           /* the thread ends */
  unsigned char *cand; /* each candidate's C_ state */
  size_t bytes;        /* a ranking's */
  void *snap;          /* the search's ranking when it came to `at` */
  void *mine[2];       /* the thread's and the search's copies */
};

bool pl__ahead_may_run(int n) {
  return n > 1 && !omp_in_parallel() && omp_get_max_threads() > 1;
}

/* The first candidate past `at` (within AHEAD) nobody has, taken; -1 when
 * there is none.  The lock held. */
static int take(pl__ahead *a) {
  for (int j = a->at + 1; j < a->n && j <= a->at + AHEAD; j++)
    if (a->cand[j] == C_OPEN) {
      a->cand[j] = C_TAKEN;
      return j;
    }
  return -1;
}

/* Guess candidate j on a copy of the search's ranking (the lock held, and
 * released meanwhile). */
static void guess_one(pl__ahead *a, int who, int j) {
  memcpy(a->mine[who], a->snap, a->bytes);
  pthread_mutex_unlock(&a->mu);
  a->guess(a->ctx, a->mine[who], j);
  pthread_mutex_lock(&a->mu);
  a->cand[j] = C_DONE;
  pthread_cond_broadcast(&a->cv);
}

static void *ahead_main(void *p) {
  pl__ahead *a = p;
  pthread_mutex_lock(&a->mu);
  while (!a->stop) {
    const int j = take(a);
    if (j < 0)
      pthread_cond_wait(&a->cv, &a->mu);
    else
      guess_one(a, 0, j);
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

static void ahead_free(pl__ahead *a) {
  free(a->cand), free(a->snap), free(a->mine[0]), free(a->mine[1]);
  free(a);
}

pl__ahead *pl__ahead_start(int n, size_t bytes, const void *ranking,
                           pl__guess_fn guess, void *ctx) {
  pl__ahead *a = calloc(1, sizeof *a);
  if (!a)
    return NULL;
  a->guess = guess, a->ctx = ctx, a->n = n, a->bytes = bytes;
  a->cand = calloc((size_t)n, 1);
  a->snap = malloc(bytes);
  a->mine[0] = malloc(bytes);
  a->mine[1] = malloc(bytes);
  if (!a->cand || !a->snap || !a->mine[0] || !a->mine[1]) {
    ahead_free(a);
    return NULL;
  }
  memcpy(a->snap, ranking, bytes);
  if (pthread_mutex_init(&a->mu, NULL)) {
    ahead_free(a);
    return NULL;
  }
  if (pthread_cond_init(&a->cv, NULL)) {
    pthread_mutex_destroy(&a->mu);
    ahead_free(a);
    return NULL;
  }
  if (pthread_create(&a->th, NULL, ahead_main, a)) {
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    ahead_free(a);
    return NULL;
  }
  return a;
}

void pl__ahead_at(pl__ahead *a, int i, const void *ranking) {
  if (!a)
    return;
  pthread_mutex_lock(&a->mu);
  a->at = i;
  memcpy(a->snap, ranking, a->bytes);
  pthread_cond_broadcast(&a->cv);
  while (a->cand[i] == C_TAKEN) { /* being guessed: guess others meanwhile */
    const int j = take(a);
    if (j < 0)
      pthread_cond_wait(&a->cv, &a->mu);
    else
      guess_one(a, 1, j);
  }
  a->cand[i] = C_DONE; /* the search's own now */
  pthread_mutex_unlock(&a->mu);
}

void pl__ahead_stop(pl__ahead *a) {
  if (!a)
    return;
  pthread_mutex_lock(&a->mu);
  a->stop = true;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  pthread_join(a->th, NULL);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
  ahead_free(a);
}
