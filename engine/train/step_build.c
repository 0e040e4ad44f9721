/* step_build.c — building and tearing down a trainer (train/step.h): the
 * parameter table (the same order for every layout: the weights' seeds are
 * their indices), the ZeRO-3 units and expert shards, the MoE layer, the
 * checkpoint runner, SCO, the head, the host fp32 state and the optimizer,
 * and the weights' initialization.  Split from step.c (step_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "train/step_internal.h"

/* ---- parameters
 * ------------------------------------------------------------------ */

/* Append a parameter to the table: p as given (fields left out are 0), named
 * name. */
static void add_param(pl_trainer *t, const char *name, pl__tparam p) {
  pl__tparam *q = &t->params[t->nparams++];
  *q = p;
  snprintf(q->info.name, sizeof q->info.name, "%s", name);
}

/* Lay out the units and the parameter table (the same order for every
 * layout: the weights' seeds are their indices). */
static pl_status plan_params(pl_trainer *t, size_t *unit_numel) {
  const pl_model_cfg *m = &t->model;
  const int64_t H = m->H, L = m->L;
  const float res = 1.0f / sqrtf(2.0f * (float)L); /* residual-branch outputs */
  t->params = calloc((size_t)(3 + 12 * m->L), sizeof(pl__tparam));
  if (!t->params)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  char nm[40];
  unit_numel[0] = (size_t)(m->V * H);
  add_param(t, "embed",
            (pl__tparam){.info = {.rows = m->V, .cols = H},
                         .kind = PL__K_UNIT,
                         .unit = t->u_emb,
                         .layer = -1,
                         .dist = PL_DIST_NORMAL,
                         .b = 1.0f});
  const int64_t qkv = (int64_t)(m->n_q + 2 * m->n_kv) * m->d,
                nq = (int64_t)m->n_q * m->d;
  static const char *const nms[PL__U_N] = {"attn_norm", "qkv",       "o",
                                           "ffn_norm",  "router",    "up",
                                           "down",      "final_norm"};
  for (int l = 0; l < m->L; l++) {
    pl__tlayer *x = &t->layers[l];
    x->t = t, x->index = l, x->unit = 1 + l,
    x->moe = pl_model_layer_is_moe(m, l);
    unit_numel[x->unit] = pl__layer_unit(m, t->plan.E_route, l, x->off);
    const int64_t I = pl__layer_swiglu_width(m, l);
    /* shapes and initial distributions: unit-ish norm weights, 1/sqrt(fan-in)
     * matrices, residual-branch outputs scaled by 1/sqrt(2L) */
    const int64_t rows[PL__U_N] = {1, H, nq, 1, H, H, I, 1};
    const int64_t cols[PL__U_N] = {H, qkv, H, H, t->plan.E_route, 2 * I, H, H};
    const pl_dist dist[PL__U_N] = {
        PL_DIST_UNIFORM, PL_DIST_NORMAL, PL_DIST_NORMAL, PL_DIST_UNIFORM,
        PL_DIST_NORMAL,  PL_DIST_NORMAL, PL_DIST_NORMAL, PL_DIST_UNIFORM};
    const float da[PL__U_N] = {0.9f, 0, 0, 0.9f, 0, 0, 0, 0.9f};
    const float db[PL__U_N] = {1.1f,
                               1.0f / sqrtf((float)H),
                               res / sqrtf((float)nq),
                               1.1f,
                               1.0f / sqrtf((float)H),
                               1.0f / sqrtf((float)H),
                               I > 0 ? res / sqrtf((float)I) : 0,
                               1.1f};
    for (int sl = 0; sl < PL__U_N; sl++) {
      if (x->off[sl] == PL__UNIT_ABSENT)
        continue;
      if (sl == PL__U_FINAL)
        snprintf(nm, sizeof nm, "final_norm");
      else
        snprintf(nm, sizeof nm, "layer%d.%s", l, nms[sl]);
      add_param(t, nm,
                (pl__tparam){.info = {.rows = rows[sl], .cols = cols[sl]},
                             .kind = PL__K_UNIT,
                             .unit = x->unit,
                             .off = x->off[sl],
                             .layer = l,
                             .dist = dist[sl],
                             .a = da[sl],
                             .b = db[sl]});
    }
    if (x->moe) {
      const char *w3[3] = {"wg", "wu", "wd"};
      for (int j = 0; j < 3; j++) {
        snprintf(nm, sizeof nm, "layer%d.experts.%s", l, w3[j]);
        const float sd =
            j < 2 ? 1.0f / sqrtf((float)H) : res / sqrtf((float)m->I);
        /* the full tensor: E experts, each H×I (wg, wu) or I×H (wd) */
        add_param(
            t, nm,
            (pl__tparam){.info = {.rows = (int64_t)m->E * (j < 2 ? H : m->I),
                                  .cols = j < 2 ? m->I : H},
                         .kind = PL__K_EXPERT,
                         .unit = -1,
                         .layer = l,
                         .which = j,
                         .dist = PL_DIST_NORMAL,
                         .b = sd});
      }
    }
  }
  add_param(t, "head",
            (pl__tparam){.info = {.rows = H, .cols = m->V},
                         .kind = PL__K_UNIT,
                         .unit = t->u_head,
                         .layer = -1,
                         .head = 1,
                         .dist = PL_DIST_NORMAL,
                         .b = 1.0f / sqrtf((float)H)});
  unit_numel[t->u_head] = (size_t)(H * t->head_cols);
  return PL_OK;
}

