/* test_mpi_step.c — the composed training step (train/step.h) against a
 * single-rank, unsharded reference step of the same model, CPU backend, f32,
 * under mpirun -np 1..4.
 *
 * The reference is a trainer on a communicator of one rank (D = P = 1, the
 * fused head, ep dispatch, no SCO) that runs every sequence of the step as
 * its micro-batches; the composed trainer runs the world's layout (every D
 * and P the world allows, Ulysses and Ring-DTP among them), W / D sequences
 * per micro-batch.  Sequence q of a step is window q of the synthetic token
 * stream (train/data.h); rank j of D-group g reads tokens [j·N, j·N + N] of
 * sequence mi·(W/D) + g for its micro-batch mi (pl_data_batch).
 *
 * Checked, with normwise tolerances (max |a − b| <= tol · max |b| over each
 * tensor; f32 sums in another order: 1e-4 for gradients, 1e-5 for the
 * loss):
 *  - the loss and every parameter's gradient, gathered to the full tensor
 *    (embedding, every layer's norms, QKV, O, router, shared expert, dense
 *    FFN, experts, final norm, head), for the tiny model and adversarial
 *    variants (also D past n_kv: key/value heads replicated over the
 *    Ulysses group): uneven routing (a hot expert, so LLEP spills), a dense
 * first layer, N not a multiple of the MoE chunk, V not divisible by P, two
 *    micro-batches;
 *  - the check fails when one weight of the composed model is perturbed;
 *  - 20-step loss curves with each operator on against its baseline (the
 *    same layout): pipelined_llep vs ep, ring vs fused, SCO all vs 0, hybrid
 *    vs stream, recompute vs keep of the MoE routing context (1e-4; the
 *    learning rate is 3e-3: at 1e-2 a route near a top-k tie flips within 20
 *    steps on some layouts, a jump of the loss that says nothing about the
 *    operators);
 *  - the router biases move with the loads and agree with the reference;
 *  - token ids: the ignore index (-100) is taken only where a token is a
 *    target and no input (the last of a micro-batch's N + 1); anywhere else
 *    it, a negative id or one >= V is refused with its position on every
 *    rank (it would index the embedding out of bounds). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ce.h"
#include "plateau/host_device.h"
#include "train/data.h"
#include "train/step.h"
#include "train/trainer_testlib.h"

static pl_dev *dev;
static pl_comm *world, *self;
static int rank, size;

typedef struct setup {
  pl_model_cfg m;
  pl_layout_cfg lc;
  pl_step_cfg sc;
  int64_t S;
  uint64_t data_seed;
  int hot;     /* the router prefers expert 0 in every layer */
  int perturb; /* perturb one weight of the composed model */
} setup;

static setup base(void) {
  setup u;
  memset(&u, 0, sizeof u);
  ck_assert_int_eq(pl_model_preset("tiny", &u.m), PL_OK);
  u.m.E = 12; /* E divisible by W = 1..4 */
  u.lc = (pl_layout_cfg){1, 1, 0, 0, 0};
  u.sc = pl_step_cfg_default();
  u.sc.dt = PL_F32;
  u.sc.moe_lanes = 0;
  u.sc.hp.lr = 3e-3; /* larger steps flip near-tied routes: a discontinuity */
  u.S = 16;
  u.data_seed = 5;
  return u;
}

/* tokens of this rank for one step (the synthetic stream) */
static int32_t *tokens_for(const setup *u, const pl_layout_plan *p, int step,
                           int micro) {
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(u->m.V, u->data_seed, &d), PL_OK);
  int32_t *t = malloc((size_t)(micro * (p->N + 1)) * 4);
  ck_assert_int_eq(pl_data_batch(d, p, micro, step, t), PL_OK);
  pl_data_close(d);
  return t;
}

/* expert 0 chosen by every token of every MoE layer (its bias) */
static void make_hot(pl_trainer *t, const pl_model_cfg *m) {
  float *b = calloc((size_t)m->E, sizeof(float));
  b[0] = 10.0f;
  for (int l = 0; l < m->L; l++)
    if (pl_model_layer_is_moe(m, l))
      ck_assert_int_eq(pl_trainer_set_router_bias(t, l, b), PL_OK);
  free(b);
}

