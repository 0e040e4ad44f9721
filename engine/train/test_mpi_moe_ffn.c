/* test_mpi_moe_ffn.c — the MoE FFN sublayer (model/moe_ffn.h) on the CPU
 * backend, f32, under mpirun -np 1..4 with the EP group = all ranks and
 * uneven token counts per rank:
 *  (1) directional finite differences of the global L = Σ_ranks Σ y ⊙ g along
 *      random directions of x, W_r, W_up, W_down, w_n and the local experts'
 *      W_g, against the analytic backward (summed over ranks), for the ep
 *      and pipelined_llep dispatches — the router's gradient included (a
 *      direction that flips a top-k choice is rejected by a check that the
 *      selection did not change);
 *  (2) keep_ctx and recompute give bit-identical dx and weight gradients;
 *  (3) the dense form (E = 0) against the layer's own dense MLP block
 *      (model/mlp_block.h) with the same weights, bit for bit;
 *  (4) the decoder layer with the MoE FFN in its slot runs in the
 *      checkpoint runner and equals the hand-chained layer bit for bit;
 *  (5) a device memory limit on one rank, at every size from the first
 *      allocation on: forward and backward (kept context and recomputed)
 *      return on every rank well before the collectives' watchdog, the
 *      failing rank with its own PL_ENOMEM and every other rank that fails
 *      with a message naming another rank; nothing leaks. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "model/moe_ffn.h"
#include "model/router.h"
#include "train/ckpt.h"

static pl_dev *dev;
static pl_comm *world;
static pl_comm *ep; /* the rigs' EP group: world, or a copy of it */
static int rank, size;

enum { H = 16, E = 12, K = 3, I = 8, IS = 8 };

static float *F(size_t n) {
  void *p = NULL;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, n * 4 + 4, "test", &p),
                   PL_OK);
  return p;
}
static void rnd(float *p, size_t n, uint64_t seed, float std) {
  ck_assert_int_eq(pl_rng_fill(pl_dev_stream(dev), p, PL_F32, n, seed, 0,
                               PL_DIST_NORMAL, 0, std),
                   PL_OK);
}

/* One FFN with all its buffers. */
typedef struct rig {
  pl_moe *moe;
  pl_moe_ffn f;
  int El;
  int64_t N;
  float *x, *g, *y, *dx;
  float *bias;
} rig;

static void rig_init(rig *r, pl_moe_variant v, bool keep, uint64_t seed) {
  memset(r, 0, sizeof *r);
  pl_moe_cfg mc = pl_moe_cfg_default();
  mc.H = H, mc.I = I, mc.E = E, mc.k = K, mc.dt = PL_F32, mc.variant = v;
  mc.c = 3, mc.K_max = 4;              /* several chunks at N ~ 10 */
  mc.knobs.m = 1, mc.knobs.lambda = 0; /* plan always, small pieces allowed */
  mc.lanes = 0;
  ck_assert_int_eq(pl_moe_create(ep ? ep : world, &mc, &r->moe), PL_OK);
  pl_moe_ffn_cfg fc = {.H = H,
                       .dt = PL_F32,
                       .E = E,
                       .k = K,
                       .renorm = 1,
                       .I_s = IS,
                       .keep_ctx = keep};
  ck_assert_int_eq(pl_moe_ffn_init(dev, &r->f, &fc, r->moe), PL_OK);
  r->El = E / size;
  r->N = 7 + 2 * rank;
  pl_moe_ffn *f = &r->f;
  f->w_n = F(H), f->w_r = F(H * E), f->w_up = F(H * 2 * IS),
  f->w_down = F(IS * H);
  f->g_n = F(H), f->g_r = F(H * E), f->g_up = F(H * 2 * IS),
  f->g_down = F(IS * H);
  const size_t ne = (size_t)r->El * H * I;
  f->ew.wg = F(ne), f->ew.wu = F(ne), f->ew.wd = F(ne);
  f->eg.wg = F(ne), f->eg.wu = F(ne), f->eg.wd = F(ne);
  r->bias = F(E);
  /* weights identical on every rank (same seed), experts by rank */
  ck_assert_int_eq(pl_rng_fill(pl_dev_stream(dev), f->w_n, PL_F32, H, seed, 0,
                               PL_DIST_UNIFORM, 0.8f, 1.2f),
                   PL_OK);
  rnd(f->w_r, H * E, seed + 1, 1.0f);
  rnd(f->w_up, H * 2 * IS, seed + 2, 0.3f);
  rnd(f->w_down, IS * H, seed + 3, 0.3f);
  rnd(f->ew.wg, ne, seed + 10 + rank, 0.3f);
  rnd(f->ew.wu, ne, seed + 20 + rank, 0.3f);
  rnd(f->ew.wd, ne, seed + 30 + rank, 0.3f);
  rnd(r->bias, E, seed + 4, 0.05f);
  f->bias = r->bias;
  r->x = F(r->N * H), r->g = F(r->N * H), r->y = F(r->N * H),
  r->dx = F(r->N * H);
  rnd(r->x, r->N * H, seed + 100 + rank, 1.0f);
  rnd(r->g, r->N * H, seed + 200 + rank, 1.0f);
}

