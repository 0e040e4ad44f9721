/* cpu_adamw.c — the classic offloaded step (cpu_adamw.h): the paper's
 * ZeRO-Offload-style baseline, built on the CPU backend's SIMD AdamW
 * (backend/cpu/adamw_simd.c). */
#include "cpu_adamw.h"

#include <stdlib.h>
#include <string.h>

/* ---- the classic offloaded step -------------------------------------------- */

struct pl_cpu_offload_adamw {
  pl_dev *dev;
  pl_adamw_hparams hp;
  pl_comm *comm;
  int nparams;
  pl_adamw_param *params;
  size_t *offset; /* flat offset of each tensor */
  size_t total;
  pl_dtype gdt;
  pl_simd_path path;
  int nthreads;
  float *p, *m, *v;    /* host, pinned, "optim"         */
  int own_state;
  void *hgrad;         /* host, pinned, "optim_offload" */
  pl_bf16 *hw;         /* host, pinned, "optim_offload" */
  double *partials;    /* ordinary host scratch           */
  size_t npartials;
  int64_t t;
  float last_gscale;
  double last_update_ms;
};

void pl_cpu_offload_adamw_destroy(pl_cpu_offload_adamw *o) {
  if (!o) return;
  if (o->own_state) {
    pl_free(o->dev, o->p);
    pl_free(o->dev, o->m);
    pl_free(o->dev, o->v);
  }
  pl_free(o->dev, o->hgrad);
  pl_free(o->dev, o->hw);
  free(o->partials);
  free(o->params);
  free(o->offset);
  free(o);
}

pl_status pl_cpu_offload_adamw_create(pl_dev *dev, const pl_adamw_hparams *hp,
                                      int nparams,
                                      const pl_adamw_param *params,
                                      pl_dtype gdt, pl_simd_path path,
                                      int nthreads, pl_comm *comm,
                                      const pl_adamw_state *state,
                                      pl_cpu_offload_adamw **out) {
  *out = NULL;
  PL_TRY(pl_adamw_hparams_check(hp));
  if (nparams < 1 || !params)
    return pl_set_error(PL_EINVAL, "cpu_offload_adamw: nparams=%d: must be "
                        ">= 1", nparams);
  PL_TRY(pl_adamw_gdt_check(gdt, "cpu_offload_adamw"));
  pl_simd_path rp;
  PL_TRY(pl_simd_path_resolve(path, &rp));
  pl_cpu_offload_adamw *o = calloc(1, sizeof *o);
  if (!o) return pl_set_error(PL_ENOMEM, "cpu_offload_adamw: host struct");
  o->dev = dev;
  o->hp = *hp;
  o->comm = comm;
  o->nparams = nparams;
  o->gdt = gdt;
  o->path = rp;
  o->nthreads = nthreads;
  o->params = malloc(sizeof(pl_adamw_param) * (size_t)nparams);
  o->offset = malloc(sizeof(size_t) * (size_t)nparams);
  if (!o->params || !o->offset) {
    pl_cpu_offload_adamw_destroy(o);
    return pl_set_error(PL_ENOMEM, "cpu_offload_adamw: host tables");
  }
  for (int i = 0; i < nparams; i++) {
    o->params[i] = params[i];
    o->offset[i] = o->total;
    o->total += params[i].numel;
    o->npartials += pl_adamw_norm_nchunks(params[i].numel);
  }
  size_t n = o->total, gsz = pl_dtype_size(gdt);
  pl_status st = PL_OK;
  if (state) {
    if (state->numel != n || !state->p || !state->m || !state->v) {
      pl_cpu_offload_adamw_destroy(o);
      return pl_set_error(PL_EINVAL, "cpu_offload_adamw: borrowed state of "
                          "%zu params: must hold all %zu", state->numel, n);
    }
    o->p = state->p;
    o->m = state->m;
    o->v = state->v;
  } else {
    o->own_state = 1;
    if ((st = pl_alloc(dev, PL_ARENA_HOST, n * 4, "optim", (void **)&o->p)) ||
        (st = pl_alloc(dev, PL_ARENA_HOST, n * 4, "optim", (void **)&o->m)) ||
        (st = pl_alloc(dev, PL_ARENA_HOST, n * 4, "optim", (void **)&o->v))) {
      pl_cpu_offload_adamw_destroy(o);
      return st;
    }
  }
  if ((st = pl_alloc(dev, PL_ARENA_HOST, n * gsz, "optim_offload",
                     &o->hgrad)) ||
      (st = pl_alloc(dev, PL_ARENA_HOST, n * 2, "optim_offload",
                     (void **)&o->hw))) {
    pl_cpu_offload_adamw_destroy(o);
    return st;
  }
  o->partials = calloc(o->npartials ? o->npartials : 1, sizeof(double));
  if (!o->partials) {
    pl_cpu_offload_adamw_destroy(o);
    return pl_set_error(PL_ENOMEM, "cpu_offload_adamw: partials");
  }
  *out = o;
  return PL_OK;
}

pl_adamw_state pl_cpu_offload_adamw_state(pl_cpu_offload_adamw *o) {
  pl_adamw_state s = {o->p, o->m, o->v, o->total};
  return s;
}

pl_status pl_cpu_offload_adamw_step(pl_cpu_offload_adamw *o, pl_stream *s) {
  size_t gsz = pl_dtype_size(o->gdt);
  /* 1. gradients device -> host, and wait for them. */
  for (int i = 0; i < o->nparams; i++)
    PL_TRY(pl_memcpy_async(s, (char *)o->hgrad + o->offset[i] * gsz,
                           o->params[i].grad, o->params[i].numel * gsz));
  PL_TRY(pl_stream_sync(s));
  /* 2. clipping norm in the fixed order, before any update. */
  float gscale = 1.0f;
  if (o->hp.max_grad_norm > 0) {
    size_t c = 0;
    for (int i = 0; i < o->nparams; i++) {
      pl_adamw_ref_sumsq_partials((char *)o->hgrad + o->offset[i] * gsz,
                                  o->gdt, o->params[i].numel,
                                  o->partials + c);
      c += pl_adamw_norm_nchunks(o->params[i].numel);
    }
    double ss = pl_adamw_sum_partials(o->partials, c);
    PL_TRY(pl_adamw_global_sumsq(o->comm, ss, &ss));
    gscale = pl_adamw_clip_scale(&o->hp, ss);
  }
  /* 3. SIMD update over the flat state. */
  o->t++;
  pl_adamw_scalars k = pl_adamw_scalars_make(&o->hp, o->t, gscale);
  uint64_t t0 = pl_now_ns();
  PL_TRY(pl__cpu_adamw_simd(o->path, o->nthreads, o->p, o->m, o->v, o->hgrad,
                           o->gdt, o->hw, o->total, &k));
  o->last_update_ms = (double)(pl_now_ns() - t0) * 1e-6;
  o->last_gscale = gscale;
  /* 4. bf16 weights host -> device (in flight on s). */
  for (int i = 0; i < o->nparams; i++)
    PL_TRY(pl_memcpy_async(s, o->params[i].weight, o->hw + o->offset[i],
                           o->params[i].numel * 2));
  return PL_OK;
}

void pl_cpu_offload_adamw_last(const pl_cpu_offload_adamw *o, float *gscale,
                               double *update_ms) {
  if (gscale) *gscale = o->last_gscale;
  if (update_ms) *update_ms = o->last_update_ms;
}
