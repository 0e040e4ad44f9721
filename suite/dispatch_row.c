/* dispatch_row.c — the columns of a measured `plateau bench dispatch` point
 * (dispatch.h): the forward alone timed, the counters of the last run (max
 * or sum over ranks), rank 0's time per stage, and the bytes and FLOPs the
 * rates count. */
#include <stdio.h>
#include <string.h>

#include "dispatch.h"

pl_status pl__dispatch_columns(pl_bench_ctx *c, dispatch *d, pl_row *row,
                               pl_work *w) {
  job *j = &d->j;
  const pl_moe_cfg *g = &d->cfg;
  pl_stats tf;
  j->bwd = false;
  PL_TRY(pl_bench_time(c, pl__dispatch_job, j, c->stream, &tf));
  pl_row_f64(row, "fwd_ms", tf.median);
  const pl_moe_stats *s = &j->st;
  /* max over ranks: routes received, GEMM launches, expert-major chunks,
   * GEMM groups over the chunks; routes moved: summed */
  int64_t agg[4] = {s->routes_recv, s->gemms, s->em_chunks, s->groups},
          moved = s->routes_sent;
  PL_TRY(pl_host_allreduce_i64(c->comm, agg, 4, PL_RED_MAX));
  PL_TRY(pl_host_allreduce_i64(c->comm, &moved, 1, PL_RED_SUM));
  pl_row_i64(row, "K", s->K);
  pl_row_i64(row, "c_eff", s->c_eff);
  pl_row_i64(row, "bound_bytes",
             (int64_t)pl_moe_dispatch_bound(&d->vc, c->size, s->c_eff));
  pl_row_f64(row, "max_send_ratio", s->max_send_ratio);
  pl_row_i64(row, "routes_moved", moved);
  pl_row_i64(row, "planned", s->planned);
  pl_row_i64(row, "pieces", s->n_pieces);
  pl_row_i64(row, "spilled", s->n_spilled);
  pl_row_f64(row, "imb_before", s->imb_native);
  pl_row_f64(row, "imb_after", s->imb_planned);
  pl_row_i64(row, "overlapped", s->overlapped);
  pl_row_i64(row, "overlapped_bwd", j->ov_bwd);
  pl_row_i64(row, "gemms", agg[1]);
  pl_row_i64(row, "em_chunks", agg[2]);
  pl_row_i64(row, "wgrad_passes", agg[3]);
  char stg[320] = "";
  for (int q = 0; q < PL_MOE_NSTAGES; q++)
    snprintf(stg + strlen(stg), sizeof stg - strlen(stg), "%s%s=%.1f",
             q ? "," : "", pl_moe_stage_name(q), j->stage_ms[q]);
  pl_row_str(row, "stages", stg);
  if (c->check && !d->have_ref)
    pl_row_note(row, "no ep reference (ep failed here): values unchecked");
  /* fwd x out and y back, bwd x, dout out and dx back (H wide), per rank */
  w->bytes = 5.0 * (double)moved / c->size * (double)g->H *
             (double)pl_dtype_size(g->dt);
  w->flops = 11.0 * 2.0 * (double)agg[0] * (double)g->H * g->I;
  return PL_OK;
}
