/* mem_ops.c — the operators' allocation schedules, replayed on the planner's
 * symbolic allocator (plan_internal.h) in the host's issue order with the
 * byte counts and tags of the code they mirror:
 *   the MoE chunk pipeline      ops/moe_pipeline.c, moe_expert.c, moe_plan.c
 *   the MoE FFN                 model/moe_ffn.c
 *   the decoder layer           model/layer.c, model/ulysses.c, attention.c
 *   Ring-DTP                    ops/ring_dtp.c
 * A change of an allocation there is a change here; the validation test
 * (test_mpi_plan.c) runs the real step and fails when they drift. */
#include <stdlib.h>
#include <string.h>

#include "backend/attention_kernels.h"
#include "backend/mlp_block_kernels.h"
#include "model/attention.h"
#include "model/layer.h"
#include "model/ulysses.h"
#include "ops/ce.h"
#include "ops/llep_plan.h"
#include "plan/plan_internal.h"

size_t pl__rms_scratch(int64_t N, int64_t H) {
  return pl__rmsnorm_bwd_scratch(N, H);
}

size_t pl__attn_ws(const pl_attn_shape *sh, pl_backend be) {
  return pl_attn_bwd_workspace_bytes(sh, be);
}

/* ---- the MoE chunk pipeline ------------------------------------------------
 */

static pl_status moe_record(pl__moe_replay *p);

pl_status pl__moe_replay_make(const pl_moe_cfg *cfg, int Ep, int64_t N,
                              double imb, bool worst, pl__moe_replay *out) {
  memset(out, 0, sizeof *out);
  out->cfg = cfg, out->Ep = Ep, out->N = N;
  const bool chunks = pl_moe_variant_desc_of(cfg->variant)->chunks;
  PL_TRY(pl_moe_variant_chunking(cfg->variant, N, cfg->c, cfg->K_max, &out->K,
                                 &out->c_eff));
  out->pipe = chunks && cfg->overlap;
  const int K = out->K, k = cfg->k;
  out->ch = calloc((size_t)K, sizeof *out->ch);
  if (!out->ch)
    return pl_set_error(PL_ENOMEM, "plan: host");
  const bool contig = chunks && cfg->contiguous;
  const int64_t ce = (N + K - 1) / K;
  const int64_t budget = 2 * (int64_t)Ep * k * out->c_eff;
  if (imb < 1)
    imb = 1;
  for (int i = 0; i < K; i++) {
    pl__chunk_replay *C = &out->ch[i];
    if (contig) {
      int64_t lo = (int64_t)i * ce, hi = lo + ce < N ? lo + ce : N;
      C->nt = hi > lo ? hi - lo : 0;
    } else {
      C->nt = N / K + (i < N % K ? 1 : 0);
    }
    const int64_t routes = C->nt * k;
    if (worst) { /* every source's routes to this rank */
      C->s_self = routes;
      C->S = 0;
      C->R = (int64_t)Ep * routes;
      C->Rmax = C->R;
      C->Smax = routes;
    } else { /* balanced: a rank receives per chunk what it sends */
      C->s_self = (routes + Ep / 2) / Ep;
      C->S = routes - C->s_self;
      C->R = (int64_t)((double)routes * imb + 0.5);
      C->Rmax = C->R;
      C->Smax = C->S;
    }
    C->em = !cfg->source_major && Ep > 1 && 3 * C->Rmax <= budget;
    out->nmeta +=
        C->nt + C->nt * k + 2 * C->S + 2 * C->s_self + (Ep > 1 ? 2 * C->R : 0);
  }
  return moe_record(out);
}

void pl__moe_replay_free(pl__moe_replay *p) {
  free(p->ch);
  free(p->fwd);
  p->ch = NULL;
  p->fwd = p->bwd = NULL;
}

