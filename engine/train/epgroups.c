/* epgroups.c — the trainer's expert units when expert groups are smaller
 * than the world (train/epgroups.h): one ZeRO-3 unit per MoE layer over the
 * ranks holding the same experts, gathered around the layer's FFN slot, its
 * gradient reduce-scattered after the slot's backward. */
#include <stdio.h>
#include <stdlib.h>

#include "train/epgroups.h"
#include "train/step_internal.h"

pl_status pl__ep_create(pl_trainer *t) {
  for (int l = 0; l < t->model.L; l++)
    t->layers[l].eunit = -1;
  if (!t->plan.ep_grouped)
    return PL_OK;
  int n = 0;
  for (int l = 0; l < t->model.L; l++)
    n += t->layers[l].moe;
  pl_zero3_unit_cfg *uc = calloc((size_t)n + 1, sizeof *uc);
  char(*names)[24] = calloc((size_t)n + 1, sizeof *names);
  if (!uc || !names) {
    free(uc);
    free(names);
    return pl_set_error(PL_ENOMEM, "trainer: host");
  }
  for (int l = 0, u = 0; l < t->model.L; l++) {
    pl__tlayer *x = &t->layers[l];
    if (!x->moe)
      continue;
    x->eunit = u;
    snprintf(names[u], sizeof names[u], "experts%d", l);
    uc[u] = (pl_zero3_unit_cfg){
        names[u], pl__ep_unit(t->model.H, t->model.I, t->plan.E_local, x->eoff),
        t->lay->erep, t->plan.ep_vsize};
    u++;
  }
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              pl_zero3_create(t->dev, t->dt, n, uc, &t->expert_units));
  pl_zero3_set_profile(t->expert_units, t->cfg.profile);
done:
  free(uc);
  free(names);
  return st;
}

pl_status pl__ep_layer_begin(pl_trainer *t, pl__tlayer *x, pl_stream *s) {
  if (!t->expert_units || x->eunit < 0)
    return PL_OK;
  return pl_zero3_prefetch(t->expert_units, x->eunit, s);
}

pl_status pl__ep_slot_begin(pl_trainer *t, pl__tlayer *x, pl_stream *s,
                            bool bwd) {
  if (!t->expert_units || x->eunit < 0)
    return PL_OK;
  void *full;
  PL_TRY(pl_zero3_acquire(t->expert_units, x->eunit, s, &full));
  char *W = full;
  x->ffn.ew = (pl_moe_weights){W + x->eoff[0] * t->elem_bytes,
                               W + x->eoff[1] * t->elem_bytes,
                               W + x->eoff[2] * t->elem_bytes};
  if (!bwd)
    return PL_OK;
  float *g;
  PL_TRY(pl_zero3_grad_acquire(t->expert_units, x->eunit, s, &g));
  x->ffn.eg = (pl_moe_wgrads){g + x->eoff[0], g + x->eoff[1], g + x->eoff[2]};
  return PL_OK;
}

pl_status pl__ep_slot_end(pl_trainer *t, pl__tlayer *x, pl_stream *s,
                          bool bwd) {
  if (!t->expert_units || x->eunit < 0)
    return PL_OK;
  pl_zero3_release(t->expert_units, x->eunit, s);
  x->ffn.ew = (pl_moe_weights){NULL, NULL, NULL};
  if (!bwd)
    return PL_OK;
  x->ffn.eg = (pl_moe_wgrads){NULL, NULL, NULL};
  return pl_zero3_grad_reduce(t->expert_units, x->eunit, s, t->micro_i > 0);
}

void pl__ep_param_shard(pl_trainer *t, const pl__tparam *p, void **w, float **g,
                        size_t *s, size_t *off, size_t *p0, size_t *n) {
  const pl__tlayer *x = &t->layers[p->layer];
  PL_ASSERT(t->expert_units && x->eunit >= 0);
  pl_zero3_shard(t->expert_units, x->eunit, w, g, s, off);
  *p0 = x->eoff[p->which];
  *n = (size_t)t->plan.E_local * (size_t)(t->model.H * t->model.I);
}
