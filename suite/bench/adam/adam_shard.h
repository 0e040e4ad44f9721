/* adam_shard.h — the pieces of `plateau bench adam` that are not the bench
 * protocol (adam_shard.c): a rank's parameter shard (uneven tensors, fixed
 * gradients, pinned fp32 state), the host link measured in the same run,
 * and the sampled reference replay its check compares with.  Internal to
 * suite/. */
#ifndef PLATEAU_SUITE_ADAM_SHARD_H
#define PLATEAU_SUITE_ADAM_SHARD_H

#include "harness/bench.h"
#include "ops/stream_adamw.h"

#define PL_ADAM_NSAMPLE 4096

/* A rank's shard: nt tensors over total params; gradients fixed over the run
 * (the bench measures the optimizer, not a backward pass). */
typedef struct pl_adam_shard {
  pl_dev *dev;
  int nt;
  pl_adamw_param *prm;
  size_t *off, total;
  pl_dtype gdt;
  int grad_host;
  uint64_t seed;
  float gstd;
  pl_adamw_state st;
} pl_adam_shard;

/* Uneven tensor sizes (weights 1 + (7i mod 5), the last takes the rest),
 * gradients drawn once, the initial state never zero (v > 0). */
pl_status pl__adam_shard_alloc(pl_adam_shard *S, pl_stream *s);
void pl__adam_shard_free(pl_adam_shard *S);
/* This rank's fixed-order sum of squares of the gradients, computed on the
 * host by the reference from the gradients copied back. */
pl_status pl__adam_shard_sumsq(const pl_adam_shard *S, pl_stream *s,
                               double *out);

/* The variants (--mode), in the order of their names
 * (pl__adam_mode_names, NULL-terminated). */
enum {
  PL_ADAM_CPU,
  PL_ADAM_STREAM,
  PL_ADAM_HYBRID,
  PL_ADAM_UPDATE,
  PL_ADAM_MODES
};
extern const char *const pl__adam_mode_names[];

/* Pinned H2D, D2H and both at once, every rank at the same time: GB/s per
 * rank (bidir counts both directions); NaN when no size fits. */
pl_status pl__adam_link(pl_bench_ctx *ctx, size_t bytes, double bw[3]);
/* Host memory: a copy of `bytes` between two pinned host buffers by every
 * OpenMP thread of the rank (each its contiguous range; every rank at once),
 * GB/s counting read + write; NaN when the buffers do not fit. */
pl_status pl__adam_hostmem(pl_bench_ctx *ctx, size_t bytes, double *gbs);
/* The floor of one step of Θ params from the host link and host memory
 * together, seconds, for mode (PL_ADAM_*): the stream (share 0), the
 * classic step (cpu), the hybrid (the share that minimizes it, returned in
 * *share), the CPU update alone (update: no link): the larger of each
 * direction's link bytes over its rate, both directions' over the bidirectional
 * rate, and the host-memory bytes (the DMA's and the CPU update's) over the
 * copy rate. bw: link H2D, D2H, both (GB/s); mem: the copy rate (GB/s); gsz:
 * gradient bytes; grad_host: gradients in host memory; cpu_mem: host-memory
 * bytes a parameter of the CPU engine (its update and copies). */
double pl__adam_joint_floor(int mode, double theta, double gsz, int grad_host,
                            const double bw[3], double mem, double cpu_mem,
                            double *share);

/* PL_ADAM_NSAMPLE elements spread over the shard: their state before a
 * point, and after it the reference AdamW replayed on them (steps steps,
 * clip factor gs_ref) compared bit for bit with master, m, v and the bf16
 * weight read back. */
typedef struct pl_adam_sample {
  size_t idx[PL_ADAM_NSAMPLE];
  int tensor[PL_ADAM_NSAMPLE];
  int n;
  float p[PL_ADAM_NSAMPLE], m[PL_ADAM_NSAMPLE], v[PL_ADAM_NSAMPLE];
  pl_bf16 *w; /* pinned host, PL_ADAM_NSAMPLE */
} pl_adam_sample;

void pl__adam_sample_pick(pl_adam_sample *X, const pl_adam_shard *S);
void pl__adam_sample_snap(pl_adam_sample *X, const pl_adam_shard *S);
pl_status pl__adam_sample_check(pl_adam_sample *X, const pl_adam_shard *S,
                                pl_stream *s, const pl_adamw_hparams *hp,
                                int steps, float gs_ref, pl_check *chk);

/* The shard S describes (its fields set, arrays not), its samples and the
 * reference clip factor (the fixed-order global norm over the ranks,
 * recomputed on the host): what every point of a run shares. */
pl_status pl__adam_shard_make(pl_bench_ctx *c, pl_adam_shard *S,
                              const pl_adamw_hparams *hp, pl_adam_sample **X,
                              float *gs_ref);

#endif
