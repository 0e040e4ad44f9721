/* bench_adam.h — what `plateau bench adam` (bench_adam.c: the options, the
 * points, the check) shares with its drivers (adam_variant.c: the run's
 * reference state, a point's optimizer by its variant and its step;
 * adam_rows.c: the columns of a measured point): the bench's state.
 * Internal to suite/. */
#ifndef PLATEAU_SUITE_BENCH_ADAM_H
#define PLATEAU_SUITE_BENCH_ADAM_H

#include "../baselines/cpu_adamw.h"
#include "adam_shard.h"
#include "harness/bench.h"
#include "ops/adamw.h"
#include "ops/stream_adamw.h"

/* The variants (--mode), in the order of their names. */
enum { PL_ADAM_CPU, PL_ADAM_STREAM, PL_ADAM_HYBRID, PL_ADAM_UPDATE,
       PL_ADAM_MODES };

/* Steps of a point whose clip factors are kept (warm-ups + timed). */
#define PL_ADAM_MAXSTEPS 4096

/* A point: the variant and its bucket size, slots and CPU share (cpu: the
 * staging's ring slots, 0 for full host copies, and its piece, 0 for the
 * staging's default). */
typedef struct pl__adam_pt {
  int mode, slots, share; /* share: index into shares */
  size_t beta;
} pl__adam_pt;

/* The bench's state: the options, the points, the run's reference state,
 * the point's optimizer. */
typedef struct pl__adam_bench {
  size_t P, link_bytes;
  pl_dtype gdt;
  bool grad_host;
  pl_simd_path simd;
  int threads, ntens;
  pl_adamw_hparams hp;
  double shares[8];
  char share_txt[8][32];
  pl__adam_pt *pts;
  /* once: the link, the shard, the samples, the reference clip factor */
  int ready;
  pl_status ready_st;
  char ready_msg[512];
  double bw[3], mem;
  pl_adam_shard S;
  pl_adam_sample *X;
  float gs_ref;
  /* the point's optimizer and its steps' clip factors */
  pl_stream *s;
  pl_stream_adamw *so;
  pl_cpu_offload_adamw *co;
  void *ug;       /* update: the gradients in pinned host memory      */
  pl_bf16 *uw;    /* update: the bf16 weights it writes (host)        */
  int nsteps;
  float gscale[PL_ADAM_MAXSTEPS];
  double update_ms;
} pl__adam_bench;

/* The timed unit: one step of the point's optimizer; its clip factor is
 * recorded (the first PL_ADAM_MAXSTEPS). */
pl_status pl__adam_step(void *st);
/* The link, the shard, the samples and the reference clip factor: once; a
 * shard that does not fit is every point's oom row. */
pl_status pl__adam_prepare(pl_bench_ctx *c, pl__adam_bench *A);
/* The optimizer of point q over the prepared shard: the classic CPU step
 * (cpu) or OffloadStreamAdamW (stream; hybrid with its CPU share). */
pl_status pl__adam_create(pl_bench_ctx *c, pl__adam_bench *A,
                          const pl__adam_pt *q);
/* The point's optimizer, destroyed (either variant; none: nothing). */
void pl__adam_destroy(pl__adam_bench *A);
/* Host-memory bytes a parameter that variant `mode` (PL_ADAM_*) moves in a
 * step, counted from the algorithm: the CPU update's reads and writes and
 * the DMA's, a cpu ring kept in cache (cached) counting none for its slots;
 * the hybrid at CPU share `share`. */
double pl__adam_host_bpp(int mode, int cached, double share, double gsz,
                         int grad_host);
/* The update variant: the bf16 weights it wrote, copied to the device (not
 * timed; the check reads the device's). */
pl_status pl__adam_update_publish(pl_bench_ctx *c, pl__adam_bench *A);
/* The columns of measured point q: rates, the link and joint floors, the
 * host-memory roofline, the parts, the host bytes.  Collective (max over
 * ranks). */
pl_status pl__adam_row(pl_bench_ctx *c, const pl__adam_bench *A,
                       const pl__adam_pt *q, pl_row *row);

#endif
