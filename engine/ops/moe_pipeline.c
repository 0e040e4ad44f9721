/* moe_pipeline.c — the chunk pipeline of the MoE layer (DESIGN.md §1.1):
 * per chunk, dispatch (gather the routes' rows, all-to-all-v to their
 * computing ranks), expert compute (moe_expert.c), return (all-to-all-v back)
 * and combine (weighted sum into the token's output row); the forward and
 * backward schedules of the three variants; the helper weights sent to and
 * their gradients returned from the LLEP helpers; stats and the stage profile.
 *
 * Buffers of one chunk (rows of width H, tag "dispatch"):
 *   source side: send S (remote routes only: a rank's routes to itself are
 *   gathered straight into its receive buffer) and the return buffer S;
 *   expert side: receive R (all routes computed here, blocks by source rank,
 *   each block by expert then token order).  The expert output overwrites the
 *   receive buffer.  With S <= k*c_eff - s_self and R <= (Ep-1)*k*c_eff +
 *   s_self (s_self: routes a rank keeps), forward needs R + S <= Ep*k*c_eff
 *   rows and backward (x rows and dout rows both received) 2R + S <=
 *   2*Ep*k*c_eff rows: the bound 2*Ep*k*c_eff*H*b holds without overlap.  An
 *   expert-major chunk's permutation (moe_plan.c) holds a second copy of its
 *   rows for a moment; the overlap gates count it where the send / return
 *   rows would be.
 *
 * The pipelined variant issues its communication on a comm stream: the next
 * chunk's dispatch and the previous chunk's return beside this chunk's expert
 * GEMMs, only when the exactly known sizes (group-wide maxima) keep the live
 * set within the bound; every size is known on the host, so the gate costs no
 * sync and every rank decides the same. */
#include <stdlib.h>
#include <string.h>

#include "backend/moe_kernels.h"
#include "core/internal.h"
#include "ops/moe_internal.h"

/* ---- kernel dispatch ----------------------------------------------------- */

/* The kernels of backend/moe_kernels.h on s's backend; an empty launch
 * (no rows) issues nothing. */
