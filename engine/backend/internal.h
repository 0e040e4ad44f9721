/* backend/internal.h — what the backend layer shares beyond the core's
 * internal header (core/internal.h: the device structs, pl__on_cuda): the
 * ops tables of the two backends and the CPU's naive GEMM for tests.  Not
 * installed; not part of the public API. */
#ifndef PLATEAU_BACKEND_INTERNAL_H
#define PLATEAU_BACKEND_INTERNAL_H

#include "backend/backend.h"
#include "core/internal.h"
#include "plateau/plateau.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CPU kernels are also callable directly by CPU references in tests. */
pl_status pl_cpu_gemm_ref(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                          float alpha, const void *A, int64_t lda,
                          const void *B, int64_t ldb, float beta, void *C,
                          int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt);

#ifdef __cplusplus
}
#endif
#endif
