/* test_mpi_moe.c — ep / llep / pipelined_llep against the single-rank dense
 * reference under MPI (np 1..4, CPU backend), and the dispatch bound.
 *
 * Every rank regenerates every rank's inputs from counter-based RNG streams
 * (x, route weights, dout, all E experts' weights), so each rank can compute
 * the reference for its own tokens and the reference weight gradients of its
 * native experts over all ranks' routes without communication.
 *
 * Exactness: outputs, dx and route-weight gradients are compared bit for bit
 * (the CPU kernels are row-deterministic and every variant combines in the same
 * order); expert weight gradients within an fp32 (or bf16-input) tolerance,
 * since chunks and pieces change their summation order.  K = 1 pipelined must
 * equal llep bit for bit, weight gradients included.
 *
 * Bound: the tracked "dispatch" peak of pipelined_llep <= 2*Ep*k*c_eff*H*b in
 * forward and in backward (with recompute), over profiles and (N, k, c); llep
 * exceeds it under the same configurations, so the assertion can fail. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dry/dry.h"
#include "comm/check_mpi.h"
#include "ops/moe.h"
#include "ops/moe_testlib.h"
#include "plateau/host_device.h"
#include "plateau/plateau.h"

#ifndef MOE_TEST_CUDA
#define MOE_TEST_CUDA 0
#endif
static pl_dev *dev;  /* the backend under test */
static pl_dev *hdev; /* CPU: generates host inputs */
static pl_comm *world;
static pl_comm *hworld; /* over hdev (CUDA runs: the CPU twin of a config) */
static int me, np;

/* Host <-> device copies that work on both backends. */
static void to_host(void *dst, const void *src, size_t bytes) {
  if (!bytes)
    return;
  pl_stream *s = pl_dev_stream(dev);
  ck_assert_int_eq(pl_memcpy_async(s, dst, src, bytes), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
}

enum route_kind { R_PROFILE, R_RANDOM, R_ONE_EXPERT, R_HALF_EXPERTS };

typedef struct tcase_cfg {
  pl_moe_cfg cfg;
  enum route_kind rk;
  const char *profile;
  int64_t Nr[8]; /* tokens per rank (rank r uses Nr[r % 8]) */
  uint64_t seed;
} tcase_cfg;

static int64_t N_of(const tcase_cfg *t, int r) {
  return t->Nr[r % 8];
}
static int64_t off_of(const tcase_cfg *t, int r) {
  int64_t o = 0;
  for (int q = 0; q < r; q++)
    o += N_of(t, q);
  return o;
}

/* Inputs of rank r (host memory). */
typedef struct inputs {
  int64_t N;
  void *x, *dout;
  int32_t *idx;
  float *w;
} inputs;

static void gen_inputs(const tcase_cfg *t, int r, inputs *in) {
  const pl_moe_cfg *c = &t->cfg;
  size_t b = pl_dtype_size(c->dt);
  in->N = N_of(t, r);
  int64_t N = in->N, off = off_of(t, r);
  in->x = malloc((size_t)(N * c->H + 1) * b);
  in->dout = malloc((size_t)(N * c->H + 1) * b);
  in->idx = malloc((size_t)(N * c->k + 1) * sizeof(int32_t));
  in->w = malloc((size_t)(N * c->k + 1) * sizeof(float));
  pl_stream *s = pl_dev_stream(hdev);
  ck_assert_int_eq(pl_rng_fill(s, in->x, c->dt, (size_t)(N * c->H), t->seed + 1,
                               (uint64_t)(off * c->H), PL_DIST_NORMAL, 0, 1),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, in->dout, c->dt, (size_t)(N * c->H),
                               t->seed + 2, (uint64_t)(off * c->H),
                               PL_DIST_NORMAL, 0, 1),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, in->w, PL_F32, (size_t)(N * c->k),
                               t->seed + 3, (uint64_t)(off * c->k),
                               PL_DIST_UNIFORM, 0.1f, 1.0f),
                   PL_OK);
  if (t->rk == R_PROFILE) {
    pl_route_profile p;
    ck_assert_int_eq(pl_route_profile_parse(t->profile, &p), PL_OK);
    float *tmpw = malloc((size_t)(N * c->k + 1) * sizeof(float));
    ck_assert_int_eq(
        pl_route_profile_fill(&p, N, c->k, c->E, 0, r, in->idx, tmpw), PL_OK);
    free(tmpw);
  } else {
    for (int64_t i = 0; i < N * c->k; i++) {
      uint32_t u = pl_rng_u32(t->seed + 4, (uint64_t)(off * c->k + i));
      if (t->rk == R_RANDOM)
        in->idx[i] = (int32_t)(u % (uint32_t)c->E);
      else if (t->rk == R_ONE_EXPERT)
        in->idx[i] = c->E - 1;
      else
        in->idx[i] = (int32_t)(2 * (u % (uint32_t)(c->E / 2)));
    }
  }
}
static void free_inputs(inputs *in) {
  free(in->x), free(in->dout), free(in->idx), free(in->w);
}

