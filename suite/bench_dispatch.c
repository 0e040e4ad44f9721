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

#include "dispatch.h"

static const char *const profile_names[] = {
    "balanced", "95/16", "80/16", "50/4", "95/16s", "80/16s", "50/4s",
    "router",   NULL};
enum { N_PROFILES = 8 };
static const char *const chunk_names[] = {"strided", "contiguous", NULL};
static const char *const dtype_names[] = {"bf16", "f32", NULL};

static const pl_opt dispatch_opts[] = {
    {"variants", 0, PL_OPT_ENUM_LIST, "ep,llep,pipelined_llep",
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
  return pl__dispatch_job(j);
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
  PL_TRY(pl__dispatch_cfg_check(c, g));
  int vars[3], profs[N_PROFILES], chks[2];
  uint64_t lanes[PL_OPT_LIST_MAX], cbs[PL_OPT_LIST_MAX];
  int nv = pl_args_enum_list(a, "variants", vars, 3);
  int npf = pl_args_enum_list(a, "profiles", profs, N_PROFILES);
  int nch = pl_args_enum_list(a, "chunking", chks, 2);
  int nla = pl_args_size_list(a, "lanes", lanes, PL_OPT_LIST_MAX);
  int ncb = pl_args_size_list(a, "comm-blocks", cbs, PL_OPT_LIST_MAX);
  d->pts = calloc((size_t)(npf * nv * nla * ncb * nch) + 1, sizeof *d->pts);
  PL_ASSERT(d->pts != NULL);
  int np = 0; /* per profile, each variant; pipelined per blocks, chunking */
  for (int pi = 0; pi < npf; pi++)
    for (int vi = 0; vi < nv; vi++) {
      bool pipe = vars[vi] == PL_MOE_PIPELINED;
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
  PL_TRY(pl__dispatch_inputs(c, d, profile, profile_names[profile]));
  return pl_moe_create(c->comm, &d->vc, &d->j.m);
}

static pl_status check(pl_bench_ctx *c, void *st, int p, pl_check *chk) {
  return pl__dispatch_check(c, st, chk);
}

static pl_status finish(pl_bench_ctx *c, void *st, int p, pl_row *row,
                        pl_work *w) {
  return pl__dispatch_columns(c, st, row, w);
}

static void teardown(pl_bench_ctx *c, void *st, int p) {
  dispatch *d = st;
  pl_moe_destroy(d->j.m);
  d->j.m = NULL;
}

static void fini(pl_bench_ctx *c, void *st) {
  dispatch *d = st;
  pl__dispatch_free(c, d);
  free(d->pts);
}

const pl_bench pl_bench_dispatch = {
    .name = "dispatch",
    .summary = "MoE expert dispatch: ep vs llep vs pipelined_llep over "
               "routing profiles (time, peak memory, max-send ratio; Tables "
               "6-9)",
    .opts = dispatch_opts,
    .presets = dispatch_presets,
    .preset_cpu = "small",
    .preset_cuda = "small",
    .columns = "variant\tprofile\tchunking\tlanes\tcomm_blocks\tranks\ttokens\t"
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
