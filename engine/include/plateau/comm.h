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
                       const size_t *sdispls, void *recv, const size_t *rcounts,
                       const size_t *rdispls, pl_dtype dt, pl_stream *s);
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

/* ---- virtual groups (the one-GPU proxy, comm_virtual.c) -------------------
 * A virtual group of `vsize` members of which only the caller is present:
 * pl_comm_rank 0 (the caller's seat), pl_comm_size vsize.  Its collectives
 * take the same arguments, check the same things and count the same bytes
 * (below) as a real group's, and move the bytes that concern the absent
 * members through a local stand-in on the stream given (a device copy; the
 * caller's own data standing for the absent members', as the ZeRO-3 units
 * of a proxy are tiled):
 *   all-reduce      recv = send (the absent members add nothing to a sum;
 *                   max and min of equal values)
 *   all-gather      every block of recv = send (tiled)
 *   reduce-scatter  recv = block 0 of send (the caller's own contribution)
 *   all-to-all-v    block q of recv = block q of send (what the caller sent
 *                   to member q comes back as q's), min of the two counts,
 *                   the rest of the receive block zeroed
 *   send/recv       recv = send, likewise
 *   broadcast       buf unchanged
 *   host ops        all-reduce and broadcast leave the values, all-gather
 *                   tiles them, all-to-all gives every member's block the
 *                   caller's block to itself (each absent member sends the
 *                   caller what the caller sends itself: members that act
 *                   alike, as ranks routing alike do); barrier: nothing.
 * So shapes, buffers and tracked memory are those of a run with every member
 * present, and nothing waits for anyone.  No virtual group calls MPI (not
 * even to be made or destroyed), so any thread may make and use its own,
 * before pl_init too.  vsize >= 1; vsize 1 is a group of one: a world for
 * one thread (a dry device's step), whose pl_comm_split gives a group of
 * one again (color >= 0; else NULL).  pl_comm_split of a larger virtual
 * group is refused (PL_EUNSUPPORTED). */
pl_status pl_comm_virtual(pl_dev *dev, int vsize, pl_comm **out);
/* 1 for a virtual group, 0 for a real one. */
int pl_comm_is_virtual(const pl_comm *c);

/* ---- bytes moved, counted on every group ----------------------------------
 * Per data operation (the device collectives above; not the host ones),
 * the calls and the bytes this member sends to and receives from the other
 * members by the algorithm's payload (NCCL's ring for the reductions), the
 * same for a real group and a virtual one of the same size:
 *   all-reduce      2·(G−1)/G·count each way
 *   all-gather, reduce-scatter   (G−1)·count each way
 *   all-to-all-v    Σ over the other members of scounts / rcounts
 *   send/recv       scount unless dst is the caller, rcount unless src is
 *   broadcast       count received unless root; count sent unless the
 *                   member is the ring's last (root − 1)
 * (bytes of the dtype; G the group's size).  A virtual group also counts its
 * stand-in copies and, with the profile on, times each on its stream. */
typedef enum pl_comm_op {
  PL_COMM_ALLREDUCE = 0,
  PL_COMM_ALLGATHER,
  PL_COMM_REDUCE_SCATTER,
  PL_COMM_ALLTOALLV,
  PL_COMM_SENDRECV,
  PL_COMM_BROADCAST,
  PL_COMM_NOPS
} pl_comm_op;
/* "allreduce" "allgather" "reduce_scatter" "alltoallv" "sendrecv"
 * "broadcast" */
const char *pl_comm_op_name(int op);

typedef struct pl_comm_stats {
  uint64_t calls[PL_COMM_NOPS];
  uint64_t sent[PL_COMM_NOPS], recv[PL_COMM_NOPS]; /* bytes            */
  uint64_t standins;      /* stand-in copies (a virtual group)            */
  uint64_t standin_bytes; /* bytes they wrote                             */
} pl_comm_stats;
/* The counts since the group was made or last reset. */
void pl_comm_stats_get(const pl_comm *c, pl_comm_stats *out);
void pl_comm_stats_reset(pl_comm *c);
/* Events around every stand-in (a virtual group; off by default). */
pl_status pl_comm_set_profile(pl_comm *c, int on);
/* The stand-ins' time since the last call (the device must have finished
 * them), milliseconds: *on_ms those issued on stream `on` (the caller's
 * compute stream: exposed), *side_ms those on any other stream (beside the
 * compute, as the real transfer would be).  Either pointer may be NULL. */
pl_status pl_comm_take_standin_ms(pl_comm *c, const pl_stream *on,
                                  double *on_ms, double *side_ms);

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

/* Failure agreement before a collective (or a layer of them).  A rank that
 * failed locally (a tracked allocation over its arena's limit, a kernel)
 * must not leave the other members of c waiting in the next collective
 * until the watchdog ends the job.  Every member calls pl_agree with its
 * status so far right before the collective, whatever happened before (a
 * failed rank skips its own work but never an agreement): one host
 * all-reduce of an int64 (MAX of 0 ok, 1 out of memory, 2 other error), no
 * device sync, nothing allocated.  Where every member is fine it returns
 * PL_OK and the collective runs; otherwise no member enters it.  A failed
 * member keeps its own status and message; the others get PL_ENOMEM or
 * PL_ECOMM: "WHO: another rank of the group failed (out of memory|error)
 * before WHAT, which no rank entered" (WHAT with its article: "the
 * all-gather", "layer 3's forward").  c NULL or of one member: st as is. */
pl_status pl_agree(pl_comm *c, pl_status st, const char *who, const char *what);

#ifdef __cplusplus
}
#endif
#endif
