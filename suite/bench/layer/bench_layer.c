/* bench_layer.c — `plateau bench layer`: the decoder layer (model/layer.h:
 * RMSNorm → QKV → RoPE → causal GQA flash attention, Ulysses over all ranks
 * of the run → out-projection + residual → dense SwiGLU MLP + residual),
 * forward and forward+backward, over a sequence-length sweep.
 *
 * S is the whole sequence; with D ranks each holds N = S/D tokens and the
 * attention runs head-sharded (heads must divide by D).  FLOPs per rank are
 * model FLOPs (recomputation not counted):
 *   GEMMs  fwd = 2·N·H·((n_q + 2·n_kv)·d + n_q·d + 3·I),  bwd = 2·fwd
 *   attention fwd = 4·S²·d·(n_q/D)/2 (causal),            bwd = 2.5·fwd
 * The backward recomputes the forward from the layer input (checkpointing),
 * so fwd+bwd time includes one extra forward.  Peak = tracked device peak of
 * the timed runs (weights, grads, the boundary x, activations, the
 * attention workspace and Ulysses buffers); attention_bytes the workspace's
 * own.  No check here: the layer's tests compare it with the reference. */
#include <stdio.h>
#include <string.h>

#include "harness/bench.h"
#include "model/layer.h"
#include "model/ulysses.h"

static const char *const pass_names[] = {"fwd", "fwdbwd", "both", NULL};

