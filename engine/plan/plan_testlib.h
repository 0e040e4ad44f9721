/* plan_testlib.h — what the planner's tests of both systems share
 * (engine/plan/ for the trainer, baselines/fsdp2/ for the FSDP2 baseline):
 * the predicted against the measured device memory at the peak, by tag,
 * and the first-fit search held to the full one.  Included by test files
 * only (static inline functions). */
#ifndef PLATEAU_PLAN_PLAN_TESTLIB_H
#define PLATEAU_PLAN_PLAN_TESTLIB_H

#include <check.h>
#include <math.h>
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

#endif