static pl_status moe_gather(pl_stream *s, void *dst, const void *src,
                            const int32_t *rows, int64_t n, int64_t H,
                            pl_dtype dt) {
  if (n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_moe_gather(s, dst, src, rows, n, H, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_moe_gather(s, dst, src, rows, n, H, dt);
}
static pl_status moe_gather_f32(pl_stream *s, float *dst, const float *src,
                                const int32_t *idx, int64_t n) {
  if (n == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_moe_gather_f32(s, dst, src, idx, n);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_moe_gather_f32(s, dst, src, idx, n);
}
static pl_status moe_combine(pl_stream *s, void *out, const int32_t *toks,
                             int64_t nt, const int32_t *slots, int k,
                             const float *w, const void *A, const void *B,
                             int64_t H, pl_dtype dt) {
  if (nt == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_moe_combine(s, out, toks, nt, slots, k, w, A, B, H, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_moe_combine(s, out, toks, nt, slots, k, w, A, B, H, dt);
}
static pl_status moe_scatter_f32(pl_stream *s, float *dst, const int32_t *toks,
                                 int64_t nt, const int32_t *slots, int k,
                                 const float *a, const float *b) {
  if (nt == 0)
    return PL_OK;
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_moe_scatter_f32(s, dst, toks, nt, slots, k, a, b);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_moe_scatter_f32(s, dst, toks, nt, slots, k, a, b);
}

/* ---- stats and stage profile (cfg.profile) ------------------------------- */

int pl_moe_ctx_overlapped(const pl_moe_ctx *c) {
  return c ? c->overlapped : 0;
}

const double *pl_moe_ctx_stage_ms(const pl_moe_ctx *c) {
  static const double zero[PL_MOE_NSTAGES];
  return c ? c->stage_ms : zero;
}

const char *pl_moe_stage_name(int st) {
  static const char *const n[PL_MOE_NSTAGES] = {
      "fwd_wait", "fwd_up",    "fwd_down", "bwd_wait", "bwd_recompute",
      "bwd_dact", "bwd_wgrad", "bwd_dx",   "idle"};
  return st >= 0 && st < PL_MOE_NSTAGES ? n[st] : "?";
}

/* After the stream's work is done: the marks' intervals into stage_ms. */
static void settle(pl_moe_ctx *c, bool reset) {
  if (!c || !c->m->cfg.profile)
    return;
  if (reset)
    memset(c->stage_ms, 0, sizeof c->stage_ms);
  for (int i = 1; i < c->pn; i++) {
    float ms = 0;
    if (pl_event_elapsed_ms(c->pev[i - 1], c->pev[i], &ms) == PL_OK)
      c->stage_ms[c->pst[i]] += ms;
  }
  c->pn = 0;
}

/* pl_moe_stats of a forward, from the plan and the chunk layouts (gemms: 11
 * launches per group, the busiest chunk). */
static void fill_stats(pl_moe *m, pl_moe_ctx *c, pl_moe_stats *stt) {
  if (!stt)
    return;
  memset(stt, 0, sizeof *stt);
  stt->K = c->K;
  stt->c_eff = c->c_eff;
  stt->planned = c->plan.planned;
  stt->n_pieces = c->plan.n_pieces;
  stt->n_spilled = c->plan.n_spilled;
  stt->imb_native = c->plan.imb_native;
  stt->imb_planned = c->plan.imb_planned;
  for (int i = 0; i < c->K; i++) {
    stt->routes_sent += c->ch[i].S;
    stt->routes_recv += c->ch[i].R;
  }
  stt->max_chunk_recv = c->max_chunk_recv;
  stt->max_send_ratio = c->max_send_ratio;
  stt->weights_moved = c->nh;
  stt->gemm_flops_fwd =
      6.0 * (double)stt->routes_recv * (double)m->cfg.H * (double)m->cfg.I;
  stt->overlapped = c->overlapped;
  for (int i = 0; i < c->K; i++) {
    if (11 * (int64_t)c->ch[i].ng > stt->gemms)
      stt->gemms = 11 * (int64_t)c->ch[i].ng;
    stt->em_chunks += c->ch[i].em;
    stt->groups += c->ch[i].ng;
  }
}

/* ---- failure agreement and helper weights -------------------------------- */

static size_t wset_elems(const pl_moe *m) {
  return 3 * (size_t)m->cfg.H * (size_t)m->cfg.I;
}

/* Failure agreement.  A rank that fails locally (a tracked allocation beyond
 * the arena's limit, a kernel launch) must not leave its peers waiting in the
 * next collective: every helper that runs a collective first agrees on the
 * status over the group (one small host all-reduce, no device sync), and is
 * called by every rank in the same sequence whatever happened before (the
 * sequence depends only on group-wide data): pl_agree over the EP group. */
static pl_status agree(pl_moe *m, pl_status st) {
  return pl_agree(m->comm, st, "moe", "the MoE layer's next exchange");
}

/* The group agrees on st; then, only where every rank is fine, the
 * all-to-all-v whose four count arrays (send counts and displacements,
 * receive counts and displacements, in elements) lie one after another in p.
 * Every rank calls it, whatever its status: a rank that failed earlier makes
 * every rank skip the collective together. */
static pl_status agreed_a2a(pl_moe *m, pl_status st, const void *send,
                            void *recv, const size_t *p, pl_dtype dt,
                            pl_stream *s) {
  PL_TRY(agree(m, st));
  const int Ep = m->Ep;
  return pl_alltoallv(m->comm, send, p, p + Ep, recv, p + 2 * Ep, p + 3 * Ep,
                      dt, s);
}

/* The counts of a weight-set exchange (agreed_a2a's layout): we elements to
 * each rank of to[], from each rank of from[]. */
static pl_status set_counts(int Ep, const int *to, int nto, const int *from,
                            int nfrom, size_t we, size_t **out) {
  size_t *sc = calloc((size_t)Ep * 4, sizeof(size_t));
  *out = sc;
  if (!sc)
    return pl_set_error(PL_ENOMEM, "moe: host counts");
  size_t *sd = sc + Ep, *rcn = sd + Ep, *rd = rcn + Ep;
  for (int i = 0; i < nto; i++)
    sc[to[i]] += we;
  for (int i = 0; i < nfrom; i++)
    rcn[from[i]] += we;
  for (int d = 1; d < Ep; d++) {
    sd[d] = sd[d - 1] + sc[d - 1];
    rd[d] = rd[d - 1] + rcn[d - 1];
  }
  return PL_OK;
}

/* One all-to-all-v of whole weight sets (we elements each): send[i] goes to
 * rank to[i], recv[j] comes from rank from[j], both lists in buffer order.
 * Called by every rank; st is the status so far (see agree). */
static pl_status exchange_sets(pl_moe *m, const void *send, const int *to,
                               int nto, void *recv, const int *from, int nfrom,
                               size_t we, pl_dtype dt, pl_stream *s,
                               pl_status st) {
  size_t *p = NULL;
  if (st == PL_OK) /* a failed rank skips its own part, never the collective */
    st = set_counts(m->Ep, to, nto, from, nfrom, we, &p);
  st = agreed_a2a(m, st, send, recv, p, dt, s);
  free(p);
  return st;
}

/* The local part of transfer_weights: *sbuf (tag llep_weights) gets the
 * (Wg | Wu | Wd) of each expert this rank sends, c->hw the receive buffer. */
static pl_status pack_weights(pl_moe *m, pl_moe_ctx *c, const pl_moe_weights *W,
                              void **sbuf, pl_stream *s) {
  size_t we = wset_elems(m), HI = (size_t)m->cfg.H * m->cfg.I;
  size_t b = pl_dtype_size(m->cfg.dt);
  PL_TRY(pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)c->ns * we * b,
                        "llep_weights", s, sbuf));
  PL_TRY(pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)c->nh * we * b,
                        "llep_weights", s, &c->hw));
  for (int i = 0; i < c->ns; i++) {
    size_t li = (size_t)(c->s_exp[i] - m->rank * m->El);
    char *dst = (char *)*sbuf + (size_t)i * we * b;
    PL_TRY(pl_memcpy_async(s, dst, (char *)W->wg + li * HI * b, HI * b));
    PL_TRY(
        pl_memcpy_async(s, dst + HI * b, (char *)W->wu + li * HI * b, HI * b));
    PL_TRY(pl_memcpy_async(s, dst + 2 * HI * b, (char *)W->wd + li * HI * b,
                           HI * b));
  }
  return PL_OK;
}

/* Owners send each spilled expert's (Wg | Wu | Wd) to its helpers (one
 * all-to-all-v of weight sets), on stream s. */
static pl_status transfer_weights(pl_moe *m, pl_moe_ctx *c,
                                  const pl_moe_weights *W, pl_stream *s,
                                  pl_status st) {
  int64_t tot = c ? c->ns + c->nh : 0;
  pl_status hs = pl_host_allreduce_i64(m->comm, &tot, 1, PL_RED_SUM);
  if (hs != PL_OK)
    return st != PL_OK ? st : hs;
  if (tot == 0)
    return st;
  void *sbuf = NULL;
  if (st == PL_OK) /* a failed rank skips its own part, never the exchange */
    st = pack_weights(m, c, W, &sbuf, s);
  st = exchange_sets(m, sbuf, c->s_dst, c->ns, c->hw, c->h_src, c->nh,
                     wset_elems(m), m->cfg.dt, s, st);
  pl_free_async(m->dev, sbuf, s);
  return st;
}

/* Helpers send the accumulated gradients of their borrowed experts back; the
 * owner adds them to its own, in (helper rank, expert) order. */
static pl_status return_wgrads(pl_moe *m, pl_moe_ctx *c, float *hg,
                               pl_moe_wgrads *G, pl_stream *s, pl_status st) {
  int64_t tot = c->ns + c->nh;
  pl_status hs = pl_host_allreduce_i64(m->comm, &tot, 1, PL_RED_SUM);
  if (hs != PL_OK)
    return st != PL_OK ? st : hs;
  if (tot == 0)
    return st;
  size_t we = wset_elems(m), HI = (size_t)m->cfg.H * m->cfg.I;
  float *rbuf = NULL;
  if (st == PL_OK) /* a failed rank skips its own part, never the exchange */
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE,
                        (size_t)c->ns * we * sizeof(float), "llep_grads", s,
                        (void **)&rbuf);
  PL_TRY_GOTO(st, done,
              exchange_sets(m, hg, c->h_src, c->nh, rbuf, c->s_dst, c->ns, we,
                            PL_F32, s, st));
  for (int i = 0; i < c->ns; i++) {
    size_t li = (size_t)(c->s_exp[i] - m->rank * m->El);
    const float *src = rbuf + (size_t)i * we;
    PL_TRY_GOTO(st, done,
                pl_axpy(s, G->wg + li * HI, PL_F32, src, PL_F32, HI, 1.0f));
    PL_TRY_GOTO(
        st, done,
        pl_axpy(s, G->wu + li * HI, PL_F32, src + HI, PL_F32, HI, 1.0f));
    PL_TRY_GOTO(
        st, done,
        pl_axpy(s, G->wd + li * HI, PL_F32, src + 2 * HI, PL_F32, HI, 1.0f));
  }
done:
  pl_free_async(m->dev, rbuf, s);
  return st;
}

