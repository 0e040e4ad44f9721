/* test_adamw_simd.c — the CPU backend's SIMD AdamW (backend/adamw_kernels.h)
 * equals the reference bit for bit on every code path, each forced in turn
 * (AVX-512, AVX2, scalar; a path this CPU lacks is reported as skipped, and
 * forcing it is PL_EUNSUPPORTED), for sizes around every vector width and
 * block boundary, 1..3 threads, f32 and bf16 gradients, with and without the
 * bf16 refresh, on adversarial values (bf16 ties, overflow, denormals, NaN,
 * inf); with the weights aligned (non-temporal stores, or ordinary ones
 * with PL_SIMD_W_CACHED) at every offset of a vector, and written in place
 * over their bf16 gradients; threads' ranges of whole 4 KiB pages (n of
 * 4099 over 1..3 threads) and of 64-element blocks (smaller n); PLATEAU_SIMD
 * selects the path. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/adamw_kernels.h"
#include "core/check_run.h"
#include "ops/adamw_testlib.h"

static const size_t sizes[] = {0,  1,  7,  8,   9,   15,  16,   17,  31,
                               63, 64, 65, 127, 128, 129, 1000, 4099};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static void fill(float *p, float *m, float *v, float *g, size_t n) {
  for (size_t i = 0; i < n; i++) {
    tl_init(77, i, &p[i], &m[i], &v[i]);
    g[i] = tl_grad(77, 1, i);
    switch (i % 13) {
    case 0:
      p[i] = 1.00390625f;
      break;
    case 1:
      p[i] = -3e38f;
      g[i] = 1e30f;
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
      p[i] = INFINITY;
      break;
    case 5:
      m[i] = -NAN;
      break;
    default:
      break;
    }
  }
}

/* Aligned weights (the non-temporal stores), at every offset of a vector
 * (aligned and not), and the weights written over their own bf16 gradients
 * in place (the hybrid's host slot), 1..3 threads, against the reference
 * from (p, m, v, gb) of N elements (rp, rm, rv, rw: scratch); an unknown
 * flag refused. */
static void check_aligned(pl_simd_path path, const pl_adamw_hparams *hpp,
                          const float *p, const float *m, const float *v,
                          const pl_bf16 *gb, float *rp, float *rm, float *rv,
                          pl_bf16 *rw, size_t N) {
  const pl_adamw_hparams hp = *hpp;
  char msg[400];
  /* C11: an aligned_alloc size is a multiple of the alignment */
  const size_t fb = (N * 4 + 64 + 63) / 64 * 64,
               wb = (N * 2 + 128 + 63) / 64 * 64;
  float *ap = aligned_alloc(64, fb), *am = aligned_alloc(64, fb),
        *av = aligned_alloc(64, fb);
  pl_bf16 *aw = aligned_alloc(64, wb);
  ck_assert(ap && am && av && aw);
  for (size_t off = 0; off < 24; off += 5)
    for (int nt = 1; nt <= 3; nt++)
      for (int inplace = 0; inplace < 4; inplace++) {
        size_t n = N - off;
        const unsigned flags = inplace >= 2 ? PL_SIMD_W_CACHED : 0;
        pl_adamw_scalars k = pl_adamw_scalars_make(&hp, 3, 1.0f);
        memcpy(ap + off, p, n * 4);
        memcpy(am + off, m, n * 4);
        memcpy(av + off, v, n * 4);
        memcpy(rp, p, n * 4);
        memcpy(rm, m, n * 4);
        memcpy(rv, v, n * 4);
        pl_adamw_ref_update(rp, rm, rv, gb, PL_BF16, rw, n, &k);
        const void *gg = gb;
        if (inplace % 2) {
          memcpy(aw + off, gb, n * 2);
          gg = aw + off;
        } else {
          memset(aw, 0xff, N * 2 + 128);
        }
        ck_assert_int_eq(pl__cpu_adamw_simd_ex(path, nt, ap + off, am + off,
                                               av + off, gg, PL_BF16, aw + off,
                                               n, &k, flags),
                         PL_OK);
        ck_assert_msg(tl_cmp_f32("p", ap + off, rp, n, msg, sizeof msg) &&
                          tl_cmp_f32("m", am + off, rm, n, msg, sizeof msg) &&
                          tl_cmp_f32("v", av + off, rv, n, msg, sizeof msg) &&
                          tl_cmp_bf16("w", aw + off, rw, n, msg, sizeof msg),
                      "path %s aligned off=%zu threads=%d inplace=%d "
                      "flags=%u: %s",
                      pl_simd_path_name(path), off, nt, inplace % 2, flags,
                      msg);
      }
  /* an unknown flag is refused, naming the flags allowed */
  {
    pl_adamw_scalars k = pl_adamw_scalars_make(&hp, 1, 1.0f);
    ck_assert_int_eq(
        pl__cpu_adamw_simd_ex(path, 1, ap, am, av, gb, PL_BF16, aw, 16, &k, 2u),
        PL_EINVAL);
    ck_assert_ptr_nonnull(strstr(pl_last_error(), "PL_SIMD_W_CACHED"));
  }
  free(ap);
  free(am);
  free(av);
  free(aw);
}

