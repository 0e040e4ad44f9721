/* fill.c — spending the headroom (pl_plan_fill): the HBM a configuration's
 * flattened peaks leave free turned into step time by plateau's exact
 * headroom knobs — kept activations (train/step.h keep: first every
 * layer's attention output and LSE, then whole attention halves) and
 * optimizer-state residency (train/optim.h: the fp32 master, m and v of the
 * last buckets in HBM).
 *
 * Each item's value is the time model's own: the step predicted with the
 * item taken whole against without it, per byte it adds.  Items are taken
 * in the order of that density (whole attention halves never before every
 * layer's attention: the keep budget fills them in that order), each as far
 * as the measured device peak stays within the usable HBM less
 * fill_reserve — a bisection over its count (layers, buckets), since more
 * kept or resident bytes never lower the peak.  With the pipelined
 * dispatch the peak checked is also the adversarial routing's: the fill
 * never spends the room that keeps the dispatch bound whatever the router
 * does (a measured search measures the adversarial routing only where
 * the balanced peak fits).  Residency also lowers the
 * pinned host state (12 bytes per resident parameter): a configuration the
 * host alone refuses may fit once the fill has moved state to the device
 * (the caller checks the result). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/stream_adamw.h"
#include "plan/plan_internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* ---- the fill ----------------------------------------------------------- */

enum { IT_ATTN, IT_RES, IT_ALL, IT_N };

typedef struct item {
  int kind;
  int max;      /* units: layers, or buckets */
  double bytes; /* the whole item's device bytes */
  double saved; /* step seconds the whole item saves (time model) */
  double dens;  /* saved / bytes */
  int taken;    /* units taken */
  bool free;    /* the caller lets the fill choose it */
} item;

typedef struct fillctx {
  const pl_model_cfg *m;
  const pl_plan_machine *mc;
  pl__plan_memo *mm;
  pl_plan_cfg c; /* the configuration being filled */
  int64_t N;
  size_t theta, beta, nb, a, w; /* params; bucket; buckets; kept bytes */
  bool resident, keep;          /* the knobs the fill may set */
  /* what the least form leaves (has_room): under balanced routes, and
   * (has_worst) under adversarial ones where the dispatch bounds them */
  bool has_room, has_worst;
  pl__room room, room_w;
  size_t high_w[PL_PLAN_BINS + 1];
  bool chunks; /* the fill keeps the dispatch's bound */
} fillctx;

static double limit_of(const pl_plan_machine *mc) {
  return pl__hbm_usable(mc) - mc->fill_reserve;
}

/* c's budgets at (attention layers, whole layers, resident buckets); a
 * knob the fill may not set keeps its value. */
static void set_amounts(fillctx *f, pl_plan_cfg *c, int na, int nw, int nr) {
  const uint64_t kb = (uint64_t)na * f->a + (uint64_t)nw * (f->w - f->a);
  if (f->keep)
    c->sc.keep = (pl_keep_budget){PL_KEEP_BYTES, kb};
  if (!f->resident)
    return;
  c->sc.oo.resident_all = false;
  c->sc.oo.resident_bytes =
      nr <= 0 ? 0
      : (size_t)nr >= f->nb
          ? (uint64_t)f->theta * 12
          : (uint64_t)(f->theta - f->beta * (f->nb - (size_t)nr)) * 12;
}

/* Does c fit the device below the fill limit (*dev), and the host (*host)?
 * More kept or resident bytes never lower the device peak; residency lowers
 * the host's, so the fill bisects on the device alone. */
static pl_status fits(fillctx *f, const pl_plan_cfg *c, bool *dev, bool *host,
                      double *peak_out) {
  pl_plan_mem *mem = malloc(sizeof *mem);
  if (!mem)
    return pl_set_error(PL_ENOMEM, "plan: host");
  /* a chunking dispatch bounds its peak whatever the router does: the fill
   * keeps that promise, so the adversarial routing's peak must fit too (the
   * others, ep and llep, have no such bound to keep) */
  const bool worst = pl_moe_variant_desc_of(c->sc.dispatch)->chunks;
  /* measured: the adversarial routes only where the balanced peak fits */
  const bool first = worst;
  pl_status st = pl__plan_mem_eval(f->mm, f->m, c, f->mc, worst && !first, mem);
  if (st == PL_OK && first && (double)mem->dev_peak <= limit_of(f->mc))
    st = pl__plan_mem_eval(f->mm, f->m, c, f->mc, true, mem);
  const size_t peak =
      worst && mem->dev_worst > mem->dev_peak ? mem->dev_worst : mem->dev_peak;
  *dev = st == PL_OK && (double)peak <= limit_of(f->mc);
  if (peak_out)
    *peak_out = (double)peak;
  if (host)
    *host = st == PL_OK && (double)mem->host_node <= pl__host_usable(f->mc);
  free(mem);
  return st;
}

