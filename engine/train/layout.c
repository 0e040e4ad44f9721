/* layout.c — the MoP rank layout's arithmetic and communicators
 * (train/layout.h). */
#include "train/layout.h"

#include <stdlib.h>
#include <string.h>

#include "model/ulysses.h"
#include "ops/ce.h"

/* Is a group of G members (Ulysses D, Ring-DTP P) real (G divides W) or
 * virtual (each present rank alone with G − 1 absent members: W·G divides
 * W_v)?  PL_EINVAL naming the value otherwise. */
static pl_status group_kind(const char *name, int G, int W, int Wv, int *virt) {
  *virt = 0;
  if (G < 1)
    return pl_set_error(PL_EINVAL, "layout: %s=%d: must be >= 1", name, G);
  if (W % G == 0)
    return PL_OK;
  if (Wv % W == 0 && Wv % ((int64_t)W * G) == 0) {
    *virt = 1;
    return PL_OK;
  }
  return pl_set_error(
      PL_EINVAL,
      "layout: %s=%d: a real group must divide the W=%d ranks, a virtual one "
      "(each rank with %d absent members) needs W_v=%d to be a multiple of "
      "%s·W=%lld",
      name, G, W, G - 1, Wv, name, (long long)G * W);
}

pl_status pl_layout_plan_make(const pl_model_cfg *m, const pl_layout_cfg *c,
                              int W, int rank, int64_t S, pl_layout_plan *out) {
  memset(out, 0, sizeof *out);
  PL_TRY(pl_model_cfg_check(m));
  const int D = c->D, P = c->P, Wv = c->W_v ? c->W_v : W;
  if (W < 1 || rank < 0 || rank >= W)
    return pl_set_error(PL_EINVAL, "layout: rank %d of W=%d", rank, W);
  if (Wv < W || Wv % W)
    return pl_set_error(
        PL_EINVAL, "layout: virtual world W_v=%d: must be a multiple of W=%d",
        Wv, W);
  int dv, pv;
  PL_TRY(group_kind("D", D, W, Wv, &dv));
  PL_TRY(group_kind("P", P, W, Wv, &pv));
  if (m->n_q % D || !pl_ulysses_heads_per_rank(m->n_kv, D))
    return pl_set_error(
        PL_EINVAL,
        "layout: n_q=%d and n_kv=%d heads over a Ulysses group of D=%d: n_q "
        "must divide by D, and n_kv by D or D by n_kv (key/value heads "
        "replicated)",
        m->n_q, m->n_kv, D);
  if (S < D || S % D)
    return pl_set_error(
        PL_EINVAL,
        "layout: sequence S=%lld over D=%d ranks: S must be a positive "
        "multiple of D",
        (long long)S, D);
  const int moe = m->dense_layers < m->L && m->E > 0;
  const int Ep = c->Ep ? c->Ep : Wv;
  /* an expert group smaller than the world is real when it divides the
   * ranks present, virtual when each present rank can play member 0 of its
   * own (W·Ep divides W_v), as D and P */
  if (Ep < 1 || Ep > Wv || (Ep < Wv && W % Ep && Wv % ((int64_t)W * Ep) != 0))
    return pl_set_error(
        PL_EINVAL,
        "layout: Ep=%d: an expert group is the whole world (Ep=W_v=%d) or a "
        "divisor of the W=%d ranks present",
        Ep, Wv, W);
  const int grouped = moe && Ep < Wv;
  /* the rank view: the whole world's expert group virtual (one present
   * rank playing rank 0 of the W_v-rank run, its router over all E) */
  const int world_virtual = moe && !grouped && c->rank_view && Wv > W;
  if (c->rank_view && Wv > W && W != 1)
    return pl_set_error(
        PL_EINVAL,
        "layout: the rank view plays one rank of the W_v=%d-rank run: W=%d "
        "processes (must be 1)",
        Wv, W);
  if (grouped && m->E % Ep)
    return pl_set_error(
        PL_EINVAL,
        "layout: Ep=%d: the E=%d experts must divide by the expert group "
        "(each rank of a group holds E/Ep of them)",
        Ep, m->E);
  if (moe && !grouped && m->E % Wv)
    return pl_set_error(
        PL_EINVAL,
        "layout: E=%d experts over %s%d ranks: E must divide by the number "
        "of ranks (each holds E/W of them)",
        m->E, Wv > W ? "a virtual world of W_v=" : "W=", Wv);
  /* grouped: every group is Ep present ranks holding all E experts */
  const int64_t present = !moe                       ? 0
                          : grouped || world_virtual ? m->E
                                                     : (int64_t)m->E * W / Wv;
  out->W = W, out->W_v = Wv, out->rank = rank, out->D = D, out->P = P;
  out->d_virtual = dv, out->p_virtual = pv;
  out->d_rank = dv ? 0 : rank % D, out->d_group = dv ? rank : rank / D;
  out->p_rank = pv ? 0 : rank % P, out->p_group = pv ? rank : rank / P;
  out->n_groups = dv ? W : W / D;
  out->S = S, out->N = S / D;
  /* fewer present experts than k (a proxy): ⌈k / present⌉ router slots per
   * present expert */
  out->E_moe = (int)present;
  out->E_route = moe ? (int)(present * ((m->k + present - 1) / present)) : 0;
  out->E_local = moe ? m->E / (grouped ? Ep : Wv) : 0;
  out->Ep = Ep, out->ep_grouped = grouped;
  out->e_virtual = world_virtual || (grouped && W % Ep != 0);
  out->ep_rank = out->e_virtual ? 0 : grouped ? rank % Ep : rank;
  out->ep_group = out->e_virtual ? rank : grouped ? rank / Ep : 0;
  out->ep_vsize = grouped ? Wv / Ep : 1;
  out->ep_span = grouped ? Ep : world_virtual ? Wv : W;
  out->zero_vsize = Wv;
  out->head_vsize = Wv / P;
  pl_ce_shard(m->V, P, out->p_rank, &out->v_col0, &out->v_cols);
  return PL_OK;
}

