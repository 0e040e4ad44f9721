/* train_plan.c — `plateau bench train` consults the planner (engine/plan)
 * before it launches a point (train_plan.h): the run's machine (the
 * device's memory or --mem-limit, the host's available RAM, a calib file;
 * or the machine --plan-set names instead), the prediction of a point
 * (pl_plan_check: device peak, pinned host bytes, fits or the binding term;
 * pl_plan_time_predict: the step), --config auto's choice of the knobs the
 * command line leaves (pl_plan_auto), and
 * the planner's budget printed by --describe; and the pinned-host limit a
 * point runs under (the host's available RAM less the same 2 GiB).
 *
 * A proxy (W_v > W) is planned twice: as itself on this machine (its
 * verdict, pred_*: what it measures, no communication with absent ranks)
 * and as the W_v-rank run it plays, on nodes of the defaults' GPUs per node
 * with every rank the proxy's device and host (pl_plan_proxy_comm: the
 * communication its projection adds; --config auto: the knobs chosen for
 * that run, then applied to the proxy, its virtual groups standing in).
 *
 * Every rank must take the same branch at a point (a point predicted not to
 * fit is skipped by all), so the machine is agreed over the ranks once: the
 * smallest device and the smallest available host memory of any rank, the
 * most ranks sharing a host. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/plan_cmd.h"
#include "train_plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* bytes by magnitude, for notes */
static const char *hb(char *buf, size_t n, double v) {
  if (v >= GIB)
    snprintf(buf, n, "%.2f GiB", v / GIB);
  else if (v >= 1048576.0)
    snprintf(buf, n, "%.2f MiB", v / 1048576.0);
  else
    snprintf(buf, n, "%.1f KiB", v / 1024.0);
  return buf;
}

/* MemAvailable of this host in bytes (0: unknown). */
static double mem_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  unsigned long long kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  return (double)kb * 1024.0;
}

/* The ranks of the world that share this rank's host (by host name). */
static pl_status local_ranks(pl_bench_ctx *c, int *out) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  uint64_t h = 1469598103934665603ull; /* FNV-1a of the name */
  for (const char *p = host; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  int64_t *all = calloc((size_t)c->size, sizeof *all);
  if (!all)
    return pl_set_error(PL_ENOMEM, "train: host");
  all[c->rank] = (int64_t)(h >> 1);
  int64_t n = 0;
  pl_status st = PL_OK;
  PL_TRY_GOTO(st, done,
              pl_host_allreduce_i64(c->comm, all, (size_t)c->size, PL_RED_SUM));
  for (int i = 0; i < c->size; i++)
    n += all[i] == all[c->rank];
  st = pl_host_allreduce_i64(c->comm, &n, 1, PL_RED_MAX);
done:
  free(all);
  *out = (int)n;
  return st;
}

/* --plan-set K=V[,K=V...]: the machine a point will run on, given instead
 * of the one measured here (a dry run where the sweep is submitted plans for
 * the nodes that will run it).  Every item is checked as `plateau plan
 * --set`'s are; an empty item is refused. */
static pl_status plan_set(const char *s, pl_plan_machine *mc) {
  char buf[1024];
  if (strlen(s) >= sizeof buf)
    return pl_set_error(PL_EINVAL, "--plan-set: longer than %zu characters",
                        sizeof buf - 1);
  snprintf(buf, sizeof buf, "%s", s);
  char *p = buf;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma)
      *comma = 0;
    if (!*p)
      return pl_set_error(PL_EINVAL,
                          "--plan-set=%s: an empty item (allowed: "
                          "key=value[,key=value])",
                          s);
    if (pl_plan_machine_set(mc, p) != PL_OK) {
      return pl_error_prefix(PL_EINVAL, "--plan-set: ");
    }
    if (!comma)
      break;
    p = comma + 1;
  }
  if (mc->hbm_reserve >= mc->hbm_bytes)
    return pl_set_error(PL_EINVAL,
                        "--plan-set=%s: hbm_bytes %.0f must exceed "
                        "hbm_reserve %.0f",
                        s, mc->hbm_bytes, mc->hbm_reserve);
  return PL_OK;
}

