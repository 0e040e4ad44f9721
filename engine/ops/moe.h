/* moe.h — the MoE layer with three dispatch variants behind one interface:
 *   ep              standard expert parallelism (baselines/ep.h): every route
 *                   goes to its expert's native rank, one all-to-all-v each
 * way; llep            the LLEP plan (ops/llep_plan.h): overloaded experts
 * spill pieces of their global token list to least-loaded helper ranks, which
 * receive the expert's weights point-to-point and return its weight gradient in
 * backward; unchunked; pipelined_llep  the same plan, with the routes cut into
 * K chunks of token positions (Eq. 1, strided or contiguous) so a destination
 *                   receives at most Ep*k*c_eff routes per chunk; dispatch(i+1)
 *                   and combine(i-1) run on a comm stream while chunk i's
 *                   expert GEMMs run on the compute stream, within the bound;
 *                   backward re-dispatches each chunk's inputs and recomputes
 *                   its expert intermediates (DESIGN.md §1.1).
 *
 * Experts are SwiGLU FFNs: y = (silu(x Wg) * (x Wu)) Wd, Wg, Wu: H x I,
 * Wd: I x H.  The layer output is out[t] = sum_j w[t,j] * y_{e(t,j)}(x[t]).
 *
 * Memory: H-wide route buffers (send, receive, expert output, return) are
 * tracked under the tag "dispatch"; expert intermediates (G, U, A, P: I wide)
 * under "expert"; per-route indices and scalars under "routing"; transferred
 * helper weights under "llep_weights" and their gradients "llep_grads".  The
 * pipelined variant keeps the "dispatch" peak <= 2*Ep*k*c_eff*H*b in forward
 * and backward (asserted in test_mpi_moe.c).
 *
 * Expert GEMMs: the received rows of a chunk are permuted by (expert, source)
 * (one row gather after the receive, its inverse before the return) so each
 * local or borrowed expert gets one GEMM per projection with all sources'
 * rows, when the permutation's transient copy fits the bound (moe_plan.c);
 * cfg.source_major keeps one GEMM per (source, expert) segment instead.
 *
 * Host synchronization: planning needs the routes on the host (idx is passed
 * as host memory: with a real router that is one D2H copy of N*k int32 per
 * layer, as LLEP's reference code also does); from the per-rank counts every
 * rank knows every group size, so the expert GEMMs read no sizes from the
 * device. */
#ifndef PLATEAU_OPS_MOE_H
#define PLATEAU_OPS_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/llep_plan.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The dispatch variants, one line each: the one description of a variant
 * that the engine, the planner, the step's description and the suite read
 * (the enum, its names, its option lists and help texts are made from it).
 *   X(ID, name, short name, plans, chunks)
 *     name    bench dispatch's --variants and its rows ("pipelined_llep");
 *     short   the trainer's and the planner's --dispatch and the step's
 *             variant strings ("pllep/ring/stream");
 *     plans   the LLEP plan places the routes (overloaded experts spill to
 *             helper ranks); false: every route to its expert's native rank;
 *     chunks  the routes are cut into K chunks of at most c tokens per
 *             source (Eq. 1, cfg.c and cfg.K_max), a comm stream overlapping
 *             them (cfg.overlap): the dispatch peak is bounded by
 *             2*Ep*k*c_eff*H*b (pl_moe_dispatch_bound), which the planner's
 *             fill keeps under adversarial routing, and the planner hides
 *             all but one chunk's all-to-all; false: one chunk (K = 1), no
 *             bound (the router decides), all communication exposed.
 * S separates the lines (the joined names below).  A new variant is a line
 * here (enum values follow the lines) and, when it does what no flag says,
 * its code in moe_plan.c / moe_pipeline.c and its tests in test_mpi_moe.c
 * (DESIGN.md §3.7). */
#define PL_MOE_VARIANTS(X, S)                                                  \
  X(PL_MOE_EP, "ep", "ep", false, false)                                       \
  S X(PL_MOE_LLEP, "llep", "llep", true, false) S X(                           \
      PL_MOE_PIPELINED, "pipelined_llep", "pllep", true, true)

