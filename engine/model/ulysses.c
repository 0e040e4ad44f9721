/* ulysses.c — Ulysses all-to-all sequence<->head sharding and the sharded
 * attention built on it (model/ulysses.h).
 *
 * seq_to_head: x [N][D][h/D][d] is packed to [D][N][h/D][d] (block p = the
 * heads of rank p) and all-to-all'd; the received blocks, ordered by source
 * rank, are the whole sequence in order: y [S][h/D][d], no unpack.
 * head_to_seq: y's block p (tokens of rank p) goes to rank p; the received
 * [D (head group)][N][h/D][d] is unpacked to [N][D][h/D][d] = x.
 * Replicated heads (D = R·h): x is packed to [h][N][d] and head g's block is
 * sent to the R ranks g·R … g·R+R−1 (the all-to-all's send blocks overlap);
 * head_to_seq receives [h][R][N][d] and adds the R copies (unpack_sum). */
#include "model/ulysses.h"

#include "backend/ulysses_kernels.h"
#include "core/internal.h"

static pl_status transpose01(pl_stream *s, void *dst, const void *src,
                             int64_t A, int64_t B, int64_t C, size_t es) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_transpose01(s, dst, src, A, B, C, es);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_transpose01(s, dst, src, A, B, C, es);
}

int pl_ulysses_heads_per_rank(int h, int D) {
  if (h < 1 || D < 1)
    return 0;
  if (h % D == 0)
    return h / D;
  return D % h == 0 ? 1 : 0;
}

/* h heads over the group: *hl per rank, each replicated to *R ranks */
static pl_status check(pl_comm *c, int64_t N, int h, int d, pl_dtype dt,
                       int *hl, int *R) {
  const int D = pl_comm_size(c);
  if (N < 0 || h < 1 || d < 1)
    return pl_set_error(PL_EINVAL,
                        "ulysses: N=%lld h=%d d=%d: need N >= 0, h, d >= 1",
                        (long long)N, h, d);
  *hl = pl_ulysses_heads_per_rank(h, D);
  if (!*hl)
    return pl_set_error(
        PL_EINVAL,
        "ulysses: %d heads over D=%d ranks: heads must divide by D "
        "(or D by the heads: replicated)",
        h, D);
  *R = h % D ? D / h : 1;
  if (((size_t)*hl * d * pl_dtype_size(dt)) % 4)
    return pl_set_error(
        PL_EINVAL,
        "ulysses: (h/D)·d·%zu = %zu bytes per block row: need a "
        "multiple of 4",
        pl_dtype_size(dt), (size_t)*hl * d * pl_dtype_size(dt));
  return PL_OK;
}

/* block p of the D received ones comes from rank p; the block sent to rank p
 * starts at block p / R of send (R > 1: replicas read the same block) */
static pl_status a2a(pl_comm *c, pl_stream *s, const void *send, void *recv,
                     size_t blk, int R, pl_dtype dt) {
  enum { MAXD = 1024 };
  const int D = pl_comm_size(c);
  if (D > MAXD)
    return pl_set_error(PL_EINVAL, "ulysses: D=%d > %d", D, MAXD);
  size_t cnt[MAXD], sdis[MAXD], rdis[MAXD];
  for (int p = 0; p < D; p++)
    cnt[p] = blk, sdis[p] = (size_t)(p / R) * blk, rdis[p] = (size_t)p * blk;
  return pl_alltoallv(c, send, cnt, sdis, recv, cnt, rdis, dt, s);
}

static pl_status unpack_sum(pl_stream *s, void *dst, const void *src, int64_t G,
                            int64_t R, int64_t N, int64_t C, pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_unpack_sum(s, dst, src, G, R, N, C, dt);
#endif
  if (pl__on_dry(s))
    return PL_OK;
  return pl__cpu_unpack_sum(s, dst, src, G, R, N, C, dt);
}

/* Failure agreement before an all-to-all (plateau/comm.h pl_agree): every
 * rank of the group calls it, whatever st (its status so far), so a rank that
 * failed locally (its pack buffer over the arena's limit, the attention
 * kernel) stops its peers before the collective instead of leaving them in
 * it until the watchdog. */
