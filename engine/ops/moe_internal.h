/* moe_internal.h — what the files of the MoE operator (ops/moe.h) share; not
 * installed.  The operator is split at its seams:
 *   moe.c            the layer object: configuration, create / destroy;
 *   moe_plan.c       the routing plan of one forward (route -> destination,
 *                    Eq. 1 chunks, counts, per-chunk layouts, the LLEP plan
 *                    glue), kept in a pl_moe_ctx for the backward, and the
 *                    context's stage-profile marks;
 *   moe_expert.c     the expert compute of one chunk: grouped GEMMs and
 *                    SwiGLU forward, and backward with recompute, over the
 *                    compute stream and its lanes;
 *   moe_pipeline.c   the chunk pipeline: dispatch / compute / combine on the
 *                    comm and compute streams, the forward and backward
 *                    schedules within the bound, helper weights, stats and
 *                    the stage profile;
 *   moe_reference.c  the single-rank dense reference the tests compare with.
 *
 * Shapes: N tokens on this rank, H hidden, I expert FFN width, E experts over
 * Ep ranks (El = E/Ep native experts each), k routes per token, K chunks of at
 * most c_eff tokens; R / S rows received / sent by this rank in one chunk. */
#ifndef PLATEAU_OPS_MOE_INTERNAL_H
#define PLATEAU_OPS_MOE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/moe_kernels.h"
#include "ops/llep_plan.h"
#include "ops/moe.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pl_moe {
  pl_moe_cfg cfg;
  pl_comm *comm;
  pl_dev *dev;
  int rank, Ep, El; /* El = E / Ep native experts per rank */
  pl_stream *cs;    /* compute: the device's default stream */
  pl_stream *ms;    /* comm stream (pipelined overlap)       */
  int nl;           /* compute lanes (cfg.lanes)             */
  pl_stream *ln[PL_MOE_MAX_LANES];
  pl_event *evf, *evj[PL_MOE_MAX_LANES]; /* fork, joins */
  pl_event *evp, *evq; /* a pass's comm stream: start after cs, cs after it */
};

/* One expert GEMM group: rows [row0, row0 + rows) of a chunk's receive
 * buffer, all computed by one expert slot. */
typedef struct pl__moe_group {
  int64_t row0, rows;
  int slot; /* < El: native expert index; else helper index + El */
} pl__moe_group;

/* One chunk of this rank: its routes' send / receive layout and the groups
 * its expert compute issues.  Receive buffer: R rows, blocks by source rank,
 * each block by expert then token order (source-major), unless em. */
typedef struct pl__moe_chunk {
  int64_t nt;     /* tokens of this rank in the chunk                       */
  int64_t S;      /* remote routes sent                                     */
  int64_t s_self; /* routes kept                                            */
  int64_t R;      /* routes received (incl. kept)                           */
  int64_t self_off;
  int64_t *scnt, *sdsp, *rcnt, *rdsp; /* Ep each, rows; self zero in cnt  */
  int ng;
  pl__moe_group *g; /* the GEMM groups of the layout the compute sees      */
  int ng_src;       /* groups of the source-major receive layout           */
  bool em;          /* expert-major: received rows are permuted so that all
                       sources' rows of an expert are contiguous (one GEMM
                       per expert slot); see moe_plan.c */
  /* element offsets into the device index buffer */
  int64_t o_toks, o_slots, o_send_tok, o_send_route, o_self_tok, o_self_route;
  int64_t o_perm, o_inv; /* em: expert-major row r' <- source-major perm[r'];
                            source-major row r <- expert-major inv[r]     */
} pl__moe_chunk;

/* What a forward keeps for its backward: the plan and the route indices
 * (host and device), the helper weights; nothing H wide. */