static void zero_grads(rig *r) {
  pl_moe_ffn *f = &r->f;
  const size_t ne = (size_t)r->El * H * I;
  memset(f->g_n, 0, H * 4), memset(f->g_r, 0, H * E * 4);
  memset(f->g_up, 0, H * 2 * IS * 4), memset(f->g_down, 0, IS * H * 4);
  memset(f->eg.wg, 0, ne * 4), memset(f->eg.wu, 0, ne * 4),
      memset(f->eg.wd, 0, ne * 4);
}

static void rig_free(rig *r) {
  pl_moe_ffn *f = &r->f;
  void *ps[] = {f->w_n,   f->w_r,   f->w_up,   f->w_down, f->g_n,
                f->g_r,   f->g_up,  f->g_down, f->ew.wg,  f->ew.wu,
                f->ew.wd, f->eg.wg, f->eg.wu,  f->eg.wd,  r->bias,
                r->x,     r->g,     r->y,      r->dx};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free(dev, ps[i]);
  pl_moe_ffn_free(f);
  pl_moe_destroy(r->moe);
}

/* global loss and this rank's routes (to detect selection changes) */
static double loss(rig *r, int32_t *routes) {
  ck_assert_int_eq(
      pl_moe_ffn_forward(&r->f, pl_dev_stream(dev), r->x, r->y, r->N), PL_OK);
  double L = 0;
  for (int64_t i = 0; i < r->N * H; i++)
    L += (double)r->y[i] * r->g[i];
  ck_assert_int_eq(pl_host_allreduce_f64(world, &L, 1, PL_RED_SUM), PL_OK);
  pl_moe_ctx_free(r->f.ctx);
  r->f.ctx = NULL;
  (void)routes;
  return L;
}

/* Σ_ranks grad·u for a buffer p (n floats, this rank's) along u. */
static void dir_check(rig *r, float *p, const float *grad, size_t n,
                      uint64_t seed, const char *what) {
  float *u = F(n), *p0 = F(n);
  rnd(u, n, seed + rank, 1.0f);
  memcpy(p0, p, n * 4);
  double an = 0;
  for (size_t i = 0; i < n; i++)
    an += (double)grad[i] * u[i];
  ck_assert_int_eq(pl_host_allreduce_f64(world, &an, 1, PL_RED_SUM), PL_OK);
  const int64_t before[E] = {0};
  (void)before;
  /* small step: the routes must not change between the two evaluations */
  const double eps = 2e-3;
  int64_t c0[E], c1[E];
  for (size_t i = 0; i < n; i++)
    p[i] = p0[i] + (float)eps * u[i];
  memset(r->f.counts, 0, sizeof c0);
  const double lp = loss(r, NULL);
  memcpy(c0, r->f.counts, sizeof c0);
  for (size_t i = 0; i < n; i++)
    p[i] = p0[i] - (float)eps * u[i];
  memset(r->f.counts, 0, sizeof c1);
  const double lm = loss(r, NULL);
  memcpy(c1, r->f.counts, sizeof c1);
  memcpy(p, p0, n * 4);
  int64_t same = memcmp(c0, c1, sizeof c0) == 0;
  ck_assert_int_eq(pl_host_allreduce_i64(world, &same, 1, PL_RED_MIN), PL_OK);
  ck_assert_msg(
      same, "%s: the step changed a route selection; pick another seed", what);
  const double fd = (lp - lm) / (2 * eps);
  ck_assert_msg(fabs(fd - an) <= 1e-2 * fabs(an) + 2e-3,
                "%s: FD %.6g vs analytic %.6g", what, fd, an);
  pl_free(dev, u);
  pl_free(dev, p0);
}

