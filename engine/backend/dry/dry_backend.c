/* dry_backend.c — the dry device: a backend that tracks and does nothing
 * else, so that one real step on it measures what the step allocates.
 *
 * Why: the planner's memory answer is a peak of the tracked allocator
 * (core/mem.c).  Built on a dry device, the composed step issues the very
 * allocations it issues on a GPU — the same sizes, tags and order — while
 * nothing is computed, so a step of a configuration far larger than this
 * machine runs in the time its host-side bookkeeping takes.
 *
 * What it does: raw allocations of both arenas (device, pinned host) are
 * addresses handed out from one reserved, never-mapped range per device
 * (mmap PROT_NONE), distinct while live (freed blocks are reused by size
 * class), so a stray dereference faults at once instead of reading or
 * corrupting anything.  Streams, events, syncs,
 * the shared kernels and device-to-device copies do nothing.  A copy into
 * memory the device did not hand out (a malloc'd host buffer the step reads
 * back) writes zeros there, so a read-back is defined: zero counts, a loss
 * and a gradient norm of 0.  The operators' own kernels are skipped by the
 * test pl__on_dry (core/internal.h) in front of their CPU twins; host code
 * that reads a tracked buffer on the host (the host optimizer, the
 * checkpoint's host side) tests pl__dev_dry first.
 *
 * What it does not do: compute any value.  The one read-back that decides
 * allocation sizes, the router's top-k expert ids, comes from the route hook
 * of dry.h.  Allocation decisions follow the backend the device plays, its
 * flavour (dry.h): the CPU backend's by default; under cuda, the code that
 * allocates only on a GPU (a scratch, a workspace) tests pl__allocs_as_cuda
 * and makes those allocations too, sized as planned for a GPU. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "backend/dry/dry.h"

/* Address space reserved per device: one sub-range of SUB bytes per size
 * class, class c holding blocks of 2^c bytes (c from MIN_C to MAX_C), so
 * that an address tells its block's class.  A freed block goes on its
 * class's free stack and is handed out again before the class's sub-range
 * grows: addresses stay distinct while live however many bytes a run
 * allocates in all (a long-context step allocates terabytes over its
 * lifetime; a wrapping counter would hand out live addresses again).  The
 * reservation is address space only (PROT_NONE, MAP_NORESERVE): 32 classes
 * of 512 GiB, 16 TiB of the 128 TiB a process may address.  A class whose
 * sub-range is full of live blocks (a 120B model's gradients on one GPU:
 * more than 512 GiB of 32 GiB blocks) continues in extra ranges of SUB
 * bytes reserved as needed (MAX_EXTRA in all), and a block larger than a
 * range (SUB) gets a range of its own, so a plan that does not fit is
 * measured rather than refused. */
#define MIN_C 8 /* 256-byte blocks: the alignment the GPU pool gives */
#define MAX_C 39
#define NCLASS (MAX_C - MIN_C + 1)
#define SUB ((size_t)1 << MAX_C)
#define RANGE (SUB * NCLASS)

#define MAX_EXTRA 64

typedef struct dry_class {
  size_t next;  /* blocks handed out from the class's ranges so far */
  size_t *free; /* freed blocks' indices, a stack */
  size_t nfree, cap;
} dry_class;

/* A route hook's answer for (N, k, E) landed on `land` experts: the routes,
 * the hook's routes per router slot (E, before the landing) and the
 * answer's stamp.  Counted references: the devices holding it and, for a
 * pure hook's (fn set), the process's list of recent answers.  Read only
 * once made: any thread may read it. */
typedef struct dry_answer {
  int refs;
  pl_dry_route_fn fn; /* the pure hook and ctx it came from; NULL: private */
  void *ctx;
  int64_t N;
  int k, E, land;
  int32_t *idx;
  int64_t *counts;
  uint64_t stamp;
} dry_answer;