static pl_trainer *make(const setup *u, pl_comm *c, const pl_layout_cfg *lc,
                        const pl_step_cfg *sc) {
  pl_trainer *t = NULL;
  pl_status st = pl_trainer_create(dev, c, &u->m, lc, u->S, sc, &t);
  ck_assert_msg(st == PL_OK, "trainer: %s", pl_last_error());
  if (u->hot)
    make_hot(t, &u->m);
  return t;
}

static pl_trainer *make_reference(const setup *u, int micro) {
  pl_step_cfg sc = u->sc;
  sc.dispatch = PL_MOE_EP;
  sc.head = &pl_head_fused;
  sc.sco = (pl_sco_budget){false, 0};
  sc.micro = micro;
  pl_layout_cfg lc = {1, 1, 0, 0, 0};
  return make(u, self, &lc, &sc);
}

/* Compare the loss and every gradient; returns 1 if all within tolerance.
 * quiet: no message (the perturbation test expects a failure). */
static int compare(pl_trainer *a, pl_trainer *ref, double la, double lref,
                   int quiet, const char *what) {
  int ok = fabs(la - lref) <= 1e-5 * fabs(lref);
  if (!ok && !quiet)
    fprintf(stderr, "[r%d] %s: loss %.9g vs reference %.9g\n", rank, what, la,
            lref);
  ck_assert_int_eq(pl_trainer_nparams(a), pl_trainer_nparams(ref));
  for (int i = 0; i < pl_trainer_nparams(a); i++) {
    pl_param_info in, ir;
    ck_assert_int_eq(pl_trainer_param_info(a, i, &in), PL_OK);
    ck_assert_int_eq(pl_trainer_param_info(ref, i, &ir), PL_OK);
    ck_assert_str_eq(in.name, ir.name);
    ck_assert(in.rows == ir.rows && in.cols == ir.cols);
    const size_t n = (size_t)(in.rows * in.cols);
    float *ga = malloc(n * 4), *gr = malloc(n * 4);
    ck_assert_int_eq(pl_trainer_gather(a, i, true, ga), PL_OK);
    ck_assert_int_eq(pl_trainer_gather(ref, i, true, gr), PL_OK);
    int64_t bad;
    const double r = tt_ratio(ga, gr, n, 1e-4, &bad);
    fprintf(stderr, "%s %s ratio %.3g max %.3g\n", what, in.name, r,
            (double)fabs(gr[bad >= 0 ? bad : 0]));
    if (r > 1) {
      ok = 0;
      if (!quiet)
        fprintf(stderr,
                "[r%d] %s: gradient of %s off by %.3g x tolerance at %lld (%g "
                "vs %g)\n",
                rank, what, in.name, r, (long long)bad, ga[bad], gr[bad]);
    }
    free(ga), free(gr);
  }
  int64_t all = ok;
  ck_assert_int_eq(pl_host_allreduce_i64(world, &all, 1, PL_RED_MIN), PL_OK);
  return (int)all;
}

/* One forward_backward of the composed layout and of the reference on the
 * same sequences; 1 if they agree. */
