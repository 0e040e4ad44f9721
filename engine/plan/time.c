/* time.c — the step time of plateau's composed step (pl_plan_time_predict)
 * from the machine's rates, and the communication primitives both systems'
 * models use.
 *
 * Compute (per rank, per micro-batch; the rank with imb× the balanced
 * expert rows sets the pace of the MoE layers):
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
 *   Ulysses     8·(n_q + n_kv)·N·d·b per layer through all-to-alls over D,
 *               exposed (on the compute stream);
 *   Ring-DTP    P − 1 hops forward and backward beside the strips;
 *   SCO         each selected boundary's copy beside its layer (D2H in the
 *               forward, H2D in the backward), exposed beyond the layer.
 * A virtual D- or P-group (a proxy, train/layout.h) has no all-to-all, hop
 * or call: its stand-ins are local.  comm_s sums the exposed communication
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

pl_status pl_plan_time_predict(const pl_model_cfg *m, const pl_plan_cfg *c,
                               const pl_plan_machine *mc, pl_plan_time *out) {
  memset(out, 0, sizeof *out);
  if (c->system == PL_PLAN_FSDP2)
    return pl__fsdp2_time(m, c, mc, out);
  pl_train_desc *d = malloc(sizeof *d);
  if (!d)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_status st =
      pl_train_describe(m, &c->lc, c->W, 0, c->S, &c->sc, mc->backend, d);
  if (st != PL_OK) {
    free(d);
    return st;
  }
  const pl_layout_plan *p = &d->plan;
  const pl_step_cfg *sc = &c->sc;
  const pl_head_ops *head = sc->head ? sc->head : &pl_head_ring;
  const int vp = head->vocab_parallel, L = m->L, W = p->W, D = p->D;
  const int P = vp ? p->P : 1;
  /* a virtual group's stand-ins are local: no all-to-all, hop or call */
  const int d_comm = D > 1 && !p->d_virtual, p_comm = P > 1 && !p->p_virtual;
  const double N = (double)p->N, H = (double)m->H,
               b = (double)pl_dtype_size(sc->dt);
  const double S = (double)p->S, gemm = mc->gemm_tflops * 1e12;
  const double hbm = mc->hbm_gbs * 1e9, imb = c->imb >= 1 ? c->imb : 1;
  double *part = out->part_s, *hid = out->hidden_s;
  const int nu = L + 2;
  size_t *numel = calloc((size_t)nu, sizeof *numel);
  int *vsize = calloc((size_t)nu, sizeof *vsize);
  if (!numel || !vsize) {
    free(numel), free(vsize), free(d);
    return pl_set_error(PL_ENOMEM, "plan: host");
  }
  pl_train_units(m, p, vp, numel, vsize);

  /* per layer: forward, backward compute; unit comm */
  const double fa = 2.0 * S * S * m->d * m->n_q / D; /* attention fwd FLOPs */
  const double ra_f = pl__attn_rate(mc, mc->attn_fwd_tflops, p->S) * 1e12,
               ra_b = pl__attn_rate(mc, mc->attn_bwd_tflops, p->S) * 1e12;
  const double attn_w = H * (m->n_q + 2.0 * m->n_kv) * m->d + m->n_q * m->d * H;
  const double ex_fl = (sc->moe_recompute ? 28.0 : 22.0) * m->k * H * m->I;
  double *tf = calloc((size_t)L, sizeof(double)),
         *tb = calloc((size_t)L, sizeof(double));
  if (!tf || !tb) {
    free(tf), free(tb), free(numel), free(vsize), free(d);
    return pl_set_error(PL_ENOMEM, "plan: host");
  }
  double t_attn = 0, t_dense = 0, t_exp = 0, t_mem = 0, t_moe_exposed = 0,
         t_moe_hidden = 0, t_seq = 0;
  int nmoe = 0, K = 1;
  int64_t c_eff = p->N;
  if (sc->dispatch == PL_MOE_PIPELINED) {
    const int64_t cc = sc->moe_c ? sc->moe_c : p->N;
    pl_llep_chunking(p->N, cc, sc->moe_K_max, &K, &c_eff);
  }
  for (int l = 0; l < L; l++) {
    const int moe = pl_model_layer_is_moe(m, l);
    nmoe += moe;
    const double Is =
        moe ? (m->n_shared ? (double)m->I_shared : 0) : (double)m->I_dense;
    const double dw = attn_w + (moe ? H * p->E_route : 0) + 3.0 * H * Is;
    const double a_f = fa / ra_f, a_b = 2.5 * fa / ra_b;
    const double g_f = 2.0 * N * dw / (gemm * mc->dense_eff);
    double e_f = 0, e_b = 0, mem = mc->mem_passes * N * H * b / hbm;
    if (moe) {
      const double e_all = imb * N * ex_fl / (gemm * mc->expert_eff);
      e_f = e_all * 6.0 / (sc->moe_recompute ? 28.0 : 22.0);
      e_b = e_all - e_f;
      mem += 12.0 * m->k * N * H * b / hbm;
      /* dispatch: 5 all-to-alls over the EP group (the W ranks, or the
       * Ep of an expert group) */
      const double tc = 5.0 * imb * pl__t_a2a(mc, p->ep_span, N * m->k * H * b);
      double exposed = tc;
      if (sc->dispatch == PL_MOE_PIPELINED && K > 1)
        exposed = fmax(tc - (e_f + e_b) * (K - 1) / K, tc / K);
      t_moe_exposed += exposed;
      t_moe_hidden += tc - exposed;
    }
    /* forward: attention, GEMMs, experts, memory; the recompute repeats it
     * in the backward, minus the experts' forward when the context is kept
     * and minus what the layer keeps (the file comment) */
    const int k_attn = l < d->keep_attn, k_all = l < d->keep_all;
    const double g_att = 2.0 * N * attn_w / (gemm * mc->dense_eff);
    const double skip = (k_attn ? a_f : 0) + (k_all ? g_att + mem / 8 : 0);
    tf[l] = a_f + g_f + e_f + mem / 4;
    tb[l] = a_f + a_b + 3.0 * g_f + e_b + mem * 3 / 4 - skip;
    t_attn += (k_attn ? 1 : 2) * a_f + a_b;
    t_dense += 4 * g_f - (k_all ? g_att : 0);
    t_exp += e_f + e_b;
    t_mem += mem - (k_all ? mem / 8 : 0);
    if (d_comm)
      /* 16 all-to-alls (forward 4, recompute 4, backward 8) moving
       * 8·(n_q + n_kv)·N·d·b in all; 12 when the attention is kept */
      t_seq += (k_attn ? 12.0 : 16.0) *
               pl__t_a2a(mc, D, (m->n_q + m->n_kv) * N * m->d * b / 2);
  }
  /* the head: four GEMMs of 2·N·H·V (the blocked meetings recompute their
   * strips) and the strips' passes; at P = 1 three GEMMs (pl_dtp_run's
   * token chunks), the chunk's logit passes and dW read and written once
   * per chunk */
  pl__head_replay h1;
  pl__head_replay_make(sc->dt, p->N, m->H, m->V, P, sc->head_block, &h1);
  double t_head_c = 8.0 * N * H * m->V / (gemm * mc->head_eff) +
                    16.0 * N * (double)m->V / hbm;
  if (h1.chunk > 0) {
    const double K = ceil(N / (double)h1.chunk);
    t_head_c = 6.0 * N * H * m->V / (gemm * mc->head_eff) +
               (6.0 * b * N * (double)m->V + K * 2 * b * H * (double)m->V) /
                   hbm;
  }
  double t_ring = 0;
  if (p_comm) {
    pl__head_replay hd;
    pl__head_replay_make(sc->dt, p->N, m->H, m->V, P, sc->head_block, &hd);
    double hf, hb;
    if (!hd.move_w)
      hf = N * (H * b + 16), hb = N * (H * b + 12 + H * 4);
    else
      hf = H * hd.vmax * b, hb = H * hd.vmax * (b + 4);
    double bw, lat;
    pl__link_of(mc, P, mc->nvl_gbs, &bw, &lat);
    t_ring = (P - 1) * ((hf + hb) / bw + 2 * lat);
  }
  const double ring_exposed = pos(t_ring - t_head_c * (P - 1) / P);
  /* ZeRO-3 units over the zero group (the W real ranks) */
  double t_units = 0, t_units_hid = 0;
  const int Gz = W;
  const double g_emb = pl__t_ring(mc, Gz, (double)numel[0] * b);
  t_units += g_emb + pl__t_ring(mc, Gz, (double)numel[0] * 4); /* first, last */
  /* expert units (expert groups): over the W / Ep replica ranks */
  const int Gr = p->ep_grouped ? W / p->Ep : 1;
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
    const double fw = pos(gnext - tf[l]);
    const double gprev =
        (l > 0 ? pl__t_ring(mc, Gz, (double)numel[l] * b) : 0) + eg;
    const double rs = pl__t_ring(mc, Gz, (double)numel[1 + l] * 4) + ers;
    const double bw_ = pos(gprev + rs - tb[l]);
    t_units += fw + bw_;
    t_units_hid += gnext - fw + gprev + rs - bw_;
  }
  /* SCO copies beside their layers */
  double t_host = 0, t_host_hid = 0;
  const double nhb = N * H * b;
  for (int l = 0; l < d->sco_layers && l < L; l++) {
    const double d2h = nhb / (mc->d2h_gbs * 1e9),
                 h2d = nhb / (mc->h2d_gbs * 1e9);
    const double e = pos(d2h - tf[l]) + pos(h2d - tb[l]);
    t_host += e;
    t_host_hid += d2h + h2d - e;
  }
  /* the optimizer: the streamed parameters, then the resident ones */
  const double th = (double)(d->params_rank - d->resident_params);
  const int gpn = mc->gpus_per_node < W ? mc->gpus_per_node : W;
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
  } else if (!strcmp(opt->name, "cpu")) {
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
  t_opt = fmax(t_opt, 30.0 * (double)d->resident_params / hbm);

  const double mic = c->sc.micro;
  part[PL_TPART_ATTN] = mic * t_attn;
  part[PL_TPART_DENSE] = mic * t_dense;
  part[PL_TPART_EXPERT] = mic * t_exp;
  part[PL_TPART_HEAD] = mic * (t_head_c + ring_exposed);
  part[PL_TPART_MEM] = mic * t_mem;
  part[PL_TPART_OPTIM] = t_opt;
  part[PL_TPART_A2A_MOE] = mic * t_moe_exposed;
  part[PL_TPART_A2A_SEQ] = mic * t_seq;
  part[PL_TPART_UNITS] = mic * t_units;
  part[PL_TPART_HOST] = mic * t_host;
  /* collective calls (see the file comment) */
  double calls = 0;
  if (W > 1 || p_comm || d_comm) {
    const double per_moe = 5 + 14.0 * K + (sc->moe_recompute ? 3 + 4.0 * K : 0);
    calls = (p->ep_span > 1 ? nmoe * per_moe : 0) +
            (W > 1 ? 3.0 * (L + 2) : 0) + (Gr > 1 ? 3.0 * nmoe : 0) +
            (d_comm ? 16.0 * L : 0) + (p_comm ? 4.0 * (P - 1) + 2 : 0);
  }
  calls = mic * calls + (W > 1 ? 5 : 0);
  part[PL_TPART_OVERHEAD] =
      (mc->step_overhead_ms + mic * 3.0 * L * mc->layer_overhead_ms) * 1e-3 +
      calls * mc->coll_us * 1e-6;
  out->comm_s = part[PL_TPART_A2A_MOE] + part[PL_TPART_A2A_SEQ] +
                part[PL_TPART_UNITS] + mic * ring_exposed +
                calls * mc->coll_us * 1e-6;
  hid[PL_TPART_A2A_MOE] = mic * t_moe_hidden;
  hid[PL_TPART_UNITS] = mic * t_units_hid;
  hid[PL_TPART_HOST] = mic * t_host_hid;
  hid[PL_TPART_HEAD] = mic * (t_ring - ring_exposed);
  for (int i = 0; i < PL_TPART_COUNT; i++)
    out->step_s += part[i];
  const double tokens = mic * N; /* per GPU */
  out->tok_s_gpu = tokens / out->step_s;
  out->tflops_gpu = out->tok_s_gpu * pl_model_flops_per_token(m, p->S) / 1e12;
  out->mfu = out->tflops_gpu / mc->gemm_tflops;
  double fl = 0;
  for (int l = 0; l < L; l++) {
    const int moe = pl_model_layer_is_moe(m, l);
    const double Is =
        moe ? (m->n_shared ? (double)m->I_shared : 0) : (double)m->I_dense;
    fl += (l < d->keep_attn ? 3.5 : 4.5) * fa +
          8.0 * N * (attn_w + (moe ? H * p->E_route : 0) + 3 * H * Is) -
          (l < d->keep_all ? 2.0 * N * attn_w : 0) + (moe ? N * ex_fl : 0);
  }
  out->flops_rank = mic * (fl + 8.0 * N * H * m->V);
  free(tf), free(tb), free(numel), free(vsize), free(d);
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
