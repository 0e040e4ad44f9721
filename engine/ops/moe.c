/* moe.c — the MoE layer's schedule, backend-neutral: routing metadata from the
 * plan, expert weight transfer to helpers, chunked dispatch / expert compute /
 * combine for the three variants (ep, llep, pipelined_llep), and the backward
 * with per-chunk re-dispatch and recompute (DESIGN.md §1.1).
 *
 * Buffers of one chunk (rows of width H, tag "dispatch"):
 *   source side: send S (remote routes only: a rank's routes to itself are
 *   gathered straight into its receive buffer) and the return buffer S;
 *   expert side: receive R (all routes computed here, blocks by source rank,
 *   each block by expert then token order).  The expert output overwrites the
 *   receive buffer.  With S <= k*c_eff - s_self and R <= (Ep-1)*k*c_eff + s_self
 *   (s_self: routes a rank keeps), forward needs R + S <= Ep*k*c_eff rows and
 *   backward (x rows and dout rows both received) 2R + S <= 2*Ep*k*c_eff rows:
 *   the bound 2*Ep*k*c_eff*H*b holds without overlap.
 *
 * Expert-major chunks (expert_major): the all-to-all-v delivers blocks by
 * source; one row gather reorders them by (expert slot, source) so each expert
 * slot's rows of all sources are contiguous and every projection issues one
 * GEMM per slot (at most E/Ep + helpers) instead of one per (source, expert)
 * segment; the inverse gather restores blocks by source before the return.
 * The gather holds a second copy of the chunk's rows for a moment (forward 2R,
 * backward 2R + R), so a chunk is expert-major only when 3*R fits the bound;
 * the overlap gates below count the copy where the send/return rows would be.
 * The pipelined variant
 *   issues the next chunk's dispatch early (on the comm stream, overlapping this
 *   chunk's GEMMs) only when the exactly known sizes keep the live set within
 *   the bound; every size is known on the host, so the gate costs no sync. */
#include "ops/moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ops/moe_kernels.h"

/* ---- kernel dispatch ------------------------------------------------------ */

#if PL_HAVE_CUDA
#define KDISPATCH(name, ...)                                                   \
  do {                                                                         \
    if (pl_stream_backend(s) == PL_BACKEND_CUDA)                               \
      return pl_cuda_moe_##name(__VA_ARGS__);                                  \
    return pl_cpu_moe_##name(__VA_ARGS__);                                     \
  } while (0)
#else
#define KDISPATCH(name, ...) return pl_cpu_moe_##name(__VA_ARGS__)
#endif

pl_status pl_moe_k_moe_gather(pl_stream *s, void *dst, const void *src,
                              const int32_t *rows, int64_t n, int64_t H,
                              pl_dtype dt) {
  if (n == 0) return PL_OK;
  KDISPATCH(gather, s, dst, src, rows, n, H, dt);
}
pl_status pl_moe_k_moe_gather_f32(pl_stream *s, float *dst, const float *src,
                                  const int32_t *idx, int64_t n) {
  if (n == 0) return PL_OK;
  KDISPATCH(gather_f32, s, dst, src, idx, n);
}
pl_status pl_moe_k_moe_combine(pl_stream *s, void *out, const int32_t *toks,
                               int64_t nt, const int32_t *slots, int k,
                               const float *w, const void *A, const void *B,
                               int64_t H, pl_dtype dt) {
  if (nt == 0) return PL_OK;
  KDISPATCH(combine, s, out, toks, nt, slots, k, w, A, B, H, dt);
}
pl_status pl_moe_k_moe_scatter_f32(pl_stream *s, float *dst,
                                   const int32_t *toks, int64_t nt,
                                   const int32_t *slots, int k, const float *a,
                                   const float *b) {
  if (nt == 0) return PL_OK;
  KDISPATCH(scatter_f32, s, dst, toks, nt, slots, k, a, b);
}
pl_status pl_moe_k_moe_swiglu_fwd(pl_stream *s, void *A, const void *G,
                                  const void *U, int64_t n, int64_t I,
                                  pl_dtype dt) {
  if (n == 0) return PL_OK;
  KDISPATCH(swiglu_fwd, s, A, G, U, n, I, dt);
}
pl_status pl_moe_k_moe_swiglu_bwd(pl_stream *s, void *G, void *U,
                                  const void *P, const void *A, const float *w,
                                  float *dw, int64_t n, int64_t I,
                                  pl_dtype dt) {
  if (n == 0) return PL_OK;
  KDISPATCH(swiglu_bwd, s, G, U, P, A, w, dw, n, I, dt);
}
pl_status pl_moe_k_moe_scale_rows(pl_stream *s, void *X, const float *w,
                                  int64_t n, int64_t H, pl_dtype dt) {
  if (n == 0) return PL_OK;
  KDISPATCH(scale_rows, s, X, w, n, H, dt);
}
pl_status pl_moe_k_moe_gemm(pl_stream *s, bool ta, bool tb, int64_t m,
                            int64_t n, int64_t k, float alpha, const void *A,
                            int64_t lda, const void *B, int64_t ldb, float beta,
                            void *C, int64_t ldc, pl_dtype ab_dt,
                            pl_dtype c_dt) {
  if (m == 0 || n == 0) return PL_OK;
  KDISPATCH(gemm, s, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
            ab_dt, c_dt);
}

/* ---- configuration -------------------------------------------------------- */

const char *pl_moe_variant_name(pl_moe_variant v) {
  switch (v) {
  case PL_MOE_EP: return "ep";
  case PL_MOE_LLEP: return "llep";
  case PL_MOE_PIPELINED: return "pipelined_llep";
  }
  return "?";
}

pl_status pl_moe_variant_parse(const char *s, pl_moe_variant *out) {
  if (s && strcmp(s, "ep") == 0) *out = PL_MOE_EP;
  else if (s && strcmp(s, "llep") == 0) *out = PL_MOE_LLEP;
  else if (s && (strcmp(s, "pipelined_llep") == 0 || strcmp(s, "pllep") == 0))
    *out = PL_MOE_PIPELINED;
  else
    return pl_set_error(PL_EINVAL,
                        "variant '%s': allowed ep, llep, pipelined_llep",
                        s ? s : "");
  return PL_OK;
}

pl_moe_cfg pl_moe_cfg_default(void) {
  pl_moe_cfg c;
  memset(&c, 0, sizeof c);
  c.dt = PL_F32;
  c.variant = PL_MOE_PIPELINED;
  c.knobs = pl_llep_knobs_default();
  c.c = INT64_MAX;
  c.K_max = 64;
  c.contiguous = false;
  c.overlap = true;
  c.lanes = 2; /* H200, 65K shape, K = 10 (results/reference/h200/
                  2026-11-30-s2): down GEMMs 0.73 -> 0.90 of dense, weight
                  gradients 0.64 -> 0.76 against lanes 0 */
  return c;
}

size_t pl_moe_dispatch_bound(const pl_moe_cfg *cfg, int Ep, int64_t c_eff) {
  return 2u * (size_t)Ep * (size_t)cfg->k * (size_t)c_eff * (size_t)cfg->H *
         pl_dtype_size(cfg->dt);
}

struct pl_moe {
  pl_moe_cfg cfg;
  pl_comm *comm;
  pl_dev *dev;
  int rank, Ep, El; /* El = E / Ep native experts per rank */
  pl_stream *cs;    /* compute: the device's default stream */
  pl_stream *ms;    /* comm stream (pipelined overlap)       */
  int nl;           /* compute lanes (cfg.lanes)             */
  pl_stream *ln[PL_MOE_MAX_LANES];
  pl_event *evf, *evj[PL_MOE_MAX_LANES]; /* fork, joins */
  pl_event *evp, *evq; /* a pass's comm stream: start after cs, cs after it */
};

/* Rows of the dispatch bound 2*Ep*k*c_eff (see the file comment). */
static int64_t row_budget(const pl_moe *m, int64_t c_eff) {
  return 2 * (int64_t)m->Ep * m->cfg.k * c_eff;
}

pl_status pl_moe_create(pl_comm *ep, const pl_moe_cfg *cfg, pl_moe **out) {
  *out = NULL;
  int Ep = pl_comm_size(ep);
  if (cfg->H < 1 || cfg->I < 1)
    return pl_set_error(PL_EINVAL, "moe: H=%lld, I=%lld: both must be >= 1",
                        (long long)cfg->H, (long long)cfg->I);
  if (cfg->k < 1 || cfg->k > cfg->E)
    return pl_set_error(PL_EINVAL, "moe: k=%d: must be in [1, E=%d]", cfg->k,
                        cfg->E);
  if (cfg->E < 1 || cfg->E % Ep != 0)
    return pl_set_error(PL_EINVAL,
                        "moe: E=%d experts is not a multiple of Ep=%d ranks "
                        "(each rank must own E/Ep experts)",
                        cfg->E, Ep);
  if (cfg->dt != PL_F32 && cfg->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "moe: dtype %s: allowed f32, bf16",
                        pl_dtype_name(cfg->dt));
  if (cfg->variant == PL_MOE_PIPELINED && (cfg->c < 1 || cfg->K_max < 1))
    return pl_set_error(PL_EINVAL, "moe: c=%lld, K_max=%d: both must be >= 1",
                        (long long)cfg->c, cfg->K_max);
  if ((int64_t)cfg->E * cfg->H * cfg->I > ((int64_t)1 << 40))
    return pl_set_error(PL_EINVAL, "moe: E*H*I too large");
  if (cfg->comm_blocks < 0 || cfg->comm_blocks > 65535)
    return pl_set_error(PL_EINVAL, "moe: comm_blocks=%d: must be in [0, "
                        "65535] (0: uncapped)", cfg->comm_blocks);
  if (cfg->lanes < 0 || cfg->lanes > PL_MOE_MAX_LANES)
    return pl_set_error(PL_EINVAL, "moe: lanes=%d: must be in [0, %d]",
                        cfg->lanes, PL_MOE_MAX_LANES);
  pl_moe *m = calloc(1, sizeof *m);
  if (!m) return pl_set_error(PL_ENOMEM, "moe: host allocation");
  m->cfg = *cfg;
  m->comm = ep;
  m->dev = pl_comm_dev(ep);
  m->rank = pl_comm_rank(ep);
  m->Ep = Ep;
  m->El = cfg->E / Ep;
  m->cs = pl_dev_stream(m->dev);
  pl_status st = pl_stream_create(m->dev, &m->ms);
  if (st == PL_OK) pl_stream_set_grid_cap(m->ms, cfg->comm_blocks);
  if (st == PL_OK) st = pl_event_create(m->dev, &m->evf);
  if (st == PL_OK) st = pl_event_create(m->dev, &m->evp);
  if (st == PL_OK) st = pl_event_create(m->dev, &m->evq);
  for (int l = 0; l < cfg->lanes && st == PL_OK; l++) {
    st = pl_stream_create(m->dev, &m->ln[l]);
    if (st == PL_OK) st = pl_event_create(m->dev, &m->evj[l]);
    if (st == PL_OK) m->nl++;
  }
  if (st != PL_OK) {
    pl_moe_destroy(m);
    return st;
  }
  *out = m;
  return PL_OK;
}