static uint64_t param_seed(const pl_trainer *t, int i) {
  return t->cfg.seed * 0x9e3779b97f4a7c15ull +
         (uint64_t)i * 0x632be59bd9b4e019ull + 17;
}

/* Copy n f32 values from src (device or host memory) into the fp32 master
 * at flat elements [i, i + n): its host part and, past Θ − resident, its
 * device-resident part (stream-ordered on s). */
pl_status pl__step_master_put(pl_trainer *t, pl_stream *s, size_t i,
                              const float *src, size_t n) {
  const size_t lo = t->state.numel - t->state.resident;
  if (i < lo && n > 0) {
    const size_t k = n < lo - i ? n : lo - i;
    PL_TRY(pl_memcpy_async(s, t->state.p + i, src, k * 4));
    i += k, src += k, n -= k;
  }
  return n ? pl_memcpy_async(s, t->state.dp + (i - lo), src, n * 4) : PL_OK;
}

/* The master's flat elements [i, i + n) into dst (stream-ordered on s). */
pl_status pl__step_master_get(pl_trainer *t, pl_stream *s, size_t i, float *dst,
                              size_t n) {
  const size_t lo = t->state.numel - t->state.resident;
  if (i < lo && n > 0) {
    const size_t k = n < lo - i ? n : lo - i;
    PL_TRY(pl_memcpy_async(s, dst, t->state.p + i, k * 4));
    i += k, dst += k, n -= k;
  }
  return n ? pl_memcpy_async(s, dst, t->state.dp + (i - lo), n * 4) : PL_OK;
}

/* Fill weights dst (dt, device) and the master at flat element `flat`
 * with the parameter's values at global elements [first, first + n). */
static pl_status init_range(pl_trainer *t, int pi, void *dst, size_t flat,
                            uint64_t first, size_t n) {
  pl_stream *s = pl_dev_stream(t->dev);
  const pl__tparam *p = &t->params[pi];
  const size_t chunk = (size_t)1 << 24;
  float *tmp = NULL;
  PL_TRY(pl_alloc(t->dev, PL_ARENA_DEVICE, (n < chunk ? n : chunk) * 4 + 4,
                  "init", (void **)&tmp));
  pl_status st = PL_OK;
  for (size_t d = 0; d < n; d += chunk) {
    const size_t k = n - d < chunk ? n - d : chunk;
    PL_TRY_GOTO(st, done,
                pl_rng_fill(s, tmp, PL_F32, k, param_seed(t, pi), first + d,
                            p->dist, p->a, p->b));
    PL_TRY_GOTO(
        st, done,
        pl_convert(s, (char *)dst + d * t->elem_bytes, t->dt, tmp, PL_F32, k));
    PL_TRY_GOTO(st, done, pl__step_master_put(t, s, flat + d, tmp, k));
    PL_TRY_GOTO(st, done, pl_stream_sync(s));
  }
done:
  pl_free(t->dev, tmp);
  return st;
}

/* The first element of parameter p's full tensor this rank's expert shard
 * holds (experts [e0, e0 + E_local), e0 = ep_rank·E_local). */
int64_t pl__step_expert_first(const pl_trainer *t, const pl__tparam *p) {
  const int64_t per = pl__step_numel(p) / t->model.E;
  return (int64_t)t->plan.ep_rank * t->plan.E_local * per;
}

