/* test_attention_cuda.c — every CUDA attention kernel the engine ships,
 * chosen through the shape's pl_attn_kernels, against the SIMPLE kernels (the
 * device reference) on the same inputs, and SIMPLE and MMA against the CPU
 * reference (bf16; pl_rng_fill gives the same bits on both backends) at
 * sizes the CPU runs in seconds.  The choices: MMA forward and backward;
 * with d = 128 the wgmma forward, the wgmma (bulk) backward and the split
 * backward (whose dQ must also be bit-identical run to run); AUTO, which must
 * report and run what it resolves to.  Each backward runs on SIMPLE's O and
 * LSE, so its dQ, dK, dV compare with SIMPLE's on equal inputs.  Prints max
 * abs / normwise error of every output, and TFLOP/s of every choice (causal:
 * fwd = 4·S²·d·n_q/2, bwd = 2.5×; also MMA and wgmma with the full mask at
 * 16K, ring attention's block length at 128K and CP 4: fwd = 4·S²·d·n_q).  A
 * mismatch or an error fails the test; a build without sm_90a code
 * (PL_EUNSUPPORTED for the wgmma kinds) only says so.  The full mask
 * (PL_ATTN_FULL): SIMPLE, MMA, with d = 128 the wgmma forward and bulk
 * backward, and AUTO against the CPU reference, AUTO reporting and running what
 * the causal shape would (the split backward is causal only: that choice is
 * refused). Without a GPU it prints "skipped: no CUDA device" and passes.  No
 * fork: a CUDA context must not be inherited (CK_NOFORK). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/attention_cudnn.h"
#include "core/check_run.h"
#include "core/internal.h"
#include "model/attention.h"
#include "model/attention_testutil.h"

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
  for (int i = 0; i < 9; i++)
    pl_free(d, ps[i]);
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

static void outs_get(outs *h, const bufs *g, size_t nqe, size_t nke,
                     size_t nr) {
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

static int cmp(const char *tag, const char *what, const void *got, pl_dtype dt,
               const void *ref, pl_dtype rdt, size_t n, double tol) {
  double *r = tu_to_f64(ref, rdt, n);
  attn_err e = tu_compare(got, dt, r, n, tol);
  free(r);
  printf("#   %-8s %-3s max_abs %.3e normwise %.3e (tol %.1e)%s", tag, what,
         e.max_abs, e.norm_err, tol, e.first_bad < 0 ? "\n" : "");
  if (e.first_bad >= 0)
    printf("  FIRST BAD INDEX %ld\n", e.first_bad);
  return e.first_bad < 0;
}

/* The kernel choices swept against SIMPLE; wg: needs d = 128 and sm_90a
 * device code; dnn: needs a cuDNN build.  AUTO's names depend on d, the
 * build and whether cuDNN takes the shape (checked apart). */
typedef struct choice {
  pl_attn_kernels k;
  const char *fwd, *bwd; /* what pl_attn_fwd_kernel / _bwd_kernel must say */
  int wg, dnn;
} choice;
static const choice choices[] = {
    {{PL_ATTN_FWD_MMA, PL_ATTN_BWD_MMA}, "mma", "mma", 0, 0},
    {{PL_ATTN_FWD_WGMMA, PL_ATTN_BWD_WGMMA}, "wgmma/ovtma", "wgmma/bulk", 1, 0},
    {{PL_ATTN_FWD_WGMMA, PL_ATTN_BWD_SPLIT},
     "wgmma/ovtma",
     "wgmma/split",
     1,
     0},
    {{PL_ATTN_FWD_CUDNN, PL_ATTN_BWD_CUDNN}, "cudnn", "cudnn", 0, 1},
    {{PL_ATTN_FWD_AUTO, PL_ATTN_BWD_AUTO}, NULL, NULL, 0, 0},
};

