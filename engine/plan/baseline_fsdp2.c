/* baseline_fsdp2.c — the FSDP2 baseline in the planner (baselines/fsdp2:
 * torchtitan's FSDP2 + activation checkpointing + expert parallelism + context
 * parallelism + optional CPU offload, written in C above the engine): its
 * memory per rank, replayed from the baseline's documented allocation
 * schedule (baselines/fsdp2/fsdp2.h, train/zero3.h, fsdp2_layer.h,
 * ring_attn.h, baselines/dense_ce.h) on the symbolic allocator, and its step
 * time.  The planner sits below the baseline and cannot include it: the
 * schedule is mirrored here, and baselines/fsdp2/test_mpi_fsdp2_plan.c runs
 * the real baseline against this replay, so an allocation changed there and
 * not here fails that test.
 *
 * Layout: W ranks (W_v virtual: the one-GPU proxy, each rank one of a
 * W_v-rank run); CP consecutive ranks share a sequence (ring attention, the
 * load-balanced split, S divisible by 2·CP); every rank holds N = mbs·S/CP
 * tokens per micro-batch (the baseline: mbs 1); EP ranks hold disjoint expert
 * shards (E/EP experts each); dense units are sharded over W_v, a layer's
 * experts over the W_v/EP ranks holding the same shard.  Units (fully_shard):
 * the embedding, each decoder layer (its norms, QKV, O, router and shared
 * expert or dense FFN, each parameter padded to 64 elements), each MoE
 * layer's experts, [final norm, head].
 *
 * Memory (the replay's assumptions):
 *  M1 states: every unit's fp32 shard of s_u = ⌈n_u / G_u⌉ elements, its
 *     gradient, m and v (16·Σ s_u) on the device, or pinned on the host with
 *     offload (CPUOffloadPolicy); the router biases (E_r·4 per MoE layer)
 *     and four N-element token buffers on the device; with the GPU optimizer
 *     the norm's chunk partials.
 *  M2 the step in the baseline's issue order, per micro-batch: the embedding
 *     gathered with layer 0 prefetched; each layer's units gathered (the
 *     next one prefetched; the last layer kept into its backward), its
 *     boundary (N·H·b), its forward keeping its set ("saved") or freeing it
 *     by the AC mode — full: every layer checkpointed; selective: layer l
 *     iff (l + 1) % ac_freq == 0 (the baseline's layer-selective mode, every
 *     other layer by default); none; the head: final norm, dense
 *     cross-entropy on the full logits (bf16 logits, then three N×V fp32 at
 *     its peak), the head's bf16 weight gradient beside its fp32 unsharded
 *     one; the backward: each layer's units gathered with the previous
 *     prefetched, their fp32 unsharded gradients, a checkpointed layer's
 *     forward again (its MoE context kept), the layer's gradients, ring
 *     attention's gathered K/V and fp32 accumulators, the reduce-scatter's
 *     shard; the embedding's fp32 gradient.  A gather holds its all-gather
 *     buffer (G_u·s_u·b) beside the unit until the copy-out, and with
 *     offload the shard's fp32 staging copy before it.
 *  M3 the MoE layer is ops/moe.h's ep variant (one chunk, the standard
 *     all-to-all, dropless) replayed as mem_ops.c replays it, under balanced
 *     routing (a rank receives as many routes as it sends; imb scales the
 *     receive); `worst`: every route of the EP group to this rank.
 *  M4 the optimizer allocates nothing on the device during a step (the GPU
 *     update is in place; the offloaded one runs on the host shards).
 *  M5 host per rank: 16·Σ s_u pinned with offload, else none.
 * The baseline differs from PyTorch's FSDP2 where fsdp2.h says so (fp32
 * unsharded gradients: 4 B/param of a unit in backward where autograd holds
 * 2; routed experts keep nothing H wide between forward and backward); this
 * model predicts the baseline.
 *
 * Time assumptions:
 *  T1 FLOPs per layer: dense GEMMs forward, backward (2×) and, in a
 *     checkpointed layer, the forward again; attention forward 1, backward
 *     2.5, the recompute 1 (fwd = 2·S²·d·n_q/CP per sequence), as the
 *     baseline runs it: with CP > 1 ring attention's blocks (ring_attn.h:
 *     2·CP − 1 full and 2 causal blocks of c = S/(2·CP) tokens, exactly the
 *     causal work, on our flash kernels at attn_fwd/bwd_tflops for length c)
 *     plus the HBM traffic of their f32 merges and accumulations; with
 *     CP = 1 one flash call of S tokens; with sdpa (PyTorch's FSDP2) at
 *     fsdp2_attn_tflops (SDPA fwd+bwd) for chunks of S/CP; the experts
 *     at fsdp2_expert_eff·gemm: forward 1, backward
 *     2 plus the gate/up recompute of the engine's MoE backward (2/3), the
 *     forward again when checkpointed; the head dense plus 24 bytes per
 *     logit of HBM traffic for the loss.
 *  T2 FSDP gathers and reduce-scatters (and with offload the fp32 shard's
 *     H2D per gather at h2d_gbs and the gradient's D2H at d2h_gbs) behind
 *     each layer's compute, exposed beyond it; exposed whole: the
 *     embedding's, and layer 0's first gather and last reduce (the step's
 *     first copy waits for nothing to hide behind, the optimizer waits for
 *     the last); the ring attention's K/V rotation behind the
 *     attention kernels; the EP all-to-alls exposed: 2 in the forward, 3 in
 *     the backward (x again, the gradient, its return), 2 more when the
 *     layer is recomputed.
 *  T3 optimizer: fused AdamW on the device (28 B/param of HBM traffic), or
 *     with offload on the host: the baseline's SIMD update at
 *     cpu_update_gparam_s (sdpa: PyTorch's fused CPU AdamW at
 *     fsdp2_cpu_adam_gparam_s) per node shared by its ranks, bounded by the
 *     node's host memory (host_dram_gbs) at 32 B/param: fp32 w, m, v, g
 *     read, w, m, v written, and the norm's read of g.
 *  T4 per collective call a fixed cost (coll_us). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/adamw_kernels.h"
#include "plan/plan_internal.h"

pl_status pl__fsdp2_check(const pl_model_cfg *m, const pl_plan_cfg *c) {
  PL_TRY(pl_model_cfg_check(m));
  if (c->W < 1)
    return pl_set_error(PL_EINVAL, "plan: W=%d GPUs: must be >= 1", c->W);
  const int Wv = c->lc.W_v ? c->lc.W_v : c->W;
  if (Wv < c->W || Wv % c->W)
    return pl_set_error(PL_EINVAL,
                        "fsdp2: W_v=%d over W=%d GPUs: the virtual world must "
                        "be a multiple of W",
                        c->lc.W_v, c->W);
  if (c->cp < 1 || (c->W % c->cp && Wv % ((int64_t)c->W * c->cp)))
    return pl_set_error(PL_EINVAL,
                        "fsdp2: cp=%d: must divide the W=%d GPUs (a real "
                        "group) or, times W, the W_v=%d of a proxy (a "
                        "virtual group)",
                        c->cp, c->W, Wv);
  if (c->S < 2 * c->cp || c->S % (2 * c->cp))
    return pl_set_error(PL_EINVAL,
                        "fsdp2: seq=%lld over cp=%d: the load-balanced split "
                        "needs a multiple of 2·cp",
                        (long long)c->S, c->cp);
  const int moe = m->E > 0 && m->dense_layers < m->L;
  if (c->ep < 1 || Wv % c->ep || (c->ep % c->W && c->W % c->ep) ||
      (moe && m->E % c->ep))
    return pl_set_error(PL_EINVAL,
                        "fsdp2: ep=%d: must divide the W_v=%d GPUs%s, and "
                        "divide or be a multiple of W=%d",
                        c->ep, Wv, moe ? " and the experts" : "", c->W);
  if (c->mbs < 1 || c->sc.micro < 1)
    return pl_set_error(PL_EINVAL, "fsdp2: mbs=%d micro=%d: both >= 1", c->mbs,
                        c->sc.micro);
  if ((unsigned)c->ac > PL_PLAN_AC_NONE || c->ac_freq < 0)
    return pl_set_error(PL_EINVAL,
                        "fsdp2: ac=%d (freq %d): full, selective or none",
                        (int)c->ac, c->ac_freq);
  if (c->sc.dt != PL_F32 && c->sc.dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "fsdp2: dtype %s: f32 or bf16",
                        pl_dtype_name(c->sc.dt));
  return PL_OK;
}

/* Is layer l checkpointed (recomputed in its backward)? */
static bool ckpt(const pl_plan_cfg *c, int l) {
  const int f = c->ac_freq > 0 ? c->ac_freq : 2;
  return c->ac == PL_PLAN_AC_FULL ||
         (c->ac == PL_PLAN_AC_SELECTIVE && (l + 1) % f == 0);
}

