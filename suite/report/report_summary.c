/* report_summary.c — report/summary.md: the paper's claims checked on one
 * page.  One row per claim (the paper's figures: paper.h), with ours where a
 * report hook computed it (pl_rep_claim: the train report's grid, dispatch,
 * vocab, sco, adam), the ratio ours / paper, the hardware, and whether ours
 * is measured per rank, projected (a one-GPU proxy with the plan's
 * communication) or not run here; then links to the charts that answer
 * them.
 *
 * Why a page of its own: each report holds its claim deep in its tables
 * (train.md's comparison with FSDP2-best sits after a hundred lines), and a
 * user's first question is which claims hold on their hardware and by how
 * much.  A figure from a CPU-backend file is shown as what it is — memory
 * exact, times CPU times — and never given a ratio against the paper's GPU
 * figure. */
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "paper.h"
#include "report.h"
#include "report_util.h"

/* How a claim's figures are written and compared. */
typedef enum { U_CTX, U_X, U_PCT, U_TFLOPS, U_TOKENS } unit;

typedef struct claim_row {
  char id[40], claim[160], paper[96];
  double paper_v; /* NAN: nothing to divide by (an OOM, no printed figure) */
  unit u;
} claim_row;

#define MAX_ROWS 40

static claim_row *add(claim_row *r, int *n, const char *id, double v, unit u) {
  PL_ASSERT(*n < MAX_ROWS);
  claim_row *x = &r[(*n)++];
  memset(x, 0, sizeof *x);
  snprintf(x->id, sizeof x->id, "%s", id);
  x->paper_v = v;
  x->u = u;
  return x;
}

/* The paper's claims in the order a reader checks them: end to end (reach,
 * FSDP2-best's OOM, throughput ratios, TFLOP/s, batch), then the operators. */
