/* moe_plan.c — the routing plan of one MoE forward (DESIGN.md §1.1): from
 * the routes idx (N x k, host) and the EP group's per-expert counts, the LLEP
 * plan (llep_plan.h; native placement for ep), the Eq. 1 chunks, every route's
 * destination by its global position, and per chunk the send / receive
 * layouts, the expert GEMM groups and the index arrays the kernels read
 * (uploaded once, tag "routing").  Kept in a pl_moe_ctx so the backward
 * re-dispatches with the same plan.
 *
 * Why everything on the host: each rank all-gathers the counts, so every rank
 * knows every chunk's sizes and the collectives' order; no size is read back
 * from the device, and the pipeline's overlap gates cost no sync.
 *
 * Expert-major chunks (see expert_major): the received rows of a chunk are
 * permuted by (expert slot, source) so each expert slot gets one GEMM per
 * projection, when the permutation's transient copy fits the bound. */
#include <stdlib.h>
#include <string.h>

#include "backend/dry/dry.h"
#include "core/internal.h"
#include "ops/moe_internal.h"
#include "ops/moe_plan_memo.h"

void pl_moe_ctx_free(pl_moe_ctx *c) {
  if (!c)
    return;
  if (c->ch)
    for (int i = 0; i < c->K; i++)
      free(c->ch[i].g);
  free(c->ch);
  free(c->ibuf);
  free(c->Rmax);
  if (c->dmeta)
    pl_free(c->m->dev, c->dmeta);
  if (c->hw)
    pl_free(c->m->dev, c->hw);
  free(c->s_exp);
  free(c->s_dst);
  free(c->h_exp);
  free(c->h_src);
  pl_llep_plan_free(&c->plan);
  for (int i = 0; i < c->pcap; i++)
    if (c->pev[i])
      pl_event_destroy(c->pev[i]);
  free(c->pev);
  free(c->pst);
  free(c);
}

/* The stage profile's marks (moe_internal.h): events kept in the context
 * beside its plan, read by moe_pipeline.c's settle. */
pl_status pl__moe_mark(pl_moe_ctx *c, int stage, pl_stream *s) {
  if (!c->m->cfg.profile)
    return PL_OK;
  if (c->pn == c->pcap) {
    int cap = c->pcap ? 2 * c->pcap : 64;
    pl_event **e = realloc(c->pev, (size_t)cap * sizeof *e);
    if (!e)
      return pl_set_error(PL_ENOMEM, "moe: profile events");
    c->pev = e;
    int *t = realloc(c->pst, (size_t)cap * sizeof *t);
    if (!t)
      return pl_set_error(PL_ENOMEM, "moe: profile events");
    c->pst = t;
    for (int i = c->pcap; i < cap; i++)
      c->pev[i] = NULL;
    for (; c->pcap < cap; c->pcap++)
      PL_TRY(pl_event_create(c->m->dev, &c->pev[c->pcap]));
  }
  PL_TRY(pl_event_record(c->pev[c->pn], s));
  c->pst[c->pn++] = stage < 0 ? PL_MOE_ST_IDLE : stage;
  return PL_OK;
}

static int helper_index(const pl_moe_ctx *c, int e) {
  for (int i = 0; i < c->nh; i++)
    if (c->h_exp[i] == e)
      return i;
  return -1;
}

/* Expert-major layout of chunk C (host side).  The all-to-all-v delivers a
 * source-major receive buffer (blocks by source rank, each by expert): with
 * strided chunks every chunk holds a segment of every (source, expert) pair,
 * so grouping the GEMMs by segment issues Ep * E_local small GEMMs per
 * projection.  Here the received rows are ordered by (expert slot, source)
 * instead: perm (expert-major row r' <- source-major row perm[r']) is applied
 * by one row gather after the receive, inv on the way back before the return
 * all-to-all-v, and the compute issues one GEMM per expert slot with all
 * sources' rows (at most E_local + helpers per projection).  Each permutation
 * holds a second copy of the chunk's rows for a moment, so the chunk is
 * expert-major only when 3*R fits the bound 2*Ep*k*c_eff rows on every rank
 * (backward: X, dout and the copy; decided on group-wide maxima, so every
 * rank and the overlap gates agree); otherwise it keeps the segment groups.
 * Row values do not depend on the grouping (row-deterministic GEMMs); the
 * weight gradients sum an expert's rows in one GEMM instead of per segment.
 * hmeta NULL (a dry device): the groups without the permutations' values.
 * Returns nonzero on host OOM. */
