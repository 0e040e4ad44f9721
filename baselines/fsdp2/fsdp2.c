/* fsdp2.c — the FSDP2 baseline's trainer (fsdp2.h): the groups and units,
 * the step's schedule (embedding, layers with FSDP units and per-layer
 * checkpointing, head, backward with reduce-scatters), AdamW on the device
 * or the host, the router-bias update and the time breakdown.  The
 * parameter table is fsdp2_params.c's, the configuration fsdp2_cfg.c's. */
#include "fsdp2_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ep.h"
#include "../train_baselines.h"
#include "backend/adamw_kernels.h"
#include "core/internal.h"
#include "fsdp2_layer.h"
#include "model/embedding_internal.h"
#include "model/mlp_block_internal.h"
#include "ops/adamw_internal.h"

/* ---- profile ------------------------------------------------------------- */

static pl_status take_parts(pl_fsdp2 *t, pl_step_result *r) {
  PL_TRY(pl_timeline_take(&t->tline, r->part_ms));
  pl_zero3_stats zs;
  PL_TRY(pl_zero3_take_stats(t->f, &zs));
  r->part_ms[PL_PART_ZERO3] += zs.gather_ms + zs.reduce_ms;
  /* a virtual CP group: its stand-ins apart (the ring's on its comm stream,
   * beside the compute; any on the compute stream out of attention) */
  double on = 0, side = 0;
  if (t->cpc)
    PL_TRY(pl_comm_take_standin_ms(t->cpc, pl_dev_stream(t->dev), &on, &side));
  r->part_ms[PL_PART_ATTENTION] -= on;
  r->standin_ms += on;
  r->standin_side_ms += side;
  return PL_OK;
}

/* ---- create / destroy -----------------------------------------------------
 */

void pl_fsdp2_destroy(pl_fsdp2 *t) {
  if (!t)
    return;
  pl_dev_sync(t->dev);
  pl_stream *s = pl_dev_stream(t->dev);
  if (t->hctx)
    t->head->destroy(t->hctx);
  for (int l = 0; t->fl && l < t->m.L; l++) {
    flayer *x = &t->fl[l];
    pl__fsdp2_layer_drop(&x->lay, s);
    free(x->lay.counts);
    pl_free(t->dev, x->bias);
    free(x->hbias);
  }
  for (int l = 0; t->bnd && l <= t->m.L; l++)
    pl_free(t->dev, t->bnd[l]);
  free(t->bnd);
  free(t->fl);
  pl_moe_destroy(t->moe);
  pl_ring_attn_destroy(t->ring);
  pl_zero3_destroy(t->f);
  pl_free(t->dev, t->d_tok);
  pl_free(t->dev, t->d_tgt);
  pl_free(t->dev, t->d_dloss);
  pl_free(t->dev, t->d_nll);
  pl_free(t->dev, t->partials);
  free(t->h_partials);
  free(t->h_nll);
  free(t->h_tok);
  free(t->h_tgt);
  free(t->pr);
  pl_timeline_free(&t->tline);
  pl_comm *cs[] = {t->dense, t->cpc, t->epc, t->xfsdp, t->self};
  for (int i = 0; i < 5; i++)
    if (cs[i])
      pl_comm_destroy(cs[i]);
  free(t);
}

/* The scalars of t: sizes, the CP and EP positions of this rank. */
static void set_shape(pl_fsdp2 *t, const pl_model_cfg *m, const pl_fsdp2_cfg *c,
                      int W, int64_t S) {
  if (!t->c.ac_freq)
    t->c.ac_freq = 2;
  t->dt = c->dt, t->es = pl_dtype_size(c->dt);
  t->W = W, t->Wv = c->W_v ? c->W_v : W, t->rank = pl_comm_rank(t->world);
  t->S = S, t->N = S / c->cp, t->c_len = c->cp > 1 ? S / (2 * c->cp) : S;
  /* CP: a real group of cp consecutive ranks (cp divides W), or virtual
   * (each rank member 0 of its own group, the others absent) */
  t->cp_virtual = W % c->cp != 0;
  t->cp_rank = t->cp_virtual ? 0 : t->rank % c->cp;
  t->cp_group = t->cp_virtual ? t->rank : t->rank / c->cp;
  t->n_groups = t->cp_virtual ? W : W / c->cp;
  /* EP: virtual degree ep; real groups of min(W, ep) ranks (in the rank
   * view a virtual group of ep); the expert FSDP group: the ranks of the
   * same expert shard (W / ep of them, or one in a proxy with W < ep),
   * virtually W_v / ep */
  const int ep = c->ep;
  t->ep_idx = t->rank % ep;
  t->ep_virtual = pl__fsdp2_rank_view(c, W) && ep > 1;
  t->ep_real = W < ep && !t->ep_virtual ? W : ep;
  t->El = pl__fsdp2_any_moe(m) ? m->E / ep : 0;
  t->E_r = t->El * t->ep_real;
}