/* 1 when cuDNN takes sh forward and backward on the GPU (its plans build) */
static int cudnn_takes(const pl_attn_shape *sh) {
  const int ok = pl__cudnn_attn_ready(gs, sh, 0) == PL_OK &&
                 pl__cudnn_attn_ready(gs, sh, 1) == PL_OK;
  if (!ok && PL_HAVE_CUDNN)
    printf("#   cuDNN refuses the shape: %s\n", pl_last_error());
  pl_clear_error();
  return ok;
}

/* The names AUTO must report for sh: cuDNN's where it takes the shape, else
 * the wgmma kernels for d = 128 when built, else MMA. */
static void auto_names(const pl_attn_shape *sh, int wg_avail, int dnn,
                       const char **f, const char **b) {
  *f = dnn ? "cudnn" : sh->head_dim == 128 && wg_avail ? "wgmma/ovtma" : "mma";
  *b = dnn ? "cudnn" : sh->head_dim == 128 && wg_avail ? "wgmma/bulk" : "mma";
}
#define NCHOICE (sizeof choices / sizeof choices[0])

/* run one choice on the GPU: poison, fwd, bwd; PL_OK or the first error */
static pl_status gpu_run(const pl_attn_shape *sh, bufs *g, size_t nqe,
                         size_t nke, size_t nr) {
  ck_assert_int_eq(pl_fill(gs, g->o, PL_BF16, nqe, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->lse, PL_F32, nr, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->dq, PL_BF16, nqe, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->dk, PL_BF16, nke, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->dv, PL_BF16, nke, NAN), PL_OK);
  pl_status s = pl_attn_fwd(gs, sh, g->q, g->k, g->v, g->o, g->lse);
  if (s == PL_OK)
    s = pl_attn_bwd(gs, sh, g->q, g->k, g->v, g->o, g->dout, g->lse, g->dq,
                    g->dk, g->dv);
  if (s == PL_OK)
    s = pl_stream_sync(gs);
  return s;
}

/* the backward of sh again on the reference's O and LSE (host copies in ref) */
static pl_status gpu_bwd_on(const pl_attn_shape *sh, bufs *g, const outs *ref,
                            size_t nqe, size_t nke, size_t nr) {
  ck_assert_int_eq(pl_memcpy_async(gs, g->o, ref->o, nqe * 2), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(gs, g->lse, ref->lse, nr * 4), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->dq, PL_BF16, nqe, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->dk, PL_BF16, nke, NAN), PL_OK);
  ck_assert_int_eq(pl_fill(gs, g->dv, PL_BF16, nke, NAN), PL_OK);
  pl_status s = pl_attn_bwd(gs, sh, g->q, g->k, g->v, g->o, g->dout, g->lse,
                            g->dq, g->dk, g->dv);
  if (s == PL_OK)
    s = pl_stream_sync(gs);
  return s;
}

static int cmp_all(const char *tag, const outs *got, const outs *ref,
                   size_t nqe, size_t nke, size_t nr, int fwd, int bwd) {
  const double to = 2.5e-2, tg = 4e-2;
  int ok = 1;
  if (fwd) {
    ok &= cmp(tag, "O", got->o, PL_BF16, ref->o, PL_BF16, nqe, to);
    ok &= cmp(tag, "LSE", got->lse, PL_F32, ref->lse, PL_F32, nr, 1e-3);
  }
  if (bwd) {
    ok &= cmp(tag, "dQ", got->dq, PL_BF16, ref->dq, PL_BF16, nqe, tg);
    ok &= cmp(tag, "dK", got->dk, PL_BF16, ref->dk, PL_BF16, nke, tg);
    ok &= cmp(tag, "dV", got->dv, PL_BF16, ref->dv, PL_BF16, nke, tg);
  }
  return ok;
}