/* The optimizer tensor of an expert parameter (they follow the units): one
 * per tensor, or with expert groups one per layer (its expert unit's
 * shard). */
int pl__step_expert_tensor(const pl_trainer *t, const pl__tparam *p) {
  const int per = t->expert_units ? 1 : 3;
  int k = t->nunits;
  for (int l = 0; l < p->layer; l++)
    k += t->layers[l].moe ? per : 0;
  return k + (t->expert_units ? 0 : p->which);
}

/* Elements a unit parameter takes in its unit: the full tensor, or for a
 * vocabulary-parallel head this rank's H×|V_r| columns. */
static size_t unit_extent(const pl_trainer *t, const pl__tparam *p) {
  return p->head ? (size_t)(t->H * t->head_cols) : (size_t)pl__step_numel(p);
}

/* The full tensor's element of the unit parameter's element j. */
static uint64_t unit_global(const pl_trainer *t, const pl__tparam *p,
                            size_t j) {
  if (!p->head || t->head_cols == t->model.V)
    return j;
  const size_t r = j / (size_t)t->head_cols, c = j % (size_t)t->head_cols;
  return (uint64_t)r * (uint64_t)t->model.V + (uint64_t)t->plan.v_col0 + c;
}

static pl_status init_weights(pl_trainer *t) {
  for (int i = 0; i < t->nparams; i++) {
    const pl__tparam *p = &t->params[i];
    if (p->kind == PL__K_EXPERT && t->expert_units) {
      /* the parameter's experts in the layer's expert unit, cut to this
       * rank's shard of it */
      void *w;
      size_t s, off, p0, n;
      pl__ep_param_shard(t, p, &w, NULL, &s, &off, &p0, &n);
      const size_t lo = p0 > off ? p0 : off,
                   hi = p0 + n < off + s ? p0 + n : off + s;
      if (hi > lo)
        PL_TRY(init_range(
            t, i, (char *)w + (lo - off) * t->elem_bytes,
            t->adam_off[pl__step_expert_tensor(t, p)] + (lo - off),
            (uint64_t)pl__step_expert_first(t, p) + (lo - p0), hi - lo));
      continue;
    }
    if (p->kind == PL__K_EXPERT) {
      const int k = pl__step_expert_tensor(t, p);
      PL_TRY(init_range(t, i, t->layers[p->layer].ew[p->which], t->adam_off[k],
                        pl__step_expert_first(t, p), t->adam[k].numel));
      continue;
    }
    /* the parameter's intersection with this rank's shard, in runs that are
     * contiguous in the full tensor (a vocabulary-parallel head's rows) */
    void *w;
    size_t s, off;
    pl_zero3_shard(t->units, p->unit, &w, NULL, &s, &off);
    const size_t lo = p->off > off ? p->off : off;
    const size_t hi0 = p->off + unit_extent(t, p), hi1 = off + s;
    const size_t hi = hi0 < hi1 ? hi0 : hi1;
    const size_t run = p->head ? (size_t)t->head_cols : hi0 - p->off;
    for (size_t e = lo; e < hi;) {
      const size_t j = e - p->off, end = (j / run + 1) * run + p->off;
      const size_t n = (end < hi ? end : hi) - e;
      PL_TRY(init_range(t, i, (char *)w + (e - off) * t->elem_bytes,
                        t->adam_off[p->unit] + (e - off), unit_global(t, p, j),
                        n));
      e += n;
    }
  }
  return PL_OK;
}

/* ---- create / destroy
 * ------------------------------------------------------------- */

void pl_trainer_destroy(pl_trainer *t) {
  if (!t)
    return;
  pl_dev_sync(t->dev);
  if (t->opt)
    t->optim->destroy(t->opt);
  if (t->hctx)
    t->head->destroy(t->hctx);
  pl_sco_destroy(t->sco);
  pl_ckpt_destroy(t->ckpt);
  for (int l = 0; t->layers && l < t->model.L; l++) {
    pl__tlayer *x = &t->layers[l];
    pl_moe_ffn_free(&x->ffn);
    pl_layer_free(&x->layer);
    for (int j = 0; j < 3; j++)
      pl_free(t->dev, x->ew[j]), pl_free(t->dev, x->eg[j]);
    pl_free(t->dev, x->bias);
    free(x->hbias);
  }
  free(t->layers);
  free(t->layer_ctx);
  pl_moe_destroy(t->moe);
  pl_zero3_destroy(t->units);
  pl_zero3_destroy(t->expert_units);
  pl_free(t->dev, t->state.p);
  pl_free(t->dev, t->state.m);
  pl_free(t->dev, t->state.v);
  pl_free(t->dev, t->state.dp);
  pl_free(t->dev, t->state.dm);
  pl_free(t->dev, t->state.dv);
  pl_free(t->dev, t->shadow);
  pl_free(t->dev, t->d_tok);
  pl_free(t->dev, t->d_tgt);
  pl_free(t->dev, t->d_dloss);
  pl_free(t->dev, t->d_nll);
  free(t->h_nll);
  free(t->adam);
  free(t->adam_off);
  free(t->params);
  pl_timeline_free(&t->tline);
  pl_layout_destroy(t->lay);
  free(t);
}

