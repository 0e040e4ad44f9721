/* describe.c — the per-rank bytes of every state of the training step by
 * tag (train/describe.h): the same arithmetic as the trainer's allocations
 * (train/step.c, units.h, zero3.c, ops/stream_adamw.c, ops/ring_dtp.c,
 * train/ckpt.c), without allocating anything. */
#include "train/describe.h"

#include <string.h>

#include "model/ulysses.h"
#include "ops/adamw.h"
#include "ops/stream_adamw.h"
#include "train/epgroups.h"
#include "train/units.h"

static size_t cdiv(size_t a, size_t b) {
  return (a + b - 1) / b;
}

static void add(pl_train_desc *d, const char *tag, pl_arena a, pl_desc_kind k,
                size_t bytes, const char *what) {
  if (d->n >= PL_DESC_MAX)
    return;
  pl_desc_item *it = &d->item[d->n++];
  it->tag = tag, it->arena = a, it->kind = k, it->bytes = bytes;
  snprintf(it->what, sizeof it->what, "%s", what);
  if (a == PL_ARENA_HOST)
    d->host_state += bytes;
  else if (k == PL_DESC_STATE)
    d->dev_state += bytes;
  else
    d->dev_transient += bytes;
}

/* What the sections of a description share: the inputs, the sizes of a
 * rank's units and experts, and the optimizer's split of them. */
typedef struct dctx {
  const pl_model_cfg *m;
  const pl_layout_plan *p;
  const pl_step_cfg *sc;
  pl_train_desc *out;
  const pl_optim_ops *optim;
  int vp, builtin_head;
  size_t b, N, H, NH, head_cols;
  /* units_and_experts */
  size_t sum_s, max_s, max_full, npart;
  int nmoe;
  size_t ne, se, experts, theta;
  /* optimizer_states */
  int stream;
  size_t beta, R, streamed;
  /* host_states */
  int sel;
} dctx;

/* Units: shard s = ceil(n / G_v), the full unit G_v·s; the experts of
 * every MoE layer; the rank's parameters and the norm's partials. */
static void units_and_experts(dctx *x) {
  const pl_model_cfg *m = x->m;
  const pl_layout_plan *p = x->p;
  const size_t H = x->H;
  const int nunits = m->L + 2;
  for (int u = 0; u < nunits; u++) {
    size_t n, off[PL__U_N];
    int gv = p->zero_vsize;
    if (u == 0)
      n = (size_t)(m->V * m->H);
    else if (u <= m->L)
      n = pl__layer_unit(m, p->E_route, u - 1, off);
    else
      n = H * x->head_cols, gv = x->vp ? p->head_vsize : p->zero_vsize;
    const size_t s = cdiv(n, (size_t)gv);
    x->sum_s += s;
    x->npart += pl_adamw_norm_nchunks(s);
    if (s > x->max_s)
      x->max_s = s;
    if ((size_t)gv * s > x->max_full)
      x->max_full = (size_t)gv * s;
  }
  for (int l = 0; l < m->L; l++)
    x->nmoe += pl_model_layer_is_moe(m, l);
  x->ne = (size_t)p->E_local * H * (size_t)m->I; /* one expert tensor */
  /* expert groups (train/epgroups.h): per MoE layer one unit of the three
   * tensors over the ep_vsize replica ranks, its shard se */
  size_t eoff[3];
  const size_t eu =
      p->ep_grouped ? pl__ep_unit(m->H, m->I, p->E_local, eoff) : 0;
  x->se = p->ep_grouped ? cdiv(eu, (size_t)p->ep_vsize) : 0;
  for (int i = 0; i < x->nmoe; i++) {
    if (p->ep_grouped)
      x->npart += pl_adamw_norm_nchunks(x->se);
    else
      for (int j = 0; j < 3; j++)
        x->npart += pl_adamw_norm_nchunks(x->ne);
  }
  x->experts = (size_t)x->nmoe * (p->ep_grouped ? x->se : 3 * x->ne);
  x->theta = x->sum_s + x->experts;
  x->out->params_rank = (int64_t)x->theta;
  x->out->unit_max_bytes = x->max_full * x->b;
}

