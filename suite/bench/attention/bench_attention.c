/* bench_attention.c — `plateau bench attention`: GQA flash attention, causal
 * or with the full mask (--mask full: ring attention's off-diagonal blocks,
 * the rate the planner's ring-attention model takes for them), forward and
 * forward+backward, over a sequence-length sweep.
 *
 * One row per (S, pass): the timed unit is one forward (or forward +
 * backward); FLOPs counted with the causal formula
 *     fwd = 4·S²·d·n_q/2 per sequence,  bwd = 2.5·fwd,  fwd+bwd = 3.5·fwd
 * (the usual FlashAttention count: QK^T and PV in forward; in backward the
 * recomputed QK^T plus dV, dP, dQ, dK — 5 GEMMs against 2; the full mask
 * computes every score: fwd = 4·S²·d·n_q, the row's `mask` full); the tracked
 * device peak (inputs, outputs and the attention workspace) with the
 * workspace's own peak (tag "attention"): memory linear in S; `kernel` the
 * kernels that ran (AUTO resolves per build and shape).
 *
 * --fwd-kernel and --bwd-kernel choose the CUDA kernels (pl_attn_kernels;
 * auto by default); a row's `variant` is what was asked ("fwd/bwd").
 *
 * --check compares the kernel with a reference at the first S of the sweep
 * if it is small enough: on CUDA against the SIMPLE kernels (S <= 16Ki), on
 * the CPU against the double naive reference (S <= 1Ki).  Beyond --bwd-max
 * only the forward pass runs (1M tokens with 64 query heads would need
 * ~150 GB for dQ accumulation).
 *
 * With D > 1 ranks the run is Ulysses-sharded (model/ulysses.h): each rank
 * holds S/D tokens of all heads, all-to-alls them to S tokens of n_q/D heads,
 * and the row's time includes the all-to-alls; FLOPs are per rank
 * (4·S²·d·(n_q/D)/2 forward).  Forward rows with D > 1 also time one
 * all-to-all of Q alone (a2a_ms) and its rate a2a_gbs = bytes leaving each
 * rank ((D−1)/D of its Q) / time, to set against `plateau bench calib`'s
 * all-to-all bandwidth. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/bench.h"
#include "model/attention.h"
#include "model/ulysses.h"
#include "plateau/host_device.h"

typedef struct attn_run {
  pl_attn_shape sh; /* this rank's: seq = S/D tokens, all heads */
  pl_comm *sp;      /* Ulysses group (the run's ranks) when D > 1, else NULL */
  pl_stream *s;
  void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
  float *lse;
  int bwd;
  uint64_t off; /* first token of this rank × d: the RNG offset of its shard */
} attn_run;

/* ---- the run of a point -------------------------------------------------
 * Its tensors, one forward (+ backward), plain or Ulysses-sharded, and the
 * check of the kernels against the SIMPLE kernels (CUDA) or the double naive
 * reference (CPU). */

/* One forward, and with r->bwd the backward (Ulysses over r->sp when set). */
static pl_status attn_fwd_bwd(void *arg) {
  attn_run *r = arg;
  if (r->sp) {
    PL_TRY(pl_ulysses_attn_fwd(r->sp, r->s, &r->sh, r->q, r->k, r->v, r->o,
                               r->lse));
    if (r->bwd)
      PL_TRY(pl_ulysses_attn_bwd(r->sp, r->s, &r->sh, r->q, r->k, r->v, r->o,
                                 r->dout, r->lse, r->dq, r->dk, r->dv));
    return PL_OK;
  }
  PL_TRY(pl_attn_fwd(r->s, &r->sh, r->q, r->k, r->v, r->o, r->lse));
  if (r->bwd)
    PL_TRY(pl_attn_bwd(r->s, &r->sh, r->q, r->k, r->v, r->o, r->dout, r->lse,
                       r->dq, r->dk, r->dv));
  return PL_OK;
}

/* Free the point's tensors. */
static void attn_free(pl_dev *dev, attn_run *r) {
  void *ps[] = {r->q, r->k, r->v, r->o, r->dout, r->dq, r->dk, r->dv, r->lse};
  for (int i = 0; i < 9; i++)
    pl_free(dev, ps[i]);
  r->q = r->k = r->v = r->o = r->dout = r->dq = r->dk = r->dv = NULL;
  r->lse = NULL;
}

