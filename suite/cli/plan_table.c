/* plan_table.c — `plateau plan --table paper`: for the paper's three models
 * on 16, 32 and 64 GPUs and contexts 32K…1M, the planner's choice for
 * plateau and for FSDP2-best (each the feasible configuration of the highest
 * predicted tok/s/GPU), the longest context and the largest tokens per step
 * each fits, with the paper's printed figures beside them.  Everything here
 * is a projection (engine/plan's models on the given machine), and the
 * tables say so with the assumptions they rest on. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plan_table.h"
#include "plateau/timer.h"
#include "results/results.h"

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
                         int64_t S, const pl_plan_machine *mc, bool first_fit,
                         cell *out) {
  memset(out, 0, sizeof *out);
  pl_plan_cfg base = sys == PL_PLAN_FSDP2 ? pl_plan_cfg_fsdp2(m, W, S)
                                          : pl_plan_cfg_plateau(W, S);
  base.sdpa = true; /* PyTorch's FSDP2: attention at SDPA's rate */
  /* one sequence per data-parallel group, as plateau runs one per D-group
   * and the FSDP2 baseline one per CP group */
  pl_plan_free fr = pl_plan_free_every();
  fr.first_fit = first_fit;
  pl_plan_search *s = calloc(1, sizeof *s);
  if (!s)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, pl_plan_auto(m, &base, &fr, mc, s));
  if (s->have_best) {
    out->fits = true;
    out->tok = s->best.time.tok_s_gpu;
    out->tflops = s->best.time.tflops_gpu;
    out->peak = (double)s->best.mem.dev_peak;
    pl_plan_cfg_str(&s->best.cfg, out->cfg, sizeof out->cfg);
  } else {
    snprintf(out->cfg, sizeof out->cfg, "none fits (%s)", s->binding);
  }
done:
  free(s);
  return st;
}

static int64_t max_tokens(const pl_model_cfg *m, pl_plan_system sys, int W,
                          const pl_plan_machine *mc) {
  pl_plan_cfg base = sys == PL_PLAN_FSDP2 ? pl_plan_cfg_fsdp2(m, W, 8192)
                                          : pl_plan_cfg_plateau(W, 8192);
  base.sdpa = true;
  pl_plan_free fr = pl_plan_free_every(); /* the frugal forms: no fill */
  fr.resident = fr.keep = false;
  return (int64_t)W * pl_plan_max_tokens(m, &base, &fr, mc, 4096, 8 << 20);
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
          "%s and time model on the machine `%s` "
          "(`plateau plan --machine` lists every rate).  Assumptions: one "
          "rank per GPU, %d GPUs per node, %.1f GiB of HBM per GPU "
          "(%.1f GiB held back), %.0f GiB of host RAM per node; balanced "
          "routing (received rows = sent rows); the engine's attention "
          "(cuDNN's fused flash attention, both systems) at %.0f / %.0f "
          "TFLOP/s (fwd / bwd), expert GEMMs at %.0f%% of %.0f "
          "TFLOP/s; inter-node %.0f GB/s per GPU with %.0f us latency; "
          "FSDP2-best = torchtitan's FSDP2 + full/selective AC + EP + CP + "
          "optional CPU offload as baselines/fsdp2 runs it, its allocations "
          "measured by the baseline's steps on a dry device (fp32 sharded "
          "state, fp32 unsharded "
          "gradients, dense CE on full logits per CP shard, ring "
          "attention), PyTorch SDPA at %.0f "
          "TFLOP/s.  TFLOP/s count model FLOPs (6 × active parameters + "
          "6·S·d·n_q per layer, doc/guide/training.md): about 1.14× the "
          "paper's measure at "
          "1M.  The paper's figures are its own runs on 16 / 32 / 64 H200.\n\n",
          "(every candidate of every search measured by a step on a dry "
          "device)",
          mc->source, mc->gpus_per_node, mc->hbm_bytes / 1073741824.0,
          mc->hbm_reserve / 1073741824.0, mc->host_bytes / 1073741824.0,
          mc->attn_fwd_tflops, mc->attn_bwd_tflops, 100 * mc->expert_eff,
          mc->gemm_tflops, mc->ib_gbs, mc->ib_lat_us, mc->fsdp2_attn_tflops);
}

