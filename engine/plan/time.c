/* time.c — the step time of plateau's composed step (pl_plan_time_predict)
 * from the machine's rates, and the communication primitives both systems'
 * models use.
 *
 * Compute (per rank, per micro-batch; the MoE layers at the pace of the
 * rank the router skews toward, rank_load: imb× the balanced expert rows
 * under plain EP, balanced once LLEP spreads them):
 *   attention   L · (2 · F_fwd / r_fwd(S) + 2.5 · F_fwd / r_bwd(S)),
 *               F_fwd = 2·S²·d·n_q / D (the rank's n_q/D heads over the whole
 *               sequence; forward, the checkpoint's recompute, backward);
 *   dense GEMMs 8 · N · (QKV, O, router, shared / dense FFN parameters) per
 *               layer (forward, recompute: 2 each; backward: 4);
 *   experts     22 · k · H · I per token and MoE layer (forward 6; backward
 *               16 with the inner recompute of G and U), 28 when the routing
 *               context is recomputed (the MoE forward again);
 *   head        8 · H · V per token (logits, their replay in the backward,
 *               dX, dW) + 16 bytes per logit of memory traffic;
 *   memory      mem_passes · N·H·b per layer, 12 · k·N·H·b per MoE layer
 *               (gathers, permutations, combines), over HBM.
 * Communication and its overlap:
 *   ZeRO-3      the next unit's bf16 gather behind this layer's forward; in
 *               backward the previous unit's gather and this unit's f32
 *               reduce-scatter behind its backward; exposed = what exceeds
 *               the layer's compute; the embedding's gather (first) and
 *               reduce-scatter (last) exposed;
 *   dispatch    5 all-to-alls of N·k·H·b per MoE layer (forward dispatch
 *               and return, backward x, dout and return) over the ranks
 *               the dispatch spans (W, or Ep with expert groups);
 *               pipelined_llep hides all but one chunk's share behind the
 *               other chunks' expert GEMMs; ep and llep expose all of it;
 *   expert units (expert groups, Ep < W: train/epgroups.h) per MoE layer
 *               the unit's bf16 gather over its W / Ep replica ranks
 *               (stride Ep: across nodes once W exceeds a node) beside the
 *               next dense unit's behind the layer's forward, in backward
 *               its gather and f32 reduce-scatter beside the dense ones
 *               behind the layer's backward; 3 calls each;
 *   Ulysses     8·(n_q + max(n_kv, D))·N·d·b per layer through all-to-alls over
 * D, exposed (on the compute stream); Ring-DTP    P − 1 hops forward and
 * backward beside the strips; SCO         each selected boundary's copy beside
 * its layer (D2H in the forward, H2D in the backward), exposed beyond the
 * layer. A virtual D- or P-group (a proxy, train/layout.h) has no all-to-all,
 * hop or call: its stand-ins are local.  comm_s sums the exposed communication
 * (dispatch, Ulysses, units, Ring-DTP's exposed hops, the calls);
 * pl_plan_proxy_comm predicts the W_v-rank run a proxy plays and gives its
 * communication less the proxy's own.
 * Kept activations (train/step.h keep): a layer keeping its attention
 * output and LSE skips the recompute's attention forward (F_fwd / r_fwd(S))
 * and, with D > 1, its 4 Ulysses all-to-alls; one keeping its whole
 * attention half also skips the recompute's QKV and O GEMMs (2 · N ·
 * attention parameters) and half the recompute's elementwise passes.
 * Optimizer (after the backward, exposed): resident parameters (state in
 * HBM) at 30 bytes each over HBM (master, m, v read and written, the f32
 * gradient read, the bf16 weight written), on their own stream beside the
 * streamed ones (the longer of the two counts); the streamed: stream — the
 * host-link floor max(12Θ/h2d, 12Θ/d2h, 24Θ/both) or a measured rate,
 * bounded by the node's host memory (24 B per parameter for every rank of
 * the node);
 * hybrid — the CPU share beside it in the ratio of the two rates; cpu — the
 * SIMD CPU update plus the gradient and weight copies.
 * Plus fixed costs per step and per layer pass, and per collective call
 * (coll_us: launch, the host agreements of the MoE layer, the wait for the
 * slowest rank): per MoE layer 5 + 14 per chunk (4 forward, 10 backward;
 * 4 more and 3 once with the routing context recomputed), 3 per ZeRO-3
 * unit, 16 per layer with Ulysses, two per Ring-DTP hop and 2 for its
 * statistics, 5 per step (token checks, loss, bias loads, norm). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ce.h"
#include "ops/ring_dtp.h"
#include "plan/plan_internal.h"
#include "train/describe.h"
#include "train/epgroups.h"

static const char *const tpart_names[PL_TPART_COUNT] = {
    "attention", "dense",   "experts", "head", "memory",  "optimizer",
    "a2a_moe",   "a2a_seq", "units",   "host", "overhead"};

const char *pl_plan_tpart_name(int p) {
  return p >= 0 && p < PL_TPART_COUNT ? tpart_names[p] : "?";
}

/* A ring over G ranks Ep apart (an expert unit's replicas): NVLink while
 * the G·stride ranks it spans fit a node, else the network. */
