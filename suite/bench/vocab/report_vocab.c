/* report_vocab.c — the report hook of `plateau bench vocab`: Table 2 of the
 * paper (vocabulary head, fwd+bwd) with the paper's printed numbers beside
 * ours, and a chart of peak memory and time vs N per variant.
 *
 * For every (backend, dtype and f32 math, H, V, N) group of rows it prints
 * each variant's time, peak and live set, the change against the dense
 * baseline of the same group (the paper's baseline), Ring-DTP's peak against
 * its analytic floor, what ran (kernel) and the strip budget, and the
 * targets (at P = 2 on the paper preset: Ring-DTP peak ≤ 20% of dense, time
 * ≤ 1.05×, within 10% of the floor; fused ≤ 1.1× dense time; the one-rank
 * head ≤ Liger's time at ≤ its memory above the inputs, when the Liger peer's
 * rows are in the run) as met / missed, and the blocked schedule's budget →
 * time curve with its overhead over the three-GEMM head.  Paper values are
 * printed constants (DESIGN §1.2, §5).  Entry: pl_report_vocab(run_dir,
 * out_dir) (report_vocab.h), which `plateau report` calls for the bench
 * "vocab".
 *
 * Chart: analysis/vocab.gp (peak GiB and time ms vs N, one line per variant,
 * f32 and the first backend seen), written as out_dir/vocab.{svg,png} from
 * out_dir/vocab-chart.tsv. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "plateau/plateau.h"
#include "report/report.h"
#include "report/report_util.h"
#include "results/results.h"

/* Paper, Table 2 (arXiv 2609.14306; P=8, H=7168, V=200,000, fp32, fwd+bwd):
 * dense → Ring-DTP peak GiB, and Ring-DTP's time change vs dense. */
static const struct {
  long n;
  double dense_gib, ring_gib, time_pct;
  const char *mode;
} paper_t2[] = {
    {16384, 42.46, 7.32, 5.1, "act"},
    {32768, 79.52, 10.62, 4.4, "weights"},
};
/* PyTorch 2.11 dense linear + cross_entropy on one H200
 * (doc/performance/README.md). */
static const struct {
  long n;
  const char *dtype;
  double gib, ms;
} torch_peer[] = {
    {16384, "f32", 42.46, 2830},
    {32768, "f32", 79.52, 5489},
    {16384, "bf16", 39.57, 246},
    {32768, "bf16", 76.41, 500},
};

#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct vrow {
  const char *backend, *variant, *dtype, *mode, *status, *check, *live;
  const char *kernel, *math;
  long n, h, v, ranks, block;
  double ms, p10, p90, peak, logits, floor_gib, err, budget, kept;
  long long hop, sent;
  const pl_table *t; /* the file it came from */
} vrow;

/* Device bytes of the inputs X (N×H) and W (H×V) in the row's dtype: the
 * peak minus these is the memory "above the inputs" (targets and loss
 * scalars are under 0.1% and left in). */
static double inputs_gib(const vrow *r) {
  double es = strcmp(r->dtype, "bf16") ? 4.0 : 2.0;
  return ((double)r->n * r->h + (double)r->h * r->v) * es / GIB;
}

static int cmp_rows(const void *a, const void *b) {
  const vrow *x = a, *y = b;
  int c = strcmp(x->backend, y->backend);
  if (c)
    return c;
  if ((c = strcmp(x->dtype, y->dtype)))
    return c;
  if (x->h != y->h)
    return x->h < y->h ? -1 : 1;
  if (x->v != y->v)
    return x->v < y->v ? -1 : 1;
  if (x->n != y->n)
    return x->n < y->n ? -1 : 1;
  if ((c = strcmp(x->math, y->math)))
    return c;
  static const char *order[] = {"dense", "torch", "torch-tf32",
                                "liger", "fused", "blocked",
                                "chunk", "vp",    "ring"};
  int ox = 9, oy = 9;
  for (int i = 0; i < 9; i++) {
    if (!strcmp(x->variant, order[i]))
      ox = i;
    if (!strcmp(y->variant, order[i]))
      oy = i;
  }
  if (ox != oy)
    return ox - oy;
  if (x->block != y->block)
    return x->block < y->block ? -1 : 1;
  return x->budget < y->budget ? -1 : x->budget > y->budget;
}

