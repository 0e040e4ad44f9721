/* bench_sco.c — `plateau bench sco`: the host-budget sweep of SCO (DESIGN
 * §1.3, the paper's Table 3) on a checkpointed stack of L dense blocks
 * (RMSNorm -> SwiGLU MLP with residual, engine/model/mlp_block.h).
 *
 * One point = (N, L, H, I, dtype, release) and a list of host budgets B per
 * rank.  For each budget: SCO picks |S| (first layers first, the minimum over
 * ranks), one check step is run and compared bit-exactly (loss and dx0, which
 * depends on every layer) with a step of the same stack without SCO (the
 * budget-0 reference: SCO changes no arithmetic), the device boundary peak is
 * checked against Eq. 4 (<= 2·N·H·b + (L − |S|)·N·H·b), then the step is timed
 * (pl_bench_time: barrier + events, max over ranks).  A row reports the
 * tracked device peak with the live set at the peak, the pool's high-water
 * mark (CUDA), the pinned host bytes, step time median/p10/p90 and tokens/s
 * per GPU (and the GEMM TFLOP/s that implies).  Running out of memory anywhere is a row with status oom (the
 * ranks agree on every failure first, so none is left in a collective).
 *
 * Budgets: --budgets "0,12Gi,all" and/or --budget-steps K (0, 1/K ... all of
 * L boundaries, rounded down to whole boundaries).  Bytes per boundary are
 * N·H·b with b the dtype size. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_sco.h"
#include "results.h"
#include "model/mlp_block.h"
#include "train/ckpt.h"

const char *const pl_bench_sco_presets[] = {"none", "small", "paper", NULL};
const char *const pl_bench_sco_dtypes[] = {"bf16", "f32", NULL};
const char *const pl_bench_sco_releases[] = {"context", "step", NULL};

static const pl_opt sco_opts[] = {PL_BENCH_SCO_OPTS, {0}};

#define SCO_COLUMNS                                                            \
  "tokens\tranks\tlayers\thidden\tffn\tdtype\trelease\tbudget\tbudget_bytes\t" \
  "selected\tdev_peak_bytes\tdev_peak_gib\tboundary_peak_bytes\t"              \
  "boundary_bound_bytes\tpool_high_bytes\thost_pinned_bytes\tlive_set\t"       \
  "ms_median\tms_p10\tms_p90\ttok_s_gpu\ttflop_s_gpu"

#define MAX_BUDGETS 128

typedef struct budget_pt {
  char text[32];    /* as reported: "0", "all", "1.5Gi" or bytes */
  pl_sco_budget b;
} budget_pt;

typedef struct sco_cfg {
  int64_t L, H, I, N;
  pl_dtype dt;
  pl_sco_release rel;
  int nb;
  budget_pt budgets[MAX_BUDGETS];
} sco_cfg;

/* A preset supplies defaults of the bench's own options; an option given on
 * the command line wins.  Iterations stay the harness's (-n, -w: recorded in
 * the metadata as run), e.g. -n 3 -w 0 for `make run`. */
typedef struct preset {
  int64_t L, H, I, N;
  int dtype, steps;
} preset;
static const preset presets[] = {
    {0, 0, 0, 0, 0, 0},           /* none: the option table's defaults     */
    {8, 64, 96, 256, 0, 4},       /* small: CPU, seconds on 2 ranks         */
    {24, 2880, 2880, 65536, 0, 4}, /* paper: gpt-oss-20b-like, on the H200  */
};

static int64_t opt_i64(const pl_args *a, const char *name, int64_t preset_val) {
  if (preset_val && !pl_args_given(a, name)) return preset_val;
  return pl_args_int(a, name);
}

