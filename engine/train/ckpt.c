/* ckpt.c — the checkpointed layer runner and SCO's copy schedule.
 *
 * Three streams: compute (the device's default stream), copy (D2H of selected
 * boundaries) and restore (H2D, one layer ahead).  They are ordered only by
 * events — no host synchronization inside the layer loops — so on CUDA the
 * copies overlap the layers' GEMMs; on the CPU backend the same schedule runs
 * serialized in issue order, with the same tracked memory.
 *
 * Forward, layer ℓ:  h_{ℓ+1} = f_ℓ(h_ℓ) on compute; if ℓ ∈ S the copy stream
 * waits for h_ℓ to exist, copies it to its pinned slot, then waits for f_ℓ to
 * have read it and frees it (stream-ordered).  Backward, layer ℓ (descending):
 * compute waits for the restore of h_ℓ, the restore of h_{ℓ−1} starts, f_ℓ is
 * recomputed and backpropagated, h_ℓ is freed.  At most two restored
 * boundaries are live at a time, so device boundary bytes stay within
 * 2·N·H·b + (L − |S|)·N·H·b (Eq. 4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/layer.h"
#include "model/mlp_block.h"
#include "train/ckpt.h"

struct pl_ckpt_stack {
  pl_dev *dev;
  int L;
  void *const *layers;
  const pl_layer_ops *ops;
  int64_t H;
  pl_dtype dt;
  pl_stream *copy, *restore;
  pl_event **produced, **fwd_done, **offloaded, **restored;
  float *loss_dev; /* 1 float, tag "activations" */
  bool profile;
  const char **kind; /* L: each layer's kind for the phase (NULL: none) */
  pl_event **copy_start, **restore_start; /* profile: L + 1 each */
  double d2h_ms, h2d_ms;                  /* the last step's copies */
  pl_comm *agree; /* borrowed: the group agreeing at layer boundaries   */
};

pl_status pl_ckpt_create(pl_dev *dev, int L, void *const *layers,
                         const pl_layer_ops *ops, int64_t H, pl_dtype dt,
                         pl_ckpt_stack **out) {
  *out = NULL;
  if (L < 1)
    return pl_set_error(PL_EINVAL, "checkpoint stack: L=%d (must be >= 1)", L);
  if (H <= 0)
    return pl_set_error(PL_EINVAL, "checkpoint stack: H=%lld (must be > 0)",
                        (long long)H);
  pl_ckpt_stack *st = calloc(1, sizeof *st);
  if (!st)
    return pl_set_error(PL_ENOMEM, "checkpoint stack: out of host memory");
  st->dev = dev, st->L = L, st->layers = layers, st->ops = ops, st->H = H,
  st->dt = dt;
  pl_event ***sets[] = {&st->produced, &st->fwd_done, &st->offloaded,
                        &st->restored};
  pl_status s = PL_OK;
  for (int k = 0; k < 4; k++) {
    *sets[k] = calloc((size_t)L + 1, sizeof(pl_event *));
    if (!*sets[k])
      PL_TRY_GOTO(
          s, fail,
          pl_set_error(PL_ENOMEM, "checkpoint stack: out of host memory"));
    for (int l = 0; l <= L; l++)
      PL_TRY_GOTO(s, fail, pl_event_create(dev, &(*sets[k])[l]));
  }
  PL_TRY_GOTO(s, fail, pl_stream_create(dev, &st->copy));
  PL_TRY_GOTO(s, fail, pl_stream_create(dev, &st->restore));
  PL_TRY_GOTO(s, fail,
              pl_alloc(dev, PL_ARENA_DEVICE, sizeof(float), "activations",
                       (void **)&st->loss_dev));
  *out = st;
  return PL_OK;
fail:
  pl_ckpt_destroy(st);
  return s;
}

void pl_ckpt_destroy(pl_ckpt_stack *st) {
  if (!st)
    return;
  pl_dev_sync(st->dev);
  pl_event **sets[] = {st->produced, st->fwd_done,   st->offloaded,
                       st->restored, st->copy_start, st->restore_start};
  for (int k = 0; k < 6; k++) {
    for (int l = 0; sets[k] && l <= st->L; l++)
      if (sets[k][l])
        pl_event_destroy(sets[k][l]);
    free(sets[k]);
  }
  pl_stream_destroy(st->copy);
  pl_stream_destroy(st->restore);
  pl_free(st->dev, st->loss_dev);
  free(st->kind);
  free(st);
}

void pl_ckpt_set_profile(pl_ckpt_stack *st, bool on) {
  st->profile = on;
}

void pl_ckpt_set_agree(pl_ckpt_stack *st, pl_comm *c) {
  st->agree = c;
}

