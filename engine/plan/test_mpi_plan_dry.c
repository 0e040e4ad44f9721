/* test_mpi_plan_dry.c — the planner's measurement against the dry step of
 * every rank of a real run: for the grid of test_mpi_plan.c
 * (plan_grid_testlib.h) every rank builds the trainer on a dry device
 * (backend/dry: allocations tracked, never backed; kernels, copies and the
 * data collectives do nothing), runs two steps with the routes of LLEP's
 * balanced profile, and compares the last step's tracker with
 * pl_plan_memory (rank 0 of the run built in one process, every other rank
 * virtual): on one rank the device peak, the pinned host peak, every tag's
 * bytes in the live set at the device peak and every tag's own peak must
 * be equal to the byte; on more, no rank's pinned host peak above the
 * plan's (rank 0's within 5%), the device peaks within 5%.  Twice: the CPU
 * backend (mc.backend = cpu) against the dry device as it is (it takes the CPU
 * backend's allocation decisions), and the CUDA backend against the dry device
 * playing cuda (pl_dry_set_flavour: the CUDA-only scratch and workspaces are
 * allocated, nothing runs).  A failure names the configuration, the rank, the
 * peaks and the tag that differs the most.  Also: the planner's measurement of
 * one step equals that of a second step after it, field by field, and sees
 * every phase (dry_one_step), and measurements on four threads at once
 * equal each made alone (dry_threads). */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/dry/dry.h"
#include "comm/check_mpi.h"
#include "ops/llep_plan.h"
#include "plan/plan_grid_testlib.h"
#include "plan/plan_internal.h"
#include "plan/plan_testlib.h"
#include "train/data.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

/* steps steps of the trainer on a fresh dry device *dd (on its world *dw)
 * playing backend flavour;
 * the last one's memory.  The caller destroys both after reading r (its tag
 * names are the device's). */
static void measure_dry(const point *p, pl_backend flavour, int steps,
                        pl_dev **dd_out, pl_comm **dw_out, pl_step_result *r) {
  pl_dev *dd = NULL;
  pl_comm *dw = NULL;
  ck_assert_int_eq(pl_plan_dry_device(flavour, 0, rank, &dd), PL_OK);
  ck_assert_int_eq(pl_comm_world(dd, &dw), PL_OK);
  pt_train(dd, dw, p, steps, r);
  *dd_out = dd;
  *dw_out = dw;
}

/* The tag whose bytes at the device peak differ (by name), or NULL. */
static const char *tag_diff(const pl_plan_mem *pm, const pl_mem_stats *ms) {
  for (int i = 0; i < ms->n_tags; i++)
    if (pl_plan_mem_tag(pm, ms->at_peak[i].tag) != ms->at_peak[i].bytes)
      return ms->at_peak[i].tag;
  for (int i = 0; i < pm->n_tags; i++)
    if (pt_tag_at_peak(ms, pm->at_peak[i].tag) != pm->at_peak[i].bytes)
      return pm->at_peak[i].tag;
  return NULL;
}

/* The first tag whose own peak differs (by name), or NULL; *pp, *pm: its
 * predicted and measured peaks. */
static const char *tag_peak_diff(const pl_plan_mem *pm, const pl_mem_stats *ms,
                                 size_t *pp, size_t *pmeas) {
  for (int i = 0; i < ms->n_tags; i++) {
    const size_t p = pl_plan_mem_tag_peak(pm, ms->tag_peak[i].tag);
    if (p != ms->tag_peak[i].bytes) {
      *pp = p, *pmeas = ms->tag_peak[i].bytes;
      return ms->tag_peak[i].tag;
    }
  }
  for (int i = 0; i < pm->n_tags; i++) {
    size_t m = 0;
    for (int j = 0; j < ms->n_tags; j++)
      if (!strcmp(ms->tag_peak[j].tag, pm->tag_peak[i].tag))
        m = ms->tag_peak[j].bytes;
    if (m != pm->tag_peak[i].bytes) {
      *pp = pm->tag_peak[i].bytes, *pmeas = m;
      return pm->tag_peak[i].tag;
    }
  }
  return NULL;
}

/* The largest relative distance of a device peak and whether a pinned host
 * peak differed, over every rank and point checked so far. */
static double g_dev_rel, g_host_ne;

/* One point on every rank; returns 1 when every rank's peaks all match
 * (a rank whose do not prints how). */
