/* backend/backend.h — the backends' device halves as the backend layer's
 * device creation (backend.c) sees them: the ops tables the core dispatches
 * through, and the number of CUDA devices.  Not installed. */
#ifndef PLATEAU_BACKEND_BACKEND_H
#define PLATEAU_BACKEND_BACKEND_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* backend/cpu/cpu_backend.c */
extern const pl__backend_ops pl__cpu_backend_ops;
/* backend/dry/dry_backend.c */
extern const pl__backend_ops pl__dry_backend_ops;
#if PL_HAVE_CUDA
/* backend/cuda/dev.cu */
extern const pl__backend_ops pl__cuda_backend_ops;
/* Visible CUDA devices; 0 when there is no driver or no device. */
int pl__cuda_count_devices(void);
#endif

#ifdef __cplusplus
}
#endif
#endif
