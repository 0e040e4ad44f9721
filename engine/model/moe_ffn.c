/* moe_ffn.c — the FFN sublayer's schedule (model/moe_ffn.h), backend-neutral:
 * RMSNorm and SwiGLU kernels through the backend twins, GEMMs through
 * pl_gemm, the router (model/router.h) and the MoE layer (ops/moe.h). */
#include "model/moe_ffn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/dry/dry.h"
#include "model/mlp_block.h"
#include "model/mlp_block_internal.h"
#include "model/router.h"

/* ---- set-up ----------------------------------------------------------------
 */

pl_status pl_moe_ffn_init(pl_dev *dev, pl_moe_ffn *f, const pl_moe_ffn_cfg *cfg,
                          pl_moe *moe) {
  memset(f, 0, sizeof *f);
  if (cfg->H < 1 || cfg->I_s < 0 || cfg->E < 0 ||
      (cfg->E == 0 && cfg->I_s == 0))
    return pl_set_error(PL_EINVAL,
                        "moe ffn: H=%lld E=%d I_s=%lld: need H >= 1 and routed "
                        "experts or a SwiGLU width",
                        (long long)cfg->H, cfg->E, (long long)cfg->I_s);
  if (cfg->dt != PL_F32 && cfg->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "moe ffn: dtype %s: f32 or bf16",
                        pl_dtype_name(cfg->dt));
  if ((cfg->E > 0) != (moe != NULL))
    return pl_set_error(PL_EINVAL, "moe ffn: E=%d with%s a MoE layer", cfg->E,
                        moe ? "" : "out");
  const int Em = cfg->E_moe ? cfg->E_moe : cfg->E;
  if (cfg->E_moe < 0 || (Em > 0 && cfg->E % Em))
    return pl_set_error(PL_EINVAL,
                        "moe ffn: E_moe=%d: must divide the router's E=%d",
                        cfg->E_moe, cfg->E);
  if (moe) {
    const pl_moe_cfg *mc = pl_moe_get_cfg(moe);
    if (mc->H != cfg->H || mc->E != Em || mc->k != cfg->k || mc->dt != cfg->dt)
      return pl_set_error(
          PL_EINVAL,
          "moe ffn: H=%lld E=%d k=%d %s against the MoE layer's "
          "H=%lld E=%d k=%d %s",
          (long long)cfg->H, Em, cfg->k, pl_dtype_name(cfg->dt),
          (long long)mc->H, mc->E, mc->k, pl_dtype_name(mc->dt));
    pl_router_shape rs = {.N = 0,
                          .H = cfg->H,
                          .E = cfg->E,
                          .k = cfg->k,
                          .renorm = cfg->renorm,
                          .dt = cfg->dt};
    PL_TRY(pl_router_check(&rs));
    f->counts = calloc((size_t)cfg->E, sizeof(int64_t));
    if (!f->counts)
      return pl_set_error(PL_ENOMEM, "moe ffn: host counts");
  }
  f->dev = dev;
  f->cfg = *cfg;
  f->eps = 1e-5f;
  f->moe = moe;
  return PL_OK;
}

void pl_moe_ffn_free(pl_moe_ffn *f) {
  pl_moe_ctx_free(f->ctx);
  free(f->counts);
  memset(f, 0, sizeof *f);
}

static pl_status check_stream(const pl_moe_ffn *f, pl_stream *s) {
  if (f->moe && s != pl_dev_stream(f->dev))
    return pl_set_error(PL_EINVAL,
                        "moe ffn: the MoE layer runs on the device's default "
                        "stream; pass that stream");
  return PL_OK;
}

/* Router buffers of one call (tag "router"). */
typedef struct route {
  float *probs;               /* N×E */
  int32_t *idx;               /* N×k device */
  float *w;                   /* N×k */
  const int32_t *hidx;        /* N×k host: own, or a dry device's routes */
  int32_t *own;               /* hidx when this call allocated it */
  const int64_t *slot_counts; /* a dry device's: routes per router slot */
} route;

