/* report_adam.c — paper-vs-ours tables and the β × s chart for
 * `plateau bench adam` (and the torch peer rows of analysis/peers/).
 *
 * pl_report_adam(run_dir, out_dir) reads every adam.*.tsv and torch_adamw.*.tsv
 * under run_dir (and one directory level below), and writes into out_dir:
 *   adam.md          Table 4 layout (the step: CPU baseline vs streamed vs
 *                    hybrid vs the torch peer, with the paper's printed values
 *                    beside ours) and Table 14 layout (stream step time over
 *                    β × s), the measured host-link floor, and the targets
 *   adam_sweep.csv   bucket (M params), one column per s, the floor (s)
 *   adam_sweep.svg/.png  step time vs β per s, floor dashed
 *                    (analysis/adam_sweep.gp; skipped when gnuplot is absent)
 * and prints each path written.  Only rows with status ok count; the largest
 * params-per-rank value in the run is the one reported; for a repeated
 * configuration the last row read (files in name = time order) wins. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plateau/plateau.h"
#include "report/paper.h"
#include "report/report.h"
#include "report/report_util.h"
#include "results/results.h"

/* Paper, Table 4 (DESIGN §1.4): 2.625B params per rank, 8×H200 sharing a
 * node, 100M buckets, 2 slots (report/paper.c). */
#define PAPER_PARAMS pl_paper_op.adam_params
#define PAPER_CPU_S pl_paper_op.adam_cpu_s
#define PAPER_STREAM_S pl_paper_op.adam_stream_s
#define PAPER_SPEEDUP pl_paper_op.adam_speedup
#define PAPER_STAGING_GIB pl_paper_op.adam_staging_gib

#define MAXR 512

typedef struct arow {
  int mode; /* 0 cpu, 1 stream, 2 hybrid, 3 peer, 4 update */
  double params, bucket, slots, ranks, step_ms, p10, p90, gps, pct, floor_ms,
      staging, bound, h2d, d2h;
  double bpp, mem_gbs, update_ms; /* host-memory bytes/param, copy rate */
  double share_given;             /* hybrid: the --share value, NAN for auto */
  int on_cpu;                     /* the file ran on the CPU backend */
  const pl_table *t;              /* the file it came from */
  char check[16], share[32], note[256];
} arow;

typedef struct acc {
  arow r[MAXR];
  int n;
  double link_h2d, link_d2h, link_bidir;
} acc;

static const char *cols(const pl_table *t, int row, const char *name) {
  return pl_cell(t, row, name);
}
static double colf(const pl_table *t, int row, const char *name) {
  return pl_cell_num(t, row, name);
}

