/* plan_internal.h — what the files of the planner share; not installed.
 *   mem_dry.c   plateau's memory: the trainer stepped on a dry device
 *               (pl_plan_memory); mem_hook.c: another system's, through
 *               the measurement its code registered;
 *   track.c     the phase bins, a memory's tags, the terms' names;
 *   fsdp2_time.c  the FSDP2 baseline's time model and configuration check
 *               (its memory is the baseline's dry measurement, mem_hook.c);
 *   time.c      plateau's time model;
 *   machine.c   the machine: defaults, calibration and rate files, and its
 *               costs (usable memory, a collective's seconds, attention's
 *               rate at a context) both time models read;
 *   search.c    feasibility and the automatic choice; memo.c its memory
 *               evaluations (counted, memoized, measured ahead); ahead.c
 *               its candidates measured ahead on a second thread;
 *   fill.c      spending the headroom (pl_plan_fill). */
#ifndef PLATEAU_PLAN_INTERNAL_H
#define PLATEAU_PLAN_INTERNAL_H

#include "plan/plan.h"

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

/* c's memory (pl_plan_memory; with_worst: dev_worst too): plateau's
 * measured (pl__plan_memory_dry), another system's through its hook
 * (mem_hook.c).  rank <= 0: rank 0; another rank PL_EUNSUPPORTED. */
pl_status pl__plan_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                          const pl_plan_machine *mc, int rank, bool with_worst,
                          pl_plan_mem *out);
/* Plateau's measured (mem_dry.c): the trainer of c (c itself on one rank,
 * else the rank view of its rank 0) stepped on a dry device with balanced
 * routes (skewed by c's imb toward rank 0: pl_plan_dry_device_skewed);
 * with_worst: again with adversarial ones for dev_worst.  rank < 0
 * measures rank 0.  Plateau's trainer only (PL_EUNSUPPORTED). */
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
/* ---- the search's memory evaluations (memo.c) ----
 * Every memory evaluation of the search and the fill goes through
 * pl__plan_mem_eval: it counts them (pl__plan_mem_evals: the evaluations
 * made since the process began, over every thread) and, given a memo
 * (pl__plan_memo_new; NULL: none), answers a configuration evaluated before
 * from it (the measurement is a pure function of the configuration).  The upper
 * bound of tok/s/GPU over the knobs the memory decides (time.c: SCO budget
 * 0, every layer kept for the parts that shrink with it and none for those
 * that grow, the optimizer at its best resident split) lets the search skip
 * the memory of a candidate that cannot change its choice. */
typedef struct pl__plan_memo pl__plan_memo;
pl__plan_memo *pl__plan_memo_new(void);
/* How many configurations the memo's dry device could not build
 * (PL_EUNSUPPORTED: a knob the code measured does not run). */
int pl__plan_memo_unbuilt(const pl__plan_memo *mm);
/* How many its dry device could not even reserve (PL_EINFEASIBLE: they do
 * not fit). */
int pl__plan_memo_beyond(const pl__plan_memo *mm);
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
/* A look-ahead for mm: a view of it for one other thread.  The view's
 * evaluations answer from mm's table and from a store the two share, and
 * leave what they measure in the store; mm's thread takes a stored answer
 * (or waits for one being measured) where it would have measured, so mm's
 * answers, counts and table are those of a search without the view.  NULL
 * when mm has one already or the host has no memory.  Free the view (after
 * its thread is done) before mm. */
pl__plan_memo *pl__plan_memo_ahead(pl__plan_memo *mm);
/* The view measures nothing more: each of its evaluations from now on is
 * PL_ERUNTIME (one being measured ends first). */
void pl__plan_memo_cancel(pl__plan_memo *view);
/* The view's measurements mm's thread took from the store. */
long pl__plan_memo_ahead_used(const pl__plan_memo *mm);

/* Does a search leave a candidate out when its evaluation answers st?  A
 * knob its layout refuses (PL_EINVAL), a configuration the dry device does
 * not run (PL_EUNSUPPORTED) or cannot even reserve (PL_EINFEASIBLE). */
static inline bool pl__plan_left_out(pl_status st) {
  return st == PL_EINVAL || st == PL_EUNSUPPORTED || st == PL_EINFEASIBLE;
}

/* ---- ranking in order, measuring ahead (ahead.c) ----
 * A search that ranks n candidates in order calls pl__ahead_at(a, i, r)
 * before ranking candidate i with ranking r (bytes long): until whoever
 * took i has guessed it, the calling thread guesses later ones, and a
 * second thread guesses the next ones all along — guess(ctx, copy, j)
 * ranks candidate j on copy, a copy of r as it was, and leaves only
 * measurements behind (through a memo's view: pl__plan_memo_ahead).  The
 * search's own ranking is made as without it.  pl__ahead_may_run: not
 * inside a parallel region (points measured side by side) nor where OpenMP
 * is given one thread.  pl__ahead_start: NULL when no thread could start
 * (the search goes alone: pl__ahead_at and pl__ahead_stop take NULL). */
typedef struct pl__ahead pl__ahead;
typedef void (*pl__guess_fn)(void *ctx, void *copy, int j);
bool pl__ahead_may_run(int n);
pl__ahead *pl__ahead_start(int n, size_t bytes, const void *ranking,
                           pl__guess_fn guess, void *ctx);
void pl__ahead_at(pl__ahead *a, int i, const void *ranking);
/* The thread ends (after the guess it is making: cancel the memo's view
 * first for it to end soon). */
void pl__ahead_stop(pl__ahead *a);
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
