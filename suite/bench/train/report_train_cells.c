/* report_train_cells.c — the pieces every section of the end-to-end report
 * shares (report_train.c, report_train_pred.c, report_train_fsdp2.c,
 * report_train_grid.c): a context as "128K" and a row's identity cells (the
 * paper's figures are in report/paper.c).  It calls none of
 * the sections. */
#include <math.h>
#include <stdio.h>

#include "report/report_util.h"
#include "report_train.h"

void pl__train_row_head(FILE *md, const pl__train_pt *p) {
  char c[16];
  fprintf(md, "| %d | %s | %s | %s | %s | %s | %.0f / %.0f |", p->run, p->model,
          pl_rep_ctx(c, sizeof c, p->seq), p->system, p->variant, p->kind,
          p->ranks, p->wv);
}
