/* bench_vocab.c — `plateau bench vocab`: the vocabulary head (projection +
 * cross-entropy, forward + backward) per variant, as in the paper's Table 2.
 *
 * Variants (each point: variant × N × dtype × block):
 *   dense    logits N×V materialized, PyTorch's sequence (the paper's
 *            baseline); every rank runs its own batch on the full W.
 *   fused    one device, vocabulary blocks with online log-sum-exp (CCE
 *            style, = Ring-DTP at P = 1); every rank its own batch, full W.
 *   chunk    one device, token chunks of Nc = N·Vb/V rows against the full
 *            vocabulary, gradients made in the same pass (Liger style: 3
 *            GEMMs, no recompute); same logits bound as a strip.
 *   vp       Megatron vocab-parallel CE over the P ranks: W sharded, the SAME
 *            batch on every rank (the group processes N distinct tokens, not
 *            P·N: the note says so).
 *   ring     Ring-DTP over the P ranks: each rank its own batch and W shard.
 * N is tokens per rank.  Memory: the tracked device peak of one fwd+bwd
 * (inputs X, W included; gradients allocated where autograd would), max over
 * ranks, with the live set at the peak; the "logits" tag's own peak; for ring
 * the analytic floor X + W_r + dX + dW_r + the moving tensor's hop buffers
 * (one at P = 2, two beyond) + two f32 buffers of its gradient + one strip
 * (ring_floor), the mode chosen, bytes per hop and bytes sent.
 * Time: median (p10, p90) of fwd+bwd, max over ranks.
 *
 * Check (--check, default on): loss and dX against the blocked fused head
 * (itself tested against the f64 reference, engine/ops/test_ce.c) on the
 * same inputs, with sum reduction rescaled by the count of targets the
 * variant averages over; dW is covered by the tests, not here (its check
 * would need a second H×V gradient on every rank).  Tolerance: 1e-4 of the
 * tensor's scale in f32, 3e-2 in bf16.
 *
 * Presets: small (CPU, seconds on 2 ranks): H=128, V=4096, N=256,512,
 * block 512; paper: H=7168, V=200,000, N=16,384 and 32,768, block 4096.
 * Unless -n / -w are given, 3 timed iterations after 1 warm-up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../baselines/dense_ce.h"
#include "../baselines/fused_ce.h"
#include "../baselines/vocab_parallel_ce.h"
#include "bench.h"
#include "ops/ring_dtp.h"
#include "plateau/hd.h"

enum { V_DENSE, V_FUSED, V_CHUNK, V_VP, V_RING, V_COUNT };
static const char *const variant_names[] = {"dense", "fused", "chunk",
                                            "vp",    "ring",  NULL};
static const char *const dtype_names[] = {"f32", "bf16", NULL};
static const char *const mode_names[] = {"auto", "act", "weights", NULL};

static const pl_opt vocab_opts[] = {
    {"variants", 0, PL_OPT_ENUM_LIST, "dense,fused,chunk,vp,ring",
     "which heads to run", 0, 0, variant_names},
    {"tokens", 'N', PL_OPT_SIZE_LIST, NULL, "tokens per rank", 0, 1 << 30,
     NULL},
    {"hidden", 'H', PL_OPT_SIZE, NULL, "hidden size", 1, 1 << 20, NULL},
    {"vocab", 'V', PL_OPT_SIZE, NULL, "vocabulary", 1, 1 << 30, NULL},
    {"dtypes", 0, PL_OPT_ENUM_LIST, "f32", "storage dtypes", 0, 0, dtype_names},
    {"blocks", 0, PL_OPT_SIZE_LIST, NULL,
     "vocabulary block sizes of fused, chunk and ring", 1, 1 << 30, NULL},
    {"mode", 0, PL_OPT_ENUM, "auto", "Ring-DTP schedule", 0, 0, mode_names},
    {"no-overlap", 0, PL_OPT_FLAG, NULL,
     "Ring-DTP: hops in line on the compute stream (no comm stream)", 0, 0,
     NULL},
    {NULL, 0, 0, NULL, NULL, 0, 0, NULL},
};

/* Sizes; iterations too unless -n / -w are given: the paper preset's fp32
 * dense point is seconds per fwd+bwd, and the small one runs under
 * `make run` on a 2-core box. */
static const pl_preset vocab_presets[] = {
    {"small", "hidden=128 vocab=4096 tokens=256,512 blocks=512 iters=3 "
              "warmup=1"},
    {"paper", "hidden=7168 vocab=200000 tokens=16384,32768 blocks=4096 "
              "iters=3 warmup=1"},
    {NULL, NULL},
};