/* The agreement before layer l's PASS (l = L: the head), over the group set
 * (none: s as is).  Every rank calls it with its status so far (a failed
 * rank skips its own work up to here, never an agreement), so a failure in
 * layer l − 1 after its last collective, or in the runner's own allocations
 * between layers, ends the step on every rank before any enters the next
 * layer's collectives. */
static pl_status agree(pl_ckpt_stack *st, pl_status s, const char *pass,
                       int l) {
  if (!st->agree)
    return s;
  char what[64];
  if (l == st->L)
    snprintf(what, sizeof what, "the head");
  else
    snprintf(what, sizeof what, "layer %d's %s", l, pass);
  return pl_agree(st->agree, s, "checkpoint step", what);
}

pl_status pl_ckpt_set_kinds(pl_ckpt_stack *st, const char *const *kind) {
  if (!st->kind && !(st->kind = calloc((size_t)st->L, sizeof *st->kind)))
    return pl_set_error(PL_ENOMEM, "checkpoint stack: out of host memory");
  for (int l = 0; l < st->L; l++)
    st->kind[l] = kind[l];
  return PL_OK;
}

/* The tracker's phase: WHAT of layer l (its kind when set). */
static void phase(pl_ckpt_stack *st, const char *what, int l) {
  pl_mem_phase_set(st->dev, what, l, st->kind ? st->kind[l] : NULL);
}

void pl_ckpt_copy_ms(const pl_ckpt_stack *st, double *d2h_ms, double *h2d_ms) {
  *d2h_ms = st->d2h_ms;
  *h2d_ms = st->h2d_ms;
}

/* The profile's start event of layer l's copy (created on first use). */
static pl_status start_event(pl_ckpt_stack *st, pl_event ***set, int l,
                             pl_stream *s) {
  if (!st->profile)
    return PL_OK;
  if (!*set && !(*set = calloc((size_t)st->L + 1, sizeof(pl_event *))))
    return pl_set_error(PL_ENOMEM, "checkpoint stack: out of host memory");
  if (!(*set)[l])
    PL_TRY(pl_event_create(st->dev, &(*set)[l]));
  return pl_event_record((*set)[l], s);
}

/* Start bringing h_ℓ back from its pinned slot (restore stream). */
static pl_status issue_restore(pl_ckpt_stack *st, pl_sco *sco, int l, void **h,
                               size_t bytes) {
  PL_TRY(pl_alloc_async(st->dev, PL_ARENA_DEVICE, bytes, "boundary",
                        st->restore, &h[l]));
  PL_TRY(pl_stream_wait(st->restore, st->offloaded[l]));
  PL_TRY(start_event(st, &st->restore_start, l, st->restore));
  PL_TRY(pl_memcpy_async(st->restore, h[l], pl_sco_slot(sco, l), bytes));
  return pl_event_record(st->restored[l], st->restore);
}

/* After the step: the copies' times from the profile's events. */
static pl_status copy_times(pl_ckpt_stack *st, pl_sco *sco) {
  st->d2h_ms = st->h2d_ms = 0;
  if (!st->profile)
    return PL_OK;
  for (int l = 0; l < st->L; l++) {
    if (!pl_sco_selected(sco, l))
      continue;
    float a = 0, b = 0;
    PL_TRY(pl_event_elapsed_ms(st->copy_start[l], st->offloaded[l], &a));
    PL_TRY(pl_event_elapsed_ms(st->restore_start[l], st->restored[l], &b));
    st->d2h_ms += a, st->h2d_ms += b;
  }
  return PL_OK;
}

static pl_status step(pl_ckpt_stack *st, pl_sco *sco, const void *x0,
                      const void *g, const pl_ckpt_head *head, void *dx0,
                      int64_t N, double *loss);

pl_status pl_ckpt_step(pl_ckpt_stack *st, pl_sco *sco, const void *x0,
                       const void *g, void *dx0, int64_t N, double *loss) {
  return step(st, sco, x0, g, NULL, dx0, N, loss);
}

pl_status pl_ckpt_step_head(pl_ckpt_stack *st, pl_sco *sco, const void *x0,
                            const pl_ckpt_head *head, void *dx0, int64_t N,
                            double *loss) {
  if (!head || !head->run)
    return pl_set_error(PL_EINVAL, "checkpoint step: no head");
  return step(st, sco, x0, NULL, head, dx0, N, loss);
}

/* After layer l's forward: its events, and a selected boundary offloaded on
 * the copy stream and freed there. */
