/* sco.c — SCO's selection, feasibility check and pinned storage (the copies
 * themselves are scheduled by the checkpoint runner, engine/train/ckpt.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/sco.h"

struct pl_sco {
  pl_dev *dev;
  pl_comm *comm;
  int L, count;
  size_t slot_bytes;
  pl_sco_release rel;
  void *pinned; /* count · slot_bytes, host arena, tag "boundary" */
};

/* The host RAM boundaries may take: this host's physical RAM, or no limit
 * on a dry device (its pinned allocations are never backed; the planner
 * checks the host of the machine it plans for). */
static uint64_t host_ram(const pl_dev *dev) {
  if (pl_dev_backend(dev) == PL_BACKEND_DRY)
    return UINT64_MAX;
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  return (pages > 0 && psz > 0) ? (uint64_t)pages * (uint64_t)psz : UINT64_MAX;
}

/* Pin count·slot_bytes on every rank, or on none: the ranks agree. */
static pl_status pin_all_or_none(pl_sco *sco) {
  size_t bytes = (size_t)sco->count * sco->slot_bytes;
  pl_status st = PL_OK;
  char why[512] = "";
  if (sco->count > 0) {
    st = pl_alloc(sco->dev, PL_ARENA_HOST, bytes, "boundary", &sco->pinned);
    if (st != PL_OK)
      snprintf(why, sizeof why, "%s", pl_last_error());
  }
  int64_t ok = st == PL_OK;
  if (sco->comm) {
    pl_status cs = pl_host_allreduce_i64(sco->comm, &ok, 1, PL_RED_MIN);
    if (cs != PL_OK)
      st = cs;
  }
  if (!ok || st != PL_OK) {
    pl_free(sco->dev, sco->pinned);
    sco->pinned = NULL;
    if (why[0])
      return pl_set_error(
          PL_ENOMEM,
          "SCO: pinning %zu bytes of boundaries failed on this rank: %s", bytes,
          why);
    return pl_set_error(
        PL_ENOMEM,
        "SCO: another rank could not pin its %d boundaries; no step was run",
        sco->count);
  }
  return PL_OK;
}

pl_status pl_sco_create(pl_dev *dev, pl_comm *comm, int L, int64_t N, int64_t H,
                        pl_dtype dt, pl_sco_budget budget, pl_sco_release rel,
                        pl_sco **out) {
  *out = NULL;
  if (L < 1)
    return pl_set_error(PL_EINVAL, "SCO: L=%d (must be >= 1)", L);
  if (N < 0 || H <= 0)
    return pl_set_error(PL_EINVAL, "SCO: N=%lld H=%lld (N >= 0, H > 0)",
                        (long long)N, (long long)H);
  uint64_t ram = host_ram(dev);
  /* refuse a budget this host cannot hold, on every rank alike */
  int64_t over = !budget.all && budget.bytes > ram;
  if (comm)
    PL_TRY(pl_host_allreduce_i64(comm, &over, 1, PL_RED_MAX));
  if (over)
    return pl_set_error(PL_EINVAL,
                        "SCO: host budget %llu bytes exceeds physical host RAM "
                        "(%llu bytes here) on at least one rank",
                        (unsigned long long)budget.bytes,
                        (unsigned long long)ram);
  pl_sco *sco = calloc(1, sizeof *sco);
  if (!sco)
    return pl_set_error(PL_ENOMEM, "SCO: out of host memory");
  sco->dev = dev, sco->comm = comm, sco->L = L, sco->rel = rel;
  sco->slot_bytes = (size_t)N * (size_t)H * pl_dtype_size(dt);
  int64_t count = budget.all             ? L
                  : sco->slot_bytes == 0 ? L
                  : (int64_t)(budget.bytes / sco->slot_bytes) < L
                      ? (int64_t)(budget.bytes / sco->slot_bytes)
                      : L;
  if (!budget.all && budget.bytes == 0)
    count = 0;
  if (comm) {
    pl_status st = pl_host_allreduce_i64(comm, &count, 1, PL_RED_MIN);
    if (st != PL_OK) {
      free(sco);
      return st;
    }
  }
  sco->count = (int)count;
  /* "all" (or a budget above the boundaries' size) is bounded by what is
   * selected: refuse, on every rank alike, a selection this host cannot hold
   * rather than try to pin it (pinning near all of RAM can bring the OOM
   * killer instead of a failed allocation) */
  int64_t too_big = (uint64_t)count * sco->slot_bytes > ram;
  if (comm) {
    pl_status st = pl_host_allreduce_i64(comm, &too_big, 1, PL_RED_MAX);
    if (st != PL_OK) {
      free(sco);
      return st;
    }
  }
  if (too_big) {
    size_t slot = sco->slot_bytes;
    free(sco);
    return pl_set_error(PL_EINVAL,
                        "SCO: %lld boundaries of %zu bytes exceed physical "
                        "host RAM (%llu bytes here) on at least one rank",
                        (long long)count, slot, (unsigned long long)ram);
  }
  if (rel == PL_SCO_RELEASE_CONTEXT) {
    pl_status st = pin_all_or_none(sco);
    if (st != PL_OK) {
      free(sco);
      return st;
    }
  }
  *out = sco;
  return PL_OK;
}

void pl_sco_destroy(pl_sco *sco) {
  if (!sco)
    return;
  pl_free(sco->dev, sco->pinned);
  free(sco);
}

int pl_sco_count(const pl_sco *sco) {
  return sco ? sco->count : 0;
}
bool pl_sco_selected(const pl_sco *sco, int layer) {
  return sco && layer >= 0 && layer < sco->count;
}

void *pl_sco_slot(pl_sco *sco, int layer) {
  PL_ASSERT(pl_sco_selected(sco, layer) && sco->pinned);
  return (char *)sco->pinned + (size_t)layer * sco->slot_bytes;
}

pl_status pl_sco_begin_step(pl_sco *sco) {
  if (!sco || sco->rel != PL_SCO_RELEASE_STEP)
    return PL_OK;
  return pin_all_or_none(sco);
}

pl_status pl_sco_end_step(pl_sco *sco) {
  if (!sco || sco->rel != PL_SCO_RELEASE_STEP)
    return PL_OK;
  PL_TRY(pl_dev_sync(sco->dev));
  pl_free(sco->dev, sco->pinned);
  sco->pinned = NULL;
  return PL_OK;
}

size_t pl_sco_pinned_bytes(const pl_sco *sco) {
  return sco && sco->pinned ? (size_t)sco->count * sco->slot_bytes : 0;
}
