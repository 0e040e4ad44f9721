/* layer.c — the decoder layer's schedule (model/layer.h), backend-neutral:
 * GEMMs through pl_gemm, RMSNorm through the shared kernels, RoPE, attention
 * (Ulysses over l->sp when its size > 1) and the dense MLP block. */
#include "model/layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "model/mlp_block_internal.h"
#include "model/rope.h"
#include "model/ulysses.h"

static int group_size(const pl_layer *l) {
  return l->sp ? pl_comm_size(l->sp) : 1;
}
static int group_rank(const pl_layer *l) {
  return l->sp ? pl_comm_rank(l->sp) : 0;
}
static int64_t qkv_cols(const pl_layer_cfg *c) {
  return (int64_t)(c->n_q + 2 * c->n_kv) * c->d;
}

int64_t pl_layer_params(const pl_layer_cfg *c) {
  return c->H + c->H * qkv_cols(c) + (int64_t)c->n_q * c->d * c->H +
         pl_mlp_block_params(c->H, c->I);
}

void pl_layer_free(pl_layer *l) {
  if (!l->dev)
    return;
  void *kp[] = {l->kept.h, l->kept.q,  l->kept.k,  l->kept.v,
                l->kept.o, l->kept.y1, l->kept.lse};
  for (int i = 0; i < 7; i++)
    pl_free(l->dev, kp[i]);
  if (l->views) {
    memset(l, 0, sizeof *l);
    return;
  }
  void *ps[] = {l->w_n, l->w_qkv, l->w_o, l->g_n, l->g_qkv, l->g_o};
  for (int i = 0; i < 6; i++)
    pl_free(l->dev, ps[i]);
  pl_mlp_block_free(&l->mlp);
  memset(l, 0, sizeof *l);
}

pl_status pl_layer_zero_grad(pl_layer *l, pl_stream *s) {
  const pl_layer_cfg *c = &l->cfg;
  PL_TRY(pl_fill(s, l->g_n, PL_F32, (size_t)c->H, 0.0));
  PL_TRY(pl_fill(s, l->g_qkv, PL_F32, (size_t)(c->H * qkv_cols(c)), 0.0));
  PL_TRY(
      pl_fill(s, l->g_o, PL_F32, (size_t)((int64_t)c->n_q * c->d * c->H), 0.0));
  return pl_mlp_block_zero_grad(&l->mlp, s);
}

static pl_status check_cfg(pl_comm *sp, const pl_layer_cfg *cfg) {
  const int D = sp ? pl_comm_size(sp) : 1;
  if (cfg->H < 1 || cfg->I < 1 || cfg->n_q < 1 || cfg->n_kv < 1 || cfg->d < 2 ||
      cfg->d % 2 || cfg->n_q % cfg->n_kv)
    return pl_set_error(PL_EINVAL,
                        "layer: H=%lld I=%lld n_q=%d n_kv=%d d=%d: need "
                        "positive sizes, n_kv | n_q, "
                        "even d",
                        (long long)cfg->H, (long long)cfg->I, cfg->n_q,
                        cfg->n_kv, cfg->d);
  if (cfg->n_q % D || !pl_ulysses_heads_per_rank(cfg->n_kv, D))
    return pl_set_error(
        PL_EINVAL,
        "layer: n_q=%d n_kv=%d over a Ulysses group of D=%d: n_q "
        "must divide by D, and n_kv by D or D by n_kv",
        cfg->n_q, cfg->n_kv, D);
  if (cfg->dt != PL_F32 && cfg->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "layer: dtype %s: f32 or bf16",
                        pl_dtype_name(cfg->dt));
  return PL_OK;
}

pl_status pl_layer_init_views(pl_dev *dev, pl_comm *sp, pl_layer *l,
                              const pl_layer_cfg *cfg, const pl_ffn_ops *ffn,
                              void *ffn_ctx) {
  memset(l, 0, sizeof *l);
  PL_TRY(check_cfg(sp, cfg));
  l->dev = dev;
  l->sp = sp;
  l->cfg = *cfg;
  if (l->cfg.rope_theta == 0)
    l->cfg.rope_theta = 10000.0;
  l->eps = 1e-5f;
  l->ffn = ffn;
  l->ffn_ctx = ffn_ctx;
  l->views = 1;
  return PL_OK;
}

