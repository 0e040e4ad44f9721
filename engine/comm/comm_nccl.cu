/* comm_nccl.cu — the NCCL transport of pl_comm for CUDA devices (compiled only
 * when nvcc is present; comm.c dispatches here when c->nccl is set).
 *
 * Set-up: group rank 0 draws an ncclUniqueId, MPI broadcasts it over the
 * group's communicator, every rank selects its GPU (the device's ordinal,
 * chosen from the local rank at pl_dev_create) and calls
 * ncclCommInitRankConfig. Both blocking steps are watched, so a rank that never
 * arrives aborts the job.
 *
 * Two environment variables shape the communicator (NCCL's own NCCL_* variables
 * still apply): PLATEAU_NCCL_CTA_POLICY = default | efficiency | zero (NCCL's
 * CTA policy: efficiency uses as few CTAs as it can, so that communication
 * overlapping compute takes fewer SMs from it; zero uses none where it can)
 * and PLATEAU_NCCL_MAX_CTAS = n (config.maxCTAs, 1..64).  A bad value is a
 * usage error naming it.
 *
 * Operations are enqueued on the caller's stream (the device's default stream
 * when s is NULL) and return at once; a CUDA event recorded after each one is
 * handed to the watchdog (comm_watch.c), which polls it and aborts every
 * rank if it has not completed within the communicator's timeout, counted
 * from enqueue.
 * Uneven all-to-all and the ring hop are grouped ncclSend/ncclRecv pairs
 * (zero counts skipped, so empty ranks post nothing).  Arguments were checked
 * by comm.c before dispatch. */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "comm/comm_internal.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pl_status nccl_err(ncclResult_t r, ncclComm_t comm, const char *what) {
  const char *last = comm ? ncclGetLastError(comm) : "";
  return pl_set_error(PL_ECOMM, "%s: %s%s%s", what, ncclGetErrorString(r),
                      last && *last ? ": " : "", last ? last : "");
}

static pl_status cuda_err(cudaError_t e, const char *what) {
  return pl_set_error(PL_ERUNTIME, "%s: %s (%s)", what, cudaGetErrorString(e),
                      cudaGetErrorName(e));
}

#define NCCL_TRY(call, comm, what)                                             \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (r_ != ncclSuccess)                                                     \
      return nccl_err(r_, (comm), (what));                                     \
  } while (0)

#define CUDA_TRY(call, what)                                                   \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess)                                                     \
      return cuda_err(e_, (what));                                             \
  } while (0)

static ncclDataType_t nccl_type(pl_dtype dt) {
  switch (dt) {
  case PL_F32:
    return ncclFloat32;
  case PL_BF16:
    return ncclBfloat16;
  case PL_I32:
    return ncclInt32;
  case PL_I64:
    return ncclInt64;
  }
  return ncclFloat32;
}

static ncclRedOp_t nccl_op(pl_redop op) {
  return op == PL_RED_SUM ? ncclSum : op == PL_RED_MAX ? ncclMax : ncclMin;
}

static size_t esize(pl_dtype dt) {
  return pl_dtype_size(dt);
}

static cudaStream_t stream_of(pl_comm *c, pl_stream *s) {
  if (!s)
    s = pl_dev_stream(c->dev);
  return (cudaStream_t)pl_stream_native(s);
}

/* Completion events are recycled (creating one per operation would add
 * microseconds to every small collective): the watchdog returns completed
 * events here, watch_after takes one of the same GPU. */
#define EVENT_POOL_MAX 256
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  cudaEvent_t ev;
  int ordinal;
} g_pool[EVENT_POOL_MAX];
static int g_pool_n;

static cudaEvent_t pool_take(int ordinal) {
  cudaEvent_t ev = NULL;
  pthread_mutex_lock(&g_pool_lock);
  for (int i = g_pool_n - 1; i >= 0; i--)
    if (g_pool[i].ordinal == ordinal) {
      ev = g_pool[i].ev;
      g_pool[i] = g_pool[--g_pool_n];
      break;
    }
  pthread_mutex_unlock(&g_pool_lock);
  return ev;
}

/* Record completion of the op just enqueued and give it to the watchdog. */
static pl_status watch_after(pl_comm *c, const char *op, cudaStream_t st) {
  cudaEvent_t ev = pool_take(c->dev->ordinal);
  if (!ev)
    CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming),
             "pl_comm: cudaEventCreateWithFlags");
  cudaError_t e = cudaEventRecord(ev, st);
  if (e != cudaSuccess) {
    cudaEventDestroy(ev);
    return cuda_err(e, "pl_comm: cudaEventRecord");
  }
  return pl__watch_event(c, op, (void *)ev);
}