/* dispatch_rows: the send rows, the receive buffer, the expert-major copy */
static pl__sym_buf dispatch_rows(pl__sym_track *t, const pl__moe_replay *p,
                                 const pl__chunk_replay *C) {
  const size_t rb = (size_t)p->cfg->H * pl_dtype_size(p->cfg->dt);
  pl__sym_buf xs = pl__sym_alloc(t, "dispatch", PL_TERM_DISPATCH, C->S * rb);
  pl__sym_buf rv = pl__sym_alloc(t, "dispatch", PL_TERM_DISPATCH, C->R * rb);
  pl__sym_free(t, &xs);
  if (C->em && C->R > 0) {
    pl__sym_buf nb = pl__sym_alloc(t, "dispatch", PL_TERM_DISPATCH, C->R * rb);
    pl__sym_free(t, &rv);
    rv = nb;
  }
  return rv;
}

/* return_combine: the inverse copy, the return rows; rows freed */
static void return_combine(pl__sym_track *t, const pl__moe_replay *p,
                           const pl__chunk_replay *C, pl__sym_buf *rows) {
  const size_t rb = (size_t)p->cfg->H * pl_dtype_size(p->cfg->dt);
  if (C->em && C->R > 0) {
    pl__sym_buf nb = pl__sym_alloc(t, "dispatch", PL_TERM_DISPATCH, C->R * rb);
    pl__sym_free(t, rows);
    *rows = nb;
  }
  pl__sym_buf back = pl__sym_alloc(t, "dispatch", PL_TERM_DISPATCH, C->S * rb);
  pl__sym_free(t, &back);
  pl__sym_free(t, rows);
}

static void expert_fwd(pl__sym_track *t, const pl__moe_replay *p,
                       const pl__chunk_replay *C) {
  const size_t ib =
      (size_t)C->R * (size_t)p->cfg->I * pl_dtype_size(p->cfg->dt);
  pl__sym_buf G = pl__sym_alloc(t, "expert", PL_TERM_EXPERT, ib);
  pl__sym_buf U = pl__sym_alloc(t, "expert", PL_TERM_EXPERT, ib);
  pl__sym_buf Ab = pl__sym_alloc(t, "expert", PL_TERM_EXPERT, ib);
  pl__sym_free(t, &G);
  pl__sym_free(t, &U);
  pl__sym_free(t, &Ab);
}

static void moe_forward(pl__sym_track *t, const pl__moe_replay *p,
                        pl__sym_buf *ctx) {
  const int K = p->K;
  *ctx = pl__sym_alloc(t, "routing", PL_TERM_EXPERT, (size_t)p->nmeta * 4);
  pl__sym_buf *B = calloc((size_t)K, sizeof *B);
  PL_ASSERT(B);
  const int64_t budget = 2 * (int64_t)p->Ep * p->cfg->k * p->c_eff;
  B[0] = dispatch_rows(t, p, &p->ch[0]);
  int pending = -1;
  for (int i = 0; i < K; i++) {
    expert_fwd(t, p, &p->ch[i]);
    if (pending >= 0) {
      return_combine(t, p, &p->ch[pending], &B[pending]);
      pending = -1;
    }
    if (i + 1 < K) {
      const pl__chunk_replay *a = &p->ch[i], *b = &p->ch[i + 1];
      int64_t x0 = a->em ? a->Rmax : 0, x1 = b->em ? b->Rmax : 0;
      int64_t smax = a->Smax > b->Smax ? a->Smax : b->Smax;
      if (x0 > smax)
        smax = x0;
      if (x1 > smax)
        smax = x1;
      if (p->pipe && a->Rmax + b->Rmax + smax <= budget) {
        B[i + 1] = dispatch_rows(t, p, b);
        pending = i;
      } else {
        return_combine(t, p, a, &B[i]);
        B[i + 1] = dispatch_rows(t, p, b);
      }
    } else {
      return_combine(t, p, &p->ch[i], &B[i]);
    }
  }
  free(B);
}

typedef struct bwd_bufs {
  pl__sym_buf X, D, wr, dwr;
} bwd_bufs;