static pl_status agree(pl_comm *c, pl_status st) {
  return pl_agree(c, st, "ulysses", "the all-to-all");
}

/* seq_to_head after st (the status so far; a failed rank skips its own part,
 * never the agreement). */
static pl_status s2h(pl_comm *c, pl_stream *s, const void *x, void *y,
                     int64_t N, int h, int d, pl_dtype dt, pl_status st) {
  int hl, R;
  PL_TRY(check(c, N, h, d, dt, &hl, &R));
  const int D = pl_comm_size(c);
  const size_t es = pl_dtype_size(dt), blk = (size_t)N * hl * d;
  if (D == 1)
    return st != PL_OK ? st : pl_memcpy_async(s, y, x, blk * es);
  pl_dev *dev = pl_stream_dev(s);
  void *pk = NULL; /* x's N·h·d elements, head-major */
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)N * h * d * es,
                        "attention", s, &pk);
  if (st == PL_OK)
    st = transpose01(s, pk, x, N, D / R, (int64_t)hl * d, es);
  st = agree(c, st);
  if (st == PL_OK)
    st = a2a(c, s, pk, y, blk, R, dt);
  pl_free_async(dev, pk, s);
  return st;
}

/* head_to_seq after st, likewise. */
static pl_status h2s(pl_comm *c, pl_stream *s, const void *y, void *x,
                     int64_t N, int h, int d, pl_dtype dt, pl_status st) {
  int hl, R;
  PL_TRY(check(c, N, h, d, dt, &hl, &R));
  const int D = pl_comm_size(c);
  const size_t es = pl_dtype_size(dt), blk = (size_t)N * hl * d;
  if (D == 1)
    return st != PL_OK ? st : pl_memcpy_async(s, x, y, blk * es);
  pl_dev *dev = pl_stream_dev(s);
  void *rv = NULL;
  if (st == PL_OK)
    st =
        pl_alloc_async(dev, PL_ARENA_DEVICE, blk * D * es, "attention", s, &rv);
  st = agree(c, st);
  if (st == PL_OK)
    st = a2a(c, s, y, rv, blk, 1, dt);
  if (st == PL_OK)
    st = R == 1 ? transpose01(s, x, rv, D, N, (int64_t)hl * d, es)
                : unpack_sum(s, x, rv, h, R, N, d, dt);
  pl_free_async(dev, rv, s);
  return st;
}

pl_status pl_ulysses_seq_to_head(pl_comm *c, pl_stream *s, const void *x,
                                 void *y, int64_t N, int h, int d,
                                 pl_dtype dt) {
  return s2h(c, s, x, y, N, h, d, dt, PL_OK);
}

pl_status pl_ulysses_head_to_seq(pl_comm *c, pl_stream *s, const void *y,
                                 void *x, int64_t N, int h, int d,
                                 pl_dtype dt) {
  return h2s(c, s, y, x, N, h, d, dt, PL_OK);
}

static pl_status shard_shape(pl_comm *c, const pl_attn_shape *sh,
                             pl_attn_shape *out) {
  const int D = pl_comm_size(c);
  if (sh->batch != 1)
    return pl_set_error(PL_EINVAL,
                        "ulysses attention: batch=%lld: one sequence per group",
                        (long long)sh->batch);
  const int kvl = pl_ulysses_heads_per_rank(sh->n_kv, D);
  if (sh->n_q % D || !kvl || sh->n_q % sh->n_kv)
    return pl_set_error(
        PL_EINVAL,
        "ulysses attention: n_q=%d n_kv=%d over D=%d ranks: n_q must divide by "
        "D, "
        "and n_kv by D or D by n_kv (key/value heads replicated)",
        sh->n_q, sh->n_kv, D);
  *out = *sh;
  out->seq = sh->seq * D;
  out->n_q = sh->n_q / D;
  out->n_kv = kvl;
  return PL_OK;
}

