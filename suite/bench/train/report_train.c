/* report_train.c — the end-to-end report (`plateau bench train`, the
 * maxbatch searches whose target is train, and the PyTorch FSDP2 peer): the
 * paper's end-to-end layout per model and context (tok/s/GPU, TFLOP/s/GPU,
 * MFU, peaks) with the paper's printed figures beside ours, labelled as a
 * different scale; the time breakdown of every point; the planner's
 * prediction beside each measurement (report_train_pred.c); the longest context
 * that reached `ok` (reach) and the max-batch searches; plateau against
 * FSDP2-best — the fastest fsdp2 row that fits at the same model, scale
 * (ranks, W_v) and context, whichever knobs it ran with (--tune tries them
 * all) — per context both fit (tok/s and TFLOP/s ratios), the longest
 * context each fits and the largest tokens per step (one micro-batch over
 * the world) each fits, from the ok rows and the maxbatch trials' rows,
 * beside the paper's 7.6× / OOM past 128K / 32K / 64K / 12× / 7× / 3×; every
 * fsdp2 configuration tried, the winner marked; our FSDP2 baseline against
 * PyTorch's on the points both ran (tok/s and peak-memory ratios, flagged
 * within ±15% or not) — these FSDP2 sections are report_train_fsdp2.c; the
 * losses; charts with the paper's points overlaid:
 * tok/s/GPU and TFLOP/s vs context (analysis/train.gp) and vs GPU count
 * (analysis/train-gpus.gp), and the largest global batch vs GPU count from
 * the max-batch searches (analysis/train-maxbatch.gp); the paper's grid
 * (report_train_grid.c).  A run's GPU count is its W_v (the run a proxy
 * process stands for) when larger than its ranks.
 *
 * Input: train result files (files whose `point` starts with "maxbatch."
 * are trials of a search: they count for reach and max batch, and are
 * reported through the search's file), maxbatch files with target train
 * (FEED in benches.def) and torch_fsdp2 files (PEER in benches.def; their
 * rows join ours by hidden, layers, experts, vocab, seq and variant). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "report/paper.h"
#include "report/report.h"
#include "report/report_util.h"
#include "report_train.h"

/* ---- the paper's figures (report_train_cells.c) ------------------------- */
typedef pl_paper_e2e_pt paper_pt;
#define NPAPER pl_paper_ne2e /* report_train_cells.c */
#define PAPER pl_paper_e2e
static const char *const LABEL =
    "paper: 16–64 H200, different scale (120B on 16, 241B on 32, 667B on 64 "
    "GPUs)";

static int cmp_pt(const void *a, const void *b) {
  const pl__train_pt *x = a, *y = b;
  int c = strcmp(x->model, y->model);
  if (!c)
    c = strcmp(x->system, y->system);
  if (!c)
    c = strcmp(x->variant, y->variant);
  if (!c)
    c = (x->ranks > y->ranks) - (x->ranks < y->ranks);
  if (!c)
    c = (x->wv > y->wv) - (x->wv < y->wv);
  if (!c)
    c = (x->seq > y->seq) - (x->seq < y->seq);
  if (!c)
    c = x->run - y->run;
  return c ? c : x->r - y->r;
}

static const paper_pt *paper_at(const char *model, double seq) {
  for (int i = 0; i < NPAPER; i++)
    if (!strcmp(PAPER[i].model, model) && PAPER[i].seq == seq)
      return &PAPER[i];
  return NULL;
}

static bool same_run(const pl__train_pt *a, const pl__train_pt *b) {
  return !strcmp(a->model, b->model) && !strcmp(a->system, b->system) &&
         !strcmp(a->variant, b->variant) && a->ranks == b->ranks &&
         a->wv == b->wv;
}

/* The paper's figure beside a row: plateau's tok/s/GPU (TFLOP/s) at its
 * 128K and 1M points; for fsdp2, FSDP2-best's where the paper gives it
 * (120B at 128K: plateau's figure over the 7.6× ratio) or says it runs out
 * of memory (past 128K / 32K / 64K). */
