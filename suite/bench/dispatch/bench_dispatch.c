/* bench_dispatch.c — `plateau bench dispatch`: ep vs llep vs pipelined_llep
 * on the routing profiles of the design (the paper's Tables 6-9).
 *
 * One row per (profile, variant, lanes, comm blocks, chunking).  The timed
 * unit is one fwd+bwd (forward, backward with per-chunk recompute, context
 * free); fwd_ms times the forward alone.  Memory: the harness's peaks of the
 * timed runs; op_peak_bytes is the peak above what was resident when they
 * started (weights, fp32 gradients, activations, check buffers): the
 * operator's own live set.  Counters of the last run: the plan (pieces,
 * imbalance before/after), K and c_eff, the group-wide max-send ratio (max
 * over (chunk, destination) of routes received / mean), routes moved between
 * ranks, the expert GEMM launches of the busiest chunk (`gemms`, fwd + bwd
 * with recompute: 11 per group; one group per expert slot when the chunk is
 * expert-major, one per (source, expert) segment otherwise; --source-major
 * forces the latter) and the expert-major chunk count, and `stages`: rank 0's
 * compute-stream time per stage of the last fwd+bwd (ops/moe.h
 * pl_moe_stage).  Work: 11 expert GEMMs of 2·R·H·I FLOPs per fwd+bwd (R the
 * routes a rank receives, max over ranks); a2a_gbs the bytes the all-to-alls
 * of fwd+bwd move per rank over the whole time (an effective figure).
 *
 * Check: out and dx against the ep variant on the same inputs (bit-exact on
 * the CPU: row-deterministic kernels; dtype-scaled on CUDA, where GEMM
 * blockings differ with the batch), and the pipelined rows' dispatch peak
 * against the bound 2·Ep·k·c_eff·H·b.
 *
 * --lanes L (a list): the layer's cfg.lanes, extra compute streams its expert
 * GEMMs are spread over (and, in backward, the gate/up weight gradients run
 * beside dWd and dX). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/bench.h"
#include "model/router.h"
#include "ops/moe.h"

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

typedef struct dpt {
  int variant, profile, chunking, lanes, cblocks;
} dpt;

typedef struct dispatch {
  pl_moe_cfg cfg, vc; /* the layer's, and the point's */
  dpt *pts;
  int resident; /* 1: the residents below exist; -1: they failed */
  pl_status res_st;
  char res_msg[512];
  job j;
  void *ref_out, *ref_dx;
  float *hw;
  int profile; /* of the routes and the reference in place, -1 none */
  bool have_ref;
} dispatch;

/* ---- the inputs ----------------------------------------------------------
 * The layer shapes it refuses, the tensors every point shares, the routes of
 * a routing profile (synthetic or the real router of model/router.h), the ep
 * reference and the check that compares with it. */

static pl_status dispatch_job(void *arg) {
  job *j = arg;
  pl_moe_ctx *c = NULL;
  PL_TRY(pl_moe_forward(j->m, &j->W, j->x, j->N, j->idx, j->w, j->out,
                        j->bwd ? &c : NULL, &j->st));
  if (!j->bwd)
    return PL_OK;
  pl_status s =
      pl_moe_backward(j->m, c, &j->W, j->x, j->w, j->dout, j->dx, j->dw, &j->G);
  j->ov_bwd = pl_moe_ctx_overlapped(c) - j->st.overlapped;
  if (s == PL_OK)
    memcpy(j->stage_ms, pl_moe_ctx_stage_ms(c), sizeof j->stage_ms);
  pl_moe_ctx_free(c);
  return s;
}

/* The layer's shape against what the bench runs: a usage error naming the
 * options. */
static pl_status cfg_check(pl_bench_ctx *c, const pl_moe_cfg *g) {
  if (g->k > g->E)
    return pl_set_error(PL_EINVAL,
                        "--topk=%d is more than --experts=%d (a token goes to "
                        "k distinct experts)",
                        g->k, g->E);
  if ((double)g->E * (double)g->H * (double)g->I > (double)((int64_t)1 << 40))
    return pl_set_error(PL_EINVAL,
                        "--experts=%d --hidden=%lld --ffn=%lld: the experts' "
                        "weights, E*H*I = %.3g elements, are too large "
                        "(allowed: at most 2^40)",
                        g->E, (long long)g->H, (long long)g->I,
                        (double)g->E * (double)g->H * (double)g->I);
  if (g->E % c->size != 0)
    return pl_set_error(PL_EINVAL,
                        "--experts=%d is not a multiple of the %d "
                        "ranks",
                        g->E, c->size);
  return PL_OK;
}

