/* ring_dtp.c — the Ring-DTP schedules (ring_dtp.h, DESIGN §1.2); the object,
 * its options and create / destroy are in ring_dtp_create.c.
 *
 * One ring driver runs all four passes (forward/backward × move activations /
 * move weights).  At step s (0..P−1) rank r holds visitor j = (r − s) mod P:
 * the moving tensor (X_j, t_j [, lse_j, g_j]) or W_j.  A pass is
 *   payload  the moving tensor; step 0 uses the rank's own inputs in place,
 *            the next visitor is received into the other of two buffers while
 *            the current one is computed on (P − 1 hops);
 *   partial  what the meeting produces for the visitor (forward move-act: a
 *            3·N_j online-LSE state; backward: the dX_j or dW_j partial, f32).
 *            Forward (LSE merge, 3·N_j floats): the meeting folds into a fresh
 *            buffer, then merges the state the previous rank sent, so that hop
 *            overlaps the whole meeting: three small buffers (receiving,
 *            computing, sending).  Backward (add, N_j×H or H×|V_j| floats):
 *            the meeting accumulates (GEMM beta = 1) straight into the partial
 *            received for the same visitor — the travelling gradient buffer —
 *            waiting for its hop only right before the first GEMM that writes
 *            it (the strip's recompute and, move-act, the dW GEMM run while it
 *            arrives): two buffers, one being sent while the other is
 *            received and accumulated into.  After the last step one hop
 *            brings each visitor's total home; in bf16 the total is rounded
 *            once into the idle buffer and travels as bf16 straight into the
 *            caller's gradient (no f32 home copy);
 *   stationary what stays (move-W forward: the home state; backward: dW_r
 *            (move-act), written straight into the caller's dw — beta 0 at the
 *            first meeting, 1 after: one GEMM per column block per meeting, so
 *            bf16 rounds once per meeting, as autograd's bf16 accumulation of
 *            P contributions would — or dX_r (move-W), which every strip of
 *            every meeting adds to: an f32 accumulator in bf16 mode).
 * Hop order on every rank: partial sendrecv, then payload sendrecv (the
 * partial is what the meeting waits for first), so the blocking MPI transport
 * of the CPU backend pairs them in the same order.
 *
 * Streams: comm runs on d->cs; before a step's hops the comm stream waits for
 * an event recorded on the compute stream (the buffers it reads were finished
 * and those it overwrites were last read before that point); the compute
 * stream waits for the comm stream's events before merging a received partial
 * or starting on a received payload.  On the CPU backend both "streams" run
 * in issue order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ops/ring_dtp_internal.h"

/* Free the kept strips of the meeting at step s (all steps: s < 0). */
static void free_kept(pl_dtp *d, pl_stream *st, int s) {
  for (int q = s < 0 ? 0 : s; q < (s < 0 ? d->p : s + 1); q++)
    for (int64_t c = 0; c < d->nstrip; c++) {
      float **k = &d->kept[(size_t)q * d->nstrip + c];
      if (*k)
        pl_free_async(d->dev, *k, st);
      *k = NULL;
    }
}

/* Allocate the planned kept strips of the meeting at step s. */
static pl_status alloc_kept(pl_dtp *d, pl_stream *st, int s) {
  int64_t rows, width;
  pl__dtp_meeting_shape(d, s, &rows, &width);
  for (int64_t c = 0; c < d->nstrip; c++) {
    size_t i = (size_t)s * d->nstrip + c;
    if (!d->keep[i])
      continue;
    int64_t w = width - c * d->vb < d->vb ? width - c * d->vb : d->vb;
    PL_TRY(pl_alloc_async(d->dev, PL_ARENA_DEVICE,
                          (size_t)rows * (size_t)w * sizeof(float), "logits",
                          st, (void **)&d->kept[i]));
  }
  return PL_OK;
}

/* ---- the ring driver ----------------------------------------------------- */

enum { MERGE_NONE = 0, MERGE_LSE = 1, MERGE_ADD = 2 };

