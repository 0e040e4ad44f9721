/* plan_internal.h — what the files of the planner share; not installed.
 *   track.c     the symbolic tracked allocator the schedules are replayed on;
 *   mem_ops.c   the operators' allocation schedules (attention, Ulysses, the
 *               MoE FFN and the chunk pipeline, Ring-DTP);
 *   mem_step.c  the training step's schedule (units, checkpoint runner, SCO,
 *               head) and the states; pl_plan_memory;
 *   fsdp2_time.c  the FSDP2 baseline's time model and configuration check
 *               (its memory is the baseline's dry measurement, mem_hook.c);
 *   time.c      plateau's time model;
 *   machine.c   the machine: defaults, calibration and rate files, and its
 *               costs (usable memory, a collective's seconds, attention's
 *               rate at a context) both time models read;
 *   search.c    feasibility and the automatic choice. */
#ifndef PLATEAU_PLAN_INTERNAL_H
#define PLATEAU_PLAN_INTERNAL_H

#include "plan/plan.h"

/* A replayed allocation: freeing it twice is a no-op. */
typedef struct pl__sym_buf {
  int tag, term;
  size_t bytes;
  bool live;
} pl__sym_buf;

#define PL__SYM_HASH 64

/* The most bytes live at once per phase of a step, gathered into
 * pl_plan_mem.layer_high: layer l's forward and backward into bin
 * ⌊l·PL_PLAN_BINS/L⌋, the head apart. */
typedef struct pl__bins {
  int L;
  size_t high[PL_PLAN_BINS + 1];
} pl__bins;
void pl__bins_init(pl__bins *b, int L);
/* A phase ended with `high` bytes at most: "forward" or "backward" of a
 * layer, or "head"; any other is not gathered. */
void pl__bins_phase(pl__bins *b, const char *what, int layer, size_t high);
/* The first layer of bin i (< PL_PLAN_BINS) of L layers. */
int pl__bins_first(int L, int i);

/* The symbolic allocator: current and peak bytes, each tag's current and
 * peak, the live set (by tag and by term) when the peak was set, and the
 * phase being replayed then. */
typedef struct pl__sym_track {
  size_t cur, peak;
  int n;
  const char *tag[PL_PLAN_MAX_TAGS];
  size_t now[PL_PLAN_MAX_TAGS], at_peak[PL_PLAN_MAX_TAGS],
      tpeak[PL_PLAN_MAX_TAGS];
  size_t term_now[PL_TERM_COUNT], term_at_peak[PL_TERM_COUNT],
      term_peak[PL_TERM_COUNT];
  /* the phase: what, and the layer (< 0: none) and its kind; formatted
   * only when exported (a search sets it millions of times) */
  const char *what, *kind, *peak_what, *peak_kind;
  int layer, peak_layer;
  /* tag pointer -> index + 1 (0: empty), direct-mapped: a replay passes the
   * same few static strings millions of times in a search */
  const char *hkey[PL__SYM_HASH];
  int hidx[PL__SYM_HASH];
  /* the most bytes since the phase began, and where a phase that ends is
   * gathered (NULL: nowhere) */
  size_t phase_high;
  pl__bins *bins;
} pl__sym_track;

void pl__sym_init(pl__sym_track *t);
pl__sym_buf pl__sym_alloc(pl__sym_track *t, const char *tag, int term,
                          size_t bytes);
void pl__sym_free(pl__sym_track *t, pl__sym_buf *b);
/* Peak := current (as pl_mem_reset_peak at the start of a step). */
void pl__sym_reset_peak(pl__sym_track *t);
/* The phase being replayed: "WHAT", or "WHAT layer LAYER (KIND)" when
 * layer >= 0 (static strings). */
void pl__sym_phase(pl__sym_track *t, const char *what, int layer,
                   const char *kind);