/* The four inputs of one shape, drawn on the GPU. */
static void fill_inputs(bufs *g, size_t nqe, size_t nke, uint64_t seed) {
  ck_assert_int_eq(
      pl_rng_fill(gs, g->q, PL_BF16, nqe, seed, 0, PL_DIST_NORMAL, 0.f, 1.5f),
      PL_OK);
  ck_assert_int_eq(pl_rng_fill(gs, g->k, PL_BF16, nke, seed + 1, 0,
                               PL_DIST_NORMAL, 0.f, 1.5f),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(gs, g->v, PL_BF16, nke, seed + 2, 0,
                               PL_DIST_NORMAL, 0.f, 1.f),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(gs, g->dout, PL_BF16, nqe, seed + 3, 0,
                               PL_DIST_NORMAL, 0.f, 1.f),
                   PL_OK);
}

/* SIMPLE's outputs hs and MMA's hm (its backward on its own forward's O and
 * LSE, as the CPU's) against the CPU reference on the same inputs. */
static int against_cpu(pl_attn_shape sh, const bufs *g, const outs *hs,
                       const outs *hm, size_t nqe, size_t nke, size_t nr) {
  int ok = 1;
  bufs c;
  bufs_alloc(cpu, &c, nqe, nke, nr);
  d2h(c.q, g->q, nqe * 2);
  d2h(c.k, g->k, nke * 2);
  d2h(c.v, g->v, nke * 2);
  d2h(c.dout, g->dout, nqe * 2);
  sh.kernels = (pl_attn_kernels){PL_ATTN_FWD_AUTO, PL_ATTN_BWD_AUTO};
  ck_assert_int_eq(pl_attn_fwd(cs, &sh, c.q, c.k, c.v, c.o, c.lse), PL_OK);
  ck_assert_int_eq(
      pl_attn_bwd(cs, &sh, c.q, c.k, c.v, c.o, c.dout, c.lse, c.dq, c.dk, c.dv),
      PL_OK);
  const outs co = {c.o, c.dq, c.dk, c.dv, c.lse};
  printf("#   simple vs cpu:\n");
  ok &= cmp_all("simple/cpu", hs, &co, nqe, nke, nr, 1, 1);
  if (hm->o) {
    printf("#   mma vs cpu:\n");
    ok &= cmp_all("mma/cpu", hm, &co, nqe, nke, nr, 1, 1);
  } else {
    ok = 0;
  }
  bufs_free(cpu, &c);
  return ok;
}

/* One shape: inputs drawn on the GPU; SIMPLE, then every choice on the GPU
 * against it; SIMPLE and MMA against the CPU reference when with_cpu (inputs
 * copied down). */
