/* train_rows.c — the columns of a `plateau bench train` point
 * (train_rows.h): its identity (the layout and the model's sizes), and the
 * measured columns from the results of its steps.
 *
 * The trainer resets the device and pinned-host peaks at the start of every
 * step (its pl_step_result holds that step's), so the memory columns are
 * taken from the steps, not from the harness's arenas: dev_peak_bytes,
 * host_peak_bytes, pool_peak_bytes and each reported tag's peak are the max
 * over the timed steps and the ranks, live_set rank 0's at the timed step of
 * its largest peak.  The time breakdown (<part>_ms) is each part's median
 * over the timed steps, max over ranks (as time_ms is the slowest rank's):
 * attention, moe, head and optimizer on the compute stream, zero3 and sco
 * beside it (overlapped), other the rest of the step's wall time.  Rates:
 * tokens per rank per step micro·N over the harness's median step time
 * (tok_s_gpu), model FLOPs micro·N·pl_model_flops_per_token(S) (tflops,
 * via w->flops), mfu = tflops / the GEMM rate.  losses: every step's,
 * warm-ups first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_rows.h"

static const char *const tags[] = {"dispatch",  "logits",        "boundary",
                                   "attention", "optim_staging", "kept"};
#define NTAGS 6

static size_t tag_peak(const pl_mem_stats *m, const char *tag) {
  for (int i = 0; i < m->n_tags && i < PL_MEM_MAX_TAGS; i++)
    if (m->tag_peak[i].tag && !strcmp(m->tag_peak[i].tag, tag))
      return m->tag_peak[i].bytes;
  return 0;
}

/* Memory columns over the timed steps res[0..n), max over ranks. */
static pl_status memory(pl_bench_ctx *c, const pl_step_result *res, int n,
                        pl_row *row) {
  int64_t v[3 + NTAGS] = {0};
  int at = 0;
  for (int k = 0; k < n; k++) {
    const pl_mem_stats *d = &res[k].dev;
    if (d->peak > (size_t)v[0])
      v[0] = (int64_t)d->peak, at = k;
    size_t x[2 + NTAGS] = {res[k].host.peak, d->pool_high};
    for (int i = 0; i < NTAGS; i++)
      x[2 + i] = tag_peak(d, tags[i]);
    for (int i = 0; i < 2 + NTAGS; i++)
      if ((int64_t)x[i] > v[1 + i])
        v[1 + i] = (int64_t)x[i];
  }
  char live[512] = "";
  if (n > 0)
    pl_mem_live_set_str(&res[at].dev, live, sizeof live);
  PL_TRY(pl_host_allreduce_i64(c->comm, v, 3 + NTAGS, PL_RED_MAX));
  pl_row_i64(row, "dev_peak_bytes", v[0]);
  pl_row_i64(row, "host_peak_bytes", v[1]);
  pl_row_i64(row, "pool_peak_bytes", v[2]);
  pl_row_str(row, "live_set", live);
  for (int i = 0; i < NTAGS; i++) {
    char col[48];
    snprintf(col, sizeof col, "%s_bytes", tags[i]);
    pl_row_i64(row, col, v[3 + i]);
  }
  return PL_OK;
}

/* Each part's median over the timed steps, max over ranks (recompute only
 * where the system times it: plateau's step). */
static pl_status parts(pl_bench_ctx *c, const pl_step_result *res, int n,
                       bool recompute, pl_row *row) {
  double med[PL_PART_COUNT], *x = calloc((size_t)n + 1, sizeof *x);
  if (!x)
    return pl_set_error(PL_ENOMEM, "train: host");
  for (int p = 0; p < PL_PART_COUNT; p++) {
    for (int k = 0; k < n; k++)
      x[k] = res[k].part_ms[p];
    med[p] = pl_stats_of(x, n).median;
  }
  free(x);
  PL_TRY(pl_host_allreduce_f64(c->comm, med, PL_PART_COUNT, PL_RED_MAX));
  for (int p = 0; p < PL_PART_COUNT; p++) {
    char col[48];
    snprintf(col, sizeof col, "%s_ms", pl_part_name(p));
    /* expert_units only where expert groups ran (the rows of Ep = W keep
     * their columns) */
    if ((p != PL_PART_RECOMPUTE || recompute) &&
        (p != PL_PART_EXPERT_UNITS || med[p] > 0))
      pl_row_f64(row, col, med[p]);
  }
  return PL_OK;
}