static void bwd_dispatch_x(pl__sym_track *t, const pl__moe_replay *p,
                           const pl__chunk_replay *C, bwd_bufs *b) {
  b->X = dispatch_rows(t, p, C);
  pl__sym_buf ws = pl__sym_alloc(t, "routing", PL_TERM_EXPERT, C->S * 4);
  b->wr = pl__sym_alloc(t, "routing", PL_TERM_EXPERT, C->R * 4);
  pl__sym_free(t, &ws);
  if (C->em && C->R > 0) {
    pl__sym_buf nb = pl__sym_alloc(t, "routing", PL_TERM_EXPERT, C->R * 4);
    pl__sym_free(t, &b->wr);
    b->wr = nb;
  }
  b->dwr = pl__sym_alloc(t, "routing", PL_TERM_EXPERT, C->R * 4);
}

static void bwd_dispatch_d(pl__sym_track *t, const pl__moe_replay *p,
                           const pl__chunk_replay *C, bwd_bufs *b) {
  b->D = dispatch_rows(t, p, C);
}

static void bwd_compute(pl__sym_track *t, const pl__moe_replay *p,
                        const pl__chunk_replay *C, bwd_bufs *b) {
  const size_t ib =
      (size_t)C->R * (size_t)p->cfg->I * pl_dtype_size(p->cfg->dt);
  pl__sym_buf G = pl__sym_alloc(t, "expert", PL_TERM_EXPERT, ib);
  pl__sym_buf U = pl__sym_alloc(t, "expert", PL_TERM_EXPERT, ib);
  pl__sym_buf Ab = pl__sym_alloc(t, "expert", PL_TERM_EXPERT, ib);
  pl__sym_buf P = pl__sym_alloc(t, "expert", PL_TERM_EXPERT, ib);
  pl__sym_free(t, &P);
  pl__sym_free(t, &b->X);
  pl__sym_free(t, &Ab);
  pl__sym_free(t, &G);
  pl__sym_free(t, &U);
}

static void bwd_return(pl__sym_track *t, const pl__moe_replay *p,
                       const pl__chunk_replay *C, bwd_bufs *b) {
  return_combine(t, p, C, &b->D);
  if (C->em && C->R > 0) {
    pl__sym_buf nb = pl__sym_alloc(t, "routing", PL_TERM_EXPERT, C->R * 4);
    pl__sym_free(t, &b->dwr);
    b->dwr = nb;
  }
  pl__sym_buf dwb = pl__sym_alloc(t, "routing", PL_TERM_EXPERT, C->S * 4);
  pl__sym_free(t, &dwb);
  pl__sym_free(t, &b->dwr);
  pl__sym_free(t, &b->wr);
}

static void moe_backward(pl__sym_track *t, const pl__moe_replay *p) {
  const int K = p->K;
  bwd_bufs *b = calloc((size_t)K, sizeof *b);
  PL_ASSERT(b);
  /* helper weight gradients: no spill under the modelled routing */
  pl__sym_buf hg = pl__sym_alloc(t, "llep_grads", PL_TERM_EXPERT, 0);
  const int64_t budget = 2 * (int64_t)p->Ep * p->cfg->k * p->c_eff;
  bwd_dispatch_x(t, p, &p->ch[0], &b[0]);
  bwd_dispatch_d(t, p, &p->ch[0], &b[0]);
  int pending = -1;
  bool split = false;
  for (int i = 0; i < K; i++) {
    if (split) {
      bwd_return(t, p, &p->ch[i - 1], &b[i - 1]);
      bwd_dispatch_d(t, p, &p->ch[i], &b[i]);
      split = false;
    }
    bwd_compute(t, p, &p->ch[i], &b[i]);
    if (pending >= 0) {
      bwd_return(t, p, &p->ch[pending], &b[pending]);
      pending = -1;
    }
    if (i + 1 < K) {
      const pl__chunk_replay *a = &p->ch[i], *c = &p->ch[i + 1];
      int64_t x0 = a->em ? a->Rmax : 0, x1 = c->em ? c->Rmax : 0;
      int64_t t0 = a->Smax > x0 ? a->Smax : x0,
              t1 = c->Smax > x1 ? c->Smax : x1;
      int64_t need1 = a->Rmax + 2 * c->Rmax + t1;
      int64_t need2 = a->Rmax + 2 * c->Rmax + t0;
      int64_t need3 = a->Rmax + c->Rmax + (t0 > t1 ? t0 : t1);
      int64_t need4 = 2 * c->Rmax + t1;
      if (p->pipe && need1 <= budget && need2 <= budget) {
        bwd_dispatch_x(t, p, c, &b[i + 1]);
        bwd_dispatch_d(t, p, c, &b[i + 1]);
        pending = i;
      } else if (p->pipe && need3 <= budget && need4 <= budget) {
        bwd_dispatch_x(t, p, c, &b[i + 1]);
        split = true;
      } else {
        bwd_return(t, p, a, &b[i]);
        bwd_dispatch_x(t, p, c, &b[i + 1]);
        bwd_dispatch_d(t, p, c, &b[i + 1]);
      }
    } else {
      bwd_return(t, p, &p->ch[i], &b[i]);
    }
  }
  pl__sym_free(t, &hg);
  free(b);
}

