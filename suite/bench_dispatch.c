/* bench_dispatch.c — `plateau bench dispatch`: ep vs llep vs pipelined_llep on
 * the routing profiles of DESIGN.md §1.1 (the paper's Tables 6-9).
 *
 * One row per (variant, profile, chunking): fwd+bwd time (median, p10, p90 of
 * -n timed iterations after -w warm-ups; an iteration is forward, backward with
 * per-chunk recompute, context free), forward-only time, the tracked device
 * peak of one fwd+bwd with the live set at the peak, the operator's own
 * share of it (op_peak: the peak above what was resident before the call:
 * weights, fp32 gradients, activations, check buffers), the "dispatch" tag's
 * peak, the pool high-water mark, the plan (pieces, imbalance before/after),
 * chunk count K and c_eff, the group-wide max-send ratio (max over (chunk,
 * destination) of routes received / mean), routes moved between ranks,
 * effective all-to-all bandwidth (bytes moved by the a2a's of fwd+bwd / fwd+bwd
 * time: an effective figure, the a2a's are not timed alone) and effective
 * expert-GEMM TFLOP/s (11 GEMMs of 2*R*H*I FLOPs per fwd+bwd over the whole
 * time), the expert GEMM launches of the busiest chunk (`gemms`, fwd + bwd
 * with recompute: 11 per group; one group per expert slot when the chunk is
 * expert-major, one per (source, expert) segment otherwise; --source-major
 * forces the latter for comparison) and the expert-major chunk count.  Check: out and dx against the ep variant on the same inputs
 * (normwise; f32 on the CPU is bit-exact), and the pipelined rows' dispatch
 * peak against the bound 2*Ep*k*c_eff*H*b.
 *
 * Presets (Ep = the ranks of the run): 65k = N 65,536/rank, H 7168, I 2048,
 * E 128, top-8, c 6554 (K=10); 32k = N 32,768/rank, H = I = 4096, E 128,
 * top-4, c 10,923 (K=3); small = a CPU-sized shape with E 32 for `make run`.
 * Any shape flag overrides the preset's value.
 *
 * --lanes L (a list): the layer's cfg.lanes, extra compute streams its expert
 * GEMMs are spread over (and, in backward, the gate/up weight gradients run
 * on beside dWd and dX); one row per value.  `stages`: rank 0's compute-
 * stream time per stage of the last timed fwd+bwd (cfg.profile: events between
 * the stages; see pl_moe_stage in ops/moe.h), in ms, summed over chunks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "bench.h"
#include "model/router.h"
#include "ops/moe.h"
#include "plateau/hd.h"

static const char *const variant_names[] = {"ep", "llep", "pipelined_llep",
                                            NULL};
static const char *const profile_names[] = {"balanced", "95/16", "80/16",
                                            "50/4", "router", NULL};
static const char *const chunk_names[] = {"strided", "contiguous", NULL};
static const char *const preset_names[] = {"small", "65k", "32k", NULL};
static const char *const dtype_names[] = {"bf16", "f32", NULL};

static const pl_opt dispatch_opts[] = {
    {"preset", 0, PL_OPT_ENUM, "small", "shape preset: small | 65k | 32k", 0,
     0, preset_names},
    {"variants", 0, PL_OPT_ENUM_LIST, "ep,llep,pipelined_llep",
     "variants to run", 0, 0, variant_names},
    {"profiles", 0, PL_OPT_ENUM_LIST, "balanced,95/16,80/16,50/4",
     "routing profiles; 'router' = a softmax top-k router over x with random "
     "W_r (std 1/sqrt(H)), weights renormalized", 0, 0, profile_names},
    {"chunking", 0, PL_OPT_ENUM_LIST, "strided",
     "pipelined chunk positions: strided, contiguous or both (Table 8)", 0, 0,
     chunk_names},
    {"tokens", 0, PL_OPT_SIZE, NULL, "tokens per rank N", 0, 1e9, NULL},
    {"hidden", 0, PL_OPT_SIZE, NULL, "hidden size H", 1, 1e6, NULL},
    {"ffn", 0, PL_OPT_SIZE, NULL, "expert FFN width I", 1, 1e6, NULL},
    {"experts", 0, PL_OPT_INT, NULL, "experts E (a multiple of the ranks)", 1,
     1e6, NULL},
    {"topk", 0, PL_OPT_INT, NULL, "routes per token k", 1, 64, NULL},
    {"cap", 0, PL_OPT_SIZE, NULL, "per-source token cap c (Eq. 1)", 1, 1e9,
     NULL},
    {"kmax", 0, PL_OPT_INT, "64", "chunk ceiling K_max (Eq. 1)", 1, 4096,
     NULL},
    {"alpha", 0, PL_OPT_F64, "1.0", "LLEP capacity factor", 0.01, 100, NULL},
    {"min-piece", 0, PL_OPT_SIZE, NULL,
     "LLEP minimum spilled piece m (default 1024; 64 for small)", 0, 1e9,
     NULL},
    {"lambda", 0, PL_OPT_F64, "1.3", "LLEP skip threshold (0: always plan)",
     0, 100, NULL},
    {"dtype", 0, PL_OPT_ENUM, "bf16", "activation and weight storage", 0, 0,
     dtype_names},
    {"no-overlap", 0, PL_OPT_FLAG, NULL,
     "pipelined: issue everything on one stream (no comm stream)", 0, 0,
     NULL},
    {"lanes", 0, PL_OPT_SIZE_LIST, "2",
     "extra compute streams for the expert GEMMs (cfg.lanes; a list: one row "
     "each)", 0, PL_MOE_MAX_LANES, NULL},
    {"comm-blocks", 0, PL_OPT_SIZE_LIST, "0",
     "pipelined: grid cap of the comm stream's gathers and combines "
     "(cfg.comm_blocks; 0 uncapped; a list: one pipelined row each)", 0, 65535,
     NULL},
    {"source-major", 0, PL_OPT_FLAG, NULL,
     "group the expert GEMMs per (source rank, expert) segment, as before the "
     "expert-major receive layout (comparison)", 0, 0, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

#define DISPATCH_COLUMNS                                                       \
  "variant\tprofile\tchunking\tlanes\tcomm_blocks\tranks\ttokens\thidden\tffn\texperts\ttopk\t"    \
  "cap\tK\tc_eff\tdtype\ttime_ms\ttime_p10_ms\ttime_p90_ms\tfwd_ms\t"          \
  "peak_gib\top_peak_gib\tdispatch_gib\tbound_gib\tpool_gib\tlive_set\tmax_send_ratio\t"    \
  "routes_moved\ta2a_gbs\ttflops\tplanned\tpieces\tspilled\timb_before\t"      \
  "imb_after\toverlapped\toverlapped_bwd\tgemms\tem_chunks\tstages"

typedef struct job {
  pl_moe *m;
  pl_moe_weights W;
  pl_moe_wgrads G;
  void *x, *dout, *out, *dx;
  float *w, *dw;
  int32_t *idx; /* host */
  int64_t N;
  bool bwd;
  pl_moe_stats st;
  int ov_bwd; /* backward chunks overlapped (last iteration) */
  double stage_ms[PL_MOE_NSTAGES]; /* last fwd+bwd */
} job;

