/* ring_dtp_create.c — the Ring-DTP object (ops/ring_dtp.h): its options and
 * names, the group's agreement on its inputs (every rank checks, then all
 * agree before any returns, so none is left waiting in a collective), the
 * shards, the mode and schedule it resolves, the kept-strip plan, create /
 * destroy and the accessors.  Apart from the schedules (ring_dtp.c) so that
 * each file reads as one thing. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ops/ring_dtp_internal.h"

const char *const pl_dtp_mode_names[] = {"auto", "act", "weights", NULL};
const char *const pl_dtp_sched_names[] = {"auto", "chunked", "blocked", NULL};

const char *pl_dtp_mode_name(pl_dtp_mode m) {
  return (unsigned)m <= PL_DTP_MOVE_W ? pl_dtp_mode_names[m] : "?";
}

pl_dtp_mode pl_dtp_mode_resolve(pl_dtp_mode m, int64_t nmax, int64_t vmax) {
  if (m != PL_DTP_AUTO)
    return m;
  return nmax > vmax ? PL_DTP_MOVE_W : PL_DTP_MOVE_ACT;
}

pl_status pl_dtp_mode_parse(const char *s, pl_dtp_mode *out) {
  for (int i = 0; s && pl_dtp_mode_names[i]; i++)
    if (strcmp(s, pl_dtp_mode_names[i]) == 0) {
      *out = (pl_dtp_mode)i;
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL, "ring mode '%s': must be auto, act or weights",
                      s ? s : "(null)");
}

const char *pl_dtp_sched_name(pl_dtp_sched m) {
  return (unsigned)m <= PL_DTP_SCHED_BLOCKED ? pl_dtp_sched_names[m] : "?";
}

pl_status pl_dtp_sched_parse(const char *s, pl_dtp_sched *out) {
  for (int i = 0; s && pl_dtp_sched_names[i]; i++)
    if (strcmp(s, pl_dtp_sched_names[i]) == 0) {
      *out = (pl_dtp_sched)i;
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL,
                      "schedule '%s': must be auto, chunked or blocked",
                      s ? s : "(null)");
}

void pl_dtp_opts_default(pl_dtp_opts *o) {
  memset(o, 0, sizeof *o);
  o->mode = PL_DTP_AUTO;
  o->block = 0;
  o->red = PL_CE_MEAN;
  o->ignore = PL_CE_IGNORE_INDEX;
  o->overlap = 1;
  o->sched = PL_DTP_SCHED_AUTO;
  o->strip_budget = 0;
}

pl_dtp_mode pl_dtp_mode_of(const pl_dtp *d) {
  return d->mode;
}
void pl_dtp_shard(const pl_dtp *d, int64_t *col0, int64_t *width) {
  *col0 = d->col0s[d->r];
  *width = d->vss[d->r];
}
int64_t pl_dtp_block(const pl_dtp *d) {
  return d->vb;
}
pl_dtp_sched pl_dtp_sched_of(const pl_dtp *d) {
  return d->sched;
}
int64_t pl_dtp_kept_strips(const pl_dtp *d) {
  return d->nkept;
}
size_t pl_dtp_kept_bytes(const pl_dtp *d) {
  return d->kept_bytes;
}
void pl_dtp_bytes_sent(const pl_dtp *d, size_t *fwd, size_t *bwd) {
  *fwd = d->sent_fwd;
  *bwd = d->sent_bwd;
}

void pl_dtp_hop_bytes(const pl_dtp *d, size_t *fwd, size_t *bwd) {
  size_t es = pl_dtype_size(d->dt);
  if (d->p == 1) {
    *fwd = *bwd = 0;
  } else if (d->mode == PL_DTP_MOVE_ACT) {
    size_t rows = (size_t)d->nmax;
    *fwd = rows * ((size_t)d->h * es + 4 + 3 * 4); /* X, t, state */
    *bwd = rows * ((size_t)d->h * es + 4 + 2 * 4 + (size_t)d->h * 4); /* +dX */
  } else {
    size_t cols = (size_t)d->vmax;
    *fwd = (size_t)d->h * cols * es;
    *bwd = (size_t)d->h * cols * (es + 4); /* W and the dW partial */
  }
}

size_t pl_dtp_logits_bound(const pl_dtp *d) {
  int64_t rows = d->mode == PL_DTP_MOVE_ACT ? d->nmax : d->n;
  if (d->p == 1)
    rows = d->n;
  if (d->p > 1 && d->mode == PL_DTP_MOVE_W && d->dt == PL_BF16) {
    /* forward: an n×vb f32 strip; backward: row chunks, nc×vb f32 + bf16 */
    size_t f = (size_t)d->n * (size_t)d->vb * 4;
    size_t b = (size_t)d->nc * (size_t)d->vb * 6;
    return (f > b ? f : b) + d->kept_bytes;
  }
  return (size_t)rows * (size_t)d->vb * (d->dt == PL_BF16 ? 6 : 4) +
         d->kept_bytes;
}

