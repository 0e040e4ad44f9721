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
 * within ±15% or not); the losses; charts with the paper's points overlaid:
 * tok/s/GPU and TFLOP/s vs context (analysis/train.gp) and vs GPU count
 * (analysis/train-gpus.gp), and the largest global batch vs GPU count from
 * the max-batch searches (analysis/train-maxbatch.gp).  A run's GPU count is
 * its W_v (the run a proxy process stands for) when larger than its ranks.
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

#include "report.h"
#include "report_train.h"
#include "report_util.h"

/* ---- the paper's figures (arXiv 2609.14306): tok/s/GPU and
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
  const char *model, *system, *variant, *status, *kind;
  double seq, ranks, wv, tok, tflops, batch; /* batch: tokens · W_v */
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

/* The planner's prediction beside each row's measurement. */
static void prediction(FILE *md, const pt *p, int n) {
  const pl_table **t = calloc((size_t)n + 1, sizeof *t);
  int *r = calloc((size_t)n + 1, sizeof *r);
  PL_ASSERT(t && r);
  for (int i = 0; i < n; i++)
    t[i] = p[i].t, r[i] = p[i].r;
  pl__report_train_pred(md, t, r, n);
  free(t);
  free(r);
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

/* ---- plateau vs FSDP2-best ------------------------------------------------
 * A scale: one model at ranks processes of a W_v-rank run. */
static bool same_scale(const pt *a, const pt *b) {
  return !strcmp(a->model, b->model) && a->ranks == b->ranks && a->wv == b->wv;
}

static bool is_ok(const pt *a) {
  return !strcmp(a->status, "ok");
}

/* The fastest ok row of sys at the scale of x and context seq (NULL: none);
 * *tried counts the rows of sys there. */
static const pt *best_at(const pt *p, int n, const pt *x, const char *sys,
                         double seq, int *tried) {
  const pt *b = NULL;
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (!same_scale(&p[i], x) || strcmp(p[i].system, sys) || p[i].seq != seq)
      continue;
    k++;
    if (is_ok(&p[i]) && (!b || p[i].tok > b->tok))
      b = &p[i];
  }
  if (tried)
    *tried = k;
  return b;
}

/* Reach and max batch of sys at the scale of x over the rows p and the
 * maxbatch trials' rows q: the longest ok context, the shortest failing
 * context above it, the largest ok tokens · W_v. */
typedef struct reach_t {
  double longest, first_fail, batch;
  const char *fail_status;
} reach_t;

static reach_t reach_of(const pt *p, int n, const pt *q, int nq, const pt *x,
                        const char *sys) {
  reach_t r = {NAN, NAN, NAN, "-"};
  for (int pass = 0; pass < 2; pass++)
    for (int s = 0; s < 2; s++) {
      const pt *a = s ? q : p;
      for (int i = 0; i < (s ? nq : n); i++) {
        if (!same_scale(&a[i], x) || strcmp(a[i].system, sys))
          continue;
        if (pass == 0 && is_ok(&a[i])) {
          if (isnan(r.longest) || a[i].seq > r.longest)
            r.longest = a[i].seq;
          if (isnan(r.batch) || a[i].batch > r.batch)
            r.batch = a[i].batch;
        } else if (pass == 1 && !is_ok(&a[i]) &&
                   strcmp(a[i].status, "infeasible") &&
                   (isnan(r.longest) || a[i].seq > r.longest) &&
                   (isnan(r.first_fail) || a[i].seq < r.first_fail)) {
          r.first_fail = a[i].seq;
          r.fail_status = a[i].status;
        }
      }
    }
  return r;
}

static int paper_vs(const char *model) {
  for (int j = 0; j < 3; j++)
    if (!strcmp(PAPER_VS[j].model, model))
      return j;
  return -1;
}

