/* bench_adam.c — `plateau bench adam`: one optimizer step of a rank's shard
 * (Θ params per rank; the paper's 2.625B), with every rank of the launch
 * stepping at once so they share the host as the paper's 8 ranks share a node
 * (DESIGN §1.4, Table 4).  Modes:
 *   cpu     the ZeRO-Offload-style baseline (baselines/cpu_adamw.c): gradients
 *           device→host, SIMD CPU AdamW, bf16 weights host→device; the whole
 *           step is timed, not only the update
 *   stream  OffloadStreamAdamW over β × s (buckets of β params, s slots)
 *   hybrid  the same plus a share of buckets on the SIMD CPU kernel
 *           concurrently (--share auto: from measured rates, refined by step)
 * Each row: step time (median, p10, p90 over ranks' slowest), Gparam/s per
 * GPU (= per rank), the achieved H2D/D2H GB/s, the host-link floor (Eq. 5:
 * max(H2D bytes / BW_h2d, D2H bytes / BW_d2h) of the streamed update, with
 * the link measured in this same run by pinned copies on every rank at once)
 * and the step as % of it, the tracked device staging bytes beside the
 * s·β·16 bound, and the check.
 *
 * Check (every point): the state of K sampled elements is snapshotted before
 * the point; after the warm-up and timed steps the reference AdamW is replayed
 * on those elements with the reference clip factor (the fixed-order global
 * norm recomputed on the host from the regenerated gradients), and master, m,
 * v and the bf16 weight read back from the device must be bit-identical; every
 * step's clip factor must equal the reference's.  Gradients are fixed over the
 * run (the bench measures the optimizer, not a backward pass). */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../baselines/cpu_adamw.h"
#include "bench.h"
#include "ops/adamw_kernels.h"
#include "ops/stream_adamw.h"
#include "plateau/hd.h"

enum { M_CPU, M_STREAM, M_HYBRID, M_COUNT };
static const char *const mode_names[] = {"cpu", "stream", "hybrid", NULL};
static const char *const preset_names[] = {"paper", "small", NULL};
static const char *const gdt_names[] = {"bf16", "f32", NULL};
static const char *const simd_names[] = {"auto", "scalar", "avx2", "avx512",
                                         NULL};

