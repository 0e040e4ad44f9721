/* dev.c — devices, streams and events, and the dispatch of the shared kernels
 * (kernels.h) through the device's backend table.  Argument checks live here,
 * once, so a backend implements only the arithmetic.  Which table a device
 * gets is decided where it is created, in the backend layer (backend.c). */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

const char *pl_backend_name(pl_backend be) {
  return be == PL_BACKEND_CUDA  ? "cuda"
         : be == PL_BACKEND_CPU ? "cpu"
         : be == PL_BACKEND_DRY ? "dry"
                                : "?";
}

pl_status pl_backend_parse(const char *s, pl_backend *out) {
  if (s && !strcmp(s, "cpu"))
    *out = PL_BACKEND_CPU;
  else if (s && !strcmp(s, "cuda"))
    *out = PL_BACKEND_CUDA;
  else if (s && !strcmp(s, "dry"))
    *out = PL_BACKEND_DRY;
  else
    return pl_set_error(PL_EINVAL,
                        "backend '%s': not allowed (allowed: cpu | cuda | dry)",
                        s ? s : "");
  return PL_OK;
}

int pl_local_rank(void) {
  static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                               "MPI_LOCALRANKID", "LOCAL_RANK", NULL};
  for (int i = 0; vars[i]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v)
      return atoi(v);
  }
  return 0;
}

int pl_local_size(void) {
  static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                               "LOCAL_WORLD_SIZE", NULL};
  for (int i = 0; vars[i]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v && atoi(v) > 0)
      return atoi(v);
  }
  /* Slurm: SLURM_TASKS_PER_NODE is "2" or "2(x3)" (the same on every node) */
  const char *t = getenv("SLURM_TASKS_PER_NODE");
  if (t && *t && atoi(t) > 0 && getenv("SLURM_LOCALID"))
    return atoi(t);
  return 1;
}

pl_status pl__dev_open(pl_backend be, int ordinal, const pl__backend_ops *ops,
                       pl_dev **out) {
  *out = NULL;
  pl_dev *dev = calloc(1, sizeof *dev);
  if (!dev)
    return pl_set_error(PL_ENOMEM, "out of host memory creating a device");
  dev->backend = be;
  dev->flavour = be;
  dev->ordinal = ordinal;
  dev->ops = ops;
  pthread_mutex_init(&dev->mem_lock, NULL);
  pl_status st = ops->init(dev, ordinal);
  if (st != PL_OK) {
    pthread_mutex_destroy(&dev->mem_lock);
    free(dev);
    return st;
  }
  dev->default_stream = calloc(1, sizeof *dev->default_stream);
  if (!dev->default_stream) {
    ops->fini(dev);
    free(dev);
    return pl_set_error(PL_ENOMEM, "out of host memory creating a stream");
  }
  dev->default_stream->dev = dev;
  st = ops->stream_create(dev, dev->default_stream);
  if (st != PL_OK) {
    free(dev->default_stream);
    ops->fini(dev);
    free(dev);
    return st;
  }
  *out = dev;
  return PL_OK;
}

void pl_dev_destroy(pl_dev *dev) {
  if (!dev)
    return;
  dev->ops->sync(dev);
  if (dev->n_streams || dev->n_events)
    PL_WARN("device destroyed with %d streams and %d events not destroyed",
            dev->n_streams, dev->n_events);
  pl__mem_fini(dev);
  dev->ops->stream_destroy(dev->default_stream);
  free(dev->default_stream);
  dev->ops->fini(dev);
  pthread_mutex_destroy(&dev->mem_lock);
  free(dev);
}

pl_backend pl_dev_backend(const pl_dev *dev) {
  return dev->backend;
}

pl_status pl_dev_info_get(const pl_dev *dev, pl_dev_info *out) {
  memset(out, 0, sizeof *out);
  out->backend = dev->backend;
  out->ordinal = dev->ordinal;
  return dev->ops->info(dev, out);
}

pl_status pl_dev_sync(pl_dev *dev) {
  return dev->ops->sync(dev);
}
pl_stream *pl_dev_stream(pl_dev *dev) {
  return dev->default_stream;
}

pl_status pl_stream_create(pl_dev *dev, pl_stream **out) {
  *out = NULL;
  pl_stream *s = calloc(1, sizeof *s);
  if (!s)
    return pl_set_error(PL_ENOMEM, "out of host memory creating a stream");
  s->dev = dev;
  pl_status st = dev->ops->stream_create(dev, s);
  if (st != PL_OK) {
    free(s);
    return st;
  }
  dev->n_streams++;
  *out = s;
  return PL_OK;
}

