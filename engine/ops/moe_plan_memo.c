/* moe_plan_memo.c — the dry device's memo of the MoE plan (moe_plan_memo.h).
 */
#include "ops/moe_plan_memo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

static void memo_drop_lay(pl__moe_plan_memo *mm) {
  if (mm->lay)
    for (int i = 0; i < mm->K; i++)
      free(mm->lay[i].g);
  free(mm->lay);
  free(mm->lay_ibuf);
  mm->lay = NULL;
  mm->lay_ibuf = NULL;
}

static void memo_drop_cnt(pl__moe_plan_memo *mm) {
  memo_drop_lay(mm);
  free(mm->cum);
  free(mm->piece_off);
  free(mm->prank);
  free(mm->pend);
  free(mm->cnt3);
  free(mm->off3);
  free(mm->rc3);
  free(mm->vrs);
  mm->cum = mm->pend = mm->cnt3 = mm->off3 = mm->rc3 = mm->vrs = NULL;
  mm->piece_off = mm->prank = NULL;
  mm->has_cnt = mm->has_virt = false;
}

static void memo_free(pl__moe_plan_memo *mm) {
  if (!mm)
    return;
  memo_drop_cnt(mm);
  free(mm->idx);
  free(mm->mine);
  free(mm);
}

/* This thread's memos, the most recent first. */
#define MEMOS 8
static _Thread_local pl__moe_plan_memo *t_memo[MEMOS];

/* A thread that ends frees its memos (pl__at_thread_exit). */
static void memos_drop(void) {
  for (int i = 0; i < MEMOS; i++) {
    memo_free(t_memo[i]);
    t_memo[i] = NULL;
  }
}

static void to_front(int i) {
  pl__moe_plan_memo *mm = t_memo[i];
  memmove(t_memo + 1, t_memo, (size_t)i * sizeof *t_memo);
  t_memo[0] = mm;
}

static bool same_routes(const pl__moe_plan_memo *mm, int64_t N, int k, int E,
                        const int32_t *idx, uint64_t stamp) {
  if (!mm || mm->N != N || mm->k != k || mm->E != E)
    return false;
  if (mm->stamp || stamp)
    return mm->stamp == stamp;
  const size_t n = (size_t)N * (size_t)k;
  return n == 0 || !memcmp(mm->idx, idx, n * sizeof *idx);
}

pl__moe_plan_memo *pl__moe_memo_find(int64_t N, int k, int E,
                                     const int32_t *idx, uint64_t stamp) {
  for (int i = 0; i < MEMOS; i++)
    if (same_routes(t_memo[i], N, k, E, idx, stamp)) {
      to_front(i);
      return t_memo[0];
    }
  return NULL;
}

/* mm in front of this thread's memos, the last dropped. */
static void push(pl__moe_plan_memo *mm) {
  pl__at_thread_exit(memos_drop);
  memo_free(t_memo[MEMOS - 1]);
  memmove(t_memo + 1, t_memo, (MEMOS - 1) * sizeof *t_memo);
  t_memo[0] = mm;
}

pl__moe_plan_memo *pl__moe_memo_keep(int64_t N, int k, int E,
                                     const int32_t *idx, uint64_t stamp,
                                     const int64_t *mine) {
  const size_t n = stamp ? 0 : (size_t)N * (size_t)k;
  pl__moe_plan_memo *mm = calloc(1, sizeof *mm);
  if (!mm)
    return NULL;
  mm->idx = stamp ? NULL : malloc(n ? n * sizeof *idx : 1);
  mm->mine = malloc(((size_t)E + 2) * sizeof *mine);
  if ((!stamp && !mm->idx) || !mm->mine) {
    memo_free(mm);
    return NULL;
  }
  if (n)
    memcpy(mm->idx, idx, n * sizeof *idx);
  memcpy(mm->mine, mine, ((size_t)E + 2) * sizeof *mine);
  mm->stamp = stamp;
  mm->N = N;
  mm->k = k;
  mm->E = E;
  push(mm);
  return mm;
}

/* The routes per chunk and expert of routes known by their stamp: a
 * search's candidates chunk the same routes many ways (chunk caps), more
 * than the memos above hold, and this count is the one pass over every
 * route.  One list for the process (under g_cc_mu): a dry device's answer,
 * and so its stamp, is shared by every thread (backend/dry/dry.h). */
