/* dispatch_inputs.c — the inputs of `plateau bench dispatch` (dispatch.h):
 * the tensors every point shares, the routes of a routing profile (synthetic
 * or the real router of model/router.h) and the ep reference the check
 * compares with. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "model/router.h"

pl_status pl__dispatch_job(void *arg) {
  job *j = arg;
  pl_moe_ctx *c = NULL;
  PL_TRY(pl_moe_forward(j->m, &j->W, j->x, j->N, j->idx, j->w, j->out,
                        j->bwd ? &c : NULL, &j->st));
  if (!j->bwd)
    return PL_OK;
  pl_status s =
      pl_moe_backward(j->m, c, &j->W, j->x, j->w, j->dout, j->dx, j->dw, &j->G);
  j->ov_bwd = pl_moe_ctx_overlapped(c) - j->st.overlapped;
  if (s == PL_OK)
    memcpy(j->stage_ms, pl_moe_ctx_stage_ms(c), sizeof j->stage_ms);
  pl_moe_ctx_free(c);
  return s;
}

static pl_status alloc_fill(pl_bench_ctx *c, size_t n, pl_dtype dt,
                            const char *tag, uint64_t seed, uint64_t off,
                            float std, void **out) {
  PL_TRY(pl_alloc(c->dev, PL_ARENA_DEVICE, n * pl_dtype_size(dt), tag, out));
  if (seed == 0)
    return pl_fill(c->stream, *out, dt, n, 0.0);
  return pl_rng_fill(c->stream, *out, dt, n, seed, off, PL_DIST_NORMAL, 0, std);
}

/* What every point shares: inputs, weights (native experts, seeded by global
 * expert index), fp32 gradients, outputs, the reference's outputs. */
pl_status pl__dispatch_residents(pl_bench_ctx *c, dispatch *d) {
  const pl_moe_cfg *g = &d->cfg;
  job *j = &d->j;
  const int El = g->E / c->size;
  const size_t HI = (size_t)g->H * g->I, NH = (size_t)j->N * g->H,
               Nk = (size_t)j->N * g->k, o = (size_t)c->rank * El * HI;
  const uint64_t s = c->seed ? c->seed : 1;
  const float sh = 1.0f / sqrtf((float)g->H), si = 1.0f / sqrtf((float)g->I);
  PL_TRY(alloc_fill(c, El * HI, g->dt, "weights", s + 11, o, sh, &j->W.wg));
  PL_TRY(alloc_fill(c, El * HI, g->dt, "weights", s + 12, o, sh, &j->W.wu));
  PL_TRY(alloc_fill(c, El * HI, g->dt, "weights", s + 13, o, si, &j->W.wd));
  PL_TRY(alloc_fill(c, El * HI, PL_F32, "grads", 0, 0, 0, (void **)&j->G.wg));
  PL_TRY(alloc_fill(c, El * HI, PL_F32, "grads", 0, 0, 0, (void **)&j->G.wu));
  PL_TRY(alloc_fill(c, El * HI, PL_F32, "grads", 0, 0, 0, (void **)&j->G.wd));
  PL_TRY(alloc_fill(c, NH, g->dt, "act", s + 1, c->rank * NH, 1, &j->x));
  PL_TRY(alloc_fill(c, NH, g->dt, "act", s + 2, c->rank * NH, 1, &j->dout));
  PL_TRY(alloc_fill(c, NH, g->dt, "act", 0, 0, 0, &j->out));
  PL_TRY(alloc_fill(c, NH, g->dt, "act", 0, 0, 0, &j->dx));
  PL_TRY(alloc_fill(c, Nk, PL_F32, "act", 0, 0, 0, (void **)&j->dw));
  PL_TRY(alloc_fill(c, Nk, PL_F32, "act", 0, 0, 0, (void **)&j->w));
  PL_TRY(alloc_fill(c, NH, g->dt, "check", 0, 0, 0, &d->ref_out));
  PL_TRY(alloc_fill(c, NH, g->dt, "check", 0, 0, 0, &d->ref_dx));
  j->idx = malloc(Nk * sizeof(int32_t) + 4);
  d->hw = malloc(Nk * sizeof(float) + 4);
  if (!j->idx || !d->hw)
    return pl_set_error(PL_ENOMEM, "dispatch: host routes");
  return pl_stream_sync(c->stream);
}