static pl_status alloc_fill(pl_bench_ctx *c, size_t n, pl_dtype dt,
                            const char *tag, uint64_t seed, uint64_t off,
                            float std, void **out) {
  PL_TRY(pl_alloc(c->dev, PL_ARENA_DEVICE, n * pl_dtype_size(dt), tag, out));
  if (seed == 0)
    return pl_fill(c->stream, *out, dt, n, 0.0);
  return pl_rng_fill(c->stream, *out, dt, n, seed, off, PL_DIST_NORMAL, 0, std);
}

/* What every point shares: inputs, weights (native experts, seeded by global
 * expert index), fp32 gradients, outputs, the reference's outputs. */
static pl_status residents(pl_bench_ctx *c, dispatch *d) {
  const pl_moe_cfg *g = &d->cfg;
  job *j = &d->j;
  const int El = g->E / c->size;
  const size_t HI = (size_t)g->H * g->I, NH = (size_t)j->N * g->H,
               Nk = (size_t)j->N * g->k, o = (size_t)c->rank * El * HI;
  const uint64_t s = c->seed ? c->seed : 1;
  const float sh = 1.0f / sqrtf((float)g->H), si = 1.0f / sqrtf((float)g->I);
  PL_TRY(alloc_fill(c, El * HI, g->dt, "weights", s + 11, o, sh, &j->W.wg));
  PL_TRY(alloc_fill(c, El * HI, g->dt, "weights", s + 12, o, sh, &j->W.wu));
  PL_TRY(alloc_fill(c, El * HI, g->dt, "weights", s + 13, o, si, &j->W.wd));
  PL_TRY(alloc_fill(c, El * HI, PL_F32, "grads", 0, 0, 0, (void **)&j->G.wg));
  PL_TRY(alloc_fill(c, El * HI, PL_F32, "grads", 0, 0, 0, (void **)&j->G.wu));
  PL_TRY(alloc_fill(c, El * HI, PL_F32, "grads", 0, 0, 0, (void **)&j->G.wd));
  PL_TRY(alloc_fill(c, NH, g->dt, "act", s + 1, c->rank * NH, 1, &j->x));
  PL_TRY(alloc_fill(c, NH, g->dt, "act", s + 2, c->rank * NH, 1, &j->dout));
  PL_TRY(alloc_fill(c, NH, g->dt, "act", 0, 0, 0, &j->out));
  PL_TRY(alloc_fill(c, NH, g->dt, "act", 0, 0, 0, &j->dx));
  PL_TRY(alloc_fill(c, Nk, PL_F32, "act", 0, 0, 0, (void **)&j->dw));
  PL_TRY(alloc_fill(c, Nk, PL_F32, "act", 0, 0, 0, (void **)&j->w));
  PL_TRY(alloc_fill(c, NH, g->dt, "check", 0, 0, 0, &d->ref_out));
  PL_TRY(alloc_fill(c, NH, g->dt, "check", 0, 0, 0, &d->ref_dx));
  j->idx = malloc(Nk * sizeof(int32_t) + 4);
  d->hw = malloc(Nk * sizeof(float) + 4);
  if (!j->idx || !d->hw)
    return pl_set_error(PL_ENOMEM, "dispatch: host routes");
  return pl_stream_sync(c->stream);
}

/* The routes of a profile: a synthetic profile, or the real router
 * (model/router.h: logits x W_r, top-k, weights renormalized over the k;
 * idx copied to the host for the planner, the documented host sync). */
