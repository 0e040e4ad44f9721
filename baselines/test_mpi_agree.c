/* test_mpi_agree.c — failure agreement in the baselines' collective code
 * (agree.h), under mpirun -np 1..4: a device memory limit on one rank (the
 * last), at every size from the first allocation on up to where the call
 * succeeds, for the vocabulary-parallel cross-entropy (f32 and bf16, with
 * and without the backward) and the training step's vocabulary-parallel
 * head (train_baselines.h).  Every call returns on every rank well before
 * the collectives' watchdog (30 s on the group here; a call may take 5 s):
 * the failing rank with its own PL_ENOMEM, every other rank with PL_ENOMEM
 * naming another rank of the group; every rank fails or none does (nothing
 * local follows the last collective in f32); nothing leaks. */
#include <check.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "train_baselines.h"
#include "vocab_parallel_ce.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

enum { N = 13, HID = 8, V = 50 };

static void *dbuf(size_t bytes) {
  void *p = NULL;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes + 4, "test", &p),
                   PL_OK);
  return p;
}
static void *rnd(size_t n, pl_dtype dt, uint64_t seed) {
  void *p = dbuf(n * pl_dtype_size(dt));
  ck_assert_int_eq(pl_rng_fill(pl_dev_stream(dev), p, dt, n, seed, 0,
                               PL_DIST_NORMAL, 0, 0.5f),
                   PL_OK);
  return p;
}
static int32_t *targets(int64_t n, int64_t v, uint64_t seed) {
  int32_t h[4 * N];
  ck_assert_int_le(n, 4 * N);
  for (int64_t i = 0; i < n; i++)
    h[i] = (int32_t)((seed * 7 + (uint64_t)i * 13) % (uint64_t)v);
  int32_t *d = dbuf((size_t)n * 4);
  ck_assert_int_eq(
      pl_memcpy_async(pl_dev_stream(dev), d, h, (size_t)n * sizeof(int32_t)),
      PL_OK);
  return d;
}

typedef pl_status (*call_fn)(void *arg, pl_comm *group);

/* Calls fn with the last rank's device limit `extra` bytes above what it
 * holds, for extra = 1, 2, 4, ... until every rank succeeds; checks the
 * statuses, the messages, the time and the memory of each call. */
static void sweep(call_fn fn, void *arg, pl_comm *group, const char *what) {
  const int bad = size - 1;
  int all_failed = 0;
  for (size_t extra = 1;; extra = extra * 3 / 2 + 1) {
    ck_assert_uint_lt(extra, (size_t)1 << 24);
    pl_mem_stats s0, s1;
    ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s0), PL_OK);
    if (rank == bad)
      pl_mem_set_limit(dev, PL_ARENA_DEVICE, s0.current + extra);
    const uint64_t t0 = pl_now_ns();
    pl_status mine = fn(arg, group);
    const double secs = pl_elapsed_s(t0);
    pl_mem_set_limit(dev, PL_ARENA_DEVICE, 0);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mine ? pl_last_error() : "");
    ck_assert_int_eq(pl_stream_sync(pl_dev_stream(dev)), PL_OK);
    ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s1), PL_OK);
    ck_assert_uint_eq(s1.current, s0.current);
    ck_assert_msg(secs < 5, "%s, limit +%zu: %.1f s", what, extra, secs);
    int64_t nfail = mine != PL_OK;
    ck_assert_int_eq(pl_host_allreduce_i64(world, &nfail, 1, PL_RED_SUM),
                     PL_OK);
    if (nfail == 0)
      break;
    ck_assert_msg(nfail == size, "%s, limit +%zu: %lld of %d ranks failed",
                  what, extra, (long long)nfail, size);
    all_failed++;
    ck_assert_msg(mine == PL_ENOMEM, "%s: rank %d: %s (%s)", what, rank,
                  pl_strerror(mine), msg);
    if (rank == bad)
      ck_assert_msg(!strstr(msg, "another rank"), "%s: %s", what, msg);
    else
      ck_assert_msg(strstr(msg, "another rank of the group failed (out of "
                                "memory) before the "),
                    "%s: %s", what, msg);
  }
  ck_assert_int_ge(all_failed, 1);
}