static void take(acc *A, const pl_table *tp, int peer) {
  const pl_table t = *tp;
  for (int i = 0; i < t.nrows && A->n < MAXR; i++) {
    if (strcmp(cols(&t, i, "status"), "ok") != 0)
      continue;
    arow *r = &A->r[A->n];
    memset(r, 0, sizeof *r);
    r->t = tp;
    const char *m = peer ? "peer" : cols(&t, i, "variant");
    r->mode = !strcmp(m, "cpu")      ? 0
              : !strcmp(m, "stream") ? 1
              : !strcmp(m, "hybrid") ? 2
              : !strcmp(m, "update") ? 4
                                     : 3;
    r->params = colf(&t, i, "params");
    r->bucket = colf(&t, i, "bucket");
    r->slots = colf(&t, i, "slots");
    /* a cpu row without slots is from before the staging choice: full */
    if (r->mode == 0 && isnan(r->slots))
      r->slots = 0;
    r->ranks = colf(&t, i, "ranks");
    r->step_ms = colf(&t, i, "time_ms");
    r->p10 = colf(&t, i, "time_p10_ms");
    r->p90 = colf(&t, i, "time_p90_ms");
    r->gps = colf(&t, i, "gparam_s");
    r->pct = colf(&t, i, "pct_floor");
    r->floor_ms = colf(&t, i, "floor_ms");
    r->staging = colf(&t, i, "optim_staging_bytes");
    r->bound = colf(&t, i, "bound_bytes");
    r->h2d = colf(&t, i, "h2d_gbs");
    r->d2h = colf(&t, i, "d2h_gbs");
    r->bpp = colf(&t, i, "host_bpp");
    r->mem_gbs = colf(&t, i, "mem_copy_gbs");
    r->update_ms = colf(&t, i, "update_ms");
    snprintf(r->check, sizeof r->check, "%s", cols(&t, i, "check"));
    snprintf(r->share, sizeof r->share, "%s", cols(&t, i, "share"));
    r->share_given = strcmp(r->share, "auto") && strcmp(r->share, "-")
                         ? strtod(r->share, NULL)
                         : NAN;
    double used = colf(&t, i, "cpu_share");
    if (!isnan(used)) /* the share actually used (auto: where it converged) */
      snprintf(r->share, sizeof r->share, "%s → %.2f", cols(&t, i, "share"),
               used);
    r->on_cpu = !strcmp(pl_rep_meta(tp, "backend", ""), "cpu");
    snprintf(r->note, sizeof r->note, "%s", cols(&t, i, "note"));
    if (!peer) {
      double h = colf(&t, i, "link_h2d_gbs"), d = colf(&t, i, "link_d2h_gbs"),
             b = colf(&t, i, "link_bidir_gbs");
      if (!isnan(h))
        A->link_h2d = h, A->link_d2h = d, A->link_bidir = b;
    }
    A->n++;
  }
}

/* 100M, 256K, 1.5G */
static const char *fmt_n(char *b, size_t n, double x) {
  if (isnan(x))
    snprintf(b, n, "–");
  else if (x >= 1e9)
    snprintf(b, n, "%gG", x / 1e9);
  else if (x >= 1e6)
    snprintf(b, n, "%gM", x / 1e6);
  else if (x >= 1e3)
    snprintf(b, n, "%gK", x / 1e3);
  else
    snprintf(b, n, "%g", x);
  return b;
}

static const char *fmt_s(char *b, size_t n, double ms) {
  return pl_rep_fmt(b, n, "%.3f", ms / 1e3, "–");
}

/* One row of the host-memory table: bytes a parameter, the roofline, the
 * step (and the update alone) as a share of it. */
static void roof_row(FILE *f, const char *label, const arow *r, double P,
                     double mem) {
  char b1[32], b2[32], b3[32], b4[32] = "–";
  double roof = P * r->bpp / (mem * 1e9) * 1e3;
  if (!isnan(r->update_ms))
    snprintf(b4, sizeof b4, "%.0f%%", 100.0 * roof / r->update_ms);
  fprintf(f, "| %s | %.0f | %s | %s | %.0f%% | %s | %s |\n", label, r->bpp,
          fmt_s(b1, 32, roof), fmt_s(b2, 32, r->step_ms),
          100.0 * roof / r->step_ms, fmt_s(b3, 32, r->update_ms), b4);
}

/* Each variant's host-memory bytes a parameter (counted from the
 * algorithm) and its share of the host-memory roofline (those bytes over
 * the copy rate the run measured), the torch peer beside them. */