static void check_path(pl_simd_path path) {
  if (!pl_simd_path_supported(path)) {
    printf("skipped: SIMD path %s not supported by this CPU\n",
           pl_simd_path_name(path));
    float x = 0;
    pl_adamw_scalars k = {0};
    ck_assert_int_eq(
        pl__cpu_adamw_simd(path, 1, &x, &x, &x, &x, PL_F32, NULL, 1, &k),
        PL_EUNSUPPORTED);
    return;
  }
  pl_adamw_hparams hp = pl_adamw_hparams_default();
  hp.weight_decay = 0.05;
  const size_t N = 4099;
  float *p = malloc(N * 4), *m = malloc(N * 4), *v = malloc(N * 4),
        *g = malloc(N * 4);
  float *sp = malloc(N * 4), *sm = malloc(N * 4), *sv = malloc(N * 4),
        *rp = malloc(N * 4), *rm = malloc(N * 4), *rv = malloc(N * 4);
  pl_bf16 *gb = malloc(N * 2), *sw = malloc(N * 2 + 2), *rw = malloc(N * 2);
  fill(p, m, v, g, N);
  for (size_t i = 0; i < N; i++)
    gb[i] = pl_f32_to_bf16(g[i]);
  char msg[400];
  int checked = 0;
  for (int si = 0; si < NSIZES; si++)
    for (int nt = 1; nt <= 3; nt++)
      for (int gt = 0; gt < 2; gt++)
        for (int ww = 0; ww < 2; ww++) {
          size_t n = sizes[si];
          pl_dtype gdt = gt ? PL_BF16 : PL_F32;
          const void *gg = gt ? (const void *)gb : (const void *)g;
          pl_adamw_scalars k =
              pl_adamw_scalars_make(&hp, 1 + si, si % 2 ? 0.5f : 1.0f);
          memcpy(sp, p, N * 4);
          memcpy(sm, m, N * 4);
          memcpy(sv, v, N * 4);
          memcpy(rp, p, N * 4);
          memcpy(rm, m, N * 4);
          memcpy(rv, v, N * 4);
          memset(sw, 0xff, N * 2 + 2);
          ck_assert_int_eq(pl__cpu_adamw_simd(path, nt, sp, sm, sv, gg, gdt,
                                              ww ? sw : NULL, n, &k),
                           PL_OK);
          pl_adamw_ref_update(rp, rm, rv, gg, gdt, rw, n, &k);
          /* beyond n nothing moved */
          ck_assert_msg(
              tl_cmp_f32("p", sp, rp, n, msg, sizeof msg) &&
                  tl_cmp_f32("m", sm, rm, n, msg, sizeof msg) &&
                  tl_cmp_f32("v", sv, rv, n, msg, sizeof msg) &&
                  (!ww || tl_cmp_bf16("w", sw, rw, n, msg, sizeof msg)),
              "path %s n=%zu threads=%d %s: %s", pl_simd_path_name(path), n, nt,
              pl_dtype_name(gdt), msg);
          ck_assert(memcmp(sp + n, p + n, (N - n) * 4) == 0);
          ck_assert_uint_eq(sw[N], 0xffff);
          checked++;
        }
  ck_assert_int_eq(checked, NSIZES * 12);
  check_aligned(path, &hp, p, m, v, gb, rp, rm, rv, rw, N);
  free(p);
  free(m);
  free(v);
  free(g);
  free(sp);
  free(sm);
  free(sv);
  free(rp);
  free(rm);
  free(rv);
  free(gb);
  free(sw);
  free(rw);
}

START_TEST(path_scalar) {
  check_path(PL_SIMD_SCALAR);
}
END_TEST
START_TEST(path_avx2) {
  check_path(PL_SIMD_AVX2);
}
END_TEST
START_TEST(path_avx512) {
  check_path(PL_SIMD_AVX512);
}
END_TEST

START_TEST(path_selection) {
  pl_simd_path p;
  unsetenv("PLATEAU_SIMD");
  ck_assert_int_eq(pl_simd_path_resolve(PL_SIMD_AUTO, &p), PL_OK);
  ck_assert(pl_simd_path_supported(p) && p != PL_SIMD_AUTO);
  if (pl_simd_path_supported(PL_SIMD_AVX512))
    ck_assert_int_eq(p, PL_SIMD_AVX512);
  else if (pl_simd_path_supported(PL_SIMD_AVX2))
    ck_assert_int_eq(p, PL_SIMD_AVX2);
  setenv("PLATEAU_SIMD", "scalar", 1);
  ck_assert_int_eq(pl_simd_path_resolve(PL_SIMD_AUTO, &p), PL_OK);
  ck_assert_int_eq(p, PL_SIMD_SCALAR);
  setenv("PLATEAU_SIMD", "sse9", 1);
  ck_assert_int_eq(pl_simd_path_resolve(PL_SIMD_AUTO, &p), PL_EINVAL);
  ck_assert_ptr_nonnull(strstr(pl_last_error(), "sse9"));
  unsetenv("PLATEAU_SIMD");
  ck_assert_int_eq(pl_simd_path_parse("avx512", &p), PL_OK);
  ck_assert_int_eq(p, PL_SIMD_AVX512);
}
END_TEST

int main(void) {
  const TTest *tests[] = {path_scalar, path_avx2, path_avx512, path_selection,
                          NULL};
  return pl_check_suite("adamw_simd", 120, tests, NULL, NULL, CK_FORK, 0) ? 1
                                                                          : 0;
}
