/* ep.h — standard expert parallelism, the baseline of the dispatch bench: every
 * route goes to its expert's native rank (e / (E/Ep)); a counts exchange, a
 * permute by destination, one all-to-all-v of the routes' rows, the grouped
 * expert GEMM, one all-to-all-v back, unpermute and the weighted combine.  It
 * is the `ep` variant of the MoE layer (ops/moe.h): the same buffers, kernels
 * and schedule with the native placement and one chunk, so the three variants
 * differ only in placement and chunking. */
#ifndef PLATEAU_BASELINES_EP_H
#define PLATEAU_BASELINES_EP_H

#include "ops/moe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A standard-EP layer on the group `ep` from cfg (its variant, plan knobs and
 * chunking are overridden: native placement, K = 1).  Forward/backward with
 * pl_moe_forward / pl_moe_backward; free with pl_moe_destroy. */
pl_status pl_ep_create(pl_comm *ep, const pl_moe_cfg *cfg, pl_moe **out);

#ifdef __cplusplus
}
#endif
#endif
