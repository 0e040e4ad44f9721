/* ring_attn.c — load-balanced ring attention over a CP group
 * (ring_attn.h): the KV all-gather, the causal and full blocks on the flash
 * kernels, the LSE merge, and the backward with the gradient's ring. */
#include "ring_attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct pl_ring_attn {
  pl_comm *cp;
  pl_dev *dev;
  int size, rank;
  pl_stream *ms;           /* comm stream                     */
  pl_event *ev_go, *ev_ms; /* s -> ms, ms -> s                */
};

pl_status pl_ring_attn_create(pl_comm *cp, pl_dev *dev, pl_ring_attn **out) {
  *out = NULL;
  pl_ring_attn *ra = calloc(1, sizeof *ra);
  if (!ra)
    return pl_set_error(PL_ENOMEM, "ring attention: host");
  ra->cp = cp;
  ra->dev = dev;
  ra->size = cp ? pl_comm_size(cp) : 1;
  ra->rank = cp ? pl_comm_rank(cp) : 0;
  pl_status st = pl_stream_create(dev, &ra->ms);
  if (st == PL_OK)
    st = pl_event_create(dev, &ra->ev_go);
  if (st == PL_OK)
    st = pl_event_create(dev, &ra->ev_ms);
  if (st != PL_OK) {
    pl_ring_attn_destroy(ra);
    return st;
  }
  *out = ra;
  return PL_OK;
}

void pl_ring_attn_destroy(pl_ring_attn *ra) {
  if (!ra)
    return;
  if (ra->ev_go)
    pl_event_destroy(ra->ev_go);
  if (ra->ev_ms)
    pl_event_destroy(ra->ev_ms);
  if (ra->ms)
    pl_stream_destroy(ra->ms);
  free(ra);
}

int pl_ring_attn_size(const pl_ring_attn *ra) {
  return ra->size;
}
int pl_ring_attn_rank(const pl_ring_attn *ra) {
  return ra->rank;
}

pl_status pl_ring_attn_check(const pl_ring_attn *ra, const pl_attn_shape *sh,
                             pl_backend be) {
  if (sh->batch != 1)
    return pl_set_error(PL_EINVAL,
                        "ring attention: batch=%lld: one sequence per call",
                        (long long)sh->batch);
  if (sh->mask != PL_ATTN_CAUSAL)
    return pl_set_error(PL_EINVAL,
                        "ring attention: the sequence's mask must be causal "
                        "(the blocks choose theirs)");
  if (sh->seq < 2 || sh->seq % 2)
    return pl_set_error(
        PL_EINVAL,
        "ring attention: N=%lld local tokens over a CP group of %d: the "
        "sequence must split into 2·CP equal chunks (S = %lld not divisible "
        "by %d)",
        (long long)sh->seq, ra->size, (long long)sh->seq * ra->size,
        2 * ra->size);
  pl_attn_shape b = *sh;
  b.seq /= 2;
  PL_TRY(pl_attn_check(&b, be));
  b.mask = PL_ATTN_FULL;
  return pl_attn_check(&b, be);
}

/* ms waits for the work issued on s so far. */
static pl_status ms_after_s(pl_ring_attn *ra, pl_stream *s) {
  PL_TRY(pl_event_record(ra->ev_go, s));
  return pl_stream_wait(ra->ms, ra->ev_go);
}
/* s waits for the work issued on ms so far. */
static pl_status s_after_ms(pl_ring_attn *ra, pl_stream *s) {
  PL_TRY(pl_event_record(ra->ev_ms, ra->ms));
  return pl_stream_wait(s, ra->ev_ms);
}

/* Pack [k | v] of this rank and all-gather it over the group on the comm
 * stream into *all (CP blocks of 2·N·n_kv·d); *pack is freed on ms. */
static pl_status gather_kv(pl_ring_attn *ra, pl_stream *s,
                           const pl_attn_shape *sh, const void *k,
                           const void *v, void **all) {
  const size_t es = pl_dtype_size(sh->dtype);
  const size_t nk = (size_t)sh->seq * (size_t)sh->n_kv * (size_t)sh->head_dim;
  void *pack = NULL;
  *all = NULL;
  PL_TRY(
      pl_alloc_async(ra->dev, PL_ARENA_DEVICE, 2 * nk * es, "cp_kv", s, &pack));
  pl_status st = pl_memcpy_async(s, pack, k, nk * es);
  if (st == PL_OK)
    st = pl_memcpy_async(s, (char *)pack + nk * es, v, nk * es);
  if (st == PL_OK)
    st = pl_alloc_async(ra->dev, PL_ARENA_DEVICE,
                        (size_t)ra->size * 2 * nk * es, "cp_kv", s, all);
  if (st == PL_OK)
    st = ms_after_s(ra, s);
  if (st == PL_OK)
    st = ra->cp && ra->size > 1
             ? pl_allgather(ra->cp, pack, *all, 2 * nk, sh->dtype, ra->ms)
             : pl_memcpy_async(ra->ms, *all, pack, 2 * nk * es);
  pl_free_async(ra->dev, pack, ra->ms);
  return st;
}

