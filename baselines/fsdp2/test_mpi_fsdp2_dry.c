/* test_mpi_fsdp2_dry.c — the planner's dry measurement of the FSDP2
 * baseline (fsdp2_dry.c, reached through the planner's hook:
 * pl_plan_dry_measure) against the planner's replay of it
 * (pl_plan_fsdp2_memory, engine/plan/baseline_fsdp2.c): for the grid of
 * test_mpi_fsdp2_plan.c (fsdp2_grid_testlib.h) at the ranks of mpirun, every
 * rank measures the configuration of the run (a W > 1 run as the rank view
 * of its rank 0: W = 1, W_v = W, rank_view) and compares it with the
 * replay of the real run (W ranks; a proxy point's W_v ranks), field by
 * field and to the byte: the device peak, the adversarial one (measured
 * with the dry device's adversarial routes), the pinned host bytes and
 * their optimizer part, the host bytes per rank and per node (the run's
 * ranks on a node), the persistent state, N, K, c_eff, the parameters the
 * rank updates, every tag's bytes at the peak and own peak, every term at
 * the peak, and the own peak of every term of one tag (a term of several
 * tags is measured as the sum of its tags' own peaks: it must not be below
 * the replay's).  Twice: the replay of the CPU backend against the dry
 * device as it is, the replay of CUDA against the dry device playing cuda.
 * One idealization of the replay is bracketed instead: with an EP group of
 * several members the replay splits every source's routes evenly over the
 * group, where the dry device routes by the balanced profile exactly (the
 * remainder of N·k over E lands on the low experts, rank 0's): the device
 * peak and the routes' tags and terms (routing, dispatch, expert, router)
 * must lie between the replay's and the replay's with rank 0's exact
 * receive as its imbalance (imb = ep·routes to its experts / N·k; 1.0156
 * for N = 256, k = 2, E = 12, ep = 2), and dev_worst is at most the
 * replay's where k > E/ep (the adversarial experts 0..k-1 span ranks).
 * A failure names the configuration and every field that differs.  Also:
 * the hook refuses a system nothing registered, the measurement refuses
 * what the baseline does not run, and it can fail (an AC-full replay of an
 * AC-none step differs). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/check_mpi.h"
#include "fsdp2.h"
#include "fsdp2_grid_testlib.h"
#include "ops/llep_plan.h"
#include "plan/plan.h"

static pl_dev *dev;
static pl_comm *world;
static int rank, size;

/* The run whose rank 0 one process measures for c (fsdp2_dry.c builds its
 * rank view): c itself on one rank, else the real run of c's W_v ranks
 * (W_v = W for a real c). */
static pl_plan_cfg run_of(const pl_plan_cfg *c) {
  pl_plan_cfg b = *c;
  if (c->W > 1) {
    b.W = c->lc.W_v > c->W ? c->lc.W_v : c->W;
    b.lc.W_v = 0;
    b.lc.rank_view = 0;
    b.present = 0;
    b.tokens_step = 0;
  }
  return b;
}

/* Appends "name replay X dry Y" to why when x != y; counts it. */
static int field(char *why, size_t n, const char *name, long long x,
                 long long y) {
  if (x == y)
    return 0;
  const size_t l = strlen(why);
  if (l + 1 < n)
    snprintf(why + l, n - l, " %s (replay %lld, dry %lld);", name, x, y);
  return 1;
}

/* Appends "name replay LO..HI dry Y" unless lo <= y <= hi (either
 * order); counts it. */
static int within(char *why, size_t n, const char *name, long long lo,
                  long long hi, long long y) {
  if (lo > hi) {
    const long long t = lo;
    lo = hi, hi = t;
  }
  if (lo <= y && y <= hi)
    return 0;
  const size_t l = strlen(why);
  if (l + 1 < n)
    snprintf(why + l, n - l, " %s (replay %lld..%lld, dry %lld);", name, lo, hi,
             y);
  return 1;
}

/* The tags and terms the routes decide: what rank 0 of an EP group of
 * several members receives and sends. */
static bool route_tag(const char *t) {
  return !strcmp(t, "routing") || !strcmp(t, "dispatch") ||
         !strcmp(t, "expert") || !strcmp(t, "router");
}
static bool route_term(int k) {
  return k == PL_TERM_DISPATCH || k == PL_TERM_EXPERT;
}

/* Field x of the replay against y measured: equal, or with hi (the replay
 * with rank 0's exact receive) and a field the routes decide, between x
 * and hi's. */
static int cmp(char *why, size_t n, const char *name, long long x,
               const long long *hi, bool routed, long long y) {
  return hi && routed ? within(why, n, name, x, *hi, y)
                      : field(why, n, name, x, y);
}