static void roofline_table(FILE *f, const arow *cpu, const arow *cfull,
                           const arow *upd, const arow *sbest,
                           const arow *hbest, double peer_ms, double P) {
  const arow *any = upd ? upd : cpu ? cpu : cfull ? cfull : sbest;
  if (!any || isnan(any->bpp) || isnan(any->mem_gbs))
    return;
  const double mem = any->mem_gbs;
  fprintf(
      f,
      "## Host memory: bytes a parameter and the roofline\n\n"
      "Host memory copy rate measured in the same run: %.1f GB/s (read + "
      "write, all threads of a rank).  Roofline = host-memory bytes a "
      "parameter × params / that rate; a cached ring's slots are counted as "
      "cached (a share above 100%% means they were, or that the copy rate "
      "is not the host's ceiling).\n\n"
      "| system | B/param | roofline (s) | step (s) | %% of roofline | "
      "update alone (s) | update %% of roofline |\n"
      "|---|---|---|---|---|---|---|\n",
      mem);
  if (upd)
    roof_row(f, "ours: SIMD update alone (update)", upd, P, mem);
  if (cpu)
    roof_row(f,
             cpu->slots > 0 ? "ours: classic step, ring staging (cpu)"
                            : "ours: classic step, full staging (cpu)",
             cpu, P, mem);
  if (cfull)
    roof_row(f, "ours: classic step, full staging (cpu)", cfull, P, mem);
  if (sbest)
    roof_row(f, "ours: OffloadStreamAdamW, best (stream)", sbest, P, mem);
  if (hbest)
    roof_row(f, "ours: hybrid, best", hbest, P, mem);
  if (!isnan(peer_ms)) {
    /* fp32 p, g, m, v read, p, m, v written */
    arow t = {.bpp = 28, .step_ms = peer_ms, .update_ms = peer_ms};
    roof_row(f, "peer: torch fused CPU AdamW, opt.step()", &t, P, mem);
  }
  fprintf(f, "\n");
}

/* The rows the report names, at the largest parameter count P: the CPU
 * baseline (cpu: ring staging when run; cfull: full staging), the update
 * alone, the stream at β = 100M, s = 2 and at its best, the hybrid at its
 * best and with everything on the CPU, and the peer's processes. */
typedef struct picks {
  arow *cpu, *s100, *sbest, *hbest, *hcpu, *cfull, *upd;
  double peer_gps, peer_ms;
  int npeer;
  const char *peer_check;
} picks;

static void pick_rows(acc *A, double P, picks *k) {
  memset(k, 0, sizeof *k);
  k->peer_check = "-";
  for (int i = 0; i < A->n; i++) {
    arow *r = &A->r[i];
    if (r->mode == 3) {
      if (r->params == P || P == 0) {
        k->peer_gps += r->gps;
        if (r->step_ms > k->peer_ms)
          k->peer_ms = r->step_ms;
        k->npeer++;
        k->peer_check = r->check;
      }
      continue;
    }
    if (r->params != P)
      continue;
    /* cpu: the default staging (a ring) when run, the full copies apart */
    if (r->mode == 0 && r->slots == 0)
      k->cfull = r;
    else if (r->mode == 0)
      k->cpu = r;
    if (r->mode == 4)
      k->upd = r;
    if (r->mode == 1) {
      if (r->bucket == 100e6 && r->slots == 2)
        k->s100 = r;
      if (!k->sbest || r->step_ms < k->sbest->step_ms)
        k->sbest = r;
    }
    if (r->mode == 2 && r->share_given == 1.0 &&
        (!k->hcpu || r->step_ms < k->hcpu->step_ms))
      k->hcpu = r;
    else if (r->mode == 2 && (!k->hbest || r->step_ms < k->hbest->step_ms))
      k->hbest = r;
  }
  if (!k->cpu)
    k->cpu = k->cfull, k->cfull = NULL;
}

/* Table 4's layout: the optimizer step of each picked row against the CPU
 * baseline and the floor, the paper's printed rows above. */