void pl_moe_destroy(pl_moe *m) {
  if (!m) return;
  for (int l = 0; l < PL_MOE_MAX_LANES; l++) {
    if (m->ln[l]) pl_stream_destroy(m->ln[l]);
    if (m->evj[l]) pl_event_destroy(m->evj[l]);
  }
  if (m->evf) pl_event_destroy(m->evf);
  if (m->evp) pl_event_destroy(m->evp);
  if (m->evq) pl_event_destroy(m->evq);
  if (m->ms) pl_stream_destroy(m->ms);
  free(m);
}

const pl_moe_cfg *pl_moe_get_cfg(const pl_moe *m) { return &m->cfg; }

/* ---- routing metadata ----------------------------------------------------- */

typedef struct grp {
  int64_t row0, rows;
  int slot; /* < El: native expert index; else helper index + El */
} grp;

typedef struct chunk {
  int64_t nt;     /* tokens of this rank in the chunk                       */
  int64_t S;      /* remote routes sent                                     */
  int64_t s_self; /* routes kept                                            */
  int64_t R;      /* routes received (incl. kept)                           */
  int64_t self_off;
  int64_t *scnt, *sdsp, *rcnt, *rdsp; /* Ep each, rows; self zero in cnt  */
  int ng;
  grp *g;         /* the GEMM groups of the layout the compute sees        */
  int ng_src;     /* groups of the source-major receive layout             */
  bool em;        /* expert-major: received rows are permuted so that all
                     sources' rows of an expert are contiguous (one GEMM per
                     expert slot); see expert_major() */
  /* element offsets into the device index buffer */
  int64_t o_toks, o_slots, o_send_tok, o_send_route, o_self_tok, o_self_route;
  int64_t o_perm, o_inv; /* em: expert-major row r' <- source-major perm[r'];
                            source-major row r <- expert-major inv[r]     */
} chunk;

struct pl_moe_ctx {
  pl_moe *m;
  int64_t N, c_eff;
  int K;
  chunk *ch;
  int64_t *ibuf; /* host int64 backing of the chunk count arrays */
  int32_t *dmeta; /* device, tag "routing" */
  pl_llep_plan plan;
  int ns, nh;       /* weight sets sent to helpers / received as helper */
  int *s_exp, *s_dst, *h_exp, *h_src;
  void *hw;         /* nh x (Wg | Wu | Wd), dt, tag "llep_weights" */
  int64_t max_chunk_recv;
  int64_t *Rmax, *Smax; /* per chunk, over the group (one allocation) */
  double max_send_ratio;
  int overlapped;
  /* cfg.profile: events marking the end of a stage on the compute stream */
  pl_event **pev;
  int *pst;
  int pn, pcap;
  double stage_ms[PL_MOE_NSTAGES];
};

void pl_moe_ctx_free(pl_moe_ctx *c) {
  if (!c) return;
  if (c->ch)
    for (int i = 0; i < c->K; i++) free(c->ch[i].g);
  free(c->ch);
  free(c->ibuf);
  free(c->Rmax);
  if (c->dmeta) pl_free(c->m->dev, c->dmeta);
  if (c->hw) pl_free(c->m->dev, c->hw);
  free(c->s_exp);
  free(c->s_dst);
  free(c->h_exp);
  free(c->h_src);
  pl_llep_plan_free(&c->plan);
  for (int i = 0; i < c->pcap; i++)
    if (c->pev[i]) pl_event_destroy(c->pev[i]);
  free(c->pev);
  free(c->pst);
  free(c);
}

int pl_moe_ctx_overlapped(const pl_moe_ctx *c) { return c ? c->overlapped : 0; }

const double *pl_moe_ctx_stage_ms(const pl_moe_ctx *c) {
  static const double zero[PL_MOE_NSTAGES];
  return c ? c->stage_ms : zero;
}

const char *pl_moe_stage_name(int st) {
  static const char *const n[PL_MOE_NSTAGES] = {
      "fwd_wait", "fwd_up", "fwd_down", "bwd_wait", "bwd_recompute",
      "bwd_dact", "bwd_wgrad", "bwd_dx", "idle"};
  return st >= 0 && st < PL_MOE_NSTAGES ? n[st] : "?";
}

/* ---- stage profile (cfg.profile) ------------------------------------------ */

/* The end of stage `stage` (or, with stage < 0, a start mark: the time since
 * the previous mark counts as idle) on the compute stream. */
static pl_status mark(pl_moe_ctx *c, int stage, pl_stream *s) {
  if (!c->m->cfg.profile) return PL_OK;
  if (c->pn == c->pcap) {
    int cap = c->pcap ? 2 * c->pcap : 64;
    pl_event **e = realloc(c->pev, (size_t)cap * sizeof *e);
    if (!e) return pl_set_error(PL_ENOMEM, "moe: profile events");
    c->pev = e;
    int *t = realloc(c->pst, (size_t)cap * sizeof *t);
    if (!t) return pl_set_error(PL_ENOMEM, "moe: profile events");
    c->pst = t;
    for (int i = c->pcap; i < cap; i++) c->pev[i] = NULL;
    for (; c->pcap < cap; c->pcap++)
      PL_TRY(pl_event_create(c->m->dev, &c->pev[c->pcap]));
  }
  PL_TRY(pl_event_record(c->pev[c->pn], s));
  c->pst[c->pn++] = stage < 0 ? PL_MOE_ST_IDLE : stage;
  return PL_OK;
}

/* After the stream's work is done: the marks' intervals into stage_ms. */
static void settle(pl_moe_ctx *c, bool reset) {
  if (!c || !c->m->cfg.profile) return;
  if (reset) memset(c->stage_ms, 0, sizeof c->stage_ms);
  for (int i = 1; i < c->pn; i++) {
    float ms = 0;
    if (pl_event_elapsed_ms(c->pev[i - 1], c->pev[i], &ms) == PL_OK)
      c->stage_ms[c->pst[i]] += ms;
  }
  c->pn = 0;
}

/* ---- compute lanes (cfg.lanes) -------------------------------------------- */

/* One expert GEMM: C (m x n) = op(A) op(B) (+ beta C), row-major. */
typedef struct mg {
  int64_t m, n, k;
  const void *A, *B;
  void *C;
  int64_t lda, ldb, ldc;
} mg;