static double t_ring_strided(const pl_plan_machine *mc, int G, int stride,
                             double bytes) {
  if (G <= 1 || bytes <= 0)
    return 0;
  double bw, lat;
  pl__link_of(mc, G * stride, mc->nccl_gbs, &bw, &lat);
  return bytes * (G - 1) / G / bw + (G - 1) * lat;
}

static double pos(double x) {
  return x > 0 ? x : 0;
}

/* What the steps of a prediction share: the inputs, the step's description
 * and its derived sizes, the per-layer compute times the overlaps are held
 * against, and each step's results. */
typedef struct tctx {
  const pl_model_cfg *m;
  const pl_plan_cfg *c;
  const pl_plan_machine *mc;
  const pl_train_desc *d;
  const pl_layout_plan *p;
  const pl_step_cfg *sc;
  int vp, L, W, D, P, d_comm, p_comm;
  double N, H, b, S, gemm, hbm, imb;
  size_t *numel; /* the units' sizes and virtual sizes (pl_train_units) */
  int *vsize;
  double fa, attn_w, ex_fl; /* attention forward FLOPs, attention weights,
                               expert FLOPs per token */
  double *tf, *tb;          /* per layer: forward, backward compute */
  /* layers_time */
  double t_attn, t_dense, t_exp, t_mem, t_moe_exposed, t_moe_hidden, t_seq;
  int nmoe, K;
  /* head_time */
  double t_head_c, t_ring, ring_exposed;
  /* units_time */
  double t_units, t_units_hid;
  int Gr;
  /* host_time, optim_time */
  double t_host, t_host_hid, t_opt;
} tctx;

/* The load of the rank the router skews toward (cfg imb, its share of the
 * routes over the balanced one) after the dispatch: plain EP, and LLEP
 * below its threshold λ (it keeps the native placement), take it whole; LLEP
 * at or above λ spreads it over the group (the least-loaded plan, capacity
 * alpha × the mean: the rank's load balanced). */
static double rank_load(const pl_plan_cfg *c) {
  const double imb = c->imb >= 1 ? c->imb : 1;
  const pl_llep_knobs *kn = &c->sc.knobs;
  const bool plans = pl_moe_variant_desc_of(c->sc.dispatch)->plans;
  if (!plans || kn->native || (kn->lambda > 0 && imb < kn->lambda))
    return imb;
  return 1;
}

/* The step's description and its sizes into t (t->d, t->numel, t->vsize
 * allocated: free_ctx). */