static int expert_major(pl_moe *m, pl_moe_ctx *c, pl__moe_chunk *C,
                        int32_t *hmeta) {
  const int nslot = m->El + c->nh, ng = C->ng_src;
  pl__moe_group *ge =
      malloc((size_t)(nslot > 0 ? nslot : 1) * sizeof(pl__moe_group));
  /* the groups of each slot in their order: a counting sort by slot */
  int *first = calloc((size_t)nslot + 1, sizeof *first);
  int *order = malloc((size_t)(ng > 0 ? ng : 1) * sizeof *order);
  if (!ge || !first || !order) {
    free(ge);
    free(first);
    free(order);
    return 1;
  }
  for (int gi = 0; gi < ng; gi++)
    first[C->g[gi].slot + 1]++;
  for (int sl = 0; sl < nslot; sl++)
    first[sl + 1] += first[sl];
  for (int gi = 0; gi < ng; gi++)
    order[first[C->g[gi].slot]++] = gi;
  int nge = 0;
  int64_t r = 0;
  for (int sl = 0, i = 0; sl < nslot; sl++) {
    const int64_t r0 = r;
    for (; i < first[sl]; i++) {
      const pl__moe_group *g = &C->g[order[i]];
      if (!hmeta) { /* dry device: the groups only, no index values */
        r += g->rows;
        continue;
      }
      for (int64_t q = 0; q < g->rows; q++, r++) {
        hmeta[C->o_perm + r] = (int32_t)(g->row0 + q);
        hmeta[C->o_inv + g->row0 + q] = (int32_t)r;
      }
    }
    if (r > r0)
      ge[nge++] = (pl__moe_group){r0, r - r0, sl};
  }
  free(first);
  free(order);
  PL_ASSERT(r == C->R);
  free(C->g);
  C->g = ge;
  C->ng = nge;
  C->em = true;
  return 0;
}

/* The host scratch of one plan, freed when the plan is made (or fails).
 * cnt3, off3: per (chunk, destination, expert) routes and their offset
 * inside block (chunk, destination); rc3[src][ch][e]: what every source
 * sends me; dest: every route's destination rank; hmeta: the index arrays
 * before their upload. */
typedef struct plan_scratch {
  int E, Ep, K;
  int64_t *mine, *all;        /* local counts (+ N, validity); all ranks' */
  int64_t *gcount, *cum, *li; /* group counts; routes of lower ranks; placed */
  int64_t N_max;
  int64_t *cnt3, *off3, *snd3, *rc3;
  int32_t *dest, *hmeta;
  int64_t nmeta;
  pl__moe_plan_memo *memo; /* dry device: its memo of these routes, or NULL */
  uint64_t stamp;          /* the dry device's stamp of idx (dry.h), or 0 */
  /* dry: cnt3 and off3 (lent3), rc3 and vrs (lent_virt) are the memo's,
   * read only, not freed with the scratch */
  bool lent3, lent_virt;
  int64_t *vrs; /* a virtual group: every member's R, S per chunk (Ep·2K) */
} plan_scratch;

static size_t i3(const plan_scratch *x, int ch, int d, int e) {
  return ((size_t)ch * x->Ep + d) * x->E + e;
}

static void scratch_free(plan_scratch *x) {
  free(x->mine);
  free(x->all);
  free(x->gcount);
  free(x->cum);
  free(x->li);
  if (!x->lent3) {
    free(x->cnt3);
    free(x->off3);
  }
  free(x->snd3);
  if (!x->lent_virt) {
    free(x->rc3);
    free(x->vrs);
  }
  free(x->dest);
  free(x->hmeta);
}

static pl_status host_oom(int64_t N) {
  return pl_set_error(PL_ENOMEM, "moe: host metadata allocation (N=%lld)",
                      (long long)N);
}

/* 1. Local counts (+ N and a validity flag) gathered by every rank; the
 * group's count per expert, the routes of lower ranks per expert (a route's
 * global position) and the largest N of the group. */
