/* fsdp2.c — the FSDP2-equivalent baseline (torchtitan's FSDP2 + activation
 * checkpointing + expert parallelism + context parallelism + optional CPU
 * offload; baselines/fsdp2 reproduces it in C), modelled analytically: its
 * memory per rank and its step time.  This file is the whole FSDP2 model;
 * nothing of plateau's replay is used, so it can be checked against the
 * baseline on its own.
 *
 * Layout: W ranks; CP ranks share a sequence (ring attention, the causal
 * load-balanced split, S divisible by 2·CP); every rank holds N = mbs·S/CP
 * tokens per micro-batch; EP ranks hold disjoint expert shards (E/EP
 * experts each); FSDP shards every parameter over all W ranks (the dense
 * ones over dp_shard·cp = W, the experts over the W/EP ranks sharing a
 * shard).  Units (fully_shard): the embedding, each decoder layer (its
 * experts a unit of their own, gathered with it), the final norm + head.
 *
 * Memory assumptions (torchtitan's defaults, PyTorch's allocations):
 *  M1 mixed precision param bf16, reduce fp32: the sharded parameters are
 *     fp32 (4 B/param), their gradients fp32 (4), AdamW's m and v fp32 (8):
 *     16 B per parameter / W on the device ("weights" 4, "grads" 4,
 *     "optim" 8); with CPU offload (CPUOffloadPolicy, pinned) all of it is
 *     on the host and the device holds none of it.
 *  M2 gathered units in bf16: the unit in use and the next one prefetched
 *     (2 B/param of each); the head unit is not resharded after forward
 *     (torchtitan's default for [norm, output]): it stays gathered from its
 *     forward to its backward.
 *  M3 a unit's backward: the unsharded bf16 gradient (2 B/param) and the
 *     fp32 reduce-scatter input (4 B/param) at once.
 *  M4 activation checkpointing: full — each layer keeps its input N·H·b;
 *     selective (torchtitan's op SAC) — also q, k, v, the attention output
 *     and its LSE, and half of the FFN's matmul outputs; none — every
 *     layer's whole forward set (M5).
 *  M5 one layer's forward set as autograd saves it: attention — the norm
 *     output, q, k, v, RoPE'd q and k, o, LSE (fp32), the projection output;
 *     MoE — the norm output, fp32 router scores (N·E·4, twice), the
 *     permuted routes, the all-to-all receive, the experts' gate/up and
 *     activation (N·k·3I), their output, the return and the weighted
 *     combine (N·k·H each), the shared expert (N·3I_s); dense — N·(H + 3I).
 *     The backward of a layer holds its recomputed set plus gradients: three
 *     N·H, dq/dk/dv, the attention's fp32 dQ accumulator, and the experts'
 *     N·k·(H + 2I) gradient buffers.  Balanced routing (imb scales the
 *     receive), dropless.
 *  M6 ring attention: K and V chunks double-buffered (forward), with dK, dV
 *     in fp32 travelling in the backward.
 *  M7 the loss on full logits: dense cross-entropy as PyTorch runs it, its
 *     peak three N×V fp32 tensors (logits, log-probabilities, the gradient;
 *     baselines/dense_ce.c), while the L saved layer inputs, the gathered
 *     head and the last layer's unit are live; the head's backward adds
 *     its unsharded gradient (M3).
 *  M8 peak = persistent + the max over phases: the last layer's forward,
 *     the loss, the last layer's backward (every saved input still live),
 *     the optimizer (no transient modelled).
 *  M9 host per rank: with offload 16 B/param / W pinned (M1); without, 0.
 * Time assumptions:
 *  T1 FLOPs: forward, the recompute of AC (full: every layer; selective:
 *     the matmuls it does not save, half; none: nothing), backward (2×);
 *     attention at fsdp2_attn_tflops (PyTorch SDPA) for chunks of S/CP;
 *     experts at fsdp2_expert_eff·gemm; the head dense plus 24 bytes per
 *     logit of HBM traffic for the loss.
 *  T2 FSDP gathers and reduce-scatters (and with offload the fp32 shard's
 *     H2D per gather and the gradient's D2H) behind each layer's compute,
 *     exposed beyond it; the ring attention's K/V rotation behind the
 *     attention kernels; the EP all-to-alls (dispatch + combine, forward,
 *     recompute, backward) exposed.
 *  T3 optimizer: fused AdamW on the device (28 B/param of HBM traffic), or
 *     with offload torch's fused CPU AdamW at fsdp2_cpu_adam_gparam_s per
 *     node shared by its ranks, bounded by host memory bandwidth.
 *  T4 per collective call a fixed cost (coll_us). */
