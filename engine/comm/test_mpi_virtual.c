/* test_mpi_virtual.c — virtual groups and the bytes every group counts
 * (plateau/comm.h), under mpirun -np 1..4 on the CPU backend, and on CUDA
 * when a device is visible (a virtual group needs no NCCL).
 *
 *   standins   every data operation of a virtual group of 1, 2, 3 and 5
 *              members against its specification, bit for bit on random
 *              data (uneven all-to-all and send/recv counts: the minimum
 *              copied, the rest zeroed), its counted calls, bytes and
 *              stand-in copies, the host collectives, the split of a
 *              group of one, a refused split of a larger group;
 *   profile    stand-in spans by stream: none without the profile, those of
 *              a side stream apart from the compute stream's, reset by take;
 *   as_real    a virtual group of G counts, per operation, the calls and
 *              bytes a real group of G counts on its rank 0 for the same
 *              calls (G up to the ranks of the run);
 *   present    a virtual group of one (no absent member) gives the real
 *              one-rank group's outputs bit for bit;
 *   threads    threads other than MPI's each make, split, use and destroy
 *              groups of one at once (no virtual group calls MPI);
 *   dry        on a dry device (which moves no data) an all-to-all-v counts
 *              what the same call counts on the CPU backend: calls, bytes,
 *              stand-in copies and their bytes, for uneven, empty and
 *              in-place blocks; a NULL send buffer refused alike. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "plateau/host_device.h"
#include "plateau/plateau.h"

static pl_dev *g_dev[2];
static int g_nbe, g_rank, g_size;
static pl_comm *g_world;

static void *dalloc(pl_dev *d, size_t bytes) {
  void *p = NULL;
  ck_assert_int_eq(pl_alloc(d, PL_ARENA_DEVICE, bytes ? bytes : 1, "test", &p),
                   PL_OK);
  return p;
}

/* n random f32 or bf16 values from seed */
static void *rnd(pl_dev *d, pl_dtype dt, size_t n, uint64_t seed) {
  void *p = dalloc(d, n * pl_dtype_size(dt));
  ck_assert_int_eq(pl_rng_fill(pl_dev_stream(d), p, dt, n, seed, 0,
                               PL_DIST_UNIFORM, -1.0f, 1.0f),
                   PL_OK);
  return p;
}

static void *host(pl_dev *d, const void *p, size_t bytes) {
  void *h = malloc(bytes ? bytes : 1);
  ck_assert_ptr_nonnull(h);
  pl_stream *s = pl_dev_stream(d);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s, h, p, bytes), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  return h;
}

/* got[0, n) equal to want[0, n) bytes-wise, then zero bytes up to m */
static void same(const char *what, const void *got, const void *want, size_t n,
                 size_t m) {
  ck_assert_msg(!memcmp(got, want, n), "%s: the copied bytes differ", what);
  for (size_t i = n; i < m; i++)
    ck_assert_msg(((const unsigned char *)got)[i] == 0,
                  "%s: byte %zu past the copy is not zero", what, i);
}

static void counted(pl_comm *c, pl_comm_op op, uint64_t calls, uint64_t sent,
                    uint64_t recv) {
  pl_comm_stats st;
  pl_comm_stats_get(c, &st);
  ck_assert_msg(
      st.calls[op] == calls && st.sent[op] == sent && st.recv[op] == recv,
      "%s over %d: calls %llu sent %llu recv %llu, want %llu %llu "
      "%llu",
      pl_comm_op_name(op), pl_comm_size(c), (unsigned long long)st.calls[op],
      (unsigned long long)st.sent[op], (unsigned long long)st.recv[op],
      (unsigned long long)calls, (unsigned long long)sent,
      (unsigned long long)recv);
}

