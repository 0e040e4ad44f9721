/* memo.c — the search's memory evaluations (plan_internal.h): counted,
 * memoized, and measured ahead on a second thread.
 *
 * A measurement is a pure function of the configuration (with the model
 * and machine of its memo): its answer is the same whoever measures it and
 * whenever.  A memo given a look-ahead (pl__plan_memo_ahead) shares a small
 * store with a view of it that another thread evaluates through: the view
 * measures what the search will probably ask next and leaves each answer in
 * the store; the search takes a stored answer, or waits for one being
 * measured, where it would have measured.  The search's memo, its counts
 * and every answer it gives are those of a search without the look-ahead;
 * only the wall time differs. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

static _Atomic long mem_evals;

long pl__plan_mem_evals(void) {
  return mem_evals;
}

/* an open-addressing table of the configurations evaluated (the bytes of
 * pl_plan_cfg: two equal keys are one configuration, and a key that differs
 * in padding alone is only a miss) */
#define MEMO_CAP 4096
typedef struct memo_ent {
  bool used, worst;
  bool unbuilt; /* a dry device cannot build it: why, and the status */
  pl_status ust;
  char why[200];
  pl_plan_cfg cfg;
  pl_plan_mem mem;
} memo_ent;

/* ---- the store of measurements made ahead -----------------------------
 * A few answers, each of one kind of measurement: under balanced routes
 * (pl__plan_memory without the worst case) or the adversarial ones alone
 * (pl__plan_memory_dry_worst).  A slot being measured is BUSY (never
 * reused until its answer is in); a DONE one is dropped, oldest first, when
 * a slot is wanted. */
enum { AH_FREE, AH_BUSY, AH_DONE };
enum { K_BAL, K_WORST };
typedef struct ahead_ent {
  int state, kind;
  bool by_view; /* measured by the view (not by the search itself) */
  const pl_model_cfg *m;
  const pl_plan_machine *mc;
  pl_plan_cfg cfg;
  pl_status st;
  char why[1024]; /* the error's message when st is not PL_OK */
  pl_plan_mem mem;
} ahead_ent;
#define AHEAD_CAP 32
typedef struct ahead_store {
  pthread_mutex_t mu; /* the store, and the memo's table for the view */
  pthread_cond_t cv;  /* an answer came in */
  atomic_bool cancel; /* the view measures nothing more */
  int clock;          /* where the next DONE slot to drop is looked for */
  long used;          /* the view's answers the search took */
  ahead_ent e[AHEAD_CAP];
} ahead_store;

struct pl__plan_memo {
  const pl_model_cfg *m; /* the model and machine its entries are of */
  const pl_plan_machine *mc;
  int unbuilt; /* configurations a dry device cannot build */
  int beyond;  /* ... nor even reserve (PL_EINFEASIBLE: they do not fit) */
  long evals;  /* evaluations made (not answered from the table) */
  int n;
  memo_ent *e;       /* MEMO_CAP entries (NULL in a view) */
  ahead_store *as;   /* shared by a memo and its view; NULL: no look-ahead */
  pl__plan_memo *of; /* a view: the memo it measures ahead for */
};

int pl__plan_memo_unbuilt(const pl__plan_memo *mm) {
  return mm->unbuilt;
}

int pl__plan_memo_beyond(const pl__plan_memo *mm) {
  return mm->beyond;
}

long pl__plan_memo_evals(const pl__plan_memo *mm) {
  return mm->evals;
}

long pl__plan_memo_ahead_used(const pl__plan_memo *mm) {
  return mm->as ? mm->as->used : 0;
}

pl__plan_memo *pl__plan_memo_new(void) {
  pl__plan_memo *mm = calloc(1, sizeof *mm);
  if (mm && !(mm->e = calloc(MEMO_CAP, sizeof *mm->e))) {
    free(mm);
    return NULL;
  }
  return mm;
}

pl__plan_memo *pl__plan_memo_ahead(pl__plan_memo *mm) {
  if (mm->as || mm->of)
    return NULL; /* one view per memo, and none of a view */
  pl__plan_memo *v = calloc(1, sizeof *v);
  ahead_store *as = calloc(1, sizeof *as);
  if (!v || !as || pthread_mutex_init(&as->mu, NULL)) {
    free(v), free(as);
    return NULL;
  }
  if (pthread_cond_init(&as->cv, NULL)) {
    pthread_mutex_destroy(&as->mu);
    free(v), free(as);
    return NULL;
  }
  v->of = mm;
  v->as = mm->as = as;
  return v;
}

