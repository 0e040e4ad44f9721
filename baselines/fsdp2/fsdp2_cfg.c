/* fsdp2_cfg.c — the FSDP2 baseline's configuration (fsdp2.h): names,
 * defaults, the check a point passes before it is launched, and the knob
 * settings a torchtitan user would try at a GPU count and context
 * (pl_fsdp2_tune_points), so the bench's --tune can run them all and the
 * report take the fastest that fits ("FSDP2-best"). */
#include <stdio.h>
#include <string.h>

#include "fsdp2_internal.h"

/* ---- names and configuration ---------------------------------------------
 */

/* the planner's AC modes are these, value for value (plan/plan.h) */
_Static_assert((int)PL_FSDP2_AC_FULL == (int)PL_PLAN_AC_FULL &&
                   (int)PL_FSDP2_AC_SELECTIVE == (int)PL_PLAN_AC_SELECTIVE &&
                   (int)PL_FSDP2_AC_NONE == (int)PL_PLAN_AC_NONE,
               "pl_fsdp2_ac and pl_plan_ac differ");

const char *const pl_fsdp2_optim_names[] = {"gpu", "cpu", NULL};

const char *pl_fsdp2_ac_name(pl_fsdp2_ac ac) {
  return pl_plan_ac_name((pl_plan_ac)ac);
}

const char *pl_fsdp2_optim_name(pl_fsdp2_optim o) {
  return (unsigned)o <= PL_FSDP2_OPTIM_CPU ? pl_fsdp2_optim_names[o] : "?";
}

pl_status pl_fsdp2_ac_parse(const char *s, pl_fsdp2_ac *out) {
  for (int i = 0; s && pl_plan_ac_names[i]; i++)
    if (!strcmp(s, pl_plan_ac_names[i])) {
      *out = (pl_fsdp2_ac)i;
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL,
                      "fsdp2: AC mode '%s': allowed full, selective, none",
                      s ? s : "");
}

pl_status pl_fsdp2_optim_parse(const char *s, pl_fsdp2_optim *out) {
  for (int i = 0; s && pl_fsdp2_optim_names[i]; i++)
    if (!strcmp(s, pl_fsdp2_optim_names[i])) {
      *out = (pl_fsdp2_optim)i;
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL, "fsdp2: optimizer '%s': allowed gpu, cpu",
                      s ? s : "");
}

pl_fsdp2_cfg pl_fsdp2_cfg_default(void) {
  pl_fsdp2_cfg c;
  memset(&c, 0, sizeof c);
  c.cp = 1, c.ep = 1;
  c.ac = PL_FSDP2_AC_FULL;
  c.optim = PL_FSDP2_OPTIM_GPU;
  c.micro = 1;
  c.dt = PL_BF16;
  c.hp = pl_adamw_hparams_default();
  c.hp.max_grad_norm = 1.0;
  c.moe_lanes = 2;
  c.seed = 1;
  return c;
}

void pl_fsdp2_cfg_name(const pl_fsdp2_cfg *c, char *buf, size_t len) {
  snprintf(buf, len, "cp%d/ep%d/ac=%s/opt=%s/mb%d", c->cp, c->ep,
           pl_fsdp2_ac_name(c->ac), pl_fsdp2_optim_name(c->optim), c->micro);
}

int pl__fsdp2_any_moe(const pl_model_cfg *m) {
  for (int l = 0; l < m->L; l++)
    if (pl_model_layer_is_moe(m, l))
      return 1;
  return 0;
}

int pl__fsdp2_rank_view(const pl_fsdp2_cfg *c, int W) {
  return c->rank_view && c->W_v > W;
}

int pl__fsdp2_routed(const pl_model_cfg *m, const pl_fsdp2_cfg *c, int W) {
  const int ep_real = pl__fsdp2_rank_view(c, W) || W >= c->ep ? c->ep : W;
  return m->E / c->ep * ep_real;
}

