/* calib.h — what `plateau bench calib` (bench_calib.c: the tests, their
 * points, rows and rates) and its operations (calib_ops.c: per test the
 * buffers, the timed transfer, GEMM or host-memory pass, the verification,
 * their release) share: one file per family of operations, as nccl-tests
 * has.  Internal to suite/. */
#ifndef PLATEAU_SUITE_CALIB_H
#define PLATEAU_SUITE_CALIB_H

#include <stdbool.h>

#include "harness/bench.h"

enum {
  T_H2D,
  T_D2H,
  T_BIDIR,
  T_D2D,
  T_GEMM,
  T_MREAD,  /* host memory: read, all cores        */
  T_MWRITE, /* host memory: non-temporal write     */
  T_MCOPY,  /* host memory: copy (read + write)    */
  T_ALLREDUCE,
  T_ALLTOALL,
  T_SENDRECV,
  T_COUNT
};

/* Data of rank q lives at RNG offset q·2^40 (+ element index). */
#define RANK_OFF(q) ((uint64_t)(q) << 40)

typedef struct calib {
  uint64_t sizes[PL_OPT_LIST_MAX];
  int nsizes, tests[T_COUNT], ntests;
  int64_t G;
  pl_dtype gdt;
  size_t msize;  /* bytes of a host-memory test buffer */
  uint64_t msum; /* mem_read: the sum the timed reads computed */
  bool solo;
  pl_stream *s, *s2;
  pl_event *ev0, *ev1;
  /* the point */
  int test;
  bool idle; /* --solo: a rank other than 0 on a per-rank test */
  size_t ne; /* f32 elements of a transfer (alltoall: per peer) */
  void *src, *dst, *src2, *dst2, *host; /* host: device results read back */
  size_t *counts, *displs;
  pl_comm *comm;
  int rank, n;
  uint64_t seed;
} calib;

/* The timed unit of the point (T_* in c->test). */
pl_status pl__calib_run(void *c);
/* Its buffers: inputs are draws, outputs poisoned; an allocation failure is
 * the point's row. */
pl_status pl__calib_setup(pl_bench_ctx *x, calib *c);
/* Every received buffer against what it must hold. */
pl_status pl__calib_check(pl_bench_ctx *x, calib *c, pl_check *chk);
/* The point's buffers, freed (teardown). */
void pl__calib_teardown(pl_bench_ctx *x, calib *c);
/* dst := src over words 64-bit words (src NULL: a fixed value), by every
 * OpenMP thread over its range of 64-byte lines with non-temporal stores:
 * the host-memory copy of mem_copy, which other benches take as the host's
 * roofline.  dst and src 16-byte aligned. */
void pl__calib_mem_store(uint64_t *dst, const uint64_t *src, size_t words);
/* The run's second stream and events, destroyed (fini). */
void pl__calib_fini(calib *c);

#endif
