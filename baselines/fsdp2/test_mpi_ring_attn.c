/* test_mpi_ring_attn.c — load-balanced ring attention (fsdp2/ring_attn.h)
 * under mpirun -np 1..4 on the CPU backend: forward O and LSE and backward
 * dQ, dK, dV of each rank's two chunks equal causal attention over the whole
 * sequence (every rank computes it itself from the counter RNG), f32 and
 * bf16, chunks shorter and longer than the kernels' 64-token tile and of odd
 * lengths, GQA 1, 2 and 4 (np 2 and 4: the load-balanced split's CP 2 and 4,
 * every rank's 2 causal and 2·CP − 1 full blocks); the CP group the whole world
 * and, at np 4, two groups of 2 side by side; the memory of a call accounted
 * under its tags and freed; a sequence that does not split into 2·CP equal
 * chunks, a second sequence per call and a non-causal mask refused.  With a GPU
 * per rank, the same on CUDA (bf16, d 128 and 64, whole and partial 128-token
 * tiles, GQA 4) against the whole-sequence CUDA attention: the full blocks on
 * the kernels AUTO picks for them (the wgmma ones for d = 128 on sm_90a), named
 * in the log; without one it says "skipped" and passes. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "model/attention_testutil.h"
#include "ring_attn.h"

static pl_dev *dev; /* the backend under test: cpu_dev, or gpu_dev */
static pl_dev *cpu_dev, *gpu_dev;
static pl_comm *world;
static int rank, size, have_gpus;

static void *A(size_t bytes) {
  void *p = NULL;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes ? bytes : 1, "act", &p),
                   PL_OK);
  return p;
}

/* Copy on dev's stream (device or host memory, either backend). */
static void copy(void *dst, const void *src, size_t bytes) {
  ck_assert_int_eq(pl_memcpy_async(pl_dev_stream(dev), dst, src, bytes), PL_OK);
}

/* Rows of this rank's two chunks (global chunks g0, g1 of c rows of w
 * elements) of a whole-sequence tensor, into dst [2c][w]. */
static void take(void *dst, const void *whole, int g0, int g1, int64_t c,
                 size_t w, size_t es) {
  copy(dst, (const char *)whole + (size_t)g0 * c * w * es, c * w * es);
  copy((char *)dst + c * w * es, (const char *)whole + (size_t)g1 * c * w * es,
       c * w * es);
}

/* A host copy of n elements of dt at p (dev's memory). */
static void *to_host(const void *p, pl_dtype dt, size_t n) {
  void *h = malloc(n * pl_dtype_size(dt) + 1);
  ck_assert_ptr_nonnull(h);
  copy(h, p, n * pl_dtype_size(dt));
  ck_assert_int_eq(pl_stream_sync(pl_dev_stream(dev)), PL_OK);
  return h;
}

static int close_to(const char *what, const void *got_d, pl_dtype dt,
                    const void *ref_d, pl_dtype rdt, size_t n, double tol) {
  void *got = to_host(got_d, dt, n), *ref = to_host(ref_d, rdt, n);
  double *r = tu_to_f64(ref, rdt, n);
  attn_err e = tu_compare(got, dt, r, n, tol);
  free(r);
  free(got);
  free(ref);
  if (e.first_bad >= 0)
    fprintf(stderr,
            "[r%d] %s: max abs %.3g normwise %.3g > %.3g, first bad %ld\n",
            rank, what, e.max_abs, e.norm_err, tol, e.first_bad);
  return e.first_bad < 0;
}