void pl_stream_destroy(pl_stream *s) {
  if (!s)
    return;
  s->dev->n_streams--;
  s->dev->ops->stream_destroy(s);
  free(s);
}

pl_status pl_stream_sync(pl_stream *s) {
  return s->dev->ops->stream_sync(s);
}
pl_dev *pl_stream_dev(const pl_stream *s) {
  return s->dev;
}
pl_backend pl_stream_backend(const pl_stream *s) {
  return s->dev->backend;
}
void *pl_stream_native(const pl_stream *s) {
  return s->native;
}
void pl_stream_set_grid_cap(pl_stream *s, int blocks) {
  s->grid_cap = blocks > 0 ? blocks : 0;
}
int pl_stream_grid_cap(const pl_stream *s) {
  return s->grid_cap;
}
void pl_stream_set_tf32(pl_stream *s, int on) {
  s->tf32 = on != 0;
}
int pl_stream_tf32(const pl_stream *s) {
  return s->tf32;
}

pl_status pl_event_create(pl_dev *dev, pl_event **out) {
  *out = NULL;
  pl_event *e = calloc(1, sizeof *e);
  if (!e)
    return pl_set_error(PL_ENOMEM, "out of host memory creating an event");
  e->dev = dev;
  pl_status st = dev->ops->event_create(dev, e);
  if (st != PL_OK) {
    free(e);
    return st;
  }
  dev->n_events++;
  *out = e;
  return PL_OK;
}

void pl_event_destroy(pl_event *e) {
  if (!e)
    return;
  e->dev->n_events--;
  e->dev->ops->event_destroy(e);
  free(e);
}

pl_status pl_event_record(pl_event *e, pl_stream *s) {
  PL_TRY(s->dev->ops->event_record(e, s));
  e->recorded = 1;
  return PL_OK;
}

pl_status pl_stream_wait(pl_stream *s, pl_event *e) {
  return s->dev->ops->stream_wait(s, e);
}
pl_status pl_event_sync(pl_event *e) {
  return e->dev->ops->event_sync(e);
}
int pl_event_done(pl_event *e) {
  return e->dev->ops->event_done(e);
}

pl_status pl_event_elapsed_ms(pl_event *start, pl_event *end, float *ms) {
  if (!start->recorded || !end->recorded)
    return pl_set_error(PL_EINVAL,
                        "pl_event_elapsed_ms: both events must be recorded");
  return start->dev->ops->event_elapsed_ms(start, end, ms);
}

/* ---- kernels.h dispatch -------------------------------------------------- */

static int is_float(pl_dtype dt) {
  return dt == PL_F32 || dt == PL_BF16;
}

pl_status pl_rng_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                      uint64_t seed, uint64_t offset, pl_dist dist, float a,
                      float b) {
  if (!is_float(dt))
    return pl_set_error(PL_EINVAL, "pl_rng_fill: dtype %s (allowed: f32, bf16)",
                        pl_dtype_name(dt));
  if (dist != PL_DIST_UNIFORM && dist != PL_DIST_NORMAL)
    return pl_set_error(
        PL_EINVAL, "pl_rng_fill: distribution %d (allowed: uniform, normal)",
        (int)dist);
  if (n == 0)
    return PL_OK;
  return s->dev->ops->rng_fill(s, dst, dt, n, seed, offset, dist, a, b);
}

pl_status pl_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                  double value) {
  if (pl_dtype_size(dt) == 0)
    return pl_set_error(PL_EINVAL, "pl_fill: unknown dtype %d", (int)dt);
  if (n == 0)
    return PL_OK;
  return s->dev->ops->fill(s, dst, dt, n, value);
}

pl_status pl_convert(pl_stream *s, void *dst, pl_dtype dst_dt, const void *src,
                     pl_dtype src_dt, size_t n) {
  if (dst_dt != src_dt && !(is_float(dst_dt) && is_float(src_dt)))
    return pl_set_error(
        PL_EINVAL,
        "pl_convert: %s -> %s (allowed: f32 <-> bf16, or equal dtypes)",
        pl_dtype_name(src_dt), pl_dtype_name(dst_dt));
  if (n == 0)
    return PL_OK;
  return s->dev->ops->convert(s, dst, dst_dt, src, src_dt, n);
}

