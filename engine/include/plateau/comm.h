/* comm.h — one communicator interface over MPI (CPU tensors) and NCCL (CUDA
 * tensors).
 *
 * A pl_comm always wraps an MPI communicator (bootstrap, and the transport for
 * the CPU backend).  When its device is CUDA it also holds an NCCL
 * communicator made from a unique id broadcast over MPI, and the data
 * operations below run on NCCL, enqueued on the given stream.  On the CPU
 * backend they run on MPI and complete before returning.
 *
 * No hang: every operation is watched.  If one does not complete within its
 * deadline (PLATEAU_COMM_TIMEOUT seconds, or pl_comm_set_timeout; unset: 120 s
 * plus 1 s per 100 MB the operation moves), a watchdog prints which
 * collective on which rank and group stalled, aborts NCCL, and calls
 * MPI_Abort so every rank exits; half way there it says the operation is
 * still waiting.  A rank waiting on MPI sleeps between polls after 100 ms
 * (it does not spin a core while a peer is stopped).
 *
 * Counts are elements of `dt`; buffers are memory of the communicator's device
 * (device arena on CUDA; any host memory on the CPU backend). */
#ifndef PLATEAU_COMM_H
#define PLATEAU_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "plateau/dev.h"
#include "plateau/status.h"
#include "plateau/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_comm pl_comm;

typedef enum pl_redop {
  PL_RED_SUM = 0,
  PL_RED_MAX = 1,
  PL_RED_MIN = 2,
} pl_redop;

/* MPI_Init_thread (MPI_THREAD_MULTIPLE is not required; FUNNELED is asked),
 * set the log rank, and check the launch: under Slurm (SLURM_NTASKS set) the
 * MPI world size must equal SLURM_NTASKS, else PL_EINVAL with a message (the
 * silent single-rank launch).  Calls no CUDA function.  Idempotent. */
pl_status pl_init(int *argc, char ***argv);
/* MPI_Finalize if pl_init initialized MPI. */
void pl_finalize(void);
int pl_world_rank(void);
int pl_world_size(void);
/* "Open MPI v4.1.4" / "NCCL 2.28.3" (or "-" when not built). */
const char *pl_mpi_version(void);
const char *pl_nccl_version(void);

/* The world communicator for `dev` (NCCL created collectively when dev is
 * CUDA).  Collective over MPI_COMM_WORLD. */
pl_status pl_comm_world(pl_dev *dev, pl_comm **out);
/* Split by color (>= 0), ordered by key; collective over `c`.  Ranks passing
 * color < 0 get *out = NULL. */
pl_status pl_comm_split(pl_comm *c, int color, int key, pl_comm **out);
void pl_comm_destroy(pl_comm *c);
int pl_comm_rank(const pl_comm *c);
int pl_comm_size(const pl_comm *c);
pl_dev *pl_comm_dev(const pl_comm *c);
/* Deadline of every later operation on c, exactly (no per-byte
 * allowance); seconds > 0. */
pl_status pl_comm_set_timeout(pl_comm *c, double seconds);

/* recv = op over ranks of send (in place when send == recv). */
pl_status pl_allreduce(pl_comm *c, const void *send, void *recv, size_t count,
                       pl_dtype dt, pl_redop op, pl_stream *s);
/* recv (size·count) = concatenation of every rank's send (count). */
pl_status pl_allgather(pl_comm *c, const void *send, void *recv, size_t count,
                       pl_dtype dt, pl_stream *s);
/* send (size·count) reduced; rank r receives block r (count). */
pl_status pl_reduce_scatter(pl_comm *c, const void *send, void *recv,
                            size_t count, pl_dtype dt, pl_redop op,
                            pl_stream *s);
/* Uneven all-to-all: rank r sends scounts[d] elements from send + sdispls[d]
 * to rank d, and receives rcounts[q] elements from rank q at recv + rdispls[q].
 * Zero counts are allowed; the count arrays live in host memory. */
pl_status pl_alltoallv(pl_comm *c, const void *send, const size_t *scounts,
                       const size_t *sdispls, void *recv,
                       const size_t *rcounts, const size_t *rdispls,
                       pl_dtype dt, pl_stream *s);
/* One ring hop: send `scount` to rank dst while receiving `rcount` from src
 * (either count may be 0; dst/src may be the caller itself). */
pl_status pl_sendrecv(pl_comm *c, const void *send, size_t scount, int dst,
                      void *recv, size_t rcount, int src, pl_dtype dt,
                      pl_stream *s);
pl_status pl_broadcast(pl_comm *c, void *buf, size_t count, pl_dtype dt,
                       int root, pl_stream *s);
/* Barrier over the ranks of the group (host side; it does not wait for device
 * streams: synchronize them first where that matters). */
pl_status pl_barrier(pl_comm *c);

/* Small host-memory collectives on MPI whatever the backend: planning data
 * (counts, budgets) that the host needs anyway. */
pl_status pl_host_allreduce_i64(pl_comm *c, int64_t *vals, size_t n,
                                pl_redop op);
pl_status pl_host_allreduce_f64(pl_comm *c, double *vals, size_t n,
                                pl_redop op);
pl_status pl_host_allgather_i64(pl_comm *c, const int64_t *send, size_t n,
                                int64_t *recv);
pl_status pl_host_alltoall_i64(pl_comm *c, const int64_t *send, size_t n,
                               int64_t *recv);
pl_status pl_host_bcast(pl_comm *c, void *buf, size_t bytes, int root);

#ifdef __cplusplus
}
#endif
#endif
