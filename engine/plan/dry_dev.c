/* dry_dev.c — a dry device set up as the planner sees a GPU: the device
 * that one step of a trainer runs on to measure what it allocates.
 *
 * Why here: a dry device (backend/dry) needs two things from above its
 * layer to stand for a real one — the backend whose allocations it makes
 * (its flavour, with that device's memory for code that sizes itself by
 * it) and the routes its MoE routers would read back.  The planner owns the
 * routing assumption (LLEP's balanced profile, ops/llep_plan.h, the one
 * pl_plan_memory replays), so the tests and `plateau bench train --backend
 * dry` take their dry device from here and agree with the replay. */
#include <stdint.h>
#include <stdio.h>

#include "backend/dry/dry.h"
#include "ops/llep_plan.h"
#include "plan/plan.h"

/* The route hook: the balanced profile of the rank ctx encodes, seed 0. */
static pl_status balanced_routes(void *ctx, int64_t N, int k, int E,
                                 int32_t *idx) {
  pl_route_profile p;
  PL_TRY(pl_route_profile_parse("balanced", &p));
  const int rank = (int)(intptr_t)ctx;
  return pl_route_profile_fill(&p, N, k, E, 0, rank, idx, NULL);
}

/* The adversarial hook: every token's k routes to the experts 0..k-1 (the
 * lowest rank's, the rank the planner measures), so that rank receives all
 * of its sources' routes; k = E: no choice, the balanced routes. */
static pl_status adversarial_routes(void *ctx, int64_t N, int k, int E,
                                    int32_t *idx) {
  if (k >= E)
    return balanced_routes(ctx, N, k, E, idx);
  char name[24];
  snprintf(name, sizeof name, "100/%d", k);
  pl_route_profile p;
  PL_TRY(pl_route_profile_parse(name, &p));
  return pl_route_profile_fill(&p, N, k, E, 0, 0, idx, NULL);
}

pl_status pl_plan_dry_device(pl_backend flavour, size_t total_bytes,
                             int route_rank, pl_dev **out) {
  return pl_plan_dry_device_routed(flavour, total_bytes, route_rank,
                                   PL_PLAN_ROUTES_BALANCED, out);
}

pl_status pl_plan_dry_device_routed(pl_backend flavour, size_t total_bytes,
                                    int route_rank, pl_plan_routes routes,
                                    pl_dev **out) {
  *out = NULL;
  pl_dev *dev = NULL;
  PL_TRY(pl_dev_create(PL_BACKEND_DRY, 0, &dev));
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, fail, pl_dry_set_flavour(dev, flavour, total_bytes));
  PL_TRY_GOTO(st, fail,
              pl_dry_set_routes_pure(dev,
                                     routes == PL_PLAN_ROUTES_ADVERSARIAL
                                         ? adversarial_routes
                                         : balanced_routes,
                                     (void *)(intptr_t)route_rank));
  *out = dev;
  return PL_OK;
fail:
  pl_dev_destroy(dev);
  return st;
}
