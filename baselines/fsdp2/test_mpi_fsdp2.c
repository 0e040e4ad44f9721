/* test_mpi_fsdp2.c — the FSDP2 baseline (fsdp2/fsdp2.h) against the
 * single-rank, unsharded reference step of engine/train, CPU backend, f32,
 * under mpirun -np 1..4.
 *
 * The reference is the composed trainer on a communicator of one rank (D =
 * P = 1, the fused head, ep dispatch, no SCO) running every sequence of the
 * step as a micro-batch; the baseline runs the world with every (cp, ep) the
 * world allows (cp and ep dividing W; ep dividing E = 12), W / cp sequences
 * per micro-batch, window mi·(W/cp) + g for CP group g (pl_fsdp2_batch).
 * Checked with the composed step's tolerances (normwise: max |a − b| <=
 * tol · max |b| per tensor; 1e-4 gradients, 1e-5 loss):
 *  - the initial weights equal the composed step's bit for bit (same
 *    parameters, order, seeds and distributions);
 *  - the loss and every parameter's gradient gathered to the full tensor,
 *    for each (cp, ep) under AC full, selective and none, the GPU and the CPU
 *    optimizer placement, a dense first layer and every layer MoE, a hot
 *    expert, two micro-batches, ring attention over 2..4 ranks;
 *  - the check fails when one weight of the baseline is perturbed;
 *  - 8-step loss curves on one batch (optimizer on the device and on the
 *    host, clipping on, router bias updates) equal the reference trainer's,
 *    and fall;
 *  - memory: the persistent tags equal the header's formulas (Σ s_u·4 fp32
 *    shards, as much gradient, 2× for m and v; device or pinned host), the
 *    boundaries peak at (L + 1)·N·H·4, "saved" is 0 under AC full and larger
 *    under none than under selective, and no transient outlives its step;
 *  - an out-of-memory step or create returns PL_ENOMEM, frees what it took,
 *    and the trainer is destroyed cleanly (each rank alone);
 *  - bad configurations are refused (uneven CP split, ep not dividing E).
 *  The tuning list holds only valid points, with every knob. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp2.h"
#include "train/data.h"
#include "train/step.h"
#include "train/trainer_testlib.h"

static pl_dev *dev;
static pl_comm *world, *self;
static int rank, size;

typedef struct setup {
  pl_model_cfg m;
  pl_fsdp2_cfg fc;
  int64_t S;
  uint64_t data_seed;
  int hot, perturb;
} setup;

static setup base(void) {
  setup u;
  memset(&u, 0, sizeof u);
  ck_assert_int_eq(pl_model_preset("tiny", &u.m), PL_OK);
  u.m.E = 12;
  u.fc = pl_fsdp2_cfg_default();
  u.fc.dt = PL_F32;
  u.fc.moe_lanes = 0;
  u.fc.hp.lr = 3e-3;
  u.S = 12;
  u.data_seed = 5;
  return u;
}

static pl_step_cfg ref_cfg(const setup *u, int micro) {
  pl_step_cfg sc = pl_step_cfg_default();
  sc.dt = PL_F32;
  sc.moe_lanes = 0;
  sc.hp = u->fc.hp;
  sc.dispatch = PL_MOE_EP;
  sc.head = &pl_head_fused;
  sc.micro = micro;
  sc.seed = u->fc.seed;
  return sc;
}

static void make_hot_ref(pl_trainer *t, const pl_model_cfg *m) {
  float *b = calloc((size_t)m->E, sizeof(float));
  b[0] = 10.0f;
  for (int l = 0; l < m->L; l++)
    if (pl_model_layer_is_moe(m, l))
      ck_assert_int_eq(pl_trainer_set_router_bias(t, l, b), PL_OK);
  free(b);
}
static void make_hot(pl_fsdp2 *t, const pl_model_cfg *m) {
  float *b = calloc((size_t)m->E, sizeof(float));
  b[0] = 10.0f;
  for (int l = 0; l < m->L; l++)
    if (pl_model_layer_is_moe(m, l))
      ck_assert_int_eq(pl_fsdp2_set_router_bias(t, l, b), PL_OK);
  free(b);
}

static pl_fsdp2 *make(const setup *u, pl_comm *c) {
  pl_fsdp2 *t = NULL;
  pl_status st = pl_fsdp2_create(dev, c, &u->m, &u->fc, u->S, &t);
  ck_assert_msg(st == PL_OK, "fsdp2: %s", pl_last_error());
  if (u->hot)
    make_hot(t, &u->m);
  return t;
}

static pl_trainer *make_ref(const setup *u, int micro) {
  pl_step_cfg sc = ref_cfg(u, micro);
  pl_layout_cfg lc = {1, 1, 0, 0, 0};
  pl_trainer *t = NULL;
  pl_status st = pl_trainer_create(dev, self, &u->m, &lc, u->S, &sc, &t);
  ck_assert_msg(st == PL_OK, "reference: %s", pl_last_error());
  if (u->hot)
    make_hot_ref(t, &u->m);
  return t;
}

/* Every parameter of a (weights or gradients) against the reference; 1 if
 * all agree (exact: bit for bit). */
