/* test_results.c — result files: round trip, concurrent writers (processes),
 * a writer killed mid-row, and never overwriting (results.h's guarantees);
 * the reader's schema versions: an unknown version refused with a message
 * naming it, version-1 files mapped to the current names (renamed, rescaled
 * GiB -> bytes, dropped, derived columns). */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/check_run.h"
#include "plateau/plateau.h"
#include "results.h"

static char tmpdir[256];

static void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/pl_test_results.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_tmp(void) {
  DIR *d = opendir(tmpdir);
  if (!d)
    return;
  struct dirent *e;
  char p[600];
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(tmpdir);
}

/* Paths of *.tsv files in tmpdir. */
static int list_tsv(char paths[][600], int max) {
  DIR *d = opendir(tmpdir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l > 4 && strcmp(e->d_name + l - 4, ".tsv") == 0) {
      if (n < max)
        snprintf(paths[n], 600, "%s/%s", tmpdir, e->d_name);
      n++;
    }
  }
  closedir(d);
  return n;
}

/* `bench` first: a file read back keeps its columns as written (the reader
 * adds a `bench` column to version-1 files that lack one) */
#define COLS "bench\tseq\tpayload"

/* A payload long enough that a torn or interleaved write would show. */
static void payload(char *buf, size_t len, int who, int seq) {
  size_t n = 0;
  while (n + 1 < len) {
    buf[n] = (char)('a' + (unsigned)(who * 131 + seq * 7 + (int)n) % 26);
    n++;
  }
  buf[n] = '\0';
}

START_TEST(round_trip) {
  mk_tmp();
  const char *meta[] = {"bench", "unit", "device", "tab\there\nnewline", NULL};
  pl_results *r = NULL;
  ck_assert_int_eq(pl_results_create(tmpdir, "rt", COLS, meta, &r), PL_OK);
  ck_assert_ptr_nonnull(r);
  char path[600];
  snprintf(path, sizeof path, "%s", pl_results_path(r));
  ck_assert_int_eq(pl_results_append(r, "0\t0\tx"), PL_OK);
  ck_assert_int_eq(pl_results_append(r, "0\t1\ty"), PL_OK);
  /* wrong field count, embedded newline, comment: rejected */
  ck_assert_int_eq(pl_results_append(r, "0\t2"), PL_EINVAL);
  ck_assert_int_eq(pl_results_append(r, "0\t2\tz\tw"), PL_EINVAL);
  ck_assert_int_eq(pl_results_append(r, "0\t2\tz\n1\t1\t1"), PL_EINVAL);
  ck_assert_int_eq(pl_results_append(r, "#\t2\tz"), PL_EINVAL);
  ck_assert_int_eq(pl_results_append(r, "0\t2\tz"), PL_OK);

  /* read while open: not finished */
  pl_table t;
  ck_assert_int_eq(pl_table_read(path, &t), PL_OK);
  ck_assert_int_eq(t.finished, 0);
  ck_assert_int_eq(t.nrows, 3);
  pl_table_free(&t);

  ck_assert_int_eq(pl_results_close(r, "ok"), PL_OK);
  ck_assert_int_eq(pl_table_read(path, &t), PL_OK);
  ck_assert_int_eq(t.ncols, 3);
  ck_assert_str_eq(t.cols[2], "payload");
  ck_assert_int_eq(pl_table_col(&t, "seq"), 1);
  ck_assert_int_eq(pl_table_col(&t, "nope"), -1);
  ck_assert_int_eq(t.nrows, 3);
  ck_assert_str_eq(t.rows[1][2], "y");
  ck_assert_str_eq(t.rows[2][1], "2");
  ck_assert_int_eq(t.nbad, 0);
  ck_assert_int_eq(t.finished, 1);
  ck_assert_str_eq(pl_table_meta(&t, "bench"), "unit");
  ck_assert_str_eq(pl_table_meta(&t, "device"), "tab here newline");
  ck_assert_ptr_null(pl_table_meta(&t, "absent"));
  pl_table_free(&t);

  /* appending needs the same header */
  ck_assert_int_eq(pl_results_open_append(path, "a\tb", &r), PL_EINVAL);
  ck_assert_ptr_null(r);
  ck_assert_int_eq(pl_results_open_append(path, COLS, &r), PL_OK);
  ck_assert_int_eq(pl_results_append(r, "1\t0\tq"), PL_OK);
  ck_assert_int_eq(pl_results_close(r, "ok"), PL_OK);
  ck_assert_int_eq(pl_table_read(path, &t), PL_OK);
  ck_assert_int_eq(t.nrows, 4);
  pl_table_free(&t);

  /* not a result file */
  char other[640];
  snprintf(other, sizeof other, "%s/plain.txt", tmpdir);
  FILE *f = fopen(other, "w");
  fputs("a\tb\n1\t2\n", f);
  fclose(f);
  ck_assert_int_eq(pl_table_read(other, &t), PL_EINVAL);
  unlink(other);
  ck_assert_int_ne(pl_table_read("/nonexistent/x.tsv", &t), PL_OK);
  rm_tmp();
}
END_TEST

