/* backend/internal.h — what the core needs from a backend, and the structs the
 * core and the backends share.  Not installed; not part of the public API.
 *
 * The core (engine/core/dev.c, mem.c) owns pl_dev, the tracked allocator and
 * the dispatch of kernels.h; a backend provides a table of raw operations.
 * Operators (engine/ops) dispatch their own kernels the same way: a CPU launcher
 * pl_cpu_<op>() in backend/cpu and a CUDA twin pl_cuda_<op>() with the same
 * signature in backend/cuda, chosen by pl_stream_backend() and guarded by
 * PL_HAVE_CUDA. */
#ifndef PLATEAU_BACKEND_INTERNAL_H
#define PLATEAU_BACKEND_INTERNAL_H

#include <pthread.h>

#include "plateau/hd.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PL_HAVE_CUDA
#define PL_HAVE_CUDA 0
#endif

struct pl_stream {
  pl_dev *dev;
  void *native; /* cudaStream_t on CUDA; NULL on the CPU backend */
  void *blas_ws; /* CUDA: this stream's cuBLAS workspace (allocated at its
                    first GEMM), so GEMMs on two streams never share one */
  int grid_cap;  /* pl_stream_set_grid_cap (0: none) */
};

struct pl_event {
  pl_dev *dev;
  void *native;      /* cudaEvent_t on CUDA                          */
  uint64_t stamp_ns; /* CPU backend: monotonic clock at record time  */
  int recorded;
};

/* One live tracked allocation (open-addressing table keyed by pointer). */
typedef struct pl_mem_entry {
  void *ptr;
  size_t bytes;
  int tag;          /* index into pl_mem_arena.tags */
  unsigned char arena;
  unsigned char used; /* 0 empty, 1 live, 2 tombstone */
} pl_mem_entry;

typedef struct pl_mem_arena {
  size_t current, peak, limit;
  uint64_t n_alloc, n_free, n_failed;
  int n_tags;
  const char *tags[PL_MEM_MAX_TAGS];      /* interned copies            */
  size_t tag_now[PL_MEM_MAX_TAGS];
  size_t tag_peak[PL_MEM_MAX_TAGS];
  size_t tag_at_peak[PL_MEM_MAX_TAGS];    /* snapshot when peak was set */
} pl_mem_arena;

typedef struct pl_backend_ops {
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
  pl_status (*scale)(pl_stream *s, void *x, pl_dtype dt, size_t n,
                     float alpha);
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
  pl_status (*memcpy_peer_async)(pl_stream *s, void *dst,
                                 const pl_dev *dst_dev, const void *src,
                                 const pl_dev *src_dev, size_t bytes);
} pl_backend_ops;

struct pl_dev {
  pl_backend backend;
  int ordinal;
  const pl_backend_ops *ops;
  void *impl;              /* backend-private state (cuBLAS handle, pool, ...) */
  pl_stream *default_stream;
  pthread_mutex_t mem_lock;
  pl_mem_arena arenas[PL_ARENA_COUNT];
  pl_mem_entry *table;     /* live allocations of both arenas */
  size_t table_cap, table_used;
  int n_streams, n_events; /* leak checks at destroy */
};

/* Whether s's kernels run on the CUDA backend: the one test by which an
 * operator picks a kernel's CUDA twin pl__cuda_<op> over pl__cpu_<op>. */
static inline bool pl__on_cuda(const pl_stream *s) {
  return s->dev->backend == PL_BACKEND_CUDA;
}

extern const pl_backend_ops pl_cpu_backend_ops;
#if PL_HAVE_CUDA
extern const pl_backend_ops pl_cuda_backend_ops;
int pl_cuda_count_devices(void); /* 0 when no driver / no device */
#endif

/* Element i of a host array of dtype dt (f32 or bf16) as f32, and back with
 * round-to-nearest-even: the CPU kernels' loads and stores. */
static inline float pl_ld(const void *p, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? ((const float *)p)[i]
                      : pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
}
static inline void pl_st(void *p, pl_dtype dt, size_t i, float v) {
  if (dt == PL_F32)
    ((float *)p)[i] = v;
  else
    ((pl_bf16 *)p)[i] = pl_f32_to_bf16(v);
}

/* CPU kernels are also callable directly by CPU references in tests. */
pl_status pl_cpu_gemm_ref(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                          float alpha, const void *A, int64_t lda,
                          const void *B, int64_t ldb, float beta, void *C,
                          int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt);

#ifdef __cplusplus
}
#endif
#endif
