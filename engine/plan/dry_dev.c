/* dry_dev.c — a dry device set up as the planner sees a GPU: the device
 * that one step of a trainer runs on to measure what it allocates.
 *
 * Why here: a dry device (backend/dry) needs two things from above its
 * layer to stand for a real one — the backend whose allocations it makes
 * (its flavour, with that device's memory for code that sizes itself by
 * it) and the routes its MoE routers would read back.  The planner owns the
 * routing assumption (LLEP's balanced profile, ops/llep_plan.h; a skew
 * toward the rank measured; the adversarial routes of the worst case), so
 * the tests and `plateau bench train --backend dry` take their dry device
 * from here and route as the planner does. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/dry/dry.h"
#include "core/internal.h"
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

/* The skewed hook's ctx is a value (a pure hook's answers are shared by
 * value): the expert group's size Ep in bits 0..19 and the share of every
 * source's routes sent to the rank measured, in millionths, from bit 20. */
#define SKEW_EP_BITS 20

/* The skewed hook: a share r of every token's routes (the first r·N tokens,
 * all k routes) to the lowest experts, those of the rank measured (its E/Ep
 * experts, the lowest rank's), the rest balanced over the other ranks'
 * experts: that rank receives r·Ep times its balanced share.  One expert
 * group (E/Ep = E): nothing to skew, the balanced routes. */
static pl_status skewed_routes(void *ctx, int64_t N, int k, int E,
                               int32_t *idx) {
  const uintptr_t v = (uintptr_t)ctx;
  const int Ep = (int)(v & ((1u << SKEW_EP_BITS) - 1));
  const int h = Ep > 0 ? E / Ep : E;
  if (h < 1 || h >= E)
    return balanced_routes((void *)(intptr_t)0, N, k, E, idx);
  pl_route_profile p = {.balanced = false,
                        .r = (double)(v >> SKEW_EP_BITS) / 1e6,
                        .h = h,
                        .shuffled = false};
  snprintf(p.name, sizeof p.name, "imb/%d", h);
  return pl_route_profile_fill(&p, N, k, E, 0, 0, idx, NULL);
}

pl_status pl_plan_dry_device_skewed(pl_backend flavour, size_t total_bytes,
                                    int Ep, double imb, pl_dev **out) {
  *out = NULL;
  if (Ep < 1 || Ep >= (1 << SKEW_EP_BITS) || !(imb >= 1))
    return pl_set_error(PL_EINVAL,
                        "the dry device: Ep=%d imb=%g: need 1 <= Ep < %d and "
                        "imb >= 1",
                        Ep, imb, 1 << SKEW_EP_BITS);
  const double r = imb / Ep < 1 ? imb / Ep : 1;
  const uintptr_t ctx = (uintptr_t)Ep | (uintptr_t)llround(r * 1e6)
                                            << SKEW_EP_BITS;
  pl_dev *dev = NULL;
  PL_TRY(pl_dev_create(PL_BACKEND_DRY, 0, &dev));
  pl_status st = pl_dry_set_flavour(dev, flavour, total_bytes);
  if (st == PL_OK)
    st = pl_dry_set_routes_pure(dev, skewed_routes, (void *)ctx);
  if (st != PL_OK) {
    pl_dev_destroy(dev);
    return st;
  }
  *out = dev;
  return PL_OK;
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

/* The calling thread's zero tokens (pl_plan_dry_tokens). */
static _Thread_local int32_t *t_tokens;
static _Thread_local int64_t t_ntokens;

static void tokens_drop(void) {
  free(t_tokens);
  t_tokens = NULL;
  t_ntokens = 0;
}

const int32_t *pl_plan_dry_tokens(int64_t n) {
  if (n < 1)
    n = 1;
  if (n > t_ntokens) {
    tokens_drop();
    if (!(t_tokens = calloc((size_t)n, sizeof *t_tokens))) {
      pl_set_error(PL_ENOMEM, "the dry device: %lld host tokens", (long long)n);
      return NULL;
    }
    t_ntokens = n;
    pl__at_thread_exit(tokens_drop);
  }
  return t_tokens;
}
