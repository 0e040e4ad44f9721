/* plan_grid_testlib.h — the grid of small configurations the planner's
 * memory model is checked on (tiny-like models over the ranks of mpirun
 * -np 1..4: see test_mpi_plan.c for what each point exercises), shared by
 * the check against the real CPU step (test_mpi_plan.c) and the one against
 * the dry device (test_mpi_plan_dry.c).  Included by test files only. */
#ifndef PLATEAU_PLAN_PLAN_GRID_TESTLIB_H
#define PLATEAU_PLAN_PLAN_GRID_TESTLIB_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "train/data.h"

typedef struct point {
  char name[64];
  pl_model_cfg m;
  pl_plan_cfg c;
} point;

static inline point base(int size, const char *name) {
  point p;
  memset(&p, 0, sizeof p);
  snprintf(p.name, sizeof p.name, "%s", name);
  ck_assert_int_eq(pl_model_preset("tiny", &p.m), PL_OK);
  p.m.E = 12; /* divides by 1..4 ranks */
  p.c = pl_plan_cfg_plateau(size, 256);
  p.c.lc.P = size;
  p.c.sc.head = &pl_head_ring;
  p.c.sc.moe_c = 64;
  p.c.sc.moe_lanes = 0;
  p.c.sc.oo.bucket = 20000;
  p.c.sc.oo.slots = 2;
  return p;
}

/* The grid; every point valid for 1..4 ranks (D = 2 only when W is even).
 * Sized for CI: CPU steps of the MoE layer cost about one collective round
 * per chunk, so most points run a few chunks of a few hundred tokens. */