typedef struct ring ring;
struct ring {
  pl_dtp *d;
  pl_stream *s;  /* compute */
  pl_stream *cs; /* comm    */
  int npart;
  pl_dtype pdt[3];
  int64_t pmul[3];    /* elements per unit of a visitor                   */
  const void *own[3]; /* step-0 payload: this rank's inputs               */
  void *pbuf[2][3];   /* payload buffers (NULL when not needed)           */
  int merge;          /* MERGE_*                                          */
  int64_t amul;       /* partial f32 elements per unit                    */
  float *abuf[3];     /* LSE: [0] receive, [1], [2] compute/send alternating;
                         add: [0], [1] alternate (receive+accumulate / send) */
  void *home;         /* where this rank's own total lands (dtype home_dt) */
  pl_dtype home_dt;   /* add: f32, or bf16 (rounded once before the hop)   */
  /* set by the driver for each compute (add): accumulate into the partial
   * (beta 1) once this event (partial received) has been waited for; beta 0
   * and no event at step 0. */
  float c_beta;
  pl_event *c_wait;
  int step;
  size_t *sent;
  /* units (rows or columns) of visitor j */
  int64_t (*units)(const pl_dtp *d, int j);
  pl_status (*compute)(ring *g, int j, const void *const pay[3], float *acc);
  void *arg;
};

static int64_t units_rows(const pl_dtp *d, int j) {
  return d->ns[j];
}
static int64_t units_cols(const pl_dtp *d, int j) {
  return d->vss[j];
}

static pl_status hop(ring *g, const void *snd, size_t sc, void *rcv, size_t rc,
                     pl_dtype dt) {
  pl_dtp *d = g->d;
  *g->sent += sc * pl_dtype_size(dt);
  return pl_sendrecv(d->comm, snd, sc, (d->r + 1) % d->p, rcv, rc,
                     (d->r - 1 + d->p) % d->p, dt, g->cs);
}

static pl_status ring_run(ring *g) {
  pl_dtp *d = g->d;
  const int P = d->p, r = d->r;
  const bool split = g->cs != g->s;
  const bool add = g->merge == MERGE_ADD;
  const void *cur[3] = {g->own[0], g->own[1], g->own[2]};
  float *cprev = NULL;
  for (int s = 0; s < P; s++) {
    int j = ((r - s) % P + P) % P, jn = ((r - s - 1) % P + P) % P;
    int jp = (j + 1) % P; /* visitor of step s-1 */
    bool pay = s < P - 1, acc = g->merge != MERGE_NONE && s >= 1;
    /* The partial for visitor j: LSE: a fresh buffer, merged after the
     * meeting; add: the buffer its previous partial arrives in. */
    float *c = NULL, *rcv = NULL;
    if (g->merge == MERGE_LSE) {
      c = P == 1 ? (float *)g->home : g->abuf[1 + s % 2];
      rcv = g->abuf[0];
    } else if (add) {
      c = P == 1 ? (float *)g->home : g->abuf[s % 2];
      rcv = c;
    }
    if ((pay || acc) && split) {
      PL_TRY(pl_event_record(d->ev_go, g->s));
      PL_TRY(pl_stream_wait(g->cs, d->ev_go));
    }
    if (acc) {
      PL_TRY(hop(g, cprev, (size_t)(g->units(d, jp) * g->amul), rcv,
                 (size_t)(g->units(d, j) * g->amul), PL_F32));
      if (split)
        PL_TRY(pl_event_record(d->ev_acc, g->cs));
    }
    if (pay) {
      for (int q = 0; q < g->npart; q++)
        PL_TRY(hop(g, cur[q], (size_t)(g->units(d, j) * g->pmul[q]),
                   g->pbuf[(s + 1) % 2][q],
                   (size_t)(g->units(d, jn) * g->pmul[q]), g->pdt[q]));
      if (split)
        PL_TRY(pl_event_record(d->ev_pay, g->cs));
    }
    g->step = s;
    g->c_beta = acc && add ? 1.0f : 0.0f;
    g->c_wait = acc && add && split ? d->ev_acc : NULL;
    PL_TRY(g->compute(g, j, cur, c));
    if (acc) {
      /* (add: the meeting waited already, unless it wrote nothing; a second
       * wait is free and orders what follows in every case) */
      if (split)
        PL_TRY(pl_stream_wait(g->s, d->ev_acc));
      int64_t u = g->units(d, j);
      if (g->merge == MERGE_LSE)
        PL_TRY(pl_ce_merge(g->s, u, c, g->abuf[0]));
    }
    cprev = c;
    if (pay) {
      if (split)
        PL_TRY(pl_stream_wait(g->s, d->ev_pay));
      for (int q = 0; q < g->npart; q++)
        cur[q] = g->pbuf[(s + 1) % 2][q];
    }
  }
  if (g->merge != MERGE_NONE && P > 1) {
    /* The return hop: the last visitor's total (visitor r+1) goes home; ours
     * arrives from r−1.  bf16 (add): the total is rounded once into the idle
     * buffer (its last hop is complete: the compute stream waited for it). */
    size_t sc = (size_t)(g->units(d, (r + 1) % P) * g->amul);
    const void *snd = cprev;
    if (add && g->home_dt != PL_F32) {
      void *idle = g->abuf[P % 2];
      PL_TRY(pl_convert(g->s, idle, g->home_dt, cprev, PL_F32, sc));
      snd = idle;
    }
    if (split) {
      PL_TRY(pl_event_record(d->ev_go, g->s));
      PL_TRY(pl_stream_wait(g->cs, d->ev_go));
    }
    PL_TRY(hop(g, snd, sc, g->home, (size_t)(g->units(d, r) * g->amul),
               add ? g->home_dt : PL_F32));
    if (split) {
      PL_TRY(pl_event_record(d->ev_acc, g->cs));
      PL_TRY(pl_stream_wait(g->s, d->ev_acc));
    }
  }
  return PL_OK;
}

