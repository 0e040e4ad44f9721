/* cpu_adamw_testlib.h — the classic offloaded step (cpu_adamw.h) as an
 * optimizer of the AdamW test harness (ops/adamw_testlib.h), so the
 * baseline's tests run the same cases beside the same reference as
 * OffloadStreamAdamW.  Included by test files only (static functions). */
#ifndef PLATEAU_BASELINES_CPU_ADAMW_TESTLIB_H
#define PLATEAU_BASELINES_CPU_ADAMW_TESTLIB_H

#include "cpu_adamw.h"
#include "ops/adamw_testlib.h"

static pl_status tl_offload_create(pl_dev *dev, const pl_adamw_hparams *hp,
                                   const tl_case *c, const pl_adamw_param *prm,
                                   pl_comm *comm, void **out) {
  pl_cpu_offload_adamw *o = NULL;
  PL_TRY(pl_cpu_offload_adamw_create(dev, hp, c->nt, prm, c->gdt,
                                     (pl_simd_path)c->simd, 0, comm, NULL, &o));
  /* the case's slots set the staging (0: full host copies, else a ring of
   * that many pieces) and its bucket the pieces (0: the staging's
   * default) */
  pl_status st = pl_cpu_offload_adamw_set_staging(o, c->slots, c->bucket);
  if (st != PL_OK) {
    pl_cpu_offload_adamw_destroy(o);
    return st;
  }
  *out = o;
  return PL_OK;
}
static pl_adamw_state tl_offload_state(void *o) {
  return pl_cpu_offload_adamw_state(o);
}
static pl_status tl_offload_step(void *o, pl_stream *s) {
  return pl_cpu_offload_adamw_step(o, s);
}
static float tl_offload_gscale(const void *o) {
  float gs = 1.0f;
  pl_cpu_offload_adamw_last(o, &gs, NULL);
  return gs;
}
static void tl_offload_destroy(void *o) {
  pl_cpu_offload_adamw_destroy(o);
}

__attribute__((unused)) static const tl_opt tl_offload = {
    tl_offload_create, tl_offload_state, tl_offload_step, tl_offload_gscale,
    tl_offload_destroy};

#endif