static int check_point(const point *p, const pl_plan_machine *mc) {
  pl_plan_mem pm;
  pl_status st = pl_plan_memory(&p->m, &p->c, mc, 0, &pm);
  ck_assert_msg(st == PL_OK, "%s: %s", p->name, pl_last_error());
  pl_step_result r;
  pl_dev *dd;
  pl_comm *dw;
  measure_dry(p, mc->backend, 2, &dd, &dw, &r);
  const char *bad = tag_diff(&pm, &r.dev);
  size_t tp = 0, tm = 0;
  const char *bad_peak = tag_peak_diff(&pm, &r.dev, &tp, &tm);
  const int ok = pm.dev_peak == r.dev.peak && pm.host_pinned == r.host.peak &&
                 !bad && !bad_peak;
  /* host: no rank's above the plan (rank 0 holds the widest vocabulary
   * shard; a proxy's plan is of the run it plays, above the proxy), rank
   * 0's within 5% */
  double v[3] = {ok ? 0 : 1,
                 r.host.peak > pm.host_pinned ||
                     (rank == 0 && (double)(pm.host_pinned - r.host.peak) >
                                       0.05 * (double)r.host.peak),
                 fabs((double)pm.dev_peak - (double)r.dev.peak) /
                     (double)(r.dev.peak ? r.dev.peak : 1)};
  ck_assert_int_eq(pl_host_allreduce_f64(world, v, 3, PL_RED_MAX), PL_OK);
  const double all = v[0];
  g_host_ne = fmax(g_host_ne, v[1]);
  g_dev_rel = fmax(g_dev_rel, v[2]);
  if (rank == 0)
    printf("  %-36s dev %8zu / %8zu  host %8zu / %8zu  %s\n", p->name,
           pm.dev_peak, r.dev.peak, pm.host_pinned, r.host.peak,
           all == 0 ? "equal on every rank" : "DIFFERS");
  char why[160], bad_tag[64], own[112];
  pt_worst_tag(&pm, &r.dev, why, sizeof why);
  snprintf(bad_tag, sizeof bad_tag, "%s", bad ? bad : "-");
  snprintf(own, sizeof own, "%.40s (predicted %zu, measured %zu)",
           bad_peak ? bad_peak : "-", tp, tm);
  pl_comm_destroy(dw);
  pl_dev_destroy(dd);
  if (!ok)
    fprintf(stderr,
            "    %s, rank %d of %d: planned dev %zu host %zu (peak at %s), "
            "dry dev %zu host %zu; tag %s differs; worst: %s; own peak of "
            "%s\n",
            p->name, rank, size, pm.dev_peak, pm.host_pinned, pm.peak_phase,
            r.dev.peak, r.host.peak, bad_tag, why, own);
  return all == 0;
}

/* The grid planned for machine backend be against the dry device playing
 * be. */
static void run_grid(pl_backend be) {
  pl_plan_machine mc = pl_plan_machine_default();
  mc.backend = be;
  g_dev_rel = g_host_ne = 0;
  point g[32];
  const int n = grid(size, g);
  if (rank == 0)
    printf("the plan (%s) vs one step on the dry device as %s, %d "
           "rank(s):\n",
           pl_backend_name(be), pl_backend_name(be), size);
  const char *only = getenv("PLAN_DRY_ONLY"); /* debugging: one point */
  char failed[32 * 72] = "";
  int nf = 0;
  for (int i = 0; i < n; i++)
    if ((!only || strstr(g[i].name, only)) && !check_point(&g[i], &mc)) {
      nf++;
      const size_t u = strlen(failed);
      snprintf(failed + u, sizeof failed - u, "%s'%.63s'", u ? ", " : "",
               g[i].name);
    }
  /* More than one rank: the plan is rank 0's view, each rank's step its
   * own (its vocabulary shard; the balanced profile's chunks of N / K
   * tokens are not whole cycles of the E experts, so the per-chunk counts
   * another rank sends differ by a few routes from what the view assumes):
   * no rank's pinned host peak above the plan's and rank 0's within 5%,
   * the device peaks within the 5% test_mpi_plan holds the plan to against
   * the real step. */
  if (size > 1) {
    if (rank == 0)
      printf("  on %d ranks: %d of %d points differ (%s); device peaks within "
             "%.2f%%, host peaks %s\n",
             size, nf, n, nf ? failed : "none", 100 * g_dev_rel,
             g_host_ne ? "DIFFER" : "none above the plan");
    ck_assert_msg(g_host_ne == 0,
                  "a pinned host peak is off the plan's on %d ranks", size);
    ck_assert_msg(g_dev_rel <= 0.05,
                  "a device peak differs by %.2f%% (> 5%%) on %d ranks",
                  100 * g_dev_rel, size);
    return;
  }
  ck_assert_msg(nf == 0,
                "%d of %d points differ between the plan and the dry "
                "device on %d rank(s): %s",
                nf, n, size, failed);
}

START_TEST(dry_grid) {
  run_grid(PL_BACKEND_CPU);
}
END_TEST

/* The dry device as a GPU: the CUDA-only allocations (the RMSNorm
 * backward's scratch, the attention backward's workspace as planned for a
 * GPU) are made, and the plan for machine backend cuda counts them. */
START_TEST(dry_grid_cuda) {
  run_grid(PL_BACKEND_CUDA);
}
END_TEST

/* The room the least form leaves (room.c) on the dry device: every form of
 * 120b/16/128K (Ep = 8, β = 25M) measured — SCO none, half and all, keep
 * prefixes of attention and whole halves, resident buckets none to all —
 * peaks at least at pl__plan_room_need of the least form measured. */
