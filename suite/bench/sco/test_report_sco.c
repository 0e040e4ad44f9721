/* test_report_sco.c — the sco report (pl_report_run) on result files written
 * here with known values: the Table 3 and Table 13 lines carry the paper's
 * printed numbers and ours computed from the rows (changes in %, global batch =
 * per rank × ranks), trial files of a search are not taken for sweeps, a
 * non-monotone peak is called out, torn rows are ignored, and a directory
 * without sco rows is an error. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check_run.h"
#include "report/report.h"
#include "results/results.h"

/* the version-2 columns the benches write (less a few) */
#define SCO_COLS                                                               \
  "tokens\tranks\tlayers\thidden\tffn\tdtype\trelease\tbudget\tbudget_bytes\t" \
  "selected\tdev_peak_bytes\tmax_err\tboundary_bytes\t"                        \
  "bound_bytes\tpool_peak_bytes\thost_peak_bytes\tlive_set\t"                  \
  "time_ms\ttime_p10_ms\ttime_p90_ms\ttok_s_gpu\tstatus\tcheck\tnote"
#define MB_COLS                                                                \
  "kind\ttarget\tbudget\ttokens\tranks\texit_code\tdev_peak_bytes\t"           \
  "host_peak_bytes\ttime_ms\ttok_s_gpu\tmax_ok_tokens\tfirst_fail_tokens\t"    \
  "trials\ttrial_file\tstatus\tcheck\tnote"

static char dir[256];

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void write_file(const char *stem, const char *cols, const char *point,
                       const char *const *rows) {
  const char *meta[] = {"bench",  stem,        "backend", "cpu",
                        "device", "test",      "point",   point,
                        "argv",   "plateau x", NULL};
  pl_results *r;
  ck_assert_int_eq(pl_results_create(dir, stem, cols, meta, &r), PL_OK);
  for (int i = 0; rows[i]; i++)
    ck_assert_int_eq(pl_results_append(r, rows[i]), PL_OK);
  ck_assert_int_eq(pl_results_close(r, "ok"), PL_OK);
}

#define GI "1073741824"
static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/plateau-test-report-sco.XXXXXX");
  ck_assert(mkdtemp(dir) != NULL);
}
static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

