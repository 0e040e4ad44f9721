/* plan_table.c — `plateau plan --table paper`: for the paper's three models
 * on 16, 32 and 64 GPUs and contexts 32K…1M, the planner's choice for
 * plateau and for FSDP2-best (each the feasible configuration of the highest
 * predicted tok/s/GPU), the longest context and the largest tokens per step
 * each fits, with the paper's printed figures beside them.  Everything here
 * is a projection (engine/plan's models on the given machine), and the
 * tables say so with the assumptions they rest on. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plan_table.h"

#define NM 3
#define NG 3
#define NS 6
#define MAX_REACH (8ll << 20) /* reach is searched up to 8M tokens */

static const char *const models[NM] = {"120b", "241b", "667b"};
static const int gpus[NG] = {16, 32, 64};
static const int64_t seqs[NS] = {32768, 65536, 131072, 262144, 524288, 1048576};

/* The paper's figures (DESIGN §1.5): each model on its own GPU count. */
typedef struct paper {
  int gpus;
  double tok128k, tf128k, tok1m, tf1m; /* plateau, tok/s/GPU (TFLOP/s)    */
  int64_t fsdp2_reach;                 /* FSDP2-best OOMs past this        */
  double batch, batch_ratio;           /* plateau's largest global batch   */
  double ratio128k;                    /* throughput vs FSDP2-best at 128K */
} paper;
static const paper papers[NM] = {
    {16, 1355, 91, 642, 221, 131072, 1.5e6, 12, 7.6},
    {32, 866, 110, 314, 213, 32768, 1.8e6, 7, 0},
    {64, 316, 107, 124, 233, 65536, 3.0e6, 3, 0},
};

typedef struct cell {
  bool fits;
  double tok, tflops, peak;
  char cfg[200];
} cell;

typedef struct reach {
  int64_t max_seq;    /* longest context of the list that fits (0: none) */
  int64_t max_tokens; /* largest tokens per step (W · tokens per rank)    */
} reach;

static void seq_name(int64_t s, char *buf, size_t n) {
  if (s >= 1048576 && s % 1048576 == 0)
    snprintf(buf, n, "%lldM", (long long)(s / 1048576));
  else
    snprintf(buf, n, "%lldK", (long long)(s / 1024));
}

static void tokens_name(double t, char *buf, size_t n) {
  if (t <= 0)
    snprintf(buf, n, "none");
  else if (t >= 1e6)
    snprintf(buf, n, "%.2fM", t / 1e6);
  else
    snprintf(buf, n, "%.0fK", t / 1e3);
}

static pl_status best_of(const pl_model_cfg *m, pl_plan_system sys, int W,
                         int64_t S, const pl_plan_machine *mc, cell *out) {
  memset(out, 0, sizeof *out);
  pl_plan_cfg base = sys == PL_PLAN_FSDP2 ? pl_plan_cfg_fsdp2(m, W, S)
                                          : pl_plan_cfg_plateau(W, S);
  /* mbs stays 1: one sequence per data-parallel group, as plateau runs one
   * per D-group (more would raise the tokens per step at a context) */
  pl_plan_free fr = {.D = true,
                     .P = true,
                     .c = true,
                     .beta = true,
                     .sco = true,
                     .optim = true,
                     .cp = true,
                     .ep = true,
                     .ac = true,
                     .offload = true,
                     .mbs = false,
                     .resident = true,
                     .keep = true};
  pl_plan_search *s = calloc(1, sizeof *s);
  if (!s)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_status st = pl_plan_auto(m, &base, &fr, mc, s);
  if (st == PL_OK && s->have_best) {
    out->fits = true;
    out->tok = s->best.time.tok_s_gpu;
    out->tflops = s->best.time.tflops_gpu;
    out->peak = (double)s->best.mem.dev_peak;
    pl_plan_cfg_str(&s->best.cfg, out->cfg, sizeof out->cfg);
  } else if (st == PL_OK) {
    snprintf(out->cfg, sizeof out->cfg, "none fits (%s)", s->binding);
  }
  free(s);
  return st;
}

static int64_t max_tokens(const pl_model_cfg *m, pl_plan_system sys, int W,
                          const pl_plan_machine *mc) {
  pl_plan_cfg base = sys == PL_PLAN_FSDP2 ? pl_plan_cfg_fsdp2(m, W, 8192)
                                          : pl_plan_cfg_plateau(W, 8192);
  pl_plan_free fr = {.D = true,
                     .P = true,
                     .c = true,
                     .beta = true,
                     .sco = true,
                     .optim = true,
                     .cp = true,
                     .ep = true,
                     .ac = true,
                     .offload = true,
                     .mbs = true};
  return (int64_t)W * pl_plan_max_tokens(m, &base, &fr, mc, 4096, 8 << 20);
}

