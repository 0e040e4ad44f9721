/* step.c — the trainer (train/step.h): the model's parameters laid out in
 * ZeRO-3 units and expert shards, their initialization, the step's schedule
 * (embedding, checkpointed decoder layers with gathered units, head,
 * backward with reduce-scatters, optimizer, bias update) and the time and
 * memory of each step. */
#include "train/step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/embed.h"
#include "model/layer.h"
#include "model/mlp_block.h"
#include "model/mlp_block_internal.h"
#include "model/moe_ffn.h"
#include "model/router.h"
#include "train/ckpt.h"
#include "train/data.h"
#include "train/units.h"
#include "train/zero3.h"

/* ---- kernels of the two backends ----------------------------------------- */

static pl_status embed_fwd(pl_stream *s, void *x, const void *E,
                           const int32_t *tok, int64_t N, int64_t H,
                           pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_embed_fwd(s, x, E, tok, N, H, dt);
#endif
  return pl__cpu_embed_fwd(s, x, E, tok, N, H, dt);
}

static pl_status embed_bwd(pl_stream *s, float *dE, const void *dx,
                           const int32_t *tok, int64_t N, int64_t H,
                           pl_dtype dt) {
#if PL_HAVE_CUDA
  if (pl__on_cuda(s))
    return pl__cuda_embed_bwd(s, dE, dx, tok, N, H, dt);
#endif
  return pl__cpu_embed_bwd(s, dE, dx, tok, N, H, dt);
}


/* ---- configuration ----------------------------------------------------------
 */

pl_step_cfg pl_step_cfg_default(void) {
  pl_step_cfg c;
  memset(&c, 0, sizeof c);
  c.dt = PL_BF16;
  c.dispatch = PL_MOE_PIPELINED;
  c.moe_c = 8192;
  c.moe_K_max = 64;
  c.moe_lanes = 2;
  c.knobs = pl_llep_knobs_default();
  c.hp = pl_adamw_hparams_default();
  c.hp.max_grad_norm = 1.0;
  c.oo.bucket = 100000000;
  c.oo.slots = 2;
  c.sco_release = PL_SCO_RELEASE_CONTEXT;
  c.micro = 1;
  c.seed = 1;
  c.attn = (pl_attn_kernels){0}; /* AUTO */
  return c;
}

const char *pl_part_name(int p) {
  static const char *const n[PL_PART_COUNT] = {
      "attention", "moe", "head", "optimizer", "zero3", "sco", "other"};
  return p >= 0 && p < PL_PART_COUNT ? n[p] : "?";
}

/* ---- the trainer ------------------------------------------------------------
 */

enum {
  S_ATTN_NORM = PL__U_ATTN_NORM,
  S_QKV = PL__U_QKV,
  S_O = PL__U_O,
  S_FFN_NORM = PL__U_FFN_NORM,
  S_ROUTER = PL__U_ROUTER,
  S_UP = PL__U_UP,
  S_DOWN = PL__U_DOWN,
  S_FINAL = PL__U_FINAL,
  S_N = PL__U_N
};
#define ABSENT PL__UNIT_ABSENT

typedef enum { K_UNIT, K_EXPERT } pkind;

typedef struct param {
  pl_param_info info;
  pkind kind;
  int unit;         /* K_UNIT                                   */
  size_t off;       /* K_UNIT: first element in the unit        */
  int layer, which; /* K_EXPERT: layer, 0 wg 1 wu 2 wd           */
  int head;         /* the head: columns of a vocab-parallel P-group */
  pl_dist dist;
  float a, b;
} param;

typedef struct tlayer {
  pl_trainer *t;
  int index, unit, moe;
  size_t off[S_N];
  pl_layer layer;
  pl_moe_ffn ffn;
  void *ew[3];
  float *eg[3];
  float *bias, *hbias; /* E_route: device, host */
} tlayer;

typedef struct span {
  int part, a, b;
} span;

struct pl_trainer {
  pl_dev *dev;
  pl_comm *world;
  pl_layout *lay;
  pl_layout_plan p;
  pl_model_cfg m;
  pl_step_cfg c;
  pl_dtype dt;
  size_t es;
  int64_t N, H;
  /* units: 0 embedding, 1..L layers, L+1 head */
  pl_zero3 *z;
  int nunits, u_emb, u_head;
  int64_t head_cols;
  tlayer *tl;
  void **lp;
  pl_moe *moe;
  pl_ckpt_stack *ckpt;
  pl_sco *sco;
  const pl_head_ops *head;
  void *hctx;
  /* optimizer */
  const pl_optim_ops *optim;
  void *opt;
  pl_adamw_state st;
  pl_adamw_param *ap;
  size_t *ap_off; /* each optimizer tensor's first element in the state */
  int nap;
  pl_bf16 *shadow;
  size_t theta;
  /* parameters */
  param *pr;
  int npr;
  /* per micro-batch device buffers (tag "tokens") */
  int32_t *d_tok, *d_tgt;
  float *d_dloss, *d_nll, *h_nll;
  /* step state */
  int64_t step_no;
  int micro_i;
  float *final_g; /* the final norm's gradient (the last layer's unit) */
  /* profile: events and spans of the current step */
  pl_event **ev;
  int nev, capev;
  span *sp;
  int nsp, capsp;
  double fb_ms;
};

/* ---- profiling
 * ---------------------------------------------------------------- */

static pl_status mark(pl_trainer *t, pl_stream *s, int *idx) {
  *idx = -1;
  if (!t->c.profile)
    return PL_OK;
  if (t->nev == t->capev) {
    int cap = t->capev ? 2 * t->capev : 64;
    pl_event **e = realloc(t->ev, (size_t)cap * sizeof *e);
    if (!e)
      return pl_set_error(PL_ENOMEM, "trainer: host");
    for (int i = t->capev; i < cap; i++)
      e[i] = NULL;
    t->ev = e, t->capev = cap;
  }
  if (!t->ev[t->nev])
    PL_TRY(pl_event_create(t->dev, &t->ev[t->nev]));
  PL_TRY(pl_event_record(t->ev[t->nev], s));
  *idx = t->nev++;
  return PL_OK;
}

static pl_status add_span(pl_trainer *t, int part, int a, int b) {
  if (!t->c.profile || a < 0 || b < 0)
    return PL_OK;
  if (t->nsp == t->capsp) {
    int cap = t->capsp ? 2 * t->capsp : 64;
    span *p = realloc(t->sp, (size_t)cap * sizeof *p);
    if (!p)
      return pl_set_error(PL_ENOMEM, "trainer: host");
    t->sp = p, t->capsp = cap;
  }
  t->sp[t->nsp++] = (span){part, a, b};
  return PL_OK;
}

/* Add the spans' times into part_ms (the device has finished them). */
static pl_status take_spans(pl_trainer *t, double *part_ms) {
  for (int i = 0; i < t->nsp; i++) {
    float ms = 0;
    PL_TRY(pl_event_elapsed_ms(t->ev[t->sp[i].a], t->ev[t->sp[i].b], &ms));
    part_ms[t->sp[i].part] += ms;
  }
  t->nsp = t->nev = 0;
  return PL_OK;
}

/* ---- the decoder layer in the runner
 * ------------------------------------------ */