static pl_status parse_cfg(pl_bench_ctx *ctx, sco_cfg *c) {
  const pl_args *a = ctx->args;
  const preset *p = &presets[pl_args_enum(a, "preset")];
  memset(c, 0, sizeof *c);
  c->L = opt_i64(a, "layers", p->L);
  c->H = opt_i64(a, "hidden", p->H);
  c->I = opt_i64(a, "ffn", p->I);
  c->N = (p->N && !pl_args_given(a, "tokens")) ? p->N : (int64_t)pl_args_size(a, "tokens");
  int dti = (p->L && !pl_args_given(a, "dtype")) ? p->dtype : pl_args_enum(a, "dtype");
  c->dt = dti == 0 ? PL_BF16 : PL_F32;
  c->rel = pl_args_enum(a, "release") == 1 ? PL_SCO_RELEASE_STEP : PL_SCO_RELEASE_CONTEXT;

  const char *list = pl_args_str(a, "budgets");
  if (list) {
    const char *s = list;
    while (1) {
      const char *comma = strchr(s, ',');
      size_t len = comma ? (size_t)(comma - s) : strlen(s);
      if (c->nb >= MAX_BUDGETS)
        return pl_set_error(PL_EINVAL, "--budgets=%s: more than %d budgets", list, MAX_BUDGETS);
      budget_pt *bp = &c->budgets[c->nb];
      if (len == 0 || len >= sizeof bp->text)
        return pl_set_error(PL_EINVAL, "--budgets=%s: empty or overlong entry (allowed: 0, all, or a size such as 12Gi)",
                            list);
      memcpy(bp->text, s, len);
      bp->text[len] = '\0';
      PL_TRY(pl_sco_parse_budget("--budgets", bp->text, &bp->b));
      c->nb++;
      if (!comma) break;
      s = comma + 1;
    }
  }
  int64_t K = 0;
  if (pl_args_given(a, "budget-steps"))
    K = pl_args_int(a, "budget-steps");
  else if (!list)
    K = p->steps ? p->steps : 4;
  size_t nhb = (size_t)c->N * (size_t)c->H * pl_dtype_size(c->dt);
  for (int64_t j = 0; K > 0 && j <= K; j++) {
    if (c->nb >= MAX_BUDGETS)
      return pl_set_error(PL_EINVAL, "--budget-steps=%lld: more than %d budgets in all", (long long)K, MAX_BUDGETS);
    budget_pt *bp = &c->budgets[c->nb++];
    if (j == K) {
      snprintf(bp->text, sizeof bp->text, "all");
      bp->b.all = true;
    } else {
      int64_t count = j * c->L / K; /* whole boundaries */
      bp->b.bytes = (uint64_t)count * nhb;
      snprintf(bp->text, sizeof bp->text, "%llu", (unsigned long long)bp->b.bytes);
    }
  }
  return PL_OK;
}

/* ---- the point's state ----------------------------------------------------- */
typedef struct sco_run {
  pl_bench_ctx *ctx;
  sco_cfg *cfg;
  pl_mlp_block *blocks;
  void **layers;
  void *x0, *g, *dx0;
  pl_ckpt_stack *stack;
  pl_sco *sco; /* the budget being measured (NULL: no SCO) */
  double loss;
} sco_run;

static pl_status step_fn(void *arg) {
  sco_run *r = arg;
  return pl_ckpt_step(r->stack, r->sco, r->x0, r->g, r->dx0, r->cfg->N, &r->loss);
}

/* Every rank learns the worst status of any rank, so all take the same branch
 * (no rank is left waiting in a collective).  The message is kept when this
 * rank failed itself. */
static pl_status agree(pl_bench_ctx *ctx, pl_status s) {
  int64_t v = s;
  pl_status cs = pl_host_allreduce_i64(ctx->comm, &v, 1, PL_RED_MIN);
  if (cs != PL_OK) return cs;
  if (v != PL_OK && s == PL_OK)
    return pl_set_error((pl_status)v, "another rank failed with %s", pl_strerror((pl_status)v));
  return (pl_status)v;
}

static void free_run(sco_run *r) {
  if (r->stack) pl_ckpt_destroy(r->stack);
  pl_free(r->ctx->dev, r->x0);
  pl_free(r->ctx->dev, r->g);
  pl_free(r->ctx->dev, r->dx0);
  for (int64_t l = 0; r->blocks && l < r->cfg->L; l++) pl_mlp_block_free(&r->blocks[l]);
  free(r->blocks);
  free(r->layers);
}

