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
 * the timed iterations (weights, grads, the boundary x, activations, the
 * attention workspace and Ulysses buffers). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "model/layer.h"

static const char *const pass_names[] = {"fwd", "fwdbwd", "both", NULL};

static const pl_opt layer_opts[] = {
    {"seq", 0, PL_OPT_SIZE_LIST, NULL,
     "whole-sequence lengths S (default 4Ki:256Ki:x2 on CUDA, 256,512 on the CPU)", 1, 1 << 30,
     NULL},
    {"hidden", 0, PL_OPT_INT, NULL, "H (default 4096 on CUDA, 64 on the CPU)", 1, 1 << 20, NULL},
    {"ffn", 0, PL_OPT_INT, NULL, "dense FFN width I (default 14336 on CUDA, 128 on the CPU)", 1,
     1 << 22, NULL},
    {"heads", 0, PL_OPT_INT, NULL, "query heads (default 32 on CUDA, 4 on the CPU)", 1, 65535, NULL},
    {"kv-heads", 0, PL_OPT_INT, NULL, "kv heads (default 8 on CUDA, 2 on the CPU)", 1, 65535, NULL},
    {"head-dim", 0, PL_OPT_INT, NULL, "d (default 128 on CUDA, 16 on the CPU)", 2, 512, NULL},
    {"pass", 0, PL_OPT_ENUM, "both", "fwd | fwdbwd | both", 0, 0, pass_names},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

#define COLS                                                                                    \
  "backend\tranks\tseq\ttokens_per_rank\tH\tI\tn_q\tn_kv\td\tpass\tms\tms_p10\tms_p90\ttflops" \
  "\tflops\tpeak_gib\tattn_gib"

typedef struct layer_run {
  pl_layer *l;
  pl_stream *s;
  void *x, *y, *dy, *dx;
  int64_t N;
  int bwd;
} layer_run;

static pl_status run_once(void *arg) {
  layer_run *r = arg;
  if (!r->bwd) return pl_layer_forward(r->l, r->s, r->x, r->y, r->N);
  PL_TRY(pl_layer_forward(r->l, r->s, r->x, r->y, r->N));
  return pl_layer_backward(r->l, r->s, r->x, r->dy, r->dx, r->N);
}

static int64_t opt_or(pl_args *a, const char *name, int64_t cuda_v, int64_t cpu_v, int cuda) {
  return pl_args_given(a, name) ? pl_args_int(a, name) : (cuda ? cuda_v : cpu_v);
}

static pl_status bench_layer_run(pl_bench_ctx *ctx, void *state) {
  (void)state;
  const int cuda = pl_dev_backend(ctx->dev) == PL_BACKEND_CUDA;
  uint64_t seqs[PL_OPT_LIST_MAX];
  int nseq = 0;
  if (pl_args_given(ctx->args, "seq"))
    nseq = pl_args_size_list(ctx->args, "seq", seqs, PL_OPT_LIST_MAX);
  else if (cuda)
    for (uint64_t s = 4096; s <= (256u << 10); s *= 2) seqs[nseq++] = s;
  else
    seqs[nseq++] = 256, seqs[nseq++] = 512;
  pl_layer_cfg cfg = {.H = opt_or(ctx->args, "hidden", 4096, 64, cuda),
                      .I = opt_or(ctx->args, "ffn", 14336, 128, cuda),
                      .n_q = (int)opt_or(ctx->args, "heads", 32, 4, cuda),
                      .n_kv = (int)opt_or(ctx->args, "kv-heads", 8, 2, cuda),
                      .d = (int)opt_or(ctx->args, "head-dim", 128, 16, cuda),
                      .rope_theta = 10000.0,
                      .dt = PL_BF16,
                      .algo = PL_ATTN_AUTO};
  const int pass = pl_args_enum(ctx->args, "pass");
  const int D = ctx->size;
  pl_layer l;
  PL_TRY(pl_layer_init(ctx->dev, D > 1 ? ctx->comm : NULL, &l, &cfg, ctx->seed, 0));
  pl_stream *s = pl_dev_stream(ctx->dev);
  const size_t es = pl_dtype_size(cfg.dt);
  ctx->npoints = nseq * (pass == 2 ? 2 : 1);
  ctx->point = 0;
  pl_status ret = PL_OK;
  for (int i = 0; i < nseq && ret == PL_OK; i++)
    for (int pb = 0; pb < 2 && ret == PL_OK; pb++) {
      if ((pass == 0 && pb) || (pass == 1 && !pb)) continue;
      const int64_t S = (int64_t)seqs[i];
      char label[64];
      snprintf(label, sizeof label, "S=%lld %s", (long long)S, pb ? "fwd+bwd" : "fwd");
      pl_bench_progress(ctx, label);
      pl_row *row = pl_row_new(ctx);
      pl_row_str(row, "backend", pl_backend_name(pl_dev_backend(ctx->dev)));
      pl_row_i64(row, "ranks", D);
      pl_row_i64(row, "seq", S);
      pl_row_i64(row, "H", cfg.H);
      pl_row_i64(row, "I", cfg.I);
      pl_row_i64(row, "n_q", cfg.n_q);
      pl_row_i64(row, "n_kv", cfg.n_kv);
      pl_row_i64(row, "d", cfg.d);
      pl_row_str(row, "pass", pb ? "fwdbwd" : "fwd");
      if (S % D) {
        pl_row_status(row, "infeasible", "S not divisible by the number of ranks");
        ret = pl_row_emit(row);
        continue;
      }
      const int64_t N = S / D;
      pl_row_i64(row, "tokens_per_rank", N);
      const double gemm = 2.0 * N * cfg.H *
                          ((double)(cfg.n_q + 2 * cfg.n_kv) * cfg.d + (double)cfg.n_q * cfg.d +
                           3.0 * cfg.I);
      pl_attn_shape ash = {.batch = 1, .seq = S, .n_q = cfg.n_q / D, .n_kv = cfg.n_kv / D,
                           .head_dim = cfg.d};
      const double attn = pl_attn_flops_fwd(&ash);
      const double flops = pb ? 3.0 * gemm + attn + pl_attn_flops_bwd(&ash) : gemm + attn;
      pl_row_f64(row, "flops", flops);
      layer_run r = {.l = &l, .s = s, .N = N, .bwd = pb};
      pl_dev *dev = ctx->dev;
      const size_t bytes = (size_t)(N * cfg.H) * es;
      pl_status st = pl_alloc(dev, PL_ARENA_DEVICE, bytes, "boundary", &r.x);
      if (st == PL_OK) st = pl_alloc(dev, PL_ARENA_DEVICE, bytes, "activations", &r.y);
      if (st == PL_OK && pb) st = pl_alloc(dev, PL_ARENA_DEVICE, bytes, "activations", &r.dy);
      if (st == PL_OK && pb) st = pl_alloc(dev, PL_ARENA_DEVICE, bytes, "activations", &r.dx);
      if (st == PL_OK)
        st = pl_rng_fill(s, r.x, cfg.dt, (size_t)(N * cfg.H), ctx->seed, (uint64_t)ctx->rank * N * cfg.H,
                         PL_DIST_NORMAL, 0.f, 1.f);
      if (st == PL_OK && pb)
        st = pl_rng_fill(s, r.dy, cfg.dt, (size_t)(N * cfg.H), ctx->seed + 1,
                         (uint64_t)ctx->rank * N * cfg.H, PL_DIST_NORMAL, 0.f, 1.f);
      if (st == PL_OK) {
        pl_mem_reset_peak(dev, PL_ARENA_DEVICE);
        pl_stats t;
        st = pl_bench_time(ctx, run_once, &r, s, &t);
        if (st == PL_OK) {
          pl_mem_stats ms;
          pl_mem_stats_get(dev, PL_ARENA_DEVICE, &ms);
          pl_row_f64(row, "ms", t.median);
          pl_row_f64(row, "ms_p10", t.p10);
          pl_row_f64(row, "ms_p90", t.p90);
          pl_row_f64(row, "tflops", flops / (t.median * 1e-3) * 1e-12);
          pl_row_f64(row, "peak_gib", (double)ms.peak / (1u << 30));
          pl_row_f64(row, "attn_gib",
                     (double)pl_mem_tag_peak(dev, PL_ARENA_DEVICE, "attention") / (1u << 30));
        }
      }
      pl_row_status_from(row, st);
      pl_free(dev, r.x);
      pl_free(dev, r.y);
      pl_free(dev, r.dy);
      pl_free(dev, r.dx);
      ret = pl_row_emit(row);
    }
  pl_layer_free(&l);
  return ret;
}

const pl_bench pl_bench_layer = {
    .name = "layer",
    .summary = "decoder layer (attention with Ulysses over all ranks + dense MLP) fwd, fwd+bwd vs S",
    .opts = layer_opts,
    .columns = COLS,
    .main = bench_layer_run,
};