#define CHUNK_COUNTS 32
typedef struct chunk_counts {
  uint64_t stamp;
  int64_t N;
  int k, E, K;
  bool contig;
  int64_t *cnt; /* K * E */
} chunk_counts;
static chunk_counts g_cc[CHUNK_COUNTS];
static pthread_mutex_t g_cc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_cc_once = PTHREAD_ONCE_INIT;

static void chunk_counts_drop(void) {
  pthread_mutex_lock(&g_cc_mu);
  for (int i = 0; i < CHUNK_COUNTS; i++) {
    free(g_cc[i].cnt);
    g_cc[i] = (chunk_counts){0};
  }
  pthread_mutex_unlock(&g_cc_mu);
}

static void chunk_counts_at_exit(void) {
  (void)atexit(chunk_counts_drop);
}

void pl__moe_chunk_counts_fold(const int64_t *fine, int Kf, int K, int E,
                               int64_t *cnt) {
  for (int f = 0; f < Kf; f++) { /* chunk t mod K = (t mod Kf) mod K */
    int64_t *to = cnt + (size_t)(f % K) * E;
    const int64_t *from = fine + (size_t)f * E;
    for (int e = 0; e < E; e++)
      to[e] += from[e];
  }
}

bool pl__moe_chunk_counts_find(uint64_t stamp, int64_t N, int k, int E, int K,
                               bool contig, int64_t *cnt) {
  bool found = false;
  pthread_mutex_lock(&g_cc_mu);
  for (int i = 0; stamp && i < CHUNK_COUNTS && !found; i++) {
    const chunk_counts *c = &g_cc[i];
    if (!c->cnt || c->stamp != stamp || c->N != N || c->k != k || c->E != E ||
        c->contig != contig || !(c->K == K || (!contig && c->K % K == 0)))
      continue;
    if (c->K == K) {
      memcpy(cnt, c->cnt, (size_t)K * (size_t)E * sizeof *cnt);
    } else {
      memset(cnt, 0, (size_t)K * (size_t)E * sizeof *cnt);
      pl__moe_chunk_counts_fold(c->cnt, c->K, K, E, cnt);
    }
    const chunk_counts x = *c; /* the most recent first */
    memmove(g_cc + 1, g_cc, (size_t)i * sizeof *g_cc);
    g_cc[0] = x;
    found = true;
  }
  pthread_mutex_unlock(&g_cc_mu);
  return found;
}

void pl__moe_chunk_counts_keep(uint64_t stamp, int64_t N, int k, int E, int K,
                               bool contig, const int64_t *cnt) {
  const size_t n = (size_t)K * (size_t)E;
  int64_t *copy = stamp ? malloc(n * sizeof *copy) : NULL;
  if (!copy)
    return; /* no stamp, or no room: counted again next time */
  memcpy(copy, cnt, n * sizeof *copy);
  pthread_once(&g_cc_once, chunk_counts_at_exit);
  pthread_mutex_lock(&g_cc_mu);
  free(g_cc[CHUNK_COUNTS - 1].cnt);
  memmove(g_cc + 1, g_cc, (CHUNK_COUNTS - 1) * sizeof *g_cc);
  g_cc[0] = (chunk_counts){stamp, N, k, E, K, contig, copy};
  pthread_mutex_unlock(&g_cc_mu);
}

static bool cnt_match(const pl__moe_plan_memo *mm, int E, int Ep, int K,
                      const int64_t *cum, const pl_llep_plan *p, bool contig) {
  if (!mm->has_cnt || mm->Ep != Ep || mm->K != K || mm->contig != contig ||
      mm->np != p->n_pieces || memcmp(mm->cum, cum, (size_t)E * sizeof *cum) ||
      memcmp(mm->piece_off, p->piece_off, ((size_t)E + 1) * sizeof(int)))
    return false;
  for (int i = 0; i < p->n_pieces; i++)
    if (mm->prank[i] != p->pieces[i].rank || mm->pend[i] != p->pieces[i].end)
      return false;
  return true;
}

pl__moe_plan_memo *pl__moe_memo_find_cnt(const pl__moe_plan_memo *mm, int E,
                                         int Ep, int K, const int64_t *cum,
                                         const pl_llep_plan *p, bool contig) {
  for (int i = 0; i < MEMOS; i++) {
    const pl__moe_plan_memo *o = t_memo[i];
    if (o && same_routes(o, mm->N, mm->k, mm->E, mm->idx, mm->stamp) &&
        cnt_match(o, E, Ep, K, cum, p, contig)) {
      to_front(i);
      return t_memo[0];
    }
  }
  return NULL;
}