static pl_status routes(pl_bench_ctx *c, dispatch *d, int profile,
                        const char *name) {
  const pl_moe_cfg *g = &d->cfg;
  job *j = &d->j;
  const size_t Nk = (size_t)j->N * g->k;
  pl_stream *s = c->stream;
  if (strcmp(name, "router") != 0) {
    pl_route_profile prof;
    PL_TRY(pl_route_profile_parse(name, &prof));
    PL_TRY(pl_route_profile_fill(&prof, j->N, g->k, g->E, 0, c->rank, j->idx,
                                 d->hw));
    PL_TRY(pl_memcpy_async(s, j->w, d->hw, Nk * sizeof(float)));
    return pl_stream_sync(s);
  }
  void *Wr = NULL, *probs = NULL, *didx = NULL;
  const pl_router_shape rsh = {
      .N = j->N, .H = g->H, .E = g->E, .k = g->k, .renorm = 1, .dt = g->dt};
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              alloc_fill(c, (size_t)g->H * g->E, g->dt, "router",
                         c->seed ? c->seed + 21 : 22, 0,
                         1.0f / sqrtf((float)g->H), &Wr));
  PL_TRY_GOTO(st, done,
              pl_alloc(c->dev, PL_ARENA_DEVICE,
                       (size_t)j->N * g->E * sizeof(float), "router", &probs));
  PL_TRY_GOTO(
      st, done,
      pl_alloc(c->dev, PL_ARENA_DEVICE, Nk * sizeof(int32_t), "router", &didx));
  PL_TRY_GOTO(st, done,
              pl_router_fwd(s, &rsh, j->x, Wr, NULL, probs, didx, j->w));
  PL_TRY_GOTO(st, done, pl_memcpy_async(s, j->idx, didx, Nk * sizeof(int32_t)));
  st = pl_stream_sync(s);
done:
  pl_free(c->dev, didx);
  pl_free(c->dev, probs);
  pl_free(c->dev, Wr);
  return st;
}

/* The reference of a profile: ep (lanes 0) on the same inputs. */
static pl_status reference(pl_bench_ctx *c, dispatch *d) {
  pl_moe *m = NULL;
  pl_moe_cfg rc = d->cfg;
  rc.variant = PL_MOE_EP;
  rc.lanes = 0;
  const size_t bytes = (size_t)d->j.N * d->cfg.H * pl_dtype_size(d->cfg.dt);
  PL_TRY(pl_moe_create(c->comm, &rc, &m));
  d->j.m = m;
  d->j.bwd = true;
  pl_status rs = PL_OK;
  PL_TRY_GOTO(rs, done, dispatch_job(&d->j));
  PL_TRY_GOTO(rs, done,
              pl_memcpy_async(c->stream, d->ref_out, d->j.out, bytes));
  PL_TRY_GOTO(rs, done, pl_memcpy_async(c->stream, d->ref_dx, d->j.dx, bytes));
  rs = pl_stream_sync(c->stream);
done:
  pl_moe_destroy(m);
  d->j.m = NULL;
  return rs;
}

/* The inputs of a point of `profile`: the residents (once; their failure,
 * oom at a paper shape, is every row's), and on a change of profile its
 * routes and, with --check, its reference. */
static pl_status make_inputs(pl_bench_ctx *c, dispatch *d, int profile,
                             const char *name) {
  if (!d->resident) { /* a failure here (oom at a paper shape): every row */
    d->res_st = residents(c, d);
    PL_TRY(pl_bench_agree(c, &d->res_st));
    snprintf(d->res_msg, sizeof d->res_msg, "%s", pl_last_error());
    d->resident = d->res_st == PL_OK ? 1 : -1;
  }
  if (d->resident < 0)
    return pl_set_error(d->res_st, "%s", d->res_msg);
  if (profile != d->profile) {
    pl_status rs = routes(c, d, profile, name);
    PL_TRY(pl_bench_agree(c, &rs));
    if (rs != PL_OK)
      return rs;
    d->profile = profile;
    pl_status ref = c->check ? reference(c, d) : PL_ERUNTIME;
    PL_TRY(pl_bench_agree(c, &ref));
    d->have_ref = ref == PL_OK; /* without it only the bound is checked */
    pl_clear_error();
  }
  return PL_OK;
}

/* out and dx against the ep reference (bit-exact on the CPU, dtype-scaled
 * over a reduction of max(H, I) on CUDA); a pipelined point's dispatch peak
 * against its bound. */
