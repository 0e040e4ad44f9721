/* mem.c — the tracked allocator: every tensor byte of every operator goes
 * through here, per device and per arena (device, pinned host).
 *
 * Why: the paper's claims are about peaks.  Each arena keeps current and peak
 * bytes, each tag's own current and peak, and — at the moment the arena's peak
 * was set — the bytes per tag (the live set that set the peak).  The CUDA
 * backend's pool high-water mark is reported beside it as the hardware-side
 * check.  A configurable limit makes out-of-memory reproducible on the CPU
 * backend: an allocation past it fails with PL_ENOMEM exactly as the GPU would
 * (modulo fragmentation). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define ZERO_BYTES_RAW 16 /* raw size behind a 0-byte allocation */

/* The tracker's lock, but on a dry device: one thread drives a dry device
 * (its step's; nothing else allocates on it), and there the lock's two
 * atomic operations per allocation and free were a sixth of a planner's
 * measurement. */
static void mem_lock(pl_dev *dev) {
  if (dev->backend != PL_BACKEND_DRY)
    pthread_mutex_lock(&dev->mem_lock);
}

static void mem_unlock(pl_dev *dev) {
  if (dev->backend != PL_BACKEND_DRY)
    pthread_mutex_unlock(&dev->mem_lock);
}

static size_t hash_ptr(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)(x & (cap - 1));
}

static pl_status table_grow(pl_dev *dev) {
  size_t ncap = dev->table_cap ? dev->table_cap * 2 : 1024;
  pl__mem_entry *nt = calloc(ncap, sizeof *nt);
  if (!nt)
    return pl_set_error(PL_ENOMEM,
                        "out of host memory for the allocation table");
  for (size_t i = 0; i < dev->table_cap; i++) {
    pl__mem_entry *e = &dev->table[i];
    if (e->used != 1)
      continue;
    size_t h = hash_ptr(e->ptr, ncap);
    while (nt[h].used)
      h = (h + 1) & (ncap - 1);
    nt[h] = *e;
  }
  free(dev->table);
  dev->table = nt;
  dev->table_cap = ncap;
  /* tombstones are dropped by the rehash */
  size_t live = 0;
  for (size_t i = 0; i < ncap; i++)
    live += nt[i].used == 1;
  dev->table_used = live;
  return PL_OK;
}

static pl__mem_entry *table_find(pl_dev *dev, const void *p) {
  if (!dev->table_cap)
    return NULL;
  size_t h = hash_ptr(p, dev->table_cap);
  for (size_t n = 0; n < dev->table_cap; n++) {
    pl__mem_entry *e = &dev->table[h];
    if (!e->used)
      return NULL;
    if (e->used == 1 && e->ptr == p)
      return e;
    h = (h + 1) & (dev->table_cap - 1);
  }
  return NULL;
}

static int tag_index(pl__mem_arena *a, const char *tag) {
  if (!tag || !*tag)
    tag = "untagged";
  /* most tags are literals: the same address, call after call */
  const uintptr_t u = (uintptr_t)tag;
  unsigned char *hint = &a->tag_hint[(u ^ (u >> 8) ^ (u >> 16)) & 255];
  if (*hint < a->n_tags && !strcmp(a->tags[*hint], tag))
    return *hint;
  for (int i = 0; i < a->n_tags; i++)
    if (!strcmp(a->tags[i], tag)) {
      *hint = (unsigned char)i;
      return i;
    }
  if (a->n_tags < PL_MEM_MAX_TAGS - 1) {
    char *copy = strdup(tag);
    if (!copy)
      return -1;
    a->tags[a->n_tags] = copy;
    return a->n_tags++;
  }
  /* overflow bucket: the last slot */
  if (a->n_tags == PL_MEM_MAX_TAGS - 1) {
    a->tags[a->n_tags] = strdup("other");
    if (!a->tags[a->n_tags])
      return -1;
    a->n_tags++;
  }
  return PL_MEM_MAX_TAGS - 1;
}

static const char *arena_name(pl_arena a) {
  return a == PL_ARENA_DEVICE ? "device" : "pinned host";
}

/* The class of an allocation of tag ti in the device's phase now: the
 * classifier asked once per tag and phase (an allocator's hot path makes
 * thousands of allocations a phase, of a few tags). */