START_TEST(never_overwritten) {
  mk_tmp();
  pl_results *a = NULL, *b = NULL;
  ck_assert_int_eq(pl_results_create(tmpdir, "same", COLS, NULL, &a), PL_OK);
  ck_assert_int_eq(pl_results_create(tmpdir, "same", COLS, NULL, &b), PL_OK);
  ck_assert_str_ne(pl_results_path(a), pl_results_path(b));
  ck_assert_int_eq(pl_results_append(a, "a\t0\tx"), PL_OK);
  ck_assert_int_eq(pl_results_append(b, "b\t0\tx"), PL_OK);
  char pa[600], pb[600];
  snprintf(pa, sizeof pa, "%s", pl_results_path(a));
  snprintf(pb, sizeof pb, "%s", pl_results_path(b));
  pl_results_close(a, "ok");
  pl_results_close(b, "ok");
  pl_table t;
  ck_assert_int_eq(pl_table_read(pa, &t), PL_OK);
  ck_assert_int_eq(t.nrows, 1);
  ck_assert_str_eq(t.rows[0][0], "a");
  pl_table_free(&t);
  ck_assert_int_eq(pl_table_read(pb, &t), PL_OK);
  ck_assert_int_eq(t.nrows, 1);
  ck_assert_str_eq(t.rows[0][0], "b");
  pl_table_free(&t);
  char paths[8][600];
  ck_assert_int_eq(list_tsv(paths, 8), 2);
  rm_tmp();
}
END_TEST

#define NCHILD 8
#define NROWS 200
#define NOWN 50