static const pl_opt adam_opts[] = {
    {"preset", 0, PL_OPT_ENUM, NULL,
     "default: paper on cuda, small on cpu.  paper: 2.625G params/rank, bucket 100M, slots 2, link buffers 1Gi; "
     "small: 1M, bucket 256K, slots 1,2, link 16Mi, 1 thread per rank "
     "(CPU backend, make run: seconds on 2 ranks)",
     0, 0, preset_names},
    {"params", 0, PL_OPT_SIZE, NULL, "parameters per rank (overrides preset)",
     1, 1e12, NULL},
    {"bucket", 0, PL_OPT_SIZE_LIST, NULL, "bucket sizes β in params",
     1, 1e12, NULL},
    {"slots", 0, PL_OPT_SIZE_LIST, NULL, "staging slots s", 1, 64, NULL},
    {"mode", 0, PL_OPT_ENUM_LIST, "cpu,stream,hybrid", "modes to run", 0, 0,
     mode_names},
    {"share", 0, PL_OPT_STR, "auto",
     "hybrid: fraction of buckets on the CPU in [0,1], or auto; a comma "
     "list sweeps (1 = pipelined CPU offload: all buckets on the CPU)",
     0, 0, NULL},
    {"grad-dtype", 0, PL_OPT_ENUM, "bf16", "gradient dtype", 0, 0, gdt_names},
    {"grad-host", 0, PL_OPT_FLAG, NULL,
     "gradients live in pinned host memory (streamed H2D with each bucket)",
     0, 0, NULL},
    {"simd", 0, PL_OPT_ENUM, "auto", "SIMD path of the CPU update", 0, 0,
     simd_names},
    {"threads", 0, PL_OPT_INT, "0", "OpenMP threads per rank (0: default)", 0,
     4096, NULL},
    {"tensors", 0, PL_OPT_INT, "16",
     "parameter tensors the shard is cut into (uneven sizes)", 1, 4096, NULL},
    {"clip", 0, PL_OPT_F64, "1.0", "max global grad norm (<= 0: off)", -1,
     1e30, NULL},
    {"link-bytes", 0, PL_OPT_SIZE, NULL,
     "buffer size of the in-run host-link measurement", 4096, 1e12, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

#define ADAM_COLUMNS                                                           \
  "mode\tparams\tbucket\tslots\tranks\tgrad\tshare\tsimd\tthreads\tstep_ms\t"  \
  "step_p10_ms\tstep_p90_ms\tgparam_s\th2d_gbs\td2h_gbs\tlink_h2d_gbs\t"       \
  "link_d2h_gbs\tlink_bidir_gbs\tfloor_ms\tpct_floor\tgpu_ms\tcpu_ms\t"        \
  "update_ms\tstaging_bytes\tstaging_bound\thost_bytes\tbackend"

#define NSAMPLE 4096
#define SCRATCH ((size_t)64 << 20) /* elements of the set-up scratch */
#define MAXSTEPS 4096

/* ---- the rank's shard ------------------------------------------------------ */
typedef struct shard {
  pl_dev *dev;
  int nt;
  pl_adamw_param *prm;
  size_t *off, total;
  pl_dtype gdt;
  int grad_host;
  uint64_t seed;
  float gstd;
  pl_adamw_state st;
} shard;

static void shard_free(shard *S) {
  if (S->prm)
    for (int i = 0; i < S->nt; i++) {
      pl_free(S->dev, S->prm[i].weight);
      pl_free(S->dev, S->prm[i].grad);
    }
  pl_free(S->dev, S->st.p);
  pl_free(S->dev, S->st.m);
  pl_free(S->dev, S->st.v);
  free(S->prm);
  free(S->off);
}

/* Uneven tensor sizes: weights 1 + (7i mod 5), the last takes the rest. */
static pl_status shard_alloc(shard *S, pl_stream *s) {
  S->prm = calloc((size_t)S->nt, sizeof *S->prm);
  S->off = calloc((size_t)S->nt, sizeof *S->off);
  if (!S->prm || !S->off) return pl_set_error(PL_ENOMEM, "adam: tables");
  double wsum = 0;
  for (int i = 0; i < S->nt; i++) wsum += 1 + (7 * i) % 5;
  size_t done = 0, gsz = pl_dtype_size(S->gdt);
  for (int i = 0; i < S->nt; i++) {
    size_t n = i == S->nt - 1
                   ? S->total - done
                   : (size_t)((double)S->total * (1 + (7 * i) % 5) / wsum);
    if (done + n > S->total) n = S->total - done;
    S->off[i] = done;
    S->prm[i].numel = n;
    done += n;
    PL_TRY(pl_alloc(S->dev, PL_ARENA_DEVICE, n * 2, "weights",
                    (void **)&S->prm[i].weight));
    PL_TRY(pl_alloc(S->dev, S->grad_host ? PL_ARENA_HOST : PL_ARENA_DEVICE,
                    n * gsz, "grads", &S->prm[i].grad));
    if (n)
      PL_TRY(pl_rng_fill(s, S->prm[i].grad, S->gdt, n, S->seed, S->off[i],
                         PL_DIST_NORMAL, 0.0f, S->gstd));
  }
  size_t n = S->total;
  PL_TRY(pl_alloc(S->dev, PL_ARENA_HOST, n * 4, "optim", (void **)&S->st.p));
  PL_TRY(pl_alloc(S->dev, PL_ARENA_HOST, n * 4, "optim", (void **)&S->st.m));
  PL_TRY(pl_alloc(S->dev, PL_ARENA_HOST, n * 4, "optim", (void **)&S->st.v));
  S->st.numel = n;
  /* initial state drawn on the device in chunks and copied to the pinned
   * host arrays (fast on both backends); never zero, v > 0 */
  size_t chunk = n < SCRATCH ? n : SCRATCH;
  float *scr = NULL;
  uint64_t sd = S->seed + 17;
  /* the scratch shrinks under a device arena limit; without any, the host
   * draws the same values itself */
  while (pl_alloc(S->dev, PL_ARENA_DEVICE, chunk * 4, "bench_scratch",
                  (void **)&scr) != PL_OK) {
    scr = NULL;
    if (chunk < 65536) break;
    chunk /= 2;
  }
  pl_clear_error();
  if (!scr) {
    float *p = S->st.p, *m = S->st.m, *v = S->st.v;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
      p[i] = pl_rng_normal(sd, i, 0.0f, 0.02f);
      m[i] = pl_rng_normal(sd + 1, i, 0.0f, 1e-4f);
      v[i] = pl_rng_uniform(sd + 2, i, 1e-9f, 1e-8f);
    }
    return pl_stream_sync(s);
  }
  pl_status st = PL_OK;
  for (int a = 0; a < 3 && st == PL_OK; a++) {
    float *dst = a == 0 ? S->st.p : a == 1 ? S->st.m : S->st.v;
    for (size_t off = 0; off < n && st == PL_OK; off += chunk) {
      size_t len = off + chunk < n ? chunk : n - off;
      st = a == 2 ? pl_rng_fill(s, scr, PL_F32, len, sd + 2, off,
                                PL_DIST_UNIFORM, 1e-9f, 1e-8f)
                  : pl_rng_fill(s, scr, PL_F32, len, sd + (uint64_t)a, off,
                                PL_DIST_NORMAL, 0.0f, a == 0 ? 0.02f : 1e-4f);
      if (st == PL_OK) st = pl_memcpy_async(s, dst + off, scr, len * 4);
    }
  }
  if (st == PL_OK) st = pl_stream_sync(s);
  pl_free(S->dev, scr);
  return st;
}

/* Gradient element i (flat) as the device holds it. */
static inline float shard_grad(const shard *S, size_t i) {
  float g = pl_rng_normal(S->seed, i, 0.0f, S->gstd);
  return S->gdt == PL_BF16 ? pl_bf16_to_f32(pl_f32_to_bf16(g)) : g;
}

/* This rank's fixed-order sum of squares, computed on the host by the
 * reference from the gradients copied back from the device, piece by piece
 * (pieces are whole norm chunks, so the chunk partials are unchanged). */
static pl_status shard_ref_sumsq(const shard *S, pl_stream *s, double *out) {
  size_t gsz = pl_dtype_size(S->gdt);
  size_t piece = (size_t)(SCRATCH / PL_ADAMW_NORM_CHUNK) * PL_ADAMW_NORM_CHUNK;
  void *buf = NULL;
  double *part = NULL;
  PL_TRY(pl_alloc(S->dev, PL_ARENA_HOST, piece * gsz, "bench_scratch", &buf));
  part = malloc((piece / PL_ADAMW_NORM_CHUNK + 1) * sizeof(double));
  PL_ASSERT(part);
  double total = 0;
  pl_status st = PL_OK;
  for (int t = 0; t < S->nt && st == PL_OK; t++) {
    size_t n = S->prm[t].numel;
    for (size_t off = 0; off < n && st == PL_OK; off += piece) {
      size_t len = off + piece < n ? piece : n - off;
      st = pl_memcpy_async(s, buf, (const char *)S->prm[t].grad + off * gsz,
                           len * gsz);
      if (st == PL_OK) st = pl_stream_sync(s);
      if (st != PL_OK) break;
      size_t nc = pl_adamw_norm_nchunks(len);
      pl_adamw_ref_sumsq_partials(buf, S->gdt, len, part);
      for (size_t c = 0; c < nc; c++) total = total + part[c];
    }
  }
  free(part);
  pl_free(S->dev, buf);
  *out = total;
  return st;
}

/* ---- timing bodies ----------------------------------------------------------- */
typedef struct job {
  int mode;
  pl_stream *s;
  pl_stream_adamw *so;
  pl_cpu_offload_adamw *co;
  int nsteps;
  float gscale[MAXSTEPS];
  double update_ms;
} job;

static pl_status job_fn(void *arg) {
  job *j = arg;
  float gs = 1.0f;
  if (j->mode == M_CPU) {
    PL_TRY(pl_cpu_offload_adamw_step(j->co, j->s));
    pl_cpu_offload_adamw_last(j->co, &gs, &j->update_ms);
  } else {
    PL_TRY(pl_stream_adamw_step(j->so, j->s));
    /* known once the step is issued (the norm comes before any update) */
    gs = pl_stream_adamw_gscale(j->so);
  }
  if (j->nsteps < MAXSTEPS) j->gscale[j->nsteps] = gs;
  j->nsteps++;
  return PL_OK;
}

typedef struct link_job {
  pl_stream *s, *s2;
  pl_event *e0, *e1;
  void *dst, *src, *dst2, *src2;
  size_t bytes;
  int both;
} link_job;

static pl_status link_fn(void *arg) {
  link_job *j = arg;
  if (!j->both) return pl_memcpy_async(j->s, j->dst, j->src, j->bytes);
  PL_TRY(pl_event_record(j->e0, j->s));
  PL_TRY(pl_stream_wait(j->s2, j->e0));
  PL_TRY(pl_memcpy_async(j->s, j->dst, j->src, j->bytes));
  PL_TRY(pl_memcpy_async(j->s2, j->dst2, j->src2, j->bytes));
  PL_TRY(pl_event_record(j->e1, j->s2));
  return pl_stream_wait(j->s, j->e1);
}

/* Pinned H2D, D2H and both at once, every rank at the same time: GB/s per
 * rank (bidir counts both directions).  Collective: if any rank cannot
 * allocate the buffers (an arena limit), every rank halves the size and tries
 * again (down to 1 MiB); if it never fits, bw stays NaN and the floor columns
 * read nan. */
static pl_status measure_link(pl_bench_ctx *ctx, size_t bytes, double bw[3]) {
  pl_dev *dev = ctx->dev;
  pl_stream *s = pl_dev_stream(dev), *s2 = NULL;
  void *h1 = NULL, *h2 = NULL, *d1 = NULL, *d2 = NULL;
  link_job j;
  memset(&j, 0, sizeof j);
  bw[0] = bw[1] = bw[2] = NAN;
  pl_status st = pl_stream_create(dev, &s2);
  if (!st) st = pl_event_create(dev, &j.e0);
  if (!st) st = pl_event_create(dev, &j.e1);
  for (; st == PL_OK && bytes >= ((size_t)1 << 20); bytes /= 2) {
    pl_status a = pl_alloc(dev, PL_ARENA_HOST, bytes, "calib", &h1);
    if (!a) a = pl_alloc(dev, PL_ARENA_HOST, bytes, "calib", &h2);
    if (!a) a = pl_alloc(dev, PL_ARENA_DEVICE, bytes, "calib", &d1);
    if (!a) a = pl_alloc(dev, PL_ARENA_DEVICE, bytes, "calib", &d2);
    if (a != PL_OK && a != PL_ENOMEM) st = a;
    int64_t bad = a != PL_OK;
    if (st == PL_OK)
      st = pl_host_allreduce_i64(ctx->comm, &bad, 1, PL_RED_MAX);
    if (st == PL_OK && !bad) break;
    pl_free(dev, h1);
    pl_free(dev, h2);
    pl_free(dev, d1);
    pl_free(dev, d2);
    h1 = h2 = d1 = d2 = NULL;
  }
  if (st == PL_OK && d2) {
    memset(h1, 0x3c, bytes);
    memset(h2, 0x3c, bytes);
    int iters = ctx->iters, warm = ctx->warmup;
    ctx->iters = 5;
    ctx->warmup = 1;
    j.s = s;
    j.s2 = s2;
    j.bytes = bytes;
    for (int k = 0; k < 3 && st == PL_OK; k++) {
      pl_stats t;
      j.both = k == 2;
      j.dst = k == 1 ? h1 : d1;
      j.src = k == 1 ? d1 : h1;
      j.dst2 = h2;
      j.src2 = d2;
      st = pl_bench_time(ctx, link_fn, &j, s, &t);
      if (st == PL_OK)
        bw[k] = (double)bytes * (k == 2 ? 2 : 1) / (t.median * 1e-3) / 1e9;
    }
    ctx->iters = iters;
    ctx->warmup = warm;
  }
  pl_dev_sync(dev);
  if (j.e0) pl_event_destroy(j.e0);
  if (j.e1) pl_event_destroy(j.e1);
  if (s2) pl_stream_destroy(s2);
  pl_free(dev, h1);
  pl_free(dev, h2);
  pl_free(dev, d1);
  pl_free(dev, d2);
  pl_clear_error();
  return st;
}

/* ---- the check ----------------------------------------------------------------- */
typedef struct sample {
  size_t idx[NSAMPLE];
  int tensor[NSAMPLE];
  int n;
  float p[NSAMPLE], m[NSAMPLE], v[NSAMPLE];
  pl_bf16 *w; /* pinned host, NSAMPLE */
} sample;

static void sample_pick(sample *X, const shard *S) {
  X->n = S->total < NSAMPLE ? (int)S->total : NSAMPLE;
  for (int k = 0; k < X->n; k++) {
    size_t i = (size_t)((double)S->total * k / X->n);
    if (k == X->n - 1) i = S->total - 1;
    X->idx[k] = i;
    int t = 0;
    while (t + 1 < S->nt && S->off[t + 1] <= i) t++;
    X->tensor[k] = t;
  }
}

static void sample_snap(sample *X, const shard *S) {
  for (int k = 0; k < X->n; k++) {
    X->p[k] = S->st.p[X->idx[k]];
    X->m[k] = S->st.m[X->idx[k]];
    X->v[k] = S->st.v[X->idx[k]];
  }
}

/* Replay nsteps of the reference on the samples; count mismatches. */
static pl_status sample_check(sample *X, const shard *S, pl_stream *s,
                              const pl_adamw_hparams *hp, int nsteps,
                              float gs_ref, int64_t *bad, int64_t *first) {
  *bad = 0;
  *first = -1;
  for (int k = 0; k < X->n; k++) {
    int t = X->tensor[k];
    PL_TRY(pl_memcpy_async(s, &X->w[k],
                           S->prm[t].weight + (X->idx[k] - S->off[t]), 2));
  }
  PL_TRY(pl_stream_sync(s));
  for (int k = 0; k < X->n; k++) {
    float p = X->p[k], m = X->m[k], v = X->v[k];
    float g = shard_grad(S, X->idx[k]);
    pl_bf16 w = 0;
    for (int st = 1; st <= nsteps; st++) {
      pl_adamw_scalars sc = pl_adamw_scalars_make(hp, st, gs_ref);
      pl_adamw_ref_update(&p, &m, &v, &g, PL_F32, &w, 1, &sc);
    }
    size_t i = X->idx[k];
    if (memcmp(&p, &S->st.p[i], 4) || memcmp(&m, &S->st.m[i], 4) ||
        memcmp(&v, &S->st.v[i], 4) || w != X->w[k]) {
      if (*first < 0) *first = (int64_t)i;
      (*bad)++;
    }
  }
  return PL_OK;
}

/* ---- the run ---------------------------------------------------------------------- */
static pl_status adam_run(pl_bench_ctx *ctx, void *state) {
  (void)state;
  pl_args *a = ctx->args;
  pl_dev *dev = ctx->dev;
  pl_stream *s = pl_dev_stream(dev);
  bool cuda = pl_dev_backend(dev) == PL_BACKEND_CUDA;
  bool small = pl_args_given(a, "preset") ? pl_args_enum(a, "preset") == 1
                                           : !cuda;
  size_t P = pl_args_given(a, "params") ? (size_t)pl_args_size(a, "params")
                                        : (small ? 1000000 : 2625000000ull);
  uint64_t betas[PL_OPT_LIST_MAX], slots[PL_OPT_LIST_MAX];
  int nbeta, nslot;
  if (pl_args_given(a, "bucket"))
    nbeta = pl_args_size_list(a, "bucket", betas, PL_OPT_LIST_MAX);
  else
    PL_TRY(pl_parse_size_list("--bucket", small ? "256K" : "100M", betas,
                              PL_OPT_LIST_MAX, &nbeta));
  if (pl_args_given(a, "slots"))
    nslot = pl_args_size_list(a, "slots", slots, PL_OPT_LIST_MAX);
  else
    PL_TRY(pl_parse_size_list("--slots", small ? "1,2" : "2", slots,
                              PL_OPT_LIST_MAX, &nslot));
  size_t link_bytes = pl_args_given(a, "link-bytes")
                          ? (size_t)pl_args_size(a, "link-bytes")
                          : (small ? (16u << 20) : (1u << 30));
  int modes[M_COUNT], nmodes = pl_args_enum_list(a, "mode", modes, M_COUNT);
  double shares[8];
  char share_txt[8][32];
  int nshare = 0;
  {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", pl_args_str(a, "share"));
    for (char *sv, *tok = strtok_r(buf, ",", &sv); tok;
         tok = strtok_r(NULL, ",", &sv)) {
      if (nshare == 8)
        return pl_set_error(PL_EINVAL, "--share: at most 8 values");
      snprintf(share_txt[nshare], sizeof share_txt[0], "%s", tok);
      shares[nshare] = -1;
      if (strcmp(tok, "auto") != 0)
        PL_TRY(pl_parse_f64("--share", tok, 0, 1, &shares[nshare]));
      nshare++;
    }
    if (nshare == 0)
      return pl_set_error(PL_EINVAL, "--share: empty (auto or a number in "
                          "[0,1], comma-separated)");
  }
  pl_dtype gdt = pl_args_enum(a, "grad-dtype") == 0 ? PL_BF16 : PL_F32;
  bool grad_host = pl_args_flag(a, "grad-host");
  pl_simd_path simd = (pl_simd_path)pl_args_enum(a, "simd");
  pl_simd_path simd_used = PL_SIMD_SCALAR;
  int threads = (int)pl_args_int(a, "threads");
  if (small && !pl_args_given(a, "threads")) threads = 1;
  /* the rank's OpenMP threads: the CPU update and the CPU backend's kernels */
  if (threads > 0) omp_set_num_threads(threads);
  int ntens = (int)pl_args_int(a, "tensors");
  if ((size_t)ntens > P) ntens = (int)P;
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  hp.max_grad_norm = pl_args_f64(a, "clip");
  if (ctx->warmup + ctx->iters > MAXSTEPS)
    return pl_set_error(PL_EINVAL, "adam: warmup + iters = %d: at most %d",
                        ctx->warmup + ctx->iters, MAXSTEPS);

  ctx->npoints = 0;
  for (int i = 0; i < nmodes; i++)
    ctx->npoints += modes[i] == M_CPU      ? 1
                    : modes[i] == M_HYBRID ? nbeta * nslot * nshare
                                           : nbeta * nslot;

  /* link ceilings of this run (all ranks at once) */
  double bw[3];
  PL_TRY(measure_link(ctx, link_bytes, bw));
  if (ctx->rank == 0)
    printf("# link (per rank, %d ranks at once, %zu-byte pinned copies): "
           "H2D %.1f GB/s, D2H %.1f GB/s, both %.1f GB/s%s\n",
           ctx->size, link_bytes, bw[0], bw[1], bw[2],
           cuda ? "" : " (cpu backend: memcpy between arenas)");

  shard S;
  memset(&S, 0, sizeof S);
  S.dev = dev;
  S.nt = ntens;
  S.total = P;
  S.gdt = gdt;
  S.grad_host = grad_host;
  S.seed = ctx->seed + 1000003ull * (uint64_t)ctx->rank;
  /* gradient std so that the global norm is ~5·sqrt(ranks): clipping at the
   * default 1.0 is active at every size (1e-4 at 2.625G params) */
  S.gstd = (float)(5.0 / sqrt((double)P));
  pl_status st = shard_alloc(&S, s);
  int64_t oom = st == PL_ENOMEM;
  if (st != PL_OK && st != PL_ENOMEM) {
    shard_free(&S);
    return st;
  }
  char oom_msg[256];
  snprintf(oom_msg, sizeof oom_msg, "%s", oom ? pl_last_error() : "");
  if (oom) { /* a result: every point gets an oom row */
    shard_free(&S);
    memset(&S, 0, sizeof S);
    st = PL_OK;
  }
  PL_TRY(pl_host_allreduce_i64(ctx->comm, &oom, 1, PL_RED_MAX));
  sample *X = NULL;
  float gs_ref = 1.0f;
  if (!oom) {
    X = calloc(1, sizeof *X);
    PL_ASSERT(X);
    sample_pick(X, &S);
    st = pl_alloc(dev, PL_ARENA_HOST, NSAMPLE * 2, "bench_scratch", (void **)&X->w);
    if (st == PL_OK && hp.max_grad_norm > 0) {
      double ss = 0;
      st = shard_ref_sumsq(&S, s, &ss);
      if (st == PL_OK) st = pl_adamw_global_sumsq(ctx->comm, ss, &ss);
      gs_ref = pl_adamw_clip_scale(&hp, ss);
    }
    if (st != PL_OK) goto done;
  }
  size_t gsz = pl_dtype_size(gdt);
  double h2d_floor_bytes = (double)P * (12 + (grad_host ? gsz : 0));
  double d2h_floor_bytes = (double)P * 12;
  double floor_ms = fmax(h2d_floor_bytes / (bw[0] * 1e9),
                         d2h_floor_bytes / (bw[1] * 1e9)) * 1e3;

  for (int mi = 0; mi < nmodes && st == PL_OK; mi++) {
    int mode = modes[mi];
    int nb = mode == M_CPU ? 1 : nbeta, ns = mode == M_CPU ? 1 : nslot;
    int nh = mode == M_HYBRID ? nshare : 1;
    for (int bi = 0; bi < nb && st == PL_OK; bi++)
      for (int si = 0; si < ns && st == PL_OK; si++)
        for (int hi = 0; hi < nh && st == PL_OK; hi++) {
        double share = shares[hi];
        const char *share_s = share_txt[hi];
        size_t beta = (size_t)betas[bi];
        int sl = (int)slots[si];
        char label[128];
        if (mode == M_CPU)
          snprintf(label, sizeof label, "cpu %zu params", P);
        else
          snprintf(label, sizeof label, "%s %zu params beta=%zu s=%d%s%s",
                   mode_names[mode], P, beta, sl,
                   mode == M_HYBRID ? " share=" : "",
                   mode == M_HYBRID ? share_s : "");
        pl_bench_progress(ctx, label);
        pl_row *row = pl_row_new(ctx);
        pl_row_str(row, "mode", mode_names[mode]);
        pl_row_i64(row, "params", (int64_t)P);
        if (mode != M_CPU) {
          pl_row_i64(row, "bucket", (int64_t)beta);
          pl_row_i64(row, "slots", sl);
          pl_row_i64(row, "staging_bound", (int64_t)(sl * beta * 16));
        }
        pl_row_i64(row, "ranks", ctx->size);
        pl_row_str(row, "grad", grad_host ? (gdt == PL_BF16 ? "bf16-host"
                                                            : "f32-host")
                                          : pl_dtype_name(gdt));
        pl_row_i64(row, "threads", threads);
        pl_row_str(row, "backend", cuda ? "cuda" : "cpu");
        if (oom) {
          pl_row_status(row, "oom", oom_msg[0] ? oom_msg
                                               : "shard did not fit (a rank)");
          st = pl_row_emit(row);
          continue;
        }
        /* optimizer for this point, on the shared pinned state */
        job *J = calloc(1, sizeof *J);
        PL_ASSERT(J);
        J->mode = mode;
        J->s = s;
        pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
        pl_status cst;
        if (mode == M_CPU) {
          cst = pl_cpu_offload_adamw_create(dev, &hp, S.nt, S.prm, gdt, simd,
                                            threads, ctx->comm, &S.st, &J->co);
        } else {
          pl_stream_adamw_cfg cfg = pl_stream_adamw_cfg_default();
          cfg.bucket = beta;
          cfg.slots = sl;
          cfg.grad_dtype = gdt;
          cfg.grad_on_host = grad_host;
          cfg.share = mode == M_HYBRID ? share : 0.0;
          cfg.share_init = 0.25;
          cfg.simd_path = (int)simd;
          cfg.cpu_threads = threads;
          cfg.comm = ctx->comm;
          cfg.state = &S.st;
          cst = pl_stream_adamw_create(dev, &hp, &cfg, S.nt, S.prm, &J->so);
        }
        int64_t cbad = cst != PL_OK;
        if ((st = pl_host_allreduce_i64(ctx->comm, &cbad, 1, PL_RED_MAX))) {
          free(J);
          break;
        }
        if (cbad) {
          if (cst == PL_OK) cst = PL_ENOMEM; /* another rank failed */
          pl_row_status_from(row, cst);
          pl_stream_adamw_destroy(J->so);
          pl_cpu_offload_adamw_destroy(J->co);
          free(J);
          st = pl_row_emit(row);
          if (cst != PL_ENOMEM && cst != PL_OK) st = cst;
          continue;
        }
        sample_snap(X, &S);
        pl_stats t;
        st = pl_bench_time(ctx, job_fn, J, s, &t);
        if (st == PL_OK) st = pl_stream_sync(s);
        pl_stream_adamw_last L;
        memset(&L, 0, sizeof L);
        if (st == PL_OK && J->so) pl_stream_adamw_last_get(J->so, &L);
        int64_t bad = 0, first = -1;
        if (st == PL_OK && ctx->check)
          st = sample_check(X, &S, s, &hp, J->nsteps, gs_ref, &bad, &first);
        /* every step's clip factor equals the reference's */
        int64_t gbad = 0;
        for (int k = 0; k < J->nsteps && k < MAXSTEPS; k++)
          gbad += memcmp(&J->gscale[k], &gs_ref, 4) != 0;
        int64_t agg[2] = {bad + gbad, 0};
        if (st == PL_OK)
          st = pl_host_allreduce_i64(ctx->comm, agg, 2, PL_RED_MAX);
        double ms[4] = {L.gpu_ms, L.cpu_ms, J->update_ms, L.share};
        if (st == PL_OK)
          st = pl_host_allreduce_f64(ctx->comm, ms, 4, PL_RED_MAX);
        if (st != PL_OK) {
          pl_row_status_from(row, st);
          pl_row_emit(row);
          pl_stream_adamw_destroy(J->so);
          pl_cpu_offload_adamw_destroy(J->co);
          free(J);
          break;
        }
        double sec = t.median * 1e-3;
        size_t h2d = mode == M_CPU ? P * 2 : L.h2d_bytes;
        size_t d2h = mode == M_CPU ? P * gsz : L.d2h_bytes;
        if (mode != M_STREAM && pl_simd_path_resolve(simd, &simd_used))
          simd_used = PL_SIMD_SCALAR;
        pl_row_str(row, "share", mode == M_HYBRID ? (share < 0 ? "auto" : share_s)
                                                  : "-");
        pl_row_str(row, "simd", mode == M_STREAM ? "-"
                                                 : pl_simd_path_name(simd_used));
        pl_row_f64(row, "step_ms", t.median);
        pl_row_f64(row, "step_p10_ms", t.p10);
        pl_row_f64(row, "step_p90_ms", t.p90);
        pl_row_f64(row, "gparam_s", (double)P / sec / 1e9);
        pl_row_f64(row, "h2d_gbs", (double)h2d / sec / 1e9);
        pl_row_f64(row, "d2h_gbs", (double)d2h / sec / 1e9);
        pl_row_f64(row, "link_h2d_gbs", bw[0]);
        pl_row_f64(row, "link_d2h_gbs", bw[1]);
        pl_row_f64(row, "link_bidir_gbs", bw[2]);
        pl_row_f64(row, "floor_ms", floor_ms);
        pl_row_f64(row, "pct_floor", 100.0 * floor_ms / t.median);
        if (mode != M_CPU) {
          pl_row_f64(row, "gpu_ms", ms[0]);
          if (mode == M_HYBRID) pl_row_f64(row, "cpu_ms", ms[1]);
          pl_row_i64(row, "staging_bytes",
                     (int64_t)pl_mem_tag_peak(dev, PL_ARENA_DEVICE,
                                              "optim_staging"));
        } else {
          pl_row_f64(row, "update_ms", ms[2]);
        }
        pl_row_i64(row, "host_bytes",
                   (int64_t)(P * 12 + (mode == M_CPU ? P * (gsz + 2) : 0)));
        char note[256];
        snprintf(note, sizeof note, "%s%s%s",
                 cuda ? "" : "cpu backend: CPU times, link = memcpy; ",
                 mode == M_HYBRID ? "share = CPU buckets/all (max over ranks) "
                                    "after the timed steps; "
                                  : "",
                 hp.max_grad_norm > 0 ? "clip on" : "clip off");
        if (mode == M_HYBRID)
          snprintf(note + strlen(note), sizeof note - strlen(note),
                   "; cpu share %.3f", ms[3]);
        if (!ctx->check) {
          pl_row_check(row, "skip");
        } else if (agg[0] == 0) {
          pl_row_check(row, "pass");
        } else {
          pl_row_check(row, "fail");
          snprintf(note + strlen(note), sizeof note - strlen(note),
                   "; CHECK FAILED: %lld of %d samples (or clip factors) "
                   "differ from the reference (max over ranks); first bad "
                   "index on rank 0: %lld",
                   (long long)agg[0], X->n, (long long)first);
        }
        pl_row_status(row, "ok", note);
        st = pl_row_emit(row);
        pl_stream_adamw_destroy(J->so);
        pl_cpu_offload_adamw_destroy(J->co);
        free(J);
      }
  }
done:
  if (X) pl_free(dev, X->w);
  free(X);
  shard_free(&S);
  return st;
}

const pl_bench pl_bench_adam = {
    .name = "adam",
    .summary = "optimizer step: SIMD CPU AdamW baseline vs OffloadStreamAdamW "
               "(beta x slots) vs hybrid, against the host-link floor",
    .opts = adam_opts,
    .columns = ADAM_COLUMNS,
    .main = adam_run,
};
