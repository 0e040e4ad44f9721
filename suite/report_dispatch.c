/* report_dispatch.c — the report hook of `plateau bench dispatch`: the layouts
 * of the paper's Table 6 (LLEP vs PipelinedLLEP: time and peak per shape and
 * profile, speed-up and peak reduction) and Table 8 (strided vs contiguous
 * chunks: time, peak, max-send ratio), our numbers beside the paper's printed
 * ones, plus every row, and a chart of peak memory and time per variant and
 * profile (analysis/dispatch.gp, SVG + PNG).
 *
 * Paper numbers (Pandit et al., arXiv 2609.14306, Tables 6 and 8, as quoted
 * in DESIGN.md §1.1 and issue 3; 8xH200, E=128, Ep=8, bf16):
 *   65K/rank, H 7168, I 2048, top-8, c 6554 (K=10): LLEP 177.8 ms / 52.66 GiB
 *   -> PipelinedLLEP 161.0 ms / 21.43 GiB (1.10x, -59.3%); skewed profiles
 *   -56.9...-57.0% at 1.01-1.05x.  32K/rank, H=I=4096, top-4, K=3: -26.9% at
 *   1.07x.  Table 8: strided 1.03-1.35x faster than contiguous, up to 1.37 GiB
 *   less; max-send ratio strided 1.00 / 1.35 / 2.40 / 2.29, contiguous
 *   1.02-6.00. */
#include "report_dispatch.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plateau/status.h"
#include "results.h"

typedef struct rctx {
  const char *run_dir, *out_dir, *analysis_dir;
  int charts_skipped;
} rctx;

static const char *const profiles[] = {"balanced", "95/16", "80/16", "50/4"};
/* Table 8's strided max-send ratios, in the order above (issue 3 lists them
 * in the profiles' order). */
static const char *const paper_msr[] = {"1.00", "1.35", "2.40", "2.29"};

typedef struct drow {
  const char *variant, *profile, *chunking, *tokens, *hidden, *ffn, *topk,
      *ranks, *K, *gemms, *em;
  double time, fwd, peak, opeak, dpeak, bound, msr;
  const char *status, *check;
} drow;

static double num(const char *s) {
  if (!s || !*s || strcmp(s, "-") == 0) return NAN;
  char *e;
  double v = strtod(s, &e);
  return *e ? NAN : v;
}

static const char *cell(const pl_table *t, char **row, const char *col) {
  int c = pl_table_col(t, col);
  return c >= 0 ? row[c] : "-";
}

/* The last ok row of (shape, variant, profile, chunking). */
static const drow *find(const drow *r, int n, const char *tokens,
                        const char *hidden, const char *variant,
                        const char *profile, const char *chunking) {
  const drow *best = NULL;
  for (int i = 0; i < n; i++)
    if (strcmp(r[i].tokens, tokens) == 0 && strcmp(r[i].hidden, hidden) == 0 &&
        strcmp(r[i].variant, variant) == 0 &&
        strcmp(r[i].profile, profile) == 0 &&
        (!chunking || strcmp(r[i].chunking, chunking) == 0) &&
        strcmp(r[i].status, "ok") == 0)
      best = &r[i];
  return best;
}

static const char *paper_t6(const char *tokens, const char *hidden,
                            const char *profile) {
  if (strcmp(tokens, "65536") == 0 && strcmp(hidden, "7168") == 0)
    return strcmp(profile, "balanced") == 0
               ? "177.8 ms / 52.66 GiB -> 161.0 ms / 21.43 GiB (1.10x, -59.3%)"
               : "-56.9...-57.0% at 1.01-1.05x";
  if (strcmp(tokens, "32768") == 0 && strcmp(hidden, "4096") == 0)
    return "-26.9% at 1.07x (K=3)";
  return "- (not a paper shape)";
}

static pl_status run_chart(rctx *rc, const char *data,
                           const char *stem) {
  if (strlen(stem) > PATH_MAX - 8)
    return pl_set_error(PL_EINVAL, "chart path too long: %s", stem);
  if (rc->charts_skipped) return PL_OK;
  if (!rc->analysis_dir) {
    rc->charts_skipped = 1;
    return PL_OK;
  }
  char script[PATH_MAX];
  snprintf(script, sizeof script, "%s/dispatch.gp", rc->analysis_dir);
  if (access(script, R_OK) != 0)
    return pl_set_error(PL_EIO, "chart script %s: %s", script, strerror(errno));
  static const char *const exts[] = {"svg", "png"};
  for (int e = 0; e < 2; e++) {
    char out[PATH_MAX + 8];
    snprintf(out, sizeof out, "%s.%s", stem, exts[e]);
    pid_t pid = fork();
    if (pid < 0) return pl_set_error(PL_ERUNTIME, "fork: %s", strerror(errno));
    if (pid == 0) {
      const char *prog = getenv("PLATEAU_GNUPLOT");
      if (!prog || !*prog) prog = "gnuplot";
      execlp(prog, prog, "-c", script, data, out, (char *)NULL);
      _exit(127);
    }
    int wst = 0;
    if (waitpid(pid, &wst, 0) < 0)
      return pl_set_error(PL_ERUNTIME, "waitpid: %s", strerror(errno));
    int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128;
    if (code == 127) {
      fprintf(stderr, "plateau report: warning: gnuplot not found: dispatch "
                      "charts skipped\n");
      rc->charts_skipped = 1;
      return PL_OK;
    }
    if (code != 0)
      return pl_set_error(PL_ERUNTIME, "gnuplot -c %s %s %s: exit %d", script,
                          data, out, code);
    printf("%s\n", out);
  }
  return PL_OK;
}