static int check_shape(int64_t B, int64_t S, int nq, int nkv, int d,
                       int with_cpu, uint64_t seed) {
  pl_attn_shape sh = {.batch = B,
                      .seq = S,
                      .n_q = nq,
                      .n_kv = nkv,
                      .head_dim = d,
                      .dtype = PL_BF16};
  const size_t nqe = (size_t)(B * S * nq * d), nke = (size_t)(B * S * nkv * d),
               nr = (size_t)(B * nq * S);
  printf("# shape B=%lld S=%lld n_q=%d n_kv=%d d=%d\n", (long long)B,
         (long long)S, nq, nkv, d);
  bufs g;
  bufs_alloc(gpu, &g, nqe, nke, nr);
  fill_inputs(&g, nqe, nke, seed);
  int ok = 1;
  outs hs, hm = {NULL, NULL, NULL, NULL, NULL};
  sh.kernels = (pl_attn_kernels){PL_ATTN_FWD_SIMPLE, PL_ATTN_BWD_SIMPLE};
  ck_assert_str_eq(pl_attn_fwd_kernel(gs, &sh), "simple");
  ck_assert_str_eq(pl_attn_bwd_kernel(gs, &sh), "simple");
  pl_status st = gpu_run(&sh, &g, nqe, nke, nr);
  ck_assert_msg(st == PL_OK, "simple: %s", pl_last_error());
  outs_get(&hs, &g, nqe, nke, nr);
  int wg_avail = d == 128; /* until a wgmma kind says PL_EUNSUPPORTED */
  const int dnn = cudnn_takes(&sh);
  /* cuDNN must take every shape of a few thousand tokens and more */
  if (PL_HAVE_CUDNN && S >= 1000 && !dnn)
    ok = 0;
  for (size_t c = 0; c < NCHOICE; c++) {
    const choice *ch = &choices[c];
    if (ch->wg && !wg_avail)
      continue;
    if (ch->dnn && !dnn)
      continue;
    sh.kernels = ch->k;
    const char *fn = pl_attn_fwd_kernel(gs, &sh),
               *bn = pl_attn_bwd_kernel(gs, &sh);
    char tag[40];
    snprintf(tag, sizeof tag, "%s+%s", fn, bn);
    st = gpu_run(&sh, &g, nqe, nke, nr);
    if (st == PL_EUNSUPPORTED &&
        ch->wg) { /* no sm_90a code: the same for every wgmma kind */
      printf(
          "#   %s: %s (build without sm_90a code: wgmma kinds not checked)\n",
          tag, pl_last_error());
      wg_avail = 0;
      continue;
    }
    if (st != PL_OK) {
      printf("#   %s: %s: %s\n", tag, pl_strerror(st), pl_last_error());
      ok = 0;
      continue;
    }
    /* what runs is what the names say (AUTO: the wgmma kernels for d = 128
     * when they are built, else MMA) */
    const char *wf = ch->fwd, *wb = ch->bwd;
    if (!wf)
      auto_names(&sh, wg_avail, dnn, &wf, &wb);
    if (strcmp(fn, wf) || strcmp(bn, wb)) {
      printf("#   KERNEL NAMES %s+%s, expected %s+%s\n", fn, bn, wf, wb);
      ok = 0;
    }
    outs hf, h;
    outs_get(&hf, &g, nqe, nke,
             nr); /* forward, and backward on its own O, LSE */
    printf("#   %s forward vs simple:\n", tag);
    int cok = cmp_all(tag, &hf, &hs, nqe, nke, nr, 1, 0);
    if (ch->k.fwd == PL_ATTN_FWD_MMA) /* MMA's, for the CPU check */
      hm = hf;
    else
      outs_free(&hf);
    st = gpu_bwd_on(&sh, &g, &hs, nqe, nke, nr);
    ck_assert_msg(st == PL_OK, "%s bwd: %s", tag, pl_last_error());
    outs_get(&h, &g, nqe, nke, nr);
    printf("#   %s backward (on simple's O, LSE) vs simple:\n", tag);
    cok &= cmp_all(tag, &h, &hs, nqe, nke, nr, 0, 1);
    if (ch->k.bwd == PL_ATTN_BWD_SPLIT) { /* bit-reproducible dQ, dK, dV */
      outs h2;
      ck_assert_int_eq(gpu_bwd_on(&sh, &g, &hs, nqe, nke, nr), PL_OK);
      outs_get(&h2, &g, nqe, nke, nr);
      const int same = !memcmp(h.dq, h2.dq, nqe * 2) &&
                       !memcmp(h.dk, h2.dk, nke * 2) &&
                       !memcmp(h.dv, h2.dv, nke * 2);
      printf("#   %s backward run twice: %s\n", tag,
             same ? "bit-identical" : "DIFFERENT BITS");
      cok &= same;
      outs_free(&h2);
    }
    outs_free(&h);
    if (!cok)
      printf("#   MISMATCH: %s\n", tag);
    ok &= cok;
  }
  if (with_cpu)
    ok &= against_cpu(sh, &g, &hs, &hm, nqe, nke, nr);
  outs_free(&hs);
  outs_free(&hm);
  bufs_free(gpu, &g);
  fflush(stdout);
  return ok;
}