const pl_layout *pl_trainer_layout(const pl_trainer *t) {
  return t->lay;
}

const pl_layout_plan *pl_trainer_plan(const pl_trainer *t) {
  return &t->plan;
}
int64_t pl_trainer_tokens_per_rank(const pl_trainer *t) {
  return (int64_t)t->cfg.micro * (t->N + 1);
}

/* The fp32 master, m and v (zeroed): pinned host memory, tag "optim",
 * except the last buckets' when the optimizer keeps some resident (tag
 * "optim_resident", device memory; train/optim.h). */
static pl_status alloc_state(pl_trainer *t) {
  const pl_optim_opts *o = &t->cfg.oo;
  size_t R = 0;
  if (o->resident_all || o->resident_bytes) {
    if (!t->optim->resident_state)
      return pl_set_error(PL_EINVAL,
                          "trainer: optimizer '%s' keeps no state resident on "
                          "the device (resident state: stream or hybrid)",
                          t->optim->name);
    R = pl_stream_adamw_resident_elems(t->theta,
                                       o->bucket ? o->bucket : 100000000,
                                       o->resident_all, o->resident_bytes);
  }
  t->state.numel = t->theta, t->state.resident = R;
  const size_t h = (t->theta - R) * 4, d = R * 4;
  pl_stream *s = pl_dev_stream(t->dev);
  float **hs[3] = {&t->state.p, &t->state.m, &t->state.v},
        **ds[3] = {&t->state.dp, &t->state.dm, &t->state.dv};
  for (int i = 0; i < 3; i++) {
    if (h) {
      PL_TRY(pl_alloc(t->dev, PL_ARENA_HOST, h, "optim", (void **)hs[i]));
      if (!pl__dev_dry(t->dev)) /* dry: tracked, not backed */
        memset(*hs[i], 0, h);
    }
    if (d) {
      PL_TRY(pl_alloc(t->dev, PL_ARENA_DEVICE, d, "optim_resident",
                      (void **)ds[i]));
      PL_TRY(pl_fill(s, *ds[i], PL_F32, R, 0.0));
    }
  }
  return pl_stream_sync(s);
}

static pl_status check_cfg(const pl_step_cfg *c) {
  if (c->dt != PL_F32 && c->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "trainer: dtype %s: f32 or bf16",
                        pl_dtype_name(c->dt));
  if (c->micro < 1)
    return pl_set_error(PL_EINVAL, "trainer: micro=%d: must be >= 1", c->micro);
  if (c->moe_c < 0 || c->moe_K_max < 1)
    return pl_set_error(
        PL_EINVAL, "trainer: moe c=%lld K_max=%d: c >= 0 (0: N), K_max >= 1",
        (long long)c->moe_c, c->moe_K_max);
  return pl_adamw_hparams_check(&c->hp);
}

/* The ZeRO-3 units (embedding, one a layer, head) over the parameter table;
 * the head's unit vocabulary-parallel when the head is. */
