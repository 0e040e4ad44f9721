/* llep_plan.c — the LLEP least-loaded plan, position-based route assignment,
 * Eq. 1 chunking and the synthetic routing profiles (DESIGN.md §1.1).
 *
 * Why host C: the plan is a function of E global counts that every rank holds
 * after one small all-reduce/all-gather; computing it redundantly on every
 * rank keeps all ranks agreeing on every piece without another collective. */
#include "ops/llep_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plateau/host_device.h"

pl_llep_knobs pl_llep_knobs_default(void) {
  pl_llep_knobs k = {.alpha = 1.0, .m = 1024, .lambda = 1.3, .native = false};
  return k;
}

void pl_llep_plan_free(pl_llep_plan *p) {
  if (!p)
    return;
  free(p->pieces);
  free(p->piece_off);
  free(p->load_native);
  free(p->load_planned);
  memset(p, 0, sizeof *p);
}

static double imbalance(const int64_t *load, int Ep, int64_t total) {
  if (total <= 0)
    return 1.0;
  int64_t mx = 0;
  for (int r = 0; r < Ep; r++)
    if (load[r] > mx)
      mx = load[r];
  return (double)mx * Ep / (double)total;
}

/* Experts ordered by count, descending; ties by expert id (deterministic on
 * every rank).  The count travels with the id, so the comparison needs no
 * state outside its arguments and plans can be built on several threads. */
typedef struct by_count {
  int64_t count;
  int e;
} by_count;
static int cmp_count_desc(const void *a, const void *b) {
  const by_count *x = a, *y = b;
  if (x->count != y->count)
    return x->count > y->count ? -1 : 1;
  return x->e - y->e;
}

typedef struct piece_vec {
  pl_llep_piece *v;
  int n, cap;
} piece_vec;

static int push_piece(piece_vec *pv, int e, int r, int64_t s, int64_t t) {
  if (pv->n == pv->cap) {
    int nc = pv->cap ? 2 * pv->cap : 64;
    pl_llep_piece *nv = realloc(pv->v, (size_t)nc * sizeof *nv);
    if (!nv)
      return -1;
    pv->v = nv;
    pv->cap = nc;
  }
  pv->v[pv->n++] = (pl_llep_piece){e, r, s, t};
  return 0;
}

/* The arguments of pl_llep_plan_build, refused with a message naming the
 * value. */
static pl_status check_args(const int64_t *counts, int E, int Ep,
                            pl_llep_knobs kn) {
  if (Ep < 1)
    return pl_set_error(PL_EINVAL, "Ep=%d: must be >= 1", Ep);
  if (E < 1 || E % Ep != 0)
    return pl_set_error(PL_EINVAL,
                        "E=%d experts over Ep=%d ranks: E must be a positive "
                        "multiple of Ep",
                        E, Ep);
  if (!(kn.alpha > 0))
    return pl_set_error(PL_EINVAL, "alpha=%g: must be > 0", kn.alpha);
  if (kn.m < 0)
    return pl_set_error(PL_EINVAL, "m=%lld: must be >= 0", (long long)kn.m);
  if (kn.lambda < 0)
    return pl_set_error(PL_EINVAL, "lambda=%g: must be >= 0", kn.lambda);
  for (int e = 0; e < E; e++)
    if (counts[e] < 0)
      return pl_set_error(PL_EINVAL, "count[%d]=%lld: must be >= 0", e,
                          (long long)counts[e]);
  return PL_OK;
}

/* Expert e (cnt routes, native rank o) in the LPT pass: on its native rank
 * while that rank has room under the capacity M (its effective load:
 * assigned plus the native load still pending), the rest spilled to the
 * least-loaded helpers with room, pieces smaller than m only when they
 * finish the expert.  Nonzero on host OOM. */
static int spill_expert(piece_vec *pv, int e, int o, int64_t cnt, int64_t M,
                        int64_t m, int Ep, int64_t *assigned,
                        const int64_t *pending) {
  int64_t avail = M - (assigned[o] + pending[o]);
  if (avail >= cnt) {
    if (push_piece(pv, e, o, 0, cnt))
      return 1;
    assigned[o] += cnt;
    return 0;
  }
  int64_t off = 0, rem = cnt;
  if (avail > 0) {
    if (push_piece(pv, e, o, 0, avail))
      return 1;
    assigned[o] += avail;
    off = avail;
    rem -= avail;
  }
  while (rem > 0) {
    /* Least-loaded helper (by effective load) with room; pieces smaller
     * than m are skipped unless they finish the expert. */
    int best = -1, least = -1;
    int64_t best_eff = 0, least_eff = 0;
    for (int g = 0; g < Ep; g++) {
      if (g == o)
        continue;
      int64_t eff = assigned[g] + pending[g];
      if (least < 0 || eff < least_eff) {
        least = g;
        least_eff = eff;
      }
      int64_t room = M - eff;
      if (room <= 0)
        continue;
      int64_t chunk = rem < room ? rem : room;
      if (chunk < m && rem > chunk)
        continue;
      if (best < 0 || eff < best_eff) {
        best = g;
        best_eff = eff;
      }
    }
    int g;
    int64_t chunk;
    if (best >= 0) {
      g = best;
      int64_t room = M - best_eff;
      chunk = rem < room ? rem : room;
    } else { /* everyone full: force the leftover onto the least loaded */
      g = least;
      chunk = rem;
    }
    if (push_piece(pv, e, g, off, off + chunk))
      return 1;
    assigned[g] += chunk;
    off += chunk;
    rem -= chunk;
  }
  return 0;
}

