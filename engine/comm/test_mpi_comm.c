/* test_mpi_comm.c — every pl_comm operation against a host reference on random
 * data, under mpirun -np 1..4 (make test-mpi), on the CPU backend and, when a
 * GPU is visible, on CUDA/NCCL too.
 *
 * Each rank's input is a pure function of (seed, rank) (pl_rng_*), so every
 * rank can rebuild all ranks' inputs and compute the reference locally.
 * Outputs are poisoned (0xff bytes: NaN / -1) before each operation.  Moves
 * (all-gather, all-to-all-v, send/recv, broadcast) must be bit-exact;
 * max/min reductions and integer sums exact; float sums within the rounding
 * bound of P-1 combining steps: (P-1)·u·Σ|x| with u = 2^-24 (f32) or 2^-8
 * (bf16, which rounds at each step on MPI and NCCL alike).  A failing check
 * reports the first bad index and the max abs/rel error.  Checks are "soft"
 * inside a test (counted, asserted at its end) so every rank keeps issuing the
 * same collectives in step.
 *
 * Hidden modes for engine/comm/test_timeout.sh: comm_probe_testlib.h. */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/check_mpi.h"
#include "comm/comm_probe_testlib.h"
#include "plateau/host_device.h"
#include "plateau/plateau.h"

static int g_nbe; /* backends under test: CPU, then CUDA */
static pl_dev *g_dev[2];
static pl_comm *g_world[2];
static int g_rank, g_size;

/* ---- soft checks ------------------------------------------------------------
 */

static int g_fails;
static char g_first[1024];

static void soft_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void soft_fail(const char *fmt, ...) {
  if (g_fails++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_first, sizeof g_first, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[r%d] FAIL %s\n", g_rank, g_first);
  }
}

#define SOFT_OK(call, ...)                                                     \
  do {                                                                         \
    pl_status s_ = (call);                                                     \
    if (s_ != PL_OK) {                                                         \
      char w_[256];                                                            \
      snprintf(w_, sizeof w_, __VA_ARGS__);                                    \
      soft_fail("%s: %s returned %s (%s)", w_, #call, pl_strerror(s_),         \
                pl_last_error());                                              \
    }                                                                          \
  } while (0)

static void begin(void) {
  g_fails = 0;
  g_first[0] = '\0';
}
#define END()                                                                  \
  ck_assert_msg(g_fails == 0, "%d failed checks; first: %s", g_fails, g_first)

/* ---- data
 * -------------------------------------------------------------------- */

static const char *be_name(int b) {
  return pl_backend_name(pl_dev_backend(g_dev[b]));
}

static uint64_t seed_of(uint64_t base, int rank) {
  return pl_rng_mix64(base * 1315423911ull + (uint64_t)rank + 1);
}

/* n elements of rank `rank`'s input for `base`. */
static void gen(void *h, pl_dtype dt, size_t n, uint64_t base, int rank) {
  uint64_t sd = seed_of(base, rank);
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
    case PL_F32:
      ((float *)h)[i] = pl_rng_uniform(sd, i, -1.0f, 1.0f);
      break;
    case PL_BF16:
      ((pl_bf16 *)h)[i] = pl_f32_to_bf16(pl_rng_uniform(sd, i, -1.0f, 1.0f));
      break;
    case PL_I32:
      ((int32_t *)h)[i] = (int32_t)(pl_rng_u32(sd, i) >> 4) - (1 << 27);
      break;
    case PL_I64: /* beyond 32 bits: |v| < 2^56 */
      ((int64_t *)h)[i] =
          ((int64_t)pl_rng_u32(sd, i) << 24) - ((int64_t)1 << 55);
      break;
    }
  }
}

static double getf(const void *h, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? ((const float *)h)[i]
                      : pl_bf16_to_f32(((const pl_bf16 *)h)[i]);
}
static int64_t geti(const void *h, pl_dtype dt, size_t i) {
  return dt == PL_I32 ? ((const int32_t *)h)[i] : ((const int64_t *)h)[i];
}
static int is_int(pl_dtype dt) {
  return dt == PL_I32 || dt == PL_I64;
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  ck_assert_ptr_nonnull(p);
  return p;
}

static void *dalloc(int b, size_t bytes) {
  void *p = NULL;
  pl_status s = pl_alloc(g_dev[b], PL_ARENA_DEVICE, bytes, "comm_test", &p);
  ck_assert_msg(s == PL_OK, "pl_alloc %zu: %s", bytes, pl_last_error());
  return p;
}