#define PL__MOE_ENUM(id, name, short_name, plans, chunks) id,
#define PL__MOE_NAME(id, name, short_name, plans, chunks) name
#define PL__MOE_SHORT(id, name, short_name, plans, chunks) short_name
/* The names joined by the string literal sep, as one string literal:
 * PL_MOE_NAMES_JOINED(",") is "ep,llep,pipelined_llep" (option defaults and
 * help texts). */
#define PL_MOE_NAMES_JOINED(sep) PL_MOE_VARIANTS(PL__MOE_NAME, sep)
#define PL_MOE_SHORT_NAMES_JOINED(sep) PL_MOE_VARIANTS(PL__MOE_SHORT, sep)

typedef enum pl_moe_variant {
  PL_MOE_VARIANTS(PL__MOE_ENUM, ) PL_MOE_VARIANT_COUNT
} pl_moe_variant;

/* One variant's line of PL_MOE_VARIANTS, indexed by the enum. */
typedef struct pl_moe_variant_desc {
  pl_moe_variant id;
  const char *name, *short_name;
  bool plans, chunks;
} pl_moe_variant_desc;
extern const pl_moe_variant_desc pl_moe_variants[PL_MOE_VARIANT_COUNT];
/* v's description; v outside the enum is a programming error (asserted). */
const pl_moe_variant_desc *pl_moe_variant_desc_of(pl_moe_variant v);
/* The chunks of a forward whose largest source has N_max tokens: the
 * chunking variants' Eq. 1 (pl_llep_chunking with cap c and ceiling K_max,
 * its errors), the others' K = 1, c_eff = N_max. */
pl_status pl_moe_variant_chunking(pl_moe_variant v, int64_t N_max, int64_t c,
                                  int K_max, int *K, int64_t *c_eff);

/* The variants' names, indexed by the enum, NULL-terminated (the option
 * parsers' choices):
 *   pl_moe_variant_names        "ep" "llep" "pipelined_llep";
 *   pl_moe_variant_short_names  "ep" "llep" "pllep". */
extern const char *const pl_moe_variant_names[PL_MOE_VARIANT_COUNT + 1];
extern const char *const pl_moe_variant_short_names[PL_MOE_VARIANT_COUNT + 1];

const char *pl_moe_variant_name(pl_moe_variant v);
const char *pl_moe_variant_short_name(pl_moe_variant v);
/* Either name of a variant ("pipelined_llep" or "pllep"); PL_EINVAL
 * naming s and the allowed names otherwise. */
pl_status pl_moe_variant_parse(const char *s, pl_moe_variant *out);

typedef struct pl_moe_cfg {
  int64_t H, I; /* hidden, expert FFN width                          */
  int E, k;     /* experts (global), routes per token (k may exceed
                   E: a token's routes may repeat an expert)        */
  pl_dtype dt;  /* storage of activations and weights: f32 | bf16    */
  pl_moe_variant variant;
  pl_llep_knobs knobs; /* alpha, m, lambda (ignored by ep)                  */
  int64_t c;           /* per-source token cap (pipelined)                  */
  int K_max;           /* Eq. 1 chunk ceiling (pipelined)                   */
  bool contiguous;     /* contiguous chunks instead of strided (Table 8)    */
  bool overlap;        /* pipelined: overlap on a comm stream (default on)  */
  bool source_major;   /* group the expert GEMMs per (source rank, expert)
                          segment of the receive buffer instead of per expert
                          (for comparison with the expert-major layout;
                          default off)                                      */
  int lanes;           /* extra compute streams for the expert GEMMs, 0..
                          PL_MOE_MAX_LANES (default 2): a projection's
                          per-slot GEMMs are spread over the compute stream
                          and the lanes (small groups fill the GPU
                          together), and in backward the gate/up weight
                          gradients run on the lanes beside dWd and dX */
  bool profile;        /* time the compute stream's stages (events; see
                          pl_moe_ctx_stage_ms)                              */
  int comm_blocks;     /* pipelined: grid cap of the comm stream's gathers,
                          combines and scatters (pl_stream_set_grid_cap), so
                          they take fewer SMs from the expert GEMMs they run
                          beside; 0 (default): uncapped, as a cap slows them
                          more than it frees the GEMMs                      */
} pl_moe_cfg;

