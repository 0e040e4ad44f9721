/* dev.h — one rank's device: backend, streams, events, and two tracked arenas.
 *
 * A pl_dev is either the CPU backend (a reference device: the "device" arena is
 * ordinary memory kept apart from the host arena, copies are memcpy, and work
 * issued on a stream runs at once, in issue order — a valid serialization of
 * the same schedule) or the CUDA backend (one GPU, a stream-ordered memory
 * pool, cuBLAS).  Because both backends account memory through the same
 * tracker, the tracked device peak of a schedule is the same on both for the
 * same configuration: every memory figure is reproducible without a GPU.
 *
 * Ownership: pl_dev_create/pl_dev_destroy; streams and events belong to their
 * device and must be destroyed before it. */
#ifndef PLATEAU_DEV_H
#define PLATEAU_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "plateau/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_backend {
  PL_BACKEND_CPU = 0,
  PL_BACKEND_CUDA = 1,
  /* tracks allocations without backing them and runs nothing: a step on it
   * measures the step's memory (backend/dry/dry_backend.c) */
  PL_BACKEND_DRY = 2,
} pl_backend;

/* Tracked arenas: device memory (HBM on CUDA) and pinned host memory. */
typedef enum pl_arena {
  PL_ARENA_DEVICE = 0,
  PL_ARENA_HOST = 1,
  PL_ARENA_COUNT = 2,
} pl_arena;

typedef struct pl_dev pl_dev;
typedef struct pl_stream pl_stream;
typedef struct pl_event pl_event;

typedef struct pl_dev_info {
  pl_backend backend;
  int ordinal;        /* GPU index on this node; 0 on the CPU backend    */
  char name[128];     /* "NVIDIA H200" or the CPU model name            */
  size_t total_bytes; /* device memory (CUDA) or physical RAM (CPU)      */
  int sm_count;       /* multiprocessors (CUDA) or online cores (CPU)    */
  char driver[64];    /* CUDA driver version, or "-"                    */
  char runtime[64];   /* CUDA runtime version, or "-"                   */
  char blas[64];      /* "cuBLAS 13.0.0" or "OpenBLAS 0.3.21"            */
} pl_dev_info;

/* Backends compiled into this build (CPU and dry always; CUDA when nvcc was
 * found). */
int pl_backend_available(pl_backend be);
const char *pl_backend_name(pl_backend be);
/* Parse "cpu" | "cuda" | "dry"; PL_EINVAL with a message otherwise. */
pl_status pl_backend_parse(const char *s, pl_backend *out);

/* The cuDNN library the attention calls run with ("cuDNN 9.19.0"), or "-"
 * (a build without cuDNN: CUDNN=0, or no CUDA). */
const char *pl_cudnn_version(void);

/* Number of CUDA devices visible (0 in a CPU-only build or with no GPU).  Does
 * create no CUDA context. */
int pl_cuda_device_count(void);

/* Local rank on this node from the launcher's environment
 * (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID), or 0.  Read
 * before any CUDA call so each rank picks its own GPU first. */
int pl_local_rank(void);

/* Ranks of this launch on this node from the launcher's environment
 * (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, LOCAL_WORLD_SIZE, Slurm's
 * SLURM_TASKS_PER_NODE), or 1.  A test compares it with
 * pl_cuda_device_count() before asking for NCCL (one GPU per rank). */
int pl_local_size(void);

/* ordinal < 0 picks pl_local_rank() modulo the device count (CUDA). */
pl_status pl_dev_create(pl_backend be, int ordinal, pl_dev **out);
void pl_dev_destroy(pl_dev *dev);
pl_backend pl_dev_backend(const pl_dev *dev);
pl_status pl_dev_info_get(const pl_dev *dev, pl_dev_info *out);
/* Wait for all work on all streams of the device. */
pl_status pl_dev_sync(pl_dev *dev);
/* The device's default stream (created with the device; never destroy it). */
pl_stream *pl_dev_stream(pl_dev *dev);