void pl__plan_memo_cancel(pl__plan_memo *view) {
  if (view && view->as)
    atomic_store(&view->as->cancel, true);
}

void pl__plan_memo_free(pl__plan_memo *mm) {
  if (!mm)
    return;
  if (!mm->of && mm->as) { /* the memo owns the store (its view is gone) */
    pthread_cond_destroy(&mm->as->cv);
    pthread_mutex_destroy(&mm->as->mu);
    free(mm->as);
  }
  free(mm->e);
  free(mm);
}

static size_t memo_hash(const pl_plan_cfg *c) {
  const unsigned char *p = (const unsigned char *)c;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof *c; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return (size_t)(h % MEMO_CAP);
}

/* The entry of c (its slot when absent: !used), NULL when the table is
 * full. */
static memo_ent *memo_find(pl__plan_memo *mm, const pl_plan_cfg *c) {
  for (size_t i = memo_hash(c), k = 0; k < MEMO_CAP;
       k++, i = (i + 1) % MEMO_CAP)
    if (!mm->e[i].used || !memcmp(&mm->e[i].cfg, c, sizeof *c))
      return &mm->e[i];
  return NULL;
}

/* The table is written under the store's lock where a view reads it. */
static void table_lock(pl__plan_memo *mm) {
  if (mm->as)
    pthread_mutex_lock(&mm->as->mu);
}

static void table_unlock(pl__plan_memo *mm) {
  if (mm->as)
    pthread_mutex_unlock(&mm->as->mu);
}

/* One measurement of kind: out is what that call gives. */
static pl_status measure_kind(const pl_model_cfg *m, const pl_plan_cfg *c,
                              const pl_plan_machine *mc, int kind,
                              pl_plan_mem *out) {
  if (kind == K_BAL)
    return pl__plan_memory(m, c, mc, -1, false, out);
  memset(out, 0, sizeof *out);
  return pl__plan_memory_dry_worst(m, c, mc, -1, out);
}

/* ---- the store (its lock held) ---------------------------------------- */

static ahead_ent *store_find(ahead_store *as, const pl_model_cfg *m,
                             const pl_plan_machine *mc, const pl_plan_cfg *c,
                             int kind) {
  for (int i = 0; i < AHEAD_CAP; i++) {
    ahead_ent *a = &as->e[i];
    if (a->state != AH_FREE && a->kind == kind && a->m == m && a->mc == mc &&
        !memcmp(&a->cfg, c, sizeof *c))
      return a;
  }
  return NULL;
}

/* A slot claimed (BUSY) for kind of c; NULL when every slot is BUSY. */
static ahead_ent *store_claim(ahead_store *as, const pl_model_cfg *m,
                              const pl_plan_machine *mc, const pl_plan_cfg *c,
                              int kind, bool by_view) {
  ahead_ent *a = NULL;
  for (int i = 0; i < AHEAD_CAP && !a; i++)
    if (as->e[i].state == AH_FREE)
      a = &as->e[i];
  for (int k = 0; k < AHEAD_CAP && !a; k++) {
    const int i = (as->clock + k) % AHEAD_CAP;
    if (as->e[i].state == AH_DONE) {
      a = &as->e[i];
      as->clock = (i + 1) % AHEAD_CAP;
    }
  }
  if (a) {
    a->state = AH_BUSY, a->kind = kind, a->by_view = by_view;
    a->m = m, a->mc = mc, a->cfg = *c;
  }
  return a;
}

/* A claimed slot's answer in; whoever waits for it wakes. */
static void store_settle(ahead_store *as, ahead_ent *a, pl_status st,
                         const pl_plan_mem *mem) {
  pthread_mutex_lock(&as->mu);
  a->st = st;
  if (st == PL_OK)
    a->mem = *mem;
  else
    snprintf(a->why, sizeof a->why, "%s", pl_last_error());
  a->state = AH_DONE;
  pthread_cond_broadcast(&as->cv);
  pthread_mutex_unlock(&as->mu);
}

/* A DONE slot's answer (its error set again where it is one). */
static pl_status store_take(const ahead_ent *a, pl_plan_mem *out) {
  if (a->st != PL_OK)
    return pl_set_error(a->st, "%s", a->why);
  *out = a->mem;
  return PL_OK;
}

