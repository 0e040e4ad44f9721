/* test_mpi_ring_dtp.c — Ring-DTP against the f64 dense reference of the
 * concatenated problem, under mpirun -np 1..4 (the baselines beside it:
 * baselines/test_mpi_ce_heads.c).
 *
 * Every rank builds the same global problem from the counter RNG (X of all
 * ranks' tokens, the full W, the targets) and the f64 reference, then runs
 * the head on its own slice: rows [off_r, off_r + N_r) and its vocabulary
 * shard.  Cases: move activations, move weights and auto (auto must pick by
 * max N_r > max |V_r|); N ≤ V/P and N > V/P; V not divisible by P; V < P
 * (empty shards); every target in one shard; ignored rows; N = 0 on one
 * rank; f32 (1e-6 of the tensor's scale) and bf16; mean, sum and none.  Bound:
 * the tracked "logits" peak ≤ pl_dtp_logits_bound and below what the dense
 * baseline needs for the same rank's batch; the "ring" peak equals
 * pl_dtp_ring_bound (two gradient partials); the "grads" peak equals the
 * caller's dx + dw + pl_dtp_grads_scratch (no f32 gradient copies).
 * pl_dtp_run (the three-GEMM schedule at P = 1) over the same table; kept
 * logit strips (a strip budget) change no bit.  Verdicts are agreed over the
 * ranks before asserting, so a failure on one rank cannot hang the others. */
#include <check.h>

#include "ops/ring_dtp.h"
#include "test_ce_ref.h"

static pl_dev *dev;
static pl_comm *comm;
static int P, R;

static int64_t n_of(const rcase *c, int r) {
  if (c->zero_last && r == P - 1 && P > 1)
    return 0;
  return c->n_base + (int64_t)r * c->n_step;
}

static int agree(int ok) {
  int64_t v = ok;
  ck_assert_int_eq(pl_host_allreduce_i64(comm, &v, 1, PL_RED_MIN), PL_OK);
  return (int)v;
}

/* One Ring-DTP run: its arguments, the global problem and its f64
 * reference, this rank's slices on the device, what the run measured. */
typedef struct ring_trial {
  const rcase *c;
  pl_dtype dt;
  pl_ce_reduction red;
  int overlap, api;
  size_t budget;
  int64_t ntot, off, n, h, v; /* all ranks' rows, this rank's first, its rows */
  ref_problem p;
  double *rl, *rdx, *rdw; /* the reference's loss, dx, dw (global) */
  pl_dtp *d;
  int64_t col0, vs; /* this rank's vocabulary shard */
  float *ws;        /* this rank's columns of W (host) */
  void *x, *w, *t, *dl, *loss, *dx, *dw;
  size_t nl; /* loss values: n (reduction none) or 1 */
  int chunked;
  size_t lpeak, bound, rpeak, rbound, gpeak, gbound, kept;
  double *gl, *gdx, *gdw; /* loss, dx, dw as read back */
} ring_trial;

/* The global problem of case c (every rank the same) and its reference;
 * this rank's rows [off, off + n). */
static void run_reference(ring_trial *r) {
  const rcase *c = r->c;
  r->ntot = 0, r->off = 0;
  for (int q = 0; q < P; q++) {
    if (q == R)
      r->off = r->ntot;
    r->ntot += n_of(c, q);
  }
  r->n = n_of(c, R), r->h = c->h, r->v = c->v;
  ref_make(&r->p, r->ntot, r->h, r->v, r->dt, 777 + (uint64_t)r->v,
           c->ign_every, c->lo, c->hi, c->scale);
  size_t nl_ref = r->red == PL_CE_NONE ? (size_t)r->ntot : 1;
  r->rl = calloc(nl_ref + 1, sizeof(double));
  r->rdx = calloc((size_t)(r->ntot * r->h) + 1, sizeof(double));
  r->rdw = calloc((size_t)(r->h * r->v) + 1, sizeof(double));
  ref_solve(&r->p, r->red, r->rl, r->rdx, r->rdw);
}

/* The head, with its shard and its mode checked (auto: weights move iff
 * max N_r > max |V_r|, the same on every rank). */