/* The lanes start after everything issued on s so far. */
static pl_status fork_lanes(pl_moe *m, pl_stream *s) {
  if (!m->nl) return PL_OK;
  PL_TRY(pl_event_record(m->evf, s));
  for (int l = 0; l < m->nl; l++) PL_TRY(pl_stream_wait(m->ln[l], m->evf));
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
static pl_status run_gemms(pl_moe *m, pl_stream *s, const mg *g, int n,
                           bool ta, bool tb, float beta, pl_dtype cdt,
                           int mode) {
  const pl_dtype dt = m->cfg.dt;
  if (!m->nl) mode = SOLO;
  if (mode != SOLO) PL_TRY(fork_lanes(m, s));
  const int first = mode == LANES || mode == LANE0 ? 1 : 0;
  const int nw = mode == SOLO ? 1 : mode == LANE0 ? 2 : m->nl + 1;
  int w = first; /* 0: s; l >= 1: lane l-1 */
  for (int i = 0; i < n; i++) {
    pl_stream *q = w == 0 ? s : m->ln[w - 1];
    PL_TRY(pl_moe_k_moe_gemm(q, ta, tb, g[i].m, g[i].n, g[i].k, 1.0f, g[i].A,
                             g[i].lda, g[i].B, g[i].ldb, beta, g[i].C,
                             g[i].ldc, dt, cdt));
    if (++w == nw) w = first;
  }
  if (mode == SPREAD) PL_TRY(join_lanes(m, s));
  return PL_OK;
}

static int helper_index(const pl_moe_ctx *c, int e) {
  for (int i = 0; i < c->nh; i++)
    if (c->h_exp[i] == e) return i;
  return -1;
}

/* Expert-major layout of chunk C (host side).  The all-to-all-v delivers a
 * source-major receive buffer (blocks by source rank, each by expert): with
 * strided chunks every chunk holds a segment of every (source, expert) pair,
 * so grouping the GEMMs by segment issues Ep * E_local small GEMMs per
 * projection.  Here the received rows are ordered by (expert slot, source)
 * instead: perm (expert-major row r' <- source-major row perm[r']) is applied
 * by one row gather after the receive, inv on the way back before the return
 * all-to-all-v, and the compute issues one GEMM per expert slot with all
 * sources' rows (at most E_local + helpers per projection).  Each permutation
 * holds a second copy of the chunk's rows for a moment, so the chunk is
 * expert-major only when 3*R fits the bound 2*Ep*k*c_eff rows on every rank
 * (backward: X, dout and the copy; decided on group-wide maxima, so every
 * rank and the overlap gates agree); otherwise it keeps the segment groups.
 * Row values do not depend on the grouping (row-deterministic GEMMs); the
 * weight gradients sum an expert's rows in one GEMM instead of per segment.
 * Returns nonzero on host OOM. */
static int expert_major(pl_moe *m, pl_moe_ctx *c, chunk *C, int32_t *hmeta) {
  const int nslot = m->El + c->nh;
  grp *ge = malloc((size_t)(nslot > 0 ? nslot : 1) * sizeof(grp));
  if (!ge) return 1;
  int nge = 0;
  int64_t r = 0;
  for (int sl = 0; sl < nslot; sl++) {
    int64_t r0 = r;
    for (int gi = 0; gi < C->ng_src; gi++) {
      const grp *g = &C->g[gi];
      if (g->slot != sl) continue;
      for (int64_t q = 0; q < g->rows; q++, r++) {
        hmeta[C->o_perm + r] = (int32_t)(g->row0 + q);
        hmeta[C->o_inv + g->row0 + q] = (int32_t)r;
      }
    }
    if (r > r0) ge[nge++] = (grp){r0, r - r0, sl};
  }
  PL_ASSERT(r == C->R);
  free(C->g);
  C->g = ge;
  C->ng = nge;
  C->em = true;
  return 0;
}

/* Everything from the routes and the group's counts: plan, chunks, per-route
 * destinations and slots, per-chunk send/receive layouts, groups; then the
 * index arrays are uploaded once.  Collective (host all-gathers). */
static pl_status build_ctx(pl_moe *m, int64_t N, const int32_t *idx,
                           pl_moe_ctx **out) {
  const pl_moe_cfg *cf = &m->cfg;
  const int E = cf->E, k = cf->k, Ep = m->Ep, me = m->rank;
  pl_status st = PL_OK;
  *out = NULL;
  pl_moe_ctx *c = calloc(1, sizeof *c);
  int64_t *mine = calloc((size_t)E + 2, sizeof(int64_t));
  int64_t *all = calloc((size_t)Ep * (E + 2), sizeof(int64_t));
  int64_t *cnt3 = NULL, *off3 = NULL, *rc3 = NULL, *snd3 = NULL;
  int32_t *dest = NULL, *hmeta = NULL;
  int64_t *gcount = NULL, *cum = NULL, *li = NULL, *tokq = NULL;
  if (!c || !mine || !all) goto oom;
  c->m = m;
  c->N = N;

  /* 1. local counts (+ N and a validity flag) gathered by every rank */
  int64_t bad = N < 0 ? 1 : 0;
  for (int64_t r = 0; r < N * k && !bad; r++) {
    if (idx[r] < 0 || idx[r] >= E) bad = 1 + r;
    else mine[idx[r]]++;
  }
  mine[E] = N < 0 ? 0 : N;
  mine[E + 1] = bad;
  st = pl_host_allgather_i64(m->comm, mine, (size_t)E + 2, all);
  if (st != PL_OK) goto fail;
  for (int r = 0; r < Ep; r++)
    if (all[(size_t)r * (E + 2) + E + 1]) {
      if (r == me && N < 0)
        st = pl_set_error(PL_EINVAL, "moe: N=%lld: must be >= 0",
                          (long long)N);
      else if (r == me)
        st = pl_set_error(PL_EINVAL,
                          "moe: idx[%lld]=%d: expert ids must be in [0, E=%d)",
                          (long long)(bad - 1), idx[bad - 1], E);
      else
        st = pl_set_error(PL_EINVAL, "moe: rank %d passed invalid routes", r);
      goto fail;
    }
  gcount = calloc((size_t)E, sizeof(int64_t));
  cum = calloc((size_t)E, sizeof(int64_t));
  li = calloc((size_t)E, sizeof(int64_t));
  if (!gcount || !cum || !li) goto oom;
  int64_t N_max = 0;
  for (int r = 0; r < Ep; r++) {
    const int64_t *a = all + (size_t)r * (E + 2);
    for (int e = 0; e < E; e++) {
      gcount[e] += a[e];
      if (r < me) cum[e] += a[e];
    }
    if (a[E] > N_max) N_max = a[E];
  }

  /* 2. plan and chunking (Eq. 1) */
  pl_llep_knobs kn = cf->knobs;
  if (cf->variant == PL_MOE_EP) kn.native = true;
  st = pl_llep_plan_build(gcount, E, Ep, kn, &c->plan);
  if (st != PL_OK) goto fail;
  if (cf->variant == PL_MOE_PIPELINED) {
    st = pl_eq1_chunks(N_max, cf->c, cf->K_max, &c->K, &c->c_eff);
    if (st != PL_OK) goto fail;
  } else {
    c->K = 1;
    c->c_eff = N_max;
  }
  const int K = c->K;
  const bool contig = cf->variant == PL_MOE_PIPELINED && cf->contiguous;

  /* 3. destination of every route by its global position; counts per
   * (chunk, dest, expert) */
  size_t n3 = (size_t)K * Ep * E;
  cnt3 = calloc(n3, sizeof(int64_t));
  off3 = calloc(n3, sizeof(int64_t));
  dest = malloc((size_t)(N * k > 0 ? N * k : 1) * sizeof(int32_t));
  if (!cnt3 || !off3 || !dest) goto oom;
#define I3(ch, d, e) (((size_t)(ch) * Ep + (d)) * E + (e))
  for (int64_t t = 0; t < N; t++) {
    int ch = pl_chunk_of(t, N, K, contig);
    for (int j = 0; j < k; j++) {
      int e = idx[t * k + j];
      int d = pl_llep_plan_dest(&c->plan, e, cum[e] + li[e]++);
      dest[t * k + j] = d;
      cnt3[I3(ch, d, e)]++;
    }
  }
  /* offsets of expert e inside block (ch, d) */
  for (int ch = 0; ch < K; ch++)
    for (int d = 0; d < Ep; d++) {
      int64_t o = 0;
      for (int e = 0; e < E; e++) {
        off3[I3(ch, d, e)] = o;
        o += cnt3[I3(ch, d, e)];
      }
    }

  /* 4. what every source sends me: rc3[src][ch][e] */
  snd3 = malloc(n3 * sizeof(int64_t));
  rc3 = malloc(n3 * sizeof(int64_t));
  if (!snd3 || !rc3) goto oom;
  for (int d = 0; d < Ep; d++)
    for (int ch = 0; ch < K; ch++)
      for (int e = 0; e < E; e++)
        snd3[((size_t)d * K + ch) * E + e] = cnt3[I3(ch, d, e)];
  st = pl_host_alltoall_i64(m->comm, snd3, (size_t)K * E, rc3);
  if (st != PL_OK) goto fail;

  /* 5. helper weight sets: (expert, helper) pairs of the plan */
  {
    const pl_llep_plan *p = &c->plan;
    int np = p->n_pieces;
    c->s_exp = malloc((size_t)(np + 1) * sizeof(int));
    c->s_dst = malloc((size_t)(np + 1) * sizeof(int));
    c->h_exp = malloc((size_t)(np + 1) * sizeof(int));
    c->h_src = malloc((size_t)(np + 1) * sizeof(int));
    if (!c->s_exp || !c->s_dst || !c->h_exp || !c->h_src) goto oom;
    /* send list ordered by (dst, expert); receive list by (src, expert) */
    for (int d = 0; d < Ep; d++)
      for (int e = 0; e < E; e++) {
        int o = pl_llep_native_rank(e, E, Ep);
        if (o == d) continue;
        bool has = false;
        for (int i = p->piece_off[e]; i < p->piece_off[e + 1]; i++)
          if (p->pieces[i].rank == d) has = true;
        if (!has) continue;
        if (o == me) {
          c->s_exp[c->ns] = e;
          c->s_dst[c->ns++] = d;
        }
        (void)0;
      }
    for (int src = 0; src < Ep; src++)
      for (int e = src * m->El; e < (src + 1) * m->El; e++) {
        if (src == me) continue;
        bool has = false;
        for (int i = p->piece_off[e]; i < p->piece_off[e + 1]; i++)
          if (p->pieces[i].rank == me) has = true;
        if (!has) continue;
        c->h_exp[c->nh] = e;
        c->h_src[c->nh++] = src;
      }
  }

  /* 6. per-chunk layouts */
  c->ch = calloc((size_t)K, sizeof(chunk));
  c->ibuf = calloc((size_t)K * 4 * Ep, sizeof(int64_t));
  tokq = malloc((size_t)(N > 0 ? N : 1) * sizeof(int64_t));
  if (!c->ch || !c->ibuf || !tokq) goto oom;
  int64_t nmeta = 0;
  int64_t tot_S = 0, tot_R = 0;
  for (int ch = 0; ch < K; ch++) {
    chunk *C = &c->ch[ch];
    C->scnt = c->ibuf + (size_t)ch * 4 * Ep;
    C->sdsp = C->scnt + Ep;
    C->rcnt = C->sdsp + Ep;
    C->rdsp = C->rcnt + Ep;
    int64_t so = 0;
    for (int d = 0; d < Ep; d++) {
      int64_t n = 0;
      for (int e = 0; e < E; e++) n += cnt3[I3(ch, d, e)];
      if (d == me) {
        C->s_self = n;
        C->scnt[d] = 0;
        C->sdsp[d] = 0;
      } else {
        C->scnt[d] = n;
        C->sdsp[d] = so;
        so += n;
      }
    }
    C->S = so;
    int64_t ro = 0;
    int ng = 0;
    for (int src = 0; src < Ep; src++) {
      int64_t n = 0;
      for (int e = 0; e < E; e++) {
        int64_t v = rc3[((size_t)src * K + ch) * E + e];
        n += v;
        if (v > 0) ng++;
      }
      C->rdsp[src] = ro;
      C->rcnt[src] = src == me ? 0 : n;
      if (src == me) C->self_off = ro;
      ro += n;
    }
    C->R = ro;
    C->g = malloc((size_t)(ng > 0 ? ng : 1) * sizeof(grp));
    if (!C->g) goto oom;
    for (int src = 0; src < Ep; src++) {
      int64_t o = C->rdsp[src];
      for (int e = 0; e < E; e++) {
        int64_t v = rc3[((size_t)src * K + ch) * E + e];
        if (v == 0) continue;
        int slot;
        if (pl_llep_native_rank(e, E, Ep) == me)
          slot = e - me * m->El;
        else {
          int h = helper_index(c, e);
          PL_ASSERT(h >= 0);
          slot = m->El + h;
        }
        C->g[C->ng++] = (grp){o, v, slot};
        o += v;
      }
    }
    C->ng_src = C->ng;
    tot_S += C->S;
    tot_R += C->R;
    if (C->R > c->max_chunk_recv) c->max_chunk_recv = C->R;
  }
  /* tokens per chunk */
  for (int64_t t = 0; t < N; t++) c->ch[pl_chunk_of(t, N, K, contig)].nt++;
  for (int ch = 0; ch < K; ch++) {
    chunk *C = &c->ch[ch];
    C->o_toks = nmeta;
    nmeta += C->nt;
    C->o_slots = nmeta;
    nmeta += C->nt * k;
    C->o_send_tok = nmeta;
    nmeta += C->S;
    C->o_send_route = nmeta;
    nmeta += C->S;
    C->o_self_tok = nmeta;
    nmeta += C->s_self;
    C->o_self_route = nmeta;
    nmeta += C->s_self;
    C->o_perm = nmeta; /* filled by expert_major() if the chunk is em */
    nmeta += Ep > 1 ? C->R : 0;
    C->o_inv = nmeta;
    nmeta += Ep > 1 ? C->R : 0;
  }
  if (nmeta > INT32_MAX || tot_R > INT32_MAX) {
    st = pl_set_error(PL_EINVAL, "moe: %lld routes on one rank: beyond int32",
                      (long long)nmeta);
    goto fail;
  }
  hmeta = malloc((size_t)(nmeta > 0 ? nmeta : 1) * sizeof(int32_t));
  if (!hmeta) goto oom;
  {
    int64_t *ntq = calloc((size_t)K, sizeof(int64_t)); /* tokens placed */
    int64_t *cur = calloc(n3, sizeof(int64_t));
    if (!ntq || !cur) {
      free(ntq);
      free(cur);
      goto oom;
    }
    for (int64_t t = 0; t < N; t++) {
      int ch = pl_chunk_of(t, N, K, contig);
      chunk *C = &c->ch[ch];
      int64_t q = ntq[ch]++;
      hmeta[C->o_toks + q] = (int32_t)t;
      for (int j = 0; j < k; j++) {
        int e = idx[t * k + j], d = dest[t * k + j];
        int64_t bi = off3[I3(ch, d, e)] + cur[I3(ch, d, e)]++;
        int32_t slot;
        if (d != me) {
          int64_t sl = C->sdsp[d] + bi;
          hmeta[C->o_send_tok + sl] = (int32_t)t;
          hmeta[C->o_send_route + sl] = (int32_t)(t * k + j);
          slot = (int32_t)sl;
        } else {
          hmeta[C->o_self_tok + bi] = (int32_t)t;
          hmeta[C->o_self_route + bi] = (int32_t)(t * k + j);
          slot = (int32_t)(-1 - (C->self_off + bi));
        }
        hmeta[C->o_slots + q * k + j] = slot;
      }
    }
    free(ntq);
    free(cur);
  }
#undef I3

  /* 7. group-wide per-chunk maxima (the overlap gate must decide the same on
   * every rank, or the collectives' order would differ) and the max-send
   * ratio over (chunk, destination) */
  {
    int64_t *rk = malloc((size_t)2 * K * sizeof(int64_t));
    int64_t *ra = malloc((size_t)2 * K * Ep * sizeof(int64_t));
    c->Rmax = calloc((size_t)2 * K, sizeof(int64_t));
    if (!rk || !ra || !c->Rmax) {
      free(rk);
      free(ra);
      goto oom;
    }
    c->Smax = c->Rmax + K;
    for (int ch = 0; ch < K; ch++) {
      rk[ch] = c->ch[ch].R;
      rk[K + ch] = c->ch[ch].S;
    }
    st = pl_host_allgather_i64(m->comm, rk, (size_t)2 * K, ra);
    if (st == PL_OK) {
      int64_t mx = 0, sum = 0;
      for (int r = 0; r < Ep; r++)
        for (int ch = 0; ch < K; ch++) {
          int64_t R = ra[(size_t)r * 2 * K + ch], S = ra[(size_t)r * 2 * K + K + ch];
          sum += R;
          if (R > mx) mx = R;
          if (R > c->Rmax[ch]) c->Rmax[ch] = R;
          if (S > c->Smax[ch]) c->Smax[ch] = S;
        }
      c->max_send_ratio = sum > 0 ? (double)mx * K * Ep / (double)sum : 1.0;
    }
    free(rk);
    free(ra);
    if (st != PL_OK) goto fail;
  }
  if (!cf->source_major && Ep > 1) {
    const int64_t budget = row_budget(m, c->c_eff);
    for (int ch = 0; ch < K; ch++)
      if (3 * c->Rmax[ch] <= budget && expert_major(m, c, &c->ch[ch], hmeta))
        goto oom;
  }

  /* 8. upload the indices */
  st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)nmeta * sizeof(int32_t),
                      "routing", m->cs, (void **)&c->dmeta);
  if (st != PL_OK) goto fail;
  if (nmeta > 0) {
    st = pl_memcpy_async(m->cs, c->dmeta, hmeta,
                         (size_t)nmeta * sizeof(int32_t));
    if (st == PL_OK) st = pl_stream_sync(m->cs); /* hmeta is freed next */
    if (st != PL_OK) goto fail;
  }
  *out = c;
  c = NULL;
  goto done;
