/* test_mpi_vgroups.c — virtual Ulysses and Ring-DTP groups in the trainer
 * (train/layout.h), CPU backend, f32, under mpirun -np 1..4:
 *
 *   present   W_v = W with D and P real groups of present ranks (np 2 and
 *             4: D = P = 2) is the real run: losses, the step's peaks and
 *             every gradient gathered are bit for bit those of the same run
 *             without W_v, no group is virtual and no stand-in runs;
 *   as_real   a virtual D = 2 and P = 2 on one rank (W_v 2, the others
 *             idle) against the real two-rank run (ranks 0 and 1, D = P =
 *             2) on rank 0: the same shapes (tokens, heads, the vocabulary
 *             shard, unit groups), the same tracked device and pinned-host
 *             peaks tag by tag, and per collective of the D- and P-group the
 *             same calls and bytes; a dense model (its memory does not depend
 *             on routing) with V not divisible by P (uneven shards travel);
 *   slots     a proxy with fewer experts present than k (tiny at W_v 8: one
 *             of its 8 experts, k = 2) routes among two router slots per
 *             present expert and its steps run with finite losses.
 * The planner's side of the same proxies is engine/plan/
 * test_mpi_plan_virtual.c (the planner sits above the trainer). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "train/data.h"
#include "train/step.h"
#include "train/trainer_testlib.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

static tt_cfg dense_model(void) {
  tt_cfg c = tt_cfg_tiny();
  c.m.dense_layers = c.m.L; /* no routing: memory is routing-free */
  c.m.V = 511;              /* shards of 256 and 255 columns at P = 2 */
  c.sc.dt = PL_F32;
  c.sc.oo.bucket = 5000;
  c.sc.profile = true;
  c.S = 64;
  return c;
}

typedef struct run_out {
  pl_step_result r[2];
  double loss[2];
  pl_layout_plan plan;
  pl_comm_stats sp, vp;
  int sp_virtual, vp_virtual;
  float *grad; /* every parameter's gradient, concatenated (real runs) */
  size_t ngrad;
} run_out;

/* Two steps of c on the ranks of w; the last layout's counters. */
static void run(pl_comm *w, const tt_cfg *c, bool grads, run_out *o) {
  memset(o, 0, sizeof *o);
  pl_trainer *t;
  ck_assert_msg(pl_trainer_create(dev, w, &c->m, &c->lc, c->S, &c->sc, &t) ==
                    PL_OK,
                "%s", pl_last_error());
  pl_data *data;
  ck_assert_int_eq(pl_data_synthetic(c->m.V, 5, &data), PL_OK);
  ck_assert_int_eq(pl_trainer_run(t, data, 0, 2, o->loss, o->r), PL_OK);
  const pl_layout *l = pl_trainer_layout(t);
  o->plan = l->plan;
  pl_comm_stats_get(l->sp, &o->sp);
  pl_comm_stats_get(l->vp, &o->vp);
  o->sp_virtual = pl_comm_is_virtual(l->sp);
  o->vp_virtual = pl_comm_is_virtual(l->vp);
  if (grads) {
    int32_t *tok = malloc((size_t)pl_trainer_tokens_per_rank(t) * 4);
    ck_assert_int_eq(pl_data_batch(data, &l->plan, 1, 2, tok), PL_OK);
    ck_assert_int_eq(pl_trainer_forward_backward(t, tok, NULL), PL_OK);
    free(tok);
    for (int i = 0; i < pl_trainer_nparams(t); i++) {
      pl_param_info pi;
      ck_assert_int_eq(pl_trainer_param_info(t, i, &pi), PL_OK);
      const size_t n = (size_t)(pi.rows * pi.cols);
      o->grad = realloc(o->grad, (o->ngrad + n) * sizeof(float));
      ck_assert_ptr_nonnull(o->grad);
      ck_assert_int_eq(pl_trainer_gather(t, i, true, o->grad + o->ngrad),
                       PL_OK);
      o->ngrad += n;
    }
  }
  pl_data_close(data);
  pl_trainer_destroy(t);
}

