/* cpu_adamw.c — the classic offloaded step (cpu_adamw.h): the paper's
 * ZeRO-Offload-style baseline, built on the CPU backend's SIMD AdamW
 * (backend/cpu/adamw_simd.c), with its transfers overlapped with the update
 * as ZeRO-Offload does.
 *
 * One step, the rank's parameters cut into pieces of at most `bucket`
 * elements (each inside one tensor):
 *   d2h stream   every piece's gradient device -> pinned host, an event after
 *                each (issued first: it runs beside the norm)
 *   s            the clipping norm on the device from the device gradients
 *                (the fixed-order chunk partials, pl_adamw_sumsq_dev: the
 *                reference's bits), the partials copied back, one host wait
 *   host         per piece in order: wait for its gradient, the SIMD update
 *                writing its bf16 weights into the host buffer, then
 *   h2d stream   the piece's weights pinned host -> device
 *   s waits for the h2d stream (the last weights in flight).
 * The update never waits for more than one piece's gradient copy, and the
 * weights' copies run behind it: the step takes about the update's time
 * plus one piece's transfer each way.  The norm costs no pass over host
 * memory.  Both streams wait for s at the start (the gradients were made on
 * s, and the previous step's weight copies are ordered before this step's
 * gradient copies, so the host buffers are free when the update writes
 * them).  On the CPU backend every copy runs at issue: the same order,
 * serialized. */
#include "cpu_adamw.h"

#include <stdlib.h>
#include <string.h>

typedef struct piece {
  int param;
  size_t off, len; /* elements inside the tensor */
  size_t flat;     /* flat offset of its first element */
} piece;

struct pl_cpu_offload_adamw {
  pl_dev *dev;
  pl_adamw_hparams hp;
  pl_comm *comm;
  int nparams;
  pl_adamw_param *params;
  size_t *offset; /* flat offset of each tensor */
  size_t total;
  pl_dtype gdt;
  pl_simd_path path;
  int nthreads;
  float *p, *m, *v;    /* host, pinned, "optim"         */
  int own_state;
  void *hgrad;         /* host, pinned, "optim_offload" */
  pl_bf16 *hw;         /* host, pinned, "optim_offload" */
  double *dpart;       /* device, "optim_norm": the norm's chunk partials */
  double *hpart;       /* host, pinned, "optim_norm"                       */
  size_t npartials;
  size_t bucket;       /* elements per piece at most                       */
  piece *pieces;
  size_t npieces;
  pl_stream *d2h, *h2d;
  pl_event **ev_g;     /* per piece: its gradient is on the host           */
  pl_event *ev_start, *ev_up;
  int64_t t;
  float last_gscale;
  double last_update_ms;
};

static void free_pieces(pl_cpu_offload_adamw *o) {
  if (o->ev_g)
    for (size_t q = 0; q < o->npieces; q++) pl_event_destroy(o->ev_g[q]);
  free(o->ev_g);
  free(o->pieces);
  o->ev_g = NULL;
  o->pieces = NULL;
  o->npieces = 0;
}

/* Pieces of at most o->bucket elements, tensor by tensor, and their events. */
static pl_status build_pieces(pl_cpu_offload_adamw *o) {
  free_pieces(o);
  size_t n = 0;
  for (int i = 0; i < o->nparams; i++)
    n += (o->params[i].numel + o->bucket - 1) / o->bucket;
  o->pieces = calloc(n ? n : 1, sizeof *o->pieces);
  o->ev_g = calloc(n ? n : 1, sizeof *o->ev_g);
  if (!o->pieces || !o->ev_g)
    return pl_set_error(PL_ENOMEM, "cpu_offload_adamw: piece tables");
  for (int i = 0; i < o->nparams; i++)
    for (size_t off = 0; off < o->params[i].numel; off += o->bucket) {
      piece *P = &o->pieces[o->npieces];
      P->param = i;
      P->off = off;
      P->len = o->params[i].numel - off < o->bucket ? o->params[i].numel - off
                                                     : o->bucket;
      P->flat = o->offset[i] + off;
      PL_TRY(pl_event_create(o->dev, &o->ev_g[o->npieces]));
      o->npieces++;
    }
  return PL_OK;
}