static pl_status gather_counts(pl_moe *m, int64_t N, const int32_t *idx,
                               plan_scratch *x) {
  const int E = x->E, Ep = x->Ep, k = m->cfg.k, me = m->rank;
  x->mine = calloc((size_t)E + 2, sizeof(int64_t));
  x->all = calloc((size_t)Ep * (E + 2), sizeof(int64_t));
  if (!x->mine || !x->all)
    return host_oom(N);
  int64_t bad = N < 0 ? 1 : 0;
  const bool dry = pl__dev_dry(m->dev) && N >= 0;
  x->stamp = dry ? pl_dry_routes_stamp(m->dev, idx, N, k, E) : 0;
  x->memo = dry ? pl__moe_memo_find(N, k, E, idx, x->stamp) : NULL;
  if (x->memo) { /* routes a plan on a dry device has counted */
    memcpy(x->mine, x->memo->mine, ((size_t)E + 2) * sizeof *x->mine);
  } else {
    /* read in place from a dry device: counted (and checked) there */
    const bool counted = pl_dry_routes_counts(m->dev, idx, N, k, E, x->mine);
    for (int64_t r = 0; r < N * k && !bad && !counted; r++) {
      if (idx[r] < 0 || idx[r] >= E)
        bad = 1 + r;
      else
        x->mine[idx[r]]++;
    }
    x->mine[E] = N < 0 ? 0 : N;
    x->mine[E + 1] = bad;
    if (dry && !bad)
      x->memo = pl__moe_memo_keep(N, k, E, idx, x->stamp, x->mine);
  }
  PL_TRY(pl_host_allgather_i64(m->comm, x->mine, (size_t)E + 2, x->all));
  for (int r = 0; r < Ep; r++)
    if (x->all[(size_t)r * (E + 2) + E + 1]) {
      if (r == me && N < 0)
        return pl_set_error(PL_EINVAL, "moe: N=%lld: must be >= 0",
                            (long long)N);
      if (r == me)
        return pl_set_error(
            PL_EINVAL, "moe: idx[%lld]=%d: expert ids must be in [0, E=%d)",
            (long long)(bad - 1), idx[bad - 1], E);
      return pl_set_error(PL_EINVAL, "moe: rank %d passed invalid routes", r);
    }
  x->gcount = calloc((size_t)E, sizeof(int64_t));
  x->cum = calloc((size_t)E, sizeof(int64_t));
  x->li = calloc((size_t)E, sizeof(int64_t));
  if (!x->gcount || !x->cum || !x->li)
    return host_oom(N);
  x->N_max = 0;
  for (int r = 0; r < Ep; r++) {
    const int64_t *a = x->all + (size_t)r * (E + 2);
    for (int e = 0; e < E; e++) {
      x->gcount[e] += a[e];
      if (r < me)
        x->cum[e] += a[e];
    }
    if (a[E] > x->N_max)
      x->N_max = a[E];
  }
  return PL_OK;
}

/* 2. The plan (native placement for ep) and the chunking (Eq. 1). */
static pl_status plan_and_chunks(pl_moe *m, pl_moe_ctx *c, plan_scratch *x) {
  const pl_moe_cfg *cf = &m->cfg;
  pl_llep_knobs kn = cf->knobs;
  if (!pl_moe_variant_desc_of(cf->variant)->plans)
    kn.native = true;
  PL_TRY(pl_llep_plan_build(x->gcount, x->E, x->Ep, kn, &c->plan));
  PL_TRY(pl_moe_variant_chunking(cf->variant, x->N_max, cf->c, cf->K_max, &c->K,
                                 &c->c_eff));
  x->K = c->K;
  return PL_OK;
}

/* Are the pieces of every expert of p in increasing order of their ends?
 * Then the piece of an expert's next position is at or after the piece of
 * its previous one, and a cursor per expert finds what pl_llep_plan_dest
 * would without rescanning. */
static bool ends_ordered(const pl_llep_plan *p) {
  for (int e = 0; e < p->E; e++)
    for (int i = p->piece_off[e] + 1; i < p->piece_off[e + 1]; i++)
      if (p->pieces[i].end < p->pieces[i - 1].end)
        return false;
  return true;
}

/* pl_llep_plan_dest(p, e, pos) for positions of e that only grow, from
 * cursor *cur (the piece of e's previous position, first its first piece);
 * the pieces' ends ordered (ends_ordered). */
static inline int dest_from(const pl_llep_plan *p, int e, int64_t pos,
                            int *cur) {
  int i = *cur;
  const int hi = p->piece_off[e + 1];
  while (i < hi && pos >= p->pieces[i].end)
    i++;
  PL_ASSERT(i < hi && "route position beyond the expert's pieces");
  *cur = i;
  return p->pieces[i].rank;
}

/* The chunks of tokens 0..N-1 in order (pl_chunk_of) without a division
 * per token: strided chunks cycle through 0..K-1, contiguous ones step at
 * each multiple of ceil(N/K). */
typedef struct chunk_walk {
  int K, ch;
  bool contig;
  int64_t ce, next;
} chunk_walk;

static chunk_walk chunk_walk_start(int64_t N, int K, bool contig) {
  const int64_t ce = (N + K - 1) / K;
  return (chunk_walk){K, 0, contig, ce, ce};
}

/* The chunk of the next token t (called for t = 0, 1, ...). */
static inline int chunk_walk_next(chunk_walk *w, int64_t t) {
  if (!w->contig) {
    const int ch = w->ch;
    w->ch = ch + 1 == w->K ? 0 : ch + 1;
    return ch;
  }
  while (w->ce > 0 && t >= w->next) {
    w->ch++;
    w->next += w->ce;
  }
  return w->ch;
}

/* The offset of expert e inside block (ch, d), from the counts. */
static void fill_offsets(plan_scratch *x) {
  for (int ch = 0; ch < x->K; ch++)
    for (int d = 0; d < x->Ep; d++) {
      int64_t o = 0;
      for (int e = 0; e < x->E; e++) {
        x->off3[i3(x, ch, d, e)] = o;
        o += x->cnt3[i3(x, ch, d, e)];
      }
    }
}

