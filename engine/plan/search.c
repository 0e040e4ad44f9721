/* search.c — feasibility (pl_plan_check: the suite's call before launching
 * a point),
 * the automatic choice (pl_plan_auto: the feasible configuration of the
 * highest predicted tok/s/GPU, and the runner-up) and the largest tokens per
 * rank that fit (pl_plan_max_tokens). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* ---- feasibility -------------------------------------------------------- */

static void name_binding(const pl_plan_mem *mem, char *binding, size_t n) {
  int best = 0;
  for (int i = 1; i < PL_TERM_COUNT; i++)
    if (mem->term[i] > mem->term[best])
      best = i;
  snprintf(binding, n, "%s", pl_plan_term_name(best));
}

/* bytes by magnitude (GiB, MiB, KiB) for the verdict's line */
static const char *gib(char *buf, size_t n, double v) {
  if (v >= GIB)
    snprintf(buf, n, "%.2f GiB", v / GIB);
  else if (v >= 1024 * 1024)
    snprintf(buf, n, "%.2f MiB", v / (1024 * 1024));
  else
    snprintf(buf, n, "%.1f KiB", v / 1024);
  return buf;
}

static void verdict_of(const pl_plan_machine *mc, pl_plan_verdict *v) {
  const pl_plan_mem *mem = &v->mem;
  const double dev = pl__hbm_usable(mc), host = pl__host_usable(mc);
  const bool fd = (double)mem->dev_peak <= dev,
             fh = (double)mem->host_node <= host;
  v->fits = fd && fh;
  v->fits_worst = fd && (double)mem->dev_worst <= dev;
  v->binding[0] = v->why[0] = 0;
  if (!fd) {
    name_binding(mem, v->binding, sizeof v->binding);
    int bt = 0;
    for (int i = 1; i < PL_TERM_COUNT; i++)
      if (mem->term[i] > mem->term[bt])
        bt = i;
    v->need = mem->dev_peak, v->have = (size_t)dev;
    char a[24], b[24], c[24];
    snprintf(v->why, sizeof v->why,
             "device peak %s > %s usable (at %s); largest term %s %s",
             gib(a, sizeof a, (double)mem->dev_peak), gib(b, sizeof b, dev),
             mem->peak_phase, v->binding,
             gib(c, sizeof c, (double)mem->term[bt]));
  } else if (!fh) {
    const bool opt = mem->host_optim >= mem->host_sco;
    snprintf(v->binding, sizeof v->binding, "host: %s",
             opt ? "optimizer state" : "sco boundaries");
    v->need = mem->host_node, v->have = (size_t)host;
    char a[24], b[24], c[24], d[24], e[24];
    snprintf(v->why, sizeof v->why,
             "host per node %s > %s usable: %d ranks x (optimizer %s + SCO "
             "%s + other %s)",
             gib(a, sizeof a, (double)mem->host_node), gib(b, sizeof b, host),
             (int)(mem->host_rank ? mem->host_node / mem->host_rank : 0),
             gib(c, sizeof c, (double)mem->host_optim),
             gib(d, sizeof d, (double)mem->host_sco),
             gib(e, sizeof e,
                 (double)(mem->host_rank - mem->host_optim - mem->host_sco)));
  }
}

pl_status pl_plan_check(const pl_model_cfg *m, const pl_plan_cfg *c,
                        const pl_plan_machine *mc, pl_plan_verdict *v) {
  memset(v, 0, sizeof *v);
  PL_TRY(pl__plan_mem_eval(NULL, m, c, mc, true, &v->mem));
  verdict_of(mc, v);
  return PL_OK;
}

/* ---- the search ---------------------------------------------------------- */

typedef struct cand {
  pl_plan_cfg cfg;
  pl_plan_mem mem;
  pl_plan_time time;
  char fill[480]; /* pl_plan_fill's account ("" without) */
  bool fits;
  char binding[40];
  double over; /* need / have of the binding resource (closest to fit) */
} cand;

/* memory (without the worst case) and fit; time only when it fits */
static pl_status eval(const pl_model_cfg *m, const pl_plan_machine *mc,
                      pl__plan_memo *mm, cand *x, bool with_time) {
  pl_plan_verdict *v = malloc(sizeof *v);
  if (!v)
    return pl_set_error(PL_ENOMEM, "plan: host");
  memset(v, 0, sizeof *v);
  pl_status st = pl__plan_mem_eval(mm, m, &x->cfg, mc, false, &v->mem);
  if (st == PL_OK) {
    v->mem.dev_worst = v->mem.dev_peak;
    verdict_of(mc, v);
    x->mem = v->mem;
    x->fits = v->fits;
    snprintf(x->binding, sizeof x->binding, "%s", v->binding);
    x->over = v->have ? (double)v->need / (double)v->have : 0;
  }
  free(v);
  if (st == PL_OK && x->fits && with_time)
    st = pl_plan_time_predict(m, &x->cfg, mc, &x->time);
  return st;
}