static void write_t4(FILE *f, const acc *A, const picks *k, double P,
                     double floor_ms) {
  char b1[32], b2[32], b3[32];
  fprintf(f, "## Table 4 layout: the optimizer step\n\n");
  fprintf(f, "| system | β | s | step (s) | p10–p90 (s) | vs CPU baseline | "
             "Gparam/s per GPU | %% of floor | staging GiB | check |\n");
  fprintf(f, "|---|---|---|---|---|---|---|---|---|---|\n");
  /* paper rows: printed values (arXiv 2609.14306, Table 4) */
  fprintf(f,
          "| paper: ZeRO-Offload AVX CPU Adam | – | – | %.2f | – | 1.00× | "
          "%.2f | – | – | – |\n",
          PAPER_CPU_S, PAPER_PARAMS / PAPER_CPU_S / 1e9);
  fprintf(f,
          "| paper: OffloadStreamAdamW | 100M | 2 | %.2f | – | %.2f× | "
          "%.2f | – | %.2f | – |\n",
          PAPER_STREAM_S, PAPER_SPEEDUP, PAPER_PARAMS / PAPER_STREAM_S / 1e9,
          PAPER_STAGING_GIB);
  double base = k->cpu ? k->cpu->step_ms : NAN;
  arow *show[7] = {k->cpu,  k->cfull, k->upd,
                   k->hcpu, k->s100,  k->sbest != k->s100 ? k->sbest : NULL,
                   k->hbest};
  const char *label[7] = {
      k->cpu && k->cpu->slots > 0
          ? "ours: SIMD CPU AdamW, classic offloaded step, "
            "ring staging (cpu)"
          : "ours: SIMD CPU AdamW, classic offloaded step (cpu)",
      "ours: SIMD CPU AdamW, classic offloaded step, full staging (cpu)",
      "ours: SIMD CPU AdamW, the update alone, no copies (update)",
      "ours: SIMD CPU AdamW, pipelined offload (hybrid",
      "ours: OffloadStreamAdamW (stream)",
      "ours: OffloadStreamAdamW, best β×s (stream)",
      "ours: hybrid stream + SIMD CPU (hybrid"};
  for (int k = 0; k < 7; k++) {
    arow *r = show[k];
    if (!r)
      continue;
    char bb[32] = "–", ss[32] = "–", st[32] = "–";
    if (r->mode != 4) { /* cpu: its piece and its ring's slots (full: –) */
      fmt_n(bb, sizeof bb, r->bucket);
      if (r->mode != 0 || r->slots > 0)
        snprintf(ss, sizeof ss, "%.0f", r->slots);
      if (!isnan(r->staging))
        snprintf(st, sizeof st, "%.2f", r->staging / 1073741824.0);
    }
    fprintf(f,
            "| %s%s%s%s | %s | %s | %s | %s–%s | %.2f× | %.2f | %.0f%% | %s | "
            "%s |\n",
            label[k], r->mode == 2 ? ", share " : "",
            r->mode == 2 ? r->share : "", r->mode == 2 ? ")" : "", bb, ss,
            fmt_s(b1, 32, r->step_ms), fmt_s(b2, 32, r->p10),
            fmt_s(b3, 32, r->p90), base / r->step_ms, r->gps, r->pct, st,
            r->check);
  }
  if (k->npeer)
    fprintf(f,
            "| peer: torch fused CPU AdamW, opt.step() only (%d procs at "
            "once) | – | – | %s | – | %.2f× | %.2f | %.0f%% | – | %s |\n",
            k->npeer, fmt_s(b1, 32, k->peer_ms), base / k->peer_ms,
            k->peer_gps / k->npeer, 100.0 * floor_ms / k->peer_ms,
            k->peer_check);
  fprintf(f, "\nStaging bound s·β·16 bytes: ");
  for (int i = 0; i < A->n; i++)
    if (A->r[i].mode == 1 && A->r[i].params == P && !isnan(A->r[i].bound) &&
        A->r[i].staging > A->r[i].bound)
      fprintf(f, "EXCEEDED at β=%.0f s=%.0f; ", A->r[i].bucket, A->r[i].slots);
  fprintf(f, "tracked staging peak ≤ bound on every stream row unless "
             "listed.\n\n");
}

/* The streamed step time over bucket β and slots s (Table 14), sorted. */
typedef struct sweep {
  double betas[16], slots[16], grid[16][16];
  int nb, ns;
} sweep;