struct pl_moe_ctx {
  pl_moe *m;
  int64_t N, c_eff;
  int K;
  pl__moe_chunk *ch;
  int64_t *ibuf;  /* host int64 backing of the chunk count arrays */
  int32_t *dmeta; /* device, tag "routing" */
  pl_llep_plan plan;
  int ns, nh; /* weight sets sent to helpers / received as helper */
  int *s_exp, *s_dst, *h_exp, *h_src;
  void *hw; /* nh x (Wg | Wu | Wd), dt, tag "llep_weights" */
  int64_t max_chunk_recv;
  int64_t *Rmax, *Smax; /* per chunk, over the group (one allocation) */
  double max_send_ratio;
  int overlapped;
  /* cfg.profile: events marking the end of a stage on the compute stream */
  pl_event **pev;
  int *pst;
  int pn, pcap;
  double stage_ms[PL_MOE_NSTAGES];
};

/* Rows of the dispatch bound 2*Ep*k*c_eff (moe_pipeline.c derives it). */
static inline int64_t pl__moe_row_budget(const pl_moe *m, int64_t c_eff) {
  return 2 * (int64_t)m->Ep * m->cfg.k * c_eff;
}

/* moe_plan.c: everything one forward derives from the routes idx (N x k,
 * host) and the group's counts, with the index arrays uploaded once.
 * Collective over the EP group (host all-gathers). */
pl_status pl__moe_plan(pl_moe *m, int64_t N, const int32_t *idx,
                       pl_moe_ctx **out);

/* moe_expert.c: forward expert compute of chunk C on stream s: X (R x H, the
 * received rows) -> Y (R x H) in place. */
pl_status pl__moe_expert_fwd(pl_moe *m, pl_moe_ctx *c, pl__moe_chunk *C,
                             const pl_moe_weights *W, void *X, pl_stream *s);

/* moe_expert.c: backward expert compute of chunk C on stream s with the
 * recompute of G, U, A from *Xp (R x H layer input rows; freed once its last
 * GEMM is issued, evX recorded after the free); D (R x H): dout rows in, dX
 * rows out, first read after evDD; wr (R route weights), dwr (R, out); weight
 * gradients accumulated into Gw (native slots) or hg (helper slots). */
pl_status pl__moe_expert_bwd(pl_moe *m, pl_moe_ctx *c, pl__moe_chunk *C,
                             const pl_moe_weights *W, pl_moe_wgrads *Gw,
                             float *hg, void **Xp, void *D, const float *wr,
                             float *dwr, pl_event *evX, pl_event *evDD,
                             pl_stream *s);

/* moe_expert.c: pl__cpu_moe_gemm / pl__cuda_moe_gemm (backend/moe_kernels.h)
 * on s's backend; m == 0 or n == 0 issues nothing. */
pl_status pl__moe_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,
                       int64_t k, float alpha, const void *A, int64_t lda,
                       const void *B, int64_t ldb, float beta, void *C,
                       int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt);

/* moe_plan.c, cfg.profile: the end of stage `stage` (pl_moe_stage) on
 * the compute stream s, or with stage < 0 a start mark (the time since the
 * previous mark counts as idle).  Without cfg.profile: nothing. */
pl_status pl__moe_mark(pl_moe_ctx *c, int stage, pl_stream *s);

#ifdef __cplusplus
}
#endif
/* The counts a real expert group exchanges, computed for a virtual one
 * (moe_plan_virtual.c): every absent member routes as this one (member me)
 * does, each from its place in the experts' global order.  cnt_e[ch][e]:
 * this rank's routes per chunk and expert; mine[e]: its routes of e.  Out:
 * rc3[q][ch][e], what member q sends member me (Ep·K·E), and RS[q], member
 * q's received rows per chunk then its rows sent to others (Ep·2K). */
pl_status pl__moe_virtual_counts(const pl_llep_plan *p, int E, int Ep, int K,
                                 int me, int64_t N, int k, const int32_t *idx,
                                 bool contig, const int64_t *cnt_e,
                                 const int64_t *mine, int64_t *rc3,
                                 int64_t *RS);

#endif
