/* test_mpi_describe.c — the description of a rank's memory
 * (train/describe.h) against the trainer's tracked allocations, CPU backend,
 * under mpirun -np 1..4, and the step's bounds through the allocator's tags:
 *  - right after pl_trainer_create, every state tag's tracked bytes equal
 *    the description's (device: weights, grads, optim_staging, optim_norm,
 *    optim_shadow, tokens, ce_state; pinned host: optim, optim_norm,
 *    boundary, optim_hybrid) — f32 and bf16, ring and fused heads, stream and
 *    hybrid optimizers, SCO budgets 0 / one boundary / all, dense layers, a
 *    virtual world (the one-GPU proxy);
 *  - after steps, each bounded tag's peak is within its bound: dispatch <=
 *    2·Ep·k·c_eff·H·b (pipelined_llep with a hot expert and several chunks),
 *    boundaries on the device <= 2·N·H·b + (L − |S|)·N·H·b, zero3 <= two
 *    gathered units, zero3_grads, the runner's buffers, the head's strips
 *    and ring buffers, optimizer staging <= s·β·16; with expert groups
 *    (Ep < W_v, also in a proxy) the expert units' shards as states and
 *    one gathered expert unit more under zero3, the group's dispatch bound;
 *  - the assertion can fail: llep under the same hot routing exceeds the
 *    pipelined bound;
 *  - the proxy runs steps with its real per-rank shapes (E/W_v experts per
 *    layer) and refuses to gather full tensors. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "train/data.h"
#include "train/describe.h"
#include "train/epgroups.h"
#include "train/trainer_testlib.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

static tt_cfg base(void) {
  tt_cfg c = tt_cfg_tiny();
  c.m.E = 24;
  c.lc = (pl_layout_cfg){1, size, 0, 0, 0};
  c.sc.moe_lanes = 0;
  c.sc.oo.bucket = 5000;
  c.sc.oo.slots = 3;
  c.S = 24;
  return c;
}

static void states_equal(const tt_cfg *c, pl_trainer *t,
                         const pl_train_desc *d) {
  static const char *const dtags[] = {
      "weights",      "grads",  "optim_staging", "optim_norm",
      "optim_shadow", "tokens", "ce_state",      NULL};
  static const char *const htags[] = {"optim", "optim_norm", "boundary",
                                      "optim_hybrid", NULL};
  for (int i = 0; dtags[i]; i++)
    ck_assert_msg(pl_mem_tag_current(dev, PL_ARENA_DEVICE, dtags[i]) ==
                      pl_train_desc_state(d, dtags[i], PL_ARENA_DEVICE),
                  "device %s: tracked %zu, described %zu", dtags[i],
                  pl_mem_tag_current(dev, PL_ARENA_DEVICE, dtags[i]),
                  pl_train_desc_state(d, dtags[i], PL_ARENA_DEVICE));
  for (int i = 0; htags[i]; i++)
    ck_assert_msg(pl_mem_tag_current(dev, PL_ARENA_HOST, htags[i]) ==
                      pl_train_desc_state(d, htags[i], PL_ARENA_HOST),
                  "host %s: tracked %zu, described %zu", htags[i],
                  pl_mem_tag_current(dev, PL_ARENA_HOST, htags[i]),
                  pl_train_desc_state(d, htags[i], PL_ARENA_HOST));
  (void)c;
  (void)t;
}

/* create, compare the states, run steps, return the last step's result */
static pl_step_result run(const tt_cfg *c, int steps, int hot,
                          pl_train_desc *d) {
  ck_assert_int_eq(pl_train_describe(&c->m, &c->lc, size, rank, c->S, &c->sc,
                                     PL_BACKEND_CPU, d),
                   PL_OK);
  pl_trainer *t;
  ck_assert_msg(
      pl_trainer_create(dev, world, &c->m, &c->lc, c->S, &c->sc, &t) == PL_OK,
      "%s", pl_last_error());
  states_equal(c, t, d);
  if (hot) {
    float *bias = calloc((size_t)pl_trainer_plan(t)->E_route, 4);
    bias[0] = 10.f, bias[1] = 10.f;
    for (int l = 0; l < c->m.L; l++)
      if (pl_model_layer_is_moe(&c->m, l))
        pl_trainer_set_router_bias(t, l, bias);
    free(bias);
  }
  pl_data *data;
  ck_assert_int_eq(pl_data_synthetic(c->m.V, 9, &data), PL_OK);
  int32_t *tok = malloc((size_t)pl_trainer_tokens_per_rank(t) * 4);
  pl_step_result r;
  for (int s = 0; s < steps; s++) {
    ck_assert_int_eq(
        pl_data_batch(data, pl_trainer_plan(t), c->sc.micro, s, tok), PL_OK);
    ck_assert_msg(pl_trainer_step(t, tok, &r) == PL_OK, "%s", pl_last_error());
  }
  free(tok);
  pl_data_close(data);
  pl_trainer_destroy(t);
  return r;
}

