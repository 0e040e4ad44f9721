/* dispatch_inputs.c — the inputs of `plateau bench dispatch` (dispatch.h):
 * the layer shapes it refuses, the tensors every point shares, the routes of
 * a routing profile (synthetic or the real router of model/router.h), the ep
 * reference and the check that compares with it. */
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

/* The layer's shape against what the bench runs: a usage error naming the
 * options. */
pl_status pl__dispatch_cfg_check(pl_bench_ctx *c, const pl_moe_cfg *g) {
  if (g->k > g->E)
    return pl_set_error(PL_EINVAL,
                        "--topk=%d is more than --experts=%d (a token goes to "
                        "k distinct experts)",
                        g->k, g->E);
  if ((double)g->E * (double)g->H * (double)g->I > (double)((int64_t)1 << 40))
    return pl_set_error(PL_EINVAL,
                        "--experts=%d --hidden=%lld --ffn=%lld: the experts' "
                        "weights, E*H*I = %.3g elements, are too large "
                        "(allowed: at most 2^40)",
                        g->E, (long long)g->H, (long long)g->I,
                        (double)g->E * (double)g->H * (double)g->I);
  if (g->E % c->size != 0)
    return pl_set_error(PL_EINVAL,
                        "--experts=%d is not a multiple of the %d "
                        "ranks",
                        g->E, c->size);
  return PL_OK;
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
static pl_status residents(pl_bench_ctx *c, dispatch *d) {
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
static pl_status routes(pl_bench_ctx *c, dispatch *d, int profile,
                        const char *name) {
  const pl_moe_cfg *g = &d->cfg;
  job *j = &d->j;
  const size_t Nk = (size_t)j->N * g->k;
  pl_stream *s = c->stream;
  if (strcmp(name, "router") != 0) {
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
static pl_status reference(pl_bench_ctx *c, dispatch *d) {
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

/* The inputs of a point of `profile`: the residents (once; their failure,
 * oom at a paper shape, is every row's), and on a change of profile its
 * routes and, with --check, its reference. */
pl_status pl__dispatch_inputs(pl_bench_ctx *c, dispatch *d, int profile,
                              const char *name) {
  if (!d->resident) { /* a failure here (oom at a paper shape): every row */
    d->res_st = residents(c, d);
    PL_TRY(pl_bench_agree(c, &d->res_st));
    snprintf(d->res_msg, sizeof d->res_msg, "%s", pl_last_error());
    d->resident = d->res_st == PL_OK ? 1 : -1;
  }
  if (d->resident < 0)
    return pl_set_error(d->res_st, "%s", d->res_msg);
  if (profile != d->profile) {
    pl_status rs = routes(c, d, profile, name);
    PL_TRY(pl_bench_agree(c, &rs));
    if (rs != PL_OK)
      return rs;
    d->profile = profile;
    pl_status ref = c->check ? reference(c, d) : PL_ERUNTIME;
    PL_TRY(pl_bench_agree(c, &ref));
    d->have_ref = ref == PL_OK; /* without it only the bound is checked */
    pl_clear_error();
  }
  return PL_OK;
}

/* out and dx against the ep reference (bit-exact on the CPU, dtype-scaled
 * over a reduction of max(H, I) on CUDA); a pipelined point's dispatch peak
 * against its bound. */
pl_status pl__dispatch_check(pl_bench_ctx *c, dispatch *d, pl_check *chk) {
  const pl_moe_cfg *g = &d->cfg;
  const size_t NH = (size_t)d->j.N * g->H;
  const int64_t k = c->cuda ? (g->H > g->I ? g->H : g->I) : PL_CHECK_EXACT;
  if (d->have_ref) {
    PL_TRY(pl_check_device(chk, c->stream, "out", d->j.out, d->ref_out, g->dt,
                           NH, k));
    PL_TRY(pl_check_device(chk, c->stream, "dx", d->j.dx, d->ref_dx, g->dt, NH,
                           k));
  }
  if (d->vc.variant == PL_MOE_PIPELINED) {
    size_t bound = pl_moe_dispatch_bound(&d->vc, c->size, d->j.st.c_eff);
    pl_check_that(chk, c->meas->tag_peak[0] <= bound,
                  "dispatch peak %zu above the bound %zu", c->meas->tag_peak[0],
                  bound);
  }
  return PL_OK;
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