/* Copy the peak, the live set and the tag peaks into out. */
void pl__sym_export(const pl__sym_track *t, pl_plan_mem *out);
/* Replay on t what s recorded: s is a tracker that started empty and saw
 * the allocations and frees of one schedule (no phase change, none of t's
 * buffers freed); t ends as if that schedule had run on it: its peak, the
 * live set at the peak, each tag's and term's peak, the new tags in the
 * order they came.  map (may be NULL) gets each tag of s's index in t. */
void pl__sym_apply(pl__sym_track *t, const pl__sym_track *s, int *map);

/* ---- the MoE chunk pipeline (ops/moe_pipeline.c) ---- */

/* The sizes of one chunk on this rank (rows) and the group's maxima. */
typedef struct pl__chunk_replay {
  int64_t nt, R, S, s_self, Rmax, Smax;
  bool em; /* expert-major (the permutation copies) */
} pl__chunk_replay;

typedef struct pl__moe_replay {
  const pl_moe_cfg *cfg;
  int Ep, K;
  int64_t N, c_eff;
  pl__chunk_replay *ch; /* K */
  int64_t nmeta;        /* int32 routing indices kept by the context */
  bool pipe;            /* pipelined with overlap */
  /* The forward's and the backward's schedule, each replayed once on an
   * empty tracker (every MoE layer of a step runs the same two), and the
   * forward's context buffer there; a layer's replay applies them. */
  pl__sym_track *fwd, *bwd;
  pl__sym_buf fwd_ctx;
} pl__moe_replay;

/* Chunk sizes under balanced routing (imb scales the received rows) or
 * adversarial routing (worst: every source's routes to this rank). */
pl_status pl__moe_replay_make(const pl_moe_cfg *cfg, int Ep, int64_t N,
                              double imb, bool worst, pl__moe_replay *out);
void pl__moe_replay_free(pl__moe_replay *p);
/* pl_moe_forward / pl_moe_backward; the routing indices (*ctx, tag
 * "routing") are allocated by forward and freed by the caller. */
void pl__moe_replay_forward(pl__sym_track *t, const pl__moe_replay *p,
                            pl__sym_buf *ctx);
void pl__moe_replay_backward(pl__sym_track *t, const pl__moe_replay *p);

/* ---- layers ---- */

/* What one decoder layer's replay needs. */
typedef struct pl__layer_replay {
  int64_t N, H, D; /* tokens per rank, hidden, Ulysses group            */
  int n_q, n_kv, d;
  size_t es; /* bytes per activation value                        */
  pl_dtype dt;
  pl_backend be;
  pl_attn_kernels ak;
  int64_t I_s;    /* the always-on SwiGLU width (shared or dense; 0)   */
  int E_route, k; /* MoE (E_route 0: dense FFN)                        */
  bool keep_ctx;
  const pl__moe_replay *moe;
  int keep; /* pl_layer_keep: what the forward keeps for the backward */
  /* expert groups (train/epgroups.h): the layer's gathered expert unit,
   * issued by the step before the layer and freed after the FFN slot
   * (NULL: none); in backward its f32 gradient of ep_full elements opened
   * at the slot and reduce-scattered after it (+= a shard: ep_acc) */
  pl__sym_buf *ep_w;
  size_t ep_full, ep_shard;
  bool ep_acc;
} pl__layer_replay;

/* The attention half's activations of a layer (h, q, k, v, o, y1, lse): a
 * forward's kept ones, alive until the layer's backward. */
typedef struct pl__acts_replay {
  pl__sym_buf h, q, k, v, o, y1, lse;
} pl__acts_replay;

void pl__layer_replay_forward(pl__sym_track *t, const pl__layer_replay *l,
                              pl__sym_buf *ctx, pl__acts_replay *kept);
void pl__layer_replay_backward(pl__sym_track *t, const pl__layer_replay *l,
                               pl__sym_buf *ctx, pl__acts_replay *kept);

/* ---- Ring-DTP (ops/ring_dtp.c) ---- */