void pl_cpu_offload_adamw_destroy(pl_cpu_offload_adamw *o) {
  if (!o) return;
  if (o->dev) pl_dev_sync(o->dev);
  free_pieces(o);
  if (o->own_state) {
    pl_free(o->dev, o->p);
    pl_free(o->dev, o->m);
    pl_free(o->dev, o->v);
  }
  pl_free(o->dev, o->hgrad);
  pl_free(o->dev, o->hw);
  pl_free(o->dev, o->dpart);
  pl_free(o->dev, o->hpart);
  pl_event_destroy(o->ev_start);
  pl_event_destroy(o->ev_up);
  if (o->d2h) pl_stream_destroy(o->d2h);
  if (o->h2d) pl_stream_destroy(o->h2d);
  free(o->params);
  free(o->offset);
  free(o);
}

pl_status pl_cpu_offload_adamw_create(pl_dev *dev, const pl_adamw_hparams *hp,
                                      int nparams,
                                      const pl_adamw_param *params,
                                      pl_dtype gdt, pl_simd_path path,
                                      int nthreads, pl_comm *comm,
                                      const pl_adamw_state *state,
                                      pl_cpu_offload_adamw **out) {
  *out = NULL;
  PL_TRY(pl_adamw_hparams_check(hp));
  if (nparams < 1 || !params)
    return pl_set_error(PL_EINVAL, "cpu_offload_adamw: nparams=%d: must be "
                        ">= 1", nparams);
  PL_TRY(pl_adamw_gdt_check(gdt, "cpu_offload_adamw"));
  pl_simd_path rp;
  PL_TRY(pl_simd_path_resolve(path, &rp));
  pl_cpu_offload_adamw *o = calloc(1, sizeof *o);
  if (!o) return pl_set_error(PL_ENOMEM, "cpu_offload_adamw: host struct");
  o->dev = dev;
  o->hp = *hp;
  o->comm = comm;
  o->nparams = nparams;
  o->gdt = gdt;
  o->path = rp;
  o->nthreads = nthreads;
  o->bucket = PL_CPU_OFFLOAD_BUCKET;
  o->params = malloc(sizeof(pl_adamw_param) * (size_t)nparams);
  o->offset = malloc(sizeof(size_t) * (size_t)nparams);
  pl_status st = PL_OK;
  if (!o->params || !o->offset) {
    st = pl_set_error(PL_ENOMEM, "cpu_offload_adamw: host tables");
    goto fail;
  }
  for (int i = 0; i < nparams; i++) {
    o->params[i] = params[i];
    o->offset[i] = o->total;
    o->total += params[i].numel;
    o->npartials += pl_adamw_norm_nchunks(params[i].numel);
  }
  size_t n = o->total, gsz = pl_dtype_size(gdt);
  if (state) {
    if (state->numel != n || !state->p || !state->m || !state->v) {
      st = pl_set_error(PL_EINVAL, "cpu_offload_adamw: borrowed state of "
                        "%zu params: must hold all %zu", state->numel, n);
      goto fail;
    }
    o->p = state->p;
    o->m = state->m;
    o->v = state->v;
  } else {
    o->own_state = 1;
    if ((st = pl_alloc(dev, PL_ARENA_HOST, n * 4, "optim", (void **)&o->p)) ||
        (st = pl_alloc(dev, PL_ARENA_HOST, n * 4, "optim", (void **)&o->m)) ||
        (st = pl_alloc(dev, PL_ARENA_HOST, n * 4, "optim", (void **)&o->v)))
      goto fail;
  }
  size_t np = o->npartials ? o->npartials : 1;
  if ((st = pl_alloc(dev, PL_ARENA_HOST, n * gsz, "optim_offload",
                     &o->hgrad)) ||
      (st = pl_alloc(dev, PL_ARENA_HOST, n * 2, "optim_offload",
                     (void **)&o->hw)) ||
      (st = pl_alloc(dev, PL_ARENA_DEVICE, np * 8, "optim_norm",
                     (void **)&o->dpart)) ||
      (st = pl_alloc(dev, PL_ARENA_HOST, np * 8, "optim_norm",
                     (void **)&o->hpart)) ||
      (st = pl_stream_create(dev, &o->d2h)) ||
      (st = pl_stream_create(dev, &o->h2d)) ||
      (st = pl_event_create(dev, &o->ev_start)) ||
      (st = pl_event_create(dev, &o->ev_up)) || (st = build_pieces(o)))
    goto fail;
  /* device allocations are ordered on the default stream */
  if ((st = pl_stream_sync(pl_dev_stream(dev)))) goto fail;
  *out = o;
  return PL_OK;
fail:
  pl_cpu_offload_adamw_destroy(o);
  return st;
}