pl_status pl_scale(pl_stream *s, void *x, pl_dtype dt, size_t n, float alpha) {
  if (!is_float(dt))
    return pl_set_error(PL_EINVAL, "pl_scale: dtype %s (allowed: f32, bf16)",
                        pl_dtype_name(dt));
  if (n == 0)
    return PL_OK;
  return s->dev->ops->scale(s, x, dt, n, alpha);
}

pl_status pl_axpy(pl_stream *s, void *y, pl_dtype y_dt, const void *x,
                  pl_dtype x_dt, size_t n, float alpha) {
  if (!is_float(y_dt) || !is_float(x_dt) ||
      (y_dt == PL_BF16 && x_dt != PL_BF16))
    return pl_set_error(
        PL_EINVAL,
        "pl_axpy: y %s += x %s (allowed: f32+=f32, bf16+=bf16, f32+=bf16)",
        pl_dtype_name(y_dt), pl_dtype_name(x_dt));
  if (n == 0)
    return PL_OK;
  return s->dev->ops->axpy(s, y, y_dt, x, x_dt, n, alpha);
}

pl_status pl_gemm_strided_batched(pl_stream *s, bool ta, bool tb, int64_t m,
                                  int64_t n, int64_t k, float alpha,
                                  const void *A, int64_t lda, int64_t stride_a,
                                  const void *B, int64_t ldb, int64_t stride_b,
                                  float beta, void *C, int64_t ldc,
                                  int64_t stride_c, int64_t batch,
                                  pl_dtype ab_dt, pl_dtype c_dt) {
  if (!is_float(ab_dt) || !is_float(c_dt))
    return pl_set_error(PL_EINVAL,
                        "pl_gemm: dtypes A/B %s, C %s (allowed: f32 or bf16)",
                        pl_dtype_name(ab_dt), pl_dtype_name(c_dt));
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return pl_set_error(
        PL_EINVAL, "pl_gemm: m=%lld n=%lld k=%lld batch=%lld (must be >= 0)",
        (long long)m, (long long)n, (long long)k, (long long)batch);
  int64_t min_lda = ta ? m : k, min_ldb = tb ? k : n;
  if (lda < (min_lda > 1 ? min_lda : 1) || ldb < (min_ldb > 1 ? min_ldb : 1) ||
      ldc < (n > 1 ? n : 1))
    return pl_set_error(PL_EINVAL,
                        "pl_gemm: lda=%lld ldb=%lld ldc=%lld too small for "
                        "m=%lld n=%lld k=%lld ta=%d tb=%d",
                        (long long)lda, (long long)ldb, (long long)ldc,
                        (long long)m, (long long)n, (long long)k, (int)ta,
                        (int)tb);
  if (m == 0 || n == 0 || batch == 0)
    return PL_OK;
  return s->dev->ops->gemm_strided_batched(s, ta, tb, m, n, k, alpha, A, lda,
                                           stride_a, B, ldb, stride_b, beta, C,
                                           ldc, stride_c, batch, ab_dt, c_dt);
}

pl_status pl_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,
                  int64_t k, float alpha, const void *A, int64_t lda,
                  const void *B, int64_t ldb, float beta, void *C, int64_t ldc,
                  pl_dtype ab_dt, pl_dtype c_dt) {
  return pl_gemm_strided_batched(s, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb,
                                 0, beta, C, ldc, 0, 1, ab_dt, c_dt);
}

pl_status pl_memcpy_async(pl_stream *s, void *dst, const void *src,
                          size_t bytes) {
  if (bytes == 0)
    return PL_OK;
  if (!dst || !src)
    return pl_set_error(PL_EINVAL,
                        "pl_memcpy_async: NULL pointer with %zu bytes", bytes);
  return s->dev->ops->memcpy_async(s, dst, src, bytes);
}

pl_status pl_memcpy_peer_async(pl_stream *s, void *dst, const pl_dev *dst_dev,
                               const void *src, const pl_dev *src_dev,
                               size_t bytes) {
  if (bytes == 0)
    return PL_OK;
  if (!dst || !src)
    return pl_set_error(
        PL_EINVAL, "pl_memcpy_peer_async: NULL pointer with %zu bytes", bytes);
  if (dst_dev->backend != src_dev->backend)
    return pl_set_error(PL_EINVAL,
                        "pl_memcpy_peer_async: devices of different backends");
  return s->dev->ops->memcpy_peer_async(s, dst, dst_dev, src, src_dev, bytes);
}
