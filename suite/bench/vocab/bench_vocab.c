/* bench_vocab.c — `plateau bench vocab`: the vocabulary head (projection +
 * cross-entropy, forward + backward) per variant, as in the paper's Table 2.
 *
 * Variants (each point: variant × N × dtype × block [× strip budget]):
 *   dense    logits N×V materialized, PyTorch's sequence (the paper's
 *            baseline); every rank runs its own batch on the full W.
 *   fused    one device, the three-GEMM head (Liger's schedule: token chunks
 *            against the full vocabulary, residual in place, no recompute)
 *            within the blocked head's strip bound; = Ring-DTP at P = 1.
 *   blocked  one device, vocabulary blocks with online log-sum-exp (CCE
 *            style, four GEMMs: the strip is recomputed in the backward).
 *   chunk    one device, token chunks of Nc = N·Vb/V rows, f32 strip and an
 *            f32 H×V dW accumulator (the earlier Liger-style variant).
 *   vp       Megatron vocab-parallel CE over the P ranks: W sharded, the SAME
 *            batch on every rank (the group processes N distinct tokens, not
 *            P·N: the note says so).
 *   ring     Ring-DTP over the P ranks (pl_dtp_run): each rank its own batch
 *            and W shard; --schedule picks what runs (auto: three GEMMs at
 *            P = 1, the blocked meetings beyond), --strip-budget the bytes of
 *            logit strips the blocked schedule keeps from forward to backward
 *            (a list: one point each, the budget → time curve).
 * --tf32 runs the f32 GEMMs in TF32 math (the math column; off by default).
 * N is tokens per rank.  Memory: the tracked device peak of one fwd+bwd
 * (inputs X, W included; gradients allocated where autograd would), max over
 * ranks, with the live set at the peak; the "logits" tag's own peak; for ring
 * the analytic floor X + W_r + dX + dW_r + the moving tensor's hop buffers
 * (one at P = 2, two beyond) + two f32 buffers of its gradient + one strip
 * (bound_bytes, vocab_ref.c), the mode chosen, bytes per hop and bytes sent.
 * Time: median (p10, p90) of fwd+bwd, max over ranks.
 *
 * Check (--check, default on): loss and dX against the blocked fused head
 * (itself tested against the f64 reference, baselines/test_ce.c; run in f32
 * math) on the same inputs, with sum reduction rescaled by the count of
 * targets the variant averages over; dW is covered by the tests, not here
 * (its check would need a second H×V gradient on every rank).  Tolerance:
 * compare.h's for the dtype (bf16's for a TF32 row) and a reduction over V.
 *
 * Presets: small (CPU, seconds on 2 ranks): H=128, V=4096, N=256,512,
 * block 512; paper: H=7168, V=200,000, N=16,384 and 32,768, the dtype's
 * block (pl_ce_default_block: 4096 in bf16, 16384 in f32).
 * Unless -n / -w are given, 3 timed iterations after 1 warm-up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/ring_dtp.h"
#include "vocab.h"

static const char *const variant_names[] = {
    "dense", "fused", "blocked", "chunk", "vp", "ring", NULL};
static const char *const dtype_names[] = {"f32", "bf16", NULL};

static const pl_opt vocab_opts[] = {
    {"variants", 0, PL_OPT_ENUM_LIST, "dense,fused,blocked,chunk,vp,ring",
     "which heads to run", 0, 0, variant_names},
    {"tokens", 'N', PL_OPT_SIZE_LIST, NULL, "tokens per rank", 1, 1 << 30,
     NULL},
    {"hidden", 'H', PL_OPT_SIZE, NULL, "hidden size", 1, 1 << 20, NULL},
    {"vocab", 'V', PL_OPT_SIZE, NULL, "vocabulary", 1, 1 << 30, NULL},
    {"dtypes", 0, PL_OPT_ENUM_LIST, "f32", "storage dtypes", 0, 0, dtype_names},
    {"blocks", 0, PL_OPT_SIZE_LIST, "0",
     "vocabulary block sizes of fused, chunk and ring (0: the dtype's "
     "default, 4096 in bf16 and 16384 in f32)",
     0, 1 << 30, NULL},
    {"mode", 0, PL_OPT_ENUM, "auto", "Ring-DTP schedule", 0, 0,
     pl_dtp_mode_names},
    {"no-overlap", 0, PL_OPT_FLAG, NULL,
     "Ring-DTP: hops in line on the compute stream (no comm stream)", 0, 0,
     NULL},
    {"schedule", 0, PL_OPT_ENUM, "auto",
     "Ring-DTP: auto (three GEMMs at P=1), chunked (P=1) or blocked", 0, 0,
     pl_dtp_sched_names},
    {"strip-budget", 0, PL_OPT_SIZE_LIST, "0",
     "Ring-DTP, blocked schedule: bytes of logit strips kept from forward to "
     "backward per rank (a list: the budget -> time curve)",
     0, 1e15, NULL},
    {"tf32", 0, PL_OPT_FLAG, NULL,
     "f32 runs: the GEMMs in TF32 math (cuBLAS TF32 tensor cores; the CPU "
     "backend rounds the operands to TF32)",
     0, 0, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

/* Sizes; iterations too unless -n / -w are given: the paper preset's fp32
 * dense point is seconds per fwd+bwd, and the small one runs under
 * `make run` on a 2-core box. */
