/* bench_sco.c — `plateau bench sco`: the host-budget sweep of SCO (the
 * paper's Table 3) on a checkpointed stack of L dense blocks (RMSNorm ->
 * SwiGLU MLP with residual, engine/model/mlp_block.h).
 *
 * One point per host budget B per rank (--budgets "0,12Gi,all" and/or
 * --budget-steps K: 0, 1/K ... all of L boundaries, rounded down to whole
 * boundaries of N·H·b bytes).  The stack, and with --check the reference
 * (the same step without SCO: every boundary on the device), are made once.
 * Per point SCO picks |S| (first layers first, the minimum over ranks; a
 * budget the host cannot hold is refused: an infeasible row), and the timed
 * unit is one training step of the stack.  The check: loss and dx0 (which
 * depends on every layer) bit-identical to the reference's — SCO changes no
 * arithmetic — and the device boundary peak within Eq. 4,
 * 2·N·H·b + (L − |S|)·N·H·b.  Rows: the harness's device, pinned-host and
 * pool peaks with the live set, |S|, step time, tokens/s per GPU and the
 * GEMM TFLOP/s it implies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_sco.h"
#include "sco_stack.h"

const char *const pl_bench_sco_dtypes[] = {"bf16", "f32", NULL};
const char *const pl_bench_sco_releases[] = {"context", "step", NULL};
const pl_preset pl_bench_sco_presets[] = {PL_BENCH_SCO_PRESETS, {NULL, NULL}};

static const pl_opt sco_opts[] = {PL_BENCH_SCO_OPTS, {0}};

/* One budget of the --budgets list `list` (for messages). */
static pl_status add_budget(sco_bench *b, const char *list, const char *text,
                            size_t len) {
  if (b->nb >= MAX_BUDGETS)
    return pl_set_error(PL_EINVAL, "--budgets=%s: more than %d budgets", list,
                        MAX_BUDGETS);
  budget_pt *bp = &b->budgets[b->nb];
  if (len == 0)
    return pl_set_error(PL_EINVAL,
                        "--budgets=%s: empty list element (allowed: 0, all, "
                        "or a size such as 12Gi)",
                        list);
  if (len >= sizeof bp->text)
    return pl_set_error(PL_EINVAL,
                        "--budgets=%s: an entry of %zu characters (allowed: "
                        "0, all, or a size such as 12Gi)",
                        list, len);
  memcpy(bp->text, text, len);
  bp->text[len] = '\0';
  PL_TRY(pl_sco_parse_budget("--budgets", bp->text, &bp->b));
  b->nb++;
  return PL_OK;
}

static pl_status init(pl_bench_ctx *c, void *st) {
  sco_bench *b = st;
  const pl_args *a = c->args;
  b->L = pl_args_int(a, "layers");
  b->H = pl_args_int(a, "hidden");
  b->I = pl_args_int(a, "ffn");
  b->N = (int64_t)pl_args_size(a, "tokens");
  b->dt = pl_args_enum(a, "dtype") == 0 ? PL_BF16 : PL_F32;
  b->rel = pl_args_enum(a, "release") == 1 ? PL_SCO_RELEASE_STEP
                                           : PL_SCO_RELEASE_CONTEXT;
  /* every boundary's bytes, L*N*H*b, and the budgets derived from them must
   * be sizes (at most INT64_MAX) */
  uint64_t all;
  if ((uint64_t)b->N > INT64_MAX / ((uint64_t)b->H * pl_dtype_size(b->dt)) ||
      __builtin_mul_overflow((uint64_t)b->L, pl__sco_nhb(b), &all) ||
      all > INT64_MAX)
    return pl_set_error(PL_EINVAL,
                        "--layers=%lld --tokens=%lld --hidden=%lld: the "
                        "boundaries' bytes L*N*H*%zu overflow a size (allowed: "
                        "at most 9223372036854775807)",
                        (long long)b->L, (long long)b->N, (long long)b->H,
                        pl_dtype_size(b->dt));
  const char *list = pl_args_str(a, "budgets");
  for (const char *s = list; s;) {
    const char *comma = strchr(s, ',');
    PL_TRY(add_budget(b, list, s, comma ? (size_t)(comma - s) : strlen(s)));
    s = comma ? comma + 1 : NULL;
  }
  int64_t K = pl_args_given(a, "budget-steps") ? pl_args_int(a, "budget-steps")
              : list                           ? 0
                                               : 4;
  for (int64_t j = 0; K > 0 && j <= K; j++) { /* whole boundaries */
    char t[32];
    snprintf(t, sizeof t, "%llu",
             (unsigned long long)((uint64_t)(j * b->L / K) * pl__sco_nhb(b)));
    PL_TRY(add_budget(b, "(--budget-steps)", j == K ? "all" : t,
                      strlen(j == K ? "all" : t)));
  }
  c->npoints = b->nb;
  b->stack_st = PL_OK;
  return PL_OK;
}

static pl_status point(pl_bench_ctx *c, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  sco_bench *b = st;
  const budget_pt *bp = &b->budgets[p];
  snprintf(label, n, "N=%lld budget=%s", (long long)b->N, bp->text);
  pl_row_i64(row, "tokens", b->N);
  pl_row_i64(row, "ranks", c->size);
  pl_row_i64(row, "layers", b->L);
  pl_row_i64(row, "hidden", b->H);
  pl_row_i64(row, "ffn", b->I);
  pl_row_str(row, "dtype", pl_dtype_name(b->dt));
  pl_row_str(row, "release",
             b->rel == PL_SCO_RELEASE_STEP ? "step" : "context");
  pl_row_str(row, "budget", bp->text);
  /* "all" is the size of every boundary: the budget that selects them all */
  pl_row_i64(
      row, "budget_bytes",
      (int64_t)(bp->b.all ? (uint64_t)b->L * pl__sco_nhb(b) : bp->b.bytes));
  return PL_OK;
}

