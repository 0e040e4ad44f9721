/* bench_attention.c — `plateau bench attention`: causal GQA flash attention,
 * forward and forward+backward, over a sequence-length sweep.
 *
 * One row per (S, pass): median time over -n iterations (after -w warm-ups),
 * p10/p90, TFLOP/s counted with the causal formula
 *     fwd = 4·S²·d·n_q/2 per sequence,  bwd = 2.5·fwd,  fwd+bwd = 3.5·fwd
 * (the usual FlashAttention count: QK^T and PV in forward; in backward the
 * recomputed QK^T plus dV, dP, dQ, dK — 5 GEMMs against 2), and the tracked
 * device peak (inputs, outputs and the attention workspace) with the
 * workspace's own peak under tag "attention": memory linear in S.
 *
 * --check compares the fast kernel with the reference on the same inputs at
 * the first point of the sweep if it is small enough: on CUDA the MMA kernels
 * against the SIMPLE ones (S <= 16Ki), on the CPU against the double naive
 * reference (S <= 1Ki).  Beyond --bwd-max only the forward pass runs (1M
 * tokens with 64 query heads would need ~150 GB for dQ accumulation).
 *
 * With D > 1 ranks the run is Ulysses-sharded (model/ulysses.h): each rank
 * holds S/D tokens of all heads, all-to-alls them to S tokens of n_q/D heads,
 * and the row's time includes the all-to-alls; FLOPs are per rank
 * (4·S²·d·(n_q/D)/2 forward).  Forward rows with D > 1 also time one
 * all-to-all of Q alone (a2a_ms) and its rate a2a_gbps = bytes leaving each
 * rank ((D−1)/D of its Q) / time, to set against `plateau bench calib`'s
 * all-to-all bandwidth (target ≥ 70%). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "model/attention.h"
#include "model/attention_testutil.h"
#include "model/ulysses.h"

static const char *const algo_names[] = {"auto", "simple", "mma", "wgmma", NULL};
static const char *const pass_names[] = {"fwd", "fwdbwd", "both", NULL};

static const pl_opt attn_opts[] = {
    {"seq", 0, PL_OPT_SIZE_LIST, NULL,
     "sequence lengths S (default: 4Ki:1Mi:x2 on CUDA, 128,256,512 on the CPU)", 1, 1 << 30, NULL},
    {"batch", 0, PL_OPT_INT, "1", "sequences per call B", 1, 65535, NULL},
    {"heads", 0, PL_OPT_INT, NULL, "query heads n_q (default 64 on CUDA, 4 on the CPU)", 1, 65535,
     NULL},
    {"kv-heads", 0, PL_OPT_INT, NULL, "key/value heads n_kv (default 8 on CUDA, 2 on the CPU)",
     1, 65535, NULL},
    {"head-dim", 0, PL_OPT_INT, NULL, "head dimension d (default 128 on CUDA, 64 on the CPU)", 1,
     512, NULL},
    {"algo", 0, PL_OPT_ENUM, "auto", "kernel: auto | simple | mma | wgmma (CUDA; auto: the wgmma kernels for d = 128 on an sm_90a build, else mma; wgmma: refuse other shapes)", 0, 0, algo_names},
    {"pass", 0, PL_OPT_ENUM, "both", "fwd | fwdbwd | both", 0, 0, pass_names},
    {"bwd-max", 0, PL_OPT_SIZE, "512Ki", "largest S that also runs forward+backward", 1, 1 << 30,
     NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

#define COLS                                                                                  \
  "backend\tranks\tbatch\tseq\tn_q\tn_kv\td\talgo\tpass\tms\tms_p10\tms_p90\ttflops\tflops\tpeak_gib" \
  "\tattn_ws_gib\ta2a_ms\ta2a_gbps\tmax_err"

typedef struct attn_run {
  pl_attn_shape sh; /* this rank's: seq = S/D tokens, all heads */
  pl_comm *sp;      /* Ulysses group (the run's ranks) when D > 1, else NULL */
  pl_stream *s;
  void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float *lse;
  int bwd;
  uint64_t off; /* first token of this rank × d: the RNG offset of its shard */
} attn_run;

static pl_status run_once(void *arg) {
  attn_run *r = arg;
  if (r->sp) {
    PL_TRY(pl_ulysses_attn_fwd(r->sp, r->s, &r->sh, r->q, r->k, r->v, r->o, r->lse));
    if (r->bwd)
      PL_TRY(pl_ulysses_attn_bwd(r->sp, r->s, &r->sh, r->q, r->k, r->v, r->o, r->dout, r->lse,
                                 r->dq, r->dk, r->dv));
    return PL_OK;
  }
  PL_TRY(pl_attn_fwd(r->s, &r->sh, r->q, r->k, r->v, r->o, r->lse));
  if (r->bwd)
    PL_TRY(pl_attn_bwd(r->s, &r->sh, r->q, r->k, r->v, r->o, r->dout, r->lse, r->dq, r->dk,
                       r->dv));
  return PL_OK;
}

