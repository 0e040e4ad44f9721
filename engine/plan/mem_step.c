/* mem_step.c — plateau's per-rank memory (pl_plan_memory): the persistent
 * states of train/describe.h, then one training step replayed on the
 * symbolic allocator in the order train/step.c, train/zero3.c and
 * train/ckpt.c issue it — per micro-batch the embedding (its unit gathered,
 * the first layer's prefetched), the checkpointed forward (each layer's unit
 * gathered, the next prefetched, released; SCO's selected boundaries freed
 * after their copy), the head (final norm, Ring-DTP forward + backward, the
 * head's gradient reduce-scattered, the last layer's gradient opened), the
 * backward (restores one layer ahead, each unit gathered again with the
 * previous one prefetched, its gradient opened, the layer recomputed and
 * backpropagated, the gradient reduce-scattered), the embedding's gradient;
 * then the optimizer, which allocates nothing on the device during a step.
 * The peak is the max over all of it, as the tracked allocator records it
 * from the step's start (pl_mem_reset_peak in pl_trainer_forward_backward). */
#include <stdlib.h>
#include <string.h>

#include "model/layer.h"
#include "plan/plan_internal.h"
#include "train/describe.h"
#include "train/epgroups.h"

static int state_term(const char *tag) {
  if (!strcmp(tag, "weights"))
    return PL_TERM_WEIGHTS;
  if (!strcmp(tag, "grads"))
    return PL_TERM_GRADS;
  if (!strncmp(tag, "optim", 5))
    return PL_TERM_OPTIM;
  if (!strcmp(tag, "ce_state"))
    return PL_TERM_LOGITS;
  return PL_TERM_OTHER;
}

/* what the trainer refuses before the layout (train/step.c check_cfg) */
static pl_status check_step(const pl_plan_cfg *c) {
  const pl_step_cfg *s = &c->sc;
  if (s->dt != PL_F32 && s->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "plan: dtype %s: f32 or bf16",
                        pl_dtype_name(s->dt));
  if (c->sc.micro < 1)
    return pl_set_error(PL_EINVAL, "plan: micro=%d: must be >= 1", c->sc.micro);
  if (s->moe_c < 0 || s->moe_K_max < 1)
    return pl_set_error(PL_EINVAL,
                        "plan: moe c=%lld K_max=%d: c >= 0 (0: N), K_max >= 1",
                        (long long)s->moe_c, s->moe_K_max);
  if (c->W < 1)
    return pl_set_error(PL_EINVAL, "plan: W=%d GPUs: must be >= 1", c->W);
  if (s->oo.slots < 0 || s->oo.slots > 64)
    return pl_set_error(PL_EINVAL, "plan: slots s=%d: 1..64", s->oo.slots);
  const pl_head_ops *h = s->head ? s->head : &pl_head_ring;
  if (h != &pl_head_ring && h != &pl_head_fused)
    return pl_set_error(PL_EUNSUPPORTED,
                        "plan: head '%s': the planner models the built-in "
                        "heads ring and fused",
                        h->name);
  return PL_OK;
}

typedef struct units {
  int n;
  size_t *full, *shard; /* elements: gathered unit, rank's shard */
  pl__sym_buf *w, *g;   /* gathered weights, open full gradients */
} units;

typedef struct replay {
  pl__sym_track *t;
  units u;
  size_t es;
} replay;

static void acquire(replay *r, int u) {
  if (!r->u.w[u].live)
    r->u.w[u] =
        pl__sym_alloc(r->t, "zero3", PL_TERM_UNITS, r->u.full[u] * r->es);
}
static void release(replay *r, int u) {
  pl__sym_free(r->t, &r->u.w[u]);
}
static void grad_acquire(replay *r, int u) {
  if (!r->u.g[u].live)
    r->u.g[u] = pl__sym_alloc(r->t, "zero3_grads", PL_TERM_UNIT_GRADS,
                              r->u.full[u] * 4);
}
static void grad_reduce(replay *r, int u, bool acc) {
  if (!r->u.g[u].live)
    return;
  if (acc) {
    pl__sym_buf tmp = pl__sym_alloc(r->t, "zero3_grads", PL_TERM_UNIT_GRADS,
                                    r->u.shard[u] * 4);
    pl__sym_free(r->t, &tmp);
  }
  pl__sym_free(r->t, &r->u.g[u]);
}