/* States: the weights and their gradients. */
static void weight_states(dctx *x) {
  const pl_layout_plan *p = x->p;
  const size_t b = x->b;
  char w[112];
  if (p->ep_grouped)
    snprintf(w, sizeof w,
             "unit shards %zu x %zuB + %d expert-unit shards of %zu "
             "(Ep=%d) + biases",
             x->sum_s, b, x->nmoe, x->se, p->Ep);
  else
    snprintf(w, sizeof w,
             "unit shards %zu x %zuB + %d x 3 expert shards of %zu + biases",
             x->sum_s, b, x->nmoe, x->ne);
  add(x->out, "weights", PL_ARENA_DEVICE, PL_DESC_STATE,
      x->sum_s * b + x->experts * b + (size_t)x->nmoe * (size_t)p->E_route * 4,
      w);
  add(x->out, "grads", PL_ARENA_DEVICE, PL_DESC_STATE, x->theta * 4,
      "f32 gradients of the unit shards and experts (4 B/param)");
}

/* States on the device: the optimizer's (staging, norm partials, resident
 * buckets, f32 mode's shadow), the tokens, the head's statistics. */
static void optimizer_states(dctx *x) {
  const pl_step_cfg *sc = x->sc;
  pl_train_desc *out = x->out;
  const size_t theta = x->theta;
  char w[112];
  const int stream = x->stream =
      x->optim == &pl_optim_stream || x->optim == &pl_optim_hybrid;
  const size_t beta = x->beta = sc->oo.bucket ? sc->oo.bucket : 100000000;
  /* optimizer-state residency (the last buckets, train/optim.h) */
  const size_t R = x->R =
      stream ? pl_stream_adamw_resident_elems(theta, beta, sc->oo.resident_all,
                                              sc->oo.resident_bytes)
             : 0;
  const size_t streamed = x->streamed = theta - R,
               slot = beta < streamed ? beta : streamed;
  const size_t nb = cdiv(streamed, beta);
  const size_t slots = (size_t)(sc->oo.slots ? sc->oo.slots : 2) < nb
                           ? (size_t)(sc->oo.slots ? sc->oo.slots : 2)
                           : nb;
  out->resident_params = (int64_t)R;
  if (stream) {
    snprintf(w, sizeof w, "s=%zu slots x beta=%zu params x 12 B (<= s*beta*16)",
             slots, slot);
    add(out, "optim_staging", PL_ARENA_DEVICE, PL_DESC_STATE, slots * slot * 12,
        w);
    add(out, "optim_norm", PL_ARENA_DEVICE, PL_DESC_STATE, x->npart * 8,
        "norm partials (8 B/chunk)");
  }
  if (R) {
    snprintf(w, sizeof w,
             "fp32 master, m, v of the last %zu of %zu params (12 B/param)", R,
             theta);
    add(out, "optim_resident", PL_ARENA_DEVICE, PL_DESC_STATE, R * 12, w);
  }
  if (sc->dt == PL_F32)
    add(out, "optim_shadow", PL_ARENA_DEVICE, PL_DESC_STATE, theta * 2,
        "bf16 weights the optimizer writes (f32 mode)");
  add(out, "tokens", PL_ARENA_DEVICE, PL_DESC_STATE, 4 * x->N * 4,
      "tokens, targets, dloss, nll");
  if (x->builtin_head)
    add(out, "ce_state", PL_ARENA_DEVICE, PL_DESC_STATE, 8,
        "the head's group statistics");
}