static pl_status open_ctx(const pl_model_cfg *m, const pl_plan_cfg *c,
                          const pl_plan_machine *mc, tctx *t) {
  memset(t, 0, sizeof *t);
  t->m = m, t->c = c, t->mc = mc;
  pl_train_desc *d = malloc(sizeof *d);
  if (!d)
    return pl_set_error(PL_ENOMEM, "plan: host");
  t->d = d;
  PL_TRY(pl_train_describe(m, &c->lc, c->W, 0, c->S, &c->sc, mc->backend, d));
  const pl_layout_plan *p = t->p = &d->plan;
  const pl_step_cfg *sc = t->sc = &c->sc;
  const pl_head_ops *head = sc->head ? sc->head : &pl_head_ring;
  t->vp = head->vocab_parallel, t->L = m->L, t->W = p->W, t->D = p->D;
  t->P = t->vp ? p->P : 1;
  /* a virtual group's stand-ins are local: no all-to-all, hop or call */
  t->d_comm = t->D > 1 && !p->d_virtual;
  t->p_comm = t->P > 1 && !p->p_virtual;
  t->N = (double)p->N, t->H = (double)m->H,
  t->b = (double)pl_dtype_size(sc->dt);
  t->S = (double)p->S, t->gemm = mc->gemm_tflops * 1e12;
  t->hbm = mc->hbm_gbs * 1e9, t->imb = rank_load(c);
  const int nu = t->L + 2;
  t->numel = calloc((size_t)nu, sizeof *t->numel);
  t->vsize = calloc((size_t)nu, sizeof *t->vsize);
  t->tf = calloc((size_t)t->L, sizeof(double));
  t->tb = calloc((size_t)t->L, sizeof(double));
  if (!t->numel || !t->vsize || !t->tf || !t->tb)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_train_units(m, p, t->vp, t->numel, t->vsize);
  const double H = t->H;
  t->fa = 2.0 * t->S * t->S * m->d * m->n_q / t->D;
  t->attn_w = H * (m->n_q + 2.0 * m->n_kv) * m->d + m->n_q * m->d * H;
  t->ex_fl = (sc->moe_recompute ? 28.0 : 22.0) * m->k * H * m->I;
  return PL_OK;
}

static void free_ctx(tctx *t) {
  free(t->tf), free(t->tb), free(t->numel), free(t->vsize);
  free((pl_train_desc *)t->d);
}

/* Per layer: the forward and backward compute (attention, GEMMs, experts,
 * memory passes) into tf, tb and the parts' sums, and the all-to-alls of
 * the dispatch and of Ulysses. */
static void layers_time(tctx *t) {
  const pl_model_cfg *m = t->m;
  const pl_plan_machine *mc = t->mc;
  const pl_layout_plan *p = t->p;
  const pl_step_cfg *sc = t->sc;
  const pl_train_desc *d = t->d;
  const double N = t->N, H = t->H, b = t->b, gemm = t->gemm, hbm = t->hbm,
               imb = t->imb, fa = t->fa, attn_w = t->attn_w;
  const double ra_f = pl__attn_rate(mc, mc->attn_fwd_tflops, p->S) * 1e12,
               ra_b = pl__attn_rate(mc, mc->attn_bwd_tflops, p->S) * 1e12;
  /* a chunking dispatch hides all but one chunk's all-to-alls */
  const bool chunks = pl_moe_variant_desc_of(sc->dispatch)->chunks;
  int K = 1;
  int64_t c_eff = p->N;
  pl_moe_variant_chunking(sc->dispatch, p->N, sc->moe_c ? sc->moe_c : p->N,
                          sc->moe_K_max, &K, &c_eff);
  t->K = K;
  for (int l = 0; l < t->L; l++) {
    const int moe = pl_model_layer_is_moe(m, l);
    t->nmoe += moe;
    const double Is =
        moe ? (m->n_shared ? (double)m->I_shared : 0) : (double)m->I_dense;
    const double dw = attn_w + (moe ? H * p->E_route : 0) + 3.0 * H * Is;
    const double a_f = fa / ra_f, a_b = 2.5 * fa / ra_b;
    const double g_f = 2.0 * N * dw / (gemm * mc->dense_eff);
    double e_f = 0, e_b = 0, mem = mc->mem_passes * N * H * b / hbm;
    if (moe) {
      const double e_all = imb * N * t->ex_fl / (gemm * mc->expert_eff);
      e_f = e_all * 6.0 / (sc->moe_recompute ? 28.0 : 22.0);
      e_b = e_all - e_f;
      mem += 12.0 * m->k * N * H * b / hbm;
      /* dispatch: 5 all-to-alls over the EP group (the W ranks, or the
       * Ep of an expert group) */
      const double tc = 5.0 * imb * pl__t_a2a(mc, p->ep_span, N * m->k * H * b);
      double exposed = tc;
      if (chunks && K > 1)
        exposed = fmax(tc - (e_f + e_b) * (K - 1) / K, tc / K);
      t->t_moe_exposed += exposed;
      t->t_moe_hidden += tc - exposed;
    }
    /* forward: attention, GEMMs, experts, memory; the recompute repeats it
     * in the backward, minus the experts' forward when the context is kept
     * and minus what the layer keeps (the file comment) */
    const int k_attn = l < d->keep_attn, k_all = l < d->keep_all;
    const double g_att = 2.0 * N * attn_w / (gemm * mc->dense_eff);
    const double skip = (k_attn ? a_f : 0) + (k_all ? g_att + mem / 8 : 0);
    t->tf[l] = a_f + g_f + e_f + mem / 4;
    t->tb[l] = a_f + a_b + 3.0 * g_f + e_b + mem * 3 / 4 - skip;
    t->t_attn += (k_attn ? 1 : 2) * a_f + a_b;
    t->t_dense += 4 * g_f - (k_all ? g_att : 0);
    t->t_exp += e_f + e_b;
    t->t_mem += mem - (k_all ? mem / 8 : 0);
    if (t->d_comm)
      /* 16 all-to-alls (forward 4, recompute 4, backward 8) moving
       * 8·(n_q + n_kv')·N·d·b in all, n_kv' = max(n_kv, D) (key/value
       * heads replicated past D = n_kv); 12 when the attention is kept */
      t->t_seq += (k_attn ? 12.0 : 16.0) *
                  pl__t_a2a(mc, t->D,
                            (m->n_q + fmax(m->n_kv, t->D)) * N * m->d * b / 2);
  }
}

