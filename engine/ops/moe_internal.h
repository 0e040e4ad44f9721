/* moe_internal.h — what the MoE operator's files share (not installed): the
 * expert GEMM as the layer issues it, on the stream's backend. */
#ifndef PLATEAU_OPS_MOE_INTERNAL_H
#define PLATEAU_OPS_MOE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/moe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pl__cpu_moe_gemm / pl__cuda_moe_gemm (backend/moe_kernels.h) on s's
 * backend; m == 0 or n == 0 issues nothing. */
pl_status pl__moe_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,
                       int64_t k, float alpha, const void *A, int64_t lda,
                       const void *B, int64_t ldb, float beta, void *C,
                       int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt);

#ifdef __cplusplus
}
#endif
#endif