typedef struct ranking {
  int tried, feasible, skipped;
  cand best, second;
  bool have_best, have_second;
  cand closest; /* infeasible, smallest over */
  bool have_closest;
  pl__plan_memo *mm; /* the memory evaluations of this search */
} ranking;

/* Two candidates of one kind differ only in knobs that barely move the time
 * (P, β, s): the runner-up is the best of another kind. */
static bool same_kind(const cand *a, const cand *b) {
  const pl_plan_cfg *x = &a->cfg, *y = &b->cfg;
  if (x->system == PL_PLAN_FSDP2)
    return x->cp == y->cp && x->ep == y->ep && x->ac == y->ac &&
           x->offload == y->offload;
  return x->lc.D == y->lc.D && x->lc.Ep == y->lc.Ep && a->mem.K == b->mem.K &&
         x->sc.optim == y->sc.optim && a->mem.sco_layers == b->mem.sco_layers;
}

/* better: faster by more than 0.1%, or as fast with the lower peak */
static bool better(const cand *a, const cand *b) {
  const double va = a->time.tok_s_gpu, vb = b->time.tok_s_gpu;
  if (va > vb * 1.001)
    return true;
  if (vb > va * 1.001)
    return false;
  const double pa = (double)a->mem.dev_peak, pb = (double)b->mem.dev_peak;
  if (fabs(pa - pb) > 0.001 * pb)
    return pa < pb;
  return va > vb;
}

static void rank_in(ranking *r, const cand *x) {
  r->tried++;
  if (!x->fits) {
    if (!r->have_closest || x->over < r->closest.over)
      r->closest = *x, r->have_closest = true;
    return;
  }
  r->feasible++;
  if (!r->have_best || better(x, &r->best)) {
    if (r->have_best && !same_kind(&r->best, x) &&
        (!r->have_second || better(&r->best, &r->second)))
      r->second = r->best, r->have_second = true;
    if (r->have_second && same_kind(&r->second, x))
      r->have_second = false; /* the runner-up must be of another kind */
    r->best = *x, r->have_best = true;
  } else if (!same_kind(&r->best, x) &&
             (!r->have_second || better(x, &r->second))) {
    r->second = *x, r->have_second = true;
  }
}

/* Can a candidate whose every ranked form (its SCO budget and headroom
 * filled or not) makes at most u tok/s/GPU change the ranking?
 * Not when a best and a runner-up are held and it is slower than both by
 * more than better()'s 0.1%: better() is false against each, so rank_in
 * would only count it (and an infeasible one only matters as the closest
 * while nothing fits).  Its memory is then not evaluated: it is counted as
 * tried, not as feasible. */
static bool pruned(ranking *r, double u) {
  if (!r->have_best || !r->have_second)
    return false;
  if (!(u * 1.001 < r->best.time.tok_s_gpu &&
        u * 1.001 < r->second.time.tok_s_gpu))
    return false;
  r->tried++;
  r->skipped++;
  return true;
}

/* Are the headroom knobs the search frees at their least in c (nothing
 * kept, nothing resident: the form pl__plan_room_bound reads)? */
static bool least_knobs(const pl_plan_cfg *c, const pl_plan_free *fr) {
  return (!fr->keep ||
          (c->sc.keep.mode == PL_KEEP_BYTES && c->sc.keep.bytes == 0)) &&
         (!fr->resident ||
          (!c->sc.oo.resident_all && c->sc.oo.resident_bytes == 0));
}

/* Rank x; one that fits has its headroom filled first when the fill is
 * free (fr->resident, fr->keep), and is evaluated again. */
static pl_status rank_filled(const pl_model_cfg *m, const pl_plan_machine *mc,
                             cand *x, const pl_plan_free *fr, ranking *r) {
  if (x->fits && (fr->resident || fr->keep) && r->have_best && r->have_second &&
      least_knobs(&x->cfg, fr)) {
    /* one slower than the best and the runner-up however it fills the
     * room its form leaves changes nothing ranked as it is */
    double u = 0;
    PL_TRY(pl__plan_room_bound(m, fr, mc, &x->cfg, &x->mem, false, &u));
    if (u * 1.001 < r->best.time.tok_s_gpu &&
        u * 1.001 < r->second.time.tok_s_gpu) {
      rank_in(r, x);
      return PL_OK;
    }
  }
  if (x->fits && (fr->resident || fr->keep) && r->have_best) {
    /* one that could not win even with every knob at its most (memory
     * aside) is ranked as it is: the fill's measurements are the search's cost
     */
    pl_plan_cfg y = x->cfg;
    if (fr->resident)
      y.sc.oo.resident_all = true;
    if (fr->keep)
      y.sc.keep = (pl_keep_budget){PL_KEEP_ALL, 0};
    pl_plan_time t;
    PL_TRY(pl_plan_time_predict(m, &y, mc, &t));
    if (t.tok_s_gpu <= r->best.time.tok_s_gpu) {
      rank_in(r, x);
      return PL_OK;
    }
  }
  if (x->fits && (fr->resident || fr->keep)) {
    PL_TRY(pl__plan_fill_memo(r->mm, m, mc, fr->resident, fr->keep,
                              least_knobs(&x->cfg, fr) ? &x->mem : NULL,
                              &x->cfg, x->fill, sizeof x->fill));
    PL_TRY(eval(m, mc, r->mm, x, true));
  }
  rank_in(r, x);
  return PL_OK;
}