/* cnt_ce (K x E, zeroed) <- the routes per chunk and expert; kept for the
 * routes' stamp (pl__moe_chunk_counts_keep).  Strided chunks are counted
 * K * 2^j at a time (at least 64 where there are the tokens) in the same
 * pass: every count of K' dividing that number is then a sum of those. */
static void count_chunks(int64_t N, int k, int E, int K, const int32_t *idx,
                         bool contig, uint64_t stamp, int64_t *cnt_ce) {
  int Kf = K;
  while (!contig && stamp && Kf < 64 && 2 * (int64_t)Kf <= N)
    Kf *= 2;
  int64_t *cnt = Kf == K ? cnt_ce : calloc((size_t)Kf * (size_t)E, sizeof *cnt);
  if (!cnt) /* no room for the finer counts: these alone */
    Kf = K, cnt = cnt_ce;
  chunk_walk cw = chunk_walk_start(N, Kf, contig);
  for (int64_t t = 0; t < N; t++) {
    int64_t *c = cnt + (size_t)chunk_walk_next(&cw, t) * E;
    const int32_t *it = idx + t * k;
    for (int j = 0; j < k; j++)
      c[it[j]]++;
  }
  pl__moe_chunk_counts_keep(stamp, N, k, E, Kf, contig, cnt);
  if (cnt == cnt_ce)
    return;
  pl__moe_chunk_counts_fold(cnt, Kf, K, E, cnt_ce);
  free(cnt);
}

/* The counts per (chunk, destination, expert) on a dry device, where no
 * route's destination is kept: an expert in one piece sends every route of
 * a chunk to that piece's rank, so its counts are its routes per chunk
 * (one pass that only counts); the routes of an expert split over ranks are
 * walked by position as route_destinations does. */
static void dry_counts(const pl_llep_plan *p, int64_t N, int k,
                       const int32_t *idx, bool contig, plan_scratch *x,
                       int64_t *cnt_ce, int *cur) {
  const int E = x->E, K = x->K;
  if (K == 1) /* one chunk: the local counts */
    memcpy(cnt_ce, x->mine, (size_t)E * sizeof *cnt_ce);
  else if (!pl__moe_chunk_counts_find(x->stamp, N, k, E, K, contig, cnt_ce))
    count_chunks(N, k, E, K, idx, contig, x->stamp, cnt_ce);
  bool split = false;
  for (int e = 0; e < E; e++) {
    const int n = p->piece_off[e + 1] - p->piece_off[e];
    split = split || n > 1;
    if (n != 1)
      continue; /* split, or no routes (no pieces) */
    const int d = p->pieces[p->piece_off[e]].rank;
    for (int ch = 0; ch < K; ch++)
      x->cnt3[i3(x, ch, d, e)] = cnt_ce[(size_t)ch * E + e];
  }
  if (!split)
    return;
  const bool walk = ends_ordered(p);
  for (int e = 0; e < E; e++)
    cur[e] = p->piece_off[e];
  chunk_walk cw = chunk_walk_start(N, K, contig);
  for (int64_t t = 0; t < N; t++) {
    const int ch = chunk_walk_next(&cw, t);
    const int32_t *it = idx + t * k;
    for (int j = 0; j < k; j++) {
      const int e = it[j];
      if (p->piece_off[e + 1] - p->piece_off[e] < 2)
        continue;
      const int64_t pos = x->cum[e] + x->li[e]++;
      const int d =
          walk ? dest_from(p, e, pos, &cur[e]) : pl_llep_plan_dest(p, e, pos);
      x->cnt3[i3(x, ch, d, e)]++;
    }
  }
}

/* 3. The destination of every route by its global position; the counts per
 * (chunk, destination, expert) and each expert's offset in its block.  On a
 * dry device the routes' destinations are not kept (dry_counts): only
 * fill_meta, which writes index values nothing reads there, needs them. */