/* All E experts' weights (host). */
static void gen_weights(const tcase_cfg *t, void **wg, void **wu, void **wd) {
  const pl_moe_cfg *c = &t->cfg;
  size_t n = (size_t)c->E * c->H * c->I, b = pl_dtype_size(c->dt);
  *wg = malloc(n * b), *wu = malloc(n * b), *wd = malloc(n * b);
  float sd = 1.0f / sqrtf((float)c->H);
  pl_stream *s = pl_dev_stream(hdev);
  ck_assert_int_eq(
      pl_rng_fill(s, *wg, c->dt, n, t->seed + 5, 0, PL_DIST_NORMAL, 0, sd),
      PL_OK);
  ck_assert_int_eq(
      pl_rng_fill(s, *wu, c->dt, n, t->seed + 6, 0, PL_DIST_NORMAL, 0, sd),
      PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, *wd, c->dt, n, t->seed + 7, 0, PL_DIST_NORMAL,
                               0, 1.0f / sqrtf((float)c->I)),
                   PL_OK);
}

typedef struct result {
  void *out, *dx;
  float *dw, *gwg, *gwu, *gwd; /* native experts' gradients */
  size_t peak_fwd, peak_bwd;
  int64_t c_eff;
  int K;
  pl_moe_stats st;
  double stage_ms[PL_MOE_NSTAGES]; /* cfg.profile */
} result;

static void free_result(result *r) {
  free(r->out), free(r->dx), free(r->dw), free(r->gwg), free(r->gwu),
      free(r->gwd);
  memset(r, 0, sizeof *r);
}

static void *dev_copy(const void *src, size_t bytes, const char *tag) {
  void *p = NULL;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, bytes, tag, &p), PL_OK);
  to_host(p, src, bytes); /* (any direction) */
  return p;
}

/* Run one variant on this rank; fills r.  Poisons outputs first. */
static pl_status run_variant(const tcase_cfg *t, const inputs *in, void *wg,
                             void *wu, void *wd, result *r) {
  const pl_moe_cfg *c = &t->cfg;
  size_t b = pl_dtype_size(c->dt);
  int El = c->E / np;
  size_t HI = (size_t)c->H * c->I, N = (size_t)in->N;
  pl_moe *m = NULL;
  pl_status s = pl_moe_create(world, c, &m);
  if (s != PL_OK)
    return s;
  pl_moe_weights W = {
      dev_copy((char *)wg + (size_t)me * El * HI * b, El * HI * b, "weights"),
      dev_copy((char *)wu + (size_t)me * El * HI * b, El * HI * b, "weights"),
      dev_copy((char *)wd + (size_t)me * El * HI * b, El * HI * b, "weights")};
  void *x = dev_copy(in->x, N * c->H * b, "act");
  void *dout = dev_copy(in->dout, N * c->H * b, "act");
  float *w = dev_copy(in->w, N * c->k * sizeof(float), "act");
  void *out = NULL, *dx = NULL;
  float *dw = NULL;
  pl_moe_wgrads G = {0};
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, N * c->H * b, "act", &out),
                   PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, N * c->H * b, "act", &dx),
                   PL_OK);
  ck_assert_int_eq(
      pl_alloc(dev, PL_ARENA_DEVICE, N * c->k * 4, "act", (void **)&dw), PL_OK);
  pl_stream *ps = pl_dev_stream(dev);
  ck_assert_int_eq(pl_fill(ps, out, c->dt, N * c->H, NAN), PL_OK); /* poison */
  ck_assert_int_eq(pl_fill(ps, dx, c->dt, N * c->H, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(ps, dw, PL_F32, N * c->k, NAN), PL_OK);
  for (int i = 0; i < 3; i++) {
    float **g = i == 0 ? &G.wg : i == 1 ? &G.wu : &G.wd;
    ck_assert_int_eq(
        pl_alloc(dev, PL_ARENA_DEVICE, El * HI * 4, "grads", (void **)g),
        PL_OK);
    ck_assert_int_eq(pl_fill(ps, *g, PL_F32, El * HI, 0.0), PL_OK);
  }
  pl_moe_ctx *ctx = NULL;
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  s = pl_moe_forward(m, &W, x, in->N, in->idx, w, out, &ctx, &r->st);
  r->peak_fwd = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "dispatch");
  if (s == PL_OK) {
    pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
    s = pl_moe_backward(m, ctx, &W, x, w, dout, dx, dw, &G);
    r->peak_bwd = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "dispatch");
  }
  r->K = r->st.K;
  r->c_eff = r->st.c_eff;
  ck_assert_int_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "dispatch"), 0);
  ck_assert_int_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "expert"), 0);
  ck_assert_int_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "llep_grads"), 0);
  if (s == PL_OK)
    memcpy(r->stage_ms, pl_moe_ctx_stage_ms(ctx), sizeof r->stage_ms);
  pl_moe_ctx_free(ctx);
  ck_assert_int_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "routing"), 0);
  ck_assert_int_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "llep_weights"), 0);
  r->out = malloc(N * c->H * b + 1);
  r->dx = malloc(N * c->H * b + 1);
  r->dw = malloc(N * c->k * 4 + 1);
  to_host(r->out, out, N * c->H * b);
  to_host(r->dx, dx, N * c->H * b);
  to_host(r->dw, dw, N * c->k * 4);
  r->gwg = malloc(El * HI * 4), r->gwu = malloc(El * HI * 4),
  r->gwd = malloc(El * HI * 4);
  to_host(r->gwg, G.wg, El * HI * 4);
  to_host(r->gwu, G.wu, El * HI * 4);
  to_host(r->gwd, G.wd, El * HI * 4);
  pl_free(dev, W.wg), pl_free(dev, W.wu), pl_free(dev, W.wd);
  pl_free(dev, x), pl_free(dev, dout), pl_free(dev, w), pl_free(dev, out),
      pl_free(dev, dx), pl_free(dev, dw);
  pl_free(dev, G.wg), pl_free(dev, G.wu), pl_free(dev, G.wd);
  pl_moe_destroy(m);
  return s;
}