START_TEST(concurrent_writers) {
  mk_tmp();
  pl_results *r = NULL;
  ck_assert_int_eq(pl_results_create(tmpdir, "shared", COLS, NULL, &r), PL_OK);
  char shared[600];
  snprintf(shared, sizeof shared, "%s", pl_results_path(r));
  pid_t pids[2 * NCHILD];
  for (int c = 0; c < 2 * NCHILD; c++) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      int bad = 0;
      char line[1200], pay[1000];
      if (c < NCHILD) { /* append to the shared file */
        pl_results *w = NULL;
        if (pl_results_open_append(shared, COLS, &w) != PL_OK)
          _exit(10);
        for (int s = 0; s < NROWS; s++) {
          payload(pay, sizeof pay, c, s);
          snprintf(line, sizeof line, "%d\t%d\t%s", c, s, pay);
          if (pl_results_append(w, line) != PL_OK)
            bad++;
        }
        if (pl_results_close(w, "ok") != PL_OK)
          bad++;
      } else { /* each its own file, same dir, same stem, same second */
        pl_results *w = NULL;
        if (pl_results_create(tmpdir, "own", COLS, NULL, &w) != PL_OK)
          _exit(11);
        for (int s = 0; s < NOWN; s++) {
          payload(pay, sizeof pay, c, s);
          snprintf(line, sizeof line, "%d\t%d\t%s", c, s, pay);
          if (pl_results_append(w, line) != PL_OK)
            bad++;
        }
        if (pl_results_close(w, "ok") != PL_OK)
          bad++;
      }
      _exit(bad ? 12 : 0);
    }
    pids[c] = pid;
  }
  for (int c = 0; c < 2 * NCHILD; c++) {
    int ws = 0;
    ck_assert_int_eq(waitpid(pids[c], &ws, 0), pids[c]);
    ck_assert(WIFEXITED(ws));
    ck_assert_int_eq(WEXITSTATUS(ws), 0);
  }
  ck_assert_int_eq(pl_results_close(r, "ok"), PL_OK);

  char paths[2 * NCHILD + 4][600];
  int nf = list_tsv(paths, 2 * NCHILD + 4);
  ck_assert_int_eq(nf, 1 + NCHILD); /* no name collision, nothing lost */
  int own_seen[2 * NCHILD] = {0};
  for (int i = 0; i < nf; i++) {
    pl_table t;
    ck_assert_int_eq(pl_table_read(paths[i], &t), PL_OK);
    ck_assert_int_eq(t.nbad, 0);
    bool is_shared = strcmp(paths[i], shared) == 0;
    ck_assert_int_eq(t.nrows, is_shared ? NCHILD * NROWS : NOWN);
    static unsigned char seen[NCHILD][NROWS];
    memset(seen, 0, sizeof seen);
    int owner = -1;
    char pay[1000];
    for (int k = 0; k < t.nrows; k++) {
      int c = atoi(t.rows[k][0]), s = atoi(t.rows[k][1]);
      payload(pay, sizeof pay, c, s);
      ck_assert_str_eq(t.rows[k][2], pay); /* row intact */
      if (is_shared) {
        ck_assert(c >= 0 && c < NCHILD && s >= 0 && s < NROWS);
        ck_assert_int_eq(seen[c][s], 0);
        seen[c][s] = 1;
      } else {
        ck_assert(c >= NCHILD && c < 2 * NCHILD);
        if (owner < 0)
          owner = c;
        ck_assert_int_eq(c, owner);
        ck_assert_int_eq(s, k);
      }
    }
    if (!is_shared) {
      ck_assert_int_eq(own_seen[owner], 0);
      own_seen[owner] = 1;
    }
    /* the shared file: the creator's end line plus one per child */
    ck_assert_int_eq(t.finished, 1);
    pl_table_free(&t);
  }
  rm_tmp();
}
END_TEST

START_TEST(killed_mid_row) {
  mk_tmp();
  pl_results *r = NULL;
  ck_assert_int_eq(pl_results_create(tmpdir, "torn", COLS, NULL, &r), PL_OK);
  char path[600];
  snprintf(path, sizeof path, "%s", pl_results_path(r));
  for (int s = 0; s < 5; s++) {
    char line[64];
    snprintf(line, sizeof line, "0\t%d\tok", s);
    ck_assert_int_eq(pl_results_append(r, line), PL_OK);
  }
  /* A child writes half a row — with the header's number of fields, so only
   * the torn marker can tell — and dies. */
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    int fd = open(path, O_WRONLY | O_APPEND);
    const char half[] = "9\t9\thalf-writ";
    ssize_t w = write(fd, half, sizeof half - 1);
    _exit(w == (ssize_t)(sizeof half - 1) ? 0 : 1);
  }
  int ws = 0;
  ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
  ck_assert_int_eq(WEXITSTATUS(ws), 0);

  /* Before any repair the fragment has no newline: skipped and counted. */
  pl_table t;
  ck_assert_int_eq(pl_table_read(path, &t), PL_OK);
  ck_assert_int_eq(t.nrows, 5);
  ck_assert_int_eq(t.nbad, 1);
  pl_table_free(&t);

  /* Another writer appends: the fragment is closed off, its rows intact. */
  pl_results *w = NULL;
  ck_assert_int_eq(pl_results_open_append(path, COLS, &w), PL_OK);
  for (int s = 0; s < 3; s++) {
    char line[64];
    snprintf(line, sizeof line, "1\t%d\tafter", s);
    ck_assert_int_eq(pl_results_append(w, line), PL_OK);
  }
  ck_assert_int_eq(pl_results_close(w, "ok"), PL_OK);
  ck_assert_int_eq(pl_table_read(path, &t), PL_OK);
  ck_assert_int_eq(t.nbad, 1);
  ck_assert_int_eq(t.nrows, 8);
  pl_table_free(&t);

  /* A second death, one field short: with the repair's extra field it would
   * have the header's count, so only the torn marker can reject it. */
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    int fd = open(path, O_WRONLY | O_APPEND);
    const char half[] = "9	hal";
    ssize_t wr = write(fd, half, sizeof half - 1);
    _exit(wr == (ssize_t)(sizeof half - 1) ? 0 : 1);
  }
  ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
  ck_assert_int_eq(WEXITSTATUS(ws), 0);
  ck_assert_int_eq(pl_results_append(r, "0\t5\tok"), PL_OK);
  ck_assert_int_eq(pl_results_close(r, "ok"), PL_OK);
  ck_assert_int_eq(pl_table_read(path, &t), PL_OK);
  ck_assert_int_eq(t.nbad, 2);
  ck_assert_int_eq(t.nrows, 9);
  for (int k = 0; k < t.nrows; k++) {
    ck_assert_str_ne(t.rows[k][0], "9");
    ck_assert_str_eq(t.rows[k][2], k < 5 || k == 8 ? "ok" : "after");
  }
  ck_assert_int_eq(t.finished, 1);
  pl_table_free(&t);
  rm_tmp();
}
END_TEST