static void paper_cell(char *b, size_t n, const pl__train_pt *x) {
  snprintf(b, n, "-");
  const paper_pt *q = paper_at(x->model, x->seq);
  if (!strcmp(x->system, PL_PLAN_NAME_PLATEAU) && q) {
    snprintf(b, n, "%.0f (%.0f) on %d GPUs", q->tok, q->tflops, q->gpus);
    return;
  }
  if (strcmp(x->system, PL_PLAN_NAME_FSDP2))
    return;
  for (int k = 0; k < 3; k++) {
    const pl_paper_vs_fig *v = &pl_paper_vs[k];
    if (strcmp(v->model, x->model))
      continue;
    char c[16];
    if (x->seq > v->fsdp2_reach)
      snprintf(b, n, "FSDP2-best: OOM (past %s)",
               pl_rep_ctx(c, sizeof c, v->fsdp2_reach));
    else if (q && !isnan(v->tok_ratio))
      snprintf(b, n, "FSDP2-best: %.0f (%.0f / %.1f×) on %d GPUs",
               q->tok / v->tok_ratio, q->tok, v->tok_ratio, q->gpus);
  }
}

/* ---- sections ------------------------------------------------------------ */
static void end_to_end(FILE *md, const pl__train_pt *p, int n,
                       bool *cuda_proxy) {
  fprintf(md,
          "\n## End to end (the paper's layout)\n\n%s. Ours: `ranks` "
          "processes, each one rank of a `W_v`-rank run (W_v > ranks: the "
          "one-GPU proxy, doc/guide/training.md); `run` is the file's number "
          "in the table "
          "above.\n\n",
          LABEL);
  if (!n) {
    fprintf(md, "No rows: the run has no `plateau bench train` rows.\n");
    return;
  }
  fprintf(md, PL__TRAIN_ROW_HEAD
          " tokens/rank | tok/s/GPU | TFLOP/s/GPU | MFU %% | device peak | "
          "pinned host | status | paper (16–64 H200, different scale): "
          "tok/s/GPU (TFLOP/s) |\n" PL__TRAIN_ROW_RULE
          "---|---|---|---|---|---|---|---|\n");
  double worst = INFINITY;
  for (int i = 0; i < n; i++) {
    const pl_table *t = p[i].t;
    const int r = p[i].r;
    char a[32], b[32], q1[32], q2[32], q3[32], pp[96];
    paper_cell(pp, sizeof pp, &p[i]);
    pl__train_row_head(md, &p[i]);
    fprintf(md, " %s | %s | %s | %s | %s | %s | %s | %s |\n",
            pl_cell(t, r, "tokens"), pl_rep_q(q1, sizeof q1, p[i].tok, "-"),
            pl_rep_q(q2, sizeof q2, p[i].tflops, "-"),
            pl_rep_q(q3, sizeof q3, pl_cell_num(t, r, "mfu"), "-"),
            pl_rep_bytes(a, sizeof a, pl_cell_num(t, r, "dev_peak_bytes")),
            pl_rep_bytes(b, sizeof b, pl_cell_num(t, r, "host_peak_bytes")),
            p[i].status, pp);
    if (!strcmp(p[i].status, "ok") &&
        !strcmp(p[i].system, PL_PLAN_NAME_PLATEAU) && p[i].wv > p[i].ranks &&
        p[i].seq >= 131072 && !strcmp(pl_rep_meta(t, "backend", ""), "cuda"))
      worst = fmin(worst, p[i].tflops), *cuda_proxy = true;
  }
  fprintf(md,
          "\nTFLOP/s = model FLOPs (6 × active parameters + 6·S·d·n_q "
          "per layer for causal attention, per token; recompute not "
          "counted) / step time. By this formula the paper's tok/s/GPU at "
          "1M give 1.14× its printed TFLOP/s (doc/guide/training.md, FLOPs): "
          "divide ours "
          "by 1.14 to compare TFLOP/s with the paper's. MFU = TFLOP/s / the "
          "GEMM rate in the row's note. The paper's figure of an fsdp2 row "
          "is FSDP2-best's: at 120B/128K its plateau figure over its 7.6× "
          "ratio; OOM past its longest context.\n");
  if (*cuda_proxy)
    fprintf(md,
            "\nTarget: TFLOP/s/GPU ≥ 300 on the one-GPU proxy at ≥ 128K: "
            "%s (lowest %.1f).\n",
            worst >= 300 ? "met" : "missed", worst);
  else
    fprintf(md, "\nTarget: TFLOP/s/GPU ≥ 300 on the one-GPU proxy at ≥ 128K: "
                "not measured here (needs CUDA proxy rows).\n");
}

