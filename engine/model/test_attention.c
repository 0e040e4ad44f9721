/* test_attention.c — CPU GQA flash attention (backend/cpu/attention_cpu.c)
 * against the naive double reference: forward O and LSE, backward dQ, dK, dV;
 * S = 1, 2, not a multiple of the 64-token tile, a few thousand; GQA ratios 1,
 * 4, 8; f32 and bf16; the causal and the full mask; outputs poisoned with NaN
 * before each run; the backward workspace accounted under tag "attention";
 * bad shapes, masks and kernel choices refused; the CPU runs its one kernel
 * whatever the (CUDA) choice says; the log-sum-exp merge of a causal
 * sequence's blocks (what ring attention computes) equals attention over the
 * whole sequence. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "core/internal.h"
#include "model/attention.h"
#include "model/attention_testutil.h"

static pl_dev *dev;
static pl_stream *st;
static void setup(void) {
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  st = pl_dev_stream(dev);
}
static void teardown(void) {
  pl_dev_destroy(dev);
}

static void *dalloc(size_t bytes, const char *tag) {
  void *p = NULL;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes, tag, &p), PL_OK);
  return p;
}

static void expect(const char *what, const pl_attn_shape *sh, const void *got,
                   pl_dtype dt, const double *ref, size_t n, double tol) {
  attn_err e = tu_compare(got, dt, ref, n, tol);
  ck_assert_msg(e.first_bad < 0,
                "%s (B=%lld S=%lld nq=%d nkv=%d d=%d %s): max abs %.3g "
                "normwise %.3g > %.3g, "
                "first bad index %ld",
                what, (long long)sh->batch, (long long)sh->seq, sh->n_q,
                sh->n_kv, sh->head_dim, pl_dtype_name(dt), e.max_abs,
                e.norm_err, tol, e.first_bad);
}

/* Run fwd+bwd on the CPU backend and compare with the double reference. */
static void run_case_mask(int64_t B, int64_t S, int nq, int nkv, int d,
                          pl_dtype dt, uint64_t seed, int do_bwd,
                          pl_attn_mask mask) {
  pl_attn_shape sh = {.batch = B,
                      .seq = S,
                      .n_q = nq,
                      .n_kv = nkv,
                      .head_dim = d,
                      .scale = 0.f,
                      .dtype = dt,
                      .mask = mask};
  const size_t nqe = (size_t)(B * S * nq * d), nke = (size_t)(B * S * nkv * d);
  const size_t nr = (size_t)(B * nq * S), es = pl_dtype_size(dt);
  void *q = dalloc(nqe * es, "act"), *k = dalloc(nke * es, "act"),
       *v = dalloc(nke * es, "act");
  void *o = dalloc(nqe * es, "act"), *dout = dalloc(nqe * es, "act");
  float *lse = dalloc(nr * sizeof(float), "act");
  /* never zeros: N(0,1) for Q, K (×1.5 to sharpen the softmax), V and dO */
  ck_assert_int_eq(
      pl_rng_fill(st, q, dt, nqe, seed, 0, PL_DIST_NORMAL, 0.f, 1.5f), PL_OK);
  ck_assert_int_eq(
      pl_rng_fill(st, k, dt, nke, seed + 1, 0, PL_DIST_NORMAL, 0.f, 1.5f),
      PL_OK);
  ck_assert_int_eq(
      pl_rng_fill(st, v, dt, nke, seed + 2, 0, PL_DIST_NORMAL, 0.f, 1.f),
      PL_OK);
  ck_assert_int_eq(
      pl_rng_fill(st, dout, dt, nqe, seed + 3, 0, PL_DIST_NORMAL, 0.f, 1.f),
      PL_OK);
  ck_assert_int_eq(pl_fill(st, o, dt, nqe, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(st, lse, PL_F32, nr, NAN), PL_OK);

  double *qd = tu_to_f64(q, dt, nqe), *kd = tu_to_f64(k, dt, nke),
         *vd = tu_to_f64(v, dt, nke);
  double *dod = tu_to_f64(dout, dt, nqe);
  double *oref = malloc(sizeof(double) * (nqe ? nqe : 1));
  double *lref = malloc(sizeof(double) * (nr ? nr : 1));
  pl_attn_ref_fwd_f64(&sh, qd, kd, vd, oref, lref);

  ck_assert_int_eq(pl_attn_fwd(st, &sh, q, k, v, o, lse), PL_OK);
  const double tol = tu_tol(dt);
  expect("O", &sh, o, dt, oref, nqe, tol);
  expect("LSE", &sh, lse, PL_F32, lref, nr, 1e-5);

  if (do_bwd) {
    void *dq = dalloc(nqe * es, "grads"), *dk = dalloc(nke * es, "grads");
    void *dv = dalloc(nke * es, "grads");
    ck_assert_int_eq(pl_fill(st, dq, dt, nqe, NAN), PL_OK);
    ck_assert_int_eq(pl_fill(st, dk, dt, nke, NAN), PL_OK);
    ck_assert_int_eq(pl_fill(st, dv, dt, nke, NAN), PL_OK);
    pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
    ck_assert_int_eq(pl_attn_bwd(st, &sh, q, k, v, o, dout, lse, dq, dk, dv),
                     PL_OK);
    /* the only memory backward adds is its workspace, O(S·n·d), tagged */
    ck_assert_uint_eq(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "attention"),
                      (B > 0 && S > 0)
                          ? pl_attn_bwd_workspace_bytes(&sh, PL_BACKEND_CPU)
                          : 0);
    ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "attention"), 0);
    double *dqr = malloc(sizeof(double) * (nqe ? nqe : 1));
    double *dkr = malloc(sizeof(double) * (nke ? nke : 1));
    double *dvr = malloc(sizeof(double) * (nke ? nke : 1));
    pl_attn_ref_bwd_f64(&sh, qd, kd, vd, dod, dqr, dkr, dvr);
    /* bf16: D = rowsum(dO∘O) uses the rounded O, like the CUDA kernels */
    const double gtol = dt == PL_F32 ? 5e-4 : 4e-2;
    expect("dQ", &sh, dq, dt, dqr, nqe, gtol);
    expect("dK", &sh, dk, dt, dkr, nke, gtol);
    expect("dV", &sh, dv, dt, dvr, nke, gtol);
    free(dqr);
    free(dkr);
    free(dvr);
    pl_free(dev, dq);
    pl_free(dev, dk);
    pl_free(dev, dv);
  }
  free(qd);
  free(kd);
  free(vd);
  free(dod);
  free(oref);
  free(lref);
  pl_free(dev, q);
  pl_free(dev, k);
  pl_free(dev, v);
  pl_free(dev, o);
  pl_free(dev, dout);
  pl_free(dev, lse);
}