static pl_status step_s(fillctx *f, int na, int nw, int nr, double *out) {
  pl_plan_cfg c = f->c;
  set_amounts(f, &c, na, nw, nr);
  pl_plan_time t;
  PL_TRY(pl_plan_time_predict(f->m, &c, f->mc, &t));
  *out = t.step_s;
  return PL_OK;
}

/* The items and their densities by the time model. */
static pl_status items_of(fillctx *f, item *it) {
  const int L = f->m->L;
  double t0, ta, tw, tr;
  PL_TRY(step_s(f, 0, 0, 0, &t0));
  PL_TRY(step_s(f, L, 0, 0, &ta));
  PL_TRY(step_s(f, L, L, 0, &tw));
  PL_TRY(step_s(f, 0, 0, (int)f->nb, &tr));
  it[IT_ATTN] = (item){IT_ATTN, L, (double)L * f->a, t0 - ta, 0, 0, false};
  it[IT_ALL] =
      (item){IT_ALL, L, (double)L * (f->w - f->a), ta - tw, 0, 0, false};
  it[IT_RES] =
      (item){IT_RES, (int)f->nb, 12.0 * f->theta, t0 - tr, 0, 0, false};
  for (int i = 0; i < IT_N; i++)
    it[i].dens = it[i].bytes > 0 ? it[i].saved / it[i].bytes : 0;
  return PL_OK;
}

/* Device bytes of the optimizer state that n resident buckets add: their
 * 12 B per parameter, less the staging slots the streamed buckets no longer
 * need (min(s, streamed buckets) slots of min(β, streamed) parameters). */
static double resident_delta(const fillctx *f, int n) {
  const size_t s = (size_t)(f->c.sc.oo.slots ? f->c.sc.oo.slots : 2);
  double add = 0, stage[2];
  for (int i = 0; i < 2; i++) {
    const size_t k = i ? (size_t)n : 0;
    const size_t el = k == 0       ? 0
                      : k >= f->nb ? f->theta
                                   : f->theta - f->beta * (f->nb - k);
    const size_t str = f->theta - el, nbs = f->nb - k;
    stage[i] = 12.0 * (double)(s < nbs ? s : nbs) *
               (double)(f->beta < str ? f->beta : str);
    if (i)
      add = 12.0 * (double)el;
  }
  return add - (stage[0] - stage[1]);
}

/* Does item k at `units` fit beside what is taken already? */
static pl_status fits_at(fillctx *f, const item *it, int k, int units, bool *ok,
                         double *peak) {
  int am[IT_N] = {it[IT_ATTN].taken, it[IT_RES].taken, it[IT_ALL].taken};
  am[k] = units;
  pl_plan_cfg c = f->c;
  set_amounts(f, &c, am[IT_ATTN], am[IT_ALL], am[IT_RES]);
  if (f->has_room) { /* the least the form can need, before measuring it */
    /* its resident bytes less the staging they save, exactly (the room
     * takes off the most they can save); a fixed amount is in the least
     * form already */
    const double r = f->resident ? resident_delta(f, am[IT_RES]) + f->room.stage
                                 : 0,
                 need = fmax(
                     pl__plan_room_need(&f->room, am[IT_ATTN], am[IT_ALL], r),
                     f->has_worst ? pl__plan_room_need(&f->room_w, am[IT_ATTN],
                                                       am[IT_ALL], r)
                                  : 0);
    if (need > limit_of(f->mc)) {
      *ok = false, *peak = need;
      return PL_OK;
    }
    /* and the most: the least form's peak with every kept and resident
     * byte added (none saved) */
    const double add = (f->keep ? (double)c.sc.keep.bytes : 0) +
                       (f->resident ? (double)c.sc.oo.resident_bytes : 0),
                 most = fmax(f->room.peak, f->has_worst ? f->room_w.peak : 0) +
                        add;
    if ((f->has_worst || !f->chunks) && most <= limit_of(f->mc)) {
      *ok = true, *peak = most;
      return PL_OK;
    }
  }
  return fits(f, &c, ok, NULL, peak);
}

/* The count where the line through (ua, pa) and (ub, pb) meets the limit,
 * kept inside (lo, hi]; the midpoint when the line does not rise. */
