/* plan_testlib.h — what the planner's tests of both systems share
 * (engine/plan/ for the trainer, baselines/fsdp2/ for the FSDP2 baseline):
 * the predicted against the measured device memory at the peak, by tag,
 * and the first-fit search held to the full one.  Included by test files
 * only (static inline functions). */
#ifndef PLATEAU_PLAN_PLAN_TESTLIB_H
#define PLATEAU_PLAN_PLAN_TESTLIB_H

#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

/* Bytes of tag in the measured live set at the peak (0: absent). */
static inline size_t pt_tag_at_peak(const pl_mem_stats *s, const char *tag) {
  for (int i = 0; i < s->n_tags; i++)
    if (!strcmp(s->at_peak[i].tag, tag))
      return s->at_peak[i].bytes;
  return 0;
}

/* The tag whose bytes at the peak differ the most, as "tag (predicted P,
 * measured M at the peak)". */
static inline void pt_worst_tag(const pl_plan_mem *pm, const pl_mem_stats *ms,
                                char *buf, size_t n) {
  const char *wt = "-";
  double wd = 0;
  size_t wp = 0, wm = 0;
  for (int i = 0; i < ms->n_tags; i++) {
    const size_t mb = ms->at_peak[i].bytes,
                 pb = pl_plan_mem_tag(pm, ms->at_peak[i].tag);
    const double d = fabs((double)pb - (double)mb);
    if (d > wd)
      wd = d, wt = ms->at_peak[i].tag, wp = pb, wm = mb;
  }
  for (int i = 0; i < pm->n_tags; i++) {
    const size_t pb = pm->at_peak[i].bytes,
                 mb = pt_tag_at_peak(ms, pm->at_peak[i].tag);
    const double d = fabs((double)pb - (double)mb);
    if (d > wd)
      wd = d, wt = pm->at_peak[i].tag, wp = pb, wm = mb;
  }
  snprintf(buf, n, "%s (predicted %zu, measured %zu at the peak)", wt, wp, wm);
}

/* |pred − meas| / meas (1 for a prediction of nothing measured). */
static inline double pt_rel(size_t pred, size_t meas) {
  return meas ? fabs((double)pred - (double)meas) / (double)meas : pred ? 1 : 0;
}

/* A first-fit search (pl_plan_free.first_fit: whether any configuration
 * fits, as the table's reach asks) of system sys answers as the full
 * search does, from at most its evaluations, at contexts where it fits and
 * where it does not (120b on 16 and 64 GPUs at 256K, 1M and 4M: both
 * systems fit and do not among them; every knob free as `plan --table`
 * frees them); what it chose fits.  Each search measures its candidates,
 * so the grid stays small (the sanitizer build runs it too). */
static inline void pt_first_fit_agrees(pl_plan_system sys) {
  const char *models[] = {"120b"};
  const int gpus[] = {16, 64};
  int fit = 0, none = 0;
  for (int i = 0; i < 1; i++)
    for (int g = 0; g < 2; g++)
      for (int64_t S = 256 << 10; S <= 4 << 20; S *= 4) {
        pl_model_cfg m;
        ck_assert_int_eq(pl_model_preset(models[i], &m), PL_OK);
        pl_plan_machine mc = pl_plan_machine_default();
        pl_plan_cfg base = sys == PL_PLAN_FSDP2
                               ? pl_plan_cfg_fsdp2(&m, gpus[g], S)
                               : pl_plan_cfg_plateau(gpus[g], S);
        pl_plan_free fr = pl_plan_free_every();
        pl_plan_search *a = malloc(sizeof *a), *b = malloc(sizeof *b);
        ck_assert(a && b);
        ck_assert_int_eq(pl_plan_auto(&m, &base, &fr, &mc, a), PL_OK);
        fr.first_fit = true;
        ck_assert_int_eq(pl_plan_auto(&m, &base, &fr, &mc, b), PL_OK);
        ck_assert_msg(a->have_best == b->have_best && b->evals <= a->evals,
                      "%s %s W=%d S=%lld: full search fits %d (%ld "
                      "evaluations), first fit %d (%ld)",
                      pl_plan_system_name(sys), models[i], gpus[g],
                      (long long)S, a->have_best, a->evals, b->have_best,
                      b->evals);
        if (b->have_best) {
          pl_plan_verdict v;
          ck_assert_int_eq(pl_plan_check(&m, &b->best.cfg, &mc, &v), PL_OK);
          ck_assert(v.fits);
        }
        fit += b->have_best, none += !b->have_best;
        free(a), free(b);
      }
  ck_assert(fit > 0 && none > 0);
}