static pl_status report_tables(rctx *rc, const char *bench,
                               pl_table *const *t, int n) {
  int total = 0;
  for (int i = 0; i < n; i++) total += t[i]->nrows;
  drow *r = calloc((size_t)(total > 0 ? total : 1), sizeof *r);
  if (!r) return pl_set_error(PL_ENOMEM, "report dispatch: rows");
  int nr = 0;
  bool cpu = false;
  for (int i = 0; i < n; i++) {
    const char *be = pl_table_meta(t[i], "backend");
    if (be && strcmp(be, "cpu") == 0) cpu = true;
    for (int j = 0; j < t[i]->nrows; j++) {
      char **row = t[i]->rows[j];
      drow *d = &r[nr++];
      d->variant = cell(t[i], row, "variant");
      d->profile = cell(t[i], row, "profile");
      d->chunking = cell(t[i], row, "chunking");
      d->tokens = cell(t[i], row, "tokens");
      d->hidden = cell(t[i], row, "hidden");
      d->ffn = cell(t[i], row, "ffn");
      d->topk = cell(t[i], row, "topk");
      d->ranks = cell(t[i], row, "ranks");
      d->K = cell(t[i], row, "K");
      d->gemms = cell(t[i], row, "gemms");
      d->em = cell(t[i], row, "em_chunks");
      d->time = num(cell(t[i], row, "time_ms"));
      d->fwd = num(cell(t[i], row, "fwd_ms"));
      d->peak = num(cell(t[i], row, "peak_gib"));
      d->opeak = num(cell(t[i], row, "op_peak_gib"));
      d->dpeak = num(cell(t[i], row, "dispatch_gib"));
      d->bound = num(cell(t[i], row, "bound_gib"));
      d->msr = num(cell(t[i], row, "max_send_ratio"));
      d->status = cell(t[i], row, "status");
      d->check = cell(t[i], row, "check");
    }
  }
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s.md", rc->out_dir, bench);
  FILE *f = fopen(path, "w");
  if (!f) {
    free(r);
    return pl_set_error(PL_EIO, "write %s: %s", path, strerror(errno));
  }
  fprintf(f, "# dispatch: ep vs LLEP vs PipelinedLLEP\n\nGenerated by "
             "`plateau report %s` from %d result file%s.  Times are fwd+bwd "
             "medians (ms); peaks are the tracked device peak of one fwd+bwd "
             "(GiB, max over ranks); the op peak is that peak above what was "
             "resident before the call (weights, fp32 gradients, activations), "
             "i.e. the operator's own live set.  Paper: 8xH200, Ep = 8; with "
             "Ep = 2 each rank holds E/2 experts' weights and fp32 gradients, "
             "so the resident share of the whole peak is larger than the "
             "paper's and the whole-peak reduction smaller.\n\n",
          rc->run_dir, n, n == 1 ? "" : "s");
  if (cpu)
    fprintf(f, "> CPU backend rows: memory columns are exact; times are CPU "
               "times.\n\n");

  /* distinct shapes (tokens, hidden) in order of appearance */
  const char *sh_t[32], *sh_h[32], *sh_r[32];
  int nsh = 0;
  for (int i = 0; i < nr && nsh < 32; i++) {
    bool seen = false;
    for (int s = 0; s < nsh; s++)
      if (!strcmp(sh_t[s], r[i].tokens) && !strcmp(sh_h[s], r[i].hidden))
        seen = true;
    if (!seen && strcmp(r[i].tokens, "-") != 0) {
      sh_t[nsh] = r[i].tokens;
      sh_h[nsh] = r[i].hidden;
      sh_r[nsh++] = r[i].ranks;
    }
  }

  fprintf(f, "## Table 6 layout: LLEP vs PipelinedLLEP (strided)\n\n");
  fprintf(f, "| shape (N/rank, H) | ranks | profile | LLEP ms | LLEP GiB | "
             "PLLEP ms | PLLEP GiB | K | speed-up | peak change | op peak LLEP -> "
             "PLLEP (GiB) | dispatch peak / bound (GiB) | paper |\n|---|---|---|"
             "---|---|---|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < nsh; s++)
    for (int p = 0; p < 4; p++) {
      const drow *a = find(r, nr, sh_t[s], sh_h[s], "llep", profiles[p], NULL);
      const drow *b = find(r, nr, sh_t[s], sh_h[s], "pipelined_llep",
                           profiles[p], "strided");
      if (!a && !b) continue;
      fprintf(f, "| %s, %s | %s | %s | ", sh_t[s], sh_h[s], sh_r[s],
              profiles[p]);
      if (a) fprintf(f, "%.1f | %.3g | ", a->time, a->peak);
      else fprintf(f, "- | - | ");
      if (b) fprintf(f, "%.1f | %.3g | %s | ", b->time, b->peak, b->K);
      else fprintf(f, "- | - | - | ");
      if (a && b)
        fprintf(f, "%.2fx | %+.1f%% | %.3g -> %.3g (%+.1f%%) | %.3g / %.3g | ",
                a->time / b->time, 100.0 * (b->peak - a->peak) / a->peak,
                a->opeak, b->opeak, 100.0 * (b->opeak - a->opeak) / a->opeak,
                b->dpeak, b->bound);
      else
        fprintf(f, "- | - | - | - | ");
      fprintf(f, "%s |\n", paper_t6(sh_t[s], sh_h[s], profiles[p]));
    }

  fprintf(f, "\n## Table 8 layout: strided vs contiguous chunks "
             "(PipelinedLLEP)\n\n");
  fprintf(f, "| shape (N/rank, H) | profile | strided ms | contiguous ms | "
             "speed-up | strided GiB | contiguous GiB | max-send strided | "
             "max-send contiguous | paper max-send strided |\n|---|---|---|"
             "---|---|---|---|---|---|---|\n");
  for (int s = 0; s < nsh; s++)
    for (int p = 0; p < 4; p++) {
      const drow *a = find(r, nr, sh_t[s], sh_h[s], "pipelined_llep",
                           profiles[p], "strided");
      const drow *b = find(r, nr, sh_t[s], sh_h[s], "pipelined_llep",
                           profiles[p], "contiguous");
      if (!a || !b) continue;
      fprintf(f, "| %s, %s | %s | %.1f | %.1f | %.2fx | %.3g | %.3g | %.2f | "
                 "%.2f | %s |\n",
              sh_t[s], sh_h[s], profiles[p], a->time, b->time,
              b->time / a->time, a->peak, b->peak, a->msr, b->msr,
              paper_msr[p]);
    }
  fprintf(f, "\nPaper (Table 8): strided 1.03-1.35x faster, up to 1.37 GiB "
             "less; contiguous max-send 1.02-6.00.  Max-send ratio here: max "
             "over (chunk, destination) of routes received / mean.\n\n");

  fprintf(f, "## All rows\n\nGEMMs/chunk: expert GEMM launches of the "
             "busiest chunk, forward + backward with recompute (11 per group: "
             "one group per expert slot when the chunk is expert-major, one "
             "per (source, expert) segment otherwise); em chunks: chunks "
             "computed expert-major ('-': a result file from before these "
             "columns).\n\n");
  fprintf(f, "| variant | profile | chunking | N | H | I | k "
             "| ranks | K | ms | fwd ms | peak GiB | dispatch GiB | bound GiB "
             "| max-send | GEMMs/chunk | em chunks | status | check |\n"
             "|---|---|---|---|---|---|---|---|"
             "---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < nr; i++)
    fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | "
               "%.3g | %.3g | %.3g | %.3g | %s | %s | %s | %s |\n",
            r[i].variant, r[i].profile, r[i].chunking, r[i].tokens,
            r[i].hidden, r[i].ffn, r[i].topk, r[i].ranks, r[i].K, r[i].time,
            r[i].fwd, r[i].peak, r[i].dpeak, r[i].bound, r[i].msr, r[i].gemms,
            r[i].em, r[i].status, r[i].check);
  if (fclose(f) != 0) {
    free(r);
    return pl_set_error(PL_EIO, "write %s: %s", path, strerror(errno));
  }
  printf("%s\n", path);

  /* chart data: one file per shape */
  pl_status st = PL_OK;
  for (int s = 0; s < nsh && st == PL_OK; s++) {
    char data[PATH_MAX + 64], stem[PATH_MAX + 64];
    snprintf(data, sizeof data, "%s/dispatch-%s-%s.tsv", rc->out_dir, sh_t[s],
             sh_h[s]);
    snprintf(stem, sizeof stem, "%s/dispatch-%s-%s", rc->out_dir, sh_t[s],
             sh_h[s]);
    FILE *d = fopen(data, "w");
    if (!d) {
      st = pl_set_error(PL_EIO, "write %s: %s", data, strerror(errno));
      break;
    }
    fprintf(d, "# dispatch N/rank=%s H=%s ranks=%s; from plateau report %s\n"
               "profile\tep_gib\tllep_gib\tpllep_gib\tep_ms\tllep_ms\t"
               "pllep_ms\n",
            sh_t[s], sh_h[s], sh_r[s], rc->run_dir);
    for (int p = 0; p < 4; p++) {
      const drow *v[3] = {
          find(r, nr, sh_t[s], sh_h[s], "ep", profiles[p], NULL),
          find(r, nr, sh_t[s], sh_h[s], "llep", profiles[p], NULL),
          find(r, nr, sh_t[s], sh_h[s], "pipelined_llep", profiles[p],
               "strided")};
      if (!v[0] && !v[1] && !v[2]) continue;
      fprintf(d, "%s", profiles[p]);
      for (int q = 0; q < 3; q++) fprintf(d, "\t%.6g", v[q] ? v[q]->peak : NAN);
      for (int q = 0; q < 3; q++) fprintf(d, "\t%.6g", v[q] ? v[q]->time : NAN);
      fprintf(d, "\n");
    }
    fclose(d);
    printf("%s\n", data);
    st = run_chart(rc, data, stem);
  }
  free(r);
  return st;
}

/* ---- files ---------------------------------------------------------------- */
static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* *.tsv under dir and its direct subdirectories (not report/). */
static void scan(const char *dir, int depth, char ***v, int *n, int *cap) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[PATH_MAX];
    int len = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (len <= 0 || len >= (int)sizeof p) continue;
    size_t nl = strlen(e->d_name);
    if (is_dir(p)) {
      if (depth == 0 && strcmp(e->d_name, "report") != 0)
        scan(p, 1, v, n, cap);
    } else if (nl > 4 && strcmp(e->d_name + nl - 4, ".tsv") == 0) {
      if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        char **nv = realloc(*v, (size_t)*cap * sizeof **v);
        PL_ASSERT(nv != NULL);
        *v = nv;
      }
      (*v)[(*n)++] = strdup(p);
    }
  }
  closedir(d);
}
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *find_analysis(void) {
  static char buf[PATH_MAX + 32];
  const char *root = getenv("PLATEAU_ROOT");
  if (root && *root) {
    snprintf(buf, sizeof buf, "%s/analysis", root);
    if (is_dir(buf)) return buf;
  }
  char exe[PATH_MAX - 32];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0';
      snprintf(buf, sizeof buf, "%s/../../analysis", exe);
      if (is_dir(buf)) return buf;
    }
  }
  return is_dir("analysis") ? "analysis" : NULL;
}