/* The communicators: dense (all ranks), CP, EP, expert FSDP, self. */
static pl_status make_groups(pl_fsdp2 *t) {
  pl_comm *world = t->world;
  const int W = t->W, ep = t->c.ep;
  PL_TRY(pl_comm_split(world, 0, t->rank, &t->dense));
  PL_TRY(t->cp_virtual ? pl_comm_virtual(t->dev, t->c.cp, &t->cpc)
                       : pl_comm_split(world, t->cp_group, t->rank, &t->cpc));
  /* the rank view: member 0 of a virtual EP group, the others absent */
  PL_TRY(t->ep_virtual ? pl_comm_virtual(t->dev, ep, &t->epc)
                       : pl_comm_split(world, W < ep ? 0 : t->rank / ep,
                                       t->rank, &t->epc));
  PL_TRY(pl_comm_split(world, t->ep_idx, t->rank, &t->xfsdp));
  return pl_comm_split(world, t->rank, 0, &t->self);
}

/* The FSDP units of the parameter table (embedding, head, one a layer, one
 * a MoE layer's experts): the trainer's ZeRO-3 units with an fp32 master
 * shard (on the host with CPUOffloadPolicy), unbounded residency. */
static pl_status make_units(pl_fsdp2 *t, const pl_model_cfg *m) {
  const int L = m->L, ep = t->c.ep;
  int nmoe = 0;
  for (int l = 0; l < L; l++)
    nmoe += pl_model_layer_is_moe(m, l);
  t->nunits = L + 2 + nmoe;
  t->u_emb = 0, t->u_head = L + 1;
  t->fl = calloc((size_t)L, sizeof(flayer));
  t->bnd = calloc((size_t)L + 1, sizeof(void *));
  size_t *numel = calloc((size_t)t->nunits, sizeof(size_t));
  pl_zero3_unit_cfg *uc = calloc((size_t)t->nunits, sizeof *uc);
  pl_status st = PL_OK;
  if (!t->fl || !t->bnd || !numel || !uc)
    PL_TRY_GOTO(st, done, pl_set_error(PL_ENOMEM, "fsdp2: host"));
  PL_TRY_GOTO(st, done, pl__fsdp2_param_table(t, numel));
  char names[3][16] = {"embed", "head", "layer"};
  for (int u = 0; u < t->nunits; u++) {
    const int x = u >= L + 2;
    uc[u] = (pl_zero3_unit_cfg){u == t->u_emb    ? names[0]
                                : u == t->u_head ? names[1]
                                                 : names[2],
                                numel[u], x ? t->xfsdp : t->dense,
                                x ? t->Wv / ep : t->Wv};
  }
  const pl_zero3_opts zo = {.fp32_master = true,
                            .host_state = t->c.optim == PL_FSDP2_OPTIM_CPU,
                            .max_resident = 0};
  st = pl_zero3_create_opts(t->dev, t->dt, &zo, t->nunits, uc, &t->f);
done:
  free(numel);
  free(uc);
  return st;
}

/* The ring attention (CP > 1) and the MoE layer (shared by the MoE layers:
 * it holds no weights). */
static pl_status make_ring_moe(pl_fsdp2 *t, const pl_model_cfg *m) {
  const pl_fsdp2_cfg *c = &t->c;
  if (c->cp > 1)
    PL_TRY(pl_ring_attn_create(t->cpc, t->dev, &t->ring));
  if (t->El == 0)
    return PL_OK;
  pl_moe_cfg mc = pl_moe_cfg_default();
  mc.H = m->H, mc.I = m->I, mc.E = t->E_r, mc.k = m->k, mc.dt = t->dt;
  mc.lanes = c->moe_lanes;
  return pl_ep_create(t->epc, &mc, &t->moe);
}

