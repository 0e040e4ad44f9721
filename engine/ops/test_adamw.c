/* test_adamw.c — the reference AdamW itself: it is AdamW (against a double-
 * precision evaluation of the same formulas, and a hand-derived first step),
 * the CPU-backend kernel equals it bit for bit on adversarial values and any
 * thread count, the fixed-order norm is independent of threads and equals the
 * documented order, the clip rule, and bad hyperparameters are PL_EINVAL. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/adamw_kernels.h"
#include "core/check_run.h"
#include "ops/adamw_internal.h"
#include "ops/adamw_testlib.h"

static pl_adamw_hparams hp_with(double wd, double clip) {
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  hp.weight_decay = wd;
  hp.max_grad_norm = clip;
  return hp;
}

/* Ten steps of the float reference against the same formulas in double:
 * relative error within a few float ulps per step. */
START_TEST(reference_is_adamw) {
  const size_t n = 1000;
  float p[1000], m[1000], v[1000], g[1000];
  double P[1000], M[1000], V[1000];
  pl_adamw_hparams hp = hp_with(0.1, 0);
  for (size_t i = 0; i < n; i++) {
    tl_init(5, i, &p[i], &m[i], &v[i]);
    P[i] = p[i];
    M[i] = m[i];
    V[i] = v[i];
  }
  double maxrel = 0;
  size_t worst = 0;
  for (int t = 1; t <= 10; t++) {
    for (size_t i = 0; i < n; i++)
      g[i] = tl_grad(5, t, i);
    pl_adamw_scalars k = pl_adamw_scalars_make(&hp, t, 1.0f);
    pl_adamw_ref_update(p, m, v, g, PL_F32, NULL, n, &k);
    double bc1 = 1 - pow(hp.beta1, t), bc2 = 1 - pow(hp.beta2, t);
    for (size_t i = 0; i < n; i++) {
      M[i] = hp.beta1 * M[i] + (1 - hp.beta1) * g[i];
      V[i] = hp.beta2 * V[i] + (1 - hp.beta2) * (double)g[i] * g[i];
      double u =
          (M[i] / bc1) / (sqrt(V[i] / bc2) + hp.eps) + hp.weight_decay * P[i];
      P[i] = P[i] - hp.lr * u;
    }
  }
  for (size_t i = 0; i < n; i++) {
    double r = fabs(p[i] - P[i]) / fabs(P[i]);
    if (r > maxrel)
      maxrel = r, worst = i;
  }
  ck_assert_msg(maxrel < 1e-6,
                "max rel err %.3g at index %zu (got %.9g want "
                "%.9g)",
                maxrel, worst, p[worst], P[worst]);
}
END_TEST

/* First step from m = v = 0: mhat = g, vhat = g², so
 * p1 = p − lr·(g/(|g| + eps) + wd·p). */
START_TEST(first_step_by_hand) {
  pl_adamw_hparams hp = hp_with(0.01, 0);
  float p = 0.75f, m = 0, v = 0, g = -0.125f;
  pl_bf16 w;
  pl_adamw_scalars k = pl_adamw_scalars_make(&hp, 1, 1.0f);
  pl_adamw_ref_update(&p, &m, &v, &g, PL_F32, &w, 1, &k);
  double want = 0.75 - 1e-3 * (-0.125 / (0.125 + 1e-8) + 0.01 * 0.75);
  ck_assert_msg(fabs(p - want) < 1e-7, "p1 %.9g want %.9g", p, want);
  ck_assert_uint_eq(w, pl_f32_to_bf16(p));
  ck_assert_float_eq_tol(m, -0.0125f, 1e-9f);
}
END_TEST

/* Values that reach every branch of the element and the rounding: huge and
 * tiny magnitudes, denormal results, bf16 ties, NaN and inf parameters. */
static void adversarial(float *p, float *m, float *v, float *g, size_t n) {
  for (size_t i = 0; i < n; i++) {
    tl_init(11, i, &p[i], &m[i], &v[i]);
    g[i] = tl_grad(11, 1, i);
    switch (i % 11) {
    case 0:
      p[i] = 1.00390625f;
      break; /* bf16 tie region */
    case 1:
      p[i] = 3e38f;
      g[i] = -1e30f;
      break;
    case 2:
      p[i] = 1e-39f;
      m[i] = 1e-40f;
      v[i] = 1e-44f;
      g[i] = 1e-41f;
      break;
    case 3:
      p[i] = NAN;
      break;
    case 4:
      p[i] = -INFINITY;
      break;
    case 5:
      g[i] = 65504.0f;
      break;
    default:
      break;
    }
  }
}

