/* adam_rows.c — the columns of a measured `plateau bench adam` point
 * (bench_adam.h): Gparam/s, the achieved H2D/D2H GB/s, the host-link floor
 * (Eq. 5) and the joint floor of link and host memory with the step as % of
 * each, the host-memory bytes a parameter and the step's share of the
 * host-memory roofline (those bytes over the copy rate measured in the run),
 * the SIMD path that ran, the GPU and CPU parts of a step and the CPU share a
 * hybrid converged to (max over ranks), and the host bytes. */
#include <math.h>
#include <string.h>

#include "bench_adam.h"

double pl__adam_host_bpp(int mode, int cached, double share, double gsz,
                         int grad_host) {
  const double state = 24; /* p, m, v read and written */
  /* the CPU update over full host copies: the state, g read and w written
   * by the update, g landed by the DMA (from the device, or copied from the
   * host gradients: read and written) and w read by it */
  const double full = state + 2 * gsz + 4 + (grad_host ? gsz : 0);
  switch (mode) {
  case PL_ADAM_STREAM:
    return state + (grad_host ? gsz : 0);
  case PL_ADAM_UPDATE:
    return state + gsz + 2;
  case PL_ADAM_CPU: /* a cached ring's slots stay in cache */
    return cached ? state + (grad_host ? gsz : 0) : full;
  default: /* the hybrid: its CPU share fetches into full host buffers */
    return (1 - share) * (state + (grad_host ? gsz : 0)) + share * full;
  }
}

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
  const int upd = q->mode == PL_ADAM_UPDATE, cpu = q->mode == PL_ADAM_CPU;
  pl_simd_path used = PL_SIMD_SCALAR;
  if (q->mode != PL_ADAM_STREAM && pl_simd_path_resolve(A->simd, &used))
    used = PL_SIMD_SCALAR;
  pl_row_str(row, "share",
             q->mode == PL_ADAM_HYBRID ? A->share_txt[q->share] : "-");
  pl_row_str(row, "kernel",
             q->mode == PL_ADAM_STREAM ? "-" : pl_simd_path_name(used));
  pl_row_f64(row, "gparam_s", (double)P / sec / 1e9);
  if (!upd) {
    pl_row_f64(row, "h2d_gbs",
               (double)(cpu ? P * 2 : L.h2d_bytes) / sec / 1e9);
    pl_row_f64(row, "d2h_gbs",
               (double)(cpu ? P * gsz : L.d2h_bytes) / sec / 1e9);
    pl_row_f64(row, "floor_ms", floor_ms);
    pl_row_f64(row, "pct_floor", 100.0 * floor_ms / t);
  }
  pl_row_f64(row, "link_h2d_gbs", A->bw[0]);
  pl_row_f64(row, "link_d2h_gbs", A->bw[1]);
  pl_row_f64(row, "link_bidir_gbs", A->bw[2]);
  /* the CPU engine's host-memory bytes: the variant's own, or the hybrid's
   * CPU share (full host buffers) */
  const double share = q->mode == PL_ADAM_HYBRID ? ms[3] : 0;
  const int cached = cpu && pl_cpu_offload_adamw_cached(A->co);
  const double cpu_mem = pl__adam_host_bpp(
      q->mode == PL_ADAM_HYBRID ? PL_ADAM_CPU : q->mode, cached, 1.0,
      (double)gsz, A->grad_host);
  double fshare = 0;
  const double joint =
      pl__adam_joint_floor(q->mode == PL_ADAM_STREAM   ? 0
                           : cpu                       ? 1
                           : q->mode == PL_ADAM_HYBRID ? 2
                                                       : 3,
                           (double)P, (double)gsz, A->grad_host, A->bw, A->mem,
                           cpu_mem, &fshare) *
      1e3;
  pl_row_f64(row, "mem_copy_gbs", A->mem);
  pl_row_f64(row, "joint_floor_ms", joint);
  pl_row_f64(row, "pct_joint_floor", 100.0 * joint / t);
  /* the host-memory roofline: the step's bytes over the copy rate */
  const double bpp = pl__adam_host_bpp(q->mode, cached, share, (double)gsz,
                                       A->grad_host);
  const double roof = (double)P * bpp / (A->mem * 1e9) * 1e3;
  pl_row_f64(row, "host_bpp", bpp);
  pl_row_f64(row, "mem_roof_ms", roof);
  pl_row_f64(row, "pct_mem_roof", 100.0 * roof / t);
  if (q->mode == PL_ADAM_HYBRID)
    pl_row_note(row, "joint floor at CPU share %.2f", fshare);
  if (cpu) {
    pl_row_i64(row, "bucket", (int64_t)pl_cpu_offload_adamw_bucket(A->co));
    pl_row_f64(row, "update_ms", ms[2]);
    pl_row_f64(row, "pct_update_roof", 100.0 * roof / ms[2]);
    pl_row_str(row, "optim_staging_bytes", "-");
    pl_row_note(row, "%s",
                cached    ? "staging: a ring kept in cache (host_bpp counts "
                            "its slots as cached)"
                : q->slots ? "staging: a ring of pieces"
                           : "staging: full host copies");
  } else if (upd) {
    pl_row_f64(row, "update_ms", t);
    pl_row_f64(row, "pct_update_roof", 100.0 * roof / t);
    pl_row_str(row, "optim_staging_bytes", "-");
    pl_row_note(row, "the SIMD update alone: gradients in host memory, no "
                     "copies, the reference clip factor");
  } else {
    pl_row_f64(row, "gpu_ms", ms[0]);
  }
  if (q->mode == PL_ADAM_HYBRID) {
    pl_row_f64(row, "cpu_ms", ms[1]);
    pl_row_f64(row, "cpu_share", ms[3]);
    pl_row_note(row, "share = CPU buckets/all (max over ranks) after the "
                     "timed steps");
  }
  /* the state, and the staging of the gradients and weights (tracked):
   * the classic step's copies (full or a ring), the update's host gradients
   * and weights, or the hybrid's buffers (its CPU share's gradients, all of
   * them when auto) */
  pl_row_i64(
      row, "host_bytes",
      (int64_t)(P * 12 +
                pl_mem_tag_current(c->dev, PL_ARENA_HOST, "optim_offload") +
                pl_mem_tag_current(c->dev, PL_ARENA_HOST, "optim_hybrid")));
  if (!c->cuda)
    pl_row_note(row, "link = memcpy between arenas");
  pl_row_note(row, "%s", A->hp.max_grad_norm > 0 ? "clip on" : "clip off");
  return PL_OK;
}