static void route_free(pl_moe_ffn *f, pl_stream *s, route *r) {
  pl_free_async(f->dev, r->probs, s);
  pl_free_async(f->dev, r->idx, s);
  pl_free_async(f->dev, r->w, s);
  free(r->own);
  memset(r, 0, sizeof *r);
}

/* probs, idx, w from h; with_host: idx also on the host (one sync). */
static pl_status route_fwd(pl_moe_ffn *f, pl_stream *s, const void *h,
                           int64_t N, bool with_host, route *r) {
  const pl_moe_ffn_cfg *c = &f->cfg;
  memset(r, 0, sizeof *r);
  const size_t nk = (size_t)N * (size_t)c->k;
  PL_TRY(pl_alloc_async(f->dev, PL_ARENA_DEVICE, (size_t)N * c->E * 4, "router",
                        s, (void **)&r->probs));
  PL_TRY(pl_alloc_async(f->dev, PL_ARENA_DEVICE, nk * 4, "router", s,
                        (void **)&r->idx));
  PL_TRY(pl_alloc_async(f->dev, PL_ARENA_DEVICE, nk * 4, "router", s,
                        (void **)&r->w));
  pl_router_shape rs = {.N = N,
                        .H = c->H,
                        .E = c->E,
                        .k = c->k,
                        .renorm = c->renorm,
                        .dt = c->dt};
  PL_TRY(pl_router_fwd(s, &rs, h, f->w_r, f->bias, r->probs, r->idx, r->w));
  if (!with_host)
    return PL_OK;
  /* dry device: no router ran; its route hook's answer is read in place,
   * already landed (land) */
  if (pl__on_dry(s)) {
    pl_dry_route_view v;
    PL_TRY(pl_dry_routes_view(f->dev, N, c->k, c->E, c->E_moe ? c->E_moe : c->E,
                              &v));
    r->hidx = v.idx;
    r->slot_counts = v.counts;
    return PL_OK;
  }
  r->own = malloc(nk * sizeof(int32_t) + 1);
  if (!r->own)
    return pl_set_error(PL_ENOMEM, "moe ffn: host routes (N=%lld)",
                        (long long)N);
  r->hidx = r->own;
  PL_TRY(pl_memcpy_async(s, r->own, r->idx, nk * sizeof(int32_t)));
  return pl_stream_sync(s);
}

/* The routes per router slot into the layer's counts. */
static void count_routes(pl_moe_ffn *f, const route *r, int64_t N) {
  if (r->slot_counts) {
    for (int e = 0; e < f->cfg.E; e++)
      f->counts[e] += r->slot_counts[e];
    return;
  }
  for (int64_t i = 0; i < N * f->cfg.k; i++)
    f->counts[r->hidx[i]]++;
}

/* The host routes onto the MoE layer's experts: slot e to e mod E_moe
 * (nothing when the router's slots are the experts; a dry device's come
 * landed). */
static void land(const pl_moe_ffn *f, route *r, int64_t N) {
  const int Em = f->cfg.E_moe;
  if (!Em || Em == f->cfg.E || !r->own)
    return;
  for (int64_t i = 0; i < N * f->cfg.k; i++)
    r->own[i] %= Em;
}

/* Failure agreement before the MoE layer (pl_agree over the EP group): a
 * rank whose own steps failed (a tracked allocation over the arena's
 * limit, the RMSNorm, the router) must not leave the other ranks waiting in
 * the layer's collectives until the watchdog ends the job, so every rank
 * enters the layer or none does.  Every rank calls it, whatever its status;
 * pass names the layer's pass in the peers' message. */
static pl_status agree_before_moe(const pl_moe_ffn *f, pl_status st,
                                  const char *pass) {
  char what[96];
  snprintf(what, sizeof what, "the MoE layer's %s", pass);
  return pl_agree(pl_moe_comm(f->moe), st, "moe ffn", what);
}

/* ---- forward ---------------------------------------------------------------
 */