static FILE *open_out(const char *dir, const char *name, char *path, size_t n) {
  snprintf(path, n, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f)
    fprintf(stderr, "plateau plan: cannot write %s: %s\n", path,
            strerror(errno));
  return f;
}

static const char *analysis_dir(void) {
  static char buf[4096];
  const char *root = getenv("PLATEAU_ROOT");
  struct stat sb;
  if (root && *root) {
    snprintf(buf, sizeof buf, "%s/analysis", root);
    if (stat(buf, &sb) == 0 && S_ISDIR(sb.st_mode))
      return buf;
  }
  char exe[2048];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      snprintf(buf, sizeof buf, "%s/../../analysis", exe);
      if (stat(buf, &sb) == 0 && S_ISDIR(sb.st_mode))
        return buf;
    }
  }
  return stat("analysis", &sb) == 0 ? "analysis" : NULL;
}

/* gnuplot -c script data out: 0 drawn, 127 gnuplot missing, else failed */
static int gnuplot(const char *script, const char *data, const char *out) {
  const char *prog = getenv("PLATEAU_GNUPLOT");
  if (!prog || !*prog)
    prog = "gnuplot";
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    execlp(prog, prog, "-c", script, data, out, (char *)NULL);
    _exit(127);
  }
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static void assumptions(FILE *f, const pl_plan_machine *mc) {
  fprintf(f,
          "These are **projections**, not measurements: engine/plan's memory "
          "model (the step's allocations replayed by tag; checked against the "
          "tracked peaks within 5%% in CI) and time model on the machine `%s` "
          "(`plateau plan --machine` lists every rate).  Assumptions: one "
          "rank per GPU, %d GPUs per node, %.1f GiB of HBM per GPU "
          "(%.1f GiB held back), %.0f GiB of host RAM per node; balanced "
          "routing (received rows = sent rows); our attention kernels at "
          "%.0f / %.0f TFLOP/s (fwd / bwd), expert GEMMs at %.0f%% of %.0f "
          "TFLOP/s; inter-node %.0f GB/s per GPU with %.0f us latency; "
          "FSDP2-best = torchtitan's FSDP2 + full/selective AC + EP + CP + "
          "optional CPU offload as baselines/fsdp2 runs it, its allocations "
          "replayed (engine/plan/fsdp2.c; held within 5%% of the baseline's "
          "tracked peaks in CI: fp32 sharded state, fp32 unsharded "
          "gradients, dense CE on full logits per CP shard, ring "
          "attention), PyTorch SDPA at %.0f "
          "TFLOP/s.  TFLOP/s count model FLOPs (6 × active parameters + "
          "6·S·d·n_q per layer, README): about 1.14× the paper's measure at "
          "1M.  The paper's figures are its own runs on 16 / 32 / 64 H200.\n\n",
          mc->source, mc->gpus_per_node, mc->hbm_bytes / 1073741824.0,
          mc->hbm_reserve / 1073741824.0, mc->host_bytes / 1073741824.0,
          mc->attn_fwd_tflops, mc->attn_bwd_tflops, 100 * mc->expert_eff,
          mc->gemm_tflops, mc->ib_gbs, mc->ib_lat_us, mc->fsdp2_attn_tflops);
}