static int secant(double limit, int ua, double pa, int ub, double pb, int lo,
                  int hi) {
  const double slope = ua != ub ? (pb - pa) / (double)(ub - ua) : 0;
  if (!(slope > 0))
    return (lo + hi + 1) / 2;
  const double g = ub + floor((limit - pb) / slope);
  return g <= lo ? lo + 1 : g >= hi ? hi : (int)g;
}

/* The most units of item k that fit beside what is taken already (more
 * never lower the peak: the largest count that fits, 0 when none does).
 * The peak is close to linear in the count (a kept layer or a resident
 * bucket adds its bytes to the phase that binds), so the count tried is
 * where the line through the last two counts measured meets the limit —
 * the first from the room left (residency: its exact state bytes; kept
 * activations: a layer's kept bytes) — and the search ends when a count
 * fits and the next does not: two measurements where the peak is linear; a
 * step that does not halve what is open is followed by a bisection's. */
static pl_status bisect(fillctx *f, item *it, int k) {
  const double limit = limit_of(f->mc);
  double pa = 0, pb = 0;
  bool ok = false;
  PL_TRY(fits_at(f, it, k, it[k].taken, &ok, &pa));
  if (!ok) /* what is taken already does not fit: more cannot */
    return PL_OK;
  const double room = limit - pa;
  int guess = 0;
  if (room > 0 && k == IT_RES)
    while (guess < it[k].max && resident_delta(f, guess + 1) <= room)
      guess++;
  else if (room > 0)
    guess = (int)fmin(it[k].max, floor(room / (it[k].bytes / it[k].max)));
  int lo = 0, hi = it[k].max; /* lo fits (or is 0), hi + 1 does not */
  int ua = it[k].taken, u = guess > lo ? guess : lo + 1;
  bool slow = false;
  while (lo < hi) {
    const int open = hi - lo;
    PL_TRY(fits_at(f, it, k, u, &ok, &pb));
    if (ok)
      lo = u;
    else
      hi = u - 1;
    const bool halved = 2 * (hi - lo) <= open;
    const int next = slow && !halved ? (lo + hi + 1) / 2
                                     : secant(limit, ua, pa, u, pb, lo, hi);
    slow = !halved;
    ua = u, pa = pb, u = next;
  }
  it[k].taken = lo;
  return PL_OK;
}

static const char *const what[IT_N] = {
    "every layer's attention output + LSE (no attention forward in the "
    "backward)",
    "the optimizer's fp32 master, m, v in HBM (no host round trip)",
    "whole attention halves (no QKV/O recompute)"};
static const char *const unit[IT_N] = {"layers", "buckets", "layers"};

/* bytes by magnitude */
static const char *hb(double v, char *buf, size_t n) {
  if (v >= GIB)
    snprintf(buf, n, "%.1f GiB", v / GIB);
  else if (v >= 1048576.0)
    snprintf(buf, n, "%.1f MiB", v / 1048576.0);
  else
    snprintf(buf, n, "%.1f KiB", v / 1024.0);
  return buf;
}

/* One line per item: taken (bytes, ms saved per GiB) or why not. */
static void describe(const fillctx *f, const item *it, const int *order,
                     double left, char *why, size_t n) {
  char b1[24], b2[24];
  size_t k = (size_t)snprintf(
      why, n, "headroom fill below %s:", hb(limit_of(f->mc), b1, sizeof b1));
  for (int j = 0; j < IT_N && k < n; j++) {
    const item *x = &it[order[j]];
    const double per = x->dens * GIB * 1e3; /* ms per GiB */
    if (!x->free)
      continue;
    const double bytes =
        x->kind != IT_RES ? x->bytes * x->taken / x->max
        : x->taken >= x->max
            ? 12.0 * f->theta
            : 12.0 * (f->theta - f->beta * (f->nb - (size_t)x->taken));
    if (x->taken > 0)
      k += (size_t)snprintf(why + k, n - k,
                            " kept %d/%d %s of %s (%s, "
                            "%.0f ms/GiB);",
                            x->taken, x->max, unit[x->kind], what[x->kind],
                            hb(bytes, b2, sizeof b2), per);
    else
      k += (size_t)snprintf(why + k, n - k, " not %s (%.0f ms/GiB: %s);",
                            what[x->kind], per,
                            x->saved <= 0 ? "saves no time" : "no room");
  }
  if (k < n && left >= 0)
    snprintf(why + k, n - k, " %s left", hb(left, b1, sizeof b1));
  else if (k < n)
    snprintf(why + k, n - k, " the peak is already %s above the limit",
             hb(-left, b1, sizeof b1));
}