static pl_status make_units(pl_trainer *t) {
  const int L = t->model.L, vp = t->head->vocab_parallel;
  t->nunits = L + 2;
  t->u_emb = 0, t->u_head = L + 1;
  t->layers = calloc((size_t)L, sizeof(pl__tlayer));
  t->layer_ctx = calloc((size_t)L, sizeof(void *));
  size_t *unit_numel = calloc((size_t)t->nunits, sizeof(size_t));
  pl_zero3_unit_cfg *uc = calloc((size_t)t->nunits, sizeof *uc);
  pl_status st = PL_OK;
  if (!t->layers || !t->layer_ctx || !unit_numel || !uc)
    PL_TRY_GOTO(st, done, pl_set_error(PL_ENOMEM, "trainer: host"));
  PL_TRY_GOTO(st, done, plan_params(t, unit_numel));
  char names[64][24];
  for (int u = 0; u < t->nunits; u++) {
    const char *nm = u == t->u_emb ? "embed" : u == t->u_head ? "head" : NULL;
    if (!nm && u < 64) {
      snprintf(names[u], sizeof names[u], "layer%d", u - 1);
      nm = names[u];
    }
    const int head_vp = u == t->u_head && vp;
    uc[u] = (pl_zero3_unit_cfg){
        nm ? nm : "layer", unit_numel[u], head_vp ? t->lay->hrep : t->lay->zero,
        head_vp ? t->plan.head_vsize : t->plan.zero_vsize};
  }
  st = pl_zero3_create(t->dev, t->dt, t->nunits, uc, &t->units);
done:
  free(unit_numel);
  free(uc);
  if (st != PL_OK)
    return st;
  pl_zero3_set_profile(t->units, t->cfg.profile);
  if (t->lay->sp) /* the stand-ins of virtual groups, timed apart */
    pl_comm_set_profile(t->lay->sp, t->cfg.profile);
  pl_comm_set_profile(t->lay->vp, t->cfg.profile);
  return PL_OK;
}

/* The MoE layer (shared by every MoE layer: it holds no weights). */
static pl_status make_moe(pl_trainer *t) {
  const pl_model_cfg *m = &t->model;
  const pl_step_cfg *sc = &t->cfg;
  if (t->plan.E_route <= 0)
    return PL_OK;
  pl_moe_cfg mc = pl_moe_cfg_default();
  mc.H = m->H, mc.I = m->I, mc.E = t->plan.E_moe, mc.k = m->k, mc.dt = t->dt;
  mc.variant = sc->dispatch, mc.knobs = sc->knobs;
  mc.c = sc->moe_c ? sc->moe_c : t->N;
  mc.K_max = sc->moe_K_max, mc.lanes = sc->moe_lanes;
  return pl_moe_create(t->lay->ep, &mc, &t->moe);
}

/* A MoE layer's own expert tensors (weights, zeroed f32 gradients; none
 * with expert groups, which point them into the gathered expert unit per
 * slot) and its router bias (device, zeroed; host copy). */
static pl_status alloc_experts(pl_trainer *t, pl__tlayer *x) {
  pl_dev *dev = t->dev;
  pl_stream *s = pl_dev_stream(dev);
  const size_t ne = (size_t)t->plan.E_local * (size_t)(t->model.H * t->model.I);
  for (int j = 0; !t->plan.ep_grouped && j < 3; j++) {
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, ne * t->elem_bytes, "weights",
                    &x->ew[j]));
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, ne * 4, "grads", (void **)&x->eg[j]));
    PL_TRY(pl_fill(s, x->eg[j], PL_F32, ne, 0.0));
  }
  x->ffn.ew = (pl_moe_weights){x->ew[0], x->ew[1], x->ew[2]};
  x->ffn.eg = (pl_moe_wgrads){x->eg[0], x->eg[1], x->eg[2]};
  x->hbias = calloc((size_t)t->plan.E_route, sizeof(float));
  if (!x->hbias)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, (size_t)t->plan.E_route * 4, "weights",
                  (void **)&x->bias));
  PL_TRY(pl_fill(s, x->bias, PL_F32, (size_t)t->plan.E_route, 0.0));
  x->ffn.bias = x->bias;
  return PL_OK;
}

/* Decoder layer l: its attention views (with what it keeps for its
 * backward: all of the first n_all layers, the attention's of those below
 * n_attn), its FFN, and a MoE layer's experts and router bias. */