/* plateau: the smallest SCO count at which the device fits (the count the
 * host allows at most); budget 0 first.  With the headroom fill free, also
 * every boundary offloaded (the device bytes it frees go to the fill). */
static pl_status sco_search(const pl_model_cfg *m, const pl_plan_machine *mc,
                            cand *x, const pl_plan_free *fr, ranking *r) {
  if (!fr->sco) {
    PL_TRY(eval(m, mc, r->mm, x, true));
    return rank_filled(m, mc, x, fr, r);
  }
  const int64_t N = pl_plan_tokens_per_rank(&x->cfg);
  const uint64_t nhb =
      (uint64_t)N * (uint64_t)m->H * pl_dtype_size(x->cfg.sc.dt);
  x->cfg.sc.sco = (pl_sco_budget){false, 0};
  cand y = *x;
  /* the room the form with every boundary offloaded leaves (measured first
   * by room_pruned) settles the counts it shows fit or not */
  pl__room room;
  pl_plan_mem *least = malloc(sizeof *least);
  if (!least)
    return pl_set_error(PL_ENOMEM, "plan: host");
  pl_plan_cfg lc = x->cfg;
  lc.sc.sco = (pl_sco_budget){true, 0};
  const bool roomy =
      least_knobs(&x->cfg, fr) && pl__plan_mem_known(r->mm, m, &lc, mc, least);
  if (roomy)
    pl__plan_room_of(m, fr, &lc, least, false, &room);
  const double lim = pl__hbm_usable(mc);
  double most = 0, need0 = 0;
  if (roomy)
    need0 = pl__plan_room_sco(&room, (double)nhb, 0, &most);
  pl_status st = roomy && need0 > lim ? PL_OK : eval(m, mc, r->mm, x, true);
  if (st != PL_OK || (!(roomy && need0 > lim) &&
                      (x->fits || strncmp(x->binding, "host", 4) == 0))) {
    free(least);
    PL_TRY(st);
    PL_TRY(rank_filled(m, mc, x, fr, r));
    if (!x->fits || !(fr->resident || fr->keep))
      return PL_OK;
    y.cfg.sc.sco = (pl_sco_budget){true, 0};
    PL_TRY(eval(m, mc, r->mm, &y, true));
    return y.fits ? rank_filled(m, mc, &y, fr, r) : PL_OK;
  }
  /* the smallest count that fits the device: each boundary offloaded
   * takes its N·H·b off the peak, so the count tried is where the line
   * through the last two counts measured meets the usable HBM; a step that
   * does not halve what is open is followed by a bisection's */
  int bad = 0, good = m->L + 1, ua = 0, u = 0, found = -1;
  double pa = roomy && need0 > lim ? need0 : (double)x->mem.dev_peak,
         pb = pa - (double)nhb;
  bool slow = false;
  u = (int)fmin(m->L, fmax(1, ceil((pa - lim) / (double)nhb)));
  while (good - bad > 1) {
    const int open = good - bad;
    y.cfg.sc.sco = (pl_sco_budget){u == m->L, (uint64_t)u * nhb};
    const double need =
        roomy ? pl__plan_room_sco(&room, (double)nhb, u, &most) : 0;
    if (roomy && (need > lim || most <= lim))
      pb = need > lim ? need : most; /* settled by the room */
    else {
      st = eval(m, mc, r->mm, &y, false);
      if (st != PL_OK) {
        free(least);
        return st;
      }
      pb = (double)y.mem.dev_peak;
    }
    if (pb <= lim)
      good = u;
    else
      bad = u;
    if (good - bad <= 1)
      break;
    const double slope = (pb - pa) / (double)(u - ua);
    int next = (bad + good) / 2;
    if (!(slow && 2 * (good - bad) > open) && slope < 0) {
      const double g = u + ceil((lim - pb) / slope);
      next = g <= bad ? bad + 1 : g >= good ? good - 1 : (int)g;
    }
    slow = 2 * (good - bad) > open;
    ua = u, pa = pb, u = next;
  }
  free(least);
  if (good <= m->L)
    found = good;
  y.cfg.sc.sco = found < 0
                     ? (pl_sco_budget){true, 0}
                     : (pl_sco_budget){found == m->L, (uint64_t)found * nhb};
  PL_TRY(eval(m, mc, r->mm, &y, true));
  PL_TRY(rank_filled(m, mc, &y, fr, r));
  if (found < 0 || found == m->L || !(fr->resident || fr->keep))
    return PL_OK;
  y = *x; /* every boundary offloaded: the device bytes go to the fill */
  y.cfg.sc.sco = (pl_sco_budget){true, 0};
  PL_TRY(eval(m, mc, r->mm, &y, true));
  return y.fits ? rank_filled(m, mc, &y, fr, r) : PL_OK;
}