START_TEST(tables_carry_paper_and_ours) {
  /* budget 0: 10 GiB peak, 1000 tok/s; all: 6 GiB (−40%), 990 tok/s (−1%) */
  const char *sweep[] = {
      "1024\t2\t4\t64\t96\tbf16\tcontext\tall\t4096\t4\t6442450944\t6\t1\t2\t64"
      "42450944\t" GI "\tweights=1GiB\t1.0\t0.9\t1.1\t990\tok\tpass\t-",
      "1024\t2\t4\t64\t96\tbf16\tcontext\t0\t0\t0\t10737418240\t10\t4\t6\t10737"
      "418240\t0\tboundary=4GiB\t1.0\t0.9\t"
      "1.1\t1000\tok\tpass\t-",
      "1024\t2\t4\t64\t96\tbf16\tcontext\t2048\t2048\t2\t8589934592\t8\t2\t4\t8"
      "589934592\t536870912\tx=1\t1.0\t0.9\t"
      "1.1\t995\tok\tpass\t-",
      NULL};
  write_file("sco", SCO_COLS, "-", sweep);
  /* a maxbatch trial's file: must not be reported as a sweep */
  const char *trial[] = {"9\t2\t4\t64\t96\tbf16\tcontext\t0\t0\t0\t1\t0\t1\t1\t"
                         "1\t0\t-\t1\t1\t1\t1\tok\tskip\t-",
                         NULL};
  write_file("sco", SCO_COLS, "maxbatch.1.0.0", trial);
  const char *mb[] = {
      "trial\tsco\t0\t1000\t2\t0\t5\t0\t1\t1\t-\t-\t-\tf\tok\tskip\t-",
      "trial\tsco\t0\t2000\t2\t0\t-\t-\t-\t-\t-\t-\t-\tf\toom\tskip\tPL_ENOMEM:"
      " x",
      "summary\tsco\t0\t1000\t-\t-\t-\t-\t-\t-\t1000\t2000\t2\t-\tok\tskip\t-",
      "summary\tsco\tall\t1500\t-\t-\t-\t-\t-\t-\t1500\t1600\t5\t-"
      "\tok\tskip\t-",
      NULL};
  write_file("maxbatch", MB_COLS, "-", mb);
  char out[300];
  snprintf(out, sizeof out, "%s/report", dir);
  setenv("PLATEAU_GNUPLOT", "/nonexistent-gnuplot",
         1); /* charts: skipped, tables written */
  ck_assert_int_eq(pl_report_run(dir, NULL), PL_OK);
  char path[400];
  snprintf(path, sizeof path, "%s/sco.md", out);
  const char *md = slurp(path);
  ck_assert_msg(strstr(md, "139.79 GiB → 123.73 GiB") != NULL, "paper HBM: %s",
                md);
  ck_assert_msg(strstr(md, "10.00 GiB → 6.00 GiB | -40.0%") != NULL,
                "our peak change:\n%s", md);
  ck_assert_msg(strstr(md, "1000 → 990 | -1.0%") != NULL,
                "our throughput change:\n%s", md);
  ck_assert_msg(strstr(md, "0 B → 2.00 GiB (pinned boundaries × 2 ranks)") !=
                    NULL,
                "node pinned:\n%s", md);
  ck_assert_msg(strstr(md, "557,056 | 655,360 | +17.65%") != NULL,
                "paper max batch:\n%s", md);
  ck_assert_msg(
      strstr(md, "| ours (2 ranks, global) | 2,000 | 3,000 | +50.00%") != NULL,
      "our max batch:\n%s", md);
  ck_assert_msg(strstr(md, "is non-increasing") != NULL, "monotone:\n%s", md);
  ck_assert_msg(strstr(md, "### Sweep 1") == NULL,
                "the trial file was taken as a sweep:\n%s", md);
  snprintf(path, sizeof path, "%s/sco-budget-0.tsv", out);
  const char *tsv = slurp(path);
  /* sorted by budget: 0, 2048 B, all (4096 B) */
  const char *a = strstr(tsv, "\t10.000000\t"),
             *b = strstr(tsv, "\t8.000000\t"), *c = strstr(tsv, "\t6.000000\t");
  ck_assert_msg(a && b && c && a < b && b < c,
                "chart data not sorted by budget:\n%s", tsv);
}
END_TEST

START_TEST(non_monotone_peak_is_reported) {
  const char *sweep[] = {"1\t1\t2\t8\t8\tf32\tstep\t0\t0\t0\t100\t0\t1\t1\t100"
                         "\t0\t-\t1\t1\t1\t10\tok\tpass\t-",
                         "1\t1\t2\t8\t8\tf32\tstep\tall\t64\t2\t200\t0\t1\t1\t2"
                         "00\t64\t-\t1\t1\t1\t10\tok\tfail\tdx0 differs",
                         NULL};
  write_file("sco", SCO_COLS, "-", sweep);
  char out[300];
  snprintf(out, sizeof out, "%s/report", dir);
  setenv("PLATEAU_GNUPLOT", "/nonexistent-gnuplot", 1);
  ck_assert_int_eq(pl_report_run(dir, NULL), PL_OK);
  char path[400];
  snprintf(path, sizeof path, "%s/sco.md", out);
  const char *md = slurp(path);
  ck_assert_msg(strstr(md, "is NOT monotone") != NULL, "%s", md);
  ck_assert_msg(strstr(md, "pass → fail") != NULL, "%s", md);
}
END_TEST

START_TEST(empty_dir_is_an_error) {
  char out[300];
  snprintf(out, sizeof out, "%s/report", dir);
  ck_assert_int_eq(pl_report_run(dir, NULL), PL_EIO);
  ck_assert(access(out, F_OK) != 0); /* nothing written */
}
END_TEST

int main(void) {
  const TTest *tests[] = {tables_carry_paper_and_ours,
                          non_monotone_peak_is_reported, empty_dir_is_an_error,
                          NULL};
  return pl_check_suite("report_sco", 0, tests, setup, teardown, CK_FORK_GETENV,
                        0)
             ? 1
             : 0;
}