static void breakdown(FILE *md, const pl__train_pt *p, int n) {
  static const char *const parts[] = {"attention", "moe", "head", "optimizer",
                                      "zero3",     "sco", "other"};
  int nok = 0, over = 0, cpu = 0;
  for (int i = 0; i < n; i++)
    nok += !strcmp(p[i].status, "ok");
  fprintf(md, "\n## Where a step's time goes\n\nMedian over the timed steps, "
              "slowest rank; ms (share of the step). attention, moe, head and "
              "optimizer run on the compute stream, zero3 and sco on their "
              "own streams beside it; other = the step's wall time minus the "
              "compute-stream parts (embedding, host waits, unhidden copies). "
              "The parts overlap, so their shares need not add to 100%%: on "
              "a GPU zero3 and sco run while the compute does; on the CPU "
              "backend every stream's work runs in issue order on the host, "
              "so zero3's and sco's time is inside `other` too. `sum` adds "
              "the shares.\n\n");
  if (!nok) {
    fprintf(md, "No rows: no ok row to break down (%d row%s, none ok).\n", n,
            n == 1 ? "" : "s");
    return;
  }
  fprintf(md, PL__TRAIN_ROW_HEAD " step ms | attention | moe | head | "
                                 "optimizer | zero3 | sco | other | sum "
                                 "|\n" PL__TRAIN_ROW_RULE
                                 "---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].status, "ok"))
      continue;
    const double step = pl_cell_num(p[i].t, p[i].r, "time_ms");
    char q[32];
    double sum = 0;
    int nparts = 0;
    pl__train_row_head(md, &p[i]);
    fprintf(md, " %s |", pl_rep_q(q, sizeof q, step, "-"));
    for (int k = 0; k < 7; k++) {
      char col[32];
      snprintf(col, sizeof col, "%s_ms", parts[k]);
      const double v = pl_cell_num(p[i].t, p[i].r, col);
      if (isnan(v)) {
        fprintf(md, " - |");
        continue;
      }
      const double sh = step > 0 ? 100 * v / step : 0;
      sum += sh, nparts++;
      fprintf(md, " %s (%.0f%%) |", pl_rep_q(q, sizeof q, v, "-"), sh);
    }
    if (nparts)
      fprintf(md, " %.0f%% |\n", sum);
    else
      fprintf(md, " - |\n");
    over += sum > 100.5;
    cpu += !strcmp(pl_rep_meta(p[i].t, "backend", ""), "cpu");
  }
  if (over)
    fprintf(md,
            "\n%d row%s add%s to more than 100%%: the overlapped parts "
            "(zero3, sco) are counted beside the time they overlap%s.\n",
            over, over == 1 ? "" : "s", over == 1 ? "s" : "",
            cpu ? " (on the CPU backend inside `other`)" : "");
}

/* Longest ok context of each run (model, system, variant, W_v). */
static void reach(FILE *md, const pl__train_pt *p, int n, pl_table *const *mb,
                  int nmb) {
  fprintf(md,
          "\n## Reach and max batch\n\nThe longest context that reached "
          "`ok` in this run, and the shortest that failed above it. "
          "Paper: plateau trains 1M on every model; FSDP2-best runs out "
          "of memory past 128K / 32K / 64K (120B / 241B / 667B); largest "
          "global batch 1.5M / 1.8M / 3M tokens (%s).\n\n",
          pl_paper_scale);
  if (!n)
    fprintf(md, "No rows: the run has no `plateau bench train` rows.\n");
  else
    fprintf(md, "| model | system | variant | ranks / W_v | longest ok | "
                "first failing above | its status |\n"
                "|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n;) {
    int j = i, ok = -1, bad = -1;
    /* p is sorted by run, then context: a run's rows are consecutive (the
     * keys are numbers, so j always moves on) */
    for (; j < n && (j == i || same_run(&p[i], &p[j])); j++)
      if (!strcmp(p[j].status, "ok"))
        ok = j, bad = -1;
      else if (bad < 0 && strcmp(p[j].status, "ok"))
        bad = j;
    char a[16] = "-", b[16] = "-";
    if (ok >= 0)
      pl_rep_ctx(a, sizeof a, p[ok].seq);
    if (bad >= 0)
      pl_rep_ctx(b, sizeof b, p[bad].seq);
    fprintf(md, "| %s | %s | %s | %.0f / %.0f | %s | %s | %s |\n", p[i].model,
            p[i].system, p[i].variant, p[i].ranks, p[i].wv, a, b,
            bad >= 0 ? p[bad].status : "-");
    i = j;
  }
  if (!nmb)
    return;
  fprintf(
      md,
      "\nMax-batch searches (`plateau bench maxbatch --bench train`: "
      "trials in child processes):\n\n| model | system | SCO budget | largest "
      "tokens/rank | longest context | first failing tokens/rank | "
      "trials | status | note |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int k = 0; k < nmb; k++)
    for (int r = 0; r < mb[k]->nrows; r++) {
      const pl_table *t = mb[k];
      if (strcmp(pl_cell(t, r, "kind"), "summary"))
        continue;
      fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | ",
              pl_cell(t, r, "model"), pl_cell(t, r, "system"),
              pl_cell(t, r, "budget"), pl_cell(t, r, "max_ok_tokens"),
              pl_cell(t, r, "seq"), pl_cell(t, r, "first_fail_tokens"),
              pl_cell(t, r, "trials"), pl_cell(t, r, "status"));
      pl_rep_md_text(md, pl_cell(t, r, "note"));
      fprintf(md, " |\n");
    }
}

