/* test_stream_adamw.c — OffloadStreamAdamW on the CPU backend equals the
 * reference AdamW bit for bit over many steps (master, m, v and the bf16
 * working weights), over a shape table that reaches every branch: sizes not
 * a multiple of β or of a SIMD width, β larger than a tensor and than all
 * parameters, buckets spanning tensors and tensors split over buckets, an
 * empty tensor, s = 1..5, clipping on and off, weight decay 0 and not, bf16
 * and f32 gradients, gradients on the device or on the host, hybrid shares
 * 0, a fixed share, all-CPU and auto; and the tracked device staging peak is
 * <= s·β·16 bytes.  Also bad input -> PL_EINVAL, and OOM -> PL_ENOMEM. */
#include <check.h>

#include "ops/adamw_testlib.h"

static pl_dev *dev;
static void setup(void) {
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
}
static void teardown(void) {
  pl_dev_destroy(dev);
}

/* name, nt, numel[], β, s, max_norm, wd, gdt, grad_on_host, share, steps */
/* One case a line (formatted, each would take thirteen). */
/* clang-format off */
static const tl_case cases[] = {
    {"one tensor, beta divides", 1, {4096}, 1024, 2, 0, 0.01, PL_BF16, 0, 0, 4, 0, 0},
    {"odd sizes, spanning", 4, {1, 1000, 77, 3333}, 997, 2, 0, 0.01, PL_BF16, 0, 0, 5, 0, 0},
    {"beta > tensor", 3, {17, 5, 129}, 100, 3, 0, 0.0, PL_BF16, 0, 0, 3, 0, 0},
    {"beta > all params", 2, {300, 211}, 100000, 4, 0, 0.01, PL_BF16, 0, 0, 3, 0, 0},
    {"empty tensor inside", 3, {513, 0, 1025}, 256, 1, 0, 0.01, PL_F32, 0, 0, 3, 0, 0},
    {"s=1 clip", 2, {2049, 4097}, 1000, 1, 1.0, 0.01, PL_BF16, 0, 0, 6, 0, 0},
    {"s=2 clip wd0", 2, {2049, 4097}, 1000, 2, 1.0, 0.0, PL_BF16, 0, 0, 6, 0, 0},
    {"s=3 clip f32", 2, {2049, 4097}, 1000, 3, 1.0, 0.1, PL_F32, 0, 0, 6, 0, 0},
    {"s=4", 3, {999, 1001, 3}, 333, 4, 0, 0.01, PL_BF16, 0, 0, 5, 0, 0},
    {"s=5 clip", 3, {999, 1001, 3}, 333, 5, 1.0, 0.01, PL_BF16, 0, 0, 5, 0, 0},
    {"grads on host", 3, {1023, 17, 2000}, 500, 2, 1.0, 0.01, PL_BF16, 1, 0, 4, 0, 0},
    {"grads on host f32", 2, {1023, 2000}, 700, 3, 0, 0.01, PL_F32, 1, 0, 4, 0, 0},
    {"hybrid 0.5", 4, {1, 1000, 77, 3333}, 500, 2, 1.0, 0.01, PL_BF16, 0, 0.5, 5, 0, 0},
    {"hybrid all cpu", 3, {999, 1001, 3}, 250, 2, 1.0, 0.01, PL_F32, 0, 1.0, 4, 0, 0},
    {"hybrid auto", 3, {4999, 1001, 3}, 300, 3, 1.0, 0.01, PL_BF16, 0, -1, 6, 0, 0},
    {"hybrid grads on host", 2, {3001, 999}, 400, 2, 1.0, 0.0, PL_BF16, 1, 0.3, 4, 0, 0},
};
/* clang-format on */
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