/* ---- the units (fsdp2_params.c) ---------------------------------------------
 */

#define ALIGN_EL 64
static size_t align_el(size_t n) {
  return (n + ALIGN_EL - 1) / ALIGN_EL * ALIGN_EL;
}

/* Sizes of the baseline at a configuration. */
typedef struct f2dims {
  int L, W, Wv, cp, ep, ep_real, El, E_r, nmoe, nunits;
  int64_t N, H, V, c_len, nqd, nkd, I;
  size_t es;
} f2dims;

static void dims_of(const pl_model_cfg *m, const pl_plan_cfg *c, f2dims *d) {
  memset(d, 0, sizeof *d);
  d->L = m->L, d->W = c->W, d->Wv = c->lc.W_v ? c->lc.W_v : c->W;
  d->cp = c->cp, d->ep = c->ep;
  d->ep_real = d->W < d->ep ? d->W : d->ep;
  for (int l = 0; l < m->L; l++)
    d->nmoe += pl_model_layer_is_moe(m, l);
  d->El = d->nmoe ? m->E / c->ep : 0;
  d->E_r = d->El * d->ep_real;
  d->nunits = m->L + 2 + d->nmoe;
  d->N = (int64_t)c->mbs * c->S / c->cp, d->H = m->H, d->V = m->V;
  d->c_len = d->N / 2;
  d->nqd = (int64_t)m->n_q * m->d, d->nkd = (int64_t)m->n_kv * m->d;
  d->I = m->I;
  d->es = pl_dtype_size(c->sc.dt);
}

/* The always-on SwiGLU width of layer l: the shared expert or the dense FFN. */
static int64_t swiglu_width(const pl_model_cfg *m, int l) {
  return pl_model_layer_is_moe(m, l) ? (m->n_shared ? m->I_shared : 0)
                                     : m->I_dense;
}

/* Unit u's elements and virtual group: 0 the embedding, 1..L the layers'
 * dense parts, L+1 [final norm, head], L+2.. the MoE layers' experts. */
static void unit_of(const pl_model_cfg *m, const f2dims *d, int u,
                    size_t *numel, size_t *vsize) {
  const size_t H = (size_t)d->H;
  *vsize = (size_t)d->Wv;
  if (u == 0) {
    *numel = (size_t)d->V * H;
  } else if (u == d->L + 1) {
    *numel = align_el(H) + H * (size_t)d->V;
  } else if (u <= d->L) {
    const int l = u - 1;
    const size_t I = (size_t)swiglu_width(m, l);
    const size_t qkv = (size_t)(d->nqd + 2 * d->nkd);
    size_t o = align_el(H) + align_el(H * qkv) + align_el((size_t)d->nqd * H) +
               align_el(H);
    if (pl_model_layer_is_moe(m, l))
      o += align_el(H * (size_t)d->E_r);
    if (I > 0)
      o += align_el(H * 2 * I) + align_el(I * H);
    *numel = o;
  } else {
    *numel = 3 * align_el((size_t)d->El * H * (size_t)d->I);
    *vsize = (size_t)(d->Wv / d->ep);
  }
}

static size_t shard_of(size_t numel, size_t vsize) {
  return (numel + vsize - 1) / vsize;
}

/* ---- the replay
 * --------------------------------------------------------------
 */

