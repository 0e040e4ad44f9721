/* report_train_cells.c — the pieces every section of the end-to-end report
 * shares (report_train.c, report_train_pred.c, report_train_fsdp2.c,
 * report_train_grid.c): a context as "128K" and a row's identity cells (the
 * paper's figures are in report/paper.c).  It calls none of
 * the sections. */
#include <math.h>
#include <stdio.h>

#include "report_train.h"

const char *pl__train_ctx(char *b, size_t n, double s) {
  if (s >= 1048576 && fmod(s, 1048576) == 0)
    snprintf(b, n, "%.0fM", s / 1048576);
  else if (s >= 1024 && fmod(s, 1024) == 0)
    snprintf(b, n, "%.0fK", s / 1024);
  else
    snprintf(b, n, "%.0f", s);
  return b;
}

void pl__train_row_head(FILE *md, const pl__train_pt *p) {
  char c[16];
  fprintf(md, "| %d | %s | %s | %s | %s | %s | %.0f / %.0f |", p->run, p->model,
          pl__train_ctx(c, sizeof c, p->seq), p->system, p->variant, p->kind,
          p->ranks, p->wv);
}