START_TEST(stream_equals_reference) {
  const tl_case *c = &cases[_i];
  tl_result R;
  pl_status st = tl_run(dev, c, 42 + (uint64_t)_i, &R);
  ck_assert_msg(st == PL_OK, "%s: status %s: %s", c->name, pl_strerror(st),
                pl_last_error());
  ck_assert_msg(R.ok, "%s: %s", c->name, R.msg);
  size_t bound = (size_t)c->slots * c->bucket * 16;
  ck_assert_msg(R.staging_peak > 0 && R.staging_peak <= bound,
                "%s: staging peak %zu > s*beta*16 = %zu", c->name,
                R.staging_peak, bound);
  ck_assert_uint_eq(R.staging_peak, R.staging_bytes);
  /* the split: share 0 all on the stream, 1 all on the CPU, in between both */
  ck_assert_uint_eq(R.gpu_buckets + R.cpu_buckets, R.nbuckets);
  if (c->share == 0)
    ck_assert_uint_eq(R.cpu_buckets, 0);
  if (c->share == 1)
    ck_assert_uint_eq(R.gpu_buckets, 0);
  if (c->share > 0 && c->share < 1)
    ck_assert_msg(R.cpu_buckets > 0 && R.gpu_buckets > 0, "%s: split %zu/%zu",
                  c->name, R.gpu_buckets, R.cpu_buckets);
  if (c->share < 0)
    ck_assert_msg(R.next_share >= 0 && R.next_share <= 1, "%s: share %g",
                  c->name, R.next_share);
  if (c->max_norm > 0)
    ck_assert_msg(R.clipped_steps > 0 && R.clipped_steps < c->steps,
                  "%s: clipping active on %d of %d steps (want some, not all)",
                  c->name, R.clipped_steps, c->steps);
}
END_TEST

/* The exact staging figure: min(s, nb) slots of min(β, Θ)·(12 [+ gsz]). */
START_TEST(staging_bytes_exact) {
  pl_bf16 *w;
  void *g;
  ck_assert_int_eq(
      pl_alloc(dev, PL_ARENA_DEVICE, 10000 * 2, "weights", (void **)&w), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 10000 * 2, "grads", &g),
                   PL_OK);
  pl_adamw_param prm = {w, g, 10000};
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  pl_stream_adamw_cfg cfg = pl_stream_adamw_cfg_default();
  cfg.bucket = 3000;
  cfg.slots = 3;
  pl_stream_adamw *o;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o), PL_OK);
  ck_assert_uint_eq(pl_stream_adamw_nbuckets(o), 4);
  ck_assert_uint_eq(pl_stream_adamw_staging_bytes(o), 3 * 3000 * 12);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "optim_staging"),
                    3 * 3000 * 12);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim"),
                    10000 * 12);
  pl_stream_adamw_destroy(o);
  cfg.bucket = 1 << 20; /* beta > params: one slot of 10000 */
  cfg.slots = 5;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o), PL_OK);
  ck_assert_uint_eq(pl_stream_adamw_staging_bytes(o), 10000 * 12);
  pl_stream_adamw_destroy(o);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "optim_staging"),
                    0);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim"), 0);
  pl_free(dev, w);
  pl_free(dev, g);
}
END_TEST

START_TEST(bad_input_and_oom) {
  pl_bf16 *w;
  void *g;
  ck_assert_int_eq(
      pl_alloc(dev, PL_ARENA_DEVICE, 1000 * 2, "weights", (void **)&w), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 1000 * 2, "grads", &g),
                   PL_OK);
  pl_adamw_param prm = {w, g, 1000};
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  pl_stream_adamw_cfg cfg = pl_stream_adamw_cfg_default();
  pl_stream_adamw *o = (pl_stream_adamw *)1;
  cfg.slots = 0;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                   PL_EINVAL);
  ck_assert_ptr_null(o);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "slots=0"));
  cfg = pl_stream_adamw_cfg_default();
  cfg.bucket = 0;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                   PL_EINVAL);
  cfg = pl_stream_adamw_cfg_default();
  cfg.grad_dtype = PL_I32;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                   PL_EINVAL);
  cfg = pl_stream_adamw_cfg_default();
  cfg.share = 1.5;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                   PL_EINVAL);
  cfg = pl_stream_adamw_cfg_default();
  hp.beta1 = 1.0;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                   PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "beta1"));
  hp = pl_adamw_hparams_default();
  hp.lr = -1;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                   PL_EINVAL);
  hp = pl_adamw_hparams_default();
  prm.numel = 0;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                   PL_EINVAL);
  prm.numel = 1000;
  /* OOM: the device arena cannot hold the staging; nothing leaks */
  size_t before = pl_mem_tag_current(dev, PL_ARENA_HOST, "optim");
  pl_mem_stats ms;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ms);
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, ms.current + 500 * 12 + 100);
  cfg.bucket = 500;
  cfg.slots = 2;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                   PL_ENOMEM);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim"), before);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "optim_staging"),
                    0);
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, 0);
  pl_free(dev, w);
  pl_free(dev, g);
}
END_TEST