static void h2d(int b, void *d, const void *h, size_t bytes) {
  pl_stream *s = pl_dev_stream(g_dev[b]);
  SOFT_OK(pl_memcpy_async(s, d, h, bytes), "h2d");
  SOFT_OK(pl_stream_sync(s), "h2d sync");
}
static void d2h(int b, void *h, const void *d, size_t bytes) {
  pl_stream *s = pl_dev_stream(g_dev[b]);
  SOFT_OK(pl_stream_sync(s), "d2h pre-sync");
  SOFT_OK(pl_memcpy_async(s, h, d, bytes), "d2h");
  SOFT_OK(pl_stream_sync(s), "d2h sync");
}
static void poison_dev(int b, void *d, size_t bytes) {
  void *h = xmalloc(bytes);
  memset(h, 0xff, bytes);
  h2d(b, d, h, bytes);
  free(h);
}

/* Bit-exact comparison of n elements of size es. */
static void check_exact(const char *what, const void *got, const void *want,
                        size_t n, size_t es) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (memcmp((const char *)got + i * es, (const char *)want + i * es, es)) {
      if (!bad)
        first = i;
      bad++;
    }
  if (bad)
    soft_fail("%s: %zu of %zu elements differ, first at %zu", what, bad, n,
              first);
}

/* Reduction result vs reference: ints exact (ref_i), floats within tol[i]. */
static void check_reduce(const char *what, pl_dtype dt, const void *got,
                         const int64_t *ref_i, const double *ref_f,
                         const double *tol, size_t n) {
  size_t bad = 0, first = 0;
  double max_abs = 0, max_rel = 0;
  for (size_t i = 0; i < n; i++) {
    int ok;
    if (is_int(dt)) {
      ok = geti(got, dt, i) == ref_i[i];
      double e = fabs((double)geti(got, dt, i) - (double)ref_i[i]);
      if (e > max_abs)
        max_abs = e;
    } else {
      double g = getf(got, dt, i), e = fabs(g - ref_f[i]);
      ok = !isnan(g) && e <= tol[i];
      if (e > max_abs || isnan(e))
        max_abs = isnan(e) ? INFINITY : e;
      double r = e / (fabs(ref_f[i]) > 1e-30 ? fabs(ref_f[i]) : 1e-30);
      if (r > max_rel || isnan(r))
        max_rel = isnan(r) ? INFINITY : r;
    }
    if (!ok) {
      if (!bad)
        first = i;
      bad++;
    }
  }
  if (bad)
    soft_fail(
        "%s: %zu of %zu bad, first at %zu; max abs err %g, max rel err %g",
        what, bad, n, first, max_abs, max_rel);
}

/* Reference reduction over ranks `members` (count m) of block [off, off+n) of
 * their gen(base) inputs of length len. */
static void ref_reduce(pl_dtype dt, pl_redop op, uint64_t base,
                       const int *members, int m, size_t len, size_t off,
                       size_t n, int64_t *ref_i, double *ref_f, double *tol) {
  void *tmp = xmalloc(len * pl_dtype_size(dt));
  double *absum = xmalloc(n * sizeof *absum);
  for (int k = 0; k < m; k++) {
    gen(tmp, dt, len, base, members[k]);
    for (size_t i = 0; i < n; i++) {
      if (is_int(dt)) {
        int64_t v = geti(tmp, dt, off + i);
        if (k == 0)
          ref_i[i] = v;
        else if (op == PL_RED_SUM)
          ref_i[i] += v;
        else if (op == PL_RED_MAX)
          ref_i[i] = v > ref_i[i] ? v : ref_i[i];
        else
          ref_i[i] = v < ref_i[i] ? v : ref_i[i];
      } else {
        double v = getf(tmp, dt, off + i);
        if (k == 0) {
          ref_f[i] = v;
          absum[i] = fabs(v);
        } else {
          absum[i] += fabs(v);
          if (op == PL_RED_SUM)
            ref_f[i] += v;
          else if (op == PL_RED_MAX)
            ref_f[i] = v > ref_f[i] ? v : ref_f[i];
          else
            ref_f[i] = v < ref_f[i] ? v : ref_f[i];
        }
      }
    }
  }
  if (!is_int(dt))
    for (size_t i = 0; i < n; i++) {
      /* m-1 combining steps, each rounding with unit roundoff u (2^-24 f32,
       * 2^-8 bf16: 24 and 8 significant bits) of a partial sum no larger
       * than sum|x|. */
      double u = dt == PL_F32 ? ldexp(1.0, -24) : ldexp(1.0, -8);
      tol[i] = op == PL_RED_SUM ? (m - 1) * u * 1.01 * absum[i] : 0.0;
    }
  free(tmp);
  free(absum);
}

static const pl_redop OPS[] = {PL_RED_SUM, PL_RED_MAX, PL_RED_MIN};
static const char *OPN[] = {"sum", "max", "min"};

/* ---- tests
 * -------------------------------------------------------------------- */

