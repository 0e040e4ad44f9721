/* report_attention.c — the report of `plateau bench attention` and of its
 * peer, PyTorch SDPA (analysis/peers/torch_sdpa.py, bench peer_torch_sdpa):
 * from their tables it writes
 *   out_dir/attention.md         ours vs SDPA flash / cuDNN per S (single rank)
 *   out_dir/attention_tflops.dat the chart's data
 *   out_dir/attention_tflops.{svg,png} via analysis/attention.gp (gnuplot)
 * printing the paths.  Targets: forward ≥ 350 TFLOP/s and
 * forward+backward ≥ 0.8× the best SDPA backend at 32K–128K, judged (met /
 * missed / not measured) twice: over the fastest rows (any variant) and over
 * the AUTO rows alone (files without a PLATEAU_ATTN_* variable, variant
 * auto), each with its lowest value and where; the design's peer values
 * (doc/performance/README.md) are printed as constants beside this run's peer
 * rows. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "report/report_util.h"
#include "results/results.h"

#define MAXS 64

typedef struct pt {
  long long seq;
  double v[6];  /* ours fwd, ours fwdbwd, flash fwd, flash fwdbwd, cudnn fwd,
                   cudnn fwdbwd */
  double au[2]; /* ours fwd, fwdbwd over the AUTO rows only (no kernel chosen by
                   hand) */
  char kern[2][112]; /* the kernels of our best fwd and fwd+bwd rows */
} pt;

static pt *find_pt(pt *pts, int *n, long long seq) {
  for (int i = 0; i < *n; i++)
    if (pts[i].seq == seq)
      return &pts[i];
  if (*n >= MAXS)
    return NULL;
  pt *p = &pts[(*n)++];
  p->seq = seq;
  for (int j = 0; j < 6; j++)
    p->v[j] = NAN;
  p->au[0] = p->au[1] = NAN;
  p->kern[0][0] = p->kern[1][0] = 0;
  return p;
}

static int cmp_pt(const void *a, const void *b) {
  long long x = ((const pt *)a)->seq, y = ((const pt *)b)->seq;
  return (x > y) - (x < y);
}

/* 1 if the file's runs chose no kernel by an environment variable (files
 * written before the kernels became options --fwd-kernel/--bwd-kernel: a
 * PLATEAU_ATTN_* variable in the metadata); per row, the variant "auto/auto"
 * (older files: "auto" or none) marks a row that chose no kernel by hand */
static int auto_file(const pl_table *t) {
  for (int i = 0; i < t->nmeta; i++)
    if (!strncmp(t->meta_keys[i], "env.PLATEAU_ATTN_", 17))
      return 0;
  return 1;
}

/* the ranks D of row i (1 when the file has no ranks column) */
static int row_ranks(const pl_table *t, int i) {
  const double d = pl_has_col(t, "ranks") ? pl_cell_num(t, i, "ranks") : 1;
  return !isfinite(d) || d < 1 || d > 1 << 20 ? 1 : (int)d;
}

/* row i ran the full mask (a file without the mask column ran causal rows) */
static bool row_full(const pl_table *t, int i) {
  return pl_has_col(t, "mask") && !strcmp(pl_cell(t, i, "mask"), "full");
}

/* row i is one the full-mask table shows: full mask, one rank, status ok,
 * a numeric S as the causal rows are checked for (pl_rep_keys_ok, which
 * says on stderr why a row is left out: warn, once per row) */
static bool full_row_ok(const pl_table *t, int i, bool warn) {
  static const char *const keys[] = {"seq", NULL};
  if (!row_full(t, i) || row_ranks(t, i) != 1 ||
      strcmp(pl_cell(t, i, "status"), "ok"))
    return false;
  return warn ? pl_rep_keys_ok("attention", t, i, keys)
              : isfinite(pl_cell_num(t, i, "seq"));
}

/* our causal rows on D ranks (ranks absent: 1), status ok; keep the best (over
 * the run's files: AUTO and any variant runs), with its kernels, and the best
 * AUTO row apart */