/* States on the host: the optimizer's, and SCO's selected boundaries. */
static void host_states(dctx *x) {
  const pl_model_cfg *m = x->m;
  const pl_step_cfg *sc = x->sc;
  pl_train_desc *out = x->out;
  const size_t theta = x->theta;
  char w[112];
  add(out, "optim", PL_ARENA_HOST, PL_DESC_STATE, x->streamed * 12,
      x->R ? "fp32 master, m, v of the streamed params (12 B/param)"
           : "fp32 master, m, v (12 B/param)");
  if (x->stream)
    add(out, "optim_norm", PL_ARENA_HOST, PL_DESC_STATE, x->npart * 8,
        "norm partials");
  if (x->optim == &pl_optim_hybrid) {
    /* as train/optim.c configures it: f32 gradients on the device */
    pl_stream_adamw_cfg hc = pl_stream_adamw_cfg_default();
    hc.bucket = x->beta;
    hc.grad_dtype = PL_F32;
    hc.share = sc->oo.share ? sc->oo.share : -1.0;
    hc.resident = x->R;
    add(out, "optim_hybrid", PL_ARENA_HOST, PL_DESC_STATE,
        pl_stream_adamw_hybrid_bytes(theta, &hc),
        "the CPU share's f32 gradients + bf16 weights (every bucket: auto)");
  }
  if (x->optim->host_update)
    add(out, "optim_offload", PL_ARENA_HOST, PL_DESC_STATE, theta * (4 + 2),
        "host copies of the gradients and bf16 weights");
  const size_t bnd = x->NH * x->b;
  int sel =
      sc->sco.all ? m->L : (int)(bnd ? sc->sco.bytes / bnd : (uint64_t)m->L);
  if (!sc->sco.all && sc->sco.bytes == 0)
    sel = 0;
  if (sel > m->L)
    sel = m->L;
  x->sel = out->sco_layers = sel;
  snprintf(w, sizeof w, "|S|=%d of %d boundaries of N*H*b", sel, m->L);
  add(out, "boundary", PL_ARENA_HOST, PL_DESC_STATE, (size_t)sel * bnd, w);
}

/* Transient bounds: the gathered units and their gradients. */
static void unit_bounds(dctx *x) {
  const pl_layout_plan *p = x->p;
  pl_train_desc *out = x->out;
  const size_t b = x->b, max_full = x->max_full;
  char w[112];
  snprintf(w, sizeof w, "two gathered units of at most %zu params", max_full);
  add(out, "zero3", PL_ARENA_DEVICE, PL_DESC_BOUND, 2 * max_full * b, w);
  add(out, "zero3_grads", PL_ARENA_DEVICE, PL_DESC_BOUND,
      max_full * 4 + x->max_s * 4 +
          (x->sc->dt == PL_F32 ? 0 : x->H * x->head_cols * b),
      "one unsharded f32 gradient + a shard (+ the head's bf16 dW)");
  if (p->ep_grouped && x->nmoe) {
    const size_t efull = (size_t)p->ep_vsize * x->se;
    snprintf(w, sizeof w, "one gathered expert unit of %zu params (Ep=%d)",
             efull, p->Ep);
    add(out, "zero3", PL_ARENA_DEVICE, PL_DESC_BOUND, efull * b, w);
    add(out, "zero3_grads", PL_ARENA_DEVICE, PL_DESC_BOUND,
        efull * 4 + x->se * 4, "its unsharded f32 gradient + a shard");
  }
}

/* Transient bounds: the boundaries on the device (Eq. 4), the last
 * layer's output, the kept activations, the runner's dx buffers. */
static void activation_bounds(dctx *x) {
  const pl_model_cfg *m = x->m;
  const pl_layout_plan *p = x->p;
  const pl_step_cfg *sc = x->sc;
  pl_train_desc *out = x->out;
  const size_t bnd = x->NH * x->b;
  char w[112];
  snprintf(w, sizeof w,
           "Eq. 4: (2 + L - |S|) = %d boundaries of N*H*b on the device",
           2 + m->L - x->sel);
  add(out, "boundary", PL_ARENA_DEVICE, PL_DESC_BOUND,
      (size_t)(2 + m->L - x->sel) * bnd, w);
  add(out, "output", PL_ARENA_DEVICE, PL_DESC_BOUND, bnd,
      "the last layer's output");
  int n_attn, n_all;
  pl_step_keep_layers(m, p->N, p->D, sc->dt, sc->keep, &n_attn, &n_all);
  out->keep_attn = n_attn, out->keep_all = n_all;
  if (n_attn) {
    snprintf(w, sizeof w,
             "kept for the backward: attention o+lse of %d layers, whole "
             "attention half of %d",
             n_attn, n_all);
    add(out, "kept", PL_ARENA_DEVICE, PL_DESC_BOUND,
        pl_step_keep_bytes(m, p->N, p->D, sc->dt, n_attn, n_all), w);
  }
  add(out, "grads_act", PL_ARENA_DEVICE, PL_DESC_BOUND, 2 * bnd,
      "the runner's two dx buffers");
}