/* The block of local query chunk a against chunk b of source rank j: -1
 * skipped, else its mask. */
static int block_mask(const pl_ring_attn *ra, int j, int a, int b) {
  const int gq = pl_ring_chunk(ra->size, ra->rank, a),
            gk = pl_ring_chunk(ra->size, j, b);
  return gq < gk ? -1 : gq == gk ? PL_ATTN_CAUSAL : PL_ATTN_FULL;
}

/* Pointers of one block: rows of query chunk a, keys of chunk b of source j
 * in the gathered buffer. */
typedef struct blk {
  int64_t c;
  size_t es, rq, rk, nk; /* row widths (elements), N·n_kv·d */
} blk;

static blk blk_of(const pl_attn_shape *sh) {
  blk x;
  x.c = sh->seq / 2;
  x.es = pl_dtype_size(sh->dtype);
  x.rq = (size_t)sh->n_q * (size_t)sh->head_dim;
  x.rk = (size_t)sh->n_kv * (size_t)sh->head_dim;
  x.nk = (size_t)sh->seq * x.rk;
  return x;
}
static const char *kv_k(const blk *x, const void *all, int j, int b) {
  return (const char *)all +
         ((size_t)j * 2 * x->nk + (size_t)b * x->c * x->rk) * x->es;
}
static const char *kv_v(const blk *x, const void *all, int j, int b) {
  return kv_k(x, all, j, b) + x->nk * x->es;
}

pl_status pl_ring_attn_fwd(pl_ring_attn *ra, pl_stream *s,
                           const pl_attn_shape *sh, const void *q,
                           const void *k, const void *v, void *o, float *lse) {
  PL_TRY(pl_ring_attn_check(ra, sh, pl_stream_backend(s)));
  const blk x = blk_of(sh);
  const int64_t c = x.c, N = sh->seq;
  const int nq = sh->n_q, d = sh->head_dim;
  pl_dev *dev = ra->dev;
  void *all = NULL, *ob = NULL;
  float *oacc = NULL, *lb = NULL;
  pl_status st = gather_kv(ra, s, sh, k, v, &all);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)N * x.rq * 4, "cp_ring",
                        s, (void **)&oacc);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)c * x.rq * x.es,
                        "cp_ring", s, &ob);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)nq * c * 4, "cp_ring", s,
                        (void **)&lb);
  if (st == PL_OK)
    st = pl_fill(s, oacc, PL_F32, (size_t)N * x.rq, 0.0);
  if (st == PL_OK)
    st = pl_fill(s, lse, PL_F32, (size_t)nq * N, -INFINITY);
  /* step i: the source j = r − i (mod CP); step 0 (own K, V) beside the
   * gather: its blocks read the caller's k, v */
  for (int i = 0; i < ra->size && st == PL_OK; i++) {
    const int j = (ra->rank - i + ra->size) % ra->size;
    if (i == 1)
      st = s_after_ms(ra, s);
    for (int a = 0; a < 2 && st == PL_OK; a++)
      for (int b = 0; b < 2 && st == PL_OK; b++) {
        const int m = block_mask(ra, j, a, b);
        if (m < 0)
          continue;
        pl_attn_shape bs = *sh;
        bs.seq = c;
        bs.mask = (pl_attn_mask)m;
        const char *kb = i ? kv_k(&x, all, j, b)
                           : (const char *)k + (size_t)b * c * x.rk * x.es;
        const char *vb = i ? kv_v(&x, all, j, b)
                           : (const char *)v + (size_t)b * c * x.rk * x.es;
        st = pl_attn_fwd(s, &bs, (const char *)q + (size_t)a * c * x.rq * x.es,
                         kb, vb, ob, lb);
        if (st == PL_OK)
          st = pl_attn_merge(s, oacc + (size_t)a * c * x.rq,
                             lse + (size_t)a * nq * c, ob, lb, c, nq, d,
                             sh->dtype);
      }
  }
  if (st == PL_OK && ra->size == 1)
    st = s_after_ms(ra, s); /* the gather's copy, before the free on s */
  if (st == PL_OK)
    st = pl_convert(s, o, sh->dtype, oacc, PL_F32, (size_t)N * x.rq);
  pl_free_async(dev, all, s);
  pl_free_async(dev, oacc, s);
  pl_free_async(dev, ob, s);
  pl_free_async(dev, lb, s);
  return st;
}