pl_status pl_layer_init(pl_dev *dev, pl_comm *sp, pl_layer *l,
                        const pl_layer_cfg *cfg, uint64_t seed, int index) {
  memset(l, 0, sizeof *l);
  PL_TRY(check_cfg(sp, cfg));
  l->dev = dev;
  l->sp = sp;
  l->cfg = *cfg;
  if (l->cfg.rope_theta == 0)
    l->cfg.rope_theta = 10000.0;
  l->eps = 1e-5f;
  const pl_layer_cfg *c = &l->cfg;
  const size_t es = pl_dtype_size(c->dt);
  const size_t nqkv = (size_t)(c->H * qkv_cols(c)),
               no = (size_t)c->n_q * c->d * (size_t)c->H;
  pl_stream *s = pl_dev_stream(dev);
  const uint64_t ls = seed * 1000003ull + (uint64_t)(2 * index) * 7919ull;
  pl_status st = PL_OK;
  PL_TRY_GOTO(
      st, fail,
      pl_alloc(dev, PL_ARENA_DEVICE, (size_t)c->H * es, "weights", &l->w_n));
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, nqkv * es, "weights", &l->w_qkv));
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, no * es, "weights", &l->w_o));
  PL_TRY_GOTO(st, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, (size_t)c->H * 4, "grads",
                       (void **)&l->g_n));
  PL_TRY_GOTO(
      st, fail,
      pl_alloc(dev, PL_ARENA_DEVICE, nqkv * 4, "grads", (void **)&l->g_qkv));
  PL_TRY_GOTO(
      st, fail,
      pl_alloc(dev, PL_ARENA_DEVICE, no * 4, "grads", (void **)&l->g_o));
  PL_TRY_GOTO(
      st, fail,
      pl_mlp_block_init(dev, &l->mlp, c->H, c->I, c->dt, seed, 2 * index + 1));
  PL_TRY_GOTO(st, fail,
              pl_rng_fill(s, l->w_n, c->dt, (size_t)c->H, ls + 1, 0,
                          PL_DIST_UNIFORM, 0.8f, 1.2f));
  PL_TRY_GOTO(st, fail,
              pl_rng_fill(s, l->w_qkv, c->dt, nqkv, ls + 2, 0, PL_DIST_NORMAL,
                          0, 1.0f / sqrtf((float)c->H)));
  PL_TRY_GOTO(st, fail,
              pl_rng_fill(s, l->w_o, c->dt, no, ls + 3, 0, PL_DIST_NORMAL, 0,
                          1.0f / sqrtf((float)(c->n_q * c->d))));
  PL_TRY_GOTO(st, fail, pl_layer_zero_grad(l, s));
  return PL_OK;
fail:
  pl_layer_free(l); /* clears *l, l->dev included */
  return st;
}

typedef pl_layer_acts acts;

static void acts_free(pl_layer *l, pl_stream *s, acts *a) {
  void *ps[] = {a->h, a->q, a->k, a->v, a->o, a->y1, a->lse};
  for (int i = 0; i < 7; i++)
    pl_free_async(l->dev, ps[i], s);
  memset(a, 0, sizeof *a);
}

/* What the last forward kept, freed (a forward whose backward never came). */
static void drop_kept(pl_layer *l, pl_stream *s) {
  acts_free(l, s, &l->kept);
  l->kept_level = PL_LAYER_KEEP_NONE;
  l->kept_N = 0;
}

size_t pl_layer_kept_bytes(const pl_layer_cfg *c, int64_t N, int D,
                           pl_layer_keep k) {
  if (k == PL_LAYER_KEEP_NONE || N <= 0)
    return 0;
  const size_t es = pl_dtype_size(c->dt), n = (size_t)N;
  const size_t nq = (size_t)c->n_q * (size_t)c->d,
               nk = (size_t)c->n_kv * (size_t)c->d;
  const size_t attn =
      n * nq * es + (size_t)(c->n_q / (D > 0 ? D : 1)) * n * (size_t)D * 4;
  return k == PL_LAYER_KEEP_ATTN
             ? attn
             : attn + n * (2 * (size_t)c->H + nq + 2 * nk) * es;
}