/* The MoE layer's transients: the dispatch's route buffers (a bound when
 * the variant chunks, ops/moe.h; else an estimate at balanced routing),
 * one chunk's expert intermediates, the router's and the routing's. */
static void moe_transients(dctx *x) {
  const pl_model_cfg *m = x->m;
  const pl_layout_plan *p = x->p;
  const pl_step_cfg *sc = x->sc;
  pl_train_desc *out = x->out;
  const size_t b = x->b, N = x->N, H = x->H;
  char w[112];
  const bool chunks = pl_moe_variant_desc_of(sc->dispatch)->chunks;
  size_t rows = N * (size_t)m->k;
  if (chunks) {
    int K = 1;
    int64_t c_eff = p->N;
    pl_moe_variant_chunking(sc->dispatch, p->N, sc->moe_c ? sc->moe_c : p->N,
                            sc->moe_K_max, &K, &c_eff);
    snprintf(w, sizeof w, "2*Ep*k*c_eff*H*b, Ep=%d k=%d c_eff=%zu (K=%lld)",
             p->ep_span, m->k, (size_t)c_eff, (long long)K);
    add(out, "dispatch", PL_ARENA_DEVICE, PL_DESC_BOUND,
        2 * (size_t)p->ep_span * (size_t)m->k * (size_t)c_eff * H * b, w);
    rows = (size_t)p->ep_span * m->k * (size_t)c_eff;
  } else {
    add(out, "dispatch", PL_ARENA_DEVICE, PL_DESC_ESTIMATE,
        2 * N * (size_t)m->k * H * b,
        "2*N*k*H*b at balanced routing (not bounded: the router decides)");
  }
  add(out, "expert", PL_ARENA_DEVICE, PL_DESC_ESTIMATE,
      4 * rows * (size_t)m->I * b, "G, U, A, P of one chunk's routes (I wide)");
  add(out, "router", PL_ARENA_DEVICE, PL_DESC_ESTIMATE,
      N * (size_t)p->E_route * (4 + b) + 3 * N * (size_t)m->k * 4,
      "probabilities, dlogits, routes, weights and their gradient");
  add(out, "routing", PL_ARENA_DEVICE, PL_DESC_ESTIMATE,
      (sc->moe_recompute ? 1 : (size_t)x->nmoe) * N * (1 + 5 * (size_t)m->k) *
          4,
      sc->moe_recompute
          ? "one layer's route indices"
          : "route indices of every MoE layer (kept to the backward)");
}

/* The built-in heads' transients (ring_dtp.c's formulas): one logit strip,
 * Ring-DTP's hop buffers, the f32 dX accumulator. */