typedef struct f2rep {
  pl__sym_track *t;
  const pl_model_cfg *m;
  const pl_plan_cfg *c;
  f2dims d;
  pl_backend be;
  bool offload;
  size_t *numel, *vsize, *shard;
  int *xunit;                /* per layer: its experts' unit, or -1 */
  pl__sym_buf *full, *gfull; /* per unit: gathered, open gradient   */
  pl__moe_replay moe;
} f2rep;

/* train/zero3.c, fp32_master: the gather (all-gather buffer beside the unit
 * until the copy-out; the fp32 staging copy of an offloaded shard before it).
 */
static void prefetch(f2rep *r, int u) {
  pl__sym_track *t = r->t;
  if (u < 0 || r->full[u].live)
    return;
  const size_t s = r->shard[u];
  pl__sym_buf stage = {0};
  if (r->offload)
    stage = pl__sym_alloc(t, "fsdp_ag", PL_TERM_UNITS, s * 4);
  pl__sym_buf ag =
      pl__sym_alloc(t, "fsdp_ag", PL_TERM_UNITS, r->vsize[u] * s * r->d.es);
  pl__sym_free(t, &stage);
  r->full[u] = pl__sym_alloc(t, "zero3", PL_TERM_UNITS, r->numel[u] * r->d.es);
  pl__sym_free(t, &ag);
}

static void release(f2rep *r, int u) {
  if (u >= 0)
    pl__sym_free(r->t, &r->full[u]);
}

static void grad_acquire(f2rep *r, int u) {
  pl__sym_track *t = r->t;
  if (u >= 0 && !r->gfull[u].live)
    r->gfull[u] = pl__sym_alloc(t, "zero3_grads", PL_TERM_UNIT_GRADS,
                                r->vsize[u] * r->shard[u] * 4);
}

static void grad_reduce(f2rep *r, int u, bool acc) {
  pl__sym_track *t = r->t;
  if (u < 0 || !r->gfull[u].live)
    return;
  pl__sym_buf out =
      pl__sym_alloc(t, "zero3_grads", PL_TERM_UNIT_GRADS, r->shard[u] * 4);
  pl__sym_free(t, &r->gfull[u]);
  if (r->offload && acc) {
    pl__sym_buf sum =
        pl__sym_alloc(t, "zero3_grads", PL_TERM_UNIT_GRADS, r->shard[u] * 4);
    pl__sym_free(t, &sum);
  }
  pl__sym_free(t, &out);
}

/* ring_attn.c: the packed K, V and their all-gather over the group */
static pl__sym_buf gather_kv(f2rep *r) {
  pl__sym_track *t = r->t;
  const size_t kv = 2 * (size_t)r->d.N * (size_t)r->d.nkd * r->d.es;
  pl__sym_buf pack = pl__sym_alloc(t, "cp_kv", PL_TERM_ATTN, kv);
  pl__sym_buf all =
      pl__sym_alloc(t, "cp_kv", PL_TERM_ATTN, (size_t)r->d.cp * kv);
  pl__sym_free(t, &pack);
  return all;
}

static void ring_fwd(f2rep *r) {
  pl__sym_track *t = r->t;
  const f2dims *d = &r->d;
  pl__sym_buf all = gather_kv(r);
  pl__sym_buf oacc =
      pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN, (size_t)(d->N * d->nqd) * 4);
  pl__sym_buf ob = pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN,
                                 (size_t)(d->c_len * d->nqd) * d->es);
  pl__sym_buf lb = pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN,
                                 (size_t)d->c_len * (size_t)r->m->n_q * 4);
  pl__sym_free(t, &all), pl__sym_free(t, &oacc), pl__sym_free(t, &ob),
      pl__sym_free(t, &lb);
}

static size_t attn_ws(const f2rep *r, int64_t seq) {
  pl_attn_shape sh = {.batch = 1,
                      .seq = seq,
                      .n_q = r->m->n_q,
                      .n_kv = r->m->n_kv,
                      .head_dim = r->m->d,
                      .dtype = r->c->sc.dt,
                      .kernels = r->c->sc.attn};
  return pl__attn_ws(&sh, r->be);
}

static void ring_bwd(f2rep *r) {
  pl__sym_track *t = r->t;
  const f2dims *d = &r->d;
  const size_t kv4 = 2 * (size_t)(d->N * d->nkd) * 4;
  pl__sym_buf b[8];
  b[0] = gather_kv(r);
  b[1] = pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN, (size_t)(d->N * d->nqd) * 4);
  b[2] = pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN,
                       kv4); /* contribution, sent, received */
  b[3] = pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN, kv4);
  b[4] = pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN, kv4);
  b[5] = pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN,
                       (size_t)(d->c_len * d->nqd) * d->es);
  b[6] = pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN,
                       (size_t)(d->c_len * d->nkd) * d->es);
  b[7] = pl__sym_alloc(t, "cp_ring", PL_TERM_ATTN,
                       (size_t)(d->c_len * d->nkd) * d->es);
  pl__sym_buf ws =
      pl__sym_alloc(t, "attention", PL_TERM_ATTN, attn_ws(r, d->c_len));
  pl__sym_free(t, &ws);
  for (int i = 0; i < 8; i++)
    pl__sym_free(t, &b[i]);
}

/* fsdp2_layer.h's kept set of one layer */
enum {
  S_H,
  S_Q,
  S_K,
  S_V,
  S_O,
  S_LSE,
  S_Y1,
  S_H2,
  S_PR,
  S_IDX,
  S_W,
  S_GU,
  S_A,
  S_N
};
typedef struct f2saved {
  pl__sym_buf b[S_N], ctx;
} f2saved;

static void drop(pl__sym_track *t, f2saved *v) {
  for (int i = 0; i < S_N; i++)
    pl__sym_free(t, &v->b[i]);
  pl__sym_free(t, &v->ctx);
}

