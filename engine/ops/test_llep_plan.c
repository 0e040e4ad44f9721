/* test_llep_plan.c — the LLEP plan (coverage, capacity, the m rule, lambda
 * skip, forced leftovers), position-based destinations, Eq. 1 chunking and the
 * routing profiles; plans built on several threads at once equal the same
 * plans built alone. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "ops/llep_plan.h"

/* Every expert's pieces tile [0, count) in order; loads add up. */
static void check_cover(const pl_llep_plan *p, const int64_t *counts) {
  int64_t tot = 0;
  for (int e = 0; e < p->E; e++) {
    int64_t at = 0;
    for (int i = p->piece_off[e]; i < p->piece_off[e + 1]; i++) {
      ck_assert_int_eq(p->pieces[i].expert, e);
      ck_assert_int_eq(p->pieces[i].start, at);
      ck_assert_int_gt(p->pieces[i].end, p->pieces[i].start);
      ck_assert(p->pieces[i].rank >= 0 && p->pieces[i].rank < p->Ep);
      at = p->pieces[i].end;
    }
    ck_assert_int_eq(at, counts[e]);
    tot += counts[e];
  }
  int64_t sl = 0;
  for (int r = 0; r < p->Ep; r++)
    sl += p->load_planned[r];
  ck_assert_int_eq(sl, tot);
  ck_assert_int_eq(p->total, tot);
}

START_TEST(balanced_skips) {
  int64_t counts[16];
  for (int e = 0; e < 16; e++)
    counts[e] = 1000;
  pl_llep_plan p;
  ck_assert_int_eq(
      pl_llep_plan_build(counts, 16, 4, pl_llep_knobs_default(), &p), PL_OK);
  ck_assert(!p.planned);
  ck_assert_int_eq(p.n_spilled, 0);
  ck_assert_int_eq(p.n_pieces, 16);
  check_cover(&p, counts);
  ck_assert_double_eq_tol(p.imb_native, 1.0, 1e-12);
  pl_llep_plan_free(&p);
}
END_TEST

START_TEST(hot_expert_spills) {
  /* E=8 over Ep=4: expert 0 (rank 0) has 80% of the routes */
  int64_t counts[8] = {8000, 100, 300, 300, 300, 300, 300, 400};
  pl_llep_knobs kn = pl_llep_knobs_default();
  kn.m = 10;
  pl_llep_plan p;
  ck_assert_int_eq(pl_llep_plan_build(counts, 8, 4, kn, &p), PL_OK);
  ck_assert(p.planned);
  check_cover(&p, counts);
  ck_assert_int_gt(p.n_spilled, 0);
  /* capacity M = floor(10000/4) = 2500: nobody above it (nothing forced) */
  ck_assert_int_eq(p.capacity, 2500);
  for (int r = 0; r < 4; r++)
    ck_assert_int_le(p.load_planned[r], 2500);
  ck_assert(p.imb_planned < p.imb_native);
  ck_assert_double_eq_tol(p.imb_planned, 1.0, 1e-12);
  /* the native rank keeps the head of the global list */
  ck_assert_int_eq(p.pieces[p.piece_off[0]].rank, 0);
  ck_assert_int_eq(p.pieces[p.piece_off[0]].start, 0);
  /* destinations follow the pieces */
  for (int i = p.piece_off[0]; i < p.piece_off[1]; i++) {
    ck_assert_int_eq(pl_llep_plan_dest(&p, 0, p.pieces[i].start),
                     p.pieces[i].rank);
    ck_assert_int_eq(pl_llep_plan_dest(&p, 0, p.pieces[i].end - 1),
                     p.pieces[i].rank);
  }
  pl_llep_plan_free(&p);

  /* alpha 1.1 raises the capacity */
  kn.alpha = 1.1;
  ck_assert_int_eq(pl_llep_plan_build(counts, 8, 4, kn, &p), PL_OK);
  ck_assert_int_eq(p.capacity, 2750);
  check_cover(&p, counts);
  pl_llep_plan_free(&p);
}
END_TEST