/* Layer l's shape and parts; a MoE layer's route counts and router bias. */
static pl_status init_layer(pl_fsdp2 *t, const pl_model_cfg *m, int l) {
  const pl_fsdp2_cfg *c = &t->c;
  flayer *x = &t->fl[l];
  pl__fsdp2_layer *y = &x->lay;
  y->dev = t->dev, y->H = m->H, y->n_q = m->n_q, y->n_kv = m->n_kv, y->d = m->d;
  y->rope_theta = m->rope_theta ? m->rope_theta : 10000.0;
  y->dt = t->dt, y->attn = c->attn, y->eps = 1e-5f;
  y->CP = c->cp, y->cp_rank = t->cp_rank, y->ring = t->ring;
  y->I_s = x->I_s;
  y->tl = c->profile ? &t->tline : NULL;
  if (!x->moe)
    return PL_OK;
  y->moe = t->moe, y->E = t->E_r, y->k = m->k, y->renorm = m->renorm;
  y->counts = calloc((size_t)t->E_r, sizeof(int64_t));
  x->hbias = calloc((size_t)t->E_r, sizeof(float));
  if (!y->counts || !x->hbias)
    return pl_set_error(PL_ENOMEM, "fsdp2: host");
  PL_TRY(pl_alloc(t->dev, PL_ARENA_DEVICE, (size_t)t->E_r * 4, "weights",
                  (void **)&x->bias));
  PL_TRY(pl_fill(pl_dev_stream(t->dev), x->bias, PL_F32, (size_t)t->E_r, 0.0));
  y->bias = x->bias;
  return PL_OK;
}

/* The head, the micro-batch's token buffers (device and host) and the
 * optimizer's partial sums (one a chunk of the largest shard). */
static pl_status make_head_buffers(pl_fsdp2 *t, const pl_model_cfg *m) {
  pl_dev *dev = t->dev;
  pl_head_shape hs = {.dt = t->dt,
                      .n = t->N,
                      .h = m->H,
                      .v = m->V,
                      .ignore = PL_CE_IGNORE_INDEX};
  PL_TRY(t->head->create(t->self, &hs, &t->hctx));
  void **tok[4] = {(void **)&t->d_tok, (void **)&t->d_tgt, (void **)&t->d_dloss,
                   (void **)&t->d_nll};
  for (int i = 0; i < 4; i++)
    PL_TRY(pl_alloc(dev, PL_ARENA_DEVICE, (size_t)t->N * 4, "tokens", tok[i]));
  t->h_nll = malloc((size_t)t->N * 4 + 4);
  t->h_tok = malloc((size_t)t->N * 4 + 4);
  t->h_tgt = malloc((size_t)t->N * 4 + 4);
  for (int u = 0; u < t->nunits; u++) {
    size_t sh;
    pl_zero3_shard(t->f, u, NULL, NULL, &sh, NULL);
    const size_t ch = pl__adamw_nchunks(sh);
    if (ch > t->max_chunks)
      t->max_chunks = ch;
  }
  t->h_partials = malloc(t->max_chunks * sizeof(double) + 8);
  if (!t->h_nll || !t->h_tok || !t->h_tgt || !t->h_partials)
    return pl_set_error(PL_ENOMEM, "fsdp2: host");
  if (t->c.optim != PL_FSDP2_OPTIM_GPU)
    return PL_OK;
  return pl_alloc(dev, PL_ARENA_DEVICE, t->max_chunks * sizeof(double) + 8,
                  "optim", (void **)&t->partials);
}

pl_status pl_fsdp2_create(pl_dev *dev, pl_comm *world, const pl_model_cfg *m,
                          const pl_fsdp2_cfg *c, int64_t S, pl_fsdp2 **out) {
  *out = NULL;
  const int W = pl_comm_size(world);
  PL_TRY(pl_fsdp2_check(m, c, W, S));
  pl_fsdp2 *t = calloc(1, sizeof *t);
  if (!t)
    return pl_set_error(PL_ENOMEM, "fsdp2: host");
  t->dev = dev, t->world = world, t->m = *m, t->c = *c;
  set_shape(t, m, c, W, S);
  t->head = &pl_head_dense;
  t->tline = pl_timeline_make(dev, c->profile);
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, fail, make_groups(t));
  PL_TRY_GOTO(st, fail, make_units(t, m));
  pl_zero3_set_profile(t->f, c->profile);
  pl_comm_set_profile(t->cpc, c->profile);
  PL_TRY_GOTO(st, fail, make_ring_moe(t, m));
  for (int l = 0; l < m->L; l++)
    PL_TRY_GOTO(st, fail, init_layer(t, m, l));
  PL_TRY_GOTO(st, fail, make_head_buffers(t, m));
  PL_TRY_GOTO(st, fail, pl__fsdp2_init_weights(t));
  PL_TRY_GOTO(st, fail, pl_dev_sync(dev));
  *out = t;
  return PL_OK;
fail:
  pl_fsdp2_destroy(t);
  return st;
}

int64_t pl_fsdp2_tokens_per_rank(const pl_fsdp2 *t) {
  return (int64_t)t->c.micro * (t->S + 1);
}

