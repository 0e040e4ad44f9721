/* test_attention_cuda.c — the CUDA flash-attention kernels (SIMPLE and MMA)
 * against the CPU reference (bf16, same inputs: pl_rng_fill gives the same
 * bits on both backends), and MMA against SIMPLE at sizes the CPU is too slow
 * for.  Prints max abs / normwise error of every output for both kernels, and
 * forward / backward TFLOP/s of both (causal: fwd = 4·S²·d·n_q/2, bwd = 2.5×).
 * With d = 128 it also checks and times the wgmma forward (sm_90a builds; AUTO
 * runs it), once per V path (PLATEAU_ATTN_WGMMA_V = transpose, mn, mn128, pipe, mn128pp,
 * mn128tma, ovtma;
 * only the one named when the caller sets it), and the wgmma backward once per
 * variant (PLATEAU_ATTN_WGMMA_BWD = bulk, fused, split), step order of the dK/dV
 * kernels (PLATEAU_ATTN_BWD_WALK = asc, desc) and barrier scheme
 * (PLATEAU_ATTN_WGMMA_SYNC = two, one, tma) (dQ, dK, dV against SIMPLE's, on
 * SIMPLE's O and LSE; the MMA backward with the caller's order, desc by
 * default).  A wgmma mismatch or error fails the test; a build
 * without sm_90a code (PL_EUNSUPPORTED) only says so.
 * Without a GPU it prints "skipped: no CUDA device" and passes.  No fork: a
 * CUDA context must not be inherited (run with CK_FORK=no; main sets it). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "model/attention.h"
#include "model/attention_testutil.h"
#include "core/check_run.h"

#if PL_HAVE_CUDA
static pl_dev *cpu, *gpu;
static pl_stream *cs, *gs;

static void *alloc_on(pl_dev *d, size_t bytes) {
  void *p = NULL;
  ck_assert_int_eq(pl_alloc(d, PL_ARENA_DEVICE, bytes, "act", &p), PL_OK);
  return p;
}

typedef struct bufs {
  void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float *lse;
} bufs;

static void bufs_alloc(pl_dev *d, bufs *b, size_t nqe, size_t nke, size_t nr) {
  b->q = alloc_on(d, nqe * 2);
  b->k = alloc_on(d, nke * 2);
  b->v = alloc_on(d, nke * 2);
  b->o = alloc_on(d, nqe * 2);
  b->dout = alloc_on(d, nqe * 2);
  b->dq = alloc_on(d, nqe * 2);
  b->dk = alloc_on(d, nke * 2);
  b->dv = alloc_on(d, nke * 2);
  b->lse = alloc_on(d, nr * 4);
}
static void bufs_free(pl_dev *d, bufs *b) {
  void *ps[] = {b->q, b->k, b->v, b->o, b->dout, b->dq, b->dk, b->dv, b->lse};
  for (int i = 0; i < 9; i++) pl_free(d, ps[i]);
}

static void d2h(void *dst, const void *src, size_t bytes) {
  ck_assert_int_eq(pl_memcpy_async(gs, dst, src, bytes), PL_OK);
  ck_assert_int_eq(pl_stream_sync(gs), PL_OK);
}

/* host copies of one run's outputs */
typedef struct outs {
  void *o, *dq, *dk, *dv;
  float *lse;
} outs;

static void outs_get(outs *h, const bufs *g, size_t nqe, size_t nke, size_t nr) {
  h->o = malloc(nqe * 2);
  h->dq = malloc(nqe * 2);
  h->dk = malloc(nke * 2);
  h->dv = malloc(nke * 2);
  h->lse = malloc(nr * 4);
  d2h(h->o, g->o, nqe * 2);
  d2h(h->dq, g->dq, nqe * 2);
  d2h(h->dk, g->dk, nke * 2);
  d2h(h->dv, g->dv, nke * 2);
  d2h(h->lse, g->lse, nr * 4);
}
static void outs_free(outs *h) {
  free(h->o);
  free(h->dq);
  free(h->dk);
  free(h->dv);
  free(h->lse);
}

static int cmp(const char *tag, const char *what, const void *got, pl_dtype dt, const void *ref,
               pl_dtype rdt, size_t n, double tol) {
  double *r = tu_to_f64(ref, rdt, n);
  attn_err e = tu_compare(got, dt, r, n, tol);
  free(r);
  printf("#   %-8s %-3s max_abs %.3e normwise %.3e (tol %.1e)%s", tag, what, e.max_abs, e.norm_err,
         tol, e.first_bad < 0 ? "\n" : "");
  if (e.first_bad >= 0) printf("  FIRST BAD INDEX %ld\n", e.first_bad);
  return e.first_bad < 0;
}