/* The search's measurement of kind: the store's answer (waited for while
 * the view measures it), or measured here and left in the store. */
static pl_status obtain(pl__plan_memo *mm, const pl_model_cfg *m,
                        const pl_plan_cfg *c, const pl_plan_machine *mc,
                        int kind, pl_plan_mem *out) {
  ahead_store *as = mm ? mm->as : NULL;
  if (!as)
    return measure_kind(m, c, mc, kind, out);
  pthread_mutex_lock(&as->mu);
  ahead_ent *a;
  while ((a = store_find(as, m, mc, c, kind)) && a->state == AH_BUSY)
    pthread_cond_wait(&as->cv, &as->mu);
  if (a) {
    as->used += a->by_view;
    a->by_view = false; /* counted once */
    const pl_status st = store_take(a, out);
    pthread_mutex_unlock(&as->mu);
    return st;
  }
  a = store_claim(as, m, mc, c, kind, false);
  pthread_mutex_unlock(&as->mu);
  const pl_status st = measure_kind(m, c, mc, kind, out);
  if (a)
    store_settle(as, a, st, out);
  return st;
}

/* How a kind of measurement is had: obtain (the search's) or view_get (the
 * look-ahead's). */
typedef pl_status (*get_fn)(pl__plan_memo *mm, const pl_model_cfg *m,
                            const pl_plan_cfg *c, const pl_plan_machine *mc,
                            int kind, pl_plan_mem *out);

/* c's memory as pl__plan_memory gives it: balanced, then (with_worst, for
 * plateau: another system's measurement has no separate worst case) the
 * adversarial routes' peaks. */
static pl_status get_mem(get_fn get, pl__plan_memo *mm, const pl_model_cfg *m,
                         const pl_plan_cfg *c, const pl_plan_machine *mc,
                         bool with_worst, pl_plan_mem *out) {
  PL_TRY(get(mm, m, c, mc, K_BAL, out));
  if (!with_worst || c->system != PL_PLAN_PLATEAU)
    return PL_OK;
  pl_plan_mem *w = malloc(sizeof *w);
  if (!w)
    return pl_set_error(PL_ENOMEM, "plan: host");
  const pl_status st = get(mm, m, c, mc, K_WORST, w);
  if (st == PL_OK) {
    out->dev_worst = w->dev_worst;
    memcpy(out->layer_high_worst, w->layer_high_worst,
           sizeof out->layer_high_worst);
  }
  free(w);
  return st;
}

/* ---- the view: the look-ahead's evaluations --------------------------- */

/* Kind of c for the view: the memo's answer, the store's, or measured and
 * left in the store.  One the other thread is measuring ends this guess
 * (PL_ERUNTIME): waiting would leave a core idle, and whoever ranks the
 * candidate later finds the answer in. */
static pl_status view_get(pl__plan_memo *v, const pl_model_cfg *m,
                          const pl_plan_cfg *c, const pl_plan_machine *mc,
                          int kind, pl_plan_mem *out) {
  ahead_store *as = v->as;
  pl__plan_memo *mm = v->of;
  if (atomic_load(&as->cancel))
    return pl_set_error(PL_ERUNTIME, "plan: the look-ahead was stopped");
  pthread_mutex_lock(&as->mu);
  const memo_ent *e = mm->m == m && mm->mc == mc ? memo_find(mm, c) : NULL;
  if (e && e->used && (e->unbuilt || kind == K_BAL || e->worst)) {
    const pl_status st = e->unbuilt ? e->ust : PL_OK;
    if (st == PL_OK)
      *out = e->mem;
    else
      pl_set_error(st, "%s", e->why);
    if (st == PL_OK && kind == K_BAL) { /* as a balanced measurement */
      out->dev_worst = 0;
      memset(out->layer_high_worst, 0, sizeof out->layer_high_worst);
    }
    pthread_mutex_unlock(&as->mu);
    return st;
  }
  ahead_ent *a = store_find(as, m, mc, c, kind);
  if (a && a->state == AH_BUSY) {
    pthread_mutex_unlock(&as->mu);
    return pl_set_error(PL_ERUNTIME,
                        "plan: a measurement another thread is making");
  }
  if (a) {
    const pl_status st = store_take(a, out);
    pthread_mutex_unlock(&as->mu);
    return st;
  }
  a = store_claim(as, m, mc, c, kind, true);
  pthread_mutex_unlock(&as->mu);
  const pl_status st = measure_kind(m, c, mc, kind, out);
  if (a)
    store_settle(as, a, st, out);
  return st;
}