static pl_status fwd_after(pl_ckpt_stack *st, pl_sco *sco, void **h, int l,
                           size_t bytes) {
  pl_stream *cs = pl_dev_stream(st->dev);
  PL_TRY(pl_event_record(st->fwd_done[l], cs));
  PL_TRY(pl_event_record(st->produced[l + 1], cs));
  if (!pl_sco_selected(sco, l))
    return PL_OK;
  /* the copy may start as soon as h_ℓ exists (it runs beside f_ℓ, which
   * only reads h_ℓ); the free waits for both the copy and f_ℓ */
  PL_TRY(pl_stream_wait(st->copy, st->produced[l]));
  PL_TRY(start_event(st, &st->copy_start, l, st->copy));
  PL_TRY(pl_memcpy_async(st->copy, pl_sco_slot(sco, l), h[l], bytes));
  PL_TRY(pl_event_record(st->offloaded[l], st->copy));
  PL_TRY(pl_stream_wait(st->copy, st->fwd_done[l]));
  pl_free_async(st->dev, h[l], st->copy);
  h[l] = NULL;
  return PL_OK;
}

/* The forward after s (the status so far): h_0 = x0, the layers, then the
 * head (dL/dh_L into gbuf[1]) or the loss GEMM; h_L freed.  Each layer and
 * the head come after an agreement (agree): a failed rank skips its own work
 * up to the next one, and returns from a failed agreement (as every rank
 * does; *past false) or past the layers (*past true) with the status of the
 * last layer and the head, which goes on to the backward's first agreement.
 * step frees what h and gbuf hold, also after a failure. */
static pl_status step_fwd(pl_ckpt_stack *st, pl_sco *sco, const void *x0,
                          const void *g, const pl_ckpt_head *head, void **h,
                          void **gbuf, size_t bytes, int64_t N,
                          double *head_loss, pl_status s, bool *past) {
  const int L = st->L;
  *past = false;
  pl_stream *cs = pl_dev_stream(st->dev);
  if (s == PL_OK)
    s = pl_alloc_async(st->dev, PL_ARENA_DEVICE, bytes, "boundary", cs, &h[0]);
  if (s == PL_OK)
    s = pl_memcpy_async(cs, h[0], x0, bytes);
  if (s == PL_OK)
    s = pl_event_record(st->produced[0], cs);
  for (int l = 0; l < L; l++) {
    phase(st, "forward", l);
    if (s == PL_OK)
      s = pl_alloc_async(st->dev, PL_ARENA_DEVICE, bytes,
                         l + 1 < L ? "boundary" : "output", cs, &h[l + 1]);
    PL_TRY(agree(st, s, "forward", l));
    s = st->ops->forward(st->layers[l], cs, h[l], h[l + 1], N);
    if (s == PL_OK)
      s = fwd_after(st, sco, h, l, bytes);
  }
  if (head) {
    /* the head writes dL/dh_L into gbuf[1], which layer L−1 reads */
    pl_mem_phase_set(st->dev, "head", -1, NULL);
    if (s == PL_OK)
      s = pl_alloc_async(st->dev, PL_ARENA_DEVICE, bytes, "grads_act", cs,
                         &gbuf[1]);
    PL_TRY(agree(st, s, "forward", L));
    s = head->run(head->ctx, cs, h[L], gbuf[1], N, head_loss);
  }
  *past = true;
  if (!head && s == PL_OK && N > 0) {
    /* loss = Σ h_L ⊙ g: a 1×1×(N·H) GEMM with fp32 accumulation */
    s = pl_gemm(cs, false, false, 1, 1, N * st->H, 1.0f, h[L], N * st->H, g, 1,
                0.0f, st->loss_dev, 1, st->dt, PL_F32);
  }
  if (s == PL_OK) {
    pl_free_async(st->dev, h[L], cs);
    h[L] = NULL;
  }
  return s;
}

/* The backward from dy = dL/dh_L after s (the status so far): per layer
 * (descending) wait for the restore of h_ℓ, start the one of h_{ℓ−1},
 * agree, recompute and backpropagate f_ℓ, free h_ℓ.  A failed rank goes on
 * to the next agreement, as in step_fwd; layer 0's status is returned (the
 * caller agrees before its next collective).  step frees what h and gbuf
 * hold, also after a failure. */
static pl_status step_bwd(pl_ckpt_stack *st, pl_sco *sco, const void *dy,
                          void *dx0, void **h, void **gbuf, size_t bytes,
                          int64_t N, pl_status s) {
  const int L = st->L;
  pl_stream *cs = pl_dev_stream(st->dev);
  int restoring =
      -1; /* layer whose restore has been issued, not yet consumed */
  if (s == PL_OK)
    s = pl_alloc_async(st->dev, PL_ARENA_DEVICE, bytes, "grads_act", cs,
                       &gbuf[0]);
  if (s == PL_OK && !gbuf[1])
    s = pl_alloc_async(st->dev, PL_ARENA_DEVICE, bytes, "grads_act", cs,
                       &gbuf[1]);
  for (int l = L - 1; l >= 0; l--) {
    phase(st, "backward", l);
    if (s == PL_OK && pl_sco_selected(sco, l)) {
      if (restoring != l)
        s = issue_restore(st, sco, l, h, bytes);
      if (s == PL_OK)
        s = pl_stream_wait(cs, st->restored[l]);
      restoring = -1;
    }
    if (s == PL_OK && l > 0 && pl_sco_selected(sco, l - 1)) {
      s = issue_restore(st, sco, l - 1, h, bytes); /* one-layer prefetch */
      restoring = l - 1;
    }
    PL_TRY(agree(st, s, "backward", l));
    void *dx = l == 0 ? dx0 : gbuf[(L - 1 - l) % 2];
    s = st->ops->backward(st->layers[l], cs, h[l], dy, dx, N);
    if (s == PL_OK) {
      pl_free_async(st->dev, h[l], cs);
      h[l] = NULL;
    }
    dy = dx;
  }
  return s;
}