static pl_status setup(sco_run *r) {
  pl_bench_ctx *ctx = r->ctx;
  sco_cfg *c = r->cfg;
  pl_stream *s = pl_dev_stream(ctx->dev);
  size_t nh = (size_t)c->N * (size_t)c->H, bytes = nh * pl_dtype_size(c->dt);
  r->blocks = calloc((size_t)c->L, sizeof *r->blocks);
  r->layers = calloc((size_t)c->L, sizeof *r->layers);
  if (!r->blocks || !r->layers) return pl_set_error(PL_ENOMEM, "bench sco: out of host memory");
  for (int64_t l = 0; l < c->L; l++) {
    PL_TRY(pl_mlp_block_init(ctx->dev, &r->blocks[l], c->H, c->I, c->dt, ctx->seed, (int)l));
    r->layers[l] = &r->blocks[l];
  }
  PL_TRY(pl_alloc(ctx->dev, PL_ARENA_DEVICE, bytes, "input", &r->x0));
  PL_TRY(pl_alloc(ctx->dev, PL_ARENA_DEVICE, bytes, "input", &r->g));
  PL_TRY(pl_alloc(ctx->dev, PL_ARENA_DEVICE, bytes, "input", &r->dx0));
  /* each rank its own tokens: offsets by rank */
  uint64_t off = (uint64_t)ctx->rank << 40;
  PL_TRY(pl_rng_fill(s, r->x0, c->dt, nh, ctx->seed ^ 0x5c0, off, PL_DIST_NORMAL, 0, 1));
  PL_TRY(pl_rng_fill(s, r->g, c->dt, nh, ctx->seed ^ 0x9a1, off, PL_DIST_NORMAL, 0, 1));
  PL_TRY(pl_ckpt_create(ctx->dev, (int)c->L, r->layers, &pl_mlp_block_layer_ops, c->H, c->dt, &r->stack));
  return pl_stream_sync(s);
}

static pl_status zero_grads(sco_run *r) {
  pl_stream *s = pl_dev_stream(r->ctx->dev);
  for (int64_t l = 0; l < r->cfg->L; l++) PL_TRY(pl_mlp_block_zero_grad(&r->blocks[l], s));
  /* poison the output so a step that writes nothing cannot pass the check */
  return pl_fill(s, r->dx0, r->cfg->dt, (size_t)r->cfg->N * (size_t)r->cfg->H, NAN);
}

/* dx0 to the host (a comparison copy, not tensor memory of the schedule). */
static pl_status fetch_dx0(sco_run *r, void **out) {
  size_t bytes = (size_t)r->cfg->N * (size_t)r->cfg->H * pl_dtype_size(r->cfg->dt);
  *out = malloc(bytes ? bytes : 1);
  if (!*out) return pl_set_error(PL_ENOMEM, "bench sco: no host memory for the check copy (%zu bytes)", bytes);
  pl_stream *s = pl_dev_stream(r->ctx->dev);
  PL_TRY(pl_memcpy_async(s, *out, r->dx0, bytes));
  return pl_stream_sync(s);
}

static void fmt_gib(char *buf, size_t n, double bytes) {
  snprintf(buf, n, "%.4f", bytes / (1024.0 * 1024.0 * 1024.0));
}

static void row_point(pl_row *row, const pl_bench_ctx *ctx, const sco_cfg *c, const budget_pt *bp,
                      size_t nhb) {
  pl_row_i64(row, "tokens", c->N);
  pl_row_i64(row, "ranks", ctx->size);
  pl_row_i64(row, "layers", c->L);
  pl_row_i64(row, "hidden", c->H);
  pl_row_i64(row, "ffn", c->I);
  pl_row_str(row, "dtype", pl_dtype_name(c->dt));
  pl_row_str(row, "release", c->rel == PL_SCO_RELEASE_STEP ? "step" : "context");
  pl_row_str(row, "budget", bp->text);
  /* "all" is the size of every boundary: the budget that selects them all */
  uint64_t bb = bp->b.all ? (uint64_t)c->L * nhb : bp->b.bytes;
  pl_row_i64(row, "budget_bytes", (int64_t)bb);
}

/* One budget: SCO, check step, timing, row.  Returns a status only for
 * failures that are not results (oom and refusals are rows). */
