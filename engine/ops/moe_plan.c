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

#include "ops/moe_internal.h"

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
 * Returns nonzero on host OOM. */
static int expert_major(pl_moe *m, pl_moe_ctx *c, pl__moe_chunk *C,
                        int32_t *hmeta) {
  const int nslot = m->El + c->nh;
  pl__moe_group *ge =
      malloc((size_t)(nslot > 0 ? nslot : 1) * sizeof(pl__moe_group));
  if (!ge)
    return 1;
  int nge = 0;
  int64_t r = 0;
  for (int sl = 0; sl < nslot; sl++) {
    int64_t r0 = r;
    for (int gi = 0; gi < C->ng_src; gi++) {
      const pl__moe_group *g = &C->g[gi];
      if (g->slot != sl)
        continue;
      for (int64_t q = 0; q < g->rows; q++, r++) {
        hmeta[C->o_perm + r] = (int32_t)(g->row0 + q);
        hmeta[C->o_inv + g->row0 + q] = (int32_t)r;
      }
    }
    if (r > r0)
      ge[nge++] = (pl__moe_group){r0, r - r0, sl};
  }
  PL_ASSERT(r == C->R);
  free(C->g);
  C->g = ge;
  C->ng = nge;
  C->em = true;
  return 0;
}

/* Everything from the routes and the group's counts: plan, chunks, per-route
 * destinations and slots, per-chunk send/receive layouts, groups; then the
 * index arrays are uploaded once.  Collective (host all-gathers). */