static pl_attn_shape attn_shape(const pl_layer *l, int64_t N) {
  const pl_layer_cfg *c = &l->cfg;
  pl_attn_shape sh = {.batch = 1,
                      .seq = N,
                      .n_q = c->n_q,
                      .n_kv = c->n_kv,
                      .head_dim = c->d,
                      .dtype = c->dt,
                      .kernels = c->attn_kernels};
  return sh;
}

/* The members' agreement before WHAT (l->agree; none: st as is). */
static pl_status agree(const pl_layer *l, pl_status st, const char *what) {
  return pl_agree(l->agree, st, "layer", what);
}

/* The attention's local prefix: its buffers, the norm, Q, K, V and RoPE. */
static pl_status attn_prefix(pl_layer *l, pl_stream *s, const void *x,
                             int64_t N, acts *a, pl_layer_keep keep,
                             bool have_o) {
  const pl_layer_cfg *c = &l->cfg;
  const int D = group_size(l);
  const size_t es = pl_dtype_size(c->dt);
  const int64_t nq = (int64_t)c->n_q * c->d, nk = (int64_t)c->n_kv * c->d,
                tot = qkv_cols(c);
  pl_dev *dev = l->dev;
  const char *ta = keep == PL_LAYER_KEEP_ALL ? "kept" : "activations";
  const char *to = keep != PL_LAYER_KEEP_NONE ? "kept" : "activations";
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * c->H) * es, ta, s,
                        &a->h));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * nq) * es, ta, s,
                        &a->q));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * nk) * es, ta, s,
                        &a->k));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * nk) * es, ta, s,
                        &a->v));
  if (!have_o)
    PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * nq) * es, to, s,
                          &a->o));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * c->H) * es, ta, s,
                        &a->y1));
  if (!have_o) {
    void *lp = NULL;
    PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE,
                          (size_t)(c->n_q / D) * (size_t)(N * D) * 4, to, s,
                          &lp));
    a->lse = lp;
  }
  PL_TRY(pl__rmsnorm_fwd(s, x, l->w_n, a->h, N, c->H, l->eps, c->dt));
  const char *W = l->w_qkv;
  PL_TRY(pl_gemm(s, false, false, N, nq, c->H, 1.f, a->h, c->H, W, tot, 0.f,
                 a->q, nq, c->dt, c->dt));
  PL_TRY(pl_gemm(s, false, false, N, nk, c->H, 1.f, a->h, c->H, W + nq * es,
                 tot, 0.f, a->k, nk, c->dt, c->dt));
  PL_TRY(pl_gemm(s, false, false, N, nk, c->H, 1.f, a->h, c->H,
                 W + (nq + nk) * es, tot, 0.f, a->v, nk, c->dt, c->dt));
  const int64_t pos0 = (int64_t)group_rank(l) * N;
  PL_TRY(pl_rope_fwd(s, a->q, c->dt, 1, N, c->n_q, c->d, pos0, c->rope_theta));
  return pl_rope_fwd(s, a->k, c->dt, 1, N, c->n_kv, c->d, pos0, c->rope_theta);
}

/* Forward up to y1 = x + o·W_o, keeping what backward needs in *a.  The
 * buffers the layer keeps at level `keep` are allocated under tag "kept";
 * with `have_o` (a backward after an ATTN-keeping forward) a->o and a->lse
 * are already the forward's: no attention, y1 from that o.  Every member
 * agrees after the local prefix (the attention's collectives next). */
static pl_status attn_forward(pl_layer *l, pl_stream *s, const void *x,
                              int64_t N, acts *a, pl_layer_keep keep,
                              bool have_o) {
  const pl_layer_cfg *c = &l->cfg;
  const int D = group_size(l);
  const size_t es = pl_dtype_size(c->dt);
  const int64_t nq = (int64_t)c->n_q * c->d;
  if (!have_o)
    memset(a, 0, sizeof *a);
  PL_TRY(agree(l, attn_prefix(l, s, x, N, a, keep, have_o), "the attention"));
  pl_attn_shape sh = attn_shape(l, N);
  if (!have_o && D > 1)
    PL_TRY(pl_ulysses_attn_fwd(l->sp, s, &sh, a->q, a->k, a->v, a->o, a->lse));
  else if (!have_o)
    PL_TRY(pl_attn_fwd(s, &sh, a->q, a->k, a->v, a->o, a->lse));
  /* y1 = x + o·W_o */
  PL_TRY(pl_memcpy_async(s, a->y1, x, (size_t)(N * c->H) * es));
  return pl_gemm(s, false, false, N, c->H, nq, 1.f, a->o, nq, l->w_o, c->H, 1.f,
                 a->y1, c->H, c->dt, c->dt);
}

