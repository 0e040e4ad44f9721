/* comm.c — the communicator: MPI start-up and launch check, the MPI transport
 * of the CPU backend, the host collectives and dispatch to NCCL (comm_nccl.cu)
 * for CUDA devices.  Every operation runs under the watchdog (comm_watch.c:
 * a stalled collective becomes an abort of every rank instead of a hang; its
 * deadlines and the wait of the MPI operations are described there).
 *
 * Choices made here (documented for users of comm.h):
 *  - MPI counts are int: on the MPI path a count or displacement above INT_MAX
 *    elements is refused with PL_EINVAL naming the value (no chunking; the CPU
 *    backend runs small sizes).  NCCL (CUDA) takes size_t counts as given.
 *  - bf16 travels as MPI_UINT16_T; sum/max/min are user-defined MPI_Ops that
 *    widen to f32, combine, and round back with pl_f32_to_bf16 — one rounding
 *    per combining step, as NCCL's bf16 reductions do.
 *  - In place: all-reduce when send == recv; all-gather when send == recv +
 *    rank·count; reduce-scatter when recv == send + rank·count (NCCL's
 *    convention; on MPI the first block of send is used as scratch).
 *  - Every communicator holds an MPI_Comm_dup with MPI_ERRORS_RETURN, so MPI
 *    failures come back as PL_ECOMM with MPI's message.
 *  - On a dry device (backend/dry) the data operations are counted and move
 *    nothing (their buffers are not backed); the host collectives run as
 *    always, since the counts they carry decide the step's sizes. */
#include "comm/comm_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plateau/host_device.h"
#include "plateau/log.h"

#define PL_SENDRECV_TAG 0x504c /* "PL" */

/* ---- process state ------------------------------------------------------- */

static int g_inited;            /* pl_init ran                              */
static pl_status g_init_status; /* its result (pl_init is idempotent)      */
static char g_init_msg[512];    /* its message when it failed              */
static int g_we_init_mpi;       /* pl_init called MPI_Init_thread          */
int pl__world_rank = 0, pl__world_size = 1;
/* Deadline floor and per-byte allowance (see comm_watch.c): with
 * PLATEAU_COMM_TIMEOUT set, pl__bytes_per_s is 0 (no allowance). */
double pl__default_timeout = 120.0;
double pl__bytes_per_s = 1e8;
static MPI_Op g_bf16_op[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

static pl_status mpi_check(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return PL_OK;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    len = 0;
  msg[len] = '\0';
  return pl_set_error(PL_ECOMM, "%s: MPI error %d: %s", what, rc, msg);
}

/* ---- bf16 reductions for MPI --------------------------------------------- */

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const pl_bf16 *a = in;
  pl_bf16 *b = inout;
  for (int i = 0; i < *len; i++)
    b[i] = pl_f32_to_bf16(pl_bf16_to_f32(a[i]) + pl_bf16_to_f32(b[i]));
}

static void bf16_max(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const pl_bf16 *a = in;
  pl_bf16 *b = inout;
  for (int i = 0; i < *len; i++)
    if (pl_bf16_to_f32(a[i]) > pl_bf16_to_f32(b[i]))
      b[i] = a[i];
}

static void bf16_min(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const pl_bf16 *a = in;
  pl_bf16 *b = inout;
  for (int i = 0; i < *len; i++)
    if (pl_bf16_to_f32(a[i]) < pl_bf16_to_f32(b[i]))
      b[i] = a[i];
}

/* ---- start-up
 * ----------------------------------------------------------------- */

static pl_status init_fail(pl_status s) {
  snprintf(g_init_msg, sizeof g_init_msg, "%s", pl_last_error());
  g_init_status = s;
  return s;
}