/* ---- per-pass work ------------------------------------------------------- */

typedef struct pass {
  const void *x;    /* this rank's X_r          */
  const int32_t *t; /* this rank's t_r          */
  const void *w;    /* this rank's W_r          */
  float *strip;
  void *dy;
  float *state;     /* move-W forward: home state (3·n) */
  void *stat;       /* backward: the stationary gradient (dW_r or dX_r) */
  pl_dtype stat_dt; /* its dtype: dw's (move-act); f32 (move-W)          */
  float *chunk;     /* bf16 move-W: nc×H f32 accumulator of dX rows      */
} pass;

static pl_ce_meet meet_of(const pl_dtp *d, const pass *ps) {
  pl_ce_meet mt = {
      .dt = d->dt, .h = d->h, .vb = d->vb, .strip = ps->strip, .dy = ps->dy};
  return mt;
}

/* Activations move: the visitor's (X_j, t_j) meet this rank's shard W_r. */
static pl_ce_meet meet_act(const ring *g, int j, const void *const pay[3]) {
  const pl_dtp *d = g->d;
  pl_ce_meet mt = meet_of(d, g->arg);
  mt.n = d->ns[j];
  mt.x = pay[0];
  mt.t = pay[1];
  mt.w = ((const pass *)g->arg)->w;
  mt.ldw = mt.vs = d->vss[d->r];
  mt.col0 = d->col0s[d->r];
  return mt;
}

/* Weights move: this rank's (X_r, t_r) meet the visiting shard W_j. */
static pl_ce_meet meet_w(const ring *g, int j, const void *const pay[3]) {
  const pl_dtp *d = g->d;
  const pass *ps = g->arg;
  pl_ce_meet mt = meet_of(d, ps);
  mt.n = d->n;
  mt.x = ps->x;
  mt.t = ps->t;
  mt.w = pay[0];
  mt.ldw = mt.vs = d->vss[j];
  mt.col0 = d->col0s[j];
  return mt;
}

/* The kept strips of this step's meeting (allocated by the forward). */
static float *const *kept_of(ring *g) {
  return g->d->kept + (size_t)g->step * g->d->nstrip;
}

/* forward, activations move: visitor (X_j, t_j) meets W_r into C (3·N_j). */
static pl_status fwd_act(ring *g, int j, const void *const pay[3], float *c) {
  pl_ce_meet mt = meet_act(g, j, pay);
  PL_TRY(alloc_kept(g->d, g->s, g->step));
  mt.kept = kept_of(g);
  PL_TRY(pl_ce_state_init(g->s, c, mt.n));
  return pl_ce_meet_fwd(g->s, &mt, c);
}