pl_status pl_layer_forward(pl_layer *l, pl_stream *s, const void *x, void *y,
                           int64_t N) {
  if (N < 0)
    return pl_set_error(PL_EINVAL, "layer: N=%lld: must be >= 0", (long long)N);
  drop_kept(l, s);
  if (N == 0)
    return PL_OK;
  acts a; /* cleared by attn_forward before it can fail */
  pl_status st = PL_OK;
  st = attn_forward(l, s, x, N, &a, l->keep, false);
  PL_TRY_GOTO(st, done, agree(l, st, "the FFN slot"));
  PL_TRY_GOTO(st, done,
              l->ffn ? l->ffn->forward(l->ffn_ctx, s, a.y1, y, N)
                     : pl_mlp_block_forward(&l->mlp, s, a.y1, y, N));
  if (l->keep != PL_LAYER_KEEP_NONE) {
    /* the kept ones stay for the backward; the rest is freed below */
    if (l->keep == PL_LAYER_KEEP_ALL) {
      l->kept = a;
      memset(&a, 0, sizeof a);
    } else {
      l->kept.o = a.o, l->kept.lse = a.lse, a.o = NULL, a.lse = NULL;
    }
    l->kept_level = l->keep;
    l->kept_N = N;
  }
done:
  acts_free(l, s, &a);
  return st;
}

/* Recompute from x into fresh buffers and compare with what the forward
 * kept, bit for bit (keep_verify: the forward's determinism asserted). */
static pl_status verify_kept(pl_layer *l, pl_stream *s, const void *x,
                             int64_t N) {
  const pl_layer_cfg *c = &l->cfg;
  const size_t es = pl_dtype_size(c->dt), n = (size_t)N;
  const size_t nq = n * (size_t)c->n_q * (size_t)c->d,
               nk = n * (size_t)c->n_kv * (size_t)c->d;
  acts r; /* cleared by attn_forward before it can fail */
  char *a = NULL, *b = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              attn_forward(l, s, x, N, &r, PL_LAYER_KEEP_NONE, false));
  const void *got[7] = {l->kept.o, l->kept.lse, l->kept.h, l->kept.q,
                        l->kept.k, l->kept.v,   l->kept.y1};
  const void *ref[7] = {r.o, r.lse, r.h, r.q, r.k, r.v, r.y1};
  const size_t bytes[7] = {
      nq * es, (size_t)c->n_q * n * 4, n * (size_t)c->H * es, nq * es, nk * es,
      nk * es, n * (size_t)c->H * es};
  const int cmp = l->kept_level == PL_LAYER_KEEP_ALL ? 7 : 2;
  for (int i = 0; i < cmp; i++) {
    a = malloc(bytes[i] + 1), b = malloc(bytes[i] + 1);
    if (!a || !b)
      PL_TRY_GOTO(st, done,
                  pl_set_error(PL_ENOMEM, "layer: keep_verify host buffers"));
    PL_TRY_GOTO(st, done, pl_memcpy_async(s, a, got[i], bytes[i]));
    PL_TRY_GOTO(st, done, pl_memcpy_async(s, b, ref[i], bytes[i]));
    PL_TRY_GOTO(st, done, pl_stream_sync(s));
    if (memcmp(a, b, bytes[i]))
      PL_TRY_GOTO(
          st, done,
          pl_set_error(PL_ERUNTIME,
                       "layer: kept activation %d differs from its recompute "
                       "(the forward is not deterministic)",
                       i));
    free(a), free(b);
    a = b = NULL;
  }
done:
  free(a);
  free(b);
  acts_free(l, s, &r);
  return st;
}