pl_status pl__moe_plan(pl_moe *m, int64_t N, const int32_t *idx,
                       pl_moe_ctx **out) {
  const pl_moe_cfg *cf = &m->cfg;
  const int E = cf->E, k = cf->k, Ep = m->Ep, me = m->rank;
  pl_status st = PL_OK;
  *out = NULL;
  pl_moe_ctx *c = calloc(1, sizeof *c);
  int64_t *mine = calloc((size_t)E + 2, sizeof(int64_t));
  int64_t *all = calloc((size_t)Ep * (E + 2), sizeof(int64_t));
  int64_t *cnt3 = NULL, *off3 = NULL, *rc3 = NULL, *snd3 = NULL;
  int32_t *dest = NULL, *hmeta = NULL;
  int64_t *gcount = NULL, *cum = NULL, *li = NULL;
  if (!c || !mine || !all)
    goto oom;
  c->m = m;
  c->N = N;

  /* 1. local counts (+ N and a validity flag) gathered by every rank */
  int64_t bad = N < 0 ? 1 : 0;
  for (int64_t r = 0; r < N * k && !bad; r++) {
    if (idx[r] < 0 || idx[r] >= E)
      bad = 1 + r;
    else
      mine[idx[r]]++;
  }
  mine[E] = N < 0 ? 0 : N;
  mine[E + 1] = bad;
  st = pl_host_allgather_i64(m->comm, mine, (size_t)E + 2, all);
  if (st != PL_OK)
    goto fail;
  for (int r = 0; r < Ep; r++)
    if (all[(size_t)r * (E + 2) + E + 1]) {
      if (r == me && N < 0)
        st = pl_set_error(PL_EINVAL, "moe: N=%lld: must be >= 0", (long long)N);
      else if (r == me)
        st = pl_set_error(PL_EINVAL,
                          "moe: idx[%lld]=%d: expert ids must be in [0, E=%d)",
                          (long long)(bad - 1), idx[bad - 1], E);
      else
        st = pl_set_error(PL_EINVAL, "moe: rank %d passed invalid routes", r);
      goto fail;
    }
  gcount = calloc((size_t)E, sizeof(int64_t));
  cum = calloc((size_t)E, sizeof(int64_t));
  li = calloc((size_t)E, sizeof(int64_t));
  if (!gcount || !cum || !li)
    goto oom;
  int64_t N_max = 0;
  for (int r = 0; r < Ep; r++) {
    const int64_t *a = all + (size_t)r * (E + 2);
    for (int e = 0; e < E; e++) {
      gcount[e] += a[e];
      if (r < me)
        cum[e] += a[e];
    }
    if (a[E] > N_max)
      N_max = a[E];
  }

  /* 2. plan and chunking (Eq. 1) */
  pl_llep_knobs kn = cf->knobs;
  if (cf->variant == PL_MOE_EP)
    kn.native = true;
  st = pl_llep_plan_build(gcount, E, Ep, kn, &c->plan);
  if (st != PL_OK)
    goto fail;
  if (cf->variant == PL_MOE_PIPELINED) {
    st = pl_llep_chunking(N_max, cf->c, cf->K_max, &c->K, &c->c_eff);
    if (st != PL_OK)
      goto fail;
  } else {
    c->K = 1;
    c->c_eff = N_max;
  }
  const int K = c->K;
  const bool contig = cf->variant == PL_MOE_PIPELINED && cf->contiguous;

  /* 3. destination of every route by its global position; counts per
   * (chunk, dest, expert) */
  size_t n3 = (size_t)K * Ep * E;
  cnt3 = calloc(n3, sizeof(int64_t));
  off3 = calloc(n3, sizeof(int64_t));
  dest = malloc((size_t)(N * k > 0 ? N * k : 1) * sizeof(int32_t));
  if (!cnt3 || !off3 || !dest)
    goto oom;
#define I3(ch, d, e) (((size_t)(ch)*Ep + (d)) * E + (e))
  for (int64_t t = 0; t < N; t++) {
    int ch = pl_chunk_of(t, N, K, contig);
    for (int j = 0; j < k; j++) {
      int e = idx[t * k + j];
      int d = pl_llep_plan_dest(&c->plan, e, cum[e] + li[e]++);
      dest[t * k + j] = d;
      cnt3[I3(ch, d, e)]++;
    }
  }
  /* offsets of expert e inside block (ch, d) */
  for (int ch = 0; ch < K; ch++)
    for (int d = 0; d < Ep; d++) {
      int64_t o = 0;
      for (int e = 0; e < E; e++) {
        off3[I3(ch, d, e)] = o;
        o += cnt3[I3(ch, d, e)];
      }
    }

  /* 4. what every source sends me: rc3[src][ch][e] */
  snd3 = malloc(n3 * sizeof(int64_t));
  rc3 = malloc(n3 * sizeof(int64_t));
  if (!snd3 || !rc3)
    goto oom;
  for (int d = 0; d < Ep; d++)
    for (int ch = 0; ch < K; ch++)
      for (int e = 0; e < E; e++)
        snd3[((size_t)d * K + ch) * E + e] = cnt3[I3(ch, d, e)];
  st = pl_host_alltoall_i64(m->comm, snd3, (size_t)K * E, rc3);
  if (st != PL_OK)
    goto fail;

  /* 5. helper weight sets: (expert, helper) pairs of the plan */
  {
    const pl_llep_plan *p = &c->plan;
    int np = p->n_pieces;
    c->s_exp = malloc((size_t)(np + 1) * sizeof(int));
    c->s_dst = malloc((size_t)(np + 1) * sizeof(int));
    c->h_exp = malloc((size_t)(np + 1) * sizeof(int));
    c->h_src = malloc((size_t)(np + 1) * sizeof(int));
    if (!c->s_exp || !c->s_dst || !c->h_exp || !c->h_src)
      goto oom;
    /* send list ordered by (dst, expert); receive list by (src, expert) */
    for (int d = 0; d < Ep; d++)
      for (int e = 0; e < E; e++) {
        int o = pl_llep_native_rank(e, E, Ep);
        if (o == d)
          continue;
        bool has = false;
        for (int i = p->piece_off[e]; i < p->piece_off[e + 1]; i++)
          if (p->pieces[i].rank == d)
            has = true;
        if (!has)
          continue;
        if (o == me) {
          c->s_exp[c->ns] = e;
          c->s_dst[c->ns++] = d;
        }
      }
    for (int src = 0; src < Ep; src++)
      for (int e = src * m->El; e < (src + 1) * m->El; e++) {
        if (src == me)
          continue;
        bool has = false;
        for (int i = p->piece_off[e]; i < p->piece_off[e + 1]; i++)
          if (p->pieces[i].rank == me)
            has = true;
        if (!has)
          continue;
        c->h_exp[c->nh] = e;
        c->h_src[c->nh++] = src;
      }
  }

  /* 6. per-chunk layouts */
  c->ch = calloc((size_t)K, sizeof(pl__moe_chunk));
  c->ibuf = calloc((size_t)K * 4 * Ep, sizeof(int64_t));
  if (!c->ch || !c->ibuf)
    goto oom;
  int64_t nmeta = 0;
  int64_t tot_S = 0, tot_R = 0;
  for (int ch = 0; ch < K; ch++) {
    pl__moe_chunk *C = &c->ch[ch];
    C->scnt = c->ibuf + (size_t)ch * 4 * Ep;
    C->sdsp = C->scnt + Ep;
    C->rcnt = C->sdsp + Ep;
    C->rdsp = C->rcnt + Ep;
    int64_t so = 0;
    for (int d = 0; d < Ep; d++) {
      int64_t n = 0;
      for (int e = 0; e < E; e++)
        n += cnt3[I3(ch, d, e)];
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
        int64_t v = rc3[((size_t)src * K + ch) * E + e];
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
      goto oom;
    for (int src = 0; src < Ep; src++) {
      int64_t o = C->rdsp[src];
      for (int e = 0; e < E; e++) {
        int64_t v = rc3[((size_t)src * K + ch) * E + e];
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
    tot_S += C->S;
    tot_R += C->R;
    if (C->R > c->max_chunk_recv)
      c->max_chunk_recv = C->R;
  }
  /* tokens per chunk */
  for (int64_t t = 0; t < N; t++)
    c->ch[pl_chunk_of(t, N, K, contig)].nt++;
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
  if (nmeta > INT32_MAX || tot_R > INT32_MAX) {
    st = pl_set_error(PL_EINVAL, "moe: %lld routes on one rank: beyond int32",
                      (long long)nmeta);
    goto fail;
  }
  hmeta = malloc((size_t)(nmeta > 0 ? nmeta : 1) * sizeof(int32_t));
  if (!hmeta)
    goto oom;
  {
    int64_t *ntq = calloc((size_t)K, sizeof(int64_t)); /* tokens placed */
    int64_t *cur = calloc(n3, sizeof(int64_t));
    if (!ntq || !cur) {
      free(ntq);
      free(cur);
      goto oom;
    }
    for (int64_t t = 0; t < N; t++) {
      int ch = pl_chunk_of(t, N, K, contig);
      pl__moe_chunk *C = &c->ch[ch];
      int64_t q = ntq[ch]++;
      hmeta[C->o_toks + q] = (int32_t)t;
      for (int j = 0; j < k; j++) {
        int e = idx[t * k + j], d = dest[t * k + j];
        int64_t bi = off3[I3(ch, d, e)] + cur[I3(ch, d, e)]++;
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
  }
#undef I3

  /* 7. group-wide per-chunk maxima (the overlap gate must decide the same on
   * every rank, or the collectives' order would differ) and the max-send
   * ratio over (chunk, destination) */
  {
    int64_t *rk = malloc((size_t)2 * K * sizeof(int64_t));
    int64_t *ra = malloc((size_t)2 * K * Ep * sizeof(int64_t));
    c->Rmax = calloc((size_t)2 * K, sizeof(int64_t));
    if (!rk || !ra || !c->Rmax) {
      free(rk);
      free(ra);
      goto oom;
    }
    c->Smax = c->Rmax + K;
    for (int ch = 0; ch < K; ch++) {
      rk[ch] = c->ch[ch].R;
      rk[K + ch] = c->ch[ch].S;
    }
    st = pl_host_allgather_i64(m->comm, rk, (size_t)2 * K, ra);
    if (st == PL_OK) {
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
    }
    free(rk);
    free(ra);
    if (st != PL_OK)
      goto fail;
  }
  if (!cf->source_major && Ep > 1) {
    const int64_t budget = pl__moe_row_budget(m, c->c_eff);
    for (int ch = 0; ch < K; ch++)
      if (3 * c->Rmax[ch] <= budget && expert_major(m, c, &c->ch[ch], hmeta))
        goto oom;
  }

  /* 8. upload the indices */
  st = pl_alloc_async(m->dev, PL_ARENA_DEVICE, (size_t)nmeta * sizeof(int32_t),
                      "routing", m->cs, (void **)&c->dmeta);
  if (st != PL_OK)
    goto fail;
  if (nmeta > 0) {
    st = pl_memcpy_async(m->cs, c->dmeta, hmeta,
                         (size_t)nmeta * sizeof(int32_t));
    if (st == PL_OK)
      st = pl_stream_sync(m->cs); /* hmeta is freed next */
    if (st != PL_OK)
      goto fail;
  }
  *out = c;
  c = NULL;
  goto done;
oom:
  st = pl_set_error(PL_ENOMEM, "moe: host metadata allocation (N=%lld)",
                    (long long)N);
fail:
done: /* host scratch goes either way; the context only on failure */
  free(mine);
  free(all);
  free(cnt3);
  free(off3);
  free(rc3);
  free(snd3);
  free(dest);
  free(hmeta);
  free(gcount);
  free(cum);
  free(li);
  if (c)
    pl_moe_ctx_free(c);
  return st;
}