static int compare(pl_fsdp2 *a, pl_trainer *ref, bool grad, int exact,
                   int quiet, const char *what) {
  int ok = 1;
  ck_assert_int_eq(pl_fsdp2_nparams(a), pl_trainer_nparams(ref));
  for (int i = 0; i < pl_fsdp2_nparams(a); i++) {
    pl_param_info in, ir;
    ck_assert_int_eq(pl_fsdp2_param_info(a, i, &in), PL_OK);
    ck_assert_int_eq(pl_trainer_param_info(ref, i, &ir), PL_OK);
    ck_assert_str_eq(in.name, ir.name);
    ck_assert(in.rows == ir.rows && in.cols == ir.cols);
    const size_t n = (size_t)(in.rows * in.cols);
    float *ga = malloc(n * 4), *gr = malloc(n * 4);
    ck_assert_msg(pl_fsdp2_gather(a, i, grad, ga) == PL_OK, "%s",
                  pl_last_error());
    ck_assert_int_eq(pl_trainer_gather(ref, i, grad, gr), PL_OK);
    if (exact) {
      if (memcmp(ga, gr, n * 4)) {
        ok = 0;
        if (!quiet)
          fprintf(stderr, "[r%d] %s: %s differs from the reference\n", rank,
                  what, in.name);
      }
    } else {
      int64_t bad;
      const double r = tt_ratio(ga, gr, n, 1e-4, &bad);
      if (r > 1) {
        ok = 0;
        if (!quiet)
          fprintf(stderr,
                  "[r%d] %s: gradient of %s off by %.3g x tolerance at %lld "
                  "(%g vs %g)\n",
                  rank, what, in.name, r, (long long)bad, ga[bad], gr[bad]);
      }
    }
    free(ga), free(gr);
  }
  int64_t all = ok;
  ck_assert_int_eq(pl_host_allreduce_i64(world, &all, 1, PL_RED_MIN), PL_OK);
  return (int)all;
}

/* The reference's tokens: every sequence of the step as a micro-batch. */
static int32_t *ref_tokens(const setup *u, int nseq, int64_t step) {
  int32_t *t = malloc((size_t)(nseq * (u->S + 1)) * 4);
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(u->m.V, u->data_seed, &d), PL_OK);
  for (int q = 0; q < nseq; q++)
    ck_assert_int_eq(
        pl_data_read(d, step * nseq + q, u->S, 0, u->S + 1, t + q * (u->S + 1)),
        PL_OK);
  pl_data_close(d);
  return t;
}

static int32_t *own_tokens(const setup *u, pl_fsdp2 *t, int64_t step) {
  int32_t *tok = malloc((size_t)pl_fsdp2_tokens_per_rank(t) * 4);
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(u->m.V, u->data_seed, &d), PL_OK);
  ck_assert_int_eq(pl_fsdp2_batch(t, d, step, tok), PL_OK);
  pl_data_close(d);
  return tok;
}

/* No transient of the baseline outlives its step (the tags' bytes before
 * it, in[]); the boundaries peak at L + 1 of N·H; "saved" only without full
 * checkpointing. */
