/* cpu_adamw.c — the classic offloaded step (cpu_adamw.h): the paper's
 * ZeRO-Offload-style baseline, built on the CPU backend's SIMD AdamW
 * (backend/cpu/adamw_simd.c), with its transfers overlapped with the update
 * as ZeRO-Offload does.
 *
 * One step, the rank's parameters cut into pieces of at most `bucket`
 * elements (each inside one tensor):
 *   d2h stream   every piece's gradient device -> pinned host, an event after
 *                each (issued first: it runs beside the norm); with a ring
 *                of S slots only the first S, and piece q+S's as soon as the
 *                update of piece q has read slot q mod S
 *   s            the clipping norm on the device from the device gradients
 *                (the fixed-order chunk partials, pl_adamw_sumsq_dev: the
 *                reference's bits), the partials copied back, one host wait
 *   host         per piece in order: wait for its gradient (and, with a ring,
 *                for the weights' copy that last read its slot), the SIMD
 *                update writing its bf16 weights into the host buffer, then
 *   h2d stream   the piece's weights pinned host -> device
 *   s waits for the h2d stream (the last weights in flight).
 * Staging (cpu_adamw.h): full host copies, or a ring of slots; a ring small
 * enough to stay in cache has its weights written with ordinary stores
 * (PL_SIMD_W_CACHED), so the copy reads them there.
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
  float *p, *m, *v; /* host, pinned, "optim"         */
  int own_state;
  void *hgrad;   /* host, pinned, "optim_offload" */
  pl_bf16 *hw;   /* host, pinned, "optim_offload" */
  double *dpart; /* device, "optim_norm": the norm's chunk partials */
  double *hpart; /* host, pinned, "optim_norm"                       */
  size_t npartials;
  size_t bucket; /* elements per piece at most                       */
  int slots;     /* ring slots; 0: full staging                      */
  int cached;    /* the ring fits PL_CPU_OFFLOAD_CACHED_BYTES        */
  size_t slot;   /* ring: elements a slot (the longest piece, whole
                    64-element blocks)                               */
  piece *pieces;
  size_t npieces;
  pl_stream *d2h, *h2d;
  size_t nev;      /* events: per piece (full) or per slot (ring)      */
  pl_event **ev_g; /* its gradient is on the host                      */
  pl_event **ev_w; /* ring: the weights' copy out of the slot is done  */
  pl_event *ev_start, *ev_up;
  int64_t t;
  float last_gscale;
  double last_update_ms;
};

static void free_events(pl_event **ev, size_t n) {
  if (ev)
    for (size_t q = 0; q < n; q++)
      pl_event_destroy(ev[q]);
  free(ev);
}

static void free_pieces(pl_cpu_offload_adamw *o) {
  free_events(o->ev_g, o->nev);
  free_events(o->ev_w, o->nev);
  free(o->pieces);
  o->ev_g = o->ev_w = NULL;
  o->pieces = NULL;
  o->npieces = o->nev = 0;
}

/* Pieces of at most o->bucket elements, tensor by tensor, and their events
 * (a ring: two per slot). */
static pl_status build_pieces(pl_cpu_offload_adamw *o) {
  free_pieces(o);
  size_t n = 0;
  for (int i = 0; i < o->nparams; i++)
    n += (o->params[i].numel + o->bucket - 1) / o->bucket;
  size_t nev = o->slots ? (size_t)o->slots : n;
  o->pieces = calloc(n ? n : 1, sizeof *o->pieces);
  o->ev_g = calloc(nev ? nev : 1, sizeof *o->ev_g);
  o->ev_w = o->slots ? calloc(nev, sizeof *o->ev_w) : NULL;
  if (!o->pieces || !o->ev_g || (o->slots && !o->ev_w))
    return pl_set_error(PL_ENOMEM, "cpu_offload_adamw: piece tables");
  for (int i = 0; i < o->nparams; i++)
    for (size_t off = 0; off < o->params[i].numel; off += o->bucket) {
      piece *P = &o->pieces[o->npieces++];
      P->param = i;
      P->off = off;
      P->len = o->params[i].numel - off < o->bucket ? o->params[i].numel - off
                                                    : o->bucket;
      P->flat = o->offset[i] + off;
    }
  /* counted before they exist: free_pieces destroys what was made */
  for (o->nev = nev; nev-- > 0;) {
    PL_TRY(pl_event_create(o->dev, &o->ev_g[nev]));
    if (o->ev_w)
      PL_TRY(pl_event_create(o->dev, &o->ev_w[nev]));
  }
  return PL_OK;
}