static void check_group(pl_dev *d, int G, pl_dtype dt) {
  const size_t es = pl_dtype_size(dt);
  pl_stream *s = pl_dev_stream(d);
  pl_comm *c;
  ck_assert_int_eq(pl_comm_virtual(d, G, &c), PL_OK);
  ck_assert_int_eq(pl_comm_size(c), G);
  ck_assert_int_eq(pl_comm_rank(c), 0);
  ck_assert(pl_comm_is_virtual(c));
  /* all-reduce: the absent members add nothing */
  const size_t n = 37;
  void *x = rnd(d, dt, G * n, 11 + G), *y = dalloc(d, G * n * es);
  ck_assert_int_eq(pl_allreduce(c, x, y, n, dt, PL_RED_SUM, s), PL_OK);
  void *hx = host(d, x, G * n * es), *hy = host(d, y, n * es);
  same("allreduce", hy, hx, n * es, n * es);
  counted(c, PL_COMM_ALLREDUCE, 1, 2 * (G - 1) * n * es / G,
          2 * (G - 1) * n * es / G);
  free(hy);
  /* all-gather: tiled */
  ck_assert_int_eq(pl_allgather(c, x, y, n, dt, s), PL_OK);
  hy = host(d, y, G * n * es);
  for (int q = 0; q < G; q++)
    same("allgather", (char *)hy + q * n * es, hx, n * es, n * es);
  counted(c, PL_COMM_ALLGATHER, 1, (G - 1) * n * es, (G - 1) * n * es);
  free(hy);
  /* reduce-scatter: the caller's own block 0 */
  ck_assert_int_eq(pl_reduce_scatter(c, x, y, n, dt, PL_RED_SUM, s), PL_OK);
  hy = host(d, y, n * es);
  same("reduce_scatter", hy, hx, n * es, n * es);
  counted(c, PL_COMM_REDUCE_SCATTER, 1, (G - 1) * n * es, (G - 1) * n * es);
  free(hy);
  /* all-to-all-v, uneven: block q of send comes back as q's */
  size_t sc[8], sd[8], rc[8], rd[8], st = 0, rt = 0, so = 0, ro = 0;
  for (int q = 0; q < G; q++) {
    sc[q] = (size_t)q + 3, rc[q] = (size_t)(2 * q + 1) % 5 + 2;
    sd[q] = st, rd[q] = rt, st += sc[q], rt += rc[q];
    if (q)
      so += sc[q], ro += rc[q];
  }
  /* room for the all-to-all's rt and send/recv's 12 elements */
  void *ya = dalloc(d, (rt > 12 ? rt : 12) * es);
  ck_assert_int_eq(pl_fill(s, ya, dt, rt, 7.0), PL_OK);
  ck_assert_int_eq(pl_alltoallv(c, x, sc, sd, ya, rc, rd, dt, s), PL_OK);
  hy = host(d, ya, rt * es);
  for (int q = 0; q < G; q++) {
    const size_t k = sc[q] < rc[q] ? sc[q] : rc[q];
    same("alltoallv", (char *)hy + rd[q] * es, (char *)hx + sd[q] * es, k * es,
         rc[q] * es);
  }
  counted(c, PL_COMM_ALLTOALLV, 1, so * es, ro * es);
  free(hy);
  /* send/recv: recv = send, the longer receive zero-filled */
  ck_assert_int_eq(pl_fill(s, ya, dt, 12, 7.0), PL_OK);
  ck_assert_msg(pl_sendrecv(c, x, 9, 1 % G, ya, 12, (G - 1) % G, dt, s) ==
                    PL_OK,
                "sendrecv (%s, G=%d): %s", pl_backend_name(pl_dev_backend(d)),
                G, pl_last_error());
  hy = host(d, ya, 12 * es);
  same("sendrecv", hy, hx, 9 * es, 12 * es);
  free(hy);
  ck_assert_int_eq(pl_sendrecv(c, x, 12, 1 % G, ya, 9, (G - 1) % G, dt, s),
                   PL_OK);
  hy = host(d, ya, 9 * es);
  same("sendrecv (shorter receive)", hy, hx, 9 * es, 9 * es);
  counted(c, PL_COMM_SENDRECV, 2, G > 1 ? 21 * es : 0, G > 1 ? 21 * es : 0);
  free(hy);
  /* broadcast from an absent root: the caller's data stands in */
  ck_assert_int_eq(pl_broadcast(c, x, n, dt, G - 1, s), PL_OK);
  hy = host(d, x, n * es);
  same("broadcast", hy, hx, n * es, n * es);
  counted(c, PL_COMM_BROADCAST, 1, G > 2 ? n * es : 0, G > 1 ? n * es : 0);
  free(hy);
  pl_comm_stats cs;
  pl_comm_stats_get(c, &cs);
  ck_assert_msg(G == 1 || cs.standins > 0, "no stand-in counted");
  pl_comm_stats_reset(c);
  counted(c, PL_COMM_ALLREDUCE, 0, 0, 0);
  /* host collectives */
  int64_t v[8] = {5, -3}, w[40];
  ck_assert_int_eq(pl_host_allreduce_i64(c, v, 2, PL_RED_SUM), PL_OK);
  ck_assert(v[0] == 5 && v[1] == -3);
  ck_assert_int_eq(pl_host_allgather_i64(c, v, 2, w), PL_OK);
  for (int q = 0; q < G; q++)
    ck_assert(w[2 * q] == 5 && w[2 * q + 1] == -3);
  for (int q = 0; q < G; q++)
    v[q] = 100 + q;
  ck_assert_int_eq(pl_host_alltoall_i64(c, v, 1, w), PL_OK);
  for (int q = 0; q < G; q++)
    ck_assert(w[q] == 100);
  ck_assert_int_eq(pl_host_bcast(c, v, 8, G - 1), PL_OK);
  ck_assert(v[0] == 100);
  ck_assert_int_eq(pl_barrier(c), PL_OK);
  pl_comm *sub = NULL;
  if (G == 1) { /* a group of one splits into a group of one, or none */
    ck_assert_int_eq(pl_comm_split(c, 3, 0, &sub), PL_OK);
    ck_assert(sub && pl_comm_is_virtual(sub));
    ck_assert_int_eq(pl_comm_size(sub), 1);
    ck_assert_int_eq(pl_comm_rank(sub), 0);
    ck_assert_int_eq(pl_host_allreduce_i64(sub, v, 1, PL_RED_SUM), PL_OK);
    ck_assert(v[0] == 100);
    pl_comm_destroy(sub);
    sub = (pl_comm *)1;
    ck_assert_int_eq(pl_comm_split(c, -1, 0, &sub), PL_OK);
    ck_assert_ptr_null(sub);
  } else {
    ck_assert_int_eq(pl_comm_split(c, 0, 0, &sub), PL_EUNSUPPORTED);
    ck_assert_msg(strstr(pl_last_error(), "virtual group"), "%s",
                  pl_last_error());
    pl_clear_error();
  }
  free(hx);
  pl_free(d, x), pl_free(d, y), pl_free(d, ya);
  pl_comm_destroy(c);
}

