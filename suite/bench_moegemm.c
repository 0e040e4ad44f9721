/* bench_moegemm.c — `plateau bench moegemm`: the MoE layer's grouped expert
 * GEMM against a dense GEMM of equal FLOPs (issue 3's target: >= 70% of the
 * dense cuBLAS bf16 rate).
 *
 * The grouped GEMM is what ops/moe.c issues per chunk: one GEMM per (source
 * rank, expert) segment of the receive buffer, each with its own expert's
 * weight, through pl_moe_k_moe_gemm (cublasGemmEx on CUDA, the row-
 * deterministic kernel on the CPU).  Segments are uniform here: G = E/Ep
 * local experts x Ep sources, each of m = k*N / (E*K) rows (balanced routes of
 * N tokens per rank over K chunks), so a point is (GEMM kind, K).  Kinds:
 * "up" (m x H)(H x I) as for the gate and up projections, "down" (m x I)(I x H),
 * and "wgrad" (H x m)^T-style X^T dG (H x I, fp32 accumulate) as for the weight
 * gradients.  The dense reference is one GEMM with G*m rows (wgrad: inner
 * dimension G*m) and one weight.  FLOPs 2*G*m*H*I for both; ratio = grouped /
 * dense rate.  Per rank; a time is the slowest rank's.
 *
 * Layouts (--layouts): "segments" is the source-major grouping above (G =
 * E/Ep x Ep groups of m rows, what ops/moe.c issues with --source-major or
 * when a chunk is too large to permute); "expert_major" is what it issues by
 * default since the receive buffer is permuted by (expert, source): G = E/Ep
 * groups of Ep*m rows, the same FLOPs in Ep times fewer, larger GEMMs.
 *
 * Lanes (--lanes): 0 issues the groups one after another on one stream (the
 * layer with lanes = 0); L > 0 spreads them round-robin over the stream and L
 * more (the layer's cfg.lanes), so small GEMMs share the GPU.  For wgrad,
 * acc_gbs is the traffic of the fp32 accumulators (read and written once per
 * group: 8 bytes per element of G x H x I) over the grouped time: the GEMM
 * of a chunk with few rows per expert is bound by it, not by the FLOPs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ops/moe.h"
#include "ops/moe_kernels.h"

static const char *const preset_names[] = {"small", "65k", "32k", NULL};
static const char *const kind_names[] = {"up", "down", "wgrad", NULL};
static const char *const layout_names[] = {"segments", "expert_major", NULL};

static const pl_opt moegemm_opts[] = {
    {"preset", 0, PL_OPT_ENUM, "small", "shape preset: small | 65k | 32k", 0,
     0, preset_names},
    {"chunks", 0, PL_OPT_SIZE_LIST, "1,10", "chunk counts K (1: llep)", 1,
     4096, NULL},
    {"kinds", 0, PL_OPT_ENUM_LIST, "up,down,wgrad", "GEMM kinds", 0, 0,
     kind_names},
    {"lanes", 0, PL_OPT_SIZE_LIST, "0", "extra streams the groups are spread "
     "over (0: one stream)", 0, PL_MOE_MAX_LANES, NULL},
    {"layouts", 0, PL_OPT_ENUM_LIST, "segments,expert_major",
     "groups per (source, expert) segment, or per expert with all sources' "
     "rows (the layer's default)", 0, 0, layout_names},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

#define MOEGEMM_COLUMNS                                                        \
  "kind\tlayout\tlanes\tranks\ttokens\thidden\tffn\texperts\ttopk\tK\tgroups\trows\t" \
  "dtype\tgrouped_ms\tdense_ms\tgrouped_tflops\tdense_tflops\tratio\tacc_gbs"

typedef struct gjob {
  pl_stream *s;
  int nl; /* lanes in use */
  pl_stream *ln[PL_MOE_MAX_LANES];
  pl_event *evf, *evj[PL_MOE_MAX_LANES];
  int kind; /* 0 up, 1 down, 2 wgrad */
  bool dense;
  int G;
  int64_t m, H, I;
  pl_dtype dt;
  void *X, *W, *C; /* X: G*m x max(H, I); W: G x H x I; C: G*m x max or HxI */
} gjob;