/* one Ulysses all-to-all of Q (sequence -> head sharded), for D > 1 rows */
typedef struct a2a_run {
  attn_run *r;
  void *dst;
} a2a_run;

static pl_status a2a_once(void *arg) {
  a2a_run *a = arg;
  return pl_ulysses_seq_to_head(a->r->sp, a->r->s, a->r->q, a->dst, a->r->sh.seq, a->r->sh.n_q,
                                a->r->sh.head_dim, a->r->sh.dtype);
}

static void free_run(pl_dev *dev, attn_run *r) {
  void *ps[] = {r->q, r->k, r->v, r->o, r->dout, r->dq, r->dk, r->dv, r->lse};
  for (int i = 0; i < 9; i++) pl_free(dev, ps[i]);
  r->q = r->k = r->v = r->o = r->dout = r->dq = r->dk = r->dv = NULL;
  r->lse = NULL;
}

static pl_status alloc_run(pl_dev *dev, attn_run *r, int with_grads) {
  const size_t es = pl_dtype_size(r->sh.dtype);
  const size_t nqe = (size_t)(r->sh.batch * r->sh.seq * r->sh.n_q * r->sh.head_dim);
  const size_t nke = (size_t)(r->sh.batch * r->sh.seq * r->sh.n_kv * r->sh.head_dim);
  const size_t nr = (size_t)(r->sh.batch * r->sh.n_q * r->sh.seq);
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nqe * es, "act", &r->q));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nke * es, "act", &r->k));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nke * es, "act", &r->v));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nqe * es, "act", &r->o));
  void *lp = NULL;
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nr * sizeof(float), "act", &lp));
  r->lse = lp;
  if (with_grads) {
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nqe * es, "act", &r->dout));
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nqe * es, "grads", &r->dq));
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nke * es, "grads", &r->dk));
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nke * es, "grads", &r->dv));
  }
  /* never zeros: N(0,1) inputs */
  PL_TRY(pl_rng_fill(r->s, r->q, r->sh.dtype, nqe, 11, r->off * r->sh.n_q, PL_DIST_NORMAL, 0.f, 1.f));
  PL_TRY(pl_rng_fill(r->s, r->k, r->sh.dtype, nke, 12, r->off * r->sh.n_kv, PL_DIST_NORMAL, 0.f, 1.f));
  PL_TRY(pl_rng_fill(r->s, r->v, r->sh.dtype, nke, 13, r->off * r->sh.n_kv, PL_DIST_NORMAL, 0.f, 1.f));
  if (with_grads)
    PL_TRY(pl_rng_fill(r->s, r->dout, r->sh.dtype, nqe, 14, r->off * r->sh.n_q, PL_DIST_NORMAL, 0.f, 1.f));
  return pl_stream_sync(r->s);
}

/* Copy `bytes` of device memory into a new malloc'd host buffer (or NULL). */
static void *to_host(pl_stream *s, const void *src, size_t bytes) {
  void *h = malloc(bytes ? bytes : 1);
  if (!h) return NULL;
  if (pl_memcpy_async(s, h, src, bytes) != PL_OK || pl_stream_sync(s) != PL_OK) {
    free(h);
    return NULL;
  }
  return h;
}

/* Max normwise error of the fast kernel against the reference on r's inputs
 * (forward O; and dQ, dK, dV when r->bwd), or NaN when not checked. */