static pl_status route_destinations(pl_moe *m, pl_moe_ctx *c, int64_t N,
                                    const int32_t *idx, bool contig,
                                    plan_scratch *x) {
  const int E = x->E, Ep = x->Ep, K = x->K, k = m->cfg.k;
  const size_t n3 = (size_t)K * Ep * E;
  const bool dry = pl__dev_dry(m->dev);
  const pl_llep_plan *p = &c->plan;
  pl__moe_plan_memo *mm =
      x->memo
          ? pl__moe_memo_find_cnt(x->memo, x->E, x->Ep, x->K, x->cum, p, contig)
          : NULL;
  if (mm) { /* dry: an earlier plan's (dest is not kept) */
    x->memo = mm;
    x->cnt3 = mm->cnt3;
    x->off3 = mm->off3;
    x->lent3 = true;
    return PL_OK;
  }
  x->cnt3 = calloc(n3, sizeof(int64_t));
  x->off3 = calloc(n3, sizeof(int64_t));
  if (!dry)
    x->dest = malloc((size_t)(N * k > 0 ? N * k : 1) * sizeof(int32_t));
  int *cur = malloc((size_t)E * sizeof(int));
  int64_t *cnt_ce = dry ? calloc((size_t)K * E, sizeof *cnt_ce) : NULL;
  if (!x->cnt3 || !x->off3 || !cur || (dry ? !cnt_ce : !x->dest)) {
    free(cur);
    free(cnt_ce);
    return host_oom(N);
  }
  if (dry) {
    dry_counts(p, N, k, idx, contig, x, cnt_ce, cur);
  } else {
    const bool walk = ends_ordered(p);
    for (int e = 0; e < E; e++)
      cur[e] = p->piece_off[e];
    chunk_walk cw = chunk_walk_start(N, K, contig);
    for (int64_t t = 0; t < N; t++) {
      int64_t *cnt = x->cnt3 + (size_t)chunk_walk_next(&cw, t) * Ep * E;
      const int32_t *it = idx + t * k;
      for (int j = 0; j < k; j++) {
        const int e = it[j];
        const int64_t pos = x->cum[e] + x->li[e]++;
        const int d =
            walk ? dest_from(p, e, pos, &cur[e]) : pl_llep_plan_dest(p, e, pos);
        x->dest[t * k + j] = d;
        cnt[(size_t)d * E + e]++;
      }
    }
  }
  free(cnt_ce);
  free(cur);
  fill_offsets(x);
  if (x->memo)
    x->memo = pl__moe_memo_keep_cnt(x->memo, x->E, x->Ep, x->K, x->cum, x->cnt3,
                                    x->off3, p, contig);
  return PL_OK;
}

/* 4b. A virtual group (train/layout.h): what the absent members would send,
 * computed (moe_plan_virtual.c), and every member's rows for the maxima. */
static pl_status virtual_counts(pl_moe *m, pl_moe_ctx *c, int64_t N,
                                const int32_t *idx, bool contig,
                                plan_scratch *x) {
  const int E = x->E, Ep = x->Ep, K = x->K;
  const size_t n3 = (size_t)K * Ep * E, nrs = (size_t)Ep * 2 * K;
  pl__moe_plan_memo *mm = x->memo && x->memo->has_cnt ? x->memo : NULL;
  if (mm && mm->has_virt && mm->virt_me == m->rank) { /* dry: the last's */
    x->rc3 = mm->rc3;
    x->vrs = mm->vrs;
    x->lent_virt = true;
    return PL_OK;
  }
  x->rc3 = malloc(n3 * sizeof *x->rc3);
  x->vrs = malloc(nrs * sizeof *x->vrs);
  if (!x->rc3 || !x->vrs)
    return host_oom(N);
  int64_t *cnt_e = calloc((size_t)K * E, sizeof *cnt_e);
  if (!cnt_e)
    return host_oom(N);
  for (int ch = 0; ch < K; ch++)
    for (int d = 0; d < Ep; d++)
      for (int e = 0; e < E; e++)
        cnt_e[(size_t)ch * E + e] += x->cnt3[i3(x, ch, d, e)];
  const pl_status st =
      pl__moe_virtual_counts(&c->plan, E, Ep, K, m->rank, N, m->cfg.k, idx,
                             contig, cnt_e, x->mine, x->rc3, x->vrs);
  free(cnt_e);
  if (st == PL_OK && mm) /* the memo's block counts are this plan's */
    pl__moe_memo_keep_virt(mm, m->rank, x->rc3, n3, x->vrs, nrs);
  return st;
}

/* 4. What every source sends me: rc3[src][ch][e] (a host all-to-all). */
static pl_status exchange_counts(pl_moe *m, pl_moe_ctx *c, int64_t N,
                                 const int32_t *idx, bool contig,
                                 plan_scratch *x) {
  const int E = x->E, Ep = x->Ep, K = x->K;
  const size_t n3 = (size_t)K * Ep * E;
  if (Ep > 1 && pl_comm_is_virtual(m->comm))
    return virtual_counts(m, c, N, idx, contig, x);
  x->snd3 = malloc(n3 * sizeof(int64_t));
  x->rc3 = malloc(n3 * sizeof(int64_t));
  if (!x->snd3 || !x->rc3)
    return host_oom(N);
  for (int d = 0; d < Ep; d++)
    for (int ch = 0; ch < K; ch++)
      for (int e = 0; e < E; e++)
        x->snd3[((size_t)d * K + ch) * E + e] = x->cnt3[i3(x, ch, d, e)];
  return pl_host_alltoall_i64(m->comm, x->snd3, (size_t)K * E, x->rc3);
}