/* V paths of the wgmma forward (PLATEAU_ATTN_WGMMA_V) and variants of the
 * wgmma backward (PLATEAU_ATTN_WGMMA_BWD), read by attention.cu at each
 * launch.  The tests run each in turn; a caller who sets the variable gets
 * only that one (to isolate a kernel that faults: a fault ends the
 * process), and finds it restored after the loop. */
static const char *const wgmma_v_all[] = {"transpose", "mn",       "mn128", "pipe",
                                          "mn128pp",   "mn128tma", "ovtma", NULL};
static const char *const wgmma_bwd_all[] = {"fused", "split", "bulk", NULL};
/* the step orders of the dK/dV kernels (PLATEAU_ATTN_BWD_WALK) and the wgmma
 * dK/dV kernel's barriers per step (PLATEAU_ATTN_WGMMA_SYNC) */
static const char *const bwd_walk_all[] = {"asc", "desc", NULL};
static const char *const wgmma_sync_all[] = {"two", "one", "tma", NULL};

typedef struct env_sweep {
  const char *var;
  char *saved; /* the caller's value (restored at the end), or NULL */
  const char *name[8];
  int n;
} env_sweep;

static void env_sweep_begin(env_sweep *w, const char *var, const char *const *all) {
  const char *e = getenv(var);
  w->var = var;
  w->saved = e && *e ? strdup(e) : NULL;
  w->n = 0;
  if (w->saved)
    w->name[w->n++] = w->saved;
  else
    for (; all[w->n] && w->n < 8; w->n++) w->name[w->n] = all[w->n];
}
/* sets the variable to value i of the sweep and returns it */
static const char *env_sweep_set(const env_sweep *w, int i) {
  setenv(w->var, w->name[i], 1);
  return w->name[i];
}
static void env_sweep_end(env_sweep *w) {
  if (w->saved)
    setenv(w->var, w->saved, 1);
  else
    unsetenv(w->var);
  free(w->saved);
}

/* run one algorithm on the GPU: poison, fwd, bwd */
static void gpu_run(const pl_attn_shape *sh, bufs *g, size_t nqe, size_t nke, size_t nr) {
  ck_assert_int_eq(pl_fill(gs, g->o, PL_BF16, nqe, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->lse, PL_F32, nr, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->dq, PL_BF16, nqe, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->dk, PL_BF16, nke, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->dv, PL_BF16, nke, NAN), PL_OK);
  pl_status s = pl_attn_fwd(gs, sh, g->q, g->k, g->v, g->o, g->lse);
  ck_assert_msg(s == PL_OK, "fwd: %s", pl_last_error());
  s = pl_attn_bwd(gs, sh, g->q, g->k, g->v, g->o, g->dout, g->lse, g->dq, g->dk, g->dv);
  ck_assert_msg(s == PL_OK, "bwd: %s", pl_last_error());
  ck_assert_int_eq(pl_stream_sync(gs), PL_OK);
}

/* One shape: inputs drawn on the GPU; SIMPLE and MMA on the GPU; the CPU
 * reference when with_cpu (inputs copied down); MMA vs SIMPLE always. */