/* A copy of the world whose collectives give up after 30 s. */
static pl_comm *short_group(void) {
  pl_comm *c = NULL;
  ck_assert_int_eq(pl_comm_split(world, 0, rank, &c), PL_OK);
  ck_assert_int_eq(pl_comm_set_timeout(c, 30), PL_OK);
  return c;
}

static pl_status vp_call(void *arg, pl_comm *group) {
  return pl_vocab_parallel_ce(group, pl_dev_stream(dev), arg);
}

START_TEST(vocab_parallel_ce_one_rank_oom) {
  pl_comm *g = short_group();
  int64_t col0, vs;
  pl_ce_shard(V, size, rank, &col0, &vs);
  for (int c = 0; c < 4; c++) {
    const pl_dtype dt = c & 1 ? PL_BF16 : PL_F32;
    const bool bwd = c & 2;
    pl_ce_problem pb = {.dt = dt,
                        .n = N,
                        .h = HID,
                        .v = V,
                        .red = PL_CE_MEAN,
                        .ignore = PL_CE_IGNORE_INDEX};
    /* the same batch on every rank, this rank's shard of W */
    pb.x = rnd(N * HID, dt, 5);
    pb.w = rnd((size_t)HID * (vs > 0 ? vs : 1), dt, 6 + (uint64_t)rank);
    pb.t = targets(N, V, 3);
    pb.loss = dbuf(4);
    if (bwd) {
      pb.dx = dbuf(N * HID * pl_dtype_size(dt));
      pb.dw = dbuf((size_t)HID * (vs > 0 ? vs : 1) * pl_dtype_size(dt));
    }
    char what[64];
    snprintf(what, sizeof what, "vocab_parallel_ce %s%s", pl_dtype_name(dt),
             bwd ? " fwd+bwd" : " fwd");
    /* bf16's last conversion of dX follows the last collective: a rank may
     * fail alone there, so bf16 sweeps the forward only */
    if (dt == PL_F32 || !bwd)
      sweep(vp_call, &pb, g, what);
    ck_assert_int_eq(vp_call(&pb, g), PL_OK);
    void *ps[] = {(void *)pb.x, (void *)pb.w, (void *)pb.t,
                  pb.loss,      pb.dx,        pb.dw};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
      pl_free(dev, ps[i]);
  }
  pl_comm_destroy(g);
}
END_TEST

typedef struct head_arg {
  void *ctx;
  void *x, *w, *dx, *dw;
  int32_t *t;
  float *dloss, *nll;
} head_arg;

static pl_status head_call(void *arg, pl_comm *group) {
  head_arg *a = arg;
  return pl_head_vp.run(a->ctx, pl_dev_stream(dev), a->x, a->t, a->w, a->dloss,
                        a->nll, a->dx, a->dw);
}

START_TEST(vp_head_one_rank_oom) {
  pl_comm *g = short_group();
  pl_head_shape sh = {
      .dt = PL_F32, .n = 7, .h = HID, .v = V, .ignore = PL_CE_IGNORE_INDEX};
  int64_t col0, vs;
  pl_ce_shard(V, size, rank, &col0, &vs);
  head_arg a = {0};
  ck_assert_int_eq(pl_head_vp.create(g, &sh, &a.ctx), PL_OK);
  a.x = rnd(7 * HID, PL_F32, 50 + (uint64_t)rank);
  a.w = rnd((size_t)HID * (vs > 0 ? vs : 1), PL_F32, 60 + (uint64_t)rank);
  a.t = targets(7, V, 4 + (uint64_t)rank);
  a.dloss = rnd(7, PL_F32, 70 + (uint64_t)rank);
  a.nll = dbuf(7 * 4);
  a.dx = dbuf(7 * HID * 4);
  a.dw = dbuf((size_t)HID * (vs > 0 ? vs : 1) * 4);
  sweep(head_call, &a, g, "vp head");
  ck_assert_int_eq(head_call(&a, g), PL_OK);
  void *ps[] = {a.x, a.w, a.t, a.dloss, a.nll, a.dx, a.dw};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free(dev, ps[i]);
  pl_head_vp.destroy(a.ctx);
  pl_comm_destroy(g);
}
END_TEST

int main(int argc, char **argv) {
  const int e = pl_check_world_open(&argc, &argv, "baseline agreement", &dev,
                                    &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {vocab_parallel_ce_one_rank_oom, vp_head_one_rank_oom,
                          NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("baseline_agree", 120, tests, rank, world));
}