/* The head: four GEMMs of 2·N·H·V (the blocked meetings recompute their
 * strips) and the strips' passes; at P = 1 three GEMMs (pl_dtp_run's token
 * chunks), the chunk's logit passes and dW read and written once per chunk;
 * Ring-DTP's hops beside the strips. */
/* What Ring-DTP runs for a head of n rows (ops/ring_dtp.h, ops/ce.h): the
 * widest vocabulary shard (pl_ce_shard: the first), whether the weights
 * move (P > 1 and auto mode resolved so: pl_dtp_mode_resolve), and at
 * P = 1 the rows of the three-GEMM schedule's chunk (0: the blocked
 * meetings). */
typedef struct head_shape {
  int64_t vmax, chunk;
  bool move_w;
} head_shape;

static head_shape head_shape_of(pl_dtype dt, int64_t n, int64_t h, int64_t v,
                                int P, int64_t block) {
  head_shape o = {0};
  int64_t c0;
  pl_ce_shard(v, P, 0, &c0, &o.vmax);
  o.move_w = P > 1 && pl_dtp_mode_resolve(PL_DTP_AUTO, n, o.vmax) ==
                          PL_DTP_MOVE_W; /* every rank's batch is n */
  if (P == 1) {
    int64_t vb = block > 0 ? block : pl_ce_default_block(dt);
    vb = vb > o.vmax ? o.vmax : vb;
    pl_ce_problem q = {
        .dt = dt, .n = n, .h = h, .v = v, .block = vb < 1 ? 1 : vb};
    o.chunk = pl_ce_head3_rows(&q);
  }
  return o;
}

static void head_time(tctx *t) {
  const pl_model_cfg *m = t->m;
  const pl_plan_machine *mc = t->mc;
  const pl_step_cfg *sc = t->sc;
  const double N = t->N, H = t->H, b = t->b;
  const int P = t->P;
  const head_shape h1 =
      head_shape_of(sc->dt, t->p->N, m->H, m->V, P, sc->head_block);
  t->t_head_c = 8.0 * N * H * m->V / (t->gemm * mc->head_eff) +
                16.0 * N * (double)m->V / t->hbm;
  if (h1.chunk > 0) {
    const double K = ceil(N / (double)h1.chunk);
    t->t_head_c =
        6.0 * N * H * m->V / (t->gemm * mc->head_eff) +
        (6.0 * b * N * (double)m->V + K * 2 * b * H * (double)m->V) / t->hbm;
  }
  if (t->p_comm) {
    double hf, hb;
    if (!h1.move_w)
      hf = N * (H * b + 16), hb = N * (H * b + 12 + H * 4);
    else
      hf = H * h1.vmax * b, hb = H * h1.vmax * (b + 4);
    double bw, lat;
    pl__link_of(mc, P, mc->nvl_gbs, &bw, &lat);
    t->t_ring = (P - 1) * ((hf + hb) / bw + 2 * lat);
  }
  t->ring_exposed = pos(t->t_ring - t->t_head_c * (P - 1) / P);
}