static void build_grid(const acc *A, double P, sweep *g) {
  g->nb = 0, g->ns = 0;
  for (int i = 0; i < A->n; i++) {
    const arow *r = &A->r[i];
    if (r->mode != 1 || r->params != P)
      continue;
    int fb = 0, fs = 0;
    for (int j = 0; j < g->nb; j++)
      fb |= g->betas[j] == r->bucket;
    for (int j = 0; j < g->ns; j++)
      fs |= g->slots[j] == r->slots;
    if (!fb && g->nb < 16)
      g->betas[g->nb++] = r->bucket;
    if (!fs && g->ns < 16)
      g->slots[g->ns++] = r->slots;
  }
  for (int i = 0; i < g->nb; i++) /* sort */
    for (int j = i + 1; j < g->nb; j++)
      if (g->betas[j] < g->betas[i]) {
        double x = g->betas[i];
        g->betas[i] = g->betas[j];
        g->betas[j] = x;
      }
  for (int i = 0; i < g->ns; i++)
    for (int j = i + 1; j < g->ns; j++)
      if (g->slots[j] < g->slots[i]) {
        double x = g->slots[i];
        g->slots[i] = g->slots[j];
        g->slots[j] = x;
      }
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++)
      g->grid[i][j] = NAN;
  for (int i = 0; i < A->n; i++) {
    const arow *r = &A->r[i];
    if (r->mode != 1 || r->params != P)
      continue;
    for (int bi = 0; bi < g->nb; bi++)
      for (int si = 0; si < g->ns; si++)
        if (g->betas[bi] == r->bucket && g->slots[si] == r->slots)
          g->grid[bi][si] = r->step_ms;
  }
}

static void write_t14(FILE *f, const sweep *g, double floor_ms) {
  char b1[32], b2[32];
  /* the paper's printed cells (Tables 4 and 14): β = 100M at s = 2,
   * 1.93 s with 4.23 GiB of staging, and s = 5 no faster than s = 2 */
  fprintf(f, "## Table 14 layout: streamed step time (s) over bucket β and "
             "slots s\n\nOurs in each cell, the paper's printed value beside "
             "it where it prints one.\n\n| β \\ s |");
  for (int si = 0; si < g->ns; si++)
    fprintf(f, " s=%.0f |", g->slots[si]);
  fprintf(f, "\n|---|");
  for (int si = 0; si < g->ns; si++)
    fprintf(f, "---|");
  fprintf(f, "\n");
  for (int bi = 0; bi < g->nb; bi++) {
    fprintf(f, "| %s |", fmt_n(b2, 32, g->betas[bi]));
    for (int si = 0; si < g->ns; si++) {
      const char *paper = "";
      if (g->betas[bi] == 100e6 && g->slots[si] == 2)
        paper = " (paper 1.93)";
      else if (g->betas[bi] == 100e6 && g->slots[si] == 5)
        paper = " (paper: no faster than s=2)";
      fprintf(f, " %s%s |", fmt_s(b1, 32, g->grid[bi][si]), paper);
    }
    fprintf(f, "\n");
  }
  fprintf(f,
          "\nThe paper prints, for 2.625 B parameters per rank on 8 "
          "ranks per node: the streamed step at β = 100M, s = 2 in 1.93 s "
          "with 4.23 GiB of staging, against 3.95 s for ZeRO-Offload's "
          "CPU Adam (2.05×), and that going from 2 to 5 slots is no "
          "faster (the step is transfer-bound).  Floor (Eq. 5) in this "
          "run: %.3f s.\n\n",
          floor_ms / 1e3);
}

/* The targets (doc/performance/README.md), met or not: GPU targets, so a
 * CPU-backend run is shown its figures and not judged. */