START_TEST(dry_room_need) {
  if (size != 1)
    return;
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("120b", &m), PL_OK);
  const pl_plan_machine mc = pl_plan_machine_default();
  const pl_plan_free fr = {.sco = true, .resident = true, .keep = true};
  pl_plan_cfg c = pl_plan_cfg_plateau(16, 128 << 10);
  c.lc.Ep = 8;
  const size_t beta = c.sc.oo.bucket = 25000000;
  pl_plan_mem *y = malloc(2 * sizeof *y), *mem = y + 1;
  ck_assert_ptr_nonnull(y);
  pl_plan_cfg least = c;
  least.sc.sco = (pl_sco_budget){true, 0};
  ck_assert_msg(pl__plan_memory_dry(&m, &least, &mc, 0, false, y) == PL_OK,
                "%s", pl_last_error());
  pl__room room;
  pl__plan_room_of(&m, &fr, &c, y, true, &room);
  const size_t th = (size_t)y->params_rank, nb = (th + beta - 1) / beta;
  const double nhb = (double)y->N * m.H * 2;
  const int L = m.L, ts[] = {0, L / 2, L, L + L / 2, 2 * L};
  for (int s = 0; s <= 2; s++)
    for (int ti = 0; ti < 5; ti++)
      for (int q = 0; q <= 4; q += 2) {
        pl_plan_cfg x = c;
        x.sc.sco = s == 2 ? (pl_sco_budget){true, 0}
                          : (pl_sco_budget){false, (uint64_t)(s * L / 2 * nhb)};
        const int t = ts[ti], na = t < L ? t : L, nw = t > L ? t - L : 0;
        x.sc.keep = (pl_keep_budget){
            PL_KEEP_BYTES, pl_step_keep_bytes(&m, y->N, 1, c.sc.dt, na, nw)};
        const size_t n = nb * (size_t)q / 4, el = n == 0 ? 0
                                                  : n >= nb
                                                      ? th
                                                      : th - beta * (nb - n);
        x.sc.oo.resident_bytes = 12 * (uint64_t)el;
        ck_assert_msg(pl__plan_memory_dry(&m, &x, &mc, 0, false, mem) == PL_OK,
                      "%s", pl_last_error());
        const double need = pl__plan_room_need(&room, na, nw, 12.0 * el);
        ck_assert_msg((double)mem->dev_peak >= need,
                      "sco %d keep %d+%d resident %zu/%zu buckets: measured "
                      "peak %zu below the room's least %.0f",
                      s, na, nw, n, nb, mem->dev_peak, need);
        /* at the least form's SCO count, at most its peak with every kept
         * and resident byte added */
        ck_assert(s != 2 || (double)mem->dev_peak <=
                                (double)y->dev_peak + (double)x.sc.keep.bytes +
                                    12.0 * el);
      }
  free(y);
}
END_TEST

/* The siblings' floor (pl__plan_room_floor) measured: at 120b/16/128K
 * (Ep = 8, every boundary offloaded, both optimizers) a smaller chunk cap
 * or bucket never peaks higher, nor in any bin of layers. */
START_TEST(dry_room_floor) {
  if (size != 1)
    return;
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("120b", &m), PL_OK);
  const pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_mem *mem = malloc(2 * PL__PLAN_CAPS * sizeof *mem);
  ck_assert_ptr_nonnull(mem);
  const pl_optim_ops *opts[2] = {&pl_optim_stream, &pl_optim_hybrid};
  for (int o = 0; o < 2; o++) {
    pl_plan_cfg c = pl_plan_cfg_plateau(16, 128 << 10);
    c.lc.Ep = 8;
    c.sc.optim = opts[o];
    c.sc.sco = (pl_sco_budget){true, 0};
    int64_t cs[PL__PLAN_CAPS];
    const int nc = pl__plan_chunk_caps(128 << 10, cs);
    for (int i = 0; i < nc; i++)
      for (int j = 0; j < 2; j++) {
        pl_plan_cfg x = c;
        x.sc.moe_c = cs[i], x.sc.oo.bucket = pl__plan_buckets[j];
        pl_plan_mem *me = &mem[2 * i + j];
        ck_assert_msg(pl__plan_memory_dry(&m, &x, &mc, 0, false, me) == PL_OK,
                      "%s", pl_last_error());
        for (int i2 = 0; i2 <= i; i2++) /* larger caps and buckets: above */
          for (int j2 = 0; j2 <= j; j2++) {
            const pl_plan_mem *a = &mem[2 * i2 + j2];
            bool below = me->dev_peak <= a->dev_peak;
            for (int b = 0; b <= PL_PLAN_BINS; b++)
              below = below && me->layer_high[b] <= a->layer_high[b];
            ck_assert_msg(below,
                          "%s: c %lld beta %zu peaks %zu, above c %lld "
                          "beta %zu's %zu (or a bin does)",
                          opts[o]->name, (long long)cs[i], pl__plan_buckets[j],
                          me->dev_peak, (long long)cs[i2], pl__plan_buckets[j2],
                          a->dev_peak);
          }
      }
  }
  free(mem);
}
END_TEST