/* ---- one point ----------------------------------------------------------- */

typedef struct point {
  pl_bench_ctx *ctx;
  int variant;
  pl_dtype dt;
  int64_t n, h, v, block;
  pl_dtp_mode mode;
  int overlap;
  pl_stream *s;
  /* inputs */
  void *x, *w;
  int32_t *t;       /* device */
  int32_t *th;      /* host copy */
  int64_t col0, vs; /* shard (ring, vp); whole vocab otherwise */
  float *loss;
  void *dx, *dw; /* gradients of the last iteration */
  pl_dtp *dtp;
} point;

static void free_grads(point *p) {
  pl_dev *dev = p->ctx->dev;
  if (p->dx)
    pl_free(dev, p->dx);
  if (p->dw)
    pl_free(dev, p->dw);
  p->dx = p->dw = NULL;
}

/* One forward + backward; the previous iteration's gradients are freed first
 * (so they are not part of this iteration's peak). */
static pl_status iter(void *arg) {
  point *p = arg;
  free_grads(p);
  pl_ce_problem pb = {.dt = p->dt,
                      .n = p->n,
                      .h = p->h,
                      .v = p->v,
                      .red = PL_CE_MEAN,
                      .ignore = PL_CE_IGNORE_INDEX,
                      .block = p->block,
                      .x = p->x,
                      .t = p->t,
                      .w = p->w,
                      .loss = p->loss,
                      .dx_alloc = &p->dx,
                      .dw_alloc = &p->dw};
  switch (p->variant) {
  case V_DENSE:
    return pl_dense_ce(p->s, &pb);
  case V_FUSED:
    return pl_fused_ce(p->s, &pb);
  case V_CHUNK:
    return pl_fused_ce_chunked(p->s, &pb);
  case V_VP:
    return pl_vocab_parallel_ce(p->ctx->comm, p->s, &pb);
  default:
    break;
  }
  PL_TRY(pl_dtp_forward(p->dtp, p->s, p->x, p->t, p->w, p->loss));
  /* Ring-DTP writes its gradients from the first meeting of the backward on:
   * allocate them there (what autograd would hold by then). */
  pl_dev *dev = p->ctx->dev;
  size_t es = pl_dtype_size(p->dt);
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(p->n * p->h) * es,
                        "grads", p->s, &p->dx));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(p->h * p->vs) * es,
                        "grads", p->s, &p->dw));
  return pl_dtp_backward(p->dtp, p->s, p->x, p->t, p->w, NULL, p->dx, p->dw);
}

/* W (h×v global, row-major) columns [col0, col0+vs): counter-RNG draws at the
 * global index k·v + col0 + q, so every shard is a slice of the same W. */
static pl_status fill_w(point *p, void *w, int64_t col0, int64_t vs,
                        uint64_t seed) {
  float a = 1.0f / sqrtf((float)p->h);
  size_t es = pl_dtype_size(p->dt);
  if (vs == p->v)
    return pl_rng_fill(p->s, w, p->dt, (size_t)(p->h * p->v), seed, 0,
                       PL_DIST_UNIFORM, -a, a);
  for (int64_t k = 0; k < p->h; k++)
    PL_TRY(pl_rng_fill(p->s, (char *)w + (size_t)(k * vs) * es, p->dt,
                       (size_t)vs, seed, (uint64_t)(k * p->v + col0),
                       PL_DIST_UNIFORM, -a, a));
  return PL_OK;
}

static pl_status download_f32(pl_dev *dev, pl_stream *s, const void *src,
                              pl_dtype dt, size_t n, float **out) {
  *out = malloc(sizeof(float) * (n + 1));
  if (!*out)
    return pl_set_error(PL_ENOMEM, "vocab check: host memory");
  void *tmp = malloc(n * pl_dtype_size(dt) + 1);
  if (!tmp)
    return pl_set_error(PL_ENOMEM, "vocab check: host memory");
  PL_TRY(pl_stream_sync(s));
  if (n)
    PL_TRY(pl_memcpy_async(s, tmp, src, n * pl_dtype_size(dt)));
  PL_TRY(pl_stream_sync(s));
  for (size_t i = 0; i < n; i++)
    (*out)[i] =
        dt == PL_BF16 ? pl_bf16_to_f32(((pl_bf16 *)tmp)[i]) : ((float *)tmp)[i];
  free(tmp);
  (void)dev;
  return PL_OK;
}