/* The pieces and the host staging of the gradients and weights for
 * o->slots and o->bucket: every element (full) or min(slots, pieces) slots
 * of the longest piece (ring). */
static pl_status build_staging(pl_cpu_offload_adamw *o) {
  pl_free(o->dev, o->hgrad);
  pl_free(o->dev, o->hw);
  o->hgrad = NULL;
  o->hw = NULL;
  PL_TRY(build_pieces(o));
  /* a slot: the longest piece, in whole 64-element blocks so every slot
   * starts as aligned as the buffer (the weights' vector stores) */
  o->slot = 0;
  for (size_t q = 0; q < o->npieces; q++)
    if (o->pieces[q].len > o->slot)
      o->slot = o->pieces[q].len;
  o->slot = (o->slot + 63) / 64 * 64;
  size_t n = o->total;
  if (o->slots)
    n = ((size_t)o->slots < o->npieces ? (size_t)o->slots : o->npieces) *
        o->slot;
  o->cached = o->slots &&
              n * (pl_dtype_size(o->gdt) + 2) <= PL_CPU_OFFLOAD_CACHED_BYTES;
  PL_TRY(pl_alloc(o->dev, PL_ARENA_HOST, n * pl_dtype_size(o->gdt),
                  "optim_offload", &o->hgrad));
  return pl_alloc(o->dev, PL_ARENA_HOST, n * 2, "optim_offload",
                  (void **)&o->hw);
}

void pl_cpu_offload_adamw_destroy(pl_cpu_offload_adamw *o) {
  if (!o)
    return;
  if (o->dev)
    pl_dev_sync(o->dev);
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
  if (o->d2h)
    pl_stream_destroy(o->d2h);
  if (o->h2d)
    pl_stream_destroy(o->h2d);
  free(o->params);
  free(o->offset);
  free(o);
}

pl_status pl_cpu_offload_adamw_create(pl_dev *dev, const pl_adamw_hparams *hp,
                                      int nparams, const pl_adamw_param *params,
                                      pl_dtype gdt, pl_simd_path path,
                                      int nthreads, pl_comm *comm,
                                      const pl_adamw_state *state,
                                      pl_cpu_offload_adamw **out) {
  *out = NULL;
  PL_TRY(pl_adamw_hparams_check(hp));
  if (nparams < 1 || !params)
    return pl_set_error(PL_EINVAL,
                        "cpu_offload_adamw: nparams=%d: must be "
                        ">= 1",
                        nparams);
  PL_TRY(pl_adamw_gdt_check(gdt, "cpu_offload_adamw"));
  pl_simd_path rp;
  PL_TRY(pl_simd_path_resolve(path, &rp));
  pl_cpu_offload_adamw *o = calloc(1, sizeof *o);
  if (!o)
    return pl_set_error(PL_ENOMEM, "cpu_offload_adamw: host struct");
  o->dev = dev;
  o->hp = *hp;
  o->comm = comm;
  o->nparams = nparams;
  o->gdt = gdt;
  o->path = rp;
  o->nthreads = nthreads;
  o->bucket = PL_CPU_OFFLOAD_BUCKET;
  o->slots = PL_CPU_OFFLOAD_RING_SLOTS;
  o->params = malloc(sizeof(pl_adamw_param) * (size_t)nparams);
  o->offset = malloc(sizeof(size_t) * (size_t)nparams);
  pl_status st = PL_OK;
  if (!o->params || !o->offset)
    PL_TRY_GOTO(st, fail,
                pl_set_error(PL_ENOMEM, "cpu_offload_adamw: host tables"));
  for (int i = 0; i < nparams; i++) {
    o->params[i] = params[i];
    o->offset[i] = o->total;
    o->total += params[i].numel;
    o->npartials += pl_adamw_norm_nchunks(params[i].numel);
  }
  size_t n = o->total;
  if (state) {
    if (state->numel != n || !state->p || !state->m || !state->v)
      PL_TRY_GOTO(st, fail,
                  pl_set_error(PL_EINVAL,
                               "cpu_offload_adamw: borrowed state of %zu "
                               "params: must hold all %zu",
                               state->numel, n));
    o->p = state->p;
    o->m = state->m;
    o->v = state->v;
  } else {
    o->own_state = 1;
    PL_TRY_GOTO(st, fail,
                pl_alloc(dev, PL_ARENA_HOST, n * 4, "optim", (void **)&o->p));
    PL_TRY_GOTO(st, fail,
                pl_alloc(dev, PL_ARENA_HOST, n * 4, "optim", (void **)&o->m));
    PL_TRY_GOTO(st, fail,
                pl_alloc(dev, PL_ARENA_HOST, n * 4, "optim", (void **)&o->v));
  }
  size_t np = o->npartials ? o->npartials : 1;
  PL_TRY_GOTO(
      st, fail,
      pl_alloc(dev, PL_ARENA_DEVICE, np * 8, "optim_norm", (void **)&o->dpart));
  PL_TRY_GOTO(
      st, fail,
      pl_alloc(dev, PL_ARENA_HOST, np * 8, "optim_norm", (void **)&o->hpart));
  PL_TRY_GOTO(st, fail, pl_stream_create(dev, &o->d2h));
  PL_TRY_GOTO(st, fail, pl_stream_create(dev, &o->h2d));
  PL_TRY_GOTO(st, fail, pl_event_create(dev, &o->ev_start));
  PL_TRY_GOTO(st, fail, pl_event_create(dev, &o->ev_up));
  PL_TRY_GOTO(st, fail, build_staging(o));
  /* device allocations are ordered on the default stream */
  PL_TRY_GOTO(st, fail, pl_stream_sync(pl_dev_stream(dev)));
  *out = o;
  return PL_OK;
fail:
  pl_cpu_offload_adamw_destroy(o);
  return st;
}