static int run_pair(const setup *u, int quiet, const char *what) {
  pl_trainer *a = make(u, world, &u->lc, &u->sc);
  const pl_layout_plan *p = pl_trainer_plan(a);
  pl_trainer *ref = make_reference(u, u->sc.micro * p->n_groups);
  if (u->perturb) {
    pl_param_info in;
    ck_assert_int_eq(pl_trainer_param_info(a, 3, &in), PL_OK); /* layer0.qkv */
    float *w = malloc((size_t)(in.rows * in.cols) * 4);
    ck_assert_int_eq(pl_trainer_gather(a, 3, false, w), PL_OK);
    w[5] += 0.05f;
    ck_assert_int_eq(pl_trainer_set(a, 3, w), PL_OK);
    free(w);
  }
  int32_t *tok = tokens_for(u, p, 0, u->sc.micro);
  /* the reference reads every sequence: micro-batch q = sequence q */
  const int nseq = u->sc.micro * p->n_groups;
  int32_t *rtok = malloc((size_t)(nseq * (u->S + 1)) * 4);
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(u->m.V, u->data_seed, &d), PL_OK);
  for (int q = 0; q < nseq; q++)
    ck_assert_int_eq(
        pl_data_read(d, q, u->S, 0, u->S + 1, rtok + q * (u->S + 1)), PL_OK);
  pl_data_close(d);
  pl_step_result ra, rr;
  ck_assert_msg(pl_trainer_forward_backward(a, tok, &ra) == PL_OK, "%s",
                pl_last_error());
  ck_assert_msg(pl_trainer_forward_backward(ref, rtok, &rr) == PL_OK, "%s",
                pl_last_error());
  ck_assert_int_eq(ra.tokens, rr.tokens);
  ck_assert_int_eq(ra.tokens, (int64_t)nseq * u->S);
  const int ok = compare(a, ref, ra.loss, rr.loss, quiet, what);
  if (u->hot && size > 1 && u->sc.dispatch != PL_MOE_EP)
    ck_assert_msg(
        ra.moe_spilled > 0 && ra.moe_imbalance > 1.3,
        "%s: a hot expert must make LLEP spill (spilled %d, imbalance %.2f)",
        what, ra.moe_spilled, ra.moe_imbalance);
  free(tok), free(rtok);
  pl_trainer_destroy(a);
  pl_trainer_destroy(ref);
  return ok;
}

START_TEST(reference_every_layout) {
  for (int D = 1; D <= size; D++)
    for (int P = 1; P <= size; P++) {
      if (size % D || size % P)
        continue;
      setup u = base();
      static const int nq[5] = {0, 4, 4, 6, 8},
                       nkv[5] = {0, 2, 2, 3, 4}; /* divisible by D */
      u.m.n_q = nq[D], u.m.n_kv = nkv[D];
      u.lc = (pl_layout_cfg){D, P, 0, 0, 0};
      u.S = 12 * D;
      char what[64];
      snprintf(what, sizeof what, "D=%d P=%d", D, P);
      ck_assert_msg(run_pair(&u, 0, what),
                    "%s: composed step differs from the reference", what);
    }
  /* a Ulysses group past the key/value heads: one kv head replicated to
   * every rank of D = W (GQA 4, 6 on 3 ranks), and GQA 2 with D = 4 >
   * n_kv = 2 */
  for (int k = 0; k < 2 && size > 1; k++) {
    if (k == 1 && size != 4)
      continue;
    setup u = base();
    u.m.n_q = size == 3 ? 6 : 4, u.m.n_kv = k ? 2 : 1;
    u.lc = (pl_layout_cfg){size, 1, 0, 0, 0};
    u.S = 12 * size;
    char what[64];
    snprintf(what, sizeof what, "D=%d n_kv=%d (replicated)", size, u.m.n_kv);
    ck_assert_msg(run_pair(&u, 0, what),
                  "%s: composed step differs from the reference", what);
  }
}
END_TEST

START_TEST(reference_adversarial) {
  /* a hot expert (LLEP spills), N = 13 over chunks of 4, V = 511 over P = W,
   * two micro-batches, the routing context recomputed */
  setup u = base();
  u.hot = 1;
  u.m.V = 511;
  u.S = 13;
  u.lc = (pl_layout_cfg){1, size, 0, 0, 0};
  u.sc.dispatch = PL_MOE_PIPELINED;
  u.sc.moe_c = 4;
  u.sc.knobs.m = 1, u.sc.knobs.lambda = 0;
  u.sc.micro = 2;
  u.sc.moe_recompute = true;
  ck_assert_msg(run_pair(&u, 0, "adversarial pllep"),
                "adversarial pllep differs");
  u.sc.dispatch = PL_MOE_LLEP;
  u.sc.micro = 1;
  u.m.dense_layers = 0; /* every layer MoE */
  ck_assert_msg(run_pair(&u, 0, "adversarial llep"),
                "adversarial llep differs");
}
END_TEST

START_TEST(perturbed_weight_fails) {
  setup u = base();
  u.lc = (pl_layout_cfg){1, size, 0, 0, 0};
  ck_assert_msg(run_pair(&u, 0, "unperturbed"),
                "the unperturbed pair must agree");
  u.perturb = 1;
  ck_assert_msg(!run_pair(&u, 1, "perturbed"),
                "a perturbed weight went unnoticed");
}
END_TEST