static int check_shape(int64_t B, int64_t S, int nq, int nkv, int d, int with_cpu, uint64_t seed) {
  pl_attn_shape sh = {
      .batch = B, .seq = S, .n_q = nq, .n_kv = nkv, .head_dim = d, .dtype = PL_BF16};
  const size_t nqe = (size_t)(B * S * nq * d), nke = (size_t)(B * S * nkv * d),
               nr = (size_t)(B * nq * S);
  printf("# shape B=%lld S=%lld n_q=%d n_kv=%d d=%d\n", (long long)B, (long long)S, nq, nkv, d);
  bufs g;
  bufs_alloc(gpu, &g, nqe, nke, nr);
  ck_assert_int_eq(pl_rng_fill(gs, g.q, PL_BF16, nqe, seed, 0, PL_DIST_NORMAL, 0.f, 1.5f), PL_OK);
  ck_assert_int_eq(pl_rng_fill(gs, g.k, PL_BF16, nke, seed + 1, 0, PL_DIST_NORMAL, 0.f, 1.5f),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(gs, g.v, PL_BF16, nke, seed + 2, 0, PL_DIST_NORMAL, 0.f, 1.f),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(gs, g.dout, PL_BF16, nqe, seed + 3, 0, PL_DIST_NORMAL, 0.f, 1.f),
                   PL_OK);
  outs hs, hm;
  sh.algo = PL_ATTN_SIMPLE;
  gpu_run(&sh, &g, nqe, nke, nr);
  outs_get(&hs, &g, nqe, nke, nr);
  sh.algo = PL_ATTN_MMA;
  gpu_run(&sh, &g, nqe, nke, nr);
  outs_get(&hm, &g, nqe, nke, nr);
  int ok = 1;
  const double to = 2.5e-2, tg = 4e-2;
  if (with_cpu) {
    bufs c;
    bufs_alloc(cpu, &c, nqe, nke, nr);
    d2h(c.q, g.q, nqe * 2);
    d2h(c.k, g.k, nke * 2);
    d2h(c.v, g.v, nke * 2);
    d2h(c.dout, g.dout, nqe * 2);
    sh.algo = PL_ATTN_AUTO;
    ck_assert_int_eq(pl_attn_fwd(cs, &sh, c.q, c.k, c.v, c.o, c.lse), PL_OK);
    ck_assert_int_eq(pl_attn_bwd(cs, &sh, c.q, c.k, c.v, c.o, c.dout, c.lse, c.dq, c.dk, c.dv),
                     PL_OK);
    const outs *vs[2] = {&hs, &hm};
    const char *names[2] = {"simple", "mma"};
    for (int i = 0; i < 2; i++) {
      char tag[32];
      snprintf(tag, sizeof tag, "%s/cpu", names[i]);
      ok &= cmp(tag, "O", vs[i]->o, PL_BF16, c.o, PL_BF16, nqe, to);
      ok &= cmp(tag, "LSE", vs[i]->lse, PL_F32, c.lse, PL_F32, nr, 1e-3);
      ok &= cmp(tag, "dQ", vs[i]->dq, PL_BF16, c.dq, PL_BF16, nqe, tg);
      ok &= cmp(tag, "dK", vs[i]->dk, PL_BF16, c.dk, PL_BF16, nke, tg);
      ok &= cmp(tag, "dV", vs[i]->dv, PL_BF16, c.dv, PL_BF16, nke, tg);
    }
    bufs_free(cpu, &c);
  }
  if (d == 128) { /* wgmma forward, each V path */
    sh.algo = PL_ATTN_WGMMA;
    env_sweep wp;
    env_sweep_begin(&wp, "PLATEAU_ATTN_WGMMA_V", wgmma_v_all);
    for (int vp = 0; vp < wp.n; vp++) {
      const char *vn = env_sweep_set(&wp, vp);
      char tag[32];
      snprintf(tag, sizeof tag, "wg-%s/sm", vn);
      ck_assert_int_eq(pl_fill(gs, g.o, PL_BF16, nqe, NAN), PL_OK);
      ck_assert_int_eq(pl_fill(gs, g.lse, PL_F32, nr, NAN), PL_OK);
      pl_status ws = pl_attn_fwd(gs, &sh, g.q, g.k, g.v, g.o, g.lse);
      if (ws == PL_OK) ws = pl_stream_sync(gs);
      if (ws == PL_OK) {
        void *wo = malloc(nqe * 2);
        float *wl = malloc(nr * 4);
        d2h(wo, g.o, nqe * 2);
        d2h(wl, g.lse, nr * 4);
        printf("#   wgmma forward, V path %s, vs simple:\n", vn);
        int wok = cmp(tag, "O", wo, PL_BF16, hs.o, PL_BF16, nqe, to);
        wok &= cmp(tag, "LSE", wl, PL_F32, hs.lse, PL_F32, nr, 1e-3);
        if (!wok) printf("#   WGMMA MISMATCH, V path %s\n", vn);
        ok &= wok;
        free(wo);
        free(wl);
      } else {
        printf("#   wgmma, V path %s: %s: %s\n", vn, pl_strerror(ws), pl_last_error());
        if (ws == PL_EUNSUPPORTED) break; /* no sm_90a code: the same for every path */
        ok = 0;
      }
    }
    env_sweep_end(&wp);
    /* wgmma backward, each variant in each step order, on SIMPLE's O and
     * LSE, so that its dQ, dK, dV compare with SIMPLE's on equal inputs */
    env_sweep bw, bk, bs2;
    env_sweep_begin(&bw, "PLATEAU_ATTN_WGMMA_BWD", wgmma_bwd_all);
    env_sweep_begin(&bk, "PLATEAU_ATTN_BWD_WALK", bwd_walk_all);
    env_sweep_begin(&bs2, "PLATEAU_ATTN_WGMMA_SYNC", wgmma_sync_all);
    int unsupported = 0;
    for (int bv = 0; bv < bw.n * bk.n * bs2.n && !unsupported; bv++) {
      const char *wn = env_sweep_set(&bk, bv % bk.n);
      const char *sn = env_sweep_set(&bs2, bv / bk.n % bs2.n);
      const char *bn = env_sweep_set(&bw, bv / (bk.n * bs2.n));
      ck_assert_int_eq(pl_memcpy_async(gs, g.o, hs.o, nqe * 2), PL_OK);
      ck_assert_int_eq(pl_memcpy_async(gs, g.lse, hs.lse, nr * 4), PL_OK);
      ck_assert_int_eq(pl_fill(gs, g.dq, PL_BF16, nqe, NAN), PL_OK);
      ck_assert_int_eq(pl_fill(gs, g.dk, PL_BF16, nke, NAN), PL_OK);
      ck_assert_int_eq(pl_fill(gs, g.dv, PL_BF16, nke, NAN), PL_OK);
      pl_status bs = pl_attn_bwd(gs, &sh, g.q, g.k, g.v, g.o, g.dout, g.lse, g.dq, g.dk, g.dv);
      if (bs == PL_OK) bs = pl_stream_sync(gs);
      if (bs != PL_OK) {
        printf("#   wgmma backward %s (walk %s, %s barrier(s)): %s: %s\n", bn, wn, sn,
               pl_strerror(bs), pl_last_error());
        unsupported = bs == PL_EUNSUPPORTED;
        ok &= unsupported; /* no sm_90a code: the same for every variant */
        continue;
      }
      void *wq = malloc(nqe * 2), *wk = malloc(nke * 2), *wv = malloc(nke * 2);
      d2h(wq, g.dq, nqe * 2);
      d2h(wk, g.dk, nke * 2);
      d2h(wv, g.dv, nke * 2);
      char tag[40];
      snprintf(tag, sizeof tag, "wg-%s/%s/%s/sm", bn, wn, sn);
      printf("#   wgmma backward %s (walk %s, %s barrier(s)) vs simple:\n", bn, wn, sn);
      int wok = cmp(tag, "dQ", wq, PL_BF16, hs.dq, PL_BF16, nqe, tg);
      wok &= cmp(tag, "dK", wk, PL_BF16, hs.dk, PL_BF16, nke, tg);
      wok &= cmp(tag, "dV", wv, PL_BF16, hs.dv, PL_BF16, nke, tg);
      if (!wok) printf("#   WGMMA BACKWARD MISMATCH (%s, walk %s, %s barrier(s))\n", bn, wn, sn);
      ok &= wok;
      free(wq);
      free(wk);
      free(wv);
    }
    env_sweep_end(&bs2);
    env_sweep_end(&bk);
    env_sweep_end(&bw);
    sh.algo = PL_ATTN_MMA;
  }
  ok &= cmp("mma/simp", "O", hm.o, PL_BF16, hs.o, PL_BF16, nqe, to);
  ok &= cmp("mma/simp", "LSE", hm.lse, PL_F32, hs.lse, PL_F32, nr, 1e-3);
  ok &= cmp("mma/simp", "dQ", hm.dq, PL_BF16, hs.dq, PL_BF16, nqe, tg);
  ok &= cmp("mma/simp", "dK", hm.dk, PL_BF16, hs.dk, PL_BF16, nke, tg);
  ok &= cmp("mma/simp", "dV", hm.dv, PL_BF16, hs.dv, PL_BF16, nke, tg);
  outs_free(&hs);
  outs_free(&hm);
  bufs_free(gpu, &g);
  fflush(stdout);
  return ok;
}

