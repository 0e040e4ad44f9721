/* plan_testlib.h — what the tests of the plan against a real run share
 * (engine/plan/test_mpi_plan.c for the trainer, baselines/fsdp2/
 * test_mpi_fsdp2_plan.c for the FSDP2 baseline): the predicted against the
 * measured device memory at the peak, by tag.  Included by test files only
 * (static inline functions). */
#ifndef PLATEAU_PLAN_PLAN_TESTLIB_H
#define PLATEAU_PLAN_PLAN_TESTLIB_H

#include <math.h>
#include <stdio.h>
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

#endif