pl_status pl_fsdp2_check(const pl_model_cfg *m, const pl_fsdp2_cfg *c, int W,
                         int64_t S) {
  PL_TRY(pl_model_cfg_check(m));
  const int Wv = c->W_v ? c->W_v : W;
  if (W < 1 || Wv < W || Wv % W)
    return pl_set_error(PL_EINVAL,
                        "fsdp2: W_v=%d over W=%d ranks: the virtual world "
                        "must be a multiple of W",
                        c->W_v, W);
  if (c->cp < 1 || (W % c->cp && Wv % ((int64_t)W * c->cp)))
    return pl_set_error(
        PL_EINVAL,
        "fsdp2: cp=%d: must be >= 1 and divide the W=%d ranks (a real group), "
        "or W_v=%d must be a multiple of cp·W=%lld (a virtual group: each "
        "rank with cp−1 absent members)",
        c->cp, W, Wv, (long long)W * (c->cp > 0 ? c->cp : 1));
  if (S < 1 || (c->cp > 1 && S % (2 * c->cp)))
    return pl_set_error(PL_EINVAL,
                        "fsdp2: S=%lld over cp=%d: the load-balanced split "
                        "needs S divisible by 2·cp = %d",
                        (long long)S, c->cp, 2 * c->cp);
  if (c->ep < 1 || Wv % c->ep || (c->ep % W && W % c->ep))
    return pl_set_error(PL_EINVAL,
                        "fsdp2: ep=%d: must be >= 1, divide W_v=%d and divide "
                        "or be a multiple of W=%d",
                        c->ep, Wv, W);
  if (pl__fsdp2_any_moe(m) && m->E % c->ep)
    return pl_set_error(PL_EINVAL,
                        "fsdp2: ep=%d: the E=%d experts must divide by it",
                        c->ep, m->E);
  if (c->rank_view && Wv > W && W != 1)
    return pl_set_error(
        PL_EINVAL,
        "fsdp2: the rank view plays one rank of the W_v=%d-rank "
        "run on one process, not on W=%d",
        Wv, W);
  if (pl__fsdp2_any_moe(m) && pl__fsdp2_routed(m, c, W) < m->k)
    return pl_set_error(PL_EINVAL,
                        "fsdp2: ep=%d on W=%d ranks: the router chooses among "
                        "the %d experts present (E/ep·min(W, ep)), fewer than "
                        "k=%d",
                        c->ep, W, pl__fsdp2_routed(m, c, W), m->k);
  if (c->ac < PL_FSDP2_AC_FULL || c->ac > PL_FSDP2_AC_NONE || c->ac_freq < 0)
    return pl_set_error(PL_EINVAL, "fsdp2: AC mode %d (freq %d)", (int)c->ac,
                        c->ac_freq);
  if (c->optim != PL_FSDP2_OPTIM_GPU && c->optim != PL_FSDP2_OPTIM_CPU)
    return pl_set_error(PL_EINVAL, "fsdp2: optimizer %d: gpu or cpu",
                        (int)c->optim);
  if (c->micro < 1)
    return pl_set_error(PL_EINVAL, "fsdp2: micro=%d: must be >= 1", c->micro);
  if (c->dt != PL_F32 && c->dt != PL_BF16)
    return pl_set_error(PL_EINVAL, "fsdp2: dtype %s: f32 or bf16",
                        pl_dtype_name(c->dt));
  if (c->moe_lanes < 0 || c->moe_lanes > PL_MOE_MAX_LANES)
    return pl_set_error(PL_EINVAL, "fsdp2: moe_lanes=%d: 0..%d", c->moe_lanes,
                        PL_MOE_MAX_LANES);
  return pl_adamw_hparams_check(&c->hp);
}

int pl_fsdp2_tune_points(const pl_model_cfg *m, int W, int64_t S,
                         const pl_fsdp2_cfg *base, const int *micros,
                         int nmicro, bool with_ac_none, pl_fsdp2_cfg *out,
                         int cap) {
  static const int one = 1;
  if (!micros || nmicro < 1)
    micros = &one, nmicro = 1;
  const int Wv = base->W_v ? base->W_v : W;
  static const pl_fsdp2_ac acs[3] = {PL_FSDP2_AC_FULL, PL_FSDP2_AC_SELECTIVE,
                                     PL_FSDP2_AC_NONE};
  static const pl_fsdp2_optim opts[2] = {PL_FSDP2_OPTIM_GPU,
                                         PL_FSDP2_OPTIM_CPU};
  const int moe = pl__fsdp2_any_moe(m);
  int n = 0;
  for (int cp = 1; cp <= Wv; cp++) /* a virtual cp in a proxy */
    for (int ep = 1; ep <= (moe ? Wv : 1); ep++)
      for (int a = 0; a < (with_ac_none ? 3 : 2); a++)
        for (int o = 0; o < 2; o++)
          for (int mi = 0; mi < nmicro; mi++) {
            pl_fsdp2_cfg c = *base;
            c.cp = cp, c.ep = ep, c.ac = acs[a], c.optim = opts[o];
            c.micro = micros[mi];
            /* torchtitan borrows EP from dp_shard × cp (ep = dp_shard_in_ep
             * · cp): with EP on, ep is a multiple of cp */
            if (ep > 1 && ep % cp)
              continue;
            if (pl_fsdp2_check(m, &c, W, S) != PL_OK) {
              pl_clear_error();
              continue;
            }
            if (n < cap && out)
              out[n] = c;
            n++;
          }
  return n;
}