static pl_status job_fn(void *arg) {
  job *j = arg;
  pl_moe_ctx *c = NULL;
  PL_TRY(pl_moe_forward(j->m, &j->W, j->x, j->N, j->idx, j->w, j->out,
                        j->bwd ? &c : NULL, &j->st));
  if (!j->bwd) return PL_OK;
  pl_status s =
      pl_moe_backward(j->m, c, &j->W, j->x, j->w, j->dout, j->dx, j->dw, &j->G);
  j->ov_bwd = pl_moe_ctx_overlapped(c) - j->st.overlapped;
  if (s == PL_OK)
    memcpy(j->stage_ms, pl_moe_ctx_stage_ms(c), sizeof j->stage_ms);
  pl_moe_ctx_free(c);
  return s;
}

typedef struct shape {
  int64_t N, H, I, c, m;
  int E, k;
} shape;

static double gib(size_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

/* Normwise error of a against b (both dt, n values), group-wide max. */
static pl_status normwise(pl_bench_ctx *ctx, pl_stream *s, const void *a,
                          const void *b, size_t n, pl_dtype dt, double *err) {
  size_t bytes = n * pl_dtype_size(dt);
  char *ha = malloc(bytes + 1), *hb = malloc(bytes + 1);
  if (!ha || !hb) {
    free(ha), free(hb);
    return pl_set_error(PL_ENOMEM, "dispatch check: host copy");
  }
  pl_status st = pl_memcpy_async(s, ha, a, bytes);
  if (st == PL_OK) st = pl_memcpy_async(s, hb, b, bytes);
  if (st == PL_OK) st = pl_stream_sync(s);
  double v[2] = {0, 0}; /* max |a-b|, max |b| */
  for (size_t i = 0; st == PL_OK && i < n; i++) {
    float x = dt == PL_F32 ? ((float *)ha)[i] : pl_bf16_to_f32(((pl_bf16 *)ha)[i]);
    float y = dt == PL_F32 ? ((float *)hb)[i] : pl_bf16_to_f32(((pl_bf16 *)hb)[i]);
    double d = fabs((double)x - y);
    if (d > v[0] || isnan(d)) v[0] = isnan(d) ? INFINITY : d;
    if (fabs(y) > v[1]) v[1] = fabs(y);
  }
  free(ha), free(hb);
  if (st == PL_OK) st = pl_host_allreduce_f64(ctx->comm, v, 2, PL_RED_MAX);
  *err = v[1] > 0 ? v[0] / v[1] : v[0];
  return st;
}

static pl_status alloc_fill(pl_dev *dev, pl_stream *s, size_t n, pl_dtype dt,
                            const char *tag, uint64_t seed, uint64_t off,
                            pl_dist dist, float a, float b, void **out) {
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, n * pl_dtype_size(dt), tag, out));
  if (seed == 0) return pl_fill(s, *out, dt, n, 0.0);
  return pl_rng_fill(s, *out, dt, n, seed, off, dist, a, b);
}

