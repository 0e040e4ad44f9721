/* report_train_grid.c — the paper's grid in train.md (report_train.h): the
 * paper's three models on their GPU counts (120B on 16, 241B on 32, 667B on
 * 64) at 128K–1M, plateau and FSDP2-best (the fastest fsdp2 row of the point
 * that reached ok, whichever knobs it ran with), as the W_v-rank run:
 *   - per model and context tok/s/GPU and TFLOP/s/GPU with each cell
 *     labelled: measured (a run of W_v real ranks), projected (a one-GPU
 *     proxy's step_proj_ms: compute and memory measured, communication
 *     modelled — doc/guide/training.md, virtual groups), proxy (an older proxy
 * row without the projection: no communication at all), infeasible (the plan's
 *     binding term) or oom; the paper's printed figures beside;
 *   - the reach (longest context ok, the first failing above) and the largest
 *     tokens per step among the ok rows of each system, beside the paper's
 *     FSDP2-best OOM contexts and batch ratios;
 *   - the plan held to the grid: each measured row's device peak, pinned host
 *     and compute (compute_ms of a proxy, time_ms otherwise) against the
 *     planner's pred_* (memory within 5%, compute within 15%);
 *   - report/train-grid.tsv and .svg/.png (analysis/train-grid.gp).
 * A row belongs to the grid when its model is one of the paper's and the
 * GPUs it stands for (W_v, or its ranks) are the paper's for that model. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "report/report_util.h"
#include "report_train.h"

static const char *const MODELS[3] = {"120b", "241b", "667b"};
static const int GPUS[3] = {16, 32, 64};
static const double SEQS[4] = {131072, 262144, 524288, 1048576};

static double gpus_of(const pl__train_pt *p) {
  return !isnan(p->wv) && p->wv > p->ranks ? p->wv : p->ranks;
}

static bool is_proxy(const pl__train_pt *p) {
  return !isnan(p->wv) && p->wv > p->ranks;
}

/* The GPU run's tok/s/GPU and TFLOP/s/GPU a row gives: a proxy's projection
 * (NAN without one), a real run's measurement. */
static void value(const pl__train_pt *p, double *tok, double *tfl) {
  *tok = is_proxy(p) ? pl_cell_num(p->t, p->r, "tok_s_gpu_proj") : p->tok;
  *tfl = is_proxy(p) ? pl_cell_num(p->t, p->r, "tflops_proj") : p->tflops;
  if (is_proxy(p) && isnan(*tok)) /* an older proxy row: no communication */
    *tok = p->tok, *tfl = p->tflops;
}

static const char *label(const pl__train_pt *p) {
  if (strcmp(p->status, "ok"))
    return p->status;
  if (!is_proxy(p))
    return "measured";
  return isnan(pl_cell_num(p->t, p->r, "tok_s_gpu_proj"))
             ? "proxy (no communication)"
             : "projected";
}

/* The grid's row of (model k, context, system): the fastest ok row, else the
 * first other one (its status says why); NULL when none ran. */
static const pl__train_pt *cell_of(const pl__train_pt *p, int n, int k,
                                   double seq, const char *sys) {
  const pl__train_pt *best = NULL, *other = NULL;
  double bt = -1;
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].model, MODELS[k]) || strcmp(p[i].system, sys) ||
        p[i].seq != seq || gpus_of(&p[i]) != GPUS[k])
      continue;
    if (strcmp(p[i].status, "ok")) {
      if (!other)
        other = &p[i];
      continue;
    }
    double tok, tfl;
    value(&p[i], &tok, &tfl);
    if (!best || tok > bt)
      best = &p[i], bt = tok;
  }
  return best ? best : other;
}

/* The plan's reason in an infeasible row's note ("binding term ... ;"). */
static const char *why(char *b, size_t n, const pl__train_pt *p) {
  const char *note = pl_cell(p->t, p->r, "note"), *s = strstr(note, "binding");
  if (!s) {
    snprintf(b, n, "%.120s", note);
    return b;
  }
  size_t len = strcspn(s, ";");
  snprintf(b, n, "%.*s", (int)(len < 160 ? len : 160), s);
  return b;
}

