/* fsdp2_layer.c — the FSDP2 baseline's decoder layer (fsdp2_layer.h):
 * forward keeping or freeing its activations, backward from them or after
 * their recompute; GEMMs through pl_gemm, norms and SwiGLU through the
 * model's kernels, attention flash or ring, the router, the MoE layer. */
#include "fsdp2_layer.h"

#include <stdlib.h>
#include <string.h>

#include "backend/dry/dry.h"
#include "core/internal.h"
#include "model/mlp_block_internal.h"
#include "model/rope.h"
#include "train/step.h"

static int64_t nqd(const pl__fsdp2_layer *l) {
  return (int64_t)l->n_q * l->d;
}
static int64_t nkd(const pl__fsdp2_layer *l) {
  return (int64_t)l->n_kv * l->d;
}

static pl_status mark(const pl__fsdp2_layer *l, pl_stream *s, int *idx) {
  *idx = -1;
  return l->tl ? pl_timeline_mark(l->tl, s, idx) : PL_OK;
}
static pl_status span(const pl__fsdp2_layer *l, int part, int a, int b) {
  return l->tl ? pl_timeline_span(l->tl, part, a, b) : PL_OK;
}

void pl__fsdp2_layer_drop(pl__fsdp2_layer *l, pl_stream *s) {
  pl__fsdp2_saved *v = &l->sv;
  void *ps[] = {v->h,  v->q, v->k,   v->v,     v->o, v->y1, v->h2,
                v->gu, v->a, v->lse, v->probs, v->w, v->idx};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free_async(l->dev, ps[i], s);
  free(v->own);
  pl_moe_ctx_free(v->ctx);
  memset(v, 0, sizeof *v);
}

/* RoPE (inverse: its backward) on x [N, heads, d], chunk by chunk. */
static pl_status rope(pl__fsdp2_layer *l, pl_stream *s, void *x, int heads,
                      int64_t N, int inverse) {
  const int nch = l->CP > 1 ? 2 : 1;
  const int64_t c = N / nch;
  const size_t es = pl_dtype_size(l->dt);
  for (int a = 0; a < nch; a++) {
    const int64_t pos0 =
        l->CP > 1 ? (int64_t)pl_ring_chunk(l->CP, l->cp_rank, a) * c : 0;
    void *xa = (char *)x + (size_t)a * c * heads * l->d * es;
    PL_TRY(inverse ? pl_rope_bwd(s, xa, l->dt, 1, c, heads, l->d, pos0,
                                 l->rope_theta)
                   : pl_rope_fwd(s, xa, l->dt, 1, c, heads, l->d, pos0,
                                 l->rope_theta));
  }
  return PL_OK;
}

static pl_attn_shape ashape(const pl__fsdp2_layer *l, int64_t N) {
  pl_attn_shape sh = {.batch = 1,
                      .seq = N,
                      .n_q = l->n_q,
                      .n_kv = l->n_kv,
                      .head_dim = l->d,
                      .dtype = l->dt,
                      .kernels = l->attn};
  return sh;
}

/* A device buffer of the layer's, on s. */
static pl_status dalloc(pl__fsdp2_layer *l, pl_stream *s, size_t bytes,
                        const char *tag, void **p) {
  return pl_alloc_async(l->dev, PL_ARENA_DEVICE, bytes, tag, s, p);
}

