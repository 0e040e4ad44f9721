/* report_train_pred.c — the train report's "prediction vs measurement"
 * section (report_train.h): per row of `plateau bench train`, the planner's
 * device peak, pinned host bytes and step time written before launch
 * (pred_dev_peak_bytes, pred_host_bytes, pred_time_ms) beside what the
 * point measured, with the errors against the targets — memory within 5%
 * (the planner's validated bound), the step within 15% on a GPU (CPU
 * backend times are CPU times: shown, labelled, not held to it) — and the
 * rows outside them flagged; a point the plan refused (`infeasible`, not
 * launched) shows its prediction alone, a --verify row the verdict beside
 * the oom or ok it measured. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report_util.h"
#include "report_train.h"

#define MEM_TARGET 0.05
#define TIME_TARGET 0.15

/* "pred / meas (±e%)" of bytes or ms; *err the relative error (NaN: none) */
static void pair(FILE *md, double pred, double meas, bool bytes, double *err) {
  char a[32], b[32];
  *err = NAN;
  if (bytes) {
    pl_rep_bytes(a, sizeof a, pred);
    pl_rep_bytes(b, sizeof b, meas);
  } else {
    pl_rep_q(a, sizeof a, pred, "-");
    pl_rep_q(b, sizeof b, meas, "-");
  }
  if (isnan(meas)) {
    fprintf(md, " %s / - |", a);
    return;
  }
  if (meas > 0)
    *err = (pred - meas) / meas;
  else if (pred == 0)
    *err = 0;
  if (isnan(*err))
    fprintf(md, " %s / %s |", a, b);
  else
    fprintf(md, " %s / %s (%+.1f%%) |", a, b, 100 * *err);
}

void pl__report_train_pred(FILE *md, const pl__train_pt *p, int n) {
  int rows = 0;
  for (int i = 0; i < n; i++)
    rows += !isnan(pl_cell_num(p[i].t, p[i].r, "pred_dev_peak_bytes"));
  fprintf(md, "\n## Prediction vs measurement\n\n");
  if (!rows) {
    fprintf(md,
            "No rows: no row carries the planner's prediction (pred_* columns: "
            "`plateau bench train` writes them for every point the "
            "planner models).\n");
    return;
  }
  fprintf(md,
          "The planner's prediction (engine/plan, on the run's machine: the "
          "device's memory or --mem-limit, the host's available RAM, --calib "
          "or the H200 defaults), written before the point was launched, "
          "beside what it measured: predicted / measured (error). Targets: "
          "device peak and pinned host within %.0f%%; the step within %.0f%% "
          "on a GPU (CPU backend times are CPU times, shown against a "
          "prediction for the machine given, not held to the target). "
          "Flags: `mem` a peak outside its target, `time` a GPU step "
          "outside it, `fit` the plan's verdict contradicted (predicted to "
          "fit and out of memory, or refused and ok under "
          "--verify).\n\n" PL__TRAIN_ROW_HEAD
          " status | device peak | pinned host | step ms "
          "| flags |\n" PL__TRAIN_ROW_RULE "---|---|---|---|---|\n",
          100 * MEM_TARGET, 100 * TIME_TARGET);
  int flagged = 0, nmem = 0, ntime = 0;
  double wmem = 0, wtime = 0, wtime_cpu = 0;
  for (int i = 0; i < n; i++) {
    const pl_table *x = p[i].t;
    const int k = p[i].r;
    const double pd = pl_cell_num(x, k, "pred_dev_peak_bytes");
    if (isnan(pd))
      continue;
    const char *status = pl_cell(x, k, "status"), *note = pl_cell(x, k, "note");
    const bool ok = !strcmp(status, "ok"),
               cuda = !strcmp(pl_rep_meta(x, "backend", ""), "cuda");
    const bool refused = strstr(note, "plan: does not fit") != NULL;
    pl__train_row_head(md, &p[i]);
    fprintf(md, " %s%s |", status,
            !strcmp(status, "infeasible") && refused ? " (plan: not launched)"
            : !strcmp(status, "oom") && refused      ? " (as the plan said)"
            : ok && refused ? " (--verify; the plan said no fit)"
                            : "");
    double ed, eh, et;
    pair(md, pd, ok ? pl_cell_num(x, k, "dev_peak_bytes") : NAN, true, &ed);
    pair(md, pl_cell_num(x, k, "pred_host_bytes"),
         ok ? pl_cell_num(x, k, "host_peak_bytes") : NAN, true, &eh);
    pair(md, pl_cell_num(x, k, "pred_time_ms"),
         ok ? pl_cell_num(x, k, "time_ms") : NAN, false, &et);
    char flags[64] = "";
    bool flag = false;
    const double em = fmax(isnan(ed) ? 0 : fabs(ed), isnan(eh) ? 0 : fabs(eh));
    if (!isnan(ed) || !isnan(eh)) {
      nmem++;
      wmem = fmax(wmem, em);
    }
    if (em > MEM_TARGET)
      strcat(flags, " mem"), flag = true;
    if (!isnan(et)) {
      if (cuda) {
        ntime++;
        wtime = fmax(wtime, fabs(et));
        if (fabs(et) > TIME_TARGET)
          strcat(flags, " time"), flag = true;
      } else {
        wtime_cpu = fmax(wtime_cpu, fabs(et));
        strcat(flags, " (CPU time)");
      }
    }
    if ((!strcmp(status, "oom") && !refused) || (ok && refused))
      strcat(flags, " fit"), flag = true;
    flagged += flag;
    fprintf(md, "%s |\n", flags[0] ? flags : " -");
  }
  fprintf(md,
          "\n%d row(s) with a prediction, %d flagged. Largest memory error "
          "%.1f%% over %d measured row(s) (target %.0f%%)",
          rows, flagged, 100 * wmem, nmem, 100 * MEM_TARGET);
  if (ntime)
    fprintf(md,
            "; largest GPU step error %.1f%% over %d row(s) (target "
            "%.0f%%)",
            100 * wtime, ntime, 100 * TIME_TARGET);
  if (wtime_cpu > 0)
    fprintf(md,
            "; CPU rows: step error up to %.0f%% (CPU times against the "
            "machine the plan was given)",
            100 * wtime_cpu);
  fprintf(md, ".\n");
}