pl_status pl_init(int *argc, char ***argv) {
  if (g_inited) {
    if (g_init_status != PL_OK)
      return pl_set_error(g_init_status, "%s", g_init_msg);
    return PL_OK;
  }
  g_inited = 1;
  g_init_status = PL_OK;

  int flag = 0;
  MPI_Finalized(&flag);
  if (flag)
    return init_fail(pl_set_error(PL_ECOMM, "pl_init: MPI was already "
                                            "finalized; it cannot restart"));
  MPI_Initialized(&flag);
  if (!flag) {
    int provided = 0;
    pl_status st =
        mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
                  "pl_init: MPI_Init_thread");
    if (st != PL_OK)
      return init_fail(st);
    g_we_init_mpi = 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &pl__world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &pl__world_size);
  pl_log_set_rank(pl__world_rank);

  MPI_User_function *fns[3] = {bf16_sum, bf16_max, bf16_min};
  for (int i = 0; i < 3; i++) {
    pl_status st = mpi_check(MPI_Op_create(fns[i], 1, &g_bf16_op[i]),
                             "pl_init: MPI_Op_create (bf16)");
    if (st != PL_OK)
      return init_fail(st);
  }

  const char *t = getenv("PLATEAU_COMM_TIMEOUT");
  if (t && *t) {
    char *end = NULL;
    errno = 0;
    double v = strtod(t, &end);
    if (errno || end == t || *end != '\0' || !isfinite(v) || v <= 0)
      return init_fail(pl_set_error(PL_EINVAL,
                                    "PLATEAU_COMM_TIMEOUT=%s: must be a number "
                                    "of seconds > 0",
                                    t));
    pl__default_timeout = v;
    pl__bytes_per_s = 0; /* exactly the deadline asked for */
  }

  /* The silent single-rank launch: `sbatch -n 4` running the program
   * directly (or mpirun -np 1) gives world size 1 while Slurm planned 4. */
  const char *nt = getenv("SLURM_NTASKS");
  if (nt && *nt) {
    char *end = NULL;
    errno = 0;
    long n = strtol(nt, &end, 10);
    if (errno || end == nt || *end != '\0' || n <= 0)
      return init_fail(pl_set_error(
          PL_EINVAL, "SLURM_NTASKS=%s: not a positive integer", nt));
    if (n != pl__world_size)
      return init_fail(pl_set_error(
          PL_EINVAL,
          "launched with %d MPI rank%s but SLURM_NTASKS=%ld: start with "
          "srun --mpi=pmix (or mpirun inside the allocation) so that every "
          "Slurm task is an MPI rank",
          pl__world_size, pl__world_size == 1 ? "" : "s", n));
  }
  return PL_OK;
}

void pl_finalize(void) {
  if (!g_inited)
    return;
  for (int i = 0; i < 3; i++)
    if (g_bf16_op[i] != MPI_OP_NULL)
      MPI_Op_free(&g_bf16_op[i]);
  int fin = 0;
  MPI_Finalized(&fin);
  if (g_we_init_mpi && !fin) {
    /* A rank that skipped a collective makes MPI_Finalize hang too. */
    int w = pl__watch_begin_t(NULL, "finalize", pl__default_timeout);
    MPI_Finalize();
    pl__watch_end(w);
  }
  pl__watch_stop();
  g_inited = 0;
  g_we_init_mpi = 0;
}

int pl_world_rank(void) {
  return pl__world_rank;
}
int pl_world_size(void) {
  return pl__world_size;
}

const char *pl_mpi_version(void) {
  static char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  if (!buf[0]) {
    int len = 0;
    if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) {
      snprintf(buf, sizeof buf, "MPI (unknown)");
      return buf;
    }
    buf[len < (int)sizeof buf ? len : (int)sizeof buf - 1] = '\0';
    /* "Open MPI v4.1.4, package: Debian OpenMPI, ident: ..." -> up to ','
     * (other MPIs: first line). */
    size_t cut = strcspn(buf, ",\n");
    buf[cut] = '\0';
    while (cut > 0 && (buf[cut - 1] == ' ' || buf[cut - 1] == '\t'))
      buf[--cut] = '\0';
  }
  return buf;
}

const char *pl_nccl_version(void) {
#if PL_HAVE_CUDA
  static char buf[64];
  if (!buf[0])
    pl__nccl_version_str(buf, sizeof buf);
  return buf;
#else
  return "-";
#endif
}

/* ---- communicators
 * ------------------------------------------------------------- */

/* NCCL refuses two ranks on one GPU with "invalid usage" deep in its
 * set-up: count the group's ranks on each node against the GPUs visible
 * there first, and refuse on every rank with the numbers. */