/* After the step's frees: wait for everything, the copies' times, the loss. */
static pl_status step_end(pl_ckpt_stack *st, pl_sco *sco,
                          const pl_ckpt_head *head, double head_loss, int64_t N,
                          double *loss) {
  pl_stream *cs = pl_dev_stream(st->dev);
  PL_TRY(pl_dev_sync(st->dev));
  PL_TRY(copy_times(st, sco));
  if (head) {
    *loss = head_loss;
    return PL_OK;
  }
  if (N <= 0)
    return PL_OK;
  /* read the loss once everything has run */
  float lhost = 0;
  pl_status s = PL_OK;
  PL_TRY_GOTO(s, done, pl_memcpy_async(cs, &lhost, st->loss_dev, sizeof lhost));
  PL_TRY_GOTO(s, done, pl_stream_sync(cs));
done:
  *loss = lhost;
  return s;
}

static pl_status step(pl_ckpt_stack *st, pl_sco *sco, const void *x0,
                      const void *g, const pl_ckpt_head *head, void *dx0,
                      int64_t N, double *loss) {
  if (N < 0)
    return pl_set_error(PL_EINVAL, "checkpoint step: N=%lld (must be >= 0)",
                        (long long)N);
  *loss = 0;
  const int L = st->L;
  pl_stream *cs = pl_dev_stream(st->dev);
  size_t bytes = (size_t)N * (size_t)st->H * pl_dtype_size(st->dt);
  void **h = calloc((size_t)L + 1, sizeof *h);
  void *gbuf[2] = {NULL, NULL};
  double head_loss = 0;
  /* a failure here still reaches the first agreement (h is not touched
   * before it); sco's step is ended only where it began */
  pl_status s =
      h ? PL_OK
        : pl_set_error(PL_ENOMEM, "checkpoint step: out of host memory");
  const bool begun = s == PL_OK && (s = pl_sco_begin_step(sco)) == PL_OK;
  bool past;
  s = step_fwd(st, sco, x0, g, head, h, gbuf, bytes, N, &head_loss, s, &past);
  /* past the layers, the status goes on to the backward's first agreement;
   * a failed agreement ended the forward on every rank */
  if (past)
    s = step_bwd(st, sco, head ? gbuf[1] : g, dx0, h, gbuf, bytes, N, s);
  /* on failure, let every stream drain before freeing what they may use */
  if (s != PL_OK)
    pl_dev_sync(st->dev);
  for (int l = 0; h && l <= L; l++)
    pl_free_async(st->dev, h[l], cs);
  pl_free_async(st->dev, gbuf[0], cs);
  pl_free_async(st->dev, gbuf[1], cs);
  free(h);
  if (s == PL_OK)
    s = step_end(st, sco, head, head_loss, N, loss); /* after the frees */
  if (!begun)
    return s;
  pl_status e = pl_sco_end_step(sco);
  return s != PL_OK ? s : e;
}

/* ---- the model's layers as runner layers ---- */
static pl_status mlp_fwd(void *layer, pl_stream *s, const void *x, void *y,
                         int64_t N) {
  return pl_mlp_block_forward(layer, s, x, y, N);
}
static pl_status mlp_bwd(void *layer, pl_stream *s, const void *x,
                         const void *dy, void *dx, int64_t N) {
  return pl_mlp_block_backward(layer, s, x, dy, dx, N);
}
const pl_layer_ops pl_mlp_block_layer_ops = {mlp_fwd, mlp_bwd};

static pl_status layer_fwd(void *layer, pl_stream *s, const void *x, void *y,
                           int64_t N) {
  return pl_layer_forward(layer, s, x, y, N);
}
static pl_status layer_bwd(void *layer, pl_stream *s, const void *x,
                           const void *dy, void *dx, int64_t N) {
  return pl_layer_backward(layer, s, x, dy, dx, N);
}
const pl_layer_ops pl_decoder_layer_ops = {layer_fwd, layer_bwd};