static pl_status check(pl_bench_ctx *c, void *st, int p, pl_check *chk) {
  dispatch *d = st;
  const pl_moe_cfg *g = &d->cfg;
  const size_t NH = (size_t)d->j.N * g->H;
  const int64_t k = c->cuda ? (g->H > g->I ? g->H : g->I) : PL_CHECK_EXACT;
  if (d->have_ref) {
    PL_TRY(pl_check_device(chk, c->stream, "out", d->j.out, d->ref_out, g->dt,
                           NH, k));
    PL_TRY(pl_check_device(chk, c->stream, "dx", d->j.dx, d->ref_dx, g->dt, NH,
                           k));
  }
  if (pl_moe_variant_desc_of(d->vc.variant)->chunks) {
    size_t bound = pl_moe_dispatch_bound(&d->vc, c->size, d->j.st.c_eff);
    pl_check_that(chk, c->meas->tag_peak[0] <= bound,
                  "dispatch peak %zu above the bound %zu", c->meas->tag_peak[0],
                  bound);
  }
  return PL_OK;
}

static void free_residents(pl_bench_ctx *c, dispatch *d) {
  job *j = &d->j;
  void *ps[] = {j->W.wg, j->W.wu, j->W.wd,    j->G.wg,  j->G.wu,
                j->G.wd, j->x,    j->dout,    j->out,   j->dx,
                j->w,    j->dw,   d->ref_out, d->ref_dx};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free(c->dev, ps[i]);
  free(j->idx);
  free(d->hw);
}

/* ---- the columns ---------------------------------------------------------
 * The columns of a measured point: the forward alone timed, the counters of
 * the last run (max or sum over ranks), rank 0's time per stage, and the
 * bytes and FLOPs the rates count. */