/* The two schedules recorded once (pl__moe_replay_make). */
static pl_status moe_record(pl__moe_replay *p) {
  p->fwd = malloc(2 * sizeof *p->fwd);
  if (!p->fwd)
    return pl_set_error(PL_ENOMEM, "plan: host");
  p->bwd = p->fwd + 1;
  pl__sym_init(p->fwd);
  pl__sym_init(p->bwd);
  moe_forward(p->fwd, p, &p->fwd_ctx);
  moe_backward(p->bwd, p);
  return PL_OK;
}

void pl__moe_replay_forward(pl__sym_track *t, const pl__moe_replay *p,
                            pl__sym_buf *ctx) {
  int map[PL_PLAN_MAX_TAGS];
  pl__sym_apply(t, p->fwd, map);
  *ctx = p->fwd_ctx;
  ctx->tag = map[ctx->tag];
}

void pl__moe_replay_backward(pl__sym_track *t, const pl__moe_replay *p) {
  pl__sym_apply(t, p->bwd, NULL);
}

/* ---- the decoder layer ------------------------------------------------------
 */

typedef pl__acts_replay acts;

/* bytes of a head-sharded key/value tensor over the Ulysses group: S·n_kv/D
 * heads' rows, or S rows of one head replicated past D = n_kv */
static size_t kv_head_bytes(const pl__layer_replay *l) {
  return (size_t)l->N * (size_t)l->D *
         (size_t)pl_ulysses_heads_per_rank(l->n_kv, (int)l->D) * l->d * l->es;
}

/* the Ulysses forward's buffers (model/ulysses.c) around the kernel */
static void ulysses_fwd(pl__sym_track *t, const pl__layer_replay *l) {
  const size_t qb = (size_t)l->N * l->n_q * l->d * l->es,
               kb = (size_t)l->N * l->n_kv * l->d * l->es,
               kh = kv_head_bytes(l);
  pl__sym_buf b[4] = {pl__sym_alloc(t, "attention", PL_TERM_ATTN, qb),
                      pl__sym_alloc(t, "attention", PL_TERM_ATTN, kh),
                      pl__sym_alloc(t, "attention", PL_TERM_ATTN, kh),
                      pl__sym_alloc(t, "attention", PL_TERM_ATTN, qb)};
  const size_t pk[4] = {qb, kb, kb, qb}; /* q k v to heads, o back */
  for (int i = 0; i < 4; i++) {
    pl__sym_buf x = pl__sym_alloc(t, "attention", PL_TERM_ATTN, pk[i]);
    pl__sym_free(t, &x);
  }
  for (int i = 0; i < 4; i++)
    pl__sym_free(t, &b[i]);
}

/* model/layer.c's attn_forward: the kept buffers under tag "kept" (keep:
 * what this forward keeps); have_o: a backward after an ATTN-keeping
 * forward (o and lse are the forward's: no attention, no Ulysses). */