/* The candidates of one search, evaluated fastest bound first: once a best
 * and a runner-up are held, every candidate whose bound (pl__plan_time_bound)
 * is slower than both by more than better()'s 0.1% is counted as tried and
 * left unevaluated (pruned()), and in this order that is every one after
 * the first such. */
static int q_cmp(const void *pa, const void *pb) {
  const pl__qent *a = pa, *b = pb;
  if (a->u != b->u)
    return a->u > b->u ? -1 : 1;
  return a->seq - b->seq;
}

/* Does a floor lb of candidate c's least form (pl__plan_room_floor) settle
 * it as its measurement would?  Where lb does not fit the device neither
 * does the form: pruned as the form would be, or, where the form itself
 * would be ranked as the closest (ranks_least), counted as tried when it
 * cannot be closer than the closest held (its need is at least lb's) or
 * the search wants the first fit only (no closest kept).
 * Where lb fits, more room than the form leaves bounds c from above. */
static pl_status floor_prunes(const pl_model_cfg *m, const pl_plan_free *fr,
                              const pl_plan_machine *mc, ranking *r,
                              const pl_plan_cfg *c, const pl_plan_mem *lb,
                              bool ranks_least, bool *gone) {
  const double usable = pl__hbm_usable(mc);
  if ((double)lb->dev_peak > usable) {
    *gone = pruned(r, 0);
    if (!*gone &&
        (fr->first_fit ||
         (ranks_least && r->have_closest &&
          (double)lb->dev_peak / (double)(size_t)usable >= r->closest.over))) {
      r->tried++;
      *gone = true;
    }
    return PL_OK;
  }
  double u = 0;
  PL_TRY(pl__plan_room_bound(m, fr, mc, c, lb, fr->sco, &u));
  *gone = pruned(r, u);
  return PL_OK;
}

/* plateau: can candidate c change the ranking once its least form is
 * measured (every boundary offloaded where SCO is free, nothing kept, no
 * optimizer state resident where those are free)?  Not when that form
 * does not fit the device (no form does), nor when its bound within the
 * room that form leaves (pl__plan_room_bound) is slower than the best and the
 * runner-up: counted as tried (pruned()). */
static pl_status room_pruned(const pl_model_cfg *m, const pl_plan_free *fr,
                             const pl_plan_machine *mc, ranking *r,
                             const pl_plan_cfg *c, bool *gone) {
  *gone = false;
  cand y;
  memset(&y, 0, sizeof y);
  y.cfg = *c;
  if (fr->sco)
    y.cfg.sc.sco = (pl_sco_budget){true, 0};
  if (fr->keep)
    y.cfg.sc.keep = (pl_keep_budget){PL_KEEP_BYTES, 0};
  if (fr->resident)
    y.cfg.sc.oo.resident_all = false, y.cfg.sc.oo.resident_bytes = 0;
  pl_plan_cfg last = *c; /* the form sco_search would rank */
  if (fr->sco)
    last.sc.sco = (pl_sco_budget){true, 0};
  const bool ranks_least = !memcmp(&last, &y.cfg, sizeof last);
  /* the floor its siblings give first: the ones measured, then the least */
  for (int k = 0; k < 2 && (fr->c || fr->beta); k++) {
    bool have = false;
    PL_TRY(
        pl__plan_room_floor(r->mm, m, mc, fr, &y.cfg, k == 1, &have, &y.mem));
    if (have)
      PL_TRY(floor_prunes(m, fr, mc, r, c, &y.mem, ranks_least, gone));
    if (*gone)
      return PL_OK;
  }
  pl_status st = eval(m, mc, r->mm, &y, false);
  if (st != PL_OK) /* refused: rank_queue says so as before */
    return pl__plan_left_out(st) ? PL_OK : st;
  if ((double)y.mem.dev_peak > pl__hbm_usable(mc)) { /* no form fits */
    *gone = pruned(r, 0);
    if (!*gone && fr->first_fit) /* counted as tried, as floor_prunes does */
      r->tried++, *gone = true;
    if (!*gone && ranks_least) {
      rank_in(r, &y); /* the closest it can be, as sco_search ranks it */
      *gone = true;
    }
    return PL_OK;
  }
  double u = 0;
  PL_TRY(pl__plan_room_bound(m, fr, mc, c, &y.mem, fr->sco, &u));
  *gone = pruned(r, u);
  return PL_OK;
}