/* One rank's replay: its description, its units, the layers' replay
 * states and the buffers that live across the phases of a micro-batch. */
typedef struct rctx {
  const pl_model_cfg *m;
  const pl_plan_cfg *c;
  const pl_plan_machine *mc;
  const pl_step_cfg *sc;
  pl_train_desc *d;
  const pl_layout_plan *p;
  int vp, L, nmoe, sel;
  int64_t N, H;
  size_t es, NHb;
  pl__sym_track t;
  pl__bins bins; /* the phases' highs (pl_plan_mem.layer_high) */
  replay r;
  pl_moe_cfg mcfg; /* the MoE layer's configuration (moe holds it) */
  pl__moe_replay moe;
  pl__layer_replay *ly;
  pl__sym_buf *ctx, *h;
  pl__acts_replay *kept;
  pl__sym_buf *ew; /* expert groups: each layer's gathered expert unit */
  size_t *numel;
  int *vsize;
  pl__head_replay hd;
  pl__sym_buf aux;             /* the head's saved (m, log z)             */
  pl__sym_buf x0, dx0, g1, g0; /* the embedding's output and gradient, the
                                  runner's dx buffers                    */
} rctx;

static void close_replay(rctx *x) {
  pl__moe_replay_free(&x->moe);
  free(x->numel);
  free(x->vsize);
  free(x->r.u.full);
  free(x->r.u.shard);
  free(x->r.u.w);
  free(x->r.u.g);
  free(x->ly);
  free(x->ctx);
  free(x->h);
  free(x->kept);
  free(x->ew);
  free(x->d);
}

/* The rank's description (train/describe.h), its arrays and its units'
 * sizes into x (close_replay frees them, also after an error). */
static pl_status open_replay(const pl_model_cfg *m, const pl_plan_cfg *c,
                             const pl_plan_machine *mc, int rank, rctx *x) {
  x->m = m, x->c = c, x->mc = mc, x->sc = &c->sc;
  x->d = malloc(sizeof *x->d);
  if (!x->d)
    return pl_set_error(PL_ENOMEM, "plan: host");
  PL_TRY(pl_train_describe(m, &c->lc, c->W, rank, c->S, &c->sc, mc->backend,
                           x->d));
  const pl_layout_plan *p = x->p = &x->d->plan;
  const pl_head_ops *head = x->sc->head ? x->sc->head : &pl_head_ring;
  x->vp = head->vocab_parallel, x->L = m->L;
  x->N = p->N, x->H = m->H;
  x->es = pl_dtype_size(x->sc->dt);
  x->NHb = (size_t)x->N * (size_t)x->H * x->es;
  pl__sym_init(&x->t);
  pl__bins_init(&x->bins, m->L);
  x->t.bins = &x->bins;
  x->r = (replay){&x->t, {0}, x->es};
  const int nu = x->L + 2, L = x->L;
  x->numel = calloc((size_t)nu, sizeof *x->numel);
  x->vsize = calloc((size_t)nu, sizeof *x->vsize);
  x->r.u.full = calloc((size_t)nu, sizeof(size_t));
  x->r.u.shard = calloc((size_t)nu, sizeof(size_t));
  x->r.u.w = calloc((size_t)nu, sizeof(pl__sym_buf));
  x->r.u.g = calloc((size_t)nu, sizeof(pl__sym_buf));
  x->ly = calloc((size_t)L, sizeof *x->ly);
  x->ctx = calloc((size_t)L, sizeof *x->ctx);
  x->h = calloc((size_t)L + 1, sizeof *x->h);
  x->kept = calloc((size_t)L, sizeof *x->kept);
  x->ew = calloc((size_t)L, sizeof *x->ew);
  if (!x->numel || !x->vsize || !x->r.u.full || !x->r.u.shard || !x->r.u.w ||
      !x->r.u.g || !x->ly || !x->ctx || !x->h || !x->kept || !x->ew)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_train_units(m, p, x->vp, x->numel, x->vsize);
  for (int u = 0; u < nu; u++) {
    x->r.u.shard[u] =
        (x->numel[u] + (size_t)x->vsize[u] - 1) / (size_t)x->vsize[u];
    x->r.u.full[u] = (size_t)x->vsize[u] * x->r.u.shard[u];
  }
  return PL_OK;
}

