/* test_mpi_step_agree.c — a local failure on one rank ends the training step
 * on every rank promptly, CPU backend, the tiny model.
 *
 * The last rank gets a device memory limit a few bytes above what it holds
 * after the trainer is built, growing from 1 byte until a step succeeds: so
 * its step fails at every tracked allocation in turn — before the first
 * gather, between a layer's collectives (the attention's all-to-alls with
 * D > 1, the MoE layer's), after a layer's last collective (the shared
 * expert, the attention's local part), in the head, in the backward.  Each
 * step must return on every rank within 5 s (the group's watchdog is 30 s:
 * a rank left in a collective would abort the job), the failing rank with
 * its own PL_ENOMEM, the others with an error naming another rank; nothing
 * tracked stays allocated once the trainer is destroyed.  The limits step
 * finely (NPT even steps up to the peak), so failures land inside layers
 * too: the layers' own agreements (before the attention and the FFN slot,
 * model/layer.c) or the runner's at layer boundaries must have stopped
 * some step (a peer's message names a layer). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plateau/host_device.h"
#include "train/data.h"
#include "train/step.h"
#include "train/trainer_testlib.h"

static pl_dev *dev;
static pl_comm *world, *self;
static int rank, size;

/* One step of a fresh trainer on c with this rank's limit `extra` bytes
 * above what it holds once built (0: none): its status and seconds; the
 * trainer destroyed, no tracked byte left. */
static pl_status limited_step(pl_comm *c, const pl_layout_cfg *lc, size_t extra,
                              double *secs, size_t *above) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  m.E = 12; /* E divisible by W = 1..4 */
  pl_step_cfg sc = pl_step_cfg_default();
  sc.dt = PL_F32;
  sc.moe_lanes = 0;
  pl_mem_stats s0, s1;
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s0), PL_OK);
  pl_trainer *t = NULL;
  pl_status st = pl_trainer_create(dev, c, &m, lc, 16, &sc, &t);
  ck_assert_msg(st == PL_OK, "trainer: %s", pl_last_error());
  pl_data *d;
  ck_assert_int_eq(pl_data_synthetic(m.V, 5, &d), PL_OK);
  const pl_layout_plan *p = pl_trainer_plan(t);
  int32_t *tok = malloc((size_t)(sc.micro * (p->N + 1)) * 4);
  ck_assert_int_eq(pl_data_batch(d, p, sc.micro, 0, tok), PL_OK);
  pl_data_close(d);
  pl_mem_stats sb;
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &sb), PL_OK);
  if (extra)
    pl_mem_set_limit(dev, PL_ARENA_DEVICE, sb.current + extra);
  pl_step_result r;
  const uint64_t t0 = pl_now_ns();
  st = pl_trainer_forward_backward(t, tok, &r);
  *secs = pl_elapsed_s(t0);
  /* the message before anything else may set one */
  static char msg[512];
  snprintf(msg, sizeof msg, "%s", st == PL_OK ? "" : pl_last_error());
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, 0);
  if (st == PL_OK)
    ck_assert_msg(isfinite(r.loss), "loss %g", r.loss);
  *above = st == PL_OK ? (size_t)(r.dev.peak - sb.current) : 0;
  free(tok);
  pl_trainer_destroy(t);
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &s1), PL_OK);
  ck_assert_msg(s1.current <= s0.current, "limit +%zu: %zu bytes left", extra,
                (size_t)(s1.current - s0.current));
  if (st != PL_OK)
    pl_set_error(st, "%s", msg);
  return st;
}

static void one_rank_limited(const pl_layout_cfg *lc) {
  const int bad = size - 1;
  pl_comm *c = NULL;
  ck_assert_int_eq(pl_comm_split(world, 0, rank, &c), PL_OK);
  /* a hang would end in the watchdog's abort of the job after 30 s, far
   * beyond the 5 s a step may take */
  ck_assert_int_eq(pl_comm_set_timeout(c, 30), PL_OK);
  /* the step's peak above what the trainer holds, unlimited; then limits
   * from 1 byte up to it in NPT even steps (an allocation fails where the
   * limit falls below the step's running peak there: every allocation that
   * raises it is met, the layers' late ones too) */
  enum { NPT = 160 };
  double secs;
  size_t peak = 0;
  ck_assert_int_eq(limited_step(c, lc, 0, &secs, &peak), PL_OK);
  int64_t pk = (int64_t)peak;
  ck_assert_int_eq(pl_host_allreduce_i64(world, &pk, 1, PL_RED_MAX), PL_OK);
  int all_failed = 0, passed = 0, at_layer = 0, steps = 0;
  size_t extra = 1;
  for (int i = 0; !passed; i++) {
    ck_assert_msg(i <= NPT + 1, "D=%d: no step passed at the peak", lc->D);
    extra = i == 0 ? 1 : (size_t)pk * (size_t)i / NPT;
    size_t ignored;
    const pl_status mine =
        limited_step(c, lc, rank == bad ? extra : 0, &secs, &ignored);
    steps++;
    ck_assert_msg(secs < 5, "D=%d, limit +%zu: %.1f s", lc->D, extra, secs);
    if (rank == bad && mine != PL_OK)
      ck_assert_msg(mine == PL_ENOMEM && !strstr(pl_last_error(), "another"),
                    "failing rank, limit +%zu: %s (%s)", extra,
                    pl_strerror(mine), pl_last_error());
    if (rank != bad && mine != PL_OK)
      ck_assert_msg(strstr(pl_last_error(), "another rank"),
                    "rank %d, limit +%zu: %s (%s)", rank, extra,
                    pl_strerror(mine), pl_last_error());
    int64_t v[2] = {mine != PL_OK,
                    rank != bad && (strstr(pl_last_error(), "before layer") ||
                                    strstr(pl_last_error(), "layer: another"))};
    if (mine == PL_OK)
      v[1] = 0;
    ck_assert_int_eq(pl_host_allreduce_i64(world, v, 2, PL_RED_SUM), PL_OK);
    /* one rank's failure is every rank's */
    ck_assert_msg(v[0] == 0 || v[0] == size, "limit +%zu: %lld of %d failed",
                  extra, (long long)v[0], size);
    all_failed += v[0] == size;
    at_layer += v[1] > 0;
    passed = v[0] == 0;
  }
  ck_assert_int_ge(all_failed, 1);
  if (size > 1)
    ck_assert_msg(at_layer >= 1, "no step stopped at a layer's agreement");
  if (rank == 0)
    printf("# D=%d: %d steps, %d failed on every rank, %d at a layer's "
           "agreement\n",
           lc->D, steps, all_failed, at_layer);
  pl_comm_destroy(c);
}

START_TEST(one_rank_oom_step) {
  const pl_layout_cfg lc = {1, 1, 0, 0, 0};
  one_rank_limited(&lc);
}
END_TEST

/* the attention's all-to-alls (Ulysses over D = 2 ranks) */
START_TEST(one_rank_oom_step_ulysses) {
  if (size % 2)
    return;
  const pl_layout_cfg lc = {2, 1, 0, 0, 0};
  one_rank_limited(&lc);
}
END_TEST

int main(int argc, char **argv) {
  const TTest *tests[] = {one_rank_oom_step, one_rank_oom_step_ulysses, NULL};
  return tt_cpu_main(argc, argv, "step_agree", 600, tests, &dev, &world, &self,
                     &rank, &size);
}