static void losses(FILE *md, const pl__train_pt *p, int n) {
  int nok = 0;
  for (int i = 0; i < n; i++)
    nok += !strcmp(p[i].status, "ok");
  fprintf(md, "\n## Losses\n\nEvery step's loss (warm-ups first), as the row "
              "records it.\n\n");
  if (!nok) {
    fprintf(md, "No rows: no ok row (%d row%s, none ok).\n", n,
            n == 1 ? "" : "s");
    return;
  }
  fprintf(md, PL__TRAIN_ROW_HEAD " losses |\n" PL__TRAIN_ROW_RULE "---|\n");
  bool proxy = false;
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].status, "ok"))
      continue;
    pl__train_row_head(md, &p[i]);
    fprintf(md, " %s |\n", pl_cell(p[i].t, p[i].r, "losses"));
    proxy |= !isnan(p[i].wv) && p[i].wv > p[i].ranks;
  }
  /* a proxy's units are tiles of one shard: another model than the real
   * one, and another for each system's unit layout */
  if (proxy)
    fprintf(md, "\nA row whose W_v exceeds its ranks is a one-GPU proxy: its "
                "loss is the tiled proxy model's, not the real model's, and "
                "two systems' proxies are two different models (README, "
                "\"What a proxy's loss means\"); compare losses on real "
                "runs.\n");
}

/* Is the '/'-separated part [a, a + na) of variant v one of v's parts? */
static bool has_part(const char *v, const char *a, size_t na) {
  for (const char *q = v; *q;) {
    const size_t nq = strcspn(q, "/");
    if (nq == na && !strncmp(q, a, na))
      return true;
    q += nq + (q[nq] == '/');
  }
  return false;
}

/* The chart's series of point i: model:system, :variant when the model and
 * system have several runs — only the variant's parts ('/'-separated) that
 * not all of those runs share, so that a legend entry says what differs (the
 * whole variant when nothing is left); model:fsdp2-best for every fsdp2 row
 * (the chart keeps the best ok row of a series per context). */
static void series_of(const pl__train_pt *p, int n, int i, char *s,
                      size_t len) {
  bool many = false;
  if (!strcmp(p[i].system, PL_PLAN_NAME_FSDP2)) { /* one series: FSDP2-best */
    snprintf(s, len, "%s:fsdp2-best", p[i].model);
    return;
  }
  for (int j = 0; j < n; j++)
    many |= !strcmp(p[j].model, p[i].model) &&
            !strcmp(p[j].system, p[i].system) && !same_run(&p[i], &p[j]);
  if (!many) {
    snprintf(s, len, "%s:%s", p[i].model, p[i].system);
    return;
  }
  char v[192] = "";
  for (const char *q = p[i].variant; *q;) {
    const size_t nq = strcspn(q, "/");
    bool shared = true;
    for (int j = 0; j < n && shared; j++)
      shared = strcmp(p[j].model, p[i].model) ||
               strcmp(p[j].system, p[i].system) ||
               has_part(p[j].variant, q, nq);
    if (!shared && strlen(v) + nq + 2 < sizeof v)
      snprintf(v + strlen(v), sizeof v - strlen(v), "%s%.*s", *v ? "/" : "",
               (int)nq, q);
    q += nq + (q[nq] == '/');
  }
  snprintf(s, len, "%s:%s:%s", p[i].model, p[i].system, *v ? v : p[i].variant);
}