static void run_case(int64_t B, int64_t S, int nq, int nkv, int d, pl_dtype dt,
                     uint64_t seed, int do_bwd) {
  run_case_mask(B, S, nq, nkv, d, dt, seed, do_bwd, PL_ATTN_CAUSAL);
}

START_TEST(small_shapes_f32_and_bf16) {
  static const int64_t Ss[] = {1, 2, 3, 63, 64, 65, 130};
  static const int gqa[][2] = {{4, 4}, {4, 1}, {8, 1}, {8, 2}};
  static const int ds[] = {8, 64};
  uint64_t seed = 100;
  for (size_t si = 0; si < sizeof Ss / sizeof Ss[0]; si++)
    for (size_t gi = 0; gi < 4; gi++)
      for (size_t di = 0; di < 2; di++)
        for (int bf = 0; bf < 2; bf++)
          run_case(si % 2 ? 2 : 1, Ss[si], gqa[gi][0], gqa[gi][1], ds[di],
                   bf ? PL_BF16 : PL_F32, seed++, 1);
}
END_TEST

START_TEST(head_dim_128) {
  run_case(1, 200, 4, 1, 128, PL_BF16, 7, 1);
  run_case(1, 129, 2, 2, 128, PL_F32, 8, 1);
}
END_TEST

/* The full mask (every query sees every key) against the reference. */
START_TEST(full_mask_shapes) {
  static const int64_t Ss[] = {1, 2, 63, 65, 130};
  static const int gqa[][2] = {{4, 4}, {8, 2}};
  uint64_t seed = 300;
  for (size_t si = 0; si < sizeof Ss / sizeof Ss[0]; si++)
    for (size_t gi = 0; gi < 2; gi++)
      for (int bf = 0; bf < 2; bf++)
        run_case_mask(si % 2 ? 2 : 1, Ss[si], gqa[gi][0], gqa[gi][1],
                      si % 2 ? 16 : 64, bf ? PL_BF16 : PL_F32, seed++, 1,
                      PL_ATTN_FULL);
  run_case_mask(1, 129, 2, 1, 128, PL_BF16, seed++, 1, PL_ATTN_FULL);
}
END_TEST

