/* fsdp_units.c — FSDP2's units (fsdp_units.h): fp32 shards, cast and
 * all-gather with copy-out on a comm stream, fp32 reduce-scatter, and the
 * CPU-offload copies. */
#include "fsdp_units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct funit {
  char name[40];
  size_t numel, s;
  pl_comm *comm;
  int G, Gv, r;
  float *w, *g, *m, *v; /* shard: fp32 weights, gradient, moments     */
  void *full;           /* gathered (dt), NULL when not               */
  float *gfull;         /* open unsharded gradient                    */
  pl_event *ev;         /* gather done                                */
} funit;

typedef struct span {
  pl_event *a, *b;
  int reduce;
} span;

struct pl__fsdp {
  pl_dev *dev;
  pl_dtype dt;
  bool offload;
  int n;
  funit *u;
  pl_stream *cs;
  pl_event *ev_go, *ev_done;
  bool profile;
  span *sp;
  int nsp, capsp;
  double gather_ms, reduce_ms;
};

void pl__fsdp_destroy(pl__fsdp *f) {
  if (!f)
    return;
  pl_dev_sync(f->dev);
  for (int i = 0; f->u && i < f->n; i++) {
    funit *u = &f->u[i];
    float *ps[] = {u->w, u->g, u->m, u->v, u->gfull};
    for (int j = 0; j < 5; j++)
      pl_free(f->dev, ps[j]);
    pl_free(f->dev, u->full);
    if (u->ev)
      pl_event_destroy(u->ev);
  }
  free(f->u);
  for (int i = 0; i < f->capsp; i++) {
    if (f->sp[i].a)
      pl_event_destroy(f->sp[i].a);
    if (f->sp[i].b)
      pl_event_destroy(f->sp[i].b);
  }
  free(f->sp);
  if (f->ev_go)
    pl_event_destroy(f->ev_go);
  if (f->ev_done)
    pl_event_destroy(f->ev_done);
  if (f->cs)
    pl_stream_destroy(f->cs);
  free(f);
}

/* fp32 buffer of n elements, zeroed, in the shard's arena */
static pl_status shard_buf(pl__fsdp *f, size_t n, const char *tag,
                           float **out) {
  const pl_arena a = f->offload ? PL_ARENA_HOST : PL_ARENA_DEVICE;
  PL_TRY(pl_alloc(f->dev, a, n * 4, tag, (void **)out));
  if (f->offload) {
    memset(*out, 0, n * 4);
    return PL_OK;
  }
  return pl_fill(pl_dev_stream(f->dev), *out, PL_F32, n, 0.0);
}

pl_status pl__fsdp_create(pl_dev *dev, pl_dtype dt, bool offload, int n,
                          const pl__fsdp_unit_cfg *units, pl__fsdp **out) {
  *out = NULL;
  if (dt != PL_F32 && dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "fsdp2: dtype %s: f32 or bf16",
                        pl_dtype_name(dt));
  pl__fsdp *f = calloc(1, sizeof *f);
  if (!f)
    return pl_set_error(PL_ENOMEM, "fsdp2: host");
  f->dev = dev, f->dt = dt, f->offload = offload, f->n = n;
  f->u = calloc((size_t)(n > 0 ? n : 1), sizeof(funit));
  pl_status st = f->u ? PL_OK : pl_set_error(PL_ENOMEM, "fsdp2: host");
  for (int i = 0; i < n && st == PL_OK; i++) {
    const pl__fsdp_unit_cfg *c = &units[i];
    funit *u = &f->u[i];
    snprintf(u->name, sizeof u->name, "%s", c->name ? c->name : "unit");
    u->comm = c->comm;
    u->G = c->comm ? pl_comm_size(c->comm) : 1;
    u->r = c->comm ? pl_comm_rank(c->comm) : 0;
    u->Gv = c->vsize ? c->vsize : u->G;
    if (c->numel < 1 || u->Gv < u->G || u->Gv % u->G) {
      st = pl_set_error(PL_EINVAL,
                        "fsdp2: unit %s: numel=%zu over G=%d ranks, virtual "
                        "%d: need numel >= 1 and a multiple of G",
                        u->name, c->numel, u->G, u->Gv);
      break;
    }
    u->numel = c->numel;
    u->s = (c->numel + (size_t)u->Gv - 1) / (size_t)u->Gv;
    if ((st = shard_buf(f, u->s, "weights", &u->w)) ||
        (st = shard_buf(f, u->s, "grads", &u->g)) ||
        (st = shard_buf(f, u->s, "optim", &u->m)) ||
        (st = shard_buf(f, u->s, "optim", &u->v)) ||
        (st = pl_event_create(dev, &u->ev)))
      break;
  }
  if (st == PL_OK)
    st = pl_stream_create(dev, &f->cs);
  if (st == PL_OK)
    st = pl_event_create(dev, &f->ev_go);
  if (st == PL_OK)
    st = pl_event_create(dev, &f->ev_done);
  if (st == PL_OK)
    st = pl_dev_sync(dev);
  if (st != PL_OK) {
    pl__fsdp_destroy(f);
    return st;
  }
  *out = f;
  return PL_OK;
}