/* ---- chunk stages -------------------------------------------------------- */

static const int32_t *meta(const pl_moe_ctx *c, int64_t off) {
  return c->dmeta + off;
}

/* Counts in elements for pl_alltoallv: rows * width. */
static void scaled(const int64_t *rows, size_t width, int Ep, size_t *out) {
  for (int d = 0; d < Ep; d++)
    out[d] = (size_t)rows[d] * width;
}

/* The four count arrays of an all-to-all-v, in elements (rows * width);
 * reverse swaps the send and receive sides (the return trip). */
static pl_status a2a_counts(const pl_moe *m, const pl__moe_chunk *C,
                            size_t width, bool reverse, size_t **out) {
  int Ep = m->Ep;
  size_t *p = malloc((size_t)Ep * 4 * sizeof(size_t));
  *out = p;
  if (!p)
    return pl_set_error(PL_ENOMEM, "moe: host counts");
  scaled(reverse ? C->rcnt : C->scnt, width, Ep, p);
  scaled(reverse ? C->rdsp : C->sdsp, width, Ep, p + Ep);
  scaled(reverse ? C->scnt : C->rcnt, width, Ep, p + 2 * Ep);
  scaled(reverse ? C->sdsp : C->rdsp, width, Ep, p + 3 * Ep);
  return PL_OK;
}

