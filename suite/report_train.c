/* report_train.c — the end-to-end report (`plateau bench train`, and the
 * maxbatch searches whose target is train): the paper's end-to-end layout
 * per model and context (tok/s/GPU, TFLOP/s/GPU, MFU, peaks) with the
 * paper's printed figures beside ours, labelled as a different scale; the
 * time breakdown of every point; the longest context that reached `ok`
 * (reach) and the max-batch searches; plateau against FSDP2-best where both
 * systems have rows (throughput, reach and max-batch ratios, the paper's
 * 7.6× / OOM past 128K / 12× beside); the losses; a chart of tok/s/GPU and
 * TFLOP/s vs context with the paper's points (analysis/train.gp).
 *
 * Input: train result files (files whose `point` starts with "maxbatch."
 * are trials of a search and are reported through its file) and maxbatch
 * files with target train (FEED in benches.def). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_util.h"

/* ---- the paper's figures (arXiv 2609.14306; DESIGN §1.5): tok/s/GPU and
 *      TFLOP/s/GPU of plateau at 128K and 1M on 16 / 32 / 64 H200 ---------- */
typedef struct paper_pt {
  const char *model;
  int gpus;
  double seq, tok, tflops;
} paper_pt;
static const paper_pt PAPER[] = {
    {"120b", 16, 131072, 1355, 91}, {"120b", 16, 1048576, 642, 221},
    {"241b", 32, 131072, 866, 110}, {"241b", 32, 1048576, 314, 213},
    {"667b", 64, 131072, 316, 107}, {"667b", 64, 1048576, 124, 233}};
#define NPAPER 6
/* FSDP2-best: its longest context, the throughput ratio at 120B/128K, the
 * largest global batch of plateau and its ratio to FSDP2-best's */
static const struct {
  const char *model;
  double fsdp2_reach, tok_ratio, batch, batch_ratio;
} PAPER_VS[] = {{"120b", 131072, 7.6, 1.5e6, 12},
                {"241b", 32768, NAN, 1.8e6, 7},
                {"667b", 65536, NAN, 3e6, 3}};
static const char *const LABEL =
    "paper: 16–64 H200, different scale (120B on 16, 241B on 32, 667B on 64 "
    "GPUs)";
static const char *const SCALE = "16–64 H200, different scale";

typedef struct pt {
  const pl_table *t;
  int r;
  const char *model, *system, *variant, *status;
  double seq, ranks, wv, tok, tflops;
} pt;

