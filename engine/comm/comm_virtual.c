/* comm_virtual.c — virtual groups and the bytes every group moves
 * (plateau/comm.h).
 *
 * A virtual group lets one process play one member of a group whose other
 * members are absent (the one-GPU proxy of a W_v-rank run: a Ulysses, a
 * Ring-DTP or a context-parallel group larger than the ranks present).  Its
 * data operations are local stand-ins issued on the caller's stream — device
 * copies of exactly the bytes the absent members would have sent, taken from
 * the caller's own buffers — so every buffer, shape and tracked allocation is
 * the one of the run with all members present, and no time is spent waiting
 * for anyone.  The stand-ins are counted (copies, bytes) and, with the
 * profile on, timed with an event pair each, so a bench can report their
 * time apart from the compute and never as communication.
 *
 * The byte counts of plateau/comm.h are kept here for both kinds of group:
 * comm.c calls pl__count once per data operation after its checks. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dry/dry.h"
#include "comm/comm_internal.h"

typedef struct vspan {
  pl_event *a, *b;
  const pl_stream *s;
} vspan;

struct pl__vprof {
  bool on;
  vspan *sp;
  int n, cap; /* spans recorded since the last take; events kept past n */
};

static const char *const op_names[PL_COMM_NOPS] = {
    "allreduce", "allgather", "reduce_scatter",
    "alltoallv", "sendrecv",  "broadcast"};

const char *pl_comm_op_name(int op) {
  return op >= 0 && op < PL_COMM_NOPS ? op_names[op] : "?";
}

void pl__count(pl_comm *c, pl_comm_op op, uint64_t sent, uint64_t recv) {
  c->stats.calls[op]++;
  c->stats.sent[op] += sent;
  c->stats.recv[op] += recv;
}

void pl_comm_stats_get(const pl_comm *c, pl_comm_stats *out) {
  if (c)
    *out = c->stats;
  else
    memset(out, 0, sizeof *out);
}

void pl_comm_stats_reset(pl_comm *c) {
  if (c)
    memset(&c->stats, 0, sizeof c->stats);
}

int pl_comm_is_virtual(const pl_comm *c) {
  return c && c->vsize > 0;
}

pl_status pl_comm_virtual(pl_dev *dev, int vsize, pl_comm **out) {
  if (!out)
    return pl_set_error(PL_EINVAL, "pl_comm_virtual: out is NULL");
  *out = NULL;
  if (!dev)
    return pl_set_error(PL_EINVAL, "pl_comm_virtual: dev is NULL");
  if (vsize < 1)
    return pl_set_error(
        PL_EINVAL, "pl_comm_virtual: vsize=%d: a group has >= 1 member", vsize);
  pl_comm *c = calloc(1, sizeof *c);
  struct pl__vprof *v = calloc(1, sizeof *v);
  if (!c || !v) {
    free(c), free(v);
    return pl_set_error(PL_ENOMEM, "pl_comm_virtual: host");
  }
  /* no MPI communicator behind it: no operation of a virtual group calls
   * MPI or NCCL, so threads other than MPI's may make and use one */
  c->mpi = MPI_COMM_NULL;
  c->rank = 0, c->size = vsize, c->vsize = vsize;
  c->dev = dev;
  c->timeout_s = pl__default_timeout;
  c->bytes_per_s = pl__bytes_per_s;
  c->vprof = v;
  *out = c;
  return PL_OK;
}

void pl__virt_free(pl_comm *c) {
  struct pl__vprof *v = c->vprof;
  if (!v)
    return;
  for (int i = 0; i < v->cap; i++) {
    if (v->sp[i].a)
      pl_event_destroy(v->sp[i].a);
    if (v->sp[i].b)
      pl_event_destroy(v->sp[i].b);
  }
  free(v->sp);
  free(v);
  c->vprof = NULL;
}

pl_status pl_comm_set_profile(pl_comm *c, int on) {
  if (!c)
    return pl_set_error(PL_EINVAL, "pl_comm_set_profile: c is NULL");
  if (c->vprof)
    c->vprof->on = on != 0;
  return PL_OK;
}

pl_status pl_comm_take_standin_ms(pl_comm *c, const pl_stream *on,
                                  double *on_ms, double *side_ms) {
  double a = 0, b = 0;
  struct pl__vprof *v = c ? c->vprof : NULL;
  for (int i = 0; v && i < v->n; i++) {
    float ms = 0;
    PL_TRY(pl_event_elapsed_ms(v->sp[i].a, v->sp[i].b, &ms));
    if (v->sp[i].s == on)
      a += ms;
    else
      b += ms;
  }
  if (v)
    v->n = 0;
  if (on_ms)
    *on_ms = a;
  if (side_ms)
    *side_ms = b;
  return PL_OK;
}

/* ---- the stand-ins ------------------------------------------------------- */

/* One stand-in operation: events around its copies when profiling. */
typedef struct vop {
  pl_comm *c;
  pl_stream *s;
  vspan *span; /* NULL: not timed */
} vop;