pl_status pl_cpu_offload_adamw_set_bucket(pl_cpu_offload_adamw *o,
                                          size_t bucket) {
  if (bucket < 1)
    return pl_set_error(PL_EINVAL,
                        "cpu_offload_adamw: bucket=%zu: must be "
                        ">= 1",
                        bucket);
  return pl_cpu_offload_adamw_set_staging(o, o->slots, bucket);
}

pl_status pl_cpu_offload_adamw_set_staging(pl_cpu_offload_adamw *o, int slots,
                                           size_t bucket) {
  if (slots < 0 || slots > 64)
    return pl_set_error(PL_EINVAL,
                        "cpu_offload_adamw: slots=%d: must be 0 "
                        "(full staging) or a ring of 1 to 64",
                        slots);
  PL_TRY(pl_dev_sync(o->dev));
  o->slots = slots;
  o->bucket = bucket ? bucket : PL_CPU_OFFLOAD_BUCKET;
  return build_staging(o);
}

size_t pl_cpu_offload_adamw_npieces(const pl_cpu_offload_adamw *o) {
  return o->npieces;
}

int pl_cpu_offload_adamw_slots(const pl_cpu_offload_adamw *o) {
  return o->slots;
}

size_t pl_cpu_offload_adamw_bucket(const pl_cpu_offload_adamw *o) {
  return o->bucket;
}

int pl_cpu_offload_adamw_cached(const pl_cpu_offload_adamw *o) {
  return o->cached;
}

pl_adamw_state pl_cpu_offload_adamw_state(pl_cpu_offload_adamw *o) {
  pl_adamw_state s = {.p = o->p, .m = o->m, .v = o->v, .numel = o->total};
  return s;
}

/* Piece q's gradient device -> its host staging (a ring: slot q mod S),
 * and its event. */
static pl_status fetch_grad(pl_cpu_offload_adamw *o, size_t q) {
  const size_t gsz = pl_dtype_size(o->gdt);
  const piece *P = &o->pieces[q];
  size_t at = o->slots ? (q % (size_t)o->slots) * o->slot : P->flat;
  PL_TRY(pl_memcpy_async(o->d2h, (char *)o->hgrad + at * gsz,
                         (const char *)o->params[P->param].grad + P->off * gsz,
                         P->len * gsz));
  return pl_event_record(o->ev_g[o->slots ? q % (size_t)o->slots : q], o->d2h);
}

