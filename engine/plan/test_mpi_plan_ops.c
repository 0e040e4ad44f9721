/* test_mpi_plan_ops.c — the planner's component predictions (the peaks the
 * component benches report) against the real operators, CPU backend, under
 * mpirun -np 1..4:
 *  - one MoE layer forward + backward (ep, llep, pipelined_llep with
 *    several chunk counts; f32 and bf16) under LLEP's balanced profile
 *    (chunk counts coprime to E keep every chunk balanced): the peaks of
 *    "dispatch", "expert", "routing" and of the operator above its inputs;
 *    and under an adversarial routing (every route to expert 0, plain EP)
 *    the receiving rank's dispatch peak is the `worst` prediction;
 *  - one Ring-DTP forward + backward over all ranks (activations moving,
 *    weights moving, f32 and bf16): "logits", "ring", "grads" scratch,
 *    "ce_state" and the operator's peak;
 *  - the checkpoint runner's device boundaries under SCO budgets;
 *  - OffloadStreamAdamW's staging.
 * Each within 5% of the tracked value (all are exact on these shapes). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "model/mlp_block.h"
#include "ops/moe.h"
#include "ops/ring_dtp.h"
#include "ops/stream_adamw.h"
#include "plan/plan.h"
#include "train/ckpt.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

static void *dev_rand(size_t n, pl_dtype dt, uint64_t seed, const char *tag) {
  void *p = NULL;
  ck_assert_int_eq(
      pl_alloc(dev, PL_ARENA_DEVICE, n * pl_dtype_size(dt) + 4, tag, &p),
      PL_OK);
  ck_assert_int_eq(pl_rng_fill(pl_dev_stream(dev), p, dt, n, seed, 0,
                               PL_DIST_NORMAL, 0, 0.5f),
                   PL_OK);
  return p;
}

/* all ranks agree that got is within 5% of want (or both zero) */
static void near(const char *what, size_t got, size_t want) {
  double e = want ? fabs((double)got - (double)want) / (double)want
                  : (got ? 1.0 : 0.0);
  double all = e;
  ck_assert_int_eq(pl_host_allreduce_f64(world, &all, 1, PL_RED_MAX), PL_OK);
  ck_assert_msg(all <= 0.05,
                "%s on %d rank(s), rank %d: predicted %zu, measured %zu "
                "(%.2f%%; max over ranks %.2f%%)",
                what, size, rank, want, got, 100 * e, 100 * all);
}

/* ---- MoE ------------------------------------------------------------------
 */

typedef struct mcase {
  const char *name;
  pl_moe_variant v;
  int64_t N, c;
  pl_dtype dt;
  bool hot; /* every route to expert 0 */
} mcase;

