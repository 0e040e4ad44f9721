/* check_mpi.h — what the main of every MPI Check test shares once its set-up
 * is done: core/check_run.h's suite run without fork (MPI, NCCL and CUDA
 * state must not be inherited across fork) and, given a communicator, the
 * sum of every rank's failures (so that each rank's exit code, and rank 0's
 * summary, speak for all).  Header-only: only tests include it. */
#ifndef PL_CHECK_MPI_H
#define PL_CHECK_MPI_H

#include <stdint.h>
#include <stdio.h>

#include "core/check_run.h"
#include "plateau/comm.h"

/* Runs tests (NULL-terminated) as suite `name` (timeout_s > 0: each test's
 * limit); returns the failed tests: this rank's, or all ranks' when
 * verdict != NULL (a failed reduction counts as one failure). */
static inline int pl_check_run(const char *name, double timeout_s, const TTest *const *tests,
                               int rank, pl_comm *verdict) {
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
