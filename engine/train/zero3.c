/* zero3.c — ZeRO-3 units: shards, gathers with prefetch on a comm stream,
 * gradient reduce-scatters (train/zero3.h), with the knobs of FSDP2's units
 * (fp32 master shard, host state, no residency bound). */
#include "train/zero3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct unit {
  char name[40];
  size_t numel, s;
  pl_comm *comm;
  int G, Gv, r;
  void *w;      /* shard weights (wdt; f32 with fp32_master)         */
  float *g;     /* shard gradient (f32)                              */
  float *m, *v; /* fp32_master: AdamW's moments                      */
  void *full;   /* gathered weights (NULL: not resident)              */
  float *gfull; /* open full gradient                                */
  pl_event *ev; /* gather done                                       */
} unit;

typedef struct span {
  pl_event *a, *b;
  int reduce;
} span;

struct pl_zero3 {
  pl_dev *dev;
  pl_dtype wdt;
  pl_zero3_opts o;
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

pl_zero3_opts pl_zero3_opts_default(void) {
  return (pl_zero3_opts){
      .fp32_master = false, .host_state = false, .max_resident = 2};
}

/* A zeroed shard buffer of n elements of dt in the shard state's arena. */
static pl_status shard_buf(pl_zero3 *z, size_t n, pl_dtype dt, const char *tag,
                           void **out) {
  const size_t b = n * pl_dtype_size(dt);
  if (z->o.host_state) {
    PL_TRY(pl_alloc(z->dev, PL_ARENA_HOST, b, tag, out));
    if (pl_dev_backend(z->dev) != PL_BACKEND_DRY) /* dry: not backed */
      memset(*out, 0, b);
    return PL_OK;
  }
  PL_TRY(pl_alloc(z->dev, PL_ARENA_DEVICE, b, tag, out));
  return pl_fill(pl_dev_stream(z->dev), *out, dt, n, 0.0);
}

pl_status pl_zero3_create(pl_dev *dev, pl_dtype wdt, int nunits,
                          const pl_zero3_unit_cfg *units, pl_zero3 **out) {
  const pl_zero3_opts o = pl_zero3_opts_default();
  return pl_zero3_create_opts(dev, wdt, &o, nunits, units, out);
}

pl_status pl_zero3_create_opts(pl_dev *dev, pl_dtype wdt,
                               const pl_zero3_opts *o, int nunits,
                               const pl_zero3_unit_cfg *units, pl_zero3 **out) {
  *out = NULL;
  if (wdt != PL_F32 && wdt != PL_BF16)
    return pl_set_error(PL_EINVAL, "zero3: weight dtype %s: f32 or bf16",
                        pl_dtype_name(wdt));
  if (nunits < 1)
    return pl_set_error(PL_EINVAL, "zero3: %d units: need >= 1", nunits);
  if (o->host_state && !o->fp32_master)
    return pl_set_error(PL_EINVAL,
                        "zero3: host_state needs fp32_master (the host keeps "
                        "the optimizer's fp32 shard)");
  pl_zero3 *z = calloc(1, sizeof *z);
  if (!z)
    return pl_set_error(PL_ENOMEM, "zero3: host");
  z->dev = dev, z->wdt = wdt, z->o = *o, z->n = nunits;
  z->u = calloc((size_t)nunits, sizeof(unit));
  pl_status st = PL_OK;
  const pl_dtype sdt = o->fp32_master ? PL_F32 : wdt;
  if (!z->u)
    PL_TRY_GOTO(st, fail, pl_set_error(PL_ENOMEM, "zero3: host"));
  for (int i = 0; i < nunits; i++) {
    const pl_zero3_unit_cfg *c = &units[i];
    unit *u = &z->u[i];
    snprintf(u->name, sizeof u->name, "%s", c->name ? c->name : "unit");
    u->comm = c->comm;
    u->G = c->comm ? pl_comm_size(c->comm) : 1;
    u->r = c->comm ? pl_comm_rank(c->comm) : 0;
    u->Gv = c->vsize ? c->vsize : u->G;
    if (c->numel < 1 || u->Gv < u->G || u->Gv % u->G)
      PL_TRY_GOTO(st, fail,
                  pl_set_error(PL_EINVAL,
                               "zero3: unit %s: numel=%zu over G=%d ranks, "
                               "virtual %d: need numel >= 1 and a virtual "
                               "group that is a multiple of G",
                               u->name, c->numel, u->G, u->Gv));
    u->numel = c->numel;
    u->s = (c->numel + (size_t)u->Gv - 1) / (size_t)u->Gv;
    PL_TRY_GOTO(st, fail, shard_buf(z, u->s, sdt, "weights", &u->w));
    PL_TRY_GOTO(st, fail, shard_buf(z, u->s, PL_F32, "grads", (void **)&u->g));
    if (o->fp32_master) {
      PL_TRY_GOTO(st, fail,
                  shard_buf(z, u->s, PL_F32, "optim", (void **)&u->m));
      PL_TRY_GOTO(st, fail,
                  shard_buf(z, u->s, PL_F32, "optim", (void **)&u->v));
    }
    PL_TRY_GOTO(st, fail, pl_event_create(dev, &u->ev));
  }
  PL_TRY_GOTO(st, fail, pl_stream_create(dev, &z->cs));
  PL_TRY_GOTO(st, fail, pl_event_create(dev, &z->ev_go));
  PL_TRY_GOTO(st, fail, pl_event_create(dev, &z->ev_done));
  if (o->fp32_master)
    PL_TRY_GOTO(st, fail, pl_dev_sync(dev));
  *out = z;
  return PL_OK;
fail:
  pl_zero3_destroy(z);
  return st;
}

void pl_zero3_destroy(pl_zero3 *z) {
  if (!z)
    return;
  pl_dev_sync(z->dev);
  for (int i = 0; z->u && i < z->n; i++) {
    unit *u = &z->u[i];
    pl_free(z->dev, u->w);
    pl_free(z->dev, u->g);
    pl_free(z->dev, u->m);
    pl_free(z->dev, u->v);
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

void pl_zero3_moments(pl_zero3 *z, int u, float **m, float **v) {
  PL_ASSERT(u >= 0 && u < z->n);
  if (m)
    *m = z->u[u].m;
  if (v)
    *v = z->u[u].v;
}

pl_comm *pl_zero3_comm(const pl_zero3 *z, int u) {
  PL_ASSERT(u >= 0 && u < z->n);
  return z->u[u].comm;
}

size_t pl_zero3_full_numel(const pl_zero3 *z, int u) {
  PL_ASSERT(u >= 0 && u < z->n);
  return z->o.fp32_master ? z->u[u].numel : (size_t)z->u[u].Gv * z->u[u].s;
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
    size_t b = (size_t)z->u[i].Gv * z->u[i].s * 4;
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

/* The comm stream after the work issued on s (the shard's last update is
 * on it). */
static pl_status cs_after(pl_zero3 *z, pl_stream *s) {
  PL_TRY(pl_event_record(z->ev_go, s));
  return pl_stream_wait(z->cs, z->ev_go);
}

/* The gathered block [0, G·s) of buf tiled over the absent ranks' blocks. */
static pl_status tile(pl_zero3 *z, const unit *x, void *buf) {
  const size_t blk = (size_t)x->G * x->s * pl_dtype_size(z->wdt);
  for (int j = 1; j < x->Gv / x->G; j++)
    PL_TRY(pl_memcpy_async(z->cs, (char *)buf + (size_t)j * blk, buf, blk));
  return PL_OK;
}

/* Failure agreement over the unit's group before its collective
 * (plateau/comm.h pl_agree; none alone): every member calls it, whatever st
 * (its status so far), so a member whose buffer allocation or conversion
 * failed stops the others before the collective instead of leaving them in
 * it until the watchdog. */
static pl_status agree(const unit *x, pl_status st, const char *what) {
  return x->comm && x->G > 1 ? pl_agree(x->comm, st, "zero3", what) : st;
}

/* The trainer's gather: the shard (wdt) all-gathered into the unit, after
 * st (the status so far: a failed rank skips its own part, never the
 * agreement). */
static pl_status gather_direct(pl_zero3 *z, unit *x, pl_status st) {
  const size_t es = pl_dtype_size(z->wdt);
  void *full = NULL;
  if (st == PL_OK)
    st = pl_alloc_async(z->dev, PL_ARENA_DEVICE, (size_t)x->Gv * x->s * es,
                        "zero3", z->cs, &full);
  st = agree(x, st, "the all-gather of a unit");
  if (st != PL_OK) {
    pl_free_async(z->dev, full, z->cs);
    return st;
  }
  x->full = full;
  if (x->comm && x->G > 1)
    PL_TRY(pl_allgather(x->comm, x->w, x->full, x->s, z->wdt, z->cs));
  else
    PL_TRY(pl_memcpy_async(z->cs, x->full, x->w, x->s * es));
  return tile(z, x, x->full);
}

/* fp32_master's gather: the fp32 shard (staged to the device with
 * host_state) cast into this rank's block of the all-gather buffer,
 * gathered in place, tiled, and copied out into the unit's parameters. */
static pl_status gather_cast(pl_zero3 *z, unit *x, pl_status st) {
  const size_t es = pl_dtype_size(z->wdt);
  pl_dev *dev = z->dev;
  pl_stream *cs = z->cs;
  void *ag = NULL;
  float *stage = NULL;
  const float *src = x->w;
  char *mine = NULL;
  if (st == PL_OK && z->o.host_state) {
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, x->s * 4, "fsdp_ag", cs,
                        (void **)&stage);
    if (st == PL_OK)
      st = pl_memcpy_async(cs, stage, x->w, x->s * 4);
    src = stage;
  }
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)x->Gv * x->s * es,
                        "fsdp_ag", cs, &ag);
  if (st == PL_OK) {
    mine = (char *)ag + (size_t)x->r * x->s * es;
    st = pl_convert(cs, mine, z->wdt, src, PL_F32, x->s);
  }
  pl_free_async(dev, stage, cs);
  stage = NULL;
  PL_TRY_GOTO(st, done, agree(x, st, "the all-gather of a unit"));
  if (x->comm && x->G > 1)
    PL_TRY_GOTO(st, done, pl_allgather(x->comm, mine, ag, x->s, z->wdt, cs));
  PL_TRY_GOTO(st, done, tile(z, x, ag));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, x->numel * es, "zero3", cs,
                             &x->full));
  PL_TRY_GOTO(st, done, pl_memcpy_async(cs, x->full, ag, x->numel * es));