typedef struct pl__head_replay {
  pl_dtype dt;
  int64_t n, h, v, nmax, vmax, vb, nc;
  int64_t chunk; /* P = 1: rows of the three-GEMM schedule's chunk (pl_dtp_run
                    runs it); 0: the blocked meetings */
  int P;
  bool move_w;
} pl__head_replay;

void pl__head_replay_make(pl_dtype dt, int64_t n, int64_t h, int64_t v, int P,
                          int64_t block, pl__head_replay *out);
/* Forward + backward; *aux (ce_state 2n floats) is freed and re-made. */
void pl__head_replay_run(pl__sym_track *t, const pl__head_replay *h,
                         pl__sym_buf *aux);

/* The RMSNorm backward scratch (floats) the layer code allocates. */
size_t pl__rms_scratch(int64_t N, int64_t H);
/* The attention backward's workspace on backend be (CUDA computed from its
 * documented layout when this build has no CUDA). */
size_t pl__attn_ws(const pl_attn_shape *sh, pl_backend be);

/* ---- the machine's costs (machine.c) ---- */

/* Bandwidth (bytes/s) and latency (s) of a group of G consecutive ranks
 * (intra_gbs within a node). */
void pl__link_of(const pl_plan_machine *mc, int G, double intra_gbs, double *bw,
                 double *lat);
/* Seconds of a ring collective (all-gather / reduce-scatter) over G ranks
 * moving `bytes` per rank in total (the full buffer), and of an all-to-all
 * where each rank sends `bytes` in total, G ranks, gpn per node. */
double pl__t_ring(const pl_plan_machine *mc, int G, double bytes);
double pl__t_a2a(const pl_plan_machine *mc, int G, double bytes);
/* Attention rate at context S (TFLOP/s) from a long-context rate. */
double pl__attn_rate(const pl_plan_machine *mc, double rate, int64_t S);
/* HBM / host usable bytes. */
double pl__hbm_usable(const pl_plan_machine *mc);
double pl__host_usable(const pl_plan_machine *mc);

pl_status pl__plan_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                          const pl_plan_machine *mc, int rank, bool with_worst,
                          pl_plan_mem *out);
/* pl__plan_memory measured (mem_dry.c): the trainer of c (c itself on one
 * rank, else the rank view of its rank 0) stepped on a dry device with balanced
 * routes; with_worst: again with adversarial ones for dev_worst.  rank < 0
 * measures rank 0.  Plateau's trainer only, imb 1 (PL_EUNSUPPORTED). */
pl_status pl__plan_memory_dry(const pl_model_cfg *m, const pl_plan_cfg *c,
                              const pl_plan_machine *mc, int rank,
                              bool with_worst, pl_plan_mem *out);
/* The same, the last of steps steps measured (pl__plan_memory_dry: one;
 * the tests hold more to it). */
pl_status pl__plan_memory_dry_steps(const pl_model_cfg *m, const pl_plan_cfg *c,
                                    const pl_plan_machine *mc, int rank,
                                    bool with_worst, int steps,
                                    pl_plan_mem *out);
/* Its adversarial routes' measurement alone: out's dev_worst and
 * layer_high_worst (its other fields untouched). */
pl_status pl__plan_memory_dry_worst(const pl_model_cfg *m, const pl_plan_cfg *c,
                                    const pl_plan_machine *mc, int rank,
                                    pl_plan_mem *out);
/* ---- the search's memory evaluations (fill.c) ----
 * Every memory evaluation of the search and the fill goes through
 * pl__plan_mem_eval: it counts them (pl__plan_mem_evals: the evaluations
 * made since the process began, over every thread) and, given a memo
 * (pl__plan_memo_new; NULL: none), answers a configuration evaluated before
 * from it (the replay is a pure function of the configuration).  The upper
 * bound of tok/s/GPU over the knobs the memory decides (time.c: SCO budget
 * 0, every layer kept for the parts that shrink with it and none for those
 * that grow, the optimizer at its best resident split) lets the search skip
 * the memory of a candidate that cannot change its choice. */
