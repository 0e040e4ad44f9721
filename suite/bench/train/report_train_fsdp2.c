/* report_train_fsdp2.c — the train report's (report_train.c) comparison of
 * plateau with FSDP2: plateau against FSDP2-best — the fastest fsdp2 row that
 * fits at the same model, scale (ranks, W_v) and context, whichever knobs it
 * ran with, beside plateau's fastest row there (its configuration named: the
 * headroom knobs in its variant) — per context both fit, the longest context
 * and the largest tokens per step each fits, beside the paper's figures, and
 * the targets of the comparison; every fsdp2 configuration tried, the winner
 * marked; our FSDP2 baseline against PyTorch's on the points both ran. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "report/report_util.h"
#include "report_train.h"

/* ---- plateau vs FSDP2-best ------------------------------------------------
 * A scale: one model at ranks processes of a W_v-rank run. */
static bool same_scale(const pl__train_pt *a, const pl__train_pt *b) {
  return !strcmp(a->model, b->model) && a->ranks == b->ranks && a->wv == b->wv;
}

static bool is_ok(const pl__train_pt *a) {
  return !strcmp(a->status, "ok");
}

/* The fastest ok row of sys at the scale of x and context seq (NULL: none);
 * *tried counts the rows of sys there. */
static const pl__train_pt *best_at(const pl__train_pt *p, int n,
                                   const pl__train_pt *x, const char *sys,
                                   double seq, int *tried) {
  const pl__train_pt *b = NULL;
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

static reach_t reach_of(const pl__train_pt *p, int n, const pl__train_pt *q,
                        int nq, const pl__train_pt *x, const char *sys) {
  reach_t r = {NAN, NAN, NAN, "-"};
  for (int pass = 0; pass < 2; pass++)
    for (int s = 0; s < 2; s++) {
      const pl__train_pt *a = s ? q : p;
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
    if (!strcmp(pl_paper_vs[j].model, model))
      return j;
  return -1;
}

static const char *reach_cell(char *b, size_t n, reach_t r) {
  char c1[16], c2[16];
  if (isnan(r.longest) && isnan(r.first_fail))
    snprintf(b, n, "-");
  else if (isnan(r.longest))
    snprintf(b, n, "none (%s at %s)", r.fail_status,
             pl_rep_ctx(c2, sizeof c2, r.first_fail));
  else if (isnan(r.first_fail))
    snprintf(b, n, "%s", pl_rep_ctx(c1, sizeof c1, r.longest));
  else
    snprintf(b, n, "%s (%s at %s)", pl_rep_ctx(c1, sizeof c1, r.longest),
             r.fail_status, pl_rep_ctx(c2, sizeof c2, r.first_fail));
  return b;
}

/* Tokens per step as a context is written ("2M", "512K"), "-" for none. */
static const char *batch_cell(char *b, size_t n, double tokens) {
  if (isnan(tokens) || tokens <= 0)
    snprintf(b, n, "-");
  else
    pl_rep_ctx(b, n, tokens);
  return b;
}

/* The targets of the comparison per scale both systems ran: plateau's reach
 * >= 8x FSDP2-best's, its TFLOP/s >= 2x at the longest context both fit. */
static void targets(FILE *md, const pl__train_pt *p, int n,
                    const pl__train_pt *q, int nq) {
  bool head = false;
  for (int i = 0; i < n; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = same_scale(&p[j], &p[i]);
    if (seen)
      continue;
    const reach_t ra = reach_of(p, n, q, nq, &p[i], PL_PLAN_NAME_PLATEAU),
                  rb = reach_of(p, n, q, nq, &p[i], PL_PLAN_NAME_FSDP2);
    double both = NAN, ratio = NAN;
    for (int j = 0; j < n; j++) {
      if (!same_scale(&p[j], &p[i]) || (!isnan(both) && p[j].seq <= both))
        continue;
      const pl__train_pt *a = best_at(p, n, &p[j], PL_PLAN_NAME_PLATEAU,
                                      p[j].seq, NULL),
                         *b = best_at(p, n, &p[j], PL_PLAN_NAME_FSDP2, p[j].seq,
                                      NULL);
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
    /* GPU targets: a CPU-backend row's times are CPU times (not judged) */
    const bool cpu = pl_rep_is_cpu(p[i].t);
    fprintf(md, "- %s at %.0f / %.0f: reach ratio %s (%s); ", p[i].model,
            p[i].ranks, p[i].wv,
            isnan(rb.longest) ? "unbounded (FSDP2-best fits nothing)"
                              : pl_rep_fmt(c1, sizeof c1, "%.1f×", rr, "-"),
            cpu                            ? "CPU backend: not judged"
            : isnan(rb.longest) || rr >= 8 ? "met"
                                           : "missed");
    if (isnan(both))
      fprintf(md, "no context both fit\n");
    else
      fprintf(md, "TFLOP/s ratio %.2f× at %s (%s)\n", ratio,
              pl_rep_ctx(c2, sizeof c2, both),
              cpu          ? "CPU times: not judged"
              : ratio >= 2 ? "met"
                           : "missed");
  }
}

void pl__report_train_versus(FILE *md, const pl__train_pt *p, int n,
                             const pl__train_pt *q, int nq) {
  fprintf(md,
          "\n## plateau vs FSDP2-best\n\nFSDP2-best: the fastest fsdp2 row "
          "that fits at the same model, scale and context, whichever knobs "
          "it ran with (`--tune` tries every cp, ep, AC mode and optimizer "
          "placement a torchtitan user would: the paper's definition); "
          "plateau likewise its fastest ok row there, its configuration "
          "named (with `--optim-resident auto --keep auto`, or `--config "
          "auto`, the plan's headroom fill). Ours: `ranks` processes, each one "
          "rank of a `W_v`-rank run (the "
          "one-GPU proxy when W_v > ranks). Paper (%s): 7.6× tok/s at "
          "120B/128K; FSDP2-best OOM past 128K / 32K / 64K while plateau "
          "trains 1M; max batch 12× / 7× / 3× (120B / 241B / 667B).\n\n",
          pl_paper_scale);
  bool any = false;
  for (int i = 0; i < n + nq && !any; i++)
    any = !strcmp(i < n ? p[i].system : q[i - n].system, PL_PLAN_NAME_FSDP2);
  if (!any) {
    fprintf(md, "No fsdp2 rows in this run: the tables fill when the FSDP2 "
                "baseline runs (`plateau bench train --system "
                "plateau,fsdp2`, `--tune`).\n");
    return;
  }
  fprintf(md, "Throughput per context (the ratios where both fit):\n\n"
              "| model | ours: ranks / W_v | context | plateau tok/s/GPU | "
              "plateau TFLOP/s | plateau configuration | FSDP2-best tok/s/GPU "
              "| FSDP2-best TFLOP/s | FSDP2-best configuration (fit / tried) | "
              "tok/s ratio | TFLOP/s ratio | paper |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) { /* each (scale, context) once */
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = same_scale(&p[j], &p[i]) && p[j].seq == p[i].seq &&
             (!strcmp(p[j].system, PL_PLAN_NAME_PLATEAU) ||
              !strcmp(p[j].system, PL_PLAN_NAME_FSDP2));
    if (seen || (strcmp(p[i].system, PL_PLAN_NAME_PLATEAU) &&
                 strcmp(p[i].system, PL_PLAN_NAME_FSDP2)))
      continue;
    int ta = 0, tf = 0, fits = 0;
    const pl__train_pt *a =
        best_at(p, n, &p[i], PL_PLAN_NAME_PLATEAU, p[i].seq, &ta);
    const pl__train_pt *b =
        best_at(p, n, &p[i], PL_PLAN_NAME_FSDP2, p[i].seq, &tf);
    for (int j = 0; j < n; j++)
      fits += same_scale(&p[j], &p[i]) && p[j].seq == p[i].seq &&
              !strcmp(p[j].system, PL_PLAN_NAME_FSDP2) && is_ok(&p[j]);
    const int k = paper_vs(p[i].model);
    char c[16], t1[32], t2[32], t3[32], t4[32], r1[32], r2[32], pp[64] = "-";
    if (k >= 0 && !isnan(pl_paper_vs[k].tok_ratio) && p[i].seq == 131072)
      snprintf(pp, sizeof pp, "%.1f× (%s)", pl_paper_vs[k].tok_ratio,
               pl_paper_scale);
    const double na = NAN;
    fprintf(md,
            "| %s | %.0f / %.0f | %s | %s | %s | %s | %s | %s | %s (%d / %d) | "
            "%s | %s | %s |\n",
            p[i].model, p[i].ranks, p[i].wv, pl_rep_ctx(c, sizeof c, p[i].seq),
            pl_rep_q(t1, sizeof t1, a ? a->tok : na, ta ? "oom" : "-"),
            pl_rep_q(t2, sizeof t2, a ? a->tflops : na, "-"),
            a ? a->variant : "-",
            pl_rep_q(t3, sizeof t3, b ? b->tok : na, tf ? "oom" : "-"),
            pl_rep_q(t4, sizeof t4, b ? b->tflops : na, "-"),
            b    ? b->variant
            : tf ? "none fits"
                 : "not run",
            fits, tf,
            pl_rep_fmt(r1, sizeof r1,
                       pl_rep_is_cpu(p[i].t) ? "%.2f× (CPU times)" : "%.2f×",
                       a && b ? a->tok / b->tok : na, "-"),
            pl_rep_fmt(r2, sizeof r2,
                       pl_rep_is_cpu(p[i].t) ? "%.2f× (CPU times)" : "%.2f×",
                       a && b ? a->tflops / b->tflops : na, "-"),
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
    const pl__train_pt *x = i < n ? &p[i] : &q[i - n];
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = same_scale(j < n ? &p[j] : &q[j - n], x);
    if (seen)
      continue;
    const reach_t ra = reach_of(p, n, q, nq, x, PL_PLAN_NAME_PLATEAU),
                  rb = reach_of(p, n, q, nq, x, PL_PLAN_NAME_FSDP2);
    const int k = paper_vs(x->model);
    char a[64], b[64], r1[32], r2[32], m1[32], m2[32], q1[64] = "-",
                                                       q2[64] = "-";
    if (k >= 0) {
      snprintf(q1, sizeof q1, "%.0f× (1M vs OOM past %.0fK; %s)",
               1048576 / pl_paper_vs[k].fsdp2_reach,
               pl_paper_vs[k].fsdp2_reach / 1024, pl_paper_scale);
      snprintf(q2, sizeof q2, "%.0f× (%.1fM tokens; %s)",
               pl_paper_vs[k].batch_ratio, pl_paper_vs[k].batch / 1e6,
               pl_paper_scale);
    }
    fprintf(md,
            "| %s | %.0f / %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n",
            x->model, x->ranks, x->wv, reach_cell(a, sizeof a, ra),
            reach_cell(b, sizeof b, rb),
            pl_rep_fmt(r1, sizeof r1, "%.1f×", ra.longest / rb.longest, "-"),
            q1, batch_cell(m1, sizeof m1, ra.batch),
            batch_cell(m2, sizeof m2, rb.batch),
            pl_rep_fmt(r2, sizeof r2, "%.1f×", ra.batch / rb.batch, "-"), q2);
  }
  targets(md, p, n, q, nq);
}

/* Every fsdp2 row per scale and context, fastest first; FSDP2-best marked. */
void pl__report_train_tuning(FILE *md, const pl__train_pt *p, int n) {
  int nf = 0;
  for (int i = 0; i < n; i++)
    nf += !strcmp(p[i].system, PL_PLAN_NAME_FSDP2);
  if (!nf)
    return;
  fprintf(md,
          "\n## FSDP2-best: every configuration tried\n\nPer model, "
          "scale and context, the fsdp2 rows fastest first (kind `tune`: "
          "a point of `--tune`); **best** marks FSDP2-best, the fastest "
          "that fits.\n\n" PL__TRAIN_ROW_HEAD
          " status | tok/s/GPU | TFLOP/s/GPU | device peak | pinned host "
          "| FSDP2-best |\n" PL__TRAIN_ROW_RULE "---|---|---|---|---|---|\n");
  int *ix = malloc(sizeof *ix * (size_t)nf);
  PL_ASSERT(ix != NULL);
  for (int i = 0; i < n; i++) {
    if (strcmp(p[i].system, PL_PLAN_NAME_FSDP2))
      continue;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = !strcmp(p[j].system, PL_PLAN_NAME_FSDP2) &&
             same_scale(&p[j], &p[i]) && p[j].seq == p[i].seq;
    if (seen)
      continue;
    int k = 0;
    for (int j = 0; j < n; j++)
      if (!strcmp(p[j].system, PL_PLAN_NAME_FSDP2) &&
          same_scale(&p[j], &p[i]) && p[j].seq == p[i].seq)
        ix[k++] = j;
    /* ok rows by tok/s descending, then the rest in their order */
    for (int a = 1; a < k; a++)
      for (int b = a; b > 0; b--) {
        const pl__train_pt *x = &p[ix[b - 1]], *y = &p[ix[b]];
        const double kx = is_ok(x) ? x->tok : -1, ky = is_ok(y) ? y->tok : -1;
        if (ky > kx) {
          int t = ix[b];
          ix[b] = ix[b - 1], ix[b - 1] = t;
        }
      }
    for (int a = 0; a < k; a++) {
      const pl__train_pt *x = &p[ix[a]];
      char b1[32], b2[32], q1[32], q2[32];
      pl__train_row_head(md, x);
      fprintf(md, " %s | %s | %s | %s | %s | %s |\n", x->status,
              pl_rep_q(q1, sizeof q1, x->tok, "-"),
              pl_rep_q(q2, sizeof q2, x->tflops, "-"),
              pl_rep_bytes(b1, sizeof b1,
                           pl_cell_num(x->t, x->r, "dev_peak_bytes")),
              pl_rep_bytes(b2, sizeof b2,
                           pl_cell_num(x->t, x->r, "host_peak_bytes")),
              a == 0 && is_ok(x) ? "**best**" : "-");
    }
  }
  free(ix);
}

/* ---- our FSDP2 baseline vs PyTorch FSDP2 -----------------------------------
 * A peer row and ours run the same point: the same shapes, context, knobs
 * (variant) and ranks, ours a real run (W_v = ranks). */
static bool same_point(const pl_table *a, int ra, const pl__train_pt *b) {
  static const char *const keys[] = {"hidden", "layers", "experts",
                                     "vocab",  "seq",    "ranks"};
  for (int k = 0; k < 6; k++)
    if (pl_cell_num(a, ra, keys[k]) != pl_cell_num(b->t, b->r, keys[k]))
      return false;
  return !strcmp(pl_cell(a, ra, "variant"), b->variant) && b->wv == b->ranks &&
         !strcmp(b->system, PL_PLAN_NAME_FSDP2);
}

static const char *within(double r) {
  return isnan(r) ? "-" : fabs(r - 1) <= 0.15 ? "yes" : "no";
}

void pl__report_train_peer(FILE *md, const pl__train_pt *p, int n,
                           pl_table *const *pe, int npe) {
  int nours = 0;
  for (int i = 0; i < n; i++)
    nours +=
        !strcmp(p[i].kind, "peer") && !strcmp(p[i].system, PL_PLAN_NAME_FSDP2);
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
          "or an explained difference (doc/guide/training.md, The FSDP2 "
          "baseline).\n\n"
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
      const pl__train_pt *o = NULL;
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
      char c[16], b1[32], b2[32], r1[32], r2[32], label[96], q1[32], q2[32];
      if (o)
        snprintf(label, sizeof label, "%s", o->model);
      else
        snprintf(label, sizeof label, "H%s L%s E%s (not run by us)",
                 pl_cell(t, r, "hidden"), pl_cell(t, r, "layers"),
                 pl_cell(t, r, "experts"));
      fprintf(md,
              "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / "
              "%s |\n",
              label, pl_rep_ctx(c, sizeof c, pl_cell_num(t, r, "seq")),
              pl_cell(t, r, "variant"),
              pl_rep_q(q1, sizeof q1, o ? o->tok : NAN, "-"),
              pl_rep_q(q2, sizeof q2, pl_cell_num(t, r, "tok_s_gpu"), "-"),
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
    if (used[i] || strcmp(p[i].kind, "peer") ||
        strcmp(p[i].system, PL_PLAN_NAME_FSDP2))
      continue;
    char c[16], b1[32], q1[32];
    fprintf(md,
            "| %s | %s | %s | %s | - | - | - | %s | - | - | - | %s / "
            "not run |\n",
            p[i].model, pl_rep_ctx(c, sizeof c, p[i].seq), p[i].variant,
            pl_rep_q(q1, sizeof q1, p[i].tok, "-"),
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