/* ZeRO-3 units over the zero group (the W real ranks), and the expert units
 * of expert groups over their W / Ep replica ranks, behind the layers. */
static void units_time(tctx *t) {
  const pl_model_cfg *m = t->m;
  const pl_plan_machine *mc = t->mc;
  const pl_layout_plan *p = t->p;
  const size_t *numel = t->numel;
  const int L = t->L, W = t->W, P = t->P, vp = t->vp;
  const double b = t->b;
  const int Gz = W;
  const double g_emb = pl__t_ring(mc, Gz, (double)numel[0] * b);
  t->t_units +=
      g_emb + pl__t_ring(mc, Gz, (double)numel[0] * 4); /* first, last */
  /* expert units (expert groups): over the W / Ep replica ranks */
  const int Gr = t->Gr = p->ep_grouped ? W / p->Ep : 1;
  double eu_full = 0;
  if (p->ep_grouped) {
    size_t eoff[3];
    const size_t eu = pl__ep_unit(m->H, m->I, p->E_local, eoff);
    eu_full = (double)p->ep_vsize *
              (double)((eu + (size_t)p->ep_vsize - 1) / (size_t)p->ep_vsize);
  }
  for (int l = 0; l < L; l++) {
    const int nx = l + 1 < L ? 2 + l : L + 1; /* the unit prefetched */
    const int hv = nx == L + 1 && vp;
    const int eu_l = p->ep_grouped && pl_model_layer_is_moe(m, l);
    const double eg = eu_l ? t_ring_strided(mc, Gr, p->Ep, eu_full * b) : 0,
                 ers = eu_l ? t_ring_strided(mc, Gr, p->Ep, eu_full * 4) : 0;
    const double gnext =
        pl__t_ring(mc, hv ? W / P : Gz, (double)numel[nx] * b) + eg;
    const double fw = pos(gnext - t->tf[l]);
    const double gprev =
        (l > 0 ? pl__t_ring(mc, Gz, (double)numel[l] * b) : 0) + eg;
    const double rs = pl__t_ring(mc, Gz, (double)numel[1 + l] * 4) + ers;
    const double bw_ = pos(gprev + rs - t->tb[l]);
    t->t_units += fw + bw_;
    t->t_units_hid += gnext - fw + gprev + rs - bw_;
  }
}

/* SCO copies beside their layers. */
static void host_time(tctx *t) {
  const double nhb = t->N * t->H * t->b;
  for (int l = 0; l < t->d->sco_layers && l < t->L; l++) {
    const double d2h = nhb / (t->mc->d2h_gbs * 1e9),
                 h2d = nhb / (t->mc->h2d_gbs * 1e9);
    const double e = pos(d2h - t->tf[l]) + pos(h2d - t->tb[l]);
    t->t_host += e;
    t->t_host_hid += d2h + h2d - e;
  }
}

/* The optimizer: the streamed parameters, then the resident ones. */
static void optim_time(tctx *t) {
  const pl_plan_machine *mc = t->mc;
  const pl_step_cfg *sc = t->sc;
  const double th = (double)(t->d->params_rank - t->d->resident_params);
  const int gpn = mc->gpus_per_node < t->W ? mc->gpus_per_node : t->W;
  const double link =
      fmax(fmax(12 * th / (mc->h2d_gbs * 1e9), 12 * th / (mc->d2h_gbs * 1e9)),
           24 * th / (mc->bidir_gbs * 1e9));
  double r_gpu = mc->optim_gparam_s > 0 ? mc->optim_gparam_s * 1e9 : th / link;
  const double r_cpu = mc->cpu_adam_gparam_s * 1e9 / gpn;
  const pl_optim_ops *opt = sc->optim ? sc->optim : &pl_optim_stream;
  double t_opt, dram_b;
  if (opt == &pl_optim_hybrid) {
    double f = sc->oo.share > 0 ? sc->oo.share : r_cpu / (r_cpu + r_gpu);
    t_opt = fmax(th * (1 - f) / r_gpu, th * f / r_cpu);
    dram_b = 24 * (1 - f) + 30 * f;
  } else if (opt->host_update) {
    t_opt = th / r_cpu + 4 * th / (mc->d2h_gbs * 1e9) +
            2 * th / (mc->h2d_gbs * 1e9);
    dram_b = 36;
  } else {
    t_opt = th / r_gpu;
    dram_b = 24;
  }
  t_opt = fmax(t_opt, gpn * th * dram_b / (mc->host_dram_gbs * 1e9));
  if (th <= 0)
    t_opt = 0;
  /* the resident update runs on its own stream beside the link-bound
   * streamed pipeline */
  t->t_opt = fmax(t_opt, 30.0 * (double)t->d->resident_params / t->hbm);
}