static void read_ours(const pl_table *t, int D, pt *pts, int *n) {
  const int af = auto_file(t);
  if (!pl_has_col(t, "seq") || !pl_has_col(t, "pass") ||
      !pl_has_col(t, "tflops"))
    return;
  static const char *const keys[] = {"seq", NULL};
  for (int i = 0; i < t->nrows; i++) {
    if (strcmp(pl_cell(t, i, "status"), "ok") || row_ranks(t, i) != D ||
        row_full(t, i))
      continue;
    if (!pl_rep_keys_ok("attention", t, i, keys))
      continue;
    pt *p = find_pt(pts, n, atoll(pl_cell(t, i, "seq")));
    if (!p)
      continue;
    const int j = strcmp(pl_cell(t, i, "pass"), "fwd") ? 1 : 0;
    const double v = atof(pl_cell(t, i, "tflops"));
    const char *variant = pl_cell(t, i, "variant");
    const int auto_row = !strcmp(variant, "-") || !strcmp(variant, "auto") ||
                         !strcmp(variant, "auto/auto");
    if (af && auto_row && (isnan(p->au[j]) || v > p->au[j]))
      p->au[j] = v;
    if (isnan(p->v[j]) || v > p->v[j]) {
      p->v[j] = v;
      /* the kernel column: "fwd" or "fwd+bwd", shown "fwd + bwd" */
      const char *k = pl_cell(t, i, "kernel"), *plus = strchr(k, '+');
      if (plus)
        snprintf(p->kern[j], sizeof p->kern[j], "%.*s + %s", (int)(plus - k), k,
                 plus + 1);
      else
        snprintf(p->kern[j], sizeof p->kern[j], "%s", k);
    }
  }
}

/* the peer's rows (analysis/peers/torch_sdpa.py): the best of flash and
 * cuDNN per S and pass, status ok */
static void read_peer(const pl_table *t, pt *pts, int *n) {
  for (int r = 0; r < t->nrows; r++) {
    if (strcmp(pl_cell(t, r, "status"), "ok"))
      continue;
    const char *be = pl_cell(t, r, "variant");
    const int base = !strcmp(be, "flash") ? 2 : (!strcmp(be, "cudnn") ? 4 : -1);
    static const char *const keys[] = {"seq", NULL};
    if (base < 0 || !pl_has_col(t, "seq") || !pl_has_col(t, "pass") ||
        !pl_has_col(t, "tflops"))
      continue;
    if (!pl_rep_keys_ok("attention", t, r, keys))
      continue;
    pt *p = find_pt(pts, n, atoll(pl_cell(t, r, "seq")));
    if (!p)
      continue;
    p->v[base + (strcmp(pl_cell(t, r, "pass"), "fwd") ? 1 : 0)] =
        atof(pl_cell(t, r, "tflops"));
  }
}

/* the best peer's fwd+bwd at point p (NAN without one) */
static double best_peer(const pt *p) {
  const double b =
      fmax(isnan(p->v[3]) ? -1 : p->v[3], isnan(p->v[5]) ? -1 : p->v[5]);
  return b > 0 ? b : NAN;
}

/* A target judged over the fastest rows (k 0) and the AUTO rows (k 1):
 * ratio 0, the lowest forward TFLOP/s at any S against `floor`; ratio 1,
 * the lowest fwd+bwd over the best peer's at 32K-128K (every S there with
 * both rows).  Prints "met" / "missed" with the lowest value and its S, or
 * "not measured". */