/* fsdp2_layer.c fwd(): the set tagged tag (saved or activations) */
static void layer_fwd(f2rep *r, int l, bool keep, bool keep_ctx, f2saved *v) {
  pl__sym_track *t = r->t;
  const f2dims *d = &r->d;
  const char *tag = keep ? "saved" : "activations";
  const int term = keep ? PL_TERM_RESIDENT : PL_TERM_ACTS;
  const size_t es = d->es, NH = (size_t)(d->N * d->H) * es,
               q = (size_t)(d->N * d->nqd) * es,
               k = (size_t)(d->N * d->nkd) * es;
  memset(v, 0, sizeof *v);
  v->b[S_H] = pl__sym_alloc(t, tag, term, NH);
  v->b[S_Q] = pl__sym_alloc(t, tag, term, q);
  v->b[S_K] = pl__sym_alloc(t, tag, term, k);
  v->b[S_V] = pl__sym_alloc(t, tag, term, k);
  v->b[S_O] = pl__sym_alloc(t, tag, term, q);
  v->b[S_LSE] =
      pl__sym_alloc(t, tag, term, (size_t)r->m->n_q * (size_t)d->N * 4);
  v->b[S_Y1] = pl__sym_alloc(t, tag, term, NH);
  if (d->cp > 1)
    ring_fwd(r);
  v->b[S_H2] = pl__sym_alloc(t, tag, term, NH);
  if (pl_model_layer_is_moe(r->m, l)) {
    const size_t nk = (size_t)d->N * (size_t)r->m->k * 4;
    v->b[S_PR] = pl__sym_alloc(t, tag, term, (size_t)d->N * (size_t)d->E_r * 4);
    v->b[S_IDX] = pl__sym_alloc(t, tag, term, nk);
    v->b[S_W] = pl__sym_alloc(t, tag, term, nk);
    pl__moe_replay_forward(t, &r->moe, &v->ctx);
    if (!keep_ctx)
      pl__sym_free(t, &v->ctx);
  }
  const int64_t I = swiglu_width(r->m, l);
  if (I > 0) {
    v->b[S_GU] = pl__sym_alloc(t, tag, term, (size_t)(d->N * 2 * I) * es);
    v->b[S_A] = pl__sym_alloc(t, tag, term, (size_t)(d->N * I) * es);
  }
}

/* fsdp2_layer.c pl__fsdp2_layer_backward */
static void layer_bwd(f2rep *r, int l, f2saved *v) {
  pl__sym_track *t = r->t;
  const f2dims *d = &r->d;
  const size_t es = d->es, NH = (size_t)(d->N * d->H) * es,
               q = (size_t)(d->N * d->nqd) * es,
               k = (size_t)(d->N * d->nkd) * es;
  if (ckpt(r->c, l)) { /* its forward again, the context kept */
    pl__sym_buf ytmp = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
    layer_fwd(r, l, false, true, v);
    pl__sym_free(t, &ytmp);
  }
  pl__sym_buf dh32 =
      pl__sym_alloc(t, "activations", PL_TERM_ACTS, (size_t)(d->N * d->H) * 4);
  pl__sym_buf dhe = {0}, dw = {0}, dlog = {0}, dhr = {0}, da = {0}, dgu = {0},
              scr = {0};
  if (pl_model_layer_is_moe(r->m, l)) {
    dhe = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
    dw = pl__sym_alloc(t, "router", PL_TERM_EXPERT,
                       (size_t)d->N * (size_t)r->m->k * 4);
    pl__moe_replay_backward(t, &r->moe);
    pl__sym_free(t, &v->ctx);
    dlog = pl__sym_alloc(t, "router", PL_TERM_EXPERT,
                         (size_t)d->N * (size_t)d->E_r * es);
    dhr = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
  }
  const int64_t I = swiglu_width(r->m, l);
  if (I > 0) {
    da = pl__sym_alloc(t, "activations", PL_TERM_ACTS, (size_t)(d->N * I) * es);
    dgu = pl__sym_alloc(t, "activations", PL_TERM_ACTS,
                        (size_t)(d->N * 2 * I) * es);
  }
  pl__sym_buf dh = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
  if (r->be == PL_BACKEND_CUDA)
    scr = pl__sym_alloc(t, "activations", PL_TERM_ACTS,
                        pl__rms_scratch(d->N, d->H) * 4);
  pl__sym_buf dy1 = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
  pl__sym_buf dO = pl__sym_alloc(t, "activations", PL_TERM_ACTS, q);
  pl__sym_buf dq = pl__sym_alloc(t, "activations", PL_TERM_ACTS, q);
  pl__sym_buf dk = pl__sym_alloc(t, "activations", PL_TERM_ACTS, k);
  pl__sym_buf dv = pl__sym_alloc(t, "activations", PL_TERM_ACTS, k);
  if (d->cp > 1) {
    ring_bwd(r);
  } else {
    pl__sym_buf ws =
        pl__sym_alloc(t, "attention", PL_TERM_ATTN, attn_ws(r, d->N));
    pl__sym_free(t, &ws);
  }
  pl__sym_buf *ps[] = {&dh, &dy1, &dhe, &dhr, &dlog, &da, &dgu,
                       &dO, &dq,  &dk,  &dv,  &dh32, &dw, &scr};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    pl__sym_free(t, ps[i]);
  drop(t, v);
}

/* baselines/dense_ce.c with dX and dW given (bf16: the logits upcast) */
static void dense_ce(f2rep *r) {
  pl__sym_track *t = r->t;
  const size_t n = (size_t)r->d.N, nv = n * (size_t)r->d.V;
  const bool bf = r->c->sc.dt == PL_BF16;
  pl__sym_buf stats = pl__sym_alloc(t, "ce_state", PL_TERM_LOGITS, 8), lb = {0},
              gb = {0};
  if (bf)
    lb = pl__sym_alloc(t, "logits", PL_TERM_LOGITS, nv * 2);
  pl__sym_buf lg = pl__sym_alloc(t, "logits", PL_TERM_LOGITS, nv * 4);
  pl__sym_free(t, &lb);
  pl__sym_buf lp = pl__sym_alloc(t, "logits", PL_TERM_LOGITS, nv * 4);
  pl__sym_free(t, &lg);
  pl__sym_buf g = pl__sym_alloc(t, "ce_state", PL_TERM_LOGITS, n * 4);
  pl__sym_buf gl = pl__sym_alloc(t, "logits", PL_TERM_LOGITS, nv * 4);
  pl__sym_buf gr = pl__sym_alloc(t, "logits", PL_TERM_LOGITS, nv * 4);
  pl__sym_free(t, &gl), pl__sym_free(t, &lp);
  if (bf) {
    gb = pl__sym_alloc(t, "logits", PL_TERM_LOGITS, nv * 2);
    pl__sym_free(t, &gr);
  }
  pl__sym_free(t, &gb), pl__sym_free(t, &gr), pl__sym_free(t, &g),
      pl__sym_free(t, &stats);
}