/* FSDP2: a sibling of candidate c with lighter activation checkpointing
 * (full below selective below none) or its optimizer state offloaded peaks
 * no higher on the device (test_plan_room.c fsdp2_floor_holds).  A
 * candidate that cannot fit, once a best is held, where it cannot be
 * closer than the closest held, or in a first-fit search (which keeps no
 * closest), is only counted as tried (rank_in): one
 * whose siblings the memo holds — or, failing those, the lightest one,
 * evaluated — show so is counted so, unevaluated. */
static pl_status fsdp2_floored(const pl_model_cfg *m, const pl_plan_free *fr,
                               const pl_plan_machine *mc, ranking *r,
                               const pl_plan_cfg *c, bool *gone) {
  *gone = false;
  if ((!r->have_best && !r->have_closest && !fr->first_fit) ||
      (!fr->ac && !fr->offload))
    return PL_OK;
  pl_plan_mem *mem = malloc(sizeof *mem);
  if (!mem)
    return pl_set_error(PL_ENOMEM, "plan: host");
  size_t lb = 0;
  pl_plan_cfg s = *c;
  for (int a = PL_PLAN_AC_FULL; a <= (int)c->ac; a++)
    for (int o = 1; o >= (c->offload ? 1 : 0); o--) {
      s.ac = (pl_plan_ac)a, s.offload = o == 1;
      if (memcmp(&s, c, sizeof s) &&
          pl__plan_mem_known(r->mm, m, &s, mc, mem) && mem->dev_peak > lb)
        lb = mem->dev_peak;
    }
  pl_status st = PL_OK;
  s.ac = fr->ac ? PL_PLAN_AC_FULL : c->ac;
  s.offload = fr->offload || c->offload;
  if (!lb && memcmp(&s, c, sizeof s)) {
    st = pl__plan_mem_eval(r->mm, m, &s, mc, false, mem);
    if (st == PL_OK)
      lb = mem->dev_peak;
    else if (pl__plan_left_out(st))
      st = PL_OK, pl_clear_error();
  }
  free(mem);
  const double usable = pl__hbm_usable(mc);
  if ((double)lb > usable &&
      (r->have_best || fr->first_fit ||
       (double)lb / (double)(size_t)usable >= r->closest.over)) {
    r->tried++; /* as rank_in counts it: it cannot be the closest either */
    *gone = true;
  }
  return st;
}

/* One candidate of a queue ranked: pruned by its bound, by the room its
 * least form leaves (plateau) or by its lighter siblings (FSDP2), else
 * searched (plateau's SCO count) and ranked; one refused by a knob of its
 * layout, or by the dry device for a baseline's configuration it does not
 * run, is left out. */
static pl_status rank_one(const pl_model_cfg *m, const pl_plan_free *fr,
                          const pl_plan_machine *mc, ranking *r,
                          const pl__qent *qe, bool plateau) {
  if (pruned(r, qe->u))
    return PL_OK;
  bool gone = false;
  PL_TRY(plateau ? room_pruned(m, fr, mc, r, &qe->cfg, &gone)
                 : fsdp2_floored(m, fr, mc, r, &qe->cfg, &gone));
  if (gone)
    return PL_OK;
  cand x;
  memset(&x, 0, sizeof x);
  x.cfg = qe->cfg;
  pl_status st =
      plateau ? sco_search(m, mc, &x, fr, r) : eval(m, mc, r->mm, &x, true);
  if (pl__plan_left_out(st))
    return PL_OK;
  PL_TRY(st);
  if (!plateau)
    rank_in(r, &x);
  return PL_OK;
}

/* The look-ahead's guess (ahead.c): candidate j ranked on `copy`, a copy
 * of the search's ranking, through the view of its memo. */
typedef struct guess_ctx {
  const pl_model_cfg *m;
  const pl_plan_free *fr;
  const pl_plan_machine *mc;
  const pl__cqueue *q;
  pl__plan_memo *view;
  bool plateau;
} guess_ctx;

static void guess(void *ctx, void *copy, int j) {
  const guess_ctx *g = ctx;
  ranking *mine = copy;
  mine->mm = g->view;
  (void)rank_one(g->m, g->fr, g->mc, mine, &g->q->e[j], g->plateau);
  pl_clear_error(); /* a guess's errors are nobody's: the ranking says */
}

/* Rank the candidates of q, fastest bound first (rank_one each), measured
 * ahead on a second thread where one may run (ahead.c: the ranking, its
 * counts and every answer are those of the search alone). */