static pl_status gpus_per_rank(pl_comm *c) {
  MPI_Comm node = MPI_COMM_NULL;
  int w = pl__watch_begin(c, "comm_gpus");
  int rc = MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, c->rank,
                               MPI_INFO_NULL, &node);
  int local = 1;
  if (rc == MPI_SUCCESS)
    MPI_Comm_size(node, &local);
  const int ngpu = pl_cuda_device_count();
  int64_t bad[2] = {local > ngpu ? local : 0, local > ngpu ? ngpu : INT_MAX};
  if (rc == MPI_SUCCESS) {
    int64_t worst[2];
    rc = MPI_Allreduce(&bad[0], &worst[0], 1, MPI_INT64_T, MPI_MAX, c->mpi);
    if (rc == MPI_SUCCESS)
      rc = MPI_Allreduce(&bad[1], &worst[1], 1, MPI_INT64_T, MPI_MIN, c->mpi);
    bad[0] = worst[0], bad[1] = worst[1];
  }
  pl__watch_end(w);
  if (node != MPI_COMM_NULL)
    MPI_Comm_free(&node);
  PL_TRY(mpi_check(rc, "pl_comm: counting the ranks per node"));
  if (bad[0])
    return pl_set_error(PL_EUNSUPPORTED,
                        "pl_comm: %lld ranks on one node share %lld visible "
                        "GPU(s): NCCL needs one GPU per rank (run at most "
                        "%lld ranks per node, or use the CPU backend)",
                        (long long)bad[0], (long long)bad[1],
                        (long long)bad[1]);
  return PL_OK;
}

static pl_status comm_make(MPI_Comm m, pl_dev *dev, double timeout_s,
                           pl_comm **out) {
  pl_comm *c = calloc(1, sizeof *c);
  if (!c) {
    MPI_Comm_free(&m);
    return pl_set_error(PL_ENOMEM, "pl_comm: no host memory for the handle");
  }
  c->mpi = m;
  c->dev = dev;
  c->timeout_s = timeout_s;
  c->bytes_per_s = pl__bytes_per_s;
  MPI_Comm_rank(m, &c->rank);
  MPI_Comm_size(m, &c->size);
  pl_status st = mpi_check(MPI_Comm_set_errhandler(m, MPI_ERRORS_RETURN),
                           "pl_comm: MPI_Comm_set_errhandler");
  if (st == PL_OK && pl_dev_backend(dev) == PL_BACKEND_CUDA)
    st = gpus_per_rank(c);
  if (st == PL_OK && pl_dev_backend(dev) == PL_BACKEND_CUDA) {
#if PL_HAVE_CUDA
    st = pl__nccl_create(c);
#else
    st = pl_set_error(PL_EUNSUPPORTED,
                      "pl_comm: a CUDA device in a build without CUDA");
#endif
  }
  if (st != PL_OK) {
    MPI_Comm_free(&c->mpi);
    free(c);
    return st;
  }
  *out = c;
  return PL_OK;
}

pl_status pl_comm_world(pl_dev *dev, pl_comm **out) {
  if (!out)
    return pl_set_error(PL_EINVAL, "pl_comm_world: out is NULL");
  *out = NULL;
  if (!dev)
    return pl_set_error(PL_EINVAL, "pl_comm_world: dev is NULL");
  if (!g_inited || g_init_status != PL_OK)
    return pl_set_error(PL_EINVAL,
                        "pl_comm_world: call pl_init first (and check it)");
  MPI_Comm m = MPI_COMM_NULL;
  int w = pl__watch_begin_t(NULL, "comm_world", pl__default_timeout);
  pl_status st = mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &m),
                           "pl_comm_world: MPI_Comm_dup");
  pl__watch_end(w);
  PL_TRY(st);
  return comm_make(m, dev, pl__default_timeout, out);
}

pl_status pl_comm_split(pl_comm *c, int color, int key, pl_comm **out) {
  if (!out)
    return pl_set_error(PL_EINVAL, "pl_comm_split: out is NULL");
  *out = NULL;
  if (!c)
    return pl_set_error(PL_EINVAL, "pl_comm_split: c is NULL");
  if (c->vsize == 1) { /* a group of one splits into a group of one */
    if (color < 0)
      return PL_OK;
    pl_status st = pl_comm_virtual(c->dev, 1, out);
    if (st == PL_OK)
      (*out)->timeout_s = c->timeout_s, (*out)->bytes_per_s = c->bytes_per_s;
    return st;
  }
  if (c->vsize)
    return pl_set_error(PL_EUNSUPPORTED,
                        "pl_comm_split: a virtual group of %d (one member "
                        "present) cannot be split",
                        c->vsize);
  MPI_Comm m = MPI_COMM_NULL;
  int w = pl__watch_begin(c, "comm_split");
  pl_status st = mpi_check(
      MPI_Comm_split(c->mpi, color < 0 ? MPI_UNDEFINED : color, key, &m),
      "pl_comm_split: MPI_Comm_split");
  pl__watch_end(w);
  PL_TRY(st);
  if (m == MPI_COMM_NULL)
    return PL_OK;
  pl_status st2 = comm_make(m, c->dev, c->timeout_s, out);
  if (st2 == PL_OK)
    (*out)->bytes_per_s = c->bytes_per_s;
  return st2;
}