oom:
  st = pl_set_error(PL_ENOMEM, "moe: host metadata allocation (N=%lld)",
                    (long long)N);
fail:
done: /* host scratch goes either way; the context only on failure */
  free(mine);
  free(all);
  free(cnt3);
  free(off3);
  free(rc3);
  free(snd3);
  free(dest);
  free(hmeta);
  free(gcount);
  free(cum);
  free(li);
  free(tokq);
  if (c) pl_moe_ctx_free(c);
  return st;
}

/* ---- helper weights ------------------------------------------------------- */

static size_t wset_elems(const pl_moe *m) {
  return 3 * (size_t)m->cfg.H * (size_t)m->cfg.I;
}

/* Failure agreement.  A rank that fails locally (a tracked allocation beyond
 * the arena's limit, a kernel launch) must not leave its peers waiting in the
 * next collective: every helper that runs a collective first agrees on the
 * status over the group (one small host all-reduce, no device sync), and is
 * called by every rank in the same sequence whatever happened before (the
 * sequence depends only on group-wide data).  A failed rank keeps its own
 * message; its peers get PL_ENOMEM or PL_ECOMM naming the cause. */
static pl_status agree(pl_moe *m, pl_status st) {
  int64_t f = st == PL_OK ? 0 : st == PL_ENOMEM ? 1 : 2;
  pl_status cs = pl_host_allreduce_i64(m->comm, &f, 1, PL_RED_MAX);
  if (cs != PL_OK) return st != PL_OK ? st : cs;
  if (f == 0) return PL_OK;
  if (st != PL_OK) return st;
  return pl_set_error(f == 1 ? PL_ENOMEM : PL_ECOMM,
                      "moe: another rank of the EP group failed (%s)",
                      f == 1 ? "out of memory" : "error");
}

/* One all-to-all-v of whole weight sets (we elements each): send[i] goes to
 * rank to[i], recv[j] comes from rank from[j], both lists in buffer order.
 * The group agrees on st first, so a rank that failed earlier makes every
 * rank skip the collective together. */
static pl_status exchange_sets(pl_moe *m, const void *send, const int *to,
                               int nto, void *recv, const int *from, int nfrom,
                               size_t we, pl_dtype dt, pl_stream *s,
                               pl_status st) {
  const int Ep = m->Ep;
  size_t *sc = NULL;
  if (st == PL_OK) {
    sc = calloc((size_t)Ep * 4, sizeof(size_t));
    if (!sc) st = pl_set_error(PL_ENOMEM, "moe: host counts");
  }
  st = agree(m, st);
  if (st == PL_OK) {
    size_t *sd = sc + Ep, *rcn = sd + Ep, *rd = rcn + Ep;
    for (int i = 0; i < nto; i++) sc[to[i]] += we;
    for (int i = 0; i < nfrom; i++) rcn[from[i]] += we;
    for (int d = 1; d < Ep; d++) {
      sd[d] = sd[d - 1] + sc[d - 1];
      rd[d] = rd[d - 1] + rcn[d - 1];
    }
    st = pl_alltoallv(m->comm, send, sc, sd, recv, rcn, rd, dt, s);
  }
  free(sc);
  return st;
}