/* Does expert e have a piece on rank d in plan p? */
static bool has_piece(const pl_llep_plan *p, int e, int d) {
  for (int i = p->piece_off[e]; i < p->piece_off[e + 1]; i++)
    if (p->pieces[i].rank == d)
      return true;
  return false;
}

/* 5. The helper weight sets, the plan's (expert, helper) pairs: the send
 * list ordered by (destination, expert), the receive list by (source,
 * expert). */
static pl_status helper_sets(pl_moe *m, pl_moe_ctx *c, int64_t N) {
  const pl_llep_plan *p = &c->plan;
  const int Ep = m->Ep, me = m->rank;
  const int np = p->n_pieces;
  c->s_exp = malloc((size_t)(np + 1) * sizeof(int));
  c->s_dst = malloc((size_t)(np + 1) * sizeof(int));
  c->h_exp = malloc((size_t)(np + 1) * sizeof(int));
  c->h_src = malloc((size_t)(np + 1) * sizeof(int));
  if (!c->s_exp || !c->s_dst || !c->h_exp || !c->h_src)
    return host_oom(N);
  /* this rank sends only its native experts (rank me holds experts
   * [me·El, (me+1)·El), pl_llep_native_rank) */
  for (int d = 0; d < Ep; d++)
    for (int e = me * m->El; e < (me + 1) * m->El && d != me; e++) {
      if (!has_piece(p, e, d))
        continue;
      c->s_exp[c->ns] = e;
      c->s_dst[c->ns++] = d;
    }
  for (int src = 0; src < Ep; src++)
    for (int e = src * m->El; e < (src + 1) * m->El; e++) {
      if (src == me || !has_piece(p, e, me))
        continue;
      c->h_exp[c->nh] = e;
      c->h_src[c->nh++] = src;
    }
  return PL_OK;
}

/* The send and receive layout of chunk ch (counts and displacements by
 * rank, the rows kept on this rank) and its GEMM groups, one per (source,
 * expert) segment. */
static pl_status chunk_layout(pl_moe *m, pl_moe_ctx *c, int ch, int64_t N,
                              const plan_scratch *x) {
  const int E = x->E, Ep = x->Ep, K = x->K, me = m->rank;
  pl__moe_chunk *C = &c->ch[ch];
  C->scnt = c->ibuf + (size_t)ch * 4 * Ep;
  C->sdsp = C->scnt + Ep;
  C->rcnt = C->sdsp + Ep;
  C->rdsp = C->rcnt + Ep;
  int64_t so = 0;
  for (int d = 0; d < Ep; d++) {
    int64_t n = 0;
    for (int e = 0; e < E; e++)
      n += x->cnt3[i3(x, ch, d, e)];
    if (d == me) {
      C->s_self = n;
      C->scnt[d] = 0;
      C->sdsp[d] = 0;
    } else {
      C->scnt[d] = n;
      C->sdsp[d] = so;
      so += n;
    }
  }
  C->S = so;
  int64_t ro = 0;
  int ng = 0;
  for (int src = 0; src < Ep; src++) {
    int64_t n = 0;
    for (int e = 0; e < E; e++) {
      int64_t v = x->rc3[((size_t)src * K + ch) * E + e];
      n += v;
      if (v > 0)
        ng++;
    }
    C->rdsp[src] = ro;
    C->rcnt[src] = src == me ? 0 : n;
    if (src == me)
      C->self_off = ro;
    ro += n;
  }
  C->R = ro;
  C->g = malloc((size_t)(ng > 0 ? ng : 1) * sizeof(pl__moe_group));
  if (!C->g)
    return host_oom(N);
  for (int src = 0; src < Ep; src++) {
    int64_t o = C->rdsp[src];
    for (int e = 0; e < E; e++) {
      int64_t v = x->rc3[((size_t)src * K + ch) * E + e];
      if (v == 0)
        continue;
      int slot;
      if (pl_llep_native_rank(e, E, Ep) == me)
        slot = e - me * m->El;
      else {
        int h = helper_index(c, e);
        PL_ASSERT(h >= 0);
        slot = m->El + h;
      }
      C->g[C->ng++] = (pl__moe_group){o, v, slot};
      o += v;
    }
  }
  C->ng_src = C->ng;
  return PL_OK;
}

/* 6. Per-chunk layouts, the tokens of each chunk and the offsets of its
 * index arrays in the one host buffer (x->nmeta entries in all). */