/* A causal sequence of 2c tokens as blocks of c, merged by LSE: rows of the
 * first chunk = causal(q0, k0); rows of the second = causal(q1, k1) merged
 * with full(q1, k0) — ring attention's decomposition.  O and LSE equal the
 * reference over the whole sequence; an accumulator started at −inf takes
 * the first block as it is. */
START_TEST(merge_of_blocks_is_whole) {
  for (int bf = 0; bf < 2; bf++) {
    const pl_dtype dt = bf ? PL_BF16 : PL_F32;
    const int64_t c = 37, S = 2 * c;
    const int nq = 4, nkv = 2, d = 16;
    const size_t es = pl_dtype_size(dt), rq = (size_t)nq * d,
                 rk = (size_t)nkv * d;
    pl_attn_shape whole = {.batch = 1,
                           .seq = S,
                           .n_q = nq,
                           .n_kv = nkv,
                           .head_dim = d,
                           .dtype = dt};
    void *q = dalloc(S * rq * es, "act"), *k = dalloc(S * rk * es, "act");
    void *v = dalloc(S * rk * es, "act"), *ob = dalloc(c * rq * es, "act");
    float *lb = dalloc(nq * c * 4, "act"), *oacc = dalloc(S * rq * 4, "act");
    float *lacc = dalloc(2 * nq * c * 4, "act"); /* [chunk][n_q][c] */
    ck_assert_int_eq(
        pl_rng_fill(st, q, dt, S * rq, 11, 0, PL_DIST_NORMAL, 0.f, 1.5f),
        PL_OK);
    ck_assert_int_eq(
        pl_rng_fill(st, k, dt, S * rk, 12, 0, PL_DIST_NORMAL, 0.f, 1.5f),
        PL_OK);
    ck_assert_int_eq(
        pl_rng_fill(st, v, dt, S * rk, 13, 0, PL_DIST_NORMAL, 0.f, 1.f), PL_OK);
    ck_assert_int_eq(pl_fill(st, oacc, PL_F32, S * rq, 0.0), PL_OK);
    ck_assert_int_eq(pl_fill(st, lacc, PL_F32, 2 * nq * c, -INFINITY), PL_OK);
    /* blocks (query chunk, key chunk, mask) */
    const int blk[3][3] = {
        {0, 0, PL_ATTN_CAUSAL}, {1, 1, PL_ATTN_CAUSAL}, {1, 0, PL_ATTN_FULL}};
    for (int b = 0; b < 3; b++) {
      pl_attn_shape sh = whole;
      sh.seq = c;
      sh.mask = (pl_attn_mask)blk[b][2];
      const int a = blk[b][0], kc = blk[b][1];
      ck_assert_int_eq(pl_attn_fwd(st, &sh, (char *)q + a * c * rq * es,
                                   (char *)k + kc * c * rk * es,
                                   (char *)v + kc * c * rk * es, ob, lb),
                       PL_OK);
      ck_assert_int_eq(pl_attn_merge(st, oacc + a * c * rq, lacc + a * nq * c,
                                     ob, lb, c, nq, d, dt),
                       PL_OK);
    }
    double *qd = tu_to_f64(q, dt, S * rq), *kd = tu_to_f64(k, dt, S * rk);
    double *vd = tu_to_f64(v, dt, S * rk);
    double *oref = malloc(sizeof(double) * S * rq),
           *lref = malloc(sizeof(double) * nq * S);
    pl_attn_ref_fwd_f64(&whole, qd, kd, vd, oref, lref);
    /* the reference's LSE [n_q][S] in the accumulator's [chunk][n_q][c] */
    double *lre = malloc(sizeof(double) * nq * S);
    for (int a = 0; a < 2; a++)
      for (int h = 0; h < nq; h++)
        for (int64_t i = 0; i < c; i++)
          lre[(a * nq + h) * c + i] = lref[h * S + a * c + i];
    expect("merged O", &whole, oacc, PL_F32, oref, S * rq, tu_tol(dt));
    expect("merged LSE", &whole, lacc, PL_F32, lre, nq * S, 1e-5);
    free(qd), free(kd), free(vd), free(oref), free(lref), free(lre);
    void *ps[] = {q, k, v, ob, lb, oacc, lacc};
    for (int i = 0; i < 7; i++)
      pl_free(dev, ps[i]);
  }
}
END_TEST