static int class_of(pl_dev *dev, pl__mem_arena *a, int ti) {
  if (!a->n_classes)
    return PL__MEM_NO_CLASS;
  if (a->class_memo[ti])
    return a->class_memo[ti] - 1;
  int c = a->classify(a->classify_ctx, a->tags[ti], &dev->phase);
  c = c >= 0 && c < a->n_classes ? c : PL__MEM_NO_CLASS;
  a->class_memo[ti] = (unsigned char)(c + 1);
  return c;
}

static pl_status track_alloc(pl_dev *dev, pl_arena arena, size_t bytes,
                             const char *tag, pl_stream *s, void **out) {
  *out = NULL;
  if ((int)arena < 0 || arena >= PL_ARENA_COUNT)
    return pl_set_error(PL_EINVAL, "arena %d (allowed: device, host)",
                        (int)arena);
  mem_lock(dev);
  pl__mem_arena *a = &dev->arenas[arena];
  int ti = tag_index(a, tag);
  pl_status st = PL_OK;
  if (ti < 0) {
    st = pl_set_error(PL_ENOMEM, "out of host memory for a tag name");
    goto out;
  }
  if (a->limit && (bytes > a->limit || a->current > a->limit - bytes)) {
    a->n_failed++;
    st = pl_set_error(PL_ENOMEM,
                      "%s arena: %zu bytes for '%s' would exceed the limit "
                      "(%zu in use of %zu)",
                      arena_name(arena), bytes, a->tags[ti], a->current,
                      a->limit);
    goto out;
  }
  if ((dev->table_used + 1) * 2 > dev->table_cap &&
      (st = table_grow(dev)) != PL_OK)
    goto out;
  void *p = NULL;
  st = dev->ops->raw_alloc(dev, arena, bytes ? bytes : ZERO_BYTES_RAW, s, &p);
  if (st != PL_OK) {
    a->n_failed++;
    if (st == PL_ENOMEM)
      pl_error_prefix(PL_ENOMEM,
                      "%s arena: %zu bytes for '%s' failed (%zu in use): ",
                      arena_name(arena), bytes, a->tags[ti], a->current);
    goto out;
  }
  size_t h = hash_ptr(p, dev->table_cap);
  while (dev->table[h].used == 1)
    h = (h + 1) & (dev->table_cap - 1);
  if (!dev->table[h].used)
    dev->table_used++;
  const int cls = class_of(dev, a, ti);
  dev->table[h] = (pl__mem_entry){
      p, bytes, ti, (unsigned char)arena, 1, (unsigned char)cls};
  a->current += bytes;
  a->n_alloc++;
  a->tag_now[ti] += bytes;
  if (a->tag_now[ti] > a->tag_peak[ti])
    a->tag_peak[ti] = a->tag_now[ti];
  if (cls != PL__MEM_NO_CLASS) {
    a->class_now[cls] += bytes;
    if (a->class_now[cls] > a->class_peak[cls])
      a->class_peak[cls] = a->class_now[cls];
  }
  if (arena == PL_ARENA_DEVICE && a->current > dev->phase_high)
    dev->phase_high = a->current;
  if (a->current > a->peak) {
    a->peak = a->current;
    memcpy(a->tag_at_peak, a->tag_now, sizeof a->tag_now);
    memcpy(a->class_at_peak, a->class_now, sizeof a->class_now);
    a->peak_phase = dev->phase;
  }
  *out = p;
out:
  mem_unlock(dev);
  return st;
}

pl_status pl_alloc(pl_dev *dev, pl_arena arena, size_t bytes, const char *tag,
                   void **out) {
  return track_alloc(dev, arena, bytes, tag, NULL, out);
}

pl_status pl_alloc_async(pl_dev *dev, pl_arena arena, size_t bytes,
                         const char *tag, pl_stream *s, void **out) {
  return track_alloc(dev, arena, bytes, tag, s, out);
}

static void track_free(pl_dev *dev, void *p, pl_stream *s) {
  if (!p)
    return;
  mem_lock(dev);
  pl__mem_entry *e = table_find(dev, p);
  if (!e) {
    mem_unlock(dev);
    fprintf(stderr,
            "plateau: pl_free of a pointer the tracker does not know (%p)\n",
            p);
    PL_ASSERT(!"pl_free of an untracked pointer");
    return;
  }
  pl__mem_arena *a = &dev->arenas[e->arena];
  a->current -= e->bytes;
  a->tag_now[e->tag] -= e->bytes;
  if (e->cls != PL__MEM_NO_CLASS)
    a->class_now[e->cls] -= e->bytes;
  a->n_free++;
  pl_arena arena = (pl_arena)e->arena;
  e->used = 2;
  e->ptr = NULL;
  mem_unlock(dev);
  dev->ops->raw_free(dev, arena, p, s);
}

