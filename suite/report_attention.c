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
 * (doc/performance/README.md) are printed as constants beside this run's peer rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_util.h"
#include "results.h"

#define MAXS 64

typedef struct pt {
  long long seq;
  double v[6]; /* ours fwd, ours fwdbwd, flash fwd, flash fwdbwd, cudnn fwd, cudnn fwdbwd */
  double au[2]; /* ours fwd, fwdbwd over the AUTO rows only (no kernel chosen by hand) */
  char kern[2][112]; /* the kernels of our best fwd and fwd+bwd rows */
} pt;

static pt *find_pt(pt *pts, int *n, long long seq) {
  for (int i = 0; i < *n; i++)
    if (pts[i].seq == seq) return &pts[i];
  if (*n >= MAXS) return NULL;
  pt *p = &pts[(*n)++];
  p->seq = seq;
  for (int j = 0; j < 6; j++) p->v[j] = NAN;
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
    if (!strncmp(t->meta_keys[i], "env.PLATEAU_ATTN_", 17)) return 0;
  return 1;
}

/* our rows: single-rank (ranks == 1 or absent), status ok; keep the best
 * (over the run's files: AUTO and any variant runs), with its kernels, and
 * the best AUTO row apart */
static void read_ours(const pl_table *t, pt *pts, int *n) {
  const int af = auto_file(t);
  if (!pl_has_col(t, "seq") || !pl_has_col(t, "pass") || !pl_has_col(t, "tflops")) return;
  for (int i = 0; i < t->nrows; i++) {
    const char *ranks = pl_cell(t, i, "ranks");
    if (strcmp(pl_cell(t, i, "status"), "ok") || (pl_has_col(t, "ranks") && strcmp(ranks, "1"))) continue;
    pt *p = find_pt(pts, n, atoll(pl_cell(t, i, "seq")));
    if (!p) continue;
    const int j = strcmp(pl_cell(t, i, "pass"), "fwd") ? 1 : 0;
    const double v = atof(pl_cell(t, i, "tflops"));
    const char *variant = pl_cell(t, i, "variant");
    const int auto_row = !strcmp(variant, "-") || !strcmp(variant, "auto") || !strcmp(variant, "auto/auto");
    if (af && auto_row && (isnan(p->au[j]) || v > p->au[j]))
      p->au[j] = v;
    if (isnan(p->v[j]) || v > p->v[j]) {
      p->v[j] = v;
      /* the kernel column: "fwd" or "fwd+bwd", shown "fwd + bwd" */
      const char *k = pl_cell(t, i, "kernel"), *plus = strchr(k, '+');
      if (plus)
        snprintf(p->kern[j], sizeof p->kern[j], "%.*s + %s", (int)(plus - k), k, plus + 1);
      else
        snprintf(p->kern[j], sizeof p->kern[j], "%s", k);
    }
  }
}

/* the peer's rows (analysis/peers/torch_sdpa.py): the best of flash and
 * cuDNN per S and pass, status ok */
static void read_peer(const pl_table *t, pt *pts, int *n) {
  for (int r = 0; r < t->nrows; r++) {
    if (strcmp(pl_cell(t, r, "status"), "ok")) continue;
    const char *be = pl_cell(t, r, "variant");
    const int base = !strcmp(be, "flash") ? 2 : (!strcmp(be, "cudnn") ? 4 : -1);
    if (base < 0 || !pl_has_col(t, "seq") || !pl_has_col(t, "pass") || !pl_has_col(t, "tflops")) continue;
    pt *p = find_pt(pts, n, atoll(pl_cell(t, r, "seq")));
    if (!p) continue;
    p->v[base + (strcmp(pl_cell(t, r, "pass"), "fwd") ? 1 : 0)] = atof(pl_cell(t, r, "tflops"));
  }
}

/* the best peer's fwd+bwd at point p (NAN without one) */
static double best_peer(const pt *p) {
  const double b = fmax(isnan(p->v[3]) ? -1 : p->v[3], isnan(p->v[5]) ? -1 : p->v[5]);
  return b > 0 ? b : NAN;
}

/* A target judged over the fastest rows (k 0) and the AUTO rows (k 1):
 * ratio 0, the lowest forward TFLOP/s at any S against `floor`; ratio 1,
 * the lowest fwd+bwd over the best peer's at 32K-128K (every S there with
 * both rows).  Prints "met" / "missed" with the lowest value and its S, or
 * "not measured". */
static void target_line(FILE *md, const char *what, const pt *pts, int n, int ratio,
                        double floor) {
  fprintf(md, "- %s:", what);
  for (int k = 0; k < 2; k++) {
    double lo = INFINITY;
    long long at = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
      const double v = ratio ? (k ? pts[i].au[1] : pts[i].v[1]) : (k ? pts[i].au[0] : pts[i].v[0]);
      const double x = ratio ? v / best_peer(&pts[i]) : v;
      if (isnan(x) || (ratio && (pts[i].seq < 32768 || pts[i].seq > 131072))) continue;
      m++;
      if (x < lo) lo = x, at = pts[i].seq;
    }
    fprintf(md, " %s", k ? "AUTO" : "fastest");
    if (!m)
      fprintf(md, " not measured%s",
              ratio ? " (no S in 32K–128K with our and a peer's fwd+bwd)" : "");
    else if (ratio)
      fprintf(md, " %s (lowest %.3f× at S = %lld, %d S)", lo >= floor ? "met" : "missed", lo, at, m);
    else
      fprintf(md, " %s (lowest %.1f at S = %lld)", lo >= floor ? "met" : "missed", lo, at);
    fprintf(md, "%s", k ? ".\n" : ";");
  }
}

