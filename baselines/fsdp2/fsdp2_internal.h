/* fsdp2_internal.h — what the FSDP2 baseline's files share (internal to
 * baselines/fsdp2): the trainer's struct, its layers and parameter table,
 * and the functions of fsdp2_params.c (the units, the parameter table and
 * initialization) and fsdp2_cfg.c (the configuration's check) the trainer
 * calls. */
#ifndef PLATEAU_BASELINES_FSDP2_FSDP2_INTERNAL_H
#define PLATEAU_BASELINES_FSDP2_FSDP2_INTERNAL_H

#include <stdint.h>

#include "fsdp2.h"
#include "fsdp2_layer.h"
#include "train/zero3.h"

enum { P_ATTN_NORM, P_QKV, P_O, P_FFN_NORM, P_ROUTER, P_UP, P_DOWN, P_N };
#define ALIGN_EL 64
static inline size_t pl__fsdp2_align(size_t n) {
  return (n + ALIGN_EL - 1) / ALIGN_EL * ALIGN_EL;
}

typedef struct param {
  pl_param_info info;
  int unit;       /* FSDP unit holding (this rank's part of) it         */
  size_t off;     /* first element in the unit                          */
  size_t extent;  /* elements in the unit                               */
  uint64_t first; /* the full tensor's element at off                   */
  int expert;     /* 1: an EP-sharded expert tensor                     */
  pl_dist dist;
  float a, b;
} param;

typedef struct flayer {
  int moe, unit, xunit; /* dense unit, experts unit (-1: none) */
  size_t off[P_N];      /* in the dense unit (SIZE_MAX: absent) */
  int64_t I_s;
  pl__fsdp2_layer lay;
  float *bias, *hbias; /* E_r: device, host */
} flayer;

struct pl_fsdp2 {
  pl_dev *dev;
  pl_comm *world;
  pl_model_cfg m;
  pl_fsdp2_cfg c;
  pl_dtype dt;
  size_t es;
  int W, Wv, rank;
  int64_t S, N, c_len; /* sequence, tokens per rank, chunk (CP > 1)     */
  int cp_rank, cp_group, n_groups;
  int cp_virtual; /* 1: the CP group is virtual (cp does not divide W)  */
  int ep_idx, ep_real, El, E_r;
  int ep_virtual; /* 1: the EP group is virtual (the rank view)         */
  pl_comm *dense, *cpc, *epc, *xfsdp, *self;
  pl_ring_attn *ring;
  pl_moe *moe;
  pl_zero3 *f; /* the units (fp32 master shards) */
  int nunits, u_emb, u_head;
  flayer *fl;
  const pl_head_ops *head;
  void *hctx;
  param *pr;
  int npr;
  int32_t *d_tok, *d_tgt;
  float *d_dloss, *d_nll, *h_nll;
  int32_t *h_tok, *h_tgt;
  void **bnd;         /* L + 1 boundaries of the micro-batch in flight */
  double *partials;   /* device doubles of the norm's chunk partials */
  double *h_partials; /* host */
  size_t max_chunks;
  int64_t step_no;
  int micro_i;
  pl_timeline tline; /* profile: the step's spans */
  double optim_ms;
};

/* 1 if the model has a MoE layer. */
int pl__fsdp2_any_moe(const pl_model_cfg *m);
/* 1 when c on W ranks is the rank view (W = 1 < W_v, rank_view): the EP
 * group virtual, the router over all E experts. */
int pl__fsdp2_rank_view(const pl_fsdp2_cfg *c, int W);
/* The experts the router chooses among: E / ep of each of the EP group's
 * members present (min(W, ep)), or of all ep in the rank view. */
int pl__fsdp2_routed(const pl_model_cfg *m, const pl_fsdp2_cfg *c, int W);
/* The units' sizes (numel[u]) and the parameter table: the composed step's
 * parameters in its order (their seeds are their indices), distributions
 * and names; t->fl's units and offsets. */
pl_status pl__fsdp2_param_table(pl_fsdp2 *t, size_t *numel);
/* Every parameter's elements in this rank's shards, drawn as the composed
 * step draws them. */
pl_status pl__fsdp2_init_weights(pl_fsdp2 *t);

#endif