/* Auto share: after steps where both engines ran, the share is
 * r_cpu/(r_cpu+r_gpu): strictly inside (0, 1), and moved from the initial
 * 0.5 (rates are never exactly equal). */
START_TEST(auto_share_updates) {
  tl_case c = {"auto", 1, {200000}, 10000, 2, 0, 0.01, PL_BF16, 0, -1, 3, 0, 0};
  tl_result R;
  ck_assert_int_eq(tl_run(dev, &c, 7, &R), PL_OK);
  ck_assert_msg(R.ok, "%s", R.msg);
  ck_assert_msg(R.next_share > 0 && R.next_share < 1 && R.next_share != 0.5,
                "share %g", R.next_share);
}
END_TEST

/* The hybrid's pinned host buffers: the CPU share's gradients (all of them
 * fetched at the start of a step), the weights written over bf16 ones;
 * a weights buffer beside f32 gradients; every bucket when the share is
 * auto. */
START_TEST(hybrid_host_bytes) {
  pl_bf16 *w;
  void *g;
  ck_assert_int_eq(
      pl_alloc(dev, PL_ARENA_DEVICE, 4400 * 2, "weights", (void **)&w), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 4400 * 4, "grads", &g),
                   PL_OK);
  pl_adamw_param prm = {w, g, 4400};
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  pl_stream_adamw_cfg cfg = pl_stream_adamw_cfg_default();
  cfg.bucket = 500; /* 9 buckets */
  const struct {
    pl_dtype gdt;
    double share;
    size_t bytes;
  } want[] = {{PL_BF16, 0.5, 5 * 500 * 2}, /* round(4.5 + 0.5) = 5 */
              {PL_F32, 0.5, 5 * 500 * (4 + 2)},
              {PL_BF16, -1, 9 * 500 * 2},
              {PL_BF16, 0, 0}};
  for (int i = 0; i < 4; i++) {
    cfg.grad_dtype = want[i].gdt;
    cfg.share = want[i].share;
    pl_stream_adamw *o;
    ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                     PL_OK);
    ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "optim_hybrid"),
                      want[i].bytes);
    ck_assert_uint_eq(pl_stream_adamw_hybrid_bytes(4400, &cfg), want[i].bytes);
    pl_stream_adamw_destroy(o);
  }
  pl_free(dev, w);
  pl_free(dev, g);
}
END_TEST

/* Optimizer-state residency: none, the last buckets, half, all of them —
 * the same bits as the reference (and so as the all-streamed step); the
 * resident state is device memory of tag optim_resident (12 B/param), the
 * staging shrinks to the streamed buckets (none when all are resident), and
 * nothing resident crosses the link.  With the hybrid, the CPU share comes
 * from the streamed buckets. */