/* The check: loss and dX of the variant against the fused head with sum
 * reduction on the same inputs (full W), rescaled by the count of targets
 * the variant averages over; reduction length V. */
static pl_status check_point(point *p, pl_check *chk) {
  pl_bench_ctx *ctx = p->ctx;
  pl_dev *dev = ctx->dev;
  float *got_loss = NULL, *got_dx = NULL, *ref_dx = NULL, *ref_loss = NULL;
  void *wfull = NULL, *rdx = NULL, *rdw = NULL;
  float *rl = NULL;
  pl_status st;
#define T(e)                                                                   \
  do {                                                                         \
    st = (e);                                                                  \
    if (st != PL_OK)                                                           \
      goto done;                                                               \
  } while (0)
  T(download_f32(dev, p->s, p->loss, PL_F32, 1, &got_loss));
  T(download_f32(dev, p->s, p->dx, p->dt, (size_t)(p->n * p->h), &got_dx));
  free_grads(p);
  if (p->variant == V_VP || p->variant == V_RING) {
    pl_free(dev, p->w);
    p->w = NULL;
    T(pl_alloc(dev, PL_ARENA_DEVICE,
               (size_t)(p->h * p->v) * pl_dtype_size(p->dt), "weights",
               &wfull));
    T(fill_w(p, wfull, 0, p->v, ctx->seed + 1));
  }
  T(pl_alloc(dev, PL_ARENA_DEVICE, 2 * sizeof(float), "ce_state",
             (void **)&rl));
  pl_ce_problem pb = {.dt = p->dt,
                      .n = p->n,
                      .h = p->h,
                      .v = p->v,
                      .red = PL_CE_SUM,
                      .ignore = PL_CE_IGNORE_INDEX,
                      .block = p->block,
                      .x = p->x,
                      .t = p->t,
                      .w = wfull ? wfull : p->w,
                      .loss = rl,
                      .dx_alloc = &rdx,
                      .dw_alloc = &rdw};
  T(pl_fused_ce(p->s, &pb));
  T(download_f32(dev, p->s, rl, PL_F32, 1, &ref_loss));
  T(download_f32(dev, p->s, rdx, p->dt, (size_t)(p->n * p->h), &ref_dx));
  /* The count the variant averages over: the group's targets for ring, this
   * rank's batch otherwise (vp: the same batch everywhere). */
  int64_t cnt = 0;
  for (int64_t i = 0; i < p->n; i++)
    cnt += p->th[i] != PL_CE_IGNORE_INDEX;
  double sums[2] = {ref_loss[0], (double)cnt};
  if (p->variant == V_RING)
    T(pl_host_allreduce_f64(ctx->comm, sums, 2, PL_RED_SUM));
  double want_loss = sums[0] / sums[1];
  pl_check_arrays(chk, "loss", got_loss, PL_ELEM_F32, &want_loss, PL_ELEM_F64,
                  1, p->dt, p->v);
  pl_check_scaled(chk, "dX", got_dx, PL_ELEM_F32, ref_dx, PL_ELEM_F32,
                  1.0 / sums[1], (size_t)(p->n * p->h), p->dt, p->v);
#undef T
done:
  free(got_loss), free(got_dx), free(ref_dx), free(ref_loss);
  if (rdx)
    pl_free(dev, rdx);
  if (rdw)
    pl_free(dev, rdw);
  if (rl)
    pl_free(dev, rl);
  if (wfull)
    pl_free(dev, wfull);
  return st;
}

/* Analytic floor of Ring-DTP's peak (the backward's live set): what the
 * overlapped schedule needs, in the storage dtype unless said otherwise —
 *   X_r + W_r + dX_r + dW_r
 *   + the moving tensor's hop buffers: one at P = 2 (step 0 computes on the
 *     rank's own input, already counted), two beyond (receive the next while
 *     computing on the current); move-act: X_j with t_j and its (lse, g)
 *   + its gradient partial, f32 (a meeting sums its strips into it): two
 *     buffers, one sent while the other is received and accumulated into
 *   + the backward's strip (rows×Vb f32, + rows×Vb bf16 residual).
 * Not counted: the saved (lse, g) of the rank's own rows and the loss
 * scalars (8 bytes a row), and — an excess, reported as such — the f32
 * accumulator of nc = N/8 dX rows that bf16 move-W needs (every strip adds to
 * dX_r: pl_dtp_grads_scratch). */