pl__moe_plan_memo *pl__moe_memo_keep_cnt(pl__moe_plan_memo *mm, int E, int Ep,
                                         int K, const int64_t *cum,
                                         const int64_t *cnt3,
                                         const int64_t *off3,
                                         const pl_llep_plan *p, bool contig) {
  if (mm->has_cnt) { /* another plan's counts of these routes: a new memo */
    mm = pl__moe_memo_keep(mm->N, mm->k, mm->E, mm->idx, mm->stamp, mm->mine);
    if (!mm)
      return NULL;
  }
  const int np = p->n_pieces;
  const size_t n3 = (size_t)K * Ep * E;
  mm->cum = malloc((size_t)E * sizeof *mm->cum);
  mm->piece_off = malloc(((size_t)E + 1) * sizeof *mm->piece_off);
  mm->prank = malloc((size_t)(np > 0 ? np : 1) * sizeof *mm->prank);
  mm->pend = malloc((size_t)(np > 0 ? np : 1) * sizeof *mm->pend);
  mm->cnt3 = malloc(n3 * sizeof *mm->cnt3);
  mm->off3 = malloc(n3 * sizeof *mm->off3);
  if (!mm->cum || !mm->piece_off || !mm->prank || !mm->pend || !mm->cnt3 ||
      !mm->off3) {
    memo_drop_cnt(mm);
    return NULL;
  }
  memcpy(mm->cum, cum, (size_t)E * sizeof *mm->cum);
  memcpy(mm->piece_off, p->piece_off, ((size_t)E + 1) * sizeof(int));
  for (int i = 0; i < np; i++) {
    mm->prank[i] = p->pieces[i].rank;
    mm->pend[i] = p->pieces[i].end;
  }
  memcpy(mm->cnt3, cnt3, n3 * sizeof *mm->cnt3);
  memcpy(mm->off3, off3, n3 * sizeof *mm->off3);
  mm->Ep = Ep;
  mm->K = K;
  mm->contig = contig;
  mm->np = np;
  mm->has_cnt = true;
  return mm;
}

void pl__moe_memo_keep_virt(pl__moe_plan_memo *mm, int me, const int64_t *rc3,
                            size_t n3, const int64_t *vrs, size_t nrs) {
  memo_drop_lay(mm);
  free(mm->rc3);
  free(mm->vrs);
  mm->rc3 = malloc(n3 * sizeof *mm->rc3);
  mm->vrs = malloc(nrs * sizeof *mm->vrs);
  mm->has_virt = mm->rc3 && mm->vrs;
  if (!mm->has_virt)
    return;
  memcpy(mm->rc3, rc3, n3 * sizeof *mm->rc3);
  memcpy(mm->vrs, vrs, nrs * sizeof *mm->vrs);
  mm->virt_me = me;
}

void pl__moe_memo_keep_lay(pl__moe_plan_memo *mm, const pl__moe_chunk *ch,
                           const int64_t *ibuf, int K, int Ep, int64_t N) {
  memo_drop_lay(mm);
  mm->lay = calloc((size_t)K, sizeof *mm->lay);
  mm->lay_ibuf = malloc((size_t)K * 4 * Ep * sizeof *mm->lay_ibuf);
  if (!mm->lay || !mm->lay_ibuf ||
      pl__moe_layouts_copy(mm->lay, mm->lay_ibuf, ch, ibuf, K, Ep, N) != PL_OK)
    memo_drop_lay(mm);
}

pl_status pl__moe_layouts_copy(pl__moe_chunk *dst, int64_t *dibuf,
                               const pl__moe_chunk *src, const int64_t *sibuf,
                               int K, int Ep, int64_t N) {
  memcpy(dibuf, sibuf, (size_t)K * 4 * Ep * sizeof *dibuf);
  for (int ch = 0; ch < K; ch++) {
    const pl__moe_chunk *a = &src[ch];
    pl__moe_chunk *b = &dst[ch];
    *b = *a;
    b->scnt = dibuf + (a->scnt - sibuf);
    b->sdsp = dibuf + (a->sdsp - sibuf);
    b->rcnt = dibuf + (a->rcnt - sibuf);
    b->rdsp = dibuf + (a->rdsp - sibuf);
    const size_t bytes = (size_t)(a->ng > 0 ? a->ng : 1) * sizeof *a->g;
    b->g = malloc(bytes);
    if (!b->g)
      return pl_set_error(PL_ENOMEM, "moe: host metadata allocation (N=%lld)",
                          (long long)N);
    memcpy(b->g, a->g, bytes);
  }
  return PL_OK;
}