pl_status pl_moe_ffn_forward(pl_moe_ffn *f, pl_stream *s, const void *x,
                             void *y, int64_t N) {
  if (N < 0)
    return pl_set_error(PL_EINVAL, "moe ffn: N=%lld: must be >= 0",
                        (long long)N);
  PL_TRY(check_stream(f, s));
  const pl_moe_ffn_cfg *c = &f->cfg;
  const int64_t H = c->H, I = c->I_s;
  const size_t es = pl_dtype_size(c->dt);
  pl_moe_ctx_free(f->ctx);
  f->ctx = NULL;
  void *h = NULL, *gu = NULL, *a = NULL;
  route r = {0};
  /* a rank that failed skips its own part but never the agreement before
   * the MoE layer, which every rank of the EP group enters (also with
   * N = 0) or none does */
  pl_status st = pl_alloc_async(f->dev, PL_ARENA_DEVICE, (size_t)(N * H) * es,
                                "activations", s, &h);
  if (st == PL_OK && N > 0)
    st = pl__rmsnorm_fwd(s, x, f->w_n, h, N, H, f->eps, c->dt);
  if (f->moe) {
    if (st == PL_OK)
      st = route_fwd(f, s, h, N, true, &r);
    PL_TRY_GOTO(st, done, agree_before_moe(f, st, "forward"));
    count_routes(f, &r, N);
    land(f, &r, N);
    PL_TRY_GOTO(st, done,
                pl_moe_forward(f->moe, &f->ew, h, N, r.hidx, r.w, y,
                               c->keep_ctx ? &f->ctx : NULL, &f->stats));
    if (N > 0)
      PL_TRY_GOTO(st, done,
                  pl_axpy(s, y, c->dt, x, c->dt, (size_t)(N * H), 1.0f));
  } else if (st == PL_OK && N > 0) {
    st = pl_memcpy_async(s, y, x, (size_t)(N * H) * es);
  }
  if (st != PL_OK)
    goto done;
  if (I > 0 && N > 0) {
    PL_TRY_GOTO(st, done,
                pl_alloc_async(f->dev, PL_ARENA_DEVICE,
                               (size_t)(N * 2 * I) * es, "activations", s,
                               &gu));
    PL_TRY_GOTO(st, done,
                pl_gemm(s, false, false, N, 2 * I, H, 1.f, h, H, f->w_up, 2 * I,
                        0.f, gu, 2 * I, c->dt, c->dt));
    PL_TRY_GOTO(st, done,
                pl_alloc_async(f->dev, PL_ARENA_DEVICE, (size_t)(N * I) * es,
                               "activations", s, &a));
    PL_TRY_GOTO(st, done, pl__swiglu_fwd(s, gu, a, N, I, c->dt));
    PL_TRY_GOTO(st, done,
                pl_gemm(s, false, false, N, H, I, 1.f, a, I, f->w_down, H, 1.f,
                        y, H, c->dt, c->dt));
  }
done:
  route_free(f, s, &r);
  pl_free_async(f->dev, h, s);
  pl_free_async(f->dev, gu, s);
  pl_free_async(f->dev, a, s);
  return st;
}

/* ---- backward --------------------------------------------------------------
 */

/* The shared expert's backward (I > 0, N > 0): the SwiGLU again (gu =
 * h·W_up, a = swiglu(gu)), g_down += aᵀ·dy, g_up += hᵀ·dgu and dh32 +=
 * dgu·W_upᵀ.  Its buffers are allocated into *gu, *a, *da, *dgu, which the
 * caller frees with the rest, also after a failure. */