pl_status pl_report_dispatch(const char *run_dir, const char *out_dir) {
  char **v = NULL;
  int n = 0, cap = 0;
  scan(run_dir, 0, &v, &n, &cap);
  if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
  pl_table *tabs = calloc((size_t)n + 1, sizeof *tabs);
  pl_table **mine = calloc((size_t)n + 1, sizeof *mine);
  PL_ASSERT(tabs != NULL && mine != NULL);
  int nm = 0;
  for (int i = 0; i < n; i++) {
    if (pl_table_read(v[i], &tabs[i]) != PL_OK) continue;
    const char *b = pl_table_meta(&tabs[i], "bench");
    if (b && strcmp(b, "dispatch") == 0 &&
        pl_table_col(&tabs[i], "max_send_ratio") >= 0)
      mine[nm++] = &tabs[i];
  }
  pl_status st = PL_OK;
  if (nm == 0)
    st = pl_set_error(PL_EIO, "%s: no dispatch result files", run_dir);
  else if (mkdir(out_dir, 0775) != 0 && errno != EEXIST)
    st = pl_set_error(PL_EIO, "%s: %s", out_dir, strerror(errno));
  if (st == PL_OK) {
    rctx rc = {run_dir, out_dir, find_analysis(), 0};
    if (!rc.analysis_dir)
      fprintf(stderr, "plateau report: warning: no analysis/ directory found "
                      "(set PLATEAU_ROOT): dispatch charts skipped\n");
    if (!rc.analysis_dir) rc.charts_skipped = 1;
    st = report_tables(&rc, "dispatch", mine, nm);
  }
  for (int i = 0; i < n; i++) {
    pl_table_free(&tabs[i]);
    free(v[i]);
  }
  free(v);
  free(tabs);
  free(mine);
  return st;
}