static pl_status rank_queue(const pl_model_cfg *m, const pl_plan_free *fr,
                            const pl_plan_machine *mc, ranking *r,
                            pl__cqueue *q, bool plateau) {
  for (int i = 0; i < q->n; i++) {
    double u = 0;
    if (pl__plan_time_bound(m, &q->e[i].cfg, mc, &u) == PL_OK)
      q->e[i].u = u; /* else INFINITY: evaluated, to say what it refuses */
  }
  if (q->n > 1)
    qsort(q->e, (size_t)q->n, sizeof *q->e, q_cmp);
  guess_ctx g = {m, fr, mc, q, NULL, plateau};
  pl__ahead *a = NULL;
  if (pl__ahead_may_run(q->n) && (g.view = pl__plan_memo_ahead(r->mm)) &&
      !(a = pl__ahead_start(q->n, sizeof *r, r, guess, &g))) {
    pl__plan_memo_free(g.view); /* the memo keeps its store, unused */
    g.view = NULL;
  }
  pl_status st = PL_OK;
  for (int i = 0; st == PL_OK && i < q->n && !(fr->first_fit && r->have_best);
       i++) {
    pl__ahead_at(a, i, r);
    st = rank_one(m, fr, mc, r, &q->e[i], plateau);
  }
  if (a)
    pl__plan_memo_cancel(g.view);
  pl__ahead_stop(a);
  pl__plan_memo_free(g.view);
  return st;
}

/* why the runner-up lost: the part with the largest extra time */
static void why_lost(const cand *b, const cand *s, char *buf, size_t n) {
  const double vb = b->time.tok_s_gpu, vs = s->time.tok_s_gpu;
  char cfg[200];
  pl_plan_cfg_str(&s->cfg, cfg, sizeof cfg);
  if (vb - vs < 0.005 * vb) {
    const double dp = ((double)s->mem.dev_peak - (double)b->mem.dev_peak) / GIB;
    if (fabs(dp) < 0.01)
      snprintf(buf, n,
               "%s: %.0f vs %.0f tok/s/GPU at the same peak (%.2f GiB): a "
               "tie within 0.5%%, either serves",
               cfg, vs, vb, b->mem.dev_peak / GIB);
    else
      snprintf(buf, n,
               "%s: %.0f vs %.0f tok/s/GPU, within 0.5%%; the choice needs "
               "%.2f GiB %s at its peak (%.2f vs %.2f GiB)",
               cfg, vs, vb, fabs(dp), dp > 0 ? "less" : "more",
               b->mem.dev_peak / GIB, s->mem.dev_peak / GIB);
    return;
  }
  int worst = 0;
  double dmax = -1e30;
  for (int i = 0; i < PL_TPART_COUNT; i++) {
    const double d = s->time.part_s[i] - b->time.part_s[i];
    if (d > dmax)
      dmax = d, worst = i;
  }
  snprintf(buf, n,
           "%s: %.0f vs %.0f tok/s/GPU (%.1f%% slower): its %s takes %+.3f s "
           "per step",
           cfg, vs, vb, 100.0 * (vb - vs) / vb, pl_plan_tpart_name(worst),
           dmax);
}

/* The chosen Ep against the other kind: groups of a node (when they divide
 * W and E) when the world was chosen, the world when groups were; the
 * rest of the choice kept. */
static pl_status why_ep(const pl_model_cfg *m, const pl_plan_machine *mc,
                        pl__plan_memo *mm, const cand *b, char *buf, size_t n) {
  buf[0] = 0;
  const pl_plan_cfg *c = &b->cfg;
  const int Wv = c->lc.W_v > c->W ? c->lc.W_v : c->W;
  const int ep = c->lc.Ep ? c->lc.Ep : Wv;
  const int gpn = mc->gpus_per_node;
  const bool node_ok = c->W % gpn == 0 && m->E % gpn == 0;
  const int alt =
      ep == Wv && gpn < Wv && node_ok && pl__plan_ep_plays(c, gpn) ? gpn : 0;
  if (ep == Wv && !alt) {
    snprintf(buf, n, "Ep=%d: the world (%s)", Wv,
             Wv <= gpn ? "inside a node: a group would only add the expert "
                         "units' traffic and memory"
             : node_ok ? "a node's worth of ranks does not divide the ranks "
                         "present"
                       : "a node's worth of ranks does not divide W and E");
    return PL_OK;
  }
  cand y;
  memset(&y, 0, sizeof y);
  y.cfg = *c;
  y.cfg.lc.Ep = ep == Wv ? alt : 0;
  const pl_status st = eval(m, mc, mm, &y, true);
  if (st == PL_EINVAL || st == PL_EINFEASIBLE)
    return PL_OK;
  PL_TRY(st);
  const int ya = y.cfg.lc.Ep ? y.cfg.lc.Ep : Wv;
  const double du = y.time.part_s[PL_TPART_UNITS] -
                    b->time.part_s[PL_TPART_UNITS],
               da = y.time.part_s[PL_TPART_A2A_MOE] -
                    b->time.part_s[PL_TPART_A2A_MOE],
               dp = ((double)y.mem.dev_peak - (double)b->mem.dev_peak) / GIB;
  snprintf(buf, n,
           "Ep=%d%s chosen over Ep=%d: Ep=%d would change the exposed unit "
           "gathers/reduce-scatters by %+.3f s and the expert all-to-all by "
           "%+.3f s per step, the peak by %+.2f GiB (%.0f vs %.0f tok/s/GPU%s)",
           ep,
           ep < Wv ? " (expert groups, ZeRO-3 expert units)" : " (the world)",
           ya, ya, du, da, dp, y.time.tok_s_gpu, b->time.tok_s_gpu,
           y.fits ? "" : "; it does not fit");
  return PL_OK;
}