static int cmp_pt(const void *a, const void *b) {
  const pt *x = a, *y = b;
  int c = strcmp(x->model, y->model);
  if (!c)
    c = strcmp(x->system, y->system);
  if (!c)
    c = strcmp(x->variant, y->variant);
  if (!c)
    c = x->wv != y->wv ? (x->wv < y->wv ? -1 : 1) : 0;
  return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static const paper_pt *paper_at(const char *model, double seq) {
  for (int i = 0; i < NPAPER; i++)
    if (!strcmp(PAPER[i].model, model) && PAPER[i].seq == seq)
      return &PAPER[i];
  return NULL;
}

static const char *ctx(char *b, size_t n, double s) {
  if (s >= 1048576 && fmod(s, 1048576) == 0)
    snprintf(b, n, "%.0fM", s / 1048576);
  else if (s >= 1024 && fmod(s, 1024) == 0)
    snprintf(b, n, "%.0fK", s / 1024);
  else
    snprintf(b, n, "%.0f", s);
  return b;
}

static bool same_run(const pt *a, const pt *b) {
  return !strcmp(a->model, b->model) && !strcmp(a->system, b->system) &&
         !strcmp(a->variant, b->variant) && a->wv == b->wv;
}

/* ---- sections -------------------------------------------------------------
 */
static void end_to_end(FILE *md, const pt *p, int n, bool *cuda_proxy) {
  fprintf(md,
          "\n## End to end (the paper's layout)\n\n%s. Ours: `ranks` "
          "processes, each one rank of a `W_v`-rank run (W_v > ranks: the "
          "one-GPU proxy, README).\n\n",
          LABEL);
  fprintf(
      md,
      "| model | context | system | variant | ranks / W_v | tokens/rank "
      "| tok/s/GPU | TFLOP/s/GPU | MFU | device peak | pinned host | "
      "status | paper (16–64 H200, different scale): tok/s/GPU (TFLOP/s) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  double worst = INFINITY;
  for (int i = 0; i < n; i++) {
    const pl_table *t = p[i].t;
    const int r = p[i].r;
    char c[16], a[32], b[32], pp[64] = "-";
    const paper_pt *q = paper_at(p[i].model, p[i].seq);
    if (q)
      snprintf(pp, sizeof pp, "%.0f (%.0f) on %d GPUs", q->tok, q->tflops,
               q->gpus);
    fprintf(md,
            "| %s | %s | %s | %s | %.0f / %.0f | %s | %s | %s | %s | %s | "
            "%s | %s | %s |\n",
            p[i].model, ctx(c, sizeof c, p[i].seq), p[i].system, p[i].variant,
            p[i].ranks, p[i].wv, pl_cell(t, r, "tokens"),
            pl_cell(t, r, "tok_s_gpu"), pl_cell(t, r, "tflops"),
            pl_cell(t, r, "mfu"),
            pl_rep_bytes(a, sizeof a, pl_cell_num(t, r, "dev_peak_bytes")),
            pl_rep_bytes(b, sizeof b, pl_cell_num(t, r, "host_peak_bytes")),
            p[i].status, pp);
    if (!strcmp(p[i].status, "ok") && !strcmp(p[i].system, "plateau") &&
        p[i].wv > p[i].ranks && p[i].seq >= 131072 &&
        !strcmp(pl_rep_meta(t, "backend", ""), "cuda"))
      worst = fmin(worst, p[i].tflops), *cuda_proxy = true;
  }
  fprintf(md,
          "\nTFLOP/s = model FLOPs (6 × active parameters + 6·S·d·n_q "
          "per layer for causal attention, per token; recompute not "
          "counted) / step time. By this formula the paper's tok/s/GPU at "
          "1M give 1.14× its printed TFLOP/s (README, FLOPs): divide ours "
          "by 1.14 to compare TFLOP/s with the paper's. MFU = TFLOP/s / the "
          "GEMM rate in the row's note.\n");
  if (*cuda_proxy)
    fprintf(md,
            "\nTarget: TFLOP/s/GPU ≥ 300 on the one-GPU proxy at ≥ 128K: "
            "%s (lowest %.1f).\n",
            worst >= 300 ? "met" : "missed", worst);
  else
    fprintf(md, "\nTarget: TFLOP/s/GPU ≥ 300 on the one-GPU proxy at ≥ 128K: "
                "not measured here (needs CUDA proxy rows).\n");
}

static void breakdown(FILE *md, const pt *p, int n) {
  static const char *const parts[] = {"attention", "moe", "head", "optimizer",
                                      "zero3",     "sco", "other"};
  fprintf(md, "\n## Where a step's time goes\n\nMedian over the timed steps, "
              "slowest rank; ms (share of the step). zero3 and sco run on "
              "their own streams beside the compute (overlapped with it); "
              "other = the step's wall time minus the compute-stream parts "
              "(embedding, host waits, unhidden copies).\n\n"
              "| model | context | system | variant | step ms | attention | "
              "moe | head | optimizer | zero3 | sco | other |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].status, "ok"))
      continue;
    const double step = pl_cell_num(p[i].t, p[i].r, "time_ms");
    char c[16];
    fprintf(md, "| %s | %s | %s | %s | %.1f |", p[i].model,
            ctx(c, sizeof c, p[i].seq), p[i].system, p[i].variant, step);
    for (int k = 0; k < 7; k++) {
      char col[32];
      snprintf(col, sizeof col, "%s_ms", parts[k]);
      const double v = pl_cell_num(p[i].t, p[i].r, col);
      if (isnan(v))
        fprintf(md, " - |");
      else
        fprintf(md, " %.1f (%.0f%%) |", v, step > 0 ? 100 * v / step : 0);
    }
    fprintf(md, "\n");
  }
}

/* Longest ok context of each run (model, system, variant, W_v). */
static void reach(FILE *md, const pt *p, int n, pl_table *const *mb, int nmb) {
  fprintf(md,
          "\n## Reach and max batch\n\nThe longest context that reached "
          "`ok` in this run, and the shortest that failed above it. "
          "Paper: plateau trains 1M on every model; FSDP2-best runs out "
          "of memory past 128K / 32K / 64K (120B / 241B / 667B); largest "
          "global batch 1.5M / 1.8M / 3M tokens (%s).\n\n"
          "| model | system | variant | ranks / W_v | longest ok | first "
          "failing above | its status |\n|---|---|---|---|---|---|---|\n",
          SCALE);
  for (int i = 0; i < n;) {
    int j = i, ok = -1, bad = -1;
    for (; j < n && same_run(&p[i], &p[j]); j++)
      if (!strcmp(p[j].status, "ok"))
        ok = j, bad = -1;
      else if (bad < 0 && strcmp(p[j].status, "ok"))
        bad = j;
    char a[16] = "-", b[16] = "-";
    if (ok >= 0)
      ctx(a, sizeof a, p[ok].seq);
    if (bad >= 0)
      ctx(b, sizeof b, p[bad].seq);
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

/* The best ok tok/s of a system at (model, seq), and its longest ok S. */
static double best_tok(const pt *p, int n, const char *model, const char *sys,
                       double seq, double *longest) {
  double best = NAN;
  *longest = NAN;
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].model, model) || strcmp(p[i].system, sys) ||
        strcmp(p[i].status, "ok"))
      continue;
    if (isnan(*longest) || p[i].seq > *longest)
      *longest = p[i].seq;
    if (p[i].seq == seq && (isnan(best) || p[i].tok > best))
      best = p[i].tok;
  }
  return best;
}