START_TEST(min_piece_rule) {
  /* Every helper has room for < m: the spill cannot be split into pieces
   * >= m, so the leftover is forced onto the least-loaded helper. */
  int64_t counts[4] = {3000, 900, 900, 1000}; /* Ep=4, one expert per rank */
  pl_llep_knobs kn = pl_llep_knobs_default();
  kn.m = 1024;
  kn.lambda = 0;
  pl_llep_plan p;
  ck_assert_int_eq(pl_llep_plan_build(counts, 4, 4, kn, &p), PL_OK);
  check_cover(&p, counts);
  /* M = 1450; expert 0 keeps 1450, leftover 1550 > any helper room (<=550)
   * and every piece would be < m: forced whole onto the least loaded */
  ck_assert_int_eq(p.piece_off[1] - p.piece_off[0], 2);
  ck_assert_int_eq(p.pieces[0].end, 1450);
  ck_assert_int_eq(p.pieces[1].end - p.pieces[1].start, 1550);
  pl_llep_plan_free(&p);
  /* with m = 1 the leftover spreads over the helpers' room first */
  kn.m = 1;
  ck_assert_int_eq(pl_llep_plan_build(counts, 4, 4, kn, &p), PL_OK);
  check_cover(&p, counts);
  ck_assert_int_gt(p.piece_off[1] - p.piece_off[0], 2);
  pl_llep_plan_free(&p);
}
END_TEST

START_TEST(lambda_and_native) {
  int64_t counts[4] = {1200, 1000, 1000, 1000}; /* max/mean = 1.14 */
  pl_llep_knobs kn = pl_llep_knobs_default();
  pl_llep_plan p;
  ck_assert_int_eq(pl_llep_plan_build(counts, 4, 4, kn, &p), PL_OK);
  ck_assert(!p.planned);
  pl_llep_plan_free(&p);
  kn.lambda = 1.1;
  kn.m = 1;
  ck_assert_int_eq(pl_llep_plan_build(counts, 4, 4, kn, &p), PL_OK);
  ck_assert(p.planned);
  check_cover(&p, counts);
  pl_llep_plan_free(&p);
  kn.native = true;
  ck_assert_int_eq(pl_llep_plan_build(counts, 4, 4, kn, &p), PL_OK);
  ck_assert(!p.planned);
  ck_assert_int_eq(p.n_spilled, 0);
  pl_llep_plan_free(&p);
}
END_TEST

START_TEST(edges) {
  int64_t counts[6] = {0, 0, 0, 0, 0, 0};
  pl_llep_plan p;
  pl_llep_knobs kn = pl_llep_knobs_default();
  ck_assert_int_eq(pl_llep_plan_build(counts, 6, 3, kn, &p), PL_OK);
  ck_assert_int_eq(p.n_pieces, 0);
  pl_llep_plan_free(&p);
  ck_assert_int_eq(pl_llep_plan_build(counts, 6, 4, kn, &p), PL_EINVAL);
  ck_assert_int_eq(pl_llep_plan_build(counts, 0, 1, kn, &p), PL_EINVAL);
  /* Ep = 1: everything native whatever the skew */
  int64_t c1[3] = {100, 0, 7};
  kn.lambda = 0;
  ck_assert_int_eq(pl_llep_plan_build(c1, 3, 1, kn, &p), PL_OK);
  check_cover(&p, c1);
  ck_assert_int_eq(p.n_spilled, 0);
  pl_llep_plan_free(&p);
  /* all routes to one expert, Ep = 3, m = 0 */
  int64_t c2[6] = {0, 0, 0, 0, 999, 0};
  kn.m = 0;
  ck_assert_int_eq(pl_llep_plan_build(c2, 6, 3, kn, &p), PL_OK);
  check_cover(&p, c2);
  for (int r = 0; r < 3; r++)
    ck_assert_int_eq(p.load_planned[r], 333);
  pl_llep_plan_free(&p);
}
END_TEST

