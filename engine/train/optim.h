/* optim.h — the optimizer of the training step behind one small interface:
 * OffloadStreamAdamW (stream), its hybrid (a share of the buckets updated by
 * the SIMD CPU kernel beside the stream), or one the suite fills from
 * baselines/ (the classic offloaded SIMD CPU AdamW, "cpu").
 *
 * Every optimizer updates the rank's shard: the fp32 master, m and v in the
 * step's pinned host state (borrowed: the step allocates and initializes
 * it, 12 bytes per parameter; with residency its last state->resident
 * elements in device memory — an optimizer that cannot update them there
 * refuses a state with resident > 0), the gradients (f32, device) and the bf16
 * working weights it rewrites (device); global gradient-norm clipping over
 * comm (every parameter is owned by exactly one rank of it). */
#ifndef PLATEAU_TRAIN_OPTIM_H
#define PLATEAU_TRAIN_OPTIM_H

#include "ops/stream_adamw.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_optim_opts {
  size_t bucket;   /* β: parameters per bucket (stream, hybrid)          */
  int slots;       /* s: device staging slots                            */
  double share;    /* hybrid: CPU share in (0, 1]; <= 0: auto (measured) */
  int cpu_threads; /* CPU update threads (<= 0: OpenMP's default)        */
  /* Optimizer-state residency (stream, hybrid): device memory for the fp32
   * master, m and v of the last buckets (12 B per parameter, whole buckets:
   * pl_stream_adamw_resident_elems), updated there by the same kernel; the
   * trainer allocates that part of the state on the device (tag
   * "optim_resident") and passes it in the borrowed state.  0: none. */
  bool resident_all;
  uint64_t resident_bytes;
} pl_optim_opts;

typedef struct pl_optim_ops {
  const char *name;
  /* What the step and the planner ask of an optimizer (never its name):
   * host_update 1: the whole update runs on the CPU over host copies of the
   * f32 gradients and bf16 weights, moved over the link every step (4 + 2 B
   * per parameter of pinned host memory); resident_state 1: it can update
   * the last buckets' state kept in device memory (pl_optim_opts'
   * residency; 0: the whole state must be on the host). */
  int host_update;
  int resident_state;
  pl_status (*create)(pl_dev *dev, const pl_adamw_hparams *hp,
                      const pl_optim_opts *o, int nparams,
                      const pl_adamw_param *params, const pl_adamw_state *state,
                      pl_comm *comm, void **out);
  void (*destroy)(void *o);
  /* One step after the gradients' work on s; s waits for the weights. */
  pl_status (*step)(void *o, pl_stream *s);
  /* The last step's clip factor (1 when not clipping). */
  float (*gscale)(void *o);
  /* Device staging bytes (the s·β·16 bound's actual value), or 0. */
  size_t (*staging_bytes)(void *o);
} pl_optim_ops;

extern const pl_optim_ops pl_optim_stream;
extern const pl_optim_ops pl_optim_hybrid;

/* The optimizers' names, each written once (as the heads', train/head.h):
 * an optimizer's ops point at its name, every list of names holds these
 * pointers. */
extern const char pl_optim_name_stream[]; /* "stream" */
extern const char pl_optim_name_hybrid[]; /* "hybrid" */
/* The built-in optimizers and their names, in the same order,
 * NULL-terminated. */
extern const pl_optim_ops *const pl_optim_builtins[];
extern const char *const pl_optim_builtin_names[];

/* "stream" | "hybrid" (the suite adds "cpu"). */
pl_status pl_optim_builtin(const char *name, const pl_optim_ops **out);

#ifdef __cplusplus
}
#endif
#endif
