/* bench_train.c — `plateau bench train`: the end-to-end training step of the
 * paper's MoE models (engine/train/step.h) in the MoP layout, one point per
 * (context S, system), the timed unit one training step.
 *
 * A point: the system (train_system.h: plateau, the composed step, built
 * in) is created for S (N = S/D tokens per rank; W_v > W: the one-GPU proxy,
 * train/layout.h), -w warm-up steps and -n timed steps run on consecutive
 * batches of the token stream (--data), then it is destroyed.  A point that
 * does not fit (the tracked allocator: the device, or --mem-limit; pinned
 * host memory) is an `oom` row; a context the layout cannot split is an
 * `infeasible` row; bad options exit 2 before anything is written.
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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_train.h"

static const char *const dtypes[] = {"bf16", "f32", NULL};

static const pl_opt train_opts[] = {
    {"layers", 0, PL_OPT_INT, NULL, "decoder layers L", 1, 4096, NULL},
    {"hidden", 0, PL_OPT_INT, NULL, "hidden size H", 1, 1 << 20, NULL},
    {"dtype", 0, PL_OPT_ENUM, "bf16",
     "activation and weight storage (f32: --check's reference step)", 0, 0,
     dtypes},
    {"tokens", 0, PL_OPT_SIZE_LIST, NULL,
     "tokens per rank N instead of --seq (S = N·D; maxbatch's trials)", 1, 1e12,
     NULL},
    PL_BENCH_TRAIN_OPTS,
    {0},
};

static const pl_preset train_presets[] = {PL_BENCH_TRAIN_PRESETS, {NULL, NULL}};

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
} train_bench;

static pl_status init(pl_bench_ctx *c, void *st) {
  train_bench *b = st;
  PL_TRY(pl__train_parse(c, &b->a));
  c->npoints = b->a.nseq * b->a.nsys;
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
  b->sys = b->a.sys[p % b->a.nsys];
  b->u = b->a.u;
  b->u.S = b->a.seq[p / b->a.nsys];
  const pl_train_setup *u = &b->u;
  const pl_model_params mp = pl_model_count(&u->m);
  const int D = u->lc.D, Wv = u->lc.W_v ? u->lc.W_v : c->size;
  snprintf(label, n, "%s %s S=%lld", b->sys->name, u->model, (long long)u->S);
  pl_row_str(row, "system", b->sys->name);
  pl_row_str(row, "model", u->model);
  b->sys->identity(u, row);
  pl_row_i64(row, "ranks", c->size);
  pl_row_i64(row, "virtual_world", Wv);
  pl_row_i64(row, "D", D);
  pl_row_i64(row, "P", u->lc.P);
  pl_row_str(row, "dtype", pl_dtype_name(u->sc.dt));
  pl_row_i64(row, "seq", u->S);
  pl_row_i64(row, "micro", u->sc.micro);
  pl_row_i64(row, "layers", u->m.L);
  pl_row_i64(row, "hidden", u->m.H);
  pl_row_i64(row, "vocab", u->m.V);
  pl_row_i64(row, "experts", u->m.E);
  pl_row_i64(row, "topk", u->m.k);
  pl_row_i64(row, "params_total", mp.total);
  pl_row_i64(row, "params_active", mp.active);
  if (b->sys->validate(u, c->size) != PL_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pl_last_error());
    return pl_set_error(PL_EINFEASIBLE, "%s", msg);
  }
  pl_row_i64(row, "tokens", u->S / D);
  pl_row_i64(row, "step_tokens", (int64_t)u->sc.micro * (u->S / D) * Wv);
  return PL_OK;
}

static pl_status setup(pl_bench_ctx *c, void *st, int p) {
  train_bench *b = st;
  b->cap = c->warmup + c->iters;
  b->nres = 0, b->next = 0, b->why[0] = '\0';
  b->res = calloc((size_t)b->cap + 1, sizeof *b->res);
  if (!b->res)
    return pl_set_error(PL_ENOMEM, "train: host");
  PL_TRY(b->sys->create(c->dev, c->comm, &b->u, &b->h));
  b->tok = malloc((size_t)b->sys->tokens_per_rank(b->h) * sizeof(int32_t));
  return b->tok ? PL_OK : pl_set_error(PL_ENOMEM, "train: host tokens");
}

/* One training step on the next batch of the stream. */
static pl_status run(void *st) {
  train_bench *b = st;
  pl_step_result r;
  PL_TRY(b->sys->batch(b->h, b->a.data, b->next, b->tok));
  PL_TRY(b->sys->step(b->h, b->tok, &r));
  b->next++;
  if (b->nres < b->cap)
    b->res[b->nres++] = r;
  return PL_OK;
}

static pl_status check(pl_bench_ctx *c, void *st, int p, pl_check *chk) {
  train_bench *b = st;
  int bad = -1;
  for (int k = 0; k < b->nres && bad < 0; k++)
    if (!isfinite(b->res[k].loss))
      bad = k;
  pl_check_that(chk, bad < 0, "step %d: loss %g is not finite", bad + 1,
                bad < 0 ? 0.0 : b->res[bad].loss);
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
  free(b->tok);
  free(b->res);
  b->h = NULL, b->tok = NULL, b->res = NULL;
}

static void fini(pl_bench_ctx *c, void *st) {
  pl_data_close(((train_bench *)st)->a.data);
}

const pl_bench pl_bench_train = {
    .name = "train",
    .summary = "end-to-end training step (model, MoP layout, switches): "
               "tok/s/GPU, TFLOP/s, MFU, peaks, breakdown, losses",
    .opts = train_opts,
    .presets = train_presets,
    .preset_cpu = "cpu",
    .preset_cuda = "proxy120b",
    .columns = "system\tmodel\tvariant\tranks\tvirtual_world\tD\tP\tdtype\t"
               "seq\ttokens\tmicro\tstep_tokens\tlayers\thidden\tvocab\t"
               "experts\ttopk\tparams\tparams_total\tparams_active\tdispatch\t"
               "head\toptim\tcap\tK\tbudget\tselected\ttime_ms\ttime_p10_ms\t"
               "time_p90_ms\ttok_s_gpu\tflops\ttflops\tgemm_tflops\tmfu\t"
               "attention_ms\tmoe_ms\thead_ms\toptimizer_ms\tzero3_ms\tsco_ms\t"
               "other_ms\tdev_peak_bytes\thost_peak_bytes\tpool_peak_bytes\t"
               "bound_bytes\tlive_set\tdispatch_bytes\tlogits_bytes\t"
               "boundary_bytes\tattention_bytes\toptim_staging_bytes\tloss\t"
               "losses\tmax_err",
    .state = sizeof(train_bench),
    .init = init,
    .point = point,
    .setup = setup,
    .run = run,
    .check = check,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
