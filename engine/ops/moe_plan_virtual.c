/* moe_plan_virtual.c — the MoE plan's counts in a virtual expert group
 * (train/layout.h: one present rank, member 0, the other members absent).
 *
 * Why: a real group's plan exchanges counts (what every source sends each
 * destination, per chunk and expert; every member's received and sent rows
 * for the group's maxima).  A virtual group has no one to exchange with, and
 * its comm's stand-ins (the caller's own block for every member) are right
 * only where the LLEP plan keeps every expert on one rank.  Where it splits
 * an expert over ranks, a source's routes of that expert land on ranks by
 * their global position, which differs by source.  The absent members route
 * as this rank does (the balanced profile is the same on every rank), so
 * member q's routes of expert e are this rank's, placed after the q·c_e
 * routes of e of the members before it (c_e: this rank's count of e): their
 * destinations follow from the plan's pieces, and every count the real
 * group would exchange is computed here, exactly. */
#include <stdlib.h>
#include <string.h>

#include "ops/llep_plan.h"
#include "ops/moe_internal.h"

/* Member q's routes of expert e in chunk ch are counted by the positions
 * [q·c_e, (q+1)·c_e) of e's global order; pieces of e give each position's
 * rank.  Adds to rc3 (what q sends member me) and RS (per member: R rows
 * received, then S rows sent to others, per chunk). */
static void add_piece_rows(const pl_llep_plan *p, int e, int q, int me,
                           int64_t ce, const int *occ, const int64_t *cnt_e,
                           int K, int E, int64_t *rc3, int64_t *RS) {
  const int lo = p->piece_off[e], hi = p->piece_off[e + 1];
  const int64_t base = (int64_t)q * ce;
  int64_t start = 0;
  for (int i = lo; i < hi; i++) {
    const int64_t end = p->pieces[i].end;
    const int d = p->pieces[i].rank;
    const int64_t a = start > base ? start - base : 0,
                  b = end < base + ce ? end - base : ce;
    start = end;
    if (a >= b)
      continue;
    int64_t *R = RS + (size_t)d * 2 * K, *S = RS + (size_t)q * 2 * K + K;
    if (hi - lo == 1) { /* one piece: every route of e, chunk by chunk */
      for (int ch = 0; ch < K; ch++) {
        const int64_t v = cnt_e[(size_t)ch * E + e];
        if (d == me)
          rc3[((size_t)q * K + ch) * E + e] += v;
        R[ch] += v;
        if (d != q)
          S[ch] += v;
      }
      continue;
    }
    for (int64_t li = a; li < b; li++) {
      const int ch = occ[li];
      if (d == me)
        rc3[((size_t)q * K + ch) * E + e]++;
      R[ch]++;
      if (d != q)
        S[ch]++;
    }
  }
}

pl_status pl__moe_virtual_counts(const pl_llep_plan *p, int E, int Ep, int K,
                                 int me, int64_t N, int k, const int32_t *idx,
                                 bool contig, const int64_t *cnt_e,
                                 const int64_t *mine, int64_t *rc3,
                                 int64_t *RS) {
  memset(rc3, 0, (size_t)Ep * K * E * sizeof *rc3);
  memset(RS, 0, (size_t)Ep * 2 * K * sizeof *RS);
  /* the chunk of each route of a split expert, in its order (the others
   * are counted per chunk from cnt_e) */
  int64_t *start = calloc((size_t)E + 1, sizeof *start);
  int64_t *fill = calloc((size_t)E, sizeof *fill);
  if (!start || !fill) {
    free(start);
    free(fill);
    return pl_set_error(PL_ENOMEM, "moe: virtual group counts (E=%d)", E);
  }
  for (int e = 0; e < E; e++) {
    const bool split = p->piece_off[e + 1] - p->piece_off[e] > 1;
    start[e + 1] = start[e] + (split ? mine[e] : 0);
  }
  int *occ = malloc((size_t)(start[E] > 0 ? start[E] : 1) * sizeof *occ);
  if (!occ) {
    free(start);
    free(fill);
    return pl_set_error(PL_ENOMEM, "moe: virtual group counts (E=%d)", E);
  }
  if (start[E] > 0)
    for (int64_t t = 0; t < N; t++)
      for (int j = 0; j < k; j++) {
        const int e = idx[t * k + j];
        if (start[e + 1] > start[e])
          occ[start[e] + fill[e]++] = pl_chunk_of(t, N, K, contig);
      }
  for (int q = 0; q < Ep; q++)
    for (int e = 0; e < E; e++)
      if (mine[e] > 0)
        add_piece_rows(p, e, q, me, mine[e], occ + start[e], cnt_e, K, E, rc3,
                       RS);
  free(occ);
  free(start);
  free(fill);
  return PL_OK;
}