static void attn_forward(pl__sym_track *t, const pl__layer_replay *l, acts *a,
                         int keep, bool have_o) {
  const size_t NH = (size_t)l->N * l->H * l->es,
               nq = (size_t)l->N * l->n_q * l->d * l->es,
               nk = (size_t)l->N * l->n_kv * l->d * l->es;
  const char *ta = keep == PL_LAYER_KEEP_ALL ? "kept" : "activations";
  const char *to = keep != PL_LAYER_KEEP_NONE ? "kept" : "activations";
  a->h = pl__sym_alloc(t, ta, PL_TERM_ACTS, NH);
  a->q = pl__sym_alloc(t, ta, PL_TERM_ACTS, nq);
  a->k = pl__sym_alloc(t, ta, PL_TERM_ACTS, nk);
  a->v = pl__sym_alloc(t, ta, PL_TERM_ACTS, nk);
  if (!have_o)
    a->o = pl__sym_alloc(t, to, PL_TERM_ACTS, nq);
  a->y1 = pl__sym_alloc(t, ta, PL_TERM_ACTS, NH);
  if (!have_o)
    a->lse = pl__sym_alloc(t, to, PL_TERM_ACTS,
                           (size_t)(l->n_q / l->D) * (size_t)(l->N * l->D) * 4);
  if (l->D > 1 && !have_o)
    ulysses_fwd(t, l);
}

static void acts_free(pl__sym_track *t, acts *a) {
  pl__sym_buf *ps[] = {&a->h, &a->q, &a->k, &a->v, &a->o, &a->y1, &a->lse};
  for (int i = 0; i < 7; i++)
    pl__sym_free(t, ps[i]);
}

static void ffn_forward(pl__sym_track *t, const pl__layer_replay *l,
                        pl__sym_buf *ctx) {
  const size_t NH = (size_t)l->N * l->H * l->es;
  pl__sym_buf h = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH), gu = {0},
              a = {0};
  pl__sym_buf probs = {0}, idx = {0}, w = {0};
  if (l->E_route > 0) {
    const size_t nk = (size_t)l->N * l->k * 4;
    probs = pl__sym_alloc(t, "router", PL_TERM_EXPERT,
                          (size_t)l->N * l->E_route * 4);
    idx = pl__sym_alloc(t, "router", PL_TERM_EXPERT, nk);
    w = pl__sym_alloc(t, "router", PL_TERM_EXPERT, nk);
    pl__moe_replay_forward(t, l->moe, ctx);
    if (!l->keep_ctx)
      pl__sym_free(t, ctx);
  }
  if (l->I_s > 0 && l->N > 0) {
    gu = pl__sym_alloc(t, "activations", PL_TERM_ACTS,
                       (size_t)l->N * 2 * l->I_s * l->es);
    a = pl__sym_alloc(t, "activations", PL_TERM_ACTS,
                      (size_t)l->N * l->I_s * l->es);
  }
  pl__sym_free(t, &probs);
  pl__sym_free(t, &idx);
  pl__sym_free(t, &w);
  pl__sym_free(t, &h);
  pl__sym_free(t, &gu);
  pl__sym_free(t, &a);
  if (l->ep_w) /* the slot releases the expert unit */
    pl__sym_free(t, l->ep_w);
}

void pl__layer_replay_forward(pl__sym_track *t, const pl__layer_replay *l,
                              pl__sym_buf *ctx, pl__acts_replay *kept) {
  if (l->N == 0)
    return;
  acts a;
  memset(&a, 0, sizeof a);
  attn_forward(t, l, &a, l->keep, false);
  ffn_forward(t, l, ctx);
  memset(kept, 0, sizeof *kept);
  if (l->keep == PL_LAYER_KEEP_ALL) {
    *kept = a;
    memset(&a, 0, sizeof a);
  } else if (l->keep == PL_LAYER_KEEP_ATTN) {
    kept->o = a.o, kept->lse = a.lse;
    a.o.live = a.lse.live = false;
  }
  acts_free(t, &a);
}

