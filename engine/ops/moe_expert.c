/* moe_expert.c — the expert compute of one chunk (DESIGN.md §1.1): the
 * grouped SwiGLU expert GEMMs over the chunk's received rows, forward
 * (G = X Wg, U = X Wu, A = silu(G) * U, Y = A Wd) and backward with the
 * recompute of G, U, A from the re-dispatched input rows, so only one chunk's
 * expert intermediates (R x I each, tag "expert") are alive at a time.  One
 * GEMM per group (expert slot, or (source, expert) segment of a source-major
 * chunk), each with its expert's weights: native experts from the layer's
 * weights, borrowed ones from the helper weights of the context.
 *
 * Lanes (cfg.lanes): a projection's per-group GEMMs are spread over the
 * compute stream and extra streams, so small groups fill the GPU together;
 * in backward the gate/up weight gradients run on the lanes beside dWd and
 * dX.  Every GEMM writes its own rows or its own expert's gradient, so the
 * results do not depend on the lanes. */
#include <stdlib.h>

#include "backend/moe_kernels.h"
#include "core/internal.h"
#include "ops/moe_internal.h"

/* ---- kernel dispatch ----------------------------------------------------- */

/* The kernels of backend/moe_kernels.h on s's backend; an empty launch (no
 * rows) issues nothing. */
