/* optim.c — the built-in optimizers of the training step (train/optim.h):
 * OffloadStreamAdamW and its hybrid over the step's borrowed host state. */
#include "train/optim.h"

#include <string.h>

static pl_status make(pl_dev *dev, const pl_adamw_hparams *hp,
                      const pl_optim_opts *o, int nparams,
                      const pl_adamw_param *params, const pl_adamw_state *state,
                      pl_comm *comm, double share, void **out) {
  pl_stream_adamw_cfg c = pl_stream_adamw_cfg_default();
  if (o->bucket)
    c.bucket = o->bucket;
  if (o->slots)
    c.slots = o->slots;
  c.grad_dtype = PL_F32;
  c.share = share;
  c.cpu_threads = o->cpu_threads;
  c.comm = comm;
  c.state = state;
  c.resident = state ? state->resident : 0;
  pl_stream_adamw *a = NULL;
  PL_TRY(pl_stream_adamw_create(dev, hp, &c, nparams, params, &a));
  *out = a;
  return PL_OK;
}

static pl_status stream_create(pl_dev *dev, const pl_adamw_hparams *hp,
                               const pl_optim_opts *o, int nparams,
                               const pl_adamw_param *params,
                               const pl_adamw_state *state, pl_comm *comm,
                               void **out) {
  return make(dev, hp, o, nparams, params, state, comm, 0.0, out);
}

static pl_status hybrid_create(pl_dev *dev, const pl_adamw_hparams *hp,
                               const pl_optim_opts *o, int nparams,
                               const pl_adamw_param *params,
                               const pl_adamw_state *state, pl_comm *comm,
                               void **out) {
  return make(dev, hp, o, nparams, params, state, comm,
              o->share ? o->share : -1.0, out);
}

static void destroy(void *o) {
  pl_stream_adamw_destroy(o);
}
static pl_status step(void *o, pl_stream *s) {
  return pl_stream_adamw_step(o, s);
}
static float gscale(void *o) {
  return pl_stream_adamw_gscale(o);
}
static size_t staging(void *o) {
  return pl_stream_adamw_staging_bytes(o);
}

const char pl_optim_name_stream[] = "stream";
const char pl_optim_name_hybrid[] = "hybrid";

const pl_optim_ops pl_optim_stream = {
    pl_optim_name_stream, 0, 1, stream_create, destroy, step, gscale, staging};
const pl_optim_ops pl_optim_hybrid = {
    pl_optim_name_hybrid, 0, 1, hybrid_create, destroy, step, gscale, staging};

const pl_optim_ops *const pl_optim_builtins[] = {&pl_optim_stream,
                                                 &pl_optim_hybrid, NULL};
const char *const pl_optim_builtin_names[] = {pl_optim_name_stream,
                                              pl_optim_name_hybrid, NULL};

pl_status pl_optim_builtin(const char *name, const pl_optim_ops **out) {
  for (int i = 0; name && pl_optim_builtins[i]; i++)
    if (!strcmp(name, pl_optim_builtins[i]->name)) {
      *out = pl_optim_builtins[i];
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL,
                      "optimizer '%s': built-in optimizers are stream and "
                      "hybrid (cpu comes from the suite's baselines)",
                      name ? name : "");
}