static pl_status init_layer(pl_trainer *t, int l, int n_attn, int n_all) {
  const pl_model_cfg *m = &t->model;
  const pl_step_cfg *sc = &t->cfg;
  pl__tlayer *x = &t->layers[l];
  t->layer_ctx[l] = x;
  const int64_t Is = x->moe ? (m->n_shared ? m->I_shared : 0) : m->I_dense;
  pl_layer_cfg lcf = {.H = m->H,
                      .I = Is > 0 ? Is : 1,
                      .n_q = m->n_q,
                      .n_kv = m->n_kv,
                      .d = m->d,
                      .rope_theta = m->rope_theta,
                      .dt = t->dt,
                      .attn_kernels = sc->attn};
  PL_TRY(pl_layer_init_views(t->dev, t->lay->sp, &x->layer, &lcf,
                             &pl__step_slot_ops, x));
  x->layer.agree = t->world; /* a failure in one part ends the others */
  x->layer.keep = l < n_all    ? PL_LAYER_KEEP_ALL
                  : l < n_attn ? PL_LAYER_KEEP_ATTN
                               : PL_LAYER_KEEP_NONE;
  x->layer.keep_verify = sc->keep_verify;
  x->layer.recompute_mark = pl__step_recompute_mark;
  x->layer.mark_ctx = x;
  pl_moe_ffn_cfg fc = {.H = m->H,
                       .dt = t->dt,
                       .E = x->moe ? t->plan.E_route : 0,
                       .E_moe = x->moe ? t->plan.E_moe : 0,
                       .k = x->moe ? m->k : 0,
                       .renorm = m->renorm,
                       .I_s = Is,
                       .keep_ctx = !sc->moe_recompute};
  PL_TRY(pl_moe_ffn_init(t->dev, &x->ffn, &fc, x->moe ? t->moe : NULL));
  return x->moe ? alloc_experts(t, x) : PL_OK;
}

/* The decoder layers, with what each keeps for its backward. */
static pl_status make_layers(pl_trainer *t) {
  int n_attn, n_all;
  pl_step_keep_layers(&t->model, t->N, t->plan.D, t->dt, t->cfg.keep, &n_attn,
                      &n_all);
  for (int l = 0; l < t->model.L; l++)
    PL_TRY(init_layer(t, l, n_attn, n_all));
  return PL_OK;
}

/* The checkpoint runner, SCO and the head. */
static pl_status make_runners(pl_trainer *t) {
  const pl_model_cfg *m = &t->model;
  const pl_step_cfg *sc = &t->cfg;
  const int vp = t->head->vocab_parallel;
  PL_TRY(pl_ckpt_create(t->dev, m->L, t->layer_ctx, &pl__step_layer_ops, m->H,
                        t->dt, &t->ckpt));
  pl_ckpt_set_profile(t->ckpt, sc->profile);
  /* a failure in one layer ends the step on every rank at the next layer
   * boundary (the layers' collectives span the D-, EP- and ZeRO groups) */
  pl_ckpt_set_agree(t->ckpt, t->world);
  const char **kind = malloc((size_t)m->L * sizeof *kind);
  if (!kind)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  for (int l = 0; l < m->L; l++)
    kind[l] = t->layers[l].moe ? "moe" : "dense";
  const pl_status sk = pl_ckpt_set_kinds(t->ckpt, kind);
  free(kind);
  PL_TRY(sk);
  PL_TRY(pl_sco_create(t->dev, t->world, m->L, t->N, m->H, t->dt, sc->sco,
                       sc->sco_release, &t->sco));
  pl_head_shape hs = {.dt = t->dt,
                      .n = t->N,
                      .h = m->H,
                      .v = m->V,
                      .ignore = PL_CE_IGNORE_INDEX,
                      .block = sc->head_block};
  return t->head->create(vp ? t->lay->vp : t->lay->self, &hs, &t->hctx);
}

/* The per micro-batch buffers: tokens, targets, loss gradients and NLLs
 * (device), the NLLs read back (host). */
static pl_status alloc_batch(pl_trainer *t) {
  void **tok[4] = {(void **)&t->d_tok, (void **)&t->d_tgt, (void **)&t->d_dloss,
                   (void **)&t->d_nll};
  for (int i = 0; i < 4; i++)
    PL_TRY(
        pl_alloc(t->dev, PL_ARENA_DEVICE, (size_t)t->N * 4, "tokens", tok[i]));
  t->h_nll = malloc((size_t)t->N * 4 + 4);
  return t->h_nll ? PL_OK : pl_set_error(PL_ENOMEM, "trainer: host");
}

/* The optimizer's tensors: the unit shards, then the expert shards (one
 * expert unit a MoE layer with expert groups, else its three tensors);
 * their offsets in the flat state and its size theta. */
