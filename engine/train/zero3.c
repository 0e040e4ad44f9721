/* zero3.c — ZeRO-3 units: shards, gathers with prefetch on a comm stream,
 * gradient reduce-scatters (train/zero3.h). */
#include "train/zero3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RESIDENT 2

typedef struct unit {
  char name[32];
  size_t numel, s;
  pl_comm *comm;
  int G, Gv, r;
  void *w;      /* shard weights                        */
  float *g;     /* shard gradient (f32)                 */
  void *full;   /* gathered weights (NULL: not resident) */
  float *gfull; /* open full gradient                   */
  pl_event *ev; /* gather done                          */
} unit;

typedef struct span {
  pl_event *a, *b;
  int reduce;
} span;

struct pl_zero3 {
  pl_dev *dev;
  pl_dtype wdt;
  int n;
  unit *u;
  pl_stream *cs;
  pl_event *ev_go, *ev_done;
  int resident;
  bool profile;
  span *sp;
  int nsp, capsp;
  pl_zero3_stats acc;
};

pl_status pl_zero3_create(pl_dev *dev, pl_dtype wdt, int nunits,
                          const pl_zero3_unit_cfg *units, pl_zero3 **out) {
  *out = NULL;
  if (wdt != PL_F32 && wdt != PL_BF16)
    return pl_set_error(PL_EINVAL, "zero3: weight dtype %s: f32 or bf16",
                        pl_dtype_name(wdt));
  if (nunits < 1)
    return pl_set_error(PL_EINVAL, "zero3: %d units: need >= 1", nunits);
  pl_zero3 *z = calloc(1, sizeof *z);
  if (!z)
    return pl_set_error(PL_ENOMEM, "zero3: host");
  z->dev = dev, z->wdt = wdt, z->n = nunits;
  z->u = calloc((size_t)nunits, sizeof(unit));
  pl_status st = z->u ? PL_OK : pl_set_error(PL_ENOMEM, "zero3: host");
  const size_t es = pl_dtype_size(wdt);
  for (int i = 0; i < nunits && st == PL_OK; i++) {
    const pl_zero3_unit_cfg *c = &units[i];
    unit *u = &z->u[i];
    snprintf(u->name, sizeof u->name, "%s", c->name ? c->name : "unit");
    u->comm = c->comm;
    u->G = c->comm ? pl_comm_size(c->comm) : 1;
    u->r = c->comm ? pl_comm_rank(c->comm) : 0;
    u->Gv = c->vsize ? c->vsize : u->G;
    if (c->numel < 1 || u->Gv < u->G || u->Gv % u->G) {
      st = pl_set_error(
          PL_EINVAL,
          "zero3: unit %s: numel=%zu over G=%d ranks, virtual %d: need numel "
          ">= 1 and a virtual group that is a multiple of G",
          u->name, c->numel, u->G, u->Gv);
      break;
    }
    u->numel = c->numel;
    u->s = (c->numel + (size_t)u->Gv - 1) / (size_t)u->Gv;
    if ((st = pl_alloc(dev, PL_ARENA_DEVICE, u->s * es, "weights", &u->w)) ||
        (st = pl_alloc(dev, PL_ARENA_DEVICE, u->s * 4, "grads",
                       (void **)&u->g)) ||
        (st = pl_fill(pl_dev_stream(dev), u->w, wdt, u->s, 0.0)) ||
        (st = pl_fill(pl_dev_stream(dev), u->g, PL_F32, u->s, 0.0)) ||
        (st = pl_event_create(dev, &u->ev)))
      break;
  }
  if (st == PL_OK)
    st = pl_stream_create(dev, &z->cs);
  if (st == PL_OK)
    st = pl_event_create(dev, &z->ev_go);
  if (st == PL_OK)
    st = pl_event_create(dev, &z->ev_done);
  if (st != PL_OK) {
    pl_zero3_destroy(z);
    return st;
  }
  *out = z;
  return PL_OK;
}

void pl_zero3_destroy(pl_zero3 *z) {
  if (!z)
    return;
  pl_dev_sync(z->dev);
  for (int i = 0; z->u && i < z->n; i++) {
    unit *u = &z->u[i];
    pl_free(z->dev, u->w);
    pl_free(z->dev, u->g);
    pl_free(z->dev, u->full);
    pl_free(z->dev, u->gfull);
    if (u->ev)
      pl_event_destroy(u->ev);
  }
  free(z->u);
  for (int i = 0; i < z->capsp; i++) { /* kept for reuse past nsp */
    if (z->sp[i].a)
      pl_event_destroy(z->sp[i].a);
    if (z->sp[i].b)
      pl_event_destroy(z->sp[i].b);
  }
  free(z->sp);
  if (z->ev_go)
    pl_event_destroy(z->ev_go);
  if (z->ev_done)
    pl_event_destroy(z->ev_done);
  if (z->cs)
    pl_stream_destroy(z->cs);
  free(z);
}