static void answer_put(dry_answer *a) {
  if (a && __atomic_sub_fetch(&a->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    free(a->idx);
    free(a->counts);
    free(a);
  }
}

static dry_answer *answer_get(dry_answer *a) {
  __atomic_add_fetch(&a->refs, 1, __ATOMIC_RELAXED);
  return a;
}

/* The answers of pure hooks asked for last, the most recent first, shared
 * by every thread (under g_shared_mu): a planner builds many dry devices in
 * a row, on two threads where it measures ahead, and each would ask for the
 * same routes again.  Eight: a search's candidates take routes of a handful
 * of token counts (one per Ulysses group D) and both routings (balanced,
 * adversarial); at 1M tokens and k = 8 an answer holds 32 MiB, at 64M two
 * gigabytes (held once, not once per thread). */
#define SHARED_ANSWERS 8
static dry_answer *g_shared[SHARED_ANSWERS];
static pthread_mutex_t g_shared_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_shared_once = PTHREAD_ONCE_INIT;

/* The process lets go of the answers at its exit. */
static void shared_drop(void) {
  pthread_mutex_lock(&g_shared_mu);
  for (int i = 0; i < SHARED_ANSWERS; i++) {
    answer_put(g_shared[i]);
    g_shared[i] = NULL;
  }
  pthread_mutex_unlock(&g_shared_mu);
}

static void shared_at_exit(void) {
  (void)atexit(shared_drop);
}

typedef struct dry_state {
  char *base; /* PROT_NONE, never mapped readable */
  dry_class cls[NCLASS];
  /* extra ranges of SUB bytes: the class and the range's number within it
   * (its first block is number * (SUB >> c)) */
  char *extra[MAX_EXTRA];
  int extra_c[MAX_EXTRA], extra_n[MAX_EXTRA], nextra;
  /* blocks larger than a class's range, each a range of its own */
  char **huge;
  size_t *huge_bytes;
  int nhuge, huge_cap;
  pl_dry_route_fn routes;
  void *routes_ctx;
  bool routes_pure;       /* its answers are shared (pl_dry_set_routes_pure) */
  struct dry_answer *ans; /* the hook's last answer, or NULL */
  size_t total_bytes;     /* what info reports: the played GPU's memory */
  const int32_t *zeros;   /* host tokens known to be zeros, zeros_n of them */
  int64_t zeros_n;
} dry_state;

static pl_status dry_init(pl_dev *dev, int ordinal) {
  dry_state *d = calloc(1, sizeof *d);
  if (!d)
    return pl_set_error(PL_ENOMEM, "dry device: host");
  void *p = mmap(NULL, RANGE, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    free(d);
    return pl_set_error(PL_ENOMEM,
                        "dry device: reserving %zu bytes of address space "
                        "failed",
                        RANGE);
  }
  d->base = p;
  dev->impl = d;
  return PL_OK;
}

static void dry_fini(pl_dev *dev) {
  dry_state *d = dev->impl;
  if (!d)
    return;
  munmap(d->base, RANGE);
  for (int i = 0; i < d->nextra; i++)
    munmap(d->extra[i], SUB);
  for (int i = 0; i < d->nhuge; i++)
    munmap(d->huge[i], d->huge_bytes[i]);
  free(d->huge);
  free(d->huge_bytes);
  for (int c = 0; c < NCLASS; c++)
    free(d->cls[c].free);
  answer_put(d->ans);
  free(d);
  dev->impl = NULL;
}

static pl_status dry_info(const pl_dev *dev, pl_dev_info *out) {
  const dry_state *d = dev->impl;
  snprintf(out->name, sizeof out->name, "dry (tracking only, as %s)",
           pl_backend_name(dev->flavour));
  out->total_bytes = d->total_bytes;
  out->sm_count = 0;
  snprintf(out->driver, sizeof out->driver, "-");
  snprintf(out->runtime, sizeof out->runtime, "-");
  snprintf(out->blas, sizeof out->blas, "-");
  return PL_OK;
}

static pl_status dry_ok_dev(pl_dev *dev) {
  return PL_OK;
}

/* A block larger than a class's range (a plan far beyond any machine: the
 * pinned boundaries of a million tokens on every layer, say): an unbacked
 * range of its own, unmapped when freed, so the step is measured rather
 * than refused. */
static pl_status huge_alloc(dry_state *d, size_t bytes, void **out) {
  if (d->nhuge == d->huge_cap) {
    const int cap = d->huge_cap ? 2 * d->huge_cap : 8;
    char **h = realloc(d->huge, (size_t)cap * sizeof *h);
    if (!h)
      return pl_set_error(PL_ENOMEM, "dry device: host");
    d->huge = h;
    size_t *b = realloc(d->huge_bytes, (size_t)cap * sizeof *b);
    if (!b)
      return pl_set_error(PL_ENOMEM, "dry device: host");
    d->huge_bytes = b;
    d->huge_cap = cap;
  }
  void *p = mmap(NULL, bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return pl_set_error(PL_ENOMEM,
                        "dry device: a block of %zu bytes: no address space "
                        "left to reserve it",
                        bytes);
  d->huge[d->nhuge] = p;
  d->huge_bytes[d->nhuge++] = bytes;
  *out = p;
  return PL_OK;
}

static pl_status dry_raw_alloc(pl_dev *dev, pl_arena a, size_t bytes,
                               pl_stream *s, void **out) {
  dry_state *d = dev->impl;
  int c = MIN_C;
  while (c <= MAX_C && ((size_t)1 << c) < bytes)
    c++;
  if (c > MAX_C)
    return huge_alloc(d, bytes, out);
  dry_class *k = &d->cls[c - MIN_C];
  const size_t per = SUB >> c; /* blocks per range */
  size_t i;
  if (k->nfree)
    i = k->free[--k->nfree];
  else
    i = k->next++;
  if (i < per) {
    *out = d->base + (size_t)(c - MIN_C) * SUB + (i << c);
    return PL_OK;
  }
  const int n = (int)(i / per); /* the class's range n >= 1 */
  for (int x = 0; x < d->nextra; x++)
    if (d->extra_c[x] == c && d->extra_n[x] == n) {
      *out = d->extra[x] + ((i % per) << c);
      return PL_OK;
    }
  void *p = d->nextra < MAX_EXTRA
                ? mmap(NULL, SUB, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                : MAP_FAILED;
  if (p == MAP_FAILED) {
    k->next--; /* i was the class's next: not handed out */
    return pl_set_error(PL_ENOMEM,
                        "dry device: %zu blocks of %zu bytes live: no more "
                        "address space to reserve",
                        i + 1, (size_t)1 << c);
  }
  d->extra[d->nextra] = p;
  d->extra_c[d->nextra] = c, d->extra_n[d->nextra] = n;
  d->nextra++;
  *out = (char *)p + ((i % per) << c);
  return PL_OK;
}

/* The class and the block number of address p (in the base range or an
 * extra one). */
static void block_of(const dry_state *d, const void *p, int *c, size_t *i) {
  const char *q = p;
  if (q >= d->base && q < d->base + RANGE) {
    const size_t off = (size_t)(q - d->base);
    *c = (int)(off / SUB) + MIN_C;
    *i = (off % SUB) >> *c;
    return;
  }
  for (int x = 0; x < d->nextra; x++)
    if (q >= d->extra[x] && q < d->extra[x] + SUB) {
      *c = d->extra_c[x];
      *i = (size_t)d->extra_n[x] * (SUB >> *c) +
           ((size_t)(q - d->extra[x]) >> *c);
      return;
    }
  PL_ASSERT(!"a dry device's free of an address it did not hand out");
}

/* The block goes back on its class's stack (the class from the address). */
static void dry_raw_free(pl_dev *dev, pl_arena a, void *p, pl_stream *s) {
  dry_state *d = dev->impl;
  for (int x = 0; x < d->nhuge; x++)
    if (d->huge[x] == p) { /* a block of its own range: the range goes */
      munmap(d->huge[x], d->huge_bytes[x]);
      d->nhuge--;
      d->huge[x] = d->huge[d->nhuge];
      d->huge_bytes[x] = d->huge_bytes[d->nhuge];
      return;
    }
  int c = MIN_C;
  size_t bi = 0;
  block_of(d, p, &c, &bi);
  dry_class *k = &d->cls[c - MIN_C];
  if (k->nfree == k->cap) {
    const size_t cap = k->cap ? 2 * k->cap : 64;
    size_t *f = realloc(k->free, cap * sizeof *f);
    if (!f) /* the block is lost to reuse, not to tracking */
      return;
    k->free = f;
    k->cap = cap;
  }
  k->free[k->nfree++] = bi;
}

static pl_status dry_stream_create(pl_dev *dev, pl_stream *s) {
  s->native = NULL;
  return PL_OK;
}
static void dry_stream_destroy(pl_stream *s) {}
static pl_status dry_ok_stream(pl_stream *s) {
  return PL_OK;
}
static pl_status dry_event_create(pl_dev *dev, pl_event *e) {
  return PL_OK;
}
static void dry_event_destroy(pl_event *e) {}
static pl_status dry_event_record(pl_event *e, pl_stream *s) {
  e->stamp_ns = 0;
  return PL_OK;
}
static pl_status dry_stream_wait(pl_stream *s, pl_event *e) {
  return PL_OK;
}
static pl_status dry_event_sync(pl_event *e) {
  return PL_OK;
}
static int dry_event_done(pl_event *e) {
  return 1;
}
static pl_status dry_event_elapsed_ms(pl_event *a, pl_event *b, float *ms) {
  *ms = 0;
  return PL_OK;
}

static pl_status dry_rng_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                              uint64_t seed, uint64_t offset, pl_dist dist,
                              float a, float b) {
  return PL_OK;
}
static pl_status dry_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                          double value) {
  return PL_OK;
}
static pl_status dry_convert(pl_stream *s, void *dst, pl_dtype dst_dt,
                             const void *src, pl_dtype src_dt, size_t n) {
  return PL_OK;
}
static pl_status dry_scale(pl_stream *s, void *x, pl_dtype dt, size_t n,
                           float alpha) {
  return PL_OK;
}
static pl_status dry_axpy(pl_stream *s, void *y, pl_dtype y_dt, const void *x,
                          pl_dtype x_dt, size_t n, float alpha) {
  return PL_OK;
}
static pl_status dry_gemm(pl_stream *s, bool ta, bool tb, int64_t m, int64_t n,
                          int64_t k, float alpha, const void *A, int64_t lda,
                          int64_t sa, const void *B, int64_t ldb, int64_t sb,
                          float beta, void *C, int64_t ldc, int64_t sc,
                          int64_t batch, pl_dtype ab_dt, pl_dtype c_dt) {
  return PL_OK;
}

bool pl_dry_owns(const pl_dev *dev, const void *p) {
  if (!dev || dev->backend != PL_BACKEND_DRY || !dev->impl)
    return false;
  const dry_state *d = dev->impl;
  const char *c = p;
  if (c >= d->base && c < d->base + RANGE)
    return true;
  for (int x = 0; x < d->nextra; x++)
    if (c >= d->extra[x] && c < d->extra[x] + SUB)
      return true;
  for (int x = 0; x < d->nhuge; x++)
    if (c >= d->huge[x] && c < d->huge[x] + d->huge_bytes[x])
      return true;
  return false;
}

/* A copy moves nothing, except that real host memory it lands in (a
 * read-back) reads as zeros afterwards. */
static pl_status dry_memcpy(pl_stream *s, void *dst, const void *src,
                            size_t bytes) {
  if (!pl_dry_owns(s->dev, dst))
    memset(dst, 0, bytes);
  return PL_OK;
}
static pl_status dry_memcpy_peer(pl_stream *s, void *dst, const pl_dev *dd,
                                 const void *src, const pl_dev *sd,
                                 size_t bytes) {
  if (!pl_dry_owns(dd, dst))
    memset(dst, 0, bytes);
  return PL_OK;
}

pl_status pl_dry_set_routes(pl_dev *dev, pl_dry_route_fn fn, void *ctx) {
  if (!dev || dev->backend != PL_BACKEND_DRY)
    return pl_set_error(PL_EINVAL, "pl_dry_set_routes: not a dry device");
  dry_state *d = dev->impl;
  d->routes = fn;
  d->routes_ctx = ctx;
  d->routes_pure = false;
  answer_put(d->ans);
  d->ans = NULL;
  return PL_OK;
}

pl_status pl_dry_set_routes_pure(pl_dev *dev, pl_dry_route_fn fn, void *ctx) {
  PL_TRY(pl_dry_set_routes(dev, fn, ctx));
  ((dry_state *)dev->impl)->routes_pure = fn != NULL;
  return PL_OK;
}

pl_status pl_dry_set_zero_tokens(pl_dev *dev, const int32_t *p, int64_t n) {
  if (!dev || dev->backend != PL_BACKEND_DRY)
    return pl_set_error(PL_EINVAL, "pl_dry_set_zero_tokens: not a dry device");
  if (n < 0)
    return pl_set_error(PL_EINVAL,
                        "pl_dry_set_zero_tokens: n=%lld: must be >= 0",
                        (long long)n);
  dry_state *d = dev->impl;
  d->zeros = p;
  d->zeros_n = p ? n : 0;
  return PL_OK;
}

bool pl_dry_zero_tokens(const pl_dev *dev, const int32_t *p, int64_t n) {
  if (!dev || dev->backend != PL_BACKEND_DRY || !dev->impl || !p || n < 0)
    return false;
  const dry_state *d = dev->impl;
  return d->zeros && p >= d->zeros && n <= d->zeros_n - (p - d->zeros);
}

pl_status pl_dry_set_flavour(pl_dev *dev, pl_backend be, size_t total_bytes) {
  if (!dev || dev->backend != PL_BACKEND_DRY)
    return pl_set_error(PL_EINVAL, "pl_dry_set_flavour: not a dry device");
  if (be != PL_BACKEND_CPU && be != PL_BACKEND_CUDA)
    return pl_set_error(PL_EINVAL,
                        "pl_dry_set_flavour: a dry device plays cpu or cuda");
  dry_state *d = dev->impl;
  dev->flavour = be;
  d->total_bytes = total_bytes;
  return PL_OK;
}

/* Stamps of answers: process-wide, so that no two answers of any dry
 * devices share one (a freed answer's address may come back). */
static uint64_t g_stamp;

static bool answer_is(const dry_answer *a, int64_t N, int k, int E,
                      int E_land) {
  return a && a->N == N && a->k == k && a->E == E && a->land == E_land;
}

/* A pure hook's answer being asked for by some thread: another thread that
 * wants it waits for it (g_shared_cv) instead of asking again. */
typedef struct ask_key {
  pl_dry_route_fn fn;
  void *ctx;
  int64_t N;
  int k, E, land;
} ask_key;
#define ASKING 8
static ask_key g_asking[ASKING];
static int g_nasking;
static pthread_cond_t g_shared_cv = PTHREAD_COND_INITIALIZER;

static bool key_is(const ask_key *x, const ask_key *y) {
  return x->fn == y->fn && x->ctx == y->ctx && x->N == y->N && x->k == y->k &&
         x->E == y->E && x->land == y->land;
}

static int asking_at(const ask_key *key) {
  for (int i = 0; i < g_nasking; i++)
    if (key_is(&g_asking[i], key))
      return i;
  return -1;
}

/* The shared answer of key, moved to the front, with a reference taken for
 * the caller; while another thread asks for it, waits.  NULL when none is
 * held and none being asked for: the caller is then counted as asking
 * (*asking) and must call shared_done. */
static dry_answer *shared_find(const ask_key *key, bool *asking) {
  dry_answer *got = NULL;
  *asking = false;
  pthread_mutex_lock(&g_shared_mu);
  for (;;) {
    for (int i = 0; i < SHARED_ANSWERS && !got; i++) {
      dry_answer *a = g_shared[i];
      if (!a || a->fn != key->fn || a->ctx != key->ctx ||
          !answer_is(a, key->N, key->k, key->E, key->land))
        continue;
      memmove(g_shared + 1, g_shared, (size_t)i * sizeof *g_shared);
      g_shared[0] = a;
      got = answer_get(a);
    }
    if (got || asking_at(key) < 0)
      break;
    pthread_cond_wait(&g_shared_cv, &g_shared_mu);
  }
  if (!got && g_nasking < ASKING) {
    g_asking[g_nasking++] = *key;
    *asking = true;
  }
  pthread_mutex_unlock(&g_shared_mu);
  return got;
}

/* The ask for key is over: its answer a (NULL: the hook failed) in front of
 * the shared list (a reference of its own, the last let go), and the
 * threads waiting for it woken. */
static void shared_done(const ask_key *key, dry_answer *a) {
  pthread_once(&g_shared_once, shared_at_exit);
  pthread_mutex_lock(&g_shared_mu);
  const int i = asking_at(key);
  if (i >= 0)
    g_asking[i] = g_asking[--g_nasking];
  if (a) {
    answer_put(g_shared[SHARED_ANSWERS - 1]);
    memmove(g_shared + 1, g_shared, (SHARED_ANSWERS - 1) * sizeof *g_shared);
    g_shared[0] = answer_get(a);
  }
  pthread_cond_broadcast(&g_shared_cv);
  pthread_mutex_unlock(&g_shared_mu);
}

/* The hook's answer for (N, k, E), landed on E_land experts: a new one
 * (*out, one reference), or NULL with the hook's error. */
static pl_status ask_hook(const dry_state *d, int64_t N, int k, int E,
                          int E_land, dry_answer **out) {
  *out = NULL;
  const size_t n = N > 0 && k > 0 ? (size_t)N * (size_t)k : 0;
  dry_answer *a = calloc(1, sizeof *a);
  int32_t *idx = malloc(n ? n * sizeof *idx : 1);
  int64_t *cnt = calloc((size_t)E, sizeof *cnt);
  if (!a || !idx || !cnt) {
    free(a);
    free(idx);
    free(cnt);
    return pl_set_error(PL_ENOMEM, "dry device: the routes of N=%lld, k=%d",
                        (long long)N, k);
  }
  pl_status st = d->routes(d->routes_ctx, N, k, E, idx);
  for (size_t i = 0; st == PL_OK && i < n; i++) {
    if (idx[i] < 0 || idx[i] >= E) {
      st = pl_set_error(PL_EINVAL,
                        "dry device: the route hook gave expert %d for route "
                        "%zu: must be in [0, E=%d)",
                        idx[i], i, E);
      break;
    }
    cnt[idx[i]]++;
    if (E_land != E)
      idx[i] %= E_land;
  }
  if (st != PL_OK) {
    free(a);
    free(idx);
    free(cnt);
    return st;
  }
  *a = (dry_answer){1,
                    d->routes_pure ? d->routes : NULL,
                    d->routes_pure ? d->routes_ctx : NULL,
                    N,
                    k,
                    E,
                    E_land,
                    idx,
                    cnt,
                    __atomic_add_fetch(&g_stamp, 1, __ATOMIC_RELAXED)};
  *out = a;
  return PL_OK;
}

/* Ask the hook for (N, k, E), landed on E_land experts, unless that is the
 * answer held (or, for a pure hook, one the shared list holds). */
static pl_status answer(pl_dev *dev, int64_t N, int k, int E, int E_land) {
  if (!dev || dev->backend != PL_BACKEND_DRY)
    return pl_set_error(PL_EINVAL, "pl_dry_routes_view: not a dry device");
  dry_state *d = dev->impl;
  if (!d->routes)
    return pl_set_error(PL_EINVAL,
                        "dry device: the step needs the router's routes and "
                        "no route source was set (pl_dry_set_routes)");
  if (E_land <= 0 || E <= 0 || E % E_land)
    return pl_set_error(PL_EINVAL,
                        "pl_dry_routes_view: E_land=%d: must divide E=%d",
                        E_land, E);
  if (answer_is(d->ans, N, k, E, E_land))
    return PL_OK;
  const ask_key key = {d->routes, d->routes_ctx, N, k, E, E_land};
  bool asking = false;
  dry_answer *a = d->routes_pure ? shared_find(&key, &asking) : NULL;
  if (!a) {
    const pl_status st = ask_hook(d, N, k, E, E_land, &a);
    if (asking)
      shared_done(&key, a);
    PL_TRY(st);
  }
  answer_put(d->ans);
  d->ans = a;
  return PL_OK;
}

pl_status pl_dry_routes_view(pl_dev *dev, int64_t N, int k, int E, int E_land,
                             pl_dry_route_view *v) {
  memset(v, 0, sizeof *v);
  PL_TRY(answer(dev, N, k, E, E_land));
  const dry_state *d = dev->impl;
  *v = (pl_dry_route_view){d->ans->idx, d->ans->counts, d->ans->stamp};
  return PL_OK;
}

uint64_t pl_dry_routes_stamp(const pl_dev *dev, const int32_t *idx, int64_t N,
                             int k, int E_land) {
  if (!dev || dev->backend != PL_BACKEND_DRY || !dev->impl || !idx)
    return 0;
  const dry_state *d = dev->impl;
  const dry_answer *a = d->ans;
  return a && a->idx == idx && a->N == N && a->k == k && a->land == E_land
             ? a->stamp
             : 0;
}

bool pl_dry_routes_counts(const pl_dev *dev, const int32_t *idx, int64_t N,
                          int k, int E_land, int64_t *counts) {
  if (!pl_dry_routes_stamp(dev, idx, N, k, E_land))
    return false;
  const dry_answer *a = ((const dry_state *)dev->impl)->ans;
  memset(counts, 0, (size_t)E_land * sizeof *counts);
  for (int e = 0; e < a->E; e++)
    counts[e % E_land] += a->counts[e];
  return true;
}

const pl__backend_ops pl__dry_backend_ops = {
    .init = dry_init,
    .fini = dry_fini,
    .info = dry_info,
    .sync = dry_ok_dev,
    .raw_alloc = dry_raw_alloc,
    .raw_free = dry_raw_free,
    .pool_high = NULL,
    .pool_reset = NULL,
    .stream_create = dry_stream_create,
    .stream_destroy = dry_stream_destroy,
    .stream_sync = dry_ok_stream,
    .event_create = dry_event_create,
    .event_destroy = dry_event_destroy,
    .event_record = dry_event_record,
    .stream_wait = dry_stream_wait,
    .event_sync = dry_event_sync,
    .event_done = dry_event_done,
    .event_elapsed_ms = dry_event_elapsed_ms,
    .rng_fill = dry_rng_fill,
    .fill = dry_fill,
    .convert = dry_convert,
    .scale = dry_scale,
    .axpy = dry_axpy,
    .gemm_strided_batched = dry_gemm,
    .memcpy_async = dry_memcpy,
    .memcpy_peer_async = dry_memcpy_peer,
};