/* forward, weights move: X_r meets visitor W_j, folded into the home state. */
static pl_status fwd_w(ring *g, int j, const void *const pay[3], float *c) {
  const pass *ps = g->arg;
  (void)c;
  pl_ce_meet mt = meet_w(g, j, pay);
  PL_TRY(alloc_kept(g->d, g->s, g->step));
  mt.kept = kept_of(g);
  return pl_ce_meet_fwd(g->s, &mt, ps->state);
}

/* backward, activations move: visitor (X_j, t_j, lse_j|g_j) meets W_r:
 * C (N_j×H, f32) = c_beta·C + dY·W_rᵀ (the dX_j partial), dW_r = (0 at step
 * 0, else dW_r) + X_jᵀ·dY in dw's dtype. */
static pl_status bwd_act(ring *g, int j, const void *const pay[3], float *c) {
  const pass *ps = g->arg;
  pl_ce_meet mt = meet_act(g, j, pay);
  const float *aux = pay[2];
  mt.dx_wait = g->c_wait;
  mt.kept = kept_of(g);
  PL_TRY(pl_ce_meet_bwd(g->s, &mt, aux, aux + mt.n, c, g->c_beta, ps->stat,
                        ps->stat_dt, mt.vs, g->step == 0 ? 0.0f : 1.0f));
  free_kept(g->d, g->s, g->step);
  return PL_OK;
}

/* backward, weights move: X_r meets visitor W_j: C (H×|V_j|, f32) = c_beta·C
 * + X_rᵀ·dY (the dW_j partial), dX_r (f32) = (0 at step 0, else dX_r) +
 * dY·W_jᵀ. */
static pl_status bwd_w(ring *g, int j, const void *const pay[3], float *c) {
  pl_dtp *d = g->d;
  pass *ps = g->arg;
  pl_ce_meet mt = meet_w(g, j, pay);
  mt.dw_wait = g->c_wait;
  mt.kept = kept_of(g);
  const float dx_beta = g->step == 0 ? 0.0f : 1.0f;
  if (!ps->chunk) { /* f32: dX_r accumulates in dx itself */
    PL_TRY(pl_ce_meet_bwd(g->s, &mt, d->aux, d->aux + d->n, ps->stat, dx_beta,
                          c, PL_F32, mt.vs, g->c_beta));
    free_kept(d, g->s, g->step);
    return PL_OK;
  }
  /* bf16: row chunks [r0, r0 + nc) of X_r meet W_j; the chunk's dX rows are
   * summed over the strips in the f32 chunk buffer (seeded from dx after the
   * first meeting), then rounded back into dx; every chunk adds its rows'
   * share to the dW_j partial C. */
  const size_t es = pl_dtype_size(d->dt);
  if (d->n == 0) {
    mt.kept = NULL; /* nothing was kept for 0 rows */
    return pl_ce_meet_bwd(g->s, &mt, d->aux, d->aux, NULL, 0.0f, c, PL_F32,
                          mt.vs, g->c_beta);
  }
  /* a row chunk reads rows [r0, r0 + nc) of each kept n×w_c strip */
  float **kc = calloc((size_t)(d->nstrip > 0 ? d->nstrip : 1), sizeof(float *));
  if (!kc)
    return pl_set_error(PL_ENOMEM, "ring_dtp: out of host memory");
  pl_status st = PL_OK;
  for (int64_t r0 = 0; r0 < d->n; r0 += d->nc) {
    int64_t rows = d->n - r0 < d->nc ? d->n - r0 : d->nc;
    char *dxr = (char *)ps->stat + (size_t)(r0 * d->h) * es;
    size_t cnt = (size_t)(rows * d->h);
    pl_ce_meet mc = mt;
    mc.n = rows;
    mc.x = (const char *)ps->x + (size_t)(r0 * d->h) * es;
    mc.t = ps->t + r0;
    mc.dw_wait = r0 == 0 ? g->c_wait : NULL;
    for (int64_t q = 0; q < d->nstrip; q++) {
      int64_t w = mt.vs - q * d->vb < d->vb ? mt.vs - q * d->vb : d->vb;
      kc[q] = mt.kept[q] ? mt.kept[q] + r0 * w : NULL;
    }
    mc.kept = kc;
    if (dx_beta != 0.0f)
      PL_TRY_GOTO(st, done,
                  pl_convert(g->s, ps->chunk, PL_F32, dxr, d->dt, cnt));
    PL_TRY_GOTO(st, done,
                pl_ce_meet_bwd(g->s, &mc, d->aux + r0, d->aux + d->n + r0,
                               ps->chunk, dx_beta, c, PL_F32, mt.vs,
                               r0 == 0 ? g->c_beta : 1.0f));
    PL_TRY_GOTO(st, done, pl_convert(g->s, dxr, d->dt, ps->chunk, PL_F32, cnt));
  }
  free_kept(d, g->s, g->step);
done:
  free(kc);
  return st;
}