static double max_batch(pl_table *const *mb, int nmb, const char *model,
                        const char *sys) {
  double best = NAN;
  for (int k = 0; k < nmb; k++)
    for (int r = 0; r < mb[k]->nrows; r++)
      if (!strcmp(pl_cell(mb[k], r, "kind"), "summary") &&
          !strcmp(pl_cell(mb[k], r, "system"), sys) &&
          !strcmp(pl_cell(mb[k], r, "model"), model) &&
          !strcmp(pl_cell(mb[k], r, "status"), "ok")) {
        const double v = pl_cell_num(mb[k], r, "max_ok_tokens");
        best = isnan(best) || v > best ? v : best;
      }
  return best;
}

static void versus(FILE *md, const pt *p, int n, pl_table *const *mb, int nmb) {
  fprintf(md,
          "\n## plateau vs FSDP2-best\n\nThe best ok row of each system "
          "at the same model and context (FSDP2-best: the fastest of its "
          "knob settings that fits). Paper (%s): 7.6× tok/s at 120B/128K; "
          "FSDP2-best OOM past 128K / 32K / 64K; max batch 12× / 7× / 3× "
          "(120B / 241B / 667B).\n\n",
          SCALE);
  bool any = false;
  for (int i = 0; i < n && !any; i++)
    any = !strcmp(p[i].system, "fsdp2");
  if (!any) {
    fprintf(md, "No fsdp2 rows in this run: the columns fill when the FSDP2 "
                "baseline runs (`plateau bench train --system "
                "plateau,fsdp2`).\n");
    return;
  }
  fprintf(md, "| model | context | plateau tok/s/GPU | fsdp2 tok/s/GPU | "
              "throughput ratio | paper | reach ratio | paper | max-batch "
              "ratio | paper |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].system, "plateau") || strcmp(p[i].status, "ok") ||
        (i > 0 && !strcmp(p[i - 1].model, p[i].model) &&
         p[i - 1].seq == p[i].seq && !strcmp(p[i - 1].system, "plateau")))
      continue;
    double lp, lf;
    const double bp = max_batch(mb, nmb, p[i].model, "plateau"),
                 bf = max_batch(mb, nmb, p[i].model, "fsdp2");
    const double tp = best_tok(p, n, p[i].model, "plateau", p[i].seq, &lp);
    const double tf = best_tok(p, n, p[i].model, "fsdp2", p[i].seq, &lf);
    int k = -1;
    for (int j = 0; j < 3; j++)
      if (!strcmp(PAPER_VS[j].model, p[i].model))
        k = j;
    char c[16], r1[32], r2[32], r3[32], r4[32], q1[32] = "-", q2[32] = "-",
                                                q3[32] = "-";
    if (k >= 0) {
      if (!isnan(PAPER_VS[k].tok_ratio) && p[i].seq == 131072)
        snprintf(q1, sizeof q1, "%.1f×", PAPER_VS[k].tok_ratio);
      snprintf(q2, sizeof q2, "%.0f× (1M / %.0fK)",
               1048576 / PAPER_VS[k].fsdp2_reach,
               PAPER_VS[k].fsdp2_reach / 1024);
      snprintf(q3, sizeof q3, "%.0f×", PAPER_VS[k].batch_ratio);
    }
    fprintf(md, "| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s |\n",
            p[i].model, ctx(c, sizeof c, p[i].seq), tp,
            pl_rep_fmt(r1, sizeof r1, "%.1f", tf, "oom / -"),
            pl_rep_fmt(r2, sizeof r2, "%.2f×", tp / tf, "-"), q1,
            pl_rep_fmt(r3, sizeof r3, "%.1f×", lp / lf, "-"), q2,
            pl_rep_fmt(r4, sizeof r4, "%.1f×", bp / bf, "-"), q3);
  }
}