/* A point of the context chart: its series, x and y. */
typedef struct chart_pt {
  int order; /* the series' first appearance */
  char s[192];
  double seq, tok, tflops;
} chart_pt;

static int cmp_chart(const void *a, const void *b) {
  const chart_pt *x = a, *y = b;
  if (x->order != y->order)
    return x->order - y->order;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Is model one the paper ran (120B, 241B, 667B)?  Its series are drawn
 * with the paper's points; other models (peers, custom shapes) have their
 * own panels, at their own scale. */
static bool paper_model(const char *model) {
  for (int k = 0; k < 3; k++)
    if (!strcmp(model, pl_paper_vs[k].model))
      return true;
  return false;
}

/* Add s to the blank-separated list l (of size len) once. */
static void list_add(char *l, size_t len, const char *s) {
  char w[200];
  snprintf(w, sizeof w, " %s ", s);
  if (!strstr(l, w) && strlen(l) + strlen(s) + 2 < len)
    strcat(strcat(l, s), " ");
}

/* Chart data: per series and context the best ok point (several files may
 * measure the same one), each series' points by context (gnuplot joins them
 * in file order), then the paper's points (paper:model).  The chart draws
 * the paper's models and the others in panels of their own. */
static pl_status chart(pl_report_ctx *rc, const pl__train_pt *p, int n) {
  char data[PATH_MAX], stem[PATH_MAX], series[4096] = " ", others[4096] = " ";
  chart_pt *c = calloc((size_t)n + 1, sizeof *c);
  PL_ASSERT(c != NULL);
  int nc = 0, norder = 0;
  bool models[3] = {false, false, false};
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].status, "ok"))
      continue;
    char s[192], s2[192];
    series_of(p, n, i, s, sizeof s);
    bool better = false; /* another row of the series at this S is faster */
    for (int j = 0; j < n && !better; j++) {
      if (j == i || strcmp(p[j].status, "ok") || p[j].seq != p[i].seq)
        continue;
      series_of(p, n, j, s2, sizeof s2);
      better = !strcmp(s, s2) &&
               (p[j].tok > p[i].tok || (p[j].tok == p[i].tok && j < i));
    }
    if (better)
      continue;
    int order = norder;
    for (int k = 0; k < nc; k++)
      if (!strcmp(c[k].s, s))
        order = c[k].order;
    norder += order == norder;
    c[nc] = (chart_pt){order, "", p[i].seq, p[i].tok, p[i].tflops};
    snprintf(c[nc++].s, sizeof c[0].s, "%s", s);
    if (paper_model(p[i].model))
      list_add(series, sizeof series, s);
    else
      list_add(others, sizeof others, s);
    for (int k = 0; k < 3; k++)
      models[k] |= !strcmp(p[i].model, pl_paper_vs[k].model);
  }
  qsort(c, (size_t)nc, sizeof *c, cmp_chart);
  snprintf(stem, sizeof stem, "%s/train-context", rc->out_dir);
  FILE *f = pl_rep_open(rc, "train-context.tsv", data, sizeof data);
  if (!f) {
    free(c);
    return PL_EIO;
  }
  fprintf(f, "# end-to-end points: ours (the best ok row per series and "
             "context, by context) and the paper's\n"
             "series\tseq\ttok_s_gpu\ttflops\n");
  for (int k = 0; k < nc; k++)
    fprintf(f, "%s\t%.0f\t%.6g\t%.6g\n", c[k].s, c[k].seq, c[k].tok,
            c[k].tflops);
  free(c);
  for (int k = 0; k < 3; k++) {
    if (!models[k])
      continue;
    for (int i = 0; i < NPAPER; i++)
      if (!strcmp(PAPER[i].model, pl_paper_vs[k].model))
        fprintf(f, "paper:%s\t%.0f\t%.0f\t%.0f\n", PAPER[i].model, PAPER[i].seq,
                PAPER[i].tok, PAPER[i].tflops);
    strcat(strcat(series, "paper:"), pl_paper_vs[k].model);
    strcat(series, " ");
  }
  PL_TRY(pl_rep_close(f, data));
  if (!nc) {
    printf("%s.svg: not drawn: no ok train row to show\n", stem);
    return PL_OK;
  }
  const char *extra[] = {series + 1, LABEL, others + 1};
  static const char *const panels[] = {"tok_s_gpu", "tflops", NULL};
  if (!pl_rep_chart_shows(data, stem, "+seq", panels))
    return PL_OK;
  return pl_rep_chart(rc, "train.gp", data, stem, extra, 3);
}

