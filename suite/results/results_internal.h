/* results_internal.h — what the writer of result files (results.c) and
 * their reader (results_read.c) share.  Internal to suite/. */
#ifndef PLATEAU_SUITE_RESULTS_INTERNAL_H
#define PLATEAU_SUITE_RESULTS_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#include "plateau/status.h"

/* The field a writer appends to close a torn fragment (a row whose writer
 * died mid-line), so that no reader takes the fragment for a row. */
#define PL__TORN_MARK "!torn"

/* The number of tab-separated fields of line[0..len) (tabs + 1). */
int pl__results_count_fields(const char *line, size_t len);
/* Open path for reading only if it is a regular file (a FIFO named *.tsv
 * never blocks the caller); NULL with *st and the error message set. */
FILE *pl__results_open_regular(const char *path, pl_status *st);

#endif