START_TEST(eq1) {
  int K;
  int64_t ce;
  ck_assert_int_eq(pl_llep_chunking(65536, 6554, 64, &K, &ce), PL_OK);
  ck_assert_int_eq(K, 10);
  ck_assert_int_eq(ce, 6554);
  ck_assert_int_eq(pl_llep_chunking(32768, 10923, 64, &K, &ce), PL_OK);
  ck_assert_int_eq(K, 3);
  ck_assert_int_eq(ce, 10923);
  ck_assert_int_eq(pl_llep_chunking(100, 1, 8, &K, &ce), PL_OK);
  ck_assert_int_eq(K, 8);
  ck_assert_int_eq(ce, 13);
  ck_assert_int_eq(pl_llep_chunking(0, 5, 8, &K, &ce), PL_OK);
  ck_assert_int_eq(K, 1);
  ck_assert_int_eq(ce, 0);
  ck_assert_int_eq(pl_llep_chunking(10, 0, 8, &K, &ce), PL_EINVAL);
  ck_assert_int_eq(pl_llep_chunking(10, 3, 0, &K, &ce), PL_EINVAL);
  /* strided vs contiguous positions: every chunk <= c_eff tokens */
  for (int contig = 0; contig < 2; contig++) {
    int64_t N = 103;
    pl_llep_chunking(N, 10, 64, &K, &ce);
    int64_t cnt[64] = {0};
    for (int64_t t = 0; t < N; t++) {
      int ch = pl_chunk_of(t, N, K, contig);
      ck_assert(ch >= 0 && ch < K);
      cnt[ch]++;
    }
    for (int i = 0; i < K; i++)
      ck_assert_int_le(cnt[i], ce);
    ck_assert_int_eq(pl_chunk_of(5, N, K, false), 5 % K);
    ck_assert_int_eq(pl_chunk_of(5, N, K, true), 0);
  }
}
END_TEST

/* ceil(N/c) and ceil(N/K) without overflow: the default cap is c = INT64_MAX
 * (pl_moe_cfg_default), so N + c - 1 must never be formed. */
START_TEST(eq1_large) {
  int K;
  int64_t ce;
  ck_assert_int_eq(pl_llep_chunking(1000, INT64_MAX, 64, &K, &ce), PL_OK);
  ck_assert_int_eq(K, 1);
  ck_assert_int_eq(ce, 1000);
  ck_assert_int_eq(pl_llep_chunking(INT64_MAX, INT64_MAX, 64, &K, &ce), PL_OK);
  ck_assert_int_eq(K, 1);
  ck_assert_int_eq(ce, INT64_MAX);
  const int64_t c = (int64_t)1 << 62;
  ck_assert_int_eq(pl_llep_chunking(c + 1, c, 64, &K, &ce), PL_OK);
  ck_assert_int_eq(K, 2);
  ck_assert_int_eq(ce, ((int64_t)1 << 61) + 1);
  ck_assert_int_eq(pl_llep_chunking(INT64_MAX, c, 64, &K, &ce), PL_OK);
  ck_assert_int_eq(K, 2);
  ck_assert_int_eq(ce, ((int64_t)1 << 62));
}
END_TEST

/* ---- plans on several threads at once ------------------------------------ */

enum { T_THREADS = 4, T_E = 64, T_EP = 8, T_ITERS = 400 };

typedef struct plan_job {
  int64_t counts[T_E];
  pl_llep_plan ref; /* built alone */
  int mismatches;
} plan_job;

static bool same_plan(const pl_llep_plan *a, const pl_llep_plan *b) {
  if (a->n_pieces != b->n_pieces || a->planned != b->planned)
    return false;
  for (int i = 0; i < a->n_pieces; i++)
    if (a->pieces[i].expert != b->pieces[i].expert ||
        a->pieces[i].rank != b->pieces[i].rank ||
        a->pieces[i].start != b->pieces[i].start ||
        a->pieces[i].end != b->pieces[i].end)
      return false;
  return true;
}

static void *plan_loop(void *arg) {
  plan_job *j = arg;
  pl_llep_knobs kn = pl_llep_knobs_default();
  kn.m = 1;
  kn.lambda = 0;
  for (int it = 0; it < T_ITERS; it++) {
    pl_llep_plan p;
    if (pl_llep_plan_build(j->counts, T_E, T_EP, kn, &p) != PL_OK ||
        !same_plan(&p, &j->ref))
      j->mismatches++;
    pl_llep_plan_free(&p);
  }
  return NULL;
}

