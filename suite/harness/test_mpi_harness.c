/* test_mpi_harness.c — the bench harness (bench.h) on a bench defined here,
 * under mpirun -np 1..4 (make test-mpi), CPU backend:
 *  - a failing compare on one rank makes the row check=fail (the first bad
 *    index and the rank in the note) and the exit code 1;
 *  - an out-of-memory setup on one rank is an oom row for every rank's row
 *    and the sweep goes on (the next point ok, exit 0); an error status is an
 *    error row;
 *  - ok rows carry the CPU-times note;
 *  - a time is the slowest rank's (rank r sleeps (r + 1)·4 ms per run);
 *    peaks are the max over ranks (rank r allocates (r + 1) KiB of tag
 *    "attention" per run) and op_peak_bytes is the peak above what was
 *    resident when the unit started;
 *  - init() refusing the options (PL_EINVAL) exits 2 and writes nothing.
 * Checks are soft on rank 0 (every rank keeps issuing the same
 * collectives); their count is agreed and asserted everywhere. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "core/check_run.h"
#include "plateau/plateau.h"
#include "results/results.h"

static int g_rank, g_size, g_nfail;
static char g_dir[256];
static pl_dev *g_dev; /* for the test's own agreement */
static pl_comm *g_comm;

static void soft(bool ok, const char *fmt, ...) {
  if (ok)
    return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[r%d] FAIL: ", g_rank);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  g_nfail++;
}

/* ---- the bench under test
 * ---------------------------------------------------- Points: 0 ok, 1 a
 * compare failing on the last rank (--fail), 2 oom on the last rank's setup
 * (--oom), 3 an error status in setup (--error), 4 ok. */
typedef struct tb {
  pl_bench_ctx *c;
  void *resident;
  bool fail, oom, error;
} tb;

static const pl_opt tb_opts[] = {
    {"fail", 0, PL_OPT_FLAG, NULL, "point 1's compare fails on the last rank",
     0, 0, NULL},
    {"oom", 0, PL_OPT_FLAG, NULL, "point 2's setup is oom on the last rank", 0,
     0, NULL},
    {"error", 0, PL_OPT_FLAG, NULL, "point 3's setup fails", 0, 0, NULL},
    {"refuse", 0, PL_OPT_FLAG, NULL, "init refuses the options", 0, 0, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

static pl_status tb_init(pl_bench_ctx *c, void *st) {
  tb *b = st;
  if (pl_args_flag(c->args, "refuse"))
    return pl_set_error(PL_EINVAL, "--refuse: refused as asked");
  b->fail = pl_args_flag(c->args, "fail");
  b->oom = pl_args_flag(c->args, "oom");
  b->error = pl_args_flag(c->args, "error");
  c->npoints = 5;
  return PL_OK;
}

static pl_status tb_point(pl_bench_ctx *c, void *st, int p, pl_row *row,
                          char *label, size_t n) {
  snprintf(label, n, "point %d", p);
  pl_row_i64(row, "ranks", c->size);
  pl_row_str(row, "variant", p == 1 ? "compare" : p == 2 ? "oom" : "plain");
  return PL_OK;
}

static pl_status tb_setup(pl_bench_ctx *c, void *st, int p) {
  tb *b = st;
  b->c = c;
  if (p == 2 && b->oom && c->rank == c->size - 1)
    return pl_set_error(PL_ENOMEM, "test: no memory on rank %d", c->rank);
  if (p == 3 && b->error)
    return pl_set_error(PL_ERUNTIME, "test: setup failed");
  return pl_alloc(c->dev, PL_ARENA_DEVICE, 4096, "weights", &b->resident);
}

static pl_status tb_run(void *st) {
  tb *b = st;
  void *w = NULL;
  PL_TRY(pl_alloc(b->c->dev, PL_ARENA_DEVICE, (size_t)(b->c->rank + 1) << 10,
                  "attention", &w));
  struct timespec ts = {0, (long)(b->c->rank + 1) * 4000000L};
  nanosleep(&ts, NULL);
  pl_free(b->c->dev, w);
  return PL_OK;
}

static pl_status tb_check(pl_bench_ctx *c, void *st, int p, pl_check *chk) {
  tb *b = st;
  float got[64], ref[64];
  for (int i = 0; i < 64; i++)
    got[i] = ref[i] = 1.0f + (float)i;
  if (p == 1 && b->fail && c->rank == c->size - 1)
    got[17] += 0.5f;
  pl_check_arrays(chk, "out", got, PL_ELEM_F32, ref, PL_ELEM_F32, 64, PL_F32,
                  1024);
  return PL_OK;
}

static void tb_teardown(pl_bench_ctx *c, void *st, int p) {
  tb *b = st;
  pl_free(c->dev, b->resident);
  b->resident = NULL;
}

static const pl_bench test_bench = {
    .name = "harness_test",
    .summary = "the harness under test",
    .opts = tb_opts,
    .columns = "variant\tranks\ttime_ms\ttime_p10_ms\ttime_p90_ms\t"
               "dev_peak_bytes\top_peak_bytes\tattention_bytes\tlive_set\t"
               "max_err",
    .tags = (const char *const[]){"attention", NULL},
    .state = sizeof(tb),
    .init = tb_init,
    .point = tb_point,
    .setup = tb_setup,
    .run = tb_run,
    .check = tb_check,
    .teardown = tb_teardown,
};

/* A bench of its own loop that finds its input bad only once running: the
 * harness's safety net (a usage error, its file and directories removed). */
static pl_status late_main(pl_bench_ctx *c, void *st) {
  return pl_set_error(PL_EINVAL, "late: refused once running");
}
static const pl_bench late_bench = {
    .name = "harness_late",
    .summary = "a bench that refuses once running",
    .columns = "variant",
    .state = 1,
    .main = late_main,
};

/* Run the bench with extra options into a fresh g_dir/<sub>; returns the
 * exit code; rank 0 reads the file into *t (NULL when there is none). */
static int run_bench(const char *sub, const char *extra, pl_table *t,
                     bool *have) {
  char out[400];
  snprintf(out, sizeof out, "%s/%s", g_dir, sub);
  char *argv[16] = {"--backend", "cpu", "-n", "3", "-w", "1", "-o", out};
  int argc = 8;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", extra);
  for (char *s = NULL, *w = strtok_r(buf, " ", &s); w && argc < 15;
       w = strtok_r(NULL, " ", &s))
    argv[argc++] = w;
  fflush(stdout);
  int code = pl_bench_run(&test_bench, argc, argv, argc, argv);
  *have = false;
  if (g_rank == 0) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/harness_test.*.tsv 2>/dev/null | head -1",
             out);
    FILE *p = popen(cmd, "r");
    char path[512] = "";
    if (p && fgets(path, sizeof path, p))
      path[strcspn(path, "\n")] = '\0';
    if (p)
      pclose(p);
    *have = path[0] && pl_table_read(path, t) == PL_OK;
  }
  return code;
}