static size_t nq_elems(const pl_attn_shape *sh) {
  return (size_t)(sh->batch * sh->seq * sh->n_q * sh->head_dim);
}
static size_t nkv_elems(const pl_attn_shape *sh) {
  return (size_t)(sh->batch * sh->seq * sh->n_kv * sh->head_dim);
}

/* The point's tensors, N(0,1) inputs at the rank's offset; the gradients and
 * dout with with_grads. */
static pl_status attn_alloc(pl_dev *dev, attn_run *r, int with_grads) {
  const size_t es = pl_dtype_size(r->sh.dtype);
  const size_t nqe = nq_elems(&r->sh), nke = nkv_elems(&r->sh);
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
  const pl_dtype dt = r->sh.dtype;
  PL_TRY(pl_rng_fill(r->s, r->q, dt, nqe, 11, r->off * r->sh.n_q,
                     PL_DIST_NORMAL, 0.f, 1.f));
  PL_TRY(pl_rng_fill(r->s, r->k, dt, nke, 12, r->off * r->sh.n_kv,
                     PL_DIST_NORMAL, 0.f, 1.f));
  PL_TRY(pl_rng_fill(r->s, r->v, dt, nke, 13, r->off * r->sh.n_kv,
                     PL_DIST_NORMAL, 0.f, 1.f));
  if (with_grads)
    PL_TRY(pl_rng_fill(r->s, r->dout, dt, nqe, 14, r->off * r->sh.n_q,
                       PL_DIST_NORMAL, 0.f, 1.f));
  return pl_stream_sync(r->s);
}

/* n values of a host array of dtype dt (bf16 or f32) as double, for the
 * double naive reference */
static double *to_f64(const void *p, pl_dtype dt, size_t n) {
  double *r = malloc(sizeof(double) * (n ? n : 1));
  for (size_t i = 0; r && i < n; i++)
    r[i] = dt == PL_F32    ? ((const float *)p)[i]
           : dt == PL_BF16 ? pl_bf16_to_f32(((const pl_bf16 *)p)[i])
                           : ((const double *)p)[i];
  return r;
}

/* The kernel's O (and dQ, dK, dV) after one more run, against the SIMPLE
 * kernels (CUDA) or the double reference (CPU).  Reduction length: S keys per
 * query. */
static pl_status attn_check(pl_bench_ctx *c, attn_run *r, pl_check *chk) {
  const pl_attn_shape *sh = &r->sh;
  const size_t n[4] = {nq_elems(sh), nq_elems(sh), nkv_elems(sh),
                       nkv_elems(sh)};
  const char *what[4] = {"O", "dQ", "dK", "dV"};
  const void *got[4] = {r->o, r->dq, r->dk, r->dv};
  const int nout = r->bwd ? 4 : 1;
  if (c->cuda) {
    if (sh->seq > 16384 || (sh->kernels.fwd == PL_ATTN_FWD_SIMPLE &&
                            (!r->bwd || sh->kernels.bwd == PL_ATTN_BWD_SIMPLE)))
      return PL_OK;
    attn_run ref = *r;
    ref.sh.kernels = (pl_attn_kernels){PL_ATTN_FWD_SIMPLE, PL_ATTN_BWD_SIMPLE};
    ref.q = ref.k = ref.v = ref.o = ref.dout = ref.dq = ref.dk = ref.dv = NULL;
    ref.lse = NULL;
    pl_status s = PL_OK;
    PL_TRY_GOTO(s, done, attn_alloc(c->dev, &ref, r->bwd));
    PL_TRY_GOTO(s, done, attn_fwd_bwd(r));
    PL_TRY_GOTO(s, done, attn_fwd_bwd(&ref));
    const void *want[4] = {ref.o, ref.dq, ref.dk, ref.dv};
    for (int i = 0; i < nout; i++)
      PL_TRY_GOTO(s, done,
                  pl_check_device(chk, r->s, what[i], got[i], want[i],
                                  sh->dtype, n[i], sh->seq));
  done:
    attn_free(c->dev, &ref);
    return s;
  }
  if (sh->seq > 1024)
    return PL_OK;
  PL_TRY(attn_fwd_bwd(r));
  double *qd = to_f64(r->q, sh->dtype, n[0]);
  double *kd = to_f64(r->k, sh->dtype, n[2]);
  double *vd = to_f64(r->v, sh->dtype, n[2]);
  double *want[4] = {malloc(sizeof(double) * n[0]), NULL, NULL, NULL};
  pl_attn_ref_fwd_f64(sh, qd, kd, vd, want[0], NULL);
  if (r->bwd) {
    double *dod = to_f64(r->dout, sh->dtype, n[0]);
    for (int i = 1; i < 4; i++)
      want[i] = malloc(sizeof(double) * n[i]);
    pl_attn_ref_bwd_f64(sh, qd, kd, vd, dod, want[1], want[2], want[3]);
    free(dod);
  }
  for (int i = 0; i < nout; i++)
    pl_check_arrays(chk, what[i], got[i], pl_elem_of(sh->dtype), want[i],
                    PL_ELEM_F64, n[i], sh->dtype, sh->seq);
  free(qd);
  free(kd);
  free(vd);
  for (int i = 0; i < 4; i++)
    free(want[i]);
  return PL_OK;
}