static void moe_case(const mcase *mc) {
  pl_moe_cfg c = pl_moe_cfg_default();
  c.H = 32, c.I = 16, c.E = 12, c.k = 3, c.dt = mc->dt, c.variant = mc->v;
  c.lanes = 0;
  c.c = mc->c ? mc->c : mc->N;
  if (mc->hot)
    c.knobs.native = true;
  const int64_t N = mc->N;
  const int El = c.E / size;
  const size_t HI = (size_t)c.H * c.I;
  pl_moe *m;
  ck_assert_int_eq(pl_moe_create(world, &c, &m), PL_OK);
  pl_moe_weights W = {dev_rand(El * HI, c.dt, 1, "weights"),
                      dev_rand(El * HI, c.dt, 2, "weights"),
                      dev_rand(El * HI, c.dt, 3, "weights")};
  pl_moe_wgrads G = {dev_rand(El * HI, PL_F32, 4, "grads"),
                     dev_rand(El * HI, PL_F32, 5, "grads"),
                     dev_rand(El * HI, PL_F32, 6, "grads")};
  void *x = dev_rand((size_t)N * c.H, c.dt, 7, "act"),
       *dout = dev_rand((size_t)N * c.H, c.dt, 8, "act"),
       *out = dev_rand((size_t)N * c.H, c.dt, 9, "act"),
       *dx = dev_rand((size_t)N * c.H, c.dt, 10, "act");
  float *w = dev_rand((size_t)N * c.k, PL_F32, 11, "act"),
        *dw = dev_rand((size_t)N * c.k, PL_F32, 12, "act");
  int32_t *idx = malloc((size_t)(N * c.k + 1) * sizeof(int32_t));
  float *hw = malloc((size_t)(N * c.k + 1) * sizeof(float));
  if (mc->hot) {
    for (int64_t i = 0; i < N * c.k; i++)
      idx[i] = 0;
  } else {
    pl_route_profile p;
    ck_assert_int_eq(pl_route_profile_parse("balanced", &p), PL_OK);
    ck_assert_int_eq(pl_route_profile_fill(&p, N, c.k, c.E, 0, rank, idx, hw),
                     PL_OK);
  }
  pl_mem_stats ms;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ms);
  const size_t before = ms.current;
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  pl_moe_ctx *ctx = NULL;
  pl_moe_stats st;
  ck_assert_int_eq(pl_moe_forward(m, &W, x, N, idx, w, out, &ctx, &st), PL_OK);
  ck_assert_int_eq(pl_moe_backward(m, ctx, &W, x, w, dout, dx, dw, &G), PL_OK);
  pl_moe_ctx_free(ctx);
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ms);
  pl_plan_moe_peaks pk;
  ck_assert_int_eq(pl_plan_moe_layer(&c, size, N, true, mc->hot, &pk), PL_OK);
  ck_assert_int_eq(pk.K, st.K);
  char what[96];
  const size_t disp = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "dispatch");
  if (mc->hot) {
    /* the receiving rank (rank 0) is the worst case; the others below it */
    int64_t d[2] = {(int64_t)disp, rank == 0 ? (int64_t)disp : 0};
    ck_assert_int_eq(pl_host_allreduce_i64(world, d, 2, PL_RED_MAX), PL_OK);
    snprintf(what, sizeof what, "%s: rank 0's dispatch", mc->name);
    near(what, (size_t)d[1], pk.dispatch);
    ck_assert_msg((size_t)d[0] <= pk.dispatch, "%s: a rank above the worst",
                  mc->name);
    if (pl_moe_variant_desc_of(c.variant)->chunks)
      ck_assert((size_t)d[0] <= pl_moe_dispatch_bound(&c, size, st.c_eff));
  } else {
    snprintf(what, sizeof what, "%s: dispatch", mc->name);
    near(what, disp, pk.dispatch);
    snprintf(what, sizeof what, "%s: expert", mc->name);
    near(what, pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "expert"), pk.expert);
    snprintf(what, sizeof what, "%s: routing", mc->name);
    near(what, pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "routing"), pk.routing);
    snprintf(what, sizeof what, "%s: op peak", mc->name);
    near(what, ms.peak - before, pk.op_peak);
  }
  if (rank == 0)
    printf("  moe %-28s K=%d dispatch %zu expert %zu op %zu (predicted)\n",
           mc->name, pk.K, pk.dispatch, pk.expert, pk.op_peak);
  void *ps[] = {W.wg, W.wu, W.wd, G.wg, G.wu, G.wd, x, dout, out, dx, w, dw};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free(dev, ps[i]);
  free(idx);
  free(hw);
  pl_moe_destroy(m);
}