static void run_create(ring_trial *r, pl_dtp_mode mode) {
  const rcase *c = r->c;
  pl_dtp_opts o;
  pl_dtp_opts_default(&o);
  o.mode = mode;
  o.block = c->block;
  o.red = r->red;
  o.overlap = r->overlap;
  o.strip_budget = r->budget;
  pl_status st = pl_dtp_create(comm, r->dt, r->n, r->h, r->v, &o, &r->d);
  ck_assert_msg(st == PL_OK, "create: %s", pl_last_error());
  pl_dtp_shard(r->d, &r->col0, &r->vs);
  int64_t want_col0, want_vs;
  pl_ce_shard(r->v, P, R, &want_col0, &want_vs);
  ck_assert_int_eq(r->col0, want_col0);
  ck_assert_int_eq(r->vs, want_vs);
  int64_t nmax = 0, vmax = 0;
  for (int q = 0; q < P; q++) {
    int64_t c0, w;
    pl_ce_shard(r->v, P, q, &c0, &w);
    if (n_of(c, q) > nmax)
      nmax = n_of(c, q);
    if (w > vmax)
      vmax = w;
  }
  pl_dtp_mode want = mode != PL_DTP_AUTO ? mode
                     : nmax > vmax       ? PL_DTP_MOVE_W
                                         : PL_DTP_MOVE_ACT;
  ck_assert_int_eq(pl_dtp_mode_of(r->d), want);
}

/* This rank's slices of the problem on the device, the outputs poisoned. */
static void run_upload(ring_trial *r) {
  const int64_t n = r->n, h = r->h, v = r->v, vs = r->vs;
  r->ws = malloc(sizeof(float) * (size_t)(h * vs + 1));
  for (int64_t k = 0; k < h; k++)
    for (int64_t q = 0; q < vs; q++)
      r->ws[k * vs + q] = r->p.w[k * v + r->col0 + q];
  r->x = dev_up(dev, r->p.x + r->off * h, (size_t)(n * h), r->dt, "inputs");
  r->w = dev_up(dev, r->ws, (size_t)(h * vs), r->dt, "weights");
  r->t =
      dev_up_raw(dev, r->p.t + r->off, sizeof(int32_t) * (size_t)n, "inputs");
  r->dl = dev_up(dev, r->p.dl + r->off, (size_t)n, PL_F32, "inputs");
  r->nl = r->red == PL_CE_NONE ? (size_t)n : 1;
  r->loss = dev_poison(dev, r->nl, PL_F32, "outputs");
  r->dx = dev_poison(dev, (size_t)(n * h), r->dt, "grads");
  r->dw = dev_poison(dev, (size_t)(h * vs), r->dt, "grads");
}

/* Forward and backward apart (api 0) or pl_dtp_run (api 1) from a reset
 * peak; the tags' peaks and their bounds, the results read back. */
static void run_measure(ring_trial *r) {
  pl_dtp *d = r->d;
  const int64_t n = r->n, h = r->h, vs = r->vs;
  const pl_dtype dt = r->dt;
  const void *dl = r->red == PL_CE_NONE ? r->dl : NULL;
  pl_stream *s = pl_dev_stream(dev);
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  /* pl_dtp_run runs the three-GEMM schedule at P = 1 (a row of V fits the
   * strip bound in every case here but the tiny-block one) */
  r->chunked = r->api && pl_dtp_sched_of(d) == PL_DTP_SCHED_CHUNKED;
  ck_assert_int_eq(
      pl_dtp_sched_of(d) == PL_DTP_SCHED_CHUNKED,
      P == 1 && (int64_t)pl_dtp_block(d) * n * (dt == PL_BF16 ? 3 : 1) >= r->v);
  pl_status st;
  if (r->api) {
    st = pl_dtp_run(d, s, r->x, r->t, r->w, dl, r->loss, r->dx, r->dw);
    ck_assert_msg(st == PL_OK, "run: %s", pl_last_error());
  } else {
    st = pl_dtp_forward(d, s, r->x, r->t, r->w, r->loss);
    ck_assert_msg(st == PL_OK, "forward: %s", pl_last_error());
    st = pl_dtp_backward(d, s, r->x, r->t, r->w, dl, r->dx, r->dw);
    ck_assert_msg(st == PL_OK, "backward: %s", pl_last_error());
  }
  ck_assert_int_eq(pl_dev_sync(dev), PL_OK);
  r->lpeak = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "logits");
  r->bound = pl_dtp_logits_bound(d);
  r->rpeak = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "ring");
  r->rbound = pl_dtp_ring_bound(d);
  /* gradients: the caller's dx and dw plus only the documented scratch (no
   * f32 copy of dW_r, no f32 home for the travelling total) */
  r->gpeak = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "grads");
  r->gbound = (size_t)(n * h + h * vs) * pl_dtype_size(dt) +
              (r->chunked ? 0 : pl_dtp_grads_scratch(d));
  r->kept = r->chunked ? 0 : pl_dtp_kept_bytes(d);
  r->gl = dev_down(dev, r->loss, r->nl, PL_F32);
  r->gdx = dev_down(dev, r->dx, (size_t)(n * h), dt);
  r->gdw = dev_down(dev, r->dw, (size_t)(h * vs), dt);
}