static int same_group(const vrow *a, const vrow *b) {
  return !strcmp(a->backend, b->backend) && !strcmp(a->dtype, b->dtype) &&
         !strcmp(a->math, b->math) && a->h == b->h && a->v == b->v &&
         a->n == b->n;
}

/* Rows of one vocab chart: the same backend, dtype, math and shape. */
static bool same_chart(const vrow *a, const vrow *b) {
  return !strcmp(a->backend, b->backend) && !strcmp(a->dtype, b->dtype) &&
         !strcmp(a->math, b->math) && a->h == b->h && a->v == b->v;
}

/* The chart of rows like g (same_chart): peak and time per variant vs N,
 * the best block's ok row per N; `plain`: named vocab.{svg,png}, else
 * vocab-<dtype>[-<math>]-H<h>-V<v>.  Not drawn (said so) without an ok
 * row of a charted variant. */
static pl_status chart(pl_report_ctx *rc, const vrow *rows, int nr,
                       const vrow *g, bool plain) {
  static const char *vars[] = {"dense", "fused", "chunk", "vp", "ring"};
  char name[160], data[PATH_MAX], stem[PATH_MAX], present[64] = "", title[192];
  if (plain)
    snprintf(name, sizeof name, "vocab");
  else
    snprintf(name, sizeof name, "vocab-%s%s%s-H%ld-V%ld", g->dtype,
             strcmp(g->math, "fp32") && strcmp(g->math, "-") ? "-" : "",
             strcmp(g->math, "fp32") && strcmp(g->math, "-") ? g->math : "",
             g->h, g->v);
  /* the memory axis in the unit of the largest peak charted */
  double maxp = 0, U;
  for (int k = 0; k < nr; k++)
    if (same_chart(&rows[k], g) && !strcmp(rows[k].status, "ok") &&
        rows[k].peak * GIB > maxp)
      maxp = rows[k].peak * GIB;
  for (int q = 0; q < 5; q++) {
    bool any = false;
    for (int k = 0; k < nr && !any; k++)
      any = same_chart(&rows[k], g) && !strcmp(rows[k].variant, vars[q]) &&
            !strcmp(rows[k].status, "ok");
    if (any)
      snprintf(present + strlen(present), sizeof present - strlen(present),
               "%s%s", present[0] ? " " : "", vars[q]);
  }
  const char *unit = pl_rep_unit(maxp, &U);
  snprintf(title, sizeof title, "%s, %s%s, H = %ld, V = %ld", g->backend,
           g->dtype, strcmp(g->math, "tf32") ? "" : " in TF32 math", g->h,
           g->v);
  char file[192];
  snprintf(file, sizeof file, "%s%s.tsv", name, plain ? "-chart" : "");
  FILE *d = pl_rep_open(rc, file, data, sizeof data);
  if (!d)
    return PL_EIO;
  fprintf(d,
          "# vocab: peak (%s) and time ms vs N per variant (%s; best "
          "block); from plateau report\ntokens",
          unit, title);
  for (int q = 0; q < 5; q++)
    fprintf(d, "\t%s_dev_peak\t%s_time_ms", vars[q], vars[q]);
  fprintf(d, "\n");
  for (int i = 0; i < nr;) { /* rows are sorted by N within a chart */
    int j = i;
    while (j < nr && (j == i || same_group(&rows[i], &rows[j])))
      j++;
    if (same_chart(&rows[i], g)) {
      fprintf(d, "%ld", rows[i].n);
      for (int q = 0; q < 5; q++) {
        const vrow *b = NULL;
        for (int k = i; k < j; k++)
          if (!strcmp(rows[k].variant, vars[q]) &&
              !strcmp(rows[k].status, "ok") && (!b || rows[k].peak < b->peak))
            b = &rows[k];
        if (b)
          fprintf(d, "\t%.6g\t%.6g", b->peak * GIB / U, b->ms);
        else
          fprintf(d, "\tNaN\tNaN");
      }
      fprintf(d, "\n");
    }
    i = j;
  }
  PL_TRY(pl_rep_close(d, data));
  snprintf(stem, sizeof stem, "%s/%s", rc->out_dir, name);
  if (!present[0]) {
    printf("%s.svg: not drawn: no ok row of a charted variant (%s)\n", stem,
           title);
    return PL_OK;
  }
  const char *extra[] = {unit, present, title};
  static const char *const panels[] = {"*_dev_peak", "*_time_ms", NULL};
  if (!pl_rep_chart_shows(data, stem, "+tokens", panels))
    return PL_OK;
  return pl_rep_chart(rc, "vocab.gp", data, stem, extra, 3);
}