/* One sequence of S = 2·CP·c tokens over the group cp (its rank r). */
static void run(pl_comm *cp, int64_t c, int nq, int nkv, int d, pl_dtype dt) {
  pl_stream *s = pl_dev_stream(dev);
  const int CP = cp ? pl_comm_size(cp) : 1, r = cp ? pl_comm_rank(cp) : 0;
  const int64_t S = 2 * CP * c, N = 2 * c;
  const size_t es = pl_dtype_size(dt), rq = (size_t)nq * d,
               rk = (size_t)nkv * d;
  pl_attn_shape whole = {
      .batch = 1, .seq = S, .n_q = nq, .n_kv = nkv, .head_dim = d, .dtype = dt};
  void *q = A(S * rq * es), *k = A(S * rk * es), *v = A(S * rk * es);
  void *dout = A(S * rq * es), *o = A(S * rq * es), *dq = A(S * rq * es);
  void *dk = A(S * rk * es), *dv = A(S * rk * es);
  float *lse = A((size_t)nq * S * 4);
  pl_rng_fill(s, q, dt, S * rq, 21, 0, PL_DIST_NORMAL, 0.f, 1.5f);
  pl_rng_fill(s, k, dt, S * rk, 22, 0, PL_DIST_NORMAL, 0.f, 1.5f);
  pl_rng_fill(s, v, dt, S * rk, 23, 0, PL_DIST_NORMAL, 0.f, 1.f);
  pl_rng_fill(s, dout, dt, S * rq, 24, 0, PL_DIST_NORMAL, 0.f, 1.f);
  ck_assert_int_eq(pl_attn_fwd(s, &whole, q, k, v, o, lse), PL_OK);
  ck_assert_int_eq(pl_attn_bwd(s, &whole, q, k, v, o, dout, lse, dq, dk, dv),
                   PL_OK);

  const int g0 = pl_ring_chunk(CP, r, 0), g1 = pl_ring_chunk(CP, r, 1);
  void *ql = A(N * rq * es), *kl = A(N * rk * es), *vl = A(N * rk * es);
  void *dol = A(N * rq * es), *ol = A(N * rq * es), *dql = A(N * rq * es);
  void *dkl = A(N * rk * es), *dvl = A(N * rk * es);
  float *lsel = A((size_t)nq * N * 4);
  take(ql, q, g0, g1, c, rq, es);
  take(kl, k, g0, g1, c, rk, es);
  take(vl, v, g0, g1, c, rk, es);
  take(dol, dout, g0, g1, c, rq, es);
  pl_ring_attn *ra;
  ck_assert_int_eq(pl_ring_attn_create(cp, dev, &ra), PL_OK);
  pl_attn_shape loc = whole;
  loc.seq = N;
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  ck_assert_msg(pl_ring_attn_fwd(ra, s, &loc, ql, kl, vl, ol, lsel) == PL_OK,
                "%s", pl_last_error());
  ck_assert_msg(pl_ring_attn_bwd(ra, s, &loc, ql, kl, vl, ol, dol, lsel, dql,
                                 dkl, dvl) == PL_OK,
                "%s", pl_last_error());
  /* the tagged transients: the gathered K, V is the largest cp_kv item;
   * nothing stays */
  const size_t kvb = (size_t)N * rk * es;
  ck_assert_uint_eq(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "cp_kv"),
                    2 * kvb + (size_t)CP * 2 * kvb);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "cp_kv"), 0);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "cp_ring"), 0);
  ck_assert(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "cp_ring") > 0);

  /* the reference's rows and LSE of this rank's chunks */
  void *oref = A(N * rq * es), *dqr = A(N * rq * es), *dkr = A(N * rk * es),
       *dvr = A(N * rk * es);
  float *lref = A((size_t)nq * N * 4);
  take(oref, o, g0, g1, c, rq, es);
  take(dqr, dq, g0, g1, c, rq, es);
  take(dkr, dk, g0, g1, c, rk, es);
  take(dvr, dv, g0, g1, c, rk, es);
  for (int a = 0; a < 2; a++)
    for (int h = 0; h < nq; h++)
      copy(lref + ((size_t)a * nq + h) * c,
           lse + (size_t)h * S + (size_t)(a ? g1 : g0) * c, c * 4);
  const double to = dt == PL_F32 ? 2e-5 : 2.5e-2,
               tg = dt == PL_F32 ? 1e-4 : 4e-2;
  char what[96];
  int ok = 1;
#define CMP(name, got, ref, n, tol)                                            \
  snprintf(what, sizeof what, "CP=%d c=%lld %s %s", CP, (long long)c,          \
           pl_dtype_name(dt), name);                                           \
  ok &= close_to(what, got, dt, ref, dt, n, tol)
  CMP("O", ol, oref, N * rq, to);
  CMP("dQ", dql, dqr, N * rq, tg);
  CMP("dK", dkl, dkr, N * rk, tg);
  CMP("dV", dvl, dvr, N * rk, tg);
#undef CMP
  snprintf(what, sizeof what, "CP=%d c=%lld %s LSE", CP, (long long)c,
           pl_dtype_name(dt));
  /* the LSE: f32 on both sides; on CUDA the block kernels' exp2 path */
  ok &= close_to(what, lsel, PL_F32, lref, PL_F32, (size_t)nq * N,
                 pl_dev_backend(dev) == PL_BACKEND_CPU ? 1e-5 : 1e-4);
  int64_t all = ok;
  ck_assert_int_eq(pl_host_allreduce_i64(world, &all, 1, PL_RED_MIN), PL_OK);
  ck_assert_msg(all, "ring attention differs from whole-sequence attention");
  pl_ring_attn_destroy(ra);
  void *ps[] = {q,   k,  v,   dout, o,   dq,   dk,   dv,  lse, ql,  kl,  vl,
                dol, ol, dql, dkl,  dvl, lsel, oref, dqr, dkr, dvr, lref};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free(dev, ps[i]);
}

START_TEST(equals_whole_sequence) {
  static const int64_t cs[] = {1, 5, 70};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
    for (int bf = 0; bf < 2; bf++) {
      run(world, cs[i], 4, 2, 16, bf ? PL_BF16 : PL_F32);
      run(world, cs[i], 2, 2, 8, bf ? PL_BF16 : PL_F32);
    }
  /* odd chunk lengths, GQA 4 */
  run(world, 33, 8, 2, 16, PL_BF16);
  run(world, 3, 4, 1, 8, PL_F32);
}
END_TEST

