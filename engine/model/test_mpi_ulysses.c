/* test_mpi_ulysses.c — Ulysses sequence parallelism (model/ulysses.h) under
 * mpirun -np 1..4 on the CPU backend: the all-to-all round trip is the
 * identity; sharded attention forward (O, head-sharded LSE) and backward
 * (dQ, dK, dV) equal single-rank attention bit for bit (every rank builds the
 * whole sequence from the counter RNG and computes the D = 1 reference
 * itself); heads not divisible by D are refused.  GQA 4 (n_q 8, n_kv 2 when
 * D divides 2, else n_kv 4) and 1.  Past D = n_kv (key/value heads
 * replicated to D / n_kv ranks each): the shard of a replicated head, the
 * adjoint (head_to_seq of the replicas sums them: R·x), O, LSE and dQ bit
 * for bit, dK and dV (sums of R partials) within the summation order's
 * rounding of the single-rank ones.  On GPUs (one per rank) the same against
 * single-GPU attention through NCCL, within bf16 tolerance. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "core/internal.h"
#include "model/ulysses.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

static void *A(size_t bytes) {
  void *p = NULL;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes ? bytes : 1, "act", &p),
                   PL_OK);
  return p;
}

/* rows [r0, r0+n) of a [S][h][d] tensor (es bytes) */
static const char *rows(const void *t, int64_t r0, int h, int d, size_t es) {
  return (const char *)t + (size_t)r0 * h * d * es;
}

static int same(const void *a, const void *b, size_t bytes) {
  return memcmp(a, b, bytes) == 0;
}

/* max |a − b| / max |b| over n elements of dtype dt (host memory) */
static double nerr(const void *a, const void *b, size_t n, pl_dtype dt) {
  double me = 0, sc = 1e-30;
  for (size_t i = 0; i < n; i++) {
    const double x = pl__load_elem(a, dt, i), y = pl__load_elem(b, dt, i);
    sc = fmax(sc, fabs(y));
    me = isnan(x - y) ? INFINITY : fmax(me, fabs(x - y));
  }
  return me / sc;
}

/* seq_to_head of a head replicated to R = D / h ranks: rank r holds all S
 * tokens of head r / R; head_to_seq adds the R copies back (R·x) */
static void replicated_round_trip(pl_stream *s, const void *x, const void *xl,
                                  int64_t Nloc, int h, int d, pl_dtype dt) {
  const int D = size, R = D / h;
  const size_t es = pl_dtype_size(dt), row = (size_t)d * es,
               n = (size_t)Nloc * h * d;
  const int64_t S = Nloc * D;
  void *hd = A((size_t)S * row), *back = A(n * es), *want = A(n * es);
  ck_assert_int_eq(pl_ulysses_seq_to_head(world, s, xl, hd, Nloc, h, d, dt),
                   PL_OK);
  for (int64_t t = 0; t < S; t++)
    ck_assert_msg(
        same((const char *)hd + (size_t)t * row,
             (const char *)x + ((size_t)t * h + (size_t)(rank / R)) * row, row),
        "seq_to_head of replicated head %d: token %lld", rank / R,
        (long long)t);
  ck_assert_int_eq(pl_ulysses_head_to_seq(world, s, hd, back, Nloc, h, d, dt),
                   PL_OK);
  for (size_t i = 0; i < n; i++)
    pl__store_elem(want, dt, i, (float)R * pl__load_elem(xl, dt, i));
  ck_assert_msg(same(back, want, n * es),
                "head_to_seq of %d replicas is not their sum", R);
  pl_free(dev, hd), pl_free(dev, back), pl_free(dev, want);
}