static double ring_floor(const point *p, const pl_dtp *d) {
  double es = (double)pl_dtype_size(p->dt);
  double base =
      (double)(p->n * p->h) * es * 2 + (double)(p->h * p->vs) * es * 2;
  int P = p->ctx->size;
  bool act = pl_dtp_mode_of(d) == PL_DTP_MOVE_ACT;
  /* the largest visitor (every rank has N rows; shards are balanced) */
  double nmax = (double)p->n, vmax = (double)((p->v + P - 1) / P);
  double payload =
      act ? nmax * ((double)p->h * es + 4 + 8) : (double)p->h * vmax * es;
  double grad = act ? nmax * (double)p->h * 4 : (double)p->h * vmax * 4;
  /* the backward's strip: rows × Vb f32 (+ bf16 residual); bf16 move-W
   * works on row chunks (pl_dtp_chunk_rows) */
  double rows = P == 1 ? (double)p->n
                : act  ? nmax
                       : (double)pl_dtp_chunk_rows(d);
  double strip = rows * (double)pl_dtp_block(d) * (p->dt == PL_BF16 ? 6 : 4);
  return base + (P > 1 ? (P == 2 ? 1 : 2) * payload + 2 * grad : 0) + strip;
}

/* ---- the bench ------------------------------------------------------------
 */
typedef struct vocab_pt {
  int variant;
  pl_dtype dt;
  int64_t n, block;
} vocab_pt;

typedef struct vocab {
  int64_t H, V;
  pl_dtp_mode mode;
  int overlap;
  vocab_pt *pts;
  point p; /* the point being measured */
} vocab;

static pl_status init(pl_bench_ctx *c, void *st) {
  vocab *b = st;
  pl_args *a = c->args;
  uint64_t ns[PL_OPT_LIST_MAX], blocks[PL_OPT_LIST_MAX];
  int nn = pl_args_size_list(a, "tokens", ns, PL_OPT_LIST_MAX);
  int nb = pl_args_size_list(a, "blocks", blocks, PL_OPT_LIST_MAX);
  int vars[V_COUNT], nv = pl_args_enum_list(a, "variants", vars, V_COUNT);
  int dts[2], nd = pl_args_enum_list(a, "dtypes", dts, 2);
  b->H = (int64_t)pl_args_size(a, "hidden");
  b->V = (int64_t)pl_args_size(a, "vocab");
  b->mode = (pl_dtp_mode)pl_args_enum(a, "mode");
  b->overlap = !pl_args_flag(a, "no-overlap");
  b->pts = calloc((size_t)(nd * nn * nv * nb) + 1, sizeof *b->pts);
  PL_ASSERT(b->pts != NULL);
  int np = 0;
  for (int di = 0; di < nd; di++)
    for (int ni = 0; ni < nn; ni++)
      for (int vi = 0; vi < nv; vi++) {
        /* dense and vp have no vocabulary blocks */
        int blocked = vars[vi] != V_DENSE && vars[vi] != V_VP;
        for (int bi = 0; bi < (blocked ? nb : 1); bi++)
          b->pts[np++] =
              (vocab_pt){vars[vi], dts[di] ? PL_BF16 : PL_F32, (int64_t)ns[ni],
                         blocked ? (int64_t)blocks[bi] : 0};
      }
  c->npoints = np;
  return PL_OK;
}

static pl_status point_of(pl_bench_ctx *c, void *st, int i, pl_row *row,
                          char *label, size_t n) {
  vocab *b = st;
  const vocab_pt *q = &b->pts[i];
  point *p = &b->p;
  *p = (point){.ctx = c,
               .variant = q->variant,
               .dt = q->dt,
               .n = q->n,
               .h = b->H,
               .v = b->V,
               .block = q->block,
               .mode = b->mode,
               .overlap = b->overlap,
               .s = c->stream};
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
  return PL_OK;
}

/* Inputs: X (this rank's batch; vp: the same batch on every rank), W or its
 * shard, the targets (a few ignored); Ring-DTP's schedule. */
