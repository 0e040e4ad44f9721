/* harness_dev.c — the device a bench runs on (harness.h), and what its
 * rows say about the backend.
 *
 * Why apart from bench.c: `--backend dry` (a bench that measures memory
 * only, e.g. train) runs on a dry device that plays the GPU of the
 * planner's defaults — an H200's memory, the CUDA backend's allocations,
 * the MoE routes the planner assumes (pl_plan_dry_device,
 * engine/plan/dry_dev.c) — so that its memory columns are those the same
 * command has on the GPU, computed on a machine without one. */
#include "harness.h"
#include "plan/plan.h"

pl_status pl__bench_dev_create(pl_backend be, int rank, pl_dev **out) {
  if (be != PL_BACKEND_DRY)
    return pl_dev_create(be, -1, out);
  return pl_plan_dry_device(
      PL_BACKEND_CUDA, (size_t)pl_plan_machine_default().hbm_bytes, rank, out);
}

const char *pl__bench_dev_note(const pl_dev *dev) {
  return pl_dev_backend(dev) == PL_BACKEND_DRY
             ? "dry device as cuda: the memory columns are what the step "
               "allocates on a GPU; nothing ran, times are not a GPU's"
             : "CPU backend: times are CPU times";
}