static int claim_rows(claim_row *r) {
  int n = 0;
  char id[40], c[16];
  const pl_paper_ops *op = &pl_paper_op;
  for (int k = 0; k < 3; k++) {
    const pl_paper_vs_fig *f = &pl_paper_vs[k];
    snprintf(id, sizeof id, "reach:%s", f->model);
    claim_row *x = add(r, &n, id, pl_paper_reach, U_CTX);
    snprintf(x->claim, sizeof x->claim,
             "plateau trains 1M tokens of context, %s on %d GPUs (longest "
             "context ok)",
             f->model, f->gpus);
    snprintf(x->paper, sizeof x->paper, "%s",
             pl_rep_ctx(c, sizeof c, pl_paper_reach));
  }
  for (int k = 0; k < 3; k++) {
    const pl_paper_vs_fig *f = &pl_paper_vs[k];
    snprintf(id, sizeof id, "fsdp2_reach:%s", f->model);
    claim_row *x = add(r, &n, id, f->fsdp2_reach, U_CTX);
    snprintf(x->claim, sizeof x->claim,
             "FSDP2-best runs out of memory past its longest context, %s on "
             "%d GPUs",
             f->model, f->gpus);
    snprintf(x->paper, sizeof x->paper, "%s (OOM above)",
             pl_rep_ctx(c, sizeof c, f->fsdp2_reach));
  }
  static const double seqs[2] = {131072, 1048576};
  for (int s = 0; s < 2; s++)
    for (int k = 0; k < 3; k++) {
      const pl_paper_vs_fig *f = &pl_paper_vs[k];
      snprintf(id, sizeof id, "ratio:%s:%.0f", f->model, seqs[s]);
      const bool oom = seqs[s] > f->fsdp2_reach;
      claim_row *x = add(r, &n, id, oom ? NAN : f->tok_ratio, U_X);
      snprintf(x->claim, sizeof x->claim,
               "throughput plateau / FSDP2-best (tok/s/GPU), %s at %s",
               f->model, pl_rep_ctx(c, sizeof c, seqs[s]));
      if (oom)
        snprintf(x->paper, sizeof x->paper, "FSDP2-best OOM");
      else if (!isnan(f->tok_ratio))
        snprintf(x->paper, sizeof x->paper, "%.1f×", f->tok_ratio);
      else
        snprintf(x->paper, sizeof x->paper, "-");
    }
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < pl_paper_ne2e; i++) {
      const pl_paper_e2e_pt *q = &pl_paper_e2e[i];
      if (q->seq != seqs[s])
        continue;
      snprintf(id, sizeof id, "tflops:%s:%.0f", q->model, q->seq);
      claim_row *x = add(r, &n, id, q->tflops, U_TFLOPS);
      snprintf(x->claim, sizeof x->claim,
               "plateau TFLOP/s per GPU, %s on %d GPUs at %s", q->model,
               q->gpus, pl_rep_ctx(c, sizeof c, q->seq));
      snprintf(x->paper, sizeof x->paper, "%.0f (%.0f tok/s/GPU)", q->tflops,
               q->tok);
    }
  for (int k = 0; k < 3; k++) {
    const pl_paper_vs_fig *f = &pl_paper_vs[k];
    snprintf(id, sizeof id, "batch:%s", f->model);
    claim_row *x = add(r, &n, id, f->batch, U_TOKENS);
    snprintf(x->claim, sizeof x->claim,
             "plateau's largest global batch (tokens per step), %s on %d GPUs",
             f->model, f->gpus);
    snprintf(x->paper, sizeof x->paper, "%.1fM (%.0f× FSDP2-best)",
             f->batch / 1e6, f->batch_ratio);
  }
  claim_row *x = add(r, &n, "dispatch", op->dispatch_peak_pct, U_PCT);
  snprintf(x->claim, sizeof x->claim,
           "dispatch: PipelinedLLEP's device peak vs LLEP's (65K tokens/rank, "
           "H 7168, E 128, balanced)");
  snprintf(x->paper, sizeof x->paper, "%+.1f%% at %.2f× speed (8×H200)",
           op->dispatch_peak_pct, op->dispatch_speedup);
  x = add(r, &n, "vocab", op->vocab_peak_pct[0], U_PCT);
  snprintf(x->claim, sizeof x->claim,
           "vocabulary head: Ring-DTP's peak vs dense logits (P 8, H 7168, "
           "V 200,000, N 16K)");
  snprintf(x->paper, sizeof x->paper, "%+.1f%% at %+.1f%% time (8×H200)",
           op->vocab_peak_pct[0], op->vocab_time_pct[0]);
  const double sco =
      100 * (op->sco_hbm_gib[1] - op->sco_hbm_gib[0]) / op->sco_hbm_gib[0];
  x = add(r, &n, "sco", sco, U_PCT);
  snprintf(x->claim, sizeof x->claim,
           "SCO: device peak, host budget 0 → all (gpt-oss-20b)");
  snprintf(x->paper, sizeof x->paper, "%+.1f%% (%.2f → %.2f GiB, 8×H200)", sco,
           op->sco_hbm_gib[0], op->sco_hbm_gib[1]);
  const double scob =
      100 * (op->sco_maxbatch[1] - op->sco_maxbatch[0]) / op->sco_maxbatch[0];
  x = add(r, &n, "sco_batch", scob, U_PCT);
  snprintf(x->claim, sizeof x->claim,
           "SCO: largest batch, host budget 0 → all (gpt-oss-20b)");
  snprintf(x->paper, sizeof x->paper, "%+.2f%% (8×H200)", scob);
  x = add(r, &n, "adam", op->adam_speedup, U_X);
  snprintf(x->claim, sizeof x->claim,
           "optimizer: OffloadStreamAdamW vs a host CPU Adam step (2.625B "
           "params/rank)");
  snprintf(x->paper, sizeof x->paper, "%.2f× (%.2f vs %.2f s, 8×H200)",
           op->adam_speedup, op->adam_cpu_s, op->adam_stream_s);
  return n;
}

static const pl_rep_claim_t *ours_of(const pl_rep_claims *c, const char *id) {
  for (int i = 0; c && i < c->n; i++)
    if (strcmp(c->v[i].id, id) == 0)
      return &c->v[i];
  return NULL;
}

/* The charts that answer the claims, those of them the report wrote:
 * a name, or a prefix ending in '-' for the first of a family. */
static const struct {
  const char *name, *what;
} CHARTS[] = {
    {"train-grid", "the paper's grid: plateau and FSDP2-best per model and "
                   "context, the paper's points beside"},
    {"train-maxbatch", "the largest global batch per GPU count"},
    {"train-context", "tok/s/GPU and TFLOP/s per context"},
    {"dispatch-", "dispatch: time and peak per variant and routing profile"},
    {"vocab", "vocabulary head: time and peak per variant"},
    {"sco-budget-", "SCO: device peak and throughput per host budget"},
    {"adam_sweep", "optimizer: step time per bucket size and staging slots"},
};

/* The first file of out_dir named prefix*.svg (prefix ends in '-') or
 * prefix.svg, its stem into b. */