void pl_comm_destroy(pl_comm *c) {
  if (!c)
    return;
#if PL_HAVE_CUDA
  if (c->nccl) {
    pl__watch_drain(c);
    pl__nccl_destroy(c);
  }
#endif
  pl__virt_free(c);
  if (c->mpi != MPI_COMM_NULL)
    MPI_Comm_free(&c->mpi);
  free(c);
}

int pl_comm_rank(const pl_comm *c) {
  return c ? c->rank : -1;
}
int pl_comm_size(const pl_comm *c) {
  return c ? c->size : 0;
}
pl_dev *pl_comm_dev(const pl_comm *c) {
  return c ? c->dev : NULL;
}

pl_status pl_comm_set_timeout(pl_comm *c, double seconds) {
  if (!c)
    return pl_set_error(PL_EINVAL, "pl_comm_set_timeout: c is NULL");
  if (!isfinite(seconds) || seconds <= 0)
    return pl_set_error(PL_EINVAL,
                        "pl_comm_set_timeout: seconds=%g: must be finite "
                        "and > 0",
                        seconds);
  c->timeout_s = seconds;
  c->bytes_per_s = 0; /* exactly the deadline asked for */
  return PL_OK;
}

/* ---- argument checks shared by both transports
 * ---------------------------------- */

static pl_status check_common(const char *fn, const pl_comm *c, pl_dtype dt,
                              const pl_stream *s) {
  if (!c)
    return pl_set_error(PL_EINVAL, "%s: c is NULL", fn);
  if ((int)dt < PL_F32 || (int)dt > PL_I64)
    return pl_set_error(PL_EINVAL,
                        "%s: dtype %d: must be f32, bf16, i32 or "
                        "i64",
                        fn, (int)dt);
  if (s && s->dev != c->dev)
    return pl_set_error(PL_EINVAL,
                        "%s: the stream belongs to another device "
                        "than the communicator's",
                        fn);
  return PL_OK;
}

static pl_status check_op(const char *fn, pl_redop op) {
  if ((int)op < PL_RED_SUM || (int)op > PL_RED_MIN)
    return pl_set_error(PL_EINVAL, "%s: op %d: must be sum, max or min", fn,
                        (int)op);
  return PL_OK;
}

static pl_status check_buf(const char *fn, const char *name, const void *p,
                           size_t count) {
  if (!p && count > 0)
    return pl_set_error(PL_EINVAL, "%s: %s is NULL with %zu elements", fn, name,
                        count);
  return PL_OK;
}

static pl_status check_rank(const char *fn, const char *name, int r,
                            const pl_comm *c) {
  if (r < 0 || r >= c->size)
    return pl_set_error(PL_EINVAL, "%s: %s=%d: must be in [0, %d)", fn, name, r,
                        c->size);
  return PL_OK;
}

/* MPI path only: counts are int. */
static pl_status check_int(const char *fn, const char *name, size_t v) {
  if (v > (size_t)INT_MAX)
    return pl_set_error(PL_EINVAL,
                        "%s: %s=%zu: the MPI path takes at most "
                        "INT_MAX (%d) elements",
                        fn, name, v, INT_MAX);
  return PL_OK;
}

