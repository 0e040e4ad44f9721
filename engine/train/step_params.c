/* step_params.c — a trainer's parameters from outside (train/step.h): their
 * names and shapes, the full tensor of a weight or gradient gathered to
 * every rank, setting one, and the router biases (tests, checkpoints).
 * Split from step.c (step_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plateau/host_device.h"
#include "train/step_internal.h"

/* ---- parameters: gather and set
 * ---------------------------------------------------- */

int pl_trainer_nparams(const pl_trainer *t) {
  return t->nparams;
}

pl_status pl_trainer_param_info(const pl_trainer *t, int i,
                                pl_param_info *out) {
  if (i < 0 || i >= t->nparams)
    return pl_set_error(PL_EINVAL, "trainer: parameter %d of %d", i,
                        t->nparams);
  *out = t->params[i].info;
  return PL_OK;
}

const float *pl_trainer_router_bias(const pl_trainer *t, int l) {
  return l >= 0 && l < t->model.L && t->layers[l].moe ? t->layers[l].hbias
                                                      : NULL;
}

pl_status pl_trainer_set_router_bias(pl_trainer *t, int l, const float *bias) {
  if (l < 0 || l >= t->model.L || !t->layers[l].moe)
    return pl_set_error(PL_EINVAL, "trainer: layer %d has no router", l);
  pl__tlayer *x = &t->layers[l];
  memcpy(x->hbias, bias, (size_t)t->plan.E_route * 4);
  pl_stream *s = pl_dev_stream(t->dev);
  PL_TRY(pl_memcpy_async(s, x->bias, x->hbias, (size_t)t->plan.E_route * 4));
  return pl_stream_sync(s);
}

/* Host f32 copy of n device elements of dtype dt. */
static pl_status to_host_f32(pl_trainer *t, float *dst, const void *src,
                             pl_dtype dt, size_t n) {
  pl_stream *s = pl_dev_stream(t->dev);
  void *tmp = malloc(n * pl_dtype_size(dt) + 4);
  if (!tmp)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, pl_memcpy_async(s, tmp, src, n * pl_dtype_size(dt)));
  PL_TRY_GOTO(st, done, pl_stream_sync(s));
  for (size_t i = 0; i < n; i++)
    dst[i] =
        dt == PL_F32 ? ((float *)tmp)[i] : pl_bf16_to_f32(((pl_bf16 *)tmp)[i]);
done:
  free(tmp);
  return st;
}

/* All-gather count elements of dt from every rank of c into a new device
 * buffer (size·count), after st (the status so far): every rank of c calls
 * it, a rank that failed (here or before) skips its own part but never the
 * agreement before the all-gather (plateau/comm.h pl_agree), so no rank is
 * left in the collective until the watchdog. */
static pl_status gather_dev(pl_trainer *t, pl_comm *c, const void *src,
                            size_t count, pl_dtype dt, void **out,
                            pl_status st) {
  pl_stream *s = pl_dev_stream(t->dev);
  const int n = c ? pl_comm_size(c) : 1;
  *out = NULL;
  if (st == PL_OK)
    st = pl_alloc(t->dev, PL_ARENA_DEVICE,
                  (size_t)n * count * pl_dtype_size(dt) + 4, "gather", out);
  PL_TRY_GOTO(st, fail,
              pl_agree(c, st, "trainer", "the all-gather of a parameter"));
  PL_TRY_GOTO(st, fail,
              c ? pl_allgather(c, src, *out, count, dt, s)
                : pl_memcpy_async(s, *out, src, count * pl_dtype_size(dt)));
  PL_TRY_GOTO(st, fail, pl_stream_sync(s));
  return PL_OK;
fail:
  pl_free(t->dev, *out);
  *out = NULL; /* the caller frees what it holds: nothing here */
  return st;
}

/* The vocabulary-parallel head's full tensor into out (f32, host): buf holds
 * this rank's shard H×|V_r| (dt, device); every rank's, padded to the widest
 * shard, gathered over the P-group and placed by columns. */