/* The row r of train table t, the report's file number run. */
static pl__train_pt row_of(const pl_table *t, int r, int run) {
  const double micro = pl_cell_num(t, r, "micro");
  return (pl__train_pt){t,
                        r,
                        run,
                        pl_cell(t, r, "model"),
                        pl_cell(t, r, "system"),
                        pl_cell(t, r, "variant"),
                        pl_cell(t, r, "status"),
                        pl_cell(t, r, "kind"),
                        pl_cell_num(t, r, "seq"),
                        pl_cell_num(t, r, "ranks"),
                        pl_cell_num(t, r, "virtual_world"),
                        pl_cell_num(t, r, "tok_s_gpu"),
                        pl_cell_num(t, r, "tflops"),
                        pl_cell_num(t, r, "step_tokens") /
                            (micro > 0 ? micro : 1)};
}

static void push(pl__train_pt **v, int *n, int *cap, pl__train_pt x) {
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 16;
    *v = realloc(*v, sizeof **v * (size_t)*cap);
    PL_ASSERT(*v != NULL);
  }
  (*v)[(*n)++] = x;
}

/* The GPUs a row stands for: W_v when it is a proxy of a larger run. */
static double gpus_of(const pl__train_pt *p) {
  return !isnan(p->wv) && p->wv > p->ranks ? p->wv : p->ranks;
}

/* The GPU-count chart's series of a point: system:context[:proxy] for the
 * paper's models (one model per GPU count, as in the paper), prefixed with
 * the model for the others (drawn apart, at their own scale). */
static void gpus_series(const pl__train_pt *p, char *s, size_t len) {
  char c[16];
  snprintf(s, len, "%s%s%s:%s%s", paper_model(p->model) ? "" : p->model,
           paper_model(p->model) ? "" : ":", p->system,
           pl_rep_ctx(c, sizeof c, p->seq), p->wv > p->ranks ? ":proxy" : "");
}

/* Chart data vs GPU count: per series (gpus_series) and GPU count the best
 * ok point, then the paper's points per context (paper:128K, paper:1M). */
static pl_status chart_gpus(pl_report_ctx *rc, const pl__train_pt *p, int n) {
  char data[PATH_MAX], stem[PATH_MAX], series[4096] = " ", others[4096] = " ";
  bool other[64] = {false};
  snprintf(stem, sizeof stem, "%s/train-gpus", rc->out_dir);
  FILE *f = pl_rep_open(rc, "train-gpus.tsv", data, sizeof data);
  if (!f)
    return PL_EIO;
  fprintf(f, "# end-to-end points vs GPU count (W_v for a proxy): ours (the "
             "best ok row per series and GPU count) and the paper's\n"
             "series\tgpus\ttok_s_gpu\ttflops\n");
  /* series in order of their first row, points by GPU count */
  char names[64][64];
  int nn = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].status, "ok"))
      continue;
    char s[64];
    gpus_series(&p[i], s, sizeof s);
    int k = 0;
    while (k < nn && strcmp(names[k], s))
      k++;
    if (k == nn && nn < 64) {
      other[nn] = !paper_model(p[i].model);
      snprintf(names[nn++], sizeof names[0], "%s", s);
    }
  }
  for (int k = 0; k < nn; k++) {
    double last = -1;
    for (;;) { /* the next GPU count of series k, and its best point */
      double g = INFINITY;
      const pl__train_pt *best = NULL;
      for (int i = 0; i < n; i++) {
        char s[64];
        if (strcmp(p[i].status, "ok"))
          continue;
        gpus_series(&p[i], s, sizeof s);
        if (strcmp(s, names[k]) || gpus_of(&p[i]) <= last)
          continue;
        if (gpus_of(&p[i]) < g || (gpus_of(&p[i]) == g && p[i].tok > best->tok))
          g = gpus_of(&p[i]), best = &p[i];
      }
      if (!best)
        break;
      fprintf(f, "%s\t%.0f\t%.6g\t%.6g\n", names[k], g, best->tok,
              best->tflops);
      last = g;
    }
    if (other[k])
      list_add(others, sizeof others, names[k]);
    else
      list_add(series, sizeof series, names[k]);
  }
  if (strlen(series) > 1) { /* beside the paper's models only */
    const double seqs[2] = {131072, 1048576};
    for (int q = 0; q < 2; q++) {
      char c[16], s[32];
      snprintf(s, sizeof s, "paper:%s", pl_rep_ctx(c, sizeof c, seqs[q]));
      for (int i = 0; i < NPAPER; i++)
        if (PAPER[i].seq == seqs[q])
          fprintf(f, "%s\t%d\t%.0f\t%.0f\n", s, PAPER[i].gpus, PAPER[i].tok,
                  PAPER[i].tflops);
      strcat(strcat(series, s), " ");
    }
  }
  PL_TRY(pl_rep_close(f, data));
  if (!nn) {
    printf("%s.svg: not drawn: no ok train row to show\n", stem);
    return PL_OK;
  }
  const char *extra[] = {series + 1, LABEL, others + 1};
  static const char *const panels[] = {"tok_s_gpu", "tflops", NULL};
  if (!pl_rep_chart_shows(data, stem, "+gpus", panels))
    return PL_OK;
  return pl_rep_chart(rc, "train-gpus.gp", data, stem, extra, 3);
}

