/* report_dispatch.c — the report hook of `plateau bench dispatch`: the layouts
 * of the paper's Table 6 (LLEP vs PipelinedLLEP: time and peak per shape and
 * profile, speed-up and peak reduction) and Table 8 (strided vs contiguous
 * chunks: time, peak, max-send ratio), our numbers beside the paper's printed
 * ones, plus every row, and a chart of peak memory and time per variant and
 * profile (analysis/dispatch.gp, SVG + PNG).  A shape is (tokens, hidden,
 * experts, lanes, ranks): runs of different rank counts are different
 * shapes, each its own table rows and chart, named and titled by its ranks.
 * Memory is shown in the binary unit of the largest peak (GiB on GPUs, KiB
 * or MiB for the small CPU sizes).
 *
 * Paper numbers (Pandit et al., arXiv 2609.14306, Tables 6 and 8, as quoted
 * in DESIGN.md §1.1; 8xH200, E=128, Ep=8, bf16):
 *   65K/rank, H 7168, I 2048, top-8, c 6554 (K=10): LLEP 177.8 ms / 52.66 GiB
 *   -> PipelinedLLEP 161.0 ms / 21.43 GiB (1.10x, -59.3%); skewed profiles
 *   -56.9...-57.0% at 1.01-1.05x.  32K/rank, H=I=4096, top-4, K=3: -26.9% at
 *   1.07x.  Table 8: strided 1.03-1.35x faster than contiguous, up to 1.37 GiB
 *   less; max-send ratio strided 1.00 / 1.35 / 2.40 / 2.29, contiguous
 *   1.02-6.00. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/moe.h"
#include "plateau/status.h"
#include "report/report.h"
#include "report/report_util.h"
#include "results/results.h"

static const char *const profiles[] = {"balanced", "95/16", "80/16", "50/4"};
/* Table 8's rows: the profiles above, then the skewed ones at shuffled
 * positions (the same routes as LLEP's layout, every chunk a sample of
 * them), with the paper's strided max-send ratios (none for those: "-"). */
static const char *const t8_profiles[] = {"balanced", "95/16",  "80/16", "50/4",
                                          "95/16s",   "80/16s", "50/4s"};
static const char *const t8_paper_msr[] = {"1.00", "1.35", "2.40", "2.29",
                                           "-",    "-",    "-"};

typedef struct drow {
  const char *variant, *profile, *chunking, *tokens, *hidden, *ffn, *topk,
      *ranks, *K, *gemms, *em, *experts, *lanes, *stages, *cblocks;
  double time, fwd, peak, opeak, dpeak, bound, msr;
  const char *status, *check;
  const pl_table *t; /* the file it came from */
} drow;

/* A shape block of the tables: tokens, hidden, experts and the layer's
 * compute lanes ("-" in files without these columns). */
typedef struct dshape {
  const char *t, *h, *e, *l, *r; /* tokens, hidden, experts, lanes, ranks */
} dshape;

/* The last ok row of (shape, variant, profile, chunking). */
static const drow *find(const drow *r, int n, const dshape *sh,
                        const char *variant, const char *profile,
                        const char *chunking) {
  const drow *best = NULL;
  for (int i = 0; i < n; i++)
    if (strcmp(r[i].tokens, sh->t) == 0 && strcmp(r[i].hidden, sh->h) == 0 &&
        strcmp(r[i].experts, sh->e) == 0 && strcmp(r[i].lanes, sh->l) == 0 &&
        strcmp(r[i].ranks, sh->r) == 0 && strcmp(r[i].variant, variant) == 0 &&
        strcmp(r[i].profile, profile) == 0 &&
        (!chunking || strcmp(r[i].chunking, chunking) == 0) &&
        strcmp(r[i].status, "ok") == 0)
      best = &r[i];
  return best;
}

