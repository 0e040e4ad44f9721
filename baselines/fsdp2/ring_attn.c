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
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, fail, pl_stream_create(dev, &ra->ms));
  PL_TRY_GOTO(st, fail, pl_event_create(dev, &ra->ev_go));
  PL_TRY_GOTO(st, fail, pl_event_create(dev, &ra->ev_ms));
  *out = ra;
  return PL_OK;
fail:
  pl_ring_attn_destroy(ra);
  return st;
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
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, pl_memcpy_async(s, pack, k, nk * es));
  PL_TRY_GOTO(st, done, pl_memcpy_async(s, (char *)pack + nk * es, v, nk * es));
  PL_TRY_GOTO(st, done,
              pl_alloc_async(ra->dev, PL_ARENA_DEVICE,
                             (size_t)ra->size * 2 * nk * es, "cp_kv", s, all));
  PL_TRY_GOTO(st, done, ms_after_s(ra, s));
  st = ra->cp && ra->size > 1
           ? pl_allgather(ra->cp, pack, *all, 2 * nk, sh->dtype, ra->ms)
           : pl_memcpy_async(ra->ms, *all, pack, 2 * nk * es);
done:
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

/* A transient of the ring (tag "cp_ring") on s. */
static pl_status ring_alloc(pl_ring_attn *ra, pl_stream *s, size_t bytes,
                            void **p) {
  return pl_alloc_async(ra->dev, PL_ARENA_DEVICE, bytes, "cp_ring", s, p);
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
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, gather_kv(ra, s, sh, k, v, &all));
  PL_TRY_GOTO(st, done,
              ring_alloc(ra, s, (size_t)N * x.rq * 4, (void **)&oacc));
  PL_TRY_GOTO(st, done, ring_alloc(ra, s, (size_t)c * x.rq * x.es, &ob));
  PL_TRY_GOTO(st, done, ring_alloc(ra, s, (size_t)nq * c * 4, (void **)&lb));
  PL_TRY_GOTO(st, done, pl_fill(s, oacc, PL_F32, (size_t)N * x.rq, 0.0));
  PL_TRY_GOTO(st, done, pl_fill(s, lse, PL_F32, (size_t)nq * N, -INFINITY));
  /* step i: the source j = r − i (mod CP); step 0 (own K, V) beside the
   * gather: its blocks read the caller's k, v */
  for (int i = 0; i < ra->size; i++) {
    const int j = (ra->rank - i + ra->size) % ra->size;
    if (i == 1)
      PL_TRY_GOTO(st, done, s_after_ms(ra, s));
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++) {
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
        PL_TRY_GOTO(st, done,
                    pl_attn_fwd(s, &bs,
                                (const char *)q + (size_t)a * c * x.rq * x.es,
                                kb, vb, ob, lb));
        PL_TRY_GOTO(st, done,
                    pl_attn_merge(s, oacc + (size_t)a * c * x.rq,
                                  lse + (size_t)a * nq * c, ob, lb, c, nq, d,
                                  sh->dtype));
      }
  }
  if (ra->size == 1) /* the gather's copy, before the free on s */
    PL_TRY_GOTO(st, done, s_after_ms(ra, s));
  st = pl_convert(s, o, sh->dtype, oacc, PL_F32, (size_t)N * x.rq);
done:
  pl_free_async(dev, all, s);
  pl_free_async(dev, oacc, s);
  pl_free_async(dev, ob, s);
  pl_free_async(dev, lb, s);
  return st;
}

/* One block of the backward (query chunk a, key chunk b of source j at
 * step i): dQ added to dqa, dK | dV to con. */
static pl_status bwd_block(pl_ring_attn *ra, pl_stream *s,
                           const pl_attn_shape *sh, const blk *x, int i, int j,
                           int a, int b, const void *q, const void *k,
                           const void *v, const void *o, const void *dout,
                           const float *lse, const void *all, float *dqa,
                           float *con, void *dqb, void *dkb, void *dvb) {
  const int m = block_mask(ra, j, a, b);
  if (m < 0)
    return PL_OK;
  const int64_t c = x->c;
  pl_attn_shape bs = *sh;
  bs.seq = c;
  bs.mask = (pl_attn_mask)m;
  const size_t qo = (size_t)a * c * x->rq;
  const char *kb =
      i ? kv_k(x, all, j, b) : (const char *)k + (size_t)b * c * x->rk * x->es;
  const char *vb =
      i ? kv_v(x, all, j, b) : (const char *)v + (size_t)b * c * x->rk * x->es;
  PL_TRY(pl_attn_bwd(s, &bs, (const char *)q + qo * x->es, kb, vb,
                     (const char *)o + qo * x->es,
                     (const char *)dout + qo * x->es,
                     lse + (size_t)a * sh->n_q * c, dqb, dkb, dvb));
  PL_TRY(pl_axpy(s, dqa + qo, PL_F32, dqb, sh->dtype, (size_t)c * x->rq, 1.0f));
  PL_TRY(pl_axpy(s, con + (size_t)b * c * x->rk, PL_F32, dkb, sh->dtype,
                 (size_t)c * x->rk, 1.0f));
  return pl_axpy(s, con + x->nk + (size_t)b * c * x->rk, PL_F32, dvb, sh->dtype,
                 (size_t)c * x->rk, 1.0f);
}

