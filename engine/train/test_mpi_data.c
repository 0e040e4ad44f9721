/* test_mpi_data.c — the token streams (train/data.h) under mpirun -np 1..4:
 *  - a shard (uint16 and uint32) written and read back: every rank's batch
 *    for a layout with D = W (one sequence over all ranks) and D = 1 (a
 *    sequence per rank) is its slice of the right window, targets shifted
 *    by one, windows wrapping at the end of the file;
 *  - each rank reads only its own tokens: a token outside the vocabulary
 *    in one rank's slice fails that rank's read alone;
 *  - bad files are refused with a message naming the problem (magic,
 *    version, width, size, a file too short for one window);
 *  - the synthetic stream is a pure function of (seed, index): the batch
 *    equals the window read, two seeds differ, and every token is in [0, V). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/check_mpi.h"
#include "train/data.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;
static char dir[128];

static void path_of(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", dir, name);
}

static uint32_t tokv(int64_t i) {
  return (uint32_t)((i * 7 + 3) % 1000);
}

static void write_shard(const char *name, int width, int64_t count) {
  char p[256];
  path_of(p, sizeof p, name);
  if (rank == 0) {
    uint32_t *t = malloc((size_t)count * 4 + 4);
    for (int64_t i = 0; i < count; i++)
      t[i] = tokv(i);
    ck_assert_int_eq(pl_data_write(p, width, t, count), PL_OK);
    free(t);
  }
  ck_assert_int_eq(pl_barrier(world), PL_OK);
}

static void check_layout(pl_data *d, int D, int64_t count, int micro) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.n_q = 8, m.n_kv = 4, m.E = 12, m.V = 1000;
  if (size == 3)
    m.n_q = 6, m.n_kv = 3;
  pl_layout_plan p;
  const int64_t S = 10 * D;
  ck_assert_int_eq(pl_layout_plan_make(&m, &(pl_layout_cfg){D, 1, 0, 0, 0},
                                       size, rank, S, &p),
                   PL_OK);
  const int64_t N = p.N, nwin = (count - 1) / S;
  for (int64_t step = 0; step < 5; step++) {
    int32_t *b = malloc((size_t)(micro * (N + 1)) * 4);
    ck_assert_int_eq(pl_data_batch(d, &p, micro, step, b), PL_OK);
    for (int mi = 0; mi < micro; mi++) {
      const int64_t q = (step * micro + mi) * (size / D) + rank / D;
      const int64_t first = (q % nwin) * S + (rank % D) * N;
      for (int64_t i = 0; i <= N; i++)
        ck_assert_int_eq(b[mi * (N + 1) + i], (int32_t)tokv(first + i));
    }
    free(b);
  }
}

START_TEST(shard_round_trip) {
  const int64_t count = 1001;
  write_shard("a16.tok", 2, count);
  write_shard("a32.tok", 4, count);
  const char *names[2] = {"a16.tok", "a32.tok"};
  for (int f = 0; f < 2; f++) {
    char p[256];
    path_of(p, sizeof p, names[f]);
    pl_data *d;
    ck_assert_int_eq(pl_data_open(p, 1000, &d), PL_OK);
    ck_assert_int_eq(pl_data_count(d), count);
    check_layout(d, size, count, 1);
    check_layout(d, 1, count, 2);
    pl_data_close(d);
  }
}
END_TEST

START_TEST(own_tokens_only) {
  if (size < 2)
    return;
  /* one window over all ranks (D = W): rank 1's slice holds an invalid token */
  const int64_t S = 10 * size, N = 10, count = S + 1;
  char p[256];
  path_of(p, sizeof p, "bad.tok");
  if (rank == 0) {
    uint32_t *t = malloc((size_t)count * 4);
    for (int64_t i = 0; i < count; i++)
      t[i] = tokv(i);
    t[N + 1 + 3] = 5000; /* inside [N, 2N] only: rank 1's inputs/targets */
    ck_assert_int_eq(pl_data_write(p, 2, t, count), PL_OK);
    free(t);
  }
  ck_assert_int_eq(pl_barrier(world), PL_OK);
  pl_data *d;
  ck_assert_int_eq(pl_data_open(p, 1000, &d), PL_OK);
  int32_t b[16];
  const pl_status st = pl_data_read(d, 0, S, (int64_t)rank * N, N + 1, b);
  if (rank == 1) {
    ck_assert_int_eq(st, PL_EINVAL);
    ck_assert_ptr_nonnull(strstr(pl_last_error(), "5000"));
  } else {
    ck_assert_int_eq(st, PL_OK);
  }
  pl_data_close(d);
}
END_TEST