/* *buf (n rows of `width` elements of dt, tag `tag`) <- a new buffer whose
 * row i is old row idx[i]; the old one is freed.  The expert-major
 * permutation and its inverse (moe_plan.c). */
static pl_status permute_rows(pl_moe *m, const int32_t *idx, int64_t n,
                              int64_t width, pl_dtype dt, const char *tag,
                              void **buf, pl_stream *s, pl_status st) {
  if (st != PL_OK || n == 0)
    return st;
  void *nb = NULL;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(m->dev, PL_ARENA_DEVICE,
                             (size_t)n * (size_t)width * pl_dtype_size(dt), tag,
                             s, &nb));
  if (width == 1 && dt == PL_F32) /* route scalars */
    PL_TRY_GOTO(st, done, moe_gather_f32(s, nb, *buf, idx, n));
  else
    PL_TRY_GOTO(st, done, moe_gather(s, nb, *buf, idx, n, width, dt));
  pl_free_async(m->dev, *buf, s);
  *buf = nb, nb = NULL;
done:
  pl_free_async(m->dev, nb, s);
  return st;
}

/* The local part of a dispatch of chunk C from src: *xs gets the send rows
 * (S, tag tag), *recv the receive buffer (R) with this rank's own routes in
 * place, *p the counts.  scal: the route scalars (width 1, f32, by route);
 * else rows of H (by token). */
static pl_status dispatch_local(pl_moe *m, pl_moe_ctx *c, pl__moe_chunk *C,
                                const void *src, bool scal, void **xs,
                                void **recv, size_t **p, pl_stream *s) {
  const int64_t H = scal ? 1 : m->cfg.H;
  const pl_dtype dt = scal ? PL_F32 : m->cfg.dt;
  const char *tag = scal ? "routing" : "dispatch";
  const size_t rb = (size_t)H * pl_dtype_size(dt);
  const int32_t *snd = meta(c, scal ? C->o_send_route : C->o_send_tok);
  const int32_t *own = meta(c, scal ? C->o_self_route : C->o_self_tok);
  PL_TRY(
      pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->S * rb, tag, s, xs));
  PL_TRY(scal ? moe_gather_f32(s, *xs, src, snd, C->S)
              : moe_gather(s, *xs, src, snd, C->S, H, dt));
  PL_TRY(
      pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * rb, tag, s, recv));
  char *mine = (char *)*recv + (size_t)C->self_off * rb;
  PL_TRY(scal ? moe_gather_f32(s, (float *)mine, src, own, C->s_self)
              : moe_gather(s, mine, src, own, C->s_self, H, dt));
  return a2a_counts(m, C, (size_t)H, false, p);
}

/* Source rows (src: N x H) of chunk C to their computing ranks: *recv gets
 * R x H (tag dispatch), blocks by source, own routes gathered directly; with
 * scal, the per-route scalars (src: N*k, f32) instead: R floats (tag
 * routing).  Called by every rank; st is the status so far (see agree). */
static pl_status dispatch(pl_moe *m, pl_moe_ctx *c, pl__moe_chunk *C,
                          const void *src, bool scal, void **recv, pl_stream *s,
                          pl_status st) {
  const int64_t H = scal ? 1 : m->cfg.H;
  const pl_dtype dt = scal ? PL_F32 : m->cfg.dt;
  void *xs = NULL;
  size_t *p = NULL;
  *recv = NULL;
  if (st == PL_OK) /* a failed rank skips its own part, never the collective */
    st = dispatch_local(m, c, C, src, scal, &xs, recv, &p, s);
  st = agreed_a2a(m, st, xs, *recv, p, dt, s);
  free(p);
  pl_free_async(m->dev, xs, s);
  if (C->em)
    st = permute_rows(m, meta(c, C->o_perm), C->R, H, dt,
                      scal ? "routing" : "dispatch", recv, s, st);
  if (st != PL_OK && *recv) {
    pl_free_async(m->dev, *recv, s);
    *recv = NULL;
  }
  return st;
}

/* The local part of return_rows: *back (S rows) and the counts *p. */
static pl_status return_local(pl_moe *m, pl__moe_chunk *C, size_t width,
                              pl_dtype dt, const char *tag, void **back,
                              size_t **p, pl_stream *s) {
  PL_TRY(pl_alloc_async(m->dev, PL_ARENA_DEVICE,
                        (size_t)C->S * width * pl_dtype_size(dt), tag, s,
                        back));
  return a2a_counts(m, C, width, true, p);
}