START_TEST(meta_whitelist) {
  setenv("PLATEAU_SIMD", "scalar", 1);       /* read by the program */
  setenv("PLATEAU_TEST_KEY", "unknown", 1);  /* not a variable it reads */
  setenv("PLATEAU_API_TOKEN", "tok-123", 1); /* a secret under our prefix */
  setenv("NCCL_IB_PASSWORD", "pw-456", 1);
  setenv("SECRET_TOKEN", "hidden", 1);
  setenv("SLURM_JOB_ID", "4242", 1);
  char *argv[] = {"plateau", "bench", "calib", "--note=a b", NULL};
  const char *const *kv = pl_results_meta(NULL, NULL, "calib", 4, argv);
  int found_simd = 0, found_other = 0, found_job = 0, found_argv = 0;
  for (int i = 0; kv[i]; i += 2) {
    ck_assert_ptr_nonnull(kv[i + 1]);
    if (!strcmp(kv[i], "env.PLATEAU_SIMD") && !strcmp(kv[i + 1], "scalar"))
      found_simd = 1;
    if (strstr(kv[i], "TOKEN") || strstr(kv[i], "PASSWORD") ||
        strstr(kv[i], "TEST_KEY") || strstr(kv[i + 1], "hidden") ||
        strstr(kv[i + 1], "tok-123") || strstr(kv[i + 1], "pw-456"))
      found_other = 1;
    if (!strcmp(kv[i], "slurm_job_id") && !strcmp(kv[i + 1], "4242"))
      found_job = 1;
    if (!strcmp(kv[i], "argv") &&
        !strcmp(kv[i + 1], "plateau bench calib '--note=a b'"))
      found_argv = 1;
  }
  ck_assert_int_eq(found_simd, 1);
  ck_assert_int_eq(found_other, 0);
  ck_assert_int_eq(found_job, 1);
  ck_assert_int_eq(found_argv, 1);
  /* the program by an absolute path: its name alone (no build folder), the
   * caller's argv untouched */
  char *abs_argv[] = {"/srv/build/bin/plateau", "bench", "calib", NULL};
  kv = pl_results_meta(NULL, NULL, "calib", 3, abs_argv);
  found_argv = 0;
  for (int i = 0; kv[i]; i += 2)
    if (!strcmp(kv[i], "argv") && !strcmp(kv[i + 1], "plateau bench calib"))
      found_argv = 1;
  ck_assert_int_eq(found_argv, 1);
  ck_assert_str_eq(abs_argv[0], "/srv/build/bin/plateau");
  /* a recorded name that looks like a secret would be redacted */
  static const char *const secret[] = {"NCCL_IB_PASSWORD", "PLATEAU_API_TOKEN",
                                       "X_SECRET",         "aws_access_key_id",
                                       "GH_AUTH",          "MY_CREDENTIALS"};
  for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++)
    ck_assert_msg(pl__env_secret_like(secret[i], strlen(secret[i])), "%s",
                  secret[i]);
  ck_assert(!pl__env_secret_like("OMP_NUM_THREADS", 15));
  ck_assert_ptr_null(pl__env_recorded("PLATEAU_API_TOKEN", 17, "x"));
  ck_assert_str_eq(pl__env_recorded("OMP_NUM_THREADS", 15, "4"), "4");
  /* argv: whole (no cut at 511 characters), quoted */
  char big[2000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  char *av[] = {"plateau", "it's", "a\tb", big, "", NULL};
  char *q = pl__shell_quote_argv(5, av);
  ck_assert_ptr_nonnull(strstr(q, big));
  ck_assert_ptr_nonnull(strstr(q, "'it'\\''s'"));
  ck_assert_ptr_nonnull(strstr(q, "$'a\\tb'"));
  ck_assert_msg(strlen(q) > 2000 && q[strlen(q) - 1] == '\'', "%s", q);
  free(q);
}
END_TEST