typedef struct pl__plan_memo pl__plan_memo;
pl__plan_memo *pl__plan_memo_new(void);
/* The memo's evaluations measured on a dry device (pl_plan_free.dry);
 * how many configurations it could not build (PL_EUNSUPPORTED: what the
 * dry device does not measure, as imb above 1). */
void pl__plan_memo_dry(pl__plan_memo *mm, bool dry);
int pl__plan_memo_unbuilt(const pl__plan_memo *mm);
/* The evaluations made through the memo (its answers not counted). */
long pl__plan_memo_evals(const pl__plan_memo *mm);
void pl__plan_memo_free(pl__plan_memo *mm);
pl_status pl__plan_mem_eval(pl__plan_memo *mm, const pl_model_cfg *m,
                            const pl_plan_cfg *c, const pl_plan_machine *mc,
                            bool with_worst, pl_plan_mem *out);
/* c's memory when the memo holds it (evaluated before, and built): no
 * evaluation. */
bool pl__plan_mem_known(pl__plan_memo *mm, const pl_model_cfg *m,
                        const pl_plan_cfg *c, const pl_plan_machine *mc,
                        pl_plan_mem *out);
long pl__plan_mem_evals(void);
/* pl_plan_fill with the search's memo; least (NULL: none): c's memory with
 * nothing kept and nothing resident.  It settles a count without an
 * evaluation where its room's need (pl__plan_room_need) is above the limit,
 * or where its peak with every kept and resident byte added (none saved) is
 * within it: no moment of a form holds more than the least form's same
 * moment, its kept activations and its resident state (test_plan_room.c). */
pl_status pl__plan_fill_memo(pl__plan_memo *mm, const pl_model_cfg *m,
                             const pl_plan_machine *mc, bool resident,
                             bool keep, const pl_plan_mem *least,
                             pl_plan_cfg *c, char *why, size_t n);
pl_status pl__plan_time_bound(const pl_model_cfg *m, const pl_plan_cfg *c,
                              const pl_plan_machine *mc, double *tok_s_max);
/* What memory leaves a configuration's knobs (pl__plan_time_bound_room):
 * res, the resident optimizer state's bytes (12 per parameter) at most;
 * keep(ctx, r), the kept activations' bytes at most beside r bytes of
 * resident state (< 0: no form with r fits; NULL: every layer kept). */
typedef struct pl__plan_room {
  double res;
  double (*keep)(void *ctx, double r);
  void *ctx;
} pl__plan_room;
/* The same bound within room (NULL: pl__plan_time_bound); 0 when no form
 * fits. */
pl_status pl__plan_time_bound_room(const pl_model_cfg *m, const pl_plan_cfg *c,
                                   const pl_plan_machine *mc,
                                   const pl__plan_room *room,
                                   double *tok_s_max);
/* What the least form of a candidate leaves its knobs (room.c): mem is c
 * with the knobs the search frees at their least (sco_free: every boundary
 * offloaded too, and c's SCO count free). */
typedef struct pl__room {
  const pl_model_cfg *m;
  double peak;        /* the least form's device peak                    */
  double slack;       /* SCO's two restore buffers (0: the count fixed)  */
  double stage;       /* the staging resident state may save             */
  double a, w;        /* a layer's kept bytes: attention, the whole half */
  const size_t *high; /* the least form's layer_high                     */
} pl__room;
void pl__plan_room_of(const pl_model_cfg *m, const pl_plan_free *fr,
                      const pl_plan_cfg *c, const pl_plan_mem *mem,
                      bool sco_free, pl__room *out);
/* The least device peak a form of c can have with the first na layers'
 * attention and the first nw layers' whole halves kept and r bytes (12 per
 * parameter) of optimizer state resident. */