/* The FFN part of the forward: y = y1 + moe(h2) + swiglu(h2·W_up)·W_down. */
static pl_status ffn_fwd(pl__fsdp2_layer *l, pl_stream *s, void *y, int64_t N,
                         const char *tag, bool keep_ctx, bool count) {
  pl__fsdp2_saved *v = &l->sv;
  const int64_t H = l->H;
  const size_t es = pl_dtype_size(l->dt), nh = (size_t)(N * H);
  PL_TRY(dalloc(l, s, nh * es, tag, (void **)&v->h2));
  PL_TRY(pl__rmsnorm_fwd(s, v->y1, l->w_n2, v->h2, N, H, l->eps, l->dt));
  if (l->moe) {
    const size_t nk2 = (size_t)N * (size_t)l->k;
    PL_TRY(dalloc(l, s, (size_t)N * l->E * 4, tag, (void **)&v->probs));
    PL_TRY(dalloc(l, s, nk2 * 4, tag, (void **)&v->idx));
    PL_TRY(dalloc(l, s, nk2 * 4, tag, (void **)&v->w));
    pl_router_shape rs = {
        .N = N, .H = H, .E = l->E, .k = l->k, .renorm = l->renorm, .dt = l->dt};
    PL_TRY(
        pl_router_fwd(s, &rs, v->h2, l->w_r, l->bias, v->probs, v->idx, v->w));
    if (pl__on_dry(s)) {
      /* dry device: no router ran; its route hook's answer is read in
       * place, as the composed step's (model/moe_ffn.c) */
      pl_dry_route_view dv;
      PL_TRY(pl_dry_routes_view(l->dev, N, l->k, l->E, l->E, &dv));
      v->hidx = dv.idx;
      for (int e = 0; count && e < l->E; e++)
        l->counts[e] += dv.counts[e];
    } else {
      v->own = malloc(nk2 * sizeof(int32_t) + 4);
      if (!v->own)
        return pl_set_error(PL_ENOMEM, "fsdp2 layer: host");
      v->hidx = v->own;
      PL_TRY(pl_memcpy_async(s, v->own, v->idx, nk2 * 4));
      PL_TRY(pl_stream_sync(s));
      for (size_t i = 0; count && i < nk2; i++)
        l->counts[v->hidx[i]]++;
    }
    PL_TRY(pl_moe_forward(l->moe, &l->ew, v->h2, N, v->hidx, v->w, y,
                          keep_ctx ? &v->ctx : NULL, &l->stats));
    PL_TRY(pl_axpy(s, y, l->dt, v->y1, l->dt, nh, 1.0f));
  } else {
    PL_TRY(pl_memcpy_async(s, y, v->y1, nh * es));
  }
  if (l->I_s > 0) {
    const int64_t I = l->I_s;
    PL_TRY(dalloc(l, s, (size_t)(N * 2 * I) * es, tag, (void **)&v->gu));
    PL_TRY(dalloc(l, s, (size_t)(N * I) * es, tag, (void **)&v->a));
    PL_TRY(pl_gemm(s, false, false, N, 2 * I, H, 1.f, v->h2, H, l->w_up, 2 * I,
                   0.f, v->gu, 2 * I, l->dt, l->dt));
    PL_TRY(pl__swiglu_fwd(s, v->gu, v->a, N, I, l->dt));
    PL_TRY(pl_gemm(s, false, false, N, H, I, 1.f, v->a, I, l->w_down, H, 1.f, y,
                   H, l->dt, l->dt));
  }
  return PL_OK;
}