static bool chart_of(const char *out_dir, const char *prefix, char *b,
                     size_t n) {
  const size_t pl = strlen(prefix);
  if (prefix[pl - 1] != '-') {
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s.svg", out_dir, prefix);
    if (stat(p, &st) != 0)
      return false;
    snprintf(b, n, "%s", prefix);
    return true;
  }
  DIR *d = opendir(out_dir);
  if (!d)
    return false;
  char best[256] = "";
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const size_t l = strlen(e->d_name);
    if (strncmp(e->d_name, prefix, pl) == 0 && l > 4 && l < sizeof best &&
        strcmp(e->d_name + l - 4, ".svg") == 0 &&
        (!best[0] || strcmp(e->d_name, best) < 0))
      snprintf(best, sizeof best, "%.*s", (int)(l - 4), e->d_name);
  }
  closedir(d);
  if (!best[0])
    return false;
  snprintf(b, n, "%s", best);
  return true;
}

pl_status pl__report_summary(pl_report_ctx *rc) {
  claim_row rows[MAX_ROWS];
  const int n = claim_rows(rows);
  char path[PATH_MAX];
  FILE *f = pl_rep_open(rc, "summary.md", path, sizeof path);
  if (!f)
    return PL_EIO;
  fprintf(f,
          "# Summary: the paper's claims on this run\n\nGenerated by "
          "`plateau report %s`. One row per claim of the paper (arXiv "
          "2609.14306; its figures on 8–64 H200): the paper's figure, ours "
          "from this run's result files, ours / paper, where ours ran, and "
          "how: *measured* (this run's ranks), *projected* (a one-GPU proxy "
          "playing one rank of the paper's run: compute and memory measured, "
          "communication from the plan), or *not run here*. A figure from "
          "the CPU backend is shown as what it is (memory exact, times CPU "
          "times) and never compared with the paper's GPU figure. The "
          "reports behind each row: train.md, dispatch.md, vocab.md, "
          "sco.md, adam.md.\n\n",
          rc->run_dir);
  fprintf(f, "| claim | paper | ours | ours / paper | hardware | basis |\n"
             "|---|---|---|---|---|---|\n");
  int run = 0, cpu = 0;
  for (int i = 0; i < n; i++) {
    const claim_row *x = &rows[i];
    const pl_rep_claim_t *o = ours_of(rc->claims, x->id);
    char ratio[32] = "-";
    if (o && !o->cpu && !isnan(o->ours) && !isnan(x->paper_v) &&
        x->paper_v != 0)
      snprintf(ratio, sizeof ratio, "%.2f×", o->ours / x->paper_v);
    fprintf(f, "| ");
    pl_rep_md_text(f, x->claim);
    fprintf(f, " | ");
    pl_rep_md_text(f, x->paper);
    fprintf(f, " | ");
    if (o) {
      pl_rep_md_text(f, o->text);
      fprintf(f, " | %s | ", ratio);
      pl_rep_md_text(f, o->hw);
      fprintf(f, " | ");
      pl_rep_md_text(f, o->cpu ? "CPU backend: memory exact, times not "
                                 "judged"
                               : o->basis);
      fprintf(f, " |\n");
      run++, cpu += o->cpu;
    } else
      fprintf(f, "- | - | - | not run here |\n");
  }
  fprintf(f, "\n%d of %d claims have a figure of ours in this run", run, n);
  if (cpu)
    fprintf(f, " (%d from the CPU backend, not judged)", cpu);
  fprintf(f, ".\n");
  if (!ours_of(rc->claims, "tflops:120b:131072") &&
      !ours_of(rc->claims, "reach:120b"))
    fprintf(f, "The end-to-end claims need the paper's models on their GPU "
               "counts: `jobs/sweeps/paper-grid.tsv` runs them, one rank of "
               "each on one GPU (README, the paper's grid).\n");
  fprintf(f, "\n## Charts\n\n");
  int nc = 0;
  for (size_t i = 0; i < sizeof CHARTS / sizeof CHARTS[0]; i++) {
    char stem[256];
    if (!chart_of(rc->out_dir, CHARTS[i].name, stem, sizeof stem))
      continue;
    fprintf(f, "- [%s.svg](%s.svg) ([PNG](%s.png)): %s\n", stem, stem, stem,
            CHARTS[i].what);
    nc++;
  }
  if (!nc)
    fprintf(f, "None of the claims' charts was drawn in this run.\n");
  return pl_rep_close(f, path);
}
