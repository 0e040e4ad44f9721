/* comm_probe_testlib.h — the hidden modes of test_mpi_comm that
 * engine/comm/test_timeout.sh runs (env PLATEAU_TEST_MODE): processes that
 * misbehave on purpose so that the watchdog and the launch checks can be
 * seen to act.  Included by that test only.
 *
 *   hang  rank 0 skips one collective (PLATEAU_TEST_HANG_OP: barrier |
 *         allreduce; PLATEAU_TEST_BACKEND: cpu | cuda) under a 2 s timeout,
 *         so the watchdog of the other ranks must abort the job;
 *   init  only pl_init: prints its refusal and exits 2 (the SLURM_NTASKS
 *         check), or prints "init ok" and exits 0;
 *   stop  rank 0 stops itself (SIGSTOP) before a barrier; the others write
 *         their pid to PLATEAU_TEST_PIDFILE.<rank> and wait in the barrier
 *         under the default deadline (PLATEAU_COMM_TIMEOUT), so that the
 *         test can measure what a survivor costs while it waits. */
#ifndef PLATEAU_COMM_PROBE_TESTLIB_H
#define PLATEAU_COMM_PROBE_TESTLIB_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plateau/plateau.h"

static int mode_init(int *argc, char ***argv) {
  pl_status s = pl_init(argc, argv);
  if (s != PL_OK) {
    fprintf(stderr, "[r%d error] %s\n", pl_world_rank(), pl_last_error());
    pl_finalize();
    return 2;
  }
  printf("init ok: world size %d\n", pl_world_size());
  pl_finalize();
  return 0;
}

static int mode_hang(int *argc, char ***argv) {
  if (pl_init(argc, argv) != PL_OK) {
    fprintf(stderr, "%s\n", pl_last_error());
    return 2;
  }
  const char *bs = getenv("PLATEAU_TEST_BACKEND");
  const char *op = getenv("PLATEAU_TEST_HANG_OP");
  pl_backend be = PL_BACKEND_CPU;
  if (bs && pl_backend_parse(bs, &be) != PL_OK)
    return 2;
  pl_dev *dev = NULL;
  pl_comm *c = NULL;
  if (pl_dev_create(be, -1, &dev) != PL_OK || pl_comm_world(dev, &c) != PL_OK ||
      pl_comm_set_timeout(c, 2.0) != PL_OK) {
    fprintf(stderr, "hang probe set-up: %s\n", pl_last_error());
    return 3;
  }
  fprintf(stderr, "hang probe: rank %d ready\n", pl_world_rank());
  if (pl_world_rank() == 0) {
    sleep(60); /* skips the collective; the others' watchdog must fire */
    return 0;
  }
  if (op && strcmp(op, "allreduce") == 0) {
    void *d = NULL;
    if (pl_alloc(dev, PL_ARENA_DEVICE, 1024 * sizeof(float), "probe", &d) ||
        pl_fill(pl_dev_stream(dev), d, PL_F32, 1024, 1.0) ||
        pl_allreduce(c, d, d, 1024, PL_F32, PL_RED_SUM, NULL) ||
        pl_stream_sync(pl_dev_stream(dev))) {
      fprintf(stderr, "hang probe: %s\n", pl_last_error());
      return 3;
    }
  } else {
    pl_barrier(c);
  }
  fprintf(stderr, "hang probe: rank %d returned (watchdog did not fire)\n",
          pl_world_rank());
  return 0;
}

static int mode_stop(int *argc, char ***argv) {
  if (pl_init(argc, argv) != PL_OK) {
    fprintf(stderr, "%s\n", pl_last_error());
    return 2;
  }
  pl_dev *dev = NULL;
  pl_comm *c = NULL;
  if (pl_dev_create(PL_BACKEND_CPU, 0, &dev) != PL_OK ||
      pl_comm_world(dev, &c) != PL_OK) {
    fprintf(stderr, "stop probe set-up: %s\n", pl_last_error());
    return 3;
  }
  pl_barrier(c); /* everyone is up */
  if (pl_world_rank() == 0) {
    fprintf(stderr, "stop probe: rank 0 stops\n");
    raise(SIGSTOP);
    return 0;
  }
  const char *pf = getenv("PLATEAU_TEST_PIDFILE");
  if (pf) {
    char path[512];
    snprintf(path, sizeof path, "%s.%d", pf, pl_world_rank());
    FILE *f = fopen(path, "w");
    if (f) {
      fprintf(f, "%ld\n", (long)getpid());
      fclose(f);
    }
  }
  pl_barrier(c);
  fprintf(stderr, "stop probe: rank %d returned (watchdog did not fire)\n",
          pl_world_rank());
  return 0;
}

#endif