/* One shape with the full mask: SIMPLE, MMA, WGMMA (d = 128) and AUTO
 * (WGMMA for d = 128 when the build has sm_90a code, else MMA) against the
 * CPU reference; SPLIT refused. */
static int check_full(int64_t B, int64_t S, int nq, int nkv, int d,
                      uint64_t seed) {
  pl_attn_shape sh = {.batch = B,
                      .seq = S,
                      .n_q = nq,
                      .n_kv = nkv,
                      .head_dim = d,
                      .dtype = PL_BF16,
                      .mask = PL_ATTN_FULL};
  const size_t nqe = (size_t)(B * S * nq * d), nke = (size_t)(B * S * nkv * d),
               nr = (size_t)(B * nq * S);
  printf("# full mask B=%lld S=%lld n_q=%d n_kv=%d d=%d\n", (long long)B,
         (long long)S, nq, nkv, d);
  bufs g, c;
  bufs_alloc(gpu, &g, nqe, nke, nr);
  bufs_alloc(cpu, &c, nqe, nke, nr);
  ck_assert_int_eq(
      pl_rng_fill(gs, g.q, PL_BF16, nqe, seed, 0, PL_DIST_NORMAL, 0.f, 1.5f),
      PL_OK);
  ck_assert_int_eq(pl_rng_fill(gs, g.k, PL_BF16, nke, seed + 1, 0,
                               PL_DIST_NORMAL, 0.f, 1.5f),
                   PL_OK);
  ck_assert_int_eq(
      pl_rng_fill(gs, g.v, PL_BF16, nke, seed + 2, 0, PL_DIST_NORMAL, 0.f, 1.f),
      PL_OK);
  ck_assert_int_eq(pl_rng_fill(gs, g.dout, PL_BF16, nqe, seed + 3, 0,
                               PL_DIST_NORMAL, 0.f, 1.f),
                   PL_OK);
  d2h(c.q, g.q, nqe * 2);
  d2h(c.k, g.k, nke * 2);
  d2h(c.v, g.v, nke * 2);
  d2h(c.dout, g.dout, nqe * 2);
  ck_assert_int_eq(pl_attn_fwd(cs, &sh, c.q, c.k, c.v, c.o, c.lse), PL_OK);
  ck_assert_int_eq(
      pl_attn_bwd(cs, &sh, c.q, c.k, c.v, c.o, c.dout, c.lse, c.dq, c.dk, c.dv),
      PL_OK);
  const outs co = {c.o, c.dq, c.dk, c.dv, c.lse};
  static const struct {
    pl_attn_kernels k;
    const char *tag, *fwd, *bwd; /* the names; NULL: AUTO's (below) */
    int wg, dnn;
  } ks[] = {
      {{PL_ATTN_FWD_SIMPLE, PL_ATTN_BWD_SIMPLE},
       "simple",
       "simple",
       "simple",
       0,
       0},
      {{PL_ATTN_FWD_MMA, PL_ATTN_BWD_MMA}, "mma", "mma", "mma", 0, 0},
      {{PL_ATTN_FWD_WGMMA, PL_ATTN_BWD_WGMMA},
       "wgmma",
       "wgmma/ovtma",
       "wgmma/bulk",
       1,
       0},
      {{PL_ATTN_FWD_CUDNN, PL_ATTN_BWD_CUDNN}, "cudnn", "cudnn", "cudnn", 0, 1},
      {{PL_ATTN_FWD_AUTO, PL_ATTN_BWD_AUTO}, "auto", NULL, NULL, 0, 0}};
  int ok = 1,
      wg_avail = d == 128; /* until the wgmma kinds say PL_EUNSUPPORTED */
  const int dnn = cudnn_takes(&sh);
  if (PL_HAVE_CUDNN && S >= 500 && !dnn)
    ok = 0;
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    if (ks[i].wg && !wg_avail)
      continue;
    if (ks[i].dnn && !dnn)
      continue;
    sh.kernels = ks[i].k;
    const char *fn = pl_attn_fwd_kernel(gs, &sh),
               *bn = pl_attn_bwd_kernel(gs, &sh);
    pl_status st = gpu_run(&sh, &g, nqe, nke, nr);
    if (st == PL_EUNSUPPORTED && ks[i].wg) { /* no sm_90a code */
      printf("#   wgmma/full: %s (build without sm_90a code: not checked)\n",
             pl_last_error());
      pl_clear_error();
      wg_avail = 0;
      continue;
    }
    ck_assert_msg(st == PL_OK, "full mask %s: %s", ks[i].tag, pl_last_error());
    const char *wf = ks[i].fwd, *wb = ks[i].bwd;
    if (!wf)
      auto_names(&sh, wg_avail, dnn, &wf, &wb);
    if (strcmp(fn, wf) || strcmp(bn, wb)) {
      printf("#   KERNEL NAMES %s+%s, expected %s+%s\n", fn, bn, wf, wb);
      ok = 0;
    }
    outs h;
    outs_get(&h, &g, nqe, nke, nr);
    char tag[40];
    snprintf(tag, sizeof tag, "%s/full", ks[i].tag);
    ok &= cmp_all(tag, &h, &co, nqe, nke, nr, 1, 1);
    outs_free(&h);
  }
  sh.kernels = (pl_attn_kernels){PL_ATTN_FWD_AUTO, PL_ATTN_BWD_SPLIT};
  ok &= pl_attn_check(&sh, PL_BACKEND_CUDA) == PL_EUNSUPPORTED;
  pl_clear_error();
  bufs_free(cpu, &c);
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
      ok &= check_shape(shp[i][0], shp[i][1], shp[i][2], shp[i][3], shp[i][4],
                        1, seed += 10);
  /* against SIMPLE only (the CPU would take minutes) */
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