/* Reference for this rank: out, dx, dw of its tokens; native experts' weight
 * gradients over every rank's routes. */
static void reference(const tcase_cfg *t, void *wg, void *wu, void *wd,
                      const inputs *in, result *ref) {
  const pl_moe_cfg *c = &t->cfg;
  size_t b = pl_dtype_size(c->dt), HI = (size_t)c->H * c->I;
  size_t N = (size_t)in->N;
  int El = c->E / np;
  ref->out = malloc(N * c->H * b + 1);
  ref->dx = malloc(N * c->H * b + 1);
  ref->dw = malloc(N * c->k * 4 + 1);
  ck_assert_int_eq(pl_moe_reference_fwd(c, wg, wu, wd, in->x, in->N, in->idx,
                                        in->w, ref->out),
                   PL_OK);
  size_t nall = (size_t)c->E * HI;
  float *gg = calloc(nall, 4), *gu = calloc(nall, 4), *gd = calloc(nall, 4);
  for (int r = 0; r < np; r++) {
    inputs o;
    gen_inputs(t, r, &o);
    void *dx = malloc((size_t)o.N * c->H * b + 1);
    float *dw = malloc((size_t)o.N * c->k * 4 + 1);
    ck_assert_int_eq(pl_moe_reference_bwd(c, wg, wu, wd, o.x, o.N, o.idx, o.w,
                                          o.dout, dx, dw, gg, gu, gd),
                     PL_OK);
    if (r == me) {
      memcpy(ref->dx, dx, (size_t)o.N * c->H * b);
      memcpy(ref->dw, dw, (size_t)o.N * c->k * 4);
    }
    free(dx), free(dw);
    free_inputs(&o);
  }
  ref->gwg = malloc(El * HI * 4), ref->gwu = malloc(El * HI * 4),
  ref->gwd = malloc(El * HI * 4);
  memcpy(ref->gwg, gg + (size_t)me * El * HI, El * HI * 4);
  memcpy(ref->gwu, gu + (size_t)me * El * HI, El * HI * 4);
  memcpy(ref->gwd, gd + (size_t)me * El * HI, El * HI * 4);
  free(gg), free(gu), free(gd);
}

static void compare(const char *label, const tcase_cfg *t, const inputs *in,
                    const result *got, const result *ref, bool exact_grads) {
  const pl_moe_cfg *c = &t->cfg;
  char w[160];
  size_t N = (size_t)in->N, HI = (size_t)c->H * c->I, El = c->E / np;
  double tol = c->dt == PL_F32 ? 2e-5 : 2e-2;
  if (MOE_TEST_CUDA && !exact_grads) {
    /* cuBLAS sums in its own order: compare normwise, dtype-scaled */
    double t2 = c->dt == PL_F32 ? 1e-4 : 3e-2;
    const void *ga[3] = {got->out, got->dx, got->dw},
               *gb[3] = {ref->out, ref->dx, ref->dw};
    size_t nn[3] = {N * c->H, N * c->H, N * c->k};
    const char *nm2[3] = {"out", "dx", "dw"};
    for (int i = 0; i < 3; i++) {
      float *fa = malloc(nn[i] * 4 + 4), *fb = malloc(nn[i] * 4 + 4);
      pl_dtype d = i == 2 ? PL_F32 : c->dt;
      for (size_t q = 0; q < nn[i]; q++) {
        fa[q] = mt_getv(ga[i], d, q);
        fb[q] = mt_getv(gb[i], d, q);
      }
      snprintf(w, sizeof w, "%s %s", label, nm2[i]);
      mt_expect_close(me, w, fa, fb, nn[i], t2);
      free(fa), free(fb);
    }
    tol = c->dt == PL_F32 ? 1e-4 : 3e-2;
  } else {
    snprintf(w, sizeof w, "%s out", label);
    mt_expect_same(me, w, got->out, ref->out, N * c->H, c->dt);
    snprintf(w, sizeof w, "%s dx", label);
    mt_expect_same(me, w, got->dx, ref->dx, N * c->H, c->dt);
    snprintf(w, sizeof w, "%s dw", label);
    mt_expect_same(me, w, got->dw, ref->dw, N * c->k, PL_F32);
  }
  const float *a[3] = {got->gwg, got->gwu, got->gwd};
  const float *bb[3] = {ref->gwg, ref->gwu, ref->gwd};
  const char *nm[3] = {"dWg", "dWu", "dWd"};
  for (int i = 0; i < 3; i++) {
    snprintf(w, sizeof w, "%s %s", label, nm[i]);
    if (exact_grads)
      mt_expect_same(me, w, a[i], bb[i], El * HI, PL_F32);
    else
      mt_expect_close(me, w, a[i], bb[i], El * HI, tol);
  }
}