static void losses(FILE *md, const pt *p, int n) {
  fprintf(md, "\n## Losses\n\nEvery step's loss (warm-ups first), as the row "
              "records it.\n\n| model | context | system | variant | losses "
              "|\n|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) {
    char c[16];
    if (strcmp(p[i].status, "ok"))
      continue;
    fprintf(md, "| %s | %s | %s | %s | %s |\n", p[i].model,
            ctx(c, sizeof c, p[i].seq), p[i].system, p[i].variant,
            pl_cell(p[i].t, p[i].r, "losses"));
  }
}

/* The chart's series of point i: model:system, :variant when the model and
 * system have several runs. */
static void series_of(const pt *p, int n, int i, char *s, size_t len) {
  bool many = false;
  for (int j = 0; j < n; j++)
    many |= !strcmp(p[j].model, p[i].model) &&
            !strcmp(p[j].system, p[i].system) && !same_run(&p[i], &p[j]);
  snprintf(s, len, "%s:%s%s%s", p[i].model, p[i].system, many ? ":" : "",
           many ? p[i].variant : "");
}

/* Chart data: per series and context the best ok point (several files may
 * measure the same one), then the paper's points (paper:model). */
static pl_status chart(pl_report_ctx *rc, const pt *p, int n) {
  char data[PATH_MAX], stem[PATH_MAX], series[4096] = " ";
  snprintf(data, sizeof data, "%s/train-context.tsv", rc->out_dir);
  snprintf(stem, sizeof stem, "%s/train-context", rc->out_dir);
  FILE *f = fopen(data, "w");
  if (!f)
    return pl_set_error(PL_EIO, "write %s", data);
  fprintf(f, "# end-to-end points: ours (the best ok row per series and "
             "context) and the paper's\nseries\tseq\ttok_s_gpu\ttflops\n");
  bool models[3] = {false, false, false};
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].status, "ok"))
      continue;
    char s[192], s2[192], w[200];
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
    fprintf(f, "%s\t%.0f\t%.6g\t%.6g\n", s, p[i].seq, p[i].tok, p[i].tflops);
    snprintf(w, sizeof w, " %s ", s);
    if (!strstr(series, w) && strlen(series) + strlen(s) + 2 < sizeof series)
      strcat(strcat(series, s), " ");
    for (int k = 0; k < 3; k++)
      models[k] |= !strcmp(p[i].model, PAPER_VS[k].model);
  }
  for (int k = 0; k < 3; k++) {
    if (!models[k])
      continue;
    for (int i = 0; i < NPAPER; i++)
      if (!strcmp(PAPER[i].model, PAPER_VS[k].model))
        fprintf(f, "paper:%s\t%.0f\t%.0f\t%.0f\n", PAPER[i].model, PAPER[i].seq,
                PAPER[i].tok, PAPER[i].tflops);
    strcat(strcat(series, "paper:"), PAPER_VS[k].model);
    strcat(series, " ");
  }
  fclose(f);
  printf("%s\n", data);
  if (!series[1])
    return PL_OK;
  const char *extra[] = {series + 1, LABEL};
  return pl_rep_chart(rc, "train.gp", data, stem, extra, 2);
}

