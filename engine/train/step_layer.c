/* step_layer.c — the trainer's per-layer schedule (train/step.h): the
 * decoder layer as the checkpoint runner calls it (its ZeRO-3 unit
 * gathered, the next one prefetched, released; in backward gathered again,
 * its gradient reduce-scattered), the head phase (final norm, vocabulary
 * head, loss), and the events of the time breakdown around both
 * (train/timeline.h).  Split from step.c at its seams (step_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/mlp_block_internal.h"
#include "train/step_internal.h"

/* ---- the decoder layer in the runner
 * ------------------------------------------ */

static void set_views(pl__tlayer *x, void *full, float *gfull) {
  const size_t es = x->t->elem_bytes;
  char *W = full;
  pl_layer *l = &x->layer;
  pl_moe_ffn *f = &x->ffn;
  l->w_n = W + x->off[PL__U_ATTN_NORM] * es;
  l->w_qkv = W + x->off[PL__U_QKV] * es;
  l->w_o = W + x->off[PL__U_O] * es;
  f->w_n = W + x->off[PL__U_FFN_NORM] * es;
  f->w_r = x->moe ? W + x->off[PL__U_ROUTER] * es : NULL;
  f->w_up =
      x->off[PL__U_UP] != PL__UNIT_ABSENT ? W + x->off[PL__U_UP] * es : NULL;
  f->w_down = x->off[PL__U_DOWN] != PL__UNIT_ABSENT
                  ? W + x->off[PL__U_DOWN] * es
                  : NULL;
  if (!gfull)
    return;
  l->g_n = gfull + x->off[PL__U_ATTN_NORM];
  l->g_qkv = gfull + x->off[PL__U_QKV];
  l->g_o = gfull + x->off[PL__U_O];
  f->g_n = gfull + x->off[PL__U_FFN_NORM];
  f->g_r = x->moe ? gfull + x->off[PL__U_ROUTER] : NULL;
  f->g_up =
      x->off[PL__U_UP] != PL__UNIT_ABSENT ? gfull + x->off[PL__U_UP] : NULL;
  f->g_down =
      x->off[PL__U_DOWN] != PL__UNIT_ABSENT ? gfull + x->off[PL__U_DOWN] : NULL;
}

/* Failure agreement over the world before layer l's WHAT (l < 0: WHAT
 * alone), plateau/comm.h pl_agree: every rank calls it with its status so
 * far, so a rank that failed in a local step (a tracked allocation, a gather's
 * tail) stops the others before the collectives that follow instead of
 * leaving them there until the watchdog.  The world, since the layer's
 * collectives span its D-, EP- and ZeRO groups. */
pl_status pl__step_agree(pl_trainer *t, pl_status st, const char *what, int l) {
  char buf[96];
  if (l >= 0)
    snprintf(buf, sizeof buf, "layer %d's %s", l, what);
  else
    snprintf(buf, sizeof buf, "%s", what);
  return pl_agree(t->world, st, "trainer", buf);
}

/* The FFN slot, timed: marks around the MoE FFN's forward / backward. */

static pl_status slot_fwd(void *ctx, pl_stream *s, const void *x, void *y,
                          int64_t N) {
  pl__tlayer *tl = ctx;
  int a, b;
  PL_TRY(pl_timeline_mark(&tl->t->tline, s, &a));
  PL_TRY(pl__ep_slot_begin(tl->t, tl, s, false));
  PL_TRY(pl_moe_ffn_forward(&tl->ffn, s, x, y, N));
  PL_TRY(pl__ep_slot_end(tl->t, tl, s, false));
  PL_TRY(pl_timeline_mark(&tl->t->tline, s, &b));
  return pl_timeline_span(&tl->t->tline, PL_PART_MOE, a, b);
}