START_TEST(dry_backend_basics) {
  /* tracked, unbacked, named; a route hook is required */
  pl_backend be;
  ck_assert_int_eq(pl_backend_parse("dry", &be), PL_OK);
  ck_assert_int_eq(be, PL_BACKEND_DRY);
  ck_assert_str_eq(pl_backend_name(PL_BACKEND_DRY), "dry");
  pl_dev *dd;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_DRY, 0, &dd), PL_OK);
  void *a, *b, *h;
  ck_assert_int_eq(pl_alloc(dd, PL_ARENA_DEVICE, (size_t)1 << 39, "big", &a),
                   PL_OK); /* half a TiB: nothing is backed */
  ck_assert_int_eq(pl_alloc(dd, PL_ARENA_DEVICE, 100, "small", &b), PL_OK);
  ck_assert_int_eq(pl_alloc(dd, PL_ARENA_HOST, 4096, "pinned", &h), PL_OK);
  ck_assert_ptr_ne(a, b);
  ck_assert(pl_dry_owns(dd, b) && pl_dry_owns(dd, h));
  pl_mem_stats st;
  ck_assert_int_eq(pl_mem_stats_get(dd, PL_ARENA_DEVICE, &st), PL_OK);
  ck_assert_uint_eq(st.peak, ((size_t)1 << 39) + 100);
  ck_assert_int_eq(pl_mem_stats_get(dd, PL_ARENA_HOST, &st), PL_OK);
  ck_assert_uint_eq(st.peak, 4096);
  int32_t back[4] = {7, 7, 7, 7};
  pl_stream *s = pl_dev_stream(dd);
  ck_assert_int_eq(pl_memcpy_async(s, back, b, sizeof back), PL_OK);
  ck_assert_int_eq(back[0] | back[3], 0); /* a read-back reads zeros */
  /* zero tokens: known inside the buffer set, nowhere else */
  static const int32_t z[8];
  ck_assert(!pl_dry_zero_tokens(dd, z, 8));
  ck_assert_int_eq(pl_dry_set_zero_tokens(dev, z, 8), PL_EINVAL);
  ck_assert_int_eq(pl_dry_set_zero_tokens(dd, z, -1), PL_EINVAL);
  pl_clear_error();
  ck_assert_int_eq(pl_dry_set_zero_tokens(dd, z, 8), PL_OK);
  ck_assert(pl_dry_zero_tokens(dd, z, 8) && pl_dry_zero_tokens(dd, z + 3, 5));
  ck_assert(!pl_dry_zero_tokens(dd, z + 3, 6) && !pl_dry_zero_tokens(dd, z, 9));
  ck_assert(!pl_dry_zero_tokens(dev, z, 8) && !pl_dry_zero_tokens(dd, NULL, 0));
  ck_assert_int_eq(pl_dry_set_zero_tokens(dd, NULL, 8), PL_OK);
  ck_assert(!pl_dry_zero_tokens(dd, z, 1));
  pl_dry_route_view none;
  ck_assert_int_eq(pl_dry_routes_view(dd, 4, 1, 2, 2, &none), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "no route source"));
  /* the flavour: cpu by default; cuda allocates as a GPU, runs nothing */
  ck_assert(!pl__allocs_as_cuda(s) && !pl__on_cuda(s));
  ck_assert_int_eq(pl_dry_set_flavour(dev, PL_BACKEND_CUDA, 0), PL_EINVAL);
  ck_assert_int_eq(pl_dry_set_flavour(dd, PL_BACKEND_DRY, 0), PL_EINVAL);
  ck_assert_int_eq(pl_dry_set_flavour(dd, PL_BACKEND_CUDA, 1000), PL_OK);
  ck_assert(pl__allocs_as_cuda(s) && !pl__on_cuda(s) && pl__on_dry(s));
  pl_dev_info info;
  ck_assert_int_eq(pl_dev_info_get(dd, &info), PL_OK);
  ck_assert_uint_eq(info.total_bytes, 1000);
  /* terabytes over a run (a long-context step allocates that much in all):
   * a freed block is handed out again, a live one never */
  void *keep, *t0 = NULL;
  ck_assert_int_eq(
      pl_alloc(dd, PL_ARENA_DEVICE, (size_t)1 << 30, "keep", &keep), PL_OK);
  for (int i = 0; i < 4096; i++) {
    void *t;
    ck_assert_int_eq(pl_alloc(dd, PL_ARENA_DEVICE, (size_t)1 << 30, "t", &t),
                     PL_OK);
    ck_assert_ptr_ne(t, keep);
    if (i == 0)
      t0 = t;
    ck_assert_ptr_eq(t, t0);
    pl_free(dd, t);
  }
  pl_free(dd, keep);
  /* more live blocks of a class than its first range holds (512 GiB):
   * the class continues in another range; distinct, owned, freed */
  void *big[20];
  for (int i = 0; i < 20; i++) {
    ck_assert_int_eq(
        pl_alloc(dd, PL_ARENA_DEVICE, (size_t)1 << 35, "big32", &big[i]),
        PL_OK);
    ck_assert(pl_dry_owns(dd, big[i]));
    for (int j = 0; j < i; j++)
      ck_assert_ptr_ne(big[i], big[j]);
  }
  for (int i = 0; i < 20; i++)
    pl_free(dd, big[i]);
  void *again;
  ck_assert_int_eq(
      pl_alloc(dd, PL_ARENA_DEVICE, (size_t)1 << 35, "big32", &again), PL_OK);
  ck_assert(pl_dry_owns(dd, again));
  pl_free(dd, again);
  /* one block larger than a class's range (a plan far beyond any machine:
   * 546 GiB of pinned boundaries): a range of its own, tracked, freed */
  void *huge[2];
  const size_t hb = ((size_t)1 << 39) + ((size_t)1 << 35);
  ck_assert_int_eq(pl_alloc(dd, PL_ARENA_HOST, hb, "huge", &huge[0]), PL_OK);
  ck_assert_int_eq(pl_alloc(dd, PL_ARENA_HOST, 2 * hb, "huge", &huge[1]),
                   PL_OK);
  ck_assert(pl_dry_owns(dd, huge[0]) && pl_dry_owns(dd, huge[1]));
  ck_assert(pl_dry_owns(dd, (char *)huge[1] + 2 * hb - 1));
  ck_assert_ptr_ne(huge[0], huge[1]);
  ck_assert_int_eq(pl_mem_stats_get(dd, PL_ARENA_HOST, &st), PL_OK);
  ck_assert_uint_eq(st.current, 4096 + 3 * hb);
  pl_free(dd, huge[0]);
  ck_assert(!pl_dry_owns(dd, (char *)huge[0] + 1));
  pl_free(dd, huge[1]);
  ck_assert_int_eq(pl_mem_stats_get(dd, PL_ARENA_HOST, &st), PL_OK);
  ck_assert_uint_eq(st.current, 4096);
  ck_assert_uint_eq(st.peak, 4096 + 3 * hb);
  pl_free(dd, a);
  pl_free(dd, b);
  pl_free(dd, h);
  pl_dev_destroy(dd);
}
END_TEST