static void setup(void) {
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &cpu), PL_OK);
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CUDA, -1, &gpu), PL_OK);
  cs = pl_dev_stream(cpu);
  gs = pl_dev_stream(gpu);
}
static void teardown(void) {
  pl_dev_destroy(gpu);
  pl_dev_destroy(cpu);
}
#endif

START_TEST(cuda_vs_cpu_and_simple) {
  if (pl_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return;
  }
#if PL_HAVE_CUDA
  setup();
  int ok = 1;
  static const int shp[][5] = {
      /* B, S, n_q, n_kv, d; with CPU reference */
      {1, 1, 4, 4, 64},
      {2, 2, 4, 1, 128},
      {1, 77, 8, 1, 64},
      {1, 200, 8, 2, 128},
      {2, 333, 4, 4, 64},
      {1, 1000, 8, 1, 128},
      {1, 1031, 4, 4, 128},
      /* d = 128 edges of the wgmma kernels: one token; one row past a tile */
      {1, 1, 2, 1, 128},
      {3, 129, 6, 3, 128}};
  uint64_t seed = 1000;
  /* PLATEAU_TEST_SMALL=1: only the small shapes (for compute-sanitizer) */
  const int small = getenv("PLATEAU_TEST_SMALL") != NULL;
  for (size_t i = 0; i < sizeof shp / sizeof shp[0]; i++)
    if (!small || shp[i][1] <= 400)
      ok &= check_shape(shp[i][0], shp[i][1], shp[i][2], shp[i][3], shp[i][4], 1, seed += 10);
  /* MMA vs SIMPLE only (the CPU would take minutes) */
  if (!small) {
    ok &= check_shape(1, 4100, 8, 1, 128, 0, seed += 10);
    ok &= check_shape(1, 4100, 8, 8, 64, 0, seed += 10);
    ok &= check_shape(1, 8192, 16, 2, 128, 0, seed += 10);
  }
  ck_assert_msg(ok, "attention CUDA mismatch (see the lines above)");
  teardown();
#endif
}
END_TEST