pl_status pl_report_attention(pl_report_ctx *rc, pl_table *const *t, int nt) {
  pt pts[MAXS];
  int n = 0;
  const char *run_dir = rc->run_dir, *out_dir = rc->out_dir;
  char path[4096];
  for (int i = 0; i < nt; i++)
    if (!strcmp(t[i]->bench, "attention")) read_ours(t[i], pts, &n);
  for (int i = 0; i < nt; i++)
    if (strcmp(t[i]->bench, "attention")) read_peer(t[i], pts, &n);
  if (n == 0) {
    printf("report attention: no attention rows in %s\n", run_dir);
    return PL_OK;
  }
  qsort(pts, (size_t)n, sizeof pts[0], cmp_pt);

  snprintf(path, sizeof path, "%s/attention.md", out_dir);
  FILE *md = fopen(path, "w");
  if (!md) return pl_set_error(PL_EIO, "report attention: cannot write %s", path);
  fprintf(md, "# Causal GQA flash attention on one GPU (bf16, TFLOP/s)\n\n");
  fprintf(md, "FLOPs: fwd = 4·S²·d·n_q/2, bwd = 2.5·fwd (causal).  Run: `%s`.\n\n", run_dir);
  fprintf(md, "Ours: the fastest single-rank row per S and pass over the run's files (AUTO and any "
              "variant runs), with the kernels it ran.\n\n");
  fprintf(md, "| S | ours fwd | ours fwd+bwd | SDPA flash fwd | flash fwd+bwd | SDPA cuDNN fwd "
              "| cuDNN fwd+bwd | fwd+bwd vs best peer | our fwd kernel | our fwd+bwd kernels |\n");
  fprintf(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
  for (int i = 0; i < n; i++) {
    char c[6][32], ratio[32];
    for (int j = 0; j < 6; j++) pl_rep_fmt(c[j], sizeof c[j], "%.1f", pts[i].v[j], "–");
    const double best = best_peer(&pts[i]);
    if (!isnan(best) && !isnan(pts[i].v[1]))
      snprintf(ratio, sizeof ratio, "%.2f×", pts[i].v[1] / best);
    else
      snprintf(ratio, sizeof ratio, "–");
    fprintf(md, "| %lld | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", pts[i].seq, c[0], c[1],
            c[2], c[3], c[4], c[5], ratio, pts[i].kern[0][0] ? pts[i].kern[0] : "–",
            pts[i].kern[1][0] ? pts[i].kern[1] : "–");
  }
  /* the design's peer values: PyTorch 2.11 SDPA on an H200, 64 q / 8 kv
   * heads, d = 128, S = 16K…128K */
  fprintf(md, "\nPeer values of the design (doc/performance/README.md; PyTorch SDPA on an H200, 64 q / 8 kv heads, "
              "d = 128, S = 16K–128K): "
              "SDPA flash fwd ≈ 350, fwd+bwd ≈ 325; cuDNN fwd ≈ 550–655, fwd+bwd ≈ 540–555 TFLOP/s.\n");
  fprintf(md, "\nTargets, for the fastest rows and for the AUTO rows alone (no kernel chosen "
              "by hand):\n\n");
  target_line(md, "fwd ≥ 350 TFLOP/s at every S", pts, n, 0, 350);
  target_line(md, "fwd+bwd ≥ 0.8× the best peer at 32K–128K", pts, n, 1, 0.8);
  fclose(md);
  printf("%s\n", path);

  char dat[4096];
  snprintf(dat, sizeof dat, "%s/attention_tflops.dat", out_dir);
  FILE *f = fopen(dat, "w");
  if (!f) return pl_set_error(PL_EIO, "report attention: cannot write %s", dat);
  fprintf(f, "seq ours_fwd ours_fwdbwd flash_fwd flash_fwdbwd cudnn_fwd cudnn_fwdbwd\n");
  for (int i = 0; i < n; i++) {
    fprintf(f, "%lld", pts[i].seq);
    for (int j = 0; j < 6; j++) {
      if (isnan(pts[i].v[j]))
        fprintf(f, " nan");
      else
        fprintf(f, " %.3f", pts[i].v[j]);
    }
    fprintf(f, "\n");
  }
  fclose(f);
  printf("%s\n", dat);
  char stem[4096];
  snprintf(stem, sizeof stem, "%s/attention_tflops", out_dir);
  const char *extra[] = {"793"};
  return pl_rep_chart(rc, "attention.gp", dat, stem, extra, 1);
}