START_TEST(plans_on_threads) {
  static plan_job jobs[T_THREADS];
  pl_llep_knobs kn = pl_llep_knobs_default();
  kn.m = 1;
  kn.lambda = 0;
  for (int t = 0; t < T_THREADS; t++) {
    /* a different order of the experts by count on every thread */
    for (int e = 0; e < T_E; e++)
      jobs[t].counts[e] = 100 + ((e * (2 * t + 3) + 7 * t) % T_E) * 37 +
                          (e % (t + 2) == 0 ? 5000 : 0);
    jobs[t].mismatches = 0;
    ck_assert_int_eq(
        pl_llep_plan_build(jobs[t].counts, T_E, T_EP, kn, &jobs[t].ref), PL_OK);
    check_cover(&jobs[t].ref, jobs[t].counts);
  }
  pthread_t th[T_THREADS];
  for (int t = 0; t < T_THREADS; t++)
    ck_assert_int_eq(pthread_create(&th[t], NULL, plan_loop, &jobs[t]), 0);
  for (int t = 0; t < T_THREADS; t++)
    pthread_join(th[t], NULL);
  for (int t = 0; t < T_THREADS; t++) {
    ck_assert_msg(jobs[t].mismatches == 0,
                  "thread %d: %d of %d plans differ from the plan built alone",
                  t, jobs[t].mismatches, T_ITERS);
    pl_llep_plan_free(&jobs[t].ref);
  }
}
END_TEST