pl_status pl_plan_auto(const pl_model_cfg *m, const pl_plan_cfg *base,
                       const pl_plan_free *fr, const pl_plan_machine *mc,
                       pl_plan_search *out) {
  memset(out, 0, sizeof *out);
  ranking *r = calloc(1, sizeof *r);
  pl__plan_memo *mm = pl__plan_memo_new();
  if (!r || !mm) {
    free(r), pl__plan_memo_free(mm);
    return pl_set_error(PL_ENOMEM, "plan: host");
  }
  r->mm = mm;
  pl__cqueue q = {0};
  const bool plateau = base->system != PL_PLAN_FSDP2;
  pl_plan_free ff = *fr; /* first fit: the fill changes no verdict */
  if (fr->first_fit)
    ff.resident = ff.keep = false;
  fr = &ff;
  pl_status st = pl__plan_candidates(m, base, fr, mc, &q);
  if (st == PL_OK)
    st = rank_queue(m, fr, mc, r, &q, plateau);
  free(q.e);
  if (st == PL_OK && r->tried == 0 && base->tokens_step > 0) {
    free(r), pl__plan_memo_free(mm);
    const char *g = base->system == PL_PLAN_FSDP2 ? "cp" : "D";
    return pl_set_error(PL_EINVAL,
                        "tokens per step %lld: no %s makes it a whole number "
                        "of passes of %lld-token sequences over %d GPUs "
                        "(allowed: a multiple of %lld·%d/%s for a %s the "
                        "search may take: one sequence per %s group per "
                        "micro-batch)",
                        (long long)base->tokens_step, g, (long long)base->S,
                        base->W, (long long)base->S, base->W, g, g,
                        base->system == PL_PLAN_FSDP2 ? "CP" : "D");
  }
  if (st == PL_OK && r->tried == 0) {
    /* every candidate refused: the base itself says why */
    cand x;
    memset(&x, 0, sizeof x);
    x.cfg = *base;
    st = eval(m, mc, r->mm, &x, true);
    if (st == PL_OK)
      rank_in(r, &x);
  }
  if (st == PL_OK) {
    out->tried = r->tried, out->feasible = r->feasible;
    out->skipped = r->skipped;
    out->unbuilt = pl__plan_memo_unbuilt(mm);
    out->beyond = pl__plan_memo_beyond(mm);
    out->evals = pl__plan_memo_evals(mm);
    out->ahead = pl__plan_memo_ahead_used(mm);
    if (r->have_best) {
      out->have_best = true;
      out->best = (pl_plan_choice){r->best.cfg, r->best.mem, r->best.time, ""};
      snprintf(out->best.fill, sizeof out->best.fill, "%s", r->best.fill);
      pl_plan_verdict v;
      if (pl_plan_check(m, &out->best.cfg, mc, &v) == PL_OK)
        out->best.mem.dev_worst = v.mem.dev_worst;
      if (base->system == PL_PLAN_PLATEAU && fr->ep && m->E > 0)
        st = why_ep(m, mc, r->mm, &r->best, out->why_ep, sizeof out->why_ep);
    }
    if (r->have_second) {
      out->have_runner_up = true;
      out->runner_up =
          (pl_plan_choice){r->second.cfg, r->second.mem, r->second.time, ""};
      snprintf(out->runner_up.fill, sizeof out->runner_up.fill, "%s",
               r->second.fill);
      why_lost(&r->best, &r->second, out->why_lost, sizeof out->why_lost);
    }
    if (!r->have_best && r->have_closest) {
      snprintf(out->binding, sizeof out->binding, "%s", r->closest.binding);
      char cfg[200];
      pl_plan_cfg_str(&r->closest.cfg, cfg, sizeof cfg);
      pl_plan_verdict v;
      memset(&v, 0, sizeof v);
      v.mem = r->closest.mem;
      verdict_of(mc, &v);
      snprintf(out->why_none, sizeof out->why_none, "closest: %s: %s", cfg,
               v.why);
      out->best =
          (pl_plan_choice){r->closest.cfg, r->closest.mem, r->closest.time, ""};
    }
  }
  free(r), pl__plan_memo_free(mm);
  return st;
}