/* ---- the computation, with progress on stderr ---------------------------
 * Every point (a model, a GPU count, a context, a system) is its own search,
 * and so is each largest-tokens search: they run on OpenMP's threads, each
 * writing its own cell, so the tables do not depend on the order they end
 * in.  One line per point on stderr (as the benches' harness prints its
 * points), so a terminal and a job's log both show where it is; stdout and
 * the files get only the tables. */

typedef struct table {
  cell pc[NM][NG][NS], fc[NM][NG][NS]; /* plateau, FSDP2-best */
  reach pr[NM][NG], fr[NM][NG];
} table;

typedef struct progress {
  int done, total;
  uint64_t t0;
} progress;

static void tick(progress *p, const char *model, int ngpu, const char *what) {
#pragma omp critical(plan_table_tick)
  {
    p->done++;
    const double el = pl_elapsed_s(p->t0);
    fprintf(stderr,
            "[plan --table paper] point %d/%d  elapsed %.1fs  ETA %.0fs  %s "
            "on %d GPUs, %s\n",
            p->done, p->total, el, el / p->done * (p->total - p->done), model,
            ngpu, what);
    fflush(stderr);
  }
}

/* The first failure of the jobs in their order (its message copied from the
 * thread that met it). */
typedef struct failure {
  int job; /* -1: none */
  pl_status st;
  char msg[1024];
} failure;

static void fail_at(failure *f, int job, pl_status st) {
#pragma omp critical(plan_table_fail)
  if (f->job < 0 || job < f->job) {
    f->job = job, f->st = st;
    snprintf(f->msg, sizeof f->msg, "%s", pl_last_error());
  }
}

/* Jobs of the first stage: for each model and GPU count, every context of
 * the list for both systems (NS·2), then the largest tokens per step of each
 * system (2). */
#define NJOB1 (NS * 2 + 2)

static void job1(const pl_model_cfg *ms, const pl_plan_machine *mc, table *T,
                 progress *pg, failure *fl, int j) {
  const int i = j / (NG * NJOB1), g = j / NJOB1 % NG, q = j % NJOB1;
  char a[32];
  if (q >= NS * 2) {
    const int y = q - NS * 2;
    reach *r = y ? &T->fr[i][g] : &T->pr[i][g];
    r->max_tokens =
        max_tokens(&ms[i], y ? PL_PLAN_FSDP2 : PL_PLAN_PLATEAU, gpus[g], mc);
    tick(pg, models[i], gpus[g],
         y ? "largest tokens per step, FSDP2-best"
           : "largest tokens per step, plateau");
    return;
  }
  const int s = q / 2, y = q % 2;
  cell *c = y ? &T->fc[i][g][s] : &T->pc[i][g][s];
  const pl_status st = best_of(&ms[i], y ? PL_PLAN_FSDP2 : PL_PLAN_PLATEAU,
                               gpus[g], seqs[s], mc, false, c);
  if (st != PL_OK) {
    fail_at(fl, j, st);
    return;
  }
  seq_name(seqs[s], a, sizeof a);
  char what[64];
  snprintf(what, sizeof what, "%s, %s", a,
           y ? PL_PLAN_NAME_FSDP2 : PL_PLAN_NAME_PLATEAU);
  tick(pg, models[i], gpus[g], what);
}

/* The second stage, one job per model, GPU count and system: the reach
 * beyond the table's contexts, 2M, 4M, 8M while it fits. */
static void job2(const pl_model_cfg *ms, const pl_plan_machine *mc, table *T,
                 progress *pg, failure *fl, int j) {
  const int i = j / (NG * 2), g = j / 2 % NG, y = j % 2;
  reach *r = y ? &T->fr[i][g] : &T->pr[i][g];
  for (int64_t S = 2 * seqs[NS - 1]; r->max_seq == S / 2 && S <= MAX_REACH;
       S *= 2) {
    cell x; /* whether any configuration fits: the first that does */
    const pl_status st = best_of(&ms[i], y ? PL_PLAN_FSDP2 : PL_PLAN_PLATEAU,
                                 gpus[g], S, mc, true, &x);
    if (st != PL_OK) {
      fail_at(fl, NM * NG * NJOB1 + j, st);
      return;
    }
    if (x.fits)
      r->max_seq = S;
  }
  tick(pg, models[i], gpus[g], y ? "reach, FSDP2-best" : "reach, plateau");
}

