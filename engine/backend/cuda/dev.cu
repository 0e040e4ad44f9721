/* backend/cuda/dev.cu — the CUDA backend's device half: device set-up and
 * teardown, the stream-ordered pool allocator behind the tracked arenas,
 * streams, events, device info, the device count, and the ops table
 * (pl__cuda_backend_ops) that engine/core dispatches through.
 *
 * Memory: the DEVICE arena takes memory from the device's default pool with
 * cudaMallocFromPoolAsync / cudaFreeAsync, ordered on a stream; the pool's
 * release threshold is UINT64_MAX so freed memory stays in the pool (no
 * cudaFree/cudaMalloc round trips between steps), and the pool's
 * used-memory high-water mark (cudaMemPoolAttrUsedMemHigh) is what pool_high
 * reports beside the tracked peak as the hardware-side check (DESIGN §2).  An
 * allocation the pool cannot serve is retried once after the pending frees
 * complete and the pool's unused memory is trimmed (a large buffer needs
 * fresh physical memory that cached free blocks would otherwise hold).  The
 * HOST arena is pinned memory (cudaHostAlloc, portable to every GPU of the
 * process).  A failed allocation is PL_ENOMEM with a message, never an abort.
 *
 * The kernels live in kernels.cu and gemm.cu. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/internal_cuda.h"
#include "backend/kernels.h"

/* ---- helpers shared with kernels.cu / gemm.cu -----------------------------
 */

extern "C" cudaStream_t pl__cuda_stream_of(pl_dev *dev, pl_stream *s) {
  if (s)
    return (cudaStream_t)s->native;
  if (dev->default_stream)
    return (cudaStream_t)dev->default_stream->native;
  return (cudaStream_t)0;
}

extern "C" pl_status pl__cuda_use(const pl_dev *dev) {
  int cur = -1;
  PL_CUDA_TRY(cudaGetDevice(&cur));
  if (cur != dev->ordinal)
    PL_CUDA_TRY(cudaSetDevice(dev->ordinal));
  return PL_OK;
}

extern "C" unsigned pl__cuda_blocks(const pl_dev *dev, size_t items) {
  size_t want = (items + PL_CUDA_THREADS - 1) / PL_CUDA_THREADS;
  int sms = dev->impl ? PL_CUDA_IMPL(dev)->sm_count : 0;
  size_t cap = (size_t)(sms > 0 ? sms : 16) * 32; /* grid-stride beyond this */
  if (want > cap)
    want = cap;
  return want ? (unsigned)want : 1u;
}

/* ---- device ----------------------------------------------------------------
 */