#define PL_MOE_MAX_LANES 4

/* Stages of the compute stream, timed with events when cfg.profile is set
 * (summed over chunks): forward wait for the dispatch, gate/up GEMMs + SwiGLU,
 * down GEMMs; backward wait for the x rows, recompute (gate/up + SwiGLU),
 * dact (wait for dout, dout·Wd^T, SwiGLU backward), wgrad (weight gradients
 * on the compute stream: all three with lanes = 0, dWd only otherwise), dx
 * (dG·Wg^T + dU·Wu^T, and with lanes the wait for the lanes' dWg, dWu); idle:
 * the stream ran dry between chunks (host issue, comm waits not covered). */
typedef enum pl_moe_stage {
  PL_MOE_ST_FWD_WAIT,
  PL_MOE_ST_FWD_UP,
  PL_MOE_ST_FWD_DOWN,
  PL_MOE_ST_BWD_WAIT,
  PL_MOE_ST_BWD_RECOMPUTE,
  PL_MOE_ST_BWD_DACT,
  PL_MOE_ST_BWD_WGRAD,
  PL_MOE_ST_BWD_DX,
  PL_MOE_ST_IDLE,
  PL_MOE_NSTAGES
} pl_moe_stage;
const char *pl_moe_stage_name(int stage);

/* H, I, E and k must be filled by the caller; this sets the plan knobs
 * (pl_llep_knobs_default), c = INT64_MAX (no cap: K = 1 until c is set),
 * K_max = 64, strided chunks, overlap on, lanes 2, comm_blocks 0, f32. */
pl_moe_cfg pl_moe_cfg_default(void);

/* This rank's native experts (E/Ep of them, experts rank*E/Ep ...), device
 * memory of dt: wg, wu [E/Ep, H, I], wd [E/Ep, I, H]. */
typedef struct pl_moe_weights {
  void *wg, *wu, *wd;
} pl_moe_weights;

/* Their gradients, fp32, same shapes; backward accumulates (+=). */
typedef struct pl_moe_wgrads {
  float *wg, *wu, *wd;
} pl_moe_wgrads;

/* What one forward measured about its dispatch (this rank, unless noted). */
typedef struct pl_moe_stats {
  int K;         /* chunks                                          */
  int64_t c_eff; /* ceil(N_max / K)                                 */
  bool planned;  /* the LLEP plan ran (not skipped by lambda)       */
  int n_pieces, n_spilled;
  double imb_native, imb_planned; /* max/mean rank load before/after       */
  int64_t routes_sent;    /* routes sent to other ranks (tokens moved)       */
  int64_t routes_recv;    /* routes computed here (incl. own)                */
  int64_t max_chunk_recv; /* largest per-chunk receive of this rank          */
  double max_send_ratio;  /* group-wide: max over (chunk, dest) of routes
                             received / mean over (chunk, dest)              */
  int64_t weights_moved;  /* expert weight sets received from owners        */
  double gemm_flops_fwd;  /* expert GEMM FLOPs of this rank, forward         */
  int overlapped;         /* chunks whose next dispatch was overlapped       */
  int64_t gemms;          /* expert GEMM launches of the busiest chunk, fwd
                             + bwd with recompute (11 per group: 3 forward,
                             3 recompute, 3 weight-gradient, 2 dX)           */
  int em_chunks;          /* chunks computed expert-major (rows of all
                             sources of an expert contiguous)                */
  int64_t groups;         /* GEMM groups summed over the chunks: each one
                             weight-gradient GEMM per projection in backward,
                             a pass over its expert's fp32 gradients         */
} pl_moe_stats;