#include <math.h>
#include <string.h>

#include "plan/plan_internal.h"

pl_status pl__fsdp2_check(const pl_model_cfg *m, const pl_plan_cfg *c) {
  PL_TRY(pl_model_cfg_check(m));
  if (c->W < 1)
    return pl_set_error(PL_EINVAL, "plan: W=%d GPUs: must be >= 1", c->W);
  if (c->cp < 1 || c->W % c->cp)
    return pl_set_error(PL_EINVAL, "fsdp2: cp=%d: must divide the W=%d GPUs",
                        c->cp, c->W);
  if (c->S < 2 * c->cp || c->S % (2 * c->cp))
    return pl_set_error(PL_EINVAL,
                        "fsdp2: seq=%lld over cp=%d: the load-balanced split "
                        "needs a multiple of 2·cp",
                        (long long)c->S, c->cp);
  const int moe = m->E > 0 && m->dense_layers < m->L;
  if (moe && (c->ep < 1 || c->W % c->ep || m->E % c->ep))
    return pl_set_error(PL_EINVAL,
                        "fsdp2: ep=%d: must divide the W=%d GPUs and E=%d",
                        c->ep, c->W, m->E);
  if (c->mbs < 1 || c->sc.micro < 1)
    return pl_set_error(PL_EINVAL, "fsdp2: mbs=%d micro=%d: both >= 1", c->mbs,
                        c->sc.micro);
  if ((unsigned)c->ac > PL_PLAN_AC_NONE)
    return pl_set_error(PL_EINVAL, "fsdp2: ac=%d: full, selective or none",
                        (int)c->ac);
  return PL_OK;
}

typedef struct fshape {
  double N, H, V, b, layer_u[2], emb_u, head_u, theta;
  double fwd_moe, fwd_dense, bwd_moe, bwd_dense, saved_moe, saved_dense;
  double attn_fwd_buf, attn_bwd_buf;
  int moe_layers;
} fshape;