pl_status pl_fsdp2_batch(const pl_fsdp2 *t, pl_data *d, int64_t step,
                         int32_t *out) {
  for (int mi = 0; mi < t->c.micro; mi++) {
    const int64_t q =
        (step * t->c.micro + mi) * (int64_t)t->n_groups + t->cp_group;
    PL_TRY(pl_data_read(d, q, t->S, 0, t->S + 1, out + mi * (t->S + 1)));
  }
  return PL_OK;
}

/* ---- the step --------------------------------------------------------------
 */

static bool checkpointed(const pl_fsdp2 *t, int l) {
  switch (t->c.ac) {
  case PL_FSDP2_AC_FULL:
    return true;
  case PL_FSDP2_AC_SELECTIVE:
    return (l + 1) % t->c.ac_freq == 0;
  default:
    return false;
  }
}

/* Views of layer l into its gathered units (and their open gradients). */
static void set_views(pl_fsdp2 *t, flayer *x, void *full, void *xfull, float *g,
                      float *xg) {
  const size_t es = t->es;
  char *W = full;
  pl__fsdp2_layer *y = &x->lay;
  void **wv[P_N] = {&y->w_n, &y->w_qkv, &y->w_o,   &y->w_n2,
                    &y->w_r, &y->w_up,  &y->w_down};
  float **gv[P_N] = {&y->g_n, &y->g_qkv, &y->g_o,   &y->g_n2,
                     &y->g_r, &y->g_up,  &y->g_down};
  for (int p = 0; p < P_N; p++) {
    *wv[p] = x->off[p] != SIZE_MAX ? W + x->off[p] * es : NULL;
    *gv[p] = g && x->off[p] != SIZE_MAX ? g + x->off[p] : NULL;
  }
  if (!x->moe)
    return;
  const size_t ne = pl__fsdp2_align((size_t)t->El * (size_t)(t->m.H * t->m.I));
  char *X = xfull;
  y->ew = (pl_moe_weights){X, X + ne * es, X + 2 * ne * es};
  if (xg)
    y->eg = (pl_moe_wgrads){xg, xg + ne, xg + 2 * ne};
}

/* Gather (or prefetch) layer l's units. */
static pl_status layer_prefetch(pl_fsdp2 *t, int l, pl_stream *s) {
  PL_TRY(pl_zero3_prefetch(t->f, t->fl[l].unit, s));
  return t->fl[l].moe ? pl_zero3_prefetch(t->f, t->fl[l].xunit, s) : PL_OK;
}
static void layer_release(pl_fsdp2 *t, int l, pl_stream *s) {
  pl_zero3_release(t->f, t->fl[l].unit, s);
  if (t->fl[l].moe)
    pl_zero3_release(t->f, t->fl[l].xunit, s);
}

/* Everything a failed step left: saved activations, boundaries, gathered
 * units and open gradients. */
static void abort_step(pl_fsdp2 *t) {
  pl_stream *s = pl_dev_stream(t->dev);
  pl_dev_sync(t->dev);
  for (int l = 0; l < t->m.L; l++)
    pl__fsdp2_layer_drop(&t->fl[l].lay, s);
  for (int l = 0; l <= t->m.L; l++) {
    pl_free(t->dev, t->bnd[l]);
    t->bnd[l] = NULL;
  }
  pl_zero3_reset(t->f, s);
  pl_clear_error();
}

/* The head: final norm, dense cross-entropy on the full logits, the final
 * norm's backward; *dh = dL/dh_L ("grads_act"); *loss the NLL sum. */