static const char *paper_t6(const dshape *sh, const char *profile) {
  const char *tokens = sh->t, *hidden = sh->h;
  if (strcmp(sh->e, "32") == 0 && strcmp(sh->t, "65536") == 0 &&
      strcmp(sh->h, "7168") == 0 && strcmp(sh->r, "2") == 0)
    /* 16 experts per rank on 2 ranks: the per-rank load of Ep = 8, E = 128 */
    return strcmp(profile, "balanced") == 0
               ? "Ep = 8 stand-in (16 experts/rank): paper 1.10x, -59.3%"
               : "Ep = 8 stand-in (16 experts/rank): paper 1.01-1.05x, "
                 "-56.9...-57.0%";
  if (strcmp(sh->e, "128") != 0)
    return "- (not a paper shape: E)";
  if (strcmp(tokens, "65536") == 0 && strcmp(hidden, "7168") == 0)
    return strcmp(profile, "balanced") == 0
               ? "177.8 ms / 52.66 GiB -> 161.0 ms / 21.43 GiB (1.10x, -59.3%)"
               : "-56.9...-57.0% at 1.01-1.05x";
  if (strcmp(tokens, "32768") == 0 && strcmp(hidden, "4096") == 0)
    return "-26.9% at 1.07x (K=3)";
  return "- (not a paper shape)";
}

/* Every row of the tables t[0..n) into r (nr of them); *cpu: a table of the
 * CPU backend among them. */
static int read_rows(pl_table *const *t, int n, drow *r, bool *cpu) {
  int nr = 0;
  for (int i = 0; i < n; i++) {
    const char *be = pl_table_meta(t[i], "backend");
    if (be && strcmp(be, "cpu") == 0)
      *cpu = true;
    for (int j = 0; j < t[i]->nrows; j++) {
      drow *d = &r[nr++];
      d->t = t[i];
      d->variant = pl_cell(t[i], j, "variant");
      d->profile = pl_cell(t[i], j, "profile");
      d->chunking = pl_cell(t[i], j, "chunking");
      d->tokens = pl_cell(t[i], j, "tokens");
      d->hidden = pl_cell(t[i], j, "hidden");
      d->ffn = pl_cell(t[i], j, "ffn");
      d->topk = pl_cell(t[i], j, "topk");
      d->ranks = pl_cell(t[i], j, "ranks");
      d->K = pl_cell(t[i], j, "K");
      d->gemms = pl_cell(t[i], j, "gemms");
      d->em = pl_cell(t[i], j, "em_chunks");
      d->experts = pl_cell(t[i], j, "experts");
      d->lanes = pl_cell(t[i], j, "lanes");
      d->stages = pl_cell(t[i], j, "stages");
      d->cblocks = pl_cell(t[i], j, "comm_blocks");
      d->time = pl_cell_num(t[i], j, "time_ms");
      d->fwd = pl_cell_num(t[i], j, "fwd_ms");
      d->peak = pl_cell_num(t[i], j, "dev_peak_bytes");
      d->opeak = pl_cell_num(t[i], j, "op_peak_bytes");
      d->dpeak = pl_cell_num(t[i], j, "dispatch_bytes");
      d->bound = pl_cell_num(t[i], j, "bound_bytes");
      d->msr = pl_cell_num(t[i], j, "max_send_ratio");
      d->status = pl_cell(t[i], j, "status");
      d->check = pl_cell(t[i], j, "check");
    }
  }
  return nr;
}

/* The distinct shapes (tokens, hidden, experts, lanes, ranks) of r, in order
 * of appearance, into sh (at most 32): their count. */
static int distinct_shapes(const drow *r, int nr, dshape sh[32]) {
  int nsh = 0;
  for (int i = 0; i < nr && nsh < 32; i++) {
    bool seen = false;
    for (int s = 0; s < nsh; s++)
      if (!strcmp(sh[s].t, r[i].tokens) && !strcmp(sh[s].h, r[i].hidden) &&
          !strcmp(sh[s].e, r[i].experts) && !strcmp(sh[s].l, r[i].lanes) &&
          !strcmp(sh[s].r, r[i].ranks))
        seen = true;
    if (!seen && strcmp(r[i].tokens, "-") != 0)
      sh[nsh++] = (dshape){r[i].tokens, r[i].hidden, r[i].experts, r[i].lanes,
                           r[i].ranks};
  }
  return nsh;
}

/* Table 6's layout: ep, LLEP and PipelinedLLEP (strided) per shape and
 * profile, with the paper's figure. */