static pl_status slot_bwd(void *ctx, pl_stream *s, const void *x,
                          const void *dy, void *dx, int64_t N) {
  pl__tlayer *tl = ctx;
  pl_trainer *t = tl->t;
  int a, b;
  pl_status st = pl_timeline_mark(&t->tline, s, &a);
  if (st == PL_OK)
    st = pl__ep_slot_begin(t, tl, s, true);
  /* expert units: the slot's begin allocates the unit's gradient before the
   * MoE layer's collectives, and its end reduce-scatters it after the
   * shared expert's backward; every rank agrees before each */
  if (t->expert_units)
    st = pl__step_agree(t, st, "MoE backward", tl->index);
  PL_TRY(st);
  st = pl_moe_ffn_backward(&tl->ffn, s, x, dy, dx, N);
  if (t->expert_units)
    st = pl__step_agree(t, st, "expert gradient reduction", tl->index);
  PL_TRY(st);
  PL_TRY(pl__ep_slot_end(t, tl, s, true));
  PL_TRY(pl_timeline_mark(&tl->t->tline, s, &b));
  return pl_timeline_span(&tl->t->tline, PL_PART_MOE, a, b);
}

const pl_ffn_ops pl__step_slot_ops = {slot_fwd, slot_bwd};

pl_status pl__step_recompute_mark(void *ctx, pl_stream *s, int end) {
  pl__tlayer *tl = ctx;
  if (!end)
    return pl_timeline_mark(&tl->t->tline, s, &tl->rec_a);
  int b;
  PL_TRY(pl_timeline_mark(&tl->t->tline, s, &b));
  return pl_timeline_span(&tl->t->tline, PL_PART_RECOMPUTE, tl->rec_a, b);
}

/* The layer's own time minus its FFN slot's is attention: a span for the
 * whole layer (part ATTENTION) and the slot's span (MOE) subtracted later. */
static pl_status timed(pl_trainer *t, int a, int b) {
  /* recorded as ATTENTION; take_parts subtracts the MOE spans inside */
  return pl_timeline_span(&t->tline, PL_PART_ATTENTION, a, b);
}

static pl_status tl_forward(void *layer, pl_stream *s, const void *x, void *y,
                            int64_t N) {
  pl__tlayer *tl = layer;
  pl_trainer *t = tl->t;
  const int L = t->model.L;
  void *full = NULL;
  /* the units' gathers agree inside (zero3.c); their tails and the expert
   * unit's gather (over its replica group) before the layer's collectives */
  pl_status st = pl_zero3_acquire(t->units, tl->unit, s, &full);
  if (st == PL_OK)
    st = pl_zero3_prefetch(t->units,
                           tl->index + 1 < L ? tl->unit + 1 : t->u_head, s);
  if (st == PL_OK)
    st = pl__ep_layer_begin(t, tl, s);
  int a, b;
  if (st == PL_OK)
    st = pl_timeline_mark(&t->tline, s, &a);
  PL_TRY(pl__step_agree(t, st, "forward", tl->index));
  set_views(tl, full, NULL);
  /* a failure in the layer goes back to the runner, which agrees before
   * the next layer */
  PL_TRY(pl_layer_forward(&tl->layer, s, x, y, N));
  PL_TRY(pl_timeline_mark(&t->tline, s, &b));
  PL_TRY(timed(t, a, b));
  /* the last layer's unit stays for the final norm (the head releases it) */
  if (tl->index + 1 < L)
    pl_zero3_release(t->units, tl->unit, s);
  return PL_OK;
}

static pl_status tl_backward(void *layer, pl_stream *s, const void *x,
                             const void *dy, void *dx, int64_t N) {
  pl__tlayer *tl = layer;
  pl_trainer *t = tl->t;
  void *full = NULL;
  float *gfull = NULL;
  /* as in tl_forward; the unit's gradient is allocated before the layer's
   * collectives too */
  pl_status st = pl_zero3_acquire(t->units, tl->unit, s, &full);
  if (st == PL_OK && tl->index > 0)
    st = pl_zero3_prefetch(t->units, tl->unit - 1, s);
  if (st == PL_OK)
    st = pl__ep_layer_begin(t, tl, s);
  if (st == PL_OK)
    st = pl_zero3_grad_acquire(t->units, tl->unit, s, &gfull);
  int a, b;
  if (st == PL_OK)
    st = pl_timeline_mark(&t->tline, s, &a);
  PL_TRY(pl__step_agree(t, st, "backward", tl->index));
  set_views(tl, full, gfull);
  st = pl_layer_backward(&tl->layer, s, x, dy, dx, N);
  if (st == PL_OK)
    st = pl_timeline_mark(&t->tline, s, &b);
  if (st == PL_OK)
    st = timed(t, a, b);
  /* the layer may fail after its last collective (the attention's local
   * part): every rank agrees before the unit's reduce-scatter */
  PL_TRY(pl__step_agree(t, st, "gradient reduction", tl->index));
  pl_zero3_release(t->units, tl->unit, s);
  return pl_zero3_grad_reduce(t->units, tl->unit, s, t->micro_i > 0);
}