/* Two searches' answers equal in everything they report but `ahead` (the
 * measurements made on a second thread). */
static inline void pt_same_choice(const pl_plan_choice *a,
                                  const pl_plan_choice *b) {
  char ca[200], cb[200];
  pl_plan_cfg_str(&a->cfg, ca, sizeof ca);
  pl_plan_cfg_str(&b->cfg, cb, sizeof cb);
  ck_assert_str_eq(ca, cb);
  ck_assert_int_eq(a->mem.dev_peak, b->mem.dev_peak);
  ck_assert_int_eq(a->mem.dev_worst, b->mem.dev_worst);
  ck_assert_int_eq(a->mem.host_pinned, b->mem.host_pinned);
  ck_assert(a->time.step_s == b->time.step_s);
  ck_assert(a->time.tok_s_gpu == b->time.tok_s_gpu);
  ck_assert_str_eq(a->fill, b->fill);
}

static inline void pt_same_search(const pl_plan_search *a,
                                  const pl_plan_search *b) {
  ck_assert_int_eq(a->tried, b->tried);
  ck_assert_int_eq(a->feasible, b->feasible);
  ck_assert_int_eq(a->skipped, b->skipped);
  ck_assert_int_eq(a->unbuilt, b->unbuilt);
  ck_assert_int_eq(a->beyond, b->beyond);
  ck_assert_int_eq(a->evals, b->evals);
  ck_assert_int_eq(a->have_best, b->have_best);
  ck_assert_int_eq(a->have_runner_up, b->have_runner_up);
  pt_same_choice(&a->best, &b->best);
  if (a->have_runner_up)
    pt_same_choice(&a->runner_up, &b->runner_up);
  ck_assert_str_eq(a->why_lost, b->why_lost);
  ck_assert_str_eq(a->binding, b->binding);
  ck_assert_str_eq(a->why_none, b->why_none);
  ck_assert_str_eq(a->why_ep, b->why_ep);
}

/* The search of system sys for 120b on W GPUs at context S, every knob free,
 * on one thread and with its look-ahead on two: they answer alike.  The
 * measurements the two-thread search took from its look-ahead (none on one
 * thread). */
static inline long pt_ahead_agrees(pl_plan_system sys, int W, int64_t S,
                                   const pl_plan_machine *mc) {
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("120b", &m), PL_OK);
  const pl_plan_cfg base = sys == PL_PLAN_FSDP2 ? pl_plan_cfg_fsdp2(&m, W, S)
                                                : pl_plan_cfg_plateau(W, S);
  const pl_plan_free fr = pl_plan_free_every();
  pl_plan_search *one = malloc(sizeof *one), *two = malloc(sizeof *two);
  ck_assert(one && two);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ck_assert_int_eq(pl_plan_auto(&m, &base, &fr, mc, one), PL_OK);
  ck_assert_int_eq(one->ahead, 0);
  omp_set_num_threads(2);
  ck_assert_int_eq(pl_plan_auto(&m, &base, &fr, mc, two), PL_OK);
  omp_set_num_threads(threads);
  pt_same_search(one, two);
  const long ahead = two->ahead;
  ck_assert(ahead <= two->evals);
  free(one), free(two);
  return ahead;
}

#endif