/* A route hook for the view's test: token t's j-th route to expert
 * (3t + j) mod E, or to expert E (out of range) when ctx says so; counts
 * its calls in ctx. */
typedef struct hook_ctx {
  int calls; /* atomic: threads may ask at once */
  bool bad;
  int slow_ms; /* each ask takes this long */
} hook_ctx;

static pl_status cyclic_routes(void *ctx, int64_t N, int k, int E,
                               int32_t *idx) {
  hook_ctx *h = ctx;
  __atomic_add_fetch(&h->calls, 1, __ATOMIC_RELAXED);
  if (h->slow_ms)
    nanosleep(&(struct timespec){0, h->slow_ms * 1000000L}, NULL);
  for (int64_t t = 0; t < N; t++)
    for (int j = 0; j < k; j++)
      idx[t * k + j] = h->bad && t == N - 1 ? E : (int32_t)((3 * t + j) % E);
  return PL_OK;
}

/* The routes read in place: the hook asked once per shape, the answer
 * landed and counted per router slot, a stamp that names one answer and
 * no other memory (a copy of the routes has none). */
START_TEST(dry_route_view) {
  pl_dev *dd;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_DRY, 0, &dd), PL_OK);
  hook_ctx h = {0, false, 0};
  ck_assert_int_eq(pl_dry_set_routes(dd, cyclic_routes, &h), PL_OK);
  enum { N = 7, K = 2, E = 8 };
  pl_dry_route_view v, w;
  ck_assert_int_eq(pl_dry_routes_view(dd, N, K, E, E, &v), PL_OK);
  ck_assert_int_eq(h.calls, 1);
  ck_assert(v.stamp != 0);
  int64_t want[E] = {0};
  for (int t = 0; t < N; t++)
    for (int j = 0; j < K; j++) {
      ck_assert_int_eq(v.idx[t * K + j], (3 * t + j) % E);
      want[(3 * t + j) % E]++;
    }
  for (int e = 0; e < E; e++)
    ck_assert_int_eq(v.counts[e], want[e]);
  ck_assert_uint_eq(pl_dry_routes_stamp(dd, v.idx, N, K, E), v.stamp);
  /* the same shape: the same answer, not asked again */
  ck_assert_int_eq(pl_dry_routes_view(dd, N, K, E, E, &w), PL_OK);
  ck_assert_int_eq(h.calls, 1);
  ck_assert_ptr_eq(w.idx, v.idx);
  ck_assert_uint_eq(w.stamp, v.stamp);
  /* a copy has the values, not the stamp; nor has another shape */
  int32_t copy[N * K];
  memcpy(copy, v.idx, sizeof copy);
  ck_assert_uint_eq(pl_dry_routes_stamp(dd, copy, N, K, E), 0);
  ck_assert_uint_eq(pl_dry_routes_stamp(dd, v.idx, N - 1, K, E), 0);
  ck_assert_uint_eq(pl_dry_routes_stamp(dd, v.idx, N, K, E / 2), 0);
  ck_assert_uint_eq(pl_dry_routes_stamp(dev, v.idx, N, K, E), 0);
  const uint64_t first = v.stamp;
  /* landed on E/2 experts: e mod E/2, counted per router slot before */
  ck_assert_int_eq(pl_dry_routes_view(dd, N, K, E, E / 2, &v), PL_OK);
  ck_assert_int_eq(h.calls, 2);
  ck_assert(v.stamp != 0 && v.stamp != first);
  for (int i = 0; i < N * K; i++)
    ck_assert_int_eq(v.idx[i], copy[i] % (E / 2));
  for (int e = 0; e < E; e++)
    ck_assert_int_eq(v.counts[e], want[e]);
  ck_assert_int_eq(pl_dry_routes_view(dd, N, K, E, 3, &v), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "E_land=3"));
  /* a new hook: a new answer; a hook's id out of range: an error */
  h.bad = true;
  ck_assert_int_eq(pl_dry_set_routes(dd, cyclic_routes, &h), PL_OK);
  ck_assert_int_eq(pl_dry_routes_view(dd, N, K, E, E, &v), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "gave expert 8"));
  pl_dev_destroy(dd);
}
END_TEST

/* Another thread's dry device reading a pure hook's routes of N tokens:
 * the stamp it read, or 0. */
typedef struct share_job {
  hook_ctx *h;
  int64_t N;
  uint64_t stamp;
} share_job;

static void *route_share_thread(void *arg) {
  share_job *j = arg;
  pl_dev *d = NULL;
  pl_dry_route_view v = {0};
  if (pl_dev_create(PL_BACKEND_DRY, 0, &d) != PL_OK ||
      pl_dry_set_routes_pure(d, cyclic_routes, j->h) != PL_OK ||
      pl_dry_routes_view(d, j->N, 2, 8, 8, &v) != PL_OK)
    v.stamp = 0;
  j->stamp = v.stamp;
  pl_dev_destroy(d);
  return NULL;
}

/* A pure hook's answers are shared by the dry devices of the process:
 * asked once per (hook, ctx, shape), one stamp, alive while a device
 * holds it; a hook set as not pure, or another ctx, is asked anew; the
 * last eight answers are kept; another thread reads them too, and two
 * threads wanting a new one at once ask once. */
