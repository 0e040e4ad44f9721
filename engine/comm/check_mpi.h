/* check_mpi.h — what the main of every MPI Check test shares once its set-up
 * is done: one suite of one test case, run without fork (MPI, NCCL and CUDA
 * state must not be inherited across fork), the full report on rank 0, a
 * rank's own failures printed by that rank too, and, given a communicator,
 * the sum of every rank's failures (so that each rank's exit code, and rank
 * 0's summary, speak for all).  Header-only: only tests include it. */
#ifndef PL_CHECK_MPI_H
#define PL_CHECK_MPI_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>

#include "plateau/comm.h"

/* Runs tests (NULL-terminated) as suite `name` (timeout_s > 0: each test's
 * limit); returns the failed tests: this rank's, or all ranks' when
 * verdict != NULL (a failed reduction counts as one failure). */
static inline int pl_check_run(const char *name, double timeout_s, const TTest *const *tests,
                               int rank, pl_comm *verdict) {
  Suite *su = suite_create(name);
  TCase *tc = tcase_create(name);
  if (timeout_s > 0) tcase_set_timeout(tc, timeout_s);
  for (; *tests; tests++) tcase_add_test(tc, *tests);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, rank == 0 ? CK_NORMAL : CK_SILENT);
  int nf = srunner_ntests_failed(sr);
  if (rank != 0 && nf) {
    fprintf(stderr, "[r%d] failures on this rank:\n", rank);
    srunner_print(sr, CK_NORMAL);
  }
  srunner_free(sr);
  if (verdict) {
    int64_t bad = nf;
    if (pl_host_allreduce_i64(verdict, &bad, 1, PL_RED_SUM) != PL_OK) return nf ? nf : 1;
    if (rank == 0 && bad > nf) fprintf(stderr, "%lld failed tests over all ranks\n", (long long)bad);
    nf = (int)bad;
  }
  return nf;
}

#endif