const pl_layer_ops pl__step_layer_ops = {tl_forward, tl_backward};

/* ---- the head: final norm + vocabulary head
 * ------------------------------------ */

pl_status pl__step_head_run(void *ctx, pl_stream *s, const void *hL, void *dh,
                            int64_t N, double *loss) {
  pl_trainer *t = ctx;
  pl__tlayer *last = &t->layers[t->model.L - 1];
  const int64_t H = t->H;
  const size_t nh = (size_t)(N * H);
  pl_dev *dev = t->dev;
  void *full = NULL, *wh = NULL, *xf = NULL, *dxf = NULL, *dwb = NULL;
  float *gh = NULL, *glast, *scr = NULL;
  int a, b;
  /* a failed rank skips its own part up to the next agreement: the one
   * before the head's collectives, the one before its unit's reduce-scatter
   * (the vocabulary-parallel head may fail after its last collective) */
  pl_status st = pl_timeline_mark(&t->tline, s, &a);
  if (st == PL_OK)
    st = pl_zero3_acquire(t->units, last->unit, s, &full);
  const void *wf =
      full ? (char *)full + last->off[PL__U_FINAL] * t->elem_bytes : NULL;
  /* the head's weight gradient: straight into the unit's f32 gradient in
   * f32, through a bf16 buffer otherwise */
  const size_t nw = (size_t)H * (size_t)t->head_cols;
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, nh * t->elem_bytes, "activations",
                        s, &xf);
  if (st == PL_OK)
    st = pl__rmsnorm_fwd(s, hL, wf, xf, N, H, 1e-5f, t->dt);
  if (st == PL_OK)
    st = pl_zero3_acquire(t->units, t->u_head, s, &wh);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, nh * t->elem_bytes, "activations",
                        s, &dxf);
  if (st == PL_OK)
    st = t->dt == PL_F32
             ? pl_zero3_grad_acquire(t->units, t->u_head, s, &gh)
             : pl_alloc_async(dev, PL_ARENA_DEVICE, nw * t->elem_bytes,
                              "zero3_grads", s, &dwb);
  PL_TRY_GOTO(st, done, pl__step_agree(t, st, "the head", -1));
  st = t->head->run(t->hctx, s, xf, t->d_tgt, wh, t->d_dloss, t->d_nll, dxf,
                    t->dt == PL_F32 ? (void *)gh : dwb);
  if (st == PL_OK && t->dt != PL_F32)
    st = pl_zero3_grad_acquire(t->units, t->u_head, s, &gh);
  if (st == PL_OK && t->dt != PL_F32)
    st = pl_convert(s, gh, PL_F32, dwb, t->dt, nw);
  PL_TRY_GOTO(st, done,
              pl__step_agree(t, st, "the head's gradient reduction", -1));
  pl_free_async(dev, dwb, s);
  dwb = NULL;
  pl_zero3_release(t->units, t->u_head, s);
  PL_TRY_GOTO(st, done,
              pl_zero3_grad_reduce(t->units, t->u_head, s, t->micro_i > 0));
  /* the final norm's backward into the last layer's gradient */
  PL_TRY_GOTO(st, done, pl_zero3_grad_acquire(t->units, last->unit, s, &glast));
  if (pl__allocs_as_cuda(s))
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE,
                               pl__rmsnorm_bwd_scratch(N, H) * 4, "activations",
                               s, (void **)&scr));
  PL_TRY_GOTO(st, done,
              pl__rmsnorm_bwd(s, hL, wf, dxf, NULL, dh,
                              glast + last->off[PL__U_FINAL], scr, N, H, 1e-5f,
                              t->dt));
done:
  pl_free_async(dev, dwb, s);
  pl_free_async(dev, scr, s);
  pl_free_async(dev, xf, s);
  pl_free_async(dev, dxf, s);
  PL_TRY(st);
  PL_TRY(pl_head_nll_sum(s, t->d_nll, t->h_nll, N, loss));
  PL_TRY(pl_timeline_mark(&t->tline, s, &b));
  return pl_timeline_span(&t->tline, PL_PART_HEAD, a, b);
}
