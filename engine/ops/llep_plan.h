/* llep_plan.h — the LLEP plan (least-loaded expert placement), position-based
 * route assignment, Eq. 1 chunking, and the synthetic routing profiles.
 *
 * Pure host C: everything here is a function of small integer data (per-expert
 * counts, per-rank token counts) that every rank of the EP group holds after an
 * all-gather, so every rank computes the identical plan without further
 * communication.  See DESIGN.md §1.1.
 *
 * Notation: E experts, Ep expert-parallel ranks, E/Ep native experts per rank
 * (native rank of expert e is e / (E/Ep)), k routes per token, N tokens on a
 * rank, c per-source token cap, K chunks. */
#ifndef PLATEAU_OPS_LLEP_PLAN_H
#define PLATEAU_OPS_LLEP_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plateau/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One piece of an expert's global token list: routes at global positions
 * [start, end) of expert `expert` are computed on rank `rank`. */
typedef struct pl_llep_piece {
  int32_t expert, rank;
  int64_t start, end;
} pl_llep_piece;

typedef struct pl_llep_knobs {
  double alpha; /* capacity factor: M = alpha * floor(total / Ep) (1.0 paper) */
  int64_t m;    /* minimum spilled piece (tokens) unless final (1024)        */
  double lambda; /* skip planning when max/mean native load < lambda (1.3);
                    0 never skips                                            */
  bool native;   /* plain EP: every expert stays on its native rank          */
} pl_llep_knobs;

/* Defaults of the paper: alpha 1.0, m 1024, lambda 1.3, native false. */
pl_llep_knobs pl_llep_knobs_default(void);

typedef struct pl_llep_plan {
  int E, Ep;
  int64_t total;    /* sum of counts                                        */
  int64_t capacity; /* M                                                    */
  bool planned;     /* false: native placement (skipped by lambda, or EP)   */
  int n_pieces;
  pl_llep_piece *pieces; /* grouped by expert, each expert's by start       */
  int *piece_off;        /* E + 1 offsets into pieces                       */
  int64_t *load_native;  /* Ep: routes per rank under native placement      */
  int64_t *load_planned; /* Ep: routes per rank under the plan              */
  double imb_native;     /* max / mean of load_native (1 when total == 0)   */
  double imb_planned;    /* max / mean of load_planned                      */
  int n_spilled;         /* pieces not on their expert's native rank        */
} pl_llep_plan;

/* Build the plan from global per-expert counts (E values >= 0).  E must be a
 * positive multiple of Ep (PL_EINVAL otherwise, naming both).  The caller frees
 * with pl_llep_plan_free. */
pl_status pl_llep_plan_build(const int64_t *counts, int E, int Ep,
                             pl_llep_knobs knobs, pl_llep_plan *out);
void pl_llep_plan_free(pl_llep_plan *p);

static inline int pl_llep_native_rank(int e, int E, int Ep) {
  return e / (E / Ep);
}

/* Rank that computes the route at global position pos of expert e (pos <
 * counts[e]). */
int pl_llep_plan_dest(const pl_llep_plan *p, int e, int64_t pos);

/* ---- Eq. 1 chunking ------------------------------------------------------ */

/* K = min(max_r ceil(N_r / c), K_max), at least 1; c_eff = ceil(N_max / K),
 * where N_max is the largest per-rank token count of the group (c_eff of the
 * bound 2*Ep*k*c_eff*H*b).  c >= 1 and K_max >= 1 (PL_EINVAL otherwise). */
pl_status pl_llep_chunking(int64_t N_max, int64_t c, int K_max, int *K,
                           int64_t *c_eff);

/* Chunk of token position t (0 <= t < N) among K chunks of a rank holding N
 * tokens: strided (t mod K) or contiguous (t / ceil(N/K)). */
static inline int pl_chunk_of(int64_t t, int64_t N, int K, bool contiguous) {
  if (!contiguous)
    return (int)(t % K);
  int64_t ce = (N + K - 1) / K;
  return ce > 0 ? (int)(t / ce) : 0;
}

/* ---- routing profiles (DESIGN §1.1, LLEP's benchmark) ---------------------
 */

typedef struct pl_route_profile {
  char name[16]; /* "balanced" or "r/h[s]" as given, e.g. "95/16", "95/16s" */
  bool balanced;
  double r;      /* hot fraction of tokens                                   */
  int h;         /* hot experts {0..h-1}                                     */
  bool shuffled; /* the tokens' positions shuffled (a fixed permutation)     */
} pl_route_profile;

/* Parse "balanced", "<percent>/<hot>" (e.g. "95/16": LLEP's layout, the hot
 * tokens first) or "<percent>/<hot>s" (the same routes at shuffled
 * positions); PL_EINVAL otherwise. */
pl_status pl_route_profile_parse(const char *s, pl_route_profile *out);

/* Fill idx (N x k) and weights (N x k, 1/k each; NULL: none written) of a
 * rank's N tokens:
 * balanced: pattern index i picks (i + j) mod E; r/h: the first floor(r*N)
 * indices pick hot experts j mod h, the others h + ((i + j) mod (E - h)).
 * Position t holds index t (LLEP's layout) or, `shuffled`, index pi(t) of a
 * fixed pseudo-random permutation pi (Fisher-Yates, the same on every rank):
 * the same routes, but every run of positions a sample of all of them.  The
 * layout decides what a chunk holds: in LLEP's, a contiguous chunk of the
 * first r*N tokens routes to the h hot experts only, and the regular
 * patterns alias with strided chunks; shuffled, every chunk of either kind
 * sees each expert's share, as a router's output would.  A nonzero seed
 * rotates the token order of the rank by a seeded offset (the set of routes is
 * the same; their positions differ), so strided and contiguous chunking see
 * different arrangements; seed 0 is LLEP's exact layout.  PL_EINVAL when
 * h < 1 or h >= E, k < 1 or k > E for balanced; PL_ENOMEM when the
 * permutation of a shuffled profile cannot be allocated. */
pl_status pl_route_profile_fill(const pl_route_profile *p, int64_t N, int k,
                                int E, uint64_t seed, int rank, int32_t *idx,
                                float *weights);

#ifdef __cplusplus
}
#endif
#endif
