/* backend/dry/dry.h — the dry device's one hook: where the MoE routes come
 * from when there is no router output to read back.  Not installed.
 *
 * A dry device (backend "dry", dry_backend.c) tracks every allocation but
 * backs none and runs no kernel, so a value the real step would copy back
 * from the device to decide something is not there.  Only one such value
 * changes what the step allocates: the router's top-k expert ids, whose
 * per-expert counts size the MoE dispatch buffers.  The caller (the planner,
 * or a test) supplies them through this hook; every other read-back yields
 * zeros (a loss of 0, a gradient norm of 0), which changes no allocation.
 *
 * One thread at a time drives a dry device: its tracker (core/mem.c) takes
 * no lock.  Threads measure at once each on a device of its own (the
 * planner's searches do). */
#ifndef PLATEAU_BACKEND_DRY_DRY_H
#define PLATEAU_BACKEND_DRY_DRY_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the N x k expert ids in [0, E) the router of this rank would have
 * chosen for its N tokens (ctx: the caller's, as given to the setter). */
typedef pl_status (*pl_dry_route_fn)(void *ctx, int64_t N, int k, int E,
                                     int32_t *idx);

/* Set (fn NULL: clear) the route source of dry device dev; PL_EINVAL when
 * dev is not dry. */
pl_status pl_dry_set_routes(pl_dev *dev, pl_dry_route_fn fn, void *ctx);

/* pl_dry_set_routes for a pure hook: one whose answer is a function of
 * (N, k, E) and of the value ctx alone, never of what ctx points to.  Its
 * answers are shared by every dry device of the process set with the same
 * fn and ctx, on any thread: each is asked for once (the process keeps the
 * last eight answers; two threads missing one at once may both ask, and
 * either answer serves), and devices reading the same answer read the same
 * stamp, so a
 * memo keyed by the stamp (ops/moe_plan_memo.h) serves them all.  Why: a
 * planner measures many configurations in a row, each on a new device,
 * most with the routes of the one before. */
pl_status pl_dry_set_routes_pure(pl_dev *dev, pl_dry_route_fn fn, void *ctx);

/* The routes of N tokens on dry device dev through its hook, read in place
 * (PL_EINVAL naming the missing hook when none was set).  The hook is asked
 * once per shape: the device keeps its last answer while (N, k, E, E_land)
 * stay the same (a hook is a function of them and its ctx, as the routes of
 * every layer and step are the same; setting a hook drops it).  The
 * answer is landed on E_land experts (dividing E): route e becomes e mod
 * E_land, as a proxy's MoE layer takes a router over
 * more slots (model/moe_ffn.h); E_land = E leaves them.  idx stays valid and
 * unchanged until the hook or (N, k, E, E_land) changes; counts[e] are the
 * hook's routes to router slot e (E entries, before the landing); stamp is
 * an answer's number, never the same for two answers of any dry devices.
 * Why: a step's every MoE layer reads the same routes, and the code that
 * keeps a memo of what it derives from them (ops/moe_plan_memo.h) recognises
 * them by their stamp (pl_dry_routes_stamp) instead of comparing N·k ids.
 * PL_EINVAL when a hook's expert id is outside [0, E). */
typedef struct pl_dry_route_view {
  const int32_t *idx;    /* N x k, in [0, E_land) */
  const int64_t *counts; /* E */
  uint64_t stamp;
} pl_dry_route_view;

pl_status pl_dry_routes_view(pl_dev *dev, int64_t N, int k, int E, int E_land,
                             pl_dry_route_view *v);

/* The stamp of routes idx (N x k, landed on E_land experts) when idx is dry
 * device dev's answer read in place (pl_dry_routes_view); 0 otherwise (other
 * memory, another device or backend, another shape). */
uint64_t pl_dry_routes_stamp(const pl_dev *dev, const int32_t *idx, int64_t N,
                             int k, int E_land);

/* The routes per expert of idx (counts: E_land entries) when idx is dry
 * device dev's answer read in place (pl_dry_routes_stamp nonzero): what
 * the device counted when its hook answered, landed; false otherwise
 * (counts untouched).  Why: a plan counting the routes again would pass
 * over N·k ids the device has already counted. */
bool pl_dry_routes_counts(const pl_dev *dev, const int32_t *idx, int64_t N,
                          int k, int E_land, int64_t *counts);

/* The backend dry device dev plays (be: cpu, the default, or cuda): the
 * code takes that backend's allocation decisions on dev — under cuda the
 * RMSNorm backward's scratch and the attention backward's workspace as
 * planned for a GPU (pl__allocs_as_cuda, core/internal.h) — while it still
 * runs nothing.  total_bytes: the device memory pl_dev_info reports (0:
 * none, as before), so that code sizing itself by the device (a bench's
 * plan) sees the GPU's.  PL_EINVAL when dev is not dry or be is dry. */
pl_status pl_dry_set_flavour(pl_dev *dev, pl_backend be, size_t total_bytes);

/* Host tokens [p, p + n) known to be zeros (a buffer its owner fills once
 * and never writes again, as the planner's measurement tokens): a step on
 * dev reads their range from here instead of from every token.  One such
 * buffer a device; p NULL forgets it.  PL_EINVAL when dev is not dry or
 * n < 0. */
pl_status pl_dry_set_zero_tokens(pl_dev *dev, const int32_t *p, int64_t n);
/* Are [p, p + n) inside the zero tokens set on dev?  False for every other
 * buffer and on other backends. */
bool pl_dry_zero_tokens(const pl_dev *dev, const int32_t *p, int64_t n);

/* Is p inside one of dev's unbacked ranges (an address the dry device handed
 * out)?  False for every address on other backends. */
bool pl_dry_owns(const pl_dev *dev, const void *p);

#ifdef __cplusplus
}
#endif
#endif