static pl_status vop_begin(pl_comm *c, pl_stream *s, vop *o) {
  o->c = c;
  o->s = s ? s : pl_dev_stream(c->dev);
  o->span = NULL;
  struct pl__vprof *v = c->vprof;
  if (!v || !v->on)
    return PL_OK;
  if (v->n == v->cap) {
    const int cap = v->cap ? 2 * v->cap : 64;
    vspan *sp = realloc(v->sp, (size_t)cap * sizeof *sp);
    if (!sp)
      return pl_set_error(PL_ENOMEM, "virtual group: host");
    memset(sp + v->cap, 0, (size_t)(cap - v->cap) * sizeof *sp);
    v->sp = sp, v->cap = cap;
  }
  vspan *x = &v->sp[v->n];
  if (!x->a)
    PL_TRY(pl_event_create(c->dev, &x->a));
  if (!x->b)
    PL_TRY(pl_event_create(c->dev, &x->b));
  PL_TRY(pl_event_record(x->a, o->s));
  x->s = o->s;
  o->span = x;
  v->n++;
  return PL_OK;
}

static pl_status vop_end(vop *o, pl_status st) {
  /* the span's end is recorded also after a failed op */
  pl_status e = o->span ? pl_event_record(o->span->b, o->s) : PL_OK;
  return st != PL_OK ? st : e;
}

/* dst ← src (bytes), counted as a stand-in */
static pl_status vcopy(vop *o, void *dst, const void *src, size_t bytes) {
  if (!bytes || dst == src)
    return PL_OK;
  o->c->stats.standins++;
  o->c->stats.standin_bytes += bytes;
  return pl_memcpy_async(o->s, dst, src, bytes);
}

/* dst[0, rn) ← src[0, sn) elements, the rest of dst zeroed */
static pl_status vblock(vop *o, void *dst, size_t rn, const void *src,
                        size_t sn, pl_dtype dt) {
  const size_t es = pl_dtype_size(dt), n = rn < sn ? rn : sn;
  PL_TRY(vcopy(o, dst, src, n * es));
  if (rn > n) {
    o->c->stats.standin_bytes += (rn - n) * es;
    return pl_fill(o->s, (char *)dst + n * es, dt, rn - n, 0.0);
  }
  return PL_OK;
}

pl_status pl__virt_allreduce(pl_comm *c, const void *send, void *recv,
                             size_t count, pl_dtype dt, pl_stream *s) {
  vop o;
  PL_TRY(vop_begin(c, s, &o));
  return vop_end(&o, vcopy(&o, recv, send, count * pl_dtype_size(dt)));
}

pl_status pl__virt_allgather(pl_comm *c, const void *send, void *recv,
                             size_t count, pl_dtype dt, pl_stream *s) {
  vop o;
  PL_TRY(vop_begin(c, s, &o));
  const size_t b = count * pl_dtype_size(dt);
  pl_status st = PL_OK;
  for (int q = 0; q < c->vsize && st == PL_OK; q++)
    st = vcopy(&o, (char *)recv + (size_t)q * b, send, b);
  return vop_end(&o, st);
}

pl_status pl__virt_reduce_scatter(pl_comm *c, const void *send, void *recv,
                                  size_t count, pl_dtype dt, pl_stream *s) {
  vop o;
  PL_TRY(vop_begin(c, s, &o));
  return vop_end(&o, vcopy(&o, recv, send, count * pl_dtype_size(dt)));
}

pl_status pl__virt_alltoallv(pl_comm *c, const void *send,
                             const size_t *scounts, const size_t *sdispls,
                             void *recv, const size_t *rcounts,
                             const size_t *rdispls, pl_dtype dt, pl_stream *s) {
  vop o;
  PL_TRY(vop_begin(c, s, &o));
  const size_t es = pl_dtype_size(dt);
  if (!o.span && es && send && pl__on_dry(o.s) && pl_dry_owns(o.s->dev, recv)) {
    /* a dry device's copies and fills into its own buffers move nothing:
     * only what vblock counts */
    uint64_t ops = 0, elems = 0;
    for (int q = 0; q < c->vsize; q++) {
      const size_t rn = rcounts[q], n = rn < scounts[q] ? rn : scounts[q];
      const bool moved = n && (char *)recv + rdispls[q] * es !=
                                  (const char *)send + sdispls[q] * es;
      ops += moved;
      elems += moved ? rn : rn - n;
    }
    c->stats.standins += ops;
    c->stats.standin_bytes += elems * es;
    return vop_end(&o, PL_OK);
  }
  pl_status st = PL_OK;
  for (int q = 0; q < c->vsize && st == PL_OK; q++)
    st = vblock(&o, (char *)recv + rdispls[q] * es, rcounts[q],
                (const char *)send + sdispls[q] * es, scounts[q], dt);
  return vop_end(&o, st);
}

pl_status pl__virt_sendrecv(pl_comm *c, const void *send, size_t scount,
                            void *recv, size_t rcount, pl_dtype dt,
                            pl_stream *s) {
  vop o;
  PL_TRY(vop_begin(c, s, &o));
  return vop_end(&o, vblock(&o, recv, rcount, send, scount, dt));
}