static void target_line(FILE *md, const char *what, const pt *pts, int n,
                        int ratio, double floor) {
  fprintf(md, "- %s:", what);
  for (int k = 0; k < 2; k++) {
    double lo = INFINITY;
    long long at = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
      const double v = ratio ? (k ? pts[i].au[1] : pts[i].v[1])
                             : (k ? pts[i].au[0] : pts[i].v[0]);
      const double x = ratio ? v / best_peer(&pts[i]) : v;
      if (isnan(x) || (ratio && (pts[i].seq < 32768 || pts[i].seq > 131072)))
        continue;
      m++;
      if (x < lo)
        lo = x, at = pts[i].seq;
    }
    fprintf(md, " %s", k ? "AUTO" : "fastest");
    if (!m)
      fprintf(md, " not measured%s",
              ratio ? " (no S in 32K–128K with our and a peer's fwd+bwd)" : "");
    else if (ratio)
      fprintf(md, " %s (lowest %.3f× at S = %lld, %d S)",
              lo >= floor ? "met" : "missed", lo, at, m);
    else
      fprintf(md, " %s (lowest %.1f at S = %lld)",
              lo >= floor ? "met" : "missed", lo, at);
    fprintf(md, "%s", k ? ".\n" : ";");
  }
}

/* The Ulysses table of D ranks: per S and pass, TFLOP/s per GPU, the
 * all-to-all of Q alone and the kernels (every ok row). */
static void ulysses_table(FILE *md, pl_table *const *t, int nt, int D) {
  fprintf(
      md,
      "\n## Ulysses sequence parallelism, D = %d ranks\n\nEach rank holds "
      "S/D tokens and n_q/D heads between two all-to-alls; TFLOP/s per GPU "
      "(the rank's FLOPs over the slowest rank's time); the all-to-all of Q "
      "alone: its time and the bytes leaving a rank per second.\n\n"
      "| S | pass | ms | TFLOP/s per GPU | a2a ms | a2a GB/s | kernels | "
      "variant |\n"
      "|---:|---|---:|---:|---:|---:|---|---|\n",
      D);
  for (int i = 0; i < nt; i++) {
    if (strcmp(t[i]->bench, "attention") || !pl_has_col(t[i], "tflops"))
      continue;
    for (int r = 0; r < t[i]->nrows; r++) {
      if (row_ranks(t[i], r) != D || strcmp(pl_cell(t[i], r, "status"), "ok") ||
          row_full(t[i], r))
        continue;
      char ms[32], tf[32], am[32], ag[32];
      fprintf(md, "| %s | %s | %s | %s | %s | %s | ", pl_cell(t[i], r, "seq"),
              pl_cell(t[i], r, "pass"),
              pl_rep_q(ms, sizeof ms, pl_cell_num(t[i], r, "time_ms"), "–"),
              pl_rep_q(tf, sizeof tf, pl_cell_num(t[i], r, "tflops"), "–"),
              pl_rep_q(am, sizeof am, pl_cell_num(t[i], r, "a2a_ms"), "–"),
              pl_rep_q(ag, sizeof ag, pl_cell_num(t[i], r, "a2a_gbs"), "–"));
      pl_rep_md_text(md, pl_cell(t[i], r, "kernel"));
      fprintf(md, " | ");
      pl_rep_md_text(md, pl_cell(t[i], r, "variant"));
      fprintf(md, " |\n");
    }
  }
}

/* A full-mask row to show: its table, row, S and pass (0 fwd, 1 fwd+bwd). */
typedef struct full_row {
  const pl_table *t;
  int r, j;
  long long S;
} full_row;

static int full_row_cmp(const void *pa, const void *pb) {
  const full_row *a = pa, *b = pb;
  if (a->S != b->S)
    return a->S < b->S ? -1 : 1;
  return a->j - b->j;
}

/* The full mask's rows (--mask full), one rank, by S and pass: TFLOP/s
 * (every score counted) beside the causal row of the same S and pass (the
 * fastest, pts) and their ratio: how much faster ring attention's
 * off-diagonal blocks run than its causal ones. */