pl_status pl__train_machine(pl_bench_ctx *c, const char *calib,
                            pl_plan_machine *mc) {
  *mc = pl_plan_machine_default();
  mc->backend = c->cuda ? PL_BACKEND_CUDA : PL_BACKEND_CPU;
  if (calib) { /* the file the GEMM rate came from (train_args.c) */
    pl_status st = pl_plan_machine_load(mc, calib);
    if (st != PL_OK) {
      return pl_error_prefix(PL_EINVAL, "--calib: the plan's machine: ");
    }
  }
  /* device: --mem-limit is exact (the tracked allocator refuses beyond
   * it); else the device's memory less the planner's reserve on a GPU */
  const double limit = (double)pl_args_size(c->args, "mem-limit");
  pl_dev_info info;
  PL_TRY(pl_dev_info_get(c->dev, &info));
  double v[2] = {limit > 0 ? limit : (double)info.total_bytes, 0};
  if (limit > 0 || !c->cuda) /* exact: the tracked allocator's own limit */
    mc->hbm_reserve = 0, mc->fill_reserve = 0;
  if (!c->cuda) /* a GPU's measured ceiling is no CPU arena's */
    mc->hbm_alloc = 0;
  /* host: what is available now plus what the arena pins already, less
   * the 2 GiB the bench's own guard keeps (pl__train_host_limit below) */
  pl_mem_stats hs;
  pl_mem_stats_get(c->dev, PL_ARENA_HOST, &hs);
  const double given = (double)pl_args_size(c->args, "host-mem");
  v[1] = given > 0 ? given : mem_available() + (double)hs.current;
  PL_TRY(pl_host_allreduce_f64(c->comm, v, 2, PL_RED_MIN));
  mc->hbm_bytes = v[0];
  if (v[1] > 0)
    mc->host_bytes = v[1], mc->host_reserve = 2 * GIB;
  PL_TRY(local_ranks(c, &mc->gpus_per_node));
  const char *set = pl_args_str(c->args, "plan-set");
  if (set)
    PL_TRY(plan_set(set, mc));
  char src[sizeof mc->source];
  snprintf(src, sizeof src, "%.80s; device %.2f GiB%s, host %.1f GiB %s",
           calib ? mc->source : (c->cuda ? "H200 defaults" : "cpu"),
           mc->hbm_bytes / GIB,
           set         ? " (--plan-set)"
           : limit > 0 ? " (--mem-limit)"
                       : "",
           mc->host_bytes / GIB,
           set         ? "(--plan-set)"
           : given > 0 ? "available (--host-mem)"
                       : "available");
  snprintf(mc->source, sizeof mc->source, "%s", src);
  return PL_OK;
}

/* One process alone on its host (the one-GPU proxy): pinned host memory
 * beyond what the host has available (MemAvailable less 2 GiB, on top of
 * what the arena holds) is a clean PL_ENOMEM, an oom row, instead of the
 * kernel's OOM killer ending the run (fsdp2's offloaded optimizer pins 16
 * bytes per parameter of the rank).  With several ranks, which share a host
 * is not known here: no limit. */
void pl__train_host_limit(pl_bench_ctx *c, bool on) {
  size_t lim = 0;
  FILE *f = on && c->size == 1 && pl_dev_backend(c->dev) != PL_BACKEND_DRY
                ? fopen("/proc/meminfo", "r")
                : NULL; /* a dry device's pinned host is not backed */
  char line[256];
  unsigned long long kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  if (kb > (2ull << 20)) {
    pl_mem_stats hs;
    pl_mem_stats_get(c->dev, PL_ARENA_HOST, &hs);
    lim = hs.current + (size_t)(kb - (2ull << 20)) * 1024;
  }
  pl_mem_set_limit(c->dev, PL_ARENA_HOST, lim);
}

/* GPUs per node of the W_v-rank run a proxy plays (the H200 nodes of the
 * planner's defaults), at most W_v. */
static int proj_gpn(int Wv) {
  const int g = pl_plan_machine_default().gpus_per_node;
  return g < Wv ? g : Wv;
}

/* The point's configuration (NULL u->sys hook: no prediction). */
static pl_status cfg_of(const pl_train_system *sys, const pl_train_setup *u,
                        int W, pl_plan_cfg *cfg) {
  if (!sys->plan)
    return pl_set_error(PL_EUNSUPPORTED, "no planner model of %s", sys->name);
  return sys->plan(u, W, cfg);
}

/* The point's configuration, the planner's verdict on it and its predicted
 * step time (v: NULL when it could not be allocated). */