static void fd_for(pl_moe_variant v) {
  rig r;
  rig_init(&r, v, true, 77);
  pl_stream *s = pl_dev_stream(dev);
  zero_grads(&r);
  ck_assert_int_eq(pl_moe_ffn_forward(&r.f, s, r.x, r.y, r.N), PL_OK);
  ck_assert_int_eq(pl_moe_ffn_backward(&r.f, s, r.x, r.g, r.dx, r.N), PL_OK);
  pl_moe_ffn *f = &r.f;
  const size_t ne = (size_t)r.El * H * I;
  dir_check(&r, r.x, r.dx, (size_t)(r.N * H), 11, "x");
  dir_check(&r, f->w_r, f->g_r, H * E, 12, "W_r");
  dir_check(&r, f->w_up, f->g_up, H * 2 * IS, 13, "W_up");
  dir_check(&r, f->w_down, f->g_down, IS * H, 14, "W_down");
  dir_check(&r, f->w_n, f->g_n, H, 15, "w_n");
  dir_check(&r, f->ew.wg, f->eg.wg, ne, 16, "experts W_g");
  dir_check(&r, f->ew.wd, f->eg.wd, ne, 17, "experts W_d");
  rig_free(&r);
}

START_TEST(fd_ep) {
  fd_for(PL_MOE_EP);
}
END_TEST
START_TEST(fd_pllep) {
  fd_for(PL_MOE_PIPELINED);
}
END_TEST

START_TEST(keep_equals_recompute) {
  rig a, b;
  rig_init(&a, PL_MOE_PIPELINED, true, 91);
  rig_init(&b, PL_MOE_PIPELINED, false, 91);
  pl_stream *s = pl_dev_stream(dev);
  rig *rs[2] = {&a, &b};
  for (int i = 0; i < 2; i++) {
    zero_grads(rs[i]);
    ck_assert_int_eq(
        pl_moe_ffn_forward(&rs[i]->f, s, rs[i]->x, rs[i]->y, rs[i]->N), PL_OK);
    ck_assert(i == 0 ? rs[i]->f.ctx != NULL : rs[i]->f.ctx == NULL);
    ck_assert_int_eq(pl_moe_ffn_backward(&rs[i]->f, s, rs[i]->x, rs[i]->g,
                                         rs[i]->dx, rs[i]->N),
                     PL_OK);
  }
  const size_t ne = (size_t)a.El * H * I;
  ck_assert(memcmp(a.y, b.y, (size_t)(a.N * H) * 4) == 0);
  ck_assert(memcmp(a.dx, b.dx, (size_t)(a.N * H) * 4) == 0);
  ck_assert(memcmp(a.f.g_r, b.f.g_r, H * E * 4) == 0);
  ck_assert(memcmp(a.f.g_n, b.f.g_n, H * 4) == 0);
  ck_assert(memcmp(a.f.eg.wu, b.f.eg.wu, ne * 4) == 0);
  ck_assert(memcmp(a.f.counts, b.f.counts, E * sizeof(int64_t)) == 0);
  rig_free(&a);
  rig_free(&b);
}
END_TEST