/* ---- the largest tokens per rank --------------------------------------------
 */

/* The configuration that needs the least device memory at N tokens per rank
 * with the free knobs (fixed ones kept): plateau D = 1 (S = N), P as large
 * as a node allows, the most chunks, SCO as much as the host holds, the
 * smaller bucket; FSDP2 cp = 1, the largest ep, full AC, offload. */
static pl_status fits_frugal(const pl_model_cfg *m, const pl_plan_cfg *base,
                             const pl_plan_free *fr, const pl_plan_machine *mc,
                             pl__plan_memo *mm, int64_t N, bool *fits) {
  cand x;
  memset(&x, 0, sizeof x);
  x.cfg = *base;
  x.cfg.sc.micro = 1;
  *fits = false;
  if (base->system == PL_PLAN_FSDP2) {
    if (fr->cp)
      x.cfg.cp = 1;
    if (fr->ep)
      x.cfg.ep = pl__plan_largest_ep(m, base->W);
    if (fr->ac)
      x.cfg.ac = PL_PLAN_AC_FULL;
    x.cfg.S = N * x.cfg.cp;
    for (int o = 0; o < (fr->offload ? 2 : 1) && !*fits; o++) {
      if (fr->offload)
        x.cfg.offload = o == 0;
      pl_status st = eval(m, mc, mm, &x, false);
      if (st == PL_EINVAL || st == PL_EINFEASIBLE)
        return PL_OK;
      PL_TRY(st);
      *fits = x.fits;
    }
    return PL_OK;
  }
  if (fr->D)
    x.cfg.lc.D = 1;
  x.cfg.S = N * x.cfg.lc.D;
  if (fr->P) {
    int P = 1;
    for (int p = 2; p <= 8 && p <= mc->gpus_per_node; p *= 2)
      if (base->W % p == 0)
        P = p;
    x.cfg.lc.P = P;
    x.cfg.sc.head = P > 1 ? &pl_head_ring : &pl_head_fused;
  }
  if (fr->c)
    x.cfg.sc.moe_c = (N + 63) / 64;
  if (fr->beta)
    x.cfg.sc.oo.bucket = 25000000;
  if (fr->optim)
    x.cfg.sc.optim = &pl_optim_stream;
  ranking r;
  memset(&r, 0, sizeof r);
  r.mm = mm;
  pl_plan_free nofill = *fr; /* the least memory: nothing kept or resident */
  nofill.resident = nofill.keep = false;
  if (fr->resident)
    x.cfg.sc.oo.resident_all = false, x.cfg.sc.oo.resident_bytes = 0;
  if (fr->keep)
    x.cfg.sc.keep = (pl_keep_budget){PL_KEEP_BYTES, 0};
  pl_status st = sco_search(m, mc, &x, &nofill, &r);
  if (pl__plan_left_out(st))
    return PL_OK;
  PL_TRY(st);
  *fits = r.have_best;
  return PL_OK;
}

static int64_t max_tokens(const pl_model_cfg *m, const pl_plan_cfg *base,
                          const pl_plan_free *fr, const pl_plan_machine *mc,
                          pl__plan_memo *mm, int64_t quantum, int64_t n_max) {
  if (quantum < 1)
    quantum = 1;
  int64_t lo = 0, hi = n_max / quantum; /* in quanta; lo fits (0: none) */
  bool f = false;
  /* grow to bracket, then bisect */
  int64_t step = 1;
  while (lo + step <= hi) {
    if (fits_frugal(m, base, fr, mc, mm, (lo + step) * quantum, &f) != PL_OK)
      return 0;
    if (!f)
      break;
    lo += step;
    step *= 2;
  }
  int64_t a = lo, b = lo + step <= hi ? lo + step : hi + 1; /* b fails */
  while (b - a > 1) {
    const int64_t mid = (a + b) / 2;
    if (fits_frugal(m, base, fr, mc, mm, mid * quantum, &f) != PL_OK)
      return 0;
    if (f)
      a = mid;
    else
      b = mid;
  }
  return a * quantum;
}

int64_t pl_plan_max_tokens(const pl_model_cfg *m, const pl_plan_cfg *base,
                           const pl_plan_free *fr, const pl_plan_machine *mc,
                           int64_t quantum, int64_t n_max) {
  pl__plan_memo *mm = pl__plan_memo_new();
  if (!mm)
    return 0;
  const int64_t n = max_tokens(m, base, fr, mc, mm, quantum, n_max);
  pl__plan_memo_free(mm);
  return n;
}