START_TEST(moe_layer) {
  /* N a multiple of K·E: every strided chunk is balanced */
  const mcase cs[] = {
      {"ep", PL_MOE_EP, 96, 0, PL_F32, false},
      {"llep", PL_MOE_LLEP, 96, 0, PL_BF16, false},
      {"pipelined K=5", PL_MOE_PIPELINED, 120, 24, PL_BF16, false},
      {"pipelined K=7 f32", PL_MOE_PIPELINED, 168, 24, PL_F32, false},
      {"pipelined K=1", PL_MOE_PIPELINED, 96, 0, PL_BF16, false},
      {"hot, ep (worst)", PL_MOE_EP, 48, 0, PL_BF16, true},
      {"hot, pipelined K=2 (worst)", PL_MOE_PIPELINED, 48, 24, PL_BF16, true},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
    moe_case(&cs[i]);
  /* every variant of ops/moe.h at one shape (K = 5 where it chunks) */
  for (int v = 0; v < PL_MOE_VARIANT_COUNT; v++) {
    const mcase each = {
        pl_moe_variants[v].name, (pl_moe_variant)v, 120, 24, PL_BF16, false};
    moe_case(&each);
  }
}
END_TEST

/* ---- Ring-DTP ---------------------------------------------------------------
 */

static void head_case(const char *name, pl_dtype dt, int64_t n, int64_t h,
                      int64_t v, int64_t block) {
  pl_dtp_opts o;
  pl_dtp_opts_default(&o);
  o.red = PL_CE_NONE;
  o.block = block;
  pl_dtp *d;
  ck_assert_int_eq(pl_dtp_create(world, dt, n, h, v, &o, &d), PL_OK);
  int64_t col0, vs;
  pl_dtp_shard(d, &col0, &vs);
  void *x = dev_rand((size_t)(n * h), dt, 1, "inputs"),
       *w = dev_rand((size_t)(h * vs), dt, 2, "weights"),
       *dx = dev_rand((size_t)(n * h), dt, 3, "outputs"),
       *dw = dev_rand((size_t)(h * vs), dt, 4, "outputs");
  float *loss = dev_rand((size_t)n, PL_F32, 5, "outputs"),
        *dl = dev_rand((size_t)n, PL_F32, 6, "inputs");
  int32_t *ht = malloc((size_t)(n + 1) * 4), *t = NULL;
  for (int64_t i = 0; i < n; i++)
    ht[i] = (int32_t)((i * 7 + rank) % v);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(n + 1) * 4, "inputs",
                            (void **)&t),
                   PL_OK);
  pl_stream *s = pl_dev_stream(dev);
  ck_assert_int_eq(pl_memcpy_async(s, t, ht, (size_t)n * 4), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  pl_mem_stats ms;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ms);
  const size_t before = ms.current;
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  /* what the training step runs: the three-GEMM schedule at P = 1 */
  ck_assert_int_eq(pl_dtp_run(d, s, x, t, w, dl, loss, dx, dw), PL_OK);
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ms);
  pl_plan_head_peaks pk;
  ck_assert_int_eq(pl_plan_head(dt, n, h, v, size, rank, block, &pk), PL_OK);
  if (size > 1) /* at P = 1 the mode is moot: the fused head */
    ck_assert_int_eq(pk.moves_weights, pl_dtp_mode_of(d) == PL_DTP_MOVE_W);
  char what[96];
  const char *tags[] = {"logits", "ring", "grads", "ce_state"};
  const size_t want[] = {pk.logits, pk.ring, pk.grads, pk.ce_state};
  for (int i = 0; i < 4; i++) {
    snprintf(what, sizeof what, "head %s: %s", name, tags[i]);
    near(what, pl_mem_tag_peak(dev, PL_ARENA_DEVICE, tags[i]), want[i]);
  }
  snprintf(what, sizeof what, "head %s: op peak", name);
  near(what, ms.peak - before, pk.op_peak);
  if (rank == 0)
    printf("  head %-24s logits %zu ring %zu op %zu (predicted, %s)\n", name,
           pk.logits, pk.ring, pk.op_peak,
           pk.moves_weights ? "weights move" : "activations move");
  pl_dtp_destroy(d);
  void *ps[] = {x, w, dx, dw, loss, dl, t};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free(dev, ps[i]);
  free(ht);
}

START_TEST(ring_dtp) {
  head_case("f32 act", PL_F32, 64, 32, 1000, 128);
  head_case("bf16 act", PL_BF16, 48, 32, 777, 0);
  head_case("bf16 weights", PL_BF16, 300, 32, 200, 64);
  head_case("f32 weights", PL_F32, 300, 16, 150, 0);
}
END_TEST