START_TEST(cuda_full_mask) {
  if (pl_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return;
  }
#if PL_HAVE_CUDA
  setup();
  /* d = 128 edges of the wgmma kernels: one token, a tile plus one key, a
   * whole number of tiles (ring attention's blocks), GQA 8 */
  static const int shp[][5] = {{1, 1, 4, 4, 64},     {2, 77, 8, 1, 64},
                               {1, 200, 8, 2, 128},  {1, 333, 4, 4, 64},
                               {1, 1031, 4, 2, 128}, {1, 1, 2, 1, 128},
                               {3, 129, 6, 3, 128},  {1, 512, 8, 1, 128}};
  int ok = 1;
  for (size_t i = 0; i < sizeof shp / sizeof shp[0]; i++)
    ok &= check_full(shp[i][0], shp[i][1], shp[i][2], shp[i][3], shp[i][4],
                     5000 + 10 * i);
  ck_assert_msg(ok, "attention CUDA full-mask mismatch (see the lines above)");
  teardown();
#endif
}
END_TEST

/* cuDNN's workspaces at the shapes the grid runs: the backward's is the
 * bytes pl_attn_bwd_workspace_bytes tells the planner, to the byte (so the
 * plan's attention term is cuDNN's; a cuDNN version that asks otherwise
 * fails here), the forward's at most 256 bytes (a transient the plan leaves
 * out).  Plans only: nothing of the shapes' size is allocated. */