START_TEST(dense_equals_mlp_block) {
  if (rank)
    return;
  pl_stream *s = pl_dev_stream(dev);
  enum { ID = 24 };
  const int64_t N = 11;
  pl_mlp_block b;
  ck_assert_int_eq(pl_mlp_block_init(dev, &b, H, ID, PL_F32, 5, 0), PL_OK);
  pl_moe_ffn f;
  pl_moe_ffn_cfg fc = {.H = H, .dt = PL_F32, .E = 0, .I_s = ID};
  ck_assert_int_eq(pl_moe_ffn_init(dev, &f, &fc, NULL), PL_OK);
  f.w_n = b.w_norm, f.w_up = b.w_up, f.w_down = b.w_down;
  f.g_n = F(H), f.g_up = F(H * 2 * ID), f.g_down = F(ID * H);
  memset(f.g_n, 0, H * 4), memset(f.g_up, 0, H * 2 * ID * 4),
      memset(f.g_down, 0, ID * H * 4);
  float *x = F(N * H), *g = F(N * H), *y0 = F(N * H), *y1 = F(N * H),
        *d0 = F(N * H), *d1 = F(N * H);
  rnd(x, N * H, 1, 1.f), rnd(g, N * H, 2, 1.f);
  ck_assert_int_eq(pl_mlp_block_forward(&b, s, x, y0, N), PL_OK);
  ck_assert_int_eq(pl_mlp_block_backward(&b, s, x, g, d0, N), PL_OK);
  ck_assert_int_eq(pl_moe_ffn_forward(&f, s, x, y1, N), PL_OK);
  ck_assert_int_eq(pl_moe_ffn_backward(&f, s, x, g, d1, N), PL_OK);
  ck_assert(memcmp(y0, y1, N * H * 4) == 0);
  ck_assert(memcmp(d0, d1, N * H * 4) == 0);
  ck_assert(memcmp(b.g_up, f.g_up, H * 2 * ID * 4) == 0);
  ck_assert(memcmp(b.g_down, f.g_down, ID * H * 4) == 0);
  ck_assert(memcmp(b.g_norm, f.g_n, H * 4) == 0);
  void *ps[] = {f.g_n, f.g_up, f.g_down, x, g, y0, y1, d0, d1};
  for (int i = 0; i < 9; i++)
    pl_free(dev, ps[i]);
  pl_moe_ffn_free(&f);
  pl_mlp_block_free(&b);
}
END_TEST

/* the decoder layer with the MoE FFN in its slot, two layers in the
 * checkpoint runner against the hand chain */
START_TEST(layer_slot_in_runner) {
  pl_stream *s = pl_dev_stream(dev);
  rig r[2];
  rig_init(&r[0], PL_MOE_PIPELINED, true, 31);
  rig_init(&r[1], PL_MOE_PIPELINED, false, 41);
  const pl_layer_cfg lc = {.H = H,
                           .I = 1,
                           .n_q = 4,
                           .n_kv = 2,
                           .d = 4,
                           .rope_theta = 1e4,
                           .dt = PL_F32};
  pl_layer l[2];
  float *w[2][3], *gw[2][3];
  const size_t nw[3] = {H, H * (4 + 4) * 4, 4 * 4 * H};
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(
        pl_layer_init_views(dev, NULL, &l[i], &lc, &pl_moe_ffn_ops, &r[i].f),
        PL_OK);
    for (int j = 0; j < 3; j++) {
      w[i][j] = F(nw[j]), gw[i][j] = F(nw[j]);
      rnd(w[i][j], nw[j], 500 + 10 * i + j, 0.3f);
      memset(gw[i][j], 0, nw[j] * 4);
    }
    l[i].w_n = w[i][0], l[i].w_qkv = w[i][1], l[i].w_o = w[i][2];
    l[i].g_n = gw[i][0], l[i].g_qkv = gw[i][1], l[i].g_o = gw[i][2];
    zero_grads(&r[i]);
  }
  const int64_t N = r[0].N;
  void *const layers[2] = {&l[0], &l[1]};
  pl_ckpt_stack *st;
  ck_assert_int_eq(
      pl_ckpt_create(dev, 2, layers, &pl_decoder_layer_ops, H, PL_F32, &st),
      PL_OK);
  float *dx = F(N * H), *h1 = F(N * H), *h2 = F(N * H), *dh1 = F(N * H),
        *dxm = F(N * H);
  double L = 0;
  ck_assert_int_eq(pl_ckpt_step(st, NULL, r[0].x, r[0].g, dx, N, &L), PL_OK);
  float *gq = F(nw[1]), *ge = F((size_t)r[0].El * H * I);
  memcpy(gq, gw[0][1], nw[1] * 4);
  memcpy(ge, r[0].f.eg.wg, (size_t)r[0].El * H * I * 4);
  memset(gw[0][1], 0, nw[1] * 4);
  zero_grads(&r[0]);
  ck_assert_int_eq(pl_layer_forward(&l[0], s, r[0].x, h1, N), PL_OK);
  ck_assert_int_eq(pl_layer_forward(&l[1], s, h1, h2, N), PL_OK);
  ck_assert_int_eq(pl_layer_backward(&l[1], s, h1, r[0].g, dh1, N), PL_OK);
  ck_assert_int_eq(pl_layer_backward(&l[0], s, r[0].x, dh1, dxm, N), PL_OK);
  ck_assert(memcmp(dx, dxm, N * H * 4) == 0);
  ck_assert(memcmp(gq, gw[0][1], nw[1] * 4) == 0);
  ck_assert(memcmp(ge, r[0].f.eg.wg, (size_t)r[0].El * H * I * 4) == 0);
  pl_ckpt_destroy(st);
  void *ps[] = {dx, h1, h2, dh1, dxm, gq, ge};
  for (int i = 0; i < 7; i++)
    pl_free(dev, ps[i]);
  for (int i = 0; i < 2; i++) {
    for (int j = 0; j < 3; j++)
      pl_free(dev, w[i][j]), pl_free(dev, gw[i][j]);
    pl_layer_free(&l[i]);
    rig_free(&r[i]);
  }
}
END_TEST