static pl_status head(pl_fsdp2 *t, pl_stream *s, const void *hL, void **dh,
                      double *loss) {
  pl_dev *dev = t->dev;
  const int64_t N = t->N, H = t->m.H;
  const size_t nh = (size_t)(N * H), nw = (size_t)H * (size_t)t->m.V;
  void *full, *xf = NULL, *dxf = NULL, *dwb = NULL;
  float *g, *scr = NULL;
  int a, b;
  PL_TRY(pl_timeline_mark(&t->tline, s, &a));
  PL_TRY(pl_zero3_acquire(t->f, t->u_head, s, &full));
  const void *wf = full;
  const void *wh = (const char *)full + pl__fsdp2_align((size_t)H) * t->es;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, pl_zero3_grad_acquire(t->f, t->u_head, s, &g));
  float *gf = g, *gh = g + pl__fsdp2_align((size_t)H);
  PL_TRY_GOTO(
      st, done,
      pl_alloc_async(dev, PL_ARENA_DEVICE, nh * t->es, "activations", s, &xf));
  PL_TRY_GOTO(st, done, pl__rmsnorm_fwd(s, hL, wf, xf, N, H, 1e-5f, t->dt));
  PL_TRY_GOTO(
      st, done,
      pl_alloc_async(dev, PL_ARENA_DEVICE, nh * t->es, "activations", s, &dxf));
  if (t->dt != PL_F32)
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE, nw * t->es, "zero3_grads",
                               s, &dwb));
  PL_TRY_GOTO(st, done,
              t->head->run(t->hctx, s, xf, t->d_tgt, wh, t->d_dloss, t->d_nll,
                           dxf, t->dt == PL_F32 ? (void *)gh : dwb));
  if (t->dt != PL_F32)
    PL_TRY_GOTO(st, done, pl_convert(s, gh, PL_F32, dwb, t->dt, nw));
  pl_free_async(dev, dwb, s);
  dwb = NULL;
  PL_TRY_GOTO(
      st, done,
      pl_alloc_async(dev, PL_ARENA_DEVICE, nh * t->es, "grads_act", s, dh));
  if (pl__on_cuda(s))
    PL_TRY_GOTO(st, done,
                pl_alloc_async(dev, PL_ARENA_DEVICE,
                               pl__rmsnorm_bwd_scratch(N, H) * 4, "activations",
                               s, (void **)&scr));
  PL_TRY_GOTO(
      st, done,
      pl__rmsnorm_bwd(s, hL, wf, dxf, NULL, *dh, gf, scr, N, H, 1e-5f, t->dt));
done:
  pl_free_async(dev, dwb, s);
  pl_free_async(dev, scr, s);
  pl_free_async(dev, xf, s);
  pl_free_async(dev, dxf, s);
  pl_zero3_release(t->f, t->u_head, s);
  PL_TRY(st);
  PL_TRY(pl_zero3_grad_reduce(t->f, t->u_head, s, t->micro_i > 0));
  PL_TRY(pl_head_nll_sum(s, t->d_nll, t->h_nll, N, loss));
  PL_TRY(pl_timeline_mark(&t->tline, s, &b));
  return pl_timeline_span(&t->tline, PL_PART_HEAD, a, b);
}

/* This rank's inputs and targets of one window (S + 1 tokens): its chunks. */
static void slice(pl_fsdp2 *t, const int32_t *win) {
  const int nch = t->c.cp > 1 ? 2 : 1;
  const int64_t c = t->c_len;
  for (int a = 0; a < nch; a++) {
    const int64_t g0 =
        (t->c.cp > 1 ? pl_ring_chunk(t->c.cp, t->cp_rank, a) : 0) * c;
    memcpy(t->h_tok + a * c, win + g0, (size_t)c * 4);
    memcpy(t->h_tgt + a * c, win + g0 + 1, (size_t)c * 4);
  }
}

/* The tokens of one window this rank uses (its chunks, as slice takes
 * them) checked in place: inputs in [0, V), targets too or ignored; the
 * first bad one into *bad / *badv, the targets counted into *T. */
static void check_window(const pl_fsdp2 *t, const int32_t *win, int *bad,
                         int64_t *badv, int64_t *T) {
  const int nch = t->c.cp > 1 ? 2 : 1;
  const int64_t c = t->c_len, V = t->m.V;
  for (int a = 0; a < nch; a++) {
    const int32_t *w =
        win + (t->c.cp > 1 ? pl_ring_chunk(t->c.cp, t->cp_rank, a) : 0) * c;
    for (int64_t i = 0; i < c; i++) {
      const int32_t x = w[i], y = w[i + 1];
      if (!*bad && (x < 0 || x >= V))
        *bad = 1, *badv = x;
      if (!*bad && y != PL_CE_IGNORE_INDEX && (y < 0 || y >= V))
        *bad = 1, *badv = y;
      *T += y != PL_CE_IGNORE_INDEX;
    }
  }
}

/* Layer l's backward from *dcur (freed; *dcur becomes dL/dx), its
 * gradients reduced. */