/* The activations the backward needs: the forward's kept ones, recomputed
 * around them (ATTN), or all recomputed; the recompute marked. */
static pl_status backward_acts(pl_layer *l, pl_stream *s, const void *x,
                               int64_t N, acts *a) {
  const pl_layer_keep k = l->kept_level;
  if (k != PL_LAYER_KEEP_NONE && l->kept_N != N)
    return pl_set_error(
        PL_EINVAL,
        "layer: backward of N=%lld after a forward of N=%lld that "
        "kept its activations",
        (long long)N, (long long)l->kept_N);
  if (k != PL_LAYER_KEEP_NONE && l->keep_verify)
    PL_TRY(verify_kept(l, s, x, N));
  if (l->recompute_mark)
    PL_TRY(l->recompute_mark(l->mark_ctx, s, 0));
  pl_status st = PL_OK;
  if (k == PL_LAYER_KEEP_ALL) {
    *a = l->kept;
  } else if (k == PL_LAYER_KEEP_ATTN) {
    memset(a, 0, sizeof *a);
    a->o = l->kept.o, a->lse = l->kept.lse;
    st = attn_forward(l, s, x, N, a, PL_LAYER_KEEP_NONE, true);
  } else {
    st = attn_forward(l, s, x, N, a, PL_LAYER_KEEP_NONE, false);
  }
  memset(&l->kept, 0, sizeof l->kept); /* now a's: freed with it */
  l->kept_level = PL_LAYER_KEEP_NONE, l->kept_N = 0;
  PL_TRY(st);
  if (l->recompute_mark)
    PL_TRY(l->recompute_mark(l->mark_ctx, s, 1));
  return PL_OK;
}

/* An activation buffer of the backward. */
static pl_status act_alloc(pl_dev *dev, pl_stream *s, size_t bytes, void **p) {
  return pl_alloc_async(dev, PL_ARENA_DEVICE, bytes, "activations", s, p);
}

/* Free n buffers on stream s, in order. */
static void free_async_n(pl_dev *dev, pl_stream *s, void *const *ps, int n) {
  for (int i = 0; i < n; i++)
    pl_free_async(dev, ps[i], s);
}

/* The backward's buffers (tag "activations"). */
typedef struct bwd_bufs {
  void **dy1, **dO, **dq, **dk, **dv, **dh;
  float **dh32;
  void **scr;
} bwd_bufs;

static pl_status bwd_buffers(pl_layer *l, pl_stream *s, int64_t N,
                             const bwd_bufs *b) {
  const pl_layer_cfg *c = &l->cfg;
  const size_t es = pl_dtype_size(c->dt);
  const int64_t nq = (int64_t)c->n_q * c->d, nk = (int64_t)c->n_kv * c->d;
  pl_dev *dev = l->dev;
  PL_TRY(act_alloc(dev, s, (size_t)(N * c->H) * es, b->dy1));
  PL_TRY(act_alloc(dev, s, (size_t)(N * nq) * es, b->dO));
  PL_TRY(act_alloc(dev, s, (size_t)(N * nq) * es, b->dq));
  PL_TRY(act_alloc(dev, s, (size_t)(N * nk) * es, b->dk));
  PL_TRY(act_alloc(dev, s, (size_t)(N * nk) * es, b->dv));
  PL_TRY(act_alloc(dev, s, (size_t)(N * c->H) * es, b->dh));
  PL_TRY(act_alloc(dev, s, (size_t)(N * c->H) * 4, (void **)b->dh32));
  return act_alloc(dev, s, pl__rmsnorm_bwd_scratch(N, c->H) * 4, b->scr);
}