static const char *const transients[] = {
    "zero3",       "fsdp_ag",   "zero3_grads", "boundary", "saved",
    "activations", "grads_act", "cp_kv",       "cp_ring",  "attention",
    "router",      "logits",    "routing",     "dispatch", "expert"};
#define NTRANS (sizeof transients / sizeof transients[0])
static void tags_now(size_t *out) {
  for (size_t i = 0; i < NTRANS; i++)
    out[i] = pl_mem_tag_current(dev, PL_ARENA_DEVICE, transients[i]);
}
static void check_no_transients(const setup *u, const size_t *in,
                                const char *what) {
  size_t now[NTRANS];
  tags_now(now);
  for (size_t i = 0; i < NTRANS; i++)
    ck_assert_msg(now[i] == in[i],
                  "%s: %zu bytes of %s after the step, %zu "
                  "before",
                  what, now[i], transients[i], in[i]);
  const int64_t N = u->S / u->fc.cp;
  ck_assert_uint_eq(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "boundary"),
                    (size_t)(u->m.L + 1) * (size_t)(N * u->m.H) * 4);
  if (u->fc.ac == PL_FSDP2_AC_FULL)
    ck_assert_uint_eq(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "saved"), 0);
  else
    ck_assert(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "saved") > 0);
}

/* One forward_backward of the baseline and of the reference; 1 if agree. */
static int run_pair(const setup *u, int quiet, const char *what) {
  pl_fsdp2 *a = make(u, world);
  const int nseq = u->fc.micro * (size / u->fc.cp);
  pl_trainer *ref = make_ref(u, nseq);
  ck_assert_msg(compare(a, ref, false, 1, 0, what),
                "%s: initial weights differ from the composed step's", what);
  if (u->perturb) {
    pl_param_info in;
    ck_assert_int_eq(pl_fsdp2_param_info(a, 2, &in), PL_OK); /* layer0.qkv */
    ck_assert_str_eq(in.name, "layer0.qkv");
    float *w = malloc((size_t)(in.rows * in.cols) * 4);
    ck_assert_int_eq(pl_fsdp2_gather(a, 2, false, w), PL_OK);
    w[5] += 0.05f;
    ck_assert_int_eq(pl_fsdp2_set(a, 2, w), PL_OK);
    free(w);
  }
  int32_t *tok = own_tokens(u, a, 0), *rtok = ref_tokens(u, nseq, 0);
  pl_step_result ra, rr;
  size_t in[NTRANS];
  tags_now(in);
  ck_assert_msg(pl_fsdp2_forward_backward(a, tok, &ra) == PL_OK, "%s: %s", what,
                pl_last_error());
  check_no_transients(u, in, what);
  ck_assert_msg(pl_trainer_forward_backward(ref, rtok, &rr) == PL_OK, "%s",
                pl_last_error());
  ck_assert_int_eq(ra.tokens, rr.tokens);
  ck_assert_int_eq(ra.tokens, (int64_t)nseq * u->S);
  int ok = fabs(ra.loss - rr.loss) <= 1e-5 * fabs(rr.loss);
  if (!ok && !quiet)
    fprintf(stderr, "[r%d] %s: loss %.9g vs reference %.9g\n", rank, what,
            ra.loss, rr.loss);
  ok &= compare(a, ref, true, 0, quiet, what);
  free(tok), free(rtok);
  pl_fsdp2_destroy(a);
  pl_trainer_destroy(ref);
  return ok;
}

START_TEST(reference_every_layout) {
  static const pl_fsdp2_ac acs[3] = {PL_FSDP2_AC_FULL, PL_FSDP2_AC_SELECTIVE,
                                     PL_FSDP2_AC_NONE};
  int k = 0;
  for (int cp = 1; cp <= size; cp++)
    for (int ep = 1; ep <= size; ep++) {
      if (size % cp || size % ep)
        continue;
      setup u = base();
      u.fc.cp = cp, u.fc.ep = ep;
      u.fc.ac = acs[k % 3];
      u.fc.optim = k % 2 ? PL_FSDP2_OPTIM_CPU : PL_FSDP2_OPTIM_GPU;
      u.S = 12 * cp;
      k++;
      char what[96];
      pl_fsdp2_cfg_name(&u.fc, what, sizeof what);
      ck_assert_msg(run_pair(&u, 0, what), "%s: differs from the reference",
                    what);
    }
}
END_TEST

