/* harness.h — what the harness's files (bench.c, harness_rows.c,
 * harness_measure.c) share and benches do not use: the columns of the run
 * being written.  Internal to suite/. */
#ifndef PLATEAU_SUITE_HARNESS_H
#define PLATEAU_SUITE_HARNESS_H

#include <stdbool.h>

#include "plateau/plateau.h"

/* The columns of this run: `bench`, then the bench's (tab-separated); the
 * harness's status, check and note follow them in every row. */
void pl__rows_begin(const char *bench, const char *columns);
void pl__rows_end(void);
/* Rows written and rows with check=fail so far (rank 0). */
void pl__rows_counts(int *nrows, int *nfail);
/* Does this run list column col? */
bool pl__rows_listed(const char *col);
/* The header line of the result file (malloc'd). */
char *pl__rows_header(void);
/* The human table's header on stdout. */
void pl__rows_print_header(void);

/* The device of a run (harness_dev.c): backend be's, or for dry a dry
 * device playing the planner's default GPU.  The note its rows carry about
 * the backend (CPU times; a dry device's memory only). */
pl_status pl__bench_dev_create(pl_backend be, int rank, pl_dev **out);
const char *pl__bench_dev_note(const pl_dev *dev);

#endif