#if PL_HAVE_CUDA
typedef struct tctx {
  pl_attn_shape sh;
  bufs g;
} tctx;

static double time_ms(tctx *t, int bwd, int iters) {
  pl_event *e0, *e1;
  ck_assert_int_eq(pl_event_create(gpu, &e0), PL_OK);
  ck_assert_int_eq(pl_event_create(gpu, &e1), PL_OK);
  double best = 1e30;
  for (int it = 0; it < iters + 1; it++) {
    ck_assert_int_eq(pl_event_record(e0, gs), PL_OK);
    pl_status s = bwd ? pl_attn_bwd(gs, &t->sh, t->g.q, t->g.k, t->g.v, t->g.o, t->g.dout, t->g.lse,
                                    t->g.dq, t->g.dk, t->g.dv)
                      : pl_attn_fwd(gs, &t->sh, t->g.q, t->g.k, t->g.v, t->g.o, t->g.lse);
    ck_assert_msg(s == PL_OK, "%s", pl_last_error());
    ck_assert_int_eq(pl_event_record(e1, gs), PL_OK);
    ck_assert_int_eq(pl_event_sync(e1), PL_OK);
    float ms = 0;
    ck_assert_int_eq(pl_event_elapsed_ms(e0, e1, &ms), PL_OK);
    if (it > 0 && ms < best) best = ms; /* first run warms up */
  }
  pl_event_destroy(e0);
  pl_event_destroy(e1);
  return best;
}
#endif

#if PL_HAVE_CUDA
/* one timing line of a wgmma kernel: pass fwd or bwd, ms, its FLOPs, the
 * variant (what1 what2) */
static void print_wgmma_tflops(const pl_attn_shape *sh, const char *pass, double ms, double flops,
                               const char *what1, const char *what2) {
  printf("# tflops wgmma  S=%-6lld n_q=%d n_kv=%d d=%d  %s %8.3f ms %7.1f TFLOP/s (%s%s)\n",
         (long long)sh->seq, sh->n_q, sh->n_kv, sh->head_dim, pass, ms, flops / ms * 1e-9, what1,
         what2);
  fflush(stdout);
}
#endif