static pl_status run_budget(sco_run *r, const budget_pt *bp, double ref_loss, const void *ref_dx,
                            const char *ref_why) {
  pl_bench_ctx *ctx = r->ctx;
  sco_cfg *c = r->cfg;
  size_t nhb = (size_t)c->N * (size_t)c->H * pl_dtype_size(c->dt);
  char label[96];
  snprintf(label, sizeof label, "N=%lld budget=%s", (long long)c->N, bp->text);
  pl_bench_progress(ctx, label);
  pl_row *row = pl_row_new(ctx);
  row_point(row, ctx, c, bp, nhb);

  pl_status st = pl_sco_create(ctx->dev, ctx->comm, (int)c->L, c->N, c->H, c->dt, bp->b, c->rel, &r->sco);
  if (st != PL_OK) { /* the ranks agreed inside pl_sco_create */
    if (st == PL_EINVAL) { /* a budget this host cannot hold: refused before any step */
      char note[600];
      snprintf(note, sizeof note, "refused: %s", pl_last_error());
      pl_row_status(row, "infeasible", note);
    } else {
      pl_row_status_from(row, st);
    }
    PL_TRY(pl_row_emit(row));
    return st == PL_EINVAL || st == PL_ENOMEM ? PL_OK : st;
  }
  int S = pl_sco_count(r->sco);
  pl_row_i64(row, "selected", S);
  size_t bound = 2 * nhb + (size_t)(c->L - S) * nhb; /* Eq. 4, device */
  pl_row_i64(row, "boundary_bound_bytes", (int64_t)bound);

  /* check step (also a warm-up) */
  pl_mem_reset_peak(ctx->dev, PL_ARENA_DEVICE);
  pl_mem_reset_peak(ctx->dev, PL_ARENA_HOST);
  st = zero_grads(r);
  if (st == PL_OK) st = pl_stream_sync(pl_dev_stream(ctx->dev));
  if (st == PL_OK) st = step_fn(r);
  st = agree(ctx, st);
  const char *check = "skip";
  char note[512] = "";
  int64_t bad = 0;
  if (st == PL_OK) {
    size_t bpeak = pl_mem_tag_peak(ctx->dev, PL_ARENA_DEVICE, "boundary");
    if (bpeak > bound) {
      bad = 1;
      snprintf(note, sizeof note, "device boundary peak %zu > Eq. 4 bound %zu", bpeak, bound);
    }
    if (ctx->check && ref_dx) {
      void *dx = NULL;
      st = fetch_dx0(r, &dx);
      if (st == PL_OK) {
        bool same = memcmp(&r->loss, &ref_loss, sizeof ref_loss) == 0 && memcmp(dx, ref_dx, nhb) == 0;
        if (!same && !note[0])
          snprintf(note, sizeof note, "not bit-identical to the budget-0 step: loss %.9g vs %.9g%s", r->loss,
                   ref_loss, memcmp(dx, ref_dx, nhb) ? ", dx0 differs" : "");
        bad |= !same;
      }
      free(dx);
    } else if (ctx->check && !note[0]) {
      snprintf(note, sizeof note, "check skipped: %s", ref_why);
    }
    st = agree(ctx, st);
    if (st == PL_OK) st = pl_host_allreduce_i64(ctx->comm, &bad, 1, PL_RED_MAX);
    if (st == PL_OK && bad && !note[0]) snprintf(note, sizeof note, "check failed on another rank");
    check = bad ? "fail" : (ctx->check && ref_dx) ? "pass" : "skip";
  }
  pl_stats t;
  memset(&t, 0, sizeof t);
  if (st == PL_OK) st = agree(ctx, pl_bench_time(ctx, step_fn, r, pl_dev_stream(ctx->dev), &t));
  if (st == PL_OK) {
    pl_mem_stats ds, hs;
    st = pl_mem_stats_get(ctx->dev, PL_ARENA_DEVICE, &ds);
    if (st == PL_OK) st = pl_mem_stats_get(ctx->dev, PL_ARENA_HOST, &hs);
    char live[512] = "";
    if (st == PL_OK) pl_mem_live_set_str(&ds, live, sizeof live);
    /* the ranks hold the same sizes; report the largest figure of any rank */
    int64_t v[4] = {(int64_t)ds.peak, (int64_t)ds.pool_high,
                    (int64_t)pl_mem_tag_peak(ctx->dev, PL_ARENA_HOST, "boundary"),
                    (int64_t)pl_mem_tag_peak(ctx->dev, PL_ARENA_DEVICE, "boundary")};
    if (st == PL_OK) st = pl_host_allreduce_i64(ctx->comm, v, 4, PL_RED_MAX);
    if (st == PL_OK) {
      pl_row_i64(row, "dev_peak_bytes", v[0]);
      char gib[32];
      fmt_gib(gib, sizeof gib, (double)v[0]);
      pl_row_str(row, "dev_peak_gib", gib);
      pl_row_i64(row, "pool_high_bytes", v[1]);
      pl_row_i64(row, "host_pinned_bytes", v[2]);
      pl_row_i64(row, "boundary_peak_bytes", v[3]);
      pl_row_str(row, "live_set", live);
      pl_row_f64(row, "ms_median", t.median);
      pl_row_f64(row, "ms_p10", t.p10);
      pl_row_f64(row, "ms_p90", t.p90);
      pl_row_f64(row, "tok_s_gpu", t.median > 0 ? (double)c->N / (t.median / 1e3) : NAN);
      /* GEMM FLOPs of a step, counted from the schedule: per layer forward
       * 6·N·H·I (H->2I and I->H), the recompute again, backward twice that */
      double flops = 24.0 * (double)c->N * (double)c->H * (double)c->I * (double)c->L;
      pl_row_f64(row, "tflop_s_gpu", t.median > 0 ? flops / (t.median / 1e3) / 1e12 : NAN);
      pl_row_check(row, check);
      if (note[0]) pl_row_status(row, "ok", note);
    }
  }
  if (st != PL_OK) pl_row_status_from(row, st);
  pl_sco_destroy(r->sco);
  r->sco = NULL;
  PL_TRY(pl_row_emit(row));
  return st == PL_OK || st == PL_ENOMEM || st == PL_EINFEASIBLE ? PL_OK : st;
}

