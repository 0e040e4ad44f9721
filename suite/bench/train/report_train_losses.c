/* report_train_losses.c — the loss curves in a report (report_train.h): the
 * point of the run with the most curves (ok rows of at least
 * PL__CURVE_STEPS steps: model, context, ranks and W_v alike), each
 * system's `losses` a column of report/train-losses.csv — plateau, fsdp2
 * and the PyTorch peer's rows of the same shape (hidden, layers, vocab,
 * experts, context) — and report/train-losses.{svg,png}
 * (analysis/loss_curves.gp: the curves and their distance from the first).
 * The same table as analysis/loss_curves.sh writes for a directory. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_util.h"
#include "report_train.h"

/* Fewer steps are a timing run's losses, not a curve. */
enum { PL__CURVE_STEPS = 20 };

static int steps_of(const char *losses) {
  if (!losses[0] || !strcmp(losses, "-"))
    return 0;
  int n = 1;
  for (const char *c = losses; *c; c++)
    n += *c == ',';
  return n;
}

static bool same_point(const pl__train_pt *a, const pl__train_pt *b) {
  return !strcmp(a->model, b->model) && a->seq == b->seq &&
         a->ranks == b->ranks &&
         (a->wv == b->wv || (isnan(a->wv) && isnan(b->wv)));
}

static bool is_curve(const pl__train_pt *x) {
  return !strcmp(x->status, "ok") &&
         steps_of(pl_cell(x->t, x->r, "losses")) >= PL__CURVE_STEPS;
}

/* A torch_fsdp2 row of the same shape as our row x. */
static bool peer_matches(const pl_table *t, int r, const pl__train_pt *x) {
  static const char *const cols[] = {"hidden", "layers", "vocab", "experts",
                                     "seq"};
  if (strcmp(pl_cell(t, r, "status"), "ok") ||
      steps_of(pl_cell(t, r, "losses")) < PL__CURVE_STEPS)
    return false;
  for (int k = 0; k < 5; k++)
    if (pl_cell_num(t, r, cols[k]) != pl_cell_num(x->t, x->r, cols[k]))
      return false;
  return true;
}

typedef struct curve {
  char name[64];
  const char *losses;
} curve;

/* The label of a curve: its system, "#2", "#3" for a repeat. */
static void add_curve(curve *c, int *nc, const char *sys, const char *losses) {
  int seen = 1;
  for (int k = 0; k < *nc; k++)
    seen += !strncmp(c[k].name, sys, strlen(sys)) &&
            (c[k].name[strlen(sys)] == 0 || c[k].name[strlen(sys)] == '#');
  if (seen > 1)
    snprintf(c[*nc].name, sizeof c[0].name, "%s#%d", sys, seen);
  else
    snprintf(c[*nc].name, sizeof c[0].name, "%s", sys);
  c[(*nc)++].losses = losses;
}

/* The i-th value of a comma list, or NULL past its end; *len its length. */
static const char *nth(const char *s, int i, int *len) {
  for (; i > 0 && s; i--) {
    s = strchr(s, ',');
    s = s ? s + 1 : NULL;
  }
  if (!s)
    return NULL;
  const char *e = strchr(s, ',');
  *len = e ? (int)(e - s) : (int)strlen(s);
  return s;
}

pl_status pl__report_train_loss_chart(pl_report_ctx *rc, FILE *md,
                                      const pl__train_pt *p, int n,
                                      pl_table *const *pe, int npe) {
  int best = -1, bestn = 0;
  for (int i = 0; i < n; i++) {
    if (!is_curve(&p[i]))
      continue;
    int k = 0;
    for (int j = 0; j < n; j++)
      k += is_curve(&p[j]) && same_point(&p[i], &p[j]);
    if (k > bestn)
      best = i, bestn = k;
  }
  if (best < 0)
    return PL_OK;
  const pl__train_pt *x = &p[best];
  int cap = n; /* every row of ours and of the peer's files can be a curve */
  for (int k = 0; k < npe; k++)
    cap += pe[k]->nrows;
  curve *c = calloc((size_t)cap + 1, sizeof *c);
  int nc = 0;
  PL_ASSERT(c != NULL);
  /* plateau's curves first: the lower panel is the others' distance from
   * the first */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++)
      if (is_curve(&p[i]) && same_point(x, &p[i]) &&
          !strcmp(p[i].system, "plateau") == !pass)
        add_curve(c, &nc, p[i].system, pl_cell(p[i].t, p[i].r, "losses"));
  for (int k = 0; k < npe; k++)
    for (int r = 0; r < pe[k]->nrows; r++)
      if (!x->wv || isnan(x->wv) || x->wv == x->ranks)
        if (peer_matches(pe[k], r, x))
          add_curve(c, &nc, "torch_fsdp2", pl_cell(pe[k], r, "losses"));
  char data[PATH_MAX], stem[PATH_MAX], ctx[32];
  FILE *f = pl_rep_open(rc, "train-losses.csv", data, sizeof data);
  if (!f) {
    free(c);
    return PL_EIO;
  }
  int steps = 0;
  fprintf(f, "step");
  for (int k = 0; k < nc; k++) {
    fprintf(f, ",%s", c[k].name);
    if (steps_of(c[k].losses) > steps)
      steps = steps_of(c[k].losses);
  }
  fprintf(f, "\n");
  for (int i = 0; i < steps; i++) {
    fprintf(f, "%d", i + 1);
    for (int k = 0; k < nc; k++) {
      int len = 0;
      const char *v = nth(c[k].losses, i, &len);
      fprintf(f, ",%.*s", v ? len : 0, v ? v : "");
    }
    fprintf(f, "\n");
  }
  PL_TRY(pl_rep_close(f, data));
  fprintf(md,
          "\nLoss curves (`train-losses.svg`, data `train-losses.csv`): %s at "
          "%s, %.0f rank(s), %d curve%s of %d steps at most (",
          x->model, pl_rep_ctx(ctx, sizeof ctx, x->seq), x->ranks, nc,
          nc == 1 ? "" : "s", steps);
  for (int k = 0; k < nc; k++)
    fprintf(md, "%s%s", k ? ", " : "", c[k].name);
  fprintf(md, "); below them each curve minus the first.\n");
  free(c);
  snprintf(stem, sizeof stem, "%s/train-losses", rc->out_dir);
  return pl_rep_chart(rc, "loss_curves.gp", data, stem, NULL, 0);
}