extern "C" void pl__nccl_version_str(char *buf, size_t len) {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) {
    snprintf(buf, len, "NCCL (unknown)");
    return;
  }
  /* Since 2.9: major·10000 + minor·100 + patch. */
  snprintf(buf, len, "NCCL %d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

/* The communicator's config from PLATEAU_NCCL_CTA_POLICY / _MAX_CTAS. */
static pl_status nccl_config(ncclConfig_t *cfg) {
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  *cfg = init;
  const char *p = getenv("PLATEAU_NCCL_CTA_POLICY");
  if (p && *p) {
    if (strcmp(p, "default") == 0)
      cfg->CTAPolicy = NCCL_CTA_POLICY_DEFAULT;
    else if (strcmp(p, "efficiency") == 0)
      cfg->CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
    else if (strcmp(p, "zero") == 0)
      cfg->CTAPolicy = NCCL_CTA_POLICY_ZERO;
    else
      return pl_set_error(PL_EINVAL,
                          "PLATEAU_NCCL_CTA_POLICY=%s: allowed "
                          "default, efficiency, zero",
                          p);
  }
  const char *m = getenv("PLATEAU_NCCL_MAX_CTAS");
  if (m && *m) {
    char *end = NULL;
    long v = strtol(m, &end, 10);
    if (*end || v < 1 || v > 64)
      return pl_set_error(PL_EINVAL,
                          "PLATEAU_NCCL_MAX_CTAS=%s: must be an "
                          "integer in [1, 64]",
                          m);
    cfg->maxCTAs = (int)v;
  }
  return PL_OK;
}

extern "C" pl_status pl__nccl_create(pl_comm *c) {
  ncclConfig_t cfg;
  PL_TRY(nccl_config(&cfg));
  struct {
    int ok;
    ncclUniqueId id;
  } msg;
  memset(&msg, 0, sizeof msg);
  if (c->rank == 0)
    msg.ok = ncclGetUniqueId(&msg.id) == ncclSuccess;
  int w = pl__watch_begin(c, "nccl_init");
  int rc = MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, c->mpi);
  pl__watch_end(w);
  if (rc != MPI_SUCCESS)
    return pl_set_error(PL_ECOMM,
                        "pl_comm: MPI_Bcast of the NCCL id failed "
                        "(MPI error %d)",
                        rc);
  if (!msg.ok)
    return pl_set_error(PL_ECOMM, "pl_comm: ncclGetUniqueId failed on group "
                                  "rank 0");
  CUDA_TRY(cudaSetDevice(c->dev->ordinal), "pl_comm: cudaSetDevice");
  ncclComm_t comm = NULL;
  w = pl__watch_begin(c, "nccl_init");
  ncclResult_t r =
      ncclCommInitRankConfig(&comm, c->size, msg.id, c->rank, &cfg);
  pl__watch_end(w);
  if (r != ncclSuccess)
    return nccl_err(r, NULL, "pl_comm: ncclCommInitRankConfig");
  c->nccl = (void *)comm;
  return PL_OK;
}

/* Destroy the pooled events of a GPU (at comm destroy, while the device,
 * which must outlive its communicators, still exists). */
static void pool_flush(int ordinal) {
  pthread_mutex_lock(&g_pool_lock);
  cudaSetDevice(ordinal);
  for (int i = g_pool_n - 1; i >= 0; i--)
    if (g_pool[i].ordinal == ordinal) {
      cudaEventDestroy(g_pool[i].ev);
      g_pool[i] = g_pool[--g_pool_n];
    }
  pthread_mutex_unlock(&g_pool_lock);
}

extern "C" void pl__nccl_destroy(pl_comm *c) {
  if (!c->nccl)
    return;
  pool_flush(c->dev->ordinal); /* the caller drained c: all complete */
  void *comm = c->nccl;
  c->nccl = NULL; /* the watch below must not abort a half-destroyed comm */
  int w = pl__watch_begin(c, "nccl_destroy");
  ncclCommDestroy((ncclComm_t)comm);
  pl__watch_end(w);
}

extern "C" void pl__nccl_abort(void *nccl) {
  if (nccl)
    ncclCommAbort((ncclComm_t)nccl);
}

extern "C" int pl__nccl_event_query(void *event, int ordinal) {
  cudaSetDevice(ordinal); /* the watchdog thread has no current device */
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaSuccess)
    return 1;
  if (e == cudaErrorNotReady)
    return 0;
  fprintf(stderr, "[r? error] pl_comm: cudaEventQuery: %s (%s)\n",
          cudaGetErrorString(e), cudaGetErrorName(e));
  return -1;
}

/* Called for completed events: back to the pool (destroyed when full). */
extern "C" void pl__nccl_event_destroy(void *event, int ordinal) {
  pthread_mutex_lock(&g_pool_lock);
  if (g_pool_n < EVENT_POOL_MAX) {
    g_pool[g_pool_n].ev = (cudaEvent_t)event;
    g_pool[g_pool_n++].ordinal = ordinal;
    event = NULL;
  }
  pthread_mutex_unlock(&g_pool_lock);
  if (event) {
    cudaSetDevice(ordinal);
    cudaEventDestroy((cudaEvent_t)event);
  }
}

