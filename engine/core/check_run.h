/* check_run.h — what the main of every Check test shares: the tests of one
 * test case in one suite, run and reported, the failures counted.
 * Header-only: only tests include it. */
#ifndef PL_CHECK_RUN_H
#define PL_CHECK_RUN_H

#include <check.h>
#include <stdio.h>

#include "plateau/dev.h"

/* Runs tests (NULL-terminated) as suite `name`, each between setup and
 * teardown when not NULL (a checked fixture); timeout_s > 0 limits each
 * forked test.  fork: CK_FORK_GETENV (Check's default: fork unless CK_FORK=no),
 * CK_FORK, or CK_NOFORK (CUDA and MPI state must not be inherited across
 * fork).  The full report on rank 0; another rank prints only its own
 * failures.  Returns the number of failed tests. */
static inline int pl_check_suite(const char *name, double timeout_s,
                                 const TTest *const *tests, SFun setup,
                                 SFun teardown, enum fork_status fork,
                                 int rank) {
  Suite *su = suite_create(name);
  TCase *tc = tcase_create(name);
  if (setup || teardown)
    tcase_add_checked_fixture(tc, setup, teardown);
  if (timeout_s > 0)
    tcase_set_timeout(tc, timeout_s);
  for (; *tests; tests++)
    tcase_add_test(tc, *tests);
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  if (fork != CK_FORK_GETENV)
    srunner_set_fork_status(sr, fork);
  srunner_run_all(sr, rank == 0 ? CK_NORMAL : CK_SILENT);
  const int nf = srunner_ntests_failed(sr);
  if (rank != 0 && nf) {
    fprintf(stderr, "[r%d] failures on this rank:\n", rank);
    srunner_print(sr, CK_NORMAL);
  }
  srunner_free(sr);
  return nf;
}

/* The devices of a CUDA-vs-CPU test: 0 (and "skipped: no CUDA device"
 * printed) without a GPU; else 1 with *cpu and *gpu created (asserted). */
static inline int pl_check_cpu_and_gpu(pl_dev **cpu, pl_dev **gpu) {
  if (pl_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return 0;
  }
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, cpu), PL_OK);
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CUDA, -1, gpu), PL_OK);
  return 1;
}

#endif
