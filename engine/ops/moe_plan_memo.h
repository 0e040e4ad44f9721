/* ops/moe_plan_memo.h — the dry device's memo of the MoE plan (moe_plan.c).
 * Internal.
 *
 * Why: every MoE layer of a step on a dry device (backend/dry/dry.h) plans
 * the same routes, so the plan's passes over them give the same counts
 * layer after layer; and a planner measures configuration after
 * configuration on new dry devices that read the same routes (a pure route
 * hook's shared answer, pl_dry_set_routes_pure).  The memo keeps what the
 * passes gave and each plan reads it when its inputs compare equal:
 *   - the local counts per expert (a function of N, k, E and the routes);
 *   - the block counts cnt3 and their offsets off3 (of those, the group's
 *     lower-rank counts cum, the LLEP plan's pieces, Ep, K, the chunking);
 *   - in a virtual group, what every member sends this rank (rc3, vrs: of
 *     those and the rank) and the chunks' layouts (of those and the helper
 *     sets, a function of the plan and the rank).
 * Nothing in it depends on the device: only on those inputs.  Routes read
 * in place from a dry device (pl_dry_routes_view) are known by their stamp;
 * others by their values.  Each thread keeps its eight most recent memos
 * (one per routes and block counts); a plan reads them only on a dry
 * device. */
#ifndef PLATEAU_OPS_MOE_PLAN_MEMO_H
#define PLATEAU_OPS_MOE_PLAN_MEMO_H

#include "ops/llep_plan.h"
#include "ops/moe_internal.h"

typedef struct pl__moe_plan_memo {
  int64_t N;
  int k, E;
  uint64_t stamp; /* the routes' stamp (idx NULL), or 0 */
  int32_t *idx;   /* N * k routes (stamp 0) */
  int64_t *mine;  /* E + 2: the local counts, N, a validity flag */
  bool has_cnt;   /* the block counts below are set */
  int Ep, K;
  bool contig;
  int np;
  int64_t *cum;   /* E */
  int *piece_off; /* E + 1 */
  int *prank;     /* np pieces' ranks */
  int64_t *pend;  /* np pieces' ends */
  int64_t *cnt3;  /* K * Ep * E */
  int64_t *off3;  /* K * Ep * E */
  bool has_virt;  /* a virtual group's counts below, of rank virt_me */
  int virt_me;
  int64_t *rc3, *vrs; /* Ep * K * E; Ep * 2K */
  pl__moe_chunk *lay; /* with them: K chunks' layouts, their groups */
  int64_t *lay_ibuf;  /* and count arrays (K * 4 * Ep) */
} pl__moe_plan_memo;

/* The calling thread's most recent memo of routes idx (N x k over E
 * experts; stamp: a dry device's stamp of idx, or 0), else NULL. */
pl__moe_plan_memo *pl__moe_memo_find(int64_t N, int k, int E,
                                     const int32_t *idx, uint64_t stamp);

/* A new memo of routes idx (stamp as find's) with local counts mine (E + 2),
 * the thread's most recent (its oldest dropped); NULL when the host has no
 * room (the plan then goes on without one). */
pl__moe_plan_memo *pl__moe_memo_keep(int64_t N, int k, int E,
                                     const int32_t *idx, uint64_t stamp,
                                     const int64_t *mine);

/* The thread's memo of mm's routes whose block counts are those of a plan
 * with these inputs, made the most recent; NULL when none. */
pl__moe_plan_memo *pl__moe_memo_find_cnt(const pl__moe_plan_memo *mm, int E,
                                         int Ep, int K, const int64_t *cum,
                                         const pl_llep_plan *p, bool contig);

/* Keep a plan's block counts cnt3 and offsets off3 (K * Ep * E each) with
 * their inputs: in mm when it holds none, else in a new memo of mm's
 * routes.  The memo that holds them; NULL when out of room. */
pl__moe_plan_memo *pl__moe_memo_keep_cnt(pl__moe_plan_memo *mm, int E, int Ep,
                                         int K, const int64_t *cum,
                                         const int64_t *cnt3,
                                         const int64_t *off3,
                                         const pl_llep_plan *p, bool contig);

/* cnt (K x E) <- the routes per chunk and expert of the routes of stamp
 * (a dry device's, pl_dry_routes_stamp; N x k over E experts) in K chunks
 * (contiguous or strided), as any thread counted them before: true; false
 * when none is kept (stamp 0: never). */
bool pl__moe_chunk_counts_find(uint64_t stamp, int64_t N, int k, int E, int K,
                               bool contig, int64_t *cnt);
/* cnt (K x E) += the counts fine (Kf x E) of Kf strided chunks, K dividing
 * Kf: token t is in chunk t mod K = (t mod Kf) mod K. */
void pl__moe_chunk_counts_fold(const int64_t *fine, int Kf, int K, int E,
                               int64_t *cnt);
/* Keep those counts (the process's 32 most recent, read by every thread;
 * nothing when stamp is 0 or the host has no room). */
void pl__moe_chunk_counts_keep(uint64_t stamp, int64_t N, int k, int E, int K,
                               bool contig, const int64_t *cnt);
/* Keep a virtual group's counts of rank me (rc3: n3, vrs: nrs entries) for
 * the block counts held, dropping the layouts (nothing when out of room). */
void pl__moe_memo_keep_virt(pl__moe_plan_memo *mm, int me, const int64_t *rc3,
                            size_t n3, const int64_t *vrs, size_t nrs);

/* Keep the K chunk layouts ch (count arrays in ibuf, K * 4 * Ep) for the
 * virtual counts held (nothing when out of room). */
void pl__moe_memo_keep_lay(pl__moe_plan_memo *mm, const pl__moe_chunk *ch,
                           const int64_t *ibuf, int K, int Ep, int64_t N);

/* K chunk layouts src (count arrays in sibuf) into dst (zeroed; dibuf):
 * each chunk's fields, its count arrays re-pointed into dibuf, its groups
 * copied.  PL_ENOMEM (naming N) when the host has no room; the groups
 * copied so far stay in dst (freed with it). */
pl_status pl__moe_layouts_copy(pl__moe_chunk *dst, int64_t *dibuf,
                               const pl__moe_chunk *src, const int64_t *sibuf,
                               int K, int Ep, int64_t N);

#endif
