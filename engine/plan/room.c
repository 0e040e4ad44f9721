/* room.c — what memory leaves a candidate's headroom knobs.  From one
 * measurement of its least form (every boundary offloaded where SCO is
 * free, nothing kept, no optimizer state resident), the least device peak
 * any form with given kept layers and resident state can have
 * (pl__plan_room_need), and the time bound over the forms that fit
 * (pl__plan_room_bound).  The search prunes by it: a candidate slower
 * there than its best and runner-up cannot change the ranking.
 *
 * Why the need is a lower bound.  Resident state is made before the step
 * and lives through it: it adds its 12 bytes per parameter to every
 * moment, less at most the staging slots it saves.  A kept layer's passes
 * make what the least form's make, its backward using what it kept where
 * the least form's recomputes it, so a moment of layer l's forward or
 * backward holds what the least form's held plus the kept bytes of the
 * layers below l, and a moment of the head all of them (layer_high: the
 * most bytes of each bin of layers' passes and of the head).  A form with
 * fewer boundaries offloaded holds at least the least form's peak, and at a
 * moment at most SCO's two restore buffers less.  The claim is tested
 * against the forms' own measured peaks (test_plan_room.c,
 * test_mpi_plan_dry.c dry_room_need). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

void pl__plan_room_of(const pl_model_cfg *m, const pl_plan_free *fr,
                      const pl_plan_cfg *c, const pl_plan_mem *mem,
                      bool sco_free, pl__room *out) {
  const double beta = (double)(c->sc.oo.bucket ? c->sc.oo.bucket : 100000000),
               th = (double)mem->params_rank,
               slots = c->sc.oo.slots ? c->sc.oo.slots : 2,
               nhb = (double)mem->N * m->H * pl_dtype_size(c->sc.dt);
  size_t a, all;
  pl_step_kept_layer(m, mem->N, c->lc.D, c->sc.dt, &a, &all);
  *out = (pl__room){.m = m,
                    .peak = (double)mem->dev_peak,
                    .slack = sco_free ? 2 * nhb : 0,
                    .stage = fr->resident ? 12.0 * slots * fmin(beta, th) : 0,
                    .a = (double)a,
                    .w = (double)(all - a),
                    .high = mem->layer_high};
}

/* Kept bytes of the layers below l when the first na keep their attention
 * and the first nw their whole half too. */
static double kept_below(const pl__room *x, int l, int na, int nw) {
  return (l < na ? l : na) * x->a + (l < nw ? l : nw) * x->w;
}

double pl__plan_room_need(const pl__room *x, int na, int nw, double r) {
  const int L = x->m->L;
  double need = x->high[PL_PLAN_BINS] + kept_below(x, L, na, nw) - x->slack;
  for (int i = 0; i < PL_PLAN_BINS; i++)
    if (x->high[i])
      need = fmax(need, (double)x->high[i] - x->slack +
                            kept_below(x, pl__bins_first(L, i), na, nw));
  return fmax(need, x->peak) + r - x->stage;
}

double pl__plan_room_sco(const pl__room *x, double nhb, int u, double *most) {
  const int L = x->m->L;
  const double on = (double)(L > u ? L - u : 0); /* boundaries on device */
  double need = (double)x->high[PL_PLAN_BINS] + on * nhb;
  for (int i = 0; i < PL_PLAN_BINS; i++) {
    const int below = pl__bins_first(L, i) - u; /* of them, below the bin */
    if (x->high[i])
      need = fmax(need, (double)x->high[i] + (below > 0 ? below : 0) * nhb);
  }
  *most = x->peak + on * nhb;
  return fmax(need, x->peak) - 2 * nhb;
}

typedef struct keep_ctx {
  const pl__room *x;
  double lim;
} keep_ctx;

/* Does the keep order's step t (t <= L: the first t layers' attention;
 * beyond: every attention and t − L whole halves) fit beside r bytes of
 * resident state? */
static bool keep_fits(const keep_ctx *k, int t, double r) {
  const int L = k->x->m->L, na = t < L ? t : L, nw = t > L ? t - L : 0;
  return pl__plan_room_need(k->x, na, nw, r) <= k->lim;
}

/* The most kept bytes beside r bytes of resident state (more kept never
 * needs less, so the steps that fit are a prefix of the order); -1 when
 * not even none fits. */