static const pl_opt layer_opts[] = {
    {"seq", 0, PL_OPT_SIZE_LIST, NULL, "whole-sequence lengths S", 1, 1 << 30,
     NULL},
    {"hidden", 0, PL_OPT_INT, NULL, "hidden size H", 1, 1 << 20, NULL},
    {"ffn", 0, PL_OPT_INT, NULL, "dense FFN width I", 1, 1 << 22, NULL},
    {"heads", 0, PL_OPT_INT, NULL, "query heads", 1, 65535, NULL},
    {"kv-heads", 0, PL_OPT_INT, NULL, "kv heads", 1, 65535, NULL},
    {"head-dim", 0, PL_OPT_INT, NULL, "head dimension d", 2, 512, NULL},
    {"pass", 0, PL_OPT_ENUM, "both", "fwd | fwdbwd | both", 0, 0, pass_names},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

static const pl_preset layer_presets[] = {
    {"cuda", "seq=4Ki:256Ki:x2 hidden=4096 ffn=14336 heads=32 kv-heads=8 "
             "head-dim=128"},
    {"cpu", "seq=256,512 hidden=64 ffn=128 heads=4 kv-heads=2 head-dim=16"},
    {NULL, NULL},
};

typedef struct layer_bench {
  pl_layer l;
  pl_layer_cfg cfg;
  int layer_ok; /* l initialized */
  uint64_t seqs[PL_OPT_LIST_MAX];
  int nseq, npass, pass0; /* passes: pass0, pass0 + 1, ... */
  /* the point */
  pl_dev *dev;
  pl_stream *s;
  void *x, *y, *dy, *dx;
  int64_t S, N;
  int bwd;
} layer_bench;

static pl_status run_once(void *arg) {
  layer_bench *b = arg;
  PL_TRY(pl_layer_forward(&b->l, b->s, b->x, b->y, b->N));
  if (!b->bwd)
    return PL_OK;
  return pl_layer_backward(&b->l, b->s, b->x, b->dy, b->dx, b->N);
}

static pl_status init(pl_bench_ctx *c, void *st) {
  layer_bench *b = st;
  b->nseq = pl_args_size_list(c->args, "seq", b->seqs, PL_OPT_LIST_MAX);
  int pass = pl_args_enum(c->args, "pass");
  b->npass = pass == 2 ? 2 : 1;
  b->pass0 = pass == 1;
  b->cfg = (pl_layer_cfg){.H = pl_args_int(c->args, "hidden"),
                          .I = pl_args_int(c->args, "ffn"),
                          .n_q = (int)pl_args_int(c->args, "heads"),
                          .n_kv = (int)pl_args_int(c->args, "kv-heads"),
                          .d = (int)pl_args_int(c->args, "head-dim"),
                          .rope_theta = 10000.0,
                          .dt = PL_BF16}; /* attention kernels: AUTO */
  c->npoints = b->nseq * b->npass;
  /* the layer's own checks (sizes, n_kv | n_q): a usage error now, not an
   * error row per point (views: nothing made); so are heads that do not
   * divide by the ranks, fixed for the whole run (every point would be
   * infeasible), while a context the ranks do not divide makes only its
   * own point infeasible (point) */
  pl_layer probe;
  PL_TRY(pl_layer_init_views(c->dev, NULL, &probe, &b->cfg, NULL, NULL));
  if (b->cfg.n_q % c->size || !pl_ulysses_heads_per_rank(b->cfg.n_kv, c->size))
    return pl_set_error(PL_EINVAL,
                        "--heads=%d --kv-heads=%d over %d ranks: --heads "
                        "must divide by the ranks, and --kv-heads by the "
                        "ranks or the ranks by --kv-heads (attention runs "
                        "head-sharded over D = the ranks)",
                        b->cfg.n_q, b->cfg.n_kv, c->size);
  return PL_OK;
}

static pl_status point(pl_bench_ctx *c, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  layer_bench *b = st;
  const pl_layer_cfg *g = &b->cfg;
  b->S = (int64_t)b->seqs[p / b->npass];
  b->bwd = b->pass0 + p % b->npass;
  snprintf(label, n, "S=%lld %s", (long long)b->S, b->bwd ? "fwd+bwd" : "fwd");
  pl_row_i64(row, "ranks", c->size);
  pl_row_i64(row, "seq", b->S);
  pl_row_i64(row, "hidden", g->H);
  pl_row_i64(row, "ffn", g->I);
  pl_row_i64(row, "n_q", g->n_q);
  pl_row_i64(row, "n_kv", g->n_kv);
  pl_row_i64(row, "d", g->d);
  pl_row_str(row, "pass", b->bwd ? "fwdbwd" : "fwd");
  if (b->S % c->size)
    return pl_set_error(PL_EINFEASIBLE,
                        "S not divisible by the number of ranks");
  b->N = b->S / c->size;
  pl_row_i64(row, "tokens", b->N);
  return PL_OK;
}

static pl_status setup(pl_bench_ctx *c, void *st, int p) {
  layer_bench *b = st;
  b->dev = c->dev;
  b->s = c->stream;
  if (!b->layer_ok) {
    PL_TRY(pl_layer_init(c->dev, c->size > 1 ? c->comm : NULL, &b->l, &b->cfg,
                         c->seed, 0));
    b->layer_ok = 1;
  }
  const size_t nh = (size_t)(b->N * b->cfg.H);
  const size_t bytes = nh * pl_dtype_size(b->cfg.dt);
  const uint64_t off = (uint64_t)c->rank * nh;
  PL_TRY(pl_alloc(c->dev, PL_ARENA_DEVICE, bytes, "boundary", &b->x));
  PL_TRY(pl_alloc(c->dev, PL_ARENA_DEVICE, bytes, "activations", &b->y));
  if (b->bwd) {
    PL_TRY(pl_alloc(c->dev, PL_ARENA_DEVICE, bytes, "activations", &b->dy));
    PL_TRY(pl_alloc(c->dev, PL_ARENA_DEVICE, bytes, "activations", &b->dx));
    PL_TRY(pl_rng_fill(b->s, b->dy, b->cfg.dt, nh, c->seed + 1, off,
                       PL_DIST_NORMAL, 0.f, 1.f));
  }
  return pl_rng_fill(b->s, b->x, b->cfg.dt, nh, c->seed, off, PL_DIST_NORMAL,
                     0.f, 1.f);
}

static pl_status finish(pl_bench_ctx *c, void *st, int p, pl_row *row,
                        pl_work *w) {
  layer_bench *b = st;
  const pl_layer_cfg *g = &b->cfg;
  const double gemm = 2.0 * b->N * g->H *
                      ((double)(g->n_q + 2 * g->n_kv) * g->d +
                       (double)g->n_q * g->d + 3.0 * g->I);
  pl_attn_shape ash = {.batch = 1,
                       .seq = b->S,
                       .n_q = g->n_q / c->size,
                       .n_kv = g->n_kv / c->size,
                       .head_dim = g->d};
  const double attn = pl_attn_flops_fwd(&ash);
  w->flops = b->bwd ? 3.0 * gemm + attn + pl_attn_flops_bwd(&ash) : gemm + attn;
  pl_row_f64(row, "flops", w->flops);
  return PL_OK;
}

static void teardown(pl_bench_ctx *c, void *st, int p) {
  layer_bench *b = st;
  void **ps[] = {&b->x, &b->y, &b->dy, &b->dx};
  for (int i = 0; i < 4; i++) {
    pl_free(c->dev, *ps[i]);
    *ps[i] = NULL;
  }
}

static void fini(pl_bench_ctx *c, void *st) {
  layer_bench *b = st;
  if (b->layer_ok)
    pl_layer_free(&b->l);
}

const pl_bench pl_bench_layer = {
    .name = "layer",
    .summary = "decoder layer (attention with Ulysses over all ranks + dense "
               "MLP) fwd, fwd+bwd vs S",
    .opts = layer_opts,
    .presets = layer_presets,
    .preset_cpu = "cpu",
    .preset_cuda = "cuda",
    .columns = "ranks\tseq\ttokens\thidden\tffn\tn_q\tn_kv\td\tpass\ttime_ms\t"
               "time_p10_ms\ttime_p90_ms\ttflops\tflops\tdev_peak_bytes\t"
               "attention_bytes",
    .tags = (const char *const[]){"attention", NULL},
    .state = sizeof(layer_bench),
    .init = init,
    .point = point,
    .setup = setup,
    .run = run_once,
    .finish = finish,
    .teardown = teardown,
    .fini = fini,
};
