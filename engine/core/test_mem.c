/* test_mem.c — the tracked allocator: current/peak per arena, the live set at
 * the peak, per-tag peaks, frees, limits as OOM statuses, arenas kept apart,
 * the device's most bytes per phase. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plateau/dev.h"
#include "plateau/kernels.h"
#include "plateau/status.h"
#include "plateau/tensor.h"

static pl_dev *dev;

static void setup(void) {
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
}
static void teardown(void) {
  pl_dev_destroy(dev);
}

static size_t at_peak(const pl_mem_stats *st, const char *tag) {
  for (int i = 0; i < st->n_tags; i++)
    if (!strcmp(st->at_peak[i].tag, tag))
      return st->at_peak[i].bytes;
  return 0;
}

START_TEST(peak_and_live_set) {
  void *w, *d1, *d2, *g;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 1000, "weights", &w), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 500, "dispatch", &d1), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 700, "dispatch", &d2), PL_OK);
  /* peak = 2200: weights 1000 + dispatch 1200 */
  pl_free(dev, d1);
  pl_free(dev, d2);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 900, "grads", &g), PL_OK);
  /* now 1900 < 2200: the peak snapshot must not change */
  pl_mem_stats st;
  ck_assert_int_eq(pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st), PL_OK);
  ck_assert_uint_eq(st.current, 1900);
  ck_assert_uint_eq(st.peak, 2200);
  ck_assert_uint_eq(at_peak(&st, "weights"), 1000);
  ck_assert_uint_eq(at_peak(&st, "dispatch"), 1200);
  ck_assert_uint_eq(at_peak(&st, "grads"), 0);
  ck_assert_uint_eq(st.n_alloc, 4);
  ck_assert_uint_eq(st.n_free, 2);
  ck_assert_uint_eq(st.pool_high, st.peak); /* CPU: no separate pool */
  ck_assert_uint_eq(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "dispatch"), 1200);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "dispatch"), 0);
  ck_assert_uint_eq(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "grads"), 900);
  char buf[256];
  pl_mem_live_set_str(&st, buf, sizeof buf);
  ck_assert_msg(strstr(buf, "dispatch=1.17KiB") == buf, "largest first: %s",
                buf);
  ck_assert_ptr_nonnull(strstr(buf, "weights=1000B"));
  /* a new higher peak replaces the snapshot */
  void *big;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 5000, "logits", &big), PL_OK);
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st);
  ck_assert_uint_eq(st.peak, 6900);
  ck_assert_uint_eq(at_peak(&st, "dispatch"), 0);
  ck_assert_uint_eq(at_peak(&st, "logits"), 5000);
  /* reset: peak := current, per-tag peaks := now */
  pl_free(dev, big);
  pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st);
  ck_assert_uint_eq(st.peak, 1900);
  ck_assert_uint_eq(pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "dispatch"), 0);
  pl_free(dev, w);
  pl_free(dev, g);
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st);
  ck_assert_uint_eq(st.current, 0);
}
END_TEST

START_TEST(arenas_are_separate) {
  void *h, *d;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_HOST, 4096, "boundary", &h), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 100, "boundary", &d), PL_OK);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_HOST, "boundary"), 4096);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "boundary"), 100);
  memset(h, 0x5a, 4096);
  ck_assert_int_eq(pl_memcpy_async(pl_dev_stream(dev), d, h, 100), PL_OK);
  ck_assert_int_eq(((unsigned char *)d)[99], 0x5a);
  pl_free(dev, h);
  pl_free(dev, d);
  pl_mem_stats st;
  pl_mem_stats_get(dev, PL_ARENA_HOST, &st);
  ck_assert_uint_eq(st.current, 0);
  ck_assert_uint_eq(st.peak, 4096);
}
END_TEST

START_TEST(limit_is_oom_status) {
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, 10000);
  void *a, *b = (void *)0x1;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 6000, "dispatch", &a), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 6000, "dispatch", &b),
                   PL_ENOMEM);
  ck_assert_ptr_null(b);
  ck_assert_msg(strstr(pl_last_error(), "6000 bytes for 'dispatch'") != NULL,
                "%s", pl_last_error());
  pl_mem_stats st;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st);
  ck_assert_uint_eq(st.current, 6000);
  ck_assert_uint_eq(st.n_failed, 1);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 4000, "dispatch", &b), PL_OK);
  pl_free(dev, a);
  pl_free(dev, b);
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, 0);
  /* a hardware failure is a status too (absurd size) */
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, SIZE_MAX / 2, "huge", &a),
                   PL_ENOMEM);
  ck_assert_ptr_null(a);
}
END_TEST

START_TEST(many_allocations_and_zero_bytes) {
  enum { N = 5000 };
  static void *p[N];
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(i % 7) * 8,
                              i % 2 ? "a" : "b", &p[i]),
                     PL_OK);
  for (int i = 0; i < N; i++)
    ck_assert_ptr_nonnull(p[i]);
  size_t expect = 0;
  for (int i = 0; i < N; i++)
    expect += (size_t)(i % 7) * 8;
  pl_mem_stats st;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st);
  ck_assert_uint_eq(st.current, expect);
  for (int i = 0; i < N; i += 2)
    pl_free(dev, p[i]);
  for (int i = 1; i < N; i += 2)
    pl_free(dev, p[i]);
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st);
  ck_assert_uint_eq(st.current, 0);
  ck_assert_uint_eq(st.n_free, N);
  pl_free(dev, NULL);
}
END_TEST