START_TEST(standins) {
  static const int Gs[] = {1, 2, 3, 5};
  for (int b = 0; b < g_nbe; b++)
    for (int i = 0; i < 4; i++) {
      check_group(g_dev[b], Gs[i], PL_F32);
      check_group(g_dev[b], Gs[i], PL_BF16);
    }
  ck_assert_int_eq(pl_comm_virtual(g_dev[0], 0, &(pl_comm *){NULL}), PL_EINVAL);
  pl_clear_error();
}
END_TEST

START_TEST(profile) {
  for (int b = 0; b < g_nbe; b++) {
    pl_dev *d = g_dev[b];
    pl_stream *s = pl_dev_stream(d), *side;
    ck_assert_int_eq(pl_stream_create(d, &side), PL_OK);
    pl_comm *c;
    ck_assert_int_eq(pl_comm_virtual(d, 4, &c), PL_OK);
    void *x = rnd(d, PL_F32, 4096, 3), *y = dalloc(d, 4 * 4096 * 4);
    double on = -1, off = -1;
    ck_assert_int_eq(pl_allgather(c, x, y, 4096, PL_F32, s), PL_OK);
    ck_assert_int_eq(pl_dev_sync(d), PL_OK);
    ck_assert_int_eq(pl_comm_take_standin_ms(c, s, &on, &off), PL_OK);
    ck_assert(on == 0 && off == 0); /* the profile is off */
    ck_assert_int_eq(pl_comm_set_profile(c, 1), PL_OK);
    for (int k = 0; k < 3; k++)
      ck_assert_int_eq(pl_allgather(c, x, y, 4096, PL_F32, side), PL_OK);
    ck_assert_int_eq(pl_dev_sync(d), PL_OK);
    ck_assert_int_eq(pl_comm_take_standin_ms(c, s, &on, &off), PL_OK);
    ck_assert_msg(on == 0 && off >= 0, "side-stream stand-ins: on %g", on);
    ck_assert_int_eq(pl_allgather(c, x, y, 4096, PL_F32, s), PL_OK);
    ck_assert_int_eq(pl_dev_sync(d), PL_OK);
    ck_assert_int_eq(pl_comm_take_standin_ms(c, s, &on, &off), PL_OK);
    ck_assert_msg(on >= 0 && off == 0, "compute-stream stand-in: side %g", off);
    ck_assert_int_eq(pl_comm_take_standin_ms(c, s, &on, &off), PL_OK);
    ck_assert(on == 0 && off == 0); /* taken */
    pl_free(d, x), pl_free(d, y);
    pl_comm_destroy(c);
    pl_stream_destroy(side);
  }
}
END_TEST