int pl__fsdp_nunits(const pl__fsdp *f) {
  return f->n;
}

void pl__fsdp_shard(pl__fsdp *f, int u, float **w, float **g, float **m,
                    float **v, size_t *s, size_t *offset) {
  PL_ASSERT(u >= 0 && u < f->n);
  const funit *x = &f->u[u];
  if (w)
    *w = x->w;
  if (g)
    *g = x->g;
  if (m)
    *m = x->m;
  if (v)
    *v = x->v;
  if (s)
    *s = x->s;
  if (offset)
    *offset = (size_t)x->r * x->s;
}

size_t pl__fsdp_numel(const pl__fsdp *f, int u) {
  return f->u[u].numel;
}
pl_comm *pl__fsdp_comm(const pl__fsdp *f, int u) {
  return f->u[u].comm;
}
int pl__fsdp_vsize(const pl__fsdp *f, int u) {
  return f->u[u].Gv;
}
bool pl__fsdp_resident(const pl__fsdp *f, int u) {
  return f->u[u].full;
}
void pl__fsdp_set_profile(pl__fsdp *f, bool on) {
  f->profile = on;
}

static pl_status span_begin(pl__fsdp *f, int reduce, span **out) {
  *out = NULL;
  if (!f->profile)
    return PL_OK;
  if (f->nsp == f->capsp) {
    const int cap = f->capsp ? 2 * f->capsp : 16;
    span *p = realloc(f->sp, (size_t)cap * sizeof *p);
    if (!p)
      return pl_set_error(PL_ENOMEM, "fsdp2: host");
    for (int i = f->capsp; i < cap; i++)
      p[i].a = p[i].b = NULL;
    f->sp = p, f->capsp = cap;
  }
  span *x = &f->sp[f->nsp];
  if (!x->a)
    PL_TRY(pl_event_create(f->dev, &x->a));
  if (!x->b)
    PL_TRY(pl_event_create(f->dev, &x->b));
  x->reduce = reduce;
  f->nsp++;
  *out = x;
  return pl_event_record(x->a, f->cs);
}

pl_status pl__fsdp_take_ms(pl__fsdp *f, double *gather_ms, double *reduce_ms) {
  for (int i = 0; i < f->nsp; i++) {
    float ms = 0;
    PL_TRY(pl_event_elapsed_ms(f->sp[i].a, f->sp[i].b, &ms));
    if (f->sp[i].reduce)
      f->reduce_ms += ms;
    else
      f->gather_ms += ms;
  }
  f->nsp = 0;
  if (gather_ms)
    *gather_ms = f->gather_ms;
  if (reduce_ms)
    *reduce_ms = f->reduce_ms;
  f->gather_ms = f->reduce_ms = 0;
  return PL_OK;
}

/* the comm stream after the work issued on s */
static pl_status cs_after(pl__fsdp *f, pl_stream *s) {
  PL_TRY(pl_event_record(f->ev_go, s));
  return pl_stream_wait(f->cs, f->ev_go);
}

pl_status pl__fsdp_prefetch(pl__fsdp *f, int u, pl_stream *s) {
  if (u < 0 || u >= f->n)
    return pl_set_error(PL_EINVAL, "fsdp2: unit %d of %d", u, f->n);
  funit *x = &f->u[u];
  if (x->full)
    return PL_OK;
  const size_t es = pl_dtype_size(f->dt), blk = (size_t)x->G * x->s;
  PL_TRY(cs_after(f, s));
  span *sp;
  PL_TRY(span_begin(f, 0, &sp));
  pl_dev *dev = f->dev;
  pl_stream *cs = f->cs;
  void *ag = NULL;
  float *stage = NULL;
  const float *src = x->w;
  pl_status st = PL_OK;
  if (f->offload) { /* the fp32 shard to the device first */
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, x->s * 4, "fsdp_ag", cs,
                        (void **)&stage);
    if (st == PL_OK)
      st = pl_memcpy_async(cs, stage, x->w, x->s * 4);
    src = stage;
  }
  /* the all-gather buffer; this rank's block is the cast shard */
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)x->Gv * x->s * es,
                        "fsdp_ag", cs, &ag);
  char *mine = ag ? (char *)ag + (size_t)x->r * x->s * es : NULL;
  if (st == PL_OK)
    st = pl_convert(cs, mine, f->dt, src, PL_F32, x->s);
  pl_free_async(dev, stage, cs);
  if (st == PL_OK && x->comm && x->G > 1)
    st = pl_allgather(x->comm, mine, ag, x->s, f->dt, cs);
  for (int j = 1; st == PL_OK && j < x->Gv / x->G; j++)
    st = pl_memcpy_async(cs, (char *)ag + (size_t)j * blk * es, ag, blk * es);
  /* copy-out into the unit's parameters */
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, x->numel * es, "zero3", cs,
                        &x->full);
  if (st == PL_OK)
    st = pl_memcpy_async(cs, x->full, ag, x->numel * es);
  pl_free_async(dev, ag, cs);
  if (st == PL_OK && sp)
    st = pl_event_record(sp->b, cs);
  if (st == PL_OK)
    st = pl_event_record(x->ev, cs);
  if (st != PL_OK && x->full) {
    pl_free_async(dev, x->full, cs);
    x->full = NULL;
  }
  return st;
}