/* indexed by pl_attn_fwd_kind, pl_attn_bwd_kind */
static const char *const fwd_kernel_names[] = {"auto",  "simple", "mma",
                                               "wgmma", "cudnn",  NULL};
static const char *const bwd_kernel_names[] = {
    "auto", "simple", "mma", "wgmma", "split", "cudnn", NULL};
static const char *const pass_names[] = {"fwd", "fwdbwd", "both", NULL};
/* indexed by pl_attn_mask */
static const char *const mask_names[] = {"causal", "full", NULL};

static const pl_opt attn_opts[] = {
    {"seq", 0, PL_OPT_SIZE_LIST, NULL, "sequence lengths S", 1, 1 << 30, NULL},
    {"batch", 0, PL_OPT_INT, "1", "sequences per call B", 1, 65535, NULL},
    {"heads", 0, PL_OPT_INT, NULL, "query heads n_q", 1, 65535, NULL},
    {"kv-heads", 0, PL_OPT_INT, NULL, "key/value heads n_kv", 1, 65535, NULL},
    {"head-dim", 0, PL_OPT_INT, NULL, "head dimension d", 1, 512, NULL},
    {"fwd-kernel", 0, PL_OPT_ENUM, "auto",
     "CUDA forward: auto | simple | mma | wgmma | cudnn (auto: cudnn where "
     "built and the shape runs there, else wgmma for d = 128 on an sm_90a "
     "build, else mma; simple: the device reference)",
     0, 0, fwd_kernel_names},
    {"bwd-kernel", 0, PL_OPT_ENUM, "auto",
     "CUDA backward: auto | simple | mma | wgmma | split | cudnn (auto: as "
     "the forward; split: bit-reproducible dQ, d = 128 on sm_90a)",
     0, 0, bwd_kernel_names},
    {"pass", 0, PL_OPT_ENUM, "both", "fwd | fwdbwd | both", 0, 0, pass_names},
    {"mask", 0, PL_OPT_ENUM, "causal",
     "causal | full (every query sees every key: ring attention's "
     "off-diagonal blocks; FLOPs counted whole, twice the causal's)",
     0, 0, mask_names},
    {"bwd-max", 0, PL_OPT_SIZE, "512Ki",
     "largest S that also runs forward+backward", 1, 1 << 30, NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

static const pl_preset attn_presets[] = {
    {"cuda", "seq=4Ki:1Mi:x2 heads=64 kv-heads=8 head-dim=128"},
    {"cpu", "seq=128,256,512 heads=4 kv-heads=2 head-dim=64"},
    {NULL, NULL},
};

typedef struct attn_bench {
  pl_attn_shape base;
  uint64_t seqs[PL_OPT_LIST_MAX], bwd_max;
  int nseq, npass, pass0;
  attn_run r; /* the point */
  uint64_t S;
  double flops;
} attn_bench;

static pl_status run_unit(void *st) {
  return attn_fwd_bwd(&((attn_bench *)st)->r);
}

/* one Ulysses all-to-all of Q (sequence -> head sharded), for D > 1 rows */
typedef struct a2a_run {
  attn_run *r;
  void *dst;
} a2a_run;

static pl_status a2a_once(void *arg) {
  a2a_run *a = arg;
  return pl_ulysses_seq_to_head(a->r->sp, a->r->s, a->r->q, a->dst,
                                a->r->sh.seq, a->r->sh.n_q, a->r->sh.head_dim,
                                a->r->sh.dtype);
}

static pl_status init(pl_bench_ctx *c, void *st) {
  attn_bench *b = st;
  b->nseq = pl_args_size_list(c->args, "seq", b->seqs, PL_OPT_LIST_MAX);
  int pass = pl_args_enum(c->args, "pass");
  b->npass = pass == 2 ? 2 : 1;
  b->pass0 = pass == 1;
  b->bwd_max = pl_args_size(c->args, "bwd-max");
  b->base = (pl_attn_shape){
      .batch = pl_args_int(c->args, "batch"),
      .seq = 1,
      .n_q = (int)pl_args_int(c->args, "heads"),
      .n_kv = (int)pl_args_int(c->args, "kv-heads"),
      .head_dim = (int)pl_args_int(c->args, "head-dim"),
      .dtype = PL_BF16,
      .mask = (pl_attn_mask)pl_args_enum(c->args, "mask"),
      .kernels = {(pl_attn_fwd_kind)pl_args_enum(c->args, "fwd-kernel"),
                  (pl_attn_bwd_kind)pl_args_enum(c->args, "bwd-kernel")}};
  c->npoints = b->nseq * b->npass;
  /* The kernel choice exists only on CUDA: a CPU row must never be labelled
   * with a CUDA kernel it did not run. */
  if (!c->cuda && b->base.kernels.fwd != PL_ATTN_FWD_AUTO)
    return pl_set_error(PL_EINVAL,
                        "--fwd-kernel=%s: the attention kernel choice exists "
                        "only on the CUDA backend (allowed on cpu: auto)",
                        fwd_kernel_names[b->base.kernels.fwd]);
  if (!c->cuda && b->base.kernels.bwd != PL_ATTN_BWD_AUTO)
    return pl_set_error(PL_EINVAL,
                        "--bwd-kernel=%s: the attention kernel choice exists "
                        "only on the CUDA backend (allowed on cpu: auto)",
                        bwd_kernel_names[b->base.kernels.bwd]);
  /* a shape the kernels refuse: a usage error, nothing measured */
  return pl_attn_check(&b->base, pl_dev_backend(c->dev));
}

static pl_status point(pl_bench_ctx *c, void *st, int p, pl_row *row,
                       char *label, size_t n) {
  attn_bench *b = st;
  const int D = c->size, nq = b->base.n_q, nkv = b->base.n_kv;
  attn_run *r = &b->r;
  memset(r, 0, sizeof *r);
  b->S = b->seqs[p / b->npass];
  r->bwd = b->pass0 + p % b->npass;
  r->sh = b->base;
  r->sh.seq = (int64_t)b->S / D;
  r->s = c->stream;
  r->sp = D > 1 ? c->comm : NULL;
  r->off = (uint64_t)c->rank * (uint64_t)r->sh.seq * (uint64_t)b->base.head_dim;
  snprintf(label, n, "S=%llu %s%s", (unsigned long long)b->S,
           r->bwd ? "fwd+bwd" : "fwd",
           r->sh.mask == PL_ATTN_FULL ? " full" : "");
  pl_row_i64(row, "batch", r->sh.batch);
  pl_row_i64(row, "ranks", D);
  pl_row_i64(row, "seq", (int64_t)b->S);
  pl_row_i64(row, "n_q", nq);
  pl_row_i64(row, "n_kv", nkv);
  pl_row_i64(row, "d", b->base.head_dim);
  char variant[32]; /* what was asked: "fwd/bwd" */
  snprintf(variant, sizeof variant, "%s/%s",
           fwd_kernel_names[r->sh.kernels.fwd],
           bwd_kernel_names[r->sh.kernels.bwd]);
  pl_row_str(row, "variant", variant);
  pl_row_str(row, "pass", r->bwd ? "fwdbwd" : "fwd");
  pl_row_str(row, "mask", mask_names[r->sh.mask]);
  pl_attn_shape whole = b->base; /* this rank's FLOPs: S tokens, n_q/D heads */
  whole.seq = (int64_t)b->S;
  whole.n_q = nq / D;
  b->flops =
      pl_attn_flops_fwd(&whole) + (r->bwd ? pl_attn_flops_bwd(&whole) : 0);
  pl_row_f64(row, "flops", b->flops);
  if (b->S % (uint64_t)D || nq % D || !pl_ulysses_heads_per_rank(nkv, D))
    return pl_set_error(PL_EINFEASIBLE, "S and n_q must divide by the number "
                                        "of ranks D, and n_kv by D or D by "
                                        "n_kv");
  if (r->bwd && b->S > b->bwd_max)
    return pl_set_error(PL_EINFEASIBLE,
                        "S > --bwd-max: forward only at this length");
  return PL_OK;
}

static pl_status setup(pl_bench_ctx *c, void *st, int p) {
  attn_bench *b = st;
  return attn_alloc(c->dev, &b->r, b->r.bwd);
}

/* The first S only (small enough for the reference), one rank. */
static pl_status check(pl_bench_ctx *c, void *st, int p, pl_check *chk) {
  attn_bench *b = st;
  if (p >= b->npass || c->size > 1)
    return PL_OK;
  return attn_check(c, &b->r, chk);
}

static pl_status finish(pl_bench_ctx *c, void *st, int p, pl_row *row,
                        pl_work *w) {
  attn_bench *b = st;
  attn_run *r = &b->r;
  w->flops = b->flops;
  char k[160]; /* the kernels that ran: "fwd" or "fwd+bwd" */
  snprintf(k, sizeof k, "%s%s%s", pl_attn_fwd_kernel(r->s, &r->sh),
           r->bwd ? "+" : "", r->bwd ? pl_attn_bwd_kernel(r->s, &r->sh) : "");
  pl_row_str(row, "kernel", k);
  if (!r->sp || r->bwd)
    return PL_OK;
  /* the all-to-all alone: bytes leaving each rank, (D-1)/D of its Q */
  const int D = c->size;
  const size_t qb = (size_t)r->sh.seq * (size_t)r->sh.n_q *
                    (size_t)r->sh.head_dim * pl_dtype_size(r->sh.dtype);
  a2a_run a = {.r = r, .dst = NULL};
  pl_stats ta;
  pl_status s = pl_alloc(c->dev, PL_ARENA_DEVICE, qb, "attention", &a.dst);
  PL_TRY(pl_bench_agree(c, &s));
  if (s == PL_OK)
    s = pl_bench_time(c, a2a_once, &a, r->s, &ta);
  if (s == PL_OK) {
    pl_row_f64(row, "a2a_ms", ta.median);
    pl_row_f64(row, "a2a_gbs",
               (double)qb * (D - 1) / D / (ta.median * 1e-3) * 1e-9);
  }
  pl_free(c->dev, a.dst);
  return s;
}

static void teardown(pl_bench_ctx *c, void *st, int p) {
  attn_free(c->dev, &((attn_bench *)st)->r);
}

const pl_bench pl_bench_attention = {
    .name = "attention",
    .summary = "GQA flash attention (causal, or --mask full) fwd and fwd+bwd "
               "TFLOP/s and peak memory vs S",
    .opts = attn_opts,
    .presets = attn_presets,
    .preset_cpu = "cpu",
    .preset_cuda = "cuda",
    .columns = "ranks\tbatch\tseq\tn_q\tn_kv\td\tvariant\tpass\tmask\ttime_ms\t"
               "time_p10_ms\ttime_p90_ms\ttflops\tflops\tdev_peak_bytes\t"
               "attention_bytes\ta2a_ms\ta2a_gbs\tkernel\tmax_err",
    .tags = (const char *const[]){"attention", NULL},
    .state = sizeof(attn_bench),
    .init = init,
    .point = point,
    .setup = setup,
    .run = run_unit,
    .check = check,
    .finish = finish,
    .teardown = teardown,
};