/* Rows computed here (R x width, blocks by source) back to their sources:
 * *back gets S x width (remote routes only).  Called by every rank. */
static pl_status return_rows(pl_moe *m, pl__moe_chunk *C, const void *Y,
                             size_t width, pl_dtype dt, const char *tag,
                             void **back, pl_stream *s, pl_status st) {
  size_t *p = NULL;
  *back = NULL;
  if (st == PL_OK) /* a failed rank skips its own part, never the collective */
    st = return_local(m, C, width, dt, tag, back, &p, s);
  st = agreed_a2a(m, st, Y, *back, p, dt, s);
  free(p);
  return st;
}

/* ---- a pass (forward or backward) ---------------------------------------- */

static bool pipelined(const pl_moe *m) {
  return pl_moe_variant_desc_of(m->cfg.variant)->chunks && m->cfg.overlap;
}

/* The stream a pass issues its communication on: the pipelined variant's
 * comm stream; the other variants issue everything on the compute stream. */
static pl_stream *comm_stream(pl_moe *m) {
  return pipelined(m) ? m->ms : m->cs;
}

/* The comm stream starts after everything issued on the compute stream so
 * far (st: the status so far; a failed rank issues nothing). */
static pl_status pass_begin(pl_moe *m, pl_status st) {
  if (st != PL_OK || !pipelined(m))
    return st;
  PL_TRY(pl_event_record(m->evp, m->cs));
  return pl_stream_wait(m->ms, m->evp);
}

/* The compute stream continues after the comm stream's work. */
static pl_status pass_join(pl_moe *m, pl_status st) {
  if (st != PL_OK || !pipelined(m))
    return st;
  PL_TRY(pl_event_record(m->evq, m->ms));
  return pl_stream_wait(m->cs, m->evq);
}

/* s waits for e, unless the rank has failed already (st). */
static pl_status wait_event(pl_stream *s, pl_event *e, pl_status st) {
  return st != PL_OK ? st : pl_stream_wait(s, e);
}

/* The end of a pass, also after a failure: both streams drained. */
static pl_status pass_drain(pl_moe *m, pl_status st) {
  pl_status ss = pl_stream_sync(m->cs);
  if (ss == PL_OK)
    ss = pl_stream_sync(m->ms);
  return st == PL_OK ? ss : st;
}

/* ---- forward ------------------------------------------------------------- */

typedef struct fwd_state {
  void **B; /* per chunk: receive buffer (R x H), Y after compute */
  pl_event **evD, **evC;
} fwd_state;

/* Chunk C's expert rows *rows (R x H, computed on the compute stream up to
 * event ready) back to their sources on s and combined into out (weighted by
 * w, or unweighted when w is NULL: the backward's dX); *rows freed. */
static pl_status return_combine(pl_moe *m, pl_moe_ctx *c, pl__moe_chunk *C,
                                pl_event *ready, void **rows, const float *w,
                                void *out, pl_stream *s, pl_status st) {
  void *back = NULL;
  if (s != m->cs)
    st = wait_event(s, ready, st);
  if (C->em) /* back to blocks by source for the return trip */
    st = permute_rows(m, meta(c, C->o_inv), C->R, m->cfg.H, m->cfg.dt,
                      "dispatch", rows, s, st);
  PL_TRY_GOTO(st, done,
              return_rows(m, C, *rows, (size_t)m->cfg.H, m->cfg.dt, "dispatch",
                          &back, s, st));
  st = moe_combine(s, out, meta(c, C->o_toks), C->nt, meta(c, C->o_slots),
                   m->cfg.k, w, back, *rows, m->cfg.H, m->cfg.dt);
done:
  pl_free_async(m->dev, back, s);
  pl_free_async(m->dev, *rows, s);
  *rows = NULL;
  return st;
}

/* Stages: every rank calls them in the same order; st is the status so far
 * (a failed rank skips work but still takes part in the agreements). */
static pl_status fwd_combine(pl_moe *m, pl_moe_ctx *c, int i, const float *w,
                             void *out, pl_stream *s, fwd_state *fs,
                             pl_status st) {
  return return_combine(m, c, &c->ch[i], fs->evC[i], &fs->B[i], w, out, s, st);
}

static pl_status fwd_dispatch(pl_moe *m, pl_moe_ctx *c, int i, const void *x,
                              pl_stream *s, fwd_state *fs, pl_status st) {
  PL_TRY(dispatch(m, c, &c->ch[i], x, false, &fs->B[i], s, st));
  return pl_event_record(fs->evD[i], s);
}

