/* fsdp2_plan.c — the FSDP2 baseline's point as the planner's configuration
 * (fsdp2.h: pl_fsdp2_plan_cfg), so the bench can check a point before it
 * launches it and the validation test can predict what it measures.  The
 * planner (engine/plan) models this baseline and cannot include it: this
 * file, above both, is where the knobs meet. */
#include "fsdp2.h"

pl_plan_cfg pl_fsdp2_plan_cfg(const pl_model_cfg *m, const pl_fsdp2_cfg *c,
                              int W, int64_t S) {
  pl_plan_cfg p = pl_plan_cfg_fsdp2(m, W, S);
  p.cp = c->cp, p.ep = c->ep;
  p.ac = c->ac == PL_FSDP2_AC_FULL        ? PL_PLAN_AC_FULL
         : c->ac == PL_FSDP2_AC_SELECTIVE ? PL_PLAN_AC_SELECTIVE
                                          : PL_PLAN_AC_NONE;
  p.ac_freq = c->ac_freq;
  p.offload = c->optim == PL_FSDP2_OPTIM_CPU;
  p.sc.micro = c->micro;
  p.sc.dt = c->dt;
  p.sc.attn = c->attn;
  p.sc.moe_lanes = c->moe_lanes;
  p.lc.W_v = c->W_v;
  p.lc.rank_view = c->rank_view;
  return p;
}