static const char *reach_cell(char *b, size_t n, reach_t r) {
  char c1[16], c2[16];
  if (isnan(r.longest) && isnan(r.first_fail))
    snprintf(b, n, "-");
  else if (isnan(r.longest))
    snprintf(b, n, "none (%s at %s)", r.fail_status,
             ctx(c2, sizeof c2, r.first_fail));
  else if (isnan(r.first_fail))
    snprintf(b, n, "%s", ctx(c1, sizeof c1, r.longest));
  else
    snprintf(b, n, "%s (%s at %s)", ctx(c1, sizeof c1, r.longest),
             r.fail_status, ctx(c2, sizeof c2, r.first_fail));
  return b;
}

/* The targets of the comparison per scale both systems ran: plateau's reach
 * >= 8x FSDP2-best's, its TFLOP/s >= 2x at the longest context both fit. */
static void targets(FILE *md, const pt *p, int n, const pt *q, int nq) {
  bool head = false;
  for (int i = 0; i < n; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = same_scale(&p[j], &p[i]);
    if (seen)
      continue;
    const reach_t ra = reach_of(p, n, q, nq, &p[i], "plateau"),
                  rb = reach_of(p, n, q, nq, &p[i], "fsdp2");
    double both = NAN, ratio = NAN;
    for (int j = 0; j < n; j++) {
      if (!same_scale(&p[j], &p[i]) || (!isnan(both) && p[j].seq <= both))
        continue;
      const pt *a = best_at(p, n, &p[j], "plateau", p[j].seq, NULL),
               *b = best_at(p, n, &p[j], "fsdp2", p[j].seq, NULL);
      if (a && b)
        both = p[j].seq, ratio = a->tflops / b->tflops;
    }
    if (isnan(ra.longest) || (isnan(rb.longest) && isnan(rb.first_fail)))
      continue;
    if (!head)
      fprintf(md, "\nTargets (one scale, every figure from this run): "
                  "plateau's longest context ≥ 8× FSDP2-best's; its TFLOP/s "
                  "≥ 2× FSDP2-best's at the longest context both fit.\n\n");
    head = true;
    char c1[16], c2[16];
    const double rr = ra.longest / rb.longest;
    fprintf(md, "- %s at %.0f / %.0f: reach ratio %s (%s); ", p[i].model,
            p[i].ranks, p[i].wv,
            isnan(rb.longest) ? "unbounded (FSDP2-best fits nothing)"
                              : pl_rep_fmt(c1, sizeof c1, "%.1f×", rr, "-"),
            isnan(rb.longest) || rr >= 8 ? "met" : "missed");
    if (isnan(both))
      fprintf(md, "no context both fit\n");
    else
      fprintf(md, "TFLOP/s ratio %.2f× at %s (%s)\n", ratio,
              ctx(c2, sizeof c2, both), ratio >= 2 ? "met" : "missed");
  }
}