START_TEST(test_versions_and_world) {
  begin();
  const char *mv = pl_mpi_version();
  if (strncmp(mv, "Open MPI v", 10) != 0 || strchr(mv, ','))
    soft_fail("pl_mpi_version() = \"%s\": want \"Open MPI vX.Y.Z\"", mv);
  const char *nv = pl_nccl_version();
#if PL_HAVE_CUDA
  if (strncmp(nv, "NCCL 2.", 7) != 0)
    soft_fail("pl_nccl_version() = \"%s\": want \"NCCL 2.x.y\"", nv);
#else
  if (strcmp(nv, "-") != 0)
    soft_fail("pl_nccl_version() = \"%s\": want -", nv);
#endif
  if (g_rank == 0)
    printf("# %s, %s\n", mv, nv);
  /* the launch is on one node here: every rank is local (tests decide
   * whether NCCL can run by comparing this with the GPUs) */
  if (pl_local_size() != g_size)
    soft_fail("pl_local_size() = %d on a one-node launch of %d ranks",
              pl_local_size(), g_size);
  for (int b = 0; b < g_nbe; b++) {
    if (pl_comm_rank(g_world[b]) != pl_world_rank() ||
        pl_comm_size(g_world[b]) != pl_world_size())
      soft_fail("%s: world comm rank/size %d/%d vs world %d/%d", be_name(b),
                pl_comm_rank(g_world[b]), pl_comm_size(g_world[b]),
                pl_world_rank(), pl_world_size());
    if (pl_comm_dev(g_world[b]) != g_dev[b])
      soft_fail("pl_comm_dev mismatch");
    SOFT_OK(pl_barrier(g_world[b]), "%s barrier", be_name(b));
  }
  END();
}
END_TEST