/* The results against the reference's slices: 1 when within tolerance. */
static int run_values_ok(const ring_trial *r, const char *what) {
  const int64_t n = r->n, h = r->h, v = r->v, vs = r->vs;
  double *rdw_s = malloc(sizeof(double) * (size_t)(h * vs + 1));
  for (int64_t k = 0; k < h; k++)
    for (int64_t q = 0; q < vs; q++)
      rdw_s[k * vs + q] = r->rdw[k * v + r->col0 + q];
  const double *rl_s = r->red == PL_CE_NONE ? r->rl + r->off : r->rl;
  int f32 = r->dt == PL_F32;
  int cpu = pl_dev_backend(dev) == PL_BACKEND_CPU;
  /* bf16: the three-GEMM schedule rounds its logits to bf16 (as the dense
   * baseline), the meetings keep f32 strips */
  double tl = f32 ? (cpu ? 1e-6 : 1e-5) : r->chunked ? 1e-2 : 2e-5;
  double tg = f32 ? (cpu ? 1e-6 : 1e-5) : 2e-2;
  char buf[260];
  int ok = 1;
  int64_t cnt = 0;
  for (int64_t i = 0; i < r->ntot; i++)
    cnt += r->p.t[i] != PL_CE_IGNORE_INDEX;
  snprintf(buf, sizeof buf, "%s loss", what);
  if (r->red == PL_CE_MEAN && cnt == 0)
    ok &= isnan(r->gl[0]);
  else
    ok &= ref_close(buf, r->gl, rl_s, r->nl, tl);
  snprintf(buf, sizeof buf, "%s dx", what);
  ok &= ref_close(buf, r->gdx, r->rdx + r->off * h, (size_t)(n * h), tg);
  snprintf(buf, sizeof buf, "%s dw", what);
  ok &= ref_close(buf, r->gdw, rdw_s, (size_t)(h * vs), tg);
  free(rdw_s);
  return ok;
}

/* The tags' peaks against their bounds: 1 when all hold. */
static int run_peaks_ok(const ring_trial *r, const char *what) {
  pl_dtp *d = r->d;
  int ok = 1;
  if (!(r->lpeak <= r->bound)) {
    fprintf(stderr, "%s: logits peak %zu > bound %zu\n", what, r->lpeak,
            r->bound);
    ok = 0;
  }
  /* kept strips: within the budget, and really held to the backward */
  if (pl_dtp_kept_bytes(d) > r->budget || !(r->lpeak >= r->kept)) {
    fprintf(stderr, "%s: kept %zu (budget %zu), logits peak %zu\n", what,
            pl_dtp_kept_bytes(d), r->budget, r->lpeak);
    ok = 0;
  }
  /* the hop buffers: exactly what the schedule needs (a bound that is also
   * reached, so a leaked or extra buffer fails) */
  if (!(r->rpeak <= r->rbound) ||
      (P > 1 && r->ntot > 0 && r->rpeak != r->rbound)) {
    fprintf(stderr, "%s: ring peak %zu vs bound %zu\n", what, r->rpeak,
            r->rbound);
    ok = 0;
  }
  if (r->gpeak != r->gbound) {
    fprintf(stderr, "%s: grads peak %zu vs dx + dw + scratch %zu\n", what,
            r->gpeak, r->gbound);
    ok = 0;
  }
  /* the dense head on this rank's batch needs 3·N_r·V·4 of logits (f32
   * logits, log-probabilities and their gradient: baselines/dense_ce.h) */
  const size_t dense = (size_t)3 * (size_t)r->n * (size_t)r->v * 4;
  if (r->n > 0 && r->v > pl_dtp_block(d) &&
      !(dense > r->bound - pl_dtp_kept_bytes(d))) {
    fprintf(stderr, "%s: dense %zu not above bound %zu\n", what, dense,
            r->bound);
    ok = 0;
  }
  return ok;
}

/* The head destroyed (its tags back to zero), every buffer freed. */
static void run_free(ring_trial *r) {
  pl_dtp_destroy(r->d);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "logits"), 0);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "ring"), 0);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "ce_state"), 0);
  pl_free(dev, r->x), pl_free(dev, r->w), pl_free(dev, r->t);
  pl_free(dev, r->dl), pl_free(dev, r->loss), pl_free(dev, r->dx);
  pl_free(dev, r->dw);
  free(r->gl), free(r->gdx), free(r->gdw), free(r->ws);
  free(r->rl), free(r->rdx), free(r->rdw);
  ref_free(&r->p);
}