/* Every row of the tables with finite keys into rows: their count. */
static int read_rows(pl_table *const *tables, int ntables, vrow *rows) {
  int nr = 0;
  for (int i = 0; i < ntables; i++) {
    const pl_table *t = tables[i];
    const char *be = pl_table_meta(t, "backend");
    for (int r = 0; r < t->nrows; r++) {
      static const char *const keys[] = {"tokens", "hidden", "vocab", NULL};
      if (!pl_rep_keys_ok("vocab", t, r, keys))
        continue;
      vrow *v = &rows[nr++];
      v->t = t;
      v->backend = be ? be : "?";
      v->variant = pl_cell(t, r, "variant");
      v->dtype = pl_cell(t, r, "dtype");
      v->mode = pl_cell(t, r, "mode");
      v->status = pl_cell(t, r, "status");
      v->check = pl_cell(t, r, "check");
      v->live = pl_cell(t, r, "live_set");
      v->kernel = pl_cell(t, r, "kernel");
      v->math = pl_cell(t, r, "math");
      /* torch's TF32 row is the f32 group in TF32 math */
      if (!strcmp(v->variant, "torch-tf32"))
        v->math = "tf32";
      else if (!strcmp(v->dtype, "f32") && !strcmp(v->math, "-"))
        v->math = "fp32";
      v->budget = pl_cell_num(t, r, "strip_budget_bytes");
      v->kept = pl_cell_num(t, r, "kept_strips");
      v->n = (long)pl_cell_num(t, r, "tokens");
      v->h = (long)pl_cell_num(t, r, "hidden");
      v->v = (long)pl_cell_num(t, r, "vocab");
      const double rk = pl_cell_num(t, r, "ranks");
      v->ranks = isfinite(rk) ? (long)rk : 0;
      double b = pl_cell_num(t, r, "block");
      v->block = isnan(b) ? 0 : (long)b;
      v->ms = pl_cell_num(t, r, "time_ms");
      v->p10 = pl_cell_num(t, r, "time_p10_ms");
      v->p90 = pl_cell_num(t, r, "time_p90_ms");
      v->peak = pl_cell_num(t, r, "dev_peak_bytes") / GIB;
      v->logits = pl_cell_num(t, r, "logits_bytes") / GIB;
      v->floor_gib = pl_cell_num(t, r, "bound_bytes") / GIB;
      v->err = pl_cell_num(t, r, "max_err");
      double hop = pl_cell_num(t, r, "hop_bytes"),
             sent = pl_cell_num(t, r, "sent_bytes");
      v->hop = isnan(hop) ? -1 : (long long)hop;
      v->sent = isnan(sent) ? -1 : (long long)sent;
    }
  }
  return nr;
}

/* The table of one group, rows [i, j): every row with its ratios to the
 * group's ok dense row (dense: NULL when none). */
