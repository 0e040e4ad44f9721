/* compare.c — the one dtype-scaled comparison of the benches (compare.h): every
 * bench checks its results through it, so a max_err column means the same
 * thing in every result file and a tolerance is never a bench's own
 * constant. */
#include "compare.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plateau/host_device.h"

double pl_check_tol(pl_dtype dt, int64_t k) {
  if (k < 0)
    return 0.0;
  const double eps32 = ldexp(1.0, -23);
  const double eps = dt == PL_BF16 ? ldexp(1.0, -7) : eps32;
  return 4.0 * eps + 2.0 * eps32 * sqrt((double)(k > 0 ? k : 1));
}

pl_elem pl_elem_of(pl_dtype dt) {
  return dt == PL_BF16 ? PL_ELEM_BF16 : PL_ELEM_F32;
}

static inline double get(const void *p, pl_elem e, size_t i) {
  switch (e) {
  case PL_ELEM_F32:
    return ((const float *)p)[i];
  case PL_ELEM_BF16:
    return pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
  default:
    return ((const double *)p)[i];
  }
}

static size_t elem_size(pl_elem e) {
  return e == PL_ELEM_F32 ? 4 : e == PL_ELEM_BF16 ? 2 : 8;
}

void pl_check_arrays(pl_check *c, const char *what, const void *got, pl_elem ge,
                     const void *ref, pl_elem re, size_t n, pl_dtype dt,
                     int64_t k) {
  pl_check_scaled(c, what, got, ge, ref, re, 1.0, n, dt, k);
}

void pl_check_scaled(pl_check *c, const char *what, const void *got, pl_elem ge,
                     const void *ref, pl_elem re, double rs, size_t n,
                     pl_dtype dt, int64_t k) {
  if (!c->compared)
    c->first_bad = -1;
  c->compared = true;
  const bool exact = k < 0, bits = exact && ge == re && rs == 1.0;
  const size_t es = elem_size(ge);
  double scale = 0;
#pragma omp parallel for schedule(static) reduction(max : scale)
  for (size_t i = 0; i < n; i++) {
    double r = fabs(get(ref, re, i) * rs);
    if (r > scale)
      scale = r;
  }
  if (!(scale > 0))
    scale = 1.0; /* all-zero reference: absolute errors */
  const double tol = pl_check_tol(dt, k), lim = tol * scale;
  double mx = 0;
  int64_t bad = 0, first = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(max : mx) \
    reduction(+ : bad) reduction(min : first)
  for (size_t i = 0; i < n; i++) {
    double g = get(got, ge, i), r = get(ref, re, i) * rs, d = fabs(g - r);
    if (isnan(d))
      d = INFINITY;
    bool off = bits ? memcmp((const char *)got + i * es,
                             (const char *)ref + i * es, es) != 0
                    : !(d <= lim);
    if (d > mx)
      mx = d;
    if (off) {
      bad++;
      if ((int64_t)i < first)
        first = (int64_t)i;
    }
  }
  if (mx > c->max_abs)
    c->max_abs = mx;
  if (mx / scale > c->max_rel)
    c->max_rel = mx / scale;
  if (bad) {
    if (!c->failed || !c->bad) { /* the first failing comparison names itself */
      snprintf(c->what, sizeof c->what, "%s", what);
      c->first_bad = first;
      c->tol = tol;
    }
    c->bad += bad;
    c->failed = true;
  }
}

pl_status pl_check_device(pl_check *c, pl_stream *s, const char *what,
                          const void *got, const void *ref, pl_dtype dt,
                          size_t n, int64_t k) {
  size_t bytes = n * pl_dtype_size(dt);
  char *hg = malloc(bytes + 1), *hr = malloc(bytes + 1);
  pl_status st = PL_OK;
  if (!hg || !hr)
    PL_TRY_GOTO(st, done,
                pl_set_error(PL_ENOMEM, "check %s: host copies of %zu bytes",
                             what, bytes));
  if (bytes) {
    PL_TRY_GOTO(st, done, pl_memcpy_async(s, hg, got, bytes));
    PL_TRY_GOTO(st, done, pl_memcpy_async(s, hr, ref, bytes));
  }
  PL_TRY_GOTO(st, done, pl_stream_sync(s));
  pl_check_arrays(c, what, hg, pl_elem_of(dt), hr, pl_elem_of(dt), n, dt, k);
done:
  free(hg);
  free(hr);
  return st;
}