pl_status pl_report_train(pl_report_ctx *rc, pl_table *const *tabs, int nt) {
  int n = 0, cap = 16, nmb = 0;
  pt *p = malloc(sizeof *p * (size_t)cap);
  pl_table **mb = calloc((size_t)nt + 1, sizeof *mb);
  PL_ASSERT(p && mb);
  for (int i = 0; i < nt; i++) {
    const pl_table *t = tabs[i];
    const char *point = pl_table_meta(t, "point");
    if (!strcmp(t->bench, "maxbatch")) {
      if (t->nrows && !strcmp(pl_cell(t, 0, "target"), "train"))
        mb[nmb++] = tabs[i];
      continue;
    }
    if (strcmp(t->bench, "train") || (point && !strncmp(point, "maxbatch.", 9)))
      continue;
    for (int r = 0; r < t->nrows; r++) {
      if (n == cap)
        p = realloc(p, sizeof *p * (size_t)(cap *= 2));
      PL_ASSERT(p != NULL);
      p[n++] = (pt){t,
                    r,
                    pl_cell(t, r, "model"),
                    pl_cell(t, r, "system"),
                    pl_cell(t, r, "variant"),
                    pl_cell(t, r, "status"),
                    pl_cell_num(t, r, "seq"),
                    pl_cell_num(t, r, "ranks"),
                    pl_cell_num(t, r, "virtual_world"),
                    pl_cell_num(t, r, "tok_s_gpu"),
                    pl_cell_num(t, r, "tflops")};
    }
  }
  pl_status st = PL_OK;
  if (n + nmb == 0) /* only other benches' maxbatch files */
    goto out;
  qsort(p, (size_t)n, sizeof *p, cmp_pt);
  char path[PATH_MAX];
  FILE *md = pl_rep_open(rc, "train.md", path, sizeof path);
  if (!md) {
    st = PL_EIO;
    goto out;
  }
  pl_rep_md_head(md, rc,
                 "End-to-end training: tok/s/GPU, TFLOP/s/GPU, MFU, "
                 "peaks, reach",
                 tabs, nt);
  bool cuda_proxy = false;
  end_to_end(md, p, n, &cuda_proxy);
  breakdown(md, p, n);
  reach(md, p, n, mb, nmb);
  versus(md, p, n, mb, nmb);
  losses(md, p, n);
  st = pl_rep_close(md, path);
  if (st == PL_OK)
    st = chart(rc, p, n);
out:
  free(p);
  free(mb);
  return st;
}