static void set_views(tlayer *x, void *full, float *gfull) {
  const size_t es = x->t->es;
  char *W = full;
  pl_layer *l = &x->layer;
  pl_moe_ffn *f = &x->ffn;
  l->w_n = W + x->off[S_ATTN_NORM] * es;
  l->w_qkv = W + x->off[S_QKV] * es;
  l->w_o = W + x->off[S_O] * es;
  f->w_n = W + x->off[S_FFN_NORM] * es;
  f->w_r = x->moe ? W + x->off[S_ROUTER] * es : NULL;
  f->w_up = x->off[S_UP] != ABSENT ? W + x->off[S_UP] * es : NULL;
  f->w_down = x->off[S_DOWN] != ABSENT ? W + x->off[S_DOWN] * es : NULL;
  if (!gfull)
    return;
  l->g_n = gfull + x->off[S_ATTN_NORM];
  l->g_qkv = gfull + x->off[S_QKV];
  l->g_o = gfull + x->off[S_O];
  f->g_n = gfull + x->off[S_FFN_NORM];
  f->g_r = x->moe ? gfull + x->off[S_ROUTER] : NULL;
  f->g_up = x->off[S_UP] != ABSENT ? gfull + x->off[S_UP] : NULL;
  f->g_down = x->off[S_DOWN] != ABSENT ? gfull + x->off[S_DOWN] : NULL;
}

/* The FFN slot, timed: marks around the MoE FFN's forward / backward. */

static pl_status slot_fwd(void *ctx, pl_stream *s, const void *x, void *y,
                          int64_t N) {
  tlayer *tl = ctx;
  int a, b;
  PL_TRY(mark(tl->t, s, &a));
  PL_TRY(pl_moe_ffn_forward(&tl->ffn, s, x, y, N));
  PL_TRY(mark(tl->t, s, &b));
  return add_span(tl->t, PL_PART_MOE, a, b);
}

static pl_status slot_bwd(void *ctx, pl_stream *s, const void *x,
                          const void *dy, void *dx, int64_t N) {
  tlayer *tl = ctx;
  int a, b;
  PL_TRY(mark(tl->t, s, &a));
  PL_TRY(pl_moe_ffn_backward(&tl->ffn, s, x, dy, dx, N));
  PL_TRY(mark(tl->t, s, &b));
  return add_span(tl->t, PL_PART_MOE, a, b);
}

static const pl_ffn_ops slot_ops = {slot_fwd, slot_bwd};

/* The layer's own time minus its FFN slot's is attention: a span for the
 * whole layer (part ATTENTION) and the slot's span (MOE) subtracted later. */
static pl_status timed(pl_trainer *t, int a, int b) {
  /* recorded as ATTENTION; take_parts subtracts the MOE spans inside */
  return add_span(t, PL_PART_ATTENTION, a, b);
}

static pl_status tl_forward(void *layer, pl_stream *s, const void *x, void *y,
                            int64_t N) {
  tlayer *tl = layer;
  pl_trainer *t = tl->t;
  const int L = t->m.L;
  void *full;
  PL_TRY(pl_zero3_acquire(t->z, tl->unit, s, &full));
  PL_TRY(
      pl_zero3_prefetch(t->z, tl->index + 1 < L ? tl->unit + 1 : t->u_head, s));
  set_views(tl, full, NULL);
  int a, b;
  PL_TRY(mark(t, s, &a));
  PL_TRY(pl_layer_forward(&tl->layer, s, x, y, N));
  PL_TRY(mark(t, s, &b));
  PL_TRY(timed(t, a, b));
  /* the last layer's unit stays for the final norm (the head releases it) */
  if (tl->index + 1 < L)
    pl_zero3_release(t->z, tl->unit, s);
  return PL_OK;
}

static pl_status tl_backward(void *layer, pl_stream *s, const void *x,
                             const void *dy, void *dx, int64_t N) {
  tlayer *tl = layer;
  pl_trainer *t = tl->t;
  void *full;
  float *gfull;
  PL_TRY(pl_zero3_acquire(t->z, tl->unit, s, &full));
  if (tl->index > 0)
    PL_TRY(pl_zero3_prefetch(t->z, tl->unit - 1, s));
  PL_TRY(pl_zero3_grad_acquire(t->z, tl->unit, s, &gfull));
  set_views(tl, full, gfull);
  int a, b;
  PL_TRY(mark(t, s, &a));
  PL_TRY(pl_layer_backward(&tl->layer, s, x, dy, dx, N));
  PL_TRY(mark(t, s, &b));
  PL_TRY(timed(t, a, b));
  pl_zero3_release(t->z, tl->unit, s);
  return pl_zero3_grad_reduce(t->z, tl->unit, s, t->micro_i > 0);
}

static const pl_layer_ops tl_ops = {tl_forward, tl_backward};

/* ---- the head: final norm + vocabulary head
 * ------------------------------------ */

static pl_status head_run(void *ctx, pl_stream *s, const void *hL, void *dh,
                          int64_t N, double *loss) {
  pl_trainer *t = ctx;
  tlayer *last = &t->tl[t->m.L - 1];
  const int64_t H = t->H;
  const size_t nh = (size_t)(N * H);
  pl_dev *dev = t->dev;
  void *full, *wh, *xf = NULL, *dxf = NULL, *dwb = NULL;
  float *gh, *glast, *scr = NULL;
  int a, b;
  PL_TRY(mark(t, s, &a));
  PL_TRY(pl_zero3_acquire(t->z, last->unit, s, &full));
  const void *wf = (char *)full + last->off[S_FINAL] * t->es;
  pl_status st =
      pl_alloc_async(dev, PL_ARENA_DEVICE, nh * t->es, "activations", s, &xf);
  if (st == PL_OK)
    st = pl__rmsnorm_fwd(s, hL, wf, xf, N, H, 1e-5f, t->dt);
  if (st == PL_OK)
    st = pl_zero3_acquire(t->z, t->u_head, s, &wh);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, nh * t->es, "activations", s,
                        &dxf);
  /* the head's weight gradient: straight into the unit's f32 gradient in
   * f32, through a bf16 buffer otherwise */
  const size_t nw = (size_t)H * (size_t)t->head_cols;
  if (st == PL_OK && t->dt == PL_F32)
    st = pl_zero3_grad_acquire(t->z, t->u_head, s, &gh);
  if (st == PL_OK && t->dt != PL_F32)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, nw * t->es, "zero3_grads", s,
                        &dwb);
  if (st == PL_OK)
    st = t->head->run(t->hctx, s, xf, t->d_tgt, wh, t->d_dloss, t->d_nll, dxf,
                      t->dt == PL_F32 ? (void *)gh : dwb);
  if (st == PL_OK && t->dt != PL_F32) {
    st = pl_zero3_grad_acquire(t->z, t->u_head, s, &gh);
    if (st == PL_OK)
      st = pl_convert(s, gh, PL_F32, dwb, t->dt, nw);
  }
  pl_free_async(dev, dwb, s);
  if (st == PL_OK)
    pl_zero3_release(t->z, t->u_head, s);
  if (st == PL_OK)
    st = pl_zero3_grad_reduce(t->z, t->u_head, s, t->micro_i > 0);
  /* the final norm's backward into the last layer's gradient */
  if (st == PL_OK)
    st = pl_zero3_grad_acquire(t->z, last->unit, s, &glast);
  if (st == PL_OK && pl__on_cuda(s))
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, pl__rmsnorm_bwd_scratch(N, H) * 4,
                        "activations", s, (void **)&scr);
  if (st == PL_OK)
    st = pl__rmsnorm_bwd(s, hL, wf, dxf, NULL, dh, glast + last->off[S_FINAL], scr, N, H, 1e-5f, t->dt);
  pl_free_async(dev, scr, s);
  pl_free_async(dev, xf, s);
  pl_free_async(dev, dxf, s);
  if (st == PL_OK)
    st = pl_memcpy_async(s, t->h_nll, t->d_nll, (size_t)N * 4);
  if (st == PL_OK)
    st = pl_stream_sync(s);
  if (st == PL_OK) {
    double sum = 0;
    for (int64_t i = 0; i < N; i++)
      sum += t->h_nll[i];
    *loss = sum;
  }
  if (st == PL_OK)
    st = mark(t, s, &b);
  if (st == PL_OK)
    st = add_span(t, PL_PART_HEAD, a, b);
  return st;
}

