/* dry_backend.c — the dry device: a backend that tracks and does nothing
 * else, so that one real step on it measures what the step allocates.
 *
 * Why: the planner's memory answer is a peak of the tracked allocator
 * (core/mem.c).  Built on a dry device, the composed step issues the very
 * allocations it issues on a GPU — the same sizes, tags and order — while
 * nothing is computed, so a step of a configuration far larger than this
 * machine runs in the time its host-side bookkeeping takes.
 *
 * What it does: raw allocations of both arenas (device, pinned host) are
 * addresses handed out from one reserved, never-mapped range per device
 * (mmap PROT_NONE), distinct while live, so a stray dereference faults at
 * once instead of reading or corrupting anything.  Streams, events, syncs,
 * the shared kernels and device-to-device copies do nothing.  A copy into
 * memory the device did not hand out (a malloc'd host buffer the step reads
 * back) writes zeros there, so a read-back is defined: zero counts, a loss
 * and a gradient norm of 0.  The operators' own kernels are skipped by the
 * test pl__on_dry (core/internal.h) in front of their CPU twins; host code
 * that reads a tracked buffer on the host (the host optimizer, the
 * checkpoint's host side) tests pl__dev_dry first.
 *
 * What it does not do: compute any value.  The one read-back that decides
 * allocation sizes, the router's top-k expert ids, comes from the route hook
 * of dry.h.  Allocation decisions follow the backend the device plays, its
 * flavour (dry.h): the CPU backend's by default; under cuda, the code that
 * allocates only on a GPU (a scratch, a workspace) tests pl__allocs_as_cuda
 * and makes those allocations too, sized as planned for a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "backend/dry/dry.h"

/* Address space reserved per device.  Allocations take consecutive
 * addresses (rounded to ALIGN) and wrap to the start when the range is
 * spent; 1 TiB of addresses outlasts any step this engine takes. */
#define RANGE ((size_t)1 << 40)
#define ALIGN ((size_t)256)

typedef struct dry_state {
  char *base; /* PROT_NONE, never mapped readable */
  size_t next;
  pl_dry_route_fn routes;
  void *routes_ctx;
  size_t total_bytes; /* what info reports: the played GPU's memory */
} dry_state;

static pl_status dry_init(pl_dev *dev, int ordinal) {
  dry_state *d = calloc(1, sizeof *d);
  if (!d)
    return pl_set_error(PL_ENOMEM, "dry device: host");
  void *p = mmap(NULL, RANGE, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    free(d);
    return pl_set_error(PL_ENOMEM,
                        "dry device: reserving %zu bytes of address space "
                        "failed",
                        RANGE);
  }
  d->base = p;
  dev->impl = d;
  return PL_OK;
}

static void dry_fini(pl_dev *dev) {
  dry_state *d = dev->impl;
  if (!d)
    return;
  munmap(d->base, RANGE);
  free(d);
  dev->impl = NULL;
}

static pl_status dry_info(const pl_dev *dev, pl_dev_info *out) {
  const dry_state *d = dev->impl;
  snprintf(out->name, sizeof out->name, "dry (tracking only, as %s)",
           pl_backend_name(dev->flavour));
  out->total_bytes = d->total_bytes;
  out->sm_count = 0;
  snprintf(out->driver, sizeof out->driver, "-");
  snprintf(out->runtime, sizeof out->runtime, "-");
  snprintf(out->blas, sizeof out->blas, "-");
  return PL_OK;
}

static pl_status dry_ok_dev(pl_dev *dev) {
  return PL_OK;
}

static pl_status dry_raw_alloc(pl_dev *dev, pl_arena a, size_t bytes,
                               pl_stream *s, void **out) {
  dry_state *d = dev->impl;
  const size_t r = (bytes + ALIGN - 1) & ~(ALIGN - 1);
  if (r > RANGE)
    return pl_set_error(
        PL_ENOMEM, "dry device: %zu bytes exceed its address range", bytes);
  if (d->next + r > RANGE)
    d->next = 0;
  *out = d->base + d->next;
  d->next += r;
  return PL_OK;
}

static void dry_raw_free(pl_dev *dev, pl_arena a, void *p, pl_stream *s) {}

static pl_status dry_stream_create(pl_dev *dev, pl_stream *s) {
  s->native = NULL;
  return PL_OK;
}
static void dry_stream_destroy(pl_stream *s) {}
static pl_status dry_ok_stream(pl_stream *s) {
  return PL_OK;
}
static pl_status dry_event_create(pl_dev *dev, pl_event *e) {
  return PL_OK;
}
static void dry_event_destroy(pl_event *e) {}
static pl_status dry_event_record(pl_event *e, pl_stream *s) {
  e->stamp_ns = 0;
  return PL_OK;
}
static pl_status dry_stream_wait(pl_stream *s, pl_event *e) {
  return PL_OK;
}
static pl_status dry_event_sync(pl_event *e) {
  return PL_OK;
}
static int dry_event_done(pl_event *e) {
  return 1;
}
static pl_status dry_event_elapsed_ms(pl_event *a, pl_event *b, float *ms) {
  *ms = 0;
  return PL_OK;
}

