/* bench_adam.c — `plateau bench adam`: one optimizer step of a rank's shard
 * (Θ params per rank; the paper's 2.625B), with every rank of the launch
 * stepping at once so they share the host as the paper's 8 ranks share a
 * node (Table 4).  Variants:
 *   cpu     the ZeRO-Offload-style baseline (baselines/cpu_adamw.c): gradients
 *           device→host, SIMD CPU AdamW, bf16 weights host→device; the whole
 *           step is timed, not only the update
 *   stream  OffloadStreamAdamW over β × s (buckets of β params, s slots)
 *   hybrid  the same plus a share of buckets on the SIMD CPU kernel
 *           concurrently (--share auto: from measured rates, refined by step)
 *   update  the SIMD CPU update alone over gradients already in host memory
 *           (no copies, the reference clip factor): what PyTorch's fused CPU
 *           AdamW peer (analysis/peers/torch_adamw.py) times
 * The cpu variant runs once per --cpu-staging entry: "full" (host copies of
 * every gradient and weight) or "ringS" (a ring of S pieces), each with an
 * optional ":PIECE" (elements per piece; default PL_CPU_OFFLOAD_BUCKET), e.g.
 * full,ring3,ring3:256Ki; the bucket and slots columns hold them (slots 0:
 * full).  A ring within PL_CPU_OFFLOAD_CACHED_BYTES is kept in cache
 * (cpu_adamw.h).
 * The timed unit is one step.  Rows: Gparam/s per GPU (= per rank), the
 * achieved H2D/D2H GB/s, the host-link floor (Eq. 5: max(H2D bytes /
 * BW_h2d, D2H bytes / BW_d2h) of the streamed update, the link measured in
 * this same run by pinned copies on every rank at once) and the step as % of
 * it; the variant's floor from the link and host memory together
 * (joint_floor_ms: each direction, both at once, and the host-memory bytes
 * of the DMA and the CPU update over the copy rate measured in the run,
 * mem_copy_gbs; the hybrid at the share that minimizes it, in the note); the
 * host-memory bytes a parameter of the variant (host_bpp, counted from the
 * algorithm) and the step's share of the host-memory roofline (mem_roof_ms
 * = host_bpp·Θ / mem_copy_gbs, pct_mem_roof; the cpu and update rows also
 * of their update alone, pct_update_roof); the device staging peak beside its
 * bound s·β·16, the SIMD path that ran
 * (`kernel`) and the CPU share a hybrid step converged to (auto: from 0.5,
 * then each step r_cpu / (r_cpu + r_gpu) of the step before, so the
 * warm-ups converge it).
 *
 * Check: the state of sampled elements is snapshotted before the point;
 * after the warm-up and timed steps the reference AdamW is replayed on them
 * with the reference clip factor (the fixed-order global norm recomputed on
 * the host from the gradients), and master, m, v and the bf16 weight read
 * back must be bit-identical; every step's clip factor must equal the
 * reference's (adam_shard.c). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../baselines/cpu_adamw.h"
#include "adam_shard.h"
#include "harness/bench.h"
#include "ops/adamw.h"
#include "ops/stream_adamw.h"

/* Steps of a point whose clip factors are kept (warm-ups + timed). */
#define PL_ADAM_MAXSTEPS 4096

/* A point: the variant and its bucket size, slots and CPU share (cpu: the
 * staging's ring slots, 0 for full host copies, and its piece, 0 for the
 * staging's default). */
typedef struct adam_pt {
  int mode, slots, share; /* share: index into shares */
  size_t beta;
} adam_pt;

/* The bench's state: the options, the points, the run's reference state,
 * the point's optimizer. */
