/* bench_train.c — `plateau bench train`: the end-to-end training step of the
 * paper's MoE models (engine/train/step.h) in the MoP layout, and of the
 * FSDP2 baseline (baselines/fsdp2), one point per (context S, system), the
 * timed unit one training step; --tune runs fsdp2 at every knob setting a
 * torchtitan user would try per context, --points the points fsdp2 shares
 * with the PyTorch peer (train_args.c builds the list).
 *
 * Before a point is created the planner predicts it on the run's machine
 * (train_plan.c): its pred_* columns; a point predicted not to fit is an
 * `infeasible` row naming the binding term unless --verify; --config auto
 * takes the planner's knobs per context.
 *
 * A point: the system (train_system.h: plateau, the composed step; fsdp2)
 * is created for S (N = S/D tokens per rank, S/cp for fsdp2; W_v > W: the
 * one-GPU proxy, train/layout.h), -w warm-up steps and -n timed steps run on
 * consecutive batches of the token stream (--data), then it is destroyed.  A
 * point that does not fit (the tracked allocator: the device, or --mem-limit;
 * pinned host memory, one process: within the host's available memory) is an
 * `oom` row; a context the layout cannot split is an `infeasible` row; bad
 * options exit 2 before anything is written.
 *
 * Rows: the identity (system, model, the switches, layout, S, N, tokens per
 * step), time_ms / p10 / p90 (the harness: the slowest rank's step), the
 * breakdown <part>_ms, tok_s_gpu, tflops by the model's FLOPs
 * (pl_model_flops_per_token: 6·active parameters + causal attention per
 * token), mfu against the GEMM rate (--gemm-tflops, --calib, or one H200's),
 * the memory of the steps (train_rows.c), the last loss and every step's,
 * and bound_bytes: the description's device total (train/describe.h).
 *
 * Check (--check): every step's loss finite; where it applies (the CPU
 * backend, f32, a real run, a small model) one more forward + backward
 * against the single-rank reference step on the same weights and sequences
 * (train_check.c).  --describe prints pl_train_describe for every point and
 * runs nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_args.h"
#include "train_check.h"
#include "train_plan.h"
#include "train_proj.h"
#include "train_rows.h"
#include "train_system.h"

/* Its options, their --help groups and presets: train_args.c. */

typedef struct train_bench {
  pl__train_args a;
  /* the point */
  const pl_train_system *sys;
  pl_train_setup u;
  void *h;
  int32_t *tok;
  pl_step_result *res;
  int nres, cap;
  int64_t next; /* the step index of the next step */
  char why[128];
  pl__train_pred pred; /* the planner's, of this point */
  int warmup, iters;   /* the command line's (a --points point may differ) */
  /* progress of the point's steps (rank 0 prints) */
  int rank, steps; /* steps asked: the point's warm-ups + timed steps */
  double spent_ms; /* the steps so far */
} train_bench;

static pl_status init(pl_bench_ctx *c, void *st) {
  train_bench *b = st;
  PL_TRY(pl__train_parse(c, &b->a));
  c->npoints = b->a.npts;
  b->warmup = c->warmup, b->iters = c->iters;
  if (b->a.describe) {
    if (c->rank == 0)
      pl__train_describe(c, &b->a, stdout);
    c->done = true;
  }
  return PL_OK;
}

