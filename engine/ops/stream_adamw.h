/* stream_adamw.h — OffloadStreamAdamW (DESIGN §1.4): fp32 master, m, v in
 * pinned host memory (12 bytes/param), buckets of <= β params rotating through
 * s device staging slots on three streams (H2D, fused AdamW + bf16 refresh,
 * D2H) ordered by events, so the device holds only s·β·16 bytes of optimizer
 * staging; plus the hybrid beyond the paper: a share of the buckets updated by
 * the SIMD CPU kernel on a host thread, concurrently with the stream, moving
 * only 2+2 bytes/param (gradient down, bf16 weight up) over the link.
 *
 * Results equal the reference AdamW (ops/adamw.h) bit for bit on every
 * backend, whatever β, s or the hybrid share: only where and when an element
 * is updated changes, never its operations. */
#ifndef PLATEAU_OPS_STREAM_ADAMW_H
#define PLATEAU_OPS_STREAM_ADAMW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/adamw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One parameter tensor of the rank's shard.  weight: bf16 working weights in
 * device memory (written by every step).  grad: its gradient, f32 or bf16,
 * in device memory (or pinned host memory when the layout keeps gradients on
 * the host: cfg.grad_on_host).  Borrowed. */
typedef struct pl_adamw_param {
  pl_bf16 *weight;
  void *grad;
  size_t numel;
} pl_adamw_param;

/* Flat fp32 state in parameter order: elements [0, numel - resident) in
 * pinned host memory at p, m, v (element i at p[i]); the last `resident`
 * elements, when any, in device memory at dp, dm, dv (element numel -
 * resident + j at dp[j]) — optimizer-state residency, below. */
typedef struct pl_adamw_state {
  float *p, *m, *v;
  size_t numel;
  float *dp, *dm, *dv;
  size_t resident;
} pl_adamw_state;

typedef struct pl_stream_adamw_cfg {
  size_t bucket; /* β: params per bucket, >= 1                          */
  int slots;     /* s: device staging slots, 1..64                      */
  pl_dtype grad_dtype; /* f32 or bf16                                         */
  bool grad_on_host;   /* gradients live in pinned host memory: H2D them too */
  /* Hybrid: fraction of the buckets updated on the CPU, in [0, 1]; < 0 means
   * auto (start at share_init, then after every step set it from the measured
   * rates of the two engines: r_cpu / (r_cpu + r_gpu)). */
  double share;
  double share_init; /* first share when auto (e.g. 0.25)                 */
  int simd_path;   /* pl_simd_path of backend/adamw_kernels.h (0 = auto)      */
  int cpu_threads; /* OpenMP threads of the CPU share (<= 0: default)     */
  pl_comm *comm;   /* clipping norm over its ranks (NULL: this rank)      */
  /* Borrowed host state (pinned, numel = Θ) instead of allocating it: lets a
   * benchmark switch schedules without re-pinning 12Θ bytes.  NULL: own. */
  const pl_adamw_state *state;
  /* Optimizer-state residency: the last `resident` parameters' master, m and
   * v live in device memory (tag "optim_resident") and are updated there by
   * the same fused kernel, with no copy over the host link; the rest streams
   * as above.  A whole number of buckets: Θ − resident is a multiple of β (0
   * or Θ included; pl_stream_adamw_resident_elems gives it).  With a
   * borrowed state, state->resident must equal it. */
  size_t resident;
} pl_stream_adamw_cfg;

/* β = 100M, s = 2, bf16 gradients on the device, share 0. */
pl_stream_adamw_cfg pl_stream_adamw_cfg_default(void);

typedef struct pl_stream_adamw pl_stream_adamw;

/* Allocates master/m/v (pinned host, tag "optim", for the streamed Θ −
 * resident parameters; the resident ones in device memory, tag
 * "optim_resident"; contents undefined until the caller initializes them
 * through pl_stream_adamw_state), the device staging slots (tag
 * "optim_staging", min(s, streamed buckets) slots of min(β, Θ − resident)
 * params × (12 + gradient bytes if grad_on_host) <= s·β·16 bytes), the norm
 * partials, and for the hybrid two host slots of β gradients + β bf16 weights
 * (pinned, tag "optim_hybrid").  Buckets are built once here from the parameter
 * order: bucket b is the flat range [b·β, min((b+1)·β, Θ)), possibly spanning
 * several tensors or part of one. Out of memory: PL_ENOMEM, nothing leaked. */
pl_status pl_stream_adamw_create(pl_dev *dev, const pl_adamw_hparams *hp,
                                 const pl_stream_adamw_cfg *cfg, int nparams,
                                 const pl_adamw_param *params,
                                 pl_stream_adamw **out);
void pl_stream_adamw_destroy(pl_stream_adamw *o);
/* Pinned host bytes of the hybrid's buffers (tag optim_hybrid) for theta
 * params under cfg: the CPU share's gradients, cap·β·gsz (cap: the buckets
 * share·nb rounds to, at least 1, or every bucket when auto; nb the streamed
 * buckets, those of theta − cfg->resident), plus cap·β·2 of
 * bf16 weights with f32 or host gradients (bf16 ones are overwritten by the
 * weights); 0 without a hybrid share. */
size_t pl_stream_adamw_hybrid_bytes(size_t theta,
                                    const pl_stream_adamw_cfg *cfg);
pl_adamw_state pl_stream_adamw_state(pl_stream_adamw *o);
/* The parameters whose state fits `bytes` of device memory at 12 B each, in
 * whole buckets from the end of the flat order (the last bucket may be
 * short): resident = Θ − β·(nb − n) for the largest n buckets that fit, or Θ
 * when all is set; 0 when not one bucket fits. */
size_t pl_stream_adamw_resident_elems(size_t theta, size_t beta, bool all,
                                      uint64_t bytes);
size_t pl_stream_adamw_nbuckets(const pl_stream_adamw *o);
/* Device staging bytes allocated (the s·β·16 bound's actual value). */
size_t pl_stream_adamw_staging_bytes(const pl_stream_adamw *o);

/* One step.  Orders itself after the work already on s (the gradients), then:
 * clipping norm (if on; one host wait for the chunk partials, before any
 * update), the bucket loop on the three streams with no host wait inside, the
 * CPU share on a host thread (hybrid), and finally s waits for all of it.
 * Returns when everything is issued and the CPU share is done. */
pl_status pl_stream_adamw_step(pl_stream_adamw *o, pl_stream *s);

/* What the last step did. */
typedef struct pl_stream_adamw_last {
  int64_t t;    /* step number (1-based)                       */
  float gscale; /* clip factor used                            */
  double sumsq; /* global sum of squares (0 when not clipping) */
  size_t gpu_buckets, cpu_buckets;
  size_t resident_buckets;     /* updated in device memory, no link traffic */
  double share;                /* share used this step                        */
  double gpu_ms, cpu_ms;       /* time of the stream part and the CPU part  */
  double next_share;           /* share for the next step (auto)              */
  size_t h2d_bytes, d2h_bytes; /* bytes over the host link           */
} pl_stream_adamw_last;
void pl_stream_adamw_last_get(const pl_stream_adamw *o,
                              pl_stream_adamw_last *out);
/* The last step's clip factor, without waiting for anything. */
float pl_stream_adamw_gscale(const pl_stream_adamw *o);

/* Global fixed-order sum of squares: every rank's local sum gathered and
 * added in rank order (identical on all ranks); c NULL returns local. */
pl_status pl_adamw_global_sumsq(pl_comm *c, double local, double *out);

#ifdef __cplusplus
}
#endif
#endif