/* ---- SCO and the optimizer -------------------------------------------------
 */

START_TEST(sco_boundaries) {
  const int L = 5, I = 24;
  const int64_t N = 40, H = 16;
  const pl_dtype dt = PL_BF16;
  pl_mlp_block blocks[5];
  void *layers[5];
  for (int l = 0; l < L; l++) {
    ck_assert_int_eq(pl_mlp_block_init(dev, &blocks[l], H, I, dt, 9, l), PL_OK);
    layers[l] = &blocks[l];
  }
  pl_ckpt_stack *st;
  ck_assert_int_eq(
      pl_ckpt_create(dev, L, layers, &pl_mlp_block_layer_ops, H, dt, &st),
      PL_OK);
  void *x0 = dev_rand((size_t)(N * H), dt, 1, "inputs"),
       *g = dev_rand((size_t)(N * H), dt, 2, "inputs"),
       *dx0 = dev_rand((size_t)(N * H), dt, 3, "outputs");
  const size_t nhb = (size_t)(N * H) * pl_dtype_size(dt);
  const int counts[] = {0, 1, 2, L};
  for (int i = 0; i < 4; i++) {
    pl_sco *sco;
    pl_sco_budget b = {counts[i] == L, (uint64_t)counts[i] * nhb};
    ck_assert_int_eq(
        pl_sco_create(dev, world, L, N, H, dt, b, PL_SCO_RELEASE_CONTEXT, &sco),
        PL_OK);
    pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
    double loss;
    ck_assert_int_eq(pl_ckpt_step(st, sco, x0, g, dx0, N, &loss), PL_OK);
    size_t dpk, host;
    pl_plan_sco_boundaries(L, N, H, dt, counts[i], &dpk, &host);
    char what[64];
    snprintf(what, sizeof what, "sco |S|=%d: device boundary", counts[i]);
    near(what, pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "boundary"), dpk);
    snprintf(what, sizeof what, "sco |S|=%d: pinned host", counts[i]);
    near(what, pl_mem_tag_current(dev, PL_ARENA_HOST, "boundary"), host);
    ck_assert(dpk <= 2 * nhb + (size_t)(L - counts[i]) * nhb); /* Eq. 4 */
    pl_sco_destroy(sco);
  }
  pl_free(dev, x0), pl_free(dev, g), pl_free(dev, dx0);
  pl_ckpt_destroy(st);
  for (int l = 0; l < L; l++)
    pl_mlp_block_free(&blocks[l]);
}
END_TEST

START_TEST(optim_staging) {
  const size_t theta = 10000;
  void *wt = dev_rand(theta, PL_BF16, 1, "weights");
  float *gr = dev_rand(theta, PL_F32, 2, "grads");
  pl_adamw_param prm = {wt, gr, theta};
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  const size_t betas[] = {3000, 2500, 1u << 20};
  const int slots[] = {3, 2, 5};
  for (int i = 0; i < 3; i++) {
    pl_stream_adamw_cfg cfg = pl_stream_adamw_cfg_default();
    cfg.bucket = betas[i], cfg.slots = slots[i], cfg.grad_dtype = PL_F32;
    pl_stream_adamw *o;
    ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                     PL_OK);
    near("optimizer staging",
         pl_mem_tag_current(dev, PL_ARENA_DEVICE, "optim_staging"),
         pl_plan_optim_staging(theta, betas[i], slots[i], 0));
    ck_assert(pl_plan_optim_staging(theta, betas[i], slots[i], 0) <=
              (size_t)slots[i] * betas[i] * 16);
    pl_stream_adamw_destroy(o);
  }
  pl_free(dev, wt), pl_free(dev, gr);
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "plan ops", &dev, &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {moe_layer, ring_dtp, sco_boundaries, optim_staging,
                          NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("plan_ops", 300, tests, rank, world));
}