/* Owners send each spilled expert's (Wg | Wu | Wd) to its helpers (one
 * all-to-all-v of weight sets), on stream s. */
static pl_status transfer_weights(pl_moe *m, pl_moe_ctx *c,
                                  const pl_moe_weights *W, pl_stream *s,
                                  pl_status st) {
  int64_t tot = c ? c->ns + c->nh : 0;
  pl_status hs = pl_host_allreduce_i64(m->comm, &tot, 1, PL_RED_SUM);
  if (hs != PL_OK) return st != PL_OK ? st : hs;
  if (tot == 0) return st;
  size_t we = wset_elems(m), HI = (size_t)m->cfg.H * m->cfg.I;
  size_t b = pl_dtype_size(m->cfg.dt);
  void *sbuf = NULL;
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)c->ns * we * b,
                        "llep_weights", s, &sbuf);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)c->nh * we * b,
                        "llep_weights", s, &c->hw);
  for (int i = 0; st == PL_OK && i < c->ns; i++) {
    size_t li = (size_t)(c->s_exp[i] - m->rank * m->El);
    char *dst = (char *)sbuf + (size_t)i * we * b;
    st = pl_memcpy_async(s, dst, (char *)W->wg + li * HI * b, HI * b);
    if (st == PL_OK)
      st = pl_memcpy_async(s, dst + HI * b, (char *)W->wu + li * HI * b,
                           HI * b);
    if (st == PL_OK)
      st = pl_memcpy_async(s, dst + 2 * HI * b, (char *)W->wd + li * HI * b,
                           HI * b);
  }
  st = exchange_sets(m, sbuf, c->s_dst, c->ns, c->hw, c->h_src, c->nh, we,
                     m->cfg.dt, s, st);
  pl_free_async(m->dev, sbuf, s);
  return st;
}

/* Helpers send the accumulated gradients of their borrowed experts back; the
 * owner adds them to its own, in (helper rank, expert) order. */
static pl_status return_wgrads(pl_moe *m, pl_moe_ctx *c, float *hg,
                               pl_moe_wgrads *G, pl_stream *s, pl_status st) {
  int64_t tot = c->ns + c->nh;
  pl_status hs = pl_host_allreduce_i64(m->comm, &tot, 1, PL_RED_SUM);
  if (hs != PL_OK) return st != PL_OK ? st : hs;
  if (tot == 0) return st;
  size_t we = wset_elems(m), HI = (size_t)m->cfg.H * m->cfg.I;
  float *rbuf = NULL;
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE,
                        (size_t)c->ns * we * sizeof(float), "llep_grads", s,
                        (void **)&rbuf);
  st = exchange_sets(m, hg, c->h_src, c->nh, rbuf, c->s_dst, c->ns, we,
                     PL_F32, s, st);
  for (int i = 0; i < c->ns && st == PL_OK; i++) {
    size_t li = (size_t)(c->s_exp[i] - m->rank * m->El);
    const float *src = rbuf + (size_t)i * we;
    st = pl_axpy(s, G->wg + li * HI, PL_F32, src, PL_F32, HI, 1.0f);
    if (st == PL_OK)
      st = pl_axpy(s, G->wu + li * HI, PL_F32, src + HI, PL_F32, HI, 1.0f);
    if (st == PL_OK)
      st = pl_axpy(s, G->wd + li * HI, PL_F32, src + 2 * HI, PL_F32, HI, 1.0f);
  }
  pl_free_async(m->dev, rbuf, s);
  return st;
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
    const char *base = (const char *)c->hw + (size_t)(slot - m->El) * 3 * HI * b;
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

/* ---- chunk stages ------------------------------------------------------- */

static const int32_t *meta(const pl_moe_ctx *c, int64_t off) {
  return c->dmeta + off;
}

/* Counts in elements for pl_alltoallv: rows * width. */
static void scaled(const int64_t *rows, size_t width, int Ep, size_t *out) {
  for (int d = 0; d < Ep; d++) out[d] = (size_t)rows[d] * width;
}

/* The four count arrays of an all-to-all-v, in elements (rows * width);
 * reverse swaps the send and receive sides (the return trip). */
static pl_status a2a_counts(const pl_moe *m, const chunk *C, size_t width,
                            bool reverse, size_t **out) {
  int Ep = m->Ep;
  size_t *p = malloc((size_t)Ep * 4 * sizeof(size_t));
  *out = p;
  if (!p) return pl_set_error(PL_ENOMEM, "moe: host counts");
  scaled(reverse ? C->rcnt : C->scnt, width, Ep, p);
  scaled(reverse ? C->rdsp : C->sdsp, width, Ep, p + Ep);
  scaled(reverse ? C->scnt : C->rcnt, width, Ep, p + 2 * Ep);
  scaled(reverse ? C->sdsp : C->rdsp, width, Ep, p + 3 * Ep);
  return PL_OK;
}

/* *buf (n rows of `width` elements of dt, tag `tag`) <- a new buffer whose
 * row i is old row idx[i]; the old one is freed.  The expert-major
 * permutation and its inverse (see expert_major). */
static pl_status permute_rows(pl_moe *m, const int32_t *idx, int64_t n,
                              int64_t width, pl_dtype dt, const char *tag,
                              void **buf, pl_stream *s, pl_status st) {
  if (st != PL_OK || n == 0) return st;
  void *nb = NULL;
  st = pl_alloc_async(m->dev, PL_ARENA_DEVICE,
                      (size_t)n * (size_t)width * pl_dtype_size(dt), tag, s,
                      &nb);
  if (st == PL_OK && width == 1 && dt == PL_F32) /* route scalars */
    st = pl_moe_k_moe_gather_f32(s, nb, *buf, idx, n);
  else if (st == PL_OK)
    st = pl_moe_k_moe_gather(s, nb, *buf, idx, n, width, dt);
  if (st != PL_OK) {
    pl_free_async(m->dev, nb, s);
    return st;
  }
  pl_free_async(m->dev, *buf, s);
  *buf = nb;
  return PL_OK;
}

/* Source rows (src: N x H) of chunk C to their computing ranks: *recv gets
 * R x H (tag dispatch), blocks by source, own routes gathered directly.
 * Called by every rank; st is the status so far (see agree). */
static pl_status dispatch_rows(pl_moe *m, pl_moe_ctx *c, chunk *C,
                               const void *src, void **recv, pl_stream *s,
                               pl_status st) {
  const int64_t H = m->cfg.H;
  const pl_dtype dt = m->cfg.dt;
  const size_t rb = (size_t)H * pl_dtype_size(dt);
  void *xs = NULL;
  size_t *p = NULL;
  *recv = NULL;
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->S * rb,
                        "dispatch", s, &xs);
  if (st == PL_OK)
    st = pl_moe_k_moe_gather(s, xs, src, meta(c, C->o_send_tok), C->S, H, dt);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * rb,
                        "dispatch", s, recv);
  if (st == PL_OK)
    st = pl_moe_k_moe_gather(s, (char *)*recv + (size_t)C->self_off * rb, src,
                             meta(c, C->o_self_tok), C->s_self, H, dt);
  if (st == PL_OK) st = a2a_counts(m, C, (size_t)H, false, &p);
  st = agree(m, st);
  if (st == PL_OK)
    st = pl_alltoallv(m->comm, xs, p, p + m->Ep, *recv, p + 2 * m->Ep,
                      p + 3 * m->Ep, dt, s);
  free(p);
  pl_free_async(m->dev, xs, s);
  if (C->em)
    st = permute_rows(m, meta(c, C->o_perm), C->R, H, dt, "dispatch", recv, s,
                      st);
  if (st != PL_OK && *recv) {
    pl_free_async(m->dev, *recv, s);
    *recv = NULL;
  }
  return st;
}

/* Per-route scalars w (N*k, f32) of chunk C to the computing ranks: R floats
 * (tag routing). */
static pl_status dispatch_scalars(pl_moe *m, pl_moe_ctx *c, chunk *C,
                                  const float *w, float **recv, pl_stream *s,
                                  pl_status st) {
  float *ws = NULL;
  size_t *p = NULL;
  *recv = NULL;
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->S * sizeof(float),
                        "routing", s, (void **)&ws);
  if (st == PL_OK)
    st = pl_moe_k_moe_gather_f32(s, ws, w, meta(c, C->o_send_route), C->S);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * sizeof(float),
                        "routing", s, (void **)recv);
  if (st == PL_OK)
    st = pl_moe_k_moe_gather_f32(s, *recv + C->self_off, w,
                                 meta(c, C->o_self_route), C->s_self);
  if (st == PL_OK) st = a2a_counts(m, C, 1, false, &p);
  st = agree(m, st);
  if (st == PL_OK)
    st = pl_alltoallv(m->comm, ws, p, p + m->Ep, *recv, p + 2 * m->Ep,
                      p + 3 * m->Ep, PL_F32, s);
  free(p);
  pl_free_async(m->dev, ws, s);
  if (C->em)
    st = permute_rows(m, meta(c, C->o_perm), C->R, 1, PL_F32, "routing",
                      (void **)recv, s, st);
  if (st != PL_OK && *recv) {
    pl_free_async(m->dev, *recv, s);
    *recv = NULL;
  }
  return st;
}

/* Rows computed here (R x width, blocks by source) back to their sources:
 * *back gets S x width (remote routes only). */