static pl_status fwd_compute(pl_moe *m, pl_moe_ctx *c, int i,
                             const pl_moe_weights *W, fwd_state *fs,
                             pl_status st) {
  if (st != PL_OK)
    return st;
  PL_TRY(pl__moe_mark(c, -1, m->cs));
  PL_TRY(pl_stream_wait(m->cs, fs->evD[i]));
  PL_TRY(pl__moe_mark(c, PL_MOE_ST_FWD_WAIT, m->cs));
  PL_TRY(pl__moe_expert_fwd(m, c, &c->ch[i], W, fs->B[i], m->cs));
  return pl_event_record(fs->evC[i], m->cs);
}

static pl_status make_events(pl_dev *dev, int n, pl_event ***out) {
  *out = calloc((size_t)n, sizeof(pl_event *));
  if (!*out)
    return pl_set_error(PL_ENOMEM, "moe: events");
  for (int i = 0; i < n; i++)
    PL_TRY(pl_event_create(dev, &(*out)[i]));
  return PL_OK;
}
static void free_events(int n, pl_event **e) {
  if (!e)
    return;
  for (int i = 0; i < n; i++)
    if (e[i])
      pl_event_destroy(e[i]);
  free(e);
}

static pl_status fwd_state_init(pl_moe *m, int K, fwd_state *fs) {
  fs->B = calloc((size_t)K, sizeof(void *));
  if (!fs->B)
    return pl_set_error(PL_ENOMEM, "moe: host");
  PL_TRY(make_events(m->dev, K, &fs->evD));
  return make_events(m->dev, K, &fs->evC);
}

pl_status pl_moe_forward(pl_moe *m, const pl_moe_weights *W, const void *x,
                         int64_t N, const int32_t *idx, const float *w,
                         void *out, pl_moe_ctx **ctxp, pl_moe_stats *stats) {
  if (ctxp)
    *ctxp = NULL;
  pl_moe_ctx *c = NULL;
  pl_status st = pl__moe_plan(m, N, idx, &c);
  st = agree(m, st);
  if (st != PL_OK) {
    pl_moe_ctx_free(c);
    return st;
  }
  const int K = c->K;
  fwd_state fs = {0};
  PL_TRY_GOTO(st, done, agree(m, fwd_state_init(m, K, &fs)));
  st = transfer_weights(m, c, W, m->cs, st);

  const bool pipe = pipelined(m);
  pl_stream *ms = comm_stream(m);
  st = pass_begin(m, st);
  /* The sequence of stages depends only on group-wide data, so every rank
   * runs the same one, also after a failure (st carries it). */
  const int64_t budget = pl__moe_row_budget(m, c->c_eff);
  st = fwd_dispatch(m, c, 0, x, ms, &fs, st);
  int pending = -1;
  for (int i = 0; i < K; i++) {
    st = fwd_compute(m, c, i, W, &fs, st);
    if (pending >= 0) {
      st = fwd_combine(m, c, pending, w, out, ms, &fs, st);
      pending = -1;
    }
    if (i + 1 < K) {
      const int64_t *R = c->Rmax, *S = c->Smax;
      /* an expert-major chunk's permutation holds a second copy of its rows
       * where the send or return rows would be (moe_plan.c) */
      int64_t x0 = c->ch[i].em ? R[i] : 0, x1 = c->ch[i + 1].em ? R[i + 1] : 0;
      int64_t smax = S[i] > S[i + 1] ? S[i] : S[i + 1];
      if (x0 > smax)
        smax = x0;
      if (x1 > smax)
        smax = x1;
      if (pipe && R[i] + R[i + 1] + smax <= budget) {
        st = fwd_dispatch(m, c, i + 1, x, ms, &fs, st); /* beside compute(i) */
        pending = i;
        if (st == PL_OK)
          c->overlapped++;
      } else {
        st = fwd_combine(m, c, i, w, out, ms, &fs, st);
        st = fwd_dispatch(m, c, i + 1, x, ms, &fs, st);
      }
    } else {
      st = fwd_combine(m, c, i, w, out, ms, &fs, st);
    }
  }
  st = pass_join(m, st);
done:
  st = pass_drain(m, st);
  for (int i = 0; fs.B && i < K; i++) /* after a failure: what is still held */
    if (fs.B[i])
      pl_free(m->dev, fs.B[i]);
  free(fs.B);
  free_events(K, fs.evD);
  free_events(K, fs.evC);
  if (st == PL_OK)
    settle(c, true);
  fill_stats(m, c, stats);
  if (st != PL_OK || !ctxp) {
    if (c && c->hw) {
      pl_free(m->dev, c->hw);
      c->hw = NULL;
    }
    pl_moe_ctx_free(c);
    return st;
  }
  /* The helper weights stay with the context (tag llep_weights) until
   * pl_moe_ctx_free: backward computes the borrowed experts again. */
  *ctxp = c;
  return PL_OK;
}

/* ---- backward ------------------------------------------------------------ */

typedef struct bwd_state {
  void **X, **D;
  float **wr, **dwr;
  pl_event **evD, **evDD, **evC, **evX;
} bwd_state;