static void write_t6(FILE *f, const drow *r, int nr, const dshape *sh, int nsh,
                     const char *unit) {
  fprintf(f, "## Table 6 layout: EP vs LLEP vs PipelinedLLEP (strided)\n\n"
             "Speed-up and peak change: PipelinedLLEP against LLEP (the "
             "paper's comparison); plain EP beside them.\n\n");
  fprintf(f,
          "| shape (N/rank, H, E, lanes) | ranks | profile | EP ms | EP %s | "
          "LLEP ms | LLEP %s | "
          "PLLEP ms | PLLEP %s | K | speed-up | peak change | op peak LLEP -> "
          "PLLEP (%s) | dispatch peak / bound (%s) | paper |\n|---|---|---|"
          "---|---|---|---|---|---|---|---|---|---|---|---|\n",
          unit, unit, unit, unit, unit);
  for (int s = 0; s < nsh; s++)
    for (int p = 0; p < 4; p++) {
      const drow *e = find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_EP),
                           profiles[p], NULL);
      const drow *a = find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_LLEP),
                           profiles[p], NULL);
      const drow *b = find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_PIPELINED),
                           profiles[p], "strided");
      if (!e && !a && !b)
        continue;
      fprintf(f, "| %s, %s, %s, %s | %s | %s | ", sh[s].t, sh[s].h, sh[s].e,
              sh[s].l, sh[s].r, profiles[p]);
      if (e)
        fprintf(f, "%.1f | %.3g | ", e->time, e->peak);
      else
        fprintf(f, "- | - | ");
      if (a)
        fprintf(f, "%.1f | %.3g | ", a->time, a->peak);
      else
        fprintf(f, "- | - | ");
      if (b)
        fprintf(f, "%.1f | %.3g | %s | ", b->time, b->peak, b->K);
      else
        fprintf(f, "- | - | - | ");
      if (a && b)
        fprintf(f, "%.2fx | %+.1f%% | %.3g -> %.3g (%+.1f%%) | %.3g / %.3g | ",
                a->time / b->time, 100.0 * (b->peak - a->peak) / a->peak,
                a->opeak, b->opeak, 100.0 * (b->opeak - a->opeak) / a->opeak,
                b->dpeak, b->bound);
      else
        fprintf(f, "- | - | - | - | ");
      fprintf(f, "%s |\n", paper_t6(&sh[s], profiles[p]));
    }
}

/* The summary's dispatch claim: PipelinedLLEP (strided) against LLEP on
 * the balanced profile, whole device peak and speed, at the paper's shape
 * (or its Ep = 8 stand-in on 2 ranks: 16 experts per rank), else the largest
 * shape run.  Ours / paper only at those shapes. */
static void give_claim(pl_report_ctx *rc, const drow *r, int nr,
                       const dshape *sh, int nsh) {
  const drow *a = NULL, *b = NULL;
  int rank = -1; /* 2: the paper's shape, 1: its stand-in, 0: another */
  double size = 0;
  for (int s = 0; s < nsh; s++) {
    const drow *x = find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_LLEP),
                         "balanced", NULL),
               *y = find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_PIPELINED),
                         "balanced", "strided");
    if (!x || !y)
      continue;
    const bool shape = !strcmp(sh[s].t, "65536") && !strcmp(sh[s].h, "7168");
    const int k = shape && !strcmp(sh[s].e, "128") ? 2
                  : shape && !strcmp(sh[s].e, "32") && !strcmp(sh[s].r, "2")
                      ? 1
                      : 0;
    const double z = atof(sh[s].t) * atof(sh[s].h);
    if (k > rank || (k == rank && z > size))
      a = x, b = y, rank = k, size = z;
  }
  if (!a)
    return;
  const double pc = 100 * (b->peak - a->peak) / a->peak;
  char t[200], bs[128];
  if (pl_rep_is_cpu(b->t))
    snprintf(t, sizeof t, "%+.1f%% peak (N/rank %s, H %s, E %s, %s ranks)", pc,
             b->tokens, b->hidden, b->experts, b->ranks);
  else
    snprintf(t, sizeof t,
             "%+.1f%% peak at %.2f× speed (N/rank %s, H %s, E %s, "
             "%s ranks)",
             pc, a->time / b->time, b->tokens, b->hidden, b->experts, b->ranks);
  snprintf(bs, sizeof bs, "%s",
           rank == 2   ? "measured per rank"
           : rank == 1 ? "measured per rank (Ep = 8 stand-in: 16 experts per "
                         "rank)"
                       : "measured per rank, not the paper's shape (no ratio)");
  pl_rep_claim(rc, "dispatch", rank > 0 ? pc : NAN, t, b->t, bs);
}