static pl_status return_rows(pl_moe *m, chunk *C, const void *Y, size_t width,
                             pl_dtype dt, const char *tag, void **back,
                             pl_stream *s, pl_status st) {
  size_t *p = NULL;
  *back = NULL;
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE,
                        (size_t)C->S * width * pl_dtype_size(dt), tag, s, back);
  if (st == PL_OK) st = a2a_counts(m, C, width, true, &p);
  st = agree(m, st);
  if (st == PL_OK)
    st = pl_alltoallv(m->comm, Y, p, p + m->Ep, *back, p + 2 * m->Ep,
                      p + 3 * m->Ep, dt, s);
  free(p);
  return st;
}

/* Forward expert compute of chunk C on stream s: X (R x H) -> Y in place. */
static pl_status expert_fwd(pl_moe *m, pl_moe_ctx *c, chunk *C,
                            const pl_moe_weights *W, void *X, pl_stream *s) {
  const int64_t H = m->cfg.H, I = m->cfg.I;
  const pl_dtype dt = m->cfg.dt;
  const size_t b = pl_dtype_size(dt);
  const int ng = C->ng;
  void *G = NULL, *U = NULL, *A = NULL;
  mg *g2 = malloc((size_t)(2 * ng + 1) * sizeof *g2);
  if (!g2) return pl_set_error(PL_ENOMEM, "moe: host");
  pl_status st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * I * b,
                                "expert", s, &G);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * I * b,
                        "expert", s, &U);
#define ROWS(base, w) ((char *)(base) + (size_t)gr->row0 * (w) * b)
  for (int gi = 0; gi < ng && st == PL_OK; gi++) {
    const grp *gr = &C->g[gi];
    const void *wg, *wu, *wd;
    slot_weights(m, c, W, gr->slot, &wg, &wu, &wd);
    g2[2 * gi] = (mg){gr->rows, I, H, ROWS(X, H), wg, ROWS(G, I), H, I, I};
    g2[2 * gi + 1] = (mg){gr->rows, I, H, ROWS(X, H), wu, ROWS(U, I), H, I, I};
  }
  if (st == PL_OK)
    st = run_gemms(m, s, g2, 2 * ng, false, false, 0.0f, dt, SPREAD);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * I * b,
                        "expert", s, &A);
  if (st == PL_OK) st = pl_moe_k_moe_swiglu_fwd(s, A, G, U, C->R, I, dt);
  pl_free_async(m->dev, G, s);
  pl_free_async(m->dev, U, s);
  G = U = NULL;
  if (st == PL_OK) st = mark(c, PL_MOE_ST_FWD_UP, s);
  for (int gi = 0; gi < ng && st == PL_OK; gi++) {
    const grp *gr = &C->g[gi];
    const void *wg, *wu, *wd;
    slot_weights(m, c, W, gr->slot, &wg, &wu, &wd);
    g2[gi] = (mg){gr->rows, H, I, ROWS(A, I), wd, ROWS(X, H), I, H, H};
  }
  if (st == PL_OK)
    st = run_gemms(m, s, g2, ng, false, false, 0.0f, dt, SPREAD);
#undef ROWS
  pl_free_async(m->dev, A, s);
  free(g2);
  if (st == PL_OK) st = mark(c, PL_MOE_ST_FWD_DOWN, s);
  return st;
}

/* Backward expert compute of chunk C: *Xp (R x H, the layer input rows; freed
 * here, as soon as its last GEMM is issued, and evX recorded after the free so
 * the next chunk's dispatch can wait for it), D (R x H: dout rows in, dX rows
 * out), wr (R route weights), dwr (R out).  With lanes, dWg and dWu (reading
 * X, dG, dU) run on the lanes beside dWd and dX on s: the weight gradients
 * are bound by their fp32 accumulators' traffic, dX by the tensor cores. */
static pl_status expert_bwd(pl_moe *m, pl_moe_ctx *c, chunk *C,
                            const pl_moe_weights *W, pl_moe_wgrads *Gw,
                            float *hg, void **Xp, void *D, const float *wr,
                            float *dwr, pl_event *evX, pl_event *evDD,
                            pl_stream *s) {
  const int64_t H = m->cfg.H, I = m->cfg.I;
  const pl_dtype dt = m->cfg.dt;
  const size_t b = pl_dtype_size(dt);
  const int ng = C->ng;
  void *X = *Xp;
  void *G = NULL, *U = NULL, *A = NULL, *P = NULL;
  size_t ib = (size_t)C->R * I * b;
  mg *g2 = malloc((size_t)(2 * ng + 1) * sizeof *g2);
  if (!g2) return pl_set_error(PL_ENOMEM, "moe: host");
  pl_status st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, ib, "expert", s, &G);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, ib, "expert", s, &U);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, ib, "expert", s, &A);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, ib, "expert", s, &P);
#define ROWS(base, w) ((char *)(base) + (size_t)gr->row0 * (w) * b)
#define WEIGHTS                                                                  const grp *gr = &C->g[gi];                                                     const void *wg, *wu, *wd;                                                      slot_weights(m, c, W, gr->slot, &wg, &wu, &wd)
  /* recompute G, U, A (X only: the dout rows may still be arriving, evDD) */
  for (int gi = 0; gi < ng && st == PL_OK; gi++) {
    WEIGHTS;
    g2[2 * gi] = (mg){gr->rows, I, H, ROWS(X, H), wg, ROWS(G, I), H, I, I};
    g2[2 * gi + 1] = (mg){gr->rows, I, H, ROWS(X, H), wu, ROWS(U, I), H, I, I};
  }
  if (st == PL_OK)
    st = run_gemms(m, s, g2, 2 * ng, false, false, 0.0f, dt, SPREAD);
  if (st == PL_OK) st = pl_moe_k_moe_swiglu_fwd(s, A, G, U, C->R, I, dt);
  if (st == PL_OK) st = mark(c, PL_MOE_ST_BWD_RECOMPUTE, s);
  if (st == PL_OK && evDD) st = pl_stream_wait(s, evDD);
  /* P = dout * Wd^T */
  for (int gi = 0; gi < ng && st == PL_OK; gi++) {
    WEIGHTS;
    g2[gi] = (mg){gr->rows, I, H, ROWS(D, H), wd, ROWS(P, I), H, H, I};
  }
  if (st == PL_OK)
    st = run_gemms(m, s, g2, ng, false, true, 0.0f, dt, SPREAD);
  /* dw = <P, A>; G <- dG, U <- dU */
  if (st == PL_OK)
    st = pl_moe_k_moe_swiglu_bwd(s, G, U, P, A, wr, dwr, C->R, I, dt);
  pl_free_async(m->dev, P, s);
  P = NULL;
  if (st == PL_OK) st = mark(c, PL_MOE_ST_BWD_DACT, s);
  /* dWg += X^T dG; dWu += X^T dU: the last uses of X (on the lanes if any,
   * where X is freed and evX recorded; joined after dX) */
  for (int gi = 0; gi < ng && st == PL_OK; gi++) {
    const grp *gr = &C->g[gi];
    float *gg, *gu, *gd;
    slot_grads(m, Gw, hg, gr->slot, &gg, &gu, &gd);
    g2[2 * gi] = (mg){H, I, gr->rows, ROWS(X, H), ROWS(G, I), gg, H, I, I};
    g2[2 * gi + 1] = (mg){H, I, gr->rows, ROWS(X, H), ROWS(U, I), gu, H, I, I};
  }
  pl_stream *xs = m->nl ? m->ln[0] : s; /* where X's last use ends */
  if (st == PL_OK)
    /* a source-major chunk has several groups per slot: one lane, in order */
    st = run_gemms(m, s, g2, 2 * ng, true, false, 1.0f, PL_F32,
                   C->em ? LANES : LANE0);
  /* lane 0 frees X after the other lanes' uses of it */
  for (int l = 1; l < m->nl && st == PL_OK; l++) {
    st = pl_event_record(m->evj[l], m->ln[l]);
    if (st == PL_OK) st = pl_stream_wait(xs, m->evj[l]);
  }
  pl_free_async(m->dev, X, xs);
  *Xp = NULL;
  if (st == PL_OK && evX) st = pl_event_record(evX, xs);
  /* dY = w * dout; dWd += A^T dY */
  if (st == PL_OK) st = pl_moe_k_moe_scale_rows(s, D, wr, C->R, H, dt);
  for (int gi = 0; gi < ng && st == PL_OK; gi++) {
    const grp *gr = &C->g[gi];
    float *gg, *gu, *gd;
    slot_grads(m, Gw, hg, gr->slot, &gg, &gu, &gd);
    g2[gi] = (mg){I, H, gr->rows, ROWS(A, I), ROWS(D, H), gd, I, H, H};
  }
  /* on s alone when lanes carry dWg, dWu */
  if (st == PL_OK)
    st = run_gemms(m, s, g2, ng, true, false, 1.0f, PL_F32, SOLO);
  pl_free_async(m->dev, A, s);
  A = NULL;
  if (st == PL_OK) st = mark(c, PL_MOE_ST_BWD_WGRAD, s);
  /* dX = dG Wg^T + dU Wu^T, into D (after dWd's reads of D: same stream) */
  for (int gi = 0; gi < ng && st == PL_OK; gi++) {
    WEIGHTS;
    g2[gi] = (mg){gr->rows, H, I, ROWS(G, I), wg, ROWS(D, H), I, I, H};
  }
  if (st == PL_OK)
    st = run_gemms(m, s, g2, ng, false, true, 0.0f, dt, SOLO);
  for (int gi = 0; gi < ng && st == PL_OK; gi++) {
    WEIGHTS;
    g2[gi] = (mg){gr->rows, H, I, ROWS(U, I), wu, ROWS(D, H), I, I, H};
  }
  if (st == PL_OK)
    st = run_gemms(m, s, g2, ng, false, true, 1.0f, dt, SOLO);
  /* the lanes' dWg, dWu (lane 0 waited for the others) done before G and U
   * are freed */
  if (st == PL_OK && m->nl) {
    st = pl_event_record(m->evj[0], m->ln[0]);
    if (st == PL_OK) st = pl_stream_wait(s, m->evj[0]);
  }
