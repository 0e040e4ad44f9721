/* adam_rows.c — the columns of a measured `plateau bench adam` point
 * (bench_adam.h): Gparam/s, the achieved H2D/D2H GB/s, the host-link floor
 * (Eq. 5) and the joint floor of link and host memory with the step as % of
 * each, the SIMD path that ran, the GPU and CPU parts of a step and the CPU
 * share a hybrid converged to (max over ranks), and the host bytes. */
#include <math.h>
#include <string.h>

#include "bench_adam.h"

pl_status pl__adam_row(pl_bench_ctx *c, const pl__adam_bench *A,
                       const pl__adam_pt *q, pl_row *row) {
  const size_t P = A->P, gsz = pl_dtype_size(A->gdt);
  PL_TRY(pl_stream_sync(c->stream));
  pl_stream_adamw_last L;
  memset(&L, 0, sizeof L);
  if (A->so)
    pl_stream_adamw_last_get(A->so, &L);
  double ms[4] = {L.gpu_ms, L.cpu_ms, A->update_ms, L.share};
  PL_TRY(pl_host_allreduce_f64(c->comm, ms, 4, PL_RED_MAX));
  const double t = c->meas->t.median, sec = t * 1e-3;
  /* Eq. 5: 12 bytes/param each way (+ the gradients when on the host) */
  const double floor_ms =
      fmax((double)P * (12 + (A->grad_host ? gsz : 0)) / (A->bw[0] * 1e9),
           (double)P * 12 / (A->bw[1] * 1e9)) *
      1e3;
  pl_simd_path used = PL_SIMD_SCALAR;
  if (q->mode != PL_ADAM_STREAM && pl_simd_path_resolve(A->simd, &used))
    used = PL_SIMD_SCALAR;
  pl_row_str(row, "share",
             q->mode == PL_ADAM_HYBRID ? A->share_txt[q->share] : "-");
  pl_row_str(row, "kernel",
             q->mode == PL_ADAM_STREAM ? "-" : pl_simd_path_name(used));
  pl_row_f64(row, "gparam_s", (double)P / sec / 1e9);
  pl_row_f64(row, "h2d_gbs",
             (double)(q->mode == PL_ADAM_CPU ? P * 2 : L.h2d_bytes) / sec /
                 1e9);
  pl_row_f64(row, "d2h_gbs",
             (double)(q->mode == PL_ADAM_CPU ? P * gsz : L.d2h_bytes) / sec /
                 1e9);
  pl_row_f64(row, "link_h2d_gbs", A->bw[0]);
  pl_row_f64(row, "link_d2h_gbs", A->bw[1]);
  pl_row_f64(row, "link_bidir_gbs", A->bw[2]);
  pl_row_f64(row, "floor_ms", floor_ms);
  pl_row_f64(row, "pct_floor", 100.0 * floor_ms / t);
  double fshare = 0;
  const double joint =
      pl__adam_joint_floor(q->mode == PL_ADAM_STREAM ? 0
                           : q->mode == PL_ADAM_CPU  ? 1
                                                     : 2,
                           (double)P, (double)gsz, A->grad_host, A->bw, A->mem,
                           &fshare) *
      1e3;
  pl_row_f64(row, "mem_copy_gbs", A->mem);
  pl_row_f64(row, "joint_floor_ms", joint);
  pl_row_f64(row, "pct_joint_floor", 100.0 * joint / t);
  if (q->mode == PL_ADAM_HYBRID)
    pl_row_note(row, "joint floor at CPU share %.2f", fshare);
  if (q->mode == PL_ADAM_CPU) {
    pl_row_f64(row, "update_ms", ms[2]);
    pl_row_str(row, "optim_staging_bytes", "-");
  } else {
    pl_row_f64(row, "gpu_ms", ms[0]);
  }
  if (q->mode == PL_ADAM_HYBRID) {
    pl_row_f64(row, "cpu_ms", ms[1]);
    pl_row_f64(row, "cpu_share", ms[3]);
    pl_row_note(row, "share = CPU buckets/all (max over ranks) after the "
                     "timed steps");
  }
  /* the state, and the classic step's gradient and weight copies or the
   * hybrid's buffers (its CPU share's gradients, all of them when auto) */
  pl_row_i64(
      row, "host_bytes",
      (int64_t)(P * 12 + (q->mode == PL_ADAM_CPU ? P * (gsz + 2) : 0) +
                pl_mem_tag_current(c->dev, PL_ARENA_HOST, "optim_hybrid")));
  if (!c->cuda)
    pl_row_note(row, "link = memcpy between arenas");
  pl_row_note(row, "%s", A->hp.max_grad_norm > 0 ? "clip on" : "clip off");
  return PL_OK;
}