void pl_free(pl_dev *dev, void *p) {
  track_free(dev, p, NULL);
}
void pl_free_async(pl_dev *dev, void *p, pl_stream *s) {
  track_free(dev, p, s);
}

pl_status pl_mem_stats_get(pl_dev *dev, pl_arena arena, pl_mem_stats *out) {
  memset(out, 0, sizeof *out);
  if ((int)arena < 0 || arena >= PL_ARENA_COUNT)
    return pl_set_error(PL_EINVAL, "arena %d (allowed: device, host)",
                        (int)arena);
  mem_lock(dev);
  pl__mem_arena *a = &dev->arenas[arena];
  out->current = a->current;
  out->peak = a->peak;
  out->limit = a->limit;
  out->n_alloc = a->n_alloc;
  out->n_free = a->n_free;
  out->n_failed = a->n_failed;
  out->n_tags = a->n_tags;
  for (int i = 0; i < a->n_tags; i++) {
    out->at_peak[i] = (pl_tag_bytes){a->tags[i], a->tag_at_peak[i]};
    out->now[i] = (pl_tag_bytes){a->tags[i], a->tag_now[i]};
    out->tag_peak[i] = (pl_tag_bytes){a->tags[i], a->tag_peak[i]};
  }
  out->peak_phase = a->peak_phase;
  out->n_classes = a->n_classes;
  memcpy(out->class_at_peak, a->class_at_peak, sizeof a->class_at_peak);
  memcpy(out->class_peak, a->class_peak, sizeof a->class_peak);
  mem_unlock(dev);
  size_t hw = (arena == PL_ARENA_DEVICE && dev->ops->pool_high)
                  ? dev->ops->pool_high(dev)
                  : 0;
  out->pool_high = hw ? hw : out->peak;
  return PL_OK;
}

static size_t tag_lookup(pl_dev *dev, pl_arena arena, const char *tag,
                         int peak) {
  size_t v = 0;
  mem_lock(dev);
  pl__mem_arena *a = &dev->arenas[arena];
  for (int i = 0; i < a->n_tags; i++)
    if (!strcmp(a->tags[i], tag))
      v = peak ? a->tag_peak[i] : a->tag_now[i];
  mem_unlock(dev);
  return v;
}

size_t pl_mem_tag_current(pl_dev *dev, pl_arena arena, const char *tag) {
  return tag_lookup(dev, arena, tag, 0);
}

size_t pl_mem_tag_peak(pl_dev *dev, pl_arena arena, const char *tag) {
  return tag_lookup(dev, arena, tag, 1);
}

void pl_mem_reset_peak(pl_dev *dev, pl_arena arena) {
  mem_lock(dev);
  pl__mem_arena *a = &dev->arenas[arena];
  a->peak = a->current;
  memcpy(a->tag_at_peak, a->tag_now, sizeof a->tag_now);
  memcpy(a->tag_peak, a->tag_now, sizeof a->tag_now);
  memcpy(a->class_at_peak, a->class_now, sizeof a->class_now);
  memcpy(a->class_peak, a->class_now, sizeof a->class_now);
  a->peak_phase = dev->phase;
  mem_unlock(dev);
  if (arena == PL_ARENA_DEVICE && dev->ops->pool_reset)
    dev->ops->pool_reset(dev);
}

void pl_mem_phase_set(pl_dev *dev, const char *what, int layer,
                      const char *kind) {
  mem_lock(dev);
  const pl_mem_phase ended = dev->phase;
  const size_t high = dev->phase_high;
  const pl_mem_phase_fn fn = dev->phase_fn;
  void *ctx = dev->phase_ctx;
  dev->phase = (pl_mem_phase){what, kind, layer};
  dev->phase_high = dev->arenas[PL_ARENA_DEVICE].current;
  for (int i = 0; i < PL_ARENA_COUNT; i++) /* classes are per phase */
    memset(dev->arenas[i].class_memo, 0, sizeof dev->arenas[i].class_memo);
  mem_unlock(dev);
  if (fn)
    fn(ctx, &ended, high);
}

void pl_mem_watch_phases(pl_dev *dev, pl_mem_phase_fn fn, void *ctx) {
  mem_lock(dev);
  dev->phase_fn = fn, dev->phase_ctx = ctx;
  dev->phase_high = dev->arenas[PL_ARENA_DEVICE].current;
  mem_unlock(dev);
}