static void write_targets(FILE *f, const picks *k) {
  char b1[32], b2[32];
  const bool cpu = (k->cpu && k->cpu->on_cpu) || (k->sbest && k->sbest->on_cpu);
  fprintf(f, "## Targets\n\n");
  if (cpu) {
    fprintf(f, "GPU targets (stream ≥ 75%% of the host-link floor, ≥ 2.05× "
               "the SIMD CPU baseline; hybrid ≥ 1.2× stream; the update ≤ "
               "torch fused CPU AdamW): not judged on CPU backend rows.\n");
    if (k->sbest && k->cpu)
      fprintf(f,
              "\nFigures of this run: stream %.0f%% of the floor, %.2f× "
              "the SIMD CPU baseline.\n",
              k->sbest->pct, k->cpu->step_ms / k->sbest->step_ms);
    fprintf(f, "\nCPU backend run: times are CPU times and the \"link\" is "
               "memcpy between arenas; memory figures are exact.\n");
    return;
  }
  if (k->sbest)
    fprintf(f, "- stream ≥ 75%% of the host-link floor: %.0f%% → %s\n",
            k->sbest->pct, k->sbest->pct >= 75 ? "met" : "NOT met");
  if (k->sbest && k->cpu)
    fprintf(f, "- stream ≥ 2.05× the SIMD CPU baseline: %.2f× → %s\n",
            k->cpu->step_ms / k->sbest->step_ms,
            k->cpu->step_ms / k->sbest->step_ms >= 2.05 ? "met" : "NOT met");
  if (k->hbest && k->sbest)
    fprintf(f, "- hybrid ≥ 1.2× stream: %.2f× → %s\n",
            k->sbest->step_ms / k->hbest->step_ms,
            k->sbest->step_ms / k->hbest->step_ms >= 1.2 ? "met" : "NOT met");
  double upd_ms = k->upd ? k->upd->step_ms : NAN;
  if (k->npeer && k->upd)
    fprintf(f, "- SIMD update ≤ torch fused CPU AdamW: %s vs %s s → %s\n",
            fmt_s(b1, 32, upd_ms), fmt_s(b2, 32, k->peer_ms),
            upd_ms <= k->peer_ms ? "met" : "NOT met");
  if (k->npeer && k->cpu && !isnan(k->cpu->update_ms))
    fprintf(f, "- the classic step's update ≤ torch's step: %s vs %s s → %s\n",
            fmt_s(b1, 32, k->cpu->update_ms), fmt_s(b2, 32, k->peer_ms),
            k->cpu->update_ms <= k->peer_ms ? "met" : "NOT met");
  if (k->npeer && k->hbest)
    fprintf(f, "- hybrid ≥ 1.0× torch fused CPU AdamW: %.2f× → %s\n",
            k->peer_ms / k->hbest->step_ms,
            k->peer_ms / k->hbest->step_ms >= 1.0 ? "met" : "NOT met");
}

/* adam_sweep.csv and its chart (adam_sweep.gp). */
static pl_status write_sweep_chart(pl_report_ctx *rc, const sweep *g,
                                   double floor_ms) {
  char path[4096];
  FILE *f = pl_rep_open(rc, "adam_sweep.csv", path, sizeof path);
  if (!f)
    return PL_EIO;
  fprintf(f, "bucket_m");
  for (int si = 0; si < g->ns; si++)
    fprintf(f, ",s=%.0f", g->slots[si]);
  fprintf(f, ",floor\n");
  for (int bi = 0; bi < g->nb; bi++) {
    fprintf(f, "%g", g->betas[bi] / 1e6);
    for (int si = 0; si < g->ns; si++) {
      if (isnan(g->grid[bi][si]))
        fprintf(f, ",");
      else
        fprintf(f, ",%.6g", g->grid[bi][si] / 1e3);
    }
    fprintf(f, ",%.6g\n", floor_ms / 1e3);
  }
  PL_TRY(pl_rep_close(f, path));
  char stem[4096];
  snprintf(stem, sizeof stem, "%s/adam_sweep", rc->out_dir);
  static const char *const panels[] = {"*", NULL};
  if (!pl_rep_chart_shows(path, stem, "+bucket_m", panels))
    return PL_OK;
  return pl_rep_chart(rc, "adam_sweep.gp", path, stem, NULL, 0);
}