static void head_bounds(dctx *x) {
  const pl_model_cfg *m = x->m;
  const pl_step_cfg *sc = x->sc;
  pl_train_desc *out = x->out;
  const size_t b = x->b, N = x->N, H = x->H;
  char w[112];
  const int P = x->vp ? x->p->P : 1;
  const size_t vmax = cdiv((size_t)m->V, (size_t)P);
  size_t vb = sc->head_block ? (size_t)sc->head_block : 4096;
  if (vb > vmax)
    vb = vmax;
  const int move_w = P > 1 && N > vmax;
  const size_t nc = cdiv(N, 8);
  size_t logits = N * vb * (sc->dt == PL_BF16 ? 6 : 4);
  if (move_w && sc->dt == PL_BF16)
    logits = N * vb * 4 > nc * vb * 6 ? N * vb * 4 : nc * vb * 6;
  snprintf(w, sizeof w, "one strip of N x Vb=%zu (P=%d, moves %s)", vb, P,
           move_w ? "weights" : "activations");
  add(out, "logits", PL_ARENA_DEVICE, PL_DESC_BOUND, logits, w);
  if (P > 1) {
    const size_t nbuf = P == 2 ? 1 : 2;
    size_t ring;
    if (!move_w) {
      const size_t f = nbuf * N * (H * b + 4) + 9 * N * 4,
                   g = nbuf * N * (H * b + 12) + 2 * x->NH * 4;
      ring = f > g ? f : g;
    } else {
      ring = nbuf * H * vmax * b + 2 * H * vmax * 4;
    }
    add(out, "ring", PL_ARENA_DEVICE, PL_DESC_BOUND, ring,
        "Ring-DTP's hop buffers");
  }
  if (sc->dt == PL_BF16 && (P == 1 || move_w))
    add(out, "grads", PL_ARENA_DEVICE, PL_DESC_BOUND, (P > 1 ? nc : N) * H * 4,
        "the head's f32 dX accumulator");
}

/* One layer's intermediates at a time (the layer code's allocations). */
static void layer_estimates(dctx *x, pl_backend be) {
  const pl_model_cfg *m = x->m;
  const pl_layout_plan *p = x->p;
  const size_t b = x->b, N = x->N, H = x->H, NH = x->NH;
  const size_t nq = (size_t)m->n_q * m->d, nkv = (size_t)m->n_kv * m->d;
  size_t Is = 0;
  for (int l = 0; l < m->L; l++)
    if ((size_t)pl__layer_swiglu_width(m, l) > Is)
      Is = (size_t)pl__layer_swiglu_width(m, l);
  const size_t acts =
      N * (2 * H + 2 * nq + 2 * nkv) * b + N * (size_t)m->n_q * 4;
  const size_t attn_bwd = N * (H + 2 * nq + 2 * nkv + H) * b + NH * 4;
  const size_t ffn_bwd = NH * (4 * b + 4) + N * Is * 6 * b;
  add(x->out, "activations", PL_ARENA_DEVICE, PL_DESC_ESTIMATE,
      acts + attn_bwd + ffn_bwd,
      "a layer's backward: attention acts, their gradients, the FFN's");
  pl_attn_shape ash = {.batch = 1,
                       .seq = p->S,
                       .n_q = m->n_q / p->D,
                       .n_kv = pl_ulysses_heads_per_rank(m->n_kv, p->D),
                       .head_dim = m->d,
                       .dtype = x->sc->dt,
                       .kernels = x->sc->attn};
  add(x->out, "attention", PL_ARENA_DEVICE, PL_DESC_ESTIMATE,
      pl_attn_bwd_workspace_bytes(&ash, be) + (p->D > 1 ? N * nq * b : 0),
      "the attention backward's workspace (+ the Ulysses scratch)");
}

pl_status pl_train_describe(const pl_model_cfg *m, const pl_layout_cfg *lc,
                            int W, int rank, int64_t S, const pl_step_cfg *sc,
                            pl_backend be, pl_train_desc *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(pl_layout_plan_make(m, lc, W, rank, S, &out->plan));
  const pl_layout_plan *p = &out->plan;
  out->params = pl_model_count(m);
  out->flops_per_token = pl_model_flops_per_token(m, S);
  const pl_head_ops *head = sc->head ? sc->head : &pl_head_ring;
  dctx x = {.m = m, .p = p, .sc = sc, .out = out};
  x.optim = sc->optim ? sc->optim : &pl_optim_stream;
  x.vp = head->vocab_parallel;
  x.builtin_head = head == &pl_head_ring || head == &pl_head_fused;
  x.b = pl_dtype_size(sc->dt), x.N = (size_t)p->N, x.H = (size_t)m->H;
  x.NH = x.N * x.H, x.head_cols = (size_t)(x.vp ? p->v_cols : m->V);
  units_and_experts(&x);
  weight_states(&x);
  optimizer_states(&x);
  host_states(&x);
  unit_bounds(&x);
  activation_bounds(&x);
  if (x.nmoe)
    moe_transients(&x);
  if (x.builtin_head)
    head_bounds(&x);
  layer_estimates(&x, be);
  return PL_OK;
}