size_t pl_dtp_ring_bound(const pl_dtp *d) {
  if (d->p == 1)
    return 0;
  size_t es = pl_dtype_size(d->dt), nb = d->p == 2 ? 1 : 2;
  size_t h = (size_t)d->h;
  if (d->mode == PL_DTP_MOVE_ACT) {
    size_t rows = (size_t)d->nmax;
    size_t fwd = nb * rows * (h * es + 4) + 3 * rows * 3 * 4;
    size_t bwd = nb * rows * (h * es + 4 + 8) + 2 * rows * h * 4;
    return fwd > bwd ? fwd : bwd;
  }
  size_t cols = (size_t)d->vmax;
  return nb * h * cols * es + 2 * h * cols * 4; /* backward; forward less */
}

int64_t pl_dtp_chunk_rows(const pl_dtp *d) {
  return d->nc;
}

size_t pl_dtp_grads_scratch(const pl_dtp *d) {
  if (d->dt == PL_F32 || (d->p > 1 && d->mode == PL_DTP_MOVE_ACT))
    return 0;
  return (size_t)((d->p > 1 ? d->nc : d->n) * d->h) * sizeof(float);
}

/* The kept-strip plan: strips in meeting order, each kept when it still fits
 * the budget (first fit; the same strip shapes forward and backward). */
static pl_status plan_kept(pl_dtp *d, size_t budget) {
  d->nstrip = (d->vmax + d->vb - 1) / d->vb;
  size_t slots = (size_t)d->p * (size_t)(d->nstrip > 0 ? d->nstrip : 1);
  d->keep = calloc(slots, 1);
  d->kept = calloc(slots, sizeof(float *));
  if (!d->keep || !d->kept)
    return pl_set_error(PL_ENOMEM, "ring_dtp: out of host memory");
  for (int s = 0; s < d->p && budget > 0; s++) {
    int64_t rows, width;
    pl__dtp_meeting_shape(d, s, &rows, &width);
    for (int64_t c = 0; c * d->vb < width; c++) {
      int64_t w = width - c * d->vb < d->vb ? width - c * d->vb : d->vb;
      size_t bytes = (size_t)rows * (size_t)w * sizeof(float);
      if (bytes == 0 || d->kept_bytes + bytes > budget)
        continue;
      d->keep[(size_t)s * d->nstrip + c] = 1;
      d->kept_bytes += bytes;
      d->nkept++;
    }
  }
  return PL_OK;
}

/* Check the inputs and agree on them over the group: every rank reaches both
 * reductions whatever its own check says (a rank that returned alone would
 * hang the others), then all return the same verdict. */
static pl_status agree_inputs(pl_comm *c, pl_dtype dt, int64_t n, int64_t h,
                              int64_t v, const pl_dtp_opts *o) {
  int bad = (dt != PL_F32 && dt != PL_BF16) || n < 0 || h < 1 || v < 1 ||
            o->block < 0 || (unsigned)o->mode > PL_DTP_MOVE_W ||
            (unsigned)o->red > PL_CE_NONE ||
            (unsigned)o->sched > PL_DTP_SCHED_BLOCKED;
  enum { NCFG = 10 };
  int64_t cfg[NCFG] = {
      bad,      dt,     h,         v,        o->mode,
      o->block, o->red, o->ignore, o->sched, (int64_t)o->strip_budget};
  int64_t mx[NCFG], mn[NCFG];
  memcpy(mx, cfg, sizeof cfg);
  memcpy(mn, cfg, sizeof cfg);
  PL_TRY(pl_host_allreduce_i64(c, mx, NCFG, PL_RED_MAX));
  PL_TRY(pl_host_allreduce_i64(c, mn, NCFG, PL_RED_MIN));
  if (bad)
    return pl_set_error(PL_EINVAL,
                        "ring_dtp: dt=%s n=%lld h=%lld v=%lld block=%lld: need "
                        "f32|bf16, n >= 0, h >= 1, v >= 1, block >= 0",
                        pl_dtype_name(dt), (long long)n, (long long)h,
                        (long long)v, (long long)o->block);
  if (mx[0])
    return pl_set_error(PL_EINVAL, "ring_dtp: another rank passed bad input");
  for (int i = 1; i < NCFG; i++)
    if (mx[i] != mn[i])
      return pl_set_error(PL_EINVAL,
                          "ring_dtp: ranks disagree on dtype, H, V or options "
                          "(field %d: %lld vs %lld)",
                          i, (long long)mn[i], (long long)mx[i]);
  if (o->sched == PL_DTP_SCHED_CHUNKED && pl_comm_size(c) > 1)
    return pl_set_error(PL_EINVAL,
                        "ring_dtp: schedule chunked at P=%d: needs the whole "
                        "vocabulary on one rank (P = 1); use auto or blocked",
                        pl_comm_size(c));
  return PL_OK;
}