/* The pieces grouped by expert (stable in start order: a counting sort over
 * experts) and the planned load per rank.  Nonzero on host OOM. */
static int group_pieces(pl_llep_plan *out, const piece_vec *pv) {
  const int E = out->E, Ep = out->Ep;
  out->n_pieces = pv->n;
  out->pieces = malloc((size_t)(pv->n ? pv->n : 1) * sizeof(pl_llep_piece));
  if (!out->pieces)
    return 1;
  for (int i = 0; i < pv->n; i++)
    out->piece_off[pv->v[i].expert + 1]++;
  for (int e = 0; e < E; e++)
    out->piece_off[e + 1] += out->piece_off[e];
  {
    int *fill = calloc((size_t)E, sizeof(int));
    if (!fill)
      return 1;
    for (int i = 0; i < pv->n; i++) {
      int e = pv->v[i].expert;
      out->pieces[out->piece_off[e] + fill[e]++] = pv->v[i];
    }
    free(fill);
  }
  for (int i = 0; i < pv->n; i++) {
    const pl_llep_piece *p = &out->pieces[i];
    out->load_planned[p->rank] += p->end - p->start;
    if (p->rank != pl_llep_native_rank(p->expert, E, Ep))
      out->n_spilled++;
  }
  return 0;
}

pl_status pl_llep_plan_build(const int64_t *counts, int E, int Ep,
                             pl_llep_knobs kn, pl_llep_plan *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(check_args(counts, E, Ep, kn));
  out->E = E;
  out->Ep = Ep;
  out->piece_off = calloc((size_t)E + 1, sizeof(int));
  out->load_native = calloc((size_t)Ep, sizeof(int64_t));
  out->load_planned = calloc((size_t)Ep, sizeof(int64_t));
  int64_t *pending = calloc((size_t)Ep, sizeof(int64_t));
  int64_t *assigned = calloc((size_t)Ep, sizeof(int64_t));
  by_count *order = malloc((size_t)E * sizeof *order);
  piece_vec pv = {0};
  if (!out->piece_off || !out->load_native || !out->load_planned || !pending ||
      !assigned || !order)
    goto oom;

  int64_t total = 0;
  for (int e = 0; e < E; e++) {
    total += counts[e];
    out->load_native[pl_llep_native_rank(e, E, Ep)] += counts[e];
  }
  out->total = total;
  int64_t M = (int64_t)floor(kn.alpha * (double)(total / Ep));
  if (M < 1)
    M = 1;
  out->capacity = M;
  out->imb_native = imbalance(out->load_native, Ep, total);
  bool skip = kn.native || total == 0 || Ep == 1 ||
              (kn.lambda > 0 && out->imb_native < kn.lambda);
  out->planned = !skip;

  /* Pieces are produced per expert in LPT order; collect them, then sort by
   * (expert, start) at the end. */
  if (skip) {
    for (int e = 0; e < E; e++)
      if (counts[e] > 0 &&
          push_piece(&pv, e, pl_llep_native_rank(e, E, Ep), 0, counts[e]))
        goto oom;
  } else {
    memcpy(pending, out->load_native, (size_t)Ep * sizeof(int64_t));
    for (int e = 0; e < E; e++)
      order[e] = (by_count){counts[e], e};
    qsort(order, (size_t)E, sizeof *order, cmp_count_desc);
    for (int oi = 0; oi < E; oi++) {
      int e = order[oi].e;
      int64_t cnt = counts[e];
      if (cnt == 0)
        break;
      int o = pl_llep_native_rank(e, E, Ep);
      pending[o] -= cnt; /* e is visited: no longer pending native load */
      if (spill_expert(&pv, e, o, cnt, M, kn.m, Ep, assigned, pending))
        goto oom;
    }
  }

  if (group_pieces(out, &pv))
    goto oom;
  out->imb_planned = imbalance(out->load_planned, Ep, total);
  free(pv.v);
  free(pending);
  free(assigned);
  free(order);
  return PL_OK;
oom:
  free(pv.v);
  free(pending);
  free(assigned);
  free(order);
  pl_llep_plan_free(out);
  return pl_set_error(PL_ENOMEM, "llep plan: host allocation failed (E=%d)", E);
}

int pl_llep_plan_dest(const pl_llep_plan *p, int e, int64_t pos) {
  int lo = p->piece_off[e], hi = p->piece_off[e + 1];
  for (int i = lo; i < hi; i++)
    if (pos < p->pieces[i].end)
      return p->pieces[i].rank;
  PL_ASSERT(!"route position beyond the expert's pieces");
  return -1;
}