static void cell_md(FILE *md, const pl__train_pt *x) {
  if (!x) {
    fprintf(md, " - | - | not run |");
    return;
  }
  double tok, tfl;
  value(x, &tok, &tfl);
  char a[32], b[32], w[200];
  if (!strcmp(x->status, "ok")) {
    fprintf(md, " %s", pl_rep_fmt(a, sizeof a, "%.0f", tok, "-"));
    /* a projection's reach: the inter-node bandwidth 30% lower / higher */
    const double lo = pl_cell_num(x->t, x->r, "tok_s_gpu_proj_lo"),
                 hi = pl_cell_num(x->t, x->r, "tok_s_gpu_proj_hi");
    if (is_proxy(x) && !isnan(lo) && !isnan(hi))
      fprintf(md, " (IB ∓30%%: %.0f–%.0f)", lo, hi);
    fprintf(md, " | %s | %s |", pl_rep_fmt(b, sizeof b, "%.1f", tfl, "-"),
            label(x));
  } else {
    fprintf(md, " - | - | %s: ", x->status);
    pl_rep_md_text(md, why(w, sizeof w, x));
    fprintf(md, " |");
  }
}

/* The paper's plateau figures at (model k, seq), or NULL. */
static const pl_paper_e2e_pt *paper_at(int k, double seq) {
  for (int i = 0; i < pl_paper_ne2e; i++)
    if (!strcmp(pl_paper_e2e[i].model, MODELS[k]) && pl_paper_e2e[i].seq == seq)
      return &pl_paper_e2e[i];
  return NULL;
}

/* The paper's FSDP2-best at (model k, seq): its tok/s/GPU where printed (the
 * 7.6× at 120B/128K), OOM past its reach, else "-". */
static const char *paper_fsdp2(char *b, size_t n, int k, double seq) {
  const pl_paper_vs_fig *f = &pl_paper_vs[k];
  const pl_paper_e2e_pt *q = paper_at(k, seq);
  if (seq > f->fsdp2_reach)
    snprintf(b, n, "OOM (past %.0fK)", f->fsdp2_reach / 1024);
  else if (q && !isnan(f->tok_ratio))
    snprintf(b, n, "%.0f (%.0f / %.1f×)", q->tok / f->tok_ratio, q->tok,
             f->tok_ratio);
  else
    snprintf(b, n, "-");
  return b;
}

static void model_table(FILE *md, const pl__train_pt *p, int n, int k) {
  fprintf(md,
          "\n### %s on %d GPUs\n\n| context | plateau tok/s/GPU | TFLOP/s/GPU "
          "| cell | FSDP2-best tok/s/GPU | TFLOP/s/GPU | cell | FSDP2-best "
          "knobs | plateau / FSDP2-best | paper: plateau tok/s/GPU (TFLOP/s) "
          "| paper: FSDP2-best |\n|---|---|---|---|---|---|---|---|---|---|---|"
          "\n",
          MODELS[k], GPUS[k]);
  for (int s = 0; s < 4; s++) {
    const pl__train_pt *a = cell_of(p, n, k, SEQS[s], PL_PLAN_NAME_PLATEAU),
                       *b = cell_of(p, n, k, SEQS[s], PL_PLAN_NAME_FSDP2);
    char c[16], r[32] = "-", pp[48] = "-", pf[64];
    fprintf(md, "| %s |", pl_rep_ctx(c, sizeof c, SEQS[s]));
    cell_md(md, a);
    cell_md(md, b);
    fprintf(md, " %s |", b ? b->variant : "-");
    if (a && b && !strcmp(a->status, "ok") && !strcmp(b->status, "ok")) {
      double ta, tb, fa, fb;
      value(a, &ta, &fa), value(b, &tb, &fb);
      pl_rep_fmt(r, sizeof r, "%.2f×", ta / tb, "-");
    }
    const pl_paper_e2e_pt *q = paper_at(k, SEQS[s]);
    if (q)
      snprintf(pp, sizeof pp, "%.0f (%.0f)", q->tok, q->tflops);
    fprintf(md, " %s | %s | %s |\n", r, pp,
            paper_fsdp2(pf, sizeof pf, k, SEQS[s]));
  }
}