pl_status pl_ring_attn_bwd(pl_ring_attn *ra, pl_stream *s,
                           const pl_attn_shape *sh, const void *q,
                           const void *k, const void *v, const void *o,
                           const void *dout, const float *lse, void *dq,
                           void *dk, void *dv) {
  PL_TRY(pl_ring_attn_check(ra, sh, pl_stream_backend(s)));
  const blk x = blk_of(sh);
  const int64_t c = x.c, N = sh->seq;
  const int nq = sh->n_q, CP = ra->size, r = ra->rank;
  const size_t nkv2 = 2 * x.nk; /* f32 elements of a dK|dV buffer */
  pl_dev *dev = ra->dev;
  void *all = NULL, *dqb = NULL, *dkb = NULL, *dvb = NULL;
  float *dqa = NULL, *con = NULL, *snd = NULL, *rcv = NULL;
  pl_status st = gather_kv(ra, s, sh, k, v, &all);
#define ALLOC(p, bytes)                                                        \
  if (st == PL_OK)                                                             \
  st = pl_alloc_async(dev, PL_ARENA_DEVICE, (bytes), "cp_ring", s,             \
                      (void **)&(p))
  ALLOC(dqa, (size_t)N * x.rq * 4);
  ALLOC(con, nkv2 * 4);
  ALLOC(snd, nkv2 * 4);
  ALLOC(rcv, nkv2 * 4);
  ALLOC(dqb, (size_t)c * x.rq * x.es);
  ALLOC(dkb, (size_t)c * x.rk * x.es);
  ALLOC(dvb, (size_t)c * x.rk * x.es);
#undef ALLOC
  if (st == PL_OK)
    st = pl_fill(s, dqa, PL_F32, (size_t)N * x.rq, 0.0);
  for (int i = 0; i < CP && st == PL_OK; i++) {
    const int j = (r - i + CP) % CP;
    /* the accumulated gradient of the previous step's K, V goes to r + 1
     * while the one of this step's K, V arrives from r − 1 */
    if (i == 1)
      st = s_after_ms(ra, s); /* the gathered K, V */
    if (i > 0 && st == PL_OK) {
      float *t = snd;
      snd = con, con = t; /* con held step i−1's accumulated sum */
      st = ms_after_s(ra, s);
      if (st == PL_OK)
        st = pl_sendrecv(ra->cp, snd, nkv2, (r + 1) % CP, rcv, nkv2,
                         (r - 1 + CP) % CP, PL_F32, ra->ms);
    }
    if (st == PL_OK)
      st = pl_fill(s, con, PL_F32, nkv2, 0.0);
    for (int a = 0; a < 2 && st == PL_OK; a++)
      for (int b = 0; b < 2 && st == PL_OK; b++) {
        const int m = block_mask(ra, j, a, b);
        if (m < 0)
          continue;
        pl_attn_shape bs = *sh;
        bs.seq = c;
        bs.mask = (pl_attn_mask)m;
        const size_t qo = (size_t)a * c * x.rq;
        const char *kb = i ? kv_k(&x, all, j, b)
                           : (const char *)k + (size_t)b * c * x.rk * x.es;
        const char *vb = i ? kv_v(&x, all, j, b)
                           : (const char *)v + (size_t)b * c * x.rk * x.es;
        st = pl_attn_bwd(s, &bs, (const char *)q + qo * x.es, kb, vb,
                         (const char *)o + qo * x.es,
                         (const char *)dout + qo * x.es,
                         lse + (size_t)a * nq * c, dqb, dkb, dvb);
        if (st == PL_OK)
          st = pl_axpy(s, dqa + qo, PL_F32, dqb, sh->dtype, (size_t)c * x.rq,
                       1.0f);
        if (st == PL_OK)
          st = pl_axpy(s, con + (size_t)b * c * x.rk, PL_F32, dkb, sh->dtype,
                       (size_t)c * x.rk, 1.0f);
        if (st == PL_OK)
          st = pl_axpy(s, con + x.nk + (size_t)b * c * x.rk, PL_F32, dvb,
                       sh->dtype, (size_t)c * x.rk, 1.0f);
      }
    /* con += what ranks j .. r − 1 added for these K, V */
    if (i > 0 && st == PL_OK) {
      st = s_after_ms(ra, s);
      if (st == PL_OK)
        st = pl_axpy(s, con, PL_F32, rcv, PL_F32, nkv2, 1.0f);
    }
  }
  /* the last hop: every buffer home (CP = 1: con is already this rank's) */
  float *home = con;
  if (st == PL_OK && CP > 1) {
    st = ms_after_s(ra, s);
    if (st == PL_OK)
      st = pl_sendrecv(ra->cp, con, nkv2, (r + 1) % CP, rcv, nkv2,
                       (r - 1 + CP) % CP, PL_F32, ra->ms);
    if (st == PL_OK)
      st = s_after_ms(ra, s);
    home = rcv;
  }
  if (st == PL_OK && CP == 1)
    st = s_after_ms(ra, s);
  if (st == PL_OK)
    st = pl_convert(s, dq, sh->dtype, dqa, PL_F32, (size_t)N * x.rq);
  if (st == PL_OK)
    st = pl_convert(s, dk, sh->dtype, home, PL_F32, x.nk);
  if (st == PL_OK)
    st = pl_convert(s, dv, sh->dtype, home + x.nk, PL_F32, x.nk);
  void *ps[] = {all, dqa, con, snd, rcv, dqb, dkb, dvb};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free_async(dev, ps[i], s);
  return st;
}