static void versus(FILE *md, const pt *p, int n, const pt *q, int nq) {
  fprintf(md,
          "\n## plateau vs FSDP2-best\n\nFSDP2-best: the fastest fsdp2 row "
          "that fits at the same model, scale and context, whichever knobs "
          "it ran with (`--tune` tries every cp, ep, AC mode and optimizer "
          "placement a torchtitan user would: the paper's definition). "
          "Ours: `ranks` processes, each one rank of a `W_v`-rank run (the "
          "one-GPU proxy when W_v > ranks). Paper (%s): 7.6× tok/s at "
          "120B/128K; FSDP2-best OOM past 128K / 32K / 64K while plateau "
          "trains 1M; max batch 12× / 7× / 3× (120B / 241B / 667B).\n\n",
          SCALE);
  bool any = false;
  for (int i = 0; i < n + nq && !any; i++)
    any = !strcmp(i < n ? p[i].system : q[i - n].system, "fsdp2");
  if (!any) {
    fprintf(md, "No fsdp2 rows in this run: the tables fill when the FSDP2 "
                "baseline runs (`plateau bench train --system "
                "plateau,fsdp2`, `--tune`).\n");
    return;
  }
  fprintf(md, "Throughput per context (the ratios where both fit):\n\n"
              "| model | ours: ranks / W_v | context | plateau tok/s/GPU | "
              "plateau TFLOP/s | FSDP2-best tok/s/GPU | FSDP2-best TFLOP/s | "
              "FSDP2-best configuration (fit / tried) | tok/s ratio | "
              "TFLOP/s ratio | paper |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) { /* each (scale, context) once */
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = same_scale(&p[j], &p[i]) && p[j].seq == p[i].seq &&
             (!strcmp(p[j].system, "plateau") || !strcmp(p[j].system, "fsdp2"));
    if (seen ||
        (strcmp(p[i].system, "plateau") && strcmp(p[i].system, "fsdp2")))
      continue;
    int ta = 0, tf = 0, fits = 0;
    const pt *a = best_at(p, n, &p[i], "plateau", p[i].seq, &ta);
    const pt *b = best_at(p, n, &p[i], "fsdp2", p[i].seq, &tf);
    for (int j = 0; j < n; j++)
      fits += same_scale(&p[j], &p[i]) && p[j].seq == p[i].seq &&
              !strcmp(p[j].system, "fsdp2") && is_ok(&p[j]);
    const int k = paper_vs(p[i].model);
    char c[16], t1[32], t2[32], t3[32], t4[32], r1[32], r2[32], pp[64] = "-";
    if (k >= 0 && !isnan(PAPER_VS[k].tok_ratio) && p[i].seq == 131072)
      snprintf(pp, sizeof pp, "%.1f× (%s)", PAPER_VS[k].tok_ratio, SCALE);
    const double na = NAN;
    fprintf(
        md,
        "| %s | %.0f / %.0f | %s | %s | %s | %s | %s | %s (%d / %d) | %s "
        "| %s | %s |\n",
        p[i].model, p[i].ranks, p[i].wv, ctx(c, sizeof c, p[i].seq),
        pl_rep_fmt(t1, sizeof t1, "%.1f", a ? a->tok : na, ta ? "oom" : "-"),
        pl_rep_fmt(t2, sizeof t2, "%.3g", a ? a->tflops : na, "-"),
        pl_rep_fmt(t3, sizeof t3, "%.1f", b ? b->tok : na, tf ? "oom" : "-"),
        pl_rep_fmt(t4, sizeof t4, "%.3g", b ? b->tflops : na, "-"),
        b    ? b->variant
        : tf ? "none fits"
             : "not run",
        fits, tf,
        pl_rep_fmt(r1, sizeof r1, "%.2f×", a && b ? a->tok / b->tok : na, "-"),
        pl_rep_fmt(r2, sizeof r2, "%.2f×", a && b ? a->tflops / b->tflops : na,
                   "-"),
        pp);
  }
  fprintf(md,
          "\nReach and max batch: the longest context each fits (and the "
          "first failing one above it) and the largest tokens per step "
          "each fits (one micro-batch over the world: tokens/rank × W_v), "
          "from the ok rows and the maxbatch trials (`plateau bench "
          "maxbatch --bench train --system plateau,fsdp2`).\n\n"
          "| model | ours: ranks / W_v | plateau reach | FSDP2-best reach | "
          "reach ratio | paper reach | plateau max batch | FSDP2-best max "
          "batch | max-batch ratio | paper max batch |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n + nq; i++) { /* each scale once */
    const pt *x = i < n ? &p[i] : &q[i - n];
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = same_scale(j < n ? &p[j] : &q[j - n], x);
    if (seen)
      continue;
    const reach_t ra = reach_of(p, n, q, nq, x, "plateau"),
                  rb = reach_of(p, n, q, nq, x, "fsdp2");
    const int k = paper_vs(x->model);
    char a[64], b[64], r1[32], r2[32], m1[32], m2[32], q1[64] = "-",
                                                       q2[64] = "-";
    if (k >= 0) {
      snprintf(q1, sizeof q1, "%.0f× (1M vs OOM past %.0fK; %s)",
               1048576 / PAPER_VS[k].fsdp2_reach,
               PAPER_VS[k].fsdp2_reach / 1024, SCALE);
      snprintf(q2, sizeof q2, "%.0f× (%.1fM tokens; %s)",
               PAPER_VS[k].batch_ratio, PAPER_VS[k].batch / 1e6, SCALE);
    }
    fprintf(md,
            "| %s | %.0f / %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n",
            x->model, x->ranks, x->wv, reach_cell(a, sizeof a, ra),
            reach_cell(b, sizeof b, rb),
            pl_rep_fmt(r1, sizeof r1, "%.1f×", ra.longest / rb.longest, "-"),
            q1, pl_rep_fmt(m1, sizeof m1, "%.0f", ra.batch, "-"),
            pl_rep_fmt(m2, sizeof m2, "%.0f", rb.batch, "-"),
            pl_rep_fmt(r2, sizeof r2, "%.1f×", ra.batch / rb.batch, "-"), q2);
  }
  targets(md, p, n, q, nq);
}