static void ffn_backward(pl__sym_track *t, const pl__layer_replay *l,
                         pl__sym_buf *ctx) {
  const size_t NH = (size_t)l->N * l->H * l->es, nh4 = (size_t)l->N * l->H * 4;
  pl__sym_buf eg = {0};
  if (l->ep_w) /* the slot opens the expert unit's gradient */
    eg = pl__sym_alloc(t, "zero3_grads", PL_TERM_UNIT_GRADS, l->ep_full * 4);
  pl__sym_buf h = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
  pl__sym_buf dh32 = pl__sym_alloc(t, "activations", PL_TERM_ACTS, nh4);
  pl__sym_buf probs = {0}, idx = {0}, w = {0}, tmp = {0}, dhe = {0}, dw = {0},
              dlog = {0}, dhr = {0}, gu = {0}, a = {0}, da = {0}, dgu = {0},
              scr = {0};
  if (l->E_route > 0) {
    const size_t nk = (size_t)l->N * l->k * 4;
    probs = pl__sym_alloc(t, "router", PL_TERM_EXPERT,
                          (size_t)l->N * l->E_route * 4);
    idx = pl__sym_alloc(t, "router", PL_TERM_EXPERT, nk);
    w = pl__sym_alloc(t, "router", PL_TERM_EXPERT, nk);
    if (!l->keep_ctx) {
      tmp = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
      pl__moe_replay_forward(t, l->moe, ctx);
      pl__sym_free(t, &tmp);
    }
    dhe = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
    dw = pl__sym_alloc(t, "router", PL_TERM_EXPERT, nk);
    pl__moe_replay_backward(t, l->moe);
    pl__sym_free(t, ctx);
    dlog = pl__sym_alloc(t, "router", PL_TERM_EXPERT,
                         (size_t)l->N * l->E_route * l->es);
    dhr = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
  }
  if (l->I_s > 0 && l->N > 0) {
    const size_t g2 = (size_t)l->N * 2 * l->I_s * l->es,
                 g1 = (size_t)l->N * l->I_s * l->es;
    gu = pl__sym_alloc(t, "activations", PL_TERM_ACTS, g2);
    a = pl__sym_alloc(t, "activations", PL_TERM_ACTS, g1);
    da = pl__sym_alloc(t, "activations", PL_TERM_ACTS, g1);
    dgu = pl__sym_alloc(t, "activations", PL_TERM_ACTS, g2);
  }
  pl__sym_buf dh = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
  if (l->be == PL_BACKEND_CUDA && l->N > 0)
    scr = pl__sym_alloc(t, "activations", PL_TERM_ACTS,
                        pl__rms_scratch(l->N, l->H) * 4);
  pl__sym_buf *ps[] = {&probs, &idx, &w,    &h,  &gu,  &a,    &da, &dgu,
                       &dhe,   &dhr, &dlog, &dh, &tmp, &dh32, &dw, &scr};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl__sym_free(t, ps[i]);
  if (l->ep_w) { /* released, its gradient reduce-scattered */
    pl__sym_free(t, l->ep_w);
    if (l->ep_acc) {
      pl__sym_buf acc =
          pl__sym_alloc(t, "zero3_grads", PL_TERM_UNIT_GRADS, l->ep_shard * 4);
      pl__sym_free(t, &acc);
    }
    pl__sym_free(t, &eg);
  }
}

static void attn_backward(pl__sym_track *t, const pl__layer_replay *l) {
  pl_attn_shape sh = {.batch = 1,
                      .seq = l->N,
                      .n_q = l->n_q,
                      .n_kv = l->n_kv,
                      .head_dim = l->d,
                      .dtype = l->dt,
                      .kernels = l->ak};
  if (l->D <= 1) {
    pl__sym_buf ws =
        pl__sym_alloc(t, "attention", PL_TERM_ATTN, pl__attn_ws(&sh, l->be));
    pl__sym_free(t, &ws);
    return;
  }
  const size_t qb = (size_t)l->N * l->n_q * l->d * l->es,
               kb = (size_t)l->N * l->n_kv * l->d * l->es,
               kh = kv_head_bytes(l);
  const size_t bytes[8] = {qb, kh, kh, qb, qb, qb, kh, kh};
  pl__sym_buf b[8];
  for (int i = 0; i < 8; i++)
    b[i] = pl__sym_alloc(t, "attention", PL_TERM_ATTN, bytes[i]);
  const size_t in[5] = {qb, kb, kb, qb, qb}, back[3] = {qb, kh, kh};
  for (int i = 0; i < 5; i++) {
    pl__sym_buf x = pl__sym_alloc(t, "attention", PL_TERM_ATTN, in[i]);
    pl__sym_free(t, &x);
  }
  pl_attn_shape hs = sh;
  hs.seq = l->N * l->D;
  hs.n_q = l->n_q / (int)l->D;
  hs.n_kv = pl_ulysses_heads_per_rank(l->n_kv, (int)l->D);
  pl__sym_buf ws =
      pl__sym_alloc(t, "attention", PL_TERM_ATTN, pl__attn_ws(&hs, l->be));
  pl__sym_free(t, &ws);
  for (int i = 0; i < 3; i++) {
    pl__sym_buf x = pl__sym_alloc(t, "attention", PL_TERM_ATTN, back[i]);
    pl__sym_free(t, &x);
  }
  for (int i = 0; i < 8; i++)
    pl__sym_free(t, &b[i]);
}