typedef struct adam_bench {
  size_t P, link_bytes;
  pl_dtype gdt;
  bool grad_host;
  pl_simd_path simd;
  int threads, ntens;
  pl_adamw_hparams hp;
  double shares[8];
  char share_txt[8][32];
  adam_pt *pts;
  /* once: the link, the shard, the samples, the reference clip factor */
  int ready;
  pl_status ready_st;
  char ready_msg[512];
  double bw[3], mem;
  pl_adam_shard S;
  pl_adam_sample *X;
  float gs_ref;
  /* the point's optimizer and its steps' clip factors */
  pl_stream *s;
  pl_stream_adamw *so;
  pl_cpu_offload_adamw *co;
  void *ug;    /* update: the gradients in pinned host memory      */
  pl_bf16 *uw; /* update: the bf16 weights it writes (host)        */
  int nsteps;
  float gscale[PL_ADAM_MAXSTEPS];
  double update_ms;
} adam_bench;

/* ---- the variants ---------------------------------------------------------
 * The drivers of the variants
 * (the bench's state above): the reference state every point of a run shares
 * (the host link and host memory measured once, the shard, its samples and the
 * reference clip factor), a point's optimizer as its variant makes it (cpu:
 * the ZeRO-Offload-style step of baselines/cpu_adamw.c with its staging;
 * stream and hybrid: OffloadStreamAdamW over β × s, the hybrid with its CPU
 * share; update: the SIMD update alone over host gradients, what PyTorch's
 * fused CPU AdamW peer times), and the step, the timed unit, with each
 * step's clip factor recorded for the check. */

/* The update variant's step: the whole shard in one call, the reference
 * clip factor (the peer's opt.step() clips nothing either). */
static pl_status update_step(adam_bench *A) {
  pl_adamw_scalars k = pl_adamw_scalars_make(&A->hp, A->nsteps + 1, A->gs_ref);
  return pl__cpu_adamw_simd(A->simd, A->threads, A->S.st.p, A->S.st.m,
                            A->S.st.v, A->ug, A->gdt, A->uw, A->P, &k);
}

/* The timed unit: one step of the point's optimizer; its clip factor is
 * recorded (the first PL_ADAM_MAXSTEPS). */
static pl_status step(void *st) {
  adam_bench *A = st;
  float gs = 1.0f;
  if (A->ug) {
    PL_TRY(update_step(A));
    gs = A->gs_ref;
  } else if (A->co) {
    PL_TRY(pl_cpu_offload_adamw_step(A->co, A->s));
    pl_cpu_offload_adamw_last(A->co, &gs, &A->update_ms);
  } else {
    PL_TRY(pl_stream_adamw_step(A->so, A->s));
    gs = pl_stream_adamw_gscale(A->so); /* known once issued */
  }
  if (A->nsteps < PL_ADAM_MAXSTEPS)
    A->gscale[A->nsteps] = gs;
  A->nsteps++;
  return PL_OK;
}

/* The link, the shard, the samples and the reference clip factor: once; a
 * shard that does not fit is every point's oom row. */
static pl_status adam_prepare(pl_bench_ctx *c, adam_bench *A) {
  PL_TRY(pl__adam_link(c, A->link_bytes, A->bw));
  PL_TRY(pl__adam_hostmem(c, A->link_bytes, &A->mem));
  if (c->rank == 0)
    printf("# link (per rank, %d ranks at once, %zu-byte pinned copies): "
           "H2D %.1f GB/s, D2H %.1f GB/s, both %.1f GB/s%s; host memory "
           "copy %.1f GB/s (read + write, %d threads)\n",
           c->size, A->link_bytes, A->bw[0], A->bw[1], A->bw[2],
           c->cuda ? "" : " (cpu backend: memcpy between arenas)", A->mem,
           omp_get_max_threads());
  A->S = (pl_adam_shard){.dev = c->dev,
                         .nt = A->ntens,
                         .total = A->P,
                         .gdt = A->gdt,
                         .grad_host = A->grad_host,
                         .seed = c->seed + 1000003ull * (uint64_t)c->rank,
                         /* global norm ~5·sqrt(ranks): clipping at 1.0
                          * active at every size (1e-4 at 2.625G params) */
                         .gstd = (float)(5.0 / sqrt((double)A->P))};
  return pl__adam_shard_make(c, &A->S, &A->hp, &A->X, &A->gs_ref);
}