static inline int grid(int size, point *g) {
  int n = 0;
  g[n++] = base(size, "base: ring, pllep K=4");
  point p = base(size, "fused, S=512, sco 1, hybrid");
  p.c.lc.P = 1, p.c.sc.head = &pl_head_fused, p.c.S = 512;
  p.c.sc.moe_c = 256;
  p.c.sc.sco = (pl_sco_budget){false, (uint64_t)512 * p.m.H * 2};
  p.c.sc.optim = &pl_optim_hybrid, p.c.sc.oo.share = 0.5;
  g[n++] = p;
  p = base(size, "dispatch ep");
  p.c.sc.dispatch = PL_MOE_EP;
  g[n++] = p;
  p = base(size, "dispatch llep");
  p.c.sc.dispatch = PL_MOE_LLEP;
  g[n++] = p;
  p = base(size, "sco all, micro 2, K=2");
  p.c.sc.sco = (pl_sco_budget){true, 0}, p.c.sc.micro = 2;
  p.c.sc.moe_c = 128;
  g[n++] = p;
  if (size % 2 == 0) {
    p = base(size, "D=2 (Ulysses), S=512");
    p.c.lc.D = 2, p.c.S = 512, p.c.sc.moe_c = 128;
    g[n++] = p;
  }
  if (size % 2 == 0) { /* D past n_kv: the key/value head replicated */
    p = base(size, "D=2, n_kv=1 (kv replicated), S=512");
    p.c.lc.D = 2, p.c.S = 512, p.c.sc.moe_c = 128, p.m.n_kv = 1;
    g[n++] = p;
  }
  if (size == 4) {
    p = base(size, "D=4 > n_kv=2, keep attn, S=512");
    p.c.lc.D = 4, p.c.S = 512, p.c.sc.moe_c = 128;
    p.c.sc.keep = (pl_keep_budget){PL_KEEP_ATTN, 0};
    g[n++] = p;
    p = base(size, "dense, D=4 > n_kv=1, S=2048, d=64");
    p.c.lc.D = 4, p.c.S = 2048, p.m.dense_layers = p.m.L, p.m.n_kv = 1;
    p.m.d = 64, p.c.lc.P = 1, p.c.sc.head = &pl_head_fused;
    g[n++] = p;
  }
  p = base(size, "E=24, k=4, all MoE");
  p.m.E = 24, p.m.k = 4, p.m.dense_layers = 0;
  p.c.sc.moe_c = 128;
  g[n++] = p;
  p = base(size, "f32, V=509, H=96, recompute");
  p.c.sc.dt = PL_F32, p.m.V = 509, p.m.H = 96, p.c.sc.moe_recompute = true;
  g[n++] = p;
  p = base(size, "long: S=768, K=2");
  p.c.S = 768, p.c.sc.moe_c = 384;
  g[n++] = p;
  p = base(size, "proxy W_v = 2W, E=24");
  p.m.E = 24;
  p.c.lc.W_v = 2 * size, p.c.lc.P = 1, p.c.sc.head = &pl_head_fused;
  g[n++] = p;
  p = base(size, "small c: K=16");
  p.c.sc.moe_c = 16;
  g[n++] = p;
  /* the headroom knobs: optimizer state resident, kept activations */
  p = base(size, "resident half (12 B x 2 buckets)");
  p.c.sc.oo.resident_bytes = 12 * 40000;
  g[n++] = p;
  p = base(size, "resident all, keep attn");
  p.c.sc.oo.resident_all = true;
  p.c.sc.keep = (pl_keep_budget){PL_KEEP_ATTN, 0};
  g[n++] = p;
  p = base(size, "keep all, sco all, micro 2");
  p.c.sc.keep = (pl_keep_budget){PL_KEEP_ALL, 0};
  p.c.sc.sco = (pl_sco_budget){true, 0}, p.c.sc.micro = 2;
  g[n++] = p;
  p = base(size, "keep 200 KiB, hybrid, resident 1 bucket");
  p.c.sc.keep = (pl_keep_budget){PL_KEEP_BYTES, 200 * 1024};
  p.c.sc.optim = &pl_optim_hybrid, p.c.sc.oo.share = 0.5;
  p.c.sc.oo.resident_bytes = 12 * 20000;
  g[n++] = p;
  if (size % 2 == 0) {
    p = base(size, "D=2, keep attn, resident all");
    p.c.lc.D = 2, p.c.S = 512, p.c.sc.moe_c = 128;
    p.c.sc.keep = (pl_keep_budget){PL_KEEP_ATTN, 0};
    p.c.sc.oo.resident_all = true;
    g[n++] = p;
  }
  /* expert groups smaller than the world (train/epgroups.h) */
  if (size >= 2) {
    p = base(size, "Ep=1: expert units, micro 2");
    p.c.lc.Ep = 1, p.c.sc.micro = 2;
    g[n++] = p;
  }
  if (size == 4) {
    p = base(size, "Ep=2: expert units, bf16 E=24");
    p.c.lc.Ep = 2, p.m.E = 24;
    g[n++] = p;
  }
  if (size >= 2) {
    p = base(size, "Ep=W in a proxy W_v = 2W, E=24");
    p.m.E = 24;
    p.c.lc.W_v = 2 * size, p.c.lc.Ep = size, p.c.lc.P = 1;
    p.c.sc.head = &pl_head_fused;
    g[n++] = p;
  }
  return n;
}

/* steps steps of point p's trainer on dev (its world w, the synthetic token
 * stream); r holds the last step's result. */
static inline void pt_train(pl_dev *dev, pl_comm *w, const point *p, int steps,
                            pl_step_result *r) {
  pl_trainer *t = NULL;
  pl_status st =
      pl_trainer_create(dev, w, &p->m, &p->c.lc, p->c.S, &p->c.sc, &t);
  ck_assert_msg(st == PL_OK, "%s: %s", p->name, pl_last_error());
  pl_data *data;
  ck_assert_int_eq(pl_data_synthetic(p->m.V, 9, &data), PL_OK);
  int32_t *tok = malloc((size_t)pl_trainer_tokens_per_rank(t) * 4);
  ck_assert_ptr_nonnull(tok);
  for (int s = 0; s < steps; s++) {
    ck_assert_int_eq(
        pl_data_batch(data, pl_trainer_plan(t), p->c.sc.micro, s, tok), PL_OK);
    st = pl_trainer_step(t, tok, r);
    ck_assert_msg(st == PL_OK, "%s: %s", p->name, pl_last_error());
  }
  free(tok);
  pl_data_close(data);
  pl_trainer_destroy(t);
}

#endif