static pl_status point(pl_bench_ctx *c, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  train_bench *b = st;
  const pl__train_point *pt = &b->a.pts[p];
  b->sys = pt->sys;
  b->u = pt->u;
  c->warmup = pt->warmup >= 0 ? pt->warmup : b->warmup;
  c->iters = pt->iters >= 0 ? pt->iters : b->iters;
  const pl_train_setup *u = &b->u;
  const int D = b->sys->seq_ranks(u), Wv = u->lc.W_v ? u->lc.W_v : c->size;
  pl_row_str(row, "system", b->sys->name);
  pl_row_str(row, "model", u->model);
  pl_row_str(row, "kind", u->kind);
  b->sys->identity(u, row);
  char v[96] = "";
  if (!strcmp(b->sys->name, PL_PLAN_NAME_FSDP2)) { /* the knobs of the point */
    const pl_fsdp2_cfg f = pl__train_fsdp2_cfg(u);
    pl_fsdp2_cfg_name(&f, v, sizeof v);
  }
  snprintf(label, n, "%s %s S=%lld %s%s%s", b->sys->name, u->model,
           (long long)u->S, u->point, u->point[0] ? " " : "", v);
  if (u->point[0])
    pl_row_note(row, "point %s (warm-ups %d, timed steps %d)", u->point,
                c->warmup, c->iters);
  pl__train_identity(u, c->size, Wv, D, row);
  if (b->sys->validate(u, c->size) != PL_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pl_last_error());
    return pl_set_error(PL_EINFEASIBLE, "%s", msg);
  }
  pl_row_i64(row, "tokens", u->S / D);
  pl_row_i64(row, "step_tokens", (int64_t)u->sc.micro * (u->S / D) * Wv);
  return pl__train_plan_point(c, &b->a, b->sys, u, row, &b->pred);
}

static pl_status setup(pl_bench_ctx *c, void *st, int p) {
  train_bench *b = st;
  pl__train_host_limit(c, true);
  b->cap = c->warmup + c->iters + PL_BENCH_EXTRA_WARMUPS;
  b->nres = 0, b->next = 0, b->why[0] = '\0';
  b->rank = c->rank, b->steps = c->warmup + c->iters, b->spent_ms = 0;
  b->res = calloc((size_t)b->cap + 1, sizeof *b->res);
  if (!b->res)
    return pl_set_error(PL_ENOMEM, "train: host");
  PL_TRY(pl__train_data(c, &b->a, b->u.m.V));
  PL_TRY(pl__train_plan_fail(&b->pred,
                             b->sys->create(c->dev, c->comm, &b->u, &b->h)));
  b->tok = malloc((size_t)b->sys->tokens_per_rank(b->h) * sizeof(int32_t));
  return b->tok ? PL_OK : pl_set_error(PL_ENOMEM, "train: host tokens");
}

/* "[train] step i/n  t s  loss L  R tok/s  peak P  ETA s" on stderr (rank
 * 0), so a step of minutes at a long context shows it is alive and how fast
 * and how full it runs; n counts the warm-ups and timed steps asked ("n+"
 * once the harness adds warm-ups that had not converged); R is this step's
 * tokens per rank over its time, P rank 0's device peak of the step.  Never
 * in the result file (the row holds the median and the max over ranks). */
static void progress(train_bench *b, const pl_step_result *r) {
  b->spent_ms += r->time_ms;
  if (b->rank != 0)
    return;
  const int i = (int)b->next, left = b->steps - i;
  char eta[32] = "", peak[32];
  if (left > 0)
    snprintf(eta, sizeof eta, "  ETA %.1f s", b->spent_ms / i * left * 1e-3);
  const double tok = (double)b->u.sc.micro *
                     (double)(b->u.S / b->sys->seq_ranks(&b->u)),
               pk = (double)r->dev.peak;
  if (pk >= 1024.0 * 1024 * 1024)
    snprintf(peak, sizeof peak, "%.2f GiB", pk / (1024.0 * 1024 * 1024));
  else if (pk >= 1024.0 * 1024)
    snprintf(peak, sizeof peak, "%.2f MiB", pk / (1024.0 * 1024));
  else
    snprintf(peak, sizeof peak, "%.2f KiB", pk / 1024.0);
  const double rate = r->time_ms > 0 ? tok / (r->time_ms * 1e-3) : 0.0;
  fprintf(stderr,
          "[train] step %d/%d%s  %.2f s  loss %.4f  %.*f tok/s  peak "
          "%s%s\n",
          i, b->steps, i > b->steps ? "+" : "", r->time_ms * 1e-3, r->loss,
          rate >= 100 ? 0 : 2, rate, peak, eta);
  fflush(stderr);
}

