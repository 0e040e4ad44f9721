/* core/internal.h — the structs the core and the backends share, and the one
 * test every caller of a backend kernel makes.  Not installed; not part of the
 * public API (engine/include/plateau/ is).
 *
 * The core (core/dev.c, core/mem.c) owns pl_dev, its streams and events and
 * the tracked allocator; a backend fills a pl__backend_ops table of raw
 * operations, and the device created by the backend layer (backend/backend.c)
 * keeps a pointer to it: that choice, made once per device, is the only place
 * a backend is selected.  Operators reach their own kernels (prototypes in
 * backend/<family>.h, a CPU twin pl__cpu_x and a CUDA twin pl__cuda_x of one
 * signature) with one idiom:
 *
 *   #if PL_HAVE_CUDA
 *     if (pl__on_cuda(s)) return pl__cuda_x(s, ...);
 *   #endif
 *     return pl__cpu_x(s, ...);
 *
 * Everything here depends only on the core's public headers. */
#ifndef PLATEAU_CORE_INTERNAL_H
#define PLATEAU_CORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plateau/dev.h"
#include "plateau/host_device.h"
#include "plateau/kernels.h"
#include "plateau/log.h"
#include "plateau/status.h"
#include "plateau/tensor.h"
#include "plateau/timer.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PL_HAVE_CUDA
#define PL_HAVE_CUDA 0
#endif

struct pl_stream {
  pl_dev *dev;
  void *native;  /* cudaStream_t on CUDA; NULL on the CPU backend */
  void *blas_ws; /* CUDA: this stream's cuBLAS workspace (allocated at its
                    first GEMM), so GEMMs on two streams never share one */
  int grid_cap;  /* pl_stream_set_grid_cap (0: none) */
  int tf32;      /* pl_stream_set_tf32: f32 GEMMs on s in TF32 math */
};

struct pl_event {
  pl_dev *dev;
  void *native;      /* cudaEvent_t on CUDA                          */
  uint64_t stamp_ns; /* CPU backend: monotonic clock at record time  */
  int recorded;
};

/* One live tracked allocation (open-addressing table keyed by pointer). */
typedef struct pl__mem_entry {
  void *ptr;
  size_t bytes;
  int tag; /* index into pl__mem_arena.tags */
  unsigned char arena;
  unsigned char used; /* 0 empty, 1 live, 2 tombstone */
  unsigned char cls;  /* class (pl_mem_set_classes); PL__MEM_NO_CLASS */
} pl__mem_entry;

#define PL__MEM_NO_CLASS 255

typedef struct pl__mem_arena {
  size_t current, peak, limit;
  uint64_t n_alloc, n_free, n_failed;
  int n_tags;
  const char *tags[PL_MEM_MAX_TAGS]; /* interned copies            */
  /* the tag last found for a caller's string at this hash of its address
   * (a hint: tag_index checks the name) */
  unsigned char tag_hint[256];
  size_t tag_now[PL_MEM_MAX_TAGS];
  size_t tag_peak[PL_MEM_MAX_TAGS];
  size_t tag_at_peak[PL_MEM_MAX_TAGS]; /* snapshot when peak was set */
  /* the phase when the peak was set (pl_mem_phase) */
  pl_mem_phase peak_phase;
  /* the classes (pl_mem_set_classes): none while n_classes is 0 */
  int n_classes;
  pl_mem_class_fn classify;
  void *classify_ctx;
  size_t class_now[PL_MEM_MAX_CLASSES], class_peak[PL_MEM_MAX_CLASSES],
      class_at_peak[PL_MEM_MAX_CLASSES];
  /* each tag's class in the phase now, once asked: 1 + the class
   * (PL__MEM_NO_CLASS + 1 wraps to 0: asked again), 0 not yet asked;
   * cleared when a phase starts or the classes change */
  unsigned char class_memo[PL_MEM_MAX_TAGS];
} pl__mem_arena;

/* What a backend provides: raw memory, streams, events, and the shared
 * kernels of kernels.h (same meaning; the core checks the arguments first). */