/* The MoE layer every MoE layer shares (train/step.c's pl_moe_cfg), its
 * chunks and bound into out; each layer's replay state; the head's. */
static pl_status layers_setup(rctx *x, bool worst, pl_plan_mem *out) {
  const pl_model_cfg *m = x->m;
  const pl_layout_plan *p = x->p;
  const pl_step_cfg *sc = x->sc;
  const int L = x->L;
  pl_moe_cfg *mcfg = &x->mcfg;
  *mcfg = pl_moe_cfg_default();
  mcfg->H = m->H, mcfg->I = m->I, mcfg->E = p->E_moe, mcfg->k = m->k;
  mcfg->dt = sc->dt, mcfg->variant = sc->dispatch, mcfg->knobs = sc->knobs;
  mcfg->c = sc->moe_c ? sc->moe_c : x->N;
  mcfg->K_max = sc->moe_K_max, mcfg->lanes = sc->moe_lanes;
  for (int l = 0; l < L; l++)
    x->nmoe += pl_model_layer_is_moe(m, l);
  if (x->nmoe) {
    PL_TRY(
        pl__moe_replay_make(mcfg, p->ep_span, x->N, x->c->imb, worst, &x->moe));
    out->K = x->moe.K;
    out->c_eff = x->moe.c_eff;
    if (pl_moe_variant_desc_of(sc->dispatch)->chunks)
      out->dispatch_bound =
          pl_moe_dispatch_bound(mcfg, p->ep_span, x->moe.c_eff);
  }
  for (int l = 0; l < L; l++) {
    const int is_moe = pl_model_layer_is_moe(m, l);
    const int keep = l < x->d->keep_all    ? PL_LAYER_KEEP_ALL
                     : l < x->d->keep_attn ? PL_LAYER_KEEP_ATTN
                                           : PL_LAYER_KEEP_NONE;
    x->ly[l] = (pl__layer_replay){
        .keep = keep,
        .N = x->N,
        .H = x->H,
        .D = p->D,
        .n_q = m->n_q,
        .n_kv = m->n_kv,
        .d = m->d,
        .es = x->es,
        .dt = sc->dt,
        .be = x->mc->backend,
        .ak = sc->attn,
        .I_s = is_moe ? (m->n_shared ? m->I_shared : 0) : m->I_dense,
        .E_route = is_moe ? p->E_route : 0,
        .k = m->k,
        .keep_ctx = !sc->moe_recompute,
        .moe = is_moe ? &x->moe : NULL};
    if (is_moe && p->ep_grouped) {
      size_t eoff[3];
      const size_t eu = pl__ep_unit(m->H, m->I, p->E_local, eoff);
      x->ly[l].ep_w = &x->ew[l];
      x->ly[l].ep_shard = (eu + (size_t)p->ep_vsize - 1) / (size_t)p->ep_vsize;
      x->ly[l].ep_full = (size_t)p->ep_vsize * x->ly[l].ep_shard;
    }
  }
  pl__head_replay_make(sc->dt, x->N, x->H, m->V, x->vp ? p->P : 1,
                       sc->head_block, &x->hd);
  return PL_OK;
}

/* The states: exact (train/describe.h), plus what a step leaves behind for
 * the next: the head's saved (m, log z) and the runner's loss scalar. */
static void replay_states(rctx *x, pl_plan_mem *out) {
  pl__sym_track *t = &x->t;
  const pl_train_desc *d = x->d;
  pl__sym_phase(t, "states", -1, NULL);
  for (int i = 0; i < d->n; i++)
    if (d->item[i].arena == PL_ARENA_DEVICE && d->item[i].kind == PL_DESC_STATE)
      (void)pl__sym_alloc(t, d->item[i].tag, state_term(d->item[i].tag),
                          d->item[i].bytes);
  (void)pl__sym_alloc(t, "activations", PL_TERM_OTHER, sizeof(float));
  if (x->hd.chunk == 0) /* Ring-DTP's saved (m, log z); the three-GEMM
                          head (chunk > 0) saves nothing */
    x->aux = pl__sym_alloc(t, "ce_state", PL_TERM_LOGITS, (size_t)x->N * 8);
  out->state = t->cur;
  pl__sym_reset_peak(t);
}