static void full_table(FILE *md, pl_table *const *t, int nt, const pt *pts,
                       int n) {
  int nr = 0;
  for (int i = 0; i < nt; i++)
    if (!strcmp(t[i]->bench, "attention"))
      nr += t[i]->nrows;
  full_row *rows = malloc((size_t)(nr > 0 ? nr : 1) * sizeof *rows);
  if (!rows)
    return;
  nr = 0;
  for (int i = 0; i < nt; i++) {
    if (strcmp(t[i]->bench, "attention") || !pl_has_col(t[i], "tflops") ||
        !pl_has_col(t[i], "seq") || !pl_has_col(t[i], "pass"))
      continue;
    for (int r = 0; r < t[i]->nrows; r++)
      if (full_row_ok(t[i], r, true))
        rows[nr++] =
            (full_row){t[i], r, strcmp(pl_cell(t[i], r, "pass"), "fwd") ? 1 : 0,
                       atoll(pl_cell(t[i], r, "seq"))};
  }
  qsort(rows, (size_t)nr, sizeof *rows, full_row_cmp); /* by S, then pass */
  if (nr)
    fprintf(md, "\n## The full mask (ring attention's off-diagonal blocks)\n\n"
                "FLOPs: fwd = 4·S²·d·n_q (every score), bwd = 2.5·fwd; the "
                "causal column is the causal table's fastest row of the same S "
                "and pass (– without one).\n\n"
                "| S | pass | full TFLOP/s | causal TFLOP/s | full / causal | "
                "kernels |\n|---:|---|---:|---:|---:|---|\n");
  for (int k = 0; k < nr; k++) {
    const full_row *x = &rows[k];
    const double v = pl_cell_num(x->t, x->r, "tflops");
    double cv = NAN;
    for (int p = 0; p < n; p++)
      if (pts[p].seq == x->S)
        cv = pts[p].v[x->j];
    char a[32], b[32], q[32];
    fprintf(
        md, "| %lld | %s | %s | %s | %s | ", x->S, pl_cell(x->t, x->r, "pass"),
        pl_rep_q(a, sizeof a, v, "–"), pl_rep_q(b, sizeof b, cv, "–"),
        isnan(cv) || !(cv > 0) ? "–"
                               : (snprintf(q, sizeof q, "%.3f×", v / cv), q));
    pl_rep_md_text(md, pl_cell(x->t, x->r, "kernel"));
    fprintf(md, " |\n");
  }
  free(rows);
}

/* The chart's data (attention_tflops.dat) and the chart: the columns with
 * a point, the bf16 GEMM ceiling on a GPU run only. */
static pl_status chart(pl_report_ctx *rc, const pt *pts, int n, int D0,
                       bool gpu) {
  char dat[4096];
  FILE *f = pl_rep_open(rc, "attention_tflops.dat", dat, sizeof dat);
  if (!f)
    return PL_EIO;
  fprintf(f, "seq ours_fwd ours_fwdbwd flash_fwd flash_fwdbwd cudnn_fwd "
             "cudnn_fwdbwd\n");
  for (int i = 0; i < n; i++) {
    fprintf(f, "%lld", pts[i].seq);
    for (int j = 0; j < 6; j++) {
      if (isnan(pts[i].v[j]))
        fprintf(f, " nan");
      else
        fprintf(f, " %.6g", pts[i].v[j]);
    }
    fprintf(f, "\n");
  }
  PL_TRY(pl_rep_close(f, dat));
  char stem[4096];
  snprintf(stem, sizeof stem, "%s/attention_tflops", rc->out_dir);
  char title[160], cols[160] = "";
  if (D0 == 1)
    snprintf(title, sizeof title,
             "Causal GQA attention, %s: TFLOP/s vs sequence length",
             gpu ? "bf16, one GPU" : "CPU backend (CPU times), one rank");
  else
    snprintf(title, sizeof title,
             "Causal GQA attention, %s, Ulysses D = %d: TFLOP/s per %s vs S",
             gpu ? "bf16" : "CPU backend (CPU times)", D0,
             gpu ? "GPU" : "rank");
  static const char *const names[6] = {"ours_fwd",  "ours_fwdbwd",
                                       "flash_fwd", "flash_fwdbwd",
                                       "cudnn_fwd", "cudnn_fwdbwd"};
  for (int j = 0; j < 6;
       j++) { /* the columns with a point: only those are drawn */
    bool any = false;
    for (int i = 0; i < n && !any; i++)
      any = !isnan(pts[i].v[j]);
    if (any)
      snprintf(cols + strlen(cols), sizeof cols - strlen(cols), "%s%s",
               cols[0] ? " " : "", names[j]);
  }
  /* the dashed bf16 GEMM ceiling is one H200's: on GPU runs only */
  const char *extra[] = {gpu ? "793" : "0", title, cols};
  static const char *const panels[] = {"*", NULL};
  if (!pl_rep_chart_shows(dat, stem, "+seq", panels))
    return PL_OK;
  return pl_rep_chart(rc, "attention.gp", dat, stem, extra, 3);
}

