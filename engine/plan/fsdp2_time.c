/* fsdp2_time.c — the FSDP2 baseline in the planner (baselines/fsdp2:
 * torchtitan's FSDP2 + activation checkpointing + expert parallelism + context
 * parallelism + optional CPU offload, written in C above the engine): the
 * check of its configuration and its step time.  Its memory is not modelled
 * here: the baseline registers a measurement of itself on a dry device
 * (baselines/fsdp2/fsdp2_dry.c, pl_plan_set_dry_measure), which the planner
 * calls for every FSDP2 configuration (pl_plan_dry_measure).
 *
 * Layout: W ranks (W_v virtual: the one-GPU proxy, each rank one of a
 * W_v-rank run); CP consecutive ranks share a sequence (ring attention, the
 * load-balanced split, S divisible by 2·CP); every rank holds N = S/CP
 * tokens per micro-batch (the baseline runs one sequence per CP group per
 * micro-batch; more tokens per step are more micro-batches); EP ranks hold
 * disjoint expert shards (E/EP experts each); dense units are sharded over
 * W_v, a layer's experts over the W_v/EP ranks holding the same shard.
 * Units (fully_shard): the embedding, each decoder layer (its norms, QKV, O,
 * router and shared expert or dense FFN), each MoE layer's experts, [final
 * norm, head].
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
  if (c->sc.micro < 1)
    return pl_set_error(PL_EINVAL, "fsdp2: micro=%d: must be >= 1",
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

/* Sizes of the baseline at a configuration the time model reads. */
typedef struct f2dims {
  int Wv, ep_real, El, nmoe;
  int64_t N, H, V, nkd;
  size_t es;
} f2dims;

static void dims_of(const pl_model_cfg *m, const pl_plan_cfg *c, f2dims *d) {
  memset(d, 0, sizeof *d);
  d->Wv = c->lc.W_v ? c->lc.W_v : c->W;
  d->ep_real = c->W < c->ep ? c->W : c->ep;
  for (int l = 0; l < m->L; l++)
    d->nmoe += pl_model_layer_is_moe(m, l);
  d->El = d->nmoe ? m->E / c->ep : 0;
  d->N = c->S / c->cp, d->H = m->H, d->V = m->V;
  d->nkd = (int64_t)m->n_kv * m->d;
  d->es = pl_dtype_size(c->sc.dt);
}

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
               blocks = 2.0 * c->cp + 1, hbm = mc->hbm_gbs * 1e9;
  const double mf = blocks * cl * nq * (b + 8);
  const double mb =
      blocks * (cl * nq * (2 * b + 8 + b) + cl * (nq + 2 * nk) * (b + 8)) +
      (c->cp - 1) * 2.0 * (2 * cl) * nk * 12;
  *tf += mf / hbm;
  *tb += mb / hbm;
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
  /* attention of the rank's share of its CP group's sequence (T1): fwd =
   * 2·S²·d·n_q over cp ranks; its time forward and backward */
  const double fa = 2.0 * S * S * m->d * m->n_q / c->cp;
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
