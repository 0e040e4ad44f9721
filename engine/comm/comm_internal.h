/* comm_internal.h — what comm.c (MPI, dispatch), comm_watch.c (watchdog)
 * and comm_nccl.cu (NCCL, CUDA events) share.  Not installed; not part of the
 * public API.
 *
 * Why two files: the C compile has no CUDA include path, so every NCCL and
 * CUDA call lives in the .cu file (compiled only when nvcc is present) behind
 * the plain-C functions declared here under PL_HAVE_CUDA. */
#ifndef PLATEAU_COMM_INTERNAL_H
#define PLATEAU_COMM_INTERNAL_H

#include <mpi.h>

#include "core/internal.h"
#include "plateau/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pl_comm {
  MPI_Comm mpi;        /* a duplicate: our traffic never matches the user's */
  int rank, size;      /* in this group                                      */
  pl_dev *dev;         /* borrowed; must outlive the communicator           */
  double timeout_s;    /* watchdog deadline (floor) of each later operation */
  double bytes_per_s;  /* + bytes / this (0: the deadline is timeout_s)   */
  void *nccl;          /* ncclComm_t when dev is CUDA, else NULL            */
  int vsize;           /* > 0: a virtual group (comm_virtual.c): the caller
                          alone at seat 0 of vsize; 0: a real group          */
  pl_comm_stats stats; /* bytes moved (every group)                  */
  struct pl__vprof *vprof; /* stand-in spans of a virtual group          */
};

/* ---- process state (comm.c) --------------------------------------------
 * Set by pl_init, read by the watchdog.  Deadline floor and per-byte
 * allowance (comm_watch.c): with PLATEAU_COMM_TIMEOUT set, pl__bytes_per_s
 * is 0 (no allowance). */
extern int pl__world_rank, pl__world_size;
extern double pl__default_timeout, pl__bytes_per_s;

/* ---- watchdog (comm_watch.c) -------------------------------------------
 * A blocking operation (MPI, NCCL init/destroy) is bracketed by
 * pl__watch_begin/pl__watch_end; an enqueued NCCL operation hands its
 * completion event to pl__watch_event and the watchdog polls it.  A deadline
 * that passes prints the operation, group and rank, aborts NCCL and calls
 * MPI_Abort.  A slot of -1 (the watchdog could not be set up: the operation
 * runs unwatched) is accepted by pl__watch_end. */
int pl__watch_begin(const pl_comm *c, const char *op);
/* The same with the deadline timeout_s (c NULL: an operation of the world). */
int pl__watch_begin_t(const pl_comm *c, const char *op, double timeout_s);
/* The same with the deadline of an operation moving `bytes` on c. */
int pl__watch_begin_n(const pl_comm *c, const char *op, double bytes);
void pl__watch_end(int slot);
/* Takes ownership of `event` (a cudaEvent_t recorded after the op). */
pl_status pl__watch_event(const pl_comm *c, const char *op, void *event);
/* Wait until every watched event of c has completed (still under watch). */
void pl__watch_drain(const pl_comm *c);
/* Join the watchdog thread and free its table (pl_finalize). */
void pl__watch_stop(void);
/* MPI_Testall on req[0..n) until done without busy-polling a core for long;
 * returns MPI's code (st NULL: MPI_STATUSES_IGNORE). */
int pl__mpi_wait(int n, MPI_Request *req, MPI_Status *st);

/* ---- counting and virtual groups (comm_virtual.c) -----------------------
 * pl__count adds one call of op with the bytes sent and received; the
 * pl__virt_* run a data operation of a virtual group through its stand-in
 * on s (the device's stream when s is NULL), after comm.c has checked the
 * arguments and counted the call. */
void pl__count(pl_comm *c, pl_comm_op op, uint64_t sent, uint64_t recv);
void pl__virt_free(pl_comm *c);
pl_status pl__virt_allreduce(pl_comm *c, const void *send, void *recv,
                             size_t count, pl_dtype dt, pl_stream *s);
pl_status pl__virt_allgather(pl_comm *c, const void *send, void *recv,
                             size_t count, pl_dtype dt, pl_stream *s);
pl_status pl__virt_reduce_scatter(pl_comm *c, const void *send, void *recv,
                                  size_t count, pl_dtype dt, pl_stream *s);
pl_status pl__virt_alltoallv(pl_comm *c, const void *send,
                             const size_t *scounts, const size_t *sdispls,
                             void *recv, const size_t *rcounts,
                             const size_t *rdispls, pl_dtype dt, pl_stream *s);
pl_status pl__virt_sendrecv(pl_comm *c, const void *send, size_t scount,
                            void *recv, size_t rcount, pl_dtype dt,
                            pl_stream *s);

#if PL_HAVE_CUDA
/* ---- NCCL side (comm_nccl.cu) ------------------------------------------ */
void pl__nccl_version_str(char *buf, size_t len);
/* Collective over c->mpi: id from group rank 0, MPI_Bcast, ncclCommInitRank. */
pl_status pl__nccl_create(pl_comm *c);
void pl__nccl_destroy(pl_comm *c);
/* Abort (watchdog: a deadline passed). */
void pl__nccl_abort(void *nccl);
/* 1 done, 0 pending, -1 error (the error counts as "stalled"). */
int pl__nccl_event_query(void *event, int ordinal);
/* Release a watched event (kept in a pool for reuse, or destroyed). */
void pl__nccl_event_destroy(void *event, int ordinal);

pl_status pl__nccl_allreduce(pl_comm *c, const void *send, void *recv,
                             size_t count, pl_dtype dt, pl_redop op,
                             pl_stream *s);
pl_status pl__nccl_allgather(pl_comm *c, const void *send, void *recv,
                             size_t count, pl_dtype dt, pl_stream *s);
pl_status pl__nccl_reduce_scatter(pl_comm *c, const void *send, void *recv,
                                  size_t count, pl_dtype dt, pl_redop op,
                                  pl_stream *s);
pl_status pl__nccl_alltoallv(pl_comm *c, const void *send,
                             const size_t *scounts, const size_t *sdispls,
                             void *recv, const size_t *rcounts,
                             const size_t *rdispls, pl_dtype dt, pl_stream *s);
pl_status pl__nccl_sendrecv(pl_comm *c, const void *send, size_t scount,
                            int dst, void *recv, size_t rcount, int src,
                            pl_dtype dt, pl_stream *s);
pl_status pl__nccl_broadcast(pl_comm *c, void *buf, size_t count, pl_dtype dt,
                             int root, pl_stream *s);
#endif

#ifdef __cplusplus
}
#endif
#endif