static tcase_cfg base_case(pl_dtype dt) {
  tcase_cfg t;
  memset(&t, 0, sizeof t);
  t.cfg = pl_moe_cfg_default();
  t.cfg.H = 24;
  t.cfg.I = 16;
  t.cfg.E = 12;
  t.cfg.k = 3;
  t.cfg.dt = dt;
  t.cfg.knobs.m = 4;
  t.cfg.c = 7;
  t.cfg.K_max = 16;
  t.rk = R_RANDOM;
  for (int r = 0; r < 8; r++)
    t.Nr[r] = 24 + 5 * r;
  t.seed = 1234;
  return t;
}

/* Run every variant of ops/moe.h (a chunking one with strided and with
 * contiguous chunks) and compare each with the reference, a chunking one's
 * dispatch peaks with its bound; returns nothing, asserts. */
static void run_all(const char *label, tcase_cfg *t) {
  inputs in;
  gen_inputs(t, me, &in);
  void *wg, *wu, *wd;
  gen_weights(t, &wg, &wu, &wd);
  result ref = {0};
  reference(t, wg, wu, wd, &in, &ref);
  for (int vc = 0; vc < 2 * PL_MOE_VARIANT_COUNT; vc++) {
    const pl_moe_variant_desc *vd = &pl_moe_variants[vc / 2];
    const bool contig = vc % 2;
    if (contig && !vd->chunks)
      continue;
    tcase_cfg tv = *t;
    tv.cfg.variant = vd->id;
    tv.cfg.contiguous = contig;
    result got = {0};
    pl_status s = run_variant(&tv, &in, wg, wu, wd, &got);
    if (s != PL_OK)
      fprintf(stderr, "rank %d: %s %s: %s: %s\n", me, label,
              pl_moe_variant_name(tv.cfg.variant), pl_strerror(s),
              pl_last_error());
    ck_assert_msg(s == PL_OK, "%s %s: %s: %s", label,
                  pl_moe_variant_name(tv.cfg.variant), pl_strerror(s),
                  pl_last_error());
    char l[128];
    snprintf(l, sizeof l, "%s/%s%s/%s np=%d", label,
             pl_moe_variant_name(tv.cfg.variant), contig ? "(contig)" : "",
             pl_dtype_name(tv.cfg.dt), np);
    compare(l, &tv, &in, &got, &ref, false);
    if (vd->chunks) {
      size_t bound = pl_moe_dispatch_bound(&tv.cfg, np, got.c_eff);
      ck_assert_msg(got.peak_fwd <= bound && got.peak_bwd <= bound,
                    "%s: dispatch peak fwd %zu / bwd %zu > bound %zu (K=%d "
                    "c_eff=%lld)",
                    l, got.peak_fwd, got.peak_bwd, bound, got.K,
                    (long long)got.c_eff);
    }
    free_result(&got);
  }
  free_result(&ref);
  free(wg), free(wu), free(wd);
  free_inputs(&in);
}

START_TEST(exact_random_f32) {
  tcase_cfg t = base_case(PL_F32);
  run_all("random", &t);
}
END_TEST

START_TEST(exact_random_bf16) {
  tcase_cfg t = base_case(PL_BF16);
  run_all("random", &t);
}
END_TEST

START_TEST(exact_profiles) {
  const char *profs[] = {"balanced", "95/4", "80/4", "50/2"};
  for (int p = 0; p < 4; p++) {
    tcase_cfg t = base_case(p % 2 ? PL_BF16 : PL_F32);
    t.rk = R_PROFILE;
    t.profile = profs[p];
    t.cfg.knobs.lambda = 1.0;
    run_all(profs[p], &t);
  }
}
END_TEST

START_TEST(exact_edges) {
  /* N = 0 and N = 1 on some ranks; N not a multiple of K */
  tcase_cfg t = base_case(PL_F32);
  t.Nr[0] = 0;
  t.Nr[1] = 1;
  t.Nr[2] = 13;
  t.Nr[3] = 0;
  run_all("N0/N1", &t);
  /* every route to one expert (plan splits it across ranks) */
  t = base_case(PL_F32);
  t.rk = R_ONE_EXPERT;
  t.cfg.k = 1;
  t.cfg.knobs.lambda = 0;
  run_all("one-expert", &t);
  /* experts with no tokens (odd ids never routed) */
  t = base_case(PL_BF16);
  t.rk = R_HALF_EXPERTS;
  run_all("half-experts", &t);
  /* m larger than any piece: leftovers forced whole */
  t = base_case(PL_F32);
  t.rk = R_ONE_EXPERT;
  t.cfg.knobs.m = 1 << 20;
  t.cfg.knobs.lambda = 0;
  run_all("force", &t);
  /* k > E: a token's routes repeat experts (a proxy's router slots,
   * model/moe_ffn.h) */
  t = base_case(PL_BF16);
  t.cfg.k = 16;
  run_all("k>E", &t);
}
END_TEST