/* A step's router biases: two layers' counts summed over the ranks, each
 * host bias moved as pl_router_bias_update moves it on the sum, the device
 * copy equal, every count zeroed; gamma 0 only zeroes. */
START_TEST(router_bias_step_sums_over_ranks) {
  enum { E = 4, NL = 2 };
  int64_t cnt[NL][E];
  float hb[NL][E] = {{0}}, want[NL][E] = {{0}};
  float *db[NL];
  pl_router_bias_slot sl[NL];
  for (int l = 0; l < NL; l++) {
    int64_t sum[E];
    for (int e = 0; e < E; e++) {
      cnt[l][e] = (int64_t)(rank + 1) * (e == l ? 3 : e + 1);
      sum[e] = 0;
      for (int r = 0; r < size; r++)
        sum[e] += (int64_t)(r + 1) * (e == l ? 3 : e + 1);
    }
    pl_router_bias_update(want[l], sum, E, 0.25f);
    ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, E * sizeof(float), "test",
                              (void **)&db[l]),
                     PL_OK);
    sl[l] = (pl_router_bias_slot){cnt[l], hb[l], db[l]};
  }
  pl_stream *s = pl_dev_stream(dev);
  ck_assert_int_eq(pl_router_bias_step(world, s, sl, NL, E, 0.25f), PL_OK);
  for (int l = 0; l < NL; l++) {
    float back[E];
    ck_assert_int_eq(pl_memcpy_async(s, back, db[l], sizeof back), PL_OK);
    ck_assert_int_eq(pl_stream_sync(s), PL_OK);
    for (int e = 0; e < E; e++) {
      ck_assert(hb[l][e] == want[l][e]);
      ck_assert(back[e] == want[l][e]);
      ck_assert_int_eq(cnt[l][e], 0);
    }
  }
  ck_assert(hb[0][1] > 0.f && hb[0][3] < 0.f); /* the rule moved them */
  cnt[1][2] = 7;
  ck_assert_int_eq(pl_router_bias_step(world, s, sl, NL, E, 0.f), PL_OK);
  ck_assert_int_eq(cnt[1][2], 0);
  ck_assert(hb[1][0] == want[1][0]);
  for (int l = 0; l < NL; l++)
    pl_free(dev, db[l]);
}
END_TEST

/* One call of `pass` (0 forward, 1 backward) with this rank's device limit
 * `extra` bytes above what it holds (0: none); every rank's status. */