static size_t peak(const pl_step_result *r, const char *tag) {
  for (int i = 0; i < r->dev.n_tags; i++)
    if (!strcmp(r->dev.tag_peak[i].tag, tag))
      return r->dev.tag_peak[i].bytes;
  return 0;
}

static void bounds_hold(const tt_cfg *c, const pl_step_result *r,
                        const pl_train_desc *d) {
  static const char *const tags[] = {
      "zero3", "zero3_grads", "output", "grads_act", "logits", "ring", NULL};
  for (int i = 0; tags[i]; i++)
    ck_assert_msg(peak(r, tags[i]) <=
                      pl_train_desc_bytes(d, tags[i], PL_ARENA_DEVICE),
                  "%s: peak %zu above its bound %zu", tags[i], peak(r, tags[i]),
                  pl_train_desc_bytes(d, tags[i], PL_ARENA_DEVICE));
  /* Eq. 4 */
  const size_t nhb =
      (size_t)d->plan.N * (size_t)c->m.H * pl_dtype_size(c->sc.dt);
  const size_t eq4 = 2 * nhb + (size_t)(c->m.L - r->sco_layers) * nhb;
  ck_assert_msg(peak(r, "boundary") <= eq4,
                "boundary: peak %zu above Eq. 4's %zu", peak(r, "boundary"),
                eq4);
  ck_assert_uint_eq(pl_train_desc_bytes(d, "boundary", PL_ARENA_DEVICE), eq4);
  /* two gathered units (expert groups: and one gathered expert unit) */
  size_t eu = 0;
  if (d->plan.ep_grouped) {
    size_t off[3];
    const size_t n = pl__ep_unit(c->m.H, c->m.I, d->plan.E_local, off),
                 vs = (size_t)d->plan.ep_vsize;
    eu = (n + vs - 1) / vs * vs * pl_dtype_size(c->sc.dt);
    ck_assert_msg(peak(r, "zero3") >= eu,
                  "zero3 peak %zu below one gathered expert unit %zu",
                  peak(r, "zero3"), eu);
  }
  ck_assert(peak(r, "zero3") <= 2 * d->unit_max_bytes + eu);
  /* s·β·16 */
  const size_t sb16 = (size_t)c->sc.oo.slots * c->sc.oo.bucket * 16;
  ck_assert_msg(peak(r, "optim_staging") <= sb16,
                "staging %zu above s*beta*16 = %zu", peak(r, "optim_staging"),
                sb16);
  /* a chunking dispatch's bound (the step reports the bound of its c_eff) */
  if (pl_moe_variant_desc_of(c->sc.dispatch)->chunks) {
    ck_assert_msg(peak(r, "dispatch") <= r->dispatch_bound,
                  "dispatch %zu above 2*Ep*k*c_eff*H*b %zu",
                  peak(r, "dispatch"), r->dispatch_bound);
    ck_assert_uint_eq(pl_train_desc_bytes(d, "dispatch", PL_ARENA_DEVICE),
                      r->dispatch_bound);
  }
}