/* The rank counts D of the attention rows, ascending (at most 16). */
static int rank_counts(pl_table *const *t, int nt, int *Ds) {
  int nD = 0;
  for (int i = 0; i < nt; i++)
    if (!strcmp(t[i]->bench, "attention"))
      for (int r = 0; r < t[i]->nrows; r++) {
        const int d = row_ranks(t[i], r);
        int k = 0;
        while (k < nD && Ds[k] != d)
          k++;
        if (k == nD && nD < 16)
          Ds[nD++] = d;
      }
  for (int a = 0; a < nD; a++) /* ascending */
    for (int b = a + 1; b < nD; b++)
      if (Ds[b] < Ds[a]) {
        const int x = Ds[a];
        Ds[a] = Ds[b];
        Ds[b] = x;
      }
  return nD;
}

/* A run of the full mask alone: its table, nothing causal to set it by. */
static pl_status full_only(pl_report_ctx *rc, pl_table *const *t, int nt,
                           const char *where) {
  char path[4096];
  FILE *md = pl_rep_open(rc, "attention.md", path, sizeof path);
  if (!md)
    return PL_EIO;
  fprintf(md,
          "# GQA flash attention with the full mask on one %s\n\nRun: "
          "`%s`.\n",
          where, rc->run_dir);
  full_table(md, t, nt, NULL, 0);
  return pl_rep_close(md, path);
}