static pl_status chunk_layouts(pl_moe *m, pl_moe_ctx *c, int64_t N, bool contig,
                               plan_scratch *x) {
  const int K = x->K, Ep = x->Ep, k = m->cfg.k;
  c->ch = calloc((size_t)K, sizeof(pl__moe_chunk));
  c->ibuf = calloc((size_t)K * 4 * Ep, sizeof(int64_t));
  if (!c->ch || !c->ibuf)
    return host_oom(N);
  int64_t tot_R = 0;
  pl__moe_plan_memo *mm =
      x->lent_virt ? x->memo : NULL; /* dry, virtual: memo'd */
  if (mm && mm->lay)
    PL_TRY(
        pl__moe_layouts_copy(c->ch, c->ibuf, mm->lay, mm->lay_ibuf, K, Ep, N));
  else
    for (int ch = 0; ch < K; ch++)
      PL_TRY(chunk_layout(m, c, ch, N, x));
  for (int ch = 0; ch < K; ch++) {
    tot_R += c->ch[ch].R;
    if (c->ch[ch].R > c->max_chunk_recv)
      c->max_chunk_recv = c->ch[ch].R;
  }
  mm = x->memo;
  if (x->vrs && mm && mm->has_virt && mm->virt_me == m->rank && !mm->lay)
    pl__moe_memo_keep_lay(mm, c->ch, c->ibuf, K, Ep, N); /* a virtual
                                                          group's */
  /* tokens per chunk: what pl_chunk_of gives each, counted in closed form */
  for (int ch = 0; ch < K && N > 0; ch++) {
    if (!contig) {
      c->ch[ch].nt = N / K + (ch < N % K);
    } else {
      const int64_t ce = (N + K - 1) / K, lo = (int64_t)ch * ce;
      c->ch[ch].nt = lo >= N ? 0 : (N - lo < ce ? N - lo : ce);
    }
  }
  int64_t nmeta = 0;
  for (int ch = 0; ch < K; ch++) {
    pl__moe_chunk *C = &c->ch[ch];
    C->o_toks = nmeta;
    nmeta += C->nt;
    C->o_slots = nmeta;
    nmeta += C->nt * k;
    C->o_send_tok = nmeta;
    nmeta += C->S;
    C->o_send_route = nmeta;
    nmeta += C->S;
    C->o_self_tok = nmeta;
    nmeta += C->s_self;
    C->o_self_route = nmeta;
    nmeta += C->s_self;
    C->o_perm = nmeta; /* filled by expert_major() if the chunk is em */
    nmeta += Ep > 1 ? C->R : 0;
    C->o_inv = nmeta;
    nmeta += Ep > 1 ? C->R : 0;
  }
  if (nmeta > INT32_MAX || tot_R > INT32_MAX)
    return pl_set_error(PL_EINVAL, "moe: %lld routes on one rank: beyond int32",
                        (long long)nmeta);
  x->nmeta = nmeta;
  return PL_OK;
}

/* The index arrays of every chunk: its tokens, each route's slot (a send
 * row, or -1 - the row kept on this rank), and the token and route of each
 * send and kept row. */
static pl_status fill_meta(pl_moe *m, pl_moe_ctx *c, int64_t N,
                           const int32_t *idx, bool contig, plan_scratch *x) {
  const int K = x->K, k = m->cfg.k, me = m->rank;
  x->hmeta = malloc((size_t)(x->nmeta > 0 ? x->nmeta : 1) * sizeof(int32_t));
  int64_t *ntq = calloc((size_t)K, sizeof(int64_t)); /* tokens placed */
  int64_t *cur = calloc((size_t)K * x->Ep * x->E, sizeof(int64_t));
  if (!x->hmeta || !ntq || !cur) {
    free(ntq);
    free(cur);
    return host_oom(N);
  }
  int32_t *hmeta = x->hmeta;
  chunk_walk cw = chunk_walk_start(N, K, contig);
  for (int64_t t = 0; t < N; t++) {
    int ch = chunk_walk_next(&cw, t);
    pl__moe_chunk *C = &c->ch[ch];
    int64_t q = ntq[ch]++;
    hmeta[C->o_toks + q] = (int32_t)t;
    for (int j = 0; j < k; j++) {
      int e = idx[t * k + j], d = x->dest[t * k + j];
      int64_t bi = x->off3[i3(x, ch, d, e)] + cur[i3(x, ch, d, e)]++;
      int32_t slot;
      if (d != me) {
        int64_t sl = C->sdsp[d] + bi;
        hmeta[C->o_send_tok + sl] = (int32_t)t;
        hmeta[C->o_send_route + sl] = (int32_t)(t * k + j);
        slot = (int32_t)sl;
      } else {
        hmeta[C->o_self_tok + bi] = (int32_t)t;
        hmeta[C->o_self_route + bi] = (int32_t)(t * k + j);
        slot = (int32_t)(-1 - (C->self_off + bi));
      }
      hmeta[C->o_slots + q * k + j] = slot;
    }
  }
  free(ntq);
  free(cur);
  return PL_OK;
}

/* 7. Group-wide per-chunk maxima (the overlap gate must decide the same on
 * every rank, or the collectives' order would differ) and the max-send
 * ratio over (chunk, destination). */