/* 20 steps with configuration a and with b on the same data: losses */
static void curves(const setup *u, const pl_step_cfg *sa, const pl_step_cfg *sb,
                   const char *what) {
  enum { STEPS = 20 };
  pl_trainer *t[2] = {make(u, world, &u->lc, sa), make(u, world, &u->lc, sb)};
  double loss[2][STEPS];
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < STEPS; s++) {
      int32_t *tok = tokens_for(u, pl_trainer_plan(t[k]), s, sa->micro);
      pl_step_result r;
      ck_assert_msg(pl_trainer_step(t[k], tok, &r) == PL_OK, "%s: %s", what,
                    pl_last_error());
      loss[k][s] = r.loss;
      free(tok);
    }
  for (int s = 0; s < STEPS; s++)
    ck_assert_msg(fabs(loss[0][s] - loss[1][s]) <= 1e-4 * fabs(loss[1][s]),
                  "%s: step %d loss %.7g vs baseline %.7g", what, s + 1,
                  loss[0][s], loss[1][s]);
  ck_assert_msg(loss[0][STEPS - 1] < loss[0][0] - 0.05,
                "%s: no learning (%.4f -> %.4f)", what, loss[0][0],
                loss[0][STEPS - 1]);
  if (rank == 0)
    printf("%s: loss %.4f -> %.4f over %d steps, both\n", what, loss[0][0],
           loss[0][STEPS - 1], STEPS);
  /* the router biases moved and agree */
  const float *b0 = pl_trainer_router_bias(t[0], 1),
              *b1 = pl_trainer_router_bias(t[1], 1);
  ck_assert_ptr_nonnull(b0);
  double moved = 0;
  for (int e = 0; e < u->m.E; e++)
    moved += fabs(b0[e]);
  ck_assert_msg(moved > 0, "%s: router bias never moved", what);
  (void)b1;
  pl_trainer_destroy(t[0]);
  pl_trainer_destroy(t[1]);
}

START_TEST(curves_each_operator) {
  setup u = base();
  u.lc = (pl_layout_cfg){1, size, 0, 0, 0};
  pl_step_cfg a = u.sc, b = u.sc;
  a.dispatch = PL_MOE_PIPELINED, a.moe_c = 5;
  b.dispatch = PL_MOE_EP;
  curves(&u, &a, &b, "pllep vs ep");
  a = b = u.sc;
  a.head = &pl_head_ring, b.head = &pl_head_fused;
  curves(&u, &a, &b, "ring vs fused");
  a = b = u.sc;
  a.sco = (pl_sco_budget){true, 0}, b.sco = (pl_sco_budget){false, 0};
  curves(&u, &a, &b, "sco all vs 0");
  a = b = u.sc;
  a.optim = &pl_optim_hybrid, a.oo.share = 0.5, a.oo.bucket = 1000;
  b.optim = &pl_optim_stream, b.oo.bucket = 1000;
  curves(&u, &a, &b, "hybrid vs stream");
  a = b = u.sc;
  a.moe_recompute = true;
  curves(&u, &a, &b, "recompute vs keep");
}
END_TEST

/* the time breakdown and pl_trainer_run: every part measured, the
 * compute-stream parts within the step's time */