void pl_mem_phase_str(const pl_mem_phase *ph, char *buf, size_t len) {
  if (!ph->what)
    snprintf(buf, len, "%s", "");
  else if (ph->layer >= 0)
    snprintf(buf, len, "%s layer %d (%s)", ph->what, ph->layer,
             ph->kind ? ph->kind : "?");
  else
    snprintf(buf, len, "%s", ph->what);
}

pl_status pl_mem_set_classes(pl_dev *dev, pl_arena arena, int n,
                             pl_mem_class_fn classify, void *ctx) {
  if ((int)arena < 0 || arena >= PL_ARENA_COUNT)
    return pl_set_error(PL_EINVAL, "arena %d (allowed: device, host)",
                        (int)arena);
  if (classify ? n < 1 || n > PL_MEM_MAX_CLASSES : n != 0)
    return pl_set_error(PL_EINVAL,
                        "memory classes: n=%d (1..%d with a classifier, 0 "
                        "without)",
                        n, PL_MEM_MAX_CLASSES);
  mem_lock(dev);
  pl__mem_arena *a = &dev->arenas[arena];
  a->n_classes = n, a->classify = classify, a->classify_ctx = ctx;
  memset(a->class_memo, 0, sizeof a->class_memo);
  memset(a->class_now, 0, sizeof a->class_now);
  memset(a->class_peak, 0, sizeof a->class_peak);
  memset(a->class_at_peak, 0, sizeof a->class_at_peak);
  for (size_t i = 0; i < dev->table_cap; i++) /* counted in none */
    if (dev->table[i].used == 1 && dev->table[i].arena == (unsigned)arena)
      dev->table[i].cls = PL__MEM_NO_CLASS;
  mem_unlock(dev);
  return PL_OK;
}

void pl_mem_set_limit(pl_dev *dev, pl_arena arena, size_t bytes) {
  mem_lock(dev);
  dev->arenas[arena].limit = bytes;
  mem_unlock(dev);
}

static void human_bytes(size_t b, char *buf, size_t len) {
  if (b >= (1ull << 30))
    snprintf(buf, len, "%.2fGiB", b / 1073741824.0);
  else if (b >= (1ull << 20))
    snprintf(buf, len, "%.2fMiB", b / 1048576.0);
  else if (b >= 1024)
    snprintf(buf, len, "%.2fKiB", b / 1024.0);
  else
    snprintf(buf, len, "%zuB", b);
}

void pl_mem_live_set_str(const pl_mem_stats *st, char *buf, size_t len) {
  int order[PL_MEM_MAX_TAGS], n = 0;
  for (int i = 0; i < st->n_tags; i++)
    if (st->at_peak[i].bytes)
      order[n++] = i;
  for (int i = 1; i < n; i++) /* insertion sort, largest first */
    for (int j = i;
         j > 0 && st->at_peak[order[j]].bytes > st->at_peak[order[j - 1]].bytes;
         j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  buf[0] = '\0';
  if (n == 0) {
    snprintf(buf, len, "-");
    return;
  }
  size_t used = 0;
  for (int k = 0; k < n && used + 1 < len; k++) {
    char hb[32];
    human_bytes(st->at_peak[order[k]].bytes, hb, sizeof hb);
    int w = snprintf(buf + used, len - used, "%s%s=%s", k ? " " : "",
                     st->at_peak[order[k]].tag, hb);
    if (w < 0)
      break;
    used += (size_t)w;
  }
}

/* Called by pl_dev_destroy: report leaks, free tag names and the table. */
void pl__mem_fini(pl_dev *dev) {
  for (int ar = 0; ar < PL_ARENA_COUNT; ar++) {
    pl__mem_arena *a = &dev->arenas[ar];
    if (a->current)
      PL_WARN("device destroyed with %zu bytes still allocated in the %s arena",
              a->current, arena_name((pl_arena)ar));
    for (int i = 0; i < a->n_tags; i++)
      free((void *)a->tags[i]);
    a->n_tags = 0;
  }
  for (size_t i = 0; i < dev->table_cap; i++)
    if (dev->table[i].used == 1)
      dev->ops->raw_free(dev, (pl_arena)dev->table[i].arena, dev->table[i].ptr,
                         NULL);
  free(dev->table);
  dev->table = NULL;
  dev->table_cap = dev->table_used = 0;
}