static const pl_preset vocab_presets[] = {
    {"small", "hidden=128 vocab=4096 tokens=256,512 blocks=512 iters=3 "
              "warmup=1"},
    {"paper", "hidden=7168 vocab=200000 tokens=16384,32768 iters=3 "
              "warmup=1"},
    {NULL, NULL},
};

/* ---- the bench ------------------------------------------------------------
 */
typedef struct vocab_pt {
  int variant;
  pl_dtype dt;
  int64_t n, block;
  size_t budget;
} vocab_pt;

typedef struct vocab {
  int64_t H, V;
  pl_dtp_mode mode;
  pl_dtp_sched sched;
  int overlap, tf32;
  vocab_pt *pts;
  pl__vocab_point p; /* the point being measured */
} vocab;

static pl_status init(pl_bench_ctx *c, void *st) {
  vocab *b = st;
  pl_args *a = c->args;
  uint64_t ns[PL_OPT_LIST_MAX], blocks[PL_OPT_LIST_MAX],
      budgets[PL_OPT_LIST_MAX];
  int nn = pl_args_size_list(a, "tokens", ns, PL_OPT_LIST_MAX);
  int nb = pl_args_size_list(a, "blocks", blocks, PL_OPT_LIST_MAX);
  int nbud = pl_args_size_list(a, "strip-budget", budgets, PL_OPT_LIST_MAX);
  int vars[V_COUNT], nv = pl_args_enum_list(a, "variants", vars, V_COUNT);
  int dts[2], nd = pl_args_enum_list(a, "dtypes", dts, 2);
  b->H = (int64_t)pl_args_size(a, "hidden");
  b->V = (int64_t)pl_args_size(a, "vocab");
  b->mode = (pl_dtp_mode)pl_args_enum(a, "mode");
  b->overlap = !pl_args_flag(a, "no-overlap");
  b->sched = (pl_dtp_sched)pl_args_enum(a, "schedule");
  if (b->sched == PL_DTP_SCHED_CHUNKED && c->size > 1)
    return pl_set_error(PL_EINVAL,
                        "--schedule chunked: needs the whole "
                        "vocabulary on one rank (1 rank, not %d)",
                        c->size);
  b->tf32 = pl_args_flag(a, "tf32");
  b->pts = calloc((size_t)(nd * nn * nv * nb * nbud) + 1, sizeof *b->pts);
  PL_ASSERT(b->pts != NULL);
  int np = 0;
  for (int di = 0; di < nd; di++)
    for (int ni = 0; ni < nn; ni++)
      for (int vi = 0; vi < nv; vi++) {
        /* dense and vp have no vocabulary blocks */
        int blocked = vars[vi] != V_DENSE && vars[vi] != V_VP;
        for (int bi = 0; bi < (blocked ? nb : 1); bi++)
          for (int ui = 0; ui < (vars[vi] == V_RING ? nbud : 1); ui++) {
            const pl_dtype dt = dts[di] ? PL_BF16 : PL_F32;
            const int64_t vb = !blocked     ? 0
                               : blocks[bi] ? (int64_t)blocks[bi]
                                            : pl_ce_default_block(dt);
            b->pts[np++] = (vocab_pt){vars[vi], dt, (int64_t)ns[ni], vb,
                                      vars[vi] == V_RING ? budgets[ui] : 0};
          }
      }
  c->npoints = np;
  return PL_OK;
}