/* The rooms the least form (c with nothing kept or resident) leaves:
 * under adversarial routes too where the fill must keep the dispatch's
 * bound and the balanced form fits (as fits() measures them). */
static pl_status rooms_of(fillctx *f, const pl_plan_mem *least) {
  const pl_plan_free fr = {.resident = f->resident, .keep = f->keep};
  pl__plan_room_of(f->m, &fr, &f->c, least, false, &f->room);
  f->has_room = true;
  f->chunks = pl_moe_variant_desc_of(f->c.sc.dispatch)->chunks;
  if (!f->chunks || (double)least->dev_peak > limit_of(f->mc))
    return PL_OK;
  pl_plan_mem *w = malloc(sizeof *w);
  if (!w)
    return pl_set_error(PL_ENOMEM, "plan: host");
  const pl_status st = pl__plan_mem_eval(f->mm, f->m, &f->c, f->mc, true, w);
  if (st == PL_OK) {
    memcpy(f->high_w, w->layer_high_worst, sizeof f->high_w);
    f->room_w = f->room;
    f->room_w.peak = (double)w->dev_worst;
    f->room_w.high = f->high_w;
    f->has_worst = true;
  }
  free(w);
  return st;
}

pl_status pl_plan_fill(const pl_model_cfg *m, const pl_plan_machine *mc,
                       bool resident, bool keep, pl_plan_cfg *c, char *why,
                       size_t n) {
  return pl__plan_fill_memo(NULL, m, mc, resident, keep, NULL, c, why, n);
}

pl_status pl__plan_fill_memo(pl__plan_memo *mm, const pl_model_cfg *m,
                             const pl_plan_machine *mc, bool resident,
                             bool keep, const pl_plan_mem *least,
                             pl_plan_cfg *c, char *why, size_t n) {
  if (why && n)
    why[0] = '\0';
  if (c->system != PL_PLAN_PLATEAU || (!resident && !keep))
    return PL_OK;
  fillctx f = {.m = m, .mc = mc, .mm = mm, .c = *c, .keep = keep};
  pl_plan_mem *mem = malloc(sizeof *mem);
  if (!mem)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_status st = pl__plan_mem_eval(mm, m, c, mc, false, mem);
  f.N = mem->N;
  f.theta = (size_t)mem->params_rank;
  free(mem);
  PL_TRY(st);
  const pl_optim_ops *o = c->sc.optim ? c->sc.optim : &pl_optim_stream;
  if (!o->resident_state)
    resident = false; /* the CPU update needs its state on the host */
  f.resident = resident;
  if (least)
    PL_TRY(rooms_of(&f, least));
  f.beta = c->sc.oo.bucket ? c->sc.oo.bucket : 100000000;
  f.nb = (f.theta + f.beta - 1) / f.beta;
  pl_step_kept_layer(m, f.N, c->lc.D, c->sc.dt, &f.a, &f.w);
  item it[IT_N];
  PL_TRY(items_of(&f, it));
  it[IT_ATTN].free = it[IT_ALL].free = keep;
  it[IT_RES].free = resident;
  /* the order: by density, whole halves never before the attention */
  int order[IT_N] = {IT_ATTN, IT_RES, IT_ALL};
  if (it[IT_RES].dens > it[IT_ATTN].dens)
    order[0] = IT_RES, order[1] = IT_ATTN;
  else if (it[IT_ALL].dens > it[IT_RES].dens)
    order[1] = IT_ALL, order[2] = IT_RES;
  for (int j = 0; j < IT_N; j++) {
    item *x = &it[order[j]];
    if (!x->free || x->saved <= 0 || x->max <= 0)
      continue;
    if (x->kind == IT_ALL && it[IT_ATTN].taken < m->L)
      continue; /* the keep budget fills whole halves after every layer's
                   attention */
    PL_TRY(bisect(&f, it, x->kind));
  }
  set_amounts(&f, c, it[IT_ATTN].taken, it[IT_ALL].taken, it[IT_RES].taken);
  if (why && n) {
    pl_plan_mem *pm = malloc(sizeof *pm);
    if (!pm)
      return pl_set_error(PL_ENOMEM, "plan: host");
    PL_TRY_GOTO(st, done, pl__plan_mem_eval(mm, m, c, mc, false, pm));
    describe(&f, it, order, limit_of(mc) - (double)pm->dev_peak, why, n);
  done:
    free(pm);
  }
  return st;
}