static pl_status gather_head(pl_trainer *t, const void *buf, pl_dtype dt,
                             float *out) {
  const int P = t->plan.P;
  const int64_t H = t->H, V = t->model.V, vmax = (V + P - 1) / P;
  void *dmine = NULL, *dall = NULL;
  float *mine = malloc((size_t)(H * vmax) * 4 + 4);
  float *all = malloc((size_t)(P * H * vmax) * 4 + 4);
  /* a rank that fails before the gather still reaches its agreement */
  pl_status st = PL_OK;
  if (!mine || !all)
    st = pl_set_error(PL_ENOMEM, "trainer: host");
  if (st == PL_OK)
    st = to_host_f32(t, mine, buf, dt, (size_t)(H * t->head_cols));
  /* repack H×|V_r| to H×vmax */
  for (int64_t r = H - 1; st == PL_OK && r >= 0; r--)
    for (int64_t c = vmax - 1; c >= 0; c--)
      mine[r * vmax + c] = c < t->head_cols ? mine[r * t->head_cols + c] : 0.f;
  if (st == PL_OK)
    st = pl_alloc(t->dev, PL_ARENA_DEVICE, (size_t)(H * vmax) * 4, "gather",
                  &dmine);
  pl_stream *s = pl_dev_stream(t->dev);
  if (st == PL_OK)
    st = pl_memcpy_async(s, dmine, mine, (size_t)(H * vmax) * 4);
  PL_TRY_GOTO(
      st, done,
      gather_dev(t, t->lay->vp, dmine, (size_t)(H * vmax), PL_F32, &dall, st));
  PL_TRY_GOTO(st, done,
              to_host_f32(t, all, dall, PL_F32, (size_t)(P * H * vmax)));
  for (int q = 0; q < P; q++) {
    int64_t c0, w0;
    pl_ce_shard(V, P, q, &c0, &w0);
    for (int64_t r = 0; r < H; r++)
      memcpy(out + r * V + c0, all + ((size_t)q * H + r) * vmax,
             (size_t)w0 * 4);
  }
done:
  pl_free(t->dev, dall);
  pl_free(t->dev, dmine);
  free(mine);
  free(all);
  return st;
}

pl_status pl_trainer_gather(pl_trainer *t, int i, bool grad, float *out) {
  if (i < 0 || i >= t->nparams)
    return pl_set_error(PL_EINVAL, "trainer: parameter %d of %d", i,
                        t->nparams);
  if (t->plan.W_v != t->plan.W)
    return pl_set_error(PL_EUNSUPPORTED,
                        "trainer: gather in a proxy (W_v=%d, W=%d): the full "
                        "tensors are not on the present ranks",
                        t->plan.W_v, t->plan.W);
  const pl__tparam *p = &t->params[i];
  const pl_dtype dt = grad ? PL_F32 : t->dt;
  void *buf = NULL, *unit = NULL;
  pl_status st = PL_OK;
  if (p->kind == PL__K_EXPERT && t->expert_units) {
    /* the expert unit over its replica ranks, then the group's experts */
    void *w;
    float *g;
    size_t sh, off, p0, n;
    pl__ep_param_shard(t, p, &w, &g, &sh, &off, &p0, &n);
    /* the second gather's group meets its agreement also where the first
     * failed on some rank (unit NULL: no source read) */
    st = gather_dev(t, t->lay->erep, grad ? (void *)g : w, sh, dt, &unit, st);
    PL_TRY_GOTO(st, done,
                gather_dev(t, t->lay->ep,
                           unit ? (char *)unit + p0 * pl_dtype_size(dt) : NULL,
                           n, dt, &buf, st));
    PL_TRY_GOTO(st, done,
                to_host_f32(t, out, buf, dt, (size_t)pl__step_numel(p)));
  } else if (p->kind == PL__K_EXPERT) {
    const pl__tlayer *x = &t->layers[p->layer];
    const size_t n = (size_t)(pl__step_numel(p) / t->model.E * t->plan.E_local);
    PL_TRY_GOTO(st, done,
                gather_dev(t, t->lay->ep,
                           grad ? (void *)x->eg[p->which] : x->ew[p->which], n,
                           dt, &buf, st));
    PL_TRY_GOTO(st, done,
                to_host_f32(t, out, buf, dt, (size_t)pl__step_numel(p)));
  } else {
    void *w;
    float *g;
    size_t sh;
    pl_zero3_shard(t->units, p->unit, &w, &g, &sh, NULL);
    const int head_vp = p->head && t->head->vocab_parallel;
    pl_comm *uc = head_vp ? t->lay->hrep : t->lay->zero;
    PL_TRY_GOTO(st, done,
                gather_dev(t, uc, grad ? (void *)g : w, sh, dt, &buf, st));
    if (!head_vp)
      PL_TRY_GOTO(st, done,
                  to_host_f32(t, out, (char *)buf + p->off * pl_dtype_size(dt),
                              dt, (size_t)pl__step_numel(p)));
    else
      PL_TRY_GOTO(st, done, gather_head(t, buf, dt, out));
  }
done:
  pl_free(t->dev, buf);
  pl_free(t->dev, unit);
  return st;
}