static double check_run(pl_bench_ctx *ctx, attn_run *r) {
  const pl_attn_shape *sh = &r->sh;
  const size_t nqe = (size_t)(sh->batch * sh->seq * sh->n_q * sh->head_dim);
  const size_t nke = (size_t)(sh->batch * sh->seq * sh->n_kv * sh->head_dim);
  const size_t es = pl_dtype_size(sh->dtype);
  double err = 0;
  if (pl_stream_backend(r->s) == PL_BACKEND_CUDA) {
    if (sh->seq > 16384 || sh->algo == PL_ATTN_SIMPLE) return NAN;
    attn_run ref = *r;
    ref.sh.algo = PL_ATTN_SIMPLE;
    ref.q = ref.k = ref.v = ref.o = ref.dout = ref.dq = ref.dk = ref.dv = NULL;
    ref.lse = NULL;
    pl_dev *dev = ctx->dev;
    if (alloc_run(dev, &ref, r->bwd) != PL_OK || run_once(r) != PL_OK ||
        run_once(&ref) != PL_OK || pl_stream_sync(r->s) != PL_OK) {
      free_run(dev, &ref);
      return NAN;
    }
    const void *got[4] = {r->o, r->dq, r->dk, r->dv}, *want[4] = {ref.o, ref.dq, ref.dk, ref.dv};
    const size_t n[4] = {nqe, nqe, nke, nke};
    for (int i = 0; i < (r->bwd ? 4 : 1); i++) {
      void *hg = to_host(r->s, got[i], n[i] * es), *hw = to_host(r->s, want[i], n[i] * es);
      double *wd = hw ? tu_to_f64(hw, sh->dtype, n[i]) : NULL;
      if (!hg || !wd) err = NAN;
      else err = fmax(err, tu_compare(hg, sh->dtype, wd, n[i], 1).norm_err);
      free(hg);
      free(hw);
      free(wd);
    }
    free_run(dev, &ref);
    return err;
  }
  if (sh->seq > 1024) return NAN;
  PL_ASSERT(run_once(r) == PL_OK);
  double *qd = tu_to_f64(r->q, sh->dtype, nqe), *kd = tu_to_f64(r->k, sh->dtype, nke);
  double *vd = tu_to_f64(r->v, sh->dtype, nke);
  double *od = malloc(sizeof(double) * nqe), *dq = NULL, *dk = NULL, *dv = NULL;
  pl_attn_ref_fwd_f64(sh, qd, kd, vd, od, NULL);
  err = tu_compare(r->o, sh->dtype, od, nqe, 1).norm_err;
  if (r->bwd) {
    double *dod = tu_to_f64(r->dout, sh->dtype, nqe);
    dq = malloc(sizeof(double) * nqe);
    dk = malloc(sizeof(double) * nke);
    dv = malloc(sizeof(double) * nke);
    pl_attn_ref_bwd_f64(sh, qd, kd, vd, dod, dq, dk, dv);
    err = fmax(err, tu_compare(r->dq, sh->dtype, dq, nqe, 1).norm_err);
    err = fmax(err, tu_compare(r->dk, sh->dtype, dk, nke, 1).norm_err);
    err = fmax(err, tu_compare(r->dv, sh->dtype, dv, nke, 1).norm_err);
    free(dod);
  }
  free(qd);
  free(kd);
  free(vd);
  free(od);
  free(dq);
  free(dk);
  free(dv);
  return err;
}