START_TEST(reference_adversarial) {
  /* a hot expert, every layer MoE, two micro-batches, ring attention over
   * the whole world, AC none and selective, N not a multiple of anything */
  setup u = base();
  u.hot = 1;
  u.m.dense_layers = 0;
  u.fc.cp = size;
  u.fc.ep = size;
  u.fc.micro = 2;
  u.fc.ac = PL_FSDP2_AC_NONE;
  u.S = 10 * size;
  ck_assert_msg(run_pair(&u, 0, "hot/all-moe/mb2/none"), "adversarial differs");
  u.fc.ac = PL_FSDP2_AC_SELECTIVE;
  u.fc.optim = PL_FSDP2_OPTIM_CPU;
  u.fc.ep = 1;
  u.m.L = 4;
  ck_assert_msg(run_pair(&u, 0, "hot/L4/selective/cpu"), "adversarial differs");
}
END_TEST

START_TEST(perturbed_weight_fails) {
  setup u = base();
  u.fc.ep = size;
  ck_assert_msg(run_pair(&u, 0, "unperturbed"),
                "the unperturbed pair must agree");
  u.perturb = 1;
  ck_assert_msg(!run_pair(&u, 1, "perturbed"),
                "a perturbed weight went unnoticed");
}
END_TEST

/* The loss of steps against the reference trainer (same AdamW, clipping,
 * bias rule), both optimizer placements. */
START_TEST(curves_match_reference) {
  enum { STEPS = 8 };
  for (int o = 0; o < 2; o++) {
    setup u = base();
    u.fc.cp = size % 2 ? 1 : 2;
    u.fc.ep = size;
    u.fc.optim = o ? PL_FSDP2_OPTIM_CPU : PL_FSDP2_OPTIM_GPU;
    u.fc.hp.max_grad_norm = 0.5; /* clips: the norm is checked too */
    u.S = 12 * u.fc.cp;
    pl_fsdp2 *a = make(&u, world);
    const int nseq = size / u.fc.cp;
    pl_trainer *ref = make_ref(&u, nseq);
    double la[STEPS], lr[STEPS];
    float ga = 0, gr = 0;
    for (int st = 0; st < STEPS; st++) {
      /* one batch again and again: the loss must fall */
      int32_t *tok = own_tokens(&u, a, 0), *rtok = ref_tokens(&u, nseq, 0);
      pl_step_result r1, r2;
      ck_assert_msg(pl_fsdp2_step(a, tok, &r1) == PL_OK, "%s", pl_last_error());
      ck_assert_int_eq(pl_trainer_step(ref, rtok, &r2), PL_OK);
      la[st] = r1.loss, lr[st] = r2.loss;
      ga = r1.gscale, gr = r2.gscale;
      free(tok), free(rtok);
    }
    for (int st = 0; st < STEPS; st++)
      ck_assert_msg(fabs(la[st] - lr[st]) <= 1e-4 * fabs(lr[st]),
                    "optim %s step %d: loss %.7g vs reference %.7g",
                    o ? "cpu" : "gpu", st + 1, la[st], lr[st]);
    ck_assert_msg(la[STEPS - 1] < la[0], "no learning: %.4f -> %.4f", la[0],
                  la[STEPS - 1]);
    ck_assert_msg(fabs(ga - gr) <= 1e-4 * fabs(gr) && ga < 1.0f,
                  "clip factor %g vs reference %g", ga, gr);
    const float *b0 = pl_fsdp2_router_bias(a, 1),
                *b1 = pl_trainer_router_bias(ref, 1);
    for (int e = 0; e < u.m.E; e++)
      ck_assert_msg(b0[e] == b1[e], "router bias %d: %g vs %g", e, b0[e],
                    b1[e]);
    if (rank == 0)
      printf("# fsdp2 optim %s: loss %.4f -> %.4f over %d steps (reference "
             "%.4f -> %.4f)\n",
             o ? "cpu" : "gpu", la[0], la[STEPS - 1], STEPS, lr[0],
             lr[STEPS - 1]);
    pl_fsdp2_destroy(a);
    pl_trainer_destroy(ref);
  }
}
END_TEST