#undef WEIGHTS
#undef ROWS
  if (st == PL_OK) st = mark(c, PL_MOE_ST_BWD_DX, s);
  pl_free_async(m->dev, G, s);
  pl_free_async(m->dev, U, s);
  pl_free_async(m->dev, P, s);
  pl_free_async(m->dev, A, s);
  free(g2);
  return st;
}

/* ---- a pass (forward or backward) ---------------------------------------- */

static bool pipelined(const pl_moe *m) {
  return m->cfg.variant == PL_MOE_PIPELINED && m->cfg.overlap;
}

/* The stream a pass issues its communication on: the pipelined variant's
 * comm stream, started after everything issued on the compute stream so far;
 * the other variants issue everything on the compute stream. */
static pl_stream *pass_begin(pl_moe *m, pl_status *st) {
  if (!pipelined(m)) return m->cs;
  if (*st == PL_OK) *st = pl_event_record(m->evp, m->cs);
  if (*st == PL_OK) *st = pl_stream_wait(m->ms, m->evp);
  return m->ms;
}

/* The compute stream continues after the comm stream's work. */
static pl_status pass_join(pl_moe *m, pl_status st) {
  if (st != PL_OK || !pipelined(m)) return st;
  st = pl_event_record(m->evq, m->ms);
  return st == PL_OK ? pl_stream_wait(m->cs, m->evq) : st;
}

/* The end of a pass, also after a failure: both streams drained. */
static pl_status pass_drain(pl_moe *m, pl_status st) {
  pl_status ss = pl_stream_sync(m->cs);
  if (ss == PL_OK) ss = pl_stream_sync(m->ms);
  return st == PL_OK ? ss : st;
}

/* ---- forward ------------------------------------------------------------ */

typedef struct fwd_state {
  void **B;           /* per chunk: receive buffer (R x H), Y after compute */
  pl_event **evD, **evC;
} fwd_state;

/* Chunk C's expert rows *rows (R x H, computed on the compute stream up to
 * event done) back to their sources on s and combined into out (weighted by
 * w, or unweighted when w is NULL: the backward's dX); *rows freed. */
static pl_status return_combine(pl_moe *m, pl_moe_ctx *c, chunk *C, pl_event *done, void **rows,
                                const float *w, void *out, pl_stream *s, pl_status st) {
  void *back = NULL;
  if (st == PL_OK && s != m->cs) st = pl_stream_wait(s, done);
  if (C->em) /* back to blocks by source for the return trip */
    st = permute_rows(m, meta(c, C->o_inv), C->R, m->cfg.H, m->cfg.dt,
                      "dispatch", rows, s, st);
  st = return_rows(m, C, *rows, (size_t)m->cfg.H, m->cfg.dt, "dispatch",
                   &back, s, st);
  if (st == PL_OK)
    st = pl_moe_k_moe_combine(s, out, meta(c, C->o_toks), C->nt,
                              meta(c, C->o_slots), m->cfg.k, w, back, *rows,
                              m->cfg.H, m->cfg.dt);
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
  st = dispatch_rows(m, c, &c->ch[i], x, &fs->B[i], s, st);
  if (st == PL_OK) st = pl_event_record(fs->evD[i], s);
  return st;
}

static pl_status fwd_compute(pl_moe *m, pl_moe_ctx *c, int i,
                             const pl_moe_weights *W, fwd_state *fs,
                             pl_status st) {
  if (st != PL_OK) return st;
  PL_TRY(mark(c, -1, m->cs));
  PL_TRY(pl_stream_wait(m->cs, fs->evD[i]));
  PL_TRY(mark(c, PL_MOE_ST_FWD_WAIT, m->cs));
  PL_TRY(expert_fwd(m, c, &c->ch[i], W, fs->B[i], m->cs));
  return pl_event_record(fs->evC[i], m->cs);
}

static pl_status make_events(pl_dev *dev, int n, pl_event ***out) {
  *out = calloc((size_t)n, sizeof(pl_event *));
  if (!*out) return pl_set_error(PL_ENOMEM, "moe: events");
  for (int i = 0; i < n; i++) PL_TRY(pl_event_create(dev, &(*out)[i]));
  return PL_OK;
}
static void free_events(int n, pl_event **e) {
  if (!e) return;
  for (int i = 0; i < n; i++)
    if (e[i]) pl_event_destroy(e[i]);
  free(e);
}

static void fill_stats(pl_moe *m, pl_moe_ctx *c, pl_moe_stats *stt) {
  if (!stt) return;
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
    if (11 * (int64_t)c->ch[i].ng > stt->gemms) stt->gemms = 11 * (int64_t)c->ch[i].ng;
    stt->em_chunks += c->ch[i].em;
  }
}

pl_status pl_moe_forward(pl_moe *m, const pl_moe_weights *W, const void *x,
                         int64_t N, const int32_t *idx, const float *w,
                         void *out, pl_moe_ctx **ctxp, pl_moe_stats *stats) {
  if (ctxp) *ctxp = NULL;
  pl_moe_ctx *c = NULL;
  pl_status st = build_ctx(m, N, idx, &c);
  st = agree(m, st);
  if (st != PL_OK) {
    pl_moe_ctx_free(c);
    return st;
  }
  const int K = c->K;
  fwd_state fs = {0};
  fs.B = calloc((size_t)K, sizeof(void *));
  if (!fs.B) st = pl_set_error(PL_ENOMEM, "moe: host");
  if (st == PL_OK) st = make_events(m->dev, K, &fs.evD);
  if (st == PL_OK) st = make_events(m->dev, K, &fs.evC);
  st = agree(m, st);
  if (st != PL_OK) goto out;
  st = transfer_weights(m, c, W, m->cs, st);

  const bool pipe = pipelined(m);
  pl_stream *ms = pass_begin(m, &st);
  /* The sequence of stages depends only on group-wide data, so every rank
   * runs the same one, also after a failure (st carries it). */
  const int64_t budget = row_budget(m, c->c_eff);
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
       * where the send or return rows would be (see expert_major) */
      int64_t x0 = c->ch[i].em ? R[i] : 0, x1 = c->ch[i + 1].em ? R[i + 1] : 0;
      int64_t smax = S[i] > S[i + 1] ? S[i] : S[i + 1];
      if (x0 > smax) smax = x0;
      if (x1 > smax) smax = x1;
      if (pipe && R[i] + R[i + 1] + smax <= budget) {
        st = fwd_dispatch(m, c, i + 1, x, ms, &fs, st); /* beside compute(i) */
        pending = i;
        if (st == PL_OK) c->overlapped++;
      } else {
        st = fwd_combine(m, c, i, w, out, ms, &fs, st);
        st = fwd_dispatch(m, c, i + 1, x, ms, &fs, st);
      }
    } else {
      st = fwd_combine(m, c, i, w, out, ms, &fs, st);
    }
  }
  st = pass_join(m, st);
out:
  st = pass_drain(m, st);
  for (int i = 0; fs.B && i < K; i++) /* after a failure: what is still held */
    if (fs.B[i]) pl_free(m->dev, fs.B[i]);
  free(fs.B);
  free_events(K, fs.evD);
  free_events(K, fs.evC);
  if (st == PL_OK) settle(c, true);
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

/* ---- backward ----------------------------------------------------------- */

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
  chunk *C = &c->ch[i];
  st = dispatch_rows(m, c, C, x, &bs->X[i], s, st);
  st = dispatch_scalars(m, c, C, w, &bs->wr[i], s, st);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)C->R * sizeof(float),
                        "routing", s, (void **)&bs->dwr[i]);
  if (st == PL_OK) st = pl_event_record(bs->evD[i], s);
  return st;
}

/* Its dout rows; evDD[i] after them (the compute waits for them only before
 * its first use of dout, after recomputing G, U and A). */
static pl_status bwd_dispatch_d(pl_moe *m, pl_moe_ctx *c, int i,
                                const void *dout, pl_stream *s, bwd_state *bs,
                                pl_status st) {
  st = dispatch_rows(m, c, &c->ch[i], dout, &bs->D[i], s, st);
  if (st == PL_OK) st = pl_event_record(bs->evDD[i], s);
  return st;
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
  if (st != PL_OK) return st;
  PL_TRY(mark(c, -1, m->cs));
  PL_TRY(pl_stream_wait(m->cs, bs->evD[i]));
  PL_TRY(mark(c, PL_MOE_ST_BWD_WAIT, m->cs));
  PL_TRY(expert_bwd(m, c, &c->ch[i], W, G, hg, &bs->X[i], bs->D[i], bs->wr[i],
                    bs->dwr[i], bs->evX[i], bs->evDD[i], m->cs));
  return pl_event_record(bs->evC[i], m->cs);
}