static void write_group_table(FILE *f, const vrow *rows, int i, int j,
                              const vrow *dense) {
  fprintf(f, "## %s, %s%s%s, H=%ld, V=%ld, N=%ld\n\n", rows[i].backend,
          rows[i].dtype, strcmp(rows[i].math, "tf32") ? "" : " ",
          strcmp(rows[i].math, "tf32") ? "" : "TF32", rows[i].h, rows[i].v,
          rows[i].n);
  fprintf(f, "| variant | P | block | mode | time ms (p10–p90) | vs dense | "
             "peak GiB | vs dense | logits GiB | floor GiB | hop MiB | "
             "check | status | live set at peak | kernel | strip budget "
             "GiB | kept strips |\n");
  fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
             "---|---|\n");
  for (int k = i; k < j; k++) {
    const vrow *r = &rows[k];
    char t[64], tr[32], pk[32], pr[32], lg[32], fl[32], hop[32];
    if (isnan(r->ms))
      snprintf(t, sizeof t, "-");
    else
      snprintf(t, sizeof t, "%.1f (%.1f–%.1f)", r->ms, r->p10, r->p90);
    pl_rep_fmt(tr, sizeof tr, "%.3f×",
               dense && !isnan(r->ms) ? r->ms / dense->ms : NAN, "-");
    pl_rep_fmt(pk, sizeof pk, "%.4g", r->peak, "-");
    pl_rep_fmt(pr, sizeof pr, "%+.1f%%",
               dense ? 100.0 * (r->peak / dense->peak - 1.0) : NAN, "-");
    pl_rep_fmt(lg, sizeof lg, "%.4g", r->logits, "-");
    pl_rep_fmt(fl, sizeof fl, "%.4g", r->floor_gib, "-");
    pl_rep_fmt(hop, sizeof hop, "%.1f", r->hop >= 0 ? r->hop / 1048576.0 : NAN,
               "-");
    char bud[32], kept[32];
    pl_rep_fmt(bud, sizeof bud, "%.3g", r->budget / GIB, "-");
    pl_rep_fmt(kept, sizeof kept, "%.0f", r->kept, "-");
    fprintf(f,
            "| %s | %ld | %ld | %s | %s | %s | %s | %s | %s | %s | %s | "
            "%s | %s | %s | %s | %s | %s |\n",
            r->variant, r->ranks, r->block, r->mode, t, tr, pk, pr, lg, fl, hop,
            r->check, r->status, r->live, r->kernel, bud, kept);
  }
}

/* The paper's and the PyTorch peer's rows beside ours, for the paper's shape
 * (g: the group's first row). */
static void write_paper_rows(FILE *f, const vrow *g) {
  if (g->h == 7168 && g->v == 200000) {
    for (size_t q = 0; q < sizeof paper_t2 / sizeof paper_t2[0]; q++)
      if (paper_t2[q].n == g->n && !strcmp(g->dtype, "f32"))
        fprintf(f,
                "| *paper dense* | 8 | - | - | - | - | %.2f | - | - | - | "
                "- | - | printed | Table 2 |\n"
                "| *paper Ring-DTP* | 8 | - | %s | - | +%.1f%% | %.2f | "
                "%+.1f%% | - | - | - | - | printed | Table 2 |\n",
                paper_t2[q].dense_gib, paper_t2[q].mode, paper_t2[q].time_pct,
                paper_t2[q].ring_gib,
                100.0 * (paper_t2[q].ring_gib / paper_t2[q].dense_gib - 1));
    for (size_t q = 0; q < sizeof torch_peer / sizeof torch_peer[0]; q++)
      if (torch_peer[q].n == g->n && !strcmp(torch_peer[q].dtype, g->dtype))
        fprintf(f,
                "| *PyTorch dense (peer)* | 1 | - | - | %.0f | - | %.2f "
                "| - | - | - | - | - | measured | doc/performance, H200 |\n",
                torch_peer[q].ms, torch_peer[q].gib);
  }
}

/* "met" / "missed", or for a CPU-backend row "CPU: not judged". */
static const char *verdict(bool cpu, bool met) {
  return cpu ? "CPU: not judged" : met ? "met" : "missed";
}

/* The targets of the group rows [i, j) where they apply: Ring-DTP's, the
 * fused heads', the one-rank head against Liger, the blocked schedule's
 * budget → time curve. */