/* The layer input rows of chunk i (and its route weights) to the computing
 * ranks; evD[i] after them. */
static pl_status bwd_dispatch_x(pl_moe *m, pl_moe_ctx *c, int i, const void *x,
                                const float *w, pl_stream *s, bwd_state *bs,
                                pl_status st) {
  pl__moe_chunk *C = &c->ch[i];
  st = dispatch(m, c, C, x, false, &bs->X[i], s, st);
  PL_TRY(dispatch(m, c, C, w, true, (void **)&bs->wr[i], s, st));
  PL_TRY(pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * sizeof(float),
                        "routing", s, (void **)&bs->dwr[i]));
  return pl_event_record(bs->evD[i], s);
}

/* Its dout rows; evDD[i] after them (the compute waits for them only before
 * its first use of dout, after recomputing G, U and A). */
static pl_status bwd_dispatch_d(pl_moe *m, pl_moe_ctx *c, int i,
                                const void *dout, pl_stream *s, bwd_state *bs,
                                pl_status st) {
  PL_TRY(dispatch(m, c, &c->ch[i], dout, false, &bs->D[i], s, st));
  return pl_event_record(bs->evDD[i], s);
}

static pl_status bwd_dispatch(pl_moe *m, pl_moe_ctx *c, int i, const void *x,
                              const void *dout, const float *w, pl_stream *s,
                              bwd_state *bs, pl_status st) {
  st = bwd_dispatch_x(m, c, i, x, w, s, bs, st);
  return bwd_dispatch_d(m, c, i, dout, s, bs, st);
}

static pl_status bwd_compute(pl_moe *m, pl_moe_ctx *c, int i,
                             const pl_moe_weights *W, pl_moe_wgrads *G,
                             float *hg, bwd_state *bs, pl_status st) {
  if (st != PL_OK)
    return st;
  PL_TRY(pl__moe_mark(c, -1, m->cs));
  PL_TRY(pl_stream_wait(m->cs, bs->evD[i]));
  PL_TRY(pl__moe_mark(c, PL_MOE_ST_BWD_WAIT, m->cs));
  PL_TRY(pl__moe_expert_bwd(m, c, &c->ch[i], W, G, hg, &bs->X[i], bs->D[i],
                            bs->wr[i], bs->dwr[i], bs->evX[i], bs->evDD[i],
                            m->cs));
  return pl_event_record(bs->evC[i], m->cs);
}

static pl_status bwd_return(pl_moe *m, pl_moe_ctx *c, int i, void *dx,
                            float *dw, pl_stream *s, bwd_state *bs,
                            pl_status st) {
  pl__moe_chunk *C = &c->ch[i];
  float *dwb = NULL;
  st = return_combine(m, c, C, bs->evC[i], &bs->D[i], NULL, dx, s, st);
  if (C->em)
    st = permute_rows(m, meta(c, C->o_inv), C->R, 1, PL_F32, "routing",
                      (void **)&bs->dwr[i], s, st);
  PL_TRY_GOTO(st, done,
              return_rows(m, C, bs->dwr[i], 1, PL_F32, "routing", (void **)&dwb,
                          s, st));
  st = moe_scatter_f32(s, dw, meta(c, C->o_toks), C->nt, meta(c, C->o_slots),
                       m->cfg.k, dwb, bs->dwr[i]);
done:
  pl_free_async(m->dev, dwb, s);
  pl_free_async(m->dev, bs->dwr[i], s);
  pl_free_async(m->dev, bs->wr[i], s);
  bs->dwr[i] = bs->wr[i] = NULL;
  return st;
}

/* The backward's buffers and events, and the helpers' gradient sums *hg
 * (tag llep_grads, zeroed). */
static pl_status bwd_state_init(pl_moe *m, pl_moe_ctx *c, bwd_state *bs,
                                float **hg) {
  const int K = c->K;
  bs->X = calloc((size_t)K, sizeof(void *));
  bs->D = calloc((size_t)K, sizeof(void *));
  bs->wr = calloc((size_t)K, sizeof(float *));
  bs->dwr = calloc((size_t)K, sizeof(float *));
  if (!bs->X || !bs->D || !bs->wr || !bs->dwr)
    return pl_set_error(PL_ENOMEM, "moe: host");
  PL_TRY(make_events(m->dev, K, &bs->evD));
  PL_TRY(make_events(m->dev, K, &bs->evDD));
  PL_TRY(make_events(m->dev, K, &bs->evC));
  PL_TRY(make_events(m->dev, K, &bs->evX));
  size_t hgn = (size_t)c->nh * wset_elems(m);
  PL_TRY(pl_alloc_async(m->dev, PL_ARENA_DEVICE, hgn * sizeof(float),
                        "llep_grads", m->cs, (void **)hg));
  if (hgn)
    PL_TRY(pl_fill(m->cs, *hg, PL_F32, hgn, 0.0));
  return PL_OK;
}