/* Chart data of the max-batch searches: the largest global batch (largest
 * tokens per rank x the GPUs of its trials, W_v when the trial file is a
 * proxy) per system and GPU count, and the paper's plateau and FSDP2-best
 * batches. */
static pl_status chart_maxbatch(pl_report_ctx *rc, pl_table *const *mb, int nmb,
                                pl_table *const *tabs, int nt) {
  char data[PATH_MAX], stem[PATH_MAX], series[1024] = " ";
  snprintf(stem, sizeof stem, "%s/train-maxbatch", rc->out_dir);
  FILE *f = NULL;
  for (int k = 0; k < nmb; k++) {
    const pl_table *t = mb[k];
    double gpus = NAN; /* the trials' ranks, or their W_v */
    for (int r = 0; r < t->nrows; r++) {
      if (strcmp(pl_cell(t, r, "kind"), "trial") ||
          isnan(pl_cell_num(t, r, "ranks")))
        continue;
      gpus = pl_cell_num(t, r, "ranks");
      const char *tf = pl_cell(t, r, "trial_file");
      for (int i = 0; i < nt; i++) {
        const char *b = strrchr(tabs[i]->path, '/');
        if (strcmp(b ? b + 1 : tabs[i]->path, tf) || !tabs[i]->nrows)
          continue;
        const double wv = pl_cell_num(tabs[i], 0, "virtual_world");
        if (!isnan(wv) && wv > gpus)
          gpus = wv;
      }
    }
    for (int r = 0; r < t->nrows; r++) {
      const double tok = pl_cell_num(t, r, "max_ok_tokens");
      if (strcmp(pl_cell(t, r, "kind"), "summary") ||
          strcmp(pl_cell(t, r, "status"), "ok") || isnan(tok) || isnan(gpus))
        continue;
      if (!f) {
        f = pl_rep_open(rc, "train-maxbatch.tsv", data, sizeof data);
        if (!f)
          return PL_EIO;
        fprintf(f, "# the largest global batch (tokens per step: largest "
                   "tokens per rank x GPUs) vs GPU count\n"
                   "series\tgpus\ttokens\ttokens_per_rank\n");
      }
      char s[64], w[72];
      snprintf(s, sizeof s, "%s:%s", pl_cell(t, r, "model"),
               pl_cell(t, r, "system"));
      fprintf(f, "%s\t%.0f\t%.0f\t%.0f\n", s, gpus, tok * gpus, tok);
      snprintf(w, sizeof w, " %s ", s);
      if (!strstr(series, w) && strlen(series) + strlen(s) + 2 < sizeof series)
        strcat(strcat(series, s), " ");
    }
  }
  if (!f)
    return PL_OK;
  static const int paper_gpus[3] = {16, 32, 64};
  for (int k = 0; k < 3; k++)
    fprintf(f, "paper:plateau\t%d\t%.0f\t-\n", paper_gpus[k],
            pl_paper_vs[k].batch);
  for (int k = 0; k < 3; k++)
    fprintf(f, "paper:fsdp2\t%d\t%.0f\t-\n", paper_gpus[k],
            pl_paper_vs[k].batch / pl_paper_vs[k].batch_ratio);
  strcat(series, "paper:plateau paper:fsdp2 ");
  PL_TRY(pl_rep_close(f, data));
  const char *extra[] = {series + 1, LABEL};
  static const char *const panels[] = {"tokens", NULL};
  if (!pl_rep_chart_shows(data, stem, "+gpus", panels))
    return PL_OK;
  return pl_rep_chart(rc, "train-maxbatch.gp", data, stem, extra, 2);
}