/* The tags of both lists, by name: bytes at the peak and own peaks (hi:
 * the routes' tags bracketed, cmp). */
static int tags(const pl_plan_mem *rp, const pl_plan_mem *hi,
                const pl_plan_mem *dm, char *why, size_t n) {
  int bad = 0;
  char f[64];
  for (int s = 0; s < 2; s++) {
    const pl_plan_mem *a = s ? dm : rp;
    for (int i = 0; i < a->n_tags; i++) {
      const char *t = a->tag_peak[i].tag;
      bool seen = false; /* the replay's tags were compared already */
      for (int j = 0; s && j < rp->n_tags; j++)
        seen = seen || !strcmp(rp->tag_peak[j].tag, t);
      if (seen)
        continue;
      const bool r = route_tag(t);
      const long long ha = hi ? (long long)pl_plan_mem_tag(hi, t) : 0,
                      hp = hi ? (long long)pl_plan_mem_tag_peak(hi, t) : 0;
      snprintf(f, sizeof f, "tag %s at the peak", t);
      bad += cmp(why, n, f, (long long)pl_plan_mem_tag(rp, t), hi ? &ha : NULL,
                 r, (long long)pl_plan_mem_tag(dm, t));
      snprintf(f, sizeof f, "tag %s own peak", t);
      bad += cmp(why, n, f, (long long)pl_plan_mem_tag_peak(rp, t),
                 hi ? &hp : NULL, r, (long long)pl_plan_mem_tag_peak(dm, t));
    }
  }
  return bad;
}

/* Every field of the replay rp and the measurement dm; host_node: the
 * replay's rank times the run's ranks on a node.  hi (NULL: every field
 * exact): rank 0 of an EP group of several members, whose routes the dry
 * device takes from the balanced profile exactly where the replay splits
 * them evenly — the device peak and the routes' tags and terms between the
 * replay's and hi's (the replay with rank 0's exact receive as its
 * imbalance); worst_exact: the adversarial routes land on rank 0's experts
 * only (k <= E/ep), so dev_worst is the replay's, else at most it.  The
 * differences into why; their count. */
static int compare(const pl_plan_mem *rp, const pl_plan_mem *hi,
                   bool worst_exact, const pl_plan_mem *dm, size_t host_node,
                   char *why, size_t n) {
  why[0] = 0;
  int bad = 0;
  const long long hpk = hi ? (long long)hi->dev_peak : 0;
  bad += cmp(why, n, "dev_peak", (long long)rp->dev_peak, hi ? &hpk : NULL,
             true, (long long)dm->dev_peak);
  if (!hi || worst_exact)
    bad += field(why, n, "dev_worst", (long long)rp->dev_worst,
                 (long long)dm->dev_worst);
  else
    bad += within(why, n, "dev_worst", (long long)dm->dev_peak,
                  (long long)rp->dev_worst, (long long)dm->dev_worst);
  /* the step marks the replay's phases: the same phase of the peak where
   * the peaks are the same */
  if ((!hi || rp->dev_peak == dm->dev_peak) &&
      strcmp(rp->peak_phase, dm->peak_phase)) {
    const size_t l = strlen(why);
    if (l + 1 < n)
      snprintf(why + l, n - l, " peak_phase (replay %s, dry %s);",
               rp->peak_phase, dm->peak_phase);
    bad++;
  }
  bad += field(why, n, "host_pinned", (long long)rp->host_pinned,
               (long long)dm->host_pinned);
  bad += field(why, n, "host_optim", (long long)rp->host_optim,
               (long long)dm->host_optim);
  bad += field(why, n, "host_rank", (long long)rp->host_rank,
               (long long)dm->host_rank);
  bad += field(why, n, "host_node", (long long)host_node,
               (long long)dm->host_node);
  bad += field(why, n, "state", (long long)rp->state, (long long)dm->state);
  bad += field(why, n, "N", rp->N, dm->N);
  bad += field(why, n, "K", rp->K, dm->K);
  bad += field(why, n, "c_eff", rp->c_eff, dm->c_eff);
  bad += field(why, n, "params_rank", rp->params_rank, dm->params_rank);
  bad += field(why, n, "sco_layers", rp->sco_layers, dm->sco_layers);
  bad += field(why, n, "dispatch_bound", (long long)rp->dispatch_bound,
               (long long)dm->dispatch_bound);
  bad += tags(rp, hi, dm, why, n);
  char f[64];
  for (int k = 0; k < PL_TERM_COUNT; k++) {
    const long long ht = hi ? (long long)hi->term[k] : 0;
    snprintf(f, sizeof f, "term %s at the peak", pl_plan_term_name(k));
    bad += cmp(why, n, f, (long long)rp->term[k], hi ? &ht : NULL,
               route_term(k), (long long)dm->term[k]);
    snprintf(f, sizeof f, "term %s own peak", pl_plan_term_name(k));
    const long long hp = hi ? (long long)hi->term_peak[k] : 0;
    bad += cmp(why, n, f, (long long)rp->term_peak[k], hi ? &hp : NULL,
               route_term(k), (long long)dm->term_peak[k]);
  }
  return bad;
}