static pl_status moe_swiglu_fwd(pl_stream *s, void *A, const void *G,
                                const void *U, int64_t n, int64_t I,
                                pl_dtype dt) {
  if (n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_moe_swiglu_fwd(s, A, G, U, n, I, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_moe_swiglu_fwd(s, A, G, U, n, I, dt);
}
static pl_status moe_swiglu_bwd(pl_stream *s, void *G, void *U, const void *P,
                                const void *A, const float *w, float *dw,
                                int64_t n, int64_t I, pl_dtype dt) {
  if (n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_moe_swiglu_bwd(s, G, U, P, A, w, dw, n, I, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_moe_swiglu_bwd(s, G, U, P, A, w, dw, n, I, dt);
}
static pl_status moe_scale_rows(pl_stream *s, void *X, const float *w,
                                int64_t n, int64_t H, pl_dtype dt) {
  if (n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_moe_scale_rows(s, X, w, n, H, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_moe_scale_rows(s, X, w, n, H, dt);
}
pl_status pl__moe_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,
                       int64_t k, float alpha, const void *A, int64_t lda,
                       const void *B, int64_t ldb, float beta, void *C,
                       int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt) {
  if (m == 0 || n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_moe_gemm(s, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                             ldc, ab_dt, c_dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_moe_gemm(s, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                          ldc, ab_dt, c_dt);
}

/* ---- compute lanes (cfg.lanes) ------------------------------------------- */

/* One expert GEMM: C (m x n) = op(A) op(B) (+ beta C), row-major. */
typedef struct mg {
  int64_t m, n, k;
  const void *A, *B;
  void *C;
  int64_t lda, ldb, ldc;
} mg;

/* The lanes start after everything issued on s so far. */
static pl_status fork_lanes(pl_moe *m, pl_stream *s) {
  if (!m->nl)
    return PL_OK;
  PL_TRY(pl_event_record(m->evf, s));
  for (int l = 0; l < m->nl; l++)
    PL_TRY(pl_stream_wait(m->ln[l], m->evf));
  return PL_OK;
}
/* s continues after everything issued on the lanes so far. */
static pl_status join_lanes(pl_moe *m, pl_stream *s) {
  for (int l = 0; l < m->nl; l++) {
    PL_TRY(pl_event_record(m->evj[l], m->ln[l]));
    PL_TRY(pl_stream_wait(s, m->evj[l]));
  }
  return PL_OK;
}

/* Where run_gemms issues: SOLO on s, in order; SPREAD round-robin over s
 * and the lanes, forked from s and joined back into it; LANES round-robin
 * over the lanes only, LANE0 on the first lane, in order (GEMMs that share
 * a C), both forked from s and not joined (the caller joins). */
enum { SOLO, SPREAD, LANES, LANE0 };

/* n independent GEMMs (distinct C).  Without lanes every mode is SOLO. */
static pl_status run_gemms(pl_moe *m, pl_stream *s, const mg *g, int n, bool ta,
                           bool tb, float beta, pl_dtype cdt, int mode) {
  const pl_dtype dt = m->cfg.dt;
  if (!m->nl)
    mode = SOLO;
  if (mode != SOLO)
    PL_TRY(fork_lanes(m, s));
  const int first = mode == LANES || mode == LANE0 ? 1 : 0;
  const int nw = mode == SOLO ? 1 : mode == LANE0 ? 2 : m->nl + 1;
  int w = first; /* 0: s; l >= 1: lane l-1 */
  for (int i = 0; i < n; i++) {
    pl_stream *q = w == 0 ? s : m->ln[w - 1];
    PL_TRY(pl__moe_gemm(q, ta, tb, g[i].m, g[i].n, g[i].k, 1.0f, g[i].A,
                        g[i].lda, g[i].B, g[i].ldb, beta, g[i].C, g[i].ldc, dt,
                        cdt));
    if (++w == nw)
      w = first;
  }
  if (mode == SPREAD)
    PL_TRY(join_lanes(m, s));
  return PL_OK;
}

/* Weight pointers of a group's expert slot. */
static void slot_weights(const pl_moe *m, const pl_moe_ctx *c,
                         const pl_moe_weights *W, int slot, const void **wg,
                         const void **wu, const void **wd) {
  size_t HI = (size_t)m->cfg.H * m->cfg.I, b = pl_dtype_size(m->cfg.dt);
  if (slot < m->El) {
    *wg = (const char *)W->wg + (size_t)slot * HI * b;
    *wu = (const char *)W->wu + (size_t)slot * HI * b;
    *wd = (const char *)W->wd + (size_t)slot * HI * b;
  } else {
    const char *base =
        (const char *)c->hw + (size_t)(slot - m->El) * 3 * HI * b;
    *wg = base;
    *wu = base + HI * b;
    *wd = base + 2 * HI * b;
  }
}
static void slot_grads(const pl_moe *m, const pl_moe_wgrads *G, float *hg,
                       int slot, float **gg, float **gu, float **gd) {
  size_t HI = (size_t)m->cfg.H * m->cfg.I;
  if (slot < m->El) {
    *gg = G->wg + (size_t)slot * HI;
    *gu = G->wu + (size_t)slot * HI;
    *gd = G->wd + (size_t)slot * HI;
  } else {
    float *base = hg + (size_t)(slot - m->El) * 3 * HI;
    *gg = base;
    *gu = base + HI;
    *gd = base + 2 * HI;
  }
}

/* ---- one chunk ----------------------------------------------------------- */

/* X (R x H) -> Y in place: per group G = X Wg, U = X Wu (R x I), then
 * A = silu(G) * U, Y = A Wd; G and U are freed before A's GEMMs. */
pl_status pl__moe_expert_fwd(pl_moe *m, pl_moe_ctx *c, pl__moe_chunk *C,
                             const pl_moe_weights *W, void *X, pl_stream *s) {
  const int64_t H = m->cfg.H, I = m->cfg.I;
  const pl_dtype dt = m->cfg.dt;
  const size_t b = pl_dtype_size(dt);
  const int ng = pl__on_dry(s) ? 0 : C->ng; /* a dry device issues none */
  void *G = NULL, *U = NULL, *A = NULL;
  mg *g2 = malloc((size_t)(2 * ng + 1) * sizeof *g2);
  if (!g2)
    return pl_set_error(PL_ENOMEM, "moe: host");
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * I * b,
                             "expert", s, &G));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * I * b,
                             "expert", s, &U));
#define ROWS(base, w) ((char *)(base) + (size_t)gr->row0 * (w)*b)
  for (int gi = 0; gi < ng; gi++) {
    const pl__moe_group *gr = &C->g[gi];
    const void *wg, *wu, *wd;
    slot_weights(m, c, W, gr->slot, &wg, &wu, &wd);
    g2[2 * gi] = (mg){gr->rows, I, H, ROWS(X, H), wg, ROWS(G, I), H, I, I};
    g2[2 * gi + 1] = (mg){gr->rows, I, H, ROWS(X, H), wu, ROWS(U, I), H, I, I};
  }
  PL_TRY_GOTO(st, done,
              run_gemms(m, s, g2, 2 * ng, false, false, 0.0f, dt, SPREAD));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * I * b,
                             "expert", s, &A));
  PL_TRY_GOTO(st, done, moe_swiglu_fwd(s, A, G, U, C->R, I, dt));
  pl_free_async(m->dev, G, s);
  pl_free_async(m->dev, U, s);
  G = U = NULL;
  PL_TRY_GOTO(st, done, pl__moe_mark(c, PL_MOE_ST_FWD_UP, s));
  for (int gi = 0; gi < ng; gi++) {
    const pl__moe_group *gr = &C->g[gi];
    const void *wg, *wu, *wd;
    slot_weights(m, c, W, gr->slot, &wg, &wu, &wd);
    g2[gi] = (mg){gr->rows, H, I, ROWS(A, I), wd, ROWS(X, H), I, H, H};
  }
  PL_TRY_GOTO(st, done,
              run_gemms(m, s, g2, ng, false, false, 0.0f, dt, SPREAD));
#undef ROWS
  pl_free_async(m->dev, A, s);
  A = NULL;
  st = pl__moe_mark(c, PL_MOE_ST_FWD_DOWN, s);
done:
  pl_free_async(m->dev, G, s);
  pl_free_async(m->dev, U, s);
  pl_free_async(m->dev, A, s);
  free(g2);
  return st;
}

/* dX = dG Wg^T + dU Wu^T into D, on s, for the groups of chunk C (g2: room
 * for C->ng GEMMs). */
static pl_status expert_dx(pl_moe *m, pl_moe_ctx *c, const pl__moe_chunk *C,
                           const pl_moe_weights *W, mg *g2, const void *G,
                           const void *U, void *D, pl_stream *s) {
  const int64_t H = m->cfg.H, I = m->cfg.I;
  const pl_dtype dt = m->cfg.dt;
  const size_t b = pl_dtype_size(dt);
  const int ng = pl__on_dry(s) ? 0 : C->ng; /* a dry device issues none */
#define ROWS(base, w) ((char *)(base) + (size_t)gr->row0 * (w)*b)
  for (int gi = 0; gi < ng; gi++) {
    const pl__moe_group *gr = &C->g[gi];
    const void *wg, *wu, *wd;
    slot_weights(m, c, W, gr->slot, &wg, &wu, &wd);
    g2[gi] = (mg){gr->rows, H, I, ROWS(G, I), wg, ROWS(D, H), I, I, H};
  }
  PL_TRY(run_gemms(m, s, g2, ng, false, true, 0.0f, dt, SOLO));
  for (int gi = 0; gi < ng; gi++) {
    const pl__moe_group *gr = &C->g[gi];
    const void *wg, *wu, *wd;
    slot_weights(m, c, W, gr->slot, &wg, &wu, &wd);
    g2[gi] = (mg){gr->rows, H, I, ROWS(U, I), wu, ROWS(D, H), I, I, H};
  }
  return run_gemms(m, s, g2, ng, false, true, 1.0f, dt, SOLO);
#undef ROWS
}

/* Recompute G, U, A from X; P = dout Wd^T; dw = <P, A> and dG, dU in place
 * (SwiGLU backward); dWg += X^T dG, dWu += X^T dU; dWd += A^T (w * dout);
 * dX = dG Wg^T + dU Wu^T into D.  X is freed as soon as its last GEMM is
 * issued and evX recorded after the free, so the next chunk's dispatch can
 * wait for it (ops/moe_internal.h has the arguments).  With lanes, dWg and dWu
 * (reading X, dG, dU) run on the lanes beside dWd and dX on s: the weight
 * gradients are bound by their fp32 accumulators' traffic, dX by the tensor
 * cores. */
pl_status pl__moe_expert_bwd(pl_moe *m, pl_moe_ctx *c, pl__moe_chunk *C,
                             const pl_moe_weights *W, pl_moe_wgrads *Gw,
                             float *hg, void **Xp, void *D, const float *wr,
                             float *dwr, pl_event *evX, pl_event *evDD,
                             pl_stream *s) {
  const int64_t H = m->cfg.H, I = m->cfg.I;
  const pl_dtype dt = m->cfg.dt;
  const size_t b = pl_dtype_size(dt);
  const int ng = pl__on_dry(s) ? 0 : C->ng; /* a dry device issues none */
  void *X = *Xp;
  pl_stream *xs = m->nl ? m->ln[0] : s; /* where X's last use ends */
  void *G = NULL, *U = NULL, *A = NULL, *P = NULL;
  size_t ib = (size_t)C->R * I * b;
  mg *g2 = malloc((size_t)(2 * ng + 1) * sizeof *g2);
  if (!g2)
    return pl_set_error(PL_ENOMEM, "moe: host");
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(m->dev, PL_ARENA_DEVICE, ib, "expert", s, &G));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(m->dev, PL_ARENA_DEVICE, ib, "expert", s, &U));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(m->dev, PL_ARENA_DEVICE, ib, "expert", s, &A));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(m->dev, PL_ARENA_DEVICE, ib, "expert", s, &P));
#define ROWS(base, w) ((char *)(base) + (size_t)gr->row0 * (w)*b)
  /* recompute G, U, A (X only: the dout rows may still be arriving, evDD) */
  for (int gi = 0; gi < ng; gi++) {
    const pl__moe_group *gr = &C->g[gi];
    const void *wg, *wu, *wd;
    slot_weights(m, c, W, gr->slot, &wg, &wu, &wd);
    g2[2 * gi] = (mg){gr->rows, I, H, ROWS(X, H), wg, ROWS(G, I), H, I, I};
    g2[2 * gi + 1] = (mg){gr->rows, I, H, ROWS(X, H), wu, ROWS(U, I), H, I, I};
  }
  PL_TRY_GOTO(st, done,
              run_gemms(m, s, g2, 2 * ng, false, false, 0.0f, dt, SPREAD));
  PL_TRY_GOTO(st, done, moe_swiglu_fwd(s, A, G, U, C->R, I, dt));
  PL_TRY_GOTO(st, done, pl__moe_mark(c, PL_MOE_ST_BWD_RECOMPUTE, s));
  if (evDD)
    PL_TRY_GOTO(st, done, pl_stream_wait(s, evDD));
  /* P = dout * Wd^T */
  for (int gi = 0; gi < ng; gi++) {
    const pl__moe_group *gr = &C->g[gi];
    const void *wg, *wu, *wd;
    slot_weights(m, c, W, gr->slot, &wg, &wu, &wd);
    g2[gi] = (mg){gr->rows, I, H, ROWS(D, H), wd, ROWS(P, I), H, H, I};
  }
  PL_TRY_GOTO(st, done, run_gemms(m, s, g2, ng, false, true, 0.0f, dt, SPREAD));
  /* dw = <P, A>; G <- dG, U <- dU */
  PL_TRY_GOTO(st, done, moe_swiglu_bwd(s, G, U, P, A, wr, dwr, C->R, I, dt));
  pl_free_async(m->dev, P, s);
  P = NULL;
  PL_TRY_GOTO(st, done, pl__moe_mark(c, PL_MOE_ST_BWD_DACT, s));
  /* dWg += X^T dG; dWu += X^T dU: the last uses of X (on the lanes if any,
   * where X is freed and evX recorded; joined after dX) */
  for (int gi = 0; gi < ng; gi++) {
    const pl__moe_group *gr = &C->g[gi];
    float *gg, *gu, *gd;
    slot_grads(m, Gw, hg, gr->slot, &gg, &gu, &gd);
    g2[2 * gi] = (mg){H, I, gr->rows, ROWS(X, H), ROWS(G, I), gg, H, I, I};
    g2[2 * gi + 1] = (mg){H, I, gr->rows, ROWS(X, H), ROWS(U, I), gu, H, I, I};
  }
  /* a source-major chunk has several groups per slot: one lane, in order */
  PL_TRY_GOTO(st, done,
              run_gemms(m, s, g2, 2 * ng, true, false, 1.0f, PL_F32,
                        C->em ? LANES : LANE0));
  /* lane 0 frees X after the other lanes' uses of it */
  for (int l = 1; l < m->nl; l++) {
    PL_TRY_GOTO(st, done, pl_event_record(m->evj[l], m->ln[l]));
    PL_TRY_GOTO(st, done, pl_stream_wait(xs, m->evj[l]));
  }
  pl_free_async(m->dev, X, xs);
  *Xp = NULL;
  if (evX)
    PL_TRY_GOTO(st, done, pl_event_record(evX, xs));
  /* dY = w * dout; dWd += A^T dY */
  PL_TRY_GOTO(st, done, moe_scale_rows(s, D, wr, C->R, H, dt));
  for (int gi = 0; gi < ng; gi++) {
    const pl__moe_group *gr = &C->g[gi];
    float *gg, *gu, *gd;
    slot_grads(m, Gw, hg, gr->slot, &gg, &gu, &gd);
    g2[gi] = (mg){I, H, gr->rows, ROWS(A, I), ROWS(D, H), gd, I, H, H};
  }
  /* on s alone when lanes carry dWg, dWu */
  PL_TRY_GOTO(st, done,
              run_gemms(m, s, g2, ng, true, false, 1.0f, PL_F32, SOLO));
  pl_free_async(m->dev, A, s);
  A = NULL;
  PL_TRY_GOTO(st, done, pl__moe_mark(c, PL_MOE_ST_BWD_WGRAD, s));
  /* dX = dG Wg^T + dU Wu^T, into D (after dWd's reads of D: same stream) */
  PL_TRY_GOTO(st, done, expert_dx(m, c, C, W, g2, G, U, D, s));
  /* the lanes' dWg, dWu (lane 0 waited for the others) done before G and U
   * are freed */
  if (m->nl) {
    PL_TRY_GOTO(st, done, pl_event_record(m->evj[0], m->ln[0]));
    PL_TRY_GOTO(st, done, pl_stream_wait(s, m->evj[0]));
  }
#undef ROWS
  st = pl__moe_mark(c, PL_MOE_ST_BWD_DX, s);
done:
  if (*Xp) { /* after a failure before X's last use */
    pl_free_async(m->dev, X, xs);
    *Xp = NULL;
  }
  pl_free_async(m->dev, G, s);
  pl_free_async(m->dev, U, s);
  pl_free_async(m->dev, P, s);
  pl_free_async(m->dev, A, s);
  free(g2);
  return st;
}