/* The update variant's host gradients (copied from the shard's, tensor by
 * tensor) and weights, tag "optim_offload". */
static pl_status update_create(pl_bench_ctx *c, adam_bench *A) {
  const size_t gsz = pl_dtype_size(A->gdt);
  PL_TRY(pl_alloc(c->dev, PL_ARENA_HOST, A->P * gsz, "optim_offload", &A->ug));
  PL_TRY(pl_alloc(c->dev, PL_ARENA_HOST, A->P * 2, "optim_offload",
                  (void **)&A->uw));
  for (int i = 0; i < A->S.nt; i++)
    PL_TRY(pl_memcpy_async(c->stream, (char *)A->ug + A->S.off[i] * gsz,
                           A->S.prm[i].grad, A->S.prm[i].numel * gsz));
  return pl_stream_sync(c->stream);
}

/* The update variant: the bf16 weights it wrote, copied to the device (not
 * timed; the check reads the device's). */
static pl_status update_publish(pl_bench_ctx *c, adam_bench *A) {
  if (!A->uw)
    return PL_OK;
  for (int i = 0; i < A->S.nt; i++)
    PL_TRY(pl_memcpy_async(c->stream, A->S.prm[i].weight, A->uw + A->S.off[i],
                           A->S.prm[i].numel * 2));
  return pl_stream_sync(c->stream);
}

/* The optimizer of point q over the prepared shard: the classic CPU step
 * (cpu) or OffloadStreamAdamW (stream; hybrid with its CPU share). */
static pl_status adam_create(pl_bench_ctx *c, adam_bench *A, const adam_pt *q) {
  if (q->mode == PL_ADAM_UPDATE) {
    PL_TRY(update_create(c, A));
  } else if (q->mode == PL_ADAM_CPU) {
    PL_TRY(pl_cpu_offload_adamw_create(c->dev, &A->hp, A->S.nt, A->S.prm,
                                       A->gdt, A->simd, A->threads, c->comm,
                                       &A->S.st, &A->co));
    PL_TRY(pl_cpu_offload_adamw_set_staging(A->co, q->slots, q->beta));
  } else {
    pl_stream_adamw_cfg g = pl_stream_adamw_cfg_default();
    g.bucket = q->beta;
    g.slots = q->slots;
    g.grad_dtype = A->gdt;
    g.grad_on_host = A->grad_host;
    g.share = q->mode == PL_ADAM_HYBRID ? A->shares[q->share] : 0.0;
    g.share_init = 0.5;
    g.simd_path = (int)A->simd;
    g.cpu_threads = A->threads;
    g.comm = c->comm;
    g.state = &A->S.st;
    PL_TRY(
        pl_stream_adamw_create(c->dev, &A->hp, &g, A->S.nt, A->S.prm, &A->so));
  }
  return PL_OK;
}

/* The point's optimizer, destroyed (either variant; none: nothing). */
static void adam_destroy(adam_bench *A) {
  pl_stream_adamw_destroy(A->so);
  pl_cpu_offload_adamw_destroy(A->co);
  if (A->ug)
    pl_free(A->S.dev, A->ug);
  if (A->uw)
    pl_free(A->S.dev, A->uw);
  A->so = NULL;
  A->co = NULL;
  A->ug = NULL;
  A->uw = NULL;
}

/* ---- the columns ----------------------------------------------------------
 * The columns of a measured point
 * (the bench's state above): Gparam/s, the achieved H2D/D2H GB/s, the host-link
 * floor (Eq. 5) and the joint floor of link and host memory with the step as %
 * of each, the host-memory bytes a parameter and the step's share of the
 * host-memory roofline (those bytes over the copy rate measured in the run),
 * the SIMD path that ran, the GPU and CPU parts of a step and the CPU share a
 * hybrid converged to (max over ranks), and the host bytes. */

