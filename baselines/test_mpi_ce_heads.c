/* test_mpi_ce_heads.c — the baseline vocabulary heads beside Ring-DTP,
 * under mpirun -np 1..4: at P = 1 Ring-DTP's forward and backward are the
 * blocked fused head and pl_dtp_run the three-GEMM head, bit for bit (f32 and
 * bf16); the Megatron-style vocab-parallel head (same X on every
 * rank, W sharded) against the f64 dense reference over Ring-DTP's case table,
 * f32 and bf16, all three reductions.  Verdicts are agreed over the ranks
 * before asserting, so a failure on one rank cannot hang the others. */
#include <check.h>

#include "fused_ce.h"
#include "ops/ring_dtp.h"
#include "ops/test_ce_ref.h"
#include "vocab_parallel_ce.h"

static pl_dev *dev;
static pl_comm *comm;
static int P, R;

static int agree(int ok) {
  int64_t v = ok;
  ck_assert_int_eq(pl_host_allreduce_i64(comm, &v, 1, PL_RED_MIN), PL_OK);
  return (int)v;
}

/* P = 1, forward and backward called apart, is the blocked fused head: the
 * same meetings in the same order, so the same bits (f32 and bf16); the fused
 * call pl_dtp_run is the three-GEMM fused head, bit for bit. */
START_TEST(ring_p1_is_fused) {
  if (P != 1)
    return;
  const int64_t n = 23, h = 9, v = 71, block = 8;
  for (int dt = 0; dt < 2; dt++) {
    pl_dtype dty = dt ? PL_BF16 : PL_F32;
    ref_problem p;
    ref_make(&p, n, h, v, dty, 31, 5, 0, 0, 2.0f);
    void *x = dev_up(dev, p.x, (size_t)(n * h), dty, "inputs");
    void *w = dev_up(dev, p.w, (size_t)(h * v), dty, "weights");
    void *t = dev_up_raw(dev, p.t, sizeof(int32_t) * (size_t)n, "inputs");
    void *l1 = dev_poison(dev, 1, PL_F32, "outputs");
    void *l2 = dev_poison(dev, 1, PL_F32, "outputs");
    void *dx1 = dev_poison(dev, (size_t)(n * h), dty, "grads");
    void *dw1 = dev_poison(dev, (size_t)(h * v), dty, "grads");
    void *dx2 = dev_poison(dev, (size_t)(n * h), dty, "grads");
    void *dw2 = dev_poison(dev, (size_t)(h * v), dty, "grads");
    pl_dtp_opts o;
    pl_dtp_opts_default(&o);
    o.block = block;
    pl_dtp *d;
    ck_assert_int_eq(pl_dtp_create(comm, dty, n, h, v, &o, &d), PL_OK);
    pl_stream *s = pl_dev_stream(dev);
    ck_assert_int_eq(pl_dtp_forward(d, s, x, t, w, l1), PL_OK);
    ck_assert_int_eq(pl_dtp_backward(d, s, x, t, w, NULL, dx1, dw1), PL_OK);
    pl_ce_problem pb = {.dt = dty,
                        .n = n,
                        .h = h,
                        .v = v,
                        .red = PL_CE_MEAN,
                        .ignore = PL_CE_IGNORE_INDEX,
                        .block = block,
                        .x = x,
                        .t = t,
                        .w = w,
                        .loss = l2,
                        .dx = dx2,
                        .dw = dw2};
    ck_assert_int_eq(pl_fused_ce_blocked(s, &pb), PL_OK);
    double *a, *b;
    a = dev_down(dev, l1, 1, PL_F32), b = dev_down(dev, l2, 1, PL_F32);
    ck_assert(ref_close("p1 loss", a, b, 1, 0.0));
    free(a), free(b);
    a = dev_down(dev, dx1, (size_t)(n * h), dty);
    b = dev_down(dev, dx2, (size_t)(n * h), dty);
    ck_assert(ref_close("p1 dx", a, b, (size_t)(n * h), 0.0));
    free(a), free(b);
    a = dev_down(dev, dw1, (size_t)(h * v), dty);
    b = dev_down(dev, dw2, (size_t)(h * v), dty);
    ck_assert(ref_close("p1 dw", a, b, (size_t)(h * v), 0.0));
    free(a), free(b);
    /* the fused call runs the three-GEMM schedule: pl_fused_ce's bits */
    ck_assert_int_eq(pl_dtp_sched_of(d), PL_DTP_SCHED_CHUNKED);
    ck_assert_int_eq(pl_dtp_run(d, s, x, t, w, NULL, l1, dx1, dw1), PL_OK);
    ck_assert_int_eq(pl_fused_ce(s, &pb), PL_OK);
    a = dev_down(dev, l1, 1, PL_F32), b = dev_down(dev, l2, 1, PL_F32);
    ck_assert(ref_close("p1 run loss", a, b, 1, 0.0));
    free(a), free(b);
    a = dev_down(dev, dx1, (size_t)(n * h), dty);
    b = dev_down(dev, dx2, (size_t)(n * h), dty);
    ck_assert(ref_close("p1 run dx", a, b, (size_t)(n * h), 0.0));
    free(a), free(b);
    a = dev_down(dev, dw1, (size_t)(h * v), dty);
    b = dev_down(dev, dw2, (size_t)(h * v), dty);
    ck_assert(ref_close("p1 run dw", a, b, (size_t)(h * v), 0.0));
    free(a), free(b);
    pl_dtp_destroy(d);
    pl_free(dev, x), pl_free(dev, w), pl_free(dev, t), pl_free(dev, l1);
    pl_free(dev, l2), pl_free(dev, dx1), pl_free(dev, dw1), pl_free(dev, dx2);
    pl_free(dev, dw2);
    ref_free(&p);
  }
}
END_TEST