static void bad(const char *name, const unsigned char *bytes, size_t n,
                const char *msg) {
  char p[256];
  path_of(p, sizeof p, name);
  if (rank == 0) {
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
  }
  ck_assert_int_eq(pl_barrier(world), PL_OK);
  pl_data *d = NULL;
  ck_assert_int_eq(pl_data_open(p, 1000, &d), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), msg), "'%s' lacks '%s'",
                pl_last_error(), msg);
}

START_TEST(bad_files) {
  unsigned char h[32] = "PLTOKENS";
  h[8] = 1, h[12] = 2, h[16] = 4; /* version 1, width 2, 4 tokens */
  bad("short.tok", h, 10, "header");
  bad("size.tok", h, 24 + 6, "header says 4 tokens");
  unsigned char m[32];
  memcpy(m, h, 32);
  m[0] = 'X';
  bad("magic.tok", m, 32, "magic");
  memcpy(m, h, 32);
  m[8] = 2;
  bad("version.tok", m, 32, "version 2");
  memcpy(m, h, 32);
  m[12] = 3;
  bad("width.tok", m, 32, "width 3");
  pl_data *d;
  ck_assert_int_eq(pl_data_open("/nonexistent/x.tok", 10, &d), PL_EIO);
  /* a file too short for one window */
  write_shard("tiny.tok", 2, 5);
  char p[256];
  path_of(p, sizeof p, "tiny.tok");
  ck_assert_int_eq(pl_data_open(p, 1000, &d), PL_OK);
  int32_t b[16];
  ck_assert_int_eq(pl_data_read(d, 0, 8, 0, 9, b), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "no window"));
  pl_data_close(d);
  uint32_t big = 70000;
  path_of(p, sizeof p, "big.tok");
  ck_assert_int_eq(pl_data_write(p, 2, &big, 1), PL_EINVAL);
  ck_assert_int_eq(access(p, F_OK),
                   -1); /* refused before the file is created */
}
END_TEST

START_TEST(synthetic) {
  pl_data *a, *b;
  ck_assert_int_eq(pl_data_synthetic(97, 3, &a), PL_OK);
  ck_assert_int_eq(pl_data_synthetic(97, 4, &b), PL_OK);
  int32_t x[65], y[65], z[65];
  ck_assert_int_eq(pl_data_read(a, 7, 64, 0, 65, x), PL_OK);
  ck_assert_int_eq(pl_data_read(a, 7, 64, 10, 20, y), PL_OK);
  ck_assert_int_eq(pl_data_read(b, 7, 64, 0, 65, z), PL_OK);
  int differ = 0;
  for (int i = 0; i < 65; i++) {
    ck_assert(x[i] >= 0 && x[i] < 97);
    differ += x[i] != z[i];
  }
  for (int i = 0; i < 20; i++)
    ck_assert_int_eq(y[i], x[10 + i]);
  ck_assert_int_gt(differ, 20);
  /* window q's last token is window q+1's first */
  int32_t w[65];
  ck_assert_int_eq(pl_data_read(a, 8, 64, 0, 1, w), PL_OK);
  ck_assert_int_eq(w[0], x[64]);
  ck_assert_int_eq(pl_data_read(a, 0, 64, 60, 6, w), PL_EINVAL);
  pl_data_close(a);
  pl_data_close(b);
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "data", &dev, &world, &rank, &size);
  if (e)
    return e;
  if (rank == 0) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/pl_data_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
      return 3;
  }
  if (pl_host_bcast(world, dir, sizeof dir, 0) != PL_OK)
    return 3;
  const TTest *tests[] = {shard_round_trip, own_tokens_only, bad_files,
                          synthetic, NULL};
  const int nf = pl_check_run("data", 120, tests, rank, world);
  pl_barrier(world);
  if (rank == 0) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
      fprintf(stderr, "could not remove %s\n", dir);
  }
  return pl_check_world_close(dev, world, nf);
}