static pl_status group_maxima(pl_moe *m, pl_moe_ctx *c, int64_t N,
                              const plan_scratch *x) {
  const int K = c->K, Ep = m->Ep;
  int64_t *rk = malloc((size_t)2 * K * sizeof(int64_t));
  int64_t *ra = malloc((size_t)2 * K * Ep * sizeof(int64_t));
  c->Rmax = calloc((size_t)2 * K, sizeof(int64_t));
  if (!rk || !ra || !c->Rmax) {
    free(rk);
    free(ra);
    return host_oom(N);
  }
  c->Smax = c->Rmax + K;
  for (int ch = 0; ch < K; ch++) {
    rk[ch] = c->ch[ch].R;
    rk[K + ch] = c->ch[ch].S;
  }
  pl_status st = PL_OK;
  if (x->vrs) /* a virtual group: every member's, computed */
    memcpy(ra, x->vrs, (size_t)2 * K * Ep * sizeof *ra);
  else
    PL_TRY_GOTO(st, done,
                pl_host_allgather_i64(m->comm, rk, (size_t)2 * K, ra));
  int64_t mx = 0, sum = 0;
  for (int r = 0; r < Ep; r++)
    for (int ch = 0; ch < K; ch++) {
      int64_t R = ra[(size_t)r * 2 * K + ch],
              S = ra[(size_t)r * 2 * K + K + ch];
      sum += R;
      if (R > mx)
        mx = R;
      if (R > c->Rmax[ch])
        c->Rmax[ch] = R;
      if (S > c->Smax[ch])
        c->Smax[ch] = S;
    }
  c->max_send_ratio = sum > 0 ? (double)mx * K * Ep / (double)sum : 1.0;
done:
  free(rk);
  free(ra);
  return st;
}

/* 8. Upload the index arrays (tag "routing"), once. */
static pl_status upload_meta(pl_moe *m, pl_moe_ctx *c, const plan_scratch *x) {
  const size_t bytes = (size_t)x->nmeta * sizeof(int32_t);
  PL_TRY(pl_alloc_async(m->dev, PL_ARENA_DEVICE, bytes, "routing", m->cs,
                        (void **)&c->dmeta));
  if (x->nmeta > 0 && x->hmeta) { /* no values on a dry device */
    PL_TRY(pl_memcpy_async(m->cs, c->dmeta, x->hmeta, bytes));
    PL_TRY(pl_stream_sync(m->cs)); /* hmeta is freed next */
  }
  return PL_OK;
}

/* The steps of the plan, in order; the context is complete when it returns
 * PL_OK. */
static pl_status plan_steps(pl_moe *m, pl_moe_ctx *c, int64_t N,
                            const int32_t *idx, plan_scratch *x) {
  const pl_moe_cfg *cf = &m->cfg;
  PL_TRY(gather_counts(m, N, idx, x));
  PL_TRY(plan_and_chunks(m, c, x));
  const bool contig =
      pl_moe_variant_desc_of(cf->variant)->chunks && cf->contiguous;
  PL_TRY(route_destinations(m, c, N, idx, contig, x));
  PL_TRY(exchange_counts(m, c, N, idx, contig, x));
  PL_TRY(helper_sets(m, c, N));
  PL_TRY(chunk_layouts(m, c, N, contig, x));
  /* On a dry device the index arrays' values are never read (their upload
   * lands nowhere and no kernel runs): only their sizes, set above, count. */
  const bool dry = pl__dev_dry(m->dev);
  if (!dry)
    PL_TRY(fill_meta(m, c, N, idx, contig, x));
  PL_TRY(group_maxima(m, c, N, x));
  if (!cf->source_major && m->Ep > 1) {
    const int64_t budget = pl__moe_row_budget(m, c->c_eff);
    for (int ch = 0; ch < c->K; ch++)
      if (3 * c->Rmax[ch] <= budget && expert_major(m, c, &c->ch[ch], x->hmeta))
        return host_oom(N);
  }
  return upload_meta(m, c, x);
}

/* Everything from the routes and the group's counts: plan, chunks, per-route
 * destinations and slots, per-chunk send/receive layouts, groups; then the
 * index arrays are uploaded once.  Collective (host all-gathers). */
pl_status pl__moe_plan(pl_moe *m, int64_t N, const int32_t *idx,
                       pl_moe_ctx **out) {
  *out = NULL;
  plan_scratch x = {.E = m->cfg.E, .Ep = m->Ep};
  pl_moe_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return host_oom(N);
  c->m = m;
  c->N = N;
  pl_status st = plan_steps(m, c, N, idx, &x);
  scratch_free(&x); /* host scratch goes either way; the context on failure */
  if (st != PL_OK) {
    pl_moe_ctx_free(c);
    return st;
  }
  *out = c;
  return PL_OK;
}