/* Megatron-style vocab-parallel CE: same X on every rank, W sharded. */
START_TEST(vocab_parallel) {
  int bad = 0;
  for (int ci = 0; ci < NCASES; ci++)
    for (int dt = 0; dt < 2; dt++)
      for (int red = 0; red < 3; red++) {
        const rcase *c = &cases[ci];
        pl_dtype dty = dt ? PL_BF16 : PL_F32;
        const int64_t n = c->n_base, h = c->h, v = c->v;
        ref_problem p;
        ref_make(&p, n, h, v, dty, 555 + (uint64_t)v, c->ign_every, c->lo,
                 c->hi, c->scale);
        size_t nl = red == PL_CE_NONE ? (size_t)n : 1;
        double *rl = calloc(nl + 1, sizeof(double));
        double *rdx = calloc((size_t)(n * h) + 1, sizeof(double));
        double *rdw = calloc((size_t)(h * v) + 1, sizeof(double));
        ref_solve(&p, (pl_ce_reduction)red, rl, rdx, rdw);
        int64_t col0, vs;
        pl_ce_shard(v, P, R, &col0, &vs);
        float *ws = malloc(sizeof(float) * (size_t)(h * vs + 1));
        double *rdw_s = malloc(sizeof(double) * (size_t)(h * vs + 1));
        for (int64_t k = 0; k < h; k++)
          for (int64_t q = 0; q < vs; q++) {
            ws[k * vs + q] = p.w[k * v + col0 + q];
            rdw_s[k * vs + q] = rdw[k * v + col0 + q];
          }
        void *x = dev_up(dev, p.x, (size_t)(n * h), dty, "inputs");
        void *w = dev_up(dev, ws, (size_t)(h * vs), dty, "weights");
        void *t = dev_up_raw(dev, p.t, sizeof(int32_t) * (size_t)n, "inputs");
        void *dl = dev_up(dev, p.dl, (size_t)n, PL_F32, "inputs");
        void *loss = dev_poison(dev, nl, PL_F32, "outputs");
        void *dx = dev_poison(dev, (size_t)(n * h), dty, "grads");
        void *dw = dev_poison(dev, (size_t)(h * vs), dty, "grads");
        pl_ce_problem pb = {.dt = dty,
                            .n = n,
                            .h = h,
                            .v = v,
                            .red = (pl_ce_reduction)red,
                            .ignore = PL_CE_IGNORE_INDEX,
                            .x = x,
                            .t = t,
                            .w = w,
                            .dloss = red == PL_CE_NONE ? dl : NULL,
                            .loss = loss,
                            .dx = dx,
                            .dw = dw};
        pl_status st = pl_vocab_parallel_ce(comm, pl_dev_stream(dev), &pb);
        ck_assert_msg(st == PL_OK, "vocab_parallel: %s", pl_last_error());
        double *gl = dev_down(dev, loss, nl, PL_F32);
        double *gdx = dev_down(dev, dx, (size_t)(n * h), dty);
        double *gdw = dev_down(dev, dw, (size_t)(h * vs), dty);
        int f32 = dty == PL_F32;
        int cpu = pl_dev_backend(dev) == PL_BACKEND_CPU;
        double tol = f32 ? (cpu ? 1e-6 : 1e-5) : 2e-2;
        char what[160];
        snprintf(what, sizeof what, "vp r%d/%d case %d %s %s", R, P, ci,
                 pl_dtype_name(dty),
                 pl_ce_reduction_name((pl_ce_reduction)red));
        int ok = ref_close(what, gl, rl, nl, f32 ? tol : 2e-5) &&
                 ref_close(what, gdx, rdx, (size_t)(n * h), tol) &&
                 ref_close(what, gdw, rdw_s, (size_t)(h * vs), tol);
        bad += !agree(ok);
        pl_free(dev, x), pl_free(dev, w), pl_free(dev, t), pl_free(dev, dl);
        pl_free(dev, loss), pl_free(dev, dx), pl_free(dev, dw);
        free(gl), free(gdx), free(gdw), free(ws), free(rdw_s);
        free(rl), free(rdx), free(rdw);
        ref_free(&p);
      }
  ck_assert_int_eq(bad, 0);
}
END_TEST

int main(int argc, char **argv) {
  const TTest *tests[] = {ring_p1_is_fused, vocab_parallel, NULL};
  return ref_mpi_main(argc, argv, "ce_heads", "ce head", 600, tests, &dev,
                      &comm, &P, &R);
}