START_TEST(cpu_kernel_equals_reference) {
  const size_t n = 10007;
  float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4),
        *g = malloc(n * 4), *rp = malloc(n * 4), *rm = malloc(n * 4),
        *rv = malloc(n * 4);
  pl_bf16 *w = malloc(n * 2), *rw = malloc(n * 2), *gb = malloc(n * 2);
  adversarial(p, m, v, g, n);
  for (size_t i = 0; i < n; i++)
    gb[i] = pl_f32_to_bf16(g[i]);
  memcpy(rp, p, n * 4);
  memcpy(rm, m, n * 4);
  memcpy(rv, v, n * 4);
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(PL_BACKEND_CPU, 0, &dev), PL_OK);
  pl_adamw_hparams hp = hp_with(0.05, 0);
  char msg[400];
  for (int gt = 0; gt < 2; gt++) {
    pl_dtype gdt = gt ? PL_BF16 : PL_F32;
    const void *gg = gt ? (const void *)gb : (const void *)g;
    pl_adamw_scalars k = pl_adamw_scalars_make(&hp, 3, 0.75f);
    memset(w, 0xff, n * 2);
    for (int nt = 1; nt <= 3; nt++) {
      omp_set_num_threads(nt);
      float *cp = malloc(n * 4), *cm = malloc(n * 4), *cv = malloc(n * 4);
      memcpy(cp, p, n * 4);
      memcpy(cm, m, n * 4);
      memcpy(cv, v, n * 4);
      ck_assert_int_eq(
          pl__adamw_update(pl_dev_stream(dev), cp, cm, cv, gg, gdt, w, n, &k),
          PL_OK);
      memcpy(rp, p, n * 4);
      memcpy(rm, m, n * 4);
      memcpy(rv, v, n * 4);
      pl_adamw_ref_update(rp, rm, rv, gg, gdt, rw, n, &k);
      ck_assert_msg(tl_cmp_f32("p", cp, rp, n, msg, sizeof msg), "%s", msg);
      ck_assert_msg(tl_cmp_f32("m", cm, rm, n, msg, sizeof msg), "%s", msg);
      ck_assert_msg(tl_cmp_f32("v", cv, rv, n, msg, sizeof msg), "%s", msg);
      ck_assert_msg(tl_cmp_bf16("w", w, rw, n, msg, sizeof msg), "%s", msg);
      free(cp);
      free(cm);
      free(cv);
    }
  }
  /* the NaN parameter stays NaN and its bf16 is a quiet NaN */
  ck_assert(isnan(rp[3]));
  ck_assert_uint_eq(rw[3] & 0x7fc0, 0x7fc0);
  pl_dev_destroy(dev);
  free(p);
  free(m);
  free(v);
  free(g);
  free(rp);
  free(rm);
  free(rv);
  free(w);
  free(rw);
  free(gb);
}
END_TEST

/* The documented order written out once more, independently. */
static double sumsq_documented(const float *g, size_t n) {
  double total = 0;
  for (size_t lo = 0; lo < n; lo += PL_ADAMW_NORM_CHUNK) {
    size_t hi = lo + PL_ADAMW_NORM_CHUNK < n ? lo + PL_ADAMW_NORM_CHUNK : n;
    double lane[32] = {0};
    for (size_t i = lo; i < hi; i++)
      lane[(i - lo) % 32] += (double)g[i] * (double)g[i];
    for (int off = 16; off >= 1; off /= 2)
      for (int l = 0; l < off; l++)
        lane[l] += lane[l + off];
    total += lane[0];
  }
  return total;
}

START_TEST(norm_fixed_order) {
  const size_t n = 3 * PL_ADAMW_NORM_CHUNK + 1237;
  float *g = malloc(n * 4);
  for (size_t i = 0; i < n; i++)
    g[i] = tl_grad(3, 1, i);
  size_t nc = pl_adamw_norm_nchunks(n);
  ck_assert_uint_eq(nc, 4);
  double want = sumsq_documented(g, n), naive = 0;
  for (size_t i = 0; i < n; i++)
    naive += (double)g[i] * g[i];
  double *part = malloc(nc * 8);
  for (int nt = 1; nt <= 3; nt++) {
    omp_set_num_threads(nt);
    pl_adamw_ref_sumsq_partials(g, PL_F32, n, part);
    double s = pl_adamw_sum_partials(part, nc);
    ck_assert_msg(memcmp(&s, &want, 8) == 0, "threads %d: %.17g vs %.17g", nt,
                  s, want);
  }
  ck_assert(fabs(want - naive) <= 1e-12 * naive);
  const void *gp = g;
  double whole = pl_adamw_ref_sumsq(1, &n, &gp, PL_F32);
  ck_assert(memcmp(&whole, &want, 8) == 0);
  ck_assert_uint_eq(pl_adamw_norm_nchunks(0), 0);
  ck_assert_uint_eq(pl_adamw_norm_nchunks(1), 1);
  free(g);
  free(part);
}
END_TEST