static MPI_Datatype mpi_type(pl_dtype dt) {
  switch (dt) {
  case PL_F32:
    return MPI_FLOAT;
  case PL_BF16:
    return MPI_UINT16_T;
  case PL_I32:
    return MPI_INT32_T;
  case PL_I64:
    return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

static MPI_Op mpi_op(pl_dtype dt, pl_redop op) {
  if (dt == PL_BF16)
    return g_bf16_op[op];
  return op == PL_RED_SUM ? MPI_SUM : op == PL_RED_MAX ? MPI_MAX : MPI_MIN;
}

static size_t esize(pl_dtype dt) {
  return dt == PL_F32 || dt == PL_I32 ? 4 : dt == PL_BF16 ? 2 : 8;
}

static pl_status need_init(const char *fn) {
  if (g_bf16_op[0] == MPI_OP_NULL)
    return pl_set_error(PL_EINVAL, "%s: call pl_init first", fn);
  return PL_OK;
}

/* ---- data operations
 * ------------------------------------------------------------- */

/* An NCCL operation is watched twice: on the host while it is being enqueued
 * (NCCL can block there, e.g. connecting to a peer that never arrives on the
 * first operation) and on the device until its completion event fires. */
#define WATCHED_NCCL(c, name, call)                                            \
  do {                                                                         \
    int w_ = pl__watch_begin((c), name);                                       \
    pl_status st_ = (call);                                                    \
    pl__watch_end(w_);                                                         \
    return st_;                                                                \
  } while (0)

pl_status pl_allreduce(pl_comm *c, const void *send, void *recv, size_t count,
                       pl_dtype dt, pl_redop op, pl_stream *s) {
  const char *fn = "pl_allreduce";
  PL_TRY(check_common(fn, c, dt, s));
  PL_TRY(check_op(fn, op));
  PL_TRY(check_buf(fn, "send", send, count));
  PL_TRY(check_buf(fn, "recv", recv, count));
  const uint64_t b = (uint64_t)count * esize(dt);
  pl__count(c, PL_COMM_ALLREDUCE, 2 * (c->size - 1) * b / c->size,
            2 * (c->size - 1) * b / c->size);
  if (c->vsize)
    return pl__virt_allreduce(c, send, recv, count, dt, s);
  if (pl__dev_dry(c->dev))
    return PL_OK; /* dry: no data to move */
#if PL_HAVE_CUDA
  if (c->nccl)
    WATCHED_NCCL(c, "allreduce",
                 pl__nccl_allreduce(c, send, recv, count, dt, op, s));
#endif
  PL_TRY(need_init(fn));
  PL_TRY(check_int(fn, "count", count));
  int w = pl__watch_begin_n(c, "allreduce", (double)count * esize(dt));
  MPI_Request rq;
  int rc = MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count,
                          mpi_type(dt), mpi_op(dt, op), c->mpi, &rq);
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(1, &rq, NULL);
  pl__watch_end(w);
  return mpi_check(rc, fn);
}

pl_status pl_allgather(pl_comm *c, const void *send, void *recv, size_t count,
                       pl_dtype dt, pl_stream *s) {
  const char *fn = "pl_allgather";
  PL_TRY(check_common(fn, c, dt, s));
  PL_TRY(check_buf(fn, "send", send, count));
  PL_TRY(check_buf(fn, "recv", recv, count));
  const uint64_t b = (uint64_t)count * esize(dt) * (uint64_t)(c->size - 1);
  pl__count(c, PL_COMM_ALLGATHER, b, b);
  if (c->vsize)
    return pl__virt_allgather(c, send, recv, count, dt, s);
  if (pl__dev_dry(c->dev))
    return PL_OK; /* dry: no data to move */
#if PL_HAVE_CUDA
  if (c->nccl)
    WATCHED_NCCL(c, "allgather",
                 pl__nccl_allgather(c, send, recv, count, dt, s));
#endif
  PL_TRY(need_init(fn));
  PL_TRY(check_int(fn, "count", count));
  const void *sb = send;
  if (count && send == (const char *)recv + (size_t)c->rank * count * esize(dt))
    sb = MPI_IN_PLACE;
  int w =
      pl__watch_begin_n(c, "allgather", (double)count * esize(dt) * c->size);
  MPI_Request rq;
  int rc = MPI_Iallgather(sb, (int)count, mpi_type(dt), recv, (int)count,
                          mpi_type(dt), c->mpi, &rq);
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(1, &rq, NULL);
  pl__watch_end(w);
  return mpi_check(rc, fn);
}

pl_status pl_reduce_scatter(pl_comm *c, const void *send, void *recv,
                            size_t count, pl_dtype dt, pl_redop op,
                            pl_stream *s) {
  const char *fn = "pl_reduce_scatter";
  PL_TRY(check_common(fn, c, dt, s));
  PL_TRY(check_op(fn, op));
  PL_TRY(check_buf(fn, "send", send, count));
  PL_TRY(check_buf(fn, "recv", recv, count));
  const uint64_t b = (uint64_t)count * esize(dt) * (uint64_t)(c->size - 1);
  pl__count(c, PL_COMM_REDUCE_SCATTER, b, b);
  if (c->vsize)
    return pl__virt_reduce_scatter(c, send, recv, count, dt, s);
  if (pl__dev_dry(c->dev))
    return PL_OK; /* dry: no data to move */
#if PL_HAVE_CUDA
  if (c->nccl)
    WATCHED_NCCL(c, "reduce_scatter",
                 pl__nccl_reduce_scatter(c, send, recv, count, dt, op, s));
#endif
  PL_TRY(need_init(fn));
  PL_TRY(check_int(fn, "count", count));
  size_t bytes = count * esize(dt);
  int inplace = count && (const char *)recv ==
                             (const char *)send + (size_t)c->rank * bytes;
  int w = pl__watch_begin_n(c, "reduce_scatter", (double)bytes * c->size);
  int rc;
  MPI_Request rq;
  if (inplace) {
    /* MPI_IN_PLACE takes the input from recvbuf and leaves block `rank`'s
     * result at its start: run it on send, then move the block home. */
    rc = MPI_Ireduce_scatter_block(MPI_IN_PLACE, (void *)send, (int)count,
                                   mpi_type(dt), mpi_op(dt, op), c->mpi, &rq);
    if (rc == MPI_SUCCESS)
      rc = pl__mpi_wait(1, &rq, NULL);
    if (rc == MPI_SUCCESS && c->rank != 0)
      memmove(recv, send, bytes);
  } else {
    rc = MPI_Ireduce_scatter_block(send, recv, (int)count, mpi_type(dt),
                                   mpi_op(dt, op), c->mpi, &rq);
    if (rc == MPI_SUCCESS)
      rc = pl__mpi_wait(1, &rq, NULL);
  }
  pl__watch_end(w);
  return mpi_check(rc, fn);
}

pl_status pl_alltoallv(pl_comm *c, const void *send, const size_t *scounts,
                       const size_t *sdispls, void *recv, const size_t *rcounts,
                       const size_t *rdispls, pl_dtype dt, pl_stream *s) {
  const char *fn = "pl_alltoallv";
  PL_TRY(check_common(fn, c, dt, s));
  if (!scounts || !sdispls || !rcounts || !rdispls)
    return pl_set_error(PL_EINVAL,
                        "%s: a count or displacement array is "
                        "NULL",
                        fn);
  size_t stot = 0, rtot = 0;
  for (int d = 0; d < c->size; d++) {
    stot += scounts[d];
    rtot += rcounts[d];
  }
  PL_TRY(check_buf(fn, "send", send, stot));
  PL_TRY(check_buf(fn, "recv", recv, rtot));
  pl__count(c, PL_COMM_ALLTOALLV,
            (uint64_t)(stot - scounts[c->rank]) * esize(dt),
            (uint64_t)(rtot - rcounts[c->rank]) * esize(dt));
  if (c->vsize)
    return pl__virt_alltoallv(c, send, scounts, sdispls, recv, rcounts, rdispls,
                              dt, s);
  if (pl__dev_dry(c->dev))
    return PL_OK; /* dry: no data to move */
#if PL_HAVE_CUDA
  if (c->nccl)
    WATCHED_NCCL(c, "alltoallv",
                 pl__nccl_alltoallv(c, send, scounts, sdispls, recv, rcounts,
                                    rdispls, dt, s));
#endif
  PL_TRY(need_init(fn));
  int P = c->size;
  int *iv = malloc(4 * (size_t)P * sizeof *iv); /* counts, not tensor data */
  if (!iv)
    return pl_set_error(PL_ENOMEM, "%s: no host memory for %d counts", fn,
                        4 * P);
  pl_status st = PL_OK;
  const size_t *src[4] = {scounts, sdispls, rcounts, rdispls};
  const char *names[4] = {"scounts", "sdispls", "rcounts", "rdispls"};
  for (int a = 0; a < 4; a++)
    for (int d = 0; d < P; d++) {
      if (src[a][d] > (size_t)INT_MAX) {
        st = pl_set_error(PL_EINVAL,
                          "%s: %s[%d]=%zu: the MPI path takes at "
                          "most INT_MAX (%d) elements",
                          fn, names[a], d, src[a][d], INT_MAX);
        goto done;
      }
      iv[a * P + d] = (int)src[a][d];
    }
  int w = pl__watch_begin_n(c, "alltoallv", (double)(stot + rtot) * esize(dt));
  MPI_Request rq;
  int rc = MPI_Ialltoallv(send, iv, iv + P, mpi_type(dt), recv, iv + 2 * P,
                          iv + 3 * P, mpi_type(dt), c->mpi, &rq);
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(1, &rq, NULL);
  pl__watch_end(w);
  st = mpi_check(rc, fn);
done:
  free(iv);
  return st;
}

pl_status pl_sendrecv(pl_comm *c, const void *send, size_t scount, int dst,
                      void *recv, size_t rcount, int src, pl_dtype dt,
                      pl_stream *s) {
  const char *fn = "pl_sendrecv";
  PL_TRY(check_common(fn, c, dt, s));
  PL_TRY(check_rank(fn, "dst", dst, c));
  PL_TRY(check_rank(fn, "src", src, c));
  PL_TRY(check_buf(fn, "send", send, scount));
  PL_TRY(check_buf(fn, "recv", recv, rcount));
  pl__count(c, PL_COMM_SENDRECV,
            dst != c->rank ? (uint64_t)scount * esize(dt) : 0,
            src != c->rank ? (uint64_t)rcount * esize(dt) : 0);
  if (c->vsize)
    return pl__virt_sendrecv(c, send, scount, recv, rcount, dt, s);
  if (pl__dev_dry(c->dev))
    return PL_OK; /* dry: no data to move */
#if PL_HAVE_CUDA
  if (c->nccl)
    WATCHED_NCCL(
        c, "sendrecv",
        pl__nccl_sendrecv(c, send, scount, dst, recv, rcount, src, dt, s));
#endif
  PL_TRY(need_init(fn));
  PL_TRY(check_int(fn, "scount", scount));
  PL_TRY(check_int(fn, "rcount", rcount));
  MPI_Status status[2];
  MPI_Request rq[2];
  int w =
      pl__watch_begin_n(c, "sendrecv", (double)(scount + rcount) * esize(dt));
  int rc = MPI_Irecv(recv, (int)rcount, mpi_type(dt), src, PL_SENDRECV_TAG,
                     c->mpi, &rq[0]);
  if (rc == MPI_SUCCESS)
    rc = MPI_Isend(send, (int)scount, mpi_type(dt), dst, PL_SENDRECV_TAG,
                   c->mpi, &rq[1]);
  else
    rq[1] = MPI_REQUEST_NULL;
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(2, rq, status);
  pl__watch_end(w);
  PL_TRY(mpi_check(rc, fn));
  int got = 0;
  MPI_Get_count(&status[0], mpi_type(dt), &got);
  if ((size_t)got != rcount)
    return pl_set_error(PL_ECOMM,
                        "%s: expected %zu elements from rank %d, "
                        "received %d",
                        fn, rcount, src, got);
  return PL_OK;
}

pl_status pl_broadcast(pl_comm *c, void *buf, size_t count, pl_dtype dt,
                       int root, pl_stream *s) {
  const char *fn = "pl_broadcast";
  PL_TRY(check_common(fn, c, dt, s));
  PL_TRY(check_rank(fn, "root", root, c));
  PL_TRY(check_buf(fn, "buf", buf, count));
  const uint64_t b = (uint64_t)count * esize(dt);
  pl__count(c, PL_COMM_BROADCAST,
            c->rank != (root - 1 + c->size) % c->size ? b : 0,
            c->rank != root ? b : 0);
  if (c->vsize)
    return PL_OK; /* the absent root's data: ours stands in */
  if (pl__dev_dry(c->dev))
    return PL_OK; /* dry: no data to move */
#if PL_HAVE_CUDA
  if (c->nccl)
    WATCHED_NCCL(c, "broadcast",
                 pl__nccl_broadcast(c, buf, count, dt, root, s));
#endif
  PL_TRY(need_init(fn));
  PL_TRY(check_int(fn, "count", count));
  int w = pl__watch_begin_n(c, "broadcast", (double)count * esize(dt));
  MPI_Request rq;
  int rc = MPI_Ibcast(buf, (int)count, mpi_type(dt), root, c->mpi, &rq);
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(1, &rq, NULL);
  pl__watch_end(w);
  return mpi_check(rc, fn);
}

pl_status pl_barrier(pl_comm *c) {
  if (!c)
    return pl_set_error(PL_EINVAL, "pl_barrier: c is NULL");
  if (c->vsize)
    return PL_OK;
  int w = pl__watch_begin(c, "barrier");
  MPI_Request rq;
  int rc = MPI_Ibarrier(c->mpi, &rq);
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(1, &rq, NULL);
  pl__watch_end(w);
  return mpi_check(rc, "pl_barrier");
}

/* ---- host collectives (MPI whatever the backend)
 * --------------------------------- */

static pl_status host_allreduce(const char *fn, const char *op_name, pl_comm *c,
                                void *vals, size_t n, MPI_Datatype t,
                                pl_redop op) {
  if (!c)
    return pl_set_error(PL_EINVAL, "%s: c is NULL", fn);
  PL_TRY(check_op(fn, op));
  PL_TRY(check_buf(fn, "vals", vals, n));
  PL_TRY(check_int(fn, "n", n));
  if (c->vsize)
    return PL_OK; /* the absent members add nothing */
  MPI_Op o = op == PL_RED_SUM ? MPI_SUM : op == PL_RED_MAX ? MPI_MAX : MPI_MIN;
  int w = pl__watch_begin(c, op_name);
  MPI_Request rq;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, vals, (int)n, t, o, c->mpi, &rq);
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(1, &rq, NULL);
  pl__watch_end(w);
  return mpi_check(rc, fn);
}