static void layer_prefetch(f2rep *r, int l) {
  prefetch(r, 1 + l);
  prefetch(r, r->xunit[l]);
}
static void layer_release(f2rep *r, int l) {
  release(r, 1 + l);
  release(r, r->xunit[l]);
}

/* fsdp2.c micro_batch(): one forward and backward */
static void micro_batch(f2rep *r, bool acc, f2saved *sv, pl__sym_buf *bnd) {
  pl__sym_track *t = r->t;
  const f2dims *d = &r->d;
  const int L = d->L, u_head = L + 1;
  const size_t NH = (size_t)(d->N * d->H) * d->es;
  pl__sym_phase(t, "embedding", -1, NULL);
  prefetch(r, 0);
  layer_prefetch(r, 0);
  bnd[0] = pl__sym_alloc(t, "boundary", PL_TERM_RESIDENT, NH);
  release(r, 0);
  for (int l = 0; l < L; l++) {
    pl__sym_phase(t, "forward", l,
                  pl_model_layer_is_moe(r->m, l) ? "moe" : "dense");
    if (l + 1 < L)
      layer_prefetch(r, l + 1);
    else
      prefetch(r, u_head);
    bnd[l + 1] = pl__sym_alloc(t, "boundary", PL_TERM_RESIDENT, NH);
    const bool keep = !ckpt(r->c, l);
    layer_fwd(r, l, keep, keep, &sv[l]);
    if (!keep)
      drop(t, &sv[l]);
    if (l + 1 < L)
      layer_release(r, l);
  }
  /* the head */
  pl__sym_phase(t, "head (dense CE)", -1, NULL);
  grad_acquire(r, u_head);
  pl__sym_buf xf = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
  pl__sym_buf dxf = pl__sym_alloc(t, "activations", PL_TERM_ACTS, NH);
  pl__sym_buf dwb = {0}, scr = {0};
  if (r->c->sc.dt != PL_F32)
    dwb = pl__sym_alloc(t, "zero3_grads", PL_TERM_UNIT_GRADS,
                        (size_t)d->H * (size_t)d->V * d->es);
  dense_ce(r);
  pl__sym_free(t, &dwb);
  pl__sym_buf dcur = pl__sym_alloc(t, "grads_act", PL_TERM_ACTS, NH);
  if (r->be == PL_BACKEND_CUDA)
    scr = pl__sym_alloc(t, "activations", PL_TERM_ACTS,
                        pl__rms_scratch(d->N, d->H) * 4);
  pl__sym_free(t, &scr), pl__sym_free(t, &xf), pl__sym_free(t, &dxf);
  release(r, u_head);
  grad_reduce(r, u_head, acc);
  pl__sym_free(t, &bnd[L]);
  /* the backward */
  for (int l = L - 1; l >= 0; l--) {
    pl__sym_phase(t, "backward", l,
                  pl_model_layer_is_moe(r->m, l) ? "moe" : "dense");
    layer_prefetch(r, l); /* gathered already but at the last layer */
    if (l > 0)
      layer_prefetch(r, l - 1);
    else
      prefetch(r, 0);
    grad_acquire(r, 1 + l);
    grad_acquire(r, r->xunit[l]);
    pl__sym_buf dx = pl__sym_alloc(t, "grads_act", PL_TERM_ACTS, NH);
    layer_bwd(r, l, &sv[l]);
    pl__sym_free(t, &dcur);
    dcur = dx;
    pl__sym_free(t, &bnd[l]);
    layer_release(r, l);
    grad_reduce(r, 1 + l, acc);
    grad_reduce(r, r->xunit[l], acc);
  }
  pl__sym_phase(t, "embedding backward", -1, NULL);
  prefetch(r, 0);
  grad_acquire(r, 0);
  release(r, 0);
  grad_reduce(r, 0, acc);
  pl__sym_free(t, &dcur);
}