/* A micro-batch's embedding and the checkpoint runner's forward. */
static void replay_forward(rctx *x) {
  pl__sym_track *t = &x->t;
  replay *r = &x->r;
  const int L = x->L, sel = x->d->sco_layers;
  const size_t NHb = x->NHb;
  pl__sym_phase(t, "embedding", -1, NULL);
  acquire(r, 0);
  acquire(r, 1);
  x->x0 = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NHb);
  release(r, 0);
  x->dx0 = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NHb);
  /* the checkpoint runner's forward */
  x->h[0] = pl__sym_alloc(t, "boundary", PL_TERM_RESIDENT, NHb);
  for (int l = 0; l < L; l++) {
    pl__layer_replay *ly = &x->ly[l];
    pl__sym_phase(t, "forward", l, ly->E_route ? "moe" : "dense");
    x->h[l + 1] = pl__sym_alloc(t, l + 1 < L ? "boundary" : "output",
                                PL_TERM_RESIDENT, NHb);
    acquire(r, 1 + l);
    acquire(r, l + 1 < L ? 2 + l : L + 1);
    if (ly->ep_w) /* its expert unit, behind the attention half */
      x->ew[l] = pl__sym_alloc(t, "zero3", PL_TERM_UNITS, ly->ep_full * x->es);
    pl__layer_replay_forward(t, ly, &x->ctx[l], &x->kept[l]);
    if (l + 1 < L)
      release(r, 1 + l);
    if (l < sel)
      pl__sym_free(t, &x->h[l]);
  }
}

/* The head: final norm + vocabulary head (train/step.c head_run), its
 * gradient reduce-scattered, the last layer's gradient opened. */
static void replay_head(rctx *x, bool acc) {
  pl__sym_track *t = &x->t;
  replay *r = &x->r;
  const pl_step_cfg *sc = x->sc;
  const int L = x->L;
  const size_t NHb = x->NHb;
  pl__sym_phase(t, "head", -1, NULL);
  x->g1 = pl__sym_alloc(t, "grads_act", PL_TERM_ACTS, NHb);
  pl__sym_buf xf = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NHb);
  pl__sym_buf dxf = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NHb);
  pl__sym_buf dwb = {0};
  if (sc->dt == PL_F32)
    grad_acquire(r, L + 1);
  else
    dwb = pl__sym_alloc(t, "zero3_grads", PL_TERM_UNIT_GRADS,
                        (size_t)x->H *
                            (size_t)(x->vp ? x->p->v_cols : x->m->V) * x->es);
  pl__head_replay_run(t, &x->hd, &x->aux);
  if (sc->dt != PL_F32) {
    grad_acquire(r, L + 1);
    pl__sym_free(t, &dwb);
  }
  release(r, L + 1);
  grad_reduce(r, L + 1, acc);
  grad_acquire(r, L);
  if (x->mc->backend == PL_BACKEND_CUDA) {
    pl__sym_buf scr = pl__sym_alloc(t, "activations", PL_TERM_ACTS,
                                    pl__rms_scratch(x->N, x->H) * 4);
    pl__sym_free(t, &scr);
  }
  pl__sym_free(t, &xf);
  pl__sym_free(t, &dxf);
  pl__sym_free(t, &x->h[L]);
}

/* The backward: restores one layer ahead, each unit gathered again with the
 * previous one prefetched, its gradient opened, the layer recomputed and
 * backpropagated, the gradient reduce-scattered; then the embedding's. */