START_TEST(test_allreduce) {
  begin();
  static const size_t sizes[] = {0, 1, 7, 1000, 4099};
  static const pl_dtype dts[] = {PL_F32, PL_BF16, PL_I32, PL_I64};
  for (int b = 0; b < g_nbe; b++)
    for (int di = 0; di < 4; di++)
      for (int oi = 0; oi < 3; oi++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
          for (int inplace = 0; inplace < 2; inplace++) {
            pl_dtype dt = dts[di];
            size_t n = sizes[si], es = pl_dtype_size(dt);
            uint64_t base = 100 + di * 50 + oi * 10 + si;
            char what[160];
            snprintf(what, sizeof what, "%s allreduce %s %s n=%zu%s",
                     be_name(b), pl_dtype_name(dt), OPN[oi], n,
                     inplace ? " in place" : "");
            void *h = xmalloc(n * es), *out = xmalloc(n * es);
            gen(h, dt, n, base, g_rank);
            void *ds = dalloc(b, n * es),
                 *dr = inplace ? ds : dalloc(b, n * es);
            h2d(b, ds, h, n * es);
            if (!inplace)
              poison_dev(b, dr, n * es);
            SOFT_OK(pl_allreduce(g_world[b], ds, dr, n, dt, OPS[oi], NULL),
                    "%s", what);
            d2h(b, out, dr, n * es);
            int *mem = xmalloc(g_size * sizeof *mem);
            for (int r = 0; r < g_size; r++)
              mem[r] = r;
            int64_t *ri = xmalloc(n * 8);
            double *rf = xmalloc(n * 8), *tol = xmalloc(n * 8);
            ref_reduce(dt, OPS[oi], base, mem, g_size, n, 0, n, ri, rf, tol);
            check_reduce(what, dt, out, ri, rf, tol, n);
            pl_free(g_dev[b], ds);
            if (!inplace)
              pl_free(g_dev[b], dr);
            free(h), free(out), free(mem), free(ri), free(rf), free(tol);
          }
  END();
}
END_TEST

START_TEST(test_allgather) {
  begin();
  static const size_t sizes[] = {0, 1, 5, 1001};
  static const pl_dtype dts[] = {PL_F32, PL_BF16, PL_I64};
  for (int b = 0; b < g_nbe; b++)
    for (int di = 0; di < 3; di++)
      for (size_t si = 0; si < 4; si++)
        for (int inplace = 0; inplace < 2; inplace++) {
          pl_dtype dt = dts[di];
          size_t n = sizes[si], es = pl_dtype_size(dt), P = (size_t)g_size;
          uint64_t base = 700 + di * 10 + si;
          char what[160];
          snprintf(what, sizeof what, "%s allgather %s n=%zu%s", be_name(b),
                   pl_dtype_name(dt), n, inplace ? " in place" : "");
          void *h = xmalloc(n * es), *out = xmalloc(P * n * es),
               *want = xmalloc(P * n * es);
          for (int r = 0; r < g_size; r++)
            gen((char *)want + r * n * es, dt, n, base, r);
          gen(h, dt, n, base, g_rank);
          void *dr = dalloc(b, P * n * es);
          poison_dev(b, dr, P * n * es);
          void *ds;
          if (inplace) {
            ds = (char *)dr + (size_t)g_rank * n * es;
            h2d(b, ds, h, n * es);
          } else {
            ds = dalloc(b, n * es);
            h2d(b, ds, h, n * es);
          }
          SOFT_OK(pl_allgather(g_world[b], ds, dr, n, dt, NULL), "%s", what);
          d2h(b, out, dr, P * n * es);
          check_exact(what, out, want, P * n, es);
          if (!inplace)
            pl_free(g_dev[b], ds);
          pl_free(g_dev[b], dr);
          free(h), free(out), free(want);
        }
  END();
}
END_TEST

START_TEST(test_reduce_scatter) {
  begin();
  static const size_t sizes[] = {0, 1, 33, 517};
  static const pl_dtype dts[] = {PL_F32, PL_BF16, PL_I64};
  for (int b = 0; b < g_nbe; b++)
    for (int di = 0; di < 3; di++)
      for (int oi = 0; oi < 3; oi++)
        for (size_t si = 0; si < 4; si++)
          for (int inplace = 0; inplace < 2; inplace++) {
            pl_dtype dt = dts[di];
            size_t n = sizes[si], es = pl_dtype_size(dt), P = (size_t)g_size;
            uint64_t base = 900 + di * 50 + oi * 10 + si;
            char what[160];
            snprintf(what, sizeof what, "%s reduce_scatter %s %s n=%zu%s",
                     be_name(b), pl_dtype_name(dt), OPN[oi], n,
                     inplace ? " in place" : "");
            void *h = xmalloc(P * n * es), *out = xmalloc(n * es);
            gen(h, dt, P * n, base, g_rank);
            void *ds = dalloc(b, P * n * es);
            h2d(b, ds, h, P * n * es);
            void *dr = inplace ? (char *)ds + (size_t)g_rank * n * es
                               : dalloc(b, n * es);
            if (!inplace)
              poison_dev(b, dr, n * es);
            SOFT_OK(pl_reduce_scatter(g_world[b], ds, dr, n, dt, OPS[oi], NULL),
                    "%s", what);
            d2h(b, out, dr, n * es);
            int *mem = xmalloc(g_size * sizeof *mem);
            for (int r = 0; r < g_size; r++)
              mem[r] = r;
            int64_t *ri = xmalloc(n * 8);
            double *rf = xmalloc(n * 8), *tol = xmalloc(n * 8);
            ref_reduce(dt, OPS[oi], base, mem, g_size, P * n,
                       (size_t)g_rank * n, n, ri, rf, tol);
            check_reduce(what, dt, out, ri, rf, tol, n);
            pl_free(g_dev[b], ds);
            if (!inplace)
              pl_free(g_dev[b], dr);
            free(h), free(out), free(mem), free(ri), free(rf), free(tol);
          }
  END();
}
END_TEST

/* Elements rank r sends to rank d: uneven, with zeros (self included), and
 * the last rank (when P > 1) sends nothing at all.  pattern 1: all zero. */
static size_t a2a_count(int pattern, int r, int d, int P) {
  if (pattern == 1)
    return 0;
  if (P > 1 && r == P - 1)
    return 0;
  return (size_t)((r * 7 + d * 3 + 1) % 5) * 13 + (d == 0 ? 1 : 0);
}

/* Layout with gaps: block d at sum of earlier blocks + gap·d. */
static void a2a_layout(int pattern, int r, int P, int sending, size_t gap,
                       size_t *counts, size_t *displs, size_t *total) {
  size_t off = 0;
  for (int d = 0; d < P; d++) {
    counts[d] =
        sending ? a2a_count(pattern, r, d, P) : a2a_count(pattern, d, r, P);
    displs[d] = off;
    off += counts[d] + gap;
  }
  *total = off;
}

START_TEST(test_alltoallv) {
  begin();
  static const pl_dtype dts[] = {PL_F32, PL_BF16, PL_I64};
  int P = g_size;
  size_t *sc = xmalloc(P * sizeof *sc), *sd = xmalloc(P * sizeof *sd);
  size_t *rc = xmalloc(P * sizeof *rc), *rd = xmalloc(P * sizeof *rd);
  size_t *qc = xmalloc(P * sizeof *qc), *qd = xmalloc(P * sizeof *qd);
  for (int b = 0; b < g_nbe; b++)
    for (int di = 0; di < 3; di++)
      for (int pattern = 0; pattern < 2; pattern++) {
        pl_dtype dt = dts[di];
        size_t es = pl_dtype_size(dt), stot, rtot, qtot;
        uint64_t base = 1500 + di * 10 + pattern;
        char what[160];
        snprintf(what, sizeof what, "%s alltoallv %s pattern %d", be_name(b),
                 pl_dtype_name(dt), pattern);
        a2a_layout(pattern, g_rank, P, 1, 2, sc, sd, &stot);
        a2a_layout(pattern, g_rank, P, 0, 3, rc, rd, &rtot);
        void *h = xmalloc(stot * es), *out = xmalloc(rtot * es),
             *want = xmalloc(rtot * es);
        gen(h, dt, stot, base, g_rank);
        memset(want, 0xff, rtot * es); /* gaps must stay poisoned */
        for (int q = 0; q < P; q++) {
          a2a_layout(pattern, q, P, 1, 2, qc, qd, &qtot);
          void *qh = xmalloc(qtot * es);
          gen(qh, dt, qtot, base, q);
          memcpy((char *)want + rd[q] * es, (char *)qh + qd[g_rank] * es,
                 rc[q] * es);
          free(qh);
        }
        void *ds = dalloc(b, stot * es), *dr = dalloc(b, rtot * es);
        h2d(b, ds, h, stot * es);
        poison_dev(b, dr, rtot * es);
        SOFT_OK(pl_alltoallv(g_world[b], ds, sc, sd, dr, rc, rd, dt, NULL),
                "%s", what);
        d2h(b, out, dr, rtot * es);
        check_exact(what, out, want, rtot, es);
        pl_free(g_dev[b], ds);
        pl_free(g_dev[b], dr);
        free(h), free(out), free(want);
      }
  free(sc), free(sd), free(rc), free(rd), free(qc), free(qd);
  END();
}
END_TEST

/* One hop: rank r sends cnt(r) to dst and receives cnt(src) from src. */
static void ring_case(int b, pl_dtype dt, int dst, int src, size_t scount,
                      size_t rcount, uint64_t base, const char *what) {
  size_t es = pl_dtype_size(dt);
  void *h = xmalloc(scount * es), *out = xmalloc(rcount * es),
       *want = xmalloc(rcount * es);
  gen(h, dt, scount, base, g_rank);
  gen(want, dt, rcount, base, src);
  void *ds = dalloc(b, scount * es), *dr = dalloc(b, rcount * es);
  h2d(b, ds, h, scount * es);
  poison_dev(b, dr, rcount * es);
  SOFT_OK(pl_sendrecv(g_world[b], ds, scount, dst, dr, rcount, src, dt, NULL),
          "%s", what);
  d2h(b, out, dr, rcount * es);
  check_exact(what, out, want, rcount, es);
  pl_free(g_dev[b], ds);
  pl_free(g_dev[b], dr);
  free(h), free(out), free(want);
}

START_TEST(test_sendrecv) {
  begin();
  static const pl_dtype dts[] = {PL_F32, PL_BF16, PL_I64};
  int P = g_size, dst = (g_rank + 1) % P, src = (g_rank - 1 + P) % P;
  char what[160];
  for (int b = 0; b < g_nbe; b++)
    for (int di = 0; di < 3; di++) {
      pl_dtype dt = dts[di];
      const char *bn = be_name(b), *dn = pl_dtype_name(dt);
      snprintf(what, sizeof what, "%s sendrecv ring %s", bn, dn);
      ring_case(b, dt, dst, src, 3 + 11 * (size_t)g_rank, 3 + 11 * (size_t)src,
                2000 + di, what);
      snprintf(what, sizeof what, "%s sendrecv reverse ring %s", bn, dn);
      ring_case(b, dt, src, dst, 1000 + (size_t)g_rank, 1000 + (size_t)dst,
                2010 + di, what);
      snprintf(what, sizeof what, "%s sendrecv rank 0 sends nothing %s", bn,
               dn);
      ring_case(b, dt, dst, src, g_rank == 0 ? 0 : 17, src == 0 ? 0 : 17,
                2020 + di, what);
      snprintf(what, sizeof what, "%s sendrecv empty %s", bn, dn);
      ring_case(b, dt, dst, src, 0, 0, 2030 + di, what);
      snprintf(what, sizeof what, "%s sendrecv self %s", bn, dn);
      ring_case(b, dt, g_rank, g_rank, 257, 257, 2040 + di, what);
    }
  END();
}
END_TEST

START_TEST(test_broadcast) {
  begin();
  static const size_t sizes[] = {0, 1, 1000};
  static const pl_dtype dts[] = {PL_F32, PL_BF16, PL_I64};
  int roots[2] = {g_size - 1, 0}; /* non-zero root first when P > 1 */
  for (int b = 0; b < g_nbe; b++)
    for (int di = 0; di < 3; di++)
      for (int ri = 0; ri < 2; ri++)
        for (int si = 0; si < 3; si++) {
          pl_dtype dt = dts[di];
          size_t n = sizes[si], es = pl_dtype_size(dt);
          int root = roots[ri];
          uint64_t base = 2500 + di * 10 + si;
          char what[160];
          snprintf(what, sizeof what, "%s broadcast %s root %d n=%zu",
                   be_name(b), pl_dtype_name(dt), root, n);
          void *out = xmalloc(n * es), *want = xmalloc(n * es);
          gen(want, dt, n, base, root);
          void *d = dalloc(b, n * es);
          if (g_rank == root)
            h2d(b, d, want, n * es);
          else
            poison_dev(b, d, n * es);
          SOFT_OK(pl_broadcast(g_world[b], d, n, dt, root, NULL), "%s", what);
          d2h(b, out, d, n * es);
          check_exact(what, out, want, n, es);
          pl_free(g_dev[b], d);
          free(out), free(want);
        }
  END();
}
END_TEST

/* A sum all-reduce (f32 and i64) inside group g and its reference. */
static void group_allreduce(int b, pl_comm *g, const int *members, int m,
                            uint64_t base, const char *label) {
  static const pl_dtype dts[] = {PL_F32, PL_I64};
  for (int di = 0; di < 2; di++) {
    pl_dtype dt = dts[di];
    size_t n = 301, es = pl_dtype_size(dt);
    char what[160];
    snprintf(what, sizeof what, "%s %s allreduce %s", be_name(b), label,
             pl_dtype_name(dt));
    void *h = xmalloc(n * es), *out = xmalloc(n * es);
    gen(h, dt, n, base + di, g_rank);
    void *ds = dalloc(b, n * es), *dr = dalloc(b, n * es);
    h2d(b, ds, h, n * es);
    poison_dev(b, dr, n * es);
    SOFT_OK(pl_allreduce(g, ds, dr, n, dt, PL_RED_SUM, NULL), "%s", what);
    d2h(b, out, dr, n * es);
    int64_t *ri = xmalloc(n * 8);
    double *rf = xmalloc(n * 8), *tol = xmalloc(n * 8);
    ref_reduce(dt, PL_RED_SUM, base + di, members, m, n, 0, n, ri, rf, tol);
    check_reduce(what, dt, out, ri, rf, tol, n);
    pl_free(g_dev[b], ds);
    pl_free(g_dev[b], dr);
    free(h), free(out), free(ri), free(rf), free(tol);
  }
}

START_TEST(test_split) {
  begin();
  int P = g_size;
  int *mem = xmalloc(P * sizeof *mem);
  for (int b = 0; b < g_nbe; b++) {
    /* even/odd, ordered by key = -rank: group rank 0 is the highest rank. */
    pl_comm *g = NULL;
    SOFT_OK(pl_comm_split(g_world[b], g_rank % 2, -g_rank, &g), "%s split",
            be_name(b));
    if (!g) {
      soft_fail("%s split even/odd: got NULL", be_name(b));
      continue;
    }
    int m = 0;
    for (int r = P - 1; r >= 0; r--)
      if (r % 2 == g_rank % 2)
        mem[m++] = r; /* in group-rank order */
    int want_rank = -1;
    for (int k = 0; k < m; k++)
      if (mem[k] == g_rank)
        want_rank = k;
    if (pl_comm_size(g) != m || pl_comm_rank(g) != want_rank)
      soft_fail("%s split even/odd: rank/size %d/%d, want %d/%d", be_name(b),
                pl_comm_rank(g), pl_comm_size(g), want_rank, m);
    if (pl_comm_dev(g) != g_dev[b])
      soft_fail("split: dev differs");
    group_allreduce(b, g, mem, m, 3000 + (uint64_t)(g_rank % 2) * 7,
                    "even/odd group");
    /* A sub-split of the group, and a move inside it. */
    SOFT_OK(pl_barrier(g), "%s group barrier", be_name(b));
    pl_comm_destroy(g);

    /* The last rank opts out (color < 0) and gets NULL. */
    pl_comm *h = (pl_comm *)1;
    int color = (P > 1 && g_rank == P - 1) ? -1 : 5;
    SOFT_OK(pl_comm_split(g_world[b], color, g_rank, &h), "%s split -1",
            be_name(b));
    if (color < 0) {
      if (h != NULL)
        soft_fail("%s split color -1: want NULL", be_name(b));
    } else if (!h) {
      soft_fail("%s split color 5: got NULL", be_name(b));
    } else {
      int m2 = P > 1 ? P - 1 : 1;
      for (int k = 0; k < m2; k++)
        mem[k] = k;
      if (pl_comm_size(h) != m2 || pl_comm_rank(h) != g_rank)
        soft_fail("%s split -1: rank/size %d/%d", be_name(b), pl_comm_rank(h),
                  pl_comm_size(h));
      group_allreduce(b, h, mem, m2, 3100, "all-but-last group");
      pl_comm_destroy(h);
    }
  }
  free(mem);
  END();
}
END_TEST

START_TEST(test_host_collectives) {
  begin();
  int P = g_size;
  pl_comm *c = g_world[0];
  for (int b = 0; b < g_nbe; b++) {
    c = g_world[b]; /* host collectives are MPI on either backend */
    int64_t v[3] = {(int64_t)g_rank * 1000000007ll + 5, -(int64_t)g_rank * 3,
                    ((int64_t)1 << 40) + g_rank};
    int64_t s[3], mx[3], mn[3];
    memcpy(s, v, sizeof v), memcpy(mx, v, sizeof v), memcpy(mn, v, sizeof v);
    SOFT_OK(pl_host_allreduce_i64(c, s, 3, PL_RED_SUM), "host sum");
    SOFT_OK(pl_host_allreduce_i64(c, mx, 3, PL_RED_MAX), "host max");
    SOFT_OK(pl_host_allreduce_i64(c, mn, 3, PL_RED_MIN), "host min");
    int64_t tri = (int64_t)P * (P - 1) / 2;
    if (s[0] != tri * 1000000007ll + 5 * P || s[1] != -3 * tri ||
        s[2] != P * ((int64_t)1 << 40) + tri)
      soft_fail("host_allreduce_i64 sum: %lld %lld %lld", (long long)s[0],
                (long long)s[1], (long long)s[2]);
    if (mx[0] != (int64_t)(P - 1) * 1000000007ll + 5 || mx[1] != 0 ||
        mn[1] != -3 * (int64_t)(P - 1) || mn[2] != ((int64_t)1 << 40))
      soft_fail("host_allreduce_i64 max/min wrong");

    double f[2] = {0.5 + g_rank, -1.25 * g_rank};
    SOFT_OK(pl_host_allreduce_f64(c, f, 2, PL_RED_SUM), "host f64 sum");
    if (f[0] != 0.5 * P + (double)tri || f[1] != -1.25 * (double)tri)
      soft_fail("host_allreduce_f64 sum: %g %g", f[0], f[1]);
    double fm = g_rank * 2.5;
    SOFT_OK(pl_host_allreduce_f64(c, &fm, 1, PL_RED_MAX), "host f64 max");
    if (fm != 2.5 * (P - 1))
      soft_fail("host_allreduce_f64 max: %g", fm);

    int64_t ag_s[2] = {g_rank, -g_rank * 7};
    int64_t *ag = xmalloc(2 * P * sizeof *ag);
    memset(ag, 0xff, 2 * P * sizeof *ag);
    SOFT_OK(pl_host_allgather_i64(c, ag_s, 2, ag), "host allgather");
    for (int r = 0; r < P; r++)
      if (ag[2 * r] != r || ag[2 * r + 1] != -r * 7)
        soft_fail("host_allgather_i64: block %d wrong", r);

    int64_t *a2s = xmalloc(2 * P * sizeof *a2s), *a2r = xmalloc(2 * P * 8);
    for (int d = 0; d < P; d++) {
      a2s[2 * d] = g_rank * 100 + d;
      a2s[2 * d + 1] = -(g_rank * 100 + d);
    }
    memset(a2r, 0xff, 2 * P * 8);
    SOFT_OK(pl_host_alltoall_i64(c, a2s, 2, a2r), "host alltoall");
    for (int q = 0; q < P; q++)
      if (a2r[2 * q] != q * 100 + g_rank ||
          a2r[2 * q + 1] != -(q * 100 + g_rank))
        soft_fail("host_alltoall_i64: block from %d wrong", q);

    char msg[40];
    int root = P - 1;
    if (g_rank == root)
      snprintf(msg, sizeof msg, "plan from %d", root);
    else
      memset(msg, 'x', sizeof msg);
    SOFT_OK(pl_host_bcast(c, msg, sizeof msg, root), "host bcast");
    char want[40];
    snprintf(want, sizeof want, "plan from %d", root);
    if (strcmp(msg, want) != 0)
      soft_fail("host_bcast: got \"%.39s\"", msg);
    free(ag), free(a2s), free(a2r);
  }
  END();
}
END_TEST

START_TEST(test_bad_input) {
  begin();
  for (int b = 0; b < g_nbe; b++) {
    pl_comm *c = g_world[b];
    const double bad[] = {0.0, -1.0, NAN, INFINITY};
    for (int i = 0; i < 4; i++)
      if (pl_comm_set_timeout(c, bad[i]) != PL_EINVAL ||
          !strstr(pl_last_error(), "seconds"))
        soft_fail("pl_comm_set_timeout(%g) not rejected", bad[i]);
    SOFT_OK(pl_comm_set_timeout(c, 60.0), "set_timeout 60");
    float x[4] = {1, 2, 3, 4};
    void *d = dalloc(b, sizeof x);
    if (pl_broadcast(c, d, 4, PL_F32, g_size, NULL) != PL_EINVAL)
      soft_fail("broadcast root=P not rejected");
    if (pl_sendrecv(c, d, 1, -1, d, 1, 0, PL_F32, NULL) != PL_EINVAL)
      soft_fail("sendrecv dst=-1 not rejected");
    if (pl_allreduce(c, d, d, 4, (pl_dtype)9, PL_RED_SUM, NULL) != PL_EINVAL)
      soft_fail("allreduce dtype 9 not rejected");
    if (pl_allreduce(c, d, d, 4, PL_F32, (pl_redop)7, NULL) != PL_EINVAL)
      soft_fail("allreduce op 7 not rejected");
    if (pl_allreduce(c, NULL, NULL, 4, PL_F32, PL_RED_SUM, NULL) != PL_EINVAL)
      soft_fail("allreduce NULL buffers not rejected");
    if (pl_dev_backend(g_dev[b]) == PL_BACKEND_CPU) {
      /* Rejected before any memory is touched. */
      size_t big = (size_t)INT_MAX + 1;
      if (pl_allreduce(c, d, d, big, PL_F32, PL_RED_SUM, NULL) != PL_EINVAL ||
          !strstr(pl_last_error(), "INT_MAX"))
        soft_fail("allreduce count INT_MAX+1 not rejected on MPI");
    }
    pl_free(g_dev[b], d);
    if (pl_comm_split(NULL, 0, 0, &c) != PL_EINVAL)
      soft_fail("split NULL");
    c = g_world[b];
    SOFT_OK(pl_barrier(c), "barrier after bad input");
  }
  END();
}
END_TEST

/* ---- main
 * --------------------------------------------------------------------- */

int main(int argc, char **argv) {
  const char *mode = getenv("PLATEAU_TEST_MODE");
  if (mode && strcmp(mode, "init") == 0)
    return mode_init(&argc, &argv);
  if (mode && strcmp(mode, "hang") == 0)
    return mode_hang(&argc, &argv);
  if (mode && strcmp(mode, "stop") == 0)
    return mode_stop(&argc, &argv);

  if (pl_init(&argc, &argv) != PL_OK) {
    fprintf(stderr, "pl_init: %s\n", pl_last_error());
    return 2;
  }
  g_rank = pl_world_rank();
  g_size = pl_world_size();
  if (pl_dev_create(PL_BACKEND_CPU, 0, &g_dev[0]) != PL_OK ||
      pl_comm_world(g_dev[0], &g_world[0]) != PL_OK) {
    fprintf(stderr, "CPU set-up: %s\n", pl_last_error());
    return 3;
  }
  g_nbe = 1;
  /* NCCL needs one GPU per rank (make test also runs 3 and 4 ranks). */
  int ngpu = pl_backend_available(PL_BACKEND_CUDA) ? pl_cuda_device_count() : 0;
  if (ngpu > 0 && ngpu >= g_size) {
    if (pl_dev_create(PL_BACKEND_CUDA, -1, &g_dev[1]) != PL_OK ||
        pl_comm_world(g_dev[1], &g_world[1]) != PL_OK) {
      fprintf(stderr, "CUDA set-up: %s\n", pl_last_error());
      return 3;
    }
    g_nbe = 2;
  } else if (g_rank == 0) {
    if (ngpu == 0)
      printf("# CUDA/NCCL checks skipped: no CUDA device\n");
    else
      printf("# CUDA/NCCL checks skipped: %d ranks on %d GPUs (NCCL needs "
             "one GPU per rank)\n",
             g_size, ngpu);
  }
  /* A failing check must not leave the other ranks hanging for 300 s. */
  for (int b = 0; b < g_nbe; b++)
    pl_comm_set_timeout(g_world[b], 60.0);

  const TTest *tests[] = {test_versions_and_world,
                          test_allreduce,
                          test_allgather,
                          test_reduce_scatter,
                          test_alltoallv,
                          test_sendrecv,
                          test_broadcast,
                          test_split,
                          test_host_collectives,
                          test_bad_input,
                          NULL};
  /* every rank's verdict, so rank 0's summary line speaks for all */
  const int bad = pl_check_run("comm", 300, tests, g_rank, g_world[0]);
  for (int b = g_nbe - 1; b >= 0; b--) {
    pl_comm_destroy(g_world[b]);
    pl_dev_destroy(g_dev[b]);
  }
  pl_finalize();
  return bad ? 1 : 0;
}