static void write_targets(FILE *f, const vrow *rows, int i, int j,
                          const vrow *dense) {
  /* GPU targets: a CPU-backend row is shown its figures, not judged */
  const bool cpu = !strcmp(rows[i].backend, "cpu");
  const vrow *ring = NULL, *fused = NULL, *chunk = NULL, *liger = NULL,
             *blocked = NULL, *ring1 = NULL;
  for (int k = i; k < j; k++) {
    if (strcmp(rows[k].status, "ok"))
      continue;
    if (!strcmp(rows[k].variant, "liger"))
      liger = &rows[k];
    if (!strcmp(rows[k].variant, "blocked") &&
        (!blocked || rows[k].ms < blocked->ms))
      blocked = &rows[k];
    if (!strcmp(rows[k].variant, "ring") && rows[k].ranks == 1 &&
        !strcmp(rows[k].kernel, "chunked") &&
        (!ring1 || rows[k].ms < ring1->ms))
      ring1 = &rows[k];
    if (!strcmp(rows[k].variant, "ring") && !strcmp(rows[k].status, "ok") &&
        (!ring || rows[k].peak < ring->peak))
      ring = &rows[k];
    if (!strcmp(rows[k].variant, "fused") && !strcmp(rows[k].status, "ok") &&
        (!fused || rows[k].ms < fused->ms))
      fused = &rows[k];
    if (!strcmp(rows[k].variant, "chunk") && !strcmp(rows[k].status, "ok") &&
        (!chunk || rows[k].ms < chunk->ms))
      chunk = &rows[k];
  }
  fprintf(f, "\n");
  if (dense && ring) {
    double pr = ring->peak / dense->peak, tr = ring->ms / dense->ms,
           fr = ring->peak / ring->floor_gib;
    fprintf(f,
            "- Ring-DTP (P=%ld, block %ld, %s): peak %.1f%% of dense "
            "(target ≤ 20%%: %s), time %.3f× dense (target ≤ 1.05×: %s), "
            "peak %.3f× its floor (target ≤ 1.10×: %s).\n",
            ring->ranks, ring->block, ring->mode, 100 * pr,
            verdict(cpu, pr <= 0.20), tr, verdict(cpu, tr <= 1.05), fr,
            verdict(cpu, fr <= 1.10));
    if (tr > 1.05 && strcmp(ring->kernel, "chunked"))
      fprintf(f, "  Why the time: Ring-DTP recomputes each strip's logits in "
                 "the backward (4 GEMMs of 2·N·H·V FLOPs against dense's 3), "
                 "so a GEMM-bound fp32 head cannot go below ≈1.33× dense "
                 "without storing the logits; dense's N×V element-wise "
                 "passes are what the recompute can hide (bf16).\n");
  }
  if (dense && fused)
    fprintf(f,
            "- Fused head (%s, block %ld): time %.3f× dense (target ≤ "
            "1.1×: %s), peak %.1f%% of dense.\n",
            !strcmp(fused->kernel, "chunked") ? "three GEMMs" : "blocked",
            fused->block, fused->ms / dense->ms,
            verdict(cpu, fused->ms / dense->ms <= 1.1),
            100 * fused->peak / dense->peak);
  if (dense && blocked)
    fprintf(f,
            "- Blocked fused head (four GEMMs, block %ld): time %.3f× "
            "dense, peak %.1f%% of dense.\n",
            blocked->block, blocked->ms / dense->ms,
            100 * blocked->peak / dense->peak);
  /* the one-rank head against Liger's fused linear cross-entropy */
  const vrow *one = fused;
  if (ring1 && (!one || ring1->ms < one->ms))
    one = ring1;
  if (liger && one) {
    double ta = one->ms / liger->ms;
    double ma = one->peak - inputs_gib(one),
           ml = liger->peak - inputs_gib(liger);
    fprintf(f,
            "- One-rank head (%s, %s) vs Liger fused linear CE: time "
            "%.1f vs %.1f ms (%.3f×), above the inputs %.3f vs %.3f "
            "GiB — target ≤ Liger's time at ≤ its memory: %s.\n",
            one->variant, one->kernel, one->ms, liger->ms, ta, ma, ml,
            verdict(cpu, ta <= 1.0 && ma <= ml));
  }
  /* the blocked schedule's budget → time curve (ring rows, one per
   * budget), and what it costs over the three-GEMM head */
  int nb = 0;
  for (int k = i; k < j; k++)
    nb += !strcmp(rows[k].variant, "ring") && !strcmp(rows[k].status, "ok") &&
          !strcmp(rows[k].kernel, "blocked");
  if (nb > 1 || (nb && (ring1 || fused))) {
    const vrow *three = ring1 ? ring1 : fused;
    fprintf(f, "- Ring-DTP blocked schedule, strip budget → time:");
    for (int k = i; k < j; k++)
      if (!strcmp(rows[k].variant, "ring") && !strcmp(rows[k].status, "ok") &&
          !strcmp(rows[k].kernel, "blocked"))
        fprintf(f, " %.3g GiB (%.0f kept) %.1f ms;", rows[k].budget / GIB,
                rows[k].kept, rows[k].ms);
    if (three && !strcmp(three->kernel, "chunked")) {
      const vrow *b0 = NULL;
      for (int k = i; k < j; k++)
        if (!strcmp(rows[k].variant, "ring") && !strcmp(rows[k].status, "ok") &&
            !strcmp(rows[k].kernel, "blocked") &&
            (!b0 || rows[k].budget < b0->budget))
          b0 = &rows[k];
      fprintf(f,
              " three-GEMM head %.1f ms: the blocked schedule's overhead "
              "over it %.1f ms at budget %.3g GiB (%.3f×).",
              three->ms, b0->ms - three->ms, b0->budget / GIB,
              b0->ms / three->ms);
    }
    fprintf(f, "\n");
  }
  if (dense && chunk)
    fprintf(f,
            "- Token-chunked fused head (block %ld): time %.3f× dense "
            "(target of the blocked head ≤ 1.1×: %s), peak %.1f%% of "
            "dense — 3 GEMMs, no recompute; P = 1 only.\n",
            chunk->block, chunk->ms / dense->ms,
            verdict(cpu, chunk->ms / dense->ms <= 1.1),
            100 * chunk->peak / dense->peak);
}