/* per-layer activation sets (M4, M5, M6); [0] dense layer, [1] MoE layer */
static void shape_of(const pl_model_cfg *m, const pl_plan_cfg *c, fshape *f) {
  memset(f, 0, sizeof *f);
  const pl_model_params pc = pl_model_count(m);
  const double N = (double)c->mbs * (double)c->S / c->cp, H = (double)m->H,
               b = 2, k = m->k, I = (double)m->I, E = m->E;
  const double nq = (double)m->n_q * m->d, nk = (double)m->n_kv * m->d;
  const double imb = c->imb >= 1 ? c->imb : 1;
  f->N = N, f->H = H, f->V = (double)m->V, f->b = b,
  f->theta = (double)pc.total;
  const double Is = m->n_shared ? (double)m->I_shared * m->n_shared : 0;
  /* units (M2): dense part of a layer, and its experts over the EP shard */
  const double dense_moe = (double)(pc.attn + pc.norms + pc.router + pc.shared);
  const double dense_d = (double)(pc.attn + pc.norms + pc.dense_ffn);
  f->layer_u[0] = dense_d;
  f->layer_u[1] = dense_moe + (E > 0 ? E / c->ep * 3 * H * I : 0);
  f->emb_u = (double)pc.embed;
  f->head_u = (double)(pc.head + pc.final_norm);
  for (int l = 0; l < m->L; l++)
    f->moe_layers += pl_model_layer_is_moe(m, l);
  /* M5 forward sets */
  const double attn_set =
      N * (3 * H + nq + 2 * nk + (nq + nk) + nq) * b + N * m->n_q * 4;
  const double moe_set = N * H * b + 2 * N * E * 4 +
                         N * k * H * b * (1 + imb + 1 + 1 + 1) +
                         imb * N * k * 3 * I * b + N * (3 * Is + H) * b;
  const double dense_set = N * (H + 3 * (double)m->I_dense) * b + N * H * b;
  f->fwd_moe = attn_set + moe_set;
  f->fwd_dense = attn_set + dense_set;
  /* backward gradients beside the recomputed set */
  const double g_attn = 3 * N * H * b + N * (nq + 2 * nk) * b + N * nq * 4;
  f->bwd_moe = g_attn + imb * N * k * (H + 2 * I) * b;
  f->bwd_dense = g_attn + N * 3 * (double)m->I_dense * b;
  /* M4 saved per layer */
  const double in = N * H * b;
  const double sel_attn = N * (nq + 2 * nk + nq) * b + N * m->n_q * 4;
  if (c->ac == PL_PLAN_AC_FULL) {
    f->saved_moe = f->saved_dense = in;
  } else if (c->ac == PL_PLAN_AC_SELECTIVE) {
    f->saved_moe = in + sel_attn +
                   0.5 * (imb * N * k * (2 * I + H) * b + N * (3 * Is) * b);
    f->saved_dense = in + sel_attn + 0.5 * N * 3 * (double)m->I_dense * b;
  } else {
    f->saved_moe = f->fwd_moe;
    f->saved_dense = f->fwd_dense;
  }
  /* M6 ring attention buffers */
  f->attn_fwd_buf = c->cp > 1 ? 2 * 2 * N * nk * b : 0;
  f->attn_bwd_buf = c->cp > 1 ? 2 * 2 * N * nk * (b + 4) : 0;
}

/* Record a phase's live set; the peak keeps the largest. */
static void phase(pl_plan_mem *out, const char *name, const double *term) {
  double tot = 0;
  for (int i = 0; i < PL_TERM_COUNT; i++)
    tot += term[i];
  for (int i = 0; i < PL_TERM_COUNT; i++)
    if ((size_t)term[i] > out->term_peak[i])
      out->term_peak[i] = (size_t)term[i];
  if ((size_t)tot <= out->dev_peak)
    return;
  out->dev_peak = (size_t)tot;
  snprintf(out->peak_phase, sizeof out->peak_phase, "%s", name);
  for (int i = 0; i < PL_TERM_COUNT; i++)
    out->term[i] = (size_t)term[i];
}

static const char *const fterm[PL_TERM_COUNT] = {
    "fp32 parameter shard 4·Θ/W (M1; 0 with offload)",
    "fp32 gradient shard 4·Θ/W (M1; 0 with offload)",
    "AdamW m, v 8·Θ/W (M1; 0 with offload)",
    "ring attention's K/V chunks in flight (M6)",
    "- (the EP buffers are in a layer's set, M5)",
    "dense CE on full logits: 3·N·V·4 (M7)",
    "-",
    "saved layer inputs (and SAC's saves), all layers (M4)",
    "gathered bf16 units: current, next, the head (M2)",
    "unsharded bf16 gradient + fp32 reduce-scatter input (M3)",
    "a layer's forward set and its gradients (M5)",
    "-",
    "inputs and labels"};

const char *pl_plan_fsdp2_term_formula(int t) {
  return t >= 0 && t < PL_TERM_COUNT ? fterm[t] : "?";
}

