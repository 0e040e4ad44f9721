/* attention_cudnn.h — cuDNN's fused flash attention (forward and backward)
 * behind the CUDA attention launcher (attention.cu): the graphs are built
 * with NVIDIA's cudnn-frontend from the engine's token-major tensors through
 * strides (no copies), once per distinct shape on each device, and cached in
 * the device's state until the device is destroyed.
 *
 * Layouts are model/attention.h's: Q, O, dQ, dO [B, S, n_q, d] bf16; K, V,
 * dK, dV [B, S, n_kv, d] bf16; LSE [B, n_q, S] f32, the natural-log
 * log-sum-exp of each query row's scaled scores (cuDNN's softmax "stats",
 * which the backward reads back).  Not installed; C-callable. */
#ifndef PLATEAU_BACKEND_CUDA_ATTENTION_CUDNN_H
#define PLATEAU_BACKEND_CUDA_ATTENTION_CUDNN_H

#include <stddef.h>

#include "plateau/dev.h"
#include "plateau/optypes.h"
#include "plateau/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef PL_HAVE_CUDNN
#define PL_HAVE_CUDNN 0
#endif

/* What cuDNN takes beyond the shared rules: bf16, d = 64 or 128, causal or
 * full.  PL_EUNSUPPORTED with a message otherwise (and in a build without
 * cuDNN). */
pl_status pl__cudnn_attn_check(const pl_attn_shape *sh);
/* PL_OK when cuDNN builds an execution plan for sh's forward (bwd = 0) or
 * backward (bwd = 1) on s's device (built now and cached, or found in the
 * cache); PL_EUNSUPPORTED / PL_ERUNTIME with cuDNN's message otherwise. */
pl_status pl__cudnn_attn_ready(pl_stream *s, const pl_attn_shape *sh, int bwd);
/* Workspace bytes cuDNN's forward (bwd 0) or backward (bwd 1) plan for sh
 * asks for on s's device (0 when no plan can be built). */
size_t pl__cudnn_attn_need(pl_stream *s, const pl_attn_shape *sh, int bwd);
/* o, lse from q, k, v; a forward workspace, if the plan asks for one, comes
 * from the tracked allocator (tag "attention") and is freed stream-ordered. */
pl_status pl__cudnn_attn_fwd(pl_stream *s, const pl_attn_shape *sh,
                             const void *q, const void *k, const void *v,
                             void *o, float *lse);
/* dq, dk, dv; ws of ws_bytes >= pl__cudnn_attn_need(s, sh, 1) (the caller's,
 * from the tracked allocator). */
pl_status pl__cudnn_attn_bwd(pl_stream *s, const pl_attn_shape *sh,
                             const void *q, const void *k, const void *v,
                             const void *o, const void *dout, const float *lse,
                             void *dq, void *dk, void *dv, void *ws,
                             size_t ws_bytes);
/* Free a device's cached plans and its cuDNN handle (dev.cu's teardown);
 * state is pl__cuda_dev.cudnn, NULL when cuDNN was never used. */
void pl__cudnn_release(void *state);
/* The cuDNN library this process runs with, "cuDNN 9.19.0", or "-" (a build
 * without cuDNN, or the library fails to load). */
const char *pl__cudnn_version(void);

#ifdef __cplusplus
}
#endif
#endif