static pl_status finish(pl_bench_ctx *c, void *st, int p, pl_row *row,
                        pl_work *w) {
  dispatch *d = st;
  job *j = &d->j;
  const pl_moe_cfg *g = &d->cfg;
  pl_stats tf;
  j->bwd = false;
  PL_TRY(pl_bench_time(c, dispatch_job, j, c->stream, &tf));
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

static const char *const profile_names[] = {"balanced", "95/16",  "80/16",
                                            "50/4",     "95/16s", "80/16s",
                                            "50/4s",    "router", NULL};
enum { N_PROFILES = 8 };
static const char *const chunk_names[] = {"strided", "contiguous", NULL};
static const char *const dtype_names[] = {"bf16", "f32", NULL};

static const pl_opt dispatch_opts[] = {
    {"variants", 0, PL_OPT_ENUM_LIST, PL_MOE_NAMES_JOINED(","),
     "variants to run", 0, 0, pl_moe_variant_names},
    {"profiles", 0, PL_OPT_ENUM_LIST, "balanced,95/16,80/16,50/4",
     "routing profiles; r/h: LLEP's layout (the hot tokens first), r/hs: the "
     "same routes at shuffled positions; 'router' = a softmax top-k router "
     "over x with random W_r (std 1/sqrt(H)), weights renormalized",
     0, 0, profile_names},
    {"chunking", 0, PL_OPT_ENUM_LIST, "strided",
     "pipelined chunk positions: strided, contiguous or both (Table 8)", 0, 0,
     chunk_names},
    {"tokens", 0, PL_OPT_SIZE, NULL, "tokens per rank N", 1, 1e9, NULL},
    {"hidden", 0, PL_OPT_SIZE, NULL, "hidden size H", 1, 1e6, NULL},
    {"ffn", 0, PL_OPT_SIZE, NULL, "expert FFN width I", 1, 1e6, NULL},
    {"experts", 0, PL_OPT_INT, NULL, "experts E (a multiple of the ranks)", 1,
     1e6, NULL},
    {"topk", 0, PL_OPT_INT, NULL, "routes per token k", 1, 64, NULL},
    {"cap", 0, PL_OPT_SIZE, NULL, "per-source token cap c (Eq. 1)", 1, 1e9,
     NULL},
    {"kmax", 0, PL_OPT_INT, "64", "chunk ceiling K_max (Eq. 1)", 1, 4096, NULL},
    {"alpha", 0, PL_OPT_F64, "1.0", "LLEP capacity factor", 0.01, 100, NULL},
    {"min-piece", 0, PL_OPT_SIZE, NULL, "LLEP minimum spilled piece m", 0, 1e9,
     NULL},
    {"lambda", 0, PL_OPT_F64, "1.3", "LLEP skip threshold (0: always plan)", 0,
     100, NULL},
    {"dtype", 0, PL_OPT_ENUM, "bf16", "activation and weight storage", 0, 0,
     dtype_names},
    {"no-overlap", 0, PL_OPT_FLAG, NULL,
     "pipelined: issue everything on one stream (no comm stream)", 0, 0, NULL},
    {"lanes", 0, PL_OPT_SIZE_LIST, "2",
     "extra compute streams for the expert GEMMs (cfg.lanes; a list: one row "
     "each)",
     0, PL_MOE_MAX_LANES, NULL},
    {"comm-blocks", 0, PL_OPT_SIZE_LIST, "0",
     "pipelined: grid cap of the comm stream's gathers and combines "
     "(cfg.comm_blocks; 0 uncapped; a list: one pipelined row each)",
     0, 65535, NULL},
    {"source-major", 0, PL_OPT_FLAG, NULL,
     "group the expert GEMMs per (source rank, expert) segment instead of per "
     "expert (comparison)",
     0, 0, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

/* Ep = the ranks of the run.  65k: the paper's K = 10 shape; 32k: K = 3;
 * small: CPU-sized with E 32, for `make run`. */
static const pl_preset dispatch_presets[] = {
    {"small", "tokens=256 hidden=32 ffn=16 experts=32 topk=4 cap=64 "
              "min-piece=64"},
    {"65k", "tokens=65536 hidden=7168 ffn=2048 experts=128 topk=8 cap=6554 "
            "min-piece=1024"},
    {"32k", "tokens=32768 hidden=4096 ffn=4096 experts=128 topk=4 cap=10923 "
            "min-piece=1024"},
    {NULL, NULL},
};

static pl_status run(void *st) {
  job *j = &((dispatch *)st)->j;
  j->bwd = true;
  return dispatch_job(j);
}

static pl_status init(pl_bench_ctx *c, void *st) {
  dispatch *d = st;
  pl_args *a = c->args;
  /* CPU backend: the ranks share the node's cores; one OpenMP team per rank
   * sized to its share (idle teams spinning next to MPI's polling would
   * otherwise steal the cores the other ranks compute on). */
  if (!c->cuda) {
    int t = omp_get_num_procs() / c->size;
    omp_set_num_threads(t > 0 ? t : 1);
  }
  pl_moe_cfg *g = &d->cfg;
  *g = pl_moe_cfg_default();
  g->H = (int64_t)pl_args_size(a, "hidden");
  g->I = (int64_t)pl_args_size(a, "ffn");
  g->E = (int)pl_args_int(a, "experts");
  g->k = (int)pl_args_int(a, "topk");
  g->dt = pl_args_enum(a, "dtype") == 0 ? PL_BF16 : PL_F32;
  g->c = (int64_t)pl_args_size(a, "cap");
  g->K_max = (int)pl_args_int(a, "kmax");
  g->knobs.alpha = pl_args_f64(a, "alpha");
  g->knobs.m = (int64_t)pl_args_size(a, "min-piece");
  g->knobs.lambda = pl_args_f64(a, "lambda");
  g->overlap = !pl_args_flag(a, "no-overlap");
  g->source_major = pl_args_flag(a, "source-major");
  g->profile = true;
  d->j.N = (int64_t)pl_args_size(a, "tokens");
  PL_TRY(cfg_check(c, g));
  int vars[PL_MOE_VARIANT_COUNT], profs[N_PROFILES], chks[2];
  uint64_t lanes[PL_OPT_LIST_MAX], cbs[PL_OPT_LIST_MAX];
  int nv = pl_args_enum_list(a, "variants", vars, PL_MOE_VARIANT_COUNT);
  int npf = pl_args_enum_list(a, "profiles", profs, N_PROFILES);
  int nch = pl_args_enum_list(a, "chunking", chks, 2);
  int nla = pl_args_size_list(a, "lanes", lanes, PL_OPT_LIST_MAX);
  int ncb = pl_args_size_list(a, "comm-blocks", cbs, PL_OPT_LIST_MAX);
  d->pts = calloc((size_t)(npf * nv * nla * ncb * nch) + 1, sizeof *d->pts);
  PL_ASSERT(d->pts != NULL);
  int np = 0; /* per profile, each variant; pipelined per blocks, chunking */
  for (int pi = 0; pi < npf; pi++)
    for (int vi = 0; vi < nv; vi++) {
      /* a chunking variant: a row per comm-blocks and chunking */
      bool pipe = pl_moe_variants[vars[vi]].chunks;
      for (int li = 0; li < nla; li++)
        for (int bi = 0; bi < (pipe ? ncb : 1); bi++)
          for (int ci = 0; ci < (pipe ? nch : 1); ci++)
            d->pts[np++] = (dpt){vars[vi], profs[pi], pipe ? chks[ci] : -1,
                                 (int)lanes[li], pipe ? (int)cbs[bi] : 0};
    }
  c->npoints = np;
  d->profile = -1;
  return PL_OK;
}

static pl_status point(pl_bench_ctx *c, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  dispatch *d = st;
  const dpt *q = &d->pts[p];
  const pl_moe_cfg *g = &d->cfg;
  d->vc = *g;
  d->vc.variant = (pl_moe_variant)q->variant;
  d->vc.contiguous = q->chunking == 1;
  d->vc.lanes = q->lanes;
  d->vc.comm_blocks = q->cblocks;
  snprintf(label, n, "%s %s%s%s lanes=%d comm_blocks=%d",
           pl_moe_variant_name(q->variant), profile_names[q->profile],
           q->chunking >= 0 ? " " : "",
           q->chunking >= 0 ? chunk_names[q->chunking] : "", q->lanes,
           q->cblocks);
  pl_row_str(row, "variant", pl_moe_variant_name(q->variant));
  pl_row_str(row, "profile", profile_names[q->profile]);
  pl_row_str(row, "chunking",
             q->chunking >= 0 ? chunk_names[q->chunking] : "-");
  pl_row_i64(row, "lanes", q->lanes);
  pl_row_i64(row, "comm_blocks", q->cblocks);
  pl_row_i64(row, "ranks", c->size);
  pl_row_i64(row, "tokens", d->j.N);
  pl_row_i64(row, "hidden", g->H);
  pl_row_i64(row, "ffn", g->I);
  pl_row_i64(row, "experts", g->E);
  pl_row_i64(row, "topk", g->k);
  pl_row_i64(row, "cap", g->c);
  pl_row_str(row, "dtype", pl_dtype_name(g->dt));
  return PL_OK;
}

static pl_status setup(pl_bench_ctx *c, void *st, int p) {
  dispatch *d = st;
  const int profile = d->pts[p].profile;
  PL_TRY(make_inputs(c, d, profile, profile_names[profile]));
  return pl_moe_create(c->comm, &d->vc, &d->j.m);
}

static void teardown(pl_bench_ctx *c, void *st, int p) {
  dispatch *d = st;
  pl_moe_destroy(d->j.m);
  d->j.m = NULL;
}

static void fini(pl_bench_ctx *c, void *st) {
  dispatch *d = st;
  free_residents(c, d);
  free(d->pts);
}

const pl_bench pl_bench_dispatch = {
    .name = "dispatch",
    .summary = "MoE expert dispatch: " PL_MOE_NAMES_JOINED(
        " vs ") " over "
                "routing profiles (time, peak memory, max-send ratio; Tables "
                "6-9)",
    .opts = dispatch_opts,
    .presets = dispatch_presets,
    .preset_cpu = "small",
    .preset_cuda = "small",
    .columns =
        "variant\tprofile\tchunking\tlanes\tcomm_blocks\tranks\ttokens\t"
        "hidden\tffn\texperts\ttopk\tcap\tK\tc_eff\tdtype\ttime_ms\t"
        "time_p10_ms\ttime_p90_ms\tfwd_ms\tdev_peak_bytes\t"
        "op_peak_bytes\tdispatch_bytes\tbound_bytes\tpool_peak_bytes\t"
        "live_set\tmax_send_ratio\troutes_moved\ta2a_gbs\ttflops\t"
        "planned\tpieces\tspilled\timb_before\timb_after\toverlapped\t"
        "overlapped_bwd\tgemms\tem_chunks\twgrad_passes\tstages\tmax_err",
    .tags = (const char *const[]){"dispatch", NULL},
    .rate = "a2a_gbs",
    .state = sizeof(dispatch),
    .init = init,
    .point = point,
    .setup = setup,
    .run = run,
    .check = check,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