pl_status pl_report_train(pl_report_ctx *rc, pl_table *const *tabs, int nt) {
  /* the numbers the rows are grouped and sorted by */
  static const char *const keys[] = {"seq", "ranks", "virtual_world", NULL};
  int n = 0, cap = 0, nq = 0, capq = 0, nmb = 0, npe = 0, nskip = 0;
  pl__train_pt *p = NULL, *q = NULL; /* the points; the maxbatch trials' rows */
  pl_table **mb = calloc((size_t)nt + 1, sizeof *mb);
  pl_table **pe = calloc((size_t)nt + 1, sizeof *pe);
  PL_ASSERT(mb && pe);
  for (int i = 0; i < nt; i++) {
    const pl_table *t = tabs[i];
    const char *point = pl_table_meta(t, "point");
    if (!strcmp(t->bench, "maxbatch")) {
      if (t->nrows && !strcmp(pl_cell(t, 0, "target"), "train"))
        mb[nmb++] = tabs[i];
      continue;
    }
    if (!strcmp(t->bench, "torch_fsdp2")) {
      pe[npe++] = tabs[i];
      continue;
    }
    if (strcmp(t->bench, "train"))
      continue;
    const bool trial = point && !strncmp(point, "maxbatch.", 9);
    for (int r = 0; r < t->nrows; r++)
      if (!pl_rep_keys_ok("train", t, r, keys))
        nskip++;
      else if (trial)
        push(&q, &nq, &capq, row_of(t, r, i));
      else
        push(&p, &n, &cap, row_of(t, r, i));
  }
  pl_status st = PL_OK;
  if (n + nq + nmb + npe + nskip == 0) /* only other benches' maxbatch files */
    goto done;
  if (n)
    qsort(p, (size_t)n, sizeof *p, cmp_pt);
  char path[PATH_MAX];
  FILE *md = pl_rep_open(rc, "train.md", path, sizeof path);
  if (!md) {
    st = PL_EIO;
    goto done;
  }
  pl_rep_md_head(md, rc,
                 "End-to-end training: tok/s/GPU, TFLOP/s/GPU, MFU, "
                 "peaks, reach",
                 tabs, nt);
  if (nskip)
    fprintf(md,
            "> %d row%s left out: a key column (seq, ranks, virtual_world) "
            "is not a number (stderr names each file and line).\n\n",
            nskip, nskip == 1 ? "" : "s");
  bool cuda_proxy = false;
  end_to_end(md, p, n, &cuda_proxy);
  breakdown(md, p, n);
  pl__report_train_pred(md, p, n);
  reach(md, p, n, mb, nmb);
  pl__report_train_versus(md, p, n, q, nq);
  pl__report_train_tuning(md, p, n);
  pl__report_train_peer(md, p, n, pe, npe);
  pl__report_train_grid(md, p, n);
  pl__report_train_claims(rc, p, n);
  losses(md, p, n);
  st = pl__report_train_loss_chart(rc, md, p, n, pe, npe);
  const pl_status cst = pl_rep_close(md, path); /* closed whatever st is */
  PL_TRY_GOTO(st, done, st != PL_OK ? st : cst);
  PL_TRY_GOTO(st, done, chart(rc, p, n));
  PL_TRY_GOTO(st, done, chart_gpus(rc, p, n));
  if (nmb)
    PL_TRY_GOTO(st, done, chart_maxbatch(rc, mb, nmb, tabs, nt));
  st = pl__report_train_grid_chart(rc, p, n);
done:
  free(p);
  free(q);
  free(mb);
  free(pe);
  return st;
}