void pl__layer_replay_backward(pl__sym_track *t, const pl__layer_replay *l,
                               pl__sym_buf *ctx, pl__acts_replay *kept) {
  if (l->N == 0)
    return;
  const size_t NH = (size_t)l->N * l->H * l->es,
               nq = (size_t)l->N * l->n_q * l->d * l->es,
               nk = (size_t)l->N * l->n_kv * l->d * l->es;
  acts a;
  if (l->keep == PL_LAYER_KEEP_ALL) {
    a = *kept;
  } else if (l->keep == PL_LAYER_KEEP_ATTN) {
    memset(&a, 0, sizeof a);
    a.o = kept->o, a.lse = kept->lse;
    attn_forward(t, l, &a, PL_LAYER_KEEP_NONE, true);
  } else {
    attn_forward(t, l, &a, PL_LAYER_KEEP_NONE, false);
  }
  memset(kept, 0, sizeof *kept);
  pl__sym_buf g[8] = {
      pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH),
      pl__sym_alloc(t, "activations", PL_TERM_ACTS, nq),
      pl__sym_alloc(t, "activations", PL_TERM_ACTS, nq),
      pl__sym_alloc(t, "activations", PL_TERM_ACTS, nk),
      pl__sym_alloc(t, "activations", PL_TERM_ACTS, nk),
      pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH),
      pl__sym_alloc(t, "activations", PL_TERM_ACTS, (size_t)l->N * l->H * 4),
      pl__sym_alloc(t, "activations", PL_TERM_ACTS,
                    pl__rms_scratch(l->N, l->H) * 4)};
  ffn_backward(t, l, ctx);
  attn_backward(t, l);
  for (int i = 0; i < 8; i++)
    pl__sym_free(t, &g[i]);
  acts_free(t, &a);
}

/* ---- Ring-DTP
 * ----------------------------------------------------------------- */

void pl__head_replay_make(pl_dtype dt, int64_t n, int64_t h, int64_t v, int P,
                          int64_t block, pl__head_replay *out) {
  memset(out, 0, sizeof *out);
  out->dt = dt, out->n = n, out->h = h, out->v = v, out->P = P;
  out->nmax = n;
  int64_t c0, w0;
  pl_ce_shard(v, P, 0, &c0, &w0); /* the first shard is the widest */
  out->vmax = w0;
  out->move_w = P > 1 && out->nmax > out->vmax;
  out->nc = n;
  if (dt == PL_BF16 && P > 1 && out->move_w)
    out->nc = (n + 7) / 8;
  out->vb = block > 0 ? block : pl_ce_default_block(dt);
  if (out->vb > out->vmax)
    out->vb = out->vmax;
  if (out->vb < 1)
    out->vb = 1;
  if (P == 1) {
    pl_ce_problem q = {.dt = dt, .n = n, .h = h, .v = v, .block = out->vb};
    out->chunk = pl_ce_head3_rows(&q);
  }
}

/* the allocs helper of ring_dtp.c: released in reverse order */
typedef struct hbufs {
  pl__sym_buf b[16];
  int n;
} hbufs;

