/* test_mpi_epgroups.c — expert groups smaller than the world
 * (train/epgroups.h) against Ep = W, CPU backend, f32, under mpirun -np
 * 1..4.
 *
 * For every Ep < W that divides W (np 2: 1; np 3: 1; np 4: 1, 2) two
 * trainers of the same model and layout, one with Ep = W and one with Ep,
 * run 3 steps on the same tokens; after each forward_backward the losses
 * and every parameter's gradient (gathered to the full tensor: the expert
 * tensors over the replica ranks and the group) and after each update every
 * parameter's weights and the router biases must agree to reduction-order
 * rounding: normwise max |a − b| <= tol · max |b| per tensor (gradients
 * 1e-4; weights 1e-4: AdamW divides by sqrt(v), so a gradient near zero
 * moves its weight by up to lr whatever its rounding; the loss 1e-5
 * relative), the biases exactly (integer loads).  Dispatch pipelined_llep with
 * a hot expert (LLEP spills inside the groups) and ep.  The check can fail: a
 * perturbed expert weight in the Ep trainer is caught.  The dispatch bound is
 * the group's (2·Ep·k·c·H·b).
 *
 * Layouts refused (PL_EINVAL naming the value): Ep not dividing W, Ep not
 * dividing E, Ep < 1, Ep > W_v; a proxy with Ep dividing W is accepted
 * (real groups, a virtual replica group) and one step runs. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "train/data.h"
#include "train/step.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

static pl_model_cfg model(void) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.E = 12; /* divides by 1..4 */
  return m;
}

static pl_step_cfg step_cfg(pl_moe_variant v) {
  pl_step_cfg sc = pl_step_cfg_default();
  sc.dt = PL_F32;
  sc.moe_lanes = 0;
  sc.dispatch = v;
  sc.moe_c = 8; /* K = 2 chunks of the 16 tokens */
  sc.hp.lr = 3e-3;
  return sc;
}

static pl_trainer *make(const pl_model_cfg *m, int Ep, int Wv,
                        const pl_step_cfg *sc, int hot) {
  pl_layout_cfg lc = {1, 1, Wv, Ep, 0};
  pl_trainer *t = NULL;
  const pl_status st = pl_trainer_create(dev, world, m, &lc, 16, sc, &t);
  ck_assert_msg(st == PL_OK, "trainer Ep=%d: %s", Ep, pl_last_error());
  if (hot) { /* expert 0 preferred by every token: LLEP spills */
    float *b = calloc((size_t)m->E, sizeof(float));
    b[0] = 10.0f;
    for (int l = 0; l < m->L; l++)
      if (pl_model_layer_is_moe(m, l))
        ck_assert_int_eq(pl_trainer_set_router_bias(t, l, b), PL_OK);
    free(b);
  }
  return t;
}

/* normwise error over tol · max |b|; *bad the worst index */
static double ratio(const float *a, const float *b, size_t n, double tol,
                    int64_t *bad) {
  double sc = 1e-30, me = 0;
  *bad = 0;
  for (size_t i = 0; i < n; i++)
    sc = fmax(sc, fabs(b[i]));
  for (size_t i = 0; i < n; i++) {
    const double e = fabs((double)a[i] - b[i]);
    if (!(e <= me))
      me = e, *bad = (int64_t)i;
  }
  return me / (tol * sc);
}

/* every parameter's gradient (grad) or weights of a and ref; 1 if within
 * tol on every rank */
static int same_params(pl_trainer *a, pl_trainer *ref, bool grad, double tol,
                       const char *what, int quiet) {
  int ok = 1;
  ck_assert_int_eq(pl_trainer_nparams(a), pl_trainer_nparams(ref));
  for (int i = 0; i < pl_trainer_nparams(a); i++) {
    pl_param_info in, ir;
    ck_assert_int_eq(pl_trainer_param_info(a, i, &in), PL_OK);
    ck_assert_int_eq(pl_trainer_param_info(ref, i, &ir), PL_OK);
    ck_assert_str_eq(in.name, ir.name);
    const size_t n = (size_t)(in.rows * in.cols);
    float *x = malloc(n * 4), *y = malloc(n * 4);
    ck_assert_msg(pl_trainer_gather(a, i, grad, x) == PL_OK, "%s",
                  pl_last_error());
    ck_assert_int_eq(pl_trainer_gather(ref, i, grad, y), PL_OK);
    int64_t bad;
    const double r = ratio(x, y, n, tol, &bad);
    if (r > 1) {
      ok = 0;
      if (!quiet && rank == 0)
        fprintf(stderr,
                "%s: %s of %s off by %.3g x tolerance at %lld (%g vs %g)\n",
                what, grad ? "gradient" : "weights", in.name, r, (long long)bad,
                x[bad], y[bad]);
    }
    free(x), free(y);
  }
  int64_t all = ok;
  ck_assert_int_eq(pl_host_allreduce_i64(world, &all, 1, PL_RED_MIN), PL_OK);
  return (int)all;
}