static void run(int64_t Nloc, int nq, int nkv, int d, pl_dtype dt) {
  pl_stream *s = pl_dev_stream(dev);
  const int D = size;
  const int64_t S = Nloc * D;
  const size_t es = pl_dtype_size(dt);
  pl_attn_shape full = {
      .batch = 1, .seq = S, .n_q = nq, .n_kv = nkv, .head_dim = d, .dtype = dt};
  pl_attn_shape loc = full;
  loc.seq = Nloc;
  const size_t nqe = (size_t)S * nq * d, nke = (size_t)S * nkv * d;
  void *q = A(nqe * es), *k = A(nke * es), *v = A(nke * es),
       *dout = A(nqe * es);
  void *o = A(nqe * es), *dq = A(nqe * es), *dk = A(nke * es),
       *dv = A(nke * es);
  float *lse = A((size_t)nq * S * 4);
  pl_rng_fill(s, q, dt, nqe, 1, 0, PL_DIST_NORMAL, 0.f, 1.5f);
  pl_rng_fill(s, k, dt, nke, 2, 0, PL_DIST_NORMAL, 0.f, 1.5f);
  pl_rng_fill(s, v, dt, nke, 3, 0, PL_DIST_NORMAL, 0.f, 1.f);
  pl_rng_fill(s, dout, dt, nqe, 4, 0, PL_DIST_NORMAL, 0.f, 1.f);
  ck_assert_int_eq(pl_attn_fwd(s, &full, q, k, v, o, lse), PL_OK);
  ck_assert_int_eq(pl_attn_bwd(s, &full, q, k, v, o, dout, lse, dq, dk, dv),
                   PL_OK);

  /* this rank's shard */
  const size_t lq = (size_t)Nloc * nq * d * es,
               lk = (size_t)Nloc * nkv * d * es;
  void *ql = A(lq), *kl = A(lk), *vl = A(lk), *dol = A(lq), *ol = A(lq),
       *dql = A(lq);
  void *dkl = A(lk), *dvl = A(lk), *rt = A(lq), *hd = A(lq);
  float *lsel = A((size_t)(nq / D) * S * 4);
  memcpy(ql, rows(q, rank * Nloc, nq, d, es), lq);
  memcpy(kl, rows(k, rank * Nloc, nkv, d, es), lk);
  memcpy(vl, rows(v, rank * Nloc, nkv, d, es), lk);
  memcpy(dol, rows(dout, rank * Nloc, nq, d, es), lq);
  memset(ol, 0xff, lq), memset(dql, 0xff, lq), memset(dkl, 0xff, lk),
      memset(dvl, 0xff, lk);
  memset(lsel, 0xff, (size_t)(nq / D) * S * 4);

  /* round trip seq -> head -> seq is the identity; the head shard is right */
  ck_assert_int_eq(pl_ulysses_seq_to_head(world, s, ql, hd, Nloc, nq, d, dt),
                   PL_OK);
  for (int64_t t = 0; t < S; t++)
    ck_assert_msg(same((const char *)hd + (size_t)t * (nq / D) * d * es,
                       (const char *)q +
                           ((size_t)t * nq + (size_t)rank * (nq / D)) * d * es,
                       (size_t)(nq / D) * d * es),
                  "seq_to_head: token %lld", (long long)t);
  ck_assert_int_eq(pl_ulysses_head_to_seq(world, s, hd, rt, Nloc, nq, d, dt),
                   PL_OK);
  ck_assert_msg(same(rt, ql, lq), "round trip differs (D=%d)", D);
  const int rep = nkv < D; /* key/value heads replicated */
  if (rep)
    replicated_round_trip(s, k, kl, Nloc, nkv, d, dt);

  ck_assert_int_eq(pl_ulysses_attn_fwd(world, s, &loc, ql, kl, vl, ol, lsel),
                   PL_OK);
  ck_assert_msg(same(ol, rows(o, rank * Nloc, nq, d, es), lq),
                "O differs from D=1 (D=%d)", D);
  ck_assert_msg(
      same(lsel, lse + (size_t)rank * (nq / D) * S, (size_t)(nq / D) * S * 4),
      "LSE differs from D=1 (D=%d)", D);
  ck_assert_int_eq(pl_ulysses_attn_bwd(world, s, &loc, ql, kl, vl, ol, dol,
                                       lsel, dql, dkl, dvl),
                   PL_OK);
  ck_assert_msg(same(dql, rows(dq, rank * Nloc, nq, d, es), lq),
                "dQ differs (D=%d)", D);
  if (!rep) {
    ck_assert_msg(same(dkl, rows(dk, rank * Nloc, nkv, d, es), lk),
                  "dK differs (D=%d)", D);
    ck_assert_msg(same(dvl, rows(dv, rank * Nloc, nkv, d, es), lk),
                  "dV differs (D=%d)", D);
  } else { /* sums of D / n_kv partials: the order of the sum differs */
    const double tol = dt == PL_F32 ? 1e-5 : 2e-2, n = (double)lk / es;
    const double ek = nerr(dkl, rows(dk, rank * Nloc, nkv, d, es), (size_t)n,
                           dt),
                 ev = nerr(dvl, rows(dv, rank * Nloc, nkv, d, es), (size_t)n,
                           dt);
    if (rank == 0)
      printf("# D=%d n_q=%d n_kv=%d %s: dK %.3g dV %.3g (normwise, replicated "
             "kv)\n",
             D, nq, nkv, pl_dtype_name(dt), ek, ev);
    ck_assert_msg(ek < tol && ev < tol,
                  "replicated kv, D=%d: dK %.3g dV %.3g > %g", D, ek, ev, tol);
  }
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "attention"), 0);
  void *ps[] = {q,  k,  v,   dout, o,   dq,  dk,  dv, lse, ql,
                kl, vl, dol, ol,   dql, dkl, dvl, rt, hd,  lsel};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free(dev, ps[i]);
}