static pl_status layer_bwd(pl_fsdp2 *t, int l, pl_stream *s, void **dcur,
                           bool acc) {
  pl_dev *dev = t->dev;
  const size_t nh = (size_t)(t->N * t->m.H) * t->es;
  flayer *x = &t->fl[l];
  void *full = NULL, *xfull = NULL, *dx = NULL;
  float *g = NULL, *xg = NULL;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, pl_zero3_acquire(t->f, x->unit, s, &full));
  if (x->moe)
    PL_TRY_GOTO(st, done, pl_zero3_acquire(t->f, x->xunit, s, &xfull));
  PL_TRY_GOTO(st, done,
              l > 0 ? layer_prefetch(t, l - 1, s)
                    : pl_zero3_prefetch(t->f, t->u_emb, s));
  PL_TRY_GOTO(st, done, pl_zero3_grad_acquire(t->f, x->unit, s, &g));
  if (x->moe)
    PL_TRY_GOTO(st, done, pl_zero3_grad_acquire(t->f, x->xunit, s, &xg));
  set_views(t, x, full, xfull, g, xg);
  PL_TRY_GOTO(st, done,
              pl_alloc_async(dev, PL_ARENA_DEVICE, nh, "grads_act", s, &dx));
  PL_TRY_GOTO(st, done,
              pl__fsdp2_layer_backward(&x->lay, s, t->bnd[l], *dcur, dx, t->N));
done:
  pl_free_async(dev, *dcur, s);
  *dcur = dx;
  pl_free_async(dev, t->bnd[l], s);
  t->bnd[l] = NULL;
  layer_release(t, l, s);
  PL_TRY(st);
  PL_TRY(pl_zero3_grad_reduce(t->f, x->unit, s, acc));
  if (x->moe)
    PL_TRY(pl_zero3_grad_reduce(t->f, x->xunit, s, acc));
  return PL_OK;
}

/* The layers' backward from *dcur, then the embedding's: gathered again
 * (FSDP2's pre-backward), its gradient reduced. */
static pl_status backward(pl_fsdp2 *t, pl_stream *s, void **dcur, bool acc) {
  void *E;
  float *gE;
  pl_status st = PL_OK;
  for (int l = t->m.L - 1; l >= 0; l--) {
    pl_mem_phase_set(t->dev, "backward", l, t->fl[l].moe ? "moe" : "dense");
    PL_TRY_GOTO(st, done, layer_bwd(t, l, s, dcur, acc));
  }
  pl_mem_phase_set(t->dev, "embedding backward", -1, NULL);
  PL_TRY_GOTO(st, done, pl_zero3_acquire(t->f, t->u_emb, s, &E));
  PL_TRY_GOTO(st, done, pl_zero3_grad_acquire(t->f, t->u_emb, s, &gE));
  PL_TRY_GOTO(st, done,
              pl__embedding_bwd(s, gE, *dcur, t->d_tok, t->N, t->m.H, t->dt));
done:
  pl_zero3_release(t->f, t->u_emb, s);
  PL_TRY(st);
  return pl_zero3_grad_reduce(t->f, t->u_emb, s, acc);
}

static pl_status micro_batch(pl_fsdp2 *t, const int32_t *win, double *nll) {
  pl_dev *dev = t->dev;
  pl_stream *s = pl_dev_stream(dev);
  const int L = t->m.L;
  const int64_t N = t->N, H = t->m.H;
  const size_t nh = (size_t)(N * H) * t->es;
  const bool acc = t->micro_i > 0;
  if (!pl__dev_dry(dev)) /* a dry device's copy reads no values */
    slice(t, win);
  PL_TRY(pl_memcpy_async(s, t->d_tok, t->h_tok, (size_t)N * 4));
  PL_TRY(pl_memcpy_async(s, t->d_tgt, t->h_tgt, (size_t)N * 4));
  /* embedding: gathered, rows copied, resharded (layer 0 prefetched) */
  void *E, *full, *xfull = NULL;
  pl_mem_phase_set(dev, "embedding", -1, NULL);
  PL_TRY(pl_zero3_acquire(t->f, t->u_emb, s, &E));
  PL_TRY(layer_prefetch(t, 0, s));
  PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, nh, "boundary", s, &t->bnd[0]));
  PL_TRY(pl__embedding_fwd(s, t->bnd[0], E, t->d_tok, N, H, t->dt));
  pl_zero3_release(t->f, t->u_emb, s);
  /* layers */
  for (int l = 0; l < L; l++) {
    flayer *x = &t->fl[l];
    pl_mem_phase_set(dev, "forward", l, x->moe ? "moe" : "dense");
    PL_TRY(pl_zero3_acquire(t->f, x->unit, s, &full));
    if (x->moe)
      PL_TRY(pl_zero3_acquire(t->f, x->xunit, s, &xfull));
    if (l + 1 < L)
      PL_TRY(layer_prefetch(t, l + 1, s));
    else
      PL_TRY(pl_zero3_prefetch(t->f, t->u_head, s));
    set_views(t, x, full, xfull, NULL, NULL);
    PL_TRY(pl_alloc_async(dev, PL_ARENA_DEVICE, nh, "boundary", s,
                          &t->bnd[l + 1]));
    PL_TRY(pl__fsdp2_layer_forward(&x->lay, s, t->bnd[l], t->bnd[l + 1], N,
                                   !checkpointed(t, l), true));
    if (l + 1 < L) /* the last layer stays gathered into its backward */
      layer_release(t, l, s);
  }
  /* head */
  void *dcur = NULL;
  double loss = 0;
  pl_mem_phase_set(dev, "head (dense CE)", -1, NULL);
  PL_TRY(head(t, s, t->bnd[L], &dcur, &loss));
  pl_free_async(dev, t->bnd[L], s);
  t->bnd[L] = NULL;
  /* backward */
  pl_status st = backward(t, s, &dcur, acc);
  pl_free_async(dev, dcur, s);
  *nll += loss;
  return st;
}