START_TEST(profiles) {
  pl_route_profile p;
  ck_assert_int_eq(pl_route_profile_parse("balanced", &p), PL_OK);
  ck_assert(p.balanced);
  ck_assert_int_eq(pl_route_profile_parse("95/16", &p), PL_OK);
  ck_assert(!p.balanced && p.h == 16 && p.r > 0.94 && p.r < 0.96);
  ck_assert_int_eq(pl_route_profile_parse("95", &p), PL_EINVAL);
  ck_assert_int_eq(pl_route_profile_parse("95/x", &p), PL_EINVAL);
  ck_assert_int_eq(pl_route_profile_parse("120/4", &p), PL_EINVAL);
  ck_assert_int_eq(pl_route_profile_parse("", &p), PL_EINVAL);

  enum { N = 1024, k = 4, E = 32 };
  int32_t idx[N * k];
  float w[N * k];
  int64_t cnt[E];
  pl_route_profile_parse("balanced", &p);
  ck_assert_int_eq(pl_route_profile_fill(&p, N, k, E, 0, 0, idx, w), PL_OK);
  memset(cnt, 0, sizeof cnt);
  for (int i = 0; i < N * k; i++)
    cnt[idx[i]]++;
  for (int e = 0; e < E; e++)
    ck_assert_int_eq(cnt[e], 128);
  ck_assert_int_eq(idx[7 * k + 2], 9);
  ck_assert(w[3] == 0.25f);

  pl_route_profile_parse("80/4", &p);
  ck_assert_int_eq(pl_route_profile_fill(&p, N, k, E, 0, 0, idx, w), PL_OK);
  memset(cnt, 0, sizeof cnt);
  for (int i = 0; i < N * k; i++)
    cnt[idx[i]]++;
  for (int e = 0; e < 4; e++)
    ck_assert_int_ge(cnt[e], 819);
  ck_assert_int_eq(idx[0], 0);
  ck_assert_int_eq(idx[3], 3);
  ck_assert_int_eq(idx[900 * k + 1], 4 + (900 + 1) % 28);
  /* every route by the formula, balanced and r/h; weights not wanted */
  const int nhot = (int)floor(0.8 * N);
  for (int t = 0; t < N; t++)
    for (int j = 0; j < k; j++)
      ck_assert_int_eq(idx[t * k + j],
                       t < nhot ? j % 4 : 4 + (t + j) % (E - 4));
  pl_route_profile b;
  pl_route_profile_parse("balanced", &b);
  int32_t idxb[N * k];
  ck_assert_int_eq(pl_route_profile_fill(&b, N, k, E, 0, 0, idxb, NULL), PL_OK);
  for (int t = 0; t < N; t++)
    for (int j = 0; j < k; j++)
      ck_assert_int_eq(idxb[t * k + j], (t + j) % E);
  /* seeded: same multiset of routes, rotated positions */
  int32_t idx2[N * k];
  ck_assert_int_eq(pl_route_profile_fill(&p, N, k, E, 7, 1, idx2, w), PL_OK);
  int64_t cnt2[E];
  memset(cnt2, 0, sizeof cnt2);
  for (int i = 0; i < N * k; i++)
    cnt2[idx2[i]]++;
  for (int e = 0; e < E; e++)
    ck_assert_int_eq(cnt2[e], cnt[e]);
  /* shuffled: the same routes at other positions, every run a sample */
  ck_assert_int_eq(pl_route_profile_parse("80/4s", &p), PL_OK);
  ck_assert(p.shuffled && p.h == 4 && !strcmp(p.name, "80/4s"));
  ck_assert_int_eq(pl_route_profile_fill(&p, N, k, E, 0, 0, idx2, w), PL_OK);
  memset(cnt2, 0, sizeof cnt2);
  for (int i = 0; i < N * k; i++)
    cnt2[idx2[i]]++;
  for (int e = 0; e < E; e++)
    ck_assert_int_eq(cnt2[e], cnt[e]);
  int32_t idx3[N * k];
  ck_assert_int_eq(pl_route_profile_fill(&p, N, k, E, 0, 1, idx3, w), PL_OK);
  ck_assert(!memcmp(idx2, idx3, sizeof idx2)); /* fixed: every rank alike */
  ck_assert(memcmp(idx, idx2, sizeof idx2) != 0);
  for (int K = 2; K <= 8; K *= 2) { /* contiguous and strided chunks */
    const int n = N / K;
    for (int c = 0; c < K; c++) {
      int hot_c = 0, hot_s = 0, hot_llep = 0;
      for (int t = c * n; t < (c + 1) * n; t++) {
        hot_c += idx2[t * k] < 4;
        hot_llep += idx[t * k] < 4;
      }
      for (int t = c; t < N; t += K)
        hot_s += idx2[t * k] < 4;
      /* 0.8 n expected, sd < 0.4 sqrt(n): within 5 sd */
      ck_assert_int_ge(hot_c, (int)(0.8 * n - 2 * sqrt(n)));
      ck_assert_int_le(hot_c, (int)(0.8 * n + 2 * sqrt(n)) + 1);
      ck_assert_int_ge(hot_s, (int)(0.8 * n - 2 * sqrt(n)));
      ck_assert_int_le(hot_s, (int)(0.8 * n + 2 * sqrt(n)) + 1);
      if (c == K - 1) /* LLEP's layout: the last contiguous chunk is cold */
        ck_assert_int_lt(hot_llep, (int)(0.8 * n - 2 * sqrt(n)));
    }
  }
  ck_assert_int_eq(pl_route_profile_parse("80/4x", &p), PL_EINVAL);
  ck_assert_int_eq(pl_route_profile_parse("80/4ss", &p), PL_EINVAL);
  ck_assert_int_eq(pl_route_profile_parse("50/32", &p), PL_OK);
  ck_assert_int_eq(pl_route_profile_fill(&p, N, k, E, 0, 0, idx, w), PL_EINVAL);
  /* a profile built by hand without hot experts is refused, not divided by */
  pl_route_profile h0 = {.name = "50/0", .balanced = false, .r = 0.5, .h = 0};
  ck_assert_int_eq(pl_route_profile_fill(&h0, N, k, E, 0, 0, idx, w),
                   PL_EINVAL);
}
END_TEST

int main(void) {
  const TTest *tests[] = {balanced_skips, hot_expert_spills,
                          min_piece_rule, lambda_and_native,
                          edges,          eq1,
                          eq1_large,      plans_on_threads,
                          profiles,       NULL};
  return pl_check_suite("llep_plan", 0, tests, NULL, NULL, CK_FORK_GETENV, 0)
             ? 1
             : 0;
}