/* Rank 0's receive under the dry device's balanced routes over the replay's
 * even split, in an EP group of ep members routing alike (each N tokens,
 * k routes): ep · (its routes to experts [0, E/ep)) / (N·k). */
static double rank0_imbalance(const pl_model_cfg *m, int ep, int64_t N) {
  pl_route_profile p;
  ck_assert_int_eq(pl_route_profile_parse("balanced", &p), PL_OK);
  int32_t *idx = malloc((size_t)N * m->k * sizeof *idx);
  float *w = malloc((size_t)N * m->k * sizeof *w);
  ck_assert(idx && w);
  ck_assert_int_eq(pl_route_profile_fill(&p, N, m->k, m->E, 0, 0, idx, w),
                   PL_OK);
  int64_t mine = 0;
  for (int64_t i = 0; i < N * m->k; i++)
    mine += idx[i] < m->E / ep;
  free(idx);
  free(w);
  return (double)ep * (double)mine / ((double)N * m->k);
}

/* Point p on backend be: 0 when every field agrees, else 1 with the
 * differences in why. */
static int check_point(const point *p, pl_backend be, char *why, size_t n) {
  pl_plan_machine mc = pl_plan_machine_default();
  mc.backend = be;
  const pl_plan_cfg c = pl_fsdp2_plan_cfg(&p->m, &p->c, size, p->S);
  const pl_plan_cfg b = run_of(&c);
  pl_plan_mem *rp = malloc(sizeof *rp), *dm = malloc(sizeof *dm),
              *hi = malloc(sizeof *hi);
  ck_assert(rp && dm && hi);
  pl_status st = pl_plan_fsdp2_memory(&p->m, &b, &mc, rp);
  ck_assert_msg(st == PL_OK, "%s: replay: %s", p->name, pl_last_error());
  /* an EP group of several members: rank 0's exact receive replayed too */
  const bool routed = b.W > 1 && b.ep > 1;
  double imb = 1;
  if (routed) {
    pl_plan_cfg bh = b;
    bh.imb = imb = rank0_imbalance(&p->m, b.ep, p->S / b.cp);
    st = pl_plan_fsdp2_memory(&p->m, &bh, &mc, hi);
    ck_assert_msg(st == PL_OK, "%s: replay: %s", p->name, pl_last_error());
  }
  st = pl_plan_dry_measure(&p->m, &c, &mc, dm);
  ck_assert_msg(st == PL_OK, "%s: dry: %s", p->name, pl_last_error());
  const int gpn = mc.gpus_per_node < c.W ? mc.gpus_per_node : c.W;
  const bool worst_exact = p->m.k <= p->m.E / b.ep;
  const int bad = compare(rp, routed ? hi : NULL, worst_exact, dm,
                          (size_t)gpn * rp->host_rank, why, n) > 0;
  if (rank == 0)
    printf("  %-4s %-42s dev %9zu / %9zu  host %8zu / %8zu  worst %9zu / "
           "%9zu  %s\n",
           pl_backend_name(be), p->name, rp->dev_peak, dm->dev_peak,
           rp->host_pinned, dm->host_pinned, rp->dev_worst, dm->dev_worst,
           bad                                      ? "DIFFERS"
           : routed && rp->dev_peak != dm->dev_peak ? "routes"
                                                    : "equal");
  if (rank == 0 && routed)
    printf("       rank 0's exact receive (imb %.4f): replay dev %zu\n", imb,
           hi->dev_peak);
  free(rp);
  free(dm);
  free(hi);
  return bad;
}

START_TEST(dry_equals_replay) {
  point g[32];
  const int n = grid(g, size);
  int bad = 0;
  char first[1024] = "", why[900];
  if (rank == 0)
    printf("FSDP2 replay vs the dry measurement (W=%d measured as W=1, "
           "W_v=%d), replay / dry:\n",
           size, size);
  const pl_backend bes[2] = {PL_BACKEND_CPU, PL_BACKEND_CUDA};
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < n; i++)
      if (check_point(&g[i], bes[b], why, sizeof why) && !bad++)
        snprintf(first, sizeof first, "%.60s (%s):%.900s", g[i].name,
                 pl_backend_name(bes[b]), why);
  ck_assert_msg(!bad,
                "%d of %d measurements differ from the replay; the "
                "first: %s",
                bad, 2 * n, first);
}
END_TEST