static pl_status bench_attention_run(pl_bench_ctx *ctx, void *state) {
  (void)state;
  const int cuda = pl_dev_backend(ctx->dev) == PL_BACKEND_CUDA;
  uint64_t seqs[PL_OPT_LIST_MAX];
  int nseq;
  if (pl_args_given(ctx->args, "seq")) {
    nseq = pl_args_size_list(ctx->args, "seq", seqs, PL_OPT_LIST_MAX);
  } else if (cuda) {
    nseq = 0;
    for (uint64_t s = 4096; s <= (1u << 20); s *= 2) seqs[nseq++] = s;
  } else {
    seqs[0] = 128;
    seqs[1] = 256;
    seqs[2] = 512;
    nseq = 3;
  }
  const int nq = pl_args_given(ctx->args, "heads") ? (int)pl_args_int(ctx->args, "heads")
                                                   : (cuda ? 64 : 4);
  const int nkv = pl_args_given(ctx->args, "kv-heads") ? (int)pl_args_int(ctx->args, "kv-heads")
                                                       : (cuda ? 8 : 2);
  const int d = pl_args_given(ctx->args, "head-dim") ? (int)pl_args_int(ctx->args, "head-dim")
                                                     : (cuda ? 128 : 64);
  const int pass = pl_args_enum(ctx->args, "pass");
  const uint64_t bwd_max = pl_args_size(ctx->args, "bwd-max");
  pl_attn_shape base = {.batch = pl_args_int(ctx->args, "batch"), .n_q = nq, .n_kv = nkv,
                        .head_dim = d, .dtype = PL_BF16,
                        .algo = (pl_attn_algo)pl_args_enum(ctx->args, "algo")};
  base.seq = 1;
  pl_status cs = pl_attn_check(&base, pl_dev_backend(ctx->dev));
  if (cs != PL_OK) return cs; /* bad shape: usage error, nothing measured */
  ctx->npoints = nseq * (pass == 2 ? 2 : 1);
  ctx->point = 0;
  pl_stream *s = pl_dev_stream(ctx->dev);
  for (int i = 0; i < nseq; i++) {
    for (int pb = 0; pb < 2; pb++) {
      if ((pass == 0 && pb == 1) || (pass == 1 && pb == 0)) continue;
      attn_run r;
      memset(&r, 0, sizeof r);
      const int D = ctx->size;
      r.sh = base;
      r.sh.seq = (int64_t)seqs[i] / D;
      r.s = s;
      r.bwd = pb;
      r.sp = D > 1 ? ctx->comm : NULL;
      r.off = (uint64_t)ctx->rank * (uint64_t)r.sh.seq * (uint64_t)d;
      pl_attn_shape whole = base; /* the FLOPs of this rank: S tokens, n_q/D heads */
      whole.seq = (int64_t)seqs[i];
      whole.n_q = nq / D;
      char label[96];
      snprintf(label, sizeof label, "S=%llu %s", (unsigned long long)seqs[i],
               pb ? "fwd+bwd" : "fwd");
      pl_bench_progress(ctx, label);
      pl_row *row = pl_row_new(ctx);
      pl_row_str(row, "backend", pl_backend_name(pl_dev_backend(ctx->dev)));
      pl_row_i64(row, "batch", r.sh.batch);
      pl_row_i64(row, "ranks", D);
      pl_row_i64(row, "seq", (int64_t)seqs[i]);
      pl_row_i64(row, "n_q", nq);
      pl_row_i64(row, "n_kv", nkv);
      pl_row_i64(row, "d", d);
      pl_row_str(row, "algo", algo_names[r.sh.algo]);
      pl_row_str(row, "pass", pb ? "fwdbwd" : "fwd");
      const double flops = pl_attn_flops_fwd(&whole) + (pb ? pl_attn_flops_bwd(&whole) : 0);
      pl_row_f64(row, "flops", flops);
      if (seqs[i] % (uint64_t)D || nq % D || nkv % D) {
        pl_row_status(row, "infeasible", "S, n_q and n_kv must divide by the number of ranks D");
        PL_TRY(pl_row_emit(row));
        continue;
      }
      if (pb && seqs[i] > bwd_max) {
        pl_row_status(row, "infeasible", "S > --bwd-max: forward only at this length");
        PL_TRY(pl_row_emit(row));
        continue;
      }
      pl_status st = alloc_run(ctx->dev, &r, pb);
      if (st == PL_OK) {
        double err = ctx->check && i == 0 && D == 1 ? check_run(ctx, &r) : NAN;
        if (!isnan(err)) {
          pl_row_f64(row, "max_err", err);
          pl_row_check(row, err <= (pb ? 4e-2 : 2.5e-2) ? "pass" : "fail");
        }
        pl_mem_reset_peak(ctx->dev, PL_ARENA_DEVICE);
        pl_stats t;
        st = pl_bench_time(ctx, run_once, &r, s, &t);
        if (st == PL_OK) {
          pl_mem_stats ms;
          pl_mem_stats_get(ctx->dev, PL_ARENA_DEVICE, &ms);
          pl_row_f64(row, "ms", t.median);
          pl_row_f64(row, "ms_p10", t.p10);
          pl_row_f64(row, "ms_p90", t.p90);
          pl_row_f64(row, "tflops", flops / (t.median * 1e-3) * 1e-12);
          pl_row_f64(row, "peak_gib", (double)ms.peak / (1u << 30));
          pl_row_f64(row, "attn_ws_gib",
                     (double)pl_mem_tag_peak(ctx->dev, PL_ARENA_DEVICE, "attention") / (1u << 30));
        }
        if (st == PL_OK && r.sp && !pb) {
          /* the all-to-all alone: bytes leaving each rank, (D-1)/D of its Q */
          const size_t qb = (size_t)r.sh.seq * (size_t)nq * (size_t)d * 2;
          a2a_run a = {.r = &r, .dst = NULL};
          st = pl_alloc(ctx->dev, PL_ARENA_DEVICE, qb, "attention", &a.dst);
          pl_stats ta;
          if (st == PL_OK) st = pl_bench_time(ctx, a2a_once, &a, s, &ta);
          if (st == PL_OK) {
            pl_row_f64(row, "a2a_ms", ta.median);
            pl_row_f64(row, "a2a_gbps", (double)qb * (D - 1) / D / (ta.median * 1e-3) * 1e-9);
          }
          pl_free(ctx->dev, a.dst);
        }
      }
      if (st == PL_OK) { /* which forward kernel ran (AUTO resolves per build) */
        char note[128];
        if (pb)
          snprintf(note, sizeof note, "fwd kernel %s, bwd kernel %s",
                   pl_attn_fwd_kernel(s, &r.sh), pl_attn_bwd_kernel(s, &r.sh));
        else
          snprintf(note, sizeof note, "fwd kernel %s", pl_attn_fwd_kernel(s, &r.sh));
        pl_row_status(row, "ok", note);
      } else {
        pl_row_status_from(row, st);
      }
      free_run(ctx->dev, &r);
      PL_TRY(pl_row_emit(row));
    }
  }
  return PL_OK;
}

const pl_bench pl_bench_attention = {
    .name = "attention",
    .summary = "causal GQA flash attention fwd and fwd+bwd TFLOP/s and peak memory vs S",
    .opts = attn_opts,
    .columns = COLS,
    .main = bench_attention_run,
};
