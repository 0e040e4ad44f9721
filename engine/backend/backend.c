/* backend.c — device creation: the one place a backend is chosen.  A device
 * gets the CPU, the CUDA or the dry ops table here, once; from then on the core
 * dispatches the shared kernels through that table and the operators test
 * pl__on_cuda(s) in front of their own kernels (core/internal.h). */
#include "backend/backend.h"
#include "backend/cuda/attention_cudnn.h"

int pl_backend_available(pl_backend be) {
  if (be == PL_BACKEND_CPU || be == PL_BACKEND_DRY)
    return 1;
  if (be == PL_BACKEND_CUDA)
    return PL_HAVE_CUDA;
  return 0;
}

const char *pl_cudnn_version(void) {
#if PL_HAVE_CUDA
  return pl__cudnn_version();
#else
  return "-";
#endif
}

int pl_cuda_device_count(void) {
#if PL_HAVE_CUDA
  return pl__cuda_count_devices();
#else
  return 0;
#endif
}

pl_status pl_dev_create(pl_backend be, int ordinal, pl_dev **out) {
  *out = NULL;
  const pl__backend_ops *ops = NULL;
  if (be == PL_BACKEND_CPU)
    ops = &pl__cpu_backend_ops;
  else if (be == PL_BACKEND_DRY)
    ops = &pl__dry_backend_ops;
#if PL_HAVE_CUDA
  else if (be == PL_BACKEND_CUDA)
    ops = &pl__cuda_backend_ops;
#endif
  if (!ops) {
    if (be == PL_BACKEND_CUDA)
      return pl_set_error(PL_EUNSUPPORTED,
                          "backend cuda: not built (nvcc was not found at "
                          "build time; allowed here: cpu)");
    return pl_set_error(
        PL_EINVAL, "backend %d: unknown (allowed: cpu, cuda, dry)", (int)be);
  }
  if (be == PL_BACKEND_CUDA) {
    int n = pl_cuda_device_count();
    if (n <= 0)
      return pl_set_error(PL_EUNSUPPORTED,
                          "backend cuda: no CUDA device visible on this "
                          "machine (use --backend cpu)");
    if (ordinal < 0)
      ordinal = pl_local_rank() % n;
    if (ordinal >= n)
      return pl_set_error(PL_EINVAL,
                          "CUDA device %d: only %d visible (allowed: 0..%d)",
                          ordinal, n, n - 1);
  } else if (ordinal < 0) {
    ordinal = 0;
  }
  return pl__dev_open(be, ordinal, ops, out);
}