/* Longest ok context of sys for model k, the status of the first grid
 * context above it, and the largest tokens per step among its ok rows. */
static void reach_of(const pl__train_pt *p, int n, int k, const char *sys,
                     double *longest, const char **above, double *batch) {
  *longest = 0, *above = "-", *batch = 0;
  for (int s = 0; s < 4; s++) {
    const pl__train_pt *x = cell_of(p, n, k, SEQS[s], sys);
    if (x && !strcmp(x->status, "ok")) {
      *longest = SEQS[s];
      *batch = fmax(*batch, pl_cell_num(x->t, x->r, "step_tokens"));
    }
  }
  for (int s = 0; s < 4; s++)
    if (SEQS[s] > *longest) {
      const pl__train_pt *x = cell_of(p, n, k, SEQS[s], sys);
      *above = x ? x->status : "not run";
      break;
    }
}

static void reach_table(FILE *md, const pl__train_pt *p, int n) {
  fprintf(md,
          "\n### Reach and largest batch\n\nLongest context of the grid "
          "that reached ok (the first above it), and the largest tokens per "
          "step (micro·N·W_v) among the ok rows — memory, so measured on "
          "the proxy as on the W_v-rank run.\n\n| model | plateau reach "
          "| above | FSDP2-best reach | above | reach ratio | plateau "
          "tokens/step | FSDP2-best tokens/step | ratio | paper: FSDP2-best "
          "OOM past | paper: plateau batch (ratio) |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int k = 0; k < 3; k++) {
    double lp, lf, bp, bf;
    const char *ap, *af;
    reach_of(p, n, k, PL_PLAN_NAME_PLATEAU, &lp, &ap, &bp);
    reach_of(p, n, k, PL_PLAN_NAME_FSDP2, &lf, &af, &bf);
    char c1[16] = "none", c2[16] = "none", r[32] = "-", br[32] = "-", t1[16],
         t2[16];
    if (lp > 0)
      pl_rep_ctx(c1, sizeof c1, lp);
    if (lf > 0)
      pl_rep_ctx(c2, sizeof c2, lf);
    if (lp > 0 && lf > 0)
      snprintf(r, sizeof r, "%.0f×", lp / lf);
    if (bp > 0 && bf > 0)
      snprintf(br, sizeof br, "%.1f×", bp / bf);
    const pl_paper_vs_fig *f = &pl_paper_vs[k];
    fprintf(md,
            "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0fK | "
            "%.1fM (%.0f×) |\n",
            MODELS[k], c1, ap, c2, af, r,
            bp > 0 ? pl_rep_ctx(t1, sizeof t1, bp) : "-",
            bf > 0 ? pl_rep_ctx(t2, sizeof t2, bf) : "-", br,
            f->fsdp2_reach / 1024, f->batch / 1e6, f->batch_ratio);
  }
}

/* |a − b| / b in percent; NAN when either is missing. */
static double err(double a, double b) {
  return isnan(a) || isnan(b) || b == 0 ? NAN : 100.0 * (a - b) / b;
}