START_TEST(dry_route_share) {
  enum { N = 5, K = 2, E = 8, ND = 4 };
  pl_dev *d[ND];
  for (int i = 0; i < ND; i++)
    ck_assert_int_eq(pl_dev_create(PL_BACKEND_DRY, 0, &d[i]), PL_OK);
  hook_ctx h = {0, false, 0}, g = {0, false, 0};
  ck_assert_int_eq(pl_dry_set_routes_pure(d[0], cyclic_routes, &h), PL_OK);
  ck_assert_int_eq(pl_dry_set_routes_pure(d[1], cyclic_routes, &h), PL_OK);
  ck_assert_int_eq(pl_dry_set_routes(d[2], cyclic_routes, &h), PL_OK);
  ck_assert_int_eq(pl_dry_set_routes_pure(d[3], cyclic_routes, &g), PL_OK);
  pl_dry_route_view v[ND];
  for (int i = 0; i < ND; i++)
    ck_assert_int_eq(pl_dry_routes_view(d[i], N, K, E, E, &v[i]), PL_OK);
  ck_assert_int_eq(h.calls, 2); /* d[0] and d[2]; d[1] shares d[0]'s */
  ck_assert_int_eq(g.calls, 1);
  ck_assert_ptr_eq(v[1].idx, v[0].idx);
  ck_assert_uint_eq(v[1].stamp, v[0].stamp);
  ck_assert(v[2].stamp != v[0].stamp && v[3].stamp != v[0].stamp);
  ck_assert_uint_eq(pl_dry_routes_stamp(d[1], v[0].idx, N, K, E), v[0].stamp);
  /* the answer outlives the device that asked for it */
  pl_dev_destroy(d[0]);
  for (int i = 0; i < N * K; i++)
    ck_assert_int_eq(v[1].idx[i], (3 * (i / K) + i % K) % E);
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_DRY, 0, &d[0]), PL_OK);
  ck_assert_int_eq(pl_dry_set_routes_pure(d[0], cyclic_routes, &h), PL_OK);
  ck_assert_int_eq(pl_dry_routes_view(d[0], N, K, E, E, &v[0]), PL_OK);
  ck_assert_int_eq(h.calls, 2);
  ck_assert_uint_eq(v[0].stamp, v[1].stamp);
  /* seven other shapes later the first is still kept, eight later it is
   * asked for again */
  for (int n = 1; n <= 7; n++)
    ck_assert_int_eq(pl_dry_routes_view(d[0], N + n, K, E, E, &v[0]), PL_OK);
  ck_assert_int_eq(h.calls, 9);
  ck_assert_int_eq(pl_dry_routes_view(d[0], N, K, E, E, &v[0]), PL_OK);
  ck_assert_int_eq(h.calls, 9);
  for (int n = 1; n <= 8; n++)
    ck_assert_int_eq(pl_dry_routes_view(d[0], N + 10 + n, K, E, E, &v[0]),
                     PL_OK);
  ck_assert_int_eq(h.calls, 17);
  pl_dev *e;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_DRY, 0, &e), PL_OK);
  ck_assert_int_eq(pl_dry_set_routes_pure(e, cyclic_routes, &h), PL_OK);
  ck_assert_int_eq(pl_dry_routes_view(e, N, K, E, E, &v[0]), PL_OK);
  ck_assert_int_eq(h.calls, 18);
  ck_assert(v[0].stamp != v[1].stamp); /* d[1] holds the old answer */
  pl_dev_destroy(e);
  /* another thread reads the answer kept (the list holds it: no device
   * does; each dry device reserves 16 TiB of address space, and a
   * sanitizer's leaves room for few at once) */
  for (int i = 0; i < ND; i++)
    pl_dev_destroy(d[i]);
  pthread_t th[2];
  share_job sj[2] = {{&h, N, 0}, {&h, N, 0}};
  ck_assert_int_eq(pthread_create(&th[0], NULL, route_share_thread, &sj[0]), 0);
  ck_assert_int_eq(pthread_join(th[0], NULL), 0);
  ck_assert_int_eq(h.calls, 18);
  ck_assert_uint_eq(sj[0].stamp, v[0].stamp);
  /* two threads wanting a new shape at once (a slow hook): one asks, the
   * other waits for its answer */
  h.slow_ms = 100;
  for (int i = 0; i < 2; i++) {
    sj[i] = (share_job){&h, N + 40, 0};
    ck_assert_int_eq(pthread_create(&th[i], NULL, route_share_thread, &sj[i]),
                     0);
  }
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(pthread_join(th[i], NULL), 0);
  ck_assert_int_eq(h.calls, 19);
  ck_assert(sj[0].stamp != 0 && sj[0].stamp == sj[1].stamp);
}
END_TEST

/* The skewed routes (pl_plan_dry_device_skewed, `plan --imb`): of N tokens'
 * k routes over E experts in expert groups of Ep, the measured rank's E/Ep
 * experts get min(imb/Ep, 1) of them, imb times the balanced share, and
 * the others the rest; with one expert group, or imb 1 in effect, the
 * balanced routes; a bad Ep or imb refused, naming them. */