static pl_status shared_bwd(pl_moe_ffn *f, pl_stream *s, const void *h,
                            const void *dy, float *dh32, int64_t N, void **gu,
                            void **a, void **da, void **dgu) {
  const pl_moe_ffn_cfg *c = &f->cfg;
  const int64_t H = c->H, I = c->I_s;
  const size_t es = pl_dtype_size(c->dt);
  pl_dev *dev = f->dev;
  /* the SwiGLU again: gu = h·W_up, a = swiglu(gu) */
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * 2 * I) * es,
                        "activations", s, gu));
  PL_TRY(pl_gemm(s, false, false, N, 2 * I, H, 1.f, h, H, f->w_up, 2 * I, 0.f,
                 *gu, 2 * I, c->dt, c->dt));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * I) * es,
                        "activations", s, a));
  PL_TRY(pl__swiglu_fwd(s, *gu, *a, N, I, c->dt));
  /* g_down += aᵀ·dy;  da = dy·W_downᵀ;  dgu = pl__swiglu_bwd(gu, da) */
  PL_TRY(pl_gemm(s, true, false, I, H, N, 1.f, *a, I, dy, H, 1.f, f->g_down, H,
                 c->dt, PL_F32));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * I) * es,
                        "activations", s, da));
  PL_TRY(pl_gemm(s, false, true, N, I, H, 1.f, dy, H, f->w_down, H, 0.f, *da, I,
                 c->dt, c->dt));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * 2 * I) * es,
                        "activations", s, dgu));
  PL_TRY(pl__swiglu_bwd(s, *gu, *da, *dgu, N, I, c->dt));
  /* g_up += hᵀ·dgu;  dh += dgu·W_upᵀ (f32) */
  PL_TRY(pl_gemm(s, true, false, H, 2 * I, N, 1.f, h, H, *dgu, 2 * I, 1.f,
                 f->g_up, 2 * I, c->dt, PL_F32));
  return pl_gemm(s, false, true, N, H, 2 * I, 1.f, *dgu, 2 * I, f->w_up, 2 * I,
                 1.f, dh32, H, c->dt, PL_F32);
}

/* The MoE part's buffers of one backward (freed by the caller, also after
 * a failure). */
typedef struct moe_bufs {
  route r;
  void *tmp, *dhe, *dhr, *dlog;
  float *dw;
} moe_bufs;

/* The routed experts' and the router's backward: dh32 += the MoE layer's
 * dx and the router's dh; the experts' and W_r's gradients accumulate.
 * Every rank of the EP group calls it, whatever st (the status so far): a
 * rank that failed skips its own part but never an agreement, and each of
 * the MoE layer's calls comes after one (agree_before_moe). */
static pl_status moe_bwd(pl_moe_ffn *f, pl_stream *s, const void *h,
                         const void *dy, float *dh32, int64_t N, moe_bufs *b,
                         pl_status st) {
  const pl_moe_ffn_cfg *c = &f->cfg;
  const size_t es = pl_dtype_size(c->dt), nh = (size_t)(N * c->H);
  pl_dev *dev = f->dev;
  /* the route weights again (same routes); the forward's context, or a new
   * forward on them when it was not kept (keep_ctx is the group's, so the
   * same branch on every rank) */
  const bool need_ctx = f->ctx == NULL;
  if (st == PL_OK)
    st = route_fwd(f, s, h, N, need_ctx, &b->r);
  if (need_ctx) {
    if (st == PL_OK)
      st = pl_alloc_async(dev, PL_ARENA_DEVICE, nh * es, "activations", s,
                          &b->tmp);
    PL_TRY(agree_before_moe(f, st, "forward (recomputed for the backward)"));
    pl_moe_stats scratch_stats;
    land(f, &b->r, N);
    /* its status goes to the next agreement: the layer may fail on one
     * rank after its last collective */
    st = pl_moe_forward(f->moe, &f->ew, h, N, b->r.hidx, b->r.w, b->tmp,
                        &f->ctx, &scratch_stats);
    pl_free_async(dev, b->tmp, s);
    b->tmp = NULL;
  }
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, nh * es, "activations", s,
                        &b->dhe);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)N * c->k * 4, "router", s,
                        (void **)&b->dw);
  PL_TRY(agree_before_moe(f, st, "backward"));
  PL_TRY(pl_moe_backward(f->moe, f->ctx, &f->ew, h, b->r.w, dy, b->dhe, b->dw,
                         &f->eg));
  pl_moe_ctx_free(f->ctx);
  f->ctx = NULL;
  if (N > 0)
    PL_TRY(pl_axpy(s, dh32, PL_F32, b->dhe, c->dt, nh, 1.0f));
  /* the router: dw -> dlogits -> dh_router, dW_r */
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)N * c->E * es, "router",
                        s, &b->dlog));
  PL_TRY(
      pl_alloc_async(dev, PL_ARENA_DEVICE, nh * es, "activations", s, &b->dhr));
  pl_router_shape rs = {.N = N,
                        .H = c->H,
                        .E = c->E,
                        .k = c->k,
                        .renorm = c->renorm,
                        .dt = c->dt};
  PL_TRY(pl_router_bwd(s, &rs, h, f->w_r, b->r.probs, b->r.idx, b->r.w, b->dw,
                       b->dlog, b->dhr, f->g_r));
  if (N > 0)
    PL_TRY(pl_axpy(s, dh32, PL_F32, b->dhr, c->dt, nh, 1.0f));
  return PL_OK;
}