/* The parts of a step of c.sc.micro micro-batches, the collective calls'
 * cost (the file comment), the exposed communication and the hidden
 * parts, the step's time and its rates. */
static void assemble(const tctx *t, pl_plan_time *out) {
  const pl_model_cfg *m = t->m;
  const pl_plan_machine *mc = t->mc;
  const pl_layout_plan *p = t->p;
  const pl_step_cfg *sc = t->sc;
  const int L = t->L, W = t->W, P = t->P, K = t->K, nmoe = t->nmoe;
  double *part = out->part_s, *hid = out->hidden_s;
  const double mic = t->c->sc.micro;
  part[PL_TPART_ATTN] = mic * t->t_attn;
  part[PL_TPART_DENSE] = mic * t->t_dense;
  part[PL_TPART_EXPERT] = mic * t->t_exp;
  part[PL_TPART_HEAD] = mic * (t->t_head_c + t->ring_exposed);
  part[PL_TPART_MEM] = mic * t->t_mem;
  part[PL_TPART_OPTIM] = t->t_opt;
  part[PL_TPART_A2A_MOE] = mic * t->t_moe_exposed;
  part[PL_TPART_A2A_SEQ] = mic * t->t_seq;
  part[PL_TPART_UNITS] = mic * t->t_units;
  part[PL_TPART_HOST] = mic * t->t_host;
  /* collective calls (see the file comment) */
  double calls = 0;
  if (W > 1 || t->p_comm || t->d_comm) {
    const double per_moe = 5 + 14.0 * K + (sc->moe_recompute ? 3 + 4.0 * K : 0);
    calls = (p->ep_span > 1 ? nmoe * per_moe : 0) +
            (W > 1 ? 3.0 * (L + 2) : 0) + (t->Gr > 1 ? 3.0 * nmoe : 0) +
            (t->d_comm ? 16.0 * L : 0) + (t->p_comm ? 4.0 * (P - 1) + 2 : 0);
  }
  calls = mic * calls + (W > 1 ? 5 : 0);
  part[PL_TPART_OVERHEAD] =
      (mc->step_overhead_ms + mic * 3.0 * L * mc->layer_overhead_ms) * 1e-3 +
      calls * mc->coll_us * 1e-6;
  out->comm_s = part[PL_TPART_A2A_MOE] + part[PL_TPART_A2A_SEQ] +
                part[PL_TPART_UNITS] + mic * t->ring_exposed +
                calls * mc->coll_us * 1e-6;
  hid[PL_TPART_A2A_MOE] = mic * t->t_moe_hidden;
  hid[PL_TPART_UNITS] = mic * t->t_units_hid;
  hid[PL_TPART_HOST] = mic * t->t_host_hid;
  hid[PL_TPART_HEAD] = mic * (t->t_ring - t->ring_exposed);
  for (int i = 0; i < PL_TPART_COUNT; i++)
    out->step_s += part[i];
  const double tokens = mic * t->N; /* per GPU */
  out->tok_s_gpu = tokens / out->step_s;
  out->tflops_gpu = out->tok_s_gpu * pl_model_flops_per_token(m, p->S) / 1e12;
  out->mfu = out->tflops_gpu / mc->gemm_tflops;
}

