/* mem_hook.c — the planner's memory of a system whose trainer lives above it
 * (the FSDP2 baseline, baselines/fsdp2), measured on a dry device by that
 * trainer's own layer (pl_plan_set_dry_measure, plan.h).
 *
 * Why a hook: the planner sits below baselines/ and cannot build their
 * trainers, yet a dry step of the real trainer is the memory answer the
 * project keeps (the planner replays no schedule).  The layer that owns a
 * trainer registers its measurement once at the program's start; the
 * planner calls it through here and refuses, naming what is missing, where
 * nothing was registered.  A configuration the planner can tell is not
 * valid (FSDP2: pl__fsdp2_check, fsdp2_time.c) is refused before the
 * measurement, PL_EINVAL naming the value, as the time model refuses it. */
#include "plan/plan_internal.h"

static pl_plan_dry_measure_fn measure_fns[PL_PLAN_FSDP2 + 1];

void pl_plan_set_dry_measure(pl_plan_system s, pl_plan_dry_measure_fn fn) {
  if ((unsigned)s <= PL_PLAN_FSDP2)
    measure_fns[s] = fn;
}

pl_status pl_plan_dry_measure(const pl_model_cfg *m, const pl_plan_cfg *c,
                              const pl_plan_machine *mc, pl_plan_mem *out) {
  const pl_plan_system s = c->system;
  if (s == PL_PLAN_FSDP2)
    PL_TRY(pl__fsdp2_check(m, c));
  if ((unsigned)s > PL_PLAN_FSDP2 || !measure_fns[s])
    return pl_set_error(
        PL_EUNSUPPORTED,
        "the dry device: no measurement of the %s system is registered (the "
        "layer that builds its trainer registers one: "
        "pl_plan_set_dry_measure)",
        (unsigned)s <= PL_PLAN_FSDP2 ? pl_plan_system_name(s) : "unknown");
  return measure_fns[s](m, c, mc, out);
}