/* One Ring-DTP run of case c — forward and backward apart (api 0) or
 * pl_dtp_run (api 1), with a strip budget — returns 1 when this rank's
 * results match; *out (when out != NULL) gets loss, dx, dw as read back (a
 * malloc'd array) for bit comparisons between runs. */
static int run_ring_x(const rcase *c, pl_dtype dt, pl_ce_reduction red,
                      pl_dtp_mode mode, int overlap, int api, size_t budget,
                      double **out, size_t *nout) {
  ring_trial r = {.c = c,
                  .dt = dt,
                  .red = red,
                  .overlap = overlap,
                  .api = api,
                  .budget = budget};
  run_reference(&r);
  run_create(&r, mode);
  run_upload(&r);
  run_measure(&r);
  pl_dtp *d = r.d;
  char what[200];
  snprintf(what, sizeof what,
           "r%d/%d %s %s %s n=%lld v=%lld vb=%lld ov=%d %s kept=%lld", R, P,
           pl_dtp_mode_name(pl_dtp_mode_of(d)), pl_dtype_name(dt),
           pl_ce_reduction_name(red), (long long)r.n, (long long)r.v,
           (long long)pl_dtp_block(d), overlap,
           api ? pl_dtp_sched_name(pl_dtp_sched_of(d)) : "apart",
           (long long)pl_dtp_kept_strips(d));
  int ok = run_values_ok(&r, what);
  ok &= run_peaks_ok(&r, what);
  if (out) {
    const size_t nl = r.nl, ndx = (size_t)(r.n * r.h);
    *nout = nl + ndx + (size_t)(r.h * r.vs);
    *out = malloc(sizeof(double) * (*nout + 1));
    memcpy(*out, r.gl, sizeof(double) * nl);
    memcpy(*out + nl, r.gdx, sizeof(double) * ndx);
    memcpy(*out + nl + ndx, r.gdw, sizeof(double) * (size_t)(r.h * r.vs));
  }
  run_free(&r);
  return ok;
}

static int run_ring(const rcase *c, pl_dtype dt, pl_ce_reduction red,
                    pl_dtp_mode mode, int overlap) {
  return run_ring_x(c, dt, red, mode, overlap, 0, 0, NULL, NULL);
}

START_TEST(ring_all) {
  int bad = 0, runs = 0;
  for (int ci = 0; ci < NCASES; ci++)
    for (int m = 0; m < 3; m++)
      for (int dt = 0; dt < 2; dt++)
        for (int red = 0; red < 3; red++) {
          int ok = run_ring(&cases[ci], dt ? PL_BF16 : PL_F32,
                            (pl_ce_reduction)red, (pl_dtp_mode)m, 1);
          bad += !agree(ok);
          runs++;
        }
  ck_assert_msg(bad == 0, "%d of %d Ring-DTP runs out of tolerance (stderr)",
                bad, runs);
}
END_TEST