/* The FLOPs a rank computes in a step (recompute and kept layers counted). */
static double flops_rank(const tctx *t) {
  const pl_model_cfg *m = t->m;
  const pl_layout_plan *p = t->p;
  const double N = t->N, H = t->H;
  double fl = 0;
  for (int l = 0; l < t->L; l++) {
    const int moe = pl_model_layer_is_moe(m, l);
    const double Is =
        moe ? (m->n_shared ? (double)m->I_shared : 0) : (double)m->I_dense;
    fl += (l < t->d->keep_attn ? 3.5 : 4.5) * t->fa +
          8.0 * N * (t->attn_w + (moe ? H * p->E_route : 0) + 3 * H * Is) -
          (l < t->d->keep_all ? 2.0 * N * t->attn_w : 0) +
          (moe ? N * t->ex_fl : 0);
  }
  return t->c->sc.micro * (fl + 8.0 * N * H * m->V);
}

pl_status pl_plan_time_predict(const pl_model_cfg *m, const pl_plan_cfg *c,
                               const pl_plan_machine *mc, pl_plan_time *out) {
  memset(out, 0, sizeof *out);
  if (c->system == PL_PLAN_FSDP2)
    return pl__fsdp2_time(m, c, mc, out);
  tctx t;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, open_ctx(m, c, mc, &t));
  layers_time(&t);
  head_time(&t);
  units_time(&t);
  host_time(&t);
  optim_time(&t);
  assemble(&t, out);
  out->flops_rank = flops_rank(&t);
done:
  free_ctx(&t);
  return st;
}

/* The optimizer's least time with at most r parameters resident, t0 its
 * time with none, g with every one (pl__plan_time_bound). */
static double optim_least(double t0, double g, double th, double r) {
  if (!(t0 > 0 && g > 0))
    return 0;
  const double meet = t0 * th / (t0 + g);
  return r < meet ? t0 * (th - fmax(r, 0)) / th : t0 * g / (t0 + g);
}

/* The bound's step at a keep budget (keep < 0: every layer whole) with the
 * optimizer's time opt(t0) for t0 its time with none resident, the units'
 * exposure `units` and no host part; *N the tokens of a micro-batch. */
static pl_status bound_step(const pl_model_cfg *m, const pl_plan_cfg *c,
                            const pl_plan_machine *mc, double keep,
                            double units, double g, double th, double r,
                            double *step, double *N) {
  pl_plan_cfg a = *c;
  a.sc.sco = (pl_sco_budget){false, 0};
  a.sc.oo.resident_all = false, a.sc.oo.resident_bytes = 0;
  a.sc.keep = keep < 0 ? (pl_keep_budget){PL_KEEP_ALL, 0}
                       : (pl_keep_budget){PL_KEEP_BYTES, (uint64_t)keep};
  tctx t;
  pl_plan_time out;
  memset(&out, 0, sizeof out);
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done, open_ctx(m, &a, mc, &t));
  layers_time(&t), head_time(&t), units_time(&t), host_time(&t);
  optim_time(&t), assemble(&t, &out);
  *step = out.step_s - out.part_s[PL_TPART_OPTIM] +
          optim_least(t.t_opt, g, th, r) - out.part_s[PL_TPART_UNITS] + units -
          out.part_s[PL_TPART_HOST];
  *N = t.N;
done:
  free_ctx(&t);
  return st;
}

/* An upper bound of c's tok/s/GPU over the knobs its memory decides (the
 * SCO budget, the kept activations, the resident optimizer state): the step
 * is a sum of parts, each bounded below on its own — the SCO copies' at
 * budget 0 (none), attention, dense, memory and Ulysses parts at every
 * layer kept (each kept layer only takes from them), the units' exposure at
 * none kept (keeping shortens the backward that hides it), and the
 * optimizer at its best split: max(a·(Θ − r), 30·r/hbm) over the resident
 * parameters r, the streamed part linear in its parameters (a = its time
 * with none resident / Θ), is at least its value where the two meet. */
pl_status pl__plan_time_bound(const pl_model_cfg *m, const pl_plan_cfg *c,
                              const pl_plan_machine *mc, double *tok_s_max) {
  return pl__plan_time_bound_room(m, c, mc, NULL, tok_s_max);
}

