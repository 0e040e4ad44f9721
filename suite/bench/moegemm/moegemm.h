/* moegemm.h — what `plateau bench moegemm` (bench_moegemm.c) and its GEMM
 * driver (moegemm_groups.c: the grouped and the dense GEMMs of a point, the
 * buffers and the lanes' streams) share.  Internal to suite/. */
#ifndef PLATEAU_SUITE_MOEGEMM_H
#define PLATEAU_SUITE_MOEGEMM_H

#include "harness/bench.h"
#include "ops/moe.h"
#include "ops/moe_internal.h"

typedef struct gjob {
  pl_stream *s;
  int nl; /* lanes in use */
  pl_stream *ln[PL_MOE_MAX_LANES];
  pl_event *evf, *evj[PL_MOE_MAX_LANES];
  int kind; /* 0 up, 1 down, 2 wgrad */
  bool dense;
  int G;
  int64_t m, H, I;
  pl_dtype dt;
  void *X, *W, *C; /* X: G*m x max(H, I); W: G x H x I; C: G*m x max or HxI */
} gjob;

/* A point: indices into the lists of K, lanes, layouts and kinds. */
typedef struct mg_pt {
  int K, lanes, lay, kind;
} mg_pt;

typedef struct moegemm {
  int64_t N, H, I, mmax;
  int E, k, ep, nK, nk, nl, nL, Gseg;
  mg_pt *pts;
  uint64_t Ks[PL_OPT_LIST_MAX], Ls[PL_OPT_LIST_MAX];
  int kinds[3], lays[2];
  int ready; /* buffers and streams made */
  gjob j;
  int64_t K;
} moegemm;

/* One point's grouped GEMMs, round-robin over j->s and j->nl lanes; with
 * j->dense the one dense GEMM of equal FLOPs on j->s. */
pl_status pl__moegemm_run(void *j);
/* The buffers, the largest point's, and the lanes' streams. */
pl_status pl__moegemm_make(pl_bench_ctx *c, moegemm *m);
/* Frees what pl__moegemm_make made, all or part. */
void pl__moegemm_release(pl_bench_ctx *c, moegemm *m);

#endif