pl_status pl_cpu_offload_adamw_set_bucket(pl_cpu_offload_adamw *o,
                                          size_t bucket) {
  if (bucket < 1)
    return pl_set_error(PL_EINVAL, "cpu_offload_adamw: bucket=%zu: must be "
                        ">= 1", bucket);
  PL_TRY(pl_dev_sync(o->dev));
  o->bucket = bucket;
  return build_pieces(o);
}

size_t pl_cpu_offload_adamw_npieces(const pl_cpu_offload_adamw *o) {
  return o->npieces;
}

pl_adamw_state pl_cpu_offload_adamw_state(pl_cpu_offload_adamw *o) {
  pl_adamw_state s = {.p = o->p, .m = o->m, .v = o->v, .numel = o->total};
  return s;
}

pl_status pl_cpu_offload_adamw_step(pl_cpu_offload_adamw *o, pl_stream *s) {
  const size_t gsz = pl_dtype_size(o->gdt);
  PL_TRY(pl_event_record(o->ev_start, s));
  PL_TRY(pl_stream_wait(o->d2h, o->ev_start));
  PL_TRY(pl_stream_wait(o->h2d, o->ev_start));
  /* 1. every piece's gradient device -> host, an event after each */
  for (size_t q = 0; q < o->npieces; q++) {
    const piece *P = &o->pieces[q];
    PL_TRY(pl_memcpy_async(o->d2h, (char *)o->hgrad + P->flat * gsz,
                           (const char *)o->params[P->param].grad +
                               P->off * gsz,
                           P->len * gsz));
    PL_TRY(pl_event_record(o->ev_g[q], o->d2h));
  }
  /* 2. clipping norm on the device, in the fixed order, before any update */
  float gscale = 1.0f;
  if (o->hp.max_grad_norm > 0) {
    size_t c = 0;
    for (int i = 0; i < o->nparams; i++) {
      PL_TRY(pl_adamw_sumsq_dev(s, o->params[i].grad, o->gdt,
                                o->params[i].numel, o->dpart + c));
      c += pl_adamw_norm_nchunks(o->params[i].numel);
    }
    if (c) PL_TRY(pl_memcpy_async(s, o->hpart, o->dpart, c * 8));
    PL_TRY(pl_stream_sync(s));
    double ss = pl_adamw_sum_partials(o->hpart, c);
    PL_TRY(pl_adamw_global_sumsq(o->comm, ss, &ss));
    gscale = pl_adamw_clip_scale(&o->hp, ss);
  }
  /* 3. piece by piece: wait for its gradient, SIMD update, weights up */
  o->t++;
  pl_adamw_scalars k = pl_adamw_scalars_make(&o->hp, o->t, gscale);
  uint64_t t0 = pl_now_ns();
  for (size_t q = 0; q < o->npieces; q++) {
    const piece *P = &o->pieces[q];
    PL_TRY(pl_event_sync(o->ev_g[q]));
    PL_TRY(pl__cpu_adamw_simd(o->path, o->nthreads, o->p + P->flat,
                              o->m + P->flat, o->v + P->flat,
                              (const char *)o->hgrad + P->flat * gsz, o->gdt,
                              o->hw + P->flat, P->len, &k));
    PL_TRY(pl_memcpy_async(o->h2d, o->params[P->param].weight + P->off,
                           o->hw + P->flat, P->len * 2));
  }
  o->last_update_ms = (double)(pl_now_ns() - t0) * 1e-6;
  o->last_gscale = gscale;
  /* 4. the last weights in flight: s orders itself after them */
  PL_TRY(pl_event_record(o->ev_up, o->h2d));
  return pl_stream_wait(s, o->ev_up);
}

void pl_cpu_offload_adamw_last(const pl_cpu_offload_adamw *o, float *gscale,
                               double *update_ms) {
  if (gscale) *gscale = o->last_gscale;
  if (update_ms) *update_ms = o->last_update_ms;
}
