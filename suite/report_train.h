/* report_train.h — what the train report (report_train.c) shares with its
 * prediction section (report_train_pred.c).  Internal to suite/. */
#ifndef PLATEAU_SUITE_REPORT_TRAIN_H
#define PLATEAU_SUITE_REPORT_TRAIN_H

#include <stdio.h>

#include "results.h"

/* "Prediction vs measurement": for the rows r[i] of tables t[i] (i < n),
 * the planner's pred_* columns beside the measured peaks and step, errors
 * against the targets (memory 5%, a GPU step 15%), the rows outside them
 * flagged. */
void pl__report_train_pred(FILE *md, const pl_table *const *t, const int *r,
                           int n);

#endif
