/* report_vocab.h — the `plateau report` hook of the vocab bench
 * (report_vocab.c): add {"vocab", pl_report_vocab} to report.c's hooks[]. */
#ifndef PLATEAU_SUITE_REPORT_VOCAB_H
#define PLATEAU_SUITE_REPORT_VOCAB_H

#include "report.h"

pl_status pl_report_vocab(pl_report_ctx *rc, const char *bench,
                          pl_table *const *tables, int ntables);

#endif