static pl_status point_of(pl_bench_ctx *c, void *st, int i, pl_row *row,
                          char *label, size_t n) {
  vocab *b = st;
  const vocab_pt *q = &b->pts[i];
  pl__vocab_point *p = &b->p;
  *p = (pl__vocab_point){.ctx = c,
                         .variant = q->variant,
                         .dt = q->dt,
                         .n = q->n,
                         .h = b->H,
                         .v = b->V,
                         .block = q->block,
                         .mode = b->mode,
                         .sched = b->sched,
                         .budget = q->budget,
                         .overlap = b->overlap,
                         .tf32 = b->tf32 && q->dt == PL_F32,
                         .s = c->stream};
  pl_stream_set_tf32(c->stream, p->tf32);
  snprintf(label, n, "%s N=%lld H=%lld V=%lld %s block=%lld",
           variant_names[q->variant], (long long)q->n, (long long)b->H,
           (long long)b->V, pl_dtype_name(q->dt), (long long)q->block);
  pl_row_str(row, "variant", variant_names[q->variant]);
  pl_row_i64(row, "tokens", q->n);
  pl_row_i64(row, "hidden", b->H);
  pl_row_i64(row, "vocab", b->V);
  pl_row_i64(row, "ranks",
             q->variant == V_VP || q->variant == V_RING ? c->size : 1);
  pl_row_str(row, "dtype", pl_dtype_name(q->dt));
  if (q->block)
    pl_row_i64(row, "block", q->block < b->V ? q->block : b->V);
  pl_row_str(row, "math", q->dt != PL_F32 ? "-" : p->tf32 ? "tf32" : "fp32");
  if (q->variant == V_RING)
    pl_row_i64(row, "strip_budget_bytes", (int64_t)q->budget);
  return PL_OK;
}

/* Inputs: X (this rank's batch; vp: the same batch on every rank), W or its
 * shard, the targets (a few ignored); Ring-DTP's schedule. */
static pl_status setup(pl_bench_ctx *c, void *st, int i) {
  return pl__vocab_inputs(c, &((vocab *)st)->p);
}

static pl_status run(void *st) {
  return pl__vocab_iter(&((vocab *)st)->p);
}

static pl_status check(pl_bench_ctx *c, void *st, int i, pl_check *chk) {
  return pl__vocab_check(&((vocab *)st)->p, chk);
}

/* Ring-DTP's schedule, hop bytes and floor; what each variant's batch is. */
static pl_status finish(pl_bench_ctx *c, void *st, int i, pl_row *row,
                        pl_work *w) {
  return pl__vocab_columns(c, &((vocab *)st)->p, row);
}

static void teardown(pl_bench_ctx *c, void *st, int i) {
  pl__vocab_free(c, &((vocab *)st)->p);
}

static void fini(pl_bench_ctx *c, void *st) {
  free(((vocab *)st)->pts);
}

const pl_bench pl_bench_vocab = {
    .name = "vocab",
    .summary = "vocabulary head fwd+bwd (Table 2): dense, fused, "
               "vocab-parallel, Ring-DTP; time, peak memory and live set, "
               "bytes per hop",
    .opts = vocab_opts,
    .presets = vocab_presets,
    .preset_cpu = "small",
    .preset_cuda = "paper",
    .columns = "variant\tkernel\ttokens\thidden\tvocab\tranks\tdtype\tmath\t"
               "block\tmode\tstrip_budget_bytes\tkept_strips\ttime_ms\t"
               "time_p10_ms\ttime_p90_ms\tdev_peak_bytes\tlogits_bytes\t"
               "bound_bytes\tlive_set\thop_bytes\tsent_bytes\tmax_err",
    .tags = (const char *const[]){"logits", NULL},
    .state = sizeof(vocab),
    .init = init,
    .point = point_of,
    .setup = setup,
    .run = run,
    .check = check,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