static void losses(const pl_step_result *res, int n, pl_row *row) {
  size_t cap = (size_t)n * 16 + 16, len = 0;
  char *s = malloc(cap);
  PL_ASSERT(s != NULL);
  s[0] = '\0';
  for (int k = 0; k < n; k++)
    len += (size_t)snprintf(s + len, cap - len, "%s%.6g", k ? "," : "",
                            res[k].loss);
  pl_row_str(row, "losses", s);
  pl_row_f64(row, "loss", n ? res[n - 1].loss : NAN);
  free(s);
}

void pl__train_identity(const pl_train_setup *u, int ranks, int Wv, int D,
                        pl_row *row) {
  const pl_model_params mp = pl_model_count(&u->m);
  pl_row_i64(row, "ranks", ranks);
  pl_row_i64(row, "virtual_world", Wv);
  pl_row_i64(row, "D", D);
  pl_row_str(row, "dtype", pl_dtype_name(u->sc.dt));
  pl_row_i64(row, "seq", u->S);
  pl_row_i64(row, "micro", u->sc.micro);
  pl_row_i64(row, "layers", u->m.L);
  pl_row_i64(row, "hidden", u->m.H);
  pl_row_i64(row, "vocab", u->m.V);
  pl_row_i64(row, "experts", u->m.E);
  pl_row_i64(row, "topk", u->m.k);
  pl_row_i64(row, "params_total", mp.total);
  pl_row_i64(row, "params_active", mp.active);
  if (u->chosen[0])
    pl_row_note(row, "%s", u->chosen);
  if (u->fill[0])
    pl_row_note(row, "%s", u->fill);
}

pl_status pl__train_row(pl_bench_ctx *c, const pl__train_args *a,
                        const pl_train_system *sys, void *h,
                        const pl_train_setup *u, const pl_step_result *res,
                        int n, pl_row *row, pl_work *w) {
  /* the warm-ups the harness ran (more than -w when they had not
   * converged), then the timed steps */
  const int nw = c->meas ? c->meas->warmups : c->warmup;
  const int warm = nw < n ? nw : 0;
  const pl_step_result *timed = res + warm;
  const int nt = n - warm;
  /* no times or rates from a dry device: it computes nothing */
  const bool dry = pl_dev_backend(c->dev) == PL_BACKEND_DRY;
  PL_TRY(memory(c, timed, nt, row));
  if (u->sc.profile && !dry)
    PL_TRY(parts(c, timed, nt, !strcmp(sys->name, PL_PLAN_NAME_PLATEAU), row));
  losses(res, n, row);
  if (sys->result && n)
    sys->result(h, &res[n - 1], row);
  /* rates */
  const int64_t N = u->S / sys->seq_ranks(u), tok = (int64_t)u->sc.micro * N;
  const double sec = c->meas && !dry ? c->meas->t.median * 1e-3 : 0;
  w->flops = (double)tok * pl_model_flops_per_token(&u->m, u->S);
  pl_row_f64(row, "flops", w->flops);
  if (sec > 0)
    pl_row_f64(row, "tok_s_gpu", (double)tok / sec);
  if (a->gemm_tflops > 0) {
    pl_row_f64(row, "gemm_tflops", a->gemm_tflops);
    if (sec > 0)
      pl_row_f64(row, "mfu", 100.0 * w->flops / sec / 1e12 / a->gemm_tflops);
    pl_row_note(row, "mfu against %.0f TFLOP/s (%s)", a->gemm_tflops,
                a->gemm_src);
  }
  /* the description: this rank's parameters, the device bound */
  if (sys->describe) {
    pl_train_desc d;
    PL_TRY(sys->describe(u, c->size, c->rank,
                         c->cuda ? PL_BACKEND_CUDA : PL_BACKEND_CPU, &d));
    int64_t v[5] = {d.params_rank, (int64_t)(d.dev_state + d.dev_transient),
                    d.resident_params, d.keep_attn, d.keep_all};
    PL_TRY(pl_host_allreduce_i64(c->comm, v, 5, PL_RED_MAX));
    pl_row_i64(row, "params", v[0]);
    pl_row_i64(row, "bound_bytes", v[1]);
    pl_row_i64(row, "resident_params", v[2]);
    pl_row_i64(row, "kept_attn", v[3]);
    pl_row_i64(row, "kept_full", v[4]);
  }
  return PL_OK;
}