/* Two CP groups of 2 side by side (np 4), each its own sequence. */
START_TEST(groups_side_by_side) {
  if (size != 4)
    return;
  pl_comm *cp;
  ck_assert_int_eq(pl_comm_split(world, rank / 2, rank, &cp), PL_OK);
  run(cp, 9, 4, 1, 16, PL_F32);
  run(cp, 66, 4, 2, 16, PL_BF16);
  pl_comm_destroy(cp);
}
END_TEST

/* CUDA, a GPU per rank: the group the whole world over NCCL. */
START_TEST(cuda_equals_whole_sequence) {
  if (!have_gpus)
    return;
  pl_comm *gw;
  ck_assert_int_eq(pl_comm_world(gpu_dev, &gw), PL_OK);
  dev = gpu_dev;
  pl_attn_shape full = {.batch = 1,
                        .seq = 128,
                        .n_q = 8,
                        .n_kv = 2,
                        .head_dim = 128,
                        .dtype = PL_BF16,
                        .mask = PL_ATTN_FULL};
  if (rank == 0)
    printf("# CUDA full blocks, d 128: %s + %s\n",
           pl_attn_fwd_kernel(pl_dev_stream(dev), &full),
           pl_attn_bwd_kernel(pl_dev_stream(dev), &full));
  run(gw, 128, 8, 2, 128, PL_BF16); /* whole 128-token tiles, GQA 4 */
  run(gw, 100, 8, 2, 128, PL_BF16); /* a partial tile */
  run(gw, 70, 4, 2, 64, PL_BF16);   /* d 64 (mma) */
  dev = cpu_dev;
  pl_comm_destroy(gw);
}
END_TEST

START_TEST(bad_shapes_refused) {
  pl_ring_attn *ra;
  ck_assert_int_eq(pl_ring_attn_create(world, dev, &ra), PL_OK);
  pl_attn_shape sh = {.batch = 1,
                      .seq = 7,
                      .n_q = 4,
                      .n_kv = 2,
                      .head_dim = 16,
                      .dtype = PL_F32};
  /* S = 7·CP does not split into 2·CP chunks */
  ck_assert_int_eq(pl_ring_attn_check(ra, &sh, PL_BACKEND_CPU), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "2·CP equal chunks"));
  sh.seq = 8;
  ck_assert_int_eq(pl_ring_attn_check(ra, &sh, PL_BACKEND_CPU), PL_OK);
  sh.batch = 2;
  ck_assert_int_eq(pl_ring_attn_check(ra, &sh, PL_BACKEND_CPU), PL_EINVAL);
  sh.batch = 1;
  sh.mask = PL_ATTN_FULL;
  ck_assert_int_eq(pl_ring_attn_check(ra, &sh, PL_BACKEND_CPU), PL_EINVAL);
  sh.mask = PL_ATTN_CAUSAL;
  sh.n_kv = 3;
  ck_assert_int_eq(pl_ring_attn_check(ra, &sh, PL_BACKEND_CPU), PL_EINVAL);
  /* the calls refuse before any communication (every rank alike) */
  sh.n_kv = 2;
  sh.seq = 9;
  ck_assert_int_eq(pl_ring_attn_fwd(ra, pl_dev_stream(dev), &sh, NULL, NULL,
                                    NULL, NULL, NULL),
                   PL_EINVAL);
  pl_ring_attn_destroy(ra);
}
END_TEST

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK)
    return 2;
  if (pl_dev_create(PL_BACKEND_CPU, 0, &cpu_dev) != PL_OK ||
      pl_comm_world(cpu_dev, &world) != PL_OK) {
    fprintf(stderr, "ring attention test setup: %s\n", pl_last_error());
    return 3;
  }
  dev = cpu_dev;
  rank = pl_comm_rank(world);
  size = pl_comm_size(world);
  int64_t enough = pl_cuda_device_count() >= size;
  if (pl_host_allreduce_i64(world, &enough, 1, PL_RED_MIN) != PL_OK)
    return 3;
  have_gpus = (int)enough;
  if (!have_gpus && rank == 0)
    printf("cuda: skipped: no CUDA device for each of the %d ranks\n", size);
  if (have_gpus && pl_dev_create(PL_BACKEND_CUDA, -1, &gpu_dev) != PL_OK) {
    fprintf(stderr, "cuda setup: %s\n", pl_last_error());
    return 3;
  }
  const TTest *tests[] = {equals_whole_sequence, groups_side_by_side,
                          bad_shapes_refused, cuda_equals_whole_sequence, NULL};
  const int nf = pl_check_run("ring_attn", 300, tests, rank, world);
  pl_comm_destroy(world);
  if (gpu_dev)
    pl_dev_destroy(gpu_dev);
  pl_dev_destroy(cpu_dev);
  pl_finalize();
  return nf ? 1 : 0;
}