/* The header's persistent formulas: shards of ⌈n_u / G_u⌉ over the units. */
static size_t al(size_t n) {
  return (n + 63) / 64 * 64;
}
static size_t smax;
static size_t shard(size_t n, int G) {
  const size_t s = (n + (size_t)G - 1) / (size_t)G;
  if (s > smax)
    smax = s;
  return s;
}
/* Σ s_u; smax the largest shard */
static size_t expected_shards(const pl_model_cfg *m, int Wv, int ep) {
  const int64_t H = m->H, qkv = (int64_t)(m->n_q + 2 * m->n_kv) * m->d,
                nq = (int64_t)m->n_q * m->d;
  const int El = m->E / ep, Er = El * (size < ep ? size : ep);
  smax = 0;
  size_t tot = shard((size_t)(m->V * H), Wv);
  tot += shard(al((size_t)H) + (size_t)(H * m->V), Wv);
  for (int l = 0; l < m->L; l++) {
    const int moe = pl_model_layer_is_moe(m, l);
    const int64_t I = moe ? (m->n_shared ? m->I_shared : 0) : m->I_dense;
    size_t n = al((size_t)H) + al((size_t)(H * qkv)) + al((size_t)(nq * H)) +
               al((size_t)H) + (moe ? al((size_t)(H * Er)) : 0) +
               (I ? al((size_t)(H * 2 * I)) + al((size_t)(I * H)) : 0);
    tot += shard(n, Wv);
    if (moe)
      tot += shard(3 * al((size_t)El * (size_t)(H * m->I)), Wv / ep);
  }
  return tot;
}

START_TEST(persistent_memory_formula) {
  for (int o = 0; o < 2; o++) {
    setup u = base();
    u.fc.ep = size;
    u.fc.optim = o ? PL_FSDP2_OPTIM_CPU : PL_FSDP2_OPTIM_GPU;
    const pl_arena ar = o ? PL_ARENA_HOST : PL_ARENA_DEVICE;
    const size_t w0 = pl_mem_tag_current(dev, ar, "weights"),
                 g0 = pl_mem_tag_current(dev, ar, "grads"),
                 m0 = pl_mem_tag_current(dev, ar, "optim");
    pl_fsdp2 *a = make(&u, world);
    const size_t sh = expected_shards(&u.m, size, size);
    /* the router biases are device "weights" too */
    size_t bias = 0;
    for (int l = 0; l < u.m.L; l++)
      bias += pl_model_layer_is_moe(&u.m, l) ? (size_t)u.m.E * 4 : 0;
    ck_assert_uint_eq(pl_mem_tag_current(dev, ar, "weights") - w0,
                      sh * 4 + (o ? 0 : bias));
    ck_assert_uint_eq(pl_mem_tag_current(dev, ar, "grads") - g0, sh * 4);
    /* m and v; with the GPU optimizer the norm's chunk partials (one
     * double per 32768 elements of the largest shard, plus one) */
    ck_assert_uint_eq(pl_mem_tag_current(dev, ar, "optim") - m0,
                      sh * 8 + (o ? 0 : 8 * ((smax + 32767) / 32768 + 1)));
    pl_fsdp2_destroy(a);
  }
}
END_TEST

/* The one-GPU proxy: each rank plays one of W_v = 2·W ranks, the experts
 * of its EP shard over a virtual FSDP group; the persistent shards are the
 * W_v-rank run's (the header's formula with virtual groups); steps run; the
 * full tensors are not on the present ranks (gather refused). */