pl_status pl_report_attention(pl_report_ctx *rc, pl_table *const *t, int nt) {
  pt pts[MAXS];
  int n = 0;
  const char *run_dir = rc->run_dir;
  char path[4096];
  /* the rank counts of our rows: D = 1 is the single-GPU table (with the
   * peer); each D > 1 a Ulysses table.  Without single-rank rows the first
   * table and the chart are the smallest D's, and say so. */
  int Ds[16];
  const int nD = rank_counts(t, nt, Ds);
  const int D0 = nD ? Ds[0] : 1;
  /* a GPU run has GPU figures (bf16, the ceiling, the targets); the CPU
   * backend's are CPU times (f32 math) */
  bool gpu = false;
  for (int i = 0; i < nt; i++)
    if (!strcmp(t[i]->bench, "attention") &&
        !strcmp(pl_rep_meta(t[i], "backend", ""), "cuda"))
      gpu = true;
  const char *where = gpu ? "GPU" : "rank of the CPU backend";
  for (int i = 0; i < nt; i++)
    if (!strcmp(t[i]->bench, "attention"))
      read_ours(t[i], D0, pts, &n);
  if (D0 == 1)
    for (int i = 0; i < nt; i++)
      if (strcmp(t[i]->bench, "attention"))
        read_peer(t[i], pts, &n);
  bool any_full = false; /* rows the full-mask table shows */
  for (int i = 0; i < nt; i++)
    for (int r = 0; !strcmp(t[i]->bench, "attention") && r < t[i]->nrows; r++)
      any_full |= full_row_ok(t[i], r, false);
  if (n == 0 && any_full) /* a run of the full mask alone */
    return full_only(rc, t, nt, where);
  if (n == 0) /* no ok row of ours (or of the peer's beside one D = 1 run) */
    return pl_rep_no_rows(rc, "attention.md", "Causal GQA flash attention", t,
                          nt,
                          "no ok attention row to show (report/points.md lists "
                          "each row that is not ok)");
  qsort(pts, (size_t)n, sizeof pts[0], cmp_pt);

  FILE *md = pl_rep_open(rc, "attention.md", path, sizeof path);
  if (!md)
    return PL_EIO;
  if (D0 == 1)
    fprintf(md, "# Causal GQA flash attention on one %s (%sTFLOP/s)\n\n", where,
            gpu ? "bf16, " : "");
  else
    fprintf(md,
            "# Causal GQA flash attention, Ulysses over D = %d ranks (TFLOP/s "
            "per %s)\n\n"
            "No single-rank rows in this run: the first table and the chart "
            "are the D = %d "
            "rows (per %s), without the single-GPU peer.\n\n",
            D0, gpu ? "GPU" : "rank", D0, gpu ? "GPU" : "rank");
  if (!gpu)
    fprintf(md, "> CPU backend rows: TFLOP/s of CPU times (the reference "
                "kernels), not GPU "
                "figures; the GPU targets below do not apply.\n\n");
  fprintf(md,
          "FLOPs: fwd = 4·S²·d·n_q/2, bwd = 2.5·fwd (causal).  Run: `%s`.\n\n",
          run_dir);
  fprintf(md,
          "Ours: the fastest %s row per S and pass over the run's files (AUTO "
          "and any "
          "variant runs), with the kernels it ran.\n\n",
          D0 == 1 ? "single-rank" : "D-rank");
  fprintf(md, "| S | ours fwd | ours fwd+bwd | SDPA flash fwd | flash fwd+bwd "
              "| SDPA cuDNN fwd "
              "| cuDNN fwd+bwd | fwd+bwd vs best peer | our fwd kernel | our "
              "fwd+bwd kernels |\n");
  fprintf(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
  for (int i = 0; i < n; i++) {
    char c[6][32], ratio[32];
    for (int j = 0; j < 6;
         j++) /* CPU rates are far below 1: significant digits */
      pl_rep_q(c[j], sizeof c[j], pts[i].v[j], "–");
    const double best = best_peer(&pts[i]);
    if (!isnan(best) && !isnan(pts[i].v[1]))
      snprintf(ratio, sizeof ratio, "%.2f×", pts[i].v[1] / best);
    else
      snprintf(ratio, sizeof ratio, "–");
    fprintf(md, "| %lld | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
            pts[i].seq, c[0], c[1], c[2], c[3], c[4], c[5], ratio,
            pts[i].kern[0][0] ? pts[i].kern[0] : "–",
            pts[i].kern[1][0] ? pts[i].kern[1] : "–");
  }
  /* the design's peer values: PyTorch 2.11 SDPA on an H200, 64 q / 8 kv
   * heads, d = 128, S = 16K…128K */
  fprintf(md, "\nPeer values of the design (doc/performance/README.md; PyTorch "
              "SDPA on an H200, 64 q / 8 kv heads, "
              "d = 128, S = 16K–128K): "
              "SDPA flash fwd ≈ 350, fwd+bwd ≈ 325; cuDNN fwd ≈ 550–655, "
              "fwd+bwd ≈ 540–555 TFLOP/s.\n");
  if (gpu) {
    fprintf(md, "\nTargets, for the fastest rows and for the AUTO rows alone "
                "(no kernel chosen "
                "by hand):\n\n");
    target_line(md, "fwd ≥ 350 TFLOP/s at every S", pts, n, 0, 350);
    target_line(md, "fwd+bwd ≥ 0.8× the best peer at 32K–128K", pts, n, 1, 0.8);
  } else {
    fprintf(md, "\nTargets (fwd ≥ 350 TFLOP/s; fwd+bwd ≥ 0.8× the best peer at "
                "32K–128K): "
                "GPU targets, not judged on CPU backend rows.\n");
  }
  if (D0 == 1)
    full_table(md, t, nt, pts, n);
  for (int k = 0; k < nD; k++)
    if (Ds[k] > 1)
      ulysses_table(md, t, nt, Ds[k]);
  PL_TRY(pl_rep_close(md, path));

  return chart(rc, pts, n, D0, gpu);
}