pl_status pl_moe_ffn_backward(pl_moe_ffn *f, pl_stream *s, const void *x,
                              const void *dy, void *dx, int64_t N) {
  if (N < 0)
    return pl_set_error(PL_EINVAL, "moe ffn: N=%lld: must be >= 0",
                        (long long)N);
  PL_TRY(check_stream(f, s));
  const pl_moe_ffn_cfg *c = &f->cfg;
  const int64_t H = c->H, I = c->I_s;
  const size_t es = pl_dtype_size(c->dt), nh = (size_t)(N * H);
  pl_dev *dev = f->dev;
  void *h = NULL, *gu = NULL, *a = NULL, *da = NULL, *dgu = NULL, *dh = NULL;
  float *dh32 = NULL, *scr = NULL;
  moe_bufs mb = {0};
  /* a rank that failed skips its own part but never the MoE part's
   * agreements (moe_bwd) */
  pl_status st =
      pl_alloc_async(dev, PL_ARENA_DEVICE, nh * es, "activations", s, &h);
  if (st == PL_OK && N > 0)
    st = pl__rmsnorm_fwd(s, x, f->w_n, h, N, H, f->eps, c->dt);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, nh * 4, "activations", s,
                        (void **)&dh32);
  if (st == PL_OK && N > 0)
    st = pl_fill(s, dh32, PL_F32, nh, 0.0);
  if (f->moe)
    st = moe_bwd(f, s, h, dy, dh32, N, &mb, st);
  if (st != PL_OK)
    goto done;
  if (I > 0 && N > 0)
    PL_TRY_GOTO(st, done, shared_bwd(f, s, h, dy, dh32, N, &gu, &a, &da, &dgu));
  /* dx = dy + pl__rmsnorm_bwd(x, w_n, dh);  g_n += ... */
  PL_TRY_GOTO(
      st, done,
      pl_alloc_async(dev, PL_ARENA_DEVICE, nh * es, "activations", s, &dh));
  if (N > 0)
    PL_TRY_GOTO(st, done, pl_convert(s, dh, c->dt, dh32, PL_F32, nh));
  if (N > 0 && pl__allocs_as_cuda(s))
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE,
                               pl__rmsnorm_bwd_scratch(N, H) * 4, "activations",
                               s, (void **)&scr));
  if (N > 0)
    PL_TRY_GOTO(st, done,
                pl__rmsnorm_bwd(s, x, f->w_n, dh, dy, dx, f->g_n, scr, N, H,
                                f->eps, c->dt));
done:
  /* after a failure: the MoE layer's context too (freed above otherwise) */
  pl_moe_ctx_free(f->ctx);
  f->ctx = NULL;
  route_free(f, s, &mb.r);
  void *ps[] = {h,   gu,     a,      da,     dgu,     dh,   dh32,
                scr, mb.tmp, mb.dhe, mb.dhr, mb.dlog, mb.dw};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free_async(dev, ps[i], s);
  return st;
}

static pl_status ffn_fwd(void *ffn, pl_stream *s, const void *x, void *y,
                         int64_t N) {
  return pl_moe_ffn_forward(ffn, s, x, y, N);
}
static pl_status ffn_bwd(void *ffn, pl_stream *s, const void *x, const void *dy,
                         void *dx, int64_t N) {
  return pl_moe_ffn_backward(ffn, s, x, dy, dx, N);
}
const pl_ffn_ops pl_moe_ffn_ops = {ffn_fwd, ffn_bwd};