/* One rank's step (ranks differ only by their routing). */
static pl_status replay(const pl_model_cfg *m, const pl_plan_cfg *c,
                        const pl_plan_machine *mc, bool worst,
                        pl_plan_mem *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(pl__fsdp2_check(m, c));
  pl__sym_track t;
  pl__sym_init(&t);
  f2rep r;
  memset(&r, 0, sizeof r);
  r.t = &t, r.m = m, r.c = c, r.be = mc->backend, r.offload = c->offload;
  dims_of(m, c, &r.d);
  const f2dims *d = &r.d;
  const int nu = d->nunits, L = d->L;
  r.numel = calloc((size_t)nu, sizeof(size_t));
  r.vsize = calloc((size_t)nu, sizeof(size_t));
  r.shard = calloc((size_t)nu, sizeof(size_t));
  r.full = calloc((size_t)nu, sizeof(pl__sym_buf));
  r.gfull = calloc((size_t)nu, sizeof(pl__sym_buf));
  r.xunit = calloc((size_t)L, sizeof(int));
  f2saved *sv = calloc((size_t)L, sizeof *sv);
  pl__sym_buf *bnd = calloc((size_t)L + 1, sizeof *bnd);
  pl_status st = PL_OK;
  if (!r.numel || !r.vsize || !r.shard || !r.full || !r.gfull || !r.xunit ||
      !sv || !bnd) {
    st = pl_set_error(PL_ENOMEM, "plan: host");
    goto done;
  }
  for (int l = 0, x = L + 2; l < L; l++)
    r.xunit[l] = pl_model_layer_is_moe(m, l) ? x++ : -1;
  size_t sum_s = 0, max_chunks = 0;
  for (int u = 0; u < nu; u++) {
    unit_of(m, d, u, &r.numel[u], &r.vsize[u]);
    r.shard[u] = shard_of(r.numel[u], r.vsize[u]);
    sum_s += r.shard[u];
    if (pl__adamw_nchunks(r.shard[u]) > max_chunks)
      max_chunks = pl__adamw_nchunks(r.shard[u]);
  }
  pl_moe_cfg mcfg = pl_moe_cfg_default(); /* r.moe points at it */
  if (d->nmoe) {
    mcfg.H = m->H, mcfg.I = m->I, mcfg.E = d->E_r, mcfg.k = m->k;
    mcfg.dt = c->sc.dt, mcfg.lanes = c->sc.moe_lanes;
    mcfg.variant = PL_MOE_EP, mcfg.knobs.native = true;
    mcfg.contiguous = false;
    st = pl__moe_replay_make(&mcfg, d->ep_real, d->N, c->imb, worst, &r.moe);
    if (st != PL_OK)
      goto done;
  }

  /* the states (M1) */
  pl__sym_phase(&t, "states", -1, NULL);
  if (!r.offload) {
    (void)pl__sym_alloc(&t, "weights", PL_TERM_WEIGHTS, sum_s * 4);
    (void)pl__sym_alloc(&t, "grads", PL_TERM_GRADS, sum_s * 4);
    (void)pl__sym_alloc(&t, "optim", PL_TERM_OPTIM, sum_s * 8);
    (void)pl__sym_alloc(&t, "optim", PL_TERM_OPTIM, max_chunks * 8 + 8);
  }
  (void)pl__sym_alloc(&t, "weights", PL_TERM_WEIGHTS,
                      (size_t)d->nmoe * (size_t)d->E_r * 4);
  (void)pl__sym_alloc(&t, "tokens", PL_TERM_OTHER, (size_t)d->N * 16);
  out->state = t.cur;
  pl__sym_reset_peak(&t);

  for (int mi = 0; mi < c->sc.micro; mi++)
    micro_batch(&r, mi > 0, sv, bnd);
  pl__sym_phase(&t, "optimizer", -1, NULL); /* M4: nothing on the device */

  pl__sym_export(&t, out);
  out->N = d->N;
  out->K = d->nmoe ? r.moe.K : 0;
  out->c_eff = d->nmoe ? r.moe.c_eff : 0;
  out->params_rank = (int64_t)sum_s;
  out->host_pinned = r.offload ? 16 * sum_s : 0; /* M5 */
  out->host_optim = out->host_pinned;
  /* unpinned host bytes of a rank's state: per-token loss and batch,
   * router biases and counts (the rest of the process is not modelled) */
  out->host_rank = out->host_pinned + (size_t)d->N * 12 +
                   (size_t)d->nmoe * (size_t)d->E_r * 12;
  const int gpn = mc->gpus_per_node < c->W ? mc->gpus_per_node : c->W;
  out->host_node = (size_t)gpn * out->host_rank;
done:
  pl__moe_replay_free(&r.moe);
  free(r.numel);
  free(r.vsize);
  free(r.shard);
  free(r.full);
  free(r.gfull);
  free(r.xunit);
  free(sv);
  free(bnd);
  return st;
}

pl_status pl_plan_fsdp2_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                               const pl_plan_machine *mc, pl_plan_mem *out) {
  PL_TRY(replay(m, c, mc, false, out));
  out->dev_worst = out->dev_peak;
  if (c->ep <= 1 || c->W <= 1)
    return PL_OK; /* every route local: the worst is the balanced */
  pl_plan_mem *w = malloc(sizeof *w);
  if (!w)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_status st = replay(m, c, mc, true, w);
  if (st == PL_OK)
    out->dev_worst = w->dev_peak; /* dropless: not bounded by a cap */
  free(w);
  return st;
}

/* the terms' formulas of this replay: track.c's table, its fsdp2 column */

/* ---- time ------------------------------------------------------------------
 */

static double pos(double x) {
  return x > 0 ? x : 0;
}

/* One layer's attention forward *tf and backward *tb (T1) on a rank, fa
 * the forward's FLOPs.  The baseline: CP = 1 one flash call of S tokens;
 * CP > 1 ring attention (ring_attn.h) per sequence: 2·CP − 1 full and 2
 * causal blocks of c = S/(2·CP) (their FLOPs sum to fa: the load-balanced
 * split runs exactly the causal work), each on the flash kernels at their
 * rate for length c (the full blocks', (2·CP − 1)/(2·CP) of fa, at the full
 * mask's attn_full_* rates, flat in c: a full block has no diagonal to
 * waste, and the rates are measured at the ring's block length), and in HBM the
 * forward's merge of each block into the f32 accumulator (o_blk read, o_acc
 * read and written: c·n_q·d·(b + 8)) and the backward's per block: its delta
 * pass (O, dO: 2·c·n_q·d·b), dQ workspace (zeroed, converted: c·n_q·d·(8 + b)),
 * the dQ and dK, dV accumulations (c·(n_q + 2·n_kv)·d·(b + 8)), and per step
 * the received dK|dV added (2·N·n_kv·d·12).  sdpa: PyTorch's SDPA at
 * fsdp2_attn_tflops (fwd+bwd) on chunks of S/CP. */