/* ---- parameters
 * ------------------------------------------------------------------ */

static pl_status add_param(pl_trainer *t, const char *name, int64_t rows,
                           int64_t cols, pkind kind, int unit, size_t off,
                           int layer, int which, pl_dist dist, float a,
                           float b) {
  param *p = &t->pr[t->npr++];
  memset(p, 0, sizeof *p);
  snprintf(p->info.name, sizeof p->info.name, "%s", name);
  p->info.rows = rows, p->info.cols = cols;
  p->kind = kind, p->unit = unit, p->off = off, p->layer = layer,
  p->which = which;
  p->dist = dist, p->a = a, p->b = b;
  return PL_OK;
}

static int64_t numel_of(const param *p) {
  return p->info.rows * p->info.cols;
}

/* Lay out the units and the parameter table (the same order for every
 * layout: the weights' seeds are their indices). */
static pl_status plan_params(pl_trainer *t, size_t *unit_numel) {
  const pl_model_cfg *m = &t->m;
  const int64_t H = m->H, L = m->L;
  const float res = 1.0f / sqrtf(2.0f * (float)L); /* residual-branch outputs */
  t->pr = calloc((size_t)(3 + 12 * m->L), sizeof(param));
  if (!t->pr)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  char nm[40];
  unit_numel[0] = (size_t)(m->V * H);
  add_param(t, "embed", m->V, H, K_UNIT, t->u_emb, 0, -1, 0, PL_DIST_NORMAL, 0,
            1.0f);
  const int64_t qkv = (int64_t)(m->n_q + 2 * m->n_kv) * m->d,
                nq = (int64_t)m->n_q * m->d;
  static const char *const nms[S_N] = {"attn_norm", "qkv",       "o",
                                       "ffn_norm",  "router",    "up",
                                       "down",      "final_norm"};
  for (int l = 0; l < m->L; l++) {
    tlayer *x = &t->tl[l];
    x->t = t, x->index = l, x->unit = 1 + l,
    x->moe = pl_model_layer_is_moe(m, l);
    unit_numel[x->unit] = pl__layer_unit(m, t->p.E_route, l, x->off);
    const int64_t I = pl__layer_swiglu_width(m, l);
    /* shapes and initial distributions: unit-ish norm weights, 1/sqrt(fan-in)
     * matrices, residual-branch outputs scaled by 1/sqrt(2L) */
    const int64_t rows[S_N] = {1, H, nq, 1, H, H, I, 1};
    const int64_t cols[S_N] = {H, qkv, H, H, t->p.E_route, 2 * I, H, H};
    const pl_dist dist[S_N] = {PL_DIST_UNIFORM, PL_DIST_NORMAL, PL_DIST_NORMAL,
                               PL_DIST_UNIFORM, PL_DIST_NORMAL, PL_DIST_NORMAL,
                               PL_DIST_NORMAL,  PL_DIST_UNIFORM};
    const float da[S_N] = {0.9f, 0, 0, 0.9f, 0, 0, 0, 0.9f};
    const float db[S_N] = {1.1f,
                           1.0f / sqrtf((float)H),
                           res / sqrtf((float)nq),
                           1.1f,
                           1.0f / sqrtf((float)H),
                           1.0f / sqrtf((float)H),
                           I > 0 ? res / sqrtf((float)I) : 0,
                           1.1f};
    for (int sl = 0; sl < S_N; sl++) {
      if (x->off[sl] == ABSENT)
        continue;
      if (sl == S_FINAL)
        snprintf(nm, sizeof nm, "final_norm");
      else
        snprintf(nm, sizeof nm, "layer%d.%s", l, nms[sl]);
      add_param(t, nm, rows[sl], cols[sl], K_UNIT, x->unit, x->off[sl], l, 0,
                dist[sl], da[sl], db[sl]);
    }
    if (x->moe) {
      const char *w3[3] = {"wg", "wu", "wd"};
      for (int j = 0; j < 3; j++) {
        snprintf(nm, sizeof nm, "layer%d.experts.%s", l, w3[j]);
        const float sd =
            j < 2 ? 1.0f / sqrtf((float)H) : res / sqrtf((float)m->I);
        /* the full tensor: E experts, each H×I (wg, wu) or I×H (wd) */
        add_param(t, nm, (int64_t)m->E * (j < 2 ? H : m->I), j < 2 ? m->I : H,
                  K_EXPERT, -1, 0, l, j, PL_DIST_NORMAL, 0, sd);
      }
    }
  }
  add_param(t, "head", H, m->V, K_UNIT, t->u_head, 0, -1, 0, PL_DIST_NORMAL, 0,
            1.0f / sqrtf((float)H));
  t->pr[t->npr - 1].head = 1;
  unit_numel[t->u_head] = (size_t)(H * t->head_cols);
  return PL_OK;
}

static uint64_t param_seed(const pl_trainer *t, int i) {
  return t->c.seed * 0x9e3779b97f4a7c15ull +
         (uint64_t)i * 0x632be59bd9b4e019ull + 17;
}

/* Fill weights dst (dt, device) and master (f32, pinned host) with the
 * parameter's values at global elements [first, first + n). */
static pl_status init_range(pl_trainer *t, int pi, void *dst, float *master,
                            uint64_t first, size_t n) {
  pl_stream *s = pl_dev_stream(t->dev);
  const param *p = &t->pr[pi];
  const size_t chunk = (size_t)1 << 24;
  float *tmp = NULL;
  PL_TRY(pl_alloc(t->dev, PL_ARENA_DEVICE, (n < chunk ? n : chunk) * 4 + 4,
                  "init", (void **)&tmp));
  pl_status st = PL_OK;
  for (size_t d = 0; d < n && st == PL_OK; d += chunk) {
    const size_t k = n - d < chunk ? n - d : chunk;
    st = pl_rng_fill(s, tmp, PL_F32, k, param_seed(t, pi), first + d, p->dist,
                     p->a, p->b);
    if (st == PL_OK)
      st = pl_convert(s, (char *)dst + d * t->es, t->dt, tmp, PL_F32, k);
    if (st == PL_OK)
      st = pl_memcpy_async(s, master + d, tmp, k * 4);
    if (st == PL_OK)
      st = pl_stream_sync(s);
  }
  pl_free(t->dev, tmp);
  return st;
}