static void plan_table(FILE *md, const pl__train_pt *p, int n) {
  fprintf(md,
          "\n### The plan held to the grid\n\nEvery measured grid row against "
          "the planner's prediction made before launch: the device peak and "
          "the pinned host per rank (target: within 5%%) and the compute "
          "(a proxy's compute_ms, the step less its stand-ins: the plan's "
          "prediction of a proxy has no communication; target: within "
          "15%%). err = (predicted − measured) / measured.\n\n| model | "
          "context | system | knobs | device peak | predicted | err | pinned "
          "host | predicted | err | compute ms | predicted | err | within |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int rows = 0, miss = 0;
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (k < 3 && strcmp(p[i].model, MODELS[k]))
      k++;
    if (k == 3 || gpus_of(&p[i]) != GPUS[k] || strcmp(p[i].status, "ok"))
      continue;
    const pl_table *t = p[i].t;
    const int r = p[i].r;
    double comp = pl_cell_num(t, r, "compute_ms");
    if (isnan(comp))
      comp = pl_cell_num(t, r, "time_ms");
    const double dv = pl_cell_num(t, r, "dev_peak_bytes"),
                 dp = pl_cell_num(t, r, "pred_dev_peak_bytes"),
                 hv = pl_cell_num(t, r, "host_peak_bytes"),
                 hp = pl_cell_num(t, r, "pred_host_bytes"),
                 tp = pl_cell_num(t, r, "pred_time_ms");
    const double e1 = err(dp, dv), e2 = err(hp, hv), e3 = err(tp, comp);
    const bool ok = !(fabs(e1) > 5) && !(fabs(e2) > 5) && !(fabs(e3) > 15);
    char c[16], b[6][32], f[3][24];
    fprintf(md,
            "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %s | "
            "%s | %s |\n",
            p[i].model, pl_rep_ctx(c, sizeof c, p[i].seq), p[i].system,
            p[i].variant, pl_rep_bytes(b[0], sizeof b[0], dv),
            pl_rep_bytes(b[1], sizeof b[1], dp),
            pl_rep_fmt(f[0], sizeof f[0], "%+.1f%%", e1, "-"),
            pl_rep_bytes(b[2], sizeof b[2], hv),
            pl_rep_bytes(b[3], sizeof b[3], hp),
            pl_rep_fmt(f[1], sizeof f[1], "%+.1f%%", e2, "-"), comp,
            pl_rep_fmt(b[4], sizeof b[4], "%.0f", tp, "-"),
            pl_rep_fmt(f[2], sizeof f[2], "%+.1f%%", e3, "-"),
            ok ? "yes" : "**no**");
    rows++, miss += !ok;
  }
  if (!rows)
    fprintf(md, "| - | - | - | - | - | - | - | - | - | - | - | - | - | no "
                "measured grid row |\n");
  else
    fprintf(md, "\n%d of %d grid rows within the targets.\n", rows - miss,
            rows);
}

void pl__report_train_grid(FILE *md, const pl__train_pt *p, int n) {
  bool any = false;
  for (int i = 0; i < n && !any; i++)
    for (int k = 0; k < 3; k++)
      any |= !strcmp(p[i].model, MODELS[k]) && gpus_of(&p[i]) == GPUS[k];
  if (!any)
    return;
  fprintf(md,
          "\n## The paper's grid (the W_v-rank runs)\n\nThe paper's models on "
          "its GPU counts at 128K–1M. A cell is *measured* (W_v real ranks), "
          "*projected* (a one-GPU proxy playing one rank of the W_v-rank run: "
          "compute and memory measured, communication modelled: step_proj_ms "
          "= the measured step less its virtual groups' stand-ins + the "
          "planner's exposed communication of that run, doc/guide/training.md; "
          "in brackets the tok/s/GPU with the inter-node bandwidth 30%% lower "
          "and higher), *proxy (no "
          "communication)* for a proxy row without the projection, or why it "
          "did not run (the plan's binding term, or oom). FSDP2-best is the "
          "fastest fsdp2 row of the point, its knobs named. The paper's "
          "figures: %s.\n",
          pl_paper_scale);
  for (int k = 0; k < 3; k++)
    model_table(md, p, n, k);
  reach_table(md, p, n);
  plan_table(md, p, n);
}

/* How a cell's figure was had, for the summary: a real run's measurement,
 * a proxy's projection. */
static const char *basis(char *b, size_t n, const pl__train_pt *x) {
  const char *l = label(x);
  if (!strcmp(l, "measured"))
    snprintf(b, n, "measured (%.0f ranks)", x->ranks);
  else if (!strcmp(l, "projected"))
    snprintf(b, n, "projected (1 rank of %.0f)", x->wv);
  else
    snprintf(b, n, "%s (1 rank of %.0f)", l, x->wv);
  return b;
}

/* The reach cell of the summary: the longest context ok and what the first
 * grid context above it did; paper: the paper's reach of sys. */