static void attn_times(const pl_model_cfg *m, const pl_plan_cfg *c,
                       const pl_plan_machine *mc, double fa, double *tf,
                       double *tb) {
  if (c->sdpa) {
    const double r =
        pl__attn_rate(mc, mc->fsdp2_attn_tflops, c->S / c->cp) * 1e12;
    *tf = fa / r;
    *tb = 2.5 * fa / r;
    return;
  }
  const int64_t len = c->cp > 1 ? c->S / (2 * c->cp) : c->S;
  *tf = fa / (pl__attn_rate(mc, mc->attn_fwd_tflops, len) * 1e12);
  *tb = 2.5 * fa / (pl__attn_rate(mc, mc->attn_bwd_tflops, len) * 1e12);
  if (c->cp == 1)
    return;
  if (mc->attn_full_fwd_tflops > 0 && mc->attn_full_bwd_tflops > 0) {
    /* the 2·CP − 1 full blocks, (2·CP − 1)/(2·CP) of the FLOPs, at the
     * full mask's rates (measured at a block's length: no ramp); the 2
     * causal blocks' 1/(2·CP) at the causal ones */
    const double x = (2.0 * c->cp - 1) / (2.0 * c->cp); /* full's share */
    *tf = (1 - x) * *tf + x * fa / (mc->attn_full_fwd_tflops * 1e12);
    *tb = (1 - x) * *tb + x * 2.5 * fa / (mc->attn_full_bwd_tflops * 1e12);
  }
  const double b = (double)pl_dtype_size(c->sc.dt), cl = (double)len,
               nq = (double)m->n_q * m->d, nk = (double)m->n_kv * m->d,
               blocks = 2.0 * c->cp + 1, hbm = mc->hbm_gbs * 1e9, seqs = c->mbs;
  const double mf = blocks * cl * nq * (b + 8);
  const double mb =
      blocks * (cl * nq * (2 * b + 8 + b) + cl * (nq + 2 * nk) * (b + 8)) +
      (c->cp - 1) * 2.0 * (2 * cl) * nk * 12;
  *tf += seqs * mf / hbm;
  *tb += seqs * mb / hbm;
}

/* The rank's terms of one step, per micro-batch but the optimizer. */
typedef struct f2time {
  double attn, dense, exp, mem, a2a, seq, hid_seq, units, hid_units, flops;
  int ncalls; /* the MoE layers' all-to-all calls */
} f2time;

/* One unit's FSDP communication (T2): its two gathers (forward and
 * backward) of n_el elements in bf16 over G ranks and its fp32
 * reduce-scatter; with offload the fp32 shard of s_el elements copied to
 * the device per gather (h2d_gbs) and its gradient back (d2h_gbs).  *edge:
 * what cannot overlap when the unit is the first gathered and the last
 * reduced (one gather, one reduce). */
static double unit_comm(const pl_plan_cfg *c, const pl_plan_machine *mc, int G,
                        double n_el, double s_el, double b, double *edge) {
  const double ag = pl__t_ring(mc, G, n_el * b),
               rs = pl__t_ring(mc, G, n_el * 4);
  double h2d = 0, d2h = 0;
  if (c->offload)
    h2d = s_el * 4 / (mc->h2d_gbs * 1e9), d2h = s_el * 4 / (mc->d2h_gbs * 1e9);
  if (edge)
    *edge = ag + h2d + rs + d2h;
  return 2 * (ag + h2d) + rs + d2h;
}

/* Layer l's compute and its communication's overlap (T1, T2) into *a:
 * fa the forward attention's FLOPs, ta_f/ta_b its times, t_ring the ring's
 * K/V rotation of one pass.  *edge: layer l's units' comm that cannot
 * overlap when it is the step's first and last (one gather, one reduce). */
static void layer_time(const pl_model_cfg *m, const pl_plan_cfg *c,
                       const pl_plan_machine *mc, const f2dims *d, int l,
                       double fa, double ta_f, double ta_b, double t_ring,
                       f2time *a, double *edge) {
  const pl_model_params pc = pl_model_count(m);
  const double N = (double)d->N, H = (double)d->H, b = (double)d->es;
  const double gemm = mc->gemm_tflops * 1e12, hbm = mc->hbm_gbs * 1e9;
  const double imb = c->imb >= 1 ? c->imb : 1;
  const int moe = pl_model_layer_is_moe(m, l);
  const double rec = ckpt(c, l) ? 1.0 : 0.0;
  const double a_layer = (1 + rec) * ta_f + ta_b;
  const double dw =
      (double)(pc.attn + (moe ? pc.router + pc.shared : pc.dense_ffn));
  const double tg = 2.0 * N * dw / (gemm * mc->dense_eff) * (3 + rec);
  double te = 0, mem = mc->mem_passes * N * H * b / hbm, a2a = 0;
  if (moe) {
    /* forward, backward 2×, the gate/up recompute 2/3, the forward again */
    const double fe = imb * N * 6.0 * m->k * H * (double)m->I;
    te = fe * (3 + 2.0 / 3 + rec) / (gemm * mc->fsdp2_expert_eff);
    a->flops += fe * (3 + 2.0 / 3 + rec);
    mem += 12.0 * m->k * N * H * b / hbm;
    a2a = (5 + 2 * rec) * imb * pl__t_a2a(mc, d->ep_real, N * m->k * H * b);
    a->ncalls += 5 + 2 * (int)rec;
  }
  a->flops += (3.5 + rec) * fa + (3 + rec) * 2.0 * N * dw;
  const double ring_exp = pos(t_ring - a_layer);
  a->attn += a_layer, a->dense += tg, a->exp += te, a->mem += mem;
  a->a2a += a2a, a->seq += ring_exp, a->hid_seq += t_ring - ring_exp;
  /* the dense unit over W (shards 1/W_v), the experts' over W/ep */
  const double du = moe ? (double)(pc.attn + pc.norms + pc.router + pc.shared)
                        : (double)(pc.attn + pc.norms + pc.dense_ffn);
  const double eu = moe ? (double)d->El * 3 * H * (double)m->I : 0;
  double ed = 0, ee = 0;
  const double comm = unit_comm(c, mc, c->W, du, du / d->Wv, b, &ed) +
                      (moe ? unit_comm(c, mc, c->W / d->ep_real, eu,
                                       eu / (d->Wv / c->ep), b, &ee)
                           : 0);
  *edge = ed + ee;
  /* behind the layer's compute: all but the edge of the first layer (the
   * step's edges are exposed by the caller) */
  const double behind = comm - (l == 0 ? *edge : 0);
  const double e = pos(behind - (a_layer + tg + te + mem));
  a->units += e, a->hid_units += behind - e;
}