START_TEST(k1_equals_llep) {
  tcase_cfg t = base_case(PL_F32);
  t.rk = R_PROFILE;
  t.profile = "80/4";
  t.cfg.knobs.lambda = 0;
  inputs in;
  gen_inputs(&t, me, &in);
  void *wg, *wu, *wd;
  gen_weights(&t, &wg, &wu, &wd);
  result a = {0}, b = {0};
  t.cfg.variant = PL_MOE_LLEP;
  ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &a), PL_OK);
  t.cfg.variant = PL_MOE_PIPELINED;
  t.cfg.c = 1000000; /* K = 1 */
  ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &b), PL_OK);
  ck_assert_int_eq(b.K, 1);
  compare("K=1 vs llep", &t, &in, &b, &a, true);
  free_result(&a), free_result(&b);
  free(wg), free(wu), free(wd);
  free_inputs(&in);
}
END_TEST

/* The expert-major receive layout (default) against the source-major one
 * (--source-major): the same rows through GEMMs grouped differently, so out,
 * dx and dw are bit-exact (row-deterministic kernels; CUDA: normwise), weight
 * gradients within fp32 tolerance (an expert's rows summed in one GEMM
 * instead of per segment); with several ranks some chunks are expert-major
 * and issue fewer GEMMs; both within the bound. */
START_TEST(expert_major_vs_source_major) {
  const char *profs[] = {"balanced", "95/4"};
  for (int p = 0; p < 2; p++) {
    tcase_cfg t = base_case(PL_F32);
    t.rk = R_PROFILE;
    t.profile = profs[p];
    t.cfg.knobs.lambda = 0;
    inputs in;
    gen_inputs(&t, me, &in);
    void *wg, *wu, *wd;
    gen_weights(&t, &wg, &wu, &wd);
    result a = {0}, b = {0};
    t.cfg.variant = PL_MOE_PIPELINED;
    t.cfg.source_major = true;
    ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &a), PL_OK);
    t.cfg.source_major = false;
    ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &b), PL_OK);
    char l[96];
    snprintf(l, sizeof l, "%s expert-major vs source-major np=%d", profs[p],
             np);
    compare(l, &t, &in, &b, &a, false);
    ck_assert_int_eq(a.st.em_chunks, 0);
    size_t bound = pl_moe_dispatch_bound(&t.cfg, np, b.c_eff);
    ck_assert_msg(b.peak_fwd <= bound && b.peak_bwd <= bound,
                  "%s: dispatch peak fwd %zu / bwd %zu > bound %zu", l,
                  b.peak_fwd, b.peak_bwd, bound);
    /* group-wide: with several ranks some chunk is expert-major somewhere */
    int64_t g[3] = {b.st.em_chunks, a.st.gemms, b.st.gemms};
    int64_t gs[3];
    ck_assert_int_eq(pl_host_allreduce_i64(world, g, 3, PL_RED_MAX), PL_OK);
    memcpy(gs, g, sizeof g);
    if (np > 1) {
      ck_assert_msg(gs[0] > 0, "%s: no chunk expert-major", l);
      ck_assert_msg(gs[2] < gs[1], "%s: gemms per chunk %lld not below %lld", l,
                    (long long)gs[2], (long long)gs[1]);
    } else {
      ck_assert_int_eq(gs[0], 0);
      ck_assert_int_eq(gs[2], gs[1]);
    }
    if (me == 0)
      printf("%s: gemms per chunk %lld -> %lld, expert-major chunks %lld\n", l,
             (long long)gs[1], (long long)gs[2], (long long)gs[0]);
    free_result(&a), free_result(&b);
    free(wg), free(wu), free(wd);
    free_inputs(&in);
  }
}
END_TEST

/* Compute lanes (cfg.lanes: the expert GEMMs spread over extra streams, the
 * gate/up weight gradients beside dWd and dX) change where GEMMs run, not what
 * they compute: every output and gradient bit-identical to lanes = 0, for each
 * variant, expert-major and source-major, within the bound.  With cfg.profile
 * the stages are timed: all non-negative, some compute stage positive, and
 * profiling changes nothing either. */
START_TEST(lanes_and_profile) {
  for (int v = 0; v < PL_MOE_VARIANT_COUNT; v++)
    for (int sm = 0; sm < 2; sm++) {
      tcase_cfg t = base_case(PL_F32);
      t.rk = R_PROFILE;
      t.profile = "95/4";
      t.cfg.knobs.lambda = 0;
      t.cfg.variant = (pl_moe_variant)v;
      t.cfg.source_major = sm;
      t.cfg.lanes = 0;
      inputs in;
      gen_inputs(&t, me, &in);
      void *wg, *wu, *wd;
      gen_weights(&t, &wg, &wu, &wd);
      result a = {0}, b = {0};
      ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &a), PL_OK);
      t.cfg.lanes = v == 1 ? 1 : 3;
      t.cfg.profile = true;
      t.cfg.comm_blocks = 3; /* pipelined: capped comm-stream grids */
      ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &b), PL_OK);
      char l[96];
      snprintf(l, sizeof l, "%s%s lanes=%d vs 0 np=%d",
               pl_moe_variant_name(t.cfg.variant), sm ? " source-major" : "",
               t.cfg.lanes, np);
      compare(l, &t, &in, &b, &a, true);
      if (pl_moe_variants[v].chunks) {
        size_t bound = pl_moe_dispatch_bound(&t.cfg, np, b.c_eff);
        ck_assert_msg(b.peak_fwd <= bound && b.peak_bwd <= bound,
                      "%s: dispatch peak fwd %zu / bwd %zu > bound %zu", l,
                      b.peak_fwd, b.peak_bwd, bound);
      }
      double busy = 0;
      for (int q = 0; q < PL_MOE_NSTAGES; q++) {
        ck_assert_msg(b.stage_ms[q] >= 0 && a.stage_ms[q] == 0,
                      "%s: stage %s %g ms (unprofiled %g)", l,
                      pl_moe_stage_name(q), b.stage_ms[q], a.stage_ms[q]);
        if (q != PL_MOE_ST_IDLE && q != PL_MOE_ST_FWD_WAIT &&
            q != PL_MOE_ST_BWD_WAIT)
          busy += b.stage_ms[q];
      }
      ck_assert_msg(busy > 0, "%s: no stage time recorded", l);
      free_result(&a), free_result(&b);
      free(wg), free(wu), free(wd);
      free_inputs(&in);
    }
}
END_TEST

