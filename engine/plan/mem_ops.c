/* mem_ops.c — the MoE chunk pipeline's allocation schedule (ops/
 * moe_pipeline.c, moe_expert.c, moe_plan.c) replayed on the planner's
 * symbolic allocator (plan_internal.h), for the FSDP2 baseline's replay
 * (baseline_fsdp2.c) while it remains; plateau's memory is measured
 * (mem_dry.c). */
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
