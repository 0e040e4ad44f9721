/* attn_run.c — the run of a `plateau bench attention` point (attn_run.h):
 * its tensors, one forward (+ backward), plain or Ulysses-sharded, and the
 * check of the kernels against the SIMPLE kernels (CUDA) or the double naive
 * reference (CPU). */
#include <stdlib.h>

#include "attn_run.h"
#include "model/attention_testutil.h"
#include "model/ulysses.h"

pl_status pl__attn_run(void *arg) {
  attn_run *r = arg;
  if (r->sp) {
    PL_TRY(pl_ulysses_attn_fwd(r->sp, r->s, &r->sh, r->q, r->k, r->v, r->o,
                               r->lse));
    if (r->bwd)
      PL_TRY(pl_ulysses_attn_bwd(r->sp, r->s, &r->sh, r->q, r->k, r->v, r->o,
                                 r->dout, r->lse, r->dq, r->dk, r->dv));
    return PL_OK;
  }
  PL_TRY(pl_attn_fwd(r->s, &r->sh, r->q, r->k, r->v, r->o, r->lse));
  if (r->bwd)
    PL_TRY(pl_attn_bwd(r->s, &r->sh, r->q, r->k, r->v, r->o, r->dout, r->lse,
                       r->dq, r->dk, r->dv));
  return PL_OK;
}

void pl__attn_free(pl_dev *dev, attn_run *r) {
  void *ps[] = {r->q, r->k, r->v, r->o, r->dout, r->dq, r->dk, r->dv, r->lse};
  for (int i = 0; i < 9; i++)
    pl_free(dev, ps[i]);
  r->q = r->k = r->v = r->o = r->dout = r->dq = r->dk = r->dv = NULL;
  r->lse = NULL;
}

static size_t nq_elems(const pl_attn_shape *sh) {
  return (size_t)(sh->batch * sh->seq * sh->n_q * sh->head_dim);
}
static size_t nkv_elems(const pl_attn_shape *sh) {
  return (size_t)(sh->batch * sh->seq * sh->n_kv * sh->head_dim);
}

pl_status pl__attn_alloc(pl_dev *dev, attn_run *r, int with_grads) {
  const size_t es = pl_dtype_size(r->sh.dtype);
  const size_t nqe = nq_elems(&r->sh), nke = nkv_elems(&r->sh);
  const size_t nr = (size_t)(r->sh.batch * r->sh.n_q * r->sh.seq);
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nqe * es, "act", &r->q));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nke * es, "act", &r->k));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nke * es, "act", &r->v));
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nqe * es, "act", &r->o));
  void *lp = NULL;
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nr * sizeof(float), "act", &lp));
  r->lse = lp;
  if (with_grads) {
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nqe * es, "act", &r->dout));
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nqe * es, "grads", &r->dq));
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nke * es, "grads", &r->dk));
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, nke * es, "grads", &r->dv));
  }
  /* never zeros: N(0,1) inputs */
  const pl_dtype dt = r->sh.dtype;
  PL_TRY(pl_rng_fill(r->s, r->q, dt, nqe, 11, r->off * r->sh.n_q,
                     PL_DIST_NORMAL, 0.f, 1.f));
  PL_TRY(pl_rng_fill(r->s, r->k, dt, nke, 12, r->off * r->sh.n_kv,
                     PL_DIST_NORMAL, 0.f, 1.f));
  PL_TRY(pl_rng_fill(r->s, r->v, dt, nke, 13, r->off * r->sh.n_kv,
                     PL_DIST_NORMAL, 0.f, 1.f));
  if (with_grads)
    PL_TRY(pl_rng_fill(r->s, r->dout, dt, nqe, 14, r->off * r->sh.n_q,
                       PL_DIST_NORMAL, 0.f, 1.f));
  return pl_stream_sync(r->s);
}

/* The kernel's O (and dQ, dK, dV) after one more run, against the SIMPLE
 * kernels (CUDA) or the double reference (CPU).  Reduction length: S keys per
 * query. */
pl_status pl__attn_check(pl_bench_ctx *c, attn_run *r, pl_check *chk) {
  const pl_attn_shape *sh = &r->sh;
  const size_t n[4] = {nq_elems(sh), nq_elems(sh), nkv_elems(sh),
                       nkv_elems(sh)};
  const char *what[4] = {"O", "dQ", "dK", "dV"};
  const void *got[4] = {r->o, r->dq, r->dk, r->dv};
  const int nout = r->bwd ? 4 : 1;
  if (c->cuda) {
    if (sh->seq > 16384 || (sh->kernels.fwd == PL_ATTN_FWD_SIMPLE &&
                            (!r->bwd || sh->kernels.bwd == PL_ATTN_BWD_SIMPLE)))
      return PL_OK;
    attn_run ref = *r;
    ref.sh.kernels = (pl_attn_kernels){PL_ATTN_FWD_SIMPLE, PL_ATTN_BWD_SIMPLE};
    ref.q = ref.k = ref.v = ref.o = ref.dout = ref.dq = ref.dk = ref.dv = NULL;
    ref.lse = NULL;
    pl_status s = pl__attn_alloc(c->dev, &ref, r->bwd);
    if (s == PL_OK)
      s = pl__attn_run(r);
    if (s == PL_OK)
      s = pl__attn_run(&ref);
    const void *want[4] = {ref.o, ref.dq, ref.dk, ref.dv};
    for (int i = 0; i < nout && s == PL_OK; i++)
      s = pl_check_device(chk, r->s, what[i], got[i], want[i], sh->dtype, n[i],
                          sh->seq);
    pl__attn_free(c->dev, &ref);
    return s;
  }
  if (sh->seq > 1024)
    return PL_OK;
  PL_TRY(pl__attn_run(r));
  double *qd = tu_to_f64(r->q, sh->dtype, n[0]);
  double *kd = tu_to_f64(r->k, sh->dtype, n[2]);
  double *vd = tu_to_f64(r->v, sh->dtype, n[2]);
  double *want[4] = {malloc(sizeof(double) * n[0]), NULL, NULL, NULL};
  pl_attn_ref_fwd_f64(sh, qd, kd, vd, want[0], NULL);
  if (r->bwd) {
    double *dod = tu_to_f64(r->dout, sh->dtype, n[0]);
    for (int i = 1; i < 4; i++)
      want[i] = malloc(sizeof(double) * n[i]);
    pl_attn_ref_bwd_f64(sh, qd, kd, vd, dod, want[1], want[2], want[3]);
    free(dod);
  }
  for (int i = 0; i < nout; i++)
    pl_check_arrays(chk, what[i], got[i], pl_elem_of(sh->dtype), want[i],
                    PL_ELEM_F64, n[i], sh->dtype, sh->seq);
  free(qd);
  free(kd);
  free(vd);
  for (int i = 0; i < 4; i++)
    free(want[i]);
  return PL_OK;
}