START_TEST(few_thousand_tokens) {
  /* not a multiple of the tile; GQA 2 */
  run_case(1, 2500, 2, 1, 32, PL_BF16, 21, 1);
}
END_TEST

START_TEST(empty_is_ok) {
  run_case(1, 0, 4, 2, 64, PL_BF16, 3, 1);
  run_case(0, 10, 4, 2, 64, PL_F32, 4, 1);
}
END_TEST

START_TEST(bad_shapes_refused) {
  pl_attn_shape sh = {.batch = 1,
                      .seq = 8,
                      .n_q = 6,
                      .n_kv = 4,
                      .head_dim = 64,
                      .dtype = PL_BF16};
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "n_kv"));
  sh.n_kv = 0;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_EINVAL);
  sh.n_kv = 2;
  sh.seq = -1;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_EINVAL);
  sh.seq = 8;
  sh.head_dim = 96; /* fine on the CPU, not on CUDA */
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_OK);
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_EUNSUPPORTED);
  sh.head_dim = 64;
  sh.dtype = PL_F32;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_EUNSUPPORTED);
  sh.dtype = PL_I32;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_EINVAL);
  sh.dtype = PL_BF16;
  sh.scale = -1.f;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_EINVAL);
  sh.scale = 0.f;
  sh.mask = (pl_attn_mask)2;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "mask=2"));
  sh.mask = PL_ATTN_FULL;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_OK);
  /* the wgmma kernels are causal only: an explicit choice with FULL is refused
   */
  sh.kernels.fwd = PL_ATTN_FWD_WGMMA;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_EUNSUPPORTED);
  sh.kernels.fwd = PL_ATTN_FWD_AUTO;
  sh.mask = PL_ATTN_CAUSAL;
  /* kernel kinds out of range: refused on every backend, naming the field */
  sh.kernels.fwd = (pl_attn_fwd_kind)5;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "kernels.fwd=5"));
  sh.kernels.fwd = PL_ATTN_FWD_AUTO;
  sh.kernels.bwd = (pl_attn_bwd_kind)6;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "kernels.bwd=6"));
  /* cuDNN: a choice the CPU ignores; on CUDA it needs a cuDNN build, and
   * takes bf16 with d = 64 or 128 (full or causal) */
  sh.kernels = (pl_attn_kernels){PL_ATTN_FWD_CUDNN, PL_ATTN_BWD_CUDNN};
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_OK);
#if PL_HAVE_CUDA && PL_HAVE_CUDNN
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_OK);
  sh.mask = PL_ATTN_FULL;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_OK);
  sh.mask = PL_ATTN_CAUSAL;
  sh.head_dim = 96;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_EUNSUPPORTED);
  sh.head_dim = 64;
#else
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_EUNSUPPORTED);
  ck_assert_ptr_nonnull(
      strstr(pl_last_error(), PL_HAVE_CUDA ? "cuDNN" : "CUDA"));
#endif
  sh.kernels = (pl_attn_kernels){PL_ATTN_FWD_AUTO, PL_ATTN_BWD_AUTO};
  sh.kernels.fwd = PL_ATTN_FWD_AUTO;
  sh.kernels.bwd = (pl_attn_bwd_kind)-1;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "kernels.bwd=-1"));
  /* the wgmma and split kernels take d = 128 only (CUDA; or no CUDA at all) */
  sh.kernels.bwd = PL_ATTN_BWD_SPLIT;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CPU), PL_OK);
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_EUNSUPPORTED);
  sh.kernels.bwd = PL_ATTN_BWD_AUTO;
  sh.kernels.fwd = PL_ATTN_FWD_WGMMA;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_EUNSUPPORTED);
#if PL_HAVE_CUDA
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "d=64"));
  sh.head_dim = 128;
  sh.kernels.bwd = PL_ATTN_BWD_SPLIT;
  ck_assert_int_eq(pl_attn_check(&sh, PL_BACKEND_CUDA), PL_OK);
#endif
}
END_TEST

/* The kernel choice is a CUDA matter: on the CPU every choice runs the one
 * CPU kernel, gives the same bits, and is reported as "cpu". */