/* The clipping factor from the device gradients, in the fixed order. */
static pl_status clip_scale(pl_cpu_offload_adamw *o, pl_stream *s,
                            float *gscale) {
  *gscale = 1.0f;
  if (o->hp.max_grad_norm <= 0)
    return PL_OK;
  size_t c = 0;
  for (int i = 0; i < o->nparams; i++) {
    PL_TRY(pl_adamw_sumsq_dev(s, o->params[i].grad, o->gdt, o->params[i].numel,
                              o->dpart + c));
    c += pl_adamw_norm_nchunks(o->params[i].numel);
  }
  if (c)
    PL_TRY(pl_memcpy_async(s, o->hpart, o->dpart, c * 8));
  PL_TRY(pl_stream_sync(s));
  double ss = pl_adamw_sum_partials(o->hpart, c);
  PL_TRY(pl_adamw_global_sumsq(o->comm, ss, &ss));
  *gscale = pl_adamw_clip_scale(&o->hp, ss);
  return PL_OK;
}

/* Piece q: its gradient (and its slot's last weights copy) waited for, the
 * SIMD update, its weights up; with a ring, piece q+S's gradient into the
 * slot just read. */
static pl_status update_piece(pl_cpu_offload_adamw *o, size_t q,
                              const pl_adamw_scalars *k) {
  const size_t gsz = pl_dtype_size(o->gdt), S = (size_t)o->slots;
  const piece *P = &o->pieces[q];
  const size_t at = S ? (q % S) * o->slot : P->flat;
  PL_TRY(pl_event_sync(o->ev_g[S ? q % S : q]));
  if (S && q >= S)
    PL_TRY(pl_event_sync(o->ev_w[q % S]));
  PL_TRY(pl__cpu_adamw_simd_ex(
      o->path, o->nthreads, o->p + P->flat, o->m + P->flat, o->v + P->flat,
      (const char *)o->hgrad + at * gsz, o->gdt, o->hw + at, P->len, k,
      o->cached ? PL_SIMD_W_CACHED : 0));
  PL_TRY(pl_memcpy_async(o->h2d, o->params[P->param].weight + P->off,
                         o->hw + at, P->len * 2));
  if (!S)
    return PL_OK;
  PL_TRY(pl_event_record(o->ev_w[q % S], o->h2d));
  return q + S < o->npieces ? fetch_grad(o, q + S) : PL_OK;
}

pl_status pl_cpu_offload_adamw_step(pl_cpu_offload_adamw *o, pl_stream *s) {
  PL_TRY(pl_event_record(o->ev_start, s));
  PL_TRY(pl_stream_wait(o->d2h, o->ev_start));
  PL_TRY(pl_stream_wait(o->h2d, o->ev_start));
  /* 1. the gradients device -> host (a ring: as many pieces as slots), an
   * event after each; the previous step's weight copies are done before
   * these start (s waited for them), so every slot is free */
  size_t first =
      o->slots && (size_t)o->slots < o->npieces ? (size_t)o->slots : o->npieces;
  for (size_t q = 0; q < first; q++)
    PL_TRY(fetch_grad(o, q));
  /* 2. clipping norm on the device, in the fixed order, before any update */
  float gscale;
  PL_TRY(clip_scale(o, s, &gscale));
  /* 3. piece by piece: wait for its gradient, SIMD update, weights up */
  o->t++;
  pl_adamw_scalars k = pl_adamw_scalars_make(&o->hp, o->t, gscale);
  uint64_t t0 = pl_now_ns();
  for (size_t q = 0; q < o->npieces; q++)
    PL_TRY(update_piece(o, q, &k));
  o->last_update_ms = (double)(pl_now_ns() - t0) * 1e-6;
  o->last_gscale = gscale;
  /* 4. the last weights in flight: s orders itself after them */
  PL_TRY(pl_event_record(o->ev_up, o->h2d));
  return pl_stream_wait(s, o->ev_up);
}

void pl_cpu_offload_adamw_last(const pl_cpu_offload_adamw *o, float *gscale,
                               double *update_ms) {
  if (gscale)
    *gscale = o->last_gscale;
  if (update_ms)
    *update_ms = o->last_update_ms;
}