size_t pl_train_desc_bytes(const pl_train_desc *d, const char *tag,
                           pl_arena arena) {
  size_t s = 0;
  for (int i = 0; i < d->n; i++)
    if (d->item[i].arena == arena && !strcmp(d->item[i].tag, tag))
      s += d->item[i].bytes;
  return s;
}

size_t pl_train_desc_state(const pl_train_desc *d, const char *tag,
                           pl_arena arena) {
  size_t s = 0;
  for (int i = 0; i < d->n; i++)
    if (d->item[i].arena == arena && d->item[i].kind == PL_DESC_STATE &&
        !strcmp(d->item[i].tag, tag))
      s += d->item[i].bytes;
  return s;
}

static const char *human(size_t bytes, char *buf, size_t n) {
  const double v = (double)bytes;
  if (v >= 1024.0 * 1024 * 1024)
    snprintf(buf, n, "%.2f GiB", v / (1024.0 * 1024 * 1024));
  else if (v >= 1024.0 * 1024)
    snprintf(buf, n, "%.2f MiB", v / (1024.0 * 1024));
  else if (v >= 1024.0)
    snprintf(buf, n, "%.2f KiB", v / 1024.0);
  else
    snprintf(buf, n, "%zu B", bytes);
  return buf;
}

void pl_train_desc_print(const pl_train_desc *d, FILE *f) {
  const pl_layout_plan *p = &d->plan;
  char a[32], b[32], c[32];
  const double sc = d->params.total >= 1e9 ? 1e9 : 1e6;
  const char *u = sc == 1e9 ? "B" : "M";
  fprintf(f,
          "# parameters: %.3f %s total, %.3f %s active per token (GQA "
          "attention: the paper "
          "does not state its attention)\n",
          d->params.total / sc, u, d->params.active / sc, u);
  fprintf(f,
          "# layout: W=%d (virtual %d), rank %d, D=%d, P=%d, N=%lld tokens of "
          "S=%lld, "
          "E/Ep=%d experts here (Ep=%d%s; router over %d)\n",
          p->W, p->W_v, p->rank, p->D, p->P, (long long)p->N, (long long)p->S,
          p->E_local, p->Ep,
          p->ep_grouped ? ", expert groups: ZeRO-3 units over W_v/Ep" : "",
          p->E_route);
  fprintf(f, "# this rank updates %.3f %s parameters; %.4g GFLOP per token\n",
          d->params_rank / sc, u, d->flops_per_token / 1e9);
  static const char *const kind[3] = {"state", "bound", "estimate"};
  fprintf(f, "%-14s %-6s %-8s %12s  %s\n", "tag", "arena", "kind", "bytes",
          "what");
  for (int i = 0; i < d->n; i++) {
    const pl_desc_item *it = &d->item[i];
    fprintf(f, "%-14s %-6s %-8s %12s  %s\n", it->tag,
            it->arena == PL_ARENA_HOST ? "host" : "device", kind[it->kind],
            human(it->bytes, a, sizeof a), it->what);
  }
  fprintf(f,
          "# device: states %s + transients %s (an upper estimate of the "
          "peak); pinned host %s\n",
          human(d->dev_state, a, sizeof a),
          human(d->dev_transient, b, sizeof b),
          human(d->host_state, c, sizeof c));
}

void pl_train_units(const pl_model_cfg *m, const pl_layout_plan *p, int head_vp,
                    size_t *numel, int *vsize) {
  size_t off[PL__U_N];
  numel[0] = (size_t)(m->V * m->H);
  vsize[0] = p->zero_vsize;
  for (int l = 0; l < m->L; l++) {
    numel[1 + l] = pl__layer_unit(m, p->E_route, l, off);
    vsize[1 + l] = p->zero_vsize;
  }
  numel[m->L + 1] = (size_t)m->H * (size_t)(head_vp ? p->v_cols : m->V);
  vsize[m->L + 1] = head_vp ? p->head_vsize : p->zero_vsize;
}
