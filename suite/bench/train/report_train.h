/* report_train.h — what the train report (report_train.c) shares with its
 * prediction section (report_train_pred.c) and its comparison with FSDP2
 * (report_train_fsdp2.c).  Internal to suite/. */
#ifndef PLATEAU_SUITE_REPORT_TRAIN_H
#define PLATEAU_SUITE_REPORT_TRAIN_H

#include <stddef.h>
#include <stdio.h>

#include "report/paper.h"
#include "report/report.h"
#include "results/results.h"

/* ---- report_train.c, for its sections' files ---------------------------- */
/* A row of a train table: the columns the report reads.  seq, ranks and wv
 * are finite numbers (rows whose keys are not are left out, with a
 * warning: pl_rep_keys_ok). */
typedef struct pl__train_pt {
  const pl_table *t;
  int r;
  int run; /* the file's number in the report's file table */
  const char *model, *system, *variant, *status, *kind;
  double seq, ranks, wv, tok, tflops, batch; /* batch: tokens · W_v */
} pl__train_pt;

/* "Prediction vs measurement": for the rows p[0..n), the planner's pred_*
 * columns beside the measured peaks and step, errors against the targets
 * (memory 5%, a GPU step 15%), the rows outside them flagged. */
void pl__report_train_pred(FILE *md, const pl__train_pt *p, int n);
/* The first columns of a row in every per-row table of train.md: run,
 * model, context, system, variant, kind, ranks / W_v (what tells two rows
 * of different points, or of two runs of one point, apart). */
#define PL__TRAIN_ROW_HEAD                                                     \
  "| run | model | context | system | variant | kind | ranks / W_v |"
#define PL__TRAIN_ROW_RULE "|---|---|---|---|---|---|---|"
void pl__train_row_head(FILE *md, const pl__train_pt *p);

/* ---- report_train_fsdp2.c: sections of train.md -------------------------- */
/* p[0..n): the points sorted by model, system, variant, W_v, context;
 * q[0..nq): the maxbatch trials' rows; pe[0..npe): torch_fsdp2 tables. */
/* "plateau vs FSDP2-best" with the targets of the comparison. */
void pl__report_train_versus(FILE *md, const pl__train_pt *p, int n,
                             const pl__train_pt *q, int nq);
/* Every fsdp2 configuration tried per point, the winner marked. */
void pl__report_train_tuning(FILE *md, const pl__train_pt *p, int n);
/* "Our FSDP2 baseline vs PyTorch FSDP2" on the points both ran. */
void pl__report_train_peer(FILE *md, const pl__train_pt *p, int n,
                           pl_table *const *pe, int npe);

/* ---- report_train_grid.c: the paper's grid --------------------------------
 * The paper's models on their GPU counts at 128K–1M, plateau and
 * FSDP2-best, each cell measured / projected / why not; the reach and the
 * largest batch; the plan held to the grid; and report/train-grid.* (the
 * chart of the same, analysis/train-grid.gp).  Nothing when no row is of
 * the grid. */
void pl__report_train_grid(FILE *md, const pl__train_pt *p, int n);
/* The paper's end-to-end claims for report/summary.md (pl_rep_claim): per
 * model of the grid, plateau's and FSDP2-best's reach, the throughput ratio
 * and plateau's TFLOP/s at 128K and 1M, and the largest batch. */
void pl__report_train_claims(pl_report_ctx *rc, const pl__train_pt *p, int n);
pl_status pl__report_train_grid_chart(pl_report_ctx *rc, const pl__train_pt *p,
                                      int n);

/* ---- report_train_losses.c: the loss curves -------------------------------
 * The point with the most loss curves (ok rows of at least 20 steps), with
 * the torch_fsdp2 rows of its shape (pe[0..npe)): report/train-losses.csv
 * (step, a column per system), its line in md (train.md, open), and
 * report/train-losses.{svg,png} (analysis/loss_curves.gp).  Nothing when no
 * row has a curve. */
pl_status pl__report_train_loss_chart(pl_report_ctx *rc, FILE *md,
                                      const pl__train_pt *p, int n,
                                      pl_table *const *pe, int npe);

#endif
