/* candidates.c — the configurations a search visits: plateau's layouts
 * (D, P, Ep, c, β, the optimizer) and the FSDP2 baseline's (cp, ep, AC,
 * offload; one sequence per CP group per micro-batch) over the knobs a plan
 * leaves free, in enumeration order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/ulysses.h"
#include "plan/plan_internal.h"

pl_status pl__cqueue_push(pl__cqueue *q, const pl_plan_cfg *c) {
  if (q->n == q->cap) {
    const int cap = q->cap ? 2 * q->cap : 256;
    pl__qent *e = realloc(q->e, (size_t)cap * sizeof *e);
    if (!e)
      return pl_set_error(PL_ENOMEM, "plan: host");
    q->e = e, q->cap = cap;
  }
  q->e[q->n] = (pl__qent){*c, INFINITY, q->n};
  q->n++;
  return PL_OK;
}

static void divisors(int W, int *out, int *n, int max) {
  *n = 0;
  for (int d = 1; d <= W && *n < max; d++)
    if (W % d == 0)
      out[(*n)++] = d;
}

const size_t pl__plan_buckets[2] = {100000000, 25000000};
const pl_optim_ops *const pl__plan_optims[2] = {&pl_optim_stream,
                                                &pl_optim_hybrid};

int pl__plan_chunk_caps(int64_t N, int64_t *cs) {
  int nc = 0;
  for (int K = 1; K <= 64 && nc < PL__PLAN_CAPS; K *= 2) {
    const int64_t c = (N + K - 1) / K;
    if (c >= 1 && (nc == 0 || c != cs[nc - 1]))
      cs[nc++] = c;
  }
  return nc;
}

bool pl__plan_ep_plays(const pl_plan_cfg *c, int ep) {
  const int here = c->present > 0 ? c->present : c->W;
  return ep > 0 && here % ep == 0;
}

/* plateau's candidates of the free knobs into q. */
static pl_status plateau_candidates(const pl_model_cfg *m,
                                    const pl_plan_cfg *base,
                                    const pl_plan_free *fr,
                                    const pl_plan_machine *mc, pl__cqueue *q) {
  int Ds[64], nD = 0;
  if (fr->D) {
    int dv[64], n;
    divisors(base->W, dv, &n, 64);
    for (int i = 0; i < n; i++)
      if (m->n_q % dv[i] == 0 && pl_ulysses_heads_per_rank(m->n_kv, dv[i]) &&
          base->S % dv[i] == 0)
        Ds[nD++] = dv[i];
  } else {
    Ds[nD++] = base->lc.D;
  }
  int Ps[8], nP = 0;
  if (fr->P) {
    for (int p = 1; p <= 8 && p <= mc->gpus_per_node; p *= 2)
      if (base->W % p == 0)
        Ps[nP++] = p;
  } else {
    Ps[nP++] = base->lc.P;
  }
  /* expert groups (train/epgroups.h): the whole world, or, when the
   * world's dispatch leaves a node, groups of a node (the dispatch on
   * NVLink) if they divide W and E; inside a node a group only adds the
   * expert units' traffic and memory.  A proxy plays only groups that
   * divide its ranks present (base->present). */
  int Eps[2], nEp = 0;
  Eps[nEp++] = base->lc.Ep;
  const int Wv = base->lc.W_v > base->W ? base->lc.W_v : base->W,
            gpn = mc->gpus_per_node;
  if (fr->ep && m->E > 0 && Wv > gpn && base->W % gpn == 0 &&
      pl__plan_ep_plays(base, gpn) && m->E % gpn == 0 && gpn != base->lc.Ep)
    Eps[nEp++] = gpn;
  const pl_optim_ops *const *opts = pl__plan_optims;
  const int nopt = fr->optim ? 2 : 1;
  const size_t *betas = pl__plan_buckets;
  const int nbeta = fr->beta ? 2 : 1;
  for (int di = 0; di < nD; di++) {
    const int64_t N = base->S / Ds[di];
    int micro = base->sc.micro;
    if (base->tokens_step > 0) { /* the micro-batches of this layout */
      const int64_t per = (int64_t)base->W * N;
      if (base->tokens_step % per)
        continue;
      micro = (int)(base->tokens_step / per);
    }
    int64_t cs[PL__PLAN_CAPS];
    int nc = 0;
    if (fr->c)
      nc = pl__plan_chunk_caps(N, cs);
    else
      cs[nc++] = base->sc.moe_c;
    for (int ei = 0; ei < nEp; ei++)
      for (int pi = 0; pi < nP; pi++)
        for (int ci = 0; ci < nc; ci++)
          for (int bi = 0; bi < nbeta; bi++)
            for (int oi = 0; oi < nopt; oi++) {
              pl_plan_cfg x;
              memcpy(&x, base, sizeof x);
              x.lc.D = Ds[di];
              x.lc.Ep = Eps[ei];
              x.sc.micro = micro;
              x.lc.P = Ps[pi];
              if (fr->P)
                x.sc.head = Ps[pi] > 1 ? &pl_head_ring : &pl_head_fused;
              x.sc.moe_c = cs[ci];
              if (fr->beta)
                x.sc.oo.bucket = betas[bi];
              if (fr->optim)
                x.sc.optim = opts[oi];
              PL_TRY(pl__cqueue_push(q, &x));
            }
  }
  return PL_OK;
}