static void take(pl__sym_track *t, hbufs *a, const char *tag, size_t bytes) {
  PL_ASSERT(a->n < 16);
  a->b[a->n++] = pl__sym_alloc(t, tag, PL_TERM_LOGITS, bytes);
}

static void release(pl__sym_track *t, hbufs *a) {
  for (int i = a->n - 1; i >= 0; i--)
    pl__sym_free(t, &a->b[i]);
  a->n = 0;
}

void pl__head_replay_run(pl__sym_track *t, const pl__head_replay *h,
                         pl__sym_buf *aux) {
  const size_t es = pl_dtype_size(h->dt);
  const bool f32 = h->dt == PL_F32, act = !h->move_w || h->P == 1;
  const int64_t n = h->n, H = h->h, nmax = h->nmax, vmax = h->vmax, vb = h->vb;
  hbufs a = {0};
  if (h->chunk > 0) {
    /* P = 1, the three-GEMM schedule (ops/ce.c pl_ce_head3, reduction none):
     * the loss statistics and the row factors, then the chunk's logits in
     * the storage dtype; nothing is saved for a backward */
    pl__sym_free(t, aux);
    take(t, &a, "ce_state", 2 * 4);
    take(t, &a, "ce_state", (size_t)n * 4);
    take(t, &a, "logits", (size_t)(h->chunk * h->v) * es);
    release(t, &a);
    return;
  }
  /* forward */
  pl__sym_free(t, aux);
  *aux = pl__sym_alloc(t, "ce_state", PL_TERM_LOGITS, (size_t)(2 * n) * 4);
  take(t, &a, "ce_state", (size_t)(3 * n) * 4);
  if (act) {
    const int64_t rows = h->P == 1 ? n : nmax;
    take(t, &a, "logits", (size_t)(rows * vb) * 4);
    for (int b = 0; b < 2 && h->P > 1; b++) {
      if (b == 0 && h->P == 2)
        continue;
      take(t, &a, "ring", (size_t)(nmax * H) * es);
      take(t, &a, "ring", (size_t)nmax * 4);
    }
    if (h->P > 1)
      for (int b = 0; b < 3; b++)
        take(t, &a, "ring", (size_t)(3 * nmax) * 4);
  } else {
    take(t, &a, "logits", (size_t)(n * vb) * 4);
    for (int b = 0; b < 2; b++) {
      if (b == 0 && h->P == 2)
        continue;
      take(t, &a, "ring", (size_t)(H * vmax) * es);
    }
  }
  release(t, &a);
  /* backward */
  if (act) {
    const int64_t rows = h->P == 1 ? n : nmax;
    take(t, &a, "logits", (size_t)(rows * vb) * 4);
    if (!f32)
      take(t, &a, "logits", (size_t)(rows * vb) * 2);
    for (int b = 0; b < 2 && h->P > 1; b++) {
      if (b == 0 && h->P == 2)
        continue;
      take(t, &a, "ring", (size_t)(nmax * H) * es);
      take(t, &a, "ring", (size_t)nmax * 4);
      take(t, &a, "ring", (size_t)nmax * 8);
    }
    if (h->P > 1)
      for (int b = 0; b < 2; b++)
        take(t, &a, "ring", (size_t)(nmax * H) * 4);
    if (!f32 && h->P == 1)
      take(t, &a, "grads", (size_t)(n * H) * 4);
  } else {
    const int64_t rows = f32 ? n : h->nc;
    take(t, &a, "logits", (size_t)(rows * vb) * 4);
    if (!f32)
      take(t, &a, "logits", (size_t)(rows * vb) * 2);
    if (!f32)
      take(t, &a, "grads", (size_t)(h->nc * H) * 4);
    for (int b = 0; b < 2; b++) {
      if (b == 0 && h->P == 2)
        continue;
      take(t, &a, "ring", (size_t)(H * vmax) * es);
    }
    for (int b = 0; b < 2; b++)
      take(t, &a, "ring", (size_t)(H * vmax) * 4);
  }
  release(t, &a);
}