static pl_status bwd_return(pl_moe *m, pl_moe_ctx *c, int i, void *dx,
                            float *dw, pl_stream *s, bwd_state *bs,
                            pl_status st) {
  chunk *C = &c->ch[i];
  float *dwb = NULL;
  st = return_combine(m, c, C, bs->evC[i], &bs->D[i], NULL, dx, s, st);
  if (C->em)
    st = permute_rows(m, meta(c, C->o_inv), C->R, 1, PL_F32, "routing",
                      (void **)&bs->dwr[i], s, st);
  st = return_rows(m, C, bs->dwr[i], 1, PL_F32, "routing", (void **)&dwb, s,
                   st);
  if (st == PL_OK)
    st = pl_moe_k_moe_scatter_f32(s, dw, meta(c, C->o_toks), C->nt,
                                  meta(c, C->o_slots), m->cfg.k, dwb,
                                  bs->dwr[i]);
  pl_free_async(m->dev, dwb, s);
  pl_free_async(m->dev, bs->dwr[i], s);
  pl_free_async(m->dev, bs->wr[i], s);
  bs->dwr[i] = bs->wr[i] = NULL;
  return st;
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
  bs.X = calloc((size_t)K, sizeof(void *));
  bs.D = calloc((size_t)K, sizeof(void *));
  bs.wr = calloc((size_t)K, sizeof(float *));
  bs.dwr = calloc((size_t)K, sizeof(float *));
  if (!bs.X || !bs.D || !bs.wr || !bs.dwr)
    st = pl_set_error(PL_ENOMEM, "moe: host");
  if (st == PL_OK) st = make_events(m->dev, K, &bs.evD);
  if (st == PL_OK) st = make_events(m->dev, K, &bs.evDD);
  if (st == PL_OK) st = make_events(m->dev, K, &bs.evC);
  if (st == PL_OK) st = make_events(m->dev, K, &bs.evX);
  size_t hgn = (size_t)c->nh * wset_elems(m);
  if (st == PL_OK)
    st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, hgn * sizeof(float),
                        "llep_grads", m->cs, (void **)&hg);
  if (st == PL_OK && hgn) st = pl_fill(m->cs, hg, PL_F32, hgn, 0.0);
  st = agree(m, st);
  if (st != PL_OK) goto out;

  const bool pipe = pipelined(m);
  pl_stream *ms = pass_begin(m, &st);
  const int64_t budget = row_budget(m, c->c_eff);
  st = bwd_dispatch(m, c, 0, x, dout, w, ms, &bs, st);
  int pending = -1; /* chunk whose return follows the next compute        */
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
        if (st == PL_OK) st = pl_stream_wait(ms, bs.evX[i]);
        st = bwd_dispatch(m, c, i + 1, x, dout, w, ms, &bs, st);
        pending = i;
        if (st == PL_OK) c->overlapped++;
      } else if (pipe && need3 <= budget && need4 <= budget) {
        if (st == PL_OK) st = pl_stream_wait(ms, bs.evX[i]);
        st = bwd_dispatch_x(m, c, i + 1, x, w, ms, &bs, st);
        split = true;
        if (st == PL_OK) c->overlapped++;
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
out:
  st = pass_drain(m, st);
  for (int i = 0; bs.X && i < K; i++) {
    if (bs.X[i]) pl_free(m->dev, bs.X[i]);
    if (bs.D[i]) pl_free(m->dev, bs.D[i]);
    if (bs.wr[i]) pl_free(m->dev, bs.wr[i]);
    if (bs.dwr[i]) pl_free(m->dev, bs.dwr[i]);
  }
  if (hg) pl_free(m->dev, hg);
  if (st == PL_OK) settle(c, false);
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

/* ---- single-rank dense reference ------------------------------------------ */

/* Route by route with one-row GEMMs on the CPU kernels: each route's value is
 * computed alone, so it equals any batched row-deterministic computation. */
pl_status pl_moe_reference_fwd(const pl_moe_cfg *cf, const void *wg,
                               const void *wu, const void *wd, const void *x,
                               int64_t N, const int32_t *idx, const float *w,
                               void *out) {
  const int64_t H = cf->H, I = cf->I;
  const int k = cf->k;
  const pl_dtype dt = cf->dt;
  const size_t b = pl_dtype_size(dt), HI = (size_t)H * I;
  char *g = malloc(I * b), *u = malloc(I * b), *a = malloc(I * b);
  char *y = malloc((size_t)k * H * b);
  int32_t *slots = malloc((size_t)k * sizeof(int32_t));
  if (!g || !u || !a || !y || !slots) {
    free(g), free(u), free(a), free(y), free(slots);
    return pl_set_error(PL_ENOMEM, "moe reference: host");
  }
  pl_status st = PL_OK;
  for (int64_t t = 0; t < N && st == PL_OK; t++) {
    const char *xt = (const char *)x + (size_t)t * H * b;
    for (int j = 0; j < k && st == PL_OK; j++) {
      int e = idx[t * k + j];
      if (e < 0 || e >= cf->E) {
        st = pl_set_error(PL_EINVAL, "moe reference: idx %d out of [0,%d)", e,
                          cf->E);
        break;
      }
      st = pl_cpu_moe_gemm(NULL, false, false, 1, I, H, 1.0f, xt, H,
                           (const char *)wg + e * HI * b, I, 0.0f, g, I, dt,
                           dt);
      if (st == PL_OK)
        st = pl_cpu_moe_gemm(NULL, false, false, 1, I, H, 1.0f, xt, H,
                             (const char *)wu + e * HI * b, I, 0.0f, u, I, dt,
                             dt);
      if (st == PL_OK) st = pl_cpu_moe_swiglu_fwd(NULL, a, g, u, 1, I, dt);
      if (st == PL_OK)
        st = pl_cpu_moe_gemm(NULL, false, false, 1, H, I, 1.0f, a, I,
                             (const char *)wd + e * HI * b, H, 0.0f,
                             y + (size_t)j * H * b, H, dt, dt);
      slots[j] = j;
    }
    int32_t tt = (int32_t)t;
    if (st == PL_OK)
      st = pl_cpu_moe_combine(NULL, out, &tt, 1, slots, k, w, y, NULL, H, dt);
  }
  free(g), free(u), free(a), free(y), free(slots);
  return st;
}

pl_status pl_moe_reference_bwd(const pl_moe_cfg *cf, const void *wg,
                               const void *wu, const void *wd, const void *x,
                               int64_t N, const int32_t *idx, const float *w,
                               const void *dout, void *dx, float *dw,
                               float *gwg, float *gwu, float *gwd) {
  const int64_t H = cf->H, I = cf->I;
  const int k = cf->k;
  const pl_dtype dt = cf->dt;
  const size_t b = pl_dtype_size(dt), HI = (size_t)H * I;
  char *g = malloc(I * b), *u = malloc(I * b), *a = malloc(I * b),
       *p = malloc(I * b), *d = malloc(H * b);
  char *dxr = malloc((size_t)k * H * b);
  int32_t *slots = malloc((size_t)k * sizeof(int32_t));
  if (!g || !u || !a || !p || !d || !dxr || !slots) {
    free(g), free(u), free(a), free(p), free(d), free(dxr), free(slots);
    return pl_set_error(PL_ENOMEM, "moe reference: host");
  }
  pl_status st = PL_OK;
  for (int64_t t = 0; t < N && st == PL_OK; t++) {
    const char *xt = (const char *)x + (size_t)t * H * b;
    for (int j = 0; j < k && st == PL_OK; j++) {
      int e = idx[t * k + j];
      const char *Wg = (const char *)wg + e * HI * b;
      const char *Wu = (const char *)wu + e * HI * b;
      const char *Wd = (const char *)wd + e * HI * b;
      float wr = w[t * k + j], dwr = 0;
      memcpy(d, (const char *)dout + (size_t)t * H * b, H * b);
      st = pl_cpu_moe_gemm(NULL, false, false, 1, I, H, 1.0f, xt, H, Wg, I,
                           0.0f, g, I, dt, dt);
      if (st == PL_OK)
        st = pl_cpu_moe_gemm(NULL, false, false, 1, I, H, 1.0f, xt, H, Wu, I,
                             0.0f, u, I, dt, dt);
      if (st == PL_OK)
        st = pl_cpu_moe_gemm(NULL, false, true, 1, I, H, 1.0f, d, H, Wd, H,
                             0.0f, p, I, dt, dt);
      if (st == PL_OK) st = pl_cpu_moe_swiglu_fwd(NULL, a, g, u, 1, I, dt);
      if (st == PL_OK)
        st = pl_cpu_moe_swiglu_bwd(NULL, g, u, p, a, &wr, &dwr, 1, I, dt);
      dw[t * k + j] = dwr;
      if (st == PL_OK) st = pl_cpu_moe_scale_rows(NULL, d, &wr, 1, H, dt);
      if (st == PL_OK && gwd)
        st = pl_cpu_moe_gemm(NULL, true, false, I, H, 1, 1.0f, a, I, d, H,
                             1.0f, gwd + e * HI, H, dt, PL_F32);
      if (st == PL_OK && gwg)
        st = pl_cpu_moe_gemm(NULL, true, false, H, I, 1, 1.0f, xt, H, g, I,
                             1.0f, gwg + e * HI, I, dt, PL_F32);
      if (st == PL_OK && gwu)
        st = pl_cpu_moe_gemm(NULL, true, false, H, I, 1, 1.0f, xt, H, u, I,
                             1.0f, gwu + e * HI, I, dt, PL_F32);
      char *dxj = dxr + (size_t)j * H * b;
      if (st == PL_OK)
        st = pl_cpu_moe_gemm(NULL, false, true, 1, H, I, 1.0f, g, I, Wg, I,
                             0.0f, dxj, H, dt, dt);
      if (st == PL_OK)
        st = pl_cpu_moe_gemm(NULL, false, true, 1, H, I, 1.0f, u, I, Wu, I,
                             1.0f, dxj, H, dt, dt);
      slots[j] = j;
    }
    int32_t tt = (int32_t)t;
    if (st == PL_OK)
      st = pl_cpu_moe_combine(NULL, dx, &tt, 1, slots, k, NULL, dxr, NULL, H,
                              dt);
  }
  free(g), free(u), free(a), free(p), free(d), free(dxr), free(slots);
  return st;
}
