/* train_baselines.c — the baselines behind the training step's head and
 * optimizer interfaces (train_baselines.h). */
#include "train_baselines.h"

#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "cpu_adamw.h"
#include "dense_ce.h"
#include "vocab_parallel_ce.h"

typedef struct hctx {
  pl_comm *group;
  pl_head_shape sh;
} hctx;

static pl_status hcreate(pl_comm *group, const pl_head_shape *sh, void **ctx) {
  hctx *h = calloc(1, sizeof *h);
  if (!h)
    return pl_set_error(PL_ENOMEM, "head: host");
  h->group = group;
  h->sh = *sh;
  *ctx = h;
  return PL_OK;
}

static void hdestroy(void *ctx) {
  free(ctx);
}

static pl_ce_problem problem(const hctx *h, int64_t n, int64_t v) {
  pl_ce_problem pb;
  memset(&pb, 0, sizeof pb);
  pb.dt = h->sh.dt;
  pb.n = n, pb.h = h->sh.h, pb.v = v;
  pb.red = PL_CE_NONE;
  pb.ignore = h->sh.ignore;
  pb.block = h->sh.block;
  return pb;
}

static pl_status dense_run(void *ctx, pl_stream *s, const void *x,
                           const int32_t *t, const void *w, const float *dloss,
                           float *nll, void *dx, void *dw) {
  const hctx *h = ctx;
  pl_ce_problem pb = problem(h, h->sh.n, h->sh.v);
  pb.x = x, pb.t = t, pb.w = w, pb.dloss = dloss, pb.loss = nll, pb.dx = dx,
  pb.dw = dw;
  return pl_dense_ce(s, &pb);
}

/* A gathered buffer of the vocab-parallel head (tag "head_gather") on s. */
static pl_status gather_alloc(pl_stream *s, size_t bytes, void **p) {
  return pl_alloc_async(pl_stream_dev(s), PL_ARENA_DEVICE, bytes, "head_gather",
                        s, p);
}

static pl_status vp_run(void *ctx, pl_stream *s, const void *x,
                        const int32_t *t, const void *w, const float *dloss,
                        float *nll, void *dx, void *dw) {
  const hctx *h = ctx;
  pl_dev *dev = pl_stream_dev(s);
  const int P = pl_comm_size(h->group), r = pl_comm_rank(h->group);
  const int64_t n = h->sh.n, H = h->sh.h;
  const size_t es = pl_dtype_size(h->sh.dt), nh = (size_t)(n * H);
  void *xa = NULL, *dxa = NULL;
  int32_t *ta = NULL;
  float *la = NULL, *nlla = NULL;
  /* a rank that failed skips its own part but never the agreement before
   * the gathers */
  pl_status st = gather_alloc(s, (size_t)P * nh * es, &xa);
  if (st == PL_OK)
    st = gather_alloc(s, (size_t)P * (size_t)n * 4, (void **)&ta);
  if (st == PL_OK)
    st = gather_alloc(s, (size_t)P * (size_t)n * 4, (void **)&la);
  if (st == PL_OK)
    st = gather_alloc(s, (size_t)P * (size_t)n * 4, (void **)&nlla);
  if (st == PL_OK)
    st = gather_alloc(s, (size_t)P * nh * es, &dxa);
  PL_TRY_GOTO(st, done,
              pl_bl_agree(h->group, st, "vocab-parallel head",
                          "all-gathers of the rows"));
  PL_TRY_GOTO(st, done, pl_allgather(h->group, x, xa, nh, h->sh.dt, s));
  PL_TRY_GOTO(st, done, pl_allgather(h->group, t, ta, (size_t)n, PL_I32, s));
  PL_TRY_GOTO(st, done,
              pl_allgather(h->group, dloss, la, (size_t)n, PL_F32, s));
  pl_ce_problem pb = problem(h, (int64_t)P * n, h->sh.v);
  pb.x = xa, pb.t = ta, pb.w = w, pb.dloss = la, pb.loss = nlla, pb.dx = dxa,
  pb.dw = dw;
  PL_TRY_GOTO(st, done, pl_vocab_parallel_ce(h->group, s, &pb));
  /* this rank's rows */
  PL_TRY_GOTO(
      st, done,
      pl_memcpy_async(s, dx, (char *)dxa + (size_t)r * nh * es, nh * es));
  st = pl_memcpy_async(s, nll, nlla + (size_t)r * (size_t)n, (size_t)n * 4);
done:
  pl_free_async(dev, xa, s);
  pl_free_async(dev, ta, s);
  pl_free_async(dev, la, s);
  pl_free_async(dev, nlla, s);
  pl_free_async(dev, dxa, s);
  return st;
}