typedef struct pl__backend_ops {
  pl_status (*init)(pl_dev *dev, int ordinal);
  void (*fini)(pl_dev *dev);
  pl_status (*info)(const pl_dev *dev, pl_dev_info *out);
  pl_status (*sync)(pl_dev *dev);
  /* raw memory: s may be NULL (use the default stream) */
  pl_status (*raw_alloc)(pl_dev *dev, pl_arena a, size_t bytes, pl_stream *s,
                         void **out);
  void (*raw_free)(pl_dev *dev, pl_arena a, void *p, pl_stream *s);
  size_t (*pool_high)(pl_dev *dev); /* 0 when the backend has no pool */
  void (*pool_reset)(pl_dev *dev);
  pl_status (*stream_create)(pl_dev *dev, pl_stream *s);
  void (*stream_destroy)(pl_stream *s);
  pl_status (*stream_sync)(pl_stream *s);
  pl_status (*event_create)(pl_dev *dev, pl_event *e);
  void (*event_destroy)(pl_event *e);
  pl_status (*event_record)(pl_event *e, pl_stream *s);
  pl_status (*stream_wait)(pl_stream *s, pl_event *e);
  pl_status (*event_sync)(pl_event *e);
  int (*event_done)(pl_event *e);
  pl_status (*event_elapsed_ms)(pl_event *a, pl_event *b, float *ms);
  /* kernels.h, same meaning */
  pl_status (*rng_fill)(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                        uint64_t seed, uint64_t offset, pl_dist dist, float a,
                        float b);
  pl_status (*fill)(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                    double value);
  pl_status (*convert)(pl_stream *s, void *dst, pl_dtype dst_dt,
                       const void *src, pl_dtype src_dt, size_t n);
  pl_status (*scale)(pl_stream *s, void *x, pl_dtype dt, size_t n, float alpha);
  pl_status (*axpy)(pl_stream *s, void *y, pl_dtype y_dt, const void *x,
                    pl_dtype x_dt, size_t n, float alpha);
  pl_status (*gemm_strided_batched)(pl_stream *s, bool ta, bool tb, int64_t m,
                                    int64_t n, int64_t k, float alpha,
                                    const void *A, int64_t lda, int64_t sa,
                                    const void *B, int64_t ldb, int64_t sb,
                                    float beta, void *C, int64_t ldc,
                                    int64_t sc, int64_t batch, pl_dtype ab_dt,
                                    pl_dtype c_dt);
  pl_status (*memcpy_async)(pl_stream *s, void *dst, const void *src,
                            size_t bytes);
  pl_status (*memcpy_peer_async)(pl_stream *s, void *dst, const pl_dev *dst_dev,
                                 const void *src, const pl_dev *src_dev,
                                 size_t bytes);
} pl__backend_ops;

struct pl_dev {
  pl_backend backend;
  /* the backend whose allocation decisions the code takes on this device:
   * its own, or the one a dry device plays (pl_dry_set_flavour) */
  pl_backend flavour;
  int ordinal;
  const pl__backend_ops *ops;
  void *impl; /* backend-private state (cuBLAS handle, pool, ...) */
  pl_stream *default_stream;
  pthread_mutex_t mem_lock;
  pl_mem_phase phase; /* what the device's work is doing (pl_mem_phase) */
  /* the device arena's most bytes since the phase began, and who is told
   * when it ends (pl_mem_watch_phases) */
  size_t phase_high;
  pl_mem_phase_fn phase_fn;
  void *phase_ctx;
  pl__mem_arena arenas[PL_ARENA_COUNT];
  pl__mem_entry *table; /* live allocations of both arenas */
  size_t table_cap, table_used;
  int n_streams, n_events; /* leak checks at destroy */
};

/* A device of backend `be` on GPU `ordinal` (0 on the CPU) driven by `ops`:
 * the backend layer's pl_dev_create has chosen ops and checked the ordinal. */
pl_status pl__dev_open(pl_backend be, int ordinal, const pl__backend_ops *ops,
                       pl_dev **out);
/* Frees every allocation still live (device destroy, core/mem.c). */
void pl__mem_fini(pl_dev *dev);

/* Run release() when this thread ends (thread_exit.c: one thread key whose
 * destructor runs every release registered): a per-thread cache calls it
 * when it first keeps something; calling it again costs a lookup.  At most
 * 8 distinct releases in a process. */
void pl__at_thread_exit(void (*release)(void));

/* Is s a stream of a CUDA device?  The test in front of every CUDA twin. */
static inline bool pl__on_cuda(const pl_stream *s) {
  return s->dev->backend == PL_BACKEND_CUDA;
}

/* Does s allocate as a CUDA device does?  True on a CUDA device and on a
 * dry device of the CUDA flavour (backend/dry/dry.h).  The test in front of
 * an allocation only the CUDA path makes (a kernel's scratch, a workspace),
 * never in front of a kernel: a dry device runs none.  pl__alloc_backend is
 * the backend to size such a buffer for. */
static inline pl_backend pl__alloc_backend(const pl_stream *s) {
  return s->dev->flavour;
}
static inline bool pl__allocs_as_cuda(const pl_stream *s) {
  return pl__alloc_backend(s) == PL_BACKEND_CUDA;
}

/* Is s a stream of a dry device (backend/dry/dry_backend.c)?  The test in
 * front of every CPU twin an operator calls itself: on a dry device the
 * kernel is skipped (its buffers are not backed), e.g.
 *
 *   if (pl__on_dry(s)) return PL_OK;
 *   return pl__cpu_x(s, ...);
 *
 * pl__dev_dry is the same test for host code that reads a tracked buffer. */
static inline bool pl__dev_dry(const pl_dev *dev) {
  return dev && dev->backend == PL_BACKEND_DRY;
}
static inline bool pl__on_dry(const pl_stream *s) {
  return s && pl__dev_dry(s->dev);
}

/* Element i of a host array of dtype dt (f32 or bf16) as f32, and back with
 * round-to-nearest-even: the CPU kernels' loads and stores. */
static inline float pl__load_elem(const void *p, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? ((const float *)p)[i]
                      : pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
}
static inline void pl__store_elem(void *p, pl_dtype dt, size_t i, float v) {
  if (dt == PL_F32)
    ((float *)p)[i] = v;
  else
    ((pl_bf16 *)p)[i] = pl_f32_to_bf16(v);
}

#ifdef __cplusplus
}
#endif
#endif