static void reach_claim(pl_report_ctx *rc, const pl__train_pt *p, int n, int k,
                        const char *sys, const char *id, double paper) {
  double longest, batch;
  const char *above;
  reach_of(p, n, k, sys, &longest, &above, &batch);
  const pl__train_pt *x = NULL;
  for (int s = 0; s < 4 && !x; s++)
    x = cell_of(p, n, k, SEQS[s], sys);
  if (!x)
    return; /* no row of this model and system: not run here */
  const pl__train_pt *at = longest > 0 ? cell_of(p, n, k, longest, sys) : x;
  char c[16], c2[16], t[160], b[128];
  if (longest > 0)
    pl_rep_ctx(c, sizeof c, longest);
  else
    snprintf(c, sizeof c, "none");
  double next = NAN;
  for (int s = 0; s < 4 && isnan(next); s++)
    if (SEQS[s] > longest)
      next = SEQS[s];
  if (isnan(next))
    snprintf(t, sizeof t, "%s", c);
  else
    snprintf(t, sizeof t, "%s (%s: %s)", c, pl_rep_ctx(c2, sizeof c2, next),
             above);
  /* a ratio to the paper's reach only where ours is bounded: the context
   * above failed, or ours already reaches the paper's */
  const bool bounded = isnan(next) || longest >= paper ||
                       (strcmp(above, "not run") && strcmp(above, "-"));
  pl_rep_claim(rc, id, longest > 0 && bounded ? longest : NAN, t, at->t,
               basis(b, sizeof b, at));
}

void pl__report_train_claims(pl_report_ctx *rc, const pl__train_pt *p, int n) {
  static const double at[2] = {131072, 1048576};
  char id[48], t[160], b[128], c[16];
  for (int k = 0; k < 3; k++) {
    snprintf(id, sizeof id, "reach:%s", MODELS[k]);
    reach_claim(rc, p, n, k, PL_PLAN_NAME_PLATEAU, id, pl_paper_reach);
    snprintf(id, sizeof id, "fsdp2_reach:%s", MODELS[k]);
    reach_claim(rc, p, n, k, PL_PLAN_NAME_FSDP2, id,
                pl_paper_vs[k].fsdp2_reach);
    for (int s = 0; s < 2; s++) {
      const pl__train_pt *a = cell_of(p, n, k, at[s], PL_PLAN_NAME_PLATEAU),
                         *f = cell_of(p, n, k, at[s], PL_PLAN_NAME_FSDP2);
      double ta = NAN, fa = NAN, tf = NAN, ff = NAN;
      if (a && !strcmp(a->status, "ok"))
        value(a, &ta, &fa);
      if (f && !strcmp(f->status, "ok"))
        value(f, &tf, &ff);
      pl_rep_ctx(c, sizeof c, at[s]);
      if (a) { /* plateau's TFLOP/s, or why it has none */
        snprintf(id, sizeof id, "tflops:%s:%.0f", MODELS[k], at[s]);
        if (!isnan(fa))
          snprintf(t, sizeof t, "%.0f (%.0f tok/s/GPU)", fa, ta);
        else
          snprintf(t, sizeof t, "%s", a->status);
        pl_rep_claim(rc, id, fa, t, a->t, basis(b, sizeof b, a));
      }
      if (a) { /* the ratio where both ran, or who did not */
        snprintf(id, sizeof id, "ratio:%s:%.0f", MODELS[k], at[s]);
        const double r = ta / tf;
        if (!isnan(r))
          snprintf(t, sizeof t, "%.2f× (%.0f vs %.0f tok/s/GPU; FSDP2-best %s)",
                   r, ta, tf, f->variant);
        else
          snprintf(t, sizeof t, "plateau %s, FSDP2-best %s",
                   isnan(ta) ? a->status : "ok",
                   !f          ? "not run"
                   : isnan(tf) ? f->status
                               : "ok");
        char b2[128];
        snprintf(b, sizeof b, "plateau %s; FSDP2-best ",
                 basis(b2, sizeof b2, a));
        if (f)
          basis(b2, sizeof b2, f);
        else
          snprintf(b2, sizeof b2, "not run");
        strncat(b, b2, sizeof b - strlen(b) - 1);
        pl_rep_claim(rc, id, r, t, a->t, b);
      }
    }
    double lp, lf, bp, bf;
    const char *ap, *af;
    reach_of(p, n, k, PL_PLAN_NAME_PLATEAU, &lp, &ap, &bp);
    reach_of(p, n, k, PL_PLAN_NAME_FSDP2, &lf, &af, &bf);
    if (bp > 0) {
      const pl__train_pt *x = cell_of(p, n, k, lp, PL_PLAN_NAME_PLATEAU);
      char c2[16];
      snprintf(id, sizeof id, "batch:%s", MODELS[k]);
      if (bf > 0)
        snprintf(t, sizeof t, "%s tokens (%.1f× FSDP2-best's %s)",
                 pl_rep_ctx(c, sizeof c, bp), bp / bf,
                 pl_rep_ctx(c2, sizeof c2, bf));
      else
        snprintf(t, sizeof t, "%s tokens (FSDP2-best: none ok)",
                 pl_rep_ctx(c, sizeof c, bp));
      /* memory: a proxy holds one rank's share as the real run would */
      pl_rep_claim(rc, id, bp, t, x->t,
                   "largest ok row's tokens per step (memory, the same on "
                   "a proxy)");
    }
  }
}