static const char *cell(const pl_table *t, int r, const char *col) {
  int c = pl_table_col(t, col);
  return c >= 0 && r < t->nrows ? t->rows[r][c] : "?";
}

/* every rank's soft failures, summed, so that every rank asserts alike */
static int64_t agreed_failures(void) {
  int64_t n = g_nfail;
  ck_assert_int_eq(pl_host_allreduce_i64(g_comm, &n, 1, PL_RED_SUM), PL_OK);
  g_nfail = 0;
  return n;
}

START_TEST(rows_and_exit_codes) {
  pl_table t;
  bool have;
  int code = run_bench("a", "--fail --oom --error", &t, &have);
  soft(code == 1, "exit %d (want 1: a check failed)", code);
  if (g_rank == 0) {
    soft(have && t.nrows == 5, "rows: %d (want 5)", have ? t.nrows : -1);
    if (have && t.nrows == 5) {
      static const char *const st[5] = {"ok", "ok", "oom", "error", "ok"};
      static const char *const ck[5] = {"pass", "fail", "skip", "skip", "pass"};
      for (int r = 0; r < 5; r++) {
        soft(!strcmp(cell(&t, r, "status"), st[r]), "row %d status %s", r,
             cell(&t, r, "status"));
        soft(!strcmp(cell(&t, r, "check"), ck[r]), "row %d check %s", r,
             cell(&t, r, "check"));
        soft(!strcmp(cell(&t, r, "bench"), "harness_test"), "row %d bench", r);
      }
      char want[128];
      snprintf(want, sizeof want, "first bad index 17 on rank %d", g_size - 1);
      soft(strstr(cell(&t, 1, "note"), want) != NULL, "fail note: %s",
           cell(&t, 1, "note"));
      soft(strstr(cell(&t, 2, "note"), "no memory") != NULL ||
               strstr(cell(&t, 2, "note"), "another rank") != NULL,
           "oom note: %s", cell(&t, 2, "note"));
      soft(strstr(cell(&t, 0, "note"), "CPU backend: times are CPU times") !=
               NULL,
           "CPU note: %s", cell(&t, 0, "note"));
      soft(strtod(cell(&t, 1, "max_err"), NULL) > 0.005, "max_err %s",
           cell(&t, 1, "max_err"));
      soft(strcmp(cell(&t, 0, "max_err"), "0") == 0, "max_err of point 0 %s",
           cell(&t, 0, "max_err"));
      /* the slowest rank: (size)·4 ms */
      double ms = strtod(cell(&t, 0, "time_ms"), NULL);
      soft(ms >= 4.0 * g_size * 0.95, "time_ms %.3f < %d ms", ms, 4 * g_size);
      /* max over ranks: 4 KiB resident + size KiB; the tag's own peak */
      long long peak = atoll(cell(&t, 0, "dev_peak_bytes"));
      long long op = atoll(cell(&t, 0, "op_peak_bytes"));
      long long tag = atoll(cell(&t, 0, "attention_bytes"));
      soft(peak == 4096 + 1024LL * g_size, "dev_peak_bytes %lld", peak);
      soft(op == 1024LL * g_size, "op_peak_bytes %lld", op);
      soft(tag == 1024LL * g_size, "attention_bytes %lld", tag);
      soft(strstr(cell(&t, 0, "live_set"), "weights=") != NULL, "live_set %s",
           cell(&t, 0, "live_set"));
      pl_table_free(&t);
    }
  }
  ck_assert_int_eq(agreed_failures(), 0);
}
END_TEST