static pl_status plan_point(const pl__train_args *a, const pl_train_system *sys,
                            const pl_train_setup *u, int W, pl_plan_cfg *cfg,
                            pl_plan_verdict *v, pl_plan_time *t) {
  if (!v)
    return pl_set_error(PL_ENOMEM, "train: host");
  PL_TRY(cfg_of(sys, u, W, cfg));
  PL_TRY(pl_plan_check(&u->m, cfg, &a->mc, v));
  return pl_plan_time_predict(&u->m, cfg, &a->mc, t);
}

void pl__train_predict(const pl__train_args *a, const pl_train_system *sys,
                       const pl_train_setup *u, int W, pl__train_pred *out) {
  memset(out, 0, sizeof *out);
  pl_plan_cfg cfg;
  pl_plan_verdict *v = malloc(sizeof *v);
  pl_plan_time t;
  pl_status st = plan_point(a, sys, u, W, &cfg, v, &t);
  if (st != PL_OK) {
    snprintf(out->why, sizeof out->why, "plan: no prediction (%s)",
             pl_last_error());
    pl_clear_error();
    free(v);
    return;
  }
  out->have = true;
  const int Wv = cfg.lc.W_v > cfg.W ? cfg.lc.W_v : cfg.W;
  pl_plan_time run;
  double comm_s = 0;
  if (Wv > cfg.W && pl_plan_proxy_comm(&u->m, &cfg, &a->mc, proj_gpn(Wv),
                                       &comm_s, &run) == PL_OK) {
    out->have_proj = true;
    out->comm_ms = comm_s * 1e3;
    out->proj_run_ms = run.step_s * 1e3;
    out->proj_gpn = proj_gpn(Wv);
    /* the network's reach: the same run on a slower and a faster one */
    double *lh[2] = {&out->comm_lo_ms, &out->comm_hi_ms};
    for (int k = 0; k < 2; k++) {
      pl_plan_machine x = a->mc;
      x.ib_gbs *= k ? 1 + PL_PLAN_LINK_FRAC : 1 - PL_PLAN_LINK_FRAC;
      double cs;
      *lh[k] =
          pl_plan_proxy_comm(&u->m, &cfg, &x, proj_gpn(Wv), &cs, NULL) == PL_OK
              ? cs * 1e3
              : NAN;
    }
  }
  pl_clear_error();
  out->fits = v->fits;
  out->dev_peak = v->mem.dev_peak;
  out->host = v->mem.host_pinned;
  out->time_ms = t.step_s * 1e3;
  snprintf(out->binding, sizeof out->binding, "%s", v->binding);
  char p1[32], p2[32];
  if (v->fits)
    snprintf(out->why, sizeof out->why,
             "plan: fits (device peak %s at %s; %s usable; step %.4g s "
             "predicted)",
             hb(p1, sizeof p1, (double)v->mem.dev_peak), v->mem.peak_phase,
             hb(p2, sizeof p2, pl_plan_hbm_usable(&a->mc)), t.step_s);
  else
    snprintf(out->why, sizeof out->why,
             "plan: does not fit, binding term %s: %s; step %.4g s predicted",
             v->binding, v->why, t.step_s);
  free(v);
}

pl_status pl__train_plan_point(pl_bench_ctx *c, const pl__train_args *a,
                               const pl_train_system *sys,
                               const pl_train_setup *u, pl_row *row,
                               pl__train_pred *pr) {
  pl__train_predict(a, sys, u, c->size, pr);
  if (pr->have) {
    pl_row_i64(row, "pred_dev_peak_bytes", (int64_t)pr->dev_peak);
    pl_row_i64(row, "pred_host_bytes", (int64_t)pr->host);
    pl_row_f64(row, "pred_time_ms", pr->time_ms);
  }
  if (pr->have && !pr->fits && !a->verify)
    return pl_set_error(PL_EINFEASIBLE,
                        "%s%s%s (not launched; --verify runs "
                        "it)",
                        u->fill, u->fill[0] ? "; " : "", pr->why);
  pl_row_note(row, "%s%s", pr->why,
              pr->have && !pr->fits ? " (run by --verify)" : "");
  return PL_OK;
}

pl_status pl__train_plan_fail(const pl__train_pred *pr, pl_status st) {
  if (st == PL_OK || !pr->have)
    return st;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", pl_last_error());
  return pl_set_error(st, "%s; %s", msg, pr->why);
}