/* The same calls on a real group of G (world ranks [0, G)) and a virtual
 * one: rank 0's counts agree per operation. */
static void ops(pl_comm *c, pl_dev *d, void *x, void *y) {
  const int G = pl_comm_size(c);
  pl_stream *s = pl_dev_stream(d);
  size_t cnt[8], dis[8];
  for (int q = 0; q < G; q++)
    cnt[q] = 16, dis[q] = 16 * (size_t)q;
  ck_assert_int_eq(pl_allreduce(c, x, y, 64, PL_F32, PL_RED_SUM, s), PL_OK);
  ck_assert_int_eq(pl_allgather(c, x, y, 16, PL_BF16, s), PL_OK);
  ck_assert_int_eq(pl_reduce_scatter(c, x, y, 16, PL_F32, PL_RED_SUM, s),
                   PL_OK);
  ck_assert_int_eq(pl_alltoallv(c, x, cnt, dis, y, cnt, dis, PL_F32, s), PL_OK);
  const int r = pl_comm_rank(c);
  ck_assert_int_eq(
      pl_sendrecv(c, x, 24, (r + 1) % G, y, 24, (r - 1 + G) % G, PL_BF16, s),
      PL_OK);
  ck_assert_int_eq(pl_broadcast(c, x, 32, PL_F32, 0, s), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
}

START_TEST(as_real) {
  pl_dev *d = g_dev[0];
  void *x = rnd(d, PL_F32, 512, 5), *y = dalloc(d, 512 * 4);
  for (int G = 1; G <= g_size && G <= 4; G++) {
    pl_comm *real = NULL, *v;
    ck_assert_int_eq(pl_comm_split(g_world, g_rank < G ? 0 : -1, g_rank, &real),
                     PL_OK);
    if (!real)
      continue;
    ops(real, d, x, y);
    ck_assert_int_eq(pl_comm_virtual(d, G, &v), PL_OK);
    ops(v, d, x, y);
    pl_comm_stats a, b;
    pl_comm_stats_get(real, &a);
    pl_comm_stats_get(v, &b);
    if (g_rank == 0)
      for (int op = 0; op < PL_COMM_NOPS; op++)
        ck_assert_msg(
            a.calls[op] == b.calls[op] && a.sent[op] == b.sent[op] &&
                a.recv[op] == b.recv[op],
            "%s over %d: real %llu/%llu/%llu, virtual %llu/%llu/%llu",
            pl_comm_op_name(op), G, (unsigned long long)a.calls[op],
            (unsigned long long)a.sent[op], (unsigned long long)a.recv[op],
            (unsigned long long)b.calls[op], (unsigned long long)b.sent[op],
            (unsigned long long)b.recv[op]);
    ck_assert(a.standins == 0);
    pl_comm_destroy(v);
    pl_comm_destroy(real);
  }
  pl_free(d, x), pl_free(d, y);
}
END_TEST

START_TEST(present) {
  pl_dev *d = g_dev[0];
  pl_comm *self, *v;
  ck_assert_int_eq(pl_comm_split(g_world, g_rank, 0, &self), PL_OK);
  ck_assert_int_eq(pl_comm_virtual(d, 1, &v), PL_OK);
  void *x = rnd(d, PL_BF16, 256, 9), *y1 = dalloc(d, 512), *y2 = dalloc(d, 512);
  pl_comm *cs[2] = {self, v};
  void *ys[2] = {y1, y2};
  for (int k = 0; k < 2; k++) {
    ck_assert_int_eq(pl_fill(pl_dev_stream(d), ys[k], PL_BF16, 256, 0.0),
                     PL_OK);
    ops(cs[k], d, x, ys[k]);
  }
  void *h1 = host(d, y1, 512), *h2 = host(d, y2, 512);
  same("a virtual group of one", h1, h2, 512, 512);
  free(h1), free(h2);
  pl_free(d, x), pl_free(d, y1), pl_free(d, y2);
  pl_comm_destroy(v);
  pl_comm_destroy(self);
}
END_TEST

typedef struct worker {
  pl_dev *d;
  int ok, done;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  void *x = NULL, *y = NULL;
  if (pl_alloc(w->d, PL_ARENA_DEVICE, 512 * 4, "x", &x) != PL_OK ||
      pl_alloc(w->d, PL_ARENA_DEVICE, 512 * 4, "y", &y) != PL_OK)
    return NULL;
  for (int i = 0; i < 50; i++) {
    pl_comm *one = NULL, *sub = NULL;
    int64_t v[2] = {i, -i};
    if (pl_comm_virtual(w->d, 1, &one) != PL_OK)
      break;
    if (pl_comm_split(one, i % 3, 0, &sub) == PL_OK && sub &&
        pl_host_allreduce_i64(sub, v, 2, PL_RED_MAX) == PL_OK && v[0] == i &&
        v[1] == -i && pl_barrier(sub) == PL_OK) {
      ops(sub, w->d, x, y);
      w->ok++;
    }
    pl_comm_destroy(sub);
    pl_comm_destroy(one);
  }
  pl_free(w->d, x), pl_free(w->d, y);
  w->done = 1;
  return NULL;
}

START_TEST(threads) {
  enum { T = 4 };
  worker w[T] = {{0}};
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &w[i].d), PL_OK);
    ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < T; i++) {
    ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    ck_assert_msg(w[i].done && w[i].ok == 50, "thread %d: %d of 50", i,
                  w[i].ok);
    pl_dev_destroy(w[i].d);
  }
}
END_TEST