pl_status pl_host_allreduce_i64(pl_comm *c, int64_t *vals, size_t n,
                                pl_redop op) {
  return host_allreduce("pl_host_allreduce_i64", "host_allreduce_i64", c, vals,
                        n, MPI_INT64_T, op);
}

pl_status pl_host_allreduce_f64(pl_comm *c, double *vals, size_t n,
                                pl_redop op) {
  return host_allreduce("pl_host_allreduce_f64", "host_allreduce_f64", c, vals,
                        n, MPI_DOUBLE, op);
}

pl_status pl_host_allgather_i64(pl_comm *c, const int64_t *send, size_t n,
                                int64_t *recv) {
  const char *fn = "pl_host_allgather_i64";
  if (!c)
    return pl_set_error(PL_EINVAL, "%s: c is NULL", fn);
  PL_TRY(check_buf(fn, "send", send, n));
  PL_TRY(check_buf(fn, "recv", recv, n));
  PL_TRY(check_int(fn, "n", n));
  if (c->vsize) { /* tiled */
    for (int q = 0; q < c->vsize; q++)
      memmove(recv + (size_t)q * n, send, n * sizeof *send);
    return PL_OK;
  }
  int w = pl__watch_begin(c, "host_allgather_i64");
  MPI_Request rq;
  int rc = MPI_Iallgather(send, (int)n, MPI_INT64_T, recv, (int)n, MPI_INT64_T,
                          c->mpi, &rq);
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(1, &rq, NULL);
  pl__watch_end(w);
  return mpi_check(rc, fn);
}