/* Host-memory bytes a parameter that variant `mode` (PL_ADAM_*) moves in a
 * step, counted from the algorithm: the CPU update's reads and writes and
 * the DMA's, a cpu ring kept in cache (cached) counting none for its slots;
 * the hybrid at CPU share `share`. */
static double host_bpp(int mode, int cached, double share, double gsz,
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

/* The columns of measured point q: rates, the link and joint floors, the
 * host-memory roofline, the parts, the host bytes.  Collective (max over
 * ranks). */
static pl_status adam_row(pl_bench_ctx *c, const adam_bench *A,
                          const adam_pt *q, pl_row *row) {
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
    pl_row_f64(row, "h2d_gbs", (double)(cpu ? P * 2 : L.h2d_bytes) / sec / 1e9);
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
  const double cpu_mem =
      host_bpp(q->mode == PL_ADAM_HYBRID ? PL_ADAM_CPU : q->mode, cached, 1.0,
               (double)gsz, A->grad_host);
  double fshare = 0;
  const double joint =
      pl__adam_joint_floor(q->mode, (double)P, (double)gsz, A->grad_host, A->bw,
                           A->mem, cpu_mem, &fshare) *
      1e3;
  pl_row_f64(row, "mem_copy_gbs", A->mem);
  pl_row_f64(row, "joint_floor_ms", joint);
  pl_row_f64(row, "pct_joint_floor", 100.0 * joint / t);
  /* the host-memory roofline: the step's bytes over the copy rate */
  const double bpp =
      host_bpp(q->mode, cached, share, (double)gsz, A->grad_host);
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
                cached     ? "staging: a ring kept in cache (host_bpp counts "
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

static const char *const gdt_names[] = {"bf16", "f32", NULL};

static const pl_opt adam_opts[] = {
    {"params", 0, PL_OPT_SIZE, NULL, "parameters per rank", 1, 1e12, NULL},
    {"bucket", 0, PL_OPT_SIZE_LIST, NULL, "bucket sizes β in params", 1, 1e12,
     NULL},
    {"slots", 0, PL_OPT_SIZE_LIST, NULL, "staging slots s", 1, 64, NULL},
    {"mode", 0, PL_OPT_ENUM_LIST, "cpu,stream,hybrid", "variants to run", 0, 0,
     pl__adam_mode_names},
    {"cpu-staging", 0, PL_OPT_STR, "ring3",
     "cpu: staging of the gradients and weights, a comma list of full or "
     "ringS (a ring of S pieces), each with an optional :PIECE (elements a "
     "piece), e.g. full,ring3,ring3:256Ki",
     0, 0, NULL},
    {"share", 0, PL_OPT_STR, "auto",
     "hybrid: fraction of buckets on the CPU in [0,1], or auto; a comma list "
     "sweeps (1 = pipelined CPU offload: all buckets on the CPU)",
     0, 0, NULL},
    {"grad-dtype", 0, PL_OPT_ENUM, "bf16", "gradient dtype", 0, 0, gdt_names},
    {"grad-host", 0, PL_OPT_FLAG, NULL,
     "gradients live in pinned host memory (streamed H2D with each bucket)", 0,
     0, NULL},
    {"simd", 0, PL_OPT_ENUM, "auto", "SIMD path of the CPU update", 0, 0,
     pl_simd_path_names},
    {"threads", 0, PL_OPT_INT, "0", "OpenMP threads per rank (0: default)", 0,
     4096, NULL},
    {"tensors", 0, PL_OPT_INT, "16",
     "parameter tensors the shard is cut into (uneven sizes)", 1, 4096, NULL},
    {"clip", 0, PL_OPT_F64, "1.0", "max global grad norm (<= 0: off)", -1, 1e30,
     NULL},
    {"link-bytes", 0, PL_OPT_SIZE, NULL,
     "buffer size of the in-run host-link measurement", 4096, 1e12, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

/* small: the CPU backend under `make run`, seconds on 2 ranks */
static const pl_preset adam_presets[] = {
    {"paper", "params=2625M bucket=100M slots=2 link-bytes=1Gi"},
    {"small", "params=1M bucket=256K slots=1,2 link-bytes=16Mi threads=1"},
    {NULL, NULL},
};

/* --cpu-staging: up to 8 entries "full" or "ringS", each with an optional
 * ":PIECE"; slots 0 for full, piece 0 for the default. */
static pl_status parse_staging(const char *spec, int *slots, uint64_t *piece,
                               int *n) {
  char buf[256];
  if (strlen(spec) >= sizeof buf)
    return pl_set_error(PL_EINVAL, "--cpu-staging=%.32s...: too long", spec);
  snprintf(buf, sizeof buf, "%s", spec);
  *n = 0;
  for (char *sv, *tok = strtok_r(buf, ",", &sv); tok;
       tok = strtok_r(NULL, ",", &sv)) {
    if (*n == 8)
      return pl_set_error(PL_EINVAL, "--cpu-staging=%s: at most 8 entries",
                          spec);
    char *colon = strchr(tok, ':');
    piece[*n] = 0;
    if (colon) {
      *colon = 0;
      PL_TRY(pl_parse_size("--cpu-staging", colon + 1, &piece[*n]));
      if (piece[*n] == 0)
        return pl_set_error(PL_EINVAL,
                            "--cpu-staging=%s: a piece of 0 "
                            "elements (allowed: >= 1)",
                            spec);
    }
    char *end = NULL;
    long sl = strncmp(tok, "ring", 4) == 0 ? strtol(tok + 4, &end, 10) : -1;
    if (strcmp(tok, "full") == 0)
      slots[*n] = 0;
    else if (end && end != tok + 4 && *end == 0 && sl >= 1 && sl <= 64)
      slots[*n] = (int)sl;
    else
      return pl_set_error(PL_EINVAL,
                          "--cpu-staging=%s: '%s': allowed full "
                          "or ringS (S in 1..64), each with an optional "
                          ":PIECE",
                          spec, tok);
    (*n)++;
  }
  if (*n == 0)
    return pl_set_error(PL_EINVAL, "--cpu-staging: empty (full or ringS, "
                                   "comma-separated)");
  return PL_OK;
}

static pl_status init(pl_bench_ctx *c, void *st) {
  adam_bench *A = st;
  pl_args *a = c->args;
  A->s = c->stream;
  A->P = (size_t)pl_args_size(a, "params");
  A->link_bytes = (size_t)pl_args_size(a, "link-bytes");
  uint64_t betas[PL_OPT_LIST_MAX], slots[PL_OPT_LIST_MAX];
  int nbeta = pl_args_size_list(a, "bucket", betas, PL_OPT_LIST_MAX);
  int nslot = pl_args_size_list(a, "slots", slots, PL_OPT_LIST_MAX);
  int rings[8], nring = 0;
  uint64_t pieces[8];
  PL_TRY(parse_staging(pl_args_str(a, "cpu-staging"), rings, pieces, &nring));
  int modes[PL_ADAM_MODES],
      nmodes = pl_args_enum_list(a, "mode", modes, PL_ADAM_MODES);
  int nshare = 0;
  char buf[256];
  const char *share = pl_args_str(a, "share");
  if (share[0] == ',' || share[strlen(share) - 1] == ',' || strstr(share, ",,"))
    return pl_set_error(PL_EINVAL,
                        "--share=%s: empty list element (allowed: auto or a "
                        "number in [0,1], comma-separated)",
                        share);
  if (strlen(share) >= sizeof buf)
    return pl_set_error(PL_EINVAL, "--share=%.32s...: too long", share);
  snprintf(buf, sizeof buf, "%s", share);
  for (char *sv, *tok = strtok_r(buf, ",", &sv); tok;
       tok = strtok_r(NULL, ",", &sv)) {
    if (nshare == 8)
      return pl_set_error(PL_EINVAL, "--share=%s: at most 8 values", share);
    snprintf(A->share_txt[nshare], sizeof A->share_txt[0], "%s", tok);
    A->shares[nshare] = -1;
    if (strcmp(tok, "auto") != 0)
      PL_TRY(pl_parse_f64("--share", tok, 0, 1, &A->shares[nshare]));
    nshare++;
  }
  if (nshare == 0)
    return pl_set_error(PL_EINVAL, "--share: empty (auto or a number in "
                                   "[0,1], comma-separated)");
  if (c->warmup + c->iters > PL_ADAM_MAXSTEPS)
    return pl_set_error(PL_EINVAL, "adam: warmup + iters = %d: at most %d",
                        c->warmup + c->iters, PL_ADAM_MAXSTEPS);
  A->gdt = pl_args_enum(a, "grad-dtype") == 0 ? PL_BF16 : PL_F32;
  A->grad_host = pl_args_flag(a, "grad-host");
  A->simd = (pl_simd_path)pl_args_enum(a, "simd");
  A->threads = (int)pl_args_int(a, "threads");
  /* the rank's OpenMP threads: the CPU update and the CPU backend's kernels */
  if (A->threads > 0)
    omp_set_num_threads(A->threads);
  A->ntens = (int)pl_args_int(a, "tensors");
  if ((size_t)A->ntens > A->P)
    A->ntens = (int)A->P;
  A->hp = pl_adamw_hparams_default();
  A->hp.max_grad_norm = pl_args_f64(a, "clip");
  A->pts = calloc((size_t)(nmodes * (nbeta * nslot * nshare + nring)) + 1,
                  sizeof *A->pts);
  PL_ASSERT(A->pts != NULL);
  int np = 0;
  for (int mi = 0; mi < nmodes; mi++) {
    int m = modes[mi];
    if (m == PL_ADAM_UPDATE) {
      A->pts[np++] = (adam_pt){m, 0, 0, 0};
      continue;
    }
    if (m == PL_ADAM_CPU) {
      for (int ri = 0; ri < nring; ri++)
        A->pts[np++] = (adam_pt){m, rings[ri], 0, (size_t)pieces[ri]};
      continue;
    }
    for (int bi = 0; bi < nbeta; bi++)
      for (int si = 0; si < nslot; si++)
        for (int hi = 0; hi < (m == PL_ADAM_HYBRID ? nshare : 1); hi++)
          A->pts[np++] = (adam_pt){m, (int)slots[si], hi, (size_t)betas[bi]};
  }
  c->npoints = np;
  return PL_OK;
}

static pl_status point(pl_bench_ctx *c, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  adam_bench *A = st;
  const adam_pt *q = &A->pts[p];
  if (q->mode == PL_ADAM_CPU && q->slots)
    snprintf(label, n, "cpu %zu params ring=%d piece=%zu", A->P, q->slots,
             q->beta);
  else if (q->mode == PL_ADAM_CPU)
    snprintf(label, n, "cpu %zu params full staging piece=%zu", A->P, q->beta);
  else if (q->mode == PL_ADAM_UPDATE)
    snprintf(label, n, "update %zu params", A->P);
  else
    snprintf(label, n, "%s %zu params beta=%zu s=%d%s%s",
             pl__adam_mode_names[q->mode], A->P, q->beta, q->slots,
             q->mode == PL_ADAM_HYBRID ? " share=" : "",
             q->mode == PL_ADAM_HYBRID ? A->share_txt[q->share] : "");
  pl_row_str(row, "variant", pl__adam_mode_names[q->mode]);
  pl_row_i64(row, "params", (int64_t)A->P);
  if (q->mode == PL_ADAM_CPU)
    pl_row_i64(row, "slots", q->slots);
  if (q->mode != PL_ADAM_CPU && q->mode != PL_ADAM_UPDATE) {
    pl_row_i64(row, "bucket", (int64_t)q->beta);
    pl_row_i64(row, "slots", q->slots);
    pl_row_i64(row, "bound_bytes", (int64_t)((size_t)q->slots * q->beta * 16));
  }
  pl_row_i64(row, "ranks", c->size);
  pl_row_str(row, "grad",
             A->grad_host ? (A->gdt == PL_BF16 ? "bf16-host" : "f32-host")
                          : pl_dtype_name(A->gdt));
  pl_row_i64(row, "threads", A->threads);
  return PL_OK;
}

static pl_status setup(pl_bench_ctx *c, void *st, int p) {
  adam_bench *A = st;
  if (!A->ready) {
    A->ready = 1;
    A->ready_st = adam_prepare(c, A);
    PL_TRY(pl_bench_agree(c, &A->ready_st));
    snprintf(A->ready_msg, sizeof A->ready_msg, "%s", pl_last_error());
  }
  if (A->ready_st != PL_OK)
    return pl_set_error(A->ready_st, "%s", A->ready_msg);
  const adam_pt *q = &A->pts[p];
  A->nsteps = 0;
  PL_TRY(adam_create(c, A, q));
  pl__adam_sample_snap(A->X, &A->S);
  return PL_OK;
}

static pl_status check(pl_bench_ctx *c, void *st, int p, pl_check *chk) {
  adam_bench *A = st;
  PL_TRY(pl_stream_sync(c->stream));
  PL_TRY(update_publish(c, A));
  int64_t bad = 0; /* every step's clip factor equals the reference's */
  for (int k = 0; k < A->nsteps && k < PL_ADAM_MAXSTEPS; k++)
    bad += memcmp(&A->gscale[k], &A->gs_ref, 4) != 0;
  pl_check_that(chk, bad == 0,
                "%lld steps' clip factors differ from the "
                "reference's",
                (long long)bad);
  return pl__adam_sample_check(A->X, &A->S, c->stream, &A->hp, A->nsteps,
                               A->gs_ref, chk);
}

static pl_status finish(pl_bench_ctx *c, void *st, int p, pl_row *row,
                        pl_work *w) {
  adam_bench *A = st;
  return adam_row(c, A, &A->pts[p], row);
}

static void teardown(pl_bench_ctx *c, void *st, int p) {
  adam_destroy(st);
}

static void fini(pl_bench_ctx *c, void *st) {
  adam_bench *A = st;
  if (A->X)
    pl_free(c->dev, A->X->w);
  free(A->X);
  pl__adam_shard_free(&A->S);
  free(A->pts);
}

const pl_bench pl_bench_adam = {
    .name = "adam",
    .summary = "optimizer step: SIMD CPU AdamW baseline vs OffloadStreamAdamW "
               "(beta x slots) vs hybrid, against the host-link floor and the "
               "host-memory roofline",
    .opts = adam_opts,
    .presets = adam_presets,
    .preset_cpu = "small",
    .preset_cuda = "paper",
    .columns = "variant\tparams\tbucket\tslots\tranks\tgrad\tshare\tcpu_share\t"
               "kernel\tthreads\ttime_ms\ttime_p10_ms\ttime_p90_ms\tgparam_s\t"
               "h2d_gbs\td2h_gbs\tlink_h2d_gbs\tlink_d2h_gbs\tlink_bidir_gbs\t"
               "floor_ms\tpct_floor\tmem_copy_gbs\tjoint_floor_ms\t"
               "pct_joint_floor\thost_bpp\tmem_roof_ms\tpct_mem_roof\t"
               "gpu_ms\tcpu_ms\tupdate_ms\tpct_update_roof\t"
               "optim_staging_bytes\tbound_bytes\thost_bytes\tmax_err",
    .tags = (const char *const[]){"optim_staging", NULL},
    .state = sizeof(adam_bench),
    .init = init,
    .point = point,
    .setup = setup,
    .run = step,
    .check = check,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