/* Table 8's layout: strided vs contiguous chunks of PipelinedLLEP. */
static void write_t8(FILE *f, const drow *r, int nr, const dshape *sh, int nsh,
                     const char *unit) {
  fprintf(f, "\n## Table 8 layout: strided vs contiguous chunks "
             "(PipelinedLLEP)\n\n");
  int n8 = 0; /* profiles run with both chunkings */
  for (int s = 0; s < nsh; s++)
    for (int p = 0; p < 7; p++)
      n8 += find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_PIPELINED),
                 t8_profiles[p], "strided") &&
            find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_PIPELINED),
                 t8_profiles[p], "contiguous");
  if (n8)
    fprintf(f,
            "| shape (N/rank, H, E, lanes) | ranks | profile | strided ms | "
            "contiguous ms | "
            "speed-up | strided %s | contiguous %s | max-send strided | "
            "max-send contiguous | paper max-send strided |\n|---|---|---|"
            "---|---|---|---|---|---|---|---|\n",
            unit, unit);
  else
    fprintf(f, "No rows: no profile ran PipelinedLLEP with both chunkings "
               "(`plateau bench dispatch --chunking strided,contiguous`, "
               "jobs/sweeps/table8-chunking.tsv).\n");
  for (int s = 0; s < nsh; s++)
    for (int p = 0; p < 7; p++) {
      const drow *a = find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_PIPELINED),
                           t8_profiles[p], "strided");
      const drow *b = find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_PIPELINED),
                           t8_profiles[p], "contiguous");
      if (!a || !b)
        continue;
      fprintf(
          f,
          "| %s, %s, %s, %s | %s | %s | %.1f | %.1f | %.2fx | %.3g | %.3g | "
          "%.2f | %.2f | %s |\n",
          sh[s].t, sh[s].h, sh[s].e, sh[s].l, sh[s].r, t8_profiles[p], a->time,
          b->time, b->time / a->time, a->peak, b->peak, a->msr, b->msr,
          t8_paper_msr[p]);
    }
  fprintf(f, "\nPaper (Table 8): strided 1.03-1.35x faster, up to 1.37 GiB "
             "less; contiguous max-send 1.02-6.00.  Max-send ratio here: max "
             "over (chunk, destination) of routes received / mean.  A profile "
             "with an s (95/16s) has the same routes as LLEP's layout at "
             "shuffled positions: in LLEP's layout the hot tokens come first, "
             "so most contiguous chunks route to the hot experts only and "
             "touch far fewer (expert, chunk) pairs, each a pass over that "
             "expert's weight gradient, than strided chunks, which see every "
             "expert; shuffled, both kinds of chunk see every expert, as with "
             "a router's output (doc/performance/moe.md).\n\n");
}

/* Every row, then (when a file has them) the compute stream's stages. */
static void write_all_rows(FILE *f, const drow *r, int nr, const char *unit) {
  fprintf(f, "## All rows\n\nGEMMs/chunk: expert GEMM launches of the "
             "busiest chunk, forward + backward with recompute (11 per group: "
             "one group per expert slot when the chunk is expert-major, one "
             "per (source, expert) segment otherwise); em chunks: chunks "
             "computed expert-major ('-': a file without these "
             "columns).\n\n");
  fprintf(f,
          "| variant | profile | chunking | lanes | N | H | I | E | k "
          "| ranks | K | ms | fwd ms | peak %s | dispatch %s | bound %s "
          "| max-send | GEMMs/chunk | em chunks | status | check |\n"
          "|---|---|---|---|---|---|---|---|---|---|"
          "---|---|---|---|---|---|---|---|---|---|---|\n",
          unit, unit, unit);
  for (int i = 0; i < nr; i++)
    fprintf(f,
            "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | "
            "%.2f | %.2f | %.3g | %.3g | %.3g | %.3g | %s | %s | %s | %s |\n",
            r[i].variant, r[i].profile, r[i].chunking, r[i].lanes, r[i].tokens,
            r[i].hidden, r[i].ffn, r[i].experts, r[i].topk, r[i].ranks, r[i].K,
            r[i].time, r[i].fwd, r[i].peak, r[i].dpeak, r[i].bound, r[i].msr,
            r[i].gemms, r[i].em, r[i].status, r[i].check);
  bool any_stages = false;
  for (int i = 0; i < nr; i++)
    if (strcmp(r[i].stages, "-") != 0)
      any_stages = true;
  if (any_stages) {
    fprintf(f, "\n## Where the compute stream's time goes\n\nRank 0's "
               "compute-stream time per stage of the last timed fwd+bwd, "
               "summed over chunks (ms; events between stages, ops/moe.h "
               "pl_moe_stage): waits for the dispatch, gate/up and down "
               "GEMMs, backward recompute, dact (dout·Wd^T and the SwiGLU "
               "backward), wgrad (the fp32 weight-gradient accumulation; with "
               "lanes only dWd, the lanes' dWg and dWu counted in dx), dx, and "
               "idle.  comm blocks: the grid cap of the pipelined comm "
               "stream's gathers and combines (0: none).\n\n| variant | "
               "profile | chunking | lanes | comm blocks | N | E | K | ms | "
               "stages |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nr; i++)
      if (strcmp(r[i].stages, "-") != 0)
        fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s |\n",
                r[i].variant, r[i].profile, r[i].chunking, r[i].lanes,
                r[i].cblocks, r[i].tokens, r[i].experts, r[i].K, r[i].time,
                r[i].stages);
  }
}

