/* check_mpi.h — what the main of every MPI Check test shares once its set-up
 * is done: core/check_run.h's suite run without fork (MPI, NCCL and CUDA
 * state must not be inherited across fork), the OpenMP threads of each rank
 * capped to its share of the node's cores, and, given a communicator, the
 * sum of every rank's failures (so that each rank's exit code, and rank 0's
 * summary, speak for all).  Header-only: only tests include it. */
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
  int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                           : (int)sysconf(_SC_NPROCESSORS_ONLN);
  const int local = pl_local_size() > 0 ? pl_local_size() : 1;
  int per = cores / local;
  if (per < 1) per = 1;
  if (per > omp_get_max_threads()) per = omp_get_max_threads();
  omp_set_num_threads(per);
  if (rank == 0)
    printf("# OpenMP: %d thread(s) per rank (%d rank(s) on this node, %d core(s))\n", per, local, cores);
  return per;
}

/* Runs tests (NULL-terminated) as suite `name` (timeout_s > 0: each test's
 * limit); returns the failed tests: this rank's, or all ranks' when
 * verdict != NULL (a failed reduction counts as one failure). */
static inline int pl_check_run(const char *name, double timeout_s, const TTest *const *tests,
                               int rank, pl_comm *verdict) {
  pl_check_mpi_threads(rank);
  int nf = pl_check_suite(name, timeout_s, tests, NULL, NULL, CK_NOFORK, rank);
  if (verdict) {
    int64_t bad = nf;
    if (pl_host_allreduce_i64(verdict, &bad, 1, PL_RED_SUM) != PL_OK) return nf ? nf : 1;
    if (rank == 0 && bad > nf) fprintf(stderr, "%lld failed tests over all ranks\n", (long long)bad);
    nf = (int)bad;
  }
  return nf;
}

#endif