static pl_status step(void *st) {
  sco_bench *b = st;
  return pl_ckpt_step(b->stack, b->sco, b->x0, b->g, b->dx0, b->N, &b->loss);
}

/* The budget-0 step on this rank: zeroed gradients, one step, its dx0. */
static pl_status reference_step(pl_bench_ctx *c, sco_bench *b) {
  PL_TRY(pl__sco_zero_grads(c, b));
  PL_TRY(step(b));
  return pl__sco_fetch_dx0(c, b, &b->ref_dx);
}

static void reference(pl_bench_ctx *c, sco_bench *b) {
  pl_status s = reference_step(c, b); /* every rank then agrees on it */
  if (pl_bench_agree(c, &s) == PL_OK && s == PL_OK) {
    b->ref_loss = b->loss;
    return;
  }
  snprintf(b->ref_why, sizeof b->ref_why,
           "the budget-0 reference step failed (%s: %s)", pl_strerror(s),
           pl_last_error());
  free(b->ref_dx);
  b->ref_dx = NULL;
}

static pl_status setup(pl_bench_ctx *c, void *st, int p) {
  sco_bench *b = st;
  if (!b->made) { /* the stack itself not fitting is every budget's row */
    b->made = 1;
    b->stack_st = pl__sco_make_stack(c, b);
    PL_TRY(pl_bench_agree(c, &b->stack_st));
    snprintf(b->stack_msg, sizeof b->stack_msg, "setup: %s", pl_last_error());
    snprintf(b->ref_why, sizeof b->ref_why, "--no-check");
    if (b->stack_st == PL_OK && c->check)
      reference(c, b);
  }
  if (b->stack_st != PL_OK)
    return pl_set_error(b->stack_st, "%s", b->stack_msg);
  pl_status s = pl_sco_create(c->dev, c->comm, (int)b->L, b->N, b->H, b->dt,
                              b->budgets[p].b, b->rel, &b->sco);
  if (s == PL_EINVAL) /* a budget this host cannot hold: refused */
    return pl_set_error(PL_EINFEASIBLE, "refused: %s", pl_last_error());
  PL_TRY(s);
  return pl__sco_zero_grads(c, b);
}

static size_t eq4_bound(const sco_bench *b) {
  return 2 * pl__sco_nhb(b) +
         (size_t)(b->L - pl_sco_count(b->sco)) * pl__sco_nhb(b);
}

static pl_status check(pl_bench_ctx *c, void *st, int p, pl_check *chk) {
  sco_bench *b = st;
  size_t peak = c->meas->tag_peak[0], bound = eq4_bound(b);
  if (peak > bound || b->ref_dx)
    pl_check_that(chk, peak <= bound,
                  "device boundary peak %zu > Eq. 4 bound %zu", peak, bound);
  if (!b->ref_dx)
    return PL_OK;
  void *dx = NULL;
  pl_status s = pl__sco_fetch_dx0(c, b, &dx);
  if (s == PL_OK) {
    pl_check_arrays(chk, "loss", &b->loss, PL_ELEM_F64, &b->ref_loss,
                    PL_ELEM_F64, 1, PL_F32, PL_CHECK_EXACT);
    pl_check_arrays(chk, "dx0", dx, pl_elem_of(b->dt), b->ref_dx,
                    pl_elem_of(b->dt), (size_t)b->N * (size_t)b->H, b->dt,
                    PL_CHECK_EXACT);
  }
  free(dx);
  return s;
}

static pl_status finish(pl_bench_ctx *c, void *st, int p, pl_row *row,
                        pl_work *w) {
  sco_bench *b = st;
  const double ms = c->meas->t.median;
  pl_row_i64(row, "selected", pl_sco_count(b->sco));
  pl_row_i64(row, "bound_bytes", (int64_t)eq4_bound(b));
  pl_row_f64(row, "tok_s_gpu", ms > 0 ? (double)b->N / (ms / 1e3) : NAN);
  if (c->check && !b->ref_dx)
    pl_row_note(row, "check skipped: %s", b->ref_why);
  /* GEMM FLOPs of a step, from the schedule: per layer forward 6·N·H·I
   * (H->2I and I->H), the recompute again, backward twice that */
  w->flops = 24.0 * (double)b->N * (double)b->H * (double)b->I * (double)b->L;
  return PL_OK;
}

static void teardown(pl_bench_ctx *c, void *st, int p) {
  sco_bench *b = st;
  pl_sco_destroy(b->sco);
  b->sco = NULL;
}

static void fini(pl_bench_ctx *c, void *st) {
  pl__sco_free_stack(c, st);
}

const pl_bench pl_bench_sco = {
    .name = "sco",
    .summary = "SCO host-budget sweep: device peak, pinned host bytes, step "
               "time (Table 3)",
    .opts = sco_opts,
    .presets = pl_bench_sco_presets,
    .preset_cpu = "none",
    .preset_cuda = "none",
    .columns = "tokens\tranks\tlayers\thidden\tffn\tdtype\trelease\tbudget\t"
               "budget_bytes\tselected\tdev_peak_bytes\tboundary_bytes\t"
               "bound_bytes\tpool_peak_bytes\thost_peak_bytes\tlive_set\t"
               "time_ms\ttime_p10_ms\ttime_p90_ms\ttok_s_gpu\ttflops\tmax_err",
    .tags = (const char *const[]){"boundary", NULL},
    .state = sizeof(sco_bench),
    .init = init,
    .point = point,
    .setup = setup,
    .run = step,
    .check = check,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