/* One step measures what two do: the baseline allocates its state when it
 * is built, so the second step starts from what the first did (the state
 * after the first is what both report) — every field of the grid's
 * measurements, both flavours. */
START_TEST(one_step) {
  point g[32];
  const int n = grid(g, size);
  const pl_backend bes[2] = {PL_BACKEND_CPU, PL_BACKEND_CUDA};
  pl_plan_mem *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  ck_assert(a && b);
  for (int f = 0; f < 2; f++)
    for (int i = 0; i < n; i++) {
      pl_plan_machine mc = pl_plan_machine_default();
      mc.backend = bes[f];
      const pl_plan_cfg c = pl_fsdp2_plan_cfg(&g[i].m, &g[i].c, size, g[i].S);
      ck_assert_int_eq(pl_fsdp2_dry_memory_steps(&g[i].m, &c, &mc, 1, a),
                       PL_OK);
      ck_assert_int_eq(pl_fsdp2_dry_memory_steps(&g[i].m, &c, &mc, 2, b),
                       PL_OK);
      char d[4][PL_PLAN_DIFF_LEN];
      const int nd = pl_plan_mem_diff(a, b, d, 4);
      ck_assert_msg(nd == 0, "%s (%s): one step / two differ in %d fields: %s",
                    g[i].name, pl_backend_name(bes[f]), nd, d[0]);
    }
  pl_plan_machine mc = pl_plan_machine_default();
  const pl_plan_cfg c = pl_fsdp2_plan_cfg(&g[0].m, &g[0].c, size, g[0].S);
  ck_assert_int_eq(pl_fsdp2_dry_memory_steps(&g[0].m, &c, &mc, 0, a),
                   PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "steps=0"));
  free(a), free(b);
}
END_TEST

START_TEST(hook_refusals) {
  /* nothing registered for plateau: refused, naming the system */
  pl_model_cfg m;
  ck_assert_int_eq(pl_model_preset("tiny", &m), PL_OK);
  const pl_plan_machine mc = pl_plan_machine_default();
  pl_plan_cfg c = pl_plan_cfg_plateau(1, 256);
  pl_plan_mem out;
  ck_assert_int_eq(pl_plan_dry_measure(&m, &c, &mc, &out), PL_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "plateau"));
  /* what the baseline does not run */
  point p = base("mbs 2");
  c = pl_fsdp2_plan_cfg(&p.m, &p.c, size, p.S);
  c.mbs = 2;
  ck_assert_int_eq(pl_plan_dry_measure(&p.m, &c, &mc, &out), PL_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "mbs=2"));
  /* unregistered, fsdp2 is refused too */
  pl_plan_set_dry_measure(PL_PLAN_FSDP2, NULL);
  c.mbs = 1;
  ck_assert_int_eq(pl_plan_dry_measure(&p.m, &c, &mc, &out), PL_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "fsdp2"));
  pl_fsdp2_register_dry();
}
END_TEST

START_TEST(wrong_ac_differs) {
  /* the comparison can fail: an AC-full replay of an AC-none step */
  point p = base("wrong AC");
  p.c.ac = PL_FSDP2_AC_NONE, p.S = 1024;
  const pl_plan_machine mc = pl_plan_machine_default();
  const pl_plan_cfg c = pl_fsdp2_plan_cfg(&p.m, &p.c, size, p.S);
  pl_plan_cfg wrong = run_of(&c);
  wrong.ac = PL_PLAN_AC_FULL;
  pl_plan_mem rp, dm;
  ck_assert_int_eq(pl_plan_fsdp2_memory(&p.m, &wrong, &mc, &rp), PL_OK);
  ck_assert_int_eq(pl_plan_dry_measure(&p.m, &c, &mc, &dm), PL_OK);
  char why[900];
  ck_assert_int_gt(compare(&rp, NULL, true, &dm, rp.host_node, why, sizeof why),
                   0);
  ck_assert_msg(dm.dev_peak > rp.dev_peak,
                "AC none measured %zu, AC full replayed %zu", dm.dev_peak,
                rp.dev_peak);
}
END_TEST

int main(int argc, char **argv) {
  const int e = pl_check_world_open(&argc, &argv, "fsdp2 dry", &dev, &world,
                                    &rank, &size);
  if (e)
    return e;
  pl_fsdp2_register_dry();
  const TTest *tests[] = {dry_equals_replay, one_step, hook_refusals,
                          wrong_ac_differs, NULL};
  return pl_check_world_close(
      dev, world, pl_check_run("fsdp2_dry", 300, tests, rank, world));
}