pl_status pl_ring_attn_bwd(pl_ring_attn *ra, pl_stream *s,
                           const pl_attn_shape *sh, const void *q,
                           const void *k, const void *v, const void *o,
                           const void *dout, const float *lse, void *dq,
                           void *dk, void *dv) {
  PL_TRY(pl_ring_attn_check(ra, sh, pl_stream_backend(s)));
  const blk x = blk_of(sh);
  const int64_t c = x.c, N = sh->seq;
  const int CP = ra->size, r = ra->rank;
  const size_t nkv2 = 2 * x.nk; /* f32 elements of a dK|dV buffer */
  pl_dev *dev = ra->dev;
  void *all = NULL, *dqb = NULL, *dkb = NULL, *dvb = NULL;
  float *dqa = NULL, *con = NULL, *snd = NULL, *rcv = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, gather_kv(ra, s, sh, k, v, &all));
  PL_TRY_GOTO(st, done, ring_alloc(ra, s, (size_t)N * x.rq * 4, (void **)&dqa));
  PL_TRY_GOTO(st, done, ring_alloc(ra, s, nkv2 * 4, (void **)&con));
  PL_TRY_GOTO(st, done, ring_alloc(ra, s, nkv2 * 4, (void **)&snd));
  PL_TRY_GOTO(st, done, ring_alloc(ra, s, nkv2 * 4, (void **)&rcv));
  PL_TRY_GOTO(st, done, ring_alloc(ra, s, (size_t)c * x.rq * x.es, &dqb));
  PL_TRY_GOTO(st, done, ring_alloc(ra, s, (size_t)c * x.rk * x.es, &dkb));
  PL_TRY_GOTO(st, done, ring_alloc(ra, s, (size_t)c * x.rk * x.es, &dvb));
  PL_TRY_GOTO(st, done, pl_fill(s, dqa, PL_F32, (size_t)N * x.rq, 0.0));
  for (int i = 0; i < CP; i++) {
    const int j = (r - i + CP) % CP;
    /* the accumulated gradient of the previous step's K, V goes to r + 1
     * while the one of this step's K, V arrives from r − 1 */
    if (i == 1) /* the gathered K, V */
      PL_TRY_GOTO(st, done, s_after_ms(ra, s));
    if (i > 0) {
      float *t = snd;
      snd = con, con = t; /* con held step i−1's accumulated sum */
      PL_TRY_GOTO(st, done, ms_after_s(ra, s));
      PL_TRY_GOTO(st, done,
                  pl_sendrecv(ra->cp, snd, nkv2, (r + 1) % CP, rcv, nkv2,
                              (r - 1 + CP) % CP, PL_F32, ra->ms));
    }
    PL_TRY_GOTO(st, done, pl_fill(s, con, PL_F32, nkv2, 0.0));
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++)
        PL_TRY_GOTO(st, done,
                    bwd_block(ra, s, sh, &x, i, j, a, b, q, k, v, o, dout, lse,
                              all, dqa, con, dqb, dkb, dvb));
    /* con += what ranks j .. r − 1 added for these K, V */
    if (i > 0) {
      PL_TRY_GOTO(st, done, s_after_ms(ra, s));
      PL_TRY_GOTO(st, done, pl_axpy(s, con, PL_F32, rcv, PL_F32, nkv2, 1.0f));
    }
  }
  /* the last hop: every buffer home (CP = 1: con is already this rank's) */
  float *home = con;
  if (CP > 1) {
    PL_TRY_GOTO(st, done, ms_after_s(ra, s));
    PL_TRY_GOTO(st, done,
                pl_sendrecv(ra->cp, con, nkv2, (r + 1) % CP, rcv, nkv2,
                            (r - 1 + CP) % CP, PL_F32, ra->ms));
    PL_TRY_GOTO(st, done, s_after_ms(ra, s));
    home = rcv;
  }
  if (CP == 1)
    PL_TRY_GOTO(st, done, s_after_ms(ra, s));
  PL_TRY_GOTO(st, done,
              pl_convert(s, dq, sh->dtype, dqa, PL_F32, (size_t)N * x.rq));
  PL_TRY_GOTO(st, done, pl_convert(s, dk, sh->dtype, home, PL_F32, x.nk));
  st = pl_convert(s, dv, sh->dtype, home + x.nk, PL_F32, x.nk);
done:
  pl_free_async(dev, all, s);
  pl_free_async(dev, dqa, s);
  pl_free_async(dev, con, s);
  pl_free_async(dev, snd, s);
  pl_free_async(dev, rcv, s);
  pl_free_async(dev, dqb, s);
  pl_free_async(dev, dkb, s);
  pl_free_async(dev, dvb, s);
  return st;
}