/* tags of the FSDP2 model, one per term */
static const char *const ftag[PL_TERM_COUNT] = {
    "weights",     "grads",  "optim",    "attention", "dispatch",
    "logits",      "-",      "boundary", "zero3",     "zero3_grads",
    "activations", "expert", "tokens"};

pl_status pl_plan_fsdp2_memory(const pl_model_cfg *m, const pl_plan_cfg *c,
                               const pl_plan_machine *mc, pl_plan_mem *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(pl__fsdp2_check(m, c));
  fshape f;
  shape_of(m, c, &f);
  const double pr = f.theta / c->W, b = f.b, L = m->L;
  double base[PL_TERM_COUNT] = {0};
  if (!c->offload) {
    base[PL_TERM_WEIGHTS] = 4 * pr;
    base[PL_TERM_GRADS] = 4 * pr;
    base[PL_TERM_OPTIM] = 8 * pr;
  }
  base[PL_TERM_OTHER] = 2 * f.N * 4; /* inputs, labels */
  double s = 0;
  for (int i = 0; i < PL_TERM_COUNT; i++)
    s += base[i];
  out->state = (size_t)s;
  const int last_moe = pl_model_layer_is_moe(m, m->L - 1);
  const double lu = f.layer_u[last_moe],
               saved_last = last_moe ? f.saved_moe : f.saved_dense;
  double saved_all = 0;
  for (int l = 0; l < m->L; l++)
    saved_all += pl_model_layer_is_moe(m, l) ? f.saved_moe : f.saved_dense;
  const double off_copy = c->offload ? 4 * lu / c->W : 0; /* the shard's H2D */
  double t[PL_TERM_COUNT];
  /* the last layer's forward */
  memcpy(t, base, sizeof t);
  t[PL_TERM_RESIDENT] = saved_all;
  t[PL_TERM_UNITS] = (lu + f.head_u) * b + off_copy;
  t[PL_TERM_ACTS] = (last_moe ? f.fwd_moe : f.fwd_dense) - saved_last;
  t[PL_TERM_ATTN] = f.attn_fwd_buf;
  phase(out, "forward last layer", t);
  /* the loss (M7) */
  memcpy(t, base, sizeof t);
  t[PL_TERM_RESIDENT] = saved_all;
  t[PL_TERM_UNITS] = (f.head_u + lu) * b;
  t[PL_TERM_ACTS] = 2 * f.N * f.H * b;
  t[PL_TERM_LOGITS] = 12 * f.N * f.V;
  phase(out, "loss (dense logits)", t);
  /* the head's backward: its unsharded gradient (M3) */
  t[PL_TERM_LOGITS] = 2 * f.N * f.V; /* the bf16 logits' gradient */
  t[PL_TERM_UNIT_GRADS] = f.head_u * (2 + 4);
  phase(out, "head backward", t);
  /* the last layer's backward */
  memcpy(t, base, sizeof t);
  t[PL_TERM_RESIDENT] = saved_all;
  t[PL_TERM_UNITS] = 2 * lu * b + off_copy;
  t[PL_TERM_UNIT_GRADS] = lu * (2 + 4);
  /* what AC did not save of its forward set (recomputed now; none with no
   * AC: it is all saved, in RESIDENT) and the gradients */
  t[PL_TERM_ACTS] =
      (last_moe ? f.fwd_moe + f.bwd_moe : f.fwd_dense + f.bwd_dense) -
      saved_last;
  t[PL_TERM_ATTN] = f.attn_bwd_buf;
  phase(out, "backward last layer", t);
  /* the optimizer */
  memcpy(t, base, sizeof t);
  phase(out, "optimizer", t);
  /* tags: one per term, at the peak */
  for (int i = 0; i < PL_TERM_COUNT; i++) {
    if (i == PL_TERM_RESTORED)
      continue;
    out->at_peak[out->n_tags] = (pl_tag_bytes){ftag[i], out->term[i]};
    out->tag_peak[out->n_tags] = (pl_tag_bytes){ftag[i], out->term_peak[i]};
    out->n_tags++;
  }
  out->dev_worst = out->dev_peak; /* dropless EP: not bounded */
  out->N = (int64_t)f.N;
  out->K = 1;
  out->c_eff = (int64_t)f.N;
  out->params_rank = (int64_t)pr;
  out->host_pinned = c->offload ? (size_t)(16 * pr) : 0;
  out->host_optim = out->host_pinned;
  out->host_rank = out->host_pinned;
  const int gpn = mc->gpus_per_node < c->W ? mc->gpus_per_node : c->W;
  out->host_node = (size_t)gpn * out->host_rank;
  (void)L;
  return PL_OK;
}