/* ---- allocation helpers -------------------------------------------------- */

typedef struct allocs {
  pl_dev *dev;
  pl_stream *s;
  void *p[16];
  int n;
} allocs;

static pl_status take(allocs *a, size_t bytes, const char *tag, void *out) {
  PL_ASSERT(a->n < 16);
  void *p = NULL;
  PL_TRY(pl_alloc_async(a->dev, PL_ARENA_DEVICE, bytes, tag, a->s, &p));
  a->p[a->n++] = p;
  *(void **)out = p;
  return PL_OK;
}

static void release(allocs *a) {
  for (int i = a->n - 1; i >= 0; i--)
    pl_free_async(a->dev, a->p[i], a->s);
  a->n = 0;
}

static void ring_base(ring *g, pl_dtp *d, pl_stream *s, pass *ps) {
  memset(g, 0, sizeof *g);
  g->d = d;
  g->s = s;
  g->cs = d->cs ? d->cs : s;
  g->arg = ps;
}

/* ---- forward ------------------------------------------------------------- */

pl_status pl_dtp_forward(pl_dtp *d, pl_stream *s, const void *x,
                         const int32_t *t, const void *w, float *loss) {
  if (!loss || (d->n > 0 && (!x || !t)) || (d->vss[d->r] > 0 && !w))
    return pl_set_error(PL_EINVAL, "ring_dtp forward: NULL x, t, w or loss");
  const int P = d->p;
  const int64_t n = d->n, h = d->h;
  const size_t es = pl_dtype_size(d->dt);
  d->sent_fwd = 0;
  d->have_fwd = 0;
  free_kept(d, s, -1); /* a forward with no backward after it */
  if (d->aux) {
    pl_free_async(d->dev, d->aux, s);
    d->aux = NULL;
  }
  allocs a = {.dev = d->dev, .s = s};
  pass ps = {.x = x, .t = t, .w = w};
  ring g;
  ring_base(&g, d, s, &ps);
  g.sent = &d->sent_fwd;
  float *home = NULL, *nll = NULL;
  pl_status st;
  PL_TRY_GOTO(st, done,
              pl_alloc_async(d->dev, PL_ARENA_DEVICE,
                             (size_t)(2 * n) * sizeof(float), "ce_state", s,
                             (void **)&d->aux));
  PL_TRY_GOTO(st, done,
              take(&a, (size_t)(3 * n) * sizeof(float), "ce_state", &home));
  if (d->o.red != PL_CE_NONE)
    PL_TRY_GOTO(st, done,
                take(&a, (size_t)n * sizeof(float), "ce_state", &nll));
  else
    nll = loss;
  if (d->mode == PL_DTP_MOVE_ACT || P == 1) {
    int64_t rows = P == 1 ? n : d->nmax;
    PL_TRY_GOTO(
        st, done,
        take(&a, (size_t)(rows * d->vb) * sizeof(float), "logits", &ps.strip));
    g.npart = 2;
    g.pdt[0] = d->dt, g.pmul[0] = h, g.own[0] = x;
    g.pdt[1] = PL_I32, g.pmul[1] = 1, g.own[1] = t;
    for (int b = 0; b < 2 && P > 1; b++) {
      if (b == 0 && P == 2)
        continue; /* step 0 reads the inputs in place */
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)(d->nmax * h) * es, "ring", &g.pbuf[b][0]));
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)d->nmax * 4, "ring", &g.pbuf[b][1]));
    }
    g.merge = MERGE_LSE;
    g.amul = 3;
    if (P > 1)
      for (int b = 0; b < 3; b++)
        PL_TRY_GOTO(st, done,
                    take(&a, (size_t)(3 * d->nmax) * sizeof(float), "ring",
                         &g.abuf[b]));
    g.home = home;
    g.units = units_rows;
    g.compute = fwd_act;
  } else {
    PL_TRY_GOTO(
        st, done,
        take(&a, (size_t)(n * d->vb) * sizeof(float), "logits", &ps.strip));
    g.npart = 1;
    g.pdt[0] = d->dt, g.pmul[0] = h, g.own[0] = w;
    for (int b = 0; b < 2; b++) {
      if (b == 0 && P == 2)
        continue;
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)(h * d->vmax) * es, "ring", &g.pbuf[b][0]));
    }
    g.merge = MERGE_NONE;
    g.units = units_cols;
    g.compute = fwd_w;
    ps.state = home;
    PL_TRY_GOTO(st, done, pl_ce_state_init(s, home, n));
  }
  PL_TRY_GOTO(st, done, ring_run(&g));
  PL_TRY_GOTO(st, done,
              pl_ce_finish(s, n, home, t, d->o.ignore, nll, d->aux, d->stats));
  PL_TRY_GOTO(
      st, done,
      pl_allreduce(d->comm, d->stats, d->stats, 2, PL_F32, PL_RED_SUM, s));
  if (d->o.red != PL_CE_NONE)
    PL_TRY_GOTO(st, done, pl_ce_lossout(s, (int)d->o.red, d->stats, loss));
  d->have_fwd = 1;