/* The optimizer (T3): fused AdamW on the device (28 B/param of HBM), or on
 * the host at the node's CPU rate shared by its ranks (ours the SIMD update,
 * PyTorch's its fused CPU AdamW), bounded by the node's host memory: per
 * parameter the update's fp32 w, m, v, g read and w, m, v written, and the
 * norm's pass over g (32 B). */
static double optim_time(const pl_model_cfg *m, const pl_plan_cfg *c,
                         const pl_plan_machine *mc, const f2dims *d) {
  const double pr = (double)pl_model_count(m).total / d->Wv;
  if (!c->offload)
    return 28 * pr / (mc->hbm_gbs * 1e9);
  const int gpn = mc->gpus_per_node < c->W ? mc->gpus_per_node : c->W;
  const double rate = c->sdpa ? mc->fsdp2_cpu_adam_gparam_s
                      : mc->cpu_update_gparam_s > 0 ? mc->cpu_update_gparam_s
                                                    : mc->cpu_adam_gparam_s;
  return fmax(pr / (rate * 1e9 / gpn),
              gpn * pr * 32 / (mc->host_dram_gbs * 1e9));
}

/* The step's parts from its terms: mic micro-batches of a, the head t_head,
 * the edges' exposed comm t_edge, the optimizer t_opt; collective calls (3
 * per unit, the MoE all-to-alls, the ring's 3 hops per step per layer) at
 * coll_us (T4). */
static void step_parts(const pl_model_cfg *m, const pl_plan_cfg *c,
                       const pl_plan_machine *mc, const f2dims *d,
                       const f2time *a, double t_head, double t_edge,
                       double t_opt, int cp_real, pl_plan_time *out) {
  const double mic = c->sc.micro;
  double *part = out->part_s;
  part[PL_TPART_ATTN] = mic * a->attn;
  part[PL_TPART_DENSE] = mic * a->dense;
  part[PL_TPART_EXPERT] = mic * a->exp;
  part[PL_TPART_HEAD] = mic * t_head;
  part[PL_TPART_MEM] = mic * a->mem;
  part[PL_TPART_OPTIM] = t_opt;
  part[PL_TPART_A2A_MOE] = mic * a->a2a;
  part[PL_TPART_A2A_SEQ] = mic * a->seq;
  part[PL_TPART_UNITS] = mic * (a->units + t_edge);
  const double calls = c->W > 1
                           ? mic * (3.0 * (m->L + 2 + d->nmoe) + a->ncalls +
                                    (cp_real ? 3.0 * (c->cp - 1) * m->L : 0)) +
                                 3
                           : 0;
  part[PL_TPART_OVERHEAD] =
      (mc->step_overhead_ms + mic * 3.0 * m->L * mc->layer_overhead_ms) * 1e-3 +
      calls * mc->coll_us * 1e-6;
  out->comm_s = part[PL_TPART_A2A_MOE] + part[PL_TPART_A2A_SEQ] +
                part[PL_TPART_UNITS] + calls * mc->coll_us * 1e-6;
  out->hidden_s[PL_TPART_UNITS] = mic * a->hid_units;
  out->hidden_s[PL_TPART_A2A_SEQ] = mic * a->hid_seq;
  for (int i = 0; i < PL_TPART_COUNT; i++)
    out->step_s += part[i];
  out->tok_s_gpu = mic * (double)d->N / out->step_s;
  out->tflops_gpu = out->tok_s_gpu * pl_model_flops_per_token(m, c->S) / 1e12;
  out->mfu = out->tflops_gpu / mc->gemm_tflops;
  out->flops_rank = mic * a->flops;
}

pl_status pl__fsdp2_time(const pl_model_cfg *m, const pl_plan_cfg *c,
                         const pl_plan_machine *mc, pl_plan_time *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(pl__fsdp2_check(m, c));
  f2dims d;
  dims_of(m, c, &d);
  const double N = (double)d.N, H = (double)d.H, b = (double)d.es,
               S = (double)c->S, V = (double)d.V;
  /* attention of the rank's share of mbs sequences (T1): fwd = 2·S²·d·n_q
   * per sequence over cp ranks; its time forward and backward */
  const double fa = c->mbs * 2.0 * S * S * m->d * m->n_q / c->cp;
  double ta_f, ta_b;
  attn_times(m, c, mc, fa, &ta_f, &ta_b);
  /* a virtual CP group (a proxy) moves nothing: its stand-ins are local */
  const int cp_real = c->cp > 1 && c->W % c->cp == 0;
  double bw_r = mc->ib_gbs * 1e9, lat_r = mc->ib_lat_us * 1e-6;
  if (c->cp <= mc->gpus_per_node)
    bw_r = mc->nvl_gbs * 1e9, lat_r = mc->nvl_lat_us * 1e-6;
  const double ring = 4.0 * (c->cp - 1) * N / c->cp * 2 * (double)d.nkd * b;
  const double t_ring = cp_real ? ring / bw_r + 3.0 * (c->cp - 1) * lat_r : 0;
  f2time a;
  memset(&a, 0, sizeof a);
  double edge0 = 0, edge;
  for (int l = 0; l < m->L; l++) {
    layer_time(m, c, mc, &d, l, fa, ta_f, ta_b, t_ring, &a, &edge);
    if (l == 0)
      edge0 = edge;
  }
  /* the head and the loss (T1) */
  const double t_head =
      6.0 * N * H * V / (mc->gemm_tflops * 1e12 * mc->head_eff) +
      24.0 * N * V / (mc->hbm_gbs * 1e9);
  a.flops += 6.0 * N * H * V;
  /* exposed: the edges of the embedding's unit and layer 0's (the step's
   * first gathers, its last reduces); the embedding's backward gather is
   * prefetched behind layer 0's backward */
  const double emb = (double)pl_model_count(m).embed;
  double edge_e;
  const double comm_e = unit_comm(c, mc, c->W, emb, emb / d.Wv, b, &edge_e);
  a.hid_units += comm_e - edge_e;
  const double t_edge = edge_e + edge0;
  step_parts(m, c, mc, &d, &a, t_head, t_edge, optim_time(m, c, mc, &d),
             cp_real, out);
  return PL_OK;
}