pl_status pl_moe_backward(pl_moe *m, pl_moe_ctx *c, const pl_moe_weights *W,
                          const void *x, const float *w, const void *dout,
                          void *dx, float *dw, pl_moe_wgrads *G) {
  if (!c || c->m != m)
    return pl_set_error(PL_EINVAL, "moe backward: context of another layer");
  const int K = c->K;
  bwd_state bs = {0};
  float *hg = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, agree(m, bwd_state_init(m, c, &bs, &hg)));

  const bool pipe = pipelined(m);
  pl_stream *ms = comm_stream(m);
  st = pass_begin(m, st);
  const int64_t budget = pl__moe_row_budget(m, c->c_eff);
  st = bwd_dispatch(m, c, 0, x, dout, w, ms, &bs, st);
  int pending = -1;   /* chunk whose return follows the next compute        */
  bool split = false; /* chunk i's X came early, its dout not yet sent    */
  for (int i = 0; i < K; i++) {
    if (split) {
      /* split overlap: the return of chunk i-1 and the dout rows of chunk i
       * run beside chunk i's recompute of G, U, A (which needs only X) */
      st = bwd_return(m, c, i - 1, dx, dw, ms, &bs, st);
      st = bwd_dispatch_d(m, c, i, dout, ms, &bs, st);
      split = false;
    }
    st = bwd_compute(m, c, i, W, G, hg, &bs, st);
    if (pending >= 0) {
      st = bwd_return(m, c, pending, dx, dw, ms, &bs, st);
      pending = -1;
    }
    if (i + 1 < K) {
      const int64_t *R = c->Rmax, *S = c->Smax;
      /* early dispatch(i+1) waits for the free of X_i (evX: issued before
       * chunk i's last GEMMs), so it holds D_i with chunk i+1's X, D and send
       * rows; the return of chunk i then runs beside compute(i+1), holding
       * D_i, X_{i+1}, D_{i+1} and its return rows S_i.  Both counted as on
       * the device (not only in issue order).  An expert-major chunk's
       * permutation copy counts where its send/return rows would be. */
      int64_t x0 = c->ch[i].em ? R[i] : 0, x1 = c->ch[i + 1].em ? R[i + 1] : 0;
      int64_t t0 = S[i] > x0 ? S[i] : x0, t1 = S[i + 1] > x1 ? S[i + 1] : x1;
      int64_t need1 = R[i] + 2 * R[i + 1] + t1;
      int64_t need2 = R[i] + 2 * R[i + 1] + t0;
      /* split: only X_{i+1} early (beside the end of compute(i): D_i and
       * X_{i+1}); then the return of i (D_i, X_{i+1}) and dout of i+1
       * (X_{i+1}, D_{i+1}) beside the start of compute(i+1) */
      int64_t need3 = R[i] + R[i + 1] + (t0 > t1 ? t0 : t1);
      int64_t need4 = 2 * R[i + 1] + t1;
      if (pipe && need1 <= budget && need2 <= budget) {
        st = wait_event(ms, bs.evX[i], st);
        st = bwd_dispatch(m, c, i + 1, x, dout, w, ms, &bs, st);
        pending = i;
        if (st == PL_OK)
          c->overlapped++;
      } else if (pipe && need3 <= budget && need4 <= budget) {
        st = wait_event(ms, bs.evX[i], st);
        st = bwd_dispatch_x(m, c, i + 1, x, w, ms, &bs, st);
        split = true;
        if (st == PL_OK)
          c->overlapped++;
      } else {
        st = bwd_return(m, c, i, dx, dw, ms, &bs, st);
        st = bwd_dispatch(m, c, i + 1, x, dout, w, ms, &bs, st);
      }
    } else {
      st = bwd_return(m, c, i, dx, dw, ms, &bs, st);
    }
  }
  st = pass_join(m, st);
  st = return_wgrads(m, c, hg, G, m->cs, st);
done:
  st = pass_drain(m, st);
  for (int i = 0; bs.X && i < K; i++) {
    if (bs.X[i])
      pl_free(m->dev, bs.X[i]);
    if (bs.D[i])
      pl_free(m->dev, bs.D[i]);
    if (bs.wr[i])
      pl_free(m->dev, bs.wr[i]);
    if (bs.dwr[i])
      pl_free(m->dev, bs.dwr[i]);
  }
  if (hg)
    pl_free(m->dev, hg);
  if (st == PL_OK)
    settle(c, false);
  free(bs.X);
  free(bs.D);
  free(bs.wr);
  free(bs.dwr);
  free_events(K, bs.evD);
  free_events(K, bs.evDD);
  free_events(K, bs.evC);
  free_events(K, bs.evX);
  return st;
}