pl_status pl__train_auto(const pl__train_args *a, const pl_args *args,
                         const pl_train_system *sys, pl_train_setup *u, int W) {
  pl_plan_cfg base;
  if (cfg_of(sys, u, W, &base) != PL_OK)
    return pl_error_prefix(PL_EINVAL, "--config auto: %s: ", sys->name);
  pl_plan_free fr;
  sys->plan_free(args, &fr);
  const int Wv = base.lc.W_v > base.W ? base.lc.W_v : base.W;
  pl_plan_machine mc = a->mc;
  if (Wv > W) { /* the W_v-rank run the proxy plays: groups real there */
    const int g = proj_gpn(Wv),
              here = mc.gpus_per_node > 0 ? mc.gpus_per_node : 1;
    mc.host_bytes = a->mc.host_bytes / here * g;
    mc.host_reserve = a->mc.host_reserve / here * g;
    /* each rank's share of the host's memory bandwidth, as the proxy has */
    mc.host_dram_gbs = a->mc.host_dram_gbs / here * g;
    mc.gpus_per_node = g;
    /* the search takes only expert groups the W ranks present play */
    base.W = Wv, base.lc.W_v = Wv, base.present = W;
  }
  if (a->step_tokens > 0) /* micro·N·W_v in the planner's W: micro·N·W */
    base.tokens_step = a->step_tokens / (Wv / base.W);
  pl_plan_search *s = calloc(1, sizeof *s);
  if (!s)
    return pl_set_error(PL_ENOMEM, "train: host");
  if (pl_plan_auto(&u->m, &base, &fr, &mc, s) != PL_OK) {
    free(s);
    return pl_error_prefix(
        PL_EINVAL, "--config auto: %s at S=%lld: ", sys->name, (long long)u->S);
  }
  char cfg[200], run[48] = "";
  pl_plan_cfg_str(&s->best.cfg, cfg, sizeof cfg);
  if (Wv > W)
    snprintf(run, sizeof run, " for the %d-GPU run, nodes of %d", Wv,
             mc.gpus_per_node);
  snprintf(u->fill, sizeof u->fill, "%s", s->best.fill);
  if (s->have_best) {
    sys->plan_apply(&s->best.cfg, u);
    const int n = snprintf(u->chosen, sizeof u->chosen,
                           "--config auto%s: %.120s (%d tried, %d fit, %d "
                           "skipped; %.0f tok/s/GPU predicted)",
                           run, cfg, s->tried, s->feasible, s->skipped,
                           s->best.time.tok_s_gpu);
    if (n < 0 || (size_t)n >= sizeof u->chosen) /* a note cut, not lost */
      u->chosen[sizeof u->chosen - 1] = '\0';
  } else { /* the closest: its row is the infeasible one, binding named */
    sys->plan_apply(&s->best.cfg, u);
    snprintf(u->chosen, sizeof u->chosen,
             "--config auto: none of %d fits; the closest: %.180s", s->tried,
             cfg);
  }
  u->kind = "auto";
  free(s);
  return PL_OK;
}

pl_status pl__train_fill(const pl__train_args *a, const pl_train_system *sys,
                         pl_train_setup *u, int W) {
  pl_plan_cfg c;
  if (cfg_of(sys, u, W, &c) != PL_OK ||
      pl_plan_fill(&u->m, &a->mc, u->resident_auto, u->keep_auto, &c, u->fill,
                   sizeof u->fill) != PL_OK)
    return pl_error_prefix(
        PL_EINVAL, "--optim-resident/--keep auto: %s at S=%lld: ", sys->name,
        (long long)u->S);
  u->sc.oo.resident_all = c.sc.oo.resident_all;
  u->sc.oo.resident_bytes = c.sc.oo.resident_bytes;
  u->sc.keep = c.sc.keep;
  return PL_OK;
}

void pl__train_plan_describe(const pl__train_args *a,
                             const pl_train_system *sys,
                             const pl_train_setup *u, int W, FILE *f) {
  pl_plan_cfg cfg;
  pl_plan_verdict *v = malloc(sizeof *v);
  pl_plan_time t;
  memset(&t, 0, sizeof t);
  pl_status st = plan_point(a, sys, u, W, &cfg, v, &t);
  if (st != PL_OK) {
    fprintf(f, "# plan: no prediction: %s\n", pl_last_error());
    pl_clear_error();
  } else {
    fprintf(f, "# the planner's budget of this rank (engine/plan; %s)\n",
            sys->describe ? "beside the description above"
                          : "the baseline has no pl_train_describe");
    pl_plan_print_budget(f, &u->m, &cfg, &a->mc, v, &t);
  }
  free(v);
}