int pl_zero3_nunits(const pl_zero3 *z) {
  return z->n;
}

void pl_zero3_shard(pl_zero3 *z, int u, void **w, float **g, size_t *s,
                    size_t *offset) {
  PL_ASSERT(u >= 0 && u < z->n);
  const unit *x = &z->u[u];
  if (w)
    *w = x->w;
  if (g)
    *g = x->g;
  if (s)
    *s = x->s;
  if (offset)
    *offset = (size_t)x->r * x->s;
}

size_t pl_zero3_full_numel(const pl_zero3 *z, int u) {
  PL_ASSERT(u >= 0 && u < z->n);
  return (size_t)z->u[u].Gv * z->u[u].s;
}

size_t pl_zero3_max_unit_bytes(const pl_zero3 *z) {
  size_t m = 0;
  for (int i = 0; i < z->n; i++) {
    size_t b = pl_zero3_full_numel(z, i) * pl_dtype_size(z->wdt);
    if (b > m)
      m = b;
  }
  return m;
}

size_t pl_zero3_max_grad_bytes(const pl_zero3 *z) {
  size_t m = 0;
  for (int i = 0; i < z->n; i++) {
    size_t b = pl_zero3_full_numel(z, i) * 4;
    if (b > m)
      m = b;
  }
  return m;
}

bool pl_zero3_resident(const pl_zero3 *z, int u) {
  return z->u[u].full != NULL;
}
pl_stream *pl_zero3_stream(pl_zero3 *z) {
  return z->cs;
}
void pl_zero3_set_profile(pl_zero3 *z, bool on) {
  z->profile = on;
}

/* A pair of timing events around comm-stream work (profile on). */
static pl_status span_begin(pl_zero3 *z, int reduce, span **out) {
  *out = NULL;
  if (!z->profile)
    return PL_OK;
  if (z->nsp == z->capsp) {
    int cap = z->capsp ? 2 * z->capsp : 16;
    span *p = realloc(z->sp, (size_t)cap * sizeof *p);
    if (!p)
      return pl_set_error(PL_ENOMEM, "zero3: host");
    z->sp = p;
    for (int i = z->capsp; i < cap; i++)
      z->sp[i].a = z->sp[i].b = NULL;
    z->capsp = cap;
  }
  span *x = &z->sp[z->nsp];
  if (!x->a)
    PL_TRY(pl_event_create(z->dev, &x->a));
  if (!x->b)
    PL_TRY(pl_event_create(z->dev, &x->b));
  x->reduce = reduce;
  z->nsp++;
  *out = x;
  return pl_event_record(x->a, z->cs);
}

pl_status pl_zero3_take_stats(pl_zero3 *z, pl_zero3_stats *out) {
  for (int i = 0; i < z->nsp; i++) {
    float ms = 0;
    PL_TRY(pl_event_elapsed_ms(z->sp[i].a, z->sp[i].b, &ms));
    if (z->sp[i].reduce)
      z->acc.reduce_ms += ms;
    else
      z->acc.gather_ms += ms;
  }
  /* the spans' events are kept for reuse */
  *out = z->acc;
  memset(&z->acc, 0, sizeof z->acc);
  z->nsp = 0;
  return PL_OK;
}

pl_status pl_zero3_prefetch(pl_zero3 *z, int u, pl_stream *s) {
  if (u < 0 || u >= z->n)
    return pl_set_error(PL_EINVAL, "zero3: unit %d of %d", u, z->n);
  unit *x = &z->u[u];
  if (x->full)
    return PL_OK;
  if (z->resident >= MAX_RESIDENT)
    return pl_set_error(
        PL_EINVAL,
        "zero3: gathering unit %s would hold %d gathered units (at most %d)",
        x->name, z->resident + 1, MAX_RESIDENT);
  const size_t es = pl_dtype_size(z->wdt), blk = (size_t)x->G * x->s;
  /* the comm stream starts after the work issued on s (the shard's last
   * update is on it) */
  PL_TRY(pl_event_record(z->ev_go, s));
  PL_TRY(pl_stream_wait(z->cs, z->ev_go));
  span *sp;
  PL_TRY(span_begin(z, 0, &sp));
  PL_TRY(pl_alloc_async(z->dev, PL_ARENA_DEVICE, (size_t)x->Gv * x->s * es,
                        "zero3", z->cs, &x->full));
  z->resident++;
  pl_status st;
  if (x->comm && x->G > 1)
    st = pl_allgather(x->comm, x->w, x->full, x->s, z->wdt, z->cs);
  else
    st = pl_memcpy_async(z->cs, x->full, x->w, x->s * es);
  for (int j = 1; st == PL_OK && j < x->Gv / x->G; j++)
    st = pl_memcpy_async(z->cs, (char *)x->full + (size_t)j * blk * es, x->full,
                         blk * es);
  if (st == PL_OK && sp) {
    st = pl_event_record(sp->b, z->cs);
    z->acc.gathers++;
    z->acc.gather_bytes += (size_t)x->G * x->s * es;
  }
  if (st == PL_OK)
    st = pl_event_record(x->ev, z->cs);
  return st;
}