static pl_status dry_rng_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                              uint64_t seed, uint64_t offset, pl_dist dist,
                              float a, float b) {
  return PL_OK;
}
static pl_status dry_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                          double value) {
  return PL_OK;
}
static pl_status dry_convert(pl_stream *s, void *dst, pl_dtype dst_dt,
                             const void *src, pl_dtype src_dt, size_t n) {
  return PL_OK;
}
static pl_status dry_scale(pl_stream *s, void *x, pl_dtype dt, size_t n,
                           float alpha) {
  return PL_OK;
}
static pl_status dry_axpy(pl_stream *s, void *y, pl_dtype y_dt, const void *x,
                          pl_dtype x_dt, size_t n, float alpha) {
  return PL_OK;
}
static pl_status dry_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,
                          int64_t k, float alpha, const void *A, int64_t lda,
                          int64_t sa, const void *B, int64_t ldb, int64_t sb,
                          float beta, void *C, int64_t ldc, int64_t sc,
                          int64_t batch, pl_dtype ab_dt, pl_dtype c_dt) {
  return PL_OK;
}

bool pl_dry_owns(const pl_dev *dev, const void *p) {
  if (!dev || dev->backend != PL_BACKEND_DRY || !dev->impl)
    return false;
  const dry_state *d = dev->impl;
  const char *c = p;
  return c >= d->base && c < d->base + RANGE;
}

/* A copy moves nothing, except that real host memory it lands in (a
 * read-back) reads as zeros afterwards. */
static pl_status dry_memcpy(pl_stream *s, void *dst, const void *src,
                            size_t bytes) {
  if (!pl_dry_owns(s->dev, dst))
    memset(dst, 0, bytes);
  return PL_OK;
}
static pl_status dry_memcpy_peer(pl_stream *s, void *dst, const pl_dev *dd,
                                 const void *src, const pl_dev *sd,
                                 size_t bytes) {
  if (!pl_dry_owns(dd, dst))
    memset(dst, 0, bytes);
  return PL_OK;
}

pl_status pl_dry_set_routes(pl_dev *dev, pl_dry_route_fn fn, void *ctx) {
  if (!dev || dev->backend != PL_BACKEND_DRY)
    return pl_set_error(PL_EINVAL, "pl_dry_set_routes: not a dry device");
  dry_state *d = dev->impl;
  d->routes = fn;
  d->routes_ctx = ctx;
  return PL_OK;
}

pl_status pl_dry_set_flavour(pl_dev *dev, pl_backend be, size_t total_bytes) {
  if (!dev || dev->backend != PL_BACKEND_DRY)
    return pl_set_error(PL_EINVAL, "pl_dry_set_flavour: not a dry device");
  if (be != PL_BACKEND_CPU && be != PL_BACKEND_CUDA)
    return pl_set_error(PL_EINVAL,
                        "pl_dry_set_flavour: a dry device plays cpu or cuda");
  dry_state *d = dev->impl;
  dev->flavour = be;
  d->total_bytes = total_bytes;
  return PL_OK;
}

pl_status pl_dry_routes(pl_dev *dev, int64_t N, int k, int E, int32_t *idx) {
  if (!dev || dev->backend != PL_BACKEND_DRY)
    return pl_set_error(PL_EINVAL, "pl_dry_routes: not a dry device");
  dry_state *d = dev->impl;
  if (!d->routes)
    return pl_set_error(PL_EINVAL,
                        "dry device: the step needs the router's routes and "
                        "no route source was set (pl_dry_set_routes)");
  return d->routes(d->routes_ctx, N, k, E, idx);
}

const pl__backend_ops pl__dry_backend_ops = {
    .init = dry_init,
    .fini = dry_fini,
    .info = dry_info,
    .sync = dry_ok_dev,
    .raw_alloc = dry_raw_alloc,
    .raw_free = dry_raw_free,
    .pool_high = NULL,
    .pool_reset = NULL,
    .stream_create = dry_stream_create,
    .stream_destroy = dry_stream_destroy,
    .stream_sync = dry_ok_stream,
    .event_create = dry_event_create,
    .event_destroy = dry_event_destroy,
    .event_record = dry_event_record,
    .stream_wait = dry_stream_wait,
    .event_sync = dry_event_sync,
    .event_done = dry_event_done,
    .event_elapsed_ms = dry_event_elapsed_ms,
    .rng_fill = dry_rng_fill,
    .fill = dry_fill,
    .convert = dry_convert,
    .scale = dry_scale,
    .axpy = dry_axpy,
    .gemm_strided_batched = dry_gemm,
    .memcpy_async = dry_memcpy,
    .memcpy_peer_async = dry_memcpy_peer,
};