/* Every fsdp2 row per scale and context, fastest first; FSDP2-best marked. */
static void tuning(FILE *md, const pt *p, int n) {
  int nf = 0;
  for (int i = 0; i < n; i++)
    nf += !strcmp(p[i].system, "fsdp2");
  if (!nf)
    return;
  fprintf(md, "\n## FSDP2-best: every configuration tried\n\nPer model, "
              "scale and context, the fsdp2 rows fastest first (kind `tune`: "
              "a point of `--tune`); **best** marks FSDP2-best, the fastest "
              "that fits.\n\n| model | ranks / W_v | context | "
              "configuration | kind | status | tok/s/GPU | TFLOP/s/GPU | "
              "device peak | pinned host | |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
  int *ix = malloc(sizeof *ix * (size_t)nf);
  PL_ASSERT(ix != NULL);
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].system, "fsdp2"))
      continue;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = !strcmp(p[j].system, "fsdp2") && same_scale(&p[j], &p[i]) &&
             p[j].seq == p[i].seq;
    if (seen)
      continue;
    int k = 0;
    for (int j = 0; j < n; j++)
      if (!strcmp(p[j].system, "fsdp2") && same_scale(&p[j], &p[i]) &&
          p[j].seq == p[i].seq)
        ix[k++] = j;
    /* ok rows by tok/s descending, then the rest in their order */
    for (int a = 1; a < k; a++)
      for (int b = a; b > 0; b--) {
        const pt *x = &p[ix[b - 1]], *y = &p[ix[b]];
        const double kx = is_ok(x) ? x->tok : -1, ky = is_ok(y) ? y->tok : -1;
        if (ky > kx) {
          int t = ix[b];
          ix[b] = ix[b - 1], ix[b - 1] = t;
        }
      }
    for (int a = 0; a < k; a++) {
      const pt *x = &p[ix[a]];
      char c[16], b1[32], b2[32];
      fprintf(md,
              "| %s | %.0f / %.0f | %s | %s | %s | %s | %s | %s | %s | %s "
              "| %s |\n",
              x->model, x->ranks, x->wv, ctx(c, sizeof c, x->seq), x->variant,
              x->kind, x->status, pl_cell(x->t, x->r, "tok_s_gpu"),
              pl_cell(x->t, x->r, "tflops"),
              pl_rep_bytes(b1, sizeof b1,
                           pl_cell_num(x->t, x->r, "dev_peak_bytes")),
              pl_rep_bytes(b2, sizeof b2,
                           pl_cell_num(x->t, x->r, "host_peak_bytes")),
              a == 0 && is_ok(x) ? "**best**" : "");
    }
  }
  free(ix);
}

/* ---- our FSDP2 baseline vs PyTorch FSDP2 -----------------------------------
 * A peer row and ours run the same point: the same shapes, context, knobs
 * (variant) and ranks, ours a real run (W_v = ranks). */