/* The charts: one per precision and shape. */
static pl_status write_charts(pl_report_ctx *rc, vrow *rows, int nr) {
  /* Charts: one per precision and shape (backend, dtype, math, H, V), so a
   * line never joins two precisions at one N; the first (f32 of the first
   * backend when there is one) is vocab.{svg,png}. */
  int first = -1;
  for (int k = 0; k < nr && first < 0; k++)
    if (!strcmp(rows[k].dtype, "f32") && !strcmp(rows[k].math, "fp32") &&
        !strcmp(rows[k].backend, rows[0].backend))
      first = k;
  if (first < 0)
    first = 0;
  pl_status st = PL_OK;
  for (int pass = 0; pass < 2 && st == PL_OK; pass++)
    for (int k = 0; k < nr && st == PL_OK; k++) {
      bool seen = false; /* the first row of its chart group only */
      for (int j = 0; j < k && !seen; j++)
        seen = same_chart(&rows[j], &rows[k]);
      if (seen || (pass == 0) != same_chart(&rows[k], &rows[first]))
        continue;
      st = chart(rc, rows, nr, &rows[k], pass == 0);
    }
  return st;
}

/* Is r the paper's Table 2 shape at N = 16K (P 8, H 7168, V 200,000)? */
static bool paper_shape(const vrow *r) {
  return r->ranks == 8 && r->n == 16384 && r->h == 7168 && r->v == 200000;
}

/* The summary's vocabulary claim: Ring-DTP over P >= 2 ranks (its lowest
 * peak) against dense logits of the same group, the paper's shape first,
 * else the largest N·V; *best and *best_dense keep the choice so far. */
static void claim_of(const vrow *rows, int i, int j, const vrow *dense,
                     const vrow **best, const vrow **best_dense) {
  const vrow *ring = NULL;
  for (int k = i; k < j; k++)
    if (!strcmp(rows[k].variant, "ring") && !strcmp(rows[k].status, "ok") &&
        rows[k].ranks >= 2 && (!ring || rows[k].peak < ring->peak))
      ring = &rows[k];
  if (!dense || !ring)
    return;
  const vrow *b = *best;
  if (!b || (paper_shape(ring) && !paper_shape(b)) ||
      (paper_shape(ring) == paper_shape(b) &&
       (double)ring->n * ring->v > (double)b->n * b->v))
    *best = ring, *best_dense = dense;
}