/* The in-line schedule (no comm stream) gives the same results. */
START_TEST(ring_no_overlap) {
  int bad = 0;
  for (int m = 1; m < 3; m++)
    bad += !agree(run_ring(&cases[0], PL_F32, PL_CE_MEAN, (pl_dtp_mode)m, 0));
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* pl_dtp_run: the three-GEMM schedule at P = 1, forward + backward beyond;
 * against the f64 reference over the whole case table. */
START_TEST(ring_run) {
  int bad = 0;
  for (int ci = 0; ci < NCASES; ci++)
    for (int m = 0; m < 3; m++)
      for (int dt = 0; dt < 2; dt++)
        for (int red = 0; red < 3; red++)
          bad += !agree(run_ring_x(&cases[ci], dt ? PL_BF16 : PL_F32,
                                   (pl_ce_reduction)red, (pl_dtp_mode)m, 1, 1,
                                   0, NULL, NULL));
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* Kept strips change no bit: a budget for none, about half and all of the
 * strips gives the results of budget 0 exactly (the backward reads the
 * forward's GEMM output instead of recomputing it), every mode, both dtypes
 * (bf16 moving weights: the backward's row chunks read slices of them). */
START_TEST(ring_kept_exact) {
  int bad = 0;
  for (int ci = 0; ci < NCASES; ci++)
    for (int m = 1; m < 3; m++)
      for (int dt = 0; dt < 2; dt++) {
        const rcase *c = &cases[ci];
        pl_dtype dty = dt ? PL_BF16 : PL_F32;
        double *ref = NULL, *got = NULL;
        size_t nref = 0, ngot = 0;
        int ok = run_ring_x(c, dty, PL_CE_MEAN, (pl_dtp_mode)m, 1, 0, 0, &ref,
                            &nref);
        /* about a strip of the case (the same on every rank) */
        size_t strip = (size_t)(c->n_base + (P - 1) * c->n_step + 8) *
                       (size_t)(c->block ? c->block : 4096) * 4;
        const size_t budgets[] = {strip / 2, 3 * strip, (size_t)1 << 40};
        for (int b = 0; b < 3; b++) {
          ok &= run_ring_x(c, dty, PL_CE_MEAN, (pl_dtp_mode)m, 1, 0, budgets[b],
                           &got, &ngot);
          ok &= ngot == nref && memcmp(got, ref, sizeof(double) * nref) == 0;
          if (ngot == nref && memcmp(got, ref, sizeof(double) * nref) != 0)
            fprintf(stderr,
                    "r%d/%d case %d %s mode %d budget %zu: results "
                    "differ from budget 0\n",
                    R, P, ci, pl_dtype_name(dty), m, budgets[b]);
          free(got);
        }
        free(ref);
        bad += !agree(ok);
      }
  /* the plan: the whole budget keeps every strip of every meeting */
  pl_dtp_opts o;
  pl_dtp_opts_default(&o);
  o.block = 5;
  o.strip_budget = (size_t)1 << 40;
  o.mode = PL_DTP_MOVE_ACT;
  pl_dtp *d;
  ck_assert_int_eq(pl_dtp_create(comm, PL_F32, 7, 8, 37, &o, &d), PL_OK);
  int64_t col0, vs;
  pl_dtp_shard(d, &col0, &vs);
  ck_assert_int_eq(pl_dtp_kept_strips(d), (int64_t)P * ((vs + 4) / 5));
  ck_assert_uint_eq(pl_dtp_kept_bytes(d), (size_t)P * 7 * (size_t)vs * 4);
  pl_dtp_destroy(d);
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* Disagreeing ranks and bad values are PL_EINVAL on every rank, no hang. */
START_TEST(ring_bad_input) {
  pl_dtp_opts o;
  pl_dtp_opts_default(&o);
  pl_dtp *d = NULL;
  ck_assert_int_eq(pl_dtp_create(comm, PL_F32, 4, 8, R == 0 ? 0 : 10, &o, &d),
                   PL_EINVAL);
  ck_assert_ptr_null(d);
  o.block = R == P - 1 ? 7 : 8;
  pl_status st = pl_dtp_create(comm, PL_F32, 4, 8, 10, &o, &d);
  if (P > 1) {
    ck_assert_int_eq(st, PL_EINVAL);
    ck_assert_ptr_nonnull(strstr(pl_last_error(), "disagree"));
  } else {
    ck_assert_int_eq(st, PL_OK);
    float loss;
    ck_assert_int_eq(pl_dtp_backward(d, pl_dev_stream(dev), NULL, NULL, NULL,
                                     NULL, NULL, NULL),
                     PL_EINVAL); /* no forward yet */
    (void)loss;
    pl_dtp_destroy(d);
  }
  /* the chunked schedule needs the whole vocabulary on one rank */
  pl_dtp_opts_default(&o);
  o.sched = PL_DTP_SCHED_CHUNKED;
  st = pl_dtp_create(comm, PL_F32, 4, 8, 10, &o, &d);
  ck_assert_int_eq(st, P > 1 ? PL_EINVAL : PL_OK);
  if (st == PL_OK) {
    ck_assert_int_eq(pl_dtp_sched_of(d), PL_DTP_SCHED_CHUNKED);
    pl_dtp_destroy(d);
  }
  o.sched = PL_DTP_SCHED_BLOCKED;
  ck_assert_int_eq(pl_dtp_create(comm, PL_F32, 4, 8, 10, &o, &d), PL_OK);
  ck_assert_int_eq(pl_dtp_sched_of(d), PL_DTP_SCHED_BLOCKED);
  pl_dtp_destroy(d);
  pl_dtp_sched sc;
  ck_assert_int_eq(pl_dtp_sched_parse("chunked", &sc), PL_OK);
  ck_assert_int_eq(sc, PL_DTP_SCHED_CHUNKED);
  ck_assert_int_eq(pl_dtp_sched_parse("fast", &sc), PL_EINVAL);
}
END_TEST

int main(int argc, char **argv) {
  const TTest *tests[] = {ring_all,        ring_no_overlap, ring_run,
                          ring_kept_exact, ring_bad_input,  NULL};
  return ref_mpi_main(argc, argv, "ring_dtp", "ring_dtp", 600, tests, &dev,
                      &comm, &P, &R);
}