/* attention of n_q / n_kv heads over this group is refused, naming msg */
static void attn_refused(int nq, int nkv, const char *msg) {
  pl_attn_shape sh = {.batch = 1,
                      .seq = 8,
                      .n_q = nq,
                      .n_kv = nkv,
                      .head_dim = 16,
                      .dtype = PL_F32};
  ck_assert_int_eq(pl_ulysses_attn_fwd(world, pl_dev_stream(dev), &sh, NULL,
                                       NULL, NULL, NULL, NULL),
                   PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), msg), "'%s' lacks '%s'",
                pl_last_error(), msg);
}

START_TEST(ulysses_equals_single_rank) {
  if (4 % size) { /* D = 3: heads 8 / kv 4 divide neither way: refused */
    attn_refused(8, 4, "divide");
    ck_assert_int_eq(pl_ulysses_seq_to_head(world, pl_dev_stream(dev), NULL,
                                            NULL, 8, 4, 16, PL_F32),
                     PL_EINVAL);
    return;
  }
  run(37, 8, 4, 16, PL_F32);                  /* GQA 2, odd shard length */
  run(50, 8, size <= 2 ? 2 : 4, 32, PL_BF16); /* GQA 4 or 2 */
  run(33, 4, 4, 8, PL_BF16);                  /* GQA 1 */
  run(1, 8, 4, 16, PL_F32);                   /* one token per rank */
  if (size > 1) {                             /* key/value heads replicated */
    run(29, 8, 1, 16, PL_F32);                /* one kv head on D ranks */
    run(40, 8, 1, 32, PL_BF16);
    if (size == 4)
      run(23, 4, 2, 16, PL_F32); /* 2 kv heads, R = 2 */
  }
  if (size == 4) /* D > n_q: refused */
    attn_refused(2, 1, "n_q must divide by D");
}
END_TEST

/* CUDA (NCCL all-to-all), when every rank has a GPU: the sharded attention
 * against single-GPU attention on the whole sequence, within bf16 tolerance
 * (the MMA backward accumulates dQ with atomics: not bit-reproducible). */
static double gpu_nerr(pl_stream *s, const void *a, const void *b, size_t n) {
  uint16_t *ha = malloc(n * 2), *hb = malloc(n * 2);
  ck_assert_int_eq(pl_memcpy_async(s, ha, a, n * 2), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s, hb, b, n * 2), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  double me = 0, sc = 1e-30;
  for (size_t i = 0; i < n; i++) {
    union {
      uint32_t u;
      float f;
    } x = {.u = (uint32_t)ha[i] << 16}, y = {.u = (uint32_t)hb[i] << 16};
    sc = fmax(sc, fabs(y.f));
    const double e = fabs((double)x.f - y.f);
    me = isnan(e) ? INFINITY : fmax(me, e);
  }
  free(ha);
  free(hb);
  return me / sc;
}