START_TEST(refusals) {
  pl_moe_cfg c = base_case(PL_F32).cfg;
  pl_moe *m = NULL;
  if (np > 1) {
    c.E = 5 * np + 1; /* not a multiple of Ep */
    ck_assert_int_eq(pl_moe_create(world, &c, &m), PL_EINVAL);
    ck_assert_msg(strstr(pl_last_error(), "multiple") != NULL, "%s",
                  pl_last_error());
  }
  c = base_case(PL_F32).cfg;
  c.k = 0;
  ck_assert_int_eq(pl_moe_create(world, &c, &m), PL_EINVAL);
  c = base_case(PL_F32).cfg;
  c.lanes = PL_MOE_MAX_LANES + 1;
  ck_assert_int_eq(pl_moe_create(world, &c, &m), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "lanes") != NULL, "%s",
                pl_last_error());
  c = base_case(PL_F32).cfg;
  c.comm_blocks = -1;
  ck_assert_int_eq(pl_moe_create(world, &c, &m), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "comm_blocks") != NULL, "%s",
                pl_last_error());
  c = base_case(PL_F32).cfg;
  c.dt = PL_I32;
  ck_assert_int_eq(pl_moe_create(world, &c, &m), PL_EINVAL);
  /* an out-of-range expert id on one rank: every rank gets PL_EINVAL */
  c = base_case(PL_F32).cfg;
  ck_assert_int_eq(pl_moe_create(world, &c, &m), PL_OK);
  int64_t N = 4;
  int32_t idx[12];
  for (int i = 0; i < 12; i++)
    idx[i] = i % c.E;
  if (me == np - 1)
    idx[5] = c.E;
  float *w = NULL;
  void *x = NULL, *out = NULL;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 12 * 4, "act", (void **)&w),
                   PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, N * c.H * 4, "act", &x),
                   PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, N * c.H * 4, "act", &out),
                   PL_OK);
  pl_moe_weights W = {x, x, x};
  ck_assert_int_eq(pl_moe_forward(m, &W, x, N, idx, w, out, NULL, NULL),
                   PL_EINVAL);
  pl_free(dev, w), pl_free(dev, x), pl_free(dev, out);
  pl_moe_destroy(m);
  /* the dense reference refuses it too, forward and backward, before it
   * reads the weights of an expert beyond E (room for one is allocated, so
   * a reference that did not check would read valid memory and pass) */
  int32_t bad[12];
  for (int i = 0; i < 12; i++)
    bad[i] = i % c.E;
  bad[5] = c.E;
  size_t nw = (size_t)(c.E + 1) * c.H * c.I, nx = (size_t)N * c.H;
  float *hw = calloc(nw, sizeof(float)), *hx = calloc(nx, sizeof(float));
  float *hd = calloc(nx, sizeof(float)), *ho = calloc(nx, sizeof(float));
  float *hr = calloc(12, sizeof(float)), *hdw = calloc(12, sizeof(float));
  ck_assert_int_eq(pl_moe_reference_fwd(&c, hw, hw, hw, hx, N, bad, hr, ho),
                   PL_EINVAL);
  ck_assert_int_eq(pl_moe_reference_bwd(&c, hw, hw, hw, hx, N, bad, hr, hd, ho,
                                        hdw, NULL, NULL, NULL),
                   PL_EINVAL);
  free(hw), free(hx), free(hd), free(ho), free(hr), free(hdw);
}
END_TEST

/* A memory limit on one rank only: that rank fails with PL_ENOMEM inside the
 * schedule, every other rank learns it at the next agreement and returns too
 * (no rank is left waiting in a collective); the tracked arenas are clean
 * afterwards, and the same layer runs again once the limit is lifted. */
