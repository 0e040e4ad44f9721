/* comm_watch.c — the watchdog of pl_comm, which turns a stalled collective
 * into an abort of every rank instead of a hang, and the wait that completes
 * every MPI data operation without busy-polling a core.  comm.c (start-up,
 * communicators, the MPI transport, dispatch to NCCL) and comm_nccl.cu call
 * it through comm_internal.h.
 *
 * Watchdog: one thread per process, started with the first watched operation.
 * Blocking calls (MPI, NCCL set-up) register (op, group size, rank, deadline)
 * and unregister when they return; enqueued NCCL operations hand over a CUDA
 * event recorded after them, which the watchdog polls until it completes.  A
 * passed deadline prints `[rX error] pl_comm: <op> (group of N, rank r) did
 * not complete within T s; aborting all ranks`, aborts the NCCL communicator
 * and calls MPI_Abort(MPI_COMM_WORLD, 3).  MPI_Abort is called from the
 * watchdog thread while the main thread may be blocked inside MPI; the MPI
 * standard asks for MPI_THREAD_MULTIPLE for that, but Open MPI's MPI_Abort
 * only tells the runtime (orted / PMIx) to kill the job and works under
 * FUNNELED (engine/comm/test_timeout.sh checks it under mpirun).  If
 * MPI_Abort ever returns, the process _exit(3)s, which the launcher also turns
 * into a job abort.  A SIGALRM armed before ncclCommAbort guards against an
 * abort that itself hangs.
 *
 * Deadlines: PLATEAU_COMM_TIMEOUT=S (or pl_comm_set_timeout) gives every
 * operation exactly S seconds.  Unset, an operation gets a floor of 120 s
 * plus 1 s per 100 MB it moves (rank skew before a collective, a set-up or
 * a reference check on one rank, is what the floor covers; the allowance
 * is 10x below the slowest interconnect we run on, so a large transfer
 * never trips it).  Half way to the deadline the watchdog says once that
 * the operation is still waiting and when it will abort.
 *
 * Waiting: MPI's blocking calls busy-poll, so the survivor of a stopped
 * (not killed) rank burned a core until the deadline.  Every MPI data
 * operation is issued non-blocking and completed by pl__mpi_wait: MPI_Test
 * in a tight loop for the first 100 ms (a synchronized collective returns as
 * fast as a blocking one: the timed runs are unchanged), then sleeps that
 * grow to 5 ms between tests (a waiting rank costs a few % of a core). */
#include "comm/comm_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plateau/log.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- watchdog ------------------------------------------------------------ */

typedef struct watch {
  int used;
  char op[32];
  int group, rank;
  double timeout_s;
  uint64_t start_ns, deadline_ns;
  int warned;  /* the half-way note was printed                         */
  void *event; /* cudaEvent_t for an enqueued NCCL op; NULL for blocking */
  int ordinal; /* its GPU                                                */
  const pl_comm *comm;
  void *nccl; /* to abort on timeout                                    */
} watch;

static pthread_mutex_t g_wlock = PTHREAD_MUTEX_INITIALIZER;
static watch *g_w;
static int g_wcap;
static int g_wstarted;
static volatile int g_wstop;
static pthread_t g_wthread;

/* Called with g_wlock held; never returns. */
static void watch_fire(const watch *w, int timed_out) {
  if (timed_out)
    fprintf(stderr,
            "[r%d error] pl_comm: %s (group of %d, rank %d) did not complete "
            "within %g s; aborting all ranks\n",
            pl__world_rank, w->op, w->group, w->rank, w->timeout_s);
  else
    fprintf(stderr,
            "[r%d error] pl_comm: %s (group of %d, rank %d) failed on the "
            "device (CUDA error above); aborting all ranks\n",
            pl__world_rank, w->op, w->group, w->rank);
  fflush(stderr);
  alarm(20); /* if the aborts below hang, SIGALRM ends the process */
#if PL_HAVE_CUDA
  if (w->nccl)
    pl__nccl_abort(w->nccl);
#endif
  MPI_Abort(MPI_COMM_WORLD, 3);
  _exit(3);
}

static void *watch_main(void *arg) {
  (void)arg;
  const struct timespec tick = {0, 20 * 1000 * 1000}; /* 20 ms */
  while (!g_wstop) {
    pthread_mutex_lock(&g_wlock);
    uint64_t now = now_ns();
    for (int i = 0; i < g_wcap; i++) {
      watch *w = &g_w[i];
      if (!w->used)
        continue;
#if PL_HAVE_CUDA
      if (w->event) {
        int q = pl__nccl_event_query(w->event, w->ordinal);
        if (q == 1) {
          pl__nccl_event_destroy(w->event, w->ordinal);
          w->used = 0;
          continue;
        }
        if (q < 0)
          watch_fire(w, 0);
      }
#endif
      if (now > w->deadline_ns)
        watch_fire(w, 1);
      if (!w->warned &&
          now > w->start_ns + (w->deadline_ns - w->start_ns) / 2) {
        w->warned = 1;
        fprintf(stderr,
                "[r%d warn] pl_comm: %s (group of %d, rank %d) waiting for "
                "%.0f s; aborting all ranks at %g s (PLATEAU_COMM_TIMEOUT "
                "sets the deadline)\n",
                pl__world_rank, w->op, w->group, w->rank,
                (double)(now - w->start_ns) / 1e9, w->timeout_s);
        fflush(stderr);
      }
    }
    pthread_mutex_unlock(&g_wlock);
    nanosleep(&tick, NULL);
  }
  return NULL;
}