START_TEST(dry_route_skew) {
  enum { N = 4000, K = 4, E = 32 };
  const struct {
    int Ep;
    double imb, share; /* routes to experts [0, E/Ep) */
  } cases[] = {{8, 1, 1.0 / 8}, {8, 2, 2.0 / 8},   {8, 3.5, 3.5 / 8}, {8, 8, 1},
               {8, 50, 1},      {4, 1.5, 1.5 / 4}, {1, 3, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pl_dev *d = NULL;
    ck_assert_int_eq(pl_plan_dry_device_skewed(PL_BACKEND_CUDA, 0, cases[i].Ep,
                                               cases[i].imb, &d),
                     PL_OK);
    pl_dry_route_view v;
    ck_assert_int_eq(pl_dry_routes_view(d, N, K, E, E, &v), PL_OK);
    int64_t hot = 0;
    for (int64_t j = 0; j < (int64_t)N * K; j++) {
      ck_assert(v.idx[j] >= 0 && v.idx[j] < E);
      hot += v.idx[j] < E / cases[i].Ep;
    }
    const double got = (double)hot / ((double)N * K);
    ck_assert_msg(fabs(got - cases[i].share) <= 1.0 / N,
                  "Ep %d imb %g: share %.4f to the measured rank, want %.4f",
                  cases[i].Ep, cases[i].imb, got, cases[i].share);
    pl_dev_destroy(d);
  }
  pl_dev *d = NULL;
  ck_assert_int_eq(pl_plan_dry_device_skewed(PL_BACKEND_CPU, 0, 8, 0.5, &d),
                   PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "imb=0.5"));
  ck_assert_int_eq(pl_plan_dry_device_skewed(PL_BACKEND_CPU, 0, 0, 2, &d),
                   PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "Ep=0"));
  ck_assert_ptr_null(d);
}
END_TEST

/* ---- one step measures what a later one does -------------------------
 * pl__plan_memory_dry measures one step: the trainer allocates its state
 * when it is built.  On every point of the grid and both flavours, with
 * the worst case, a second step's pl_plan_mem (the one measured after a
 * first) equals the first's, field by field and phase by phase; the
 * layers' phases and the head's are seen; and the comparison sees a field
 * changed. */

START_TEST(dry_one_step) {
  if (size != 1)
    return; /* one process measures one rank */
  point g[32];
  const int n = grid(size, g);
  int nf = 0;
  for (int b = 0; b < 2; b++) {
    pl_plan_machine mc = pl_plan_machine_default();
    mc.backend = b ? PL_BACKEND_CUDA : PL_BACKEND_CPU;
    for (int i = 0; i < n; i++) {
      static pl_plan_mem one, two;
      ck_assert_msg(pl__plan_memory_dry_steps(&g[i].m, &g[i].c, &mc, 0, true, 1,
                                              &one) == PL_OK,
                    "%s: %s", g[i].name, pl_last_error());
      ck_assert_msg(pl__plan_memory_dry_steps(&g[i].m, &g[i].c, &mc, 0, true, 2,
                                              &two) == PL_OK,
                    "%s: %s", g[i].name, pl_last_error());
      char lines[4][PL_PLAN_DIFF_LEN];
      const int nd = pl_plan_mem_diff(&one, &two, lines, 4);
      const bool same =
          nd == 0 &&
          !memcmp(one.layer_high, two.layer_high, sizeof one.layer_high) &&
          !memcmp(one.layer_high_worst, two.layer_high_worst,
                  sizeof one.layer_high_worst);
      if (!same)
        fprintf(stderr, "  %s (%s): one step / two: %d fields differ%s%s\n",
                g[i].name, pl_backend_name(mc.backend), nd, nd ? ", " : "",
                nd ? lines[0] : " (a phase's high)");
      nf += !same;
      ck_assert_msg(one.layer_high[0] > 0 && one.layer_high[PL_PLAN_BINS] > 0,
                    "%s: no layer or head phase seen", g[i].name);
      pl_plan_mem x = one;
      x.term_peak[PL_TERM_ACTS]++;
      ck_assert_int_eq(pl_plan_mem_diff(&one, &x, NULL, 0), 1);
    }
  }
  ck_assert_msg(nf == 0, "%d of %d points: a second step measures otherwise",
                nf, 2 * n);
}
END_TEST

/* ---- measured on several threads at once ------------------------------
 * A dry measurement calls no MPI (its world is a virtual group of one), so
 * threads measure at once, each its own configuration, on every rank of
 * the run: each thread's pl_plan_mem equals, field by field and phase by
 * phase, the same configuration measured alone on this thread. */

typedef struct thread_job {
  const point *p;
  const pl_plan_machine *mc;
  pl_plan_mem mem;
  pl_status st;
} thread_job;

static void *measure_job(void *arg) {
  thread_job *j = arg;
  j->st = pl__plan_memory_dry(&j->p->m, &j->p->c, j->mc, 0, true, &j->mem);
  return NULL;
}

START_TEST(dry_threads) {
  enum { T = 4 };
  pl_plan_machine mc = pl_plan_machine_default();
  mc.backend = PL_BACKEND_CUDA;
  point g[32];
  const int n = grid(1, g);
  ck_assert_int_ge(n, T);
  static thread_job alone[T], many[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    const point *p = &g[i * (n / T)];
    alone[i] = (thread_job){p, &mc, {0}, PL_OK};
    many[i] = alone[i];
    measure_job(&alone[i]);
    ck_assert_msg(alone[i].st == PL_OK, "%s: %s", p->name, pl_last_error());
  }
  for (int i = 0; i < T; i++)
    ck_assert_int_eq(pthread_create(&th[i], NULL, measure_job, &many[i]), 0);
  for (int i = 0; i < T; i++)
    ck_assert_int_eq(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < T; i++) {
    ck_assert_msg(many[i].st == PL_OK, "%s on a thread: status %d",
                  many[i].p->name, many[i].st);
    char lines[4][PL_PLAN_DIFF_LEN];
    const int nd = pl_plan_mem_diff(&alone[i].mem, &many[i].mem, lines, 4);
    ck_assert_msg(nd == 0, "%s: %d fields differ on threads, first %s",
                  many[i].p->name, nd, lines[0]);
    ck_assert(!memcmp(alone[i].mem.layer_high, many[i].mem.layer_high,
                      sizeof alone[i].mem.layer_high));
    ck_assert(!memcmp(alone[i].mem.layer_high_worst,
                      many[i].mem.layer_high_worst,
                      sizeof alone[i].mem.layer_high_worst));
  }
}
END_TEST