void pl_check_that(pl_check *c, bool ok, const char *fmt, ...) {
  if (!c->compared)
    c->first_bad = -1;
  c->compared = true;
  if (ok)
    return;
  if (!c->why[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
  }
  c->failed = true;
}

pl_status pl_check_agree(pl_comm *comm, pl_check *c) {
  int size = pl_comm_size(comm), rank = pl_comm_rank(comm);
  if (!c->compared)
    c->first_bad = -1;
  /* [0] compared (max), [1] the lowest failing rank (min), [2] bad (max) */
  int64_t v[3] = {c->compared, c->failed ? rank : size, c->bad};
  int64_t lo[1] = {v[1]};
  double e[2] = {c->max_abs, c->max_rel};
  PL_TRY(pl_host_allreduce_i64(comm, v, 1, PL_RED_MAX));
  PL_TRY(pl_host_allreduce_i64(comm, lo, 1, PL_RED_MIN));
  PL_TRY(pl_host_allreduce_i64(comm, v + 2, 1, PL_RED_MAX));
  PL_TRY(pl_host_allreduce_f64(comm, e, 2, PL_RED_MAX));
  c->compared = v[0] != 0;
  c->max_abs = e[0];
  c->max_rel = e[1];
  if (lo[0] < size) { /* the failing rank's details, to everyone */
    struct {
      int64_t first_bad;
      double tol;
      char what[48], why[256];
    } m;
    memset(&m, 0, sizeof m);
    m.first_bad = c->first_bad;
    m.tol = c->tol;
    memcpy(m.what, c->what, sizeof m.what);
    memcpy(m.why, c->why, sizeof m.why);
    PL_TRY(pl_host_bcast(comm, &m, sizeof m, (int)lo[0]));
    c->failed = true;
    c->first_bad = m.first_bad;
    c->tol = m.tol;
    c->first_rank = (int)lo[0];
    memcpy(c->what, m.what, sizeof c->what);
    memcpy(c->why, m.why, sizeof c->why);
    c->bad = v[2];
  }
  return PL_OK;
}

void pl_check_note(const pl_check *c, char *buf, size_t n) {
  buf[0] = '\0';
  if (!c->failed)
    return;
  if (c->why[0]) {
    snprintf(buf, n, "CHECK FAILED: %s", c->why);
    return;
  }
  snprintf(buf, n,
           "CHECK FAILED: %s: %lld elements beyond tol %.3g (max over "
           "ranks), first bad index %lld on rank %d; max abs err %.3g, max "
           "rel err %.3g",
           c->what, (long long)c->bad, c->tol, (long long)c->first_bad,
           c->first_rank, c->max_abs, c->max_rel);
}

void pl_check_draws(pl_check *c, const char *what, const float *got, size_t n,
                    size_t len, uint64_t seed, const uint64_t *offs) {
  float *want = malloc(n * 4 + 4);
  PL_ASSERT(want != NULL);
  for (size_t b = 0; len && b * len < n; b++) {
    float *w = want + b * len;
    const uint64_t off = offs[b];
    const size_t m = n - b * len < len ? n - b * len : len;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < m; i++)
      w[i] = pl_rng_uniform(seed, off + i, -1.f, 1.f);
  }
  pl_check_arrays(c, what, got, PL_ELEM_F32, want, PL_ELEM_F32, n, PL_F32,
                  PL_CHECK_EXACT);
  free(want);
}

void pl_check_gemm(pl_check *c, const char *what, const void *A, const void *B,
                   const void *C, pl_dtype dt, int64_t G, int ns,
                   uint64_t seed) {
  const pl_elem e = pl_elem_of(dt);
  const size_t g = (size_t)G;
  double *got = malloc(sizeof(double) * (size_t)(ns + 1));
  double *ref = malloc(sizeof(double) * (size_t)(ns + 1));
  PL_ASSERT(got && ref);
  for (int t = 0; t < ns; t++) {
    size_t i = pl_rng_u32(seed, 2 * (uint64_t)t) % g;
    size_t j = pl_rng_u32(seed, 2 * (uint64_t)t + 1) % g;
    if (t < 2)
      i = j = t ? g - 1 : 0; /* the corners always */
    ref[t] = 0;
    for (size_t k = 0; k < g; k++)
      ref[t] += get(A, e, i * g + k) * get(B, e, k * g + j);
    got[t] = get(C, e, i * g + j);
  }
  pl_check_arrays(c, what, got, PL_ELEM_F64, ref, PL_ELEM_F64, (size_t)ns, dt,
                  G);
  free(got);
  free(ref);
}