/* Forward into *v (its buffers tagged tag) and y. */
static pl_status fwd(pl__fsdp2_layer *l, pl_stream *s, const void *x, void *y,
                     int64_t N, const char *tag, bool keep_ctx, bool count) {
  pl__fsdp2_saved *v = &l->sv;
  const int64_t H = l->H, nq = nqd(l), nk = nkd(l), tot = nq + 2 * nk;
  const size_t es = pl_dtype_size(l->dt), nh = (size_t)(N * H);
  int m0, m1, m2;
  memset(v, 0, sizeof *v);
  v->valid = true;
  PL_TRY(mark(l, s, &m0));
  /* attention */
  PL_TRY(dalloc(l, s, nh * es, tag, (void **)&v->h));
  PL_TRY(dalloc(l, s, (size_t)(N * nq) * es, tag, (void **)&v->q));
  PL_TRY(dalloc(l, s, (size_t)(N * nk) * es, tag, (void **)&v->k));
  PL_TRY(dalloc(l, s, (size_t)(N * nk) * es, tag, (void **)&v->v));
  PL_TRY(dalloc(l, s, (size_t)(N * nq) * es, tag, (void **)&v->o));
  PL_TRY(dalloc(l, s, (size_t)l->n_q * (size_t)N * 4, tag, (void **)&v->lse));
  PL_TRY(dalloc(l, s, nh * es, tag, (void **)&v->y1));
  PL_TRY(pl__rmsnorm_fwd(s, x, l->w_n, v->h, N, H, l->eps, l->dt));
  const char *W = l->w_qkv;
  PL_TRY(pl_gemm(s, false, false, N, nq, H, 1.f, v->h, H, W, tot, 0.f, v->q, nq,
                 l->dt, l->dt));
  PL_TRY(pl_gemm(s, false, false, N, nk, H, 1.f, v->h, H, W + nq * es, tot, 0.f,
                 v->k, nk, l->dt, l->dt));
  PL_TRY(pl_gemm(s, false, false, N, nk, H, 1.f, v->h, H, W + (nq + nk) * es,
                 tot, 0.f, v->v, nk, l->dt, l->dt));
  PL_TRY(rope(l, s, v->q, l->n_q, N, 0));
  PL_TRY(rope(l, s, v->k, l->n_kv, N, 0));
  pl_attn_shape sh = ashape(l, N);
  PL_TRY(l->ring
             ? pl_ring_attn_fwd(l->ring, s, &sh, v->q, v->k, v->v, v->o, v->lse)
             : pl_attn_fwd(s, &sh, v->q, v->k, v->v, v->o, v->lse));
  PL_TRY(pl_memcpy_async(s, v->y1, x, nh * es));
  PL_TRY(pl_gemm(s, false, false, N, H, nq, 1.f, v->o, nq, l->w_o, H, 1.f,
                 v->y1, H, l->dt, l->dt));
  PL_TRY(mark(l, s, &m1));
  PL_TRY(ffn_fwd(l, s, y, N, tag, keep_ctx, count));
  PL_TRY(mark(l, s, &m2));
  PL_TRY(span(l, PL_PART_ATTENTION, m0, m1));
  return span(l, PL_PART_MOE, m1, m2);
}

pl_status pl__fsdp2_layer_forward(pl__fsdp2_layer *l, pl_stream *s,
                                  const void *x, void *y, int64_t N, bool keep,
                                  bool count) {
  pl_status st =
      fwd(l, s, x, y, N, keep ? "saved" : "activations", keep, count);
  if (st != PL_OK || !keep)
    pl__fsdp2_layer_drop(l, s);
  return st;
}

/* The backward's transients (tags "activations" and "router"), freed
 * together at its end. */
typedef struct bwd_bufs {
  void *dh, *dy1, *dhe, *dhr, *dlog, *da, *dgu, *dO, *dq, *dk, *dv;
  float *dh32, *dw, *scr;
} bwd_bufs;

/* A checkpointed layer: its forward again, kept (tag "activations"). */
static pl_status recompute(pl__fsdp2_layer *l, pl_stream *s, const void *x,
                           int64_t N) {
  const size_t nh = (size_t)(N * l->H);
  void *ytmp = NULL;
  PL_TRY(dalloc(l, s, nh * pl_dtype_size(l->dt), "activations", &ytmp));
  pl_status st = fwd(l, s, x, ytmp, N, "activations", true, false);
  pl_free_async(l->dev, ytmp, s);
  return st;
}

/* The MoE part of the FFN's backward: the routed experts and the router,
 * their input gradients added to b->dh32. */
static pl_status moe_bwd(pl__fsdp2_layer *l, pl_stream *s, const void *dy,
                         int64_t N, bwd_bufs *b) {
  pl__fsdp2_saved *v = &l->sv;
  const size_t es = pl_dtype_size(l->dt), nh = (size_t)(N * l->H);
  PL_TRY(dalloc(l, s, nh * es, "activations", &b->dhe));
  PL_TRY(dalloc(l, s, (size_t)N * l->k * 4, "router", (void **)&b->dw));
  pl_status st = pl_moe_backward(l->moe, v->ctx, &l->ew, v->h2, v->w, dy,
                                 b->dhe, b->dw, &l->eg);
  pl_moe_ctx_free(v->ctx);
  v->ctx = NULL;
  PL_TRY(st);
  PL_TRY(pl_axpy(s, b->dh32, PL_F32, b->dhe, l->dt, nh, 1.0f));
  PL_TRY(dalloc(l, s, (size_t)N * l->E * es, "router", &b->dlog));
  PL_TRY(dalloc(l, s, nh * es, "activations", &b->dhr));
  pl_router_shape rs = {.N = N,
                        .H = l->H,
                        .E = l->E,
                        .k = l->k,
                        .renorm = l->renorm,
                        .dt = l->dt};
  PL_TRY(pl_router_bwd(s, &rs, v->h2, l->w_r, v->probs, v->idx, v->w, b->dw,
                       b->dlog, b->dhr, l->g_r));
  return pl_axpy(s, b->dh32, PL_F32, b->dhr, l->dt, nh, 1.0f);
}