START_TEST(many_tags_overflow_bucket) {
  void *p[40];
  char names[40][16];
  for (int i = 0; i < 40; i++) {
    snprintf(names[i], sizeof names[i], "tag%d", i);
    ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 10, names[i], &p[i]),
                     PL_OK);
  }
  pl_mem_stats st;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st);
  ck_assert_int_eq(st.n_tags, PL_MEM_MAX_TAGS);
  ck_assert_uint_eq(st.current, 400);
  ck_assert_uint_eq(pl_mem_tag_current(dev, PL_ARENA_DEVICE, "other"),
                    10 * (40 - (PL_MEM_MAX_TAGS - 1)));
  for (int i = 0; i < 40; i++)
    pl_free(dev, p[i]);
}
END_TEST

/* The probe under a limit L with w bytes already live: its ceiling is the
 * whole arena within one grain (everything live counted), everything it
 * took is freed, and a host arena without a limit is refused. */
START_TEST(probe_finds_the_limit) {
  const size_t L = 100u << 20, grain = 1u << 20;
  void *w;
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, L);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 3000000, "weights", &w),
                   PL_OK);
  size_t c = 0;
  ck_assert_int_eq(
      pl_mem_probe_ceiling(dev, PL_ARENA_DEVICE, 8 * grain, grain, &c), PL_OK);
  ck_assert_msg(c <= L && c > L - grain, "ceiling %zu of limit %zu", c, L);
  pl_mem_stats st;
  pl_mem_stats_get(dev, PL_ARENA_DEVICE, &st);
  ck_assert_uint_eq(st.current, 3000000);
  pl_free(dev, w);
  ck_assert_int_eq(
      pl_mem_probe_ceiling(dev, PL_ARENA_DEVICE, grain, 2 * grain, &c),
      PL_EINVAL);
  pl_mem_set_limit(dev, PL_ARENA_DEVICE, 0);
  ck_assert_int_eq(
      pl_mem_probe_ceiling(dev, PL_ARENA_DEVICE, 8 * grain, grain, &c),
      PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "pl_mem_set_limit"));
}
END_TEST

START_TEST(untracked_free_aborts) {
  int x;
  pl_free(dev, &x); /* a bug, not bad input: PL_ASSERT aborts */
}
END_TEST

/* pl_mem_watch_phases: each phase that ends is told with the device
 * arena's most bytes during it (from what was live when it began), host
 * allocations not counted; no call once the watch stops. */
typedef struct seen {
  int n;
  const char *what[4];
  int layer[4];
  size_t high[4];
} seen;

static void note_phase(void *ctx, const pl_mem_phase *ended, size_t high) {
  seen *s = ctx;
  if (s->n < 4) {
    s->what[s->n] = ended->what, s->layer[s->n] = ended->layer;
    s->high[s->n] = high;
  }
  s->n++;
}

START_TEST(phase_highs) {
  seen s = {0};
  void *a, *b, *h;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 100, "weights", &a), PL_OK);
  pl_mem_watch_phases(dev, note_phase, &s);
  pl_mem_phase_set(dev, "forward", 0, "dense");
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, 50, "acts", &b), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_HOST, 5000, "boundary", &h), PL_OK);
  pl_free(dev, b);
  pl_mem_phase_set(dev, "backward", 0, "dense"); /* forward 0 ends: 150 */
  pl_mem_phase_set(dev, "head", -1, NULL);       /* nothing made: 100 */
  pl_mem_watch_phases(dev, NULL, NULL);
  pl_mem_phase_set(dev, "optimizer", -1, NULL); /* not watched */
  ck_assert_int_eq(s.n, 3);
  ck_assert_ptr_null(s.what[0]); /* the phase before the first mark */
  ck_assert_uint_eq(s.high[0], 100);
  ck_assert_str_eq(s.what[1], "forward");
  ck_assert_int_eq(s.layer[1], 0);
  ck_assert_uint_eq(s.high[1], 150);
  ck_assert_str_eq(s.what[2], "backward");
  ck_assert_uint_eq(s.high[2], 100);
  pl_free(dev, a);
  pl_free(dev, h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("mem");
  TCase *tc = tcase_create("mem");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, peak_and_live_set);
  tcase_add_test(tc, arenas_are_separate);
  tcase_add_test(tc, limit_is_oom_status);
  tcase_add_test(tc, many_allocations_and_zero_bytes);
  tcase_add_test(tc, many_tags_overflow_bucket);
  tcase_add_test(tc, probe_finds_the_limit);
  tcase_add_test(tc, phase_highs);
  tcase_add_test_raise_signal(tc, untracked_free_aborts, 6);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