/* Ours / paper only at the paper's shape: at another P or N the reduction
 * is a different quantity. */
static void give_claim(pl_report_ctx *rc, const vrow *ring, const vrow *dense) {
  const double pp = 100 * (ring->peak - dense->peak) / dense->peak,
               tp = 100 * (ring->ms - dense->ms) / dense->ms;
  char t[200];
  if (pl_rep_is_cpu(ring->t))
    snprintf(t, sizeof t, "%+.1f%% peak (P %ld, N %ld, H %ld, V %ld, %s)", pp,
             ring->ranks, ring->n, ring->h, ring->v, ring->dtype);
  else
    snprintf(t, sizeof t,
             "%+.1f%% peak at %+.1f%% time (P %ld, N %ld, H %ld, "
             "V %ld, %s)",
             pp, tp, ring->ranks, ring->n, ring->h, ring->v, ring->dtype);
  pl_rep_claim(rc, "vocab", paper_shape(ring) ? pp : NAN, t, ring->t,
               paper_shape(ring) ? "measured per rank"
                                 : "measured per rank, not the paper's shape "
                                   "(no ratio)");
}

pl_status pl_report_vocab(pl_report_ctx *rc, pl_table *const *tables,
                          int ntables) {
  int cap = 0;
  for (int i = 0; i < ntables; i++)
    cap += tables[i]->nrows;
  vrow *rows = calloc((size_t)cap + 1, sizeof *rows);
  if (!rows)
    return pl_set_error(PL_ENOMEM, "report vocab: host memory");
  int nr = read_rows(tables, ntables, rows);
  qsort(rows, (size_t)nr, sizeof *rows, cmp_rows);

  char path[PATH_MAX];
  FILE *f = pl_rep_open(rc, "vocab.md", path, sizeof path);
  if (!f) {
    free(rows);
    return PL_EIO;
  }
  fprintf(f, "# Vocabulary head (fwd+bwd): Table 2\n\n");
  fprintf(f,
          "From `plateau report %s`. Peak = tracked device peak of one "
          "fwd+bwd, max over ranks, inputs X and W included, gradients "
          "allocated where autograd would. N = tokens per rank. ratios vs "
          "the dense baseline of the same group. On the cpu backend memory "
          "is exact and times are CPU times.\n\n",
          rc->run_dir);
  fprintf(f, "Paper (Table 2, 8 GPUs, P=8, H=7168, V=200,000, fp32): N=16,384 "
             "42.46 → 7.32 GiB (−82.8%%) at +5.1%% time (moves activations); "
             "N=32,768 79.52 → 10.62 GiB (−86.6%%) at +4.4%% (moves "
             "weights).\n\n");
  const vrow *claim = NULL, *claim_dense = NULL;
  for (int i = 0; i < nr;) {
    int j = i;
    while (j < nr && (j == i || same_group(&rows[i], &rows[j])))
      j++;
    const vrow *dense = NULL;
    for (int k = i; k < j; k++)
      if (!strcmp(rows[k].variant, "dense") && !strcmp(rows[k].status, "ok"))
        dense = &rows[k];
    write_group_table(f, rows, i, j, dense);
    /* Paper and peer rows beside ours for the paper's shape. */
    write_paper_rows(f, &rows[i]);
    /* Targets where they apply. */
    write_targets(f, rows, i, j, dense);
    claim_of(rows, i, j, dense, &claim, &claim_dense);
    if (!dense)
      fprintf(f, "- No successful dense row in this group (oom or not run): "
                 "no ratios.\n");
    fprintf(f, "\n");
    i = j;
  }
  pl_status cst = pl_rep_close(f, path);
  if (cst != PL_OK) {
    free(rows);
    return cst;
  }
  if (claim)
    give_claim(rc, claim, claim_dense);

  pl_status st = write_charts(rc, rows, nr);
  free(rows);
  return st;
}