START_TEST(cuda_tflops) {
  if (pl_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return;
  }
  if (getenv("PLATEAU_TEST_SMALL")) {
    printf("skipped: PLATEAU_TEST_SMALL\n");
    return;
  }
#if PL_HAVE_CUDA
  setup();
  static const int shp[][4] = {{8192, 16, 2, 128}, {16384, 16, 2, 128}, {16384, 16, 2, 64}};
  for (int i = 0; i < 3; i++) {
    tctx t;
    memset(&t, 0, sizeof t);
    t.sh = (pl_attn_shape){.batch = 1,
                           .seq = shp[i][0],
                           .n_q = shp[i][1],
                           .n_kv = shp[i][2],
                           .head_dim = shp[i][3],
                           .dtype = PL_BF16};
    const size_t nqe = (size_t)t.sh.seq * t.sh.n_q * t.sh.head_dim,
                 nke = (size_t)t.sh.seq * t.sh.n_kv * t.sh.head_dim,
                 nr = (size_t)t.sh.seq * t.sh.n_q;
    bufs_alloc(gpu, &t.g, nqe, nke, nr);
    pl_rng_fill(gs, t.g.q, PL_BF16, nqe, 1, 0, PL_DIST_NORMAL, 0.f, 1.f);
    pl_rng_fill(gs, t.g.k, PL_BF16, nke, 2, 0, PL_DIST_NORMAL, 0.f, 1.f);
    pl_rng_fill(gs, t.g.v, PL_BF16, nke, 3, 0, PL_DIST_NORMAL, 0.f, 1.f);
    pl_rng_fill(gs, t.g.dout, PL_BF16, nqe, 4, 0, PL_DIST_NORMAL, 0.f, 1.f);
    const double ff = pl_attn_flops_fwd(&t.sh), fb = pl_attn_flops_bwd(&t.sh);
    for (int a = PL_ATTN_SIMPLE; a <= PL_ATTN_WGMMA; a++) {
      t.sh.algo = (pl_attn_algo)a;
      if (a == PL_ATTN_WGMMA) { /* d = 128: forward (each V path), backward
                                   (each variant) */
        if (t.sh.head_dim != 128) continue;
        env_sweep wp;
        env_sweep_begin(&wp, "PLATEAU_ATTN_WGMMA_V", wgmma_v_all);
        for (int vp = 0; vp < wp.n; vp++) {
          const char *vn = env_sweep_set(&wp, vp);
          pl_status ws = pl_attn_fwd(gs, &t.sh, t.g.q, t.g.k, t.g.v, t.g.o, t.g.lse);
          if (ws == PL_OK) ws = pl_stream_sync(gs);
          if (ws != PL_OK) {
            printf("# tflops wgmma (V path %s): %s\n", vn, pl_last_error());
            if (ws == PL_EUNSUPPORTED) break;
            continue;
          }
          print_wgmma_tflops(&t.sh, "fwd", time_ms(&t, 0, 5), ff, "V path ", vn);
        }
        env_sweep_end(&wp);
        /* the wgmma backward, each variant (its O and LSE: the last forward's)
         */
        env_sweep bw, bs2;
        env_sweep_begin(&bw, "PLATEAU_ATTN_WGMMA_BWD", wgmma_bwd_all);
        env_sweep_begin(&bs2, "PLATEAU_ATTN_WGMMA_SYNC", wgmma_sync_all);
        for (int bv = 0; bv < bw.n * bs2.n; bv++) {
          const char *sn = env_sweep_set(&bs2, bv % bs2.n);
          const char *bn = env_sweep_set(&bw, bv / bs2.n);
          char label[32];
          snprintf(label, sizeof label, "%s, %s barrier(s)", bn, sn);
          pl_status bs = pl_attn_bwd(gs, &t.sh, t.g.q, t.g.k, t.g.v, t.g.o, t.g.dout, t.g.lse,
                                     t.g.dq, t.g.dk, t.g.dv);
          if (bs == PL_OK) bs = pl_stream_sync(gs);
          if (bs != PL_OK) {
            printf("# tflops wgmma backward %s: %s\n", bn, pl_last_error());
            break;
          }
          print_wgmma_tflops(&t.sh, "bwd", time_ms(&t, 1, 5), fb, "", label);
        }
        env_sweep_end(&bs2);
        env_sweep_end(&bw);
        continue;
      }
      const int iters = a == PL_ATTN_SIMPLE ? 1 : 5;
      double mf = time_ms(&t, 0, iters), mb = time_ms(&t, 1, iters);
      printf("# tflops %-6s S=%-6lld n_q=%d n_kv=%d d=%d  fwd %8.3f ms %7.1f "
             "TFLOP/s   bwd %8.3f ms "
             "%7.1f TFLOP/s\n",
             a == PL_ATTN_SIMPLE ? "simple" : "mma", (long long)t.sh.seq, t.sh.n_q, t.sh.n_kv,
             t.sh.head_dim, mf, ff / mf * 1e-9, mb, fb / mb * 1e-9);
      fflush(stdout);
    }
    bufs_free(gpu, &t.g);
  }
  teardown();
#endif
}
END_TEST

int main(void) {
  const TTest *tests[] = {cuda_vs_cpu_and_simple, cuda_tflops, NULL};
  return pl_check_suite("attention_cuda", 900, tests, NULL, NULL, CK_NOFORK, 0) ? 1 : 0;
}