typedef struct pl_moe pl_moe;
typedef struct pl_moe_ctx pl_moe_ctx;

/* Bind a layer to the EP group `ep` (borrowed; its device is the layer's).
 * E not a multiple of the group size, k < 1, H or I < 1, bad dtype:
 * PL_EINVAL naming the value. */
pl_status pl_moe_create(pl_comm *ep, const pl_moe_cfg *cfg, pl_moe **out);
void pl_moe_destroy(pl_moe *m);
const pl_moe_cfg *pl_moe_get_cfg(const pl_moe *m);
/* The EP group the layer was created on (borrowed): a caller whose own steps
 * before the layer can fail agrees on its status over it first, so that every
 * rank enters the layer's collectives or none does. */
pl_comm *pl_moe_comm(const pl_moe *m);

/* Forward on this rank's N tokens.  x: N x H (dt, device); idx: N x k expert
 * ids (host, int32, each in [0, E)); w: N x k route weights (f32, device);
 * out: N x H (dt, device), overwritten.  *ctx receives what backward needs
 * (plan and route indices; helper weights) — nothing H wide.  ctx may be NULL
 * (inference: nothing kept).  Collective over the EP group. */
pl_status pl_moe_forward(pl_moe *m, const pl_moe_weights *W, const void *x,
                         int64_t N, const int32_t *idx, const float *w,
                         void *out, pl_moe_ctx **ctx, pl_moe_stats *stats);

/* Backward: x and w as in forward (the layer input is re-dispatched chunk by
 * chunk, and expert intermediates recomputed), dout: N x H (dt).  Writes dx
 * (N x H, dt) and dw (N x k, f32); accumulates the native experts' weight
 * gradients into G (fp32).  Frees nothing: call pl_moe_ctx_free. */
pl_status pl_moe_backward(pl_moe *m, pl_moe_ctx *ctx, const pl_moe_weights *W,
                          const void *x, const float *w, const void *dout,
                          void *dx, float *dw, pl_moe_wgrads *G);
void pl_moe_ctx_free(pl_moe_ctx *ctx);
/* Chunks whose next dispatch was overlapped so far with this context: the
 * forward's (also in pl_moe_stats.overlapped) plus, after pl_moe_backward,
 * the backward's. */
int pl_moe_ctx_overlapped(const pl_moe_ctx *ctx);
/* cfg.profile: milliseconds per stage (PL_MOE_NSTAGES values) of the last
 * forward and backward with this context (backward's after it ran); all
 * zero without cfg.profile. */
const double *pl_moe_ctx_stage_ms(const pl_moe_ctx *ctx);

/* The bound of the pipelined variant in bytes: 2*Ep*k*c_eff*H*b. */
size_t pl_moe_dispatch_bound(const pl_moe_cfg *cfg, int Ep, int64_t c_eff);

/* ---- single-rank dense reference (host memory, CPU kernels) ------------- */

/* All E experts' weights in host memory (dt): wg, wu [E,H,I], wd [E,I,H].
 * out = sum_j w * FFN_e(x) computed route by route (one-row GEMMs). */
pl_status pl_moe_reference_fwd(const pl_moe_cfg *cfg, const void *wg,
                               const void *wu, const void *wd, const void *x,
                               int64_t N, const int32_t *idx, const float *w,
                               void *out);
/* Gradients route by route: dx (N x H, dt), dw (N x k), and fp32 weight
 * gradients of all E experts accumulated into gwg, gwu [E,H,I], gwd [E,I,H]
 * (any may be NULL to skip).  Both refuse an expert id outside [0, E) with
 * PL_EINVAL before reading that expert's weights. */
pl_status pl_moe_reference_bwd(const pl_moe_cfg *cfg, const void *wg,
                               const void *wu, const void *wd, const void *x,
                               int64_t N, const int32_t *idx, const float *w,
                               const void *dout, void *dx, float *dw,
                               float *gwg, float *gwu, float *gwd);

#ifdef __cplusplus
}
#endif
#endif