extern "C" pl_status pl__nccl_allreduce(pl_comm *c, const void *send,
                                        void *recv, size_t count, pl_dtype dt,
                                        pl_redop op, pl_stream *s) {
  if (count == 0)
    return PL_OK;
  ncclComm_t comm = (ncclComm_t)c->nccl;
  cudaStream_t st = stream_of(c, s);
  NCCL_TRY(
      ncclAllReduce(send, recv, count, nccl_type(dt), nccl_op(op), comm, st),
      comm, "pl_allreduce: ncclAllReduce");
  return watch_after(c, "allreduce", st);
}

extern "C" pl_status pl__nccl_allgather(pl_comm *c, const void *send,
                                        void *recv, size_t count, pl_dtype dt,
                                        pl_stream *s) {
  if (count == 0)
    return PL_OK;
  ncclComm_t comm = (ncclComm_t)c->nccl;
  cudaStream_t st = stream_of(c, s);
  NCCL_TRY(ncclAllGather(send, recv, count, nccl_type(dt), comm, st), comm,
           "pl_allgather: ncclAllGather");
  return watch_after(c, "allgather", st);
}

extern "C" pl_status pl__nccl_reduce_scatter(pl_comm *c, const void *send,
                                             void *recv, size_t count,
                                             pl_dtype dt, pl_redop op,
                                             pl_stream *s) {
  if (count == 0)
    return PL_OK;
  ncclComm_t comm = (ncclComm_t)c->nccl;
  cudaStream_t st = stream_of(c, s);
  NCCL_TRY(ncclReduceScatter(send, recv, count, nccl_type(dt), nccl_op(op),
                             comm, st),
           comm, "pl_reduce_scatter: ncclReduceScatter");
  return watch_after(c, "reduce_scatter", st);
}

/* Grouped point-to-point: ncclGroupEnd runs even after a failed post. */
extern "C" pl_status
pl__nccl_alltoallv(pl_comm *c, const void *send, const size_t *scounts,
                   const size_t *sdispls, void *recv, const size_t *rcounts,
                   const size_t *rdispls, pl_dtype dt, pl_stream *s) {
  ncclComm_t comm = (ncclComm_t)c->nccl;
  cudaStream_t st = stream_of(c, s);
  ncclDataType_t t = nccl_type(dt);
  size_t es = esize(dt);
  int posted = 0;
  NCCL_TRY(ncclGroupStart(), comm, "pl_alltoallv: ncclGroupStart");
  ncclResult_t first = ncclSuccess;
  for (int d = 0; d < c->size && first == ncclSuccess; d++) {
    if (scounts[d]) {
      first = ncclSend((const char *)send + sdispls[d] * es, scounts[d], t, d,
                       comm, st);
      posted++;
    }
    if (rcounts[d] && first == ncclSuccess) {
      first =
          ncclRecv((char *)recv + rdispls[d] * es, rcounts[d], t, d, comm, st);
      posted++;
    }
  }
  ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess)
    return nccl_err(first, comm, "pl_alltoallv: ncclSend/ncclRecv");
  if (end != ncclSuccess)
    return nccl_err(end, comm, "pl_alltoallv: group");
  if (!posted)
    return PL_OK;
  return watch_after(c, "alltoallv", st);
}

extern "C" pl_status pl__nccl_sendrecv(pl_comm *c, const void *send,
                                       size_t scount, int dst, void *recv,
                                       size_t rcount, int src, pl_dtype dt,
                                       pl_stream *s) {
  if (scount == 0 && rcount == 0)
    return PL_OK;
  ncclComm_t comm = (ncclComm_t)c->nccl;
  cudaStream_t st = stream_of(c, s);
  ncclDataType_t t = nccl_type(dt);
  NCCL_TRY(ncclGroupStart(), comm, "pl_sendrecv: ncclGroupStart");
  ncclResult_t first = ncclSuccess;
  if (scount)
    first = ncclSend(send, scount, t, dst, comm, st);
  if (rcount && first == ncclSuccess)
    first = ncclRecv(recv, rcount, t, src, comm, st);
  ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess)
    return nccl_err(first, comm, "pl_sendrecv: ncclSend/ncclRecv");
  if (end != ncclSuccess)
    return nccl_err(end, comm, "pl_sendrecv: group");
  return watch_after(c, "sendrecv", st);
}

extern "C" pl_status pl__nccl_broadcast(pl_comm *c, void *buf, size_t count,
                                        pl_dtype dt, int root, pl_stream *s) {
  if (count == 0)
    return PL_OK;
  ncclComm_t comm = (ncclComm_t)c->nccl;
  cudaStream_t st = stream_of(c, s);
  NCCL_TRY(ncclBroadcast(buf, buf, count, nccl_type(dt), root, comm, st), comm,
           "pl_broadcast: ncclBroadcast");
  return watch_after(c, "broadcast", st);
}
