/* train_proj.c — a proxy's projection of the W_v-rank run it plays
 * (train_proj.h): compute and memory measured, communication modelled.
 *
 * A proxy (W_v > W) measures one rank's compute and memory of the W_v-rank
 * run: its ZeRO-3 units are tiled from the present shards, its expert
 * dispatch stays among the present ranks and its virtual Ulysses, Ring-DTP
 * or CP groups move their bytes through local stand-ins
 * (train/layout.h, plateau/comm.h).  None of that is the W_v-rank run's
 * communication, so none of it is passed off as such:
 *   standin_ms       the stand-ins on the compute stream (their events,
 *                    median over the timed steps, max over ranks): inside
 *                    time_ms, taken out of the part they ran in;
 *   standin_side_ms  those on side streams (Ring-DTP's hops, ring
 *                    attention's passes), which ran beside the compute as
 *                    the real transfers would: not subtracted;
 *   compute_ms       time_ms − standin_ms: the measured step without them;
 *   comm_model_ms    the planner's exposed communication of the W_v-rank run
 *                    on nodes of pr->proj_gpn GPUs (its calibrated or
 *                    default link rates) less the proxy's own
 *                    (pl_plan_proxy_comm);
 *   step_proj_ms     compute_ms + comm_model_ms — the projected step, under
 *                    the planner's overlaps: ZeRO-3 / FSDP gathers and
 *                    reduce-scatters behind each layer's compute (exposed
 *                    beyond it), the pipelined dispatch behind the other
 *                    chunks' expert GEMMs, Ring-DTP hops behind the strips,
 *                    CP's K/V ring behind attention, Ulysses' and the other
 *                    dispatches' all-to-alls exposed, plus the calls' fixed
 *                    cost; the exposed parts are the plan's against its own
 *                    compute prediction;
 *   tok_s_gpu_proj, tflops_proj   at step_proj_ms;
 *   tok_s_gpu_proj_lo / _hi       at compute_ms + the communication with
 *                    the inter-node bandwidth 30% lower / higher (how far a
 *                    user's network may move the projection);
 *   pred_proj_ms     the planner's whole step of the W_v-rank run.
 * Without the profile the stand-ins are not timed: standin_ms is absent and
 * compute_ms is time_ms (the note says so). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "train_proj.h"

/* Median over the timed steps of a stand-in field, max over ranks. */
static pl_status standins(pl_bench_ctx *c, const pl_step_result *res, int n,
                          double out[2]) {
  double *x = calloc((size_t)n + 1, sizeof *x);
  if (!x)
    return pl_set_error(PL_ENOMEM, "train: host");
  for (int k = 0; k < n; k++)
    x[k] = res[k].standin_ms;
  out[0] = n ? pl_stats_of(x, n).median : 0;
  for (int k = 0; k < n; k++)
    x[k] = res[k].standin_side_ms;
  out[1] = n ? pl_stats_of(x, n).median : 0;
  free(x);
  return pl_host_allreduce_f64(c->comm, out, 2, PL_RED_MAX);
}

pl_status pl__train_proj_row(pl_bench_ctx *c, const pl__train_args *a,
                             const pl_train_system *sys,
                             const pl_train_setup *u, const pl__train_pred *pr,
                             const pl_step_result *res, int n, pl_row *row) {
  const int Wv = u->lc.W_v ? u->lc.W_v : c->size;
  if (Wv <= c->size)
    return PL_OK;
  const int warm = c->warmup < n ? c->warmup : 0;
  double si[2] = {0, 0};
  PL_TRY(standins(c, res + warm, n - warm, si));
  const double t = c->meas ? c->meas->t.median : 0;
  if (u->sc.profile) {
    pl_row_f64(row, "standin_ms", si[0]);
    pl_row_f64(row, "standin_side_ms", si[1]);
  }
  if (t <= 0)
    return PL_OK;
  const double comp = t - si[0];
  pl_row_f64(row, "compute_ms", comp);
  if (!pr->have_proj) {
    pl_row_note(row,
                "compute and memory measured; the W_v-rank run's "
                "communication not modelled (%s)",
                pr->have ? "the planner could not predict that run" : pr->why);
    return PL_OK;
  }
  const double proj = comp + pr->comm_ms;
  const int64_t tok = (int64_t)u->sc.micro * (u->S / sys->seq_ranks(u));
  pl_row_f64(row, "comm_model_ms", pr->comm_ms);
  pl_row_f64(row, "step_proj_ms", proj);
  pl_row_f64(row, "pred_proj_ms", pr->proj_run_ms);
  pl_row_f64(row, "tok_s_gpu_proj", (double)tok / (proj * 1e-3));
  if (!isnan(pr->comm_lo_ms) && !isnan(pr->comm_hi_ms)) {
    pl_row_f64(row, "tok_s_gpu_proj_lo",
               (double)tok / ((comp + pr->comm_lo_ms) * 1e-3));
    pl_row_f64(row, "tok_s_gpu_proj_hi",
               (double)tok / ((comp + pr->comm_hi_ms) * 1e-3));
  }
  pl_row_f64(row, "tflops_proj",
             (double)tok * pl_model_flops_per_token(&u->m, u->S) /
                 (proj * 1e-3) / 1e12);
  pl_row_note(row,
              "compute and memory measured, communication modelled: "
              "step_proj_ms = time_ms - standin_ms%s + comm_model_ms (the "
              "%d-GPU run on nodes of %d, engine/plan's link model)",
              u->sc.profile ? "" : " (not timed: --no-profile)", Wv,
              pr->proj_gpn);
  return PL_OK;
}