/* allocate n tracked buffers of the given element counts (tag "attention") */
static pl_status alloc_n(pl_dev *dev, pl_stream *s, int n, const size_t *bytes,
                         void **p) {
  for (int i = 0; i < n; i++)
    p[i] = NULL;
  for (int i = 0; i < n; i++)
    PL_TRY(
        pl_alloc_async(dev, PL_ARENA_DEVICE, bytes[i], "attention", s, &p[i]));
  return PL_OK;
}
static void free_n(pl_dev *dev, pl_stream *s, int n, void **p) {
  for (int i = 0; i < n; i++)
    pl_free_async(dev, p[i], s);
}

/* The attention's all-to-alls, each after an agreement (s2h, h2s): a rank
 * whose buffers or attention kernel failed goes on through the remaining
 * agreements with its status (skipping its own work), so every rank of the
 * group stops at the same collective, none entered. */
pl_status pl_ulysses_attn_fwd(pl_comm *c, pl_stream *s, const pl_attn_shape *sh,
                              const void *q, const void *k, const void *v,
                              void *o, float *lse) {
  pl_attn_shape hs;
  PL_TRY(shard_shape(c, sh, &hs));
  PL_TRY(pl_attn_check(&hs, pl_stream_backend(s)));
  const size_t es = pl_dtype_size(sh->dtype), d = (size_t)sh->head_dim,
               S = (size_t)hs.seq;
  const size_t qb = S * hs.n_q * d * es, kb = S * hs.n_kv * d * es;
  const size_t bytes[4] = {qb, kb, kb, qb};
  void *b[4];
  pl_dev *dev = pl_stream_dev(s);
  const int H = sh->head_dim;
  const pl_dtype dt = sh->dtype;
  pl_status st = alloc_n(dev, s, 4, bytes, b);
  st = s2h(c, s, q, b[0], sh->seq, sh->n_q, H, dt, st);
  st = s2h(c, s, k, b[1], sh->seq, sh->n_kv, H, dt, st);
  st = s2h(c, s, v, b[2], sh->seq, sh->n_kv, H, dt, st);
  if (st == PL_OK)
    st = pl_attn_fwd(s, &hs, b[0], b[1], b[2], b[3], lse);
  st = h2s(c, s, b[3], o, sh->seq, sh->n_q, H, dt, st);
  free_n(dev, s, 4, b);
  return st;
}

pl_status pl_ulysses_attn_bwd(pl_comm *c, pl_stream *s, const pl_attn_shape *sh,
                              const void *q, const void *k, const void *v,
                              const void *o, const void *dout, const float *lse,
                              void *dq, void *dk, void *dv) {
  pl_attn_shape hs;
  PL_TRY(shard_shape(c, sh, &hs));
  PL_TRY(pl_attn_check(&hs, pl_stream_backend(s)));
  const size_t es = pl_dtype_size(sh->dtype), d = (size_t)sh->head_dim,
               S = (size_t)hs.seq;
  const size_t qb = S * hs.n_q * d * es, kb = S * hs.n_kv * d * es;
  /* q k v o dout | dq dk dv, head-sharded */
  const size_t bytes[8] = {qb, kb, kb, qb, qb, qb, kb, kb};
  void *b[8];
  pl_dev *dev = pl_stream_dev(s);
  const int H = sh->head_dim;
  const pl_dtype dt = sh->dtype;
  const int64_t N = sh->seq;
  pl_status st = alloc_n(dev, s, 8, bytes, b);
  st = s2h(c, s, q, b[0], N, sh->n_q, H, dt, st);
  st = s2h(c, s, k, b[1], N, sh->n_kv, H, dt, st);
  st = s2h(c, s, v, b[2], N, sh->n_kv, H, dt, st);
  st = s2h(c, s, o, b[3], N, sh->n_q, H, dt, st);
  st = s2h(c, s, dout, b[4], N, sh->n_q, H, dt, st);
  if (st == PL_OK)
    st = pl_attn_bwd(s, &hs, b[0], b[1], b[2], b[3], b[4], lse, b[5], b[6],
                     b[7]);
  st = h2s(c, s, b[5], dq, N, sh->n_q, H, dt, st);
  st = h2s(c, s, b[6], dk, N, sh->n_kv, H, dt, st);
  st = h2s(c, s, b[7], dv, N, sh->n_kv, H, dt, st);
  free_n(dev, s, 8, b);
  return st;
}