START_TEST(clean_run_and_usage) {
  pl_table t;
  bool have;
  int code = run_bench("b", "", &t, &have);
  soft(code == 0, "clean run: exit %d", code);
  if (g_rank == 0 && have) {
    soft(t.nrows == 5 && t.finished, "clean run: %d rows", t.nrows);
    pl_table_free(&t);
  }
  code = run_bench("c", "--refuse", &t, &have);
  soft(code == 2, "refused: exit %d (want 2)", code);
  soft(!have, "refused: a result file was written");
  code = run_bench("d", "--no-such-option", &t, &have);
  soft(code == 2 && !have, "bad option: exit %d, file %d", code, have);
  /* refused once running: exit 2, and neither its file nor the
   * directories made for it remain */
  char out[400], made[400];
  snprintf(made, sizeof made, "%s/late", g_dir);
  snprintf(out, sizeof out, "%s/late/x/y", g_dir);
  char *argv[] = {"--backend", "cpu", "-o", out};
  fflush(stdout);
  code = pl_bench_run(&late_bench, 4, argv, 4, argv);
  soft(code == 2, "late refusal: exit %d (want 2)", code);
  if (g_rank == 0)
    soft(access(made, F_OK) != 0, "late refusal: %s was left behind", made);
  ck_assert_int_eq(agreed_failures(), 0);
}
END_TEST

/* The device, the world, and rank 0's chars (its directory's name). */
static pl_status setup(int64_t *chars, size_t bytes) {
  PL_TRY(pl_dev_create(PL_BACKEND_CPU, 0, &g_dev));
  PL_TRY(pl_comm_world(g_dev, &g_comm));
  return pl_host_bcast(g_comm, chars, bytes, 0);
}

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK) {
    fprintf(stderr, "%s\n", pl_last_error());
    return 1;
  }
  g_rank = pl_world_rank();
  g_size = pl_world_size();
  if (g_rank == 0) {
    snprintf(g_dir, sizeof g_dir, "/tmp/pl_test_harness.XXXXXX");
    if (!mkdtemp(g_dir))
      return 1;
  }
  /* every rank writes under the same directory name (rank 0's) */
  int64_t chars[32] = {0};
  memcpy(chars, g_dir, strlen(g_dir) + 1);
  pl_status st = setup(chars, sizeof chars);
  memcpy(g_dir, chars, sizeof g_dir);
  const TTest *tests[] = {rows_and_exit_codes, clean_run_and_usage, NULL};
  int nf = st == PL_OK ? pl_check_suite("harness", 0, tests, NULL, NULL,
                                        CK_NOFORK, g_rank)
                       : 1;
  if (g_rank == 0) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
      nf++;
  }
  if (g_comm)
    pl_comm_destroy(g_comm);
  if (g_dev)
    pl_dev_destroy(g_dev);
  pl_finalize();
  return nf ? 1 : 0;
}