/* The SwiGLU's backward (shared expert or dense FFN, width I_s): W_down's
 * and W_up's gradients, its input gradient added to b->dh32. */
static pl_status swiglu_bwd(pl__fsdp2_layer *l, pl_stream *s, const void *dy,
                            int64_t N, bwd_bufs *b) {
  pl__fsdp2_saved *v = &l->sv;
  const int64_t H = l->H, I = l->I_s;
  const size_t es = pl_dtype_size(l->dt);
  PL_TRY(pl_gemm(s, true, false, I, H, N, 1.f, v->a, I, dy, H, 1.f, l->g_down,
                 H, l->dt, PL_F32));
  PL_TRY(dalloc(l, s, (size_t)(N * I) * es, "activations", &b->da));
  PL_TRY(pl_gemm(s, false, true, N, I, H, 1.f, dy, H, l->w_down, H, 0.f, b->da,
                 I, l->dt, l->dt));
  PL_TRY(dalloc(l, s, (size_t)(N * 2 * I) * es, "activations", &b->dgu));
  PL_TRY(pl__swiglu_bwd(s, v->gu, b->da, b->dgu, N, I, l->dt));
  PL_TRY(pl_gemm(s, true, false, H, 2 * I, N, 1.f, v->h2, H, b->dgu, 2 * I, 1.f,
                 l->g_up, 2 * I, l->dt, PL_F32));
  return pl_gemm(s, false, true, N, H, 2 * I, 1.f, b->dgu, 2 * I, l->w_up,
                 2 * I, 1.f, b->dh32, H, l->dt, PL_F32);
}

/* The FFN's backward: dh = dL/dh2 summed in f32 over the MoE part and the
 * SwiGLU, then the second norm's backward into b->dy1 = dL/dy1. */
static pl_status ffn_bwd(pl__fsdp2_layer *l, pl_stream *s, const void *dy,
                         int64_t N, bwd_bufs *b) {
  pl__fsdp2_saved *v = &l->sv;
  const int64_t H = l->H;
  const size_t es = pl_dtype_size(l->dt), nh = (size_t)(N * H);
  PL_TRY(dalloc(l, s, nh * 4, "activations", (void **)&b->dh32));
  PL_TRY(pl_fill(s, b->dh32, PL_F32, nh, 0.0));
  if (l->moe)
    PL_TRY(moe_bwd(l, s, dy, N, b));
  if (l->I_s > 0)
    PL_TRY(swiglu_bwd(l, s, dy, N, b));
  PL_TRY(dalloc(l, s, nh * es, "activations", &b->dh));
  PL_TRY(pl_convert(s, b->dh, l->dt, b->dh32, PL_F32, nh));
  if (pl__allocs_as_cuda(s))
    PL_TRY(dalloc(l, s, pl__rmsnorm_bwd_scratch(N, H) * 4, "activations",
                  (void **)&b->scr));
  PL_TRY(dalloc(l, s, nh * es, "activations", &b->dy1));
  return pl__rmsnorm_bwd(s, v->y1, l->w_n2, b->dh, dy, b->dy1, l->g_n2, b->scr,
                         N, H, l->eps, l->dt);
}

/* The attention's backward from b->dy1: W_o, the attention (flash or
 * ring), RoPE, W_qkv, then the first norm's backward into dx. */