static double room_keep(void *ctx, double r) {
  const keep_ctx *k = ctx;
  const int L = k->x->m->L;
  if (!keep_fits(k, 0, r))
    return -1;
  int lo = 0, hi = 2 * L; /* lo fits */
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (keep_fits(k, mid, r))
      lo = mid;
    else
      hi = mid - 1;
  }
  return kept_below(k->x, L, lo < L ? lo : L, lo > L ? lo - L : 0);
}

pl_status pl__plan_room_bound(const pl_model_cfg *m, const pl_plan_free *fr,
                              const pl_plan_machine *mc, const pl_plan_cfg *c,
                              const pl_plan_mem *mem, bool sco_free,
                              double *u) {
  pl__room x;
  pl__plan_room_of(m, fr, c, mem, sco_free, &x);
  const double lim = pl__hbm_usable(mc);
  keep_ctx k = {&x, lim};
  /* a knob the search does not free keeps the form measured: no room */
  const pl__plan_room room = {fr->resident ? lim - x.peak + x.stage : INFINITY,
                              fr->keep ? room_keep : NULL, &k};
  return pl__plan_time_bound_room(m, c, mc, &room, u);
}

/* Fold a sibling's device peak and layer_high into the floor. */
static void floor_in(const pl_plan_mem *s, bool *have, pl_plan_mem *lb) {
  if (!*have) {
    *lb = *s;
    *have = true;
    return;
  }
  if (s->dev_peak > lb->dev_peak)
    lb->dev_peak = s->dev_peak;
  for (int i = 0; i <= PL_PLAN_BINS; i++)
    if (s->layer_high[i] > lb->layer_high[i])
      lb->layer_high[i] = s->layer_high[i];
}

pl_status pl__plan_room_floor(pl__plan_memo *mm, const pl_model_cfg *m,
                              const pl_plan_machine *mc, const pl_plan_free *fr,
                              const pl_plan_cfg *least, bool measure,
                              bool *have, pl_plan_mem *lb) {
  *have = false;
  /* resident state comes in whole buckets of β: a fixed amount makes a
   * smaller β hold more of it; the siblings floor none-resident forms */
  if (least->sc.oo.resident_all || least->sc.oo.resident_bytes)
    return PL_OK;
  int64_t cs[PL__PLAN_CAPS];
  int nc = 1;
  cs[0] = least->sc.moe_c;
  if (fr->c)
    nc = pl__plan_chunk_caps(pl_plan_tokens_per_rank(least), cs);
  const size_t beta = least->sc.oo.bucket;
  const int nb = fr->beta ? 2 : 1;
  pl_plan_cfg s = *least;
  pl_plan_mem *mem = malloc(sizeof *mem);
  if (!mem)
    return pl_set_error(PL_ENOMEM, "plan: host");
  /* the optimizers the search tries update the same device bytes where
   * none of their state is resident: either one's form floors the other's */
  const pl_optim_ops *own = least->sc.optim;
  const bool either =
      fr->optim && (own == pl__plan_optims[0] || own == pl__plan_optims[1]);
  for (int o = 0; o < (either ? 2 : 1); o++)
    for (int i = 0; i < nc; i++)
      for (int j = 0; j < nb; j++) {
        s.sc.optim = either ? pl__plan_optims[o] : own;
        s.sc.moe_c = cs[i];
        if (fr->beta)
          s.sc.oo.bucket = pl__plan_buckets[j];
        if (s.sc.moe_c > least->sc.moe_c || s.sc.oo.bucket > beta ||
            !memcmp(&s, least, sizeof s))
          continue;
        if (pl__plan_mem_known(mm, m, &s, mc, mem))
          floor_in(mem, have, lb);
      }
  s.sc.optim = own;
  if (!*have && measure) {
    /* the smallest cap and bucket: the floor of every sibling */
    s.sc.moe_c = cs[nc - 1] < least->sc.moe_c ? cs[nc - 1] : least->sc.moe_c;
    s.sc.oo.bucket =
        fr->beta && pl__plan_buckets[1] < beta ? pl__plan_buckets[1] : beta;
    if (memcmp(&s, least, sizeof s)) {
      const pl_status st = pl__plan_mem_eval(mm, m, &s, mc, false, mem);
      if (st == PL_OK)
        floor_in(mem, have, lb);
      else if (!pl__plan_left_out(st)) {
        free(mem);
        return st;
      }
      pl_clear_error();
    }
  }
  free(mem);
  return PL_OK;
}