pl_status pl_layer_backward(pl_layer *l, pl_stream *s, const void *x,
                            const void *dy, void *dx, int64_t N) {
  if (N < 0)
    return pl_set_error(PL_EINVAL, "layer: N=%lld: must be >= 0", (long long)N);
  if (N == 0)
    return PL_OK;
  const pl_layer_cfg *c = &l->cfg;
  const int D = group_size(l);
  const size_t es = pl_dtype_size(c->dt);
  const int64_t nq = (int64_t)c->n_q * c->d, nk = (int64_t)c->n_kv * c->d,
                tot = qkv_cols(c);
  pl_dev *dev = l->dev;
  acts a;
  memset(&a, 0, sizeof a); /* backward_acts may fail before it fills a */
  void *dy1 = NULL, *dO = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *dh = NULL,
       *scr = NULL;
  float *dh32 = NULL;
  /* a failed rank skips its own part up to the next agreement, never one:
   * the recompute's (in attn_forward), the slot's, the attention's */
  pl_status st = backward_acts(l, s, x, N, &a);
  if (st == PL_OK)
    st = bwd_buffers(l, s, N,
                     &(bwd_bufs){&dy1, &dO, &dq, &dk, &dv, &dh, &dh32, &scr});
  PL_TRY_GOTO(st, done, agree(l, st, "the FFN slot's backward"));
  /* MLP slot: dy1 = d(mlp)/dy1 from dy (recomputes from y1) */
  st = l->ffn ? l->ffn->backward(l->ffn_ctx, s, a.y1, dy, dy1, N)
              : pl_mlp_block_backward(&l->mlp, s, a.y1, dy, dy1, N);
  /* y1 = x + o·W_o:  dO = dy1·W_oᵀ, g_o += oᵀ·dy1 (up to the attention's
   * agreement a failure is carried, not returned) */
  if (st == PL_OK)
    st = pl_gemm(s, false, true, N, nq, c->H, 1.f, dy1, c->H, l->w_o, c->H, 0.f,
                 dO, nq, c->dt, c->dt);
  if (st == PL_OK)
    st = pl_gemm(s, true, false, nq, c->H, N, 1.f, a.o, nq, dy1, c->H, 1.f,
                 l->g_o, c->H, c->dt, PL_F32);
  /* attention */
  pl_attn_shape sh = attn_shape(l, N);
  PL_TRY_GOTO(st, done, agree(l, st, "the attention's backward"));
  PL_TRY_GOTO(
      st, done,
      D > 1 ? pl_ulysses_attn_bwd(l->sp, s, &sh, a.q, a.k, a.v, a.o, dO, a.lse,
                                  dq, dk, dv)
            : pl_attn_bwd(s, &sh, a.q, a.k, a.v, a.o, dO, a.lse, dq, dk, dv));
  const int64_t pos0 = (int64_t)group_rank(l) * N;
  PL_TRY_GOTO(
      st, done,
      pl_rope_bwd(s, dq, c->dt, 1, N, c->n_q, c->d, pos0, c->rope_theta));
  PL_TRY_GOTO(
      st, done,
      pl_rope_bwd(s, dk, c->dt, 1, N, c->n_kv, c->d, pos0, c->rope_theta));
  /* dh = dq·W_qᵀ + dk·W_kᵀ + dv·W_vᵀ (f32), g_qkv += hᵀ·[dq|dk|dv] */
  const char *W = l->w_qkv;
  const void *dg[3] = {dq, dk, dv};
  const int64_t off[3] = {0, nq, nq + nk}, wid[3] = {nq, nk, nk};
  for (int i = 0; i < 3; i++) {
    PL_TRY_GOTO(st, done,
                pl_gemm(s, false, true, N, c->H, wid[i], 1.f, dg[i], wid[i],
                        W + off[i] * es, tot, i ? 1.f : 0.f, dh32, c->H, c->dt,
                        PL_F32));
    PL_TRY_GOTO(st, done,
                pl_gemm(s, true, false, c->H, wid[i], N, 1.f, a.h, c->H, dg[i],
                        wid[i], 1.f, l->g_qkv + off[i], tot, c->dt, PL_F32));
  }
  PL_TRY_GOTO(st, done,
              pl_convert(s, dh, c->dt, dh32, PL_F32, (size_t)(N * c->H)));
  /* dx = dy1 (residual) + rmsnorm_bwd(dh); g_n += ... */
  PL_TRY_GOTO(st, done,
              pl__rmsnorm_bwd(s, x, l->w_n, dh, dy1, dx, l->g_n, (float *)scr,
                              N, c->H, l->eps, c->dt));
done:
  free_async_n(dev, s, (void *const[]){dy1, dO, dq, dk, dv, dh, dh32, scr}, 8);
  acts_free(l, s, &a);
  return st;
}