static void mem_stats(pl_fsdp2 *t, pl_step_result *r) {
  pl_mem_stats_get(t->dev, PL_ARENA_DEVICE, &r->dev);
  pl_mem_stats_get(t->dev, PL_ARENA_HOST, &r->host);
}

pl_status pl_fsdp2_forward_backward(pl_fsdp2 *t, const int32_t *tokens,
                                    pl_step_result *res) {
  pl_step_result local;
  pl_step_result *r = res ? res : &local;
  memset(r, 0, sizeof *r);
  const uint64_t t0 = pl_now_ns();
  const int64_t per = t->S + 1;
  pl_stream *s = pl_dev_stream(t->dev);
  /* the tokens this rank uses: inputs in [0, V), targets too or ignored */
  int64_t T = 0, badv = 0;
  int bad = 0;
  for (int mi = 0; mi < t->c.micro; mi++)
    check_window(t, tokens + mi * per, &bad, &badv, &T);
  int64_t flags[2] = {bad, T};
  PL_TRY(pl_host_allreduce_i64(t->world, flags, 1, PL_RED_MAX));
  PL_TRY(pl_host_allreduce_i64(t->world, flags + 1, 1, PL_RED_SUM));
  if (flags[0])
    return bad ? pl_set_error(PL_EINVAL,
                              "fsdp2: token %lld: must be in [0, V=%lld)",
                              (long long)badv, (long long)t->m.V)
               : pl_set_error(PL_EINVAL,
                              "fsdp2: another rank passed an invalid token");
  T = flags[1];
  PL_TRY(pl_dev_sync(t->dev));
  pl_mem_phase_set(t->dev, "states", -1, NULL); /* what the step starts on */
  pl_mem_reset_peak(t->dev, PL_ARENA_DEVICE);
  pl_mem_reset_peak(t->dev, PL_ARENA_HOST);
  pl_timeline_clear(&t->tline);
  pl_zero3_stats zs;
  PL_TRY(pl_zero3_take_stats(t->f, &zs));
  PL_TRY(pl_fill(s, t->d_dloss, PL_F32, (size_t)t->N,
                 T > 0 ? 1.0 / (double)T : 0));
  double nll = 0;
  pl_status st = PL_OK;
  for (t->micro_i = 0; t->micro_i < t->c.micro; t->micro_i++)
    PL_TRY_GOTO(st, fail, micro_batch(t, tokens + t->micro_i * per, &nll));
  PL_TRY_GOTO(st, fail, pl_zero3_sync(t->f, s));
  PL_TRY_GOTO(st, fail, pl_dev_sync(t->dev));
  PL_TRY(pl_host_allreduce_f64(t->world, &nll, 1, PL_RED_SUM));
  r->step = t->step_no + 1;
  r->loss = T > 0 ? nll / (double)T : NAN;
  r->tokens = T;
  for (int l = 0; l < t->m.L; l++)
    if (t->fl[l].moe) {
      r->moe_K = t->fl[l].lay.stats.K;
      if (t->fl[l].lay.stats.imb_native > r->moe_imbalance)
        r->moe_imbalance = t->fl[l].lay.stats.imb_native;
    }
  if (t->c.profile)
    PL_TRY(take_parts(t, r));
  mem_stats(t, r);
  r->time_ms = pl_elapsed_s(t0) * 1e3;
  return PL_OK;
fail:
  mem_stats(t, r); /* the peak the failure reached */
  char msg[512];
  snprintf(msg, sizeof msg, "%s", pl_last_error());
  abort_step(t);
  return pl_set_error(st, "%s", msg);
}

/* AdamW over every unit's shard: the global norm first, then the update
 * (device kernels, or the SIMD CPU kernel on the host shards). */