static pl_status sco_run_bench(pl_bench_ctx *ctx, void *state) {
  (void)state;
  sco_cfg cfg;
  pl_status st = parse_cfg(ctx, &cfg);
  if (st != PL_OK) {
    /* bad --budgets: nothing measured; leave no result file behind */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pl_last_error());
    if (ctx->rank == 0 && ctx->res) remove(pl_results_path(ctx->res));
    return pl_set_error(st, "%s", msg);
  }
  ctx->npoints = cfg.nb;
  sco_run r;
  memset(&r, 0, sizeof r);
  r.ctx = ctx;
  r.cfg = &cfg;
  st = agree(ctx, setup(&r));
  if (st != PL_OK) { /* the stack itself does not fit: every budget is that row */
    char note[512];
    snprintf(note, sizeof note, "setup: %s", pl_last_error());
    pl_status keep = st;
    for (int i = 0; i < cfg.nb; i++) {
      pl_row *row = pl_row_new(ctx);
      row_point(row, ctx, &cfg, &cfg.budgets[i], (size_t)cfg.N * (size_t)cfg.H * pl_dtype_size(cfg.dt));
      pl_set_error(keep, "%s", note);
      pl_row_status_from(row, keep);
      pl_row_emit(row);
    }
    free_run(&r);
    return keep == PL_ENOMEM ? PL_OK : keep;
  }
  /* the reference: the same step without SCO (every boundary on the device) */
  double ref_loss = 0;
  void *ref_dx = NULL;
  char ref_why[512] = "--no-check";
  if (ctx->check) {
    st = zero_grads(&r);
    if (st == PL_OK) st = step_fn(&r);
    st = agree(ctx, st);
    if (st == PL_OK) {
      ref_loss = r.loss;
      st = agree(ctx, fetch_dx0(&r, &ref_dx));
    }
    if (st != PL_OK) {
      snprintf(ref_why, sizeof ref_why, "the budget-0 reference step failed (%s: %s)", pl_strerror(st),
               pl_last_error());
      free(ref_dx);
      ref_dx = NULL;
      if (st != PL_ENOMEM) {
        free_run(&r);
        return st;
      }
    }
  }
  st = PL_OK;
  for (int i = 0; i < cfg.nb && st == PL_OK; i++) st = run_budget(&r, &cfg.budgets[i], ref_loss, ref_dx, ref_why);
  free(ref_dx);
  free_run(&r);
  return st;
}

const pl_bench pl_bench_sco = {
    .name = "sco",
    .summary = "SCO host-budget sweep: device peak, pinned host bytes, step time (Table 3)",
    .opts = sco_opts,
    .columns = SCO_COLUMNS,
    .main = sco_run_bench,
};