/* One training step on the next batch of the stream. */
static pl_status run(void *st) {
  train_bench *b = st;
  pl_step_result r;
  PL_TRY(b->sys->batch(b->h, b->a.data, b->next, b->tok));
  PL_TRY(pl__train_plan_fail(&b->pred, b->sys->step(b->h, b->tok, &r)));
  b->next++;
  progress(b, &r);
  if (b->nres < b->cap)
    b->res[b->nres++] = r;
  return PL_OK;
}

static pl_status check(pl_bench_ctx *c, void *st, int p, pl_check *chk) {
  train_bench *b = st;
  pl__train_check_losses(b->res, b->nres, chk);
  if (!pl__train_check_applies(c, b->sys, &b->u, b->why, sizeof b->why))
    return PL_OK;
  snprintf(b->why, sizeof b->why, "reference step compared");
  return pl__train_check_reference(c, b->sys, b->h, &b->u, b->a.data, b->next,
                                   chk);
}

static pl_status finish(pl_bench_ctx *c, void *st, int p, pl_row *row,
                        pl_work *w) {
  train_bench *b = st;
  PL_TRY(pl__train_row(c, &b->a, b->sys, b->h, &b->u, b->res, b->nres, row, w));
  PL_TRY(pl__train_proj_row(c, &b->a, b->sys, &b->u, &b->pred, b->res, b->nres,
                            row));
  if (b->why[0])
    pl_row_note(row, "%s", b->why);
  if (c->check && strncmp(b->why, "reference step compared", 23))
    pl_row_str(row, "max_err", "-"); /* only the losses' finiteness */
  return PL_OK;
}

static void teardown(pl_bench_ctx *c, void *st, int p) {
  train_bench *b = st;
  if (b->h)
    b->sys->destroy(b->h);
  pl__train_host_limit(c, false);
  free(b->tok);
  free(b->res);
  b->h = NULL, b->tok = NULL, b->res = NULL;
}

static void fini(pl_bench_ctx *c, void *st) {
  pl__train_args_free(&((train_bench *)st)->a);
}

const pl_bench pl_bench_train = {
    .name = "train",
    .summary = "end-to-end training step (model, MoP layout, switches): "
               "tok/s/GPU, TFLOP/s, MFU, peaks, breakdown, losses",
    .opts = pl__train_opts,
    .groups = pl__train_groups,
    .presets = pl__train_presets,
    .preset_cpu = "cpu",
    .preset_cuda = "proxy120b",
    .columns = "system\tmodel\tvariant\tkind\tranks\tvirtual_world\tD\tP\t"
               "dtype\tseq\ttokens\tmicro\tstep_tokens\tlayers\thidden\t"
               "vocab\texperts\ttopk\tparams\tparams_total\tparams_active\t"
               "dispatch\thead\toptim\tcap\tK\tbudget\tselected\t"
               "optim_resident\tresident_params\tkeep\tkept_attn\t"
               "kept_full\tcp\tep\tac\ttime_ms\ttime_p10_ms\ttime_p90_ms\ttok_"
               "s_gpu\tflops\t"
               "tflops\tgemm_tflops\tmfu\tattention_ms\tmoe_ms\thead_ms\t"
               "optimizer_ms\tzero3_ms\tsco_ms\tother_ms\trecompute_ms\t"
               "expert_units_ms\t"
               "standin_ms\tstandin_side_ms\tcompute_ms\tcomm_model_ms\t"
               "step_proj_ms\tpred_proj_ms\ttok_s_gpu_proj\ttok_s_gpu_proj_lo\t"
               "tok_s_gpu_proj_hi\ttflops_proj\t"
               "dev_peak_bytes\t"
               "host_peak_bytes\tpool_peak_bytes\tbound_bytes\tlive_set\t"
               "dispatch_bytes\tlogits_bytes\tboundary_bytes\tattention_bytes\t"
               "optim_staging_bytes\tkept_bytes\tpred_dev_peak_bytes\tpred_"
               "host_bytes\t"
               "pred_time_ms\tloss\tlosses\tmax_err",
    .state = sizeof(train_bench),
    .stateful = true,
    .dry = true,
    .init = init,
    .point = point,
    .setup = setup,
    .run = run,
    .check = check,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