pl_status pl__report_train_grid_chart(pl_report_ctx *rc, const pl__train_pt *p,
                                      int n) {
  char data[PATH_MAX], stem[PATH_MAX];
  snprintf(data, sizeof data, "%s/train-grid.tsv", rc->out_dir);
  snprintf(stem, sizeof stem, "%s/train-grid", rc->out_dir);
  FILE *f = NULL;
  for (int k = 0; k < 3; k++) /* a series' points consecutive, by context */
    for (int y = 0; y < 2; y++)
      for (int s = 0; s < 4; s++) {
        const pl__train_pt *x = cell_of(
            p, n, k, SEQS[s], y ? PL_PLAN_NAME_FSDP2 : PL_PLAN_NAME_PLATEAU);
        if (!x || strcmp(x->status, "ok"))
          continue;
        if (!f) {
          f = fopen(data, "w");
          if (!f)
            return pl_set_error(PL_EIO, "write %s", data);
          fprintf(f, "# the paper's grid: each model's ok cells (the W_v-rank "
                     "run: projected for a proxy, measured for a real run) "
                     "and the paper's printed figures\nmodel\tseries\tseq\t"
                     "tok_s_gpu\ttflops\tcell\n");
        }
        double tok, tfl;
        value(x, &tok, &tfl);
        fprintf(f, "%s\t%s\t%.0f\t%.6g\t%.6g\t%s\n", MODELS[k],
                y ? PL_PLAN_NAME_FSDP2 "-best" : PL_PLAN_NAME_PLATEAU, SEQS[s],
                tok, tfl, label(x));
      }
  if (!f)
    return PL_OK;
  for (int i = 0; i < pl_paper_ne2e; i++)
    fprintf(f, "%s\tpaper:plateau\t%.0f\t%.0f\t%.0f\tpaper\n",
            pl_paper_e2e[i].model, pl_paper_e2e[i].seq, pl_paper_e2e[i].tok,
            pl_paper_e2e[i].tflops);
  for (int k = 0; k < 3; k++) {
    const pl_paper_e2e_pt *q = paper_at(k, SEQS[0]);
    const double r = pl_paper_vs[k].tok_ratio;
    if (q && !isnan(r))
      fprintf(f, "%s\tpaper:fsdp2-best\t%.0f\t%.0f\t%.0f\tpaper\n", MODELS[k],
              q->seq, q->tok / r, q->tflops / r);
  }
  fclose(f);
  printf("%s\n", data);
  const char *extra[] = {pl_paper_scale};
  static const char *const panels[] = {"tok_s_gpu", "tflops", NULL};
  if (!pl_rep_chart_shows(data, stem, "+seq", panels))
    return PL_OK;
  return pl_rep_chart(rc, "train-grid.gp", data, stem, extra, 1);
}