done:
  pl_free_async(dev, stage, cs);
  pl_free_async(dev, ag, cs);
  if (st != PL_OK && x->full) {
    pl_free_async(dev, x->full, cs);
    x->full = NULL;
  }
  return st;
}

pl_status pl_zero3_prefetch(pl_zero3 *z, int u, pl_stream *s) {
  if (u < 0 || u >= z->n)
    return pl_set_error(PL_EINVAL, "zero3: unit %d of %d", u, z->n);
  unit *x = &z->u[u];
  if (x->full)
    return PL_OK;
  if (z->o.max_resident > 0 && z->resident >= z->o.max_resident)
    return pl_set_error(
        PL_EINVAL,
        "zero3: gathering unit %s would hold %d gathered units (at most %d)",
        x->name, z->resident + 1, z->o.max_resident);
  span *sp = NULL;
  pl_status st = cs_after(z, s);
  if (st == PL_OK)
    st = span_begin(z, 0, &sp);
  st = z->o.fp32_master ? gather_cast(z, x, st) : gather_direct(z, x, st);
  if (x->full)
    z->resident++;
  PL_TRY(st);
  if (sp) {
    st = pl_event_record(sp->b, z->cs);
    z->acc.gathers++;
    z->acc.gather_bytes += (size_t)x->G * x->s * pl_dtype_size(z->wdt);
    PL_TRY(st);
  }
  return pl_event_record(x->ev, z->cs);
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

/* The open gradient's reduce-scatter (sum, f32) over the real group into
 * dst (s elements), after st and the agreement; alone, this rank's block. */
static pl_status reduce_into(pl_zero3 *z, const unit *x, float *dst,
                             pl_status st) {
  PL_TRY(agree(x, st, "the reduce-scatter of a unit's gradient"));
  if (x->comm && x->G > 1)
    return pl_reduce_scatter(x->comm, x->gfull, dst, x->s, PL_F32, PL_RED_SUM,
                             z->cs);
  return pl_memcpy_async(z->cs, dst, x->gfull + (size_t)x->r * x->s, x->s * 4);
}

/* The trainer's reduction: straight into the shard, or into a transient
 * shard added to it (accumulate). */
static pl_status reduce_direct(pl_zero3 *z, unit *x, bool accumulate,
                               pl_status st) {
  float *dst = x->g, *tmp = NULL;
  if (st == PL_OK && accumulate) {
    st = pl_alloc_async(z->dev, PL_ARENA_DEVICE, x->s * 4, "zero3_grads", z->cs,
                        (void **)&tmp);
    dst = tmp;
  }
  PL_TRY_GOTO(st, done, reduce_into(z, x, dst, st));
  if (accumulate)
    PL_TRY_GOTO(st, done,
                pl_axpy(z->cs, x->g, PL_F32, tmp, PL_F32, x->s, 1.0f));
done:
  pl_free_async(z->dev, tmp, z->cs);
  pl_free_async(z->dev, x->gfull, z->cs);
  x->gfull = NULL;
  return st;
}

/* fp32_master's reduction: into its own f32 output, the unsharded gradient
 * freed, then copied or added into the shard (host_state: the host shard,
 * an accumulation summed on the device). */
static pl_status reduce_master(pl_zero3 *z, unit *x, bool accumulate,
                               pl_status st) {
  pl_dev *dev = z->dev;
  pl_stream *cs = z->cs;
  float *out = NULL, *sum = NULL;
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, x->s * 4, "zero3_grads", cs,
                        (void **)&out);
  PL_TRY_GOTO(st, done, reduce_into(z, x, out, st));
  pl_free_async(dev, x->gfull, cs);
  x->gfull = NULL;
  if (!z->o.host_state) {
    PL_TRY_GOTO(st, done,
                accumulate ? pl_axpy(cs, x->g, PL_F32, out, PL_F32, x->s, 1.0f)
                           : pl_memcpy_async(cs, x->g, out, x->s * 4));
  } else if (!accumulate) {
    PL_TRY_GOTO(st, done, pl_memcpy_async(cs, x->g, out, x->s * 4));
  } else { /* the host shard += the new one, summed on the device */
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE, x->s * 4, "zero3_grads",
                               cs, (void **)&sum));
    PL_TRY_GOTO(st, done, pl_memcpy_async(cs, sum, x->g, x->s * 4));
    PL_TRY_GOTO(st, done, pl_axpy(cs, sum, PL_F32, out, PL_F32, x->s, 1.0f));
    PL_TRY_GOTO(st, done, pl_memcpy_async(cs, x->g, sum, x->s * 4));
  }