pl_status pl_llep_chunking(int64_t N_max, int64_t c, int K_max, int *K,
                           int64_t *c_eff) {
  if (c < 1)
    return pl_set_error(PL_EINVAL, "c=%lld: the token cap must be >= 1",
                        (long long)c);
  if (K_max < 1)
    return pl_set_error(PL_EINVAL, "K_max=%d: must be >= 1", K_max);
  if (N_max < 0)
    return pl_set_error(PL_EINVAL, "N=%lld: must be >= 0", (long long)N_max);
  /* ceilings without forming N_max + c - 1: c may be INT64_MAX (no cap) */
  int64_t kk = N_max / c + (N_max % c != 0);
  if (kk > K_max)
    kk = K_max;
  if (kk < 1)
    kk = 1;
  *K = (int)kk;
  *c_eff = N_max / kk + (N_max % kk != 0);
  return PL_OK;
}

pl_status pl_route_profile_parse(const char *s, pl_route_profile *out) {
  memset(out, 0, sizeof *out);
  if (!s || !*s)
    return pl_set_error(PL_EINVAL,
                        "routing profile '': allowed: balanced or r/h "
                        "(e.g. 95/16, 80/16, 50/4)");
  if (strcmp(s, "balanced") == 0) {
    out->balanced = true;
    snprintf(out->name, sizeof out->name, "balanced");
    return PL_OK;
  }
  char *end = NULL;
  long pct = strtol(s, &end, 10);
  if (end == s || *end != '/' || pct < 0 || pct > 100)
    goto bad;
  const char *h = end + 1;
  long hot = strtol(h, &end, 10);
  if (end == h || hot < 1 || hot > 1000000)
    goto bad;
  out->shuffled = *end == 's';
  if (*end && !(out->shuffled && end[1] == '\0'))
    goto bad;
  out->r = (double)pct / 100.0;
  out->h = (int)hot;
  snprintf(out->name, sizeof out->name, "%ld/%ld%s", pct, hot,
           out->shuffled ? "s" : "");
  return PL_OK;
bad:
  return pl_set_error(PL_EINVAL,
                      "routing profile '%s': allowed: balanced or r/h with r "
                      "a percentage and h >= 1 hot experts (e.g. 95/16), and "
                      "an optional s to shuffle the tokens' positions (95/16s)",
                      s);
}

pl_status pl_route_profile_fill(const pl_route_profile *p, int64_t N, int k,
                                int E, uint64_t seed, int rank, int32_t *idx,
                                float *weights) {
  if (k < 1 || E < 1)
    return pl_set_error(PL_EINVAL, "k=%d, E=%d: both must be >= 1", k, E);
  if (p->balanced && k > E)
    return pl_set_error(PL_EINVAL, "balanced profile: k=%d > E=%d", k, E);
  if (!p->balanced && (p->h < 1 || p->h >= E))
    return pl_set_error(PL_EINVAL,
                        "profile %s: h=%d hot experts must be in [1, E=%d)",
                        p->name, p->h, E);
  int64_t nhot = p->balanced ? 0 : (int64_t)floor(p->r * (double)N);
  int64_t rot = 0;
  if (seed != 0 && N > 0)
    rot =
        (int64_t)(pl_rng_mix64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank) %
                  (uint64_t)N);
  int64_t *perm = NULL; /* shuffled: position -> pattern index */
  if (p->shuffled && N > 0) {
    perm = malloc((size_t)N * sizeof *perm);
    if (!perm)
      return pl_set_error(PL_ENOMEM,
                          "profile %s: a permutation of %lld "
                          "positions",
                          p->name, (long long)N);
    for (int64_t t = 0; t < N; t++)
      perm[t] = t;
    for (int64_t t = N - 1; t > 0; t--) { /* Fisher-Yates, a fixed seed */
      const uint64_t z =
          pl_rng_mix64(0x6c6c6570ull * 0x9e3779b97f4a7c15ull + (uint64_t)t);
      const int64_t u = (int64_t)(z % (uint64_t)(t + 1)), x = perm[t];
      perm[t] = perm[u], perm[u] = x;
    }
  }
  for (int64_t t = 0; t < N; t++) {
    int64_t i = (t + rot) % (N > 0 ? N : 1); /* pattern index of position t */
    if (perm)
      i = perm[i];
    int32_t *it = idx + t * k;
    if (p->balanced || i >= nhot) { /* (i + j) mod n from h, by steps */
      const int h = p->balanced ? 0 : p->h, n = E - h;
      int e = (int)(i % n);
      for (int j = 0; j < k; j++) {
        it[j] = h + e;
        e = e + 1 == n ? 0 : e + 1;
      }
    } else {
      for (int j = 0; j < k; j++)
        it[j] = j % p->h;
    }
    if (weights)
      for (int j = 0; j < k; j++)
        weights[t * k + j] = 1.0f / (float)k;
  }
  free(perm);
  return PL_OK;
}