double pl__plan_room_need(const pl__room *x, int na, int nw, double r);
/* The least device peak a form of c can have with the first u boundaries
 * offloaded by SCO (first layers first; x: the form with every one), and in
 * *most the highest: each boundary left on the device adds its nhb bytes
 * to the moments of the layers above it and of the head, and the form
 * needs at most SCO's two restore buffers less (test_plan_room.c). */
double pl__plan_room_sco(const pl__room *x, double nhb, int u, double *most);
/* The bound of c (pl__plan_time_bound_room) over its forms whose need fits
 * the usable HBM. */
pl_status pl__plan_room_bound(const pl_model_cfg *m, const pl_plan_free *fr,
                              const pl_plan_machine *mc, const pl_plan_cfg *c,
                              const pl_plan_mem *mem, bool sco_free, double *u);
/* A floor of the memory of least (a candidate's least form) from its
 * siblings: the same form with a smaller chunk cap c or bucket β, or the
 * other optimizer, where the search frees them.  No device buffer grows as
 * c or β shrinks (the dispatch's and the expert GEMMs' are sized by the
 * chunk, the optimizer's staging by the bucket; the routing's index arrays
 * by N·k), and with none of their state resident the streamed and the
 * hybrid optimizer hold the same device bytes, so each sibling's device
 * peak and layer_high are at most least's, and so is their most.  Only
 * where least holds no resident state (a fixed amount comes in whole
 * buckets of β: a smaller β may hold more of it).  From the
 * siblings the memo holds; with measure, also the sibling of the smallest c and
 * β evaluated when no known one gives the floor. *have: a floor was found (lb's
 * dev_peak and layer_high hold it; its other fields are a sibling's).  Tested:
 * test_plan.c room_floor_holds. */
pl_status pl__plan_room_floor(pl__plan_memo *mm, const pl_model_cfg *m,
                              const pl_plan_machine *mc, const pl_plan_free *fr,
                              const pl_plan_cfg *least, bool measure,
                              bool *have, pl_plan_mem *lb);

/* A search's candidates (candidates.c): each with its time bound u
 * (INFINITY until set) and its place in the enumeration. */
typedef struct pl__qent {
  pl_plan_cfg cfg;
  double u;
  int seq;
} pl__qent;
typedef struct pl__cqueue {
  pl__qent *e;
  int n, cap;
} pl__cqueue;
pl_status pl__cqueue_push(pl__cqueue *q, const pl_plan_cfg *c);
/* The candidates of base's system over the knobs fr leaves free, appended
 * to q in enumeration order. */
pl_status pl__plan_candidates(const pl_model_cfg *m, const pl_plan_cfg *base,
                              const pl_plan_free *fr, const pl_plan_machine *mc,
                              pl__cqueue *q);
/* Expert groups of ep ranks (ep < W_v) a run plays: real ones, ep dividing
 * its ranks present (train/epgroups.h; a proxy's replica group is the
 * virtual part). */
bool pl__plan_ep_plays(const pl_plan_cfg *c, int ep);
/* The chunk caps a search tries at N tokens per rank (K = 1, 2, 4, ... 64
 * chunks, each distinct cap once, largest first) into cs; their count. */
#define PL__PLAN_CAPS 8
int pl__plan_chunk_caps(int64_t N, int64_t *cs);
/* The largest expert-parallel degree dividing both W and E (1 without
 * experts): FSDP2's default EP (cfg.c). */
int pl__plan_largest_ep(const pl_model_cfg *m, int W);
/* The optimizer buckets β a search tries, largest first, and its
 * optimizers. */
extern const size_t pl__plan_buckets[2];
extern const pl_optim_ops *const pl__plan_optims[2];

pl_status pl__fsdp2_time(const pl_model_cfg *m, const pl_plan_cfg *c,
                         const pl_plan_machine *mc, pl_plan_time *out);
pl_status pl__fsdp2_check(const pl_model_cfg *m, const pl_plan_cfg *c);

#endif