done:
  /* the unsharded gradient goes whatever failed (above when it did not) */
  pl_free_async(dev, x->gfull, cs);
  x->gfull = NULL;
  pl_free_async(dev, sum, cs);
  pl_free_async(dev, out, cs);
  return st;
}

pl_status pl_zero3_grad_reduce(pl_zero3 *z, int u, pl_stream *s,
                               bool accumulate) {
  if (u < 0 || u >= z->n)
    return pl_set_error(PL_EINVAL, "zero3: unit %d of %d", u, z->n);
  unit *x = &z->u[u];
  if (!x->gfull)
    return PL_OK;
  span *sp = NULL;
  pl_status st = cs_after(z, s);
  if (st == PL_OK)
    st = span_begin(z, 1, &sp);
  PL_TRY(z->o.fp32_master ? reduce_master(z, x, accumulate, st)
                          : reduce_direct(z, x, accumulate, st));
  if (!sp)
    return PL_OK;
  st = pl_event_record(sp->b, z->cs);
  z->acc.reduces++;
  z->acc.reduce_bytes += (size_t)x->G * x->s * 4;
  return st;
}

pl_status pl_zero3_sync(pl_zero3 *z, pl_stream *s) {
  PL_TRY(pl_event_record(z->ev_done, z->cs));
  return pl_stream_wait(s, z->ev_done);
}

void pl_zero3_reset(pl_zero3 *z, pl_stream *s) {
  if (pl_zero3_sync(z, s) != PL_OK)
    pl_dev_sync(z->dev);
  for (int i = 0; i < z->n; i++) {
    unit *x = &z->u[i];
    pl_free_async(z->dev, x->full, s);
    pl_free_async(z->dev, x->gfull, s);
    x->full = NULL;
    x->gfull = NULL;
  }
  z->resident = 0;
  pl_dev_sync(z->dev);
}