/* With room: r parameters resident take 12·r bytes, at most room->res, and
 * leave room->keep(12·r) bytes to kept activations.  Over r in [0, r_max]
 * cut into 32 intervals: on [r_i, r_i+1] the step is at least the rest at
 * the keep budget r_i leaves (more resident leaves no more kept, and less
 * kept is slower) plus the optimizer at r_i+1 (more resident is faster):
 * the least of those over the intervals that fit is a bound over every
 * split; none fitting: no bound (0). */
pl_status pl__plan_time_bound_room(const pl_model_cfg *m, const pl_plan_cfg *c,
                                   const pl_plan_machine *mc,
                                   const pl__plan_room *room,
                                   double *tok_s_max) {
  *tok_s_max = 0;
  if (c->system == PL_PLAN_FSDP2) { /* its time has no such knob */
    pl_plan_time t;
    PL_TRY(pl_plan_time_predict(m, c, mc, &t));
    *tok_s_max = t.tok_s_gpu;
    return PL_OK;
  }
  pl_plan_cfg z = *c;
  z.sc.sco = (pl_sco_budget){false, 0};
  z.sc.oo.resident_all = false, z.sc.oo.resident_bytes = 0;
  z.sc.keep = (pl_keep_budget){PL_KEEP_BYTES, 0};
  tctx u;
  pl_status st = open_ctx(m, &z, mc, &u);
  if (st == PL_OK)
    layers_time(&u), units_time(&u);
  const double mic = c->sc.micro, units = st ? 0 : mic * u.t_units,
               th = st ? 0 : (double)u.d->params_rank, g = 30.0 * th / u.hbm;
  free_ctx(&u);
  PL_TRY(st);
  double N = 0, step = INFINITY;
  if (!room) {
    PL_TRY(bound_step(m, c, mc, -1, units, g, th, INFINITY, &step, &N));
  } else {
    const double rmax = fmax(0, fmin(th, room->res / 12.0));
    const int G = rmax > 0 ? 32 : 1;
    for (int i = 0; i < G; i++) {
      const double ri = rmax * i / G, rj = rmax * (i + 1) / G;
      double kb = -1; /* no keep budget to fill: every layer whole */
      if (room->keep && (kb = room->keep(room->ctx, 12.0 * ri)) < 0)
        break; /* nothing fits with r_i resident, nor with more */
      double si = 0;
      PL_TRY(bound_step(m, c, mc, kb, units, g, th, rj, &si, &N));
      step = fmin(step, si);
    }
  }
  /* a margin for the rounding of the sums the prediction itself adds */
  *tok_s_max = !isfinite(step) ? 0
               : step > 0      ? mic * N / step * (1 + 1e-9)
                               : INFINITY;
  return PL_OK;
}

pl_status pl_plan_proxy_comm(const pl_model_cfg *m, const pl_plan_cfg *c,
                             const pl_plan_machine *mc, int gpus_per_node,
                             double *comm_s, pl_plan_time *run) {
  *comm_s = 0;
  pl_plan_time own, full;
  PL_TRY(pl_plan_time_predict(m, c, mc, &own));
  const int Wv = c->lc.W_v > c->W ? c->lc.W_v : c->W;
  pl_plan_cfg r = *c;
  r.W = Wv, r.lc.W_v = Wv; /* every rank present: every group real */
  pl_plan_machine x = *mc;
  if (gpus_per_node > 0)
    x.gpus_per_node = gpus_per_node;
  PL_TRY(pl_plan_time_predict(m, &r, &x, &full));
  if (run)
    *run = full;
  if (Wv > c->W)
    *comm_s = full.comm_s > own.comm_s ? full.comm_s - own.comm_s : 0;
  return PL_OK;
}

pl_status pl_plan_link_sensitivity(const pl_model_cfg *m, const pl_plan_cfg *c,
                                   const pl_plan_machine *mc, double frac,
                                   pl_plan_time *lo, pl_plan_time *hi) {
  if (!(frac > 0 && frac < 1))
    return pl_set_error(
        PL_EINVAL, "link sensitivity: fraction %g: must be in (0, 1)", frac);
  pl_plan_machine x = *mc;
  x.ib_gbs = mc->ib_gbs * (1 - frac);
  PL_TRY(pl_plan_time_predict(m, c, &x, lo));
  x.ib_gbs = mc->ib_gbs * (1 + frac);
  return pl_plan_time_predict(m, c, &x, hi);
}
