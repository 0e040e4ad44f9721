/* report_train_cells.c — the pieces every section of the end-to-end report
 * shares (report_train.c, report_train_pred.c, report_train_fsdp2.c,
 * report_train_grid.c): a context as "128K", a row's identity cells, the
 * paper's comparative figures and how they are labelled.  It calls none of
 * the sections. */
#include <math.h>
#include <stdio.h>

#include "report_train.h"

/* The paper's figures (arXiv 2609.14306): tok/s/GPU and TFLOP/s/GPU of
 * plateau at 128K and 1M on 16 / 32 / 64 H200. */
const pl__train_paper_pt pl__train_paper[] = {
    {"120b", 16, 131072, 1355, 91}, {"120b", 16, 1048576, 642, 221},
    {"241b", 32, 131072, 866, 110}, {"241b", 32, 1048576, 314, 213},
    {"667b", 64, 131072, 316, 107}, {"667b", 64, 1048576, 124, 233}};
const int pl__train_npaper =
    (int)(sizeof pl__train_paper / sizeof pl__train_paper[0]);

const char *const pl__train_scale = "16–64 H200, different scale";

/* FSDP2-best: its longest context, the throughput ratio at 120B/128K, the
 * largest global batch of plateau and its ratio to FSDP2-best's */
const pl__train_vs_fig pl__train_paper_vs[] = {{"120b", 131072, 7.6, 1.5e6, 12},
                                               {"241b", 32768, NAN, 1.8e6, 7},
                                               {"667b", 65536, NAN, 3e6, 3}};

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