static pl_status compute(const pl_plan_machine *mc, table *T) {
  memset(T, 0, sizeof *T);
  pl_model_cfg ms[NM];
  for (int i = 0; i < NM; i++)
    PL_TRY(pl_model_preset(models[i], &ms[i]));
  const int n1 = NM * NG * NJOB1, n2 = NM * NG * 2;
  progress pg = {0, n1 + n2, pl_now_ns()};
  failure fl = {.job = -1};
  /* the largest model's jobs first (the longest searches), so that no
   * long one starts last while the other threads idle */
#pragma omp parallel for schedule(dynamic, 1)
  for (int j = 0; j < n1; j++)
    job1(ms, mc, T, &pg, &fl, n1 - 1 - j);
  if (fl.job >= 0)
    return pl_set_error(fl.st, "%s", fl.msg);
  /* the longest context of the list each fits */
  for (int i = 0; i < NM; i++)
    for (int g = 0; g < NG; g++)
      for (int s = 0; s < NS; s++) {
        if (T->pc[i][g][s].fits)
          T->pr[i][g].max_seq = seqs[s];
        if (T->fc[i][g][s].fits)
          T->fr[i][g].max_seq = seqs[s];
      }
#pragma omp parallel for schedule(dynamic, 1)
  for (int j = 0; j < n2; j++)
    job2(ms, mc, T, &pg, &fl, n2 - 1 - j);
  if (fl.job >= 0)
    return pl_set_error(fl.st, "%s", fl.msg);
  return PL_OK;
}

/* ---- the outputs --------------------------------------------------------- */