/* Write values (f32, host) into weights (dt, device) and the master at
 * flat element `flat`. */
static pl_status put(pl_trainer *t, void *w, size_t flat, const float *v,
                     size_t n) {
  pl_stream *s = pl_dev_stream(t->dev);
  void *tmp = NULL;
  PL_TRY(pl_alloc(t->dev, PL_ARENA_DEVICE, n * 4 + 4, "init", &tmp));
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, pl_memcpy_async(s, tmp, v, n * 4));
  PL_TRY_GOTO(st, done, pl__step_master_put(t, s, flat, tmp, n));
  PL_TRY_GOTO(st, done, pl_convert(s, w, t->dt, tmp, PL_F32, n));
  PL_TRY_GOTO(st, done, pl_stream_sync(s));
done:
  pl_free(t->dev, tmp);
  return st;
}

pl_status pl_trainer_set(pl_trainer *t, int i, const float *in) {
  if (i < 0 || i >= t->nparams)
    return pl_set_error(PL_EINVAL, "trainer: parameter %d of %d", i,
                        t->nparams);
  const pl__tparam *p = &t->params[i];
  if (p->kind == PL__K_EXPERT && t->expert_units) {
    void *w;
    size_t sh, off, p0, n;
    pl__ep_param_shard(t, p, &w, NULL, &sh, &off, &p0, &n);
    const size_t lo = p0 > off ? p0 : off,
                 hi = p0 + n < off + sh ? p0 + n : off + sh;
    return hi > lo ? put(t, (char *)w + (lo - off) * t->elem_bytes,
                         t->adam_off[pl__step_expert_tensor(t, p)] + (lo - off),
                         in + pl__step_expert_first(t, p) + (lo - p0), hi - lo)
                   : PL_OK;
  }
  if (p->kind == PL__K_EXPERT) {
    const int k = pl__step_expert_tensor(t, p);
    return put(t, t->layers[p->layer].ew[p->which], t->adam_off[k],
               in + pl__step_expert_first(t, p), t->adam[k].numel);
  }
  void *w;
  size_t sh, off;
  pl_zero3_shard(t->units, p->unit, &w, NULL, &sh, &off);
  const int head_vp = p->head && t->head->vocab_parallel;
  const size_t numel =
      head_vp ? (size_t)(t->H * t->head_cols) : (size_t)pl__step_numel(p);
  const float *src = in;
  float *packed = NULL;
  if (head_vp) { /* this rank's columns of the full H×V */
    packed = malloc(numel * 4 + 4);
    if (!packed)
      return pl_set_error(PL_ENOMEM, "trainer: host");
    for (int64_t r = 0; r < t->H; r++)
      memcpy(packed + r * t->head_cols, in + r * t->model.V + t->plan.v_col0,
             (size_t)t->head_cols * 4);
    src = packed;
  }
  const size_t lo = p->off > off ? p->off : off, hi0 = p->off + numel,
               hi1 = off + sh;
  const size_t hi = hi0 < hi1 ? hi0 : hi1;
  pl_status st = PL_OK;
  if (hi > lo)
    st = put(t, (char *)w + (lo - off) * t->elem_bytes,
             t->adam_off[p->unit] + (lo - off), src + (lo - p->off), hi - lo);
  free(packed);
  return st;
}