static pl_status optimizer(pl_fsdp2 *t, float *gscale) {
  pl_stream *s = pl_dev_stream(t->dev);
  const bool host = t->c.optim == PL_FSDP2_OPTIM_CPU;
  if (host && pl__dev_dry(t->dev)) { /* host shards not backed; no allocs */
    *gscale = 1.f;
    return PL_OK;
  }
  double sumsq = 0;
  if (t->c.hp.max_grad_norm > 0) {
    for (int u = 0; u < t->nunits; u++) {
      float *g;
      size_t n;
      pl_zero3_shard(t->f, u, NULL, &g, &n, NULL);
      const size_t nc = pl__adamw_nchunks(n);
      if (host) {
        pl__cpu_adamw_partials(g, PL_F32, n, t->h_partials);
      } else {
        PL_TRY(pl__adamw_sumsq(s, g, PL_F32, n, t->partials));
        PL_TRY(pl_memcpy_async(s, t->h_partials, t->partials, nc * 8));
        PL_TRY(pl_stream_sync(s));
      }
      sumsq += pl_adamw_sum_partials(t->h_partials, nc);
    }
    PL_TRY(pl_host_allreduce_f64(t->world, &sumsq, 1, PL_RED_SUM));
  }
  *gscale = pl_adamw_clip_scale(&t->c.hp, sumsq);
  const pl_adamw_scalars k =
      pl_adamw_scalars_make(&t->c.hp, t->step_no + 1, *gscale);
  for (int u = 0; u < t->nunits; u++) {
    float *w, *g, *m, *v;
    size_t n;
    pl_zero3_shard(t->f, u, (void **)&w, &g, &n, NULL);
    pl_zero3_moments(t->f, u, &m, &v);
    if (host)
      PL_TRY(pl__cpu_adamw_simd(PL_SIMD_AUTO, t->c.cpu_threads, w, m, v, g,
                                PL_F32, NULL, n, &k));
    else
      PL_TRY(pl__adamw_update(s, w, m, v, g, PL_F32, NULL, n, &k));
  }
  return pl_stream_sync(s);
}

/* The router biases from the step's global expert loads (the composed
 * step's rule). */
static pl_status bias_update(pl_fsdp2 *t) {
  pl_router_bias_slot *sl = malloc(((size_t)t->m.L + 1) * sizeof *sl);
  if (!sl)
    return pl_set_error(PL_ENOMEM, "fsdp2: host");
  int n = 0;
  for (int l = 0; l < t->m.L; l++)
    if (t->fl[l].moe)
      sl[n++] = (pl_router_bias_slot){t->fl[l].lay.counts, t->fl[l].hbias,
                                      t->fl[l].bias};
  pl_status st = pl_router_bias_step(t->world, pl_dev_stream(t->dev), sl, n,
                                     t->E_r, t->m.bias_gamma);
  free(sl);
  return st;
}

pl_status pl_fsdp2_update(pl_fsdp2 *t, pl_step_result *res) {
  pl_step_result local;
  pl_step_result *r = res ? res : &local;
  if (!res)
    memset(r, 0, sizeof *r);
  const uint64_t t0 = pl_now_ns();
  PL_TRY(pl_dev_sync(t->dev));
  pl_mem_phase_set(t->dev, "optimizer", -1, NULL);
  float gs = 1;
  PL_TRY(optimizer(t, &gs));
  const double opt_ms = pl_elapsed_s(t0) * 1e3;
  PL_TRY(bias_update(t));
  t->step_no++;
  r->gscale = gs;
  if (t->c.profile)
    r->part_ms[PL_PART_OPTIM] += opt_ms;
  mem_stats(t, r);
  r->time_ms += pl_elapsed_s(t0) * 1e3;
  return PL_OK;
}

/* the baseline in pl_step_run */
static pl_status batch_of(const void *t, pl_data *d, int64_t step,
                          int32_t *tok) {
  return pl_fsdp2_batch(t, d, step, tok);
}
static pl_status step_of(void *t, const int32_t *tok, pl_step_result *r) {
  return pl_fsdp2_step(t, tok, r);
}

pl_status pl_fsdp2_step(pl_fsdp2 *t, const int32_t *tokens,
                        pl_step_result *res) {
  pl_step_result local;
  pl_step_result *r = res ? res : &local;
  PL_TRY(pl_fsdp2_forward_backward(t, tokens, r));
  PL_TRY(pl_fsdp2_update(t, r));
  if (t->c.profile)
    pl_step_result_other(r);
  return PL_OK;
}

pl_status pl_fsdp2_run(pl_fsdp2 *t, pl_data *d, int64_t first, int steps,
                       double *losses, pl_step_result *res) {
  return pl_step_run(t, pl_fsdp2_tokens_per_rank(t), batch_of, step_of, d,
                     first, steps, losses, res);
}