START_TEST(cuda_cudnn_workspace) {
  if (pl_cuda_device_count() == 0 || !PL_HAVE_CUDNN) {
    printf("skipped: %s\n",
           PL_HAVE_CUDNN ? "no CUDA device" : "no cuDNN in this build");
    return;
  }
#if PL_HAVE_CUDA
  setup();
  /* B, S, n_q, n_kv, d, full: Ulysses groups of the 1M points (8, 16, 32
   * ranks: 8, 4, 2 query heads, the key/value head replicated past n_kv),
   * 128K and 32K whole, ring attention's blocks (S/CP, full and causal) */
  static const int64_t shp[][6] = {
      {1, 1 << 20, 8, 1, 128, 0},  {1, 1 << 20, 4, 1, 128, 0},
      {1, 1 << 20, 2, 1, 128, 0},  {1, 1 << 17, 64, 8, 128, 0},
      {1, 1 << 15, 64, 8, 128, 0}, {1, 1 << 15, 64, 8, 128, 1},
      {1, 1 << 16, 64, 8, 128, 1}, {1, 4096, 64, 8, 128, 0},
      {2, 1000, 8, 2, 64, 0},      {1, 129, 6, 3, 128, 1}};
  int ok = 1;
  for (size_t i = 0; i < sizeof shp / sizeof shp[0]; i++) {
    pl_attn_shape sh = {.batch = shp[i][0],
                        .seq = shp[i][1],
                        .n_q = (int)shp[i][2],
                        .n_kv = (int)shp[i][3],
                        .head_dim = (int)shp[i][4],
                        .dtype = PL_BF16,
                        .mask = shp[i][5] ? PL_ATTN_FULL : PL_ATTN_CAUSAL};
    const int takes = cudnn_takes(&sh);
    const size_t nf = pl__cudnn_attn_need(gs, &sh, 0),
                 nb = pl__cudnn_attn_need(gs, &sh, 1),
                 ours = pl_attn_bwd_workspace_bytes(&sh, PL_BACKEND_CUDA);
    const int good = takes && nf <= 256 && nb == ours;
    printf("# cudnn workspace B=%lld S=%lld n_q=%d n_kv=%d d=%d %s: fwd %zu, "
           "bwd %zu "
           "(planned %zu, %+.3f%%)%s\n",
           (long long)sh.batch, (long long)sh.seq, sh.n_q, sh.n_kv, sh.head_dim,
           sh.mask == PL_ATTN_FULL ? "full" : "causal", nf, nb, ours,
           ours ? 100.0 * ((double)nb - (double)ours) / (double)ours : 0.0,
           good ? "" : "  BAD");
    ok &= good;
  }
  fflush(stdout);
  ck_assert_msg(ok,
                "cuDNN workspace beyond the plan's attention term (see above)");
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
    pl_status s =
        bwd ? pl_attn_bwd(gs, &t->sh, t->g.q, t->g.k, t->g.v, t->g.o, t->g.dout,
                          t->g.lse, t->g.dq, t->g.dk, t->g.dv)
            : pl_attn_fwd(gs, &t->sh, t->g.q, t->g.k, t->g.v, t->g.o, t->g.lse);
    ck_assert_msg(s == PL_OK, "%s", pl_last_error());
    ck_assert_int_eq(pl_event_record(e1, gs), PL_OK);
    ck_assert_int_eq(pl_event_sync(e1), PL_OK);
    float ms = 0;
    ck_assert_int_eq(pl_event_elapsed_ms(e0, e1, &ms), PL_OK);
    if (it > 0 && ms < best)
      best = ms; /* first run warms up */
  }
  pl_event_destroy(e0);
  pl_event_destroy(e1);
  return best;
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
  /* SIMPLE (one timed run: slow), then every swept choice but AUTO */
  static const pl_attn_kernels timed[] = {
      {PL_ATTN_FWD_SIMPLE, PL_ATTN_BWD_SIMPLE},
      {PL_ATTN_FWD_MMA, PL_ATTN_BWD_MMA},
      {PL_ATTN_FWD_WGMMA, PL_ATTN_BWD_WGMMA},
      {PL_ATTN_FWD_WGMMA, PL_ATTN_BWD_SPLIT},
      {PL_ATTN_FWD_CUDNN, PL_ATTN_BWD_CUDNN}};
  /* S, n_q, n_kv, d, full mask (ring attention's block at 128K, CP 4: the
   * full-mask kernels side by side; SIMPLE not timed there) */
  static const int shp[][5] = {{8192, 16, 2, 128, 0},
                               {16384, 16, 2, 128, 0},
                               {16384, 16, 2, 64, 0},
                               {16384, 16, 2, 128, 1}};
  for (size_t i = 0; i < sizeof shp / sizeof shp[0]; i++) {
    tctx t;
    memset(&t, 0, sizeof t);
    t.sh = (pl_attn_shape){.batch = 1,
                           .seq = shp[i][0],
                           .n_q = shp[i][1],
                           .n_kv = shp[i][2],
                           .head_dim = shp[i][3],
                           .dtype = PL_BF16,
                           .mask = shp[i][4] ? PL_ATTN_FULL : PL_ATTN_CAUSAL};
    const size_t nqe = (size_t)t.sh.seq * t.sh.n_q * t.sh.head_dim,
                 nke = (size_t)t.sh.seq * t.sh.n_kv * t.sh.head_dim,
                 nr = (size_t)t.sh.seq * t.sh.n_q;
    bufs_alloc(gpu, &t.g, nqe, nke, nr);
    pl_rng_fill(gs, t.g.q, PL_BF16, nqe, 1, 0, PL_DIST_NORMAL, 0.f, 1.f);
    pl_rng_fill(gs, t.g.k, PL_BF16, nke, 2, 0, PL_DIST_NORMAL, 0.f, 1.f);
    pl_rng_fill(gs, t.g.v, PL_BF16, nke, 3, 0, PL_DIST_NORMAL, 0.f, 1.f);
    pl_rng_fill(gs, t.g.dout, PL_BF16, nqe, 4, 0, PL_DIST_NORMAL, 0.f, 1.f);
    const double ff = pl_attn_flops_fwd(&t.sh), fb = pl_attn_flops_bwd(&t.sh);
    for (size_t c = shp[i][4] ? 1 : 0; c < sizeof timed / sizeof timed[0];
         c++) {
      t.sh.kernels = timed[c];
      /* wgmma kinds: d = 128 only; split: causal only */
      if (pl_attn_check(&t.sh, PL_BACKEND_CUDA) != PL_OK) {
        pl_clear_error();
        continue;
      }
      pl_status st =
          pl_attn_fwd(gs, &t.sh, t.g.q, t.g.k, t.g.v, t.g.o, t.g.lse);
      if (st == PL_OK)
        st = pl_stream_sync(gs);
      if (st != PL_OK) { /* a build without sm_90a code: the wgmma kinds */
        printf("# tflops %s: %s\n", pl_attn_fwd_kernel(gs, &t.sh),
               pl_last_error());
        continue;
      }
      const int iters = c == 0 ? 1 : 5;
      const double mf = time_ms(&t, 0, iters), mb = time_ms(&t, 1, iters);
      char name[48];
      snprintf(name, sizeof name, "%s+%s", pl_attn_fwd_kernel(gs, &t.sh),
               pl_attn_bwd_kernel(gs, &t.sh));
      printf("# tflops %-22s S=%-6lld n_q=%d n_kv=%d d=%d %-6s fwd %8.3f ms "
             "%7.1f TFLOP/s   "
             "bwd %8.3f ms %7.1f TFLOP/s\n",
             name, (long long)t.sh.seq, t.sh.n_q, t.sh.n_kv, t.sh.head_dim,
             shp[i][4] ? "full" : "causal", mf, ff / mf * 1e-9, mb,
             fb / mb * 1e-9);
      fflush(stdout);
    }
    bufs_free(gpu, &t.g);
  }
  teardown();
#endif
}
END_TEST

int main(void) {
  const TTest *tests[] = {cuda_vs_cpu_and_simple, cuda_full_mask,
                          cuda_cudnn_workspace, cuda_tflops, NULL};
  return pl_check_suite("attention_cuda", 900, tests, NULL, NULL, CK_NOFORK, 0)
             ? 1
             : 0;
}