extern "C" int pl__cuda_count_devices(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) { /* no driver, no device, driver too old: none */
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

static void cuda_fini(pl_dev *dev);

static pl_status cuda_init(pl_dev *dev, int ordinal) {
  int count = pl__cuda_count_devices();
  if (ordinal < 0 || ordinal >= count)
    return pl_set_error(PL_EINVAL,
                        "CUDA device ordinal %d: must be in [0, %d) (the "
                        "number of visible CUDA devices)",
                        ordinal, count);
  pl__cuda_dev *cd = (pl__cuda_dev *)calloc(1, sizeof *cd);
  if (!cd)
    return pl_set_error(PL_ENOMEM, "CUDA backend state: out of host memory");
  pthread_mutex_init(&cd->blas_lock, NULL);
  dev->impl = cd;
  pl_status st = PL_OK;
  do {
    cudaError_t e = cudaSetDevice(ordinal);
    if (e == cudaSuccess)
      e = cudaFree(0); /* create the context now */
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&cd->sm_count, cudaDevAttrMultiProcessorCount,
                                 ordinal);
    if (e == cudaSuccess)
      e = cudaDeviceGetDefaultMemPool(&cd->pool, ordinal);
    if (e == cudaSuccess) {
      uint64_t thr = UINT64_MAX;
      e = cudaMemPoolSetAttribute(cd->pool, cudaMemPoolAttrReleaseThreshold,
                                  &thr);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      st = pl_set_error(PL_ERUNTIME, "CUDA device %d set-up failed: %s (%s)",
                        ordinal, cudaGetErrorName(e), cudaGetErrorString(e));
      break;
    }
    cublasStatus_t b = cublasCreate(&cd->blas);
    if (b == CUBLAS_STATUS_SUCCESS)
      /* fp32 accumulation everywhere: no TF32, and no split-K reduction in
       * the output type (bf16) — the CPU reference rounds once at the end. */
      b = cublasSetMathMode(
          cd->blas,
          (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                         CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (b != CUBLAS_STATUS_SUCCESS) {
      (void)cudaGetLastError();
      st = pl_set_error(PL_ERUNTIME, "cuBLAS set-up on CUDA device %d: %s (%s)",
                        ordinal, cublasGetStatusName(b),
                        cublasGetStatusString(b));
      break;
    }
  } while (0);
  if (st != PL_OK)
    cuda_fini(dev);
  return st;
}

static void cuda_fini(pl_dev *dev) {
  pl__cuda_dev *cd = PL_CUDA_IMPL(dev);
  if (!cd)
    return;
  if (cudaSetDevice(dev->ordinal) == cudaSuccess &&
      cudaDeviceSynchronize() == cudaSuccess && cd->pool)
    /* Give the pool's cached memory back: the next device starts clean. */
    (void)cudaMemPoolTrimTo(cd->pool, 0);
  (void)cudaGetLastError();
  pl__cudnn_release(cd->cudnn);
  if (cd->blas)
    cublasDestroy(cd->blas);
  pthread_mutex_destroy(&cd->blas_lock);
  free(cd);
  dev->impl = NULL;
}

static void fmt_cuda_version(char *buf, size_t len, int v) {
  snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

static pl_status cuda_info(const pl_dev *dev, pl_dev_info *out) {
  PL_TRY(pl__cuda_use(dev));
  cudaDeviceProp p;
  PL_CUDA_TRY(cudaGetDeviceProperties(&p, dev->ordinal));
  int drv = 0, rt = 0, maj = 0, min = 0, pat = 0;
  PL_CUDA_TRY(cudaDriverGetVersion(&drv));
  PL_CUDA_TRY(cudaRuntimeGetVersion(&rt));
  PL_CUBLAS_TRY(cublasGetProperty(MAJOR_VERSION, &maj));
  PL_CUBLAS_TRY(cublasGetProperty(MINOR_VERSION, &min));
  PL_CUBLAS_TRY(cublasGetProperty(PATCH_LEVEL, &pat));
  out->backend = PL_BACKEND_CUDA;
  out->ordinal = dev->ordinal;
  snprintf(out->name, sizeof out->name, "%.*s", (int)sizeof out->name - 1,
           p.name);
  out->total_bytes = p.totalGlobalMem;
  out->sm_count = p.multiProcessorCount;
  fmt_cuda_version(out->driver, sizeof out->driver, drv);
  fmt_cuda_version(out->runtime, sizeof out->runtime, rt);
  snprintf(out->blas, sizeof out->blas, "cuBLAS %d.%d.%d", maj, min, pat);
  return PL_OK;
}

static pl_status cuda_sync(pl_dev *dev) {
  PL_TRY(pl__cuda_use(dev));
  PL_CUDA_TRY(cudaDeviceSynchronize());
  return PL_OK;
}

/* ---- raw memory -------------------------------------------------------------
 */

static pl_status cuda_raw_alloc(pl_dev *dev, pl_arena a, size_t bytes,
                                pl_stream *s, void **out) {
  *out = NULL;
  PL_TRY(pl__cuda_use(dev));
  /* bytes == 0 must still give a unique pointer: take the smallest block. */
  size_t want = bytes ? bytes : 1;
  void *p = NULL;
  cudaError_t e;
  const char *what;
  char pool_state[160] = "";
  if (a == PL_ARENA_DEVICE) {
    what = "cudaMallocFromPoolAsync";
    cudaMemPool_t pool = PL_CUDA_IMPL(dev)->pool;
    cudaStream_t cs = pl__cuda_stream_of(dev, s);
    e = cudaMallocFromPoolAsync(&p, want, pool, cs);
    if (e == cudaErrorMemoryAllocation) {
      /* The pool keeps every freed block (release threshold UINT64_MAX), so
       * a buffer larger than any free block of it needs fresh physical
       * memory while the cached blocks still hold theirs.  Wait for the
       * pending frees, give the pool's unused memory back and try once more:
       * only a failing allocation pays the synchronization. */
      (void)cudaGetLastError();
      uint64_t res = 0, used = 0;
      (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent,
                                    &res);
      (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
      e = cudaDeviceSynchronize();
      if (e == cudaSuccess)
        e = cudaMemPoolTrimTo(pool, 0);
      if (e == cudaSuccess)
        e = cudaMallocFromPoolAsync(&p, want, pool, cs);
      if (e != cudaSuccess) {
        /* where the memory was: the pool's share, and outside it */
        size_t free_b = 0, total_b = 0;
        (void)cudaGetLastError();
        (void)cudaMemGetInfo(&free_b, &total_b);
        (void)cudaGetLastError();
        snprintf(pool_state, sizeof pool_state,
                 "; pool reserved %llu, in use %llu bytes before a trim; "
                 "after it %zu of %zu bytes free on the device",
                 (unsigned long long)res, (unsigned long long)used, free_b,
                 total_b);
        e = cudaErrorMemoryAllocation;
      }
    }
  } else if (a == PL_ARENA_HOST) {
    what = "cudaHostAlloc";
    e = cudaHostAlloc(&p, want, cudaHostAllocPortable);
  } else {
    return pl_set_error(PL_EINVAL,
                        "arena %d: must be PL_ARENA_DEVICE or "
                        "PL_ARENA_HOST",
                        (int)a);
  }
  if (e != cudaSuccess || !p) {
    /* Clear the error so it does not surface at the next launch check. */
    (void)cudaGetLastError();
    return pl_set_error(PL_ENOMEM,
                        "%s of %zu bytes in the %s arena of CUDA "
                        "device %d failed: %s (%s)%s",
                        what, bytes, a == PL_ARENA_DEVICE ? "device" : "host",
                        dev->ordinal, cudaGetErrorName(e),
                        cudaGetErrorString(e), pool_state);
  }
  *out = p;
  return PL_OK;
}

static void cuda_raw_free(pl_dev *dev, pl_arena a, void *p, pl_stream *s) {
  if (!p)
    return;
  if (pl__cuda_use(dev) != PL_OK)
    return;
  cudaError_t e = a == PL_ARENA_DEVICE
                      ? cudaFreeAsync(p, pl__cuda_stream_of(dev, s))
                      : cudaFreeHost(p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    PL_ERROR("CUDA device %d: %s(%p) failed: %s (%s)", dev->ordinal,
             a == PL_ARENA_DEVICE ? "cudaFreeAsync" : "cudaFreeHost", p,
             cudaGetErrorName(e), cudaGetErrorString(e));
  }
}

static size_t cuda_pool_high(pl_dev *dev) {
  uint64_t v = 0;
  if (cudaMemPoolGetAttribute(PL_CUDA_IMPL(dev)->pool,
                              cudaMemPoolAttrUsedMemHigh, &v) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return (size_t)v;
}

static void cuda_pool_reset(pl_dev *dev) {
  /* Setting the high-water attribute to 0 resets it to the current use. */
  uint64_t zero = 0;
  if (cudaMemPoolSetAttribute(PL_CUDA_IMPL(dev)->pool,
                              cudaMemPoolAttrUsedMemHigh, &zero) != cudaSuccess)
    (void)cudaGetLastError();
  zero = 0;
  if (cudaMemPoolSetAttribute(PL_CUDA_IMPL(dev)->pool,
                              cudaMemPoolAttrReservedMemHigh,
                              &zero) != cudaSuccess)
    (void)cudaGetLastError();
}

/* ---- streams and events ----------------------------------------------------
 */

static pl_status cuda_stream_create(pl_dev *dev, pl_stream *s) {
  PL_TRY(pl__cuda_use(dev));
  cudaStream_t st = NULL;
  /* Non-blocking: no implicit synchronization with the legacy stream 0. */
  PL_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  s->native = (void *)st;
  return PL_OK;
}

static void cuda_stream_destroy(pl_stream *s) {
  if (!s->native)
    return;
  if (pl__cuda_use(s->dev) == PL_OK) {
    cudaError_t e = cudaStreamDestroy((cudaStream_t)s->native);
    /* cudaFree waits for the device: the stream's GEMMs are done */
    if (e == cudaSuccess && s->blas_ws)
      e = cudaFree(s->blas_ws);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      PL_ERROR("cudaStreamDestroy failed: %s", cudaGetErrorString(e));
    }
  }
  s->native = NULL;
  s->blas_ws = NULL;
}

static pl_status cuda_stream_sync(pl_stream *s) {
  PL_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)s->native));
  return PL_OK;
}

static pl_status cuda_event_create(pl_dev *dev, pl_event *e) {
  PL_TRY(pl__cuda_use(dev));
  cudaEvent_t ev = NULL;
  PL_CUDA_TRY(cudaEventCreate(&ev)); /* default flags: timing enabled */
  e->native = (void *)ev;
  return PL_OK;
}

static void cuda_event_destroy(pl_event *e) {
  if (!e->native)
    return;
  cudaError_t r = cudaEventDestroy((cudaEvent_t)e->native);
  if (r != cudaSuccess) {
    (void)cudaGetLastError();
    PL_ERROR("cudaEventDestroy failed: %s", cudaGetErrorString(r));
  }
  e->native = NULL;
}

static pl_status cuda_event_record(pl_event *e, pl_stream *s) {
  PL_TRY(pl__cuda_use(s->dev));
  PL_CUDA_TRY(cudaEventRecord((cudaEvent_t)e->native, (cudaStream_t)s->native));
  e->recorded = 1;
  return PL_OK;
}

static pl_status cuda_stream_wait(pl_stream *s, pl_event *e) {
  PL_TRY(pl__cuda_use(s->dev));
  PL_CUDA_TRY(
      cudaStreamWaitEvent((cudaStream_t)s->native, (cudaEvent_t)e->native, 0));
  return PL_OK;
}

static pl_status cuda_event_sync(pl_event *e) {
  PL_CUDA_TRY(cudaEventSynchronize((cudaEvent_t)e->native));
  return PL_OK;
}

/* 1 when the work before e is complete.  An error (not "not ready") also
 * answers 1 after recording the message, so a polling caller does not spin
 * forever; the error surfaces again at the next synchronizing call. */
static int cuda_event_done(pl_event *e) {
  cudaError_t r = cudaEventQuery((cudaEvent_t)e->native);
  if (r == cudaSuccess)
    return 1;
  if (r == cudaErrorNotReady)
    return 0;
  (void)cudaGetLastError();
  pl_set_error(PL_ERUNTIME, "cudaEventQuery failed: %s (%s)",
               cudaGetErrorName(r), cudaGetErrorString(r));
  PL_ERROR("cudaEventQuery failed: %s", cudaGetErrorString(r));
  return 1;
}

static pl_status cuda_event_elapsed_ms(pl_event *a, pl_event *b, float *ms) {
  PL_CUDA_TRY(
      cudaEventElapsedTime(ms, (cudaEvent_t)a->native, (cudaEvent_t)b->native));
  return PL_OK;
}

/* ---- the table -------------------------------------------------------------
 */

extern "C" const pl__backend_ops pl__cuda_backend_ops = {
    /* init */ cuda_init,
    /* fini */ cuda_fini,
    /* info */ cuda_info,
    /* sync */ cuda_sync,
    /* raw_alloc */ cuda_raw_alloc,
    /* raw_free */ cuda_raw_free,
    /* pool_high */ cuda_pool_high,
    /* pool_reset */ cuda_pool_reset,
    /* stream_create */ cuda_stream_create,
    /* stream_destroy */ cuda_stream_destroy,
    /* stream_sync */ cuda_stream_sync,
    /* event_create */ cuda_event_create,
    /* event_destroy */ cuda_event_destroy,
    /* event_record */ cuda_event_record,
    /* stream_wait */ cuda_stream_wait,
    /* event_sync */ cuda_event_sync,
    /* event_done */ cuda_event_done,
    /* event_elapsed_ms */ cuda_event_elapsed_ms,
    /* rng_fill */ pl__cuda_rng_fill,
    /* fill */ pl__cuda_fill,
    /* convert */ pl__cuda_convert,
    /* scale */ pl__cuda_scale,
    /* axpy */ pl__cuda_axpy,
    /* gemm_strided_batched */ pl__cuda_gemm_strided_batched,
    /* memcpy_async */ pl__cuda_memcpy_async,
    /* memcpy_peer_async */ pl__cuda_memcpy_peer_async,
};