/* With g_wlock held: a free slot (growing the table), the thread running. */
static int watch_slot_locked(void) {
  if (!g_wstarted) {
    g_wstop = 0;
    if (pthread_create(&g_wthread, NULL, watch_main, NULL) != 0)
      return -1;
    g_wstarted = 1;
  }
  for (int i = 0; i < g_wcap; i++)
    if (!g_w[i].used)
      return i;
  int ncap = g_wcap ? 2 * g_wcap : 64;
  watch *nw = realloc(g_w, (size_t)ncap * sizeof *nw);
  if (!nw)
    return -1;
  memset(nw + g_wcap, 0, (size_t)(ncap - g_wcap) * sizeof *nw);
  int slot = g_wcap;
  g_w = nw;
  g_wcap = ncap;
  return slot;
}

static void watch_fill(watch *w, const pl_comm *c, const char *op,
                       double timeout_s) {
  memset(w, 0, sizeof *w);
  w->used = 1;
  snprintf(w->op, sizeof w->op, "%s", op);
  w->group = c ? c->size : pl__world_size;
  w->rank = c ? c->rank : pl__world_rank;
  w->timeout_s = timeout_s;
  w->start_ns = now_ns();
  w->deadline_ns = w->start_ns + (uint64_t)(timeout_s * 1e9);
  w->comm = c;
  w->nccl = c ? c->nccl : NULL;
  w->ordinal = c && c->dev ? c->dev->ordinal : 0;
}

/* Returns a slot, or -1 when the watchdog could not be set up (the operation
 * then runs unwatched; a warning says so once). */
int pl__watch_begin_t(const pl_comm *c, const char *op, double timeout_s) {
  pthread_mutex_lock(&g_wlock);
  int slot = watch_slot_locked();
  if (slot >= 0)
    watch_fill(&g_w[slot], c, op, timeout_s);
  pthread_mutex_unlock(&g_wlock);
  if (slot < 0) {
    static int warned;
    if (!warned)
      PL_WARN("pl_comm: watchdog unavailable; %s is unwatched", op);
    warned = 1;
  }
  return slot;
}

/* The deadline of an operation moving `bytes` on c (see the header). */
static double deadline_s(const pl_comm *c, double bytes) {
  const double base = c ? c->timeout_s : pl__default_timeout;
  const double rate = c ? c->bytes_per_s : pl__bytes_per_s;
  return rate > 0 ? base + bytes / rate : base;
}

int pl__watch_begin(const pl_comm *c, const char *op) {
  return pl__watch_begin_t(c, op, deadline_s(c, 0));
}

int pl__watch_begin_n(const pl_comm *c, const char *op, double bytes) {
  return pl__watch_begin_t(c, op, deadline_s(c, bytes));
}

/* Complete the requests without busy-polling a core for long: MPI_Test in a
 * tight loop for 100 ms, then sleeps growing from 50 us to 5 ms. */
int pl__mpi_wait(int n, MPI_Request *req, MPI_Status *st) {
  const uint64_t t0 = now_ns(), spin_ns = 100 * 1000 * 1000;
  long nap_ns = 50 * 1000;
  for (;;) {
    int done = 0;
    int rc = MPI_Testall(n, req, &done, st ? st : MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || done)
      return rc;
    if (now_ns() - t0 < spin_ns)
      continue;
    struct timespec ts = {0, nap_ns};
    nanosleep(&ts, NULL);
    if (nap_ns < 5 * 1000 * 1000)
      nap_ns *= 2;
  }
}

void pl__watch_end(int slot) {
  if (slot < 0)
    return;
  pthread_mutex_lock(&g_wlock);
  g_w[slot].used = 0;
  pthread_mutex_unlock(&g_wlock);
}

pl_status pl__watch_event(const pl_comm *c, const char *op, void *event) {
  pthread_mutex_lock(&g_wlock);
  int slot = watch_slot_locked();
  if (slot >= 0) {
    watch_fill(&g_w[slot], c, op, c->timeout_s);
    g_w[slot].event = event;
  }
  pthread_mutex_unlock(&g_wlock);
  if (slot < 0) {
#if PL_HAVE_CUDA
    pl__nccl_event_destroy(event, c->dev->ordinal);
#endif
    return pl_set_error(PL_ERUNTIME,
                        "pl_comm: %s: cannot watch (no memory "
                        "or no thread for the watchdog)",
                        op);
  }
  return PL_OK;
}

void pl__watch_drain(const pl_comm *c) {
  const struct timespec ms = {0, 1000 * 1000};
  for (;;) {
    int pending = 0;
    pthread_mutex_lock(&g_wlock);
    for (int i = 0; i < g_wcap; i++) {
      watch *w = &g_w[i];
      if (!w->used || w->comm != c || !w->event)
        continue;
#if PL_HAVE_CUDA
      if (pl__nccl_event_query(w->event, w->ordinal) == 1) {
        pl__nccl_event_destroy(w->event, w->ordinal);
        w->used = 0;
        continue;
      }
#endif
      pending++;
    }
    pthread_mutex_unlock(&g_wlock);
    if (!pending)
      return;
    nanosleep(&ms, NULL); /* the watchdog still enforces the deadlines */
  }
}

void pl__watch_stop(void) {
  if (!g_wstarted)
    return;
  g_wstop = 1;
  pthread_join(g_wthread, NULL);
  g_wstarted = 0;
  free(g_w);
  g_w = NULL;
  g_wcap = 0;
}