/* One uneven all-to-all-v of a virtual group of G on device d (x, y: f32
 * buffers of 64 elements); its counts. */
static pl_comm_stats a2a_counted(pl_dev *d, int G, void *x, void *y) {
  pl_comm *c;
  ck_assert_int_eq(pl_comm_virtual(d, G, &c), PL_OK);
  size_t sc[8], sd[8], rc[8], rd[8];
  for (int q = 0; q < G; q++) { /* more, fewer, none, and none sent */
    sc[q] = (size_t)(q % 4 == 3 ? 0 : q + 2);
    rc[q] = (size_t)(q % 4 == 2 ? 0 : (3 * q + 1) % 5);
    sd[q] = 8 * (size_t)q, rd[q] = 8 * (size_t)q;
  }
  pl_stream *s = pl_dev_stream(d);
  ck_assert_int_eq(pl_alltoallv(c, x, sc, sd, y, rc, rd, PL_F32, s), PL_OK);
  /* in place: block q lands where it is read, no copy */
  ck_assert_int_eq(pl_alltoallv(c, y, sc, sd, y, rc, rd, PL_F32, s), PL_OK);
  sc[0] = rc[0] = 3;
  ck_assert_int_ne(pl_alltoallv(c, NULL, sc, sd, y, rc, rd, PL_F32, s), PL_OK);
  ck_assert_msg(strstr(pl_last_error(), "NULL"), "%s", pl_last_error());
  pl_clear_error();
  pl_comm_stats st;
  pl_comm_stats_get(c, &st);
  pl_comm_destroy(c);
  return st;
}