static void write_tsv(FILE *ts, const pl_plan_machine *mc, const table *T) {
  fprintf(ts,
          "# plateau plan --table paper: projections (engine/plan) on "
          "the machine %s; every candidate's memory measured on a dry "
          "device\n",
          mc->source);
  fprintf(ts, "bench\tvariant\tmodel\tranks\tseq\tstatus\ttok_s_gpu\t"
              "tflops\tdev_peak_bytes\tconfig\tpaper_tok_s_gpu\t"
              "paper_tflops\tnote\n");
  for (int i = 0; i < NM; i++)
    for (int g = 0; g < NG; g++)
      for (int s = 0; s < NS; s++)
        for (int y = 0; y < 2; y++) {
          const cell *c = y ? &T->fc[i][g][s] : &T->pc[i][g][s];
          const paper *p = &papers[i];
          double ptok = NAN, ptf = NAN;
          if (!y && p->gpus == gpus[g] && seqs[s] == 131072)
            ptok = p->tok128k, ptf = p->tf128k;
          if (!y && p->gpus == gpus[g] && seqs[s] == 1048576)
            ptok = p->tok1m, ptf = p->tf1m;
          fprintf(ts, "plan\t%s\t%s\t%d\t%lld\t%s\t",
                  y ? PL_PLAN_NAME_FSDP2 : PL_PLAN_NAME_PLATEAU, models[i],
                  gpus[g], (long long)seqs[s], c->fits ? "ok" : "infeasible");
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
}

static void md_throughput(FILE *md, const table *T) {
  char a[32];
  fprintf(md, "## Throughput by context (tok/s/GPU, model TFLOP/s/GPU)\n\n");
  fprintf(md, "| model | GPUs | context | plateau | FSDP2-best | ratio | "
              "paper: plateau | paper: FSDP2-best |\n|---|---|---|---|---|---|"
              "---|---|\n");
  for (int i = 0; i < NM; i++)
    for (int g = 0; g < NG; g++)
      for (int s = 0; s < NS; s++) {
        const cell *p = &T->pc[i][g][s], *f = &T->fc[i][g][s];
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
}

static void md_reach(FILE *md, const table *T) {
  char a[32], b[32];
  fprintf(md, "\n## Reach and batch\n\n");
  fprintf(md, "| model | GPUs | plateau: longest context | FSDP2-best: "
              "longest | paper: FSDP2-best OOM past | plateau: largest "
              "tokens/step | FSDP2-best: largest | ratio | paper: plateau "
              "batch (ratio) |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < NM; i++)
    for (int g = 0; g < NG; g++) {
      const paper *pp = &papers[i];
      const reach *pr = &T->pr[i][g], *fr = &T->fr[i][g];
      const bool mine = pp->gpus == gpus[g];
      seq_name(pr->max_seq, a, sizeof a);
      seq_name(fr->max_seq, b, sizeof b);
      fprintf(md, "| %s | %d | %s | %s | ", models[i], gpus[g],
              pr->max_seq ? a : "none", fr->max_seq ? b : "none");
      if (mine) {
        seq_name(pp->fsdp2_reach, a, sizeof a);
        fprintf(md, "%s | ", a);
      } else {
        fprintf(md, " | ");
      }
      tokens_name((double)pr->max_tokens, a, sizeof a);
      tokens_name((double)fr->max_tokens, b, sizeof b);
      fprintf(md, "%s | %s | ", a, b);
      if (fr->max_tokens > 0)
        fprintf(md, "%.1f× | ",
                (double)pr->max_tokens / (double)fr->max_tokens);
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
}

static void write_md(FILE *md, const pl_plan_machine *mc, const table *T) {
  fprintf(md,
          "# The paper's end-to-end points, projected by `plateau plan`\n\n");
  assumptions(md, mc);
  md_throughput(md, T);
  md_reach(md, T);
}

/* the chart's data: one row per (model, GPUs, system) and the paper's */
static void write_reach(FILE *rc, const table *T) {
  fprintf(rc, "# plateau plan --table paper: reach (projections; paper_* "
              "are the paper's figures at its own GPU count)\n");
  fprintf(rc, "model\tranks\tsystem\tmax_context\tmax_tokens_step\t"
              "paper_max_context\n");
  for (int i = 0; i < NM; i++) /* one series (model, system) a block */
    for (int y = 0; y < 2; y++)
      for (int g = 0; g < NG; g++) {
        const reach *r = y ? &T->fr[i][g] : &T->pr[i][g];
        const paper *pp = &papers[i];
        fprintf(rc, "%s\t%d\t%s\t", models[i], gpus[g],
                y ? PL_PLAN_NAME_FSDP2 : PL_PLAN_NAME_PLATEAU);
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
}

/* ---- the output directory: checked first, files renamed into place ------ */

/* three files written here, then the chart in two formats (gnuplot writes
 * them) */
enum { NFILE = 3, NOUT = 5 };
static const char *const out_names[NOUT] = {"plan_paper.md", "plan_paper.tsv",
                                            "plan_reach.tsv", "plan_reach.svg",
                                            "plan_reach.png"};

pl_status pl_plan_table_check_out(const char *dir) {
  if (pl_results_dir_check(dir) != PL_OK) {
    return pl_error_prefix(PL_EINVAL, "--out=%s: ", dir);
  }
  for (int k = 0; k < NOUT; k++) {
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, out_names[k]);
    if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
      return pl_set_error(PL_EINVAL,
                          "--out=%s: %s exists and is not a regular file "
                          "(allowed: a new or regular file, replaced)",
                          dir, out_names[k]);
  }
  return PL_OK;
}

/* mkdir -p (the check above saw every existing part a directory) */
static int make_dirs(const char *dir) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1;; p++) {
    if (*p != '/' && *p)
      continue;
    const char c = *p;
    *p = 0;
    if (mkdir(buf, 0775) != 0 && errno != EEXIST) {
      fprintf(stderr, "plateau plan: cannot create %s: %s\n", buf,
              strerror(errno));
      return -1;
    }
    if (!c)
      return 0;
    *p = c;
  }
}

/* the files under temporary names beside their targets, until renamed */
typedef struct outs {
  char tmp[NOUT][PATH_MAX], dst[NOUT][PATH_MAX];
  FILE *f[NFILE];
} outs;

static void outs_drop(outs *o) {
  for (int k = 0; k < NOUT; k++) {
    if (k < NFILE && o->f[k])
      fclose(o->f[k]);
    if (o->tmp[k][0])
      unlink(o->tmp[k]);
  }
}

static int outs_open(outs *o, const char *dir) {
  memset(o, 0, sizeof *o);
  for (int k = 0; k < NOUT; k++) {
    snprintf(o->dst[k], PATH_MAX, "%s/%s", dir, out_names[k]);
    const char *dot = strrchr(out_names[k], '.');
    snprintf(o->tmp[k], PATH_MAX, "%s/.%.*s.XXXXXX%s", dir,
             (int)(dot - out_names[k]), out_names[k], dot);
    int fd = mkstemps(o->tmp[k], (int)strlen(dot));
    if (fd < 0) {
      fprintf(stderr, "plateau plan: cannot write in %s: %s\n", dir,
              strerror(errno));
      o->tmp[k][0] = 0;
      outs_drop(o);
      return -1;
    }
    if (k < NFILE) {
      o->f[k] = fdopen(fd, "w");
      if (!o->f[k])
        close(fd);
    } else {
      close(fd); /* a chart: gnuplot writes it */
    }
  }
  return 0;
}

/* close, mode 0666 less the umask, rename; the charts only when drawn */
static int outs_commit(outs *o, bool chart) {
  const mode_t um = umask(0);
  umask(um);
  int bad = 0;
  for (int k = 0; k < NFILE; k++) {
    bad |= !o->f[k] || ferror(o->f[k]) || fclose(o->f[k]) != 0;
    o->f[k] = NULL;
  }
  for (int k = 0; k < NOUT && !bad; k++) {
    if (k >= NFILE && !chart)
      break;
    chmod(o->tmp[k], 0666 & ~um);
    if (rename(o->tmp[k], o->dst[k]) != 0) {
      fprintf(stderr, "plateau plan: cannot write %s: %s\n", o->dst[k],
              strerror(errno));
      bad = 1;
    } else {
      o->tmp[k][0] = 0;
    }
  }
  if (bad)
    fprintf(stderr, "plateau plan: writing the tables failed\n");
  outs_drop(o);
  return bad ? 3 : 0;
}

/* plan_reach.svg and .png into their temporary files: drawn (1), skipped
 * (0, a warning says why), failed (-1) */
static int draw(const outs *o) {
  const char *ad = analysis_dir();
  if (!ad) {
    fprintf(stderr, "plateau plan: warning: analysis/ not found: chart "
                    "skipped\n");
    return 0;
  }
  char script[4200];
  snprintf(script, sizeof script, "%s/plan_reach.gp", ad);
  for (int k = NFILE; k < NOUT; k++) {
    const int code = gnuplot(script, o->tmp[2], o->tmp[k]);
    if (code == 127) {
      fprintf(stderr,
              "plateau plan: warning: gnuplot not found: chart skipped\n");
      return 0;
    }
    if (code != 0) {
      fprintf(stderr, "plateau plan: gnuplot -c %s %s %s: exit %d\n", script,
              o->tmp[2], o->tmp[k], code);
      return -1;
    }
  }
  return 1;
}

int pl_plan_table_paper(const pl_plan_machine *mc, const char *out_dir,
                        bool tsv) {
  static table T;
  if (compute(mc, &T) != PL_OK) {
    fprintf(stderr, "plateau plan: %s\n", pl_last_error());
    return 3;
  }
  if (!out_dir) {
    if (tsv)
      write_tsv(stdout, mc, &T);
    else
      write_md(stdout, mc, &T);
    return fflush(stdout) == 0 ? 0 : 3;
  }
  outs o;
  if (make_dirs(out_dir) != 0 || outs_open(&o, out_dir) != 0)
    return 3;
  write_md(o.f[0], mc, &T);
  write_tsv(o.f[1], mc, &T);
  write_reach(o.f[2], &T);
  fflush(o.f[2]); /* gnuplot reads it before the rename */
  const int drawn = draw(&o);
  if (drawn < 0) {
    outs_drop(&o);
    return 3;
  }
  const int code = outs_commit(&o, drawn > 0);
  if (code == 0) {
    for (int k = 0; k < (drawn > 0 ? NOUT : NFILE); k++)
      printf("%s\n", o.dst[k]);
  }
  return code;
}