static pl_status dispatch_run(pl_bench_ctx *ctx, void *state) {
  (void)state;
  pl_args *a = ctx->args;
  pl_dev *dev = ctx->dev;
  pl_stream *s = pl_dev_stream(dev);
  const int Ep = ctx->size, me = ctx->rank;
  int preset = pl_args_enum(a, "preset");
  /* CPU backend: the ranks share the node's cores; one OpenMP team per rank
   * sized to its share (idle teams spinning next to MPI's polling would
   * otherwise steal the cores the other ranks compute on). */
  if (pl_dev_backend(dev) == PL_BACKEND_CPU) {
    int t = omp_get_num_procs() / (Ep > 0 ? Ep : 1);
    omp_set_num_threads(t > 0 ? t : 1);
  }
  shape sh;
  if (preset == 1)
    sh = (shape){65536, 7168, 2048, 6554, 1024, 128, 8};
  else if (preset == 2)
    sh = (shape){32768, 4096, 4096, 10923, 1024, 128, 4};
  else
    sh = (shape){256, 32, 16, 64, 64, 32, 4};
  if (pl_args_given(a, "tokens")) sh.N = (int64_t)pl_args_size(a, "tokens");
  if (pl_args_given(a, "hidden")) sh.H = (int64_t)pl_args_size(a, "hidden");
  if (pl_args_given(a, "ffn")) sh.I = (int64_t)pl_args_size(a, "ffn");
  if (pl_args_given(a, "experts")) sh.E = (int)pl_args_int(a, "experts");
  if (pl_args_given(a, "topk")) sh.k = (int)pl_args_int(a, "topk");
  if (pl_args_given(a, "cap")) sh.c = (int64_t)pl_args_size(a, "cap");
  if (pl_args_given(a, "min-piece")) sh.m = (int64_t)pl_args_size(a, "min-piece");
  pl_dtype dt = pl_args_enum(a, "dtype") == 0 ? PL_BF16 : PL_F32;
  int vars[3], nv = pl_args_enum_list(a, "variants", vars, 3);
  int profs[5], npf = pl_args_enum_list(a, "profiles", profs, 5);
  int chks[2], nch = pl_args_enum_list(a, "chunking", chks, 2);
  uint64_t lanes[PL_OPT_LIST_MAX];
  int nla = pl_args_size_list(a, "lanes", lanes, PL_OPT_LIST_MAX);
  uint64_t cbs[PL_OPT_LIST_MAX];
  int ncb = pl_args_size_list(a, "comm-blocks", cbs, PL_OPT_LIST_MAX);

  pl_moe_cfg cfg = pl_moe_cfg_default();
  cfg.H = sh.H;
  cfg.I = sh.I;
  cfg.E = sh.E;
  cfg.k = sh.k;
  cfg.dt = dt;
  cfg.c = sh.c;
  cfg.K_max = (int)pl_args_int(a, "kmax");
  cfg.knobs.alpha = pl_args_f64(a, "alpha");
  cfg.knobs.m = sh.m;
  cfg.knobs.lambda = pl_args_f64(a, "lambda");
  cfg.overlap = !pl_args_flag(a, "no-overlap");
  cfg.source_major = pl_args_flag(a, "source-major");
  cfg.profile = true;
  if (sh.E % Ep != 0)
    return pl_set_error(PL_EINVAL,
                        "--experts=%d is not a multiple of the %d ranks", sh.E,
                        Ep);

  /* points: per profile, each variant; pipelined once per chunking */
  ctx->npoints = 0;
  for (int v = 0; v < nv; v++)
    ctx->npoints += npf * nla * (vars[v] == 2 ? nch * ncb : 1);

  const int El = sh.E / Ep;
  const size_t HI = (size_t)sh.H * sh.I, NH = (size_t)sh.N * sh.H,
               Nk = (size_t)sh.N * sh.k;
  job j;
  memset(&j, 0, sizeof j);
  j.N = sh.N;
  void *ref_out = NULL, *ref_dx = NULL;
  pl_status st = PL_OK;
  uint64_t seed = ctx->seed ? ctx->seed : 1;
  /* inputs, weights (native experts, seeded by global expert index) */
  st = alloc_fill(dev, s, El * HI, dt, "weights", seed + 11, me * El * HI,
                  PL_DIST_NORMAL, 0, 1.0f / sqrtf((float)sh.H), &j.W.wg);
  if (st == PL_OK)
    st = alloc_fill(dev, s, El * HI, dt, "weights", seed + 12, me * El * HI,
                    PL_DIST_NORMAL, 0, 1.0f / sqrtf((float)sh.H), &j.W.wu);
  if (st == PL_OK)
    st = alloc_fill(dev, s, El * HI, dt, "weights", seed + 13, me * El * HI,
                    PL_DIST_NORMAL, 0, 1.0f / sqrtf((float)sh.I), &j.W.wd);
  for (int g = 0; g < 3 && st == PL_OK; g++)
    st = alloc_fill(dev, s, El * HI, PL_F32, "grads", 0, 0, 0, 0, 0,
                    (void **)(g == 0 ? &j.G.wg : g == 1 ? &j.G.wu : &j.G.wd));
  if (st == PL_OK)
    st = alloc_fill(dev, s, NH, dt, "act", seed + 1, me * NH, PL_DIST_NORMAL,
                    0, 1, &j.x);
  if (st == PL_OK)
    st = alloc_fill(dev, s, NH, dt, "act", seed + 2, me * NH, PL_DIST_NORMAL,
                    0, 1, &j.dout);
  if (st == PL_OK)
    st = alloc_fill(dev, s, NH, dt, "act", 0, 0, 0, 0, 0, &j.out);
  if (st == PL_OK) st = alloc_fill(dev, s, NH, dt, "act", 0, 0, 0, 0, 0, &j.dx);
  if (st == PL_OK)
    st = alloc_fill(dev, s, Nk, PL_F32, "act", 0, 0, 0, 0, 0, (void **)&j.dw);
  if (st == PL_OK)
    st = alloc_fill(dev, s, Nk, PL_F32, "act", 0, 0, 0, 0, 0, (void **)&j.w);
  if (st == PL_OK)
    st = alloc_fill(dev, s, NH, dt, "check", 0, 0, 0, 0, 0, &ref_out);
  if (st == PL_OK)
    st = alloc_fill(dev, s, NH, dt, "check", 0, 0, 0, 0, 0, &ref_dx);
  j.idx = malloc(Nk * sizeof(int32_t) + 4);
  float *hw = malloc(Nk * sizeof(float) + 4);
  if (st == PL_OK && (!j.idx || !hw))
    st = pl_set_error(PL_ENOMEM, "dispatch: host routes");
  if (st == PL_OK) st = pl_stream_sync(s);
  /* a setup failure (e.g. oom at a paper shape) is one row, not a crash */
  int64_t fl = st != PL_OK;
  pl_host_allreduce_i64(ctx->comm, &fl, 1, PL_RED_MAX);
  if (fl) {
    pl_row *row = pl_row_new(ctx);
    pl_row_str(row, "variant", "setup");
    pl_row_i64(row, "tokens", sh.N);
    pl_row_status_from(row, st != PL_OK ? st : PL_ECOMM);
    st = pl_row_emit(row);
    goto done;
  }

  for (int pi = 0; pi < npf && st == PL_OK; pi++) {
    if (profs[pi] == 4) {
      /* real router (model/router.h): logits x W_r, top-k, weights
       * renormalized over the k (= softmax over the k chosen logits); idx
       * copied D2H for the planner (the documented host sync, ops/moe.h) */
      void *Wr = NULL, *probs = NULL, *didx = NULL;
      const pl_router_shape rsh = {.N = sh.N, .H = sh.H, .E = sh.E, .k = sh.k,
                                   .renorm = 1, .dt = dt};
      st = alloc_fill(dev, s, (size_t)sh.H * sh.E, dt, "router", seed + 21, 0,
                      PL_DIST_NORMAL, 0, 1.0f / sqrtf((float)sh.H), &Wr);
      if (st == PL_OK)
        st = pl_alloc(dev, PL_ARENA_DEVICE, (size_t)sh.N * sh.E * sizeof(float),
                      "router", &probs);
      if (st == PL_OK)
        st = pl_alloc(dev, PL_ARENA_DEVICE, Nk * sizeof(int32_t), "router",
                      &didx);
      if (st == PL_OK)
        st = pl_router_fwd(s, &rsh, j.x, Wr, NULL, probs, didx, j.w);
      if (st == PL_OK)
        st = pl_memcpy_async(s, j.idx, didx, Nk * sizeof(int32_t));
      if (st == PL_OK) st = pl_stream_sync(s);
      pl_free(dev, didx);
      pl_free(dev, probs);
      pl_free(dev, Wr);
    } else {
      pl_route_profile prof;
      PL_TRY(pl_route_profile_parse(profile_names[profs[pi]], &prof));
      st = pl_route_profile_fill(&prof, sh.N, sh.k, sh.E, 0, me, j.idx, hw);
      if (st == PL_OK) st = pl_memcpy_async(s, j.w, hw, Nk * sizeof(float));
    }
    if (st == PL_OK) st = pl_stream_sync(s);
    if (st != PL_OK) break;
    bool have_ref = false;
    /* the reference of this profile: ep on the same inputs */
    if (ctx->check) {
      pl_moe *m = NULL;
      pl_moe_cfg rc = cfg;
      rc.variant = PL_MOE_EP;
      rc.lanes = 0;
      pl_status rs = pl_moe_create(ctx->comm, &rc, &m);
      if (rs == PL_OK) {
        j.m = m;
        j.bwd = true;
        rs = job_fn(&j);
        if (rs == PL_OK) rs = pl_memcpy_async(s, ref_out, j.out, NH * pl_dtype_size(dt));
        if (rs == PL_OK) rs = pl_memcpy_async(s, ref_dx, j.dx, NH * pl_dtype_size(dt));
        if (rs == PL_OK) rs = pl_stream_sync(s);
        pl_moe_destroy(m);
        j.m = NULL;
      }
      have_ref = rs == PL_OK;
    }
    for (int vi = 0; vi < nv && st == PL_OK; vi++) {
      int nc = vars[vi] == 2 ? nch : 1;
      int nb = vars[vi] == 2 ? ncb : 1;
      for (int li = 0; li < nla && st == PL_OK; li++)
      for (int bi = 0; bi < nb && st == PL_OK; bi++)
      for (int ci = 0; ci < nc && st == PL_OK; ci++) {
        pl_moe_cfg vc = cfg;
        vc.variant = (pl_moe_variant)vars[vi];
        vc.contiguous = vars[vi] == 2 && chks[ci] == 1;
        vc.lanes = (int)lanes[li];
        vc.comm_blocks = vars[vi] == 2 ? (int)cbs[bi] : 0;
        char label[128];
        snprintf(label, sizeof label, "%s %s%s lanes=%d comm_blocks=%d",
                 variant_names[vars[vi]], profile_names[profs[pi]],
                 vars[vi] == 2 ? (vc.contiguous ? " contiguous" : " strided")
                               : "", vc.lanes, vc.comm_blocks);
        pl_bench_progress(ctx, label);
        pl_row *row = pl_row_new(ctx);
        pl_row_str(row, "variant", variant_names[vars[vi]]);
        pl_row_str(row, "profile", profile_names[profs[pi]]);
        pl_row_str(row, "chunking",
                   vars[vi] == 2 ? chunk_names[vc.contiguous] : "-");
        pl_row_i64(row, "lanes", vc.lanes);
        pl_row_i64(row, "comm_blocks", vc.comm_blocks);
        pl_row_i64(row, "ranks", Ep);
        pl_row_i64(row, "tokens", sh.N);
        pl_row_i64(row, "hidden", sh.H);
        pl_row_i64(row, "ffn", sh.I);
        pl_row_i64(row, "experts", sh.E);
        pl_row_i64(row, "topk", sh.k);
        pl_row_i64(row, "cap", sh.c);
        pl_row_str(row, "dtype", pl_dtype_name(dt));
        pl_moe *m = NULL;
        pl_status ps = pl_moe_create(ctx->comm, &vc, &m);
        j.m = m;
        pl_stats tfb = {0}, tf = {0};
        size_t peak = 0, dpeak = 0, pool = 0, base = 0;
        char live[256] = "-";
        /* memory of one fwd+bwd (after a first run that warms the pool) */
        if (ps == PL_OK) {
          j.bwd = true;
          ps = job_fn(&j);
        }
        if (ps == PL_OK) {
          pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
          pl_mem_stats m0;
          if (pl_mem_stats_get(dev, PL_ARENA_DEVICE, &m0) == PL_OK)
            base = m0.current; /* resident: weights, grads, activations */
          ps = job_fn(&j);
          pl_mem_stats ms;
          if (pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ms) == PL_OK) {
            peak = ms.peak;
            pool = ms.pool_high;
            pl_mem_live_set_str(&ms, live, sizeof live);
          }
          dpeak = pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "dispatch");
        }
        /* every rank agrees on the outcome before timing */
        int64_t bad = ps != PL_OK;
        pl_host_allreduce_i64(ctx->comm, &bad, 1, PL_RED_MAX);
        if (!bad) {
          j.bwd = true;
          ps = pl_bench_time(ctx, job_fn, &j, s, &tfb);
          if (ps == PL_OK) {
            j.bwd = false;
            ps = pl_bench_time(ctx, job_fn, &j, s, &tf);
          }
        }
        pl_moe_stats sst = j.st;
        /* group-wide maxima of the memory figures, sum of routes moved */
        int64_t agg[7] = {(int64_t)peak, (int64_t)dpeak, (int64_t)pool,
                          sst.routes_recv, (int64_t)(peak - base), sst.gemms,
                          sst.em_chunks};
        int64_t moved = sst.routes_sent;
        if (ps == PL_OK && !bad) {
          ps = pl_host_allreduce_i64(ctx->comm, agg, 7, PL_RED_MAX);
          if (ps == PL_OK)
            ps = pl_host_allreduce_i64(ctx->comm, &moved, 1, PL_RED_SUM);
        }
        if (ps != PL_OK || bad) {
          pl_row_status_from(row, ps != PL_OK ? ps : PL_ECOMM);
          if (ps == PL_OK) pl_row_status(row, "error", "failed on another rank");
        } else {
          size_t bound = pl_moe_dispatch_bound(&vc, Ep, sst.c_eff);
          pl_row_i64(row, "K", sst.K);
          pl_row_i64(row, "c_eff", sst.c_eff);
          pl_row_f64(row, "time_ms", tfb.median);
          pl_row_f64(row, "time_p10_ms", tfb.p10);
          pl_row_f64(row, "time_p90_ms", tfb.p90);
          pl_row_f64(row, "fwd_ms", tf.median);
          pl_row_f64(row, "peak_gib", gib((size_t)agg[0]));
          pl_row_f64(row, "op_peak_gib", gib((size_t)agg[4]));
          pl_row_f64(row, "dispatch_gib", gib((size_t)agg[1]));
          pl_row_f64(row, "bound_gib", gib(bound));
          pl_row_f64(row, "pool_gib", gib((size_t)agg[2]));
          pl_row_str(row, "live_set", live);
          pl_row_f64(row, "max_send_ratio", sst.max_send_ratio);
          pl_row_i64(row, "routes_moved", moved);
          /* a2a bytes of fwd+bwd per rank: fwd x out and y back, bwd x, dout
           * out and dx back (H wide), averaged over ranks */
          double bytes = 5.0 * (double)moved / Ep * (double)sh.H *
                         (double)pl_dtype_size(dt);
          pl_row_f64(row, "a2a_gbs", bytes / (tfb.median * 1e-3) / 1e9);
          double flops = 11.0 * 2.0 * (double)agg[3] * (double)sh.H * sh.I;
          pl_row_f64(row, "tflops", flops / (tfb.median * 1e-3) / 1e12);
          pl_row_i64(row, "planned", sst.planned);
          pl_row_i64(row, "pieces", sst.n_pieces);
          pl_row_i64(row, "spilled", sst.n_spilled);
          pl_row_f64(row, "imb_before", sst.imb_native);
          pl_row_f64(row, "imb_after", sst.imb_planned);
          pl_row_i64(row, "overlapped", sst.overlapped);
          /* expert GEMM launches of the busiest chunk (fwd + bwd with
           * recompute) and the chunks computed expert-major, max over ranks */
          pl_row_i64(row, "overlapped_bwd", j.ov_bwd);
          pl_row_i64(row, "gemms", agg[5]);
          pl_row_i64(row, "em_chunks", agg[6]);
          char stg[320] = "";
          for (int q = 0; q < PL_MOE_NSTAGES; q++)
            snprintf(stg + strlen(stg), sizeof stg - strlen(stg), "%s%s=%.1f",
                     q ? "," : "", pl_moe_stage_name(q), j.stage_ms[q]);
          pl_row_str(row, "stages", stg);
          char note[160] = "";
          bool ok = true;
          if (ctx->check && have_ref) {
            double eo = 0, ed = 0;
            ps = normwise(ctx, s, j.out, ref_out, NH, dt, &eo);
            if (ps == PL_OK) ps = normwise(ctx, s, j.dx, ref_dx, NH, dt, &ed);
            /* CPU: row-deterministic kernels, so identical; CUDA: GEMM
             * blockings differ with the batch, bf16 rounding */
            double tol = pl_dev_backend(dev) == PL_BACKEND_CPU
                             ? 0.0
                             : (dt == PL_F32 ? 1e-5 : 2e-2);
            ok = ps == PL_OK && eo <= tol && ed <= tol;
            snprintf(note, sizeof note, "vs ep: out %.2g dx %.2g", eo, ed);
          }
          if (vars[vi] == 2 && (size_t)agg[1] > bound) {
            ok = false;
            snprintf(note + strlen(note), sizeof note - strlen(note),
                     "%sdispatch peak above bound", *note ? "; " : "");
          }
          if (pl_dev_backend(dev) == PL_BACKEND_CPU)
            snprintf(note + strlen(note), sizeof note - strlen(note),
                     "%sCPU times", *note ? "; " : "");
          if (ctx->check && !have_ref)
            snprintf(note + strlen(note), sizeof note - strlen(note),
                     "%sno ep reference (ep failed here): values unchecked",
                     *note ? "; " : "");
          /* without the ep reference only the bound was checked */
          bool checked = ctx->check && (have_ref || vars[vi] == 2);
          pl_row_check(row, !checked ? "skip" : ok ? "pass" : "fail");
          pl_row_status(row, "ok", note);
        }
        pl_moe_destroy(m);
        j.m = NULL;
        st = pl_row_emit(row);
      }
    }
  }
done:
  pl_free(dev, j.W.wg), pl_free(dev, j.W.wu), pl_free(dev, j.W.wd);
  pl_free(dev, j.G.wg), pl_free(dev, j.G.wu), pl_free(dev, j.G.wd);
  pl_free(dev, j.x), pl_free(dev, j.dout), pl_free(dev, j.out),
      pl_free(dev, j.dx), pl_free(dev, j.w), pl_free(dev, j.dw);
  pl_free(dev, ref_out), pl_free(dev, ref_dx);
  free(j.idx);
  free(hw);
  return st;
}

const pl_bench pl_bench_dispatch = {
    .name = "dispatch",
    .summary = "MoE expert dispatch: ep vs llep vs pipelined_llep over routing "
               "profiles (time, peak memory, max-send ratio; Tables 6-9)",
    .opts = dispatch_opts,
    .columns = DISPATCH_COLUMNS,
    .main = dispatch_run,
};