static pl_status setup(pl_bench_ctx *c, void *st, int i) {
  point *p = &((vocab *)st)->p;
  pl_dev *dev = c->dev;
  const size_t es = pl_dtype_size(p->dt);
  p->col0 = 0;
  p->vs = p->v;
  if (p->variant == V_VP || p->variant == V_RING)
    pl_ce_shard(p->v, c->size, c->rank, &p->col0, &p->vs);
  uint64_t xoff = p->variant == V_VP ? 0 : (uint64_t)c->rank << 40;
  p->th = malloc(sizeof(int32_t) * (size_t)(p->n + 1));
  if (!p->th)
    return pl_set_error(PL_ENOMEM, "vocab: host memory");
  for (int64_t k = 0; k < p->n; k++) {
    p->th[k] =
        (int32_t)(pl_rng_u32(c->seed + 2, xoff + (uint64_t)k) % (uint64_t)p->v);
    if (k % 61 == 60)
      p->th[k] = PL_CE_IGNORE_INDEX;
  }
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(p->n * p->h) * es, "inputs",
                  &p->x));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, (size_t)(p->h * p->vs) * es, "weights",
                  &p->w));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, sizeof(int32_t) * (size_t)p->n,
                  "inputs", (void **)&p->t));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, sizeof(float) * 2, "ce_state",
                  (void **)&p->loss));
  PL_TRY(pl_rng_fill(p->s, p->x, p->dt, (size_t)(p->n * p->h), c->seed, xoff,
                     PL_DIST_UNIFORM, -1.0f, 1.0f));
  PL_TRY(fill_w(p, p->w, p->col0, p->vs, c->seed + 1));
  if (p->n)
    PL_TRY(pl_memcpy_async(p->s, p->t, p->th, sizeof(int32_t) * (size_t)p->n));
  PL_TRY(pl_stream_sync(p->s));
  if (p->variant != V_RING)
    return PL_OK;
  pl_dtp_opts o;
  pl_dtp_opts_default(&o);
  o.mode = p->mode;
  o.block = p->block;
  o.overlap = p->overlap;
  return pl_dtp_create(c->comm, p->dt, p->n, p->h, p->v, &o, &p->dtp);
}

static pl_status run(void *st) {
  return iter(&((vocab *)st)->p);
}

static pl_status check(pl_bench_ctx *c, void *st, int i, pl_check *chk) {
  return check_point(&((vocab *)st)->p, chk);
}

/* Ring-DTP's schedule, hop bytes and floor; what each variant's batch is. */
static pl_status finish(pl_bench_ctx *c, void *st, int i, pl_row *row,
                        pl_work *w) {
  point *p = &((vocab *)st)->p;
  const int P = c->size;
  if (p->variant == V_RING) {
    size_t hf, hb, sf, sb;
    pl_dtp_hop_bytes(p->dtp, &hf, &hb);
    pl_dtp_bytes_sent(p->dtp, &sf, &sb);
    pl_row_str(row, "mode", pl_dtp_mode_name(pl_dtp_mode_of(p->dtp)));
    pl_row_i64(row, "hop_bytes", (int64_t)hf);
    pl_row_i64(row, "sent_bytes", (int64_t)(sf + sb));
    pl_row_i64(row, "bound_bytes", (int64_t)ring_floor(p, p->dtp));
    pl_row_note(row, "P=%d; each rank its own batch; %s%s", P,
                P == 1 ? "P=1: the blocked fused head"
                       : "hops overlap compute on a comm stream",
                p->overlap ? "" : " (disabled: --no-overlap)");
  } else if (p->variant == V_VP) {
    pl_row_note(row,
                "P=%d ranks share ONE batch of N tokens (P-fold fewer "
                "distinct tokens than ring)",
                P);
  } else if (p->variant == V_CHUNK) {
    pl_ce_problem q = {.n = p->n, .v = p->v, .block = p->block, .dt = p->dt};
    pl_row_note(row,
                "every rank its own batch, full W; token chunks of %lld "
                "rows",
                (long long)pl_fused_ce_chunk_rows(&q));
  } else {
    pl_row_note(row, "every rank its own batch, full W");
  }
  return PL_OK;
}

static void teardown(pl_bench_ctx *c, void *st, int i) {
  point *p = &((vocab *)st)->p;
  free_grads(p);
  if (p->dtp)
    pl_dtp_destroy(p->dtp);
  pl_free(c->dev, p->x);
  pl_free(c->dev, p->w);
  pl_free(c->dev, p->t);
  pl_free(c->dev, p->loss);
  free(p->th);
  memset(p, 0, sizeof *p);
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
    .columns = "variant\ttokens\thidden\tvocab\tranks\tdtype\tblock\tmode\t"
               "time_ms\ttime_p10_ms\ttime_p90_ms\tdev_peak_bytes\t"
               "logits_bytes\tbound_bytes\tlive_set\thop_bytes\tsent_bytes\t"
               "max_err",
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