/* The chart data, one file per shape, and its chart (dispatch.gp). */
static pl_status write_charts(pl_report_ctx *rc, const drow *r, int nr,
                              const dshape *sh, int nsh, const char *unit) {
  for (int s = 0; s < nsh; s++) {
    char data[PATH_MAX + 64], stem[PATH_MAX + 64];
    /* file names: the paper's E and lanes 0 (or an old file's "-") keep
     * the plain name; others add them */
    char sfx[64] = "";
    if (strcmp(sh[s].e, "128") != 0 && strcmp(sh[s].e, "-") != 0)
      snprintf(sfx + strlen(sfx), sizeof sfx - strlen(sfx), "-e%s", sh[s].e);
    if (strcmp(sh[s].l, "0") != 0 && strcmp(sh[s].l, "-") != 0)
      snprintf(sfx + strlen(sfx), sizeof sfx - strlen(sfx), "-lanes%s",
               sh[s].l);
    snprintf(sfx + strlen(sfx), sizeof sfx - strlen(sfx), "-%sranks", sh[s].r);
    char name[192];
    snprintf(name, sizeof name, "dispatch-%s-%s%s.tsv", sh[s].t, sh[s].h, sfx);
    snprintf(stem, sizeof stem, "%s/dispatch-%s-%s%s", rc->out_dir, sh[s].t,
             sh[s].h, sfx);
    FILE *d = pl_rep_open(rc, name, data, sizeof data);
    if (!d)
      return PL_EIO;
    fprintf(d,
            "# dispatch N/rank=%s H=%s E=%s lanes=%s ranks=%s; peaks in "
            "%s; from plateau report %s\n"
            "profile\tep_dev_peak\tllep_dev_peak\tpllep_dev_peak\t"
            "ep_time_ms\tllep_time_ms\tpllep_time_ms\n",
            sh[s].t, sh[s].h, sh[s].e, sh[s].l, sh[s].r, unit, rc->run_dir);
    bool any[3] = {false, false, false};
    for (int p = 0; p < 4; p++) {
      const drow *v[3] = {find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_EP),
                               profiles[p], NULL),
                          find(r, nr, &sh[s], pl_moe_variant_name(PL_MOE_LLEP),
                               profiles[p], NULL),
                          find(r, nr, &sh[s],
                               pl_moe_variant_name(PL_MOE_PIPELINED),
                               profiles[p], "strided")};
      if (!v[0] && !v[1] && !v[2])
        continue;
      for (int q = 0; q < 3; q++)
        any[q] |= v[q] && !isnan(v[q]->peak) && !isnan(v[q]->time);
      fprintf(d, "%s", profiles[p]);
      for (int q = 0; q < 3; q++)
        fprintf(d, "\t%.6g", v[q] ? v[q]->peak : NAN);
      for (int q = 0; q < 3; q++)
        fprintf(d, "\t%.6g", v[q] ? v[q]->time : NAN);
      fprintf(d, "\n");
    }
    PL_TRY(pl_rep_close(d, data));
    char title[256];
    snprintf(title, sizeof title,
             "ep vs LLEP vs PipelinedLLEP (strided): N = %s/rank, H = %s, "
             "E = %s, lanes %s, %s ranks",
             sh[s].t, sh[s].h, sh[s].e, sh[s].l, sh[s].r);
    /* the variants with a bar: only those are drawn */
    char present[32] = "";
    for (int q = 0; q < 3; q++)
      if (any[q])
        snprintf(present + strlen(present), sizeof present - strlen(present),
                 "%s%s", present[0] ? " " : "", pl_moe_variant_short_names[q]);
    if (!present[0]) {
      printf("%s.svg: not drawn: no ok row with a peak and a time\n", stem);
      continue;
    }
    const char *extra[] = {unit, title, present};
    static const char *const panels[] = {"*_dev_peak", "*_time_ms", NULL};
    if (pl_rep_chart_shows(data, stem, NULL, panels))
      PL_TRY(pl_rep_chart(rc, "dispatch.gp", data, stem, extra, 3));
  }
  return PL_OK;
}