START_TEST(states_and_bounds) {
  for (int v = 0; v < 8; v++) {
    tt_cfg c = base();
    if (v >= 6 && size < 2)
      continue;
    if (v == 1)
      c.sc.dt = PL_F32, c.sc.head = &pl_head_fused;
    if (v == 2)
      c.sc.optim = &pl_optim_hybrid, c.sc.oo.share = 0.5;
    if (v == 3)
      c.sc.sco =
          (pl_sco_budget){false, (uint64_t)c.S * c.m.H * 2}; /* one boundary */
    if (v == 4)
      c.sc.sco = (pl_sco_budget){true, 0}, c.m.dense_layers = 0, c.sc.micro = 2;
    if (v == 5)
      c.sc.moe_c = 5, c.sc.moe_recompute = true; /* several chunks */
    if (v == 6) /* expert groups of one rank, hot, several chunks */
      c.lc.Ep = 1, c.sc.moe_c = 5;
    if (v == 7) /* expert groups in a proxy of 2W ranks, two micro-batches */
      c.lc.Ep = size, c.lc.W_v = 2 * size, c.lc.P = 1, c.sc.micro = 2;
    pl_train_desc d;
    pl_step_result r = run(&c, 2, v == 5 || v == 6, &d);
    if (v >= 6)
      ck_assert_int_eq(d.plan.ep_grouped, 1);
    if (v == 3)
      ck_assert_int_eq(r.sco_layers, 1);
    if (v == 4)
      ck_assert_int_eq(r.sco_layers, c.m.L);
    if (v == 5)
      ck_assert_int_gt(r.moe_K, 1);
    bounds_hold(&c, &r, &d);
    if (rank == 0 && v == 0)
      pl_train_desc_print(&d, stdout);
  }
}
END_TEST

START_TEST(llep_exceeds_the_bound) {
  if (size < 2)
    return;
  /* the same hot routing: the pipelined bound holds, llep's receive does not */
  tt_cfg c = base();
  c.sc.dispatch = PL_MOE_LLEP;
  c.sc.knobs.lambda = 0, c.sc.knobs.m = 1;
  c.sc.moe_c = 5;
  pl_train_desc d;
  pl_step_result r = run(&c, 1, 1, &d);
  tt_cfg cp = c;
  cp.sc.dispatch = PL_MOE_PIPELINED;
  pl_train_desc dp;
  pl_step_result rp = run(&cp, 1, 1, &dp);
  ck_assert(peak(&rp, "dispatch") <= rp.dispatch_bound);
  int64_t over = peak(&r, "dispatch") > rp.dispatch_bound;
  ck_assert_int_eq(pl_host_allreduce_i64(world, &over, 1, PL_RED_MAX), PL_OK);
  ck_assert_msg(over, "llep stayed within the pipelined bound on every rank");
}
END_TEST

START_TEST(proxy) {
  /* each process plays one rank of a 2W-rank run */
  tt_cfg c = base();
  c.lc.W_v = 2 * size;
  c.lc.P = 1;
  pl_train_desc d;
  ck_assert_int_eq(pl_train_describe(&c.m, &c.lc, size, rank, c.S, &c.sc,
                                     PL_BACKEND_CPU, &d),
                   PL_OK);
  ck_assert_int_eq(d.plan.E_local, c.m.E / (2 * size));
  ck_assert_int_eq(d.plan.E_route, c.m.E / 2);
  pl_trainer *t;
  ck_assert_int_eq(pl_trainer_create(dev, world, &c.m, &c.lc, c.S, &c.sc, &t),
                   PL_OK);
  states_equal(&c, t, &d);
  float x[4];
  ck_assert_int_eq(pl_trainer_gather(t, 0, false, x), PL_EUNSUPPORTED);
  pl_trainer_destroy(t);
  pl_step_result r = run(&c, 2, 0, &d);
  ck_assert(r.loss > 0 && r.loss < 20);
  bounds_hold(&c, &r, &d);
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "describe", &dev, &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {states_and_bounds, llep_exceeds_the_bound, proxy,
                          NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("describe", 300, tests, rank, world));
}