done:
  release(&a);
  return st;
}

/* ---- backward ------------------------------------------------------------ */

pl_status pl_dtp_backward(pl_dtp *d, pl_stream *s, const void *x,
                          const int32_t *t, const void *w, const float *dloss,
                          void *dx, void *dw) {
  if (!d->have_fwd)
    return pl_set_error(PL_EINVAL, "ring_dtp backward: no forward to replay");
  const int64_t vs = d->vss[d->r];
  if ((d->n > 0 && (!x || !t || !dx)) || (vs > 0 && (!w || !dw)))
    return pl_set_error(PL_EINVAL, "ring_dtp backward: NULL x, t, w, dx or dw");
  const int P = d->p;
  const int64_t n = d->n, h = d->h;
  const size_t es = pl_dtype_size(d->dt);
  const bool f32 = d->dt == PL_F32;
  d->sent_bwd = 0;
  allocs a = {.dev = d->dev, .s = s};
  pass ps = {.x = x, .t = t, .w = w};
  ring g;
  ring_base(&g, d, s, &ps);
  g.sent = &d->sent_bwd;
  pl_status st;
  /* Row factors g (second half of aux) from the group's stats. */
  PL_TRY_GOTO(st, done,
              pl_ce_rowgrad(s, n, t, d->o.ignore, (int)d->o.red, d->stats,
                            dloss, d->aux + n));
  if (d->mode == PL_DTP_MOVE_ACT || P == 1) {
    int64_t rows = P == 1 ? n : d->nmax;
    PL_TRY_GOTO(
        st, done,
        take(&a, (size_t)(rows * d->vb) * sizeof(float), "logits", &ps.strip));
    if (!f32)
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)(rows * d->vb) * 2, "logits", &ps.dy));
    /* stationary dW_r: the output itself, in its dtype (beta 0 at step 0) */
    ps.stat = dw;
    ps.stat_dt = d->dt;
    g.npart = 3;
    g.pdt[0] = d->dt, g.pmul[0] = h, g.own[0] = x;
    g.pdt[1] = PL_I32, g.pmul[1] = 1, g.own[1] = t;
    g.pdt[2] = PL_F32, g.pmul[2] = 2, g.own[2] = d->aux;
    for (int b = 0; b < 2 && P > 1; b++) {
      if (b == 0 && P == 2)
        continue;
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)(d->nmax * h) * es, "ring", &g.pbuf[b][0]));
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)d->nmax * 4, "ring", &g.pbuf[b][1]));
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)d->nmax * 8, "ring", &g.pbuf[b][2]));
    }
    g.merge = MERGE_ADD;
    g.amul = h;
    if (P > 1)
      for (int b = 0; b < 2; b++)
        PL_TRY_GOTO(st, done,
                    take(&a, (size_t)(d->nmax * h) * sizeof(float), "ring",
                         &g.abuf[b]));
    /* dX_r: at P > 1 the return hop lands in dx (bf16: rounded once before
     * it); at P = 1 the meeting's strips accumulate into it: f32 (dx itself
     * in f32 mode) */
    g.home_dt = d->dt;
    if (f32 || P > 1)
      g.home = dx;
    else
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)(n * h) * sizeof(float), "grads", &g.home));
    g.units = units_rows;
    g.compute = bwd_act;
    PL_TRY_GOTO(st, done, ring_run(&g));
    if (!f32 && P == 1)
      PL_TRY_GOTO(st, done,
                  pl_convert(s, dx, d->dt, g.home, PL_F32, (size_t)(n * h)));
  } else {
    /* stationary dX_r: every strip of every meeting adds to it; f32: dx
     * itself; bf16: dx, through an f32 accumulator of nc rows (bwd_w) */
    int64_t rows = f32 ? n : d->nc;
    PL_TRY_GOTO(
        st, done,
        take(&a, (size_t)(rows * d->vb) * sizeof(float), "logits", &ps.strip));
    if (!f32)
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)(rows * d->vb) * 2, "logits", &ps.dy));
    ps.stat = dx;
    ps.stat_dt = f32 ? PL_F32 : d->dt;
    if (!f32)
      PL_TRY_GOTO(
          st, done,
          take(&a, (size_t)(d->nc * h) * sizeof(float), "grads", &ps.chunk));
    g.npart = 1;
    g.pdt[0] = d->dt, g.pmul[0] = h, g.own[0] = w;
    for (int b = 0; b < 2; b++) {
      if (b == 0 && P == 2)
        continue;
      PL_TRY_GOTO(st, done,
                  take(&a, (size_t)(h * d->vmax) * es, "ring", &g.pbuf[b][0]));
    }
    g.merge = MERGE_ADD;
    g.amul = h;
    for (int b = 0; b < 2; b++)
      PL_TRY_GOTO(
          st, done,
          take(&a, (size_t)(h * d->vmax) * sizeof(float), "ring", &g.abuf[b]));
    g.home = dw; /* the return hop lands in dw (bf16: rounded once before) */
    g.home_dt = d->dt;
    g.units = units_cols;
    g.compute = bwd_w;
    PL_TRY_GOTO(st, done, ring_run(&g));
  }
done:
  release(&a);
  return st;
}

/* ---- forward + backward in one call -------------------------------------- */

pl_status pl_dtp_run(pl_dtp *d, pl_stream *s, const void *x, const int32_t *t,
                     const void *w, const float *dloss, float *loss, void *dx,
                     void *dw) {
  if (d->sched != PL_DTP_SCHED_CHUNKED) {
    PL_TRY(pl_dtp_forward(d, s, x, t, w, loss));
    return pl_dtp_backward(d, s, x, t, w, dloss, dx, dw);
  }
  /* P = 1: the three-GEMM schedule over the whole vocabulary */
  d->sent_fwd = d->sent_bwd = 0;
  d->have_fwd = 0;
  free_kept(d, s, -1);
  pl_ce_problem pb = {.dt = d->dt,
                      .n = d->n,
                      .h = d->h,
                      .v = d->v,
                      .red = d->o.red,
                      .ignore = d->o.ignore,
                      .block = d->vb,
                      .x = x,
                      .t = t,
                      .w = w,
                      .dloss = dloss,
                      .loss = loss,
                      .dx = dx,
                      .dw = dw};
  return pl_ce_head3(s, &pb);
}