static double pos(double x) {
  return x > 0 ? x : 0;
}

pl_status pl__fsdp2_time(const pl_model_cfg *m, const pl_plan_cfg *c,
                         const pl_plan_machine *mc, pl_plan_time *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(pl__fsdp2_check(m, c));
  fshape f;
  shape_of(m, c, &f);
  const double N = f.N, H = f.H, b = f.b, S = (double)c->S;
  const double gemm = mc->gemm_tflops * 1e12, hbm = mc->hbm_gbs * 1e9;
  const double imb = c->imb >= 1 ? c->imb : 1;
  const double rec = c->ac == PL_PLAN_AC_FULL        ? 1.0
                     : c->ac == PL_PLAN_AC_SELECTIVE ? 0.5
                                                     : 0.0;
  const pl_model_params pc = pl_model_count(m);
  const double nq = (double)m->n_q * m->d, nk = (double)m->n_kv * m->d;
  /* attention of the rank's share of mbs sequences (T1): fwd = 2·S²·d·n_q
   * per sequence over cp ranks */
  const double fa = c->mbs * 2.0 * S * S * m->d * m->n_q / c->cp;
  const double ra =
      pl__attn_rate(mc, mc->fsdp2_attn_tflops, c->S / c->cp) * 1e12;
  const double a_layer = (c->ac == PL_PLAN_AC_FULL ? 4.5 : 3.5) * fa / ra;
  const double ring =
      c->cp > 1 ? 4.0 * (c->cp - 1) * N / c->cp * 2 * nk * b : 0; /* M6 */
  double bw_r, lat_r;
  if (c->cp <= mc->gpus_per_node)
    bw_r = mc->nvl_gbs * 1e9, lat_r = mc->nvl_lat_us * 1e-6;
  else
    bw_r = mc->ib_gbs * 1e9, lat_r = mc->ib_lat_us * 1e-6;
  const double t_ring = ring / bw_r + 3.0 * (c->cp - 1) * lat_r;
  const double ring_exp = pos(t_ring - a_layer);
  double t_attn = 0, t_dense = 0, t_exp = 0, t_mem = 0, t_a2a = 0, t_units = 0,
         hid_units = 0, t_seq = 0, hid_seq = 0;
  for (int l = 0; l < m->L; l++) {
    const int moe = pl_model_layer_is_moe(m, l);
    const double dw =
        (double)(pc.attn + (moe ? pc.router + pc.shared : pc.dense_ffn));
    const double g = 2.0 * N * dw / (gemm * mc->dense_eff);
    const double tg = g * (3 + rec);
    double te = 0, mem = mc->mem_passes * N * H * b / hbm, a2a = 0;
    if (moe) {
      te = imb * N * 6.0 * m->k * H * (double)m->I * (3 + rec) /
           (gemm * mc->fsdp2_expert_eff);
      mem += 12.0 * m->k * N * H * b / hbm;
      a2a = (c->ac == PL_PLAN_AC_NONE ? 4 : 6) * imb *
            pl__t_a2a(mc, c->ep, N * m->k * H * b);
    }
    t_attn += a_layer;
    t_dense += tg;
    t_exp += te;
    t_mem += mem;
    t_a2a += a2a;
    t_seq += ring_exp;
    hid_seq += t_ring - ring_exp;
    /* FSDP comm behind the layer (T2): gathers fwd + bwd, the reduce-scatter;
     * the experts' unit over W/ep ranks, the dense part over W */
    const double du = moe ? (double)(pc.attn + pc.norms + pc.router + pc.shared)
                          : (double)(pc.attn + pc.norms + pc.dense_ffn);
    const double eu = moe ? (double)m->E / c->ep * 3 * H * (double)m->I : 0;
    double comm = 2 * pl__t_ring(mc, c->W, du * b) +
                  pl__t_ring(mc, c->W, du * 4) +
                  2 * pl__t_ring(mc, c->W / c->ep, eu * b) +
                  pl__t_ring(mc, c->W / c->ep, eu * 4);
    if (c->offload)
      comm += 3 * (du / c->W + eu / (c->W / c->ep)) * 4 /
              (fmin(mc->h2d_gbs, mc->d2h_gbs) * 1e9);
    const double compute = a_layer + tg + te + mem;
    const double e = pos(comm - compute);
    t_units += e;
    hid_units += comm - e;
  }
  /* the head and the loss (T1), the embedding's and head's units */
  const double t_head =
      6.0 * N * H * f.V / (gemm * mc->head_eff) + 24.0 * N * f.V / hbm;
  t_units +=
      2 * pl__t_ring(mc, c->W, f.emb_u * b) + pl__t_ring(mc, c->W, f.emb_u * 4);
  /* the optimizer (T3) */
  const double pr = f.theta / c->W;
  const int gpn = mc->gpus_per_node < c->W ? mc->gpus_per_node : c->W;
  double t_opt;
  if (c->offload)
    t_opt = fmax(pr / (mc->fsdp2_cpu_adam_gparam_s * 1e9 / gpn),
                 gpn * pr * 32 / (mc->host_dram_gbs * 1e9));
  else
    t_opt = 28 * pr / hbm;
  const double mic = c->sc.micro;
  double *part = out->part_s;
  part[PL_TPART_ATTN] = mic * t_attn;
  part[PL_TPART_DENSE] = mic * t_dense;
  part[PL_TPART_EXPERT] = mic * t_exp;
  part[PL_TPART_HEAD] = mic * t_head;
  part[PL_TPART_MEM] = mic * t_mem;
  part[PL_TPART_OPTIM] = t_opt;
  part[PL_TPART_A2A_MOE] = mic * t_a2a;
  part[PL_TPART_A2A_SEQ] = mic * t_seq;
  part[PL_TPART_UNITS] = mic * t_units;
  /* collective calls: FSDP 3 per unit, 6 all-to-alls per MoE layer, the
   * ring's 3 hops per step per layer */
  const double calls = c->W > 1 ? mic * (3.0 * (m->L + 2) + 6.0 * f.moe_layers +
                                         3.0 * (c->cp - 1) * m->L) +
                                      3
                                : 0;
  part[PL_TPART_OVERHEAD] =
      (mc->step_overhead_ms + mic * 3.0 * m->L * mc->layer_overhead_ms) * 1e-3 +
      calls * mc->coll_us * 1e-6;
  out->hidden_s[PL_TPART_UNITS] = mic * hid_units;
  out->hidden_s[PL_TPART_A2A_SEQ] = mic * hid_seq;
  for (int i = 0; i < PL_TPART_COUNT; i++)
    out->step_s += part[i];
  out->tok_s_gpu = mic * N / out->step_s;
  out->tflops_gpu = out->tok_s_gpu * pl_model_flops_per_token(m, c->S) / 1e12;
  out->mfu = out->tflops_gpu / mc->gemm_tflops;
  out->flops_rank =
      mic *
      (m->L * (fa * (c->ac == PL_PLAN_AC_FULL ? 4.5 : 3.5)) +
       (3 + rec) * 2.0 * N * (double)pc.active_nohead + 6.0 * N * H * f.V);
  (void)nq;
  return PL_OK;
}