static void replay_backward(rctx *x, bool acc) {
  pl__sym_track *t = &x->t;
  replay *r = &x->r;
  const int L = x->L, sel = x->d->sco_layers;
  const size_t NHb = x->NHb;
  x->g0 = pl__sym_alloc(t, "grads_act", PL_TERM_ACTS, NHb);
  int restoring = -1;
  for (int l = L - 1; l >= 0; l--) {
    pl__layer_replay *ly = &x->ly[l];
    pl__sym_phase(t, "backward", l, ly->E_route ? "moe" : "dense");
    if (l < sel) {
      if (restoring != l)
        x->h[l] = pl__sym_alloc(t, "boundary", PL_TERM_RESTORED, NHb);
      restoring = -1;
    }
    if (l > 0 && l - 1 < sel) {
      x->h[l - 1] = pl__sym_alloc(t, "boundary", PL_TERM_RESTORED, NHb);
      restoring = l - 1;
    }
    acquire(r, 1 + l);
    if (l > 0)
      acquire(r, l);
    if (ly->ep_w) {
      x->ew[l] = pl__sym_alloc(t, "zero3", PL_TERM_UNITS, ly->ep_full * x->es);
      ly->ep_acc = acc;
    }
    grad_acquire(r, 1 + l);
    pl__layer_replay_backward(t, ly, &x->ctx[l], &x->kept[l]);
    release(r, 1 + l);
    grad_reduce(r, 1 + l, acc);
    pl__sym_free(t, &x->h[l]);
  }
  pl__sym_free(t, &x->g0);
  pl__sym_free(t, &x->g1);
  pl__sym_free(t, &x->x0);
  pl__sym_phase(t, "embedding backward", -1, NULL);
  grad_acquire(r, 0);
  grad_reduce(r, 0, acc);
  pl__sym_free(t, &x->dx0);
}

/* The replay's peaks and the rank's host bytes into out. */
static void export_result(rctx *x, pl_plan_mem *out) {
  const pl_train_desc *d = x->d;
  pl__sym_export(&x->t, out);
  memcpy(out->layer_high, x->bins.high, sizeof out->layer_high);
  out->N = x->N;
  out->sco_layers = d->sco_layers;
  out->params_rank = d->params_rank;
  out->host_pinned = d->host_state;
  out->host_optim = pl_train_desc_state(d, "optim", PL_ARENA_HOST);
  out->host_sco = pl_train_desc_state(d, "boundary", PL_ARENA_HOST);
  /* unpinned host bytes of a rank's state: per-token loss, router biases
   * and counts (the rest of the process is not modelled) */
  out->host_rank = d->host_state + (size_t)x->N * 4 +
                   (size_t)x->nmoe * (size_t)x->p->E_route * 12;
  const int gpn =
      x->mc->gpus_per_node < x->c->W ? x->mc->gpus_per_node : x->c->W;
  out->host_node = (size_t)gpn * out->host_rank;
}

/* One rank's step; worst: adversarial routing. */
static pl_status replay_rank(const pl_model_cfg *m, const pl_plan_cfg *c,
                             const pl_plan_machine *mc, int rank, bool worst,
                             pl_plan_mem *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(check_step(c));
  rctx *x = calloc(1, sizeof *x);
  if (!x)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, open_replay(m, c, mc, rank, x));
  PL_TRY_GOTO(st, done, layers_setup(x, worst, out));
  replay_states(x, out);
  for (int mi = 0; mi < c->sc.micro; mi++) {
    replay_forward(x);
    replay_head(x, mi > 0);
    replay_backward(x, mi > 0);
  }
  pl__sym_phase(&x->t, "optimizer", -1, NULL); /* no device transients */
  export_result(x, out);
done:
  close_replay(x);
  free(x);
  return st;
}

/* Ranks differ only in their vocabulary shard (pl_ce_shard: rank 0's is the
 * widest, so its head unit and gradient are the largest): rank < 0 replays
 * rank 0.  with_worst: also the adversarial routing. */
pl_status pl__plan_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                          const pl_plan_machine *mc, int rank, bool with_worst,
                          pl_plan_mem *out) {
  if (c->system != PL_PLAN_PLATEAU)
    return pl_plan_dry_measure(m, c, mc, out);
  if (rank < 0)
    rank = 0;
  PL_TRY(replay_rank(m, c, mc, rank, false, out));
  out->peak_rank = rank;
  out->dev_worst = 0;
  memset(out->layer_high_worst, 0, sizeof out->layer_high_worst);
  if (!with_worst)
    return PL_OK;
  pl_plan_mem *w = malloc(sizeof *w);
  if (!w)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, replay_rank(m, c, mc, rank, true, w));
  out->dev_worst = w->dev_peak;
  memcpy(out->layer_high_worst, w->layer_high, sizeof out->layer_high_worst);
done:
  free(w);
  return st;
}

pl_status pl_plan_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                         const pl_plan_machine *mc, int rank,
                         pl_plan_mem *out) {
  return pl__plan_memory(m, c, mc, rank, true, out);
}