static void cuda_case(pl_dev *gd, pl_comm *gc, int nkv) {
  pl_stream *s = pl_dev_stream(gd);
  const int64_t Nloc = 1000, S = Nloc * size;
  const int nq = 8, d = 128;
  pl_attn_shape full = {.batch = 1,
                        .seq = S,
                        .n_q = nq,
                        .n_kv = nkv,
                        .head_dim = d,
                        .dtype = PL_BF16};
  pl_attn_shape loc = full;
  loc.seq = Nloc;
  const size_t nqe = (size_t)S * nq * d, nke = (size_t)S * nkv * d;
  const size_t lq = (size_t)Nloc * nq * d, lk = (size_t)Nloc * nkv * d;
  void *b[20];
  const size_t sz[20] = {
      nqe, nke, nke, nqe, nqe, nqe, nke, nke, (size_t)nq * S * 2,
      lq,  lk,  lk,  lq,  lq,  lq,  lk,  lk,  (size_t)(nq / size) * S * 2,
      1,   1};
  for (int i = 0; i < 18; i++)
    ck_assert_int_eq(pl_alloc(gd, PL_ARENA_DEVICE, sz[i] * 2, "act", &b[i]),
                     PL_OK);
  void *q = b[0], *k = b[1], *v = b[2], *dout = b[3], *o = b[4], *dq = b[5],
       *dk = b[6], *dv = b[7];
  float *lse = b[8];
  void *ql = b[9], *kl = b[10], *vl = b[11], *dol = b[12], *ol = b[13],
       *dql = b[14], *dkl = b[15], *dvl = b[16];
  float *lsel = b[17];
  pl_rng_fill(s, q, PL_BF16, nqe, 1, 0, PL_DIST_NORMAL, 0.f, 1.5f);
  pl_rng_fill(s, k, PL_BF16, nke, 2, 0, PL_DIST_NORMAL, 0.f, 1.5f);
  pl_rng_fill(s, v, PL_BF16, nke, 3, 0, PL_DIST_NORMAL, 0.f, 1.f);
  pl_rng_fill(s, dout, PL_BF16, nqe, 4, 0, PL_DIST_NORMAL, 0.f, 1.f);
  ck_assert_int_eq(pl_attn_fwd(s, &full, q, k, v, o, lse), PL_OK);
  ck_assert_int_eq(pl_attn_bwd(s, &full, q, k, v, o, dout, lse, dq, dk, dv),
                   PL_OK);
  const size_t oq = (size_t)rank * lq * 2, ok_ = (size_t)rank * lk * 2;
  pl_memcpy_async(s, ql, (char *)q + oq, lq * 2);
  pl_memcpy_async(s, kl, (char *)k + ok_, lk * 2);
  pl_memcpy_async(s, vl, (char *)v + ok_, lk * 2);
  pl_memcpy_async(s, dol, (char *)dout + oq, lq * 2);
  pl_status st = pl_ulysses_attn_fwd(gc, s, &loc, ql, kl, vl, ol, lsel);
  ck_assert_msg(st == PL_OK, "ulysses cuda fwd: %s", pl_last_error());
  st = pl_ulysses_attn_bwd(gc, s, &loc, ql, kl, vl, ol, dol, lsel, dql, dkl,
                           dvl);
  ck_assert_msg(st == PL_OK, "ulysses cuda bwd: %s", pl_last_error());
  const double eo = gpu_nerr(s, ol, (char *)o + oq, lq),
               eq = gpu_nerr(s, dql, (char *)dq + oq, lq);
  const double ek = gpu_nerr(s, dkl, (char *)dk + ok_, lk),
               ev = gpu_nerr(s, dvl, (char *)dv + ok_, lk);
  if (rank == 0)
    printf("# ulysses cuda D=%d n_kv=%d vs one GPU: O %.3g dQ %.3g dK %.3g dV "
           "%.3g (normwise)\n",
           size, nkv, eo, eq, ek, ev);
  ck_assert_msg(eo < 1e-2 && eq < 2e-2 && ek < 2e-2 && ev < 2e-2,
                "ulysses cuda D=%d n_kv=%d: O %.3g dQ %.3g dK %.3g dV %.3g",
                size, nkv, eo, eq, ek, ev);
  for (int i = 0; i < 18; i++)
    pl_free(gd, b[i]);
}

START_TEST(ulysses_cuda_equals_single_gpu) {
  if (pl_cuda_device_count() < size || 4 % size) {
    if (rank == 0)
      printf("skipped: needs one GPU per rank and D | 4\n");
    return;
  }
  pl_dev *gd;
  pl_comm *gc;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CUDA, -1, &gd), PL_OK);
  ck_assert_int_eq(pl_comm_world(gd, &gc), PL_OK);
  cuda_case(gd, gc, 4);
  if (size > 1)
    cuda_case(gd, gc, 1); /* the key/value head replicated */
  pl_comm_destroy(gc);
  pl_dev_destroy(gd);
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "ulysses", &dev, &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {ulysses_equals_single_rank,
                          ulysses_cuda_equals_single_gpu, NULL};
  return pl_check_world_close(dev, world,
                              pl_check_run("ulysses", 300, tests, rank, world));
}
