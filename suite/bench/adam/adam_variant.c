/* adam_variant.c — the drivers of `plateau bench adam`'s variants
 * (bench_adam.h): the reference state every point of a run shares (the
 * host link and host memory measured once, the shard, its samples and the
 * reference clip factor), a point's optimizer as its variant makes it (cpu:
 * the ZeRO-Offload-style step of baselines/cpu_adamw.c with its staging;
 * stream and hybrid: OffloadStreamAdamW over β × s, the hybrid with its CPU
 * share; update: the SIMD update alone over host gradients, what PyTorch's
 * fused CPU AdamW peer times), and the step, the timed unit, with each
 * step's clip factor recorded for the check. */
#include <math.h>
#include <omp.h>
#include <stdio.h>

#include "bench_adam.h"

/* The update variant's step: the whole shard in one call, the reference
 * clip factor (the peer's opt.step() clips nothing either). */
static pl_status update_step(pl__adam_bench *A) {
  pl_adamw_scalars k =
      pl_adamw_scalars_make(&A->hp, A->nsteps + 1, A->gs_ref);
  return pl__cpu_adamw_simd(A->simd, A->threads, A->S.st.p, A->S.st.m,
                            A->S.st.v, A->ug, A->gdt, A->uw, A->P, &k);
}

pl_status pl__adam_step(void *st) {
  pl__adam_bench *A = st;
  float gs = 1.0f;
  if (A->ug) {
    PL_TRY(update_step(A));
    gs = A->gs_ref;
  } else if (A->co) {
    PL_TRY(pl_cpu_offload_adamw_step(A->co, A->s));
    pl_cpu_offload_adamw_last(A->co, &gs, &A->update_ms);
  } else {
    PL_TRY(pl_stream_adamw_step(A->so, A->s));
    gs = pl_stream_adamw_gscale(A->so); /* known once issued */
  }
  if (A->nsteps < PL_ADAM_MAXSTEPS)
    A->gscale[A->nsteps] = gs;
  A->nsteps++;
  return PL_OK;
}

/* The link, the shard, the samples and the reference clip factor: once; a
 * shard that does not fit is every point's oom row. */
pl_status pl__adam_prepare(pl_bench_ctx *c, pl__adam_bench *A) {
  PL_TRY(pl__adam_link(c, A->link_bytes, A->bw));
  PL_TRY(pl__adam_hostmem(c, A->link_bytes, &A->mem));
  if (c->rank == 0)
    printf("# link (per rank, %d ranks at once, %zu-byte pinned copies): "
           "H2D %.1f GB/s, D2H %.1f GB/s, both %.1f GB/s%s; host memory "
           "copy %.1f GB/s (read + write, %d threads)\n",
           c->size, A->link_bytes, A->bw[0], A->bw[1], A->bw[2],
           c->cuda ? "" : " (cpu backend: memcpy between arenas)", A->mem,
           omp_get_max_threads());
  A->S = (pl_adam_shard){.dev = c->dev,
                         .nt = A->ntens,
                         .total = A->P,
                         .gdt = A->gdt,
                         .grad_host = A->grad_host,
                         .seed = c->seed + 1000003ull * (uint64_t)c->rank,
                         /* global norm ~5·sqrt(ranks): clipping at 1.0
                          * active at every size (1e-4 at 2.625G params) */
                         .gstd = (float)(5.0 / sqrt((double)A->P))};
  return pl__adam_shard_make(c, &A->S, &A->hp, &A->X, &A->gs_ref);
}

/* The update variant's host gradients (copied from the shard's, tensor by
 * tensor) and weights, tag "optim_offload". */
static pl_status update_create(pl_bench_ctx *c, pl__adam_bench *A) {
  const size_t gsz = pl_dtype_size(A->gdt);
  PL_TRY(pl_alloc(c->dev, PL_ARENA_HOST, A->P * gsz, "optim_offload",
                  &A->ug));
  PL_TRY(pl_alloc(c->dev, PL_ARENA_HOST, A->P * 2, "optim_offload",
                  (void **)&A->uw));
  for (int i = 0; i < A->S.nt; i++)
    PL_TRY(pl_memcpy_async(c->stream, (char *)A->ug + A->S.off[i] * gsz,
                           A->S.prm[i].grad, A->S.prm[i].numel * gsz));
  return pl_stream_sync(c->stream);
}

pl_status pl__adam_update_publish(pl_bench_ctx *c, pl__adam_bench *A) {
  if (!A->uw)
    return PL_OK;
  for (int i = 0; i < A->S.nt; i++)
    PL_TRY(pl_memcpy_async(c->stream, A->S.prm[i].weight, A->uw + A->S.off[i],
                           A->S.prm[i].numel * 2));
  return pl_stream_sync(c->stream);
}

pl_status pl__adam_create(pl_bench_ctx *c, pl__adam_bench *A,
                          const pl__adam_pt *q) {
  if (q->mode == PL_ADAM_UPDATE) {
    PL_TRY(update_create(c, A));
  } else if (q->mode == PL_ADAM_CPU) {
    PL_TRY(pl_cpu_offload_adamw_create(c->dev, &A->hp, A->S.nt, A->S.prm,
                                       A->gdt, A->simd, A->threads, c->comm,
                                       &A->S.st, &A->co));
    PL_TRY(pl_cpu_offload_adamw_set_staging(A->co, q->slots, q->beta));
  } else {
    pl_stream_adamw_cfg g = pl_stream_adamw_cfg_default();
    g.bucket = q->beta;
    g.slots = q->slots;
    g.grad_dtype = A->gdt;
    g.grad_on_host = A->grad_host;
    g.share = q->mode == PL_ADAM_HYBRID ? A->shares[q->share] : 0.0;
    g.share_init = 0.5;
    g.simd_path = (int)A->simd;
    g.cpu_threads = A->threads;
    g.comm = c->comm;
    g.state = &A->S.st;
    PL_TRY(
        pl_stream_adamw_create(c->dev, &A->hp, &g, A->S.nt, A->S.prm, &A->so));
  }
  return PL_OK;
}

void pl__adam_destroy(pl__adam_bench *A) {
  pl_stream_adamw_destroy(A->so);
  pl_cpu_offload_adamw_destroy(A->co);
  if (A->ug)
    pl_free(A->S.dev, A->ug);
  if (A->uw)
    pl_free(A->S.dev, A->uw);
  A->so = NULL;
  A->co = NULL;
  A->ug = NULL;
  A->uw = NULL;
}