START_TEST(proxy_runs) {
  for (int o = 0; o < 2; o++) {
    setup u = base();
    u.fc.W_v = 2 * size;
    u.fc.ep = 12 % (2 * size) == 0 ? 2 * size : size;
    u.fc.ac = o ? PL_FSDP2_AC_NONE : PL_FSDP2_AC_FULL;
    const size_t w0 = pl_mem_tag_current(dev, PL_ARENA_DEVICE, "grads");
    pl_fsdp2 *a = make(&u, world);
    ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "grads") - w0,
                      expected_shards(&u.m, u.fc.W_v, u.fc.ep) * 4);
    int32_t *tok = own_tokens(&u, a, 0);
    pl_step_result r;
    ck_assert_msg(pl_fsdp2_step(a, tok, &r) == PL_OK, "%s", pl_last_error());
    ck_assert(isfinite(r.loss) && r.tokens == (int64_t)size * u.S);
    float *w = malloc((size_t)(u.m.V * u.m.H) * 4);
    ck_assert_int_eq(pl_fsdp2_gather(a, 0, false, w), PL_EUNSUPPORTED);
    free(w);
    free(tok);
    pl_fsdp2_destroy(a);
  }
}
END_TEST

/* Out of memory, each rank alone: a step beyond the limit and a create
 * beyond it return PL_ENOMEM and leave no tracked byte behind. */
START_TEST(oom_is_clean) {
  setup u = base();
  u.fc.ac = PL_FSDP2_AC_NONE;
  const size_t before = pl_mem_tag_current(dev, PL_ARENA_DEVICE, "zero3");
  pl_mem_stats m0;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &m0);
  pl_fsdp2 *a = make(&u, self);
  pl_mem_stats m1;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &m1);
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, m1.current + 4096);
  int32_t *tok = own_tokens(&u, a, 0);
  pl_step_result r;
  ck_assert_int_eq(pl_fsdp2_step(a, tok, &r), PL_ENOMEM);
  pl_mem_stats m2;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &m2);
  ck_assert_uint_eq(m2.current, m1.current);
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, 0);
  /* the trainer still steps once memory is there again */
  ck_assert_msg(pl_fsdp2_step(a, tok, &r) == PL_OK, "%s", pl_last_error());
  ck_assert(isfinite(r.loss));
  free(tok);
  pl_fsdp2_destroy(a);
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, m0.current + 1000);
  pl_fsdp2 *b = NULL;
  ck_assert_int_eq(pl_fsdp2_create(dev, self, &u.m, &u.fc, u.S, &b), PL_ENOMEM);
  ck_assert_ptr_null(b);
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, 0);
  pl_mem_stats m3;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &m3);
  ck_assert_uint_eq(m3.current, m0.current);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "zero3"), before);
}
END_TEST

/* A token outside [0, V) is refused before the step allocates, naming it:
 * an input or a target of the chunks this rank uses (with CP over the
 * world, the last input sits in rank 0's second chunk: the others name
 * another rank), a target of PL_CE_IGNORE_INDEX passes; the trainer then
 * steps as before. */
START_TEST(bad_tokens_refused) {
  for (int cp = 1; cp <= (size == 2 ? 2 : 1); cp++) {
    setup u = base();
    u.fc.cp = cp;
    pl_fsdp2 *a = make(&u, cp > 1 ? world : self);
    int32_t *tok = own_tokens(&u, a, 0);
    const int64_t S = u.S, V = u.m.V;
    const int32_t keep_in = tok[S - 1], keep_tgt = tok[S];
    const size_t m0 = pl_mem_tag_current(dev, PL_ARENA_DEVICE, "boundary");
    pl_step_result r;
    const int32_t bad_in[] = {(int32_t)V, -1};
    for (int i = 0; i < 2; i++) { /* the last input, then the last target */
      tok[S - 1] = i ? keep_in : bad_in[0];
      tok[S] = i ? bad_in[1] : keep_tgt;
      ck_assert_int_eq(pl_fsdp2_step(a, tok, &r), PL_EINVAL);
      char want[64];
      snprintf(want, sizeof want, "token %d: must be in [0, V=%lld)",
               i ? bad_in[1] : bad_in[0], (long long)V);
      const char *e = pl_last_error();
      ck_assert_msg(cp == 1 || rank == 0 ? strstr(e, want) != NULL
                                         : strstr(e, "another rank") != NULL,
                    "rank %d, cp %d: %s", rank, cp, e);
      ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "boundary"),
                        m0);
    }
    tok[S - 1] = keep_in, tok[S] = PL_CE_IGNORE_INDEX;
    ck_assert_msg(pl_fsdp2_step(a, tok, &r) == PL_OK, "%s", pl_last_error());
    ck_assert(isfinite(r.loss));
    free(tok);
    pl_fsdp2_destroy(a);
  }
}
END_TEST