static pl_status list_optim_params(pl_trainer *t) {
  const int L = t->model.L;
  int nexp = 0;
  for (int l = 0; l < L; l++)
    nexp += t->layers[l].moe ? (t->expert_units ? 1 : 3) : 0;
  t->nadam = t->nunits + nexp;
  t->adam = calloc((size_t)t->nadam, sizeof *t->adam);
  t->adam_off = calloc((size_t)t->nadam + 1, sizeof *t->adam_off);
  if (!t->adam || !t->adam_off)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  for (int u = 0; u < t->nunits; u++) {
    void *w;
    float *g;
    size_t sh;
    pl_zero3_shard(t->units, u, &w, &g, &sh, NULL);
    t->adam[u] = (pl_adamw_param){w, g, sh};
  }
  for (int l = 0, k = t->nunits; t->expert_units && l < L; l++)
    if (t->layers[l].eunit >= 0) {
      void *w;
      float *g;
      size_t sh;
      pl_zero3_shard(t->expert_units, t->layers[l].eunit, &w, &g, &sh, NULL);
      t->adam[k++] = (pl_adamw_param){w, g, sh};
    }
  for (int l = 0, k = t->nunits; !t->expert_units && l < L; l++)
    for (int j = 0; t->layers[l].moe && j < 3; j++, k++)
      t->adam[k] = (pl_adamw_param){t->layers[l].ew[j], t->layers[l].eg[j],
                                    (size_t)t->plan.E_local *
                                        (size_t)(t->model.H * t->model.I)};
  for (int i = 0; i < t->nadam; i++)
    t->adam_off[i + 1] = t->adam_off[i] + t->adam[i].numel;
  t->theta = t->adam_off[t->nadam];
  return PL_OK;
}

/* The optimizer over t->adam.  f32 weights: the optimizers write a bf16
 * shadow; the weights come from the master after each update. */
static pl_status make_optimizer(pl_trainer *t) {
  const pl_step_cfg *sc = &t->cfg;
  pl_adamw_param *opar = t->adam;
  if (t->dt == PL_F32) {
    PL_TRY(pl_alloc(t->dev, PL_ARENA_DEVICE, t->theta * 2, "optim_shadow",
                    (void **)&t->shadow));
    opar = malloc((size_t)t->nadam * sizeof *opar);
    if (!opar)
      return pl_set_error(PL_ENOMEM, "trainer: host");
    for (int i = 0; i < t->nadam; i++)
      opar[i] = (pl_adamw_param){t->shadow + t->adam_off[i], t->adam[i].grad,
                                 t->adam[i].numel};
  }
  pl_status st = t->optim->create(t->dev, &sc->hp, &sc->oo, t->nadam, opar,
                                  &t->state, t->world, &t->opt);
  if (opar != t->adam)
    free(opar);
  return st;
}

pl_status pl_trainer_create(pl_dev *dev, pl_comm *world, const pl_model_cfg *m,
                            const pl_layout_cfg *lc, int64_t S,
                            const pl_step_cfg *sc, pl_trainer **out) {
  *out = NULL;
  PL_TRY(check_cfg(sc));
  pl_trainer *t = calloc(1, sizeof *t);
  if (!t)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  t->dev = dev, t->world = world, t->model = *m, t->cfg = *sc;
  t->tline = pl_timeline_make(dev, sc->profile);
  t->dt = sc->dt, t->elem_bytes = pl_dtype_size(sc->dt);
  t->head = sc->head ? sc->head : &pl_head_ring;
  t->optim = sc->optim ? sc->optim : &pl_optim_stream;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, fail, pl_layout_create(world, m, lc, S, &t->lay));
  t->plan = t->lay->plan;
  t->N = t->plan.N, t->H = m->H;
  t->head_cols = t->head->vocab_parallel ? t->plan.v_cols : m->V;
  PL_TRY_GOTO(st, fail, make_units(t));
  PL_TRY_GOTO(st, fail, make_moe(t));
  PL_TRY_GOTO(st, fail, make_layers(t));
  /* expert groups smaller than the world: the expert units */
  PL_TRY_GOTO(st, fail, pl__ep_create(t));
  PL_TRY_GOTO(st, fail, make_runners(t));
  PL_TRY_GOTO(st, fail, alloc_batch(t));
  PL_TRY_GOTO(st, fail, list_optim_params(t));
  PL_TRY_GOTO(st, fail, alloc_state(t));
  PL_TRY_GOTO(st, fail, init_weights(t));
  PL_TRY_GOTO(st, fail, make_optimizer(t));
  PL_TRY_GOTO(st, fail, pl_dev_sync(dev));
  *out = t;
  return PL_OK;
fail:
  pl_trainer_destroy(t);
  return st;
}