/* The first element of parameter p's full tensor this rank's expert shard
 * holds (experts [e0, e0 + E_local)). */
static int64_t expert_first(const pl_trainer *t, const param *p) {
  const int64_t per = numel_of(p) / t->m.E;
  return (int64_t)t->p.rank * t->p.E_local * per;
}

/* The optimizer tensor of an expert parameter (they follow the units). */
static int expert_tensor(const pl_trainer *t, const param *p) {
  int k = t->nunits;
  for (int l = 0; l < p->layer; l++)
    k += t->tl[l].moe ? 3 : 0;
  return k + p->which;
}

/* Elements a unit parameter takes in its unit: the full tensor, or for a
 * vocabulary-parallel head this rank's H×|V_r| columns. */
static size_t unit_extent(const pl_trainer *t, const param *p) {
  return p->head ? (size_t)(t->H * t->head_cols) : (size_t)numel_of(p);
}

/* The full tensor's element of the unit parameter's element j. */
static uint64_t unit_global(const pl_trainer *t, const param *p, size_t j) {
  if (!p->head || t->head_cols == t->m.V)
    return j;
  const size_t r = j / (size_t)t->head_cols, c = j % (size_t)t->head_cols;
  return (uint64_t)r * (uint64_t)t->m.V + (uint64_t)t->p.v_col0 + c;
}

