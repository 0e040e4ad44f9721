/* optypes.h — the types the operators' API and the backend kernels share:
 * the cross-entropy reduction, the AdamW step's scalars and SIMD code path,
 * and the attention call's shape, mask and kernel choice.  They sit below the
 * backend (its kernels take them) and are part of the installed API (the
 * operator headers take them). */
#ifndef PLATEAU_OPTYPES_H
#define PLATEAU_OPTYPES_H

#include <stdint.h>

#include "plateau/status.h"
#include "plateau/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reduction of the per-token losses (PyTorch's cross_entropy): the mean over
 * the non-ignored targets, the sum, or none (one loss per token). */
typedef enum pl_ce_reduction {
  PL_CE_MEAN = 0,
  PL_CE_SUM = 1,
  PL_CE_NONE = 2,
} pl_ce_reduction;

/* The AdamW gradient norm's fixed summation order: chunks of
 * PL_ADAMW_NORM_CHUNK elements, element i of a chunk in lane i mod
 * PL_ADAMW_NORM_LANES (ops/adamw.h). */
#define PL_ADAMW_NORM_LANES 32
#define PL_ADAMW_NORM_CHUNK 32768 /* elements per chunk partial */

/* Float operands of one step, identical for every implementation. */
typedef struct pl_adamw_scalars {
  float lr, b1, omb1, b2, omb2, bc1, bc2, eps, wd, gscale;
} pl_adamw_scalars;

/* The SIMD CPU AdamW update: three code paths of the one operation order,
 * chosen at run time (backend/cpu/adamw_simd.c). */
typedef enum pl_simd_path {
  PL_SIMD_AUTO = 0,   /* PLATEAU_SIMD if set, else the best supported */
  PL_SIMD_SCALAR = 1, /* plain C                                      */
  PL_SIMD_AVX2 = 2,   /* 8 lanes                                      */
  PL_SIMD_AVX512 = 3, /* 16 lanes (AVX-512F)                          */
} pl_simd_path;

/* "auto" "scalar" "avx2" "avx512" by the enum, NULL-terminated. */
extern const char *const pl_simd_path_names[];
const char *pl_simd_path_name(pl_simd_path p);
/* "auto" | "scalar" | "avx2" | "avx512"; PL_EINVAL otherwise. */
pl_status pl_simd_path_parse(const char *s, pl_simd_path *out);
/* 1 if this CPU (and OS) can run the path (scalar and auto always). */
int pl_simd_path_supported(pl_simd_path p);
/* AUTO -> PLATEAU_SIMD (if set and valid) or the best supported path.
 * Forcing an unsupported path gives PL_EUNSUPPORTED with a message. */
pl_status pl_simd_path_resolve(pl_simd_path p, pl_simd_path *out);

/* Which forward kernel runs on CUDA (the CPU backend has one kernel and
 * ignores the choice).  Zero is AUTO. */
typedef enum pl_attn_fwd_kind {
  PL_ATTN_FWD_AUTO = 0,   /* CUDNN where built and the shape runs there, else
                             WGMMA for d = 128 on an sm_90a build, else MMA   */
  PL_ATTN_FWD_SIMPLE = 1, /* one warp per query row: the device reference */
  PL_ATTN_FWD_MMA = 2,   /* mma.sync tensor cores (sm_80+, d = 64 or 128)     */
  PL_ATTN_FWD_WGMMA = 3, /* Hopper wgmma, K and V by TMA (d = 128, sm_90a)    */
  PL_ATTN_FWD_CUDNN = 4, /* cuDNN's fused flash attention (CUDNN=1 builds)  */
} pl_attn_fwd_kind;

/* Which backward kernels run on CUDA.  Zero is AUTO. */
typedef enum pl_attn_bwd_kind {
  PL_ATTN_BWD_AUTO = 0,   /* CUDNN where built and the shape runs there, else
                             WGMMA for d = 128 on an sm_90a build, else MMA   */
  PL_ATTN_BWD_SIMPLE = 1, /* one warp per query row (dQ) and per key (dK, dV) */
  PL_ATTN_BWD_MMA = 2,   /* mma.sync, by key blocks; dQ by fp32 atomics       */
  PL_ATTN_BWD_WGMMA = 3, /* wgmma, by key blocks; dQ by TMA bulk reductions   */
  PL_ATTN_BWD_SPLIT = 4, /* wgmma dK/dV kernel and dQ kernel, no atomics: dQ
                            bit-reproducible run to run (d = 128, sm_90a)     */
  PL_ATTN_BWD_CUDNN = 5, /* cuDNN's fused flash backward (CUDNN=1 builds);
                            dQ by atomics: not bit-reproducible              */
} pl_attn_bwd_kind;

typedef struct pl_attn_kernels {
  pl_attn_fwd_kind fwd;
  pl_attn_bwd_kind bwd;
} pl_attn_kernels;

/* Which keys a query attends to.  Zero is causal, so every shape written
 * before the mask existed keeps its meaning. */
typedef enum pl_attn_mask {
  PL_ATTN_CAUSAL = 0, /* query i attends to keys j <= i                     */
  PL_ATTN_FULL = 1,   /* query i attends to every key of the block (ring
                         attention's blocks of earlier sequence chunks)     */
} pl_attn_mask;

typedef struct pl_attn_shape {
  int64_t batch;           /* B sequences                                  */
  int64_t seq;             /* S tokens per sequence (>= 0)                 */
  int n_q;                 /* query heads                                  */
  int n_kv;                /* key/value heads, divides n_q                 */
  int head_dim;            /* d                                            */
  float scale;             /* softmax scale; 0 means 1/sqrt(d)             */
  pl_dtype dtype;          /* of Q, K, V, O and their gradients            */
  pl_attn_kernels kernels; /* CUDA kernel choice ({0} = AUTO for both)     */
  pl_attn_mask mask;       /* causal (0, the default) or full              */
} pl_attn_shape;

#ifdef __cplusplus
}
#endif
#endif