/* 3 steps of Ep and of Ep = W on the same tokens; 1 if they agree. */
static int run_pair(int Ep, pl_moe_variant v, int hot, int perturb,
                    const char *what) {
  const pl_model_cfg m = model();
  const pl_step_cfg sc = step_cfg(v);
  pl_trainer *a = make(&m, Ep, 0, &sc, hot), *ref = make(&m, 0, 0, &sc, hot);
  const pl_layout_plan *p = pl_trainer_plan(a);
  ck_assert_int_eq(p->Ep, Ep);
  ck_assert_int_eq(p->ep_grouped, 1);
  ck_assert_int_eq(p->E_local, m.E / Ep);
  ck_assert_int_eq(pl_trainer_plan(ref)->ep_grouped, 0);
  if (perturb) { /* one expert weight of layer 1 (a MoE layer) */
    int pi = -1;
    for (int i = 0; i < pl_trainer_nparams(a) && pi < 0; i++) {
      pl_param_info in;
      ck_assert_int_eq(pl_trainer_param_info(a, i, &in), PL_OK);
      if (strstr(in.name, "experts.wd"))
        pi = i;
    }
    ck_assert_int_ge(pi, 0);
    pl_param_info in;
    ck_assert_int_eq(pl_trainer_param_info(a, pi, &in), PL_OK);
    float *w = malloc((size_t)(in.rows * in.cols) * 4);
    ck_assert_int_eq(pl_trainer_gather(a, pi, false, w), PL_OK);
    for (int64_t i = 0; i < in.rows * in.cols; i += 7)
      w[i] += 0.05f;
    ck_assert_int_eq(pl_trainer_set(a, pi, w), PL_OK);
    free(w);
  }
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(m.V, 11, &d), PL_OK);
  int32_t *tok = malloc((size_t)pl_trainer_tokens_per_rank(a) * 4);
  int ok = 1;
  for (int s = 0; s < 3 && ok; s++) {
    ck_assert_int_eq(pl_data_batch(d, p, sc.micro, s, tok), PL_OK);
    pl_step_result ra, rr;
    ck_assert_msg(pl_trainer_forward_backward(a, tok, &ra) == PL_OK, "%s",
                  pl_last_error());
    ck_assert_int_eq(pl_trainer_forward_backward(ref, tok, &rr), PL_OK);
    if (!(fabs(ra.loss - rr.loss) <= 1e-5 * fabs(rr.loss))) {
      ok = 0;
      if (!perturb && rank == 0)
        fprintf(stderr, "%s step %d: loss %.9g vs Ep=W %.9g\n", what, s + 1,
                ra.loss, rr.loss);
    }
    /* the group's dispatch bound */
    if (v == PL_MOE_PIPELINED && s == 0) {
      const size_t want = (size_t)2 * Ep * m.k * 8 * m.H * 4;
      ck_assert_msg(ra.dispatch_bound == want,
                    "%s: dispatch bound %zu, want 2·Ep·k·c·H·b = %zu", what,
                    ra.dispatch_bound, want);
      for (int i = 0; i < ra.dev.n_tags; i++)
        if (!strcmp(ra.dev.tag_peak[i].tag, "dispatch"))
          ck_assert_uint_le(ra.dev.tag_peak[i].bytes, want);
    }
    if (hot && v != PL_MOE_EP && Ep > 1 && s == 0 && !perturb)
      ck_assert_msg(ra.moe_spilled > 0, "%s: a hot expert must spill", what);
    ok = ok && same_params(a, ref, true, 1e-4, what, perturb);
    ck_assert_int_eq(pl_trainer_update(a, &ra), PL_OK);
    ck_assert_int_eq(pl_trainer_update(ref, &rr), PL_OK);
    ok = ok && same_params(a, ref, false, 1e-4, what, perturb);
    for (int l = 0; l < m.L && ok; l++) {
      const float *ba = pl_trainer_router_bias(a, l),
                  *br = pl_trainer_router_bias(ref, l);
      if (ba)
        ck_assert_msg(!memcmp(ba, br, (size_t)m.E * 4),
                      "%s: router bias of layer %d differs", what, l);
    }
  }
  int64_t all = ok;
  ck_assert_int_eq(pl_host_allreduce_i64(world, &all, 1, PL_RED_MIN), PL_OK);
  free(tok);
  pl_data_close(d);
  pl_trainer_destroy(a);
  pl_trainer_destroy(ref);
  return (int)all;
}