/* ---- tokens a dry device knows are zeros ---------------------------------
 * A step on a dry device reads the range of tokens set as zeros from the
 * device: the same result (its targets counted) as a step that reads them;
 * a buffer not set is read, and a bad token in it refused as anywhere. */

START_TEST(dry_zero_tokens) {
  point g[32];
  grid(1, g);
  const point *p = &g[0];
  pl_dev *dd = NULL;
  pl_comm *dw = NULL;
  ck_assert_int_eq(pl_plan_dry_device(PL_BACKEND_CPU, 0, rank, &dd), PL_OK);
  ck_assert_int_eq(pl_comm_virtual(dd, 1, &dw), PL_OK);
  pl_trainer *t = NULL;
  ck_assert_int_eq(
      pl_trainer_create(dd, dw, &p->m, &p->c.lc, p->c.S, &p->c.sc, &t), PL_OK);
  const int64_t n = pl_trainer_tokens_per_rank(t);
  int32_t *zero = calloc((size_t)n, sizeof *zero),
          *read = calloc((size_t)n, sizeof *read);
  ck_assert(zero && read);
  static pl_step_result a, b;
  ck_assert_int_eq(pl_trainer_step(t, read, &a), PL_OK);
  ck_assert_int_eq(pl_dry_set_zero_tokens(dd, zero, n), PL_OK);
  ck_assert_int_eq(pl_trainer_step(t, zero, &b), PL_OK);
  ck_assert_int_eq(a.tokens, b.tokens);
  ck_assert_int_gt(b.tokens, 0);
  ck_assert_uint_eq(a.dev.peak, b.dev.peak);
  read[n / 2] = -3; /* not the zeros set: read, and refused */
  ck_assert_int_eq(pl_trainer_step(t, read, &a), PL_EINVAL);
  ck_assert_msg(strstr(pl_last_error(), "is -3"), "%s", pl_last_error());
  pl_clear_error();
  pl_trainer_destroy(t);
  free(zero), free(read);
  pl_comm_destroy(dw);
  pl_dev_destroy(dd);
}
END_TEST

/* ---- caches of routes counted ---------------------------------------------
 * One grid point's MoE chunked at several caps, back and forth, measured in
 * a row on this thread (each measurement reads what the ones before it
 * counted: the routes per chunk, the plan's memos) against each on a new
 * thread (the plan's memos, kept per thread, empty there): field by field
 * alike. */

START_TEST(dry_counts_kept) {
  pl_plan_machine mc = pl_plan_machine_default();
  mc.backend = PL_BACKEND_CUDA;
  point g[32];
  const int n = grid(1, g);
  const point *p = NULL;
  for (int i = 0; i < n && !p; i++)
    if (pl_moe_variant_desc_of(g[i].c.sc.dispatch)->chunks && g[i].m.L > 0 &&
        pl_plan_tokens_per_rank(&g[i].c) >= 64)
      p = &g[i];
  ck_assert_msg(p, "no grid point with a chunked dispatch");
  const int64_t N = pl_plan_tokens_per_rank(&p->c);
  const int64_t caps[] = {N / 4, N / 16, N / 4, N / 2, N / 16, N / 2};
  enum { C = sizeof caps / sizeof *caps };
  static point q[C];
  static thread_job row[C], cold[C];
  for (int i = 0; i < C; i++) {
    q[i] = *p;
    q[i].c.sc.moe_c = caps[i];
    row[i] = (thread_job){&q[i], &mc, {0}, PL_OK};
    cold[i] = row[i];
    measure_job(&row[i]);
    ck_assert_msg(row[i].st == PL_OK, "%s c=%lld: %s", p->name,
                  (long long)caps[i], pl_last_error());
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, measure_job, &cold[i]), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(cold[i].st, PL_OK);
  }
  for (int i = 0; i < C; i++) {
    char lines[4][PL_PLAN_DIFF_LEN];
    const int nd = pl_plan_mem_diff(&cold[i].mem, &row[i].mem, lines, 4);
    ck_assert_msg(nd == 0, "%s c=%lld: %d fields differ, first %s", p->name,
                  (long long)caps[i], nd, lines[0]);
    ck_assert(!memcmp(cold[i].mem.layer_high, row[i].mem.layer_high,
                      sizeof row[i].mem.layer_high));
  }
  /* the caps chunk differently: a cache that mixed them up would show */
  const size_t d1 = pl_plan_mem_tag_peak(&row[1].mem, "dispatch"),
               d3 = pl_plan_mem_tag_peak(&row[3].mem, "dispatch");
  ck_assert_msg(d1 != d3, "%s: caps N/16 and N/2 dispatch alike (%zu)", p->name,
                d1);
}
END_TEST

int main(int argc, char **argv) {
  const int e =
      pl_check_world_open(&argc, &argv, "plan_dry", &dev, &world, &rank, &size);
  if (e)
    return e;
  const TTest *tests[] = {dry_backend_basics,
                          dry_route_view,
                          dry_route_share,
                          dry_route_skew,
                          dry_grid,
                          dry_grid_cuda,
                          dry_room_need,
                          dry_room_floor,
                          dry_threads,
                          dry_counts_kept,
                          dry_zero_tokens,
                          dry_one_step,
                          NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("plan_dry", 300, tests, rank, world));
}