pl_status pl_dtp_create(pl_comm *c, pl_dtype dt, int64_t n, int64_t h,
                        int64_t v, const pl_dtp_opts *o, pl_dtp **out) {
  *out = NULL;
  pl_dtp_opts def;
  if (!o) {
    pl_dtp_opts_default(&def);
    o = &def;
  }
  PL_TRY(agree_inputs(c, dt, n, h, v, o));
  pl_dtp *d = calloc(1, sizeof *d);
  if (!d)
    return pl_set_error(PL_ENOMEM, "ring_dtp: out of host memory");
  d->comm = c;
  d->dev = pl_comm_dev(c);
  d->p = pl_comm_size(c);
  d->r = pl_comm_rank(c);
  d->dt = dt;
  d->n = n;
  d->h = h;
  d->v = v;
  d->o = *o;
  d->ns = calloc((size_t)d->p, sizeof(int64_t));
  d->col0s = calloc((size_t)d->p, sizeof(int64_t));
  d->vss = calloc((size_t)d->p, sizeof(int64_t));
  pl_status st = PL_OK;
  if (!d->ns || !d->col0s || !d->vss)
    PL_TRY_GOTO(st, fail,
                pl_set_error(PL_ENOMEM, "ring_dtp: out of host memory"));
  PL_TRY_GOTO(st, fail, pl_host_allgather_i64(c, &n, 1, d->ns));
  for (int q = 0; q < d->p; q++) {
    pl_ce_shard(v, d->p, q, &d->col0s[q], &d->vss[q]);
    if (d->ns[q] > d->nmax)
      d->nmax = d->ns[q];
    if (d->vss[q] > d->vmax)
      d->vmax = d->vss[q];
  }
  /* the same answer on every rank (same inputs) */
  d->mode = pl_dtp_mode_resolve(o->mode, d->nmax, d->vmax);
  /* bf16 move-W backward: dX_r is summed over every strip in f32 one row
   * chunk at a time (an nc×H accumulator, an eighth of N×H), then added to
   * dx in bf16 (one rounding per meeting). */
  d->nc = d->n;
  if (dt == PL_BF16 && d->p > 1 && d->mode == PL_DTP_MOVE_W)
    d->nc = (d->n + 7) / 8;
  d->vb = o->block > 0 ? o->block : pl_ce_default_block(dt);
  if (d->vb > d->vmax)
    d->vb = d->vmax;
  if (d->vb < 1)
    d->vb = 1;
  /* pl_dtp_run's schedule: chunked at P = 1 when a row of V fits the strip
   * bound (the same answer on the one rank there is) */
  {
    pl_ce_problem q = {.dt = dt, .n = n, .h = h, .v = v, .block = d->vb};
    const int fits = d->p == 1 && pl_ce_head3_rows(&q) >= 1;
    d->sched = o->sched == PL_DTP_SCHED_BLOCKED ? PL_DTP_SCHED_BLOCKED
               : fits                           ? PL_DTP_SCHED_CHUNKED
                                                : PL_DTP_SCHED_BLOCKED;
    if (o->sched == PL_DTP_SCHED_CHUNKED && !fits)
      PL_TRY_GOTO(st, fail,
                  pl_set_error(PL_EINVAL,
                               "ring_dtp: schedule chunked: n=%lld v=%lld "
                               "block=%lld: no row of V fits the strip bound",
                               (long long)n, (long long)v, (long long)d->vb));
  }
  PL_TRY_GOTO(st, fail, plan_kept(d, o->strip_budget));
  if (o->overlap && d->p > 1)
    PL_TRY_GOTO(st, fail, pl_stream_create(d->dev, &d->cs));
  PL_TRY_GOTO(st, fail, pl_event_create(d->dev, &d->ev_go));
  PL_TRY_GOTO(st, fail, pl_event_create(d->dev, &d->ev_pay));
  PL_TRY_GOTO(st, fail, pl_event_create(d->dev, &d->ev_acc));
  PL_TRY_GOTO(st, fail,
              pl_alloc(d->dev, PL_ARENA_DEVICE, 2 * sizeof(float), "ce_state",
                       (void **)&d->stats));
  *out = d;
  return PL_OK;
fail:
  pl_dtp_destroy(d);
  return st;
}

void pl_dtp_destroy(pl_dtp *d) {
  if (!d)
    return;
  if (d->dev)
    pl_dev_sync(d->dev);
  if (d->kept)
    for (int64_t i = 0; i < (int64_t)d->p * d->nstrip; i++)
      pl_free(d->dev, d->kept[i]);
  free(d->kept);
  free(d->keep);
  if (d->aux)
    pl_free(d->dev, d->aux);
  if (d->stats)
    pl_free(d->dev, d->stats);
  if (d->ev_go)
    pl_event_destroy(d->ev_go);
  if (d->ev_pay)
    pl_event_destroy(d->ev_pay);
  if (d->ev_acc)
    pl_event_destroy(d->ev_acc);
  if (d->cs)
    pl_stream_destroy(d->cs);
  free(d->ns);
  free(d->col0s);
  free(d->vss);
  free(d);
}