START_TEST(bad_configs_refused) {
  setup u = base();
  u.fc.cp = 2;
  ck_assert_int_eq(pl_fsdp2_check(&u.m, &u.fc, 2, 14), PL_EINVAL); /* 14 % 4 */
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "2·cp"));
  ck_assert_int_eq(pl_fsdp2_check(&u.m, &u.fc, 2, 16), PL_OK);
  ck_assert_int_eq(pl_fsdp2_check(&u.m, &u.fc, 3, 16), PL_EINVAL); /* cp | W */
  u.fc.cp = 1;
  u.fc.ep = 5; /* E = 12 */
  u.fc.W_v = 5;
  ck_assert_int_eq(pl_fsdp2_check(&u.m, &u.fc, 1, 16), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "E=12"));
  u.fc.ep = 3;
  u.fc.W_v = 0;
  ck_assert_int_eq(pl_fsdp2_check(&u.m, &u.fc, 2, 16), PL_EINVAL); /* W_v */
  u.fc.W_v = 6;
  ck_assert_int_eq(pl_fsdp2_check(&u.m, &u.fc, 2, 16), PL_EINVAL); /* 3, 2 */
  ck_assert_int_eq(pl_fsdp2_check(&u.m, &u.fc, 3, 16), PL_OK);
  u.fc.micro = 0;
  ck_assert_int_eq(pl_fsdp2_check(&u.m, &u.fc, 3, 16), PL_EINVAL);
  pl_fsdp2_ac ac;
  pl_fsdp2_optim op;
  ck_assert_int_eq(pl_fsdp2_ac_parse("selective", &ac), PL_OK);
  ck_assert_int_eq(ac, PL_FSDP2_AC_SELECTIVE);
  ck_assert_int_eq(pl_fsdp2_ac_parse("sometimes", &ac), PL_EINVAL);
  ck_assert_int_eq(pl_fsdp2_optim_parse("cpu", &op), PL_OK);
  ck_assert_int_eq(op, PL_FSDP2_OPTIM_CPU);
  ck_assert_int_eq(pl_fsdp2_optim_parse("tpu", &op), PL_EINVAL);
}
END_TEST

/* The tuning list at 4 GPUs, S 64: cp ∈ {1, 2, 4} (64 % 2cp == 0), ep ∈ {1,
 * 2, 3, 4} ∩ divisors of 4 and of E = 12 → {1, 2, 4}, ep 1 or a multiple
 * of cp (torchtitan's EP over dp_shard × cp): 8 pairs; AC full, selective;
 * gpu, cpu; micro {1, 2}: 8·2·2·2 = 64 points, all valid; S 12 drops cp 4
 * (12 % 8); a dense model lists ep 1 only; a proxy lists the virtual ep. */
