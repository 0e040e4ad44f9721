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
 * The timed unit is one step.  Rows: Gparam/s per GPU (= per rank), the
 * achieved H2D/D2H GB/s, the host-link floor (Eq. 5: max(H2D bytes /
 * BW_h2d, D2H bytes / BW_d2h) of the streamed update, the link measured in
 * this same run by pinned copies on every rank at once) and the step as % of
 * it; the variant's floor from the link and host memory together
 * (joint_floor_ms: each direction, both at once, and the host-memory bytes
 * of the DMA and the CPU update over the copy rate measured in the run,
 * mem_copy_gbs; the hybrid at the share that minimizes it, in the note); the
 * device staging peak beside its bound s·β·16, the SIMD path that ran
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
#include "bench.h"
#include "ops/adamw.h"
#include "ops/stream_adamw.h"
#include "plateau/hd.h"

enum { M_CPU, M_STREAM, M_HYBRID, M_COUNT };
static const char *const mode_names[] = {"cpu", "stream", "hybrid", NULL};
static const char *const gdt_names[] = {"bf16", "f32", NULL};
static const char *const simd_names[] = {"auto", "scalar", "avx2", "avx512",
                                         NULL};

static const pl_opt adam_opts[] = {
    {"params", 0, PL_OPT_SIZE, NULL, "parameters per rank", 1, 1e12, NULL},
    {"bucket", 0, PL_OPT_SIZE_LIST, NULL, "bucket sizes β in params", 1, 1e12,
     NULL},
    {"slots", 0, PL_OPT_SIZE_LIST, NULL, "staging slots s", 1, 64, NULL},
    {"mode", 0, PL_OPT_ENUM_LIST, "cpu,stream,hybrid", "variants to run", 0, 0,
     mode_names},
    {"share", 0, PL_OPT_STR, "auto",
     "hybrid: fraction of buckets on the CPU in [0,1], or auto; a comma list "
     "sweeps (1 = pipelined CPU offload: all buckets on the CPU)",
     0, 0, NULL},
    {"grad-dtype", 0, PL_OPT_ENUM, "bf16", "gradient dtype", 0, 0, gdt_names},
    {"grad-host", 0, PL_OPT_FLAG, NULL,
     "gradients live in pinned host memory (streamed H2D with each bucket)", 0,
     0, NULL},
    {"simd", 0, PL_OPT_ENUM, "auto", "SIMD path of the CPU update", 0, 0,
     simd_names},
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

#define MAXSTEPS 4096

typedef struct adam_pt {
  int mode, slots, share; /* share: index into shares */
  size_t beta;
} adam_pt;

typedef struct adam {
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
  int nsteps;
  float gscale[MAXSTEPS];
  double update_ms;
} adam;

static pl_status step(void *st) {
  adam *A = st;
  float gs = 1.0f;
  if (A->co) {
    PL_TRY(pl_cpu_offload_adamw_step(A->co, A->s));
    pl_cpu_offload_adamw_last(A->co, &gs, &A->update_ms);
  } else {
    PL_TRY(pl_stream_adamw_step(A->so, A->s));
    gs = pl_stream_adamw_gscale(A->so); /* known once issued */
  }
  if (A->nsteps < MAXSTEPS)
    A->gscale[A->nsteps] = gs;
  A->nsteps++;
  return PL_OK;
}

static pl_status init(pl_bench_ctx *c, void *st) {
  adam *A = st;
  pl_args *a = c->args;
  A->s = c->stream;
  A->P = (size_t)pl_args_size(a, "params");
  A->link_bytes = (size_t)pl_args_size(a, "link-bytes");
  uint64_t betas[PL_OPT_LIST_MAX], slots[PL_OPT_LIST_MAX];
  int nbeta = pl_args_size_list(a, "bucket", betas, PL_OPT_LIST_MAX);
  int nslot = pl_args_size_list(a, "slots", slots, PL_OPT_LIST_MAX);
  int modes[M_COUNT], nmodes = pl_args_enum_list(a, "mode", modes, M_COUNT);
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
  if (c->warmup + c->iters > MAXSTEPS)
    return pl_set_error(PL_EINVAL, "adam: warmup + iters = %d: at most %d",
                        c->warmup + c->iters, MAXSTEPS);
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
  A->pts =
      calloc((size_t)(nmodes * nbeta * nslot * nshare) + 1, sizeof *A->pts);
  PL_ASSERT(A->pts != NULL);
  int np = 0;
  for (int mi = 0; mi < nmodes; mi++) {
    int m = modes[mi], nb = m == M_CPU ? 1 : nbeta, ns = m == M_CPU ? 1 : nslot;
    for (int bi = 0; bi < nb; bi++)
      for (int si = 0; si < ns; si++)
        for (int hi = 0; hi < (m == M_HYBRID ? nshare : 1); hi++)
          A->pts[np++] = (adam_pt){m, (int)slots[si], hi, (size_t)betas[bi]};
  }
  c->npoints = np;
  return PL_OK;
}

static pl_status point(pl_bench_ctx *c, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  adam *A = st;
  const adam_pt *q = &A->pts[p];
  if (q->mode == M_CPU)
    snprintf(label, n, "cpu %zu params", A->P);
  else
    snprintf(label, n, "%s %zu params beta=%zu s=%d%s%s", mode_names[q->mode],
             A->P, q->beta, q->slots, q->mode == M_HYBRID ? " share=" : "",
             q->mode == M_HYBRID ? A->share_txt[q->share] : "");
  pl_row_str(row, "variant", mode_names[q->mode]);
  pl_row_i64(row, "params", (int64_t)A->P);
  if (q->mode != M_CPU) {
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

/* The link, the shard, the samples and the reference clip factor: once; a
 * shard that does not fit is every point's oom row. */
static pl_status prepare(pl_bench_ctx *c, adam *A) {
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

static pl_status setup(pl_bench_ctx *c, void *st, int p) {
  adam *A = st;
  if (!A->ready) {
    A->ready = 1;
    A->ready_st = prepare(c, A);
    PL_TRY(pl_bench_agree(c, &A->ready_st));
    snprintf(A->ready_msg, sizeof A->ready_msg, "%s", pl_last_error());
  }
  if (A->ready_st != PL_OK)
    return pl_set_error(A->ready_st, "%s", A->ready_msg);
  const adam_pt *q = &A->pts[p];
  A->nsteps = 0;
  if (q->mode == M_CPU) {
    PL_TRY(pl_cpu_offload_adamw_create(c->dev, &A->hp, A->S.nt, A->S.prm,
                                       A->gdt, A->simd, A->threads, c->comm,
                                       &A->S.st, &A->co));
  } else {
    pl_stream_adamw_cfg g = pl_stream_adamw_cfg_default();
    g.bucket = q->beta;
    g.slots = q->slots;
    g.grad_dtype = A->gdt;
    g.grad_on_host = A->grad_host;
    g.share = q->mode == M_HYBRID ? A->shares[q->share] : 0.0;
    g.share_init = 0.5;
    g.simd_path = (int)A->simd;
    g.cpu_threads = A->threads;
    g.comm = c->comm;
    g.state = &A->S.st;
    PL_TRY(
        pl_stream_adamw_create(c->dev, &A->hp, &g, A->S.nt, A->S.prm, &A->so));
  }
  pl__adam_sample_snap(A->X, &A->S);
  return PL_OK;
}

static pl_status check(pl_bench_ctx *c, void *st, int p, pl_check *chk) {
  adam *A = st;
  PL_TRY(pl_stream_sync(c->stream));
  int64_t bad = 0; /* every step's clip factor equals the reference's */
  for (int k = 0; k < A->nsteps && k < MAXSTEPS; k++)
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
  adam *A = st;
  const adam_pt *q = &A->pts[p];
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
  if (q->mode != M_STREAM && pl_simd_path_resolve(A->simd, &used))
    used = PL_SIMD_SCALAR;
  pl_row_str(row, "share", q->mode == M_HYBRID ? A->share_txt[q->share] : "-");
  pl_row_str(row, "kernel",
             q->mode == M_STREAM ? "-" : pl_simd_path_name(used));
  pl_row_f64(row, "gparam_s", (double)P / sec / 1e9);
  pl_row_f64(row, "h2d_gbs",
             (double)(q->mode == M_CPU ? P * 2 : L.h2d_bytes) / sec / 1e9);
  pl_row_f64(row, "d2h_gbs",
             (double)(q->mode == M_CPU ? P * gsz : L.d2h_bytes) / sec / 1e9);
  pl_row_f64(row, "link_h2d_gbs", A->bw[0]);
  pl_row_f64(row, "link_d2h_gbs", A->bw[1]);
  pl_row_f64(row, "link_bidir_gbs", A->bw[2]);
  pl_row_f64(row, "floor_ms", floor_ms);
  pl_row_f64(row, "pct_floor", 100.0 * floor_ms / t);
  double fshare = 0;
  const double joint =
      pl__adam_joint_floor(q->mode == M_STREAM ? 0 : q->mode == M_CPU ? 1 : 2,
                           (double)P, (double)gsz, A->grad_host,
                           A->bw, A->mem, &fshare) * 1e3;
  pl_row_f64(row, "mem_copy_gbs", A->mem);
  pl_row_f64(row, "joint_floor_ms", joint);
  pl_row_f64(row, "pct_joint_floor", 100.0 * joint / t);
  if (q->mode == M_HYBRID)
    pl_row_note(row, "joint floor at CPU share %.2f", fshare);
  if (q->mode == M_CPU) {
    pl_row_f64(row, "update_ms", ms[2]);
    pl_row_str(row, "optim_staging_bytes", "-");
  } else {
    pl_row_f64(row, "gpu_ms", ms[0]);
  }
  if (q->mode == M_HYBRID) {
    pl_row_f64(row, "cpu_ms", ms[1]);
    pl_row_f64(row, "cpu_share", ms[3]);
    pl_row_note(row, "share = CPU buckets/all (max over ranks) after the "
                     "timed steps");
  }
  /* the state, and the classic step's gradient and weight copies or the
   * hybrid's buffers (its CPU share's gradients, all of them when auto) */
  pl_row_i64(row, "host_bytes",
             (int64_t)(P * 12 + (q->mode == M_CPU ? P * (gsz + 2) : 0) +
                       pl_mem_tag_current(c->dev, PL_ARENA_HOST,
                                          "optim_hybrid")));
  if (!c->cuda)
    pl_row_note(row, "link = memcpy between arenas");
  pl_row_note(row, "%s", A->hp.max_grad_norm > 0 ? "clip on" : "clip off");
  return PL_OK;
}

static void teardown(pl_bench_ctx *c, void *st, int p) {
  adam *A = st;
  pl_stream_adamw_destroy(A->so);
  pl_cpu_offload_adamw_destroy(A->co);
  A->so = NULL;
  A->co = NULL;
}

static void fini(pl_bench_ctx *c, void *st) {
  adam *A = st;
  if (A->X)
    pl_free(c->dev, A->X->w);
  free(A->X);
  pl__adam_shard_free(&A->S);
  free(A->pts);
}

const pl_bench pl_bench_adam = {
    .name = "adam",
    .summary = "optimizer step: SIMD CPU AdamW baseline vs OffloadStreamAdamW "
               "(beta x slots) vs hybrid, against the host-link floor",
    .opts = adam_opts,
    .presets = adam_presets,
    .preset_cpu = "small",
    .preset_cuda = "paper",
    .columns = "variant\tparams\tbucket\tslots\tranks\tgrad\tshare\tcpu_share\t"
               "kernel\tthreads\ttime_ms\ttime_p10_ms\ttime_p90_ms\tgparam_s\t"
               "h2d_gbs\td2h_gbs\tlink_h2d_gbs\tlink_d2h_gbs\tlink_bidir_gbs\t"
               "floor_ms\tpct_floor\tmem_copy_gbs\tjoint_floor_ms\t"
               "pct_joint_floor\tgpu_ms\tcpu_ms\tupdate_ms\t"
               "optim_staging_bytes\tbound_bytes\thost_bytes\tmax_err",
    .tags = (const char *const[]){"optim_staging", NULL},
    .state = sizeof(adam),
    .init = init,
    .point = point,
    .setup = setup,
    .run = step,
    .check = check,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
