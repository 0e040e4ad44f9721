/* moe_router.h — a real MoE router whose gradient flows: logits z = x W_r
 * (N x E, fp32), top-k experts per token (largest logits, ties to the lower
 * id), route weights = softmax over the k chosen logits (the same as the
 * top-k of the full softmax renormalized to sum 1).
 *
 * Backward from the route-weight gradient dw (N x k, what pl_moe_backward
 * returns): dz_e(j) = w_j (dw_j - sum_j' w_j' dw_j') on the chosen experts,
 * zero elsewhere; dx += dz W_r^T, dW_r += x^T dz.
 *
 * The top-k and the softmax run on the host: the MoE layer needs the routes
 * on the host for planning anyway (one D2H copy of N x E fp32 logits per
 * layer instead of N x k ids; documented host sync).  The GEMMs run on the
 * stream's backend (pl_gemm). */
#ifndef PLATEAU_OPS_MOE_ROUTER_H
#define PLATEAU_OPS_MOE_ROUTER_H

#include <stdint.h>

#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x: N x H (dt, device); Wr: H x E (dt, device).  Writes idx (N x k, host)
 * and w (N x k f32, device).  Scratch (N x E fp32) is allocated under the tag
 * "router" on dev and freed before returning. */
pl_status pl_moe_router_fwd(pl_dev *dev, pl_stream *s, const void *x, int64_t N,
                            int64_t H, const void *Wr, int E, int k,
                            pl_dtype dt, int32_t *idx, float *w);

/* Accumulates dx (N x H, dt) += dz Wr^T and dWr (H x E, fp32) += x^T dz
 * (either may be NULL), from idx (host), w and dw (N x k f32, device). */
pl_status pl_moe_router_bwd(pl_dev *dev, pl_stream *s, const void *x, int64_t N,
                            int64_t H, const void *Wr, int E, int k,
                            pl_dtype dt, const int32_t *idx, const float *w,
                            const float *dw, void *dx, float *dWr);

#ifdef __cplusplus
}
#endif
#endif