START_TEST(kernel_choice_on_cpu) {
  const pl_attn_kernels ks[] = {{PL_ATTN_FWD_AUTO, PL_ATTN_BWD_AUTO},
                                {PL_ATTN_FWD_SIMPLE, PL_ATTN_BWD_SIMPLE},
                                {PL_ATTN_FWD_MMA, PL_ATTN_BWD_MMA},
                                {PL_ATTN_FWD_WGMMA, PL_ATTN_BWD_WGMMA},
                                {PL_ATTN_FWD_WGMMA, PL_ATTN_BWD_SPLIT},
                                {PL_ATTN_FWD_CUDNN, PL_ATTN_BWD_CUDNN}};
  pl_attn_shape sh = {.batch = 1,
                      .seq = 70,
                      .n_q = 4,
                      .n_kv = 2,
                      .head_dim = 16,
                      .dtype = PL_F32};
  const size_t nqe = 70 * 4 * 16, nke = 70 * 2 * 16, nr = 4 * 70;
  void *q = dalloc(nqe * 4, "act"), *k = dalloc(nke * 4, "act"),
       *v = dalloc(nke * 4, "act");
  void *o = dalloc(nqe * 4, "act"), *dout = dalloc(nqe * 4, "act"),
       *dq = dalloc(nqe * 4, "grads");
  void *dk = dalloc(nke * 4, "grads"), *dv = dalloc(nke * 4, "grads");
  float *lse = dalloc(nr * 4, "act");
  ck_assert_int_eq(
      pl_rng_fill(st, q, PL_F32, nqe, 5, 0, PL_DIST_NORMAL, 0.f, 1.f), PL_OK);
  ck_assert_int_eq(
      pl_rng_fill(st, k, PL_F32, nke, 6, 0, PL_DIST_NORMAL, 0.f, 1.f), PL_OK);
  ck_assert_int_eq(
      pl_rng_fill(st, v, PL_F32, nke, 7, 0, PL_DIST_NORMAL, 0.f, 1.f), PL_OK);
  ck_assert_int_eq(
      pl_rng_fill(st, dout, PL_F32, nqe, 8, 0, PL_DIST_NORMAL, 0.f, 1.f),
      PL_OK);
  float *first = malloc(sizeof(float) * nqe);
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    sh.kernels = ks[i];
    ck_assert_str_eq(pl_attn_fwd_kernel(st, &sh), "cpu");
    ck_assert_str_eq(pl_attn_bwd_kernel(st, &sh), "cpu");
    ck_assert_int_eq(pl_attn_fwd(st, &sh, q, k, v, o, lse), PL_OK);
    ck_assert_int_eq(pl_attn_bwd(st, &sh, q, k, v, o, dout, lse, dq, dk, dv),
                     PL_OK);
    if (i == 0)
      memcpy(first, dq, sizeof(float) * nqe);
    else
      ck_assert_int_eq(memcmp(first, dq, sizeof(float) * nqe), 0);
  }
  free(first);
  void *ps[] = {q, k, v, o, dout, dq, dk, dv, lse};
  for (int i = 0; i < 9; i++)
    pl_free(dev, ps[i]);
}
END_TEST

START_TEST(flop_formula) {
  pl_attn_shape sh = {
      .batch = 1, .seq = 32768, .n_q = 64, .n_kv = 8, .head_dim = 128};
  /* 4·S²·d·n_q / 2 */
  ck_assert(fabs(pl_attn_flops_fwd(&sh) -
                 4.0 * 32768.0 * 32768.0 * 128 * 64 / 2) < 1);
  ck_assert(fabs(pl_attn_flops_bwd(&sh) - 2.5 * pl_attn_flops_fwd(&sh)) < 1);
  sh.mask = PL_ATTN_FULL; /* every key: twice the causal work */
  ck_assert(fabs(pl_attn_flops_fwd(&sh) - 4.0 * 32768.0 * 32768.0 * 128 * 64) <
            1);
}
END_TEST

int main(void) {
  const TTest *tests[] = {small_shapes_f32_and_bf16,
                          head_dim_128,
                          full_mask_shapes,
                          merge_of_blocks_is_whole,
                          few_thousand_tokens,
                          empty_is_ok,
                          bad_shapes_refused,
                          kernel_choice_on_cpu,
                          flop_formula,
                          NULL};
  return pl_check_suite("attention", 600, tests, setup, teardown,
                        CK_FORK_GETENV, 0)
             ? 1
             : 0;
}