START_TEST(oom_on_one_rank) {
  tcase_cfg t = base_case(PL_F32);
  t.rk = R_PROFILE;
  t.profile = "95/4";
  inputs in;
  gen_inputs(&t, me, &in);
  void *wg, *wu, *wd;
  gen_weights(&t, &wg, &wu, &wd);
  for (int v = 0; v < 3; v++) {
    t.cfg.variant = (pl_moe_variant)v;
    result r = {0};
    /* exactly what run_variant allocates before the forward (f32) plus the
     * layer's route indices: the first dispatch buffer fails */
    size_t HI = (size_t)t.cfg.H * t.cfg.I, El = t.cfg.E / np;
    size_t pre = 6 * El * HI * 4 +
                 (size_t)in.N * (4 * t.cfg.H + 2 * t.cfg.k) * 4 +
                 (size_t)in.N * (1 + 3 * t.cfg.k) * 4 + 16;
    pl_mem_stats s0;
    ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s0), PL_OK);
    if (me == np - 1)
      pl_mem_set_limit(dev, PL_ARENA_DEVICE, s0.current + pre);
    pl_status s = run_variant(&t, &in, wg, wu, wd, &r);
    pl_mem_set_limit(dev, PL_ARENA_DEVICE, 0);
    ck_assert_msg(
        s == PL_ENOMEM, "%s: got %s (%s), want PL_ENOMEM on every rank",
        pl_moe_variant_name(t.cfg.variant), pl_strerror(s), pl_last_error());
    free_result(&r);
    pl_mem_stats s1;
    ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s1), PL_OK);
    ck_assert_int_eq(s1.current, s0.current);
    /* and it works again */
    ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &r), PL_OK);
    free_result(&r);
  }
  free(wg), free(wu), free(wd);
  free_inputs(&in);
}
END_TEST

/* The bound over profiles x (N, k, c); llep exceeds it. */
START_TEST(bound_grid) {
  const char *profs[] = {"balanced", "95/4", "80/4", "50/2"};
  const int64_t Ns[] = {37};
  const int ks[] = {1, 4};
  const int64_t cs[] = {4, 9};
  int llep_over = 0, combos = 0;
  for (int p = 0; p < 4; p++)
    for (int ni = 0; ni < 1; ni++)
      for (int ki = 0; ki < 2; ki++)
        for (int ci = 0; ci < 2; ci++) {
          tcase_cfg t = base_case(PL_BF16);
          t.cfg.H = 16;
          t.cfg.I = 8;
          t.rk = R_PROFILE;
          t.profile = profs[p];
          t.cfg.k = ks[ki];
          t.cfg.c = cs[ci];
          for (int r = 0; r < 8; r++)
            t.Nr[r] = Ns[ni] + (r % 2) * 3;
          inputs in;
          gen_inputs(&t, me, &in);
          void *wg, *wu, *wd;
          gen_weights(&t, &wg, &wu, &wd);
          result a = {0}, b = {0};
          t.cfg.variant = PL_MOE_PIPELINED;
          ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &a), PL_OK);
          size_t bound = pl_moe_dispatch_bound(&t.cfg, np, a.c_eff);
          ck_assert_msg(a.peak_fwd <= bound && a.peak_bwd <= bound,
                        "%s N=%lld k=%d c=%lld: pipelined peak fwd %zu bwd "
                        "%zu > bound %zu",
                        profs[p], (long long)Ns[ni], ks[ki], (long long)cs[ci],
                        a.peak_fwd, a.peak_bwd, bound);
          /* the pipeline overlaps when the bound leaves room (balanced) */
          if (p == 0)
            ck_assert_msg(a.st.overlapped > 0,
                          "balanced N=%lld k=%d c=%lld: no chunk overlapped",
                          (long long)Ns[ni], ks[ki], (long long)cs[ci]);
          if (MOE_TEST_CUDA) {
            /* the same schedule on the CPU backend tracks the same peaks */
            result cp = {0};
            pl_dev *d0 = dev;
            pl_comm *w0 = world;
            dev = hdev, world = hworld;
            ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &cp), PL_OK);
            dev = d0, world = w0;
            ck_assert_msg(cp.peak_fwd == a.peak_fwd &&
                              cp.peak_bwd == a.peak_bwd,
                          "dispatch peaks differ: CUDA %zu/%zu, CPU %zu/%zu",
                          a.peak_fwd, a.peak_bwd, cp.peak_fwd, cp.peak_bwd);
            free_result(&cp);
          }
          t.cfg.variant = PL_MOE_LLEP;
          ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &b), PL_OK);
          /* group-wide: does llep exceed the bound on any rank? */
          int64_t over = b.peak_fwd > bound || b.peak_bwd > bound;
          ck_assert_int_eq(pl_host_allreduce_i64(world, &over, 1, PL_RED_MAX),
                           PL_OK);
          llep_over += (int)over;
          combos++;
          free_result(&a), free_result(&b);
          free(wg), free(wu), free(wd);
          free_inputs(&in);
        }
  /* with K >= 3 chunks llep's unchunked buffers exceed the chunked bound */
  ck_assert_msg(llep_over > combos / 2,
                "llep exceeded the bound in only %d of %d configurations",
                llep_over, combos);
}
END_TEST

/* The dry device's route hook of dry_plans_alike: the routes of the inputs
 * ctx points to. */
static pl_status inputs_routes(void *ctx, int64_t N, int k, int E,
                               int32_t *idx) {
  const inputs *in = ctx;
  ck_assert_int_eq(N, in->N);
  memcpy(idx, in->idx, (size_t)(N * k) * sizeof *idx);
  return PL_OK;
}