pl_status pl_zero3_acquire(pl_zero3 *z, int u, pl_stream *s, void **full) {
  PL_TRY(pl_zero3_prefetch(z, u, s));
  PL_TRY(pl_stream_wait(s, z->u[u].ev));
  *full = z->u[u].full;
  return PL_OK;
}

void pl_zero3_release(pl_zero3 *z, int u, pl_stream *s) {
  PL_ASSERT(u >= 0 && u < z->n);
  unit *x = &z->u[u];
  if (!x->full)
    return;
  /* s waited for the gather in acquire; if the unit was only prefetched,
   * make the free wait for the gather too */
  if (pl_stream_wait(s, x->ev) != PL_OK)
    pl_dev_sync(z->dev);
  pl_free_async(z->dev, x->full, s);
  x->full = NULL;
  z->resident--;
}

pl_status pl_zero3_grad_acquire(pl_zero3 *z, int u, pl_stream *s,
                                float **full) {
  if (u < 0 || u >= z->n)
    return pl_set_error(PL_EINVAL, "zero3: unit %d of %d", u, z->n);
  unit *x = &z->u[u];
  if (!x->gfull) {
    const size_t n = (size_t)x->Gv * x->s;
    PL_TRY(pl_alloc_async(z->dev, PL_ARENA_DEVICE, n * 4, "zero3_grads", s,
                          (void **)&x->gfull));
    pl_status st = pl_fill(s, x->gfull, PL_F32, n, 0.0);
    if (st != PL_OK) {
      pl_free_async(z->dev, x->gfull, s);
      x->gfull = NULL;
      return st;
    }
  }
  *full = x->gfull;
  return PL_OK;
}

pl_status pl_zero3_grad_reduce(pl_zero3 *z, int u, pl_stream *s,
                               bool accumulate) {
  if (u < 0 || u >= z->n)
    return pl_set_error(PL_EINVAL, "zero3: unit %d of %d", u, z->n);
  unit *x = &z->u[u];
  if (!x->gfull)
    return PL_OK;
  PL_TRY(pl_event_record(z->ev_go, s));
  PL_TRY(pl_stream_wait(z->cs, z->ev_go));
  span *sp;
  PL_TRY(span_begin(z, 1, &sp));
  float *dst = x->g, *tmp = NULL;
  pl_status st = PL_OK;
  if (accumulate) {
    st = pl_alloc_async(z->dev, PL_ARENA_DEVICE, x->s * 4, "zero3_grads", z->cs,
                        (void **)&tmp);
    dst = tmp;
  }
  if (st == PL_OK) {
    if (x->comm && x->G > 1)
      st = pl_reduce_scatter(x->comm, x->gfull, dst, x->s, PL_F32, PL_RED_SUM,
                             z->cs);
    else
      st =
          pl_memcpy_async(z->cs, dst, x->gfull + (size_t)x->r * x->s, x->s * 4);
  }
  if (st == PL_OK && accumulate)
    st = pl_axpy(z->cs, x->g, PL_F32, tmp, PL_F32, x->s, 1.0f);
  if (st == PL_OK && sp) {
    st = pl_event_record(sp->b, z->cs);
    z->acc.reduces++;
    z->acc.reduce_bytes += (size_t)x->G * x->s * 4;
  }
  pl_free_async(z->dev, tmp, z->cs);
  pl_free_async(z->dev, x->gfull, z->cs);
  x->gfull = NULL;
  return st;
}

pl_status pl_zero3_sync(pl_zero3 *z, pl_stream *s) {
  PL_TRY(pl_event_record(z->ev_done, z->cs));
  return pl_stream_wait(s, z->ev_done);
}