pl_status pl_report_adam(pl_report_ctx *rc, pl_table *const *t, int nt) {
  acc *A = calloc(1, sizeof *A);
  if (!A)
    return pl_set_error(PL_ENOMEM, "report adam: accumulator");
  for (int i = 0; i < nt; i++)
    take(A, t[i], strcmp(t[i]->bench, "adam") != 0);
  if (A->n == 0) { /* every row failed (oom, error): still a report */
    free(A);
    return pl_rep_no_rows(
        rc, "adam.md",
        "Optimizer step — OffloadStreamAdamW (paper Tables 4 and 14)", t, nt,
        "no ok adam row (report/points.md lists each row that is not ok)");
  }
  double P = 0;
  for (int i = 0; i < A->n; i++)
    if (A->r[i].mode != 3 && A->r[i].params > P)
      P = A->r[i].params;
  /* pick: cpu (last), stream at (100M, 2) and best, hybrid best, peer */
  picks k;
  pick_rows(A, P, &k);
  char path[4096];
  FILE *f = pl_rep_open(rc, "adam.md", path, sizeof path);
  if (!f) {
    free(A);
    return PL_EIO;
  }
  double ranks = k.cpu ? k.cpu->ranks : k.sbest ? k.sbest->ranks : NAN;
  double floor_ms = k.sbest ? k.sbest->floor_ms : k.cpu ? k.cpu->floor_ms : NAN;
  char b1[32];
  fprintf(f,
          "# Optimizer step — OffloadStreamAdamW (paper Tables 4 and 14)\n\n");
  fprintf(f,
          "%s params per rank, %.0f ranks sharing one host (the paper: "
          "2.625 G per rank, 8 ranks per node).  Host link measured in the "
          "same run, per rank with all ranks copying at once: H2D %.1f GB/s, "
          "D2H %.1f GB/s, both %.1f GB/s.  Host-link floor of the streamed "
          "update (Eq. 5, 12 bytes/param each way, full duplex): %.3f s "
          "= %.2f Gparam/s per GPU.\n\n",
          fmt_n(b1, 32, P), ranks, A->link_h2d, A->link_d2h, A->link_bidir,
          floor_ms / 1e3, P / (floor_ms * 1e-3) / 1e9);
  write_t4(f, A, &k, P, floor_ms);
  /* Table 14 layout: β × s */
  sweep *g = calloc(1, sizeof *g);
  if (!g) {
    fclose(f);
    free(A);
    return pl_set_error(PL_ENOMEM, "report adam: sweep");
  }
  build_grid(A, P, g);
  if (g->nb)
    write_t14(f, g, floor_ms);
  roofline_table(f, k.cpu, k.cfull, k.upd, k.sbest, k.hbest,
                 k.npeer ? k.peer_ms : NAN, P);
  write_targets(f, &k);
  if (k.sbest && k.cpu) { /* the summary's claim: the paper's Table 4 */
    char x[200], a[32], b[32];
    const double sp = k.cpu->step_ms / k.sbest->step_ms;
    snprintf(x, sizeof x, "%.2f× (%s vs %s s%s, %s params/rank)", sp,
             fmt_s(a, 32, k.cpu->step_ms), fmt_s(b, 32, k.sbest->step_ms),
             k.sbest->on_cpu ? ", CPU times" : "", fmt_n(b1, 32, P));
    pl_rep_claim(rc, "adam", sp, x, k.sbest->t, "measured per rank");
  }
  pl_status st = pl_rep_close(f, path);
  if (st == PL_OK && g->nb) /* chart data */
    st = write_sweep_chart(rc, g, floor_ms);
  free(g);
  free(A);
  return st;
}