START_TEST(clip_rule) {
  pl_adamw_hparams hp = hp_with(0, 2.0);
  ck_assert(pl_adamw_clip_scale(&hp, 1.0) == 1.0f); /* norm 1 < 2 */
  float c = pl_adamw_clip_scale(&hp, 16.0);         /* norm 4 */
  ck_assert(c == (float)(2.0 / (4.0 + 1e-6)));
  hp.max_grad_norm = 0;
  ck_assert(pl_adamw_clip_scale(&hp, 1e30) == 1.0f);
}
END_TEST

/* The schedule against its formulas, by hand: the warm-up's ramp, the
 * constant, linear and cosine decays (their ends, middles and what comes
 * after), and the step's scalars carrying the scheduled lr. */
START_TEST(lr_schedule) {
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  hp.lr = 2e-3;
  ck_assert(pl_adamw_lr_at(&hp, 1) == 2e-3); /* no warm-up, constant */
  ck_assert(pl_adamw_lr_at(&hp, 1000) == 2e-3);
  hp.warmup = 4;
  ck_assert(pl_adamw_lr_at(&hp, 1) == 2e-3 * 1 / 4.0);
  ck_assert(pl_adamw_lr_at(&hp, 3) == 2e-3 * 3 / 4.0);
  ck_assert(pl_adamw_lr_at(&hp, 4) == 2e-3);
  ck_assert(pl_adamw_lr_at(&hp, 5) == 2e-3);
  hp.decay = PL_LR_LINEAR, hp.steps = 14, hp.lr_min = 2e-4;
  ck_assert(pl_adamw_lr_at(&hp, 4) == 2e-3); /* the warm-up's end */
  ck_assert_double_eq_tol(pl_adamw_lr_at(&hp, 9), 2e-4 + 1.8e-3 * 0.5, 1e-15);
  ck_assert_double_eq_tol(pl_adamw_lr_at(&hp, 14), 2e-4, 1e-15);
  ck_assert_double_eq_tol(pl_adamw_lr_at(&hp, 99), 2e-4, 1e-15);
  hp.decay = PL_LR_COSINE;
  ck_assert_double_eq_tol(pl_adamw_lr_at(&hp, 9), 2e-4 + 1.8e-3 * 0.5, 1e-15);
  ck_assert_double_eq_tol(pl_adamw_lr_at(&hp, 6),
                          2e-4 + 1.8e-3 * 0.5 * (1 + cos(acos(-1.0) * 0.2)),
                          1e-15);
  ck_assert_double_eq_tol(pl_adamw_lr_at(&hp, 14), 2e-4, 1e-15);
  ck_assert_double_eq_tol(pl_adamw_lr_at(&hp, 15), 2e-4, 1e-15);
  for (int64_t t = 5; t < 14; t++) /* strictly down after the warm-up */
    ck_assert(pl_adamw_lr_at(&hp, t + 1) < pl_adamw_lr_at(&hp, t));
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_OK);
  const pl_adamw_scalars k = pl_adamw_scalars_make(&hp, 2, 1.0f);
  ck_assert(k.lr == (float)(2e-3 * 2 / 4.0));
}
END_TEST

START_TEST(bad_hparams) {
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_OK);
  hp.beta2 = -0.1;
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "beta2=-0.1"));
  hp = pl_adamw_hparams_default();
  hp.eps = 0;
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_EINVAL);
  hp = pl_adamw_hparams_default();
  hp.weight_decay = -1;
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_EINVAL);
  hp = pl_adamw_hparams_default();
  hp.max_grad_norm = NAN;
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_EINVAL);
  hp = pl_adamw_hparams_default();
  hp.warmup = -1;
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "warmup=-1"));
  hp = pl_adamw_hparams_default();
  hp.decay = PL_LR_COSINE, hp.warmup = 10, hp.steps = 10;
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "steps=10"));
  hp.steps = 11, hp.lr_min = 2 * hp.lr;
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "lr_min="));
  hp.lr_min = 0;
  ck_assert_int_eq(pl_adamw_hparams_check(&hp), PL_OK);
  hp = pl_adamw_hparams_default();
  float x = 1, y = 0, z = 0;
  size_t one = 1;
  float *xp = &x, *yp = &y, *zp = &z;
  const void *gp = &x;
  ck_assert_int_eq(pl_adamw_ref_step(&hp, 0, 1, &one, &xp, &yp, &zp, &gp,
                                     PL_F32, NULL, NULL, NULL),
                   PL_EINVAL);
  ck_assert_int_eq(pl_adamw_ref_step(&hp, 1, 1, &one, &xp, &yp, &zp, &gp,
                                     PL_I32, NULL, NULL, NULL),
                   PL_EINVAL);
}
END_TEST

int main(void) {
  const TTest *tests[] = {reference_is_adamw,
                          first_step_by_hand,
                          cpu_kernel_equals_reference,
                          norm_fixed_order,
                          clip_rule,
                          lr_schedule,
                          bad_hparams,
                          NULL};
  return pl_check_suite("adamw", 60, tests, NULL, NULL, CK_FORK, 0) ? 1 : 0;
}