static const char dense_name[] = "dense";
static const char vp_name[] = "vp";
const pl_head_ops pl_head_dense = {dense_name, 0,         hcreate,
                                   hdestroy,   dense_run, NULL};
const pl_head_ops pl_head_vp = {vp_name, 1, hcreate, hdestroy, vp_run, NULL};

static pl_status cpu_create(pl_dev *dev, const pl_adamw_hparams *hp,
                            const pl_optim_opts *o, int nparams,
                            const pl_adamw_param *params,
                            const pl_adamw_state *state, pl_comm *comm,
                            void **out) {
  if (state && state->resident > 0)
    return pl_set_error(PL_EINVAL,
                        "optimizer cpu: %zu parameters' state resident on "
                        "the device: the CPU update needs all of it on the "
                        "host (resident state: stream or hybrid)",
                        state->resident);
  pl_cpu_offload_adamw *a = NULL;
  PL_TRY(pl_cpu_offload_adamw_create(dev, hp, nparams, params, PL_F32,
                                     PL_SIMD_AUTO, o->cpu_threads, comm, state,
                                     &a));
  *out = a;
  return PL_OK;
}
static void cpu_destroy(void *o) {
  pl_cpu_offload_adamw_destroy(o);
}
static pl_status cpu_step(void *o, pl_stream *s) {
  return pl_cpu_offload_adamw_step(o, s);
}
static float cpu_gscale(void *o) {
  float g = 1.0f;
  pl_cpu_offload_adamw_last(o, &g, NULL);
  return g;
}
static size_t cpu_staging(void *o) {
  return 0;
}

static const char cpu_name[] = "cpu";
const pl_optim_ops pl_optim_cpu = {
    cpu_name, 1, 0, cpu_create, cpu_destroy, cpu_step, cpu_gscale, cpu_staging};

const pl_head_ops *const pl_train_heads[] = {&pl_head_ring, &pl_head_fused,
                                             &pl_head_dense, &pl_head_vp, NULL};
const char *const pl_train_head_names[] = {
    pl_head_name_ring, pl_head_name_fused, dense_name, vp_name, NULL};
const pl_optim_ops *const pl_train_optims[] = {
    &pl_optim_stream, &pl_optim_hybrid, &pl_optim_cpu, NULL};
const char *const pl_train_optim_names[] = {
    pl_optim_name_stream, pl_optim_name_hybrid, cpu_name, NULL};

pl_status pl_train_head_parse(const char *name, const pl_head_ops **out) {
  for (int i = 0; name && pl_train_heads[i]; i++)
    if (!strcmp(name, pl_train_heads[i]->name)) {
      *out = pl_train_heads[i];
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL, "--head=%s: allowed ring, fused, dense, vp",
                      name ? name : "");
}

pl_status pl_train_optim_parse(const char *name, const pl_optim_ops **out) {
  for (int i = 0; name && pl_train_optims[i]; i++)
    if (!strcmp(name, pl_train_optims[i]->name)) {
      *out = pl_train_optims[i];
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL, "--optim=%s: allowed stream, hybrid, cpu",
                      name ? name : "");
}