static pl_status gjob_fn(void *arg) {
  gjob *j = arg;
  size_t b = pl_dtype_size(j->dt);
  const int64_t H = j->H, I = j->I;
  int n = j->dense ? 1 : j->G;
  int64_t rows = j->dense ? (int64_t)j->G * j->m : j->m;
  const int nl = j->dense ? 0 : j->nl;
  if (nl) {
    PL_TRY(pl_event_record(j->evf, j->s));
    for (int l = 0; l < nl; l++) PL_TRY(pl_stream_wait(j->ln[l], j->evf));
  }
  for (int g = 0; g < n; g++) {
    pl_stream *q = g % (nl + 1) == 0 ? j->s : j->ln[g % (nl + 1) - 1];
    const char *Wg = (const char *)j->W + (j->dense ? 0 : (size_t)g * H * I * b);
    size_t r0 = j->dense ? 0 : (size_t)g * (size_t)j->m;
    pl_status st;
    if (j->kind == 0)
      st = pl_moe_k_moe_gemm(q, false, false, rows, I, H, 1.0f,
                             (const char *)j->X + r0 * H * b, H, Wg, I, 0.0f,
                             (char *)j->C + r0 * I * b, I, j->dt, j->dt);
    else if (j->kind == 1)
      st = pl_moe_k_moe_gemm(q, false, false, rows, H, I, 1.0f,
                             (const char *)j->X + r0 * I * b, I, Wg, H, 0.0f,
                             (char *)j->C + r0 * H * b, H, j->dt, j->dt);
    else /* dW (H x I, fp32) += X^T (rows x H)^T dG (rows x I) */
      st = pl_moe_k_moe_gemm(q, true, false, H, I, rows, 1.0f,
                             (const char *)j->X + r0 * H * b, H,
                             (const char *)j->C + r0 * I * b, I, 1.0f,
                             (float *)j->W + (j->dense ? 0 : (size_t)g * H * I),
                             I, j->dt, PL_F32);
    if (st != PL_OK) return st;
  }
  for (int l = 0; l < nl; l++) {
    PL_TRY(pl_event_record(j->evj[l], j->ln[l]));
    PL_TRY(pl_stream_wait(j->s, j->evj[l]));
  }
  return PL_OK;
}