pl_status pl_host_alltoall_i64(pl_comm *c, const int64_t *send, size_t n,
                               int64_t *recv) {
  const char *fn = "pl_host_alltoall_i64";
  if (!c)
    return pl_set_error(PL_EINVAL, "%s: c is NULL", fn);
  PL_TRY(check_buf(fn, "send", send, n));
  PL_TRY(check_buf(fn, "recv", recv, n));
  PL_TRY(check_int(fn, "n", n));
  if (c->vsize) { /* each absent member sends what the caller sends itself */
    const int64_t *self = send; /* block 0: the caller's own */
    int64_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp)
      return pl_set_error(PL_ENOMEM, "%s: host", fn);
    memcpy(tmp, self, n * sizeof *tmp);
    for (int q = 0; q < c->vsize; q++)
      memcpy(recv + (size_t)q * n, tmp, n * sizeof *tmp);
    free(tmp);
    return PL_OK;
  }
  int w = pl__watch_begin(c, "host_alltoall_i64");
  MPI_Request rq;
  int rc = MPI_Ialltoall(send, (int)n, MPI_INT64_T, recv, (int)n, MPI_INT64_T,
                         c->mpi, &rq);
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(1, &rq, NULL);
  pl__watch_end(w);
  return mpi_check(rc, fn);
}

pl_status pl_host_bcast(pl_comm *c, void *buf, size_t bytes, int root) {
  const char *fn = "pl_host_bcast";
  if (!c)
    return pl_set_error(PL_EINVAL, "%s: c is NULL", fn);
  PL_TRY(check_rank(fn, "root", root, c));
  PL_TRY(check_buf(fn, "buf", buf, bytes));
  PL_TRY(check_int(fn, "bytes", bytes));
  if (c->vsize)
    return PL_OK;
  int w = pl__watch_begin_n(c, "host_bcast", (double)bytes);
  MPI_Request rq;
  int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, c->mpi, &rq);
  if (rc == MPI_SUCCESS)
    rc = pl__mpi_wait(1, &rq, NULL);
  pl__watch_end(w);
  return mpi_check(rc, fn);
}