void pl_layout_destroy(pl_layout *l) {
  if (!l)
    return;
  pl_comm *cs[] = {l->sp, l->ep, l->vp, l->zero, l->hrep, l->self, l->erep};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
    if (cs[i])
      pl_comm_destroy(cs[i]);
  free(l);
}

pl_status pl_layout_create(pl_comm *world, const pl_model_cfg *m,
                           const pl_layout_cfg *c, int64_t S, pl_layout **out) {
  *out = NULL;
  pl_layout_plan plan;
  PL_TRY(pl_layout_plan_make(m, c, pl_comm_size(world), pl_comm_rank(world), S,
                             &plan));
  pl_layout *l = calloc(1, sizeof *l);
  if (!l)
    return pl_set_error(PL_ENOMEM, "layout: host");
  l->plan = plan;
  l->world = world;
  const int r = plan.rank;
  pl_status st = PL_OK;
  /* every rank makes every split in the same order (they are collective) */
  pl_comm *sp = NULL;
  pl_dev *dev = pl_comm_dev(world);
  if (plan.d_virtual) /* the same branch on every rank (W, D, W_v agree) */
    PL_TRY_GOTO(st, fail, pl_comm_virtual(dev, plan.D, &l->sp));
  else {
    PL_TRY_GOTO(st, fail, pl_comm_split(world, plan.d_group, r, &sp));
    if (plan.D > 1)
      l->sp = sp;
    else
      pl_comm_destroy(sp);
  }
  PL_TRY_GOTO(st, fail,
              plan.e_virtual ? pl_comm_virtual(dev, plan.Ep, &l->ep)
                             : pl_comm_split(world, plan.ep_group, r, &l->ep));
  PL_TRY_GOTO(st, fail,
              plan.p_virtual ? pl_comm_virtual(dev, plan.P, &l->vp)
                             : pl_comm_split(world, plan.p_group, r, &l->vp));
  PL_TRY_GOTO(st, fail, pl_comm_split(world, 0, r, &l->zero));
  PL_TRY_GOTO(st, fail, pl_comm_split(world, plan.p_rank, r, &l->hrep));
  PL_TRY_GOTO(st, fail, pl_comm_split(world, r, 0, &l->self));
  if (plan.ep_grouped)
    PL_TRY_GOTO(st, fail, pl_comm_split(world, plan.ep_rank, r, &l->erep));
  *out = l;
  return PL_OK;
fail:
  pl_layout_destroy(l);
  return st;
}