START_TEST(resident_equals_reference) {
  const tl_case c[] = {
      {"spanning, clip",
       4,
       {1, 1000, 77, 3333},
       500,
       2,
       1.0,
       0.01,
       PL_BF16,
       0,
       0,
       4,
       0,
       0},
      {"f32 grads, s=3",
       2,
       {2049, 4097},
       1000,
       3,
       1.0,
       0.1,
       PL_F32,
       0,
       0,
       4,
       0,
       0},
      {"hybrid 0.5",
       4,
       {1, 1000, 77, 3333},
       500,
       2,
       1.0,
       0.01,
       PL_BF16,
       0,
       0.5,
       4,
       0,
       0},
  };
  for (int k = 0; k < 3; k++) {
    size_t total = 0;
    for (int i = 0; i < c[k].nt; i++)
      total += c[k].numel[i];
    const size_t nb = (total + c[k].bucket - 1) / c[k].bucket;
    const size_t res[4] = {0, total - c[k].bucket * (nb - 1),
                           total - c[k].bucket * (nb / 2), total};
    for (int r = 0; r < 4; r++) {
      tl_result R;
      pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
      pl_status st = tl_run_resident(dev, &c[k], 11 + (uint64_t)k, res[r], &R);
      ck_assert_msg(st == PL_OK, "%s resident %zu: %s", c[k].name, res[r],
                    pl_last_error());
      ck_assert_msg(R.ok, "%s resident %zu: %s", c[k].name, res[r], R.msg);
      ck_assert_uint_eq(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "optim_resident"),
                        res[r] * 12);
      const size_t ns = (total - res[r] + c[k].bucket - 1) / c[k].bucket;
      ck_assert_uint_eq(R.gpu_buckets + R.cpu_buckets, ns);
      const size_t slots = (size_t)c[k].slots < ns ? (size_t)c[k].slots : ns;
      ck_assert_uint_eq(R.staging_bytes, slots * c[k].bucket * 12);
    }
  }
}
END_TEST

/* Whole buckets from the end: the bytes of n buckets' state, rounded down;
 * a resident count that is not whole buckets, or with host gradients, is
 * refused. */
START_TEST(resident_elems_and_refusals) {
  ck_assert_uint_eq(pl_stream_adamw_resident_elems(250, 100, false, 0), 0);
  ck_assert_uint_eq(pl_stream_adamw_resident_elems(250, 100, false, 12 * 49),
                    0);
  ck_assert_uint_eq(pl_stream_adamw_resident_elems(250, 100, false, 12 * 50),
                    50);
  ck_assert_uint_eq(pl_stream_adamw_resident_elems(250, 100, false, 12 * 149),
                    50);
  ck_assert_uint_eq(pl_stream_adamw_resident_elems(250, 100, false, 12 * 150),
                    150);
  ck_assert_uint_eq(pl_stream_adamw_resident_elems(250, 100, false, 12 * 250),
                    250);
  ck_assert_uint_eq(pl_stream_adamw_resident_elems(250, 100, true, 0), 250);
  ck_assert_uint_eq(pl_stream_adamw_resident_elems(250, 1000, false, 12 * 249),
                    0);
  pl_bf16 *w;
  void *g;
  ck_assert_int_eq(
      pl_alloc(dev, PL_ARENA_DEVICE, 250 * 2, "weights", (void **)&w), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 250 * 2, "grads", &g), PL_OK);
  pl_adamw_param prm = {w, g, 250};
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  pl_stream_adamw_cfg cfg = pl_stream_adamw_cfg_default();
  cfg.bucket = 100;
  pl_stream_adamw *o = NULL;
  const size_t bad[2] = {60, 251};
  for (int i = 0; i < 2; i++) {
    cfg.resident = bad[i];
    ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                     PL_EINVAL);
    ck_assert_ptr_null(o);
    ck_assert_ptr_nonnull(strstr(pl_last_error(), "resident="));
  }
  cfg.resident = 150;
  cfg.grad_on_host = true;
  ck_assert_int_eq(pl_stream_adamw_create(dev, &hp, &cfg, 1, &prm, &o),
                   PL_EINVAL);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "optim_resident"),
                    0);
  pl_free(dev, w);
  pl_free(dev, g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("stream_adamw");
  TCase *tc = tcase_create("cpu");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, stream_equals_reference, 0, NCASES);
  tcase_add_test(tc, staging_bytes_exact);
  tcase_add_test(tc, bad_input_and_oom);
  tcase_add_test(tc, auto_share_updates);
  tcase_add_test(tc, hybrid_host_bytes);
  tcase_add_test(tc, resident_equals_reference);
  tcase_add_test(tc, resident_elems_and_refusals);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