/* Write `text` to tmpdir/name; returns the path (static). */
static const char *put(const char *name, const char *text) {
  static char path[700];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  return path;
}

START_TEST(unknown_version_refused) {
  mk_tmp();
  pl_table t;
  const char *p =
      put("v9.tsv", "# plateau-results: 9\n# bench: x\na\tb\n1\t2\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "version 9") != NULL, "%s",
                pl_last_error());
  p = put("v0.tsv", "# plateau-results: x\n# bench: x\na\tb\n1\t2\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_EINVAL);
  p = put("v2.tsv", "# plateau-results: 2\n# bench: x\na\tb\n1\t2\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_OK);
  ck_assert_int_eq(t.version, 2);
  ck_assert_int_eq(t.ncols, 2); /* version 2 is read as written */
  pl_table_free(&t);
  rm_tmp();
}
END_TEST

START_TEST(v1_mapped) {
  mk_tmp();
  pl_table t;
  /* vocab: peak_gib -> dev_peak_bytes (x 2^30), floor_gib -> bound_bytes,
   * `bench` added first; "-" stays "-" */
  const char *p =
      put("vocab.tsv",
          "# plateau-results: 1\n# bench: vocab\n"
          "variant\ttime_ms\tpeak_gib\tfloor_gib\tstatus\tcheck\tnote\n"
          "ring\t2.5\t1.5\t-\tok\tpass\t-\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_OK);
  ck_assert_int_eq(t.ncols, 8);
  ck_assert_str_eq(t.cols[0], "bench");
  ck_assert_str_eq(t.rows[0][0], "vocab");
  int c = pl_table_col(&t, "dev_peak_bytes");
  ck_assert_int_ge(c, 0);
  ck_assert_double_eq(strtod(t.rows[0][c], NULL), 1.5 * 1073741824.0);
  ck_assert_int_eq(pl_table_col(&t, "peak_gib"), -1);
  ck_assert_str_eq(t.rows[0][pl_table_col(&t, "bound_bytes")], "-");
  pl_table_free(&t);
  /* attention: backend dropped, algo -> variant, kernel from the note */
  p = put(
      "attention.tsv",
      "# plateau-results: 1\n# bench: attention\n"
      "backend\tseq\talgo\tpass\tms\ta2a_gbps\tstatus\tcheck\tnote\n"
      "cuda\t4096\tauto\tfwd\t1\t-\tok\tpass\tfwd kernel wgmma/ovtma\n"
      "cuda\t4096\tauto\tfwdbwd\t3\t-\tok\tpass\tfwd kernel A, bwd kernel B\n"
      "cuda\t4096\tauto\tfwdbwd\t3\t-\tok\tpass\t-\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_OK);
  ck_assert_int_eq(pl_table_col(&t, "backend"), -1);
  ck_assert_int_ge(pl_table_col(&t, "variant"), 0);
  ck_assert_int_ge(pl_table_col(&t, "time_ms"), 0);
  ck_assert_int_ge(pl_table_col(&t, "a2a_gbs"), 0);
  int k = pl_table_col(&t, "kernel");
  ck_assert_int_eq(k + 1,
                   pl_table_col(&t, "status")); /* derived: before status */
  ck_assert_str_eq(t.rows[0][k], "wgmma/ovtma");
  ck_assert_str_eq(t.rows[1][k], "A+B");
  ck_assert_str_eq(t.rows[2][k], "?+?");
  pl_table_free(&t);
  /* adam: mode -> variant, simd -> kernel, cpu_share from the note;
   * maxbatch: its own `bench` column (the target) -> target */
  p = put("adam.tsv",
          "# plateau-results: 1\n# bench: adam\n"
          "mode\tsimd\tstep_ms\tstaging_bytes\tstatus\tcheck\tnote\n"
          "hybrid\tavx2\t5\t7\tok\tpass\tclip on; cpu share 0.320\n"
          "stream\t-\t5\t7\tok\tpass\tclip on\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_OK);
  ck_assert_str_eq(t.rows[0][pl_table_col(&t, "variant")], "hybrid");
  ck_assert_str_eq(t.rows[0][pl_table_col(&t, "kernel")], "avx2");
  ck_assert_str_eq(t.rows[0][pl_table_col(&t, "cpu_share")], "0.320");
  ck_assert_str_eq(t.rows[1][pl_table_col(&t, "cpu_share")], "-");
  ck_assert_int_ge(pl_table_col(&t, "optim_staging_bytes"), 0);
  pl_table_free(&t);
  p = put("maxbatch.tsv", "# plateau-results: 1\n# bench: maxbatch\n"
                          "kind\tbench\tms_median\tstatus\tcheck\tnote\n"
                          "trial\tsco\t4\tok\tskip\t-\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_OK);
  ck_assert_str_eq(t.rows[0][pl_table_col(&t, "bench")], "maxbatch");
  ck_assert_str_eq(t.rows[0][pl_table_col(&t, "target")], "sco");
  ck_assert_str_eq(t.rows[0][pl_table_col(&t, "time_ms")], "4");
  pl_table_free(&t);
  rm_tmp();
}
END_TEST

/* A FIFO (or any non-regular file) named *.tsv is refused at once, never
 * waited on; a version line with trailing text is not version 2. */
START_TEST(untrusted_files) {
  mk_tmp();
  pl_table t;
  char fifo[700];
  snprintf(fifo, sizeof fifo, "%s/fifo.tsv", tmpdir);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  ck_assert_int_eq(pl_table_read(fifo, &t), PL_EINVAL); /* hangs before */
  ck_assert_msg(strstr(pl_last_error(), "not a regular file"), "%s",
                pl_last_error());
  unlink(fifo);
  const char *p =
      put("v2x.tsv", "# plateau-results: 2x\n# bench: x\na\tb\n1\t2\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "version '2x'"), "%s", pl_last_error());
  p = put("v2sp.tsv", "# plateau-results: 2 \n# bench: x\na\tb\n1\t2\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_OK);
  pl_table_free(&t);
  p = put("vbig.tsv",
          "# plateau-results: 99999999999\n# bench: x\na\tb\n1\t2\n");
  ck_assert_int_eq(pl_table_read(p, &t), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "99999999999"), "%s", pl_last_error());
  rm_tmp();
}
END_TEST

int main(void) {
  const TTest *tests[] = {
      round_trip,     never_overwritten, concurrent_writers,
      killed_mid_row, meta_whitelist,    unknown_version_refused,
      v1_mapped,      untrusted_files,   NULL};
  return pl_check_suite("results", 120, tests, NULL, NULL, CK_FORK_GETENV, 0)
             ? 1
             : 0;
}
