/* check_mpi.h — what the main of every MPI Check test shares once its set-up
 * is done: core/check_run.h's suite run without fork (MPI, NCCL and CUDA
 * state must not be inherited across fork), the OpenMP threads of each rank
 * capped to its share of the node's cores, and, given a communicator, the
 * sum of every rank's failures (so that each rank's exit code, and rank 0's
 * summary, speak for all); and the CPU world most of them open and close.
 * Header-only: only tests include it. */
#ifndef PL_CHECK_MPI_H
#define PL_CHECK_MPI_H

#include <omp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "core/check_run.h"
#include "plateau/comm.h"

/* The OpenMP threads of this rank: at most the cores it may run on divided
 * by the ranks of its node (at least one; fewer when OMP_NUM_THREADS says
 * so).  Ranks whose threads together outnumber the cores make libgomp's idle
 * threads spin on the cores that another rank's threads need: every parallel
 * region's barrier then waits on the scheduler, and two ranks on one node ran
 * 10-20 times slower than with one thread each, for as long as the scheduler
 * happened to make them (minutes, past the test's time limit).  Returns the
 * count set; rank 0 prints it, so that a log says what ran. */
static inline int pl_check_mpi_threads(int rank) {
  cpu_set_t set;
  int cores = sched_getaffinity(0, sizeof set, &set) == 0
                  ? CPU_COUNT(&set)
                  : (int)sysconf(_SC_NPROCESSORS_ONLN);
  const int local = pl_local_size() > 0 ? pl_local_size() : 1;
  int per = cores / local;
  if (per < 1)
    per = 1;
  if (per > omp_get_max_threads())
    per = omp_get_max_threads();
  omp_set_num_threads(per);
  if (rank == 0)
    printf("# OpenMP: %d thread(s) per rank (%d rank(s) on this node, %d "
           "core(s))\n",
           per, local, cores);
  return per;
}

/* Runs tests (NULL-terminated) as suite `name` (timeout_s > 0: each test's
 * limit); returns the failed tests: this rank's, or all ranks' when
 * verdict != NULL (a failed reduction counts as one failure). */
static inline int pl_check_run(const char *name, double timeout_s,
                               const TTest *const *tests, int rank,
                               pl_comm *verdict) {
  pl_check_mpi_threads(rank);
  int nf = pl_check_suite(name, timeout_s, tests, NULL, NULL, CK_NOFORK, rank);
  if (verdict) {
    int64_t bad = nf;
    if (pl_host_allreduce_i64(verdict, &bad, 1, PL_RED_SUM) != PL_OK)
      return nf ? nf : 1;
    if (rank == 0 && bad > nf)
      fprintf(stderr, "%lld failed tests over all ranks\n", (long long)bad);
    nf = (int)bad;
  }
  return nf;
}

/* The CPU world of an MPI test's main: pl_init, the CPU device, the world,
 * this rank and the world's size.  Returns 0, or main's exit status (2: no
 * init; 3: no device or world, "<name> test setup: <why>" printed). */
static inline int pl_check_world_open(int *argc, char ***argv, const char *name,
                                      pl_dev **dev, pl_comm **world, int *rank,
                                      int *size) {
  if (pl_init(argc, argv) != PL_OK)
    return 2;
  if (pl_dev_create(PL_BACKEND_CPU, 0, dev) != PL_OK ||
      pl_comm_world(*dev, world) != PL_OK) {
    fprintf(stderr, "%s test setup: %s\n", name, pl_last_error());
    return 3;
  }
  *rank = pl_comm_rank(*world);
  *size = pl_comm_size(*world);
  return 0;
}

/* Frees what pl_check_world_open made and finalizes; main's exit status for
 * nf failed tests. */
static inline int pl_check_world_close(pl_dev *dev, pl_comm *world, int nf) {
  pl_comm_destroy(world);
  pl_dev_destroy(dev);
  pl_finalize();
  return nf ? 1 : 0;
}

#endif