START_TEST(tune_points) {
  setup u = base();
  const int micros[2] = {1, 2};
  pl_fsdp2_cfg pts[200];
  int n = pl_fsdp2_tune_points(&u.m, 4, 64, &u.fc, micros, 2, false, pts, 200);
  ck_assert_int_eq(n, 64);
  int seen_cp4 = 0, seen_cpu = 0, seen_sel = 0;
  for (int i = 0; i < n; i++) {
    ck_assert_int_eq(pl_fsdp2_check(&u.m, &pts[i], 4, 64), PL_OK);
    seen_cp4 |= pts[i].cp == 4;
    seen_cpu |= pts[i].optim == PL_FSDP2_OPTIM_CPU;
    seen_sel |= pts[i].ac == PL_FSDP2_AC_SELECTIVE;
    ck_assert(pts[i].ac != PL_FSDP2_AC_NONE);
    ck_assert(pts[i].ep == 1 || pts[i].ep % pts[i].cp == 0);
  }
  ck_assert(seen_cp4 && seen_cpu && seen_sel);
  ck_assert_int_eq(
      pl_fsdp2_tune_points(&u.m, 4, 12, &u.fc, NULL, 0, false, NULL, 0),
      2 * 3 * 2 * 2);
  ck_assert_int_eq(
      pl_fsdp2_tune_points(&u.m, 4, 64, &u.fc, NULL, 0, true, pts, 3),
      8 * 3 * 2);
  pl_model_cfg dense = u.m;
  dense.dense_layers = dense.L;
  ck_assert_int_eq(
      pl_fsdp2_tune_points(&dense, 4, 64, &u.fc, NULL, 0, false, NULL, 0),
      3 * 2 * 2);
  /* one GPU playing one of 16: ep ∈ divisors of 16 and 12 = {1, 2, 4}; cp
   * 1 and the virtual 2, 4, 8, 16 (cp divides 16, S = 64 splits into 2·cp),
   * ep 1 or a multiple of cp: cp 1 and 2 with ep 1, 2, 4, cp 4 with 1, 4,
   * cp 8 and 16 with 1 — 10 settings × AC 2 × optimizer 2 */
  pl_fsdp2_cfg px = u.fc;
  px.W_v = 16;
  ck_assert_int_eq(
      pl_fsdp2_tune_points(&u.m, 1, 64, &px, NULL, 0, false, NULL, 0),
      10 * 2 * 2);
}
END_TEST

/* The points shared with the PyTorch peer: every one valid for the baseline
 * on one GPU, a dense and a MoE point at 8K, 16K and 32K, the parameter
 * counts the file states; a malformed file is refused naming the line. */
START_TEST(peer_points) {
  pl_fsdp2_point *p;
  int n;
  ck_assert_msg(
      pl_fsdp2_points_read("analysis/peers/fsdp2_points.tsv", &p, &n) == PL_OK,
      "%s", pl_last_error());
  int seen[2][3] = {{0}};
  for (int i = 0; i < n; i++) {
    ck_assert_msg(pl_fsdp2_check(&p[i].m, &p[i].c, 1, p[i].seq) == PL_OK,
                  "%s: %s", p[i].name, pl_last_error());
    const int moe = p[i].m.dense_layers < p[i].m.L;
    const pl_model_params c = pl_model_count(&p[i].m);
    /* the counts analysis/peers/torch_fsdp2.py --list prints */
    ck_assert_msg(c.total == (moe ? 2921893888 : 2007044096),
                  "%s: %lld parameters", p[i].name, (long long)c.total);
    for (int s = 0; s < 3; s++)
      seen[moe][s] |= p[i].seq == (8192 << s);
    ck_assert(p[i].steps >= 1 && p[i].warmup >= 0);
  }
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < 3; s++)
      ck_assert_msg(seen[k][s], "no %s point at %dK", k ? "MoE" : "dense",
                    8 << s);
  free(p);
  char path[64];
  snprintf(path, sizeof path, "/tmp/fsdp2_points_bad.%d.tsv", rank);
  FILE *f = fopen(path, "w");
  fprintf(f, "# bad\npoint\thidden\tlayers\tn_q\tn_kv\thead_dim\tvocab\t"
             "experts\ttopk\texpert_width\tshared_width\tdense_width\t"
             "dense_layers\trope_theta\tseq\tcp\tep\tac\toptim\tmicro\t"
             "warmup\tsteps\nx\t64\t2\t4\t2\t16\t512\t0\t0\t0\t0\t48\t2\t1e4\t"
             "12x\t1\t1\tfull\tgpu\t1\t1\t1\n");
  fclose(f);
  ck_assert_int_eq(pl_fsdp2_points_read(path, &p, &n), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "line 3 column seq"));
  remove(path);
}
END_TEST

int main(int argc, char **argv) {
  const TTest *tests[] = {reference_every_layout,
                          reference_adversarial,
                          perturbed_weight_fails,
                          curves_match_reference,
                          persistent_memory_formula,
                          proxy_runs,
                          oom_is_clean,
                          bad_tokens_refused,
                          bad_configs_refused,
                          tune_points,
                          peer_points,
                          NULL};
  return tt_cpu_main(argc, argv, "fsdp2", 300, tests, &dev, &world, &self,
                     &rank, &size);
}