/* The FSDP2 baseline's candidates of the free knobs into cq. */
static pl_status fsdp2_candidates(const pl_model_cfg *m,
                                  const pl_plan_cfg *base,
                                  const pl_plan_free *fr,
                                  const pl_plan_machine *mc, pl__cqueue *cq) {
  int cps[64], ncp = 0, eps[64], nep = 0, dv[64], n;
  divisors(base->W, dv, &n, 64);
  for (int i = 0; i < n; i++)
    if (fr->cp ? base->S % (2 * dv[i]) == 0 : dv[i] == base->cp)
      cps[ncp++] = dv[i];
  /* ep divides W_v (a proxy's virtual world) and divides or is a multiple
   * of the ranks present, as the baseline takes it */
  const int Wv = base->lc.W_v > base->W ? base->lc.W_v : base->W,
            here = base->present > 0 ? base->present : base->W;
  divisors(Wv, dv, &n, 64);
  for (int i = 0; i < n; i++)
    if (fr->ep ? (m->E > 0 ? m->E % dv[i] == 0 : dv[i] == 1) &&
                     (dv[i] % here == 0 || here % dv[i] == 0)
               : dv[i] == base->ep)
      eps[nep++] = dv[i];
  const pl_plan_ac acs[3] = {PL_PLAN_AC_FULL, PL_PLAN_AC_SELECTIVE,
                             PL_PLAN_AC_NONE};
  const int nac = fr->ac ? 3 : 1;
  const int noff = fr->offload ? 2 : 1;
  for (int a = 0; a < ncp; a++)
    for (int b = 0; b < nep; b++)
      for (int c = 0; c < nac; c++)
        for (int o = 0; o < noff; o++) {
          /* torchtitan borrows EP from dp_shard × cp: ep 1 or a
           * multiple of cp (as pl_fsdp2_tune_points lists them) */
          if (fr->cp && fr->ep && eps[b] > 1 && eps[b] % cps[a])
            continue;
          pl_plan_cfg x;
          memcpy(&x, base, sizeof x);
          x.cp = cps[a];
          x.ep = eps[b];
          if (base->tokens_step > 0) {
            /* the micro-batches of this cp: a pass is W/cp sequences (the
             * baseline runs one per CP group per micro-batch) */
            const int64_t per = (int64_t)base->W / cps[a] * base->S;
            if (base->tokens_step % per)
              continue;
            x.sc.micro = (int)(base->tokens_step / per);
          }
          if (fr->ac)
            x.ac = acs[c];
          if (fr->offload)
            x.offload = o == 1;
          PL_TRY(pl__cqueue_push(cq, &x));
        }
  return PL_OK;
}

pl_status pl__plan_candidates(const pl_model_cfg *m, const pl_plan_cfg *base,
                              const pl_plan_free *fr, const pl_plan_machine *mc,
                              pl__cqueue *q) {
  return base->system == PL_PLAN_FSDP2 ? fsdp2_candidates(m, base, fr, mc, q)
                                       : plateau_candidates(m, base, fr, mc, q);
}