static void limited_call(rig *r, int pass, size_t extra, pl_status *mine,
                         int64_t *nfail, double *secs) {
  pl_stream *s = pl_dev_stream(dev);
  pl_mem_stats s0, s1;
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s0), PL_OK);
  if (extra)
    pl_mem_set_limit(dev, PL_ARENA_DEVICE, s0.current + extra);
  const uint64_t t0 = pl_now_ns();
  *mine = pass == 0 ? pl_moe_ffn_forward(&r->f, s, r->x, r->y, r->N)
                    : pl_moe_ffn_backward(&r->f, s, r->x, r->g, r->dx, r->N);
  *secs = pl_elapsed_s(t0);
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, 0);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  /* no leak: after a backward the context is gone; after a failed forward
   * nothing was kept */
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s1), PL_OK);
  if (*mine != PL_OK || pass == 1)
    ck_assert_uint_le(s1.current, s0.current);
  *nfail = *mine != PL_OK;
  ck_assert_int_eq(pl_host_allreduce_i64(world, nfail, 1, PL_RED_SUM), PL_OK);
}

/* The failing rank is the last; its limit runs from 1 byte (the first
 * allocation fails) up to where every call succeeds. */
static void one_rank_limited(int pass, bool keep) {
  const int bad = size - 1;
  pl_comm *c = NULL;
  ck_assert_int_eq(pl_comm_split(world, 0, rank, &c), PL_OK);
  /* a hang would end in the watchdog's abort of the job after 30 s, far
   * beyond the 5 s a call may take */
  ck_assert_int_eq(pl_comm_set_timeout(c, 30), PL_OK);
  ep = c;
  rig r;
  rig_init(&r, PL_MOE_PIPELINED, keep, 404);
  ep = NULL;
  int all_failed = 0, passed = 0;
  for (size_t extra = 1; !passed; extra = extra * 3 / 2 + 1) {
    ck_assert_uint_lt(extra, (size_t)1 << 24);
    pl_status mine;
    int64_t nfail;
    double secs;
    if (pass == 1) {
      zero_grads(&r);
      ck_assert_int_eq(
          pl_moe_ffn_forward(&r.f, pl_dev_stream(dev), r.x, r.y, r.N), PL_OK);
    }
    limited_call(&r, pass, rank == bad ? extra : 0, &mine, &nfail, &secs);
    ck_assert_msg(secs < 5, "pass %d, limit +%zu: %.1f s", pass, extra, secs);
    if (rank == bad && mine != PL_OK)
      ck_assert_msg(mine == PL_ENOMEM && !strstr(pl_last_error(), "another"),
                    "failing rank: %s (%s)", pl_strerror(mine),
                    pl_last_error());
    if (rank != bad && mine != PL_OK)
      ck_assert_msg(strstr(pl_last_error(), "another rank"), "rank %d: %s (%s)",
                    rank, pl_strerror(mine), pl_last_error());
    if (extra == 1) /* the first allocation: nobody enters the MoE layer */
      ck_assert_msg(nfail == size, "pass %d: %lld of %d ranks failed", pass,
                    (long long)nfail, size);
    if (extra == 1 && rank != bad)
      ck_assert_msg(strstr(pl_last_error(),
                           "another rank of the group failed (out of "
                           "memory) before the MoE layer's"),
                    "%s", pl_last_error());
    all_failed += nfail == size;
    passed = nfail == 0;
  }
  ck_assert_int_ge(all_failed, 1);
  rig_free(&r);
  pl_comm_destroy(c);
}

START_TEST(one_rank_oom_forward) {
  one_rank_limited(0, false);
}
END_TEST
START_TEST(one_rank_oom_backward_kept) {
  one_rank_limited(1, true);
}
END_TEST
START_TEST(one_rank_oom_backward_recomputed) {
  one_rank_limited(1, false);
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "moe ffn", &dev, &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {fd_ep,
                          fd_pllep,
                          keep_equals_recompute,
                          dense_equals_mlp_block,
                          layer_slot_in_runner,
                          router_bias_step_sums_over_ranks,
                          one_rank_oom_forward,
                          one_rank_oom_backward_kept,
                          one_rank_oom_backward_recomputed,
                          NULL};
  return pl_check_world_close(dev, world,
                              pl_check_run("moe_ffn", 300, tests, rank, world));
}