static pl_status attention_bwd(pl__fsdp2_layer *l, pl_stream *s, const void *x,
                               void *dx, int64_t N, bwd_bufs *b) {
  pl__fsdp2_saved *v = &l->sv;
  const int64_t H = l->H, nq = nqd(l), nk = nkd(l), tot = nq + 2 * nk;
  const size_t es = pl_dtype_size(l->dt), nh = (size_t)(N * H);
  PL_TRY(dalloc(l, s, (size_t)(N * nq) * es, "activations", &b->dO));
  PL_TRY(dalloc(l, s, (size_t)(N * nq) * es, "activations", &b->dq));
  PL_TRY(dalloc(l, s, (size_t)(N * nk) * es, "activations", &b->dk));
  PL_TRY(dalloc(l, s, (size_t)(N * nk) * es, "activations", &b->dv));
  PL_TRY(pl_gemm(s, false, true, N, nq, H, 1.f, b->dy1, H, l->w_o, H, 0.f,
                 b->dO, nq, l->dt, l->dt));
  PL_TRY(pl_gemm(s, true, false, nq, H, N, 1.f, v->o, nq, b->dy1, H, 1.f,
                 l->g_o, H, l->dt, PL_F32));
  pl_attn_shape sh = ashape(l, N);
  PL_TRY(l->ring ? pl_ring_attn_bwd(l->ring, s, &sh, v->q, v->k, v->v, v->o,
                                    b->dO, v->lse, b->dq, b->dk, b->dv)
                 : pl_attn_bwd(s, &sh, v->q, v->k, v->v, v->o, b->dO, v->lse,
                               b->dq, b->dk, b->dv));
  PL_TRY(rope(l, s, b->dq, l->n_q, N, 1));
  PL_TRY(rope(l, s, b->dk, l->n_kv, N, 1));
  const char *W = l->w_qkv;
  const void *dg[3] = {b->dq, b->dk, b->dv};
  const int64_t off[3] = {0, nq, nq + nk}, wid[3] = {nq, nk, nk};
  for (int i = 0; i < 3; i++) {
    PL_TRY(pl_gemm(s, false, true, N, H, wid[i], 1.f, dg[i], wid[i],
                   W + off[i] * es, tot, i ? 1.f : 0.f, b->dh32, H, l->dt,
                   PL_F32));
    PL_TRY(pl_gemm(s, true, false, H, wid[i], N, 1.f, v->h, H, dg[i], wid[i],
                   1.f, l->g_qkv + off[i], tot, l->dt, PL_F32));
  }
  PL_TRY(pl_convert(s, b->dh, l->dt, b->dh32, PL_F32, nh));
  return pl__rmsnorm_bwd(s, x, l->w_n, b->dh, b->dy1, dx, l->g_n, b->scr, N, H,
                         l->eps, l->dt);
}

static void free_bwd(pl__fsdp2_layer *l, pl_stream *s, bwd_bufs *b) {
  void *ps[] = {b->dh, b->dy1, b->dhe, b->dhr, b->dlog, b->da, b->dgu,
                b->dO, b->dq,  b->dk,  b->dv,  b->dh32, b->dw, b->scr};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl_free_async(l->dev, ps[i], s);
}

pl_status pl__fsdp2_layer_backward(pl__fsdp2_layer *l, pl_stream *s,
                                   const void *x, const void *dy, void *dx,
                                   int64_t N) {
  pl_status st = l->sv.valid ? PL_OK : recompute(l, s, x, N);
  if (st != PL_OK) {
    pl__fsdp2_layer_drop(l, s);
    return st;
  }
  bwd_bufs b = {0};
  int m0, m1, m2;
  PL_TRY_GOTO(st, done, mark(l, s, &m0));
  PL_TRY_GOTO(st, done, ffn_bwd(l, s, dy, N, &b));
  PL_TRY_GOTO(st, done, mark(l, s, &m1));
  PL_TRY_GOTO(st, done, attention_bwd(l, s, x, dx, N, &b));
  PL_TRY_GOTO(st, done, mark(l, s, &m2));
  PL_TRY_GOTO(st, done, span(l, PL_PART_MOE, m0, m1));
  PL_TRY_GOTO(st, done, span(l, PL_PART_ATTENTION, m1, m2));
done:
  free_bwd(l, s, &b);
  pl__fsdp2_layer_drop(l, s);
  return st;
}