pl_status pl_stream_create(pl_dev *dev, pl_stream **out);
void pl_stream_destroy(pl_stream *s);
pl_status pl_stream_sync(pl_stream *s);
pl_dev *pl_stream_dev(const pl_stream *s);
pl_backend pl_stream_backend(const pl_stream *s);
/* cudaStream_t on CUDA, NULL on the CPU backend. */
void *pl_stream_native(const pl_stream *s);
/* At most `blocks` thread blocks for the grid-stride data-movement kernels
 * that honour it (the MoE layer's gathers, combines and scatters) launched on
 * s; 0 (the default) leaves them uncapped.  A stream whose kernels run beside
 * compute on other streams takes fewer SMs from it this way. */
void pl_stream_set_grid_cap(pl_stream *s, int blocks);
int pl_stream_grid_cap(const pl_stream *s);
/* TF32 math for the GEMMs with f32 operands issued on s (off by default):
 * on CUDA the tensor cores' TF32 mode (CUBLAS_COMPUTE_32F_FAST_TF32), on the
 * CPU backend the same operands rounded to TF32 (10-bit mantissa, nearest,
 * ties away from zero) before an f32 GEMM; f32 accumulation either way.
 * bf16 GEMMs are unchanged. */
void pl_stream_set_tf32(pl_stream *s, int on);
int pl_stream_tf32(const pl_stream *s);

pl_status pl_event_create(pl_dev *dev, pl_event **out);
void pl_event_destroy(pl_event *e);
pl_status pl_event_record(pl_event *e, pl_stream *s);
/* Later work on s waits for e (no host synchronization). */
pl_status pl_stream_wait(pl_stream *s, pl_event *e);
pl_status pl_event_sync(pl_event *e);
/* 1 if the work before e has completed, 0 if not. */
int pl_event_done(pl_event *e);
/* Time between two recorded events, milliseconds (CUDA events; the monotonic
 * clock at record time on the CPU backend). */
pl_status pl_event_elapsed_ms(pl_event *start, pl_event *end, float *ms);

/* ---- tracked memory ----------------------------------------------------- */

#define PL_MEM_MAX_TAGS 32
#define PL_MEM_MAX_CLASSES 16

/* What the work on a device is doing (pl_mem_phase): "WHAT", or "WHAT layer
 * LAYER (KIND)" when layer >= 0.  Static strings only (what may be NULL:
 * no phase yet); formatted by pl_mem_phase_str. */
typedef struct pl_mem_phase {
  const char *what, *kind;
  int layer;
} pl_mem_phase;

typedef struct pl_tag_bytes {
  const char *tag; /* interned: valid for the life of the device */
  size_t bytes;
} pl_tag_bytes;

typedef struct pl_mem_stats {
  size_t current; /* bytes live now                                     */
  size_t peak;    /* high-water mark of `current` since the last reset  */
  size_t limit;   /* capacity (0 = unlimited, up to the hardware)       */
  uint64_t n_alloc, n_free, n_failed;
  int n_tags;
  pl_tag_bytes at_peak[PL_MEM_MAX_TAGS];  /* the live set when `peak` was set */
  pl_tag_bytes now[PL_MEM_MAX_TAGS];      /* bytes per tag now                */
  pl_tag_bytes tag_peak[PL_MEM_MAX_TAGS]; /* each tag's own high-water mark   */
  size_t pool_high;        /* CUDA pool used-memory high-water mark; on the CPU
                              backend the same as `peak` (no separate pool)      */
  pl_mem_phase peak_phase; /* the phase when `peak` was set                */
  /* the classes (pl_mem_set_classes; n_classes 0: none): each class's bytes
   * in the live set when `peak` was set and its own high-water mark */
  int n_classes;
  size_t class_at_peak[PL_MEM_MAX_CLASSES];
  size_t class_peak[PL_MEM_MAX_CLASSES];
} pl_mem_stats;

/* Allocate `bytes` in `arena`, tracked under `tag` (a short static string such
 * as "dispatch", "logits", "boundary", "optim", "weights", "grads").  On CUDA
 * device memory comes from the stream-ordered pool, ordered on the device's
 * default stream; pinned host memory from cudaHostAlloc (portable).  Failure
 * (the hardware, or the arena's limit) returns PL_ENOMEM with a message; never
 * aborts.  bytes == 0 returns a unique non-NULL pointer that must be freed. */
