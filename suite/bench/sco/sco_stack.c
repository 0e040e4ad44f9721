/* sco_stack.c — the stack `plateau bench sco` measures (sco_stack.h): L
 * dense blocks under pl_ckpt, made once for every budget, their inputs, the
 * reset of the gradients before a step and the host copy of dx0 the check
 * compares bit for bit. */
#include <math.h>
#include <stdlib.h>

#include "sco_stack.h"

/* Zero the gradients; poison dx0 so that a step writing nothing fails. */
pl_status pl__sco_zero_grads(pl_bench_ctx *c, sco_bench *b) {
  for (int64_t l = 0; l < b->L; l++)
    PL_TRY(pl_mlp_block_zero_grad(&b->blocks[l], c->stream));
  PL_TRY(pl_fill(c->stream, b->dx0, b->dt, (size_t)b->N * (size_t)b->H, NAN));
  return pl_stream_sync(c->stream);
}

/* dx0 into a new host buffer (a comparison copy, not tensor memory). */
pl_status pl__sco_fetch_dx0(pl_bench_ctx *c, sco_bench *b, void **out) {
  *out = malloc(pl__sco_nhb(b) + 1);
  if (!*out)
    return pl_set_error(PL_ENOMEM, "sco: host copy of dx0");
  PL_TRY(pl_memcpy_async(c->stream, *out, b->dx0, pl__sco_nhb(b)));
  return pl_stream_sync(c->stream);
}

/* The stack and its inputs (each rank its own tokens). */
pl_status pl__sco_make_stack(pl_bench_ctx *c, sco_bench *b) {
  const size_t nh = (size_t)b->N * (size_t)b->H;
  const uint64_t off = (uint64_t)c->rank << 40;
  b->blocks = calloc((size_t)b->L, sizeof *b->blocks);
  b->layers = calloc((size_t)b->L, sizeof *b->layers);
  if (!b->blocks || !b->layers)
    return pl_set_error(PL_ENOMEM, "sco: out of host memory");
  for (int64_t l = 0; l < b->L; l++) {
    PL_TRY(pl_mlp_block_init(c->dev, &b->blocks[l], b->H, b->I, b->dt, c->seed,
                             (int)l));
    b->layers[l] = &b->blocks[l];
  }
  PL_TRY(pl_alloc(c->dev, PL_ARENA_DEVICE, pl__sco_nhb(b), "input", &b->x0));
  PL_TRY(pl_alloc(c->dev, PL_ARENA_DEVICE, pl__sco_nhb(b), "input", &b->g));
  PL_TRY(pl_alloc(c->dev, PL_ARENA_DEVICE, pl__sco_nhb(b), "input", &b->dx0));
  PL_TRY(pl_rng_fill(c->stream, b->x0, b->dt, nh, c->seed ^ 0x5c0, off,
                     PL_DIST_NORMAL, 0, 1));
  PL_TRY(pl_rng_fill(c->stream, b->g, b->dt, nh, c->seed ^ 0x9a1, off,
                     PL_DIST_NORMAL, 0, 1));
  PL_TRY(pl_ckpt_create(c->dev, (int)b->L, b->layers, &pl_mlp_block_layer_ops,
                        b->H, b->dt, &b->stack));
  return pl_stream_sync(c->stream);
}

void pl__sco_free_stack(pl_bench_ctx *c, sco_bench *b) {
  if (b->stack)
    pl_ckpt_destroy(b->stack);
  pl_free(c->dev, b->x0);
  pl_free(c->dev, b->g);
  pl_free(c->dev, b->dx0);
  for (int64_t l = 0; b->blocks && l < b->L; l++)
    pl_mlp_block_free(&b->blocks[l]);
  free(b->blocks);
  free(b->layers);
  free(b->ref_dx);
}