int pl_plan_table_paper(const pl_plan_machine *mc, const char *out_dir,
                        bool tsv) {
  static cell pc[NM][NG][NS], fc[NM][NG][NS];
  reach pr[NM][NG], fr[NM][NG];
  memset(pr, 0, sizeof pr), memset(fr, 0, sizeof fr);
  for (int i = 0; i < NM; i++) {
    pl_model_cfg m;
    if (pl_model_preset(models[i], &m) != PL_OK)
      return 3;
    for (int g = 0; g < NG; g++) {
      for (int s = 0; s < NS; s++) {
        if (best_of(&m, PL_PLAN_PLATEAU, gpus[g], seqs[s], mc, &pc[i][g][s]) ||
            best_of(&m, PL_PLAN_FSDP2, gpus[g], seqs[s], mc, &fc[i][g][s])) {
          fprintf(stderr, "plateau plan: %s\n", pl_last_error());
          return 3;
        }
        if (pc[i][g][s].fits)
          pr[i][g].max_seq = seqs[s];
        if (fc[i][g][s].fits)
          fr[i][g].max_seq = seqs[s];
      }
      /* reach beyond the table's contexts: 2M, 4M, 8M while it fits */
      for (int y = 0; y < 2; y++) {
        reach *r = y ? &fr[i][g] : &pr[i][g];
        for (int64_t S = 2 * seqs[NS - 1];
             r->max_seq == S / 2 && S <= MAX_REACH; S *= 2) {
          cell x;
          if (best_of(&m, y ? PL_PLAN_FSDP2 : PL_PLAN_PLATEAU, gpus[g], S, mc,
                      &x)) {
            fprintf(stderr, "plateau plan: %s\n", pl_last_error());
            return 3;
          }
          if (x.fits)
            r->max_seq = S;
        }
      }
      pr[i][g].max_tokens = max_tokens(&m, PL_PLAN_PLATEAU, gpus[g], mc);
      fr[i][g].max_tokens = max_tokens(&m, PL_PLAN_FSDP2, gpus[g], mc);
    }
  }
  FILE *md = stdout, *ts = tsv ? stdout : NULL, *rc = NULL;
  char path[4096];
  if (out_dir) {
    if (mkdir(out_dir, 0775) != 0 && errno != EEXIST) {
      fprintf(stderr, "plateau plan: cannot create %s: %s\n", out_dir,
              strerror(errno));
      return 3;
    }
    if (!(md = open_out(out_dir, "plan_paper.md", path, sizeof path)) ||
        !(ts = open_out(out_dir, "plan_paper.tsv", path, sizeof path)) ||
        !(rc = open_out(out_dir, "plan_reach.tsv", path, sizeof path)))
      return 3;
  }
  char a[32], b[32];
  if (ts) {
    fprintf(ts,
            "# plateau plan --table paper: projections (engine/plan) on "
            "the machine %s\n",
            mc->source);
    fprintf(ts, "bench\tvariant\tmodel\tranks\tseq\tstatus\ttok_s_gpu\t"
                "tflops\tdev_peak_bytes\tconfig\tpaper_tok_s_gpu\t"
                "paper_tflops\tnote\n");
    for (int i = 0; i < NM; i++)
      for (int g = 0; g < NG; g++)
        for (int s = 0; s < NS; s++)
          for (int y = 0; y < 2; y++) {
            const cell *c = y ? &fc[i][g][s] : &pc[i][g][s];
            const paper *p = &papers[i];
            double ptok = NAN, ptf = NAN;
            if (!y && p->gpus == gpus[g] && seqs[s] == 131072)
              ptok = p->tok128k, ptf = p->tf128k;
            if (!y && p->gpus == gpus[g] && seqs[s] == 1048576)
              ptok = p->tok1m, ptf = p->tf1m;
            fprintf(ts, "plan\t%s\t%s\t%d\t%lld\t%s\t", y ? "fsdp2" : "plateau",
                    models[i], gpus[g], (long long)seqs[s],
                    c->fits ? "ok" : "infeasible");
            if (c->fits)
              fprintf(ts, "%.1f\t%.1f\t%.0f\t", c->tok, c->tflops, c->peak);
            else
              fprintf(ts, "-\t-\t-\t");
            fprintf(ts, "%s\t", c->cfg);
            if (isnan(ptok))
              fprintf(ts, "-\t-\t");
            else
              fprintf(ts, "%.0f\t%.0f\t", ptok, ptf);
            fprintf(ts, "projection\n");
          }
    if (!out_dir)
      return 0;
  }
  /* Markdown */
  fprintf(md,
          "# The paper's end-to-end points, projected by `plateau plan`\n\n");
  assumptions(md, mc);
  fprintf(md, "## Throughput by context (tok/s/GPU, model TFLOP/s/GPU)\n\n");
  fprintf(md, "| model | GPUs | context | plateau | FSDP2-best | ratio | "
              "paper: plateau | paper: FSDP2-best |\n|---|---|---|---|---|---|"
              "---|---|\n");
  for (int i = 0; i < NM; i++)
    for (int g = 0; g < NG; g++)
      for (int s = 0; s < NS; s++) {
        const cell *p = &pc[i][g][s], *f = &fc[i][g][s];
        const paper *pp = &papers[i];
        seq_name(seqs[s], a, sizeof a);
        fprintf(md, "| %s | %d | %s | ", models[i], gpus[g], a);
        if (p->fits)
          fprintf(md, "%.0f (%.0f) | ", p->tok, p->tflops);
        else
          fprintf(md, "OOM | ");
        if (f->fits)
          fprintf(md, "%.0f (%.0f) | ", f->tok, f->tflops);
        else
          fprintf(md, "OOM | ");
        if (p->fits && f->fits)
          fprintf(md, "%.1f× | ", p->tok / f->tok);
        else
          fprintf(md, "%s | ", p->fits ? "∞ (FSDP2 OOM)" : "-");
        const bool mine = pp->gpus == gpus[g];
        if (mine && seqs[s] == 131072)
          fprintf(md, "%.0f (%.0f) | ", pp->tok128k, pp->tf128k);
        else if (mine && seqs[s] == 1048576)
          fprintf(md, "%.0f (%.0f) | ", pp->tok1m, pp->tf1m);
        else
          fprintf(md, " | ");
        if (mine && seqs[s] > pp->fsdp2_reach)
          fprintf(md, "OOM |\n");
        else if (mine && seqs[s] == 131072 && pp->ratio128k > 0)
          fprintf(md, "%.0f (%.1f× less) |\n", pp->tok128k / pp->ratio128k,
                  pp->ratio128k);
        else
          fprintf(md, " |\n");
      }
  fprintf(md, "\n## Reach and batch\n\n");
  fprintf(md, "| model | GPUs | plateau: longest context | FSDP2-best: "
              "longest | paper: FSDP2-best OOM past | plateau: largest "
              "tokens/step | FSDP2-best: largest | ratio | paper: plateau "
              "batch (ratio) |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < NM; i++)
    for (int g = 0; g < NG; g++) {
      const paper *pp = &papers[i];
      const bool mine = pp->gpus == gpus[g];
      seq_name(pr[i][g].max_seq, a, sizeof a);
      seq_name(fr[i][g].max_seq, b, sizeof b);
      fprintf(md, "| %s | %d | %s | %s | ", models[i], gpus[g],
              pr[i][g].max_seq ? a : "none", fr[i][g].max_seq ? b : "none");
      if (mine) {
        seq_name(pp->fsdp2_reach, a, sizeof a);
        fprintf(md, "%s | ", a);
      } else {
        fprintf(md, " | ");
      }
      tokens_name((double)pr[i][g].max_tokens, a, sizeof a);
      tokens_name((double)fr[i][g].max_tokens, b, sizeof b);
      fprintf(md, "%s | %s | ", a, b);
      if (fr[i][g].max_tokens > 0)
        fprintf(md, "%.1f× | ",
                (double)pr[i][g].max_tokens / (double)fr[i][g].max_tokens);
      else
        fprintf(md, "- | ");
      if (mine)
        fprintf(md, "%.1fM (%.0f×) |\n", pp->batch / 1e6, pp->batch_ratio);
      else
        fprintf(md, " |\n");
    }
  fprintf(
      md,
      "\nLongest context: the longest of 32K, 64K, … 8M that fits.  Largest "
      "tokens per step: W × the largest tokens per rank that fit in one "
      "pass (no accumulation), any context.\n");
  if (!out_dir)
    return 0;
  /* the chart's data: one row per (model, GPUs, system) and the paper's */
  fprintf(rc, "# plateau plan --table paper: reach (projections; paper_* "
              "are the paper's figures at its own GPU count)\n");
  fprintf(rc, "model\tranks\tsystem\tmax_context\tmax_tokens_step\t"
              "paper_max_context\n");
  for (int i = 0; i < NM; i++) /* one series (model, system) a block */
    for (int y = 0; y < 2; y++)
      for (int g = 0; g < NG; g++) {
        const reach *r = y ? &fr[i][g] : &pr[i][g];
        const paper *pp = &papers[i];
        fprintf(rc, "%s\t%d\t%s\t", models[i], gpus[g],
                y ? "fsdp2" : "plateau");
        if (r->max_seq)
          fprintf(rc, "%lld\t", (long long)r->max_seq);
        else
          fprintf(rc, "-\t");
        fprintf(rc, "%lld\t", (long long)r->max_tokens);
        if (pp->gpus == gpus[g])
          fprintf(rc, "%lld\n", (long long)(y ? pp->fsdp2_reach : 1048576));
        else
          fprintf(rc, "-\n");
      }
  fclose(md), fclose(ts), fclose(rc);
  printf("%s/plan_paper.md\n%s/plan_paper.tsv\n%s/plan_reach.tsv\n", out_dir,
         out_dir, out_dir);
  const char *ad = analysis_dir();
  if (!ad) {
    fprintf(stderr, "plateau plan: warning: analysis/ not found: chart "
                    "skipped\n");
    return 0;
  }
  char script[4200], data[4200], svg[4200];
  snprintf(script, sizeof script, "%s/plan_reach.gp", ad);
  snprintf(data, sizeof data, "%s/plan_reach.tsv", out_dir);
  snprintf(svg, sizeof svg, "%s/plan_reach.svg", out_dir);
  const int code = gnuplot(script, data, svg);
  if (code == 127)
    fprintf(stderr,
            "plateau plan: warning: gnuplot not found: chart skipped\n");
  else if (code != 0) {
    fprintf(stderr, "plateau plan: gnuplot -c %s %s %s: exit %d\n", script,
            data, svg, code);
    return 3;
  } else
    printf("%s\n", svg);
  return 0;
}