/* The routes of a profile: a synthetic profile, or the real router
 * (model/router.h: logits x W_r, top-k, weights renormalized over the k;
 * idx copied to the host for the planner, the documented host sync). */
pl_status pl__dispatch_routes(pl_bench_ctx *c, dispatch *d, int profile,
                              const char *name) {
  const pl_moe_cfg *g = &d->cfg;
  job *j = &d->j;
  const size_t Nk = (size_t)j->N * g->k;
  pl_stream *s = c->stream;
  if (profile != 4) {
    pl_route_profile prof;
    PL_TRY(pl_route_profile_parse(name, &prof));
    PL_TRY(pl_route_profile_fill(&prof, j->N, g->k, g->E, 0, c->rank, j->idx,
                                 d->hw));
    PL_TRY(pl_memcpy_async(s, j->w, d->hw, Nk * sizeof(float)));
    return pl_stream_sync(s);
  }
  void *Wr = NULL, *probs = NULL, *didx = NULL;
  const pl_router_shape rsh = {
      .N = j->N, .H = g->H, .E = g->E, .k = g->k, .renorm = 1, .dt = g->dt};
  pl_status st = alloc_fill(c, (size_t)g->H * g->E, g->dt, "router",
                            c->seed ? c->seed + 21 : 22, 0,
                            1.0f / sqrtf((float)g->H), &Wr);
  if (st == PL_OK)
    st = pl_alloc(c->dev, PL_ARENA_DEVICE, (size_t)j->N * g->E * sizeof(float),
                  "router", &probs);
  if (st == PL_OK)
    st = pl_alloc(c->dev, PL_ARENA_DEVICE, Nk * sizeof(int32_t), "router",
                  &didx);
  if (st == PL_OK)
    st = pl_router_fwd(s, &rsh, j->x, Wr, NULL, probs, didx, j->w);
  if (st == PL_OK)
    st = pl_memcpy_async(s, j->idx, didx, Nk * sizeof(int32_t));
  if (st == PL_OK)
    st = pl_stream_sync(s);
  pl_free(c->dev, didx);
  pl_free(c->dev, probs);
  pl_free(c->dev, Wr);
  return st;
}

/* The reference of a profile: ep (lanes 0) on the same inputs. */
pl_status pl__dispatch_reference(pl_bench_ctx *c, dispatch *d) {
  pl_moe *m = NULL;
  pl_moe_cfg rc = d->cfg;
  rc.variant = PL_MOE_EP;
  rc.lanes = 0;
  const size_t bytes = (size_t)d->j.N * d->cfg.H * pl_dtype_size(d->cfg.dt);
  pl_status rs = pl_moe_create(c->comm, &rc, &m);
  if (rs == PL_OK) {
    d->j.m = m;
    d->j.bwd = true;
    rs = pl__dispatch_job(&d->j);
    if (rs == PL_OK)
      rs = pl_memcpy_async(c->stream, d->ref_out, d->j.out, bytes);
    if (rs == PL_OK)
      rs = pl_memcpy_async(c->stream, d->ref_dx, d->j.dx, bytes);
    if (rs == PL_OK)
      rs = pl_stream_sync(c->stream);
    pl_moe_destroy(m);
    d->j.m = NULL;
  }
  return rs;
}

void pl__dispatch_free(pl_bench_ctx *c, dispatch *d) {
  job *j = &d->j;
  void *ps[] = {j->W.wg, j->W.wu, j->W.wd,    j->G.wg,  j->G.wu,
                j->G.wd, j->x,    j->dout,    j->out,   j->dx,
                j->w,    j->dw,   d->ref_out, d->ref_dx};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free(c->dev, ps[i]);
  free(j->idx);
  free(d->hw);
}