START_TEST(dry) {
  pl_dev *dd;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_DRY, 0, &dd), PL_OK);
  pl_dev *d = g_dev[0];
  void *x = rnd(d, PL_F32, 64, 13), *y = dalloc(d, 64 * 4);
  void *dx = dalloc(dd, 64 * 4), *dy = dalloc(dd, 64 * 4);
  static const int Gs[] = {1, 2, 3, 5, 8};
  for (int i = 0; i < 5; i++) {
    const pl_comm_stats a = a2a_counted(d, Gs[i], x, y),
                        b = a2a_counted(dd, Gs[i], dx, dy);
    const int op = PL_COMM_ALLTOALLV;
    ck_assert_msg(
        a.calls[op] == b.calls[op] && a.sent[op] == b.sent[op] &&
            a.recv[op] == b.recv[op] && a.standins == b.standins &&
            a.standin_bytes == b.standin_bytes,
        "G=%d: cpu %llu/%llu/%llu/%llu/%llu, dry "
        "%llu/%llu/%llu/%llu/%llu",
        Gs[i], (unsigned long long)a.calls[op], (unsigned long long)a.sent[op],
        (unsigned long long)a.recv[op], (unsigned long long)a.standins,
        (unsigned long long)a.standin_bytes, (unsigned long long)b.calls[op],
        (unsigned long long)b.sent[op], (unsigned long long)b.recv[op],
        (unsigned long long)b.standins, (unsigned long long)b.standin_bytes);
    ck_assert(Gs[i] == 1 || a.standins > 0);
  }
  pl_free(d, x), pl_free(d, y), pl_free(dd, dx), pl_free(dd, dy);
  pl_dev_destroy(dd);
}
END_TEST

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK)
    return 2;
  g_rank = pl_world_rank(), g_size = pl_world_size();
  if (pl_dev_create(PL_BACKEND_CPU, 0, &g_dev[0]) != PL_OK ||
      pl_comm_world(g_dev[0], &g_world) != PL_OK) {
    fprintf(stderr, "set-up: %s\n", pl_last_error());
    return 3;
  }
  g_nbe = 1;
  if (pl_backend_available(PL_BACKEND_CUDA) && pl_cuda_device_count() > 0) {
    if (pl_dev_create(PL_BACKEND_CUDA, -1, &g_dev[1]) != PL_OK) {
      fprintf(stderr, "CUDA set-up: %s\n", pl_last_error());
      return 3;
    }
    g_nbe = 2;
  }
  pl_comm_set_timeout(g_world, 60.0);
  const TTest *tests[] = {standins, profile, as_real, present,
                          threads,  dry,     NULL};
  const int nf = pl_check_run("virtual groups", 120, tests, g_rank, g_world);
  pl_comm_destroy(g_world);
  for (int b = g_nbe - 1; b >= 0; b--)
    pl_dev_destroy(g_dev[b]);
  pl_finalize();
  return nf ? 1 : 0;
}