START_TEST(present) {
  if (size % 2) /* D = P = 2 real needs an even world */
    return;
  tt_cfg c = dense_model();
  c.m.dense_layers = 1; /* MoE layers too: every rank present, routing real */
  c.m.V = 512;
  c.lc = (pl_layout_cfg){2, 2, 0, 0, 0};
  run_out a, b;
  run(world, &c, true, &a);
  c.lc.W_v = size;
  run(world, &c, true, &b);
  ck_assert(!b.plan.d_virtual && !b.plan.p_virtual);
  ck_assert(!b.sp_virtual && !b.vp_virtual);
  ck_assert_msg(b.sp.standins == 0 && b.vp.standins == 0,
                "stand-ins in a real run: %llu, %llu",
                (unsigned long long)b.sp.standins,
                (unsigned long long)b.vp.standins);
  ck_assert(b.sp.calls[PL_COMM_ALLTOALLV] > 0); /* real traffic */
  for (int s = 0; s < 2; s++) {
    ck_assert_msg(!memcmp(&a.loss[s], &b.loss[s], sizeof(double)),
                  "step %d loss %.17g vs %.17g", s, a.loss[s], b.loss[s]);
    ck_assert_int_eq(a.r[s].dev.peak, b.r[s].dev.peak);
  }
  ck_assert_int_eq(a.ngrad, b.ngrad);
  ck_assert_msg(!memcmp(a.grad, b.grad, a.ngrad * sizeof(float)),
                "gradients differ");
  free(a.grad), free(b.grad);
}
END_TEST

static size_t tag_peak(const pl_mem_stats *m, const char *tag) {
  for (int i = 0; i < m->n_tags; i++)
    if (!strcmp(m->tag_peak[i].tag, tag))
      return m->tag_peak[i].bytes;
  return 0;
}

/* b has every tag of a with the same peak (and the same count of tags) */
static void same_tags(const char *what, const pl_mem_stats *a,
                      const pl_mem_stats *b) {
  ck_assert_msg(a->peak == b->peak, "%s peak: real %zu, virtual %zu", what,
                a->peak, b->peak);
  for (int i = 0; i < a->n_tags; i++)
    ck_assert_msg(a->tag_peak[i].bytes == tag_peak(b, a->tag_peak[i].tag),
                  "%s tag %s: real %zu, virtual %zu", what, a->tag_peak[i].tag,
                  a->tag_peak[i].bytes, tag_peak(b, a->tag_peak[i].tag));
  for (int i = 0; i < b->n_tags; i++)
    ck_assert_msg(b->tag_peak[i].bytes == tag_peak(a, b->tag_peak[i].tag),
                  "%s tag %s only in the virtual run", what,
                  b->tag_peak[i].tag);
}

static void same_bytes(const char *group, const pl_comm_stats *a,
                       const pl_comm_stats *b) {
  for (int op = 0; op < PL_COMM_NOPS; op++)
    ck_assert_msg(
        a->calls[op] == b->calls[op] && a->sent[op] == b->sent[op] &&
            a->recv[op] == b->recv[op],
        "%s %s: real %llu calls %llu/%llu B, virtual %llu calls "
        "%llu/%llu B",
        group, pl_comm_op_name(op), (unsigned long long)a->calls[op],
        (unsigned long long)a->sent[op], (unsigned long long)a->recv[op],
        (unsigned long long)b->calls[op], (unsigned long long)b->sent[op],
        (unsigned long long)b->recv[op]);
}