static bool same_point(const pl_table *a, int ra, const pt *b) {
  static const char *const keys[] = {"hidden", "layers", "experts",
                                     "vocab",  "seq",    "ranks"};
  for (int k = 0; k < 6; k++)
    if (pl_cell_num(a, ra, keys[k]) != pl_cell_num(b->t, b->r, keys[k]))
      return false;
  return !strcmp(pl_cell(a, ra, "variant"), b->variant) && b->wv == b->ranks &&
         !strcmp(b->system, "fsdp2");
}

static const char *within(double r) {
  return isnan(r) ? "-" : fabs(r - 1) <= 0.15 ? "yes" : "no";
}

static void peer(FILE *md, const pt *p, int n, pl_table *const *pe, int npe) {
  int nours = 0;
  for (int i = 0; i < n; i++)
    nours += !strcmp(p[i].kind, "peer") && !strcmp(p[i].system, "fsdp2");
  if (!npe && !nours)
    return;
  fprintf(md,
          "\n## The FSDP2 baseline vs PyTorch FSDP2 (the shared points)\n\n"
          "The points of `analysis/peers/fsdp2_points.tsv`: ours (`plateau "
          "bench train --points peer`) and PyTorch's (`analysis/peers/"
          "torch_fsdp2.py`: `fully_shard`, `checkpoint_wrapper`, "
          "`CPUOffloadPolicy`), joined by shapes, context, knobs and ranks. "
          "Ratios are ours / PyTorch's; device peak: our tracked peak vs "
          "`torch.cuda.max_memory_allocated`. Target: within ±15%% on both, "
          "or an explained difference (README, The FSDP2 baseline).\n\n"
          "| model | context | configuration | ours tok/s/GPU | PyTorch "
          "tok/s/GPU | tok/s ratio | ±15%% | ours device peak | PyTorch device "
          "peak | peak ratio | ±15%% | status (ours / PyTorch) |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int both = 0, in = 0;
  bool *used = calloc((size_t)n + 1, sizeof *used);
  PL_ASSERT(used != NULL);
  for (int k = 0; k < npe; k++)
    for (int r = 0; r < pe[k]->nrows; r++) {
      const pl_table *t = pe[k];
      const pt *o = NULL;
      for (int i = 0; i < n; i++)
        if (same_point(t, r, &p[i]) &&
            (!o || (is_ok(&p[i]) && (!is_ok(o) || p[i].tok > o->tok))))
          o = &p[i];
      for (int i = 0; i < n; i++)
        used[i] |= same_point(t, r, &p[i]);
      const bool pok = !strcmp(pl_cell(t, r, "status"), "ok");
      const double tr = o && is_ok(o) && pok
                            ? o->tok / pl_cell_num(t, r, "tok_s_gpu")
                            : NAN,
                   mr = o && is_ok(o) && pok
                            ? pl_cell_num(o->t, o->r, "dev_peak_bytes") /
                                  pl_cell_num(t, r, "dev_peak_bytes")
                            : NAN;
      char c[16], b1[32], b2[32], r1[32], r2[32], label[96];
      if (o)
        snprintf(label, sizeof label, "%s", o->model);
      else
        snprintf(label, sizeof label, "H%s L%s E%s (not run by us)",
                 pl_cell(t, r, "hidden"), pl_cell(t, r, "layers"),
                 pl_cell(t, r, "experts"));
      fprintf(md,
              "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / "
              "%s |\n",
              label, ctx(c, sizeof c, pl_cell_num(t, r, "seq")),
              pl_cell(t, r, "variant"),
              o ? pl_cell(o->t, o->r, "tok_s_gpu") : "-",
              pl_cell(t, r, "tok_s_gpu"),
              pl_rep_fmt(r1, sizeof r1, "%.2f", tr, "-"), within(tr),
              pl_rep_bytes(b1, sizeof b1,
                           o ? pl_cell_num(o->t, o->r, "dev_peak_bytes") : NAN),
              pl_rep_bytes(b2, sizeof b2, pl_cell_num(t, r, "dev_peak_bytes")),
              pl_rep_fmt(r2, sizeof r2, "%.2f", mr, "-"), within(mr),
              o ? o->status : "not run", pl_cell(t, r, "status"));
      if (!isnan(tr) && !isnan(mr)) {
        both++;
        in += fabs(tr - 1) <= 0.15 && fabs(mr - 1) <= 0.15;
      }
    }
  for (int i = 0; i < n; i++) { /* ours without a PyTorch row */
    if (used[i] || strcmp(p[i].kind, "peer") || strcmp(p[i].system, "fsdp2"))
      continue;
    char c[16], b1[32];
    fprintf(md,
            "| %s | %s | %s | %s | - | - | - | %s | - | - | - | %s / "
            "not run |\n",
            p[i].model, ctx(c, sizeof c, p[i].seq), p[i].variant,
            pl_cell(p[i].t, p[i].r, "tok_s_gpu"),
            pl_rep_bytes(b1, sizeof b1,
                         pl_cell_num(p[i].t, p[i].r, "dev_peak_bytes")),
            p[i].status);
  }
  free(used);
  fprintf(md,
          "\nWithin ±15%% on both tok/s and device peak: %d of the %d "
          "points both measured.\n",
          in, both);
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
 * system have several runs; model:fsdp2-best for every fsdp2 row (the chart
 * keeps the best ok row of a series per context). */
static void series_of(const pt *p, int n, int i, char *s, size_t len) {
  bool many = false;
  if (!strcmp(p[i].system, "fsdp2")) { /* one series: FSDP2-best */
    snprintf(s, len, "%s:fsdp2-best", p[i].model);
    return;
  }
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

/* The row r of train table t. */
static pt row_of(const pl_table *t, int r) {
  const double micro = pl_cell_num(t, r, "micro");
  return (pt){t,
              r,
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
              pl_cell_num(t, r, "step_tokens") / (micro > 0 ? micro : 1)};
}

static void push(pt **v, int *n, int *cap, pt x) {
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 16;
    *v = realloc(*v, sizeof **v * (size_t)*cap);
    PL_ASSERT(*v != NULL);
  }
  (*v)[(*n)++] = x;
}

/* The GPUs a row stands for: W_v when it is a proxy of a larger run. */
static double gpus_of(const pt *p) {
  return !isnan(p->wv) && p->wv > p->ranks ? p->wv : p->ranks;
}

/* Chart data vs GPU count: per (system, context[, proxy]) and GPU count the
 * best ok point, then the paper's points per context (paper:128K, paper:1M). */
static pl_status chart_gpus(pl_report_ctx *rc, const pt *p, int n) {
  char data[PATH_MAX], stem[PATH_MAX], series[4096] = " ";
  snprintf(data, sizeof data, "%s/train-gpus.tsv", rc->out_dir);
  snprintf(stem, sizeof stem, "%s/train-gpus", rc->out_dir);
  FILE *f = fopen(data, "w");
  if (!f)
    return pl_set_error(PL_EIO, "write %s", data);
  fprintf(f, "# end-to-end points vs GPU count (W_v for a proxy): ours (the "
             "best ok row per series and GPU count) and the paper's\n"
             "series\tgpus\ttok_s_gpu\ttflops\n");
  /* series in order of their first row, points by GPU count */
  char names[64][64];
  int nn = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].status, "ok"))
      continue;
    char c[16], s[64];
    snprintf(s, sizeof s, "%s:%s%s", p[i].system, ctx(c, sizeof c, p[i].seq),
             p[i].wv > p[i].ranks ? ":proxy" : "");
    int k = 0;
    while (k < nn && strcmp(names[k], s))
      k++;
    if (k == nn && nn < 64)
      snprintf(names[nn++], sizeof names[0], "%s", s);
  }
  for (int k = 0; k < nn; k++) {
    double last = -1;
    for (;;) { /* the next GPU count of series k, and its best point */
      double g = INFINITY;
      const pt *best = NULL;
      for (int i = 0; i < n; i++) {
        char c[16], s[64];
        if (strcmp(p[i].status, "ok"))
          continue;
        snprintf(s, sizeof s, "%s:%s%s", p[i].system,
                 ctx(c, sizeof c, p[i].seq), p[i].wv > p[i].ranks ? ":proxy" : "");
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
    if (strlen(series) + strlen(names[k]) + 2 < sizeof series)
      strcat(strcat(series, names[k]), " ");
  }
  if (nn) {
    const double seqs[2] = {131072, 1048576};
    for (int q = 0; q < 2; q++) {
      char c[16], s[32];
      snprintf(s, sizeof s, "paper:%s", ctx(c, sizeof c, seqs[q]));
      for (int i = 0; i < NPAPER; i++)
        if (PAPER[i].seq == seqs[q])
          fprintf(f, "%s\t%d\t%.0f\t%.0f\n", s, PAPER[i].gpus, PAPER[i].tok,
                  PAPER[i].tflops);
      strcat(strcat(series, s), " ");
    }
  }
  fclose(f);
  printf("%s\n", data);
  if (!nn)
    return PL_OK;
  const char *extra[] = {series + 1, LABEL};
  return pl_rep_chart(rc, "train-gpus.gp", data, stem, extra, 2);
}

/* Chart data of the max-batch searches: the largest global batch (largest
 * tokens per rank x the GPUs of its trials, W_v when the trial file is a
 * proxy) per system and GPU count, and the paper's plateau and FSDP2-best
 * batches. */
static pl_status chart_maxbatch(pl_report_ctx *rc, pl_table *const *mb, int nmb,
                                pl_table *const *tabs, int nt) {
  char data[PATH_MAX], stem[PATH_MAX], series[1024] = " ";
  snprintf(data, sizeof data, "%s/train-maxbatch.tsv", rc->out_dir);
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
        f = fopen(data, "w");
        if (!f)
          return pl_set_error(PL_EIO, "write %s", data);
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
            PAPER_VS[k].batch);
  for (int k = 0; k < 3; k++)
    fprintf(f, "paper:fsdp2\t%d\t%.0f\t-\n", paper_gpus[k],
            PAPER_VS[k].batch / PAPER_VS[k].batch_ratio);
  strcat(series, "paper:plateau paper:fsdp2 ");
  fclose(f);
  printf("%s\n", data);
  const char *extra[] = {series + 1, LABEL};
  return pl_rep_chart(rc, "train-maxbatch.gp", data, stem, extra, 2);
}

pl_status pl_report_train(pl_report_ctx *rc, pl_table *const *tabs, int nt) {
  int n = 0, cap = 0, nq = 0, capq = 0, nmb = 0, npe = 0;
  pt *p = NULL, *q = NULL; /* the points; the maxbatch trials' rows */
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
      if (trial)
        push(&q, &nq, &capq, row_of(t, r));
      else
        push(&p, &n, &cap, row_of(t, r));
  }
  pl_status st = PL_OK;
  if (n + nmb + npe == 0) /* only other benches' maxbatch files */
    goto out;
  if (n)
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
  prediction(md, p, n);
  reach(md, p, n, mb, nmb);
  versus(md, p, n, q, nq);
  tuning(md, p, n);
  peer(md, p, n, pe, npe);
  losses(md, p, n);
  st = pl_rep_close(md, path);
  if (st == PL_OK)
    st = chart(rc, p, n);
  if (st == PL_OK)
    st = chart_gpus(rc, p, n);
  if (st == PL_OK && nmb)
    st = chart_maxbatch(rc, mb, nmb, tabs, nt);
out:
  free(p);
  free(q);
  free(mb);
  free(pe);
  return st;
}