static pl_status tables(pl_report_ctx *rc, pl_table *const *t, int n) {
  int total = 0;
  for (int i = 0; i < n; i++)
    total += t[i]->nrows;
  drow *r = calloc((size_t)(total > 0 ? total : 1), sizeof *r);
  if (!r)
    return pl_set_error(PL_ENOMEM, "report dispatch: rows");
  bool cpu = false;
  int nr = read_rows(t, n, r, &cpu);
  /* one memory unit for the tables: the largest peak's */
  double maxpeak = 0, U;
  for (int i = 0; i < nr; i++)
    if (!isnan(r[i].peak) && r[i].peak > maxpeak)
      maxpeak = r[i].peak;
  const char *unit = pl_rep_unit(maxpeak, &U);
  for (int i = 0; i < nr; i++)
    r[i].peak /= U, r[i].opeak /= U, r[i].dpeak /= U, r[i].bound /= U;
  char path[PATH_MAX];
  FILE *f = pl_rep_open(rc, "dispatch.md", path, sizeof path);
  if (!f) {
    free(r);
    return PL_EIO;
  }
  fprintf(f,
          "# Expert dispatch — ep vs LLEP vs PipelinedLLEP (paper Tables 6 "
          "and 8)\n\nGenerated by "
          "`plateau report %s` from %d result file%s.  Times are fwd+bwd "
          "medians (ms); peaks are the tracked device peak of one fwd+bwd "
          "(%s, max over ranks); the op peak is that peak above what was "
          "resident before the call (weights, fp32 gradients, activations), "
          "i.e. the operator's own live set.  Paper: 8xH200, Ep = 8; with "
          "Ep = 2 each rank holds E/2 experts' weights and fp32 gradients, "
          "so the resident share of the whole peak is larger than the "
          "paper's and the whole-peak reduction smaller.  A shape is "
          "(N/rank, H, E, lanes) at one rank count: runs of different "
          "rank counts are never merged.\n\n",
          rc->run_dir, n, n == 1 ? "" : "s", unit);
  if (cpu)
    fprintf(f, "> CPU backend rows: memory columns are exact; times are CPU "
               "times.\n\n");

  /* distinct shapes (tokens, hidden, experts, lanes, ranks) in order of
   * appearance */
  dshape sh[32];
  int nsh = distinct_shapes(r, nr, sh);
  write_t6(f, r, nr, sh, nsh, unit);
  give_claim(rc, r, nr, sh, nsh);
  write_t8(f, r, nr, sh, nsh, unit);
  write_all_rows(f, r, nr, unit);
  pl_status cst = pl_rep_close(f, path);
  if (cst != PL_OK) {
    free(r);
    return cst;
  }
  pl_status st = write_charts(rc, r, nr, sh, nsh, unit);
  free(r);
  return st;
}

pl_status pl_report_dispatch(pl_report_ctx *rc, pl_table *const *all,
                             int nall) {
  /* the bench's tables with its max_send_ratio column */
  pl_table **t = calloc((size_t)nall + 1, sizeof *t);
  PL_ASSERT(t != NULL);
  int n = 0;
  for (int i = 0; i < nall; i++)
    if (pl_has_col(all[i], "max_send_ratio"))
      t[n++] = all[i];
  pl_status st = PL_OK;
  if (n == 0)
    st = pl_set_error(PL_EIO, "%s: no dispatch result files", rc->run_dir);
  else
    st = tables(rc, t, n);
  free(t);
  return st;
}