START_TEST(as_real) {
  tt_cfg c = dense_model();
  c.lc = (pl_layout_cfg){2, 2, 2, 0, 0};
  run_out v = {0}, r = {0};
  pl_comm *self = NULL, *pair = NULL;
  ck_assert_int_eq(pl_comm_split(world, rank == 0 ? 0 : -1, 0, &self), PL_OK);
  if (self) { /* rank 0 alone plays rank 0 of the 2-rank run */
    run(self, &c, false, &v);
    ck_assert(v.plan.d_virtual && v.plan.p_virtual && v.sp_virtual &&
              v.vp_virtual);
    ck_assert(v.sp.standins > 0 && v.vp.standins > 0);
    pl_comm_destroy(self);
  }
  if (size < 2)
    return;
  ck_assert_int_eq(pl_comm_split(world, rank < 2 ? 0 : -1, rank, &pair), PL_OK);
  if (!pair)
    return;
  run(pair, &c, false, &r);
  pl_comm_destroy(pair);
  if (rank != 0)
    return;
  /* shapes */
  const pl_layout_plan *a = &r.plan, *b = &v.plan;
  ck_assert(!a->d_virtual && !a->p_virtual);
  ck_assert_int_eq(a->N, b->N);
  ck_assert_int_eq(a->S, b->S);
  ck_assert_int_eq(a->d_rank, b->d_rank);
  ck_assert_int_eq(a->v_col0, b->v_col0);
  ck_assert_int_eq(a->v_cols, b->v_cols);
  ck_assert_int_eq(a->zero_vsize, b->zero_vsize);
  ck_assert_int_eq(a->head_vsize, b->head_vsize);
  /* tracked peaks by tag, both steps */
  for (int s = 0; s < 2; s++) {
    same_tags("device", &r.r[s].dev, &v.r[s].dev);
    same_tags("pinned host", &r.r[s].host, &v.r[s].host);
  }
  /* bytes per collective of the D- and P-group */
  same_bytes("D-group", &r.sp, &v.sp);
  same_bytes("P-group", &r.vp, &v.vp);
  ck_assert(r.sp.calls[PL_COMM_ALLTOALLV] > 0 &&
            r.vp.calls[PL_COMM_SENDRECV] > 0);
}
END_TEST

START_TEST(slots) {
  pl_comm *self = NULL;
  ck_assert_int_eq(pl_comm_split(world, rank == 0 ? 0 : -1, 0, &self), PL_OK);
  if (!self)
    return;
  tt_cfg c = dense_model();
  c.m.dense_layers = 1; /* layers 1, 2: MoE, 8 experts, k = 2 */
  c.m.V = 512;
  c.lc = (pl_layout_cfg){2, 1, 8, 0, 0};
  c.sc.moe_lanes = 0;
  pl_layout_plan lp;
  ck_assert_int_eq(pl_layout_plan_make(&c.m, &c.lc, 1, 0, c.S, &lp), PL_OK);
  ck_assert_int_eq(lp.E_moe, 1);
  ck_assert_int_eq(lp.E_route, 2);
  pl_trainer *t;
  ck_assert_msg(pl_trainer_create(dev, self, &c.m, &c.lc, c.S, &c.sc, &t) ==
                    PL_OK,
                "%s", pl_last_error());
  pl_data *data;
  ck_assert_int_eq(pl_data_synthetic(c.m.V, 5, &data), PL_OK);
  double loss[2];
  pl_step_result r[2];
  ck_assert_int_eq(pl_trainer_run(t, data, 0, 2, loss, r), PL_OK);
  for (int s = 0; s < 2; s++)
    ck_assert_msg(isfinite(loss[s]), "step %d loss %g", s, loss[s]);
  pl_data_close(data);
  pl_trainer_destroy(t);
  pl_comm_destroy(self);
}
END_TEST

int main(int argc, char **argv) {
  if (pl_init(&argc, &argv) != PL_OK)
    return 2;
  if (pl_dev_create(PL_BACKEND_CPU, 0, &dev) != PL_OK ||
      pl_comm_world(dev, &world) != PL_OK) {
    fprintf(stderr, "set-up: %s\n", pl_last_error());
    return 3;
  }
  rank = pl_comm_rank(world), size = pl_comm_size(world);
  pl_comm_set_timeout(world, 120.0);
  const TTest *tests[] = {present, as_real, slots, NULL};
  const int nf = pl_check_run("virtual groups", 300, tests, rank, world);
  pl_comm_destroy(world);
  pl_dev_destroy(dev);
  pl_finalize();
  return nf ? 1 : 0;
}