static bool view_known(pl__plan_memo *v, const pl_model_cfg *m,
                       const pl_plan_cfg *c, const pl_plan_machine *mc,
                       pl_plan_mem *out) {
  ahead_store *as = v->as;
  pl__plan_memo *mm = v->of;
  pthread_mutex_lock(&as->mu);
  const memo_ent *e = mm->m == m && mm->mc == mc ? memo_find(mm, c) : NULL;
  const ahead_ent *a = store_find(as, m, mc, c, K_BAL);
  bool known = false;
  if (e && e->used && !e->unbuilt)
    *out = e->mem, known = true;
  else if (a && a->state == AH_DONE && a->st == PL_OK)
    *out = a->mem, known = true;
  pthread_mutex_unlock(&as->mu);
  return known;
}

/* ---- the evaluations -------------------------------------------------- */

bool pl__plan_mem_known(pl__plan_memo *mm, const pl_model_cfg *m,
                        const pl_plan_cfg *c, const pl_plan_machine *mc,
                        pl_plan_mem *out) {
  if (mm && mm->of)
    return view_known(mm, m, c, mc, out);
  if (!mm || mm->m != m || mm->mc != mc)
    return false;
  const memo_ent *e = memo_find(mm, c);
  if (!e || !e->used || e->unbuilt)
    return false;
  *out = e->mem;
  return true;
}

pl_status pl__plan_mem_eval(pl__plan_memo *mm, const pl_model_cfg *m,
                            const pl_plan_cfg *c, const pl_plan_machine *mc,
                            bool with_worst, pl_plan_mem *out) {
  if (mm && mm->of)
    return get_mem(view_get, mm, m, c, mc, with_worst, out);
  if (mm && (mm->m != m || mm->mc != mc) && mm->n == 0) {
    table_lock(mm);
    mm->m = m, mm->mc = mc;
    table_unlock(mm);
  }
  memo_ent *e = mm && mm->m == m && mm->mc == mc ? memo_find(mm, c) : NULL;
  if (e && e->used && e->unbuilt)
    return pl_set_error(e->ust, "%s", e->why);
  if (e && e->used && (e->worst || !with_worst)) {
    *out = e->mem;
    if (!with_worst) { /* as measured without the adversarial routes */
      out->dev_worst = 0;
      memset(out->layer_high_worst, 0, sizeof out->layer_high_worst);
    }
    return PL_OK;
  }
  mem_evals++;
  if (mm)
    mm->evals++;
  if (e && e->used && c->system == PL_PLAN_PLATEAU) {
    /* measured under balanced routes before: the adversarial ones alone */
    pl_plan_mem *w = malloc(sizeof *w);
    if (!w)
      return pl_set_error(PL_ENOMEM, "plan: host");
    const pl_status st = obtain(mm, m, c, mc, K_WORST, w);
    if (st == PL_OK) {
      table_lock(mm);
      e->mem.dev_worst = w->dev_worst;
      memcpy(e->mem.layer_high_worst, w->layer_high_worst,
             sizeof e->mem.layer_high_worst);
      e->worst = true;
      table_unlock(mm);
      *out = e->mem;
    }
    free(w);
    return st;
  }
  pl_status st = get_mem(obtain, mm, m, c, mc, with_worst, out);
  const bool unbuilt = mm && (st == PL_EUNSUPPORTED || st == PL_EINFEASIBLE);
  if (st != PL_OK && !unbuilt)
    return st;
  if (unbuilt && st == PL_EINFEASIBLE)
    mm->beyond++;
  else if (unbuilt)
    mm->unbuilt++;
  if (!e)
    return st;
  table_lock(mm);
  if (!e->used && mm->n >= MEMO_CAP * 3 / 4) {
    /* full: start again (the repeats are of recent configurations) */
    memset(mm->e, 0, MEMO_CAP * sizeof *mm->e);
    mm->n = 0;
    e = memo_find(mm, c);
  }
  mm->n += !e->used;
  e->used = true, e->worst = with_worst, e->cfg = *c;
  e->unbuilt = unbuilt, e->ust = st;
  if (unbuilt)
    snprintf(e->why, sizeof e->why, "%s", pl_last_error());
  else
    e->mem = *out;
  table_unlock(mm);
  return st;
}
