/* report_util.c — helpers shared by the `plateau report` hooks (see
 * report_util.h).  They were written once per hook by the first authors of
 * report.c and report_<bench>.c; one copy keeps the file discovery, the
 * number parsing and the gnuplot calling the same for every bench. */
#include "report_util.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plateau/plateau.h"

/* ---- files ---------------------------------------------------------------- */
bool pl_rep_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void push(char ***v, int *n, int *cap, const char *p) {
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 16;
    char **nv = realloc(*v, (size_t)*cap * sizeof **v);
    PL_ASSERT(nv != NULL);
    *v = nv;
  }
  (*v)[(*n)++] = strdup(p);
}

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
    if (pl_rep_is_dir(p)) {
      if (depth == 0 && strcmp(e->d_name, "report") != 0)
        scan(p, 1, v, n, cap);
    } else if (nl > 4 && strcmp(e->d_name + nl - 4, ".tsv") == 0) {
      push(v, n, cap, p);
    }
  }
  closedir(d);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int pl_rep_scan_tsv(const char *run_dir, char ***paths) {
  int n = 0, cap = 0;
  *paths = NULL;
  scan(run_dir, 0, paths, &n, &cap);
  if (n > 1) qsort(*paths, (size_t)n, sizeof **paths, cmp_str);
  return n;
}

void pl_rep_free_paths(char **paths, int n) {
  for (int i = 0; i < n; i++) free(paths[i]);
  free(paths);
}

int pl_rep_read_tables(const char *run_dir, pl_table **tables) {
  char **v;
  int n = pl_rep_scan_tsv(run_dir, &v), nt = 0;
  pl_table *t = calloc((size_t)n + 1, sizeof *t);
  PL_ASSERT(t != NULL);
  for (int i = 0; i < n; i++)
    if (pl_table_read(v[i], &t[nt]) == PL_OK) nt++;
  pl_rep_free_paths(v, n);
  *tables = t;
  return nt;
}

void pl_rep_free_tables(pl_table *tables, int n) {
  for (int i = 0; i < n; i++) pl_table_free(&tables[i]);
  free(tables);
}

pl_status pl_rep_mkdir(const char *out_dir) {
  if (mkdir(out_dir, 0775) != 0 && errno != EEXIST)
    return pl_set_error(PL_EIO, "%s: %s", out_dir, strerror(errno));
  return PL_OK;
}

/* ---- cells ---------------------------------------------------------------- */
const char *pl_rep_cell(const pl_table *t, char **row, const char *col) {
  int c = pl_table_col(t, col);
  return c >= 0 ? row[c] : "-";
}

double pl_rep_num(const char *s) {
  if (!s || !*s || strcmp(s, "-") == 0) return NAN;
  char *end;
  double v = strtod(s, &end);
  return *end ? NAN : v;
}

double pl_rep_num_lead(const char *s) {
  if (!s || !*s || strcmp(s, "-") == 0) return NAN;
  return strtod(s, NULL);
}

/* ---- Markdown and formats --------------------------------------------------- */
void pl_rep_md_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '|') fputc('\\', f);
    fputc(*s, f);
  }
}

const char *pl_rep_fmt(char *buf, size_t n, const char *fmt, double v,
                       const char *nan) {
  if (isnan(v))
    snprintf(buf, n, "%s", nan);
  else
    snprintf(buf, n, fmt, v);
  return buf;
}

/* ---- charts ------------------------------------------------------------------ */
const char *pl_rep_analysis_dir(void) {
  static char buf[PATH_MAX + 32];
  const char *root = getenv("PLATEAU_ROOT");
  if (root && *root) {
    snprintf(buf, sizeof buf, "%s/analysis", root);
    if (pl_rep_is_dir(buf)) return buf;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0'; /* .../build/bin */
      snprintf(buf, sizeof buf, "%s/../../analysis", exe);
      if (pl_rep_is_dir(buf)) return buf;
    }
  }
  return pl_rep_is_dir("analysis") ? "analysis" : NULL;
}

int pl_rep_gnuplot(const char *script, const char *const *args, int nargs) {
  const char *prog = getenv("PLATEAU_GNUPLOT");
  if (!prog || !*prog) prog = "gnuplot";
  char *argv[16];
  int k = 0;
  argv[k++] = (char *)prog;
  argv[k++] = (char *)"-c";
  argv[k++] = (char *)script;
  for (int i = 0; i < nargs && k < 15; i++) argv[k++] = (char *)args[i];
  argv[k] = NULL;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execvp(prog, argv);
    _exit(127);
  }
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

pl_status pl_rep_chart(const char *script, const char *data,
                       const char *out_stem, const char *const *extra,
                       int nextra, const char *skipped, int *charts_skipped) {
  static const char *const exts[] = {"svg", "png"};
  for (int e = 0; e < 2; e++) {
    char out[PATH_MAX + 8];
    snprintf(out, sizeof out, "%s.%s", out_stem, exts[e]);
    const char *args[8] = {data, out};
    int na = 2;
    for (int i = 0; i < nextra && na < 8; i++) args[na++] = extra[i];
    int code = pl_rep_gnuplot(script, args, na);
    if (code == 127) {
      fprintf(stderr, "plateau report: warning: gnuplot not found: %s\n",
              skipped);
      *charts_skipped = 1;
      return PL_OK;
    }
    if (code != 0)
      return pl_set_error(PL_ERUNTIME, "gnuplot -c %s %s %s: exit %d", script,
                          data, out, code);
    printf("%s\n", out);
  }
  return PL_OK;
}