pl_status pl_alloc(pl_dev *dev, pl_arena arena, size_t bytes, const char *tag,
                   void **out);
/* Same, ordered on stream s (cudaMallocFromPoolAsync on CUDA). */
pl_status pl_alloc_async(pl_dev *dev, pl_arena arena, size_t bytes,
                         const char *tag, pl_stream *s, void **out);
/* Free a tracked pointer (NULL is ignored).  On CUDA device memory this is
 * stream-ordered on the device's default stream: the caller orders other
 * streams' uses before it with events. */
void pl_free(pl_dev *dev, void *p);
/* Same, ordered on stream s. */
void pl_free_async(pl_dev *dev, void *p, pl_stream *s);

pl_status pl_mem_stats_get(pl_dev *dev, pl_arena arena, pl_mem_stats *out);
/* Bytes of `tag` live now / its own high-water mark since the last reset. */
size_t pl_mem_tag_current(pl_dev *dev, pl_arena arena, const char *tag);
size_t pl_mem_tag_peak(pl_dev *dev, pl_arena arena, const char *tag);
/* peak := current (and the live-set snapshot := now); resets the pool mark. */
void pl_mem_reset_peak(pl_dev *dev, pl_arena arena);
/* Capacity of an arena in bytes (0 = unlimited).  Allocations that would push
 * `current` past it fail with PL_ENOMEM — the same on both backends, so an OOM
 * search is reproducible on the CPU. */
void pl_mem_set_limit(pl_dev *dev, pl_arena arena, size_t bytes);
/* The most bytes `arena` holds at once (everything live in it counted)
 * under a training step's pattern: blocks of `big` bytes taken until
 * refused, then halving sizes down to `grain`; every other large block and
 * the small ones freed, newest first; one block as large as the holes
 * together taken into their place; then blocks again until refused.  *out
 * the smaller of the two fills; everything the probe took is freed.  The
 * CUDA device arena is probed against the hardware; a host arena (either
 * backend) only under a limit (PL_EINVAL otherwise). */
pl_status pl_mem_probe_ceiling(pl_dev *dev, pl_arena arena, size_t big,
                               size_t grain, size_t *out);
/* Write "dispatch=1.50GiB weights=2.00GiB" (the live set at the peak, largest
 * first) into buf. */
void pl_mem_live_set_str(const pl_mem_stats *st, char *buf, size_t len);

/* The phase the device's work is in from now on (a training step marks its
 * embedding, each layer's forward and backward, the head, ...): recorded
 * with each arena's peak, so the peak says where it was set.  Three stores:
 * cheap enough to call per layer; the strings must be static. */
void pl_mem_phase_set(pl_dev *dev, const char *what, int layer,
                      const char *kind);
/* Told when a phase ends (pl_mem_phase_set starts the next): the phase
 * that ended and the device arena's most bytes live at once during it.
 * Called outside the tracker's lock. */
typedef void (*pl_mem_phase_fn)(void *ctx, const pl_mem_phase *ended,
                                size_t high);
/* Watch the device arena's phases with fn (NULL: stop watching). */
void pl_mem_watch_phases(pl_dev *dev, pl_mem_phase_fn fn, void *ctx);
/* "WHAT layer LAYER (KIND)", "WHAT", or "" (no phase) into buf. */
void pl_mem_phase_str(const pl_mem_phase *ph, char *buf, size_t len);
/* A class of an allocation from its tag and the phase it was made in: in
 * [0, n) of pl_mem_set_classes, or < 0 for none. */
typedef int (*pl_mem_class_fn)(void *ctx, const char *tag,
                               const pl_mem_phase *ph);
/* Count arena's allocations also by class (classify, called under the
 * tracker's lock for each tag's first allocation of every phase from now
 * on, its answer kept for the tag's later allocations of the phase, so it
 * depends on the tag and the phase alone; an allocation made before counts
 * in none): each class's current bytes, its peak and its bytes at the
 * arena's peak, as for tags (pl_mem_stats).  n in 1..PL_MEM_MAX_CLASSES;
 * NULL classify (n 0) turns the classes off. */
pl_status pl_mem_set_classes(pl_dev *dev, pl_arena arena, int n,
                             pl_mem_class_fn classify, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