START_TEST(equal_to_world_groups) {
  int ran = 0;
  for (int Ep = 1; Ep < size; Ep++) {
    if (size % Ep)
      continue;
    const struct {
      pl_moe_variant v;
      int hot;
      const char *name;
    } cases[] = {{PL_MOE_PIPELINED, 1, "pllep, hot expert"},
                 {PL_MOE_EP, 0, "ep"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      char what[96];
      snprintf(what, sizeof what, "W=%d Ep=%d %s", size, Ep, cases[c].name);
      ck_assert_msg(run_pair(Ep, cases[c].v, cases[c].hot, 0, what),
                    "%s: differs from Ep = W", what);
      if (rank == 0)
        printf("  %s: losses, gradients, weights, biases equal over 3 "
               "steps\n",
               what);
      ran++;
    }
  }
  if (rank == 0 && !ran)
    printf("  W=%d: no expert group smaller than the world\n", size);
}
END_TEST

START_TEST(perturbed_expert_fails) {
  if (size < 2)
    return;
  ck_assert_msg(!run_pair(1, PL_MOE_PIPELINED, 0, 1, "perturbed"),
                "a perturbed expert weight went unnoticed");
}
END_TEST

/* pl_layout_plan_make refuses naming the value */
static void refused(const pl_model_cfg *m, int W, int Wv, int Ep,
                    const char *want) {
  pl_layout_plan p;
  const pl_layout_cfg lc = {1, 1, Wv, Ep, 0};
  ck_assert_int_eq(pl_layout_plan_make(m, &lc, W, 0, 64, &p), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), want), "'%s' does not name '%s'",
                pl_last_error(), want);
}

START_TEST(bad_values_refused) {
  pl_model_cfg m = model();
  refused(&m, 4, 0, 3, "Ep=3");   /* does not divide W */
  refused(&m, 4, 0, -1, "Ep=-1"); /* < 1 */
  refused(&m, 4, 0, 8, "Ep=8");   /* > W_v */
  refused(&m, 2, 8, 3, "Ep=3");   /* neither present ranks nor virtual */
  m.E = 6;
  refused(&m, 8, 0, 4, "Ep=4"); /* does not divide E = 6 */
  /* accepted: a proxy with real groups */
  pl_layout_plan p;
  m = model();
  const pl_layout_cfg lc = {1, 1, 8, 2, 0};
  ck_assert_int_eq(pl_layout_plan_make(&m, &lc, 2, 1, 64, &p), PL_OK);
  ck_assert_int_eq(p.ep_grouped, 1);
  ck_assert_int_eq(p.E_local, 6);
  ck_assert_int_eq(p.E_moe, 12);
  ck_assert_int_eq(p.ep_vsize, 4);
  ck_assert_int_eq(p.ep_rank, 1);
  /* a proxy's group of absent members: virtual, the rank its member 0 */
  const pl_layout_cfg lv = {1, 1, 8, 4, 0};
  ck_assert_int_eq(pl_layout_plan_make(&m, &lv, 2, 1, 64, &p), PL_OK);
  ck_assert_int_eq(p.ep_grouped, 1);
  ck_assert_int_eq(p.e_virtual, 1);
  ck_assert_int_eq(p.ep_rank, 0);
  ck_assert_int_eq(p.ep_group, 1);
  ck_assert_int_eq(p.ep_vsize, 2);
  ck_assert_int_eq(p.E_local, 3);
  /* Ep = W_v is the default layout */
  m.E = 16;
  const pl_layout_cfg lw = {1, 1, 8, 8, 0};
  ck_assert_int_eq(pl_layout_plan_make(&m, &lw, 2, 1, 64, &p), PL_OK);
  ck_assert_int_eq(p.ep_grouped, 0);
  ck_assert_int_eq(p.E_local, 2);
}
END_TEST

START_TEST(proxy_runs) {
  /* W_v = 4W, groups of the W present ranks: one step runs */
  const pl_model_cfg m = model();
  const pl_step_cfg sc = step_cfg(PL_MOE_PIPELINED);
  pl_trainer *t = make(&m, size, 4 * size, &sc, 0);
  const pl_layout_plan *p = pl_trainer_plan(t);
  ck_assert_int_eq(p->ep_grouped, 1);
  ck_assert_int_eq(p->ep_vsize, 4);
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(m.V, 11, &d), PL_OK);
  int32_t *tok = malloc((size_t)pl_trainer_tokens_per_rank(t) * 4);
  ck_assert_int_eq(pl_data_batch(d, p, sc.micro, 0, tok), PL_OK);
  pl_step_result r;
  ck_assert_msg(pl_trainer_step(t, tok, &r) == PL_OK, "%s", pl_last_error());
  ck_assert(isfinite(r.loss));
  free(tok);
  pl_data_close(d);
  pl_trainer_destroy(t);
}
END_TEST

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK)
    return 2;
  if (pl_dev_create(PL_BACKEND_CPU, 0, &dev) != PL_OK ||
      pl_comm_world(dev, &world) != PL_OK) {
    fprintf(stderr, "epgroups test setup: %s\n", pl_last_error());
    return 3;
  }
  rank = pl_comm_rank(world);
  size = pl_comm_size(world);
  const TTest *tests[] = {equal_to_world_groups, perturbed_expert_fails,
                          bad_values_refused, proxy_runs, NULL};
  const int nf = pl_check_run("epgroups", 300, tests, rank, world);
  pl_comm_destroy(world);
  pl_dev_destroy(dev);
  pl_finalize();
  return nf ? 1 : 0;
}