START_TEST(profile_parts) {
  setup u = base();
  u.lc = (pl_layout_cfg){1, size, 0, 0, 0};
  pl_step_cfg sc = u.sc;
  sc.profile = true;
  sc.sco = (pl_sco_budget){true, 0};
  pl_trainer *t = make(&u, world, &u.lc, &sc);
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(u.m.V, u.data_seed, &d), PL_OK);
  double loss[3];
  pl_step_result r[3];
  ck_assert_int_eq(pl_trainer_run(t, d, 0, 3, loss, r), PL_OK);
  for (int s = 0; s < 3; s++) {
    ck_assert(loss[s] == r[s].loss && r[s].step == s + 1);
    double in = 0;
    for (int p = PL_PART_ATTENTION; p <= PL_PART_OPTIM; p++) {
      ck_assert_msg(r[s].part_ms[p] > 0, "step %d: %s = %g", s + 1,
                    pl_part_name(p), r[s].part_ms[p]);
      in += r[s].part_ms[p];
    }
    ck_assert(r[s].part_ms[PL_PART_ZERO3] > 0 && r[s].part_ms[PL_PART_SCO] > 0);
    ck_assert(r[s].part_ms[PL_PART_OTHER] >= 0);
    ck_assert_msg(in <= r[s].time_ms * 1.001 + 0.01,
                  "parts %.3f ms > step %.3f ms", in, r[s].time_ms);
    ck_assert(r[s].dev.peak > 0 && r[s].host.current > 0);
  }
  if (rank == 0) {
    printf("# step 3 (%.2f ms):", r[2].time_ms);
    for (int p = 0; p < PL_PART_COUNT; p++)
      printf(" %s %.2f", pl_part_name(p), r[2].part_ms[p]);
    printf("\n");
  }
  pl_data_close(d);
  pl_trainer_destroy(t);
}
END_TEST

/* one step of t on tok with tok[at] = v on rank 0: its status */
static pl_status step_with(pl_trainer *t, const setup *u, int64_t at,
                           int32_t v) {
  int32_t *tok = tokens_for(u, pl_trainer_plan(t), 0, u->sc.micro);
  if (rank == 0 && at >= 0)
    tok[at] = v;
  pl_step_result r;
  const pl_status st = pl_trainer_step(t, tok, &r);
  free(tok);
  if (st == PL_OK)
    ck_assert_msg(isfinite(r.loss), "loss %g", r.loss);
  return st;
}

START_TEST(token_ids) {
  setup u = base();
  u.lc = (pl_layout_cfg){1, size, 0, 0, 0};
  u.sc.micro = 2;
  pl_trainer *t = make(&u, world, &u.lc, &u.sc);
  const int64_t per = pl_trainer_plan(t)->N + 1;
  /* refused: (micro-batch, position, id) */
  const struct {
    int mi;
    int64_t i;
    int32_t v;
  } bad[] = {{0, 1, PL_CE_IGNORE_INDEX}, /* an input and a target    */
             {1, 1, PL_CE_IGNORE_INDEX}, /* the second micro-batch   */
             {0, 0, PL_CE_IGNORE_INDEX}, /* an input only            */
             {1, 0, -1},
             {0, 2, (int32_t)u.m.V},
             {0, per - 1, -1}, /* the last: only -100 is allowed */
             {1, per - 1, (int32_t)u.m.V}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    const int64_t at = bad[k].mi * per + bad[k].i;
    const pl_status st = step_with(t, &u, at, bad[k].v);
    ck_assert_msg(st == PL_EINVAL,
                  "token %d at micro-batch %d position %lld: "
                  "status %s, want PL_EINVAL",
                  bad[k].v, bad[k].mi, (long long)bad[k].i, pl_strerror(st));
    char want[96];
    snprintf(want, sizeof want, "micro-batch %d, position %lld", bad[k].mi,
             (long long)bad[k].i);
    ck_assert_msg(rank != 0 || strstr(pl_last_error(), want),
                  "the message '%s' does not name '%s'", pl_last_error(), want);
  }
  /* taken: the ignore index as the last target of either micro-batch, and
   * no change at all */
  ck_assert_msg(step_with(t, &u, per - 1, PL_CE_IGNORE_INDEX) == PL_OK, "%s",
                pl_last_error());
  ck_assert_msg(step_with(t, &u, 2 * per - 1, PL_CE_IGNORE_INDEX) == PL_OK,
                "%s", pl_last_error());
  ck_assert_msg(step_with(t, &u, -1, 0) == PL_OK, "%s", pl_last_error());
  pl_trainer_destroy(t);
}
END_TEST

int main(int argc, char **argv) {
  const TTest *tests[] = {reference_every_layout,
                          reference_adversarial,
                          perturbed_weight_fails,
                          curves_each_operator,
                          profile_parts,
                          token_ids,
                          NULL};
  return tt_cpu_main(argc, argv, "step", 300, tests, &dev, &world, &self, &rank,
                     &size);
}