/* A dry device's plan (unsplit experts counted per chunk, split ones walked)
 * on LLEP's profiles: the CPU plan's dispatch peaks and stats, bit for bit;
 * with the routes passed in memory, and read in place from the device (as a
 * trainer's router reads them there: known by their stamp, counted per
 * chunk once and kept), twice. */
START_TEST(dry_plans_alike) {
  const char *profs[] = {"balanced", "95/4", "80/4", "50/2"};
  pl_dev *const d0 = dev, *dd = NULL;
  pl_comm *const w0 = world, *dw = NULL;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_DRY, 0, &dd), PL_OK);
  ck_assert_int_eq(pl_comm_world(dd, &dw), PL_OK);
  int split = 0;
  for (int q = 0; q < 16; q++) {
    tcase_cfg t = base_case(PL_BF16);
    t.rk = R_PROFILE, t.profile = profs[q / 4], t.cfg.knobs.lambda = 1.0;
    t.cfg.variant = PL_MOE_PIPELINED, t.cfg.c = q % 2 ? 9 : 4;
    t.cfg.contiguous = q % 4 >= 2;
    inputs in;
    gen_inputs(&t, me, &in);
    void *wg, *wu, *wd;
    gen_weights(&t, &wg, &wu, &wd);
    result a = {0}, b = {0};
    dev = MOE_TEST_CUDA ? hdev : d0, world = MOE_TEST_CUDA ? hworld : w0;
    ck_assert_int_eq(run_variant(&t, &in, wg, wu, wd, &a), PL_OK);
    for (int v = 0; v < 3; v++) {
      inputs din = in;
      if (v > 0) { /* read in place: the device's answer, stamped */
        pl_dry_route_view rv;
        ck_assert_int_eq(pl_dry_set_routes(dd, inputs_routes, &in), PL_OK);
        ck_assert_int_eq(
            pl_dry_routes_view(dd, in.N, t.cfg.k, t.cfg.E, t.cfg.E, &rv),
            PL_OK);
        ck_assert(rv.stamp != 0);
        din.idx = (int32_t *)rv.idx;
      }
      dev = dd, world = dw;
      ck_assert_int_eq(run_variant(&t, &din, wg, wu, wd, &b), PL_OK);
      dev = d0, world = w0;
      ck_assert_msg(a.peak_fwd == b.peak_fwd && a.peak_bwd == b.peak_bwd &&
                        !memcmp(&a.st, &b.st, sizeof a.st),
                    "rank %d, case %d (%s): dispatch %zu/%zu vs dry %zu/%zu",
                    me, q, v ? "stamped" : "in memory", a.peak_fwd, a.peak_bwd,
                    b.peak_fwd, b.peak_bwd);
      free_result(&b);
    }
    ck_assert_int_eq(pl_dry_set_routes(dd, NULL, NULL), PL_OK);
    split += a.st.n_spilled > 0;
    free_result(&a), free_inputs(&in);
    free(wg), free(wu), free(wd);
  }
  ck_assert_msg(np == 1 || split > 0, "no profile split an expert");
  pl_comm_destroy(dw), pl_dev_destroy(dd);
}
END_TEST

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK) {
    fprintf(stderr, "pl_init: %s\n", pl_last_error());
    return 3;
  }
  if (MOE_TEST_CUDA) {
    int nd = pl_cuda_device_count();
    if (nd < pl_world_size()) {
      if (pl_world_rank() == 0)
        printf("skipped: no CUDA device (%d GPUs for %d ranks)\n", nd,
               pl_world_size());
      pl_finalize();
      return 0;
    }
  }
  if (pl_dev_create(PL_BACKEND_CPU, 0, &hdev) != PL_OK)
    return 3;
  if (pl_dev_create(MOE_TEST_CUDA ? PL_BACKEND_CUDA : PL_BACKEND_CPU,
                    MOE_TEST_CUDA ? -1 : 0, &dev) != PL_OK ||
      pl_comm_world(dev, &world) != PL_OK ||
      (MOE_TEST_CUDA && pl_comm_world(hdev, &hworld) != PL_OK)) {
    fprintf(stderr, "setup: %s\n", pl_last_error());
    return 3;
  }
  me = pl_comm_rank(world);
  np = pl_comm_size(world);
  /* Ranks share the machine's cores: idle OpenMP teams spinning next to
   * MPI's polling take the cores the ranks need; the sizes here need no
   * threads. */
  if (np > 1 && !MOE_TEST_CUDA)
    omp_set_num_threads(1);
  const TTest *tests[] = {refusals,
                          exact_random_f32,
                          exact_random_bf16,
                          exact_profiles,
                          exact_edges,
                          k1_equals_llep,
                          expert_major_vs_source_major,
                          lanes_and_profile,
                          bound_grid,
                          dry_plans_alike,
                          oom_on_one_rank,
                          NULL};
  const int fail = pl_check_run("mpi_moe", 300, tests, me, world);
  pl_comm_destroy(world);
  if (hworld)
    pl_comm_destroy(hworld);
  pl_dev_destroy(dev);
  pl_dev_destroy(hdev);
  pl_finalize();
  return fail ? 1 : 0;
}