static pl_status init_weights(pl_trainer *t) {
  for (int i = 0; i < t->npr; i++) {
    const param *p = &t->pr[i];
    if (p->kind == K_EXPERT) {
      const int k = expert_tensor(t, p);
      PL_TRY(init_range(t, i, t->tl[p->layer].ew[p->which],
                        t->st.p + t->ap_off[k], expert_first(t, p),
                        t->ap[k].numel));
      continue;
    }
    /* the parameter's intersection with this rank's shard, in runs that are
     * contiguous in the full tensor (a vocabulary-parallel head's rows) */
    void *w;
    size_t s, off;
    pl_zero3_shard(t->z, p->unit, &w, NULL, &s, &off);
    const size_t lo = p->off > off ? p->off : off;
    const size_t hi0 = p->off + unit_extent(t, p), hi1 = off + s;
    const size_t hi = hi0 < hi1 ? hi0 : hi1;
    const size_t run = p->head ? (size_t)t->head_cols : hi0 - p->off;
    for (size_t e = lo; e < hi;) {
      const size_t j = e - p->off, end = (j / run + 1) * run + p->off;
      const size_t n = (end < hi ? end : hi) - e;
      PL_TRY(init_range(t, i, (char *)w + (e - off) * t->es,
                        t->st.p + t->ap_off[p->unit] + (e - off),
                        unit_global(t, p, j), n));
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
  for (int l = 0; t->tl && l < t->m.L; l++) {
    tlayer *x = &t->tl[l];
    pl_moe_ffn_free(&x->ffn);
    pl_layer_free(&x->layer);
    for (int j = 0; j < 3; j++)
      pl_free(t->dev, x->ew[j]), pl_free(t->dev, x->eg[j]);
    pl_free(t->dev, x->bias);
    free(x->hbias);
  }
  free(t->tl);
  free(t->lp);
  pl_moe_destroy(t->moe);
  pl_zero3_destroy(t->z);
  pl_free(t->dev, t->st.p);
  pl_free(t->dev, t->st.m);
  pl_free(t->dev, t->st.v);
  pl_free(t->dev, t->shadow);
  pl_free(t->dev, t->d_tok);
  pl_free(t->dev, t->d_tgt);
  pl_free(t->dev, t->d_dloss);
  pl_free(t->dev, t->d_nll);
  free(t->h_nll);
  free(t->ap);
  free(t->ap_off);
  free(t->pr);
  for (int i = 0; i < t->capev; i++)
    if (t->ev[i])
      pl_event_destroy(t->ev[i]);
  free(t->ev);
  free(t->sp);
  pl_layout_destroy(t->lay);
  free(t);
}

const pl_layout_plan *pl_trainer_plan(const pl_trainer *t) {
  return &t->p;
}
int64_t pl_trainer_tokens_per_rank(const pl_trainer *t) {
  return (int64_t)t->c.micro * (t->N + 1);
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

pl_status pl_trainer_create(pl_dev *dev, pl_comm *world, const pl_model_cfg *m,
                            const pl_layout_cfg *lc, int64_t S,
                            const pl_step_cfg *sc, pl_trainer **out) {
  *out = NULL;
  PL_TRY(check_cfg(sc));
  pl_trainer *t = calloc(1, sizeof *t);
  if (!t)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  t->dev = dev, t->world = world, t->m = *m, t->c = *sc;
  t->dt = sc->dt, t->es = pl_dtype_size(sc->dt);
  t->head = sc->head ? sc->head : &pl_head_ring;
  t->optim = sc->optim ? sc->optim : &pl_optim_stream;
  pl_stream *s = pl_dev_stream(dev);
  size_t *unit_numel = NULL;
  pl_zero3_unit_cfg *uc = NULL;
  pl_status st = pl_layout_create(world, m, lc, S, &t->lay);
  if (st != PL_OK)
    goto fail;
  t->p = t->lay->plan;
  t->N = t->p.N, t->H = m->H;
  const int L = m->L;
  const int vp = t->head->vocab_parallel;
  t->head_cols = vp ? t->p.v_cols : m->V;
  t->nunits = L + 2;
  t->u_emb = 0, t->u_head = L + 1;
  t->tl = calloc((size_t)L, sizeof(tlayer));
  t->lp = calloc((size_t)L, sizeof(void *));
  unit_numel = calloc((size_t)t->nunits, sizeof(size_t));
  uc = calloc((size_t)t->nunits, sizeof *uc);
  if (!t->tl || !t->lp || !unit_numel || !uc) {
    st = pl_set_error(PL_ENOMEM, "trainer: host");
    goto fail;
  }
  if ((st = plan_params(t, unit_numel)))
    goto fail;

  /* ZeRO-3 units */
  char names[64][24];
  for (int u = 0; u < t->nunits; u++) {
    const char *nm = u == t->u_emb ? "embed" : u == t->u_head ? "head" : NULL;
    if (!nm && u < 64) {
      snprintf(names[u], sizeof names[u], "layer%d", u - 1);
      nm = names[u];
    }
    const int head_vp = u == t->u_head && vp;
    uc[u] = (pl_zero3_unit_cfg){nm ? nm : "layer", unit_numel[u],
                                head_vp ? t->lay->hrep : t->lay->zero,
                                head_vp ? t->p.head_vsize : t->p.zero_vsize};
  }
  if ((st = pl_zero3_create(dev, t->dt, t->nunits, uc, &t->z)))
    goto fail;
  pl_zero3_set_profile(t->z, sc->profile);

  /* the MoE layer (shared by every MoE layer: it holds no weights) */
  const int any_moe = t->p.E_route > 0;
  if (any_moe) {
    pl_moe_cfg mc = pl_moe_cfg_default();
    mc.H = m->H, mc.I = m->I, mc.E = t->p.E_route, mc.k = m->k, mc.dt = t->dt;
    mc.variant = sc->dispatch, mc.knobs = sc->knobs;
    mc.c = sc->moe_c ? sc->moe_c : t->N;
    mc.K_max = sc->moe_K_max, mc.lanes = sc->moe_lanes;
    if ((st = pl_moe_create(t->lay->ep, &mc, &t->moe)))
      goto fail;
  }

  /* decoder layers: attention views, FFN, experts, router bias */
  for (int l = 0; l < L; l++) {
    tlayer *x = &t->tl[l];
    t->lp[l] = x;
    const int64_t Is = x->moe ? (m->n_shared ? m->I_shared : 0) : m->I_dense;
    pl_layer_cfg lcf = {.H = m->H,
                        .I = Is > 0 ? Is : 1,
                        .n_q = m->n_q,
                        .n_kv = m->n_kv,
                        .d = m->d,
                        .rope_theta = m->rope_theta,
                        .dt = t->dt,
                        .attn_kernels = sc->attn};
    if ((st = pl_layer_init_views(dev, t->lay->sp, &x->layer, &lcf, &slot_ops,
                                  x)))
      goto fail;
    pl_moe_ffn_cfg fc = {.H = m->H,
                         .dt = t->dt,
                         .E = x->moe ? t->p.E_route : 0,
                         .k = x->moe ? m->k : 0,
                         .renorm = m->renorm,
                         .I_s = Is,
                         .keep_ctx = !sc->moe_recompute};
    if ((st = pl_moe_ffn_init(dev, &x->ffn, &fc, x->moe ? t->moe : NULL)))
      goto fail;
    if (!x->moe)
      continue;
    const size_t ne = (size_t)t->p.E_local * (size_t)(m->H * m->I);
    for (int j = 0; j < 3; j++) {
      if ((st = pl_alloc(dev, PL_ARENA_DEVICE, ne * t->es, "weights",
                         &x->ew[j])) ||
          (st = pl_alloc(dev, PL_ARENA_DEVICE, ne * 4, "grads",
                         (void **)&x->eg[j])) ||
          (st = pl_fill(s, x->eg[j], PL_F32, ne, 0.0)))
        goto fail;
    }
    x->ffn.ew = (pl_moe_weights){x->ew[0], x->ew[1], x->ew[2]};
    x->ffn.eg = (pl_moe_wgrads){x->eg[0], x->eg[1], x->eg[2]};
    x->hbias = calloc((size_t)t->p.E_route, sizeof(float));
    if (!x->hbias) {
      st = pl_set_error(PL_ENOMEM, "trainer: host");
      goto fail;
    }
    if ((st = pl_alloc(dev, PL_ARENA_DEVICE, (size_t)t->p.E_route * 4,
                       "weights", (void **)&x->bias)) ||
        (st = pl_fill(s, x->bias, PL_F32, (size_t)t->p.E_route, 0.0)))
      goto fail;
    x->ffn.bias = x->bias;
  }

  /* the checkpoint runner, SCO, the head */
  if ((st = pl_ckpt_create(dev, L, t->lp, &tl_ops, m->H, t->dt, &t->ckpt)))
    goto fail;
  pl_ckpt_set_profile(t->ckpt, sc->profile);
  if ((st = pl_sco_create(dev, world, L, t->N, m->H, t->dt, sc->sco,
                          sc->sco_release, &t->sco)))
    goto fail;
  pl_head_shape hs = {.dt = t->dt,
                      .n = t->N,
                      .h = m->H,
                      .v = m->V,
                      .ignore = PL_CE_IGNORE_INDEX,
                      .block = sc->head_block};
  if ((st = t->head->create(vp ? t->lay->vp : t->lay->self, &hs, &t->hctx)))
    goto fail;

  /* per micro-batch buffers */
  if ((st = pl_alloc(dev, PL_ARENA_DEVICE, (size_t)t->N * 4, "tokens",
                     (void **)&t->d_tok)) ||
      (st = pl_alloc(dev, PL_ARENA_DEVICE, (size_t)t->N * 4, "tokens",
                     (void **)&t->d_tgt)) ||
      (st = pl_alloc(dev, PL_ARENA_DEVICE, (size_t)t->N * 4, "tokens",
                     (void **)&t->d_dloss)) ||
      (st = pl_alloc(dev, PL_ARENA_DEVICE, (size_t)t->N * 4, "tokens",
                     (void **)&t->d_nll)))
    goto fail;
  t->h_nll = malloc((size_t)t->N * 4 + 4);
  if (!t->h_nll) {
    st = pl_set_error(PL_ENOMEM, "trainer: host");
    goto fail;
  }

  /* the optimizer's tensors: unit shards, then expert shards */
  int nexp = 0;
  for (int l = 0; l < L; l++)
    nexp += t->tl[l].moe ? 3 : 0;
  t->nap = t->nunits + nexp;
  t->ap = calloc((size_t)t->nap, sizeof *t->ap);
  t->ap_off = calloc((size_t)t->nap + 1, sizeof *t->ap_off);
  if (!t->ap || !t->ap_off) {
    st = pl_set_error(PL_ENOMEM, "trainer: host");
    goto fail;
  }
  for (int u = 0; u < t->nunits; u++) {
    void *w;
    float *g;
    size_t sh;
    pl_zero3_shard(t->z, u, &w, &g, &sh, NULL);
    t->ap[u] = (pl_adamw_param){w, g, sh};
  }
  for (int l = 0, k = t->nunits; l < L; l++)
    for (int j = 0; t->tl[l].moe && j < 3; j++, k++)
      t->ap[k] = (pl_adamw_param){t->tl[l].ew[j], t->tl[l].eg[j],
                                  (size_t)t->p.E_local * (size_t)(m->H * m->I)};
  for (int i = 0; i < t->nap; i++)
    t->ap_off[i + 1] = t->ap_off[i] + t->ap[i].numel;
  t->theta = t->ap_off[t->nap];
  /* host fp32 state */
  t->st.numel = t->theta;
  if ((st = pl_alloc(dev, PL_ARENA_HOST, t->theta * 4, "optim",
                     (void **)&t->st.p)) ||
      (st = pl_alloc(dev, PL_ARENA_HOST, t->theta * 4, "optim",
                     (void **)&t->st.m)) ||
      (st = pl_alloc(dev, PL_ARENA_HOST, t->theta * 4, "optim",
                     (void **)&t->st.v)))
    goto fail;
  memset(t->st.p, 0, t->theta * 4);
  memset(t->st.m, 0, t->theta * 4);
  memset(t->st.v, 0, t->theta * 4);
  if ((st = init_weights(t)))
    goto fail;
  /* f32 weights: the optimizers write a bf16 shadow; the weights come from
   * the master after each update */
  pl_adamw_param *opar = t->ap;
  if (t->dt == PL_F32) {
    if ((st = pl_alloc(dev, PL_ARENA_DEVICE, t->theta * 2, "optim_shadow",
                       (void **)&t->shadow)))
      goto fail;
    opar = malloc((size_t)t->nap * sizeof *opar);
    if (!opar) {
      st = pl_set_error(PL_ENOMEM, "trainer: host");
      goto fail;
    }
    for (int i = 0; i < t->nap; i++)
      opar[i] = (pl_adamw_param){t->shadow + t->ap_off[i], t->ap[i].grad,
                                 t->ap[i].numel};
  }
  st = t->optim->create(dev, &sc->hp, &sc->oo, t->nap, opar, &t->st, world,
                        &t->opt);
  if (opar != t->ap)
    free(opar);
  if (st != PL_OK)
    goto fail;
  if ((st = pl_dev_sync(dev)))
    goto fail;
  free(unit_numel);
  free(uc);
  *out = t;
  return PL_OK;
fail:
  free(unit_numel);
  free(uc);
  pl_trainer_destroy(t);
  return st;
}

/* ---- the step
 * ---------------------------------------------------------------------- */

static pl_status micro_batch(pl_trainer *t, const int32_t *tok,
                             double *nll_sum) {
  pl_stream *s = pl_dev_stream(t->dev);
  const int64_t N = t->N, H = t->H;
  pl_dev *dev = t->dev;
  void *x0 = NULL, *dx0 = NULL, *E;
  float *gE;
  double loss = 0;
  PL_TRY(pl_memcpy_async(s, t->d_tok, tok, (size_t)N * 4));
  PL_TRY(pl_memcpy_async(s, t->d_tgt, tok + 1, (size_t)N * 4));
  /* the embedding: gathered, rows copied, freed (the first layer's unit
   * prefetched meanwhile) */
  PL_TRY(pl_zero3_acquire(t->z, t->u_emb, s, &E));
  PL_TRY(pl_zero3_prefetch(t->z, 1, s));
  pl_status st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * H) * t->es,
                                "activations", s, &x0);
  if (st == PL_OK)
    st = embed_fwd(s, x0, E, t->d_tok, N, H, t->dt);
  pl_zero3_release(t->z, t->u_emb, s);
  if (st == PL_OK)
    st = pl_alloc_async(dev, PL_ARENA_DEVICE, (size_t)(N * H) * t->es,
                        "activations", s, &dx0);
  pl_ckpt_head head = {head_run, t};
  if (st == PL_OK)
    st = pl_ckpt_step_head(t->ckpt, t->sco, x0, &head, dx0, N, &loss);
  pl_free_async(dev, x0, s);
  /* the embedding's gradient: rows added into the unit's full f32 gradient */
  if (st == PL_OK)
    st = pl_zero3_grad_acquire(t->z, t->u_emb, s, &gE);
  if (st == PL_OK)
    st = embed_bwd(s, gE, dx0, t->d_tok, N, H, t->dt);
  if (st == PL_OK)
    st = pl_zero3_grad_reduce(t->z, t->u_emb, s, t->micro_i > 0);
  pl_free_async(dev, dx0, s);
  *nll_sum += loss;
  return st;
}

static void mem_stats(pl_trainer *t, pl_step_result *r) {
  pl_mem_stats_get(t->dev, PL_ARENA_DEVICE, &r->dev);
  pl_mem_stats_get(t->dev, PL_ARENA_HOST, &r->host);
}

/* The parts after the device has finished: spans, zero3 and SCO streams;
 * the attention spans cover whole layers: the FFN slot's time inside is
 * moved to moe. */
static pl_status take_parts(pl_trainer *t, pl_step_result *r) {
  double part[PL_PART_COUNT] = {0};
  PL_TRY(take_spans(t, part));
  part[PL_PART_ATTENTION] -= part[PL_PART_MOE];
  pl_zero3_stats zs;
  PL_TRY(pl_zero3_take_stats(t->z, &zs));
  part[PL_PART_ZERO3] = zs.gather_ms + zs.reduce_ms;
  for (int i = 0; i < PL_PART_COUNT; i++)
    r->part_ms[i] += part[i];
  return PL_OK;
}

pl_status pl_trainer_forward_backward(pl_trainer *t, const int32_t *tokens,
                                      pl_step_result *res) {
  pl_step_result local;
  pl_step_result *r = res ? res : &local;
  memset(r, 0, sizeof *r);
  const uint64_t t0 = pl_now_ns();
  const int64_t N = t->N, per = N + 1;
  pl_stream *s = pl_dev_stream(t->dev);
  /* the tokens: inputs in [0, V), targets in [0, V) or ignored */
  int64_t T = 0, bad = -1;
  for (int mi = 0; mi < t->c.micro; mi++)
    for (int64_t i = 0; i < per; i++) {
      const int32_t v = tokens[mi * per + i];
      const int ok =
          (v >= 0 && v < t->m.V) || (i > 0 && v == PL_CE_IGNORE_INDEX);
      if (!ok && bad < 0)
        bad = mi * per + i;
      if (i > 0 && v != PL_CE_IGNORE_INDEX)
        T++;
    }
  int64_t flags[2] = {bad >= 0, T};
  PL_TRY(pl_host_allreduce_i64(t->world, flags, 1, PL_RED_MAX));
  PL_TRY(pl_host_allreduce_i64(t->world, flags + 1, 1, PL_RED_SUM));
  if (flags[0])
    return bad >= 0
               ? pl_set_error(
                     PL_EINVAL,
                     "trainer: token %lld = %d: must be in [0, V=%lld)",
                     (long long)bad, tokens[bad], (long long)t->m.V)
               : pl_set_error(PL_EINVAL,
                              "trainer: another rank passed an invalid token");
  T = flags[1];
  PL_TRY(pl_dev_sync(t->dev));
  pl_mem_reset_peak(t->dev, PL_ARENA_DEVICE);
  pl_mem_reset_peak(t->dev, PL_ARENA_HOST);
  t->nsp = t->nev = 0;
  pl_zero3_stats zs;
  PL_TRY(pl_zero3_take_stats(t->z, &zs));
  for (int l = 0; l < t->m.L; l++)
    for (int j = 0; t->tl[l].moe && j < 3; j++)
      PL_TRY(pl_fill(s, t->tl[l].eg[j], PL_F32,
                     (size_t)t->p.E_local * (size_t)(t->m.H * t->m.I), 0.0));
  PL_TRY(
      pl_fill(s, t->d_dloss, PL_F32, (size_t)N, T > 0 ? 1.0 / (double)T : 0.0));
  double nll = 0, sco_ms = 0;
  for (t->micro_i = 0; t->micro_i < t->c.micro; t->micro_i++) {
    PL_TRY(micro_batch(t, tokens + (int64_t)t->micro_i * per, &nll));
    double d2h, h2d;
    pl_ckpt_copy_ms(t->ckpt, &d2h, &h2d);
    sco_ms += d2h + h2d;
  }
  PL_TRY(pl_zero3_sync(t->z, s));
  PL_TRY(pl_dev_sync(t->dev));
  PL_TRY(pl_host_allreduce_f64(t->world, &nll, 1, PL_RED_SUM));
  r->step = t->step_no + 1;
  r->loss = T > 0 ? nll / (double)T : NAN;
  r->tokens = T;
  r->sco_layers = pl_sco_count(t->sco);
  for (int l = 0; l < t->m.L; l++) {
    const tlayer *x = &t->tl[l];
    if (!x->moe)
      continue;
    const size_t b = pl_moe_dispatch_bound(pl_moe_get_cfg(t->moe), t->p.W,
                                           x->ffn.stats.c_eff);
    if (b > r->dispatch_bound)
      r->dispatch_bound = b;
    r->moe_K = x->ffn.stats.K;
    r->moe_spilled += x->ffn.stats.n_spilled;
    if (x->ffn.stats.imb_native > r->moe_imbalance)
      r->moe_imbalance = x->ffn.stats.imb_native;
  }
  if (t->c.profile) {
    PL_TRY(take_parts(t, r));
    r->part_ms[PL_PART_SCO] = sco_ms;
  }
  mem_stats(t, r);
  r->time_ms = pl_elapsed_s(t0) * 1e3;
  t->fb_ms = r->time_ms;
  return PL_OK;
}

/* f32 weights from the fp32 master after an update. */
static pl_status refresh_f32(pl_trainer *t) {
  pl_stream *s = pl_dev_stream(t->dev);
  for (int i = 0; i < t->nap; i++)
    PL_TRY(pl_memcpy_async(s, t->ap[i].weight, t->st.p + t->ap_off[i],
                           t->ap[i].numel * 4));
  return pl_stream_sync(s);
}

/* The router biases from the step's global expert loads. */
static pl_status bias_update(pl_trainer *t) {
  const int E = t->p.E_route;
  int nm = 0;
  for (int l = 0; l < t->m.L; l++)
    nm += t->tl[l].moe;
  if (!nm || t->m.bias_gamma == 0) {
    for (int l = 0; l < t->m.L; l++)
      if (t->tl[l].moe)
        memset(t->tl[l].ffn.counts, 0, (size_t)E * sizeof(int64_t));
    return PL_OK;
  }
  int64_t *all = malloc((size_t)nm * E * sizeof(int64_t));
  if (!all)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  for (int l = 0, k = 0; l < t->m.L; l++)
    if (t->tl[l].moe)
      memcpy(all + (size_t)(k++) * E, t->tl[l].ffn.counts, (size_t)E * 8);
  pl_status st =
      pl_host_allreduce_i64(t->lay->ep, all, (size_t)nm * E, PL_RED_SUM);
  pl_stream *s = pl_dev_stream(t->dev);
  for (int l = 0, k = 0; st == PL_OK && l < t->m.L; l++) {
    tlayer *x = &t->tl[l];
    if (!x->moe)
      continue;
    pl_router_bias_update(x->hbias, all + (size_t)(k++) * E, E,
                          t->m.bias_gamma);
    memset(x->ffn.counts, 0, (size_t)E * sizeof(int64_t));
    st = pl_memcpy_async(s, x->bias, x->hbias, (size_t)E * 4);
  }
  if (st == PL_OK)
    st = pl_stream_sync(s);
  free(all);
  return st;
}

pl_status pl_trainer_update(pl_trainer *t, pl_step_result *res) {
  pl_step_result local;
  pl_step_result *r = res ? res : &local;
  if (!res)
    memset(r, 0, sizeof *r);
  const uint64_t t0 = pl_now_ns();
  pl_stream *s = pl_dev_stream(t->dev);
  int a, b;
  PL_TRY(mark(t, s, &a));
  PL_TRY(t->optim->step(t->opt, s));
  PL_TRY(mark(t, s, &b));
  PL_TRY(add_span(t, PL_PART_OPTIM, a, b));
  PL_TRY(pl_dev_sync(t->dev));
  if (t->dt == PL_F32)
    PL_TRY(refresh_f32(t));
  PL_TRY(bias_update(t));
  t->step_no++;
  r->gscale = t->optim->gscale(t->opt);
  if (t->c.profile)
    PL_TRY(take_parts(t, r));
  mem_stats(t, r);
  r->time_ms += pl_elapsed_s(t0) * 1e3;
  return PL_OK;
}

pl_status pl_trainer_step(pl_trainer *t, const int32_t *tokens,
                          pl_step_result *res) {
  pl_step_result local;
  pl_step_result *r = res ? res : &local;
  PL_TRY(pl_trainer_forward_backward(t, tokens, r));
  PL_TRY(pl_trainer_update(t, r));
  if (t->c.profile) {
    double in = 0;
    for (int i = PL_PART_ATTENTION; i <= PL_PART_OPTIM; i++)
      in += r->part_ms[i];
    r->part_ms[PL_PART_OTHER] = r->time_ms > in ? r->time_ms - in : 0;
  }
  return PL_OK;
}

pl_status pl_trainer_run(pl_trainer *t, pl_data *data, int64_t first, int steps,
                         double *losses, pl_step_result *res) {
  int32_t *tok =
      malloc((size_t)pl_trainer_tokens_per_rank(t) * sizeof(int32_t));
  if (!tok)
    return pl_set_error(PL_ENOMEM, "trainer: host tokens");
  pl_status st = PL_OK;
  for (int i = 0; i < steps && st == PL_OK; i++) {
    pl_step_result r;
    st = pl_data_batch(data, &t->p, t->c.micro, first + i, tok);
    if (st == PL_OK)
      st = pl_trainer_step(t, tok, &r);
    if (st == PL_OK && losses)
      losses[i] = r.loss;
    if (st == PL_OK && res)
      res[i] = r;
  }
  free(tok);
  return st;
}

/* ---- parameters: gather and set
 * ---------------------------------------------------- */

int pl_trainer_nparams(const pl_trainer *t) {
  return t->npr;
}

pl_status pl_trainer_param_info(const pl_trainer *t, int i,
                                pl_param_info *out) {
  if (i < 0 || i >= t->npr)
    return pl_set_error(PL_EINVAL, "trainer: parameter %d of %d", i, t->npr);
  *out = t->pr[i].info;
  return PL_OK;
}

const float *pl_trainer_router_bias(const pl_trainer *t, int l) {
  return l >= 0 && l < t->m.L && t->tl[l].moe ? t->tl[l].hbias : NULL;
}

pl_status pl_trainer_set_router_bias(pl_trainer *t, int l, const float *bias) {
  if (l < 0 || l >= t->m.L || !t->tl[l].moe)
    return pl_set_error(PL_EINVAL, "trainer: layer %d has no router", l);
  tlayer *x = &t->tl[l];
  memcpy(x->hbias, bias, (size_t)t->p.E_route * 4);
  pl_stream *s = pl_dev_stream(t->dev);
  PL_TRY(pl_memcpy_async(s, x->bias, x->hbias, (size_t)t->p.E_route * 4));
  return pl_stream_sync(s);
}

/* Host f32 copy of n device elements of dtype dt. */
static pl_status to_host_f32(pl_trainer *t, float *dst, const void *src,
                             pl_dtype dt, size_t n) {
  pl_stream *s = pl_dev_stream(t->dev);
  void *tmp = malloc(n * pl_dtype_size(dt) + 4);
  if (!tmp)
    return pl_set_error(PL_ENOMEM, "trainer: host");
  pl_status st = pl_memcpy_async(s, tmp, src, n * pl_dtype_size(dt));
  if (st == PL_OK)
    st = pl_stream_sync(s);
  for (size_t i = 0; st == PL_OK && i < n; i++)
    dst[i] =
        dt == PL_F32 ? ((float *)tmp)[i] : pl_bf16_to_f32(((pl_bf16 *)tmp)[i]);
  free(tmp);
  return st;
}

/* All-gather count elements of dt from every rank of c into a new device
 * buffer (size·count). */
static pl_status gather_dev(pl_trainer *t, pl_comm *c, const void *src,
                            size_t count, pl_dtype dt, void **out) {
  pl_stream *s = pl_dev_stream(t->dev);
  const int n = c ? pl_comm_size(c) : 1;
  PL_TRY(pl_alloc(t->dev, PL_ARENA_DEVICE,
                  (size_t)n * count * pl_dtype_size(dt) + 4, "gather", out));
  pl_status st = c ? pl_allgather(c, src, *out, count, dt, s)
                   : pl_memcpy_async(s, *out, src, count * pl_dtype_size(dt));
  if (st == PL_OK)
    st = pl_stream_sync(s);
  if (st != PL_OK)
    pl_free(t->dev, *out);
  return st;
}

pl_status pl_trainer_gather(pl_trainer *t, int i, bool grad, float *out) {
  if (i < 0 || i >= t->npr)
    return pl_set_error(PL_EINVAL, "trainer: parameter %d of %d", i, t->npr);
  if (t->p.W_v != t->p.W)
    return pl_set_error(PL_EUNSUPPORTED,
                        "trainer: gather in a proxy (W_v=%d, W=%d): the full "
                        "tensors are not on the present ranks",
                        t->p.W_v, t->p.W);
  const param *p = &t->pr[i];
  const pl_dtype dt = grad ? PL_F32 : t->dt;
  void *buf = NULL;
  pl_status st;
  if (p->kind == K_EXPERT) {
    const tlayer *x = &t->tl[p->layer];
    const size_t n = (size_t)(numel_of(p) / t->m.E * t->p.E_local);
    st = gather_dev(t, t->lay->ep,
                    grad ? (void *)x->eg[p->which] : x->ew[p->which], n, dt,
                    &buf);
    if (st == PL_OK)
      st = to_host_f32(t, out, buf, dt, (size_t)numel_of(p));
    pl_free(t->dev, buf);
    return st;
  }
  void *w;
  float *g;
  size_t sh;
  pl_zero3_shard(t->z, p->unit, &w, &g, &sh, NULL);
  const int head_vp = p->head && t->head->vocab_parallel;
  pl_comm *uc = head_vp ? t->lay->hrep : t->lay->zero;
  st = gather_dev(t, uc, grad ? (void *)g : w, sh, dt, &buf);
  if (st != PL_OK)
    return st;
  if (!head_vp) {
    st = to_host_f32(t, out, (char *)buf + p->off * pl_dtype_size(dt), dt,
                     (size_t)numel_of(p));
    pl_free(t->dev, buf);
    return st;
  }
  /* the head's shard H×|V_r| of every rank of the P-group, padded to the
   * widest shard, gathered over the group and placed by columns */
  const int P = t->p.P;
  const int64_t H = t->H, V = t->m.V, vmax = (V + P - 1) / P;
  float *mine = malloc((size_t)(H * vmax) * 4 + 4),
        *all = malloc((size_t)(P * H * vmax) * 4 + 4);
  void *dmine = NULL, *dall = NULL;
  st = mine && all ? PL_OK : pl_set_error(PL_ENOMEM, "trainer: host");
  if (st == PL_OK)
    st = to_host_f32(t, mine, buf, dt, (size_t)(H * t->head_cols));
  if (st == PL_OK) {
    /* repack H×|V_r| to H×vmax */
    for (int64_t r = H - 1; r >= 0; r--)
      for (int64_t c = vmax - 1; c >= 0; c--)
        mine[r * vmax + c] =
            c < t->head_cols ? mine[r * t->head_cols + c] : 0.f;
    st = pl_alloc(t->dev, PL_ARENA_DEVICE, (size_t)(H * vmax) * 4, "gather",
                  &dmine);
  }
  pl_stream *s = pl_dev_stream(t->dev);
  if (st == PL_OK)
    st = pl_memcpy_async(s, dmine, mine, (size_t)(H * vmax) * 4);
  if (st == PL_OK)
    st = gather_dev(t, t->lay->vp, dmine, (size_t)(H * vmax), PL_F32, &dall);
  if (st == PL_OK)
    st = to_host_f32(t, all, dall, PL_F32, (size_t)(P * H * vmax));
  for (int q = 0; st == PL_OK && q < P; q++) {
    int64_t c0, w0;
    pl_ce_shard(V, P, q, &c0, &w0);
    for (int64_t r = 0; r < H; r++)
      memcpy(out + r * V + c0, all + ((size_t)q * H + r) * vmax,
             (size_t)w0 * 4);
  }
  pl_free(t->dev, dall);
  pl_free(t->dev, dmine);
  pl_free(t->dev, buf);
  free(mine);
  free(all);
  return st;
}

/* Write values (f32, host) into weights (dt, device) and the master. */
static pl_status put(pl_trainer *t, void *w, float *master, const float *v,
                     size_t n) {
  pl_stream *s = pl_dev_stream(t->dev);
  memcpy(master, v, n * 4);
  void *tmp = NULL;
  PL_TRY(pl_alloc(t->dev, PL_ARENA_DEVICE, n * 4 + 4, "init", &tmp));
  pl_status st = pl_memcpy_async(s, tmp, v, n * 4);
  if (st == PL_OK)
    st = pl_convert(s, w, t->dt, tmp, PL_F32, n);
  if (st == PL_OK)
    st = pl_stream_sync(s);
  pl_free(t->dev, tmp);
  return st;
}

pl_status pl_trainer_set(pl_trainer *t, int i, const float *in) {
  if (i < 0 || i >= t->npr)
    return pl_set_error(PL_EINVAL, "trainer: parameter %d of %d", i, t->npr);
  const param *p = &t->pr[i];
  if (p->kind == K_EXPERT) {
    const int k = expert_tensor(t, p);
    return put(t, t->tl[p->layer].ew[p->which], t->st.p + t->ap_off[k],
               in + expert_first(t, p), t->ap[k].numel);
  }
  void *w;
  size_t sh, off;
  pl_zero3_shard(t->z, p->unit, &w, NULL, &sh, &off);
  const int head_vp = p->head && t->head->vocab_parallel;
  const size_t numel =
      head_vp ? (size_t)(t->H * t->head_cols) : (size_t)numel_of(p);
  const float *src = in;
  float *packed = NULL;
  if (head_vp) { /* this rank's columns of the full H×V */
    packed = malloc(numel * 4 + 4);
    if (!packed)
      return pl_set_error(PL_ENOMEM, "trainer: host");
    for (int64_t r = 0; r < t->H; r++)
      memcpy(packed + r * t->head_cols, in + r * t->m.V + t->p.v_col0,
             (size_t)t->head_cols * 4);
    src = packed;
  }
  const size_t lo = p->off > off ? p->off : off, hi0 = p->off + numel,
               hi1 = off + sh;
  const size_t hi = hi0 < hi1 ? hi0 : hi1;
  pl_status st = PL_OK;
  if (hi > lo)
    st = put(t, (char *)w + (lo - off) * t->es,
             t->st.p + t->ap_off[p->unit] + (lo - off), src + (lo - p->off),
             hi - lo);
  free(packed);
  return st;
}