pl_status pl__fsdp_acquire(pl__fsdp *f, int u, pl_stream *s, void **full) {
  PL_TRY(pl__fsdp_prefetch(f, u, s));
  PL_TRY(pl_stream_wait(s, f->u[u].ev));
  *full = f->u[u].full;
  return PL_OK;
}

void pl__fsdp_release(pl__fsdp *f, int u, pl_stream *s) {
  PL_ASSERT(u >= 0 && u < f->n);
  funit *x = &f->u[u];
  if (!x->full)
    return;
  if (pl_stream_wait(s, x->ev) != PL_OK)
    pl_dev_sync(f->dev);
  pl_free_async(f->dev, x->full, s);
  x->full = NULL;
}

pl_status pl__fsdp_grad_acquire(pl__fsdp *f, int u, pl_stream *s,
                                float **full) {
  if (u < 0 || u >= f->n)
    return pl_set_error(PL_EINVAL, "fsdp2: unit %d of %d", u, f->n);
  funit *x = &f->u[u];
  if (!x->gfull) {
    const size_t n = (size_t)x->Gv * x->s;
    PL_TRY(pl_alloc_async(f->dev, PL_ARENA_DEVICE, n * 4, "zero3_grads", s,
                          (void **)&x->gfull));
    pl_status st = pl_fill(s, x->gfull, PL_F32, n, 0.0);
    if (st != PL_OK) {
      pl_free_async(f->dev, x->gfull, s);
      x->gfull = NULL;
      return st;
    }
  }
  *full = x->gfull;
  return PL_OK;
}

pl_status pl__fsdp_grad_reduce(pl__fsdp *f, int u, pl_stream *s,
                               bool accumulate) {
  if (u < 0 || u >= f->n)
    return pl_set_error(PL_EINVAL, "fsdp2: unit %d of %d", u, f->n);
  funit *x = &f->u[u];
  if (!x->gfull)
    return PL_OK;
  PL_TRY(cs_after(f, s));
  span *sp;
  PL_TRY(span_begin(f, 1, &sp));
  pl_dev *dev = f->dev;
  pl_stream *cs = f->cs;
  float *out = NULL, *sum = NULL;
  pl_status st = pl_alloc_async(dev, PL_ARENA_DEVICE, x->s * 4, "zero3_grads",
                                cs, (void **)&out);
  if (st == PL_OK)
    st = x->comm && x->G > 1
             ? pl_reduce_scatter(x->comm, x->gfull, out, x->s, PL_F32,
                                 PL_RED_SUM, cs)
             : pl_memcpy_async(cs, out, x->gfull + (size_t)x->r * x->s,
                               x->s * 4);
  pl_free_async(dev, x->gfull, cs);
  x->gfull = NULL;
  if (!f->offload) {
    if (st == PL_OK)
      st = accumulate ? pl_axpy(cs, x->g, PL_F32, out, PL_F32, x->s, 1.0f)
                      : pl_memcpy_async(cs, x->g, out, x->s * 4);
  } else if (!accumulate) {
    if (st == PL_OK)
      st = pl_memcpy_async(cs, x->g, out, x->s * 4);
  } else { /* the host shard += the new one, summed on the device */
    if (st == PL_OK)
      st = pl_alloc_async(dev, PL_ARENA_DEVICE, x->s * 4, "zero3_grads", cs,
                          (void **)&sum);
    if (st == PL_OK)
      st = pl_memcpy_async(cs, sum, x->g, x->s * 4);
    if (st == PL_OK)
      st = pl_axpy(cs, sum, PL_F32, out, PL_F32, x->s, 1.0f);
    if (st == PL_OK)
      st = pl_memcpy_async(cs, x->g, sum, x->s * 4);
  }
  pl_free_async(dev, sum, cs);
  pl_free_async(dev, out, cs);
  if (st == PL_OK && sp)
    st = pl_event_record(sp->b, cs);
  return st;
}

pl_status pl__fsdp_sync(pl__fsdp *f, pl_stream *s) {
  PL_TRY(pl_event_record(f->ev_done, f->cs));
  return pl_stream_wait(s, f->ev_done);
}

void pl__fsdp_reset(pl__fsdp *f, pl_stream *s) {
  if (pl__fsdp_sync(f, s) != PL_OK)
    pl_dev_sync(f->dev);
  for (int i = 0; i < f->n; i++) {
    funit *x = &f->u[i];
    pl_free_async(f->dev, x->full, s);
    pl_free_async(f->dev, x->gfull, s);
    x->full = NULL;
    x->gfull = NULL;
  }
  pl_dev_sync(f->dev);
}
