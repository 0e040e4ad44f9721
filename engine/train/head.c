/* head.c — the built-in heads of the training step (train/head.h): Ring-DTP
 * over the P-group and at P = 1 (there the three-GEMM schedule: pl_dtp_run),
 * reduction "none" with the step's dloss. */
#include "train/head.h"

#include <string.h>

#include "core/internal.h"
#include "ops/ring_dtp.h"

static pl_status dtp_create(pl_comm *group, const pl_head_shape *sh,
                            void **ctx) {
  pl_dtp_opts o;
  pl_dtp_opts_default(&o);
  o.red = PL_CE_NONE;
  o.ignore = sh->ignore;
  o.block = sh->block;
  pl_dtp *d = NULL;
  PL_TRY(pl_dtp_create(group, sh->dt, sh->n, sh->h, sh->v, &o, &d));
  *ctx = d;
  return PL_OK;
}

static void dtp_destroy(void *ctx) {
  pl_dtp_destroy(ctx);
}

static pl_status dtp_run(void *ctx, pl_stream *s, const void *x,
                         const int32_t *t, const void *w, const float *dloss,
                         float *nll, void *dx, void *dw) {
  return pl_dtp_run(ctx, s, x, t, w, dloss, nll, dx, dw);
}

static size_t dtp_bound(void *ctx) {
  return pl_dtp_logits_bound(ctx) + pl_dtp_ring_bound(ctx) +
         pl_dtp_grads_scratch(ctx);
}

const char pl_head_name_ring[] = "ring";
const char pl_head_name_fused[] = "fused";

const pl_head_ops pl_head_ring = {pl_head_name_ring, 1,       dtp_create,
                                  dtp_destroy,       dtp_run, dtp_bound};
const pl_head_ops pl_head_fused = {pl_head_name_fused, 0,       dtp_create,
                                   dtp_destroy,        dtp_run, dtp_bound};

const pl_head_ops *const pl_head_builtins[] = {&pl_head_ring, &pl_head_fused,
                                               NULL};
const char *const pl_head_builtin_names[] = {pl_head_name_ring,
                                             pl_head_name_fused, NULL};

pl_status pl_head_nll_sum(pl_stream *s, const float *nll, float *h_nll,
                          int64_t N, double *sum) {
  *sum = 0;
  if (pl__on_dry(s)) /* nothing computed: zeros, and no host bytes touched */
    return pl_stream_sync(s);
  PL_TRY(pl_memcpy_async(s, h_nll, nll, (size_t)N * 4));
  PL_TRY(pl_stream_sync(s));
  double acc = 0;
  for (int64_t i = 0; i < N; i++)
    acc += h_nll[i];
  *sum = acc;
  return PL_OK;
}

pl_status pl_head_builtin(const char *name, const pl_head_ops **out) {
  for (int i = 0; name && pl_head_builtins[i]; i++)
    if (!strcmp(name, pl_head_builtins[i]->name)) {
      *out = pl_head_builtins[i];
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL,
                      "head '%s': built-in heads are ring and fused (dense "
                      "and vp come from the suite's baselines)",
                      name ? name : "");
}
