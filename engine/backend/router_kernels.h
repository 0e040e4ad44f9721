/* backend/router_kernels.h — the MoE router's per-token kernels
 * (model/router.h), a CPU twin (backend/cpu/router_cpu.c) and a CUDA twin
 * (backend/cuda/router.cu) with one signature.
 *
 * Shapes: probs [N, E] f32, bias [E] f32 (may be NULL), idx [N, k] int32,
 * w and dw [N, k] f32, dlogits [N, E] stored as dt (f32 or bf16);
 * 1 <= k <= min(E, 32) (model/router.c checks).  Selection order: score
 * descending, ties to the lower index, identical on both backends.
 * Not installed. */
#ifndef PLATEAU_BACKEND_ROUTER_KERNELS_H
#define PLATEAU_BACKEND_ROUTER_KERNELS_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* In place logits -> probs = softmax over E; idx = the top k (by the logits
 * without a bias, by p + bias with one); w = the chosen probabilities,
 * renormalized over the k when renorm. */
pl_status pl__cpu_router_topk(pl_stream *s, float *probs, const float *bias,
                              int64_t N, int E, int k, int renorm, int32_t *idx,
                              float *w);
/* dlogits from dw with the selection held fixed (model/router.h). */
pl_status pl__cpu_router_dlogits(pl_stream *s, const float *probs,
                                 const int32_t *idx, const float *w,
                                 const float *dw, int64_t N, int E, int k,
                                 int renorm, void *dlogits, pl_dtype dt);
#if PL_HAVE_CUDA
pl_status pl__cuda_router_topk(pl_stream *s, float *probs, const float *bias,
                               int64_t N, int E, int k, int renorm,
                               int32_t *idx, float *w);
pl_status pl__cuda_router_dlogits(pl_stream *s, const float *probs,
                                  const int32_t *idx, const float *w,
                                  const float *dw, int64_t N, int E, int k,
                                  int renorm, void *dlogits, pl_dtype dt);
#endif

#ifdef __cplusplus
}
#endif
#endif