static pl_status moegemm_run(pl_bench_ctx *ctx, void *state) {
  (void)state;
  pl_args *a = ctx->args;
  pl_dev *dev = ctx->dev;
  pl_stream *s = pl_dev_stream(dev);
  const int Ep = ctx->size;
  int preset = pl_args_enum(a, "preset");
  int64_t N, H, I;
  int E, k;
  if (preset == 1) N = 65536, H = 7168, I = 2048, E = 128, k = 8;
  else if (preset == 2) N = 32768, H = 4096, I = 4096, E = 128, k = 4;
  else N = 512, H = 128, I = 64, E = 32, k = 4;
  pl_dtype dt = pl_dev_backend(dev) == PL_BACKEND_CUDA ? PL_BF16 : PL_F32;
  if (E % Ep != 0)
    return pl_set_error(PL_EINVAL, "E=%d not a multiple of %d ranks", E, Ep);
  uint64_t Ks[PL_OPT_LIST_MAX];
  int nK = pl_args_size_list(a, "chunks", Ks, PL_OPT_LIST_MAX);
  int kinds[3], nk = pl_args_enum_list(a, "kinds", kinds, 3);
  int lays[2], nl = pl_args_enum_list(a, "layouts", lays, 2);
  uint64_t Ls[PL_OPT_LIST_MAX];
  int nL = pl_args_size_list(a, "lanes", Ls, PL_OPT_LIST_MAX);
  const int G = (E / Ep) * Ep; /* (source, local expert) segments */
  int64_t mmax = (int64_t)k * N / E;
  if (mmax < 1) mmax = 1;
  size_t b = pl_dtype_size(dt);
  size_t xr = (size_t)G * mmax, wd = H > I ? (size_t)H : (size_t)I;
  gjob j = {.s = s, .G = G, .H = H, .I = I, .dt = dt};
  pl_status st = pl_alloc(dev, PL_ARENA_DEVICE, xr * wd * b, "bench", &j.X);
  if (st == PL_OK)
    st = pl_alloc(dev, PL_ARENA_DEVICE, xr * wd * b, "bench", &j.C);
  if (st == PL_OK) /* bf16 weights, or fp32 gradients for wgrad: room for both */
    st = pl_alloc(dev, PL_ARENA_DEVICE, (size_t)G * H * I * 4, "bench", &j.W);
  if (st == PL_OK)
    st = pl_rng_fill(s, j.X, dt, xr * wd, ctx->seed + 1, 0, PL_DIST_NORMAL, 0, 1);
  if (st == PL_OK)
    st = pl_rng_fill(s, j.C, dt, xr * wd, ctx->seed + 2, 0, PL_DIST_NORMAL, 0, 1);
  if (st == PL_OK) st = pl_event_create(dev, &j.evf);
  for (int l = 0; l < PL_MOE_MAX_LANES && st == PL_OK; l++) {
    st = pl_stream_create(dev, &j.ln[l]);
    if (st == PL_OK) st = pl_event_create(dev, &j.evj[l]);
  }
  if (st == PL_OK) st = pl_stream_sync(s);
  ctx->npoints = nK * nk * nl * nL;
  for (int ki = 0; ki < nK && st == PL_OK; ki++)
    for (int lai = 0; lai < nL && st == PL_OK; lai++)
    for (int li = 0; li < nl && st == PL_OK; li++)
    for (int kk = 0; kk < nk && st == PL_OK; kk++) {
      int64_t K = (int64_t)Ks[ki];
      int64_t mseg = mmax / K > 0 ? mmax / K : 1;
      bool em = lays[li] == 1;
      j.G = em ? E / Ep : G;
      j.m = em ? mseg * Ep : mseg;
      j.kind = kinds[kk];
      j.nl = (int)Ls[lai];
      char label[80];
      snprintf(label, sizeof label, "%s %s K=%lld lanes=%d", kind_names[j.kind],
               layout_names[lays[li]], (long long)K, j.nl);
      pl_bench_progress(ctx, label);
      pl_row *row = pl_row_new(ctx);
      pl_row_str(row, "kind", kind_names[j.kind]);
      pl_row_str(row, "layout", layout_names[lays[li]]);
      pl_row_i64(row, "lanes", j.nl);
      pl_row_i64(row, "ranks", Ep);
      pl_row_i64(row, "tokens", N);
      pl_row_i64(row, "hidden", H);
      pl_row_i64(row, "ffn", I);
      pl_row_i64(row, "experts", E);
      pl_row_i64(row, "topk", k);
      pl_row_i64(row, "K", K);
      pl_row_i64(row, "groups", j.G);
      pl_row_i64(row, "rows", j.m);
      pl_row_str(row, "dtype", pl_dtype_name(dt));
      /* weights as dt for up/down, fp32 gradients for wgrad */
      pl_status ps = j.kind == 2
                         ? pl_fill(s, j.W, PL_F32, (size_t)G * H * I, 0.0)
                         : pl_rng_fill(s, j.W, dt, (size_t)G * H * I,
                                       ctx->seed + 3, 0, PL_DIST_NORMAL, 0,
                                       1.0f / sqrtf((float)H));
      pl_stats tg = {0}, td = {0};
      if (ps == PL_OK) {
        j.dense = false;
        ps = pl_bench_time(ctx, gjob_fn, &j, s, &tg);
      }
      if (ps == PL_OK) {
        j.dense = true;
        ps = pl_bench_time(ctx, gjob_fn, &j, s, &td);
      }
      if (ps != PL_OK) {
        pl_row_status_from(row, ps);
      } else {
        double fl = 2.0 * j.G * (double)j.m * H * I;
        double rg = fl / (tg.median * 1e-3) / 1e12, rd = fl / (td.median * 1e-3) / 1e12;
        pl_row_f64(row, "grouped_ms", tg.median);
        pl_row_f64(row, "dense_ms", td.median);
        pl_row_f64(row, "grouped_tflops", rg);
        pl_row_f64(row, "dense_tflops", rd);
        pl_row_f64(row, "ratio", rg / rd);
        if (j.kind == 2)
          pl_row_f64(row, "acc_gbs",
                     8.0 * j.G * (double)H * I / (tg.median * 1e-3) / 1e9);
        pl_row_check(row, "skip");
        pl_row_status(row, "ok",
                      pl_dev_backend(dev) == PL_BACKEND_CPU
                          ? "CPU: the row-deterministic kernel, not cuBLAS"
                          : j.nl ? "cublasGemmEx per group, spread over "
                                   "streams, vs one cublasGemmEx"
                                 : "cublasGemmEx per group vs one cublasGemmEx");
      }
      st = pl_row_emit(row);
    }
  for (int l = 0; l < PL_MOE_MAX_LANES; l++) {
    if (j.ln[l]) pl_stream_destroy(j.ln[l]);
    if (j.evj[l]) pl_event_destroy(j.evj[l]);
  }
  if (j.evf) pl_event_destroy(j.evf);
  pl_free(dev, j.X);
  pl_free(dev, j.C);
  pl_free(dev, j.W);
  return st;
}

const pl_bench pl_bench_moegemm = {
    .name = "moegemm",
    .summary = "MoE grouped expert GEMM (per segment, as the layer issues it) "
               "vs a dense GEMM of equal FLOPs",
    .opts = moegemm_opts,
    .columns = MOEGEMM_COLUMNS,
    .main = moegemm_run,
};
