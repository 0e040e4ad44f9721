/* test_moe_gemm_grouped.c — the MoE layer's grouped GEMM
 * (pl__moe_gemm_grouped, backend/moe_kernels.h) equals a loop of its
 * per-group GEMMs (pl__moe_gemm): on the CPU backend bit for bit, on CUDA
 * (one cublasGemmGroupedBatchedEx) within f32 accumulation's tolerance of the
 * CUDA loop, for the layer's three kinds (gate/up, down: bf16 out, beta 0 on
 * a NaN-poisoned C; weight gradient: transposed A, f32 C accumulated with
 * beta 1) over groups of uneven rows, runs of equal shapes, an empty group
 * and one with k = 0, with the gaps between the C blocks left untouched;
 * where cuBLAS has no grouped kernel for the types the call answers
 * PL_EUNSUPPORTED and writes nothing.  Bad input: n < 0, a leading dimension
 * too small.  Without a GPU the CUDA half prints "skipped: no CUDA device".
 * CK_NOFORK: no fork after a CUDA context. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check_run.h"
#include "ops/moe_internal.h"
#include "plateau/host_device.h"
#include "plateau/plateau.h"

#define NG 9
/* rows of each group: uneven, a run of equal ones, an empty group, and for
 * the weight gradient (k = rows) a k = 0 one */
static const int64_t rows[NG] = {37, 64, 64, 64, 0, 129, 1, 17, 17};

typedef struct gcase {
  int kind; /* 0 up (m x H)(H x I), 1 down (m x I)(I x H), 2 wgrad */
  int64_t H, I;
} gcase;

/* Element i of a buffer of dtype dt as a double. */
static double el(const void *p, pl_dtype dt, size_t i) {
  return dt == PL_F32 ? (double)((const float *)p)[i]
                      : (double)pl_bf16_to_f32(((const pl_bf16 *)p)[i]);
}

/* The descriptors of a case over X (rows x max(H, I)), Y (rows x max), W
 * (NG x H x I), C blocks NG x (H x I) with a gap of 3 elements after each. */
static void descs(const gcase *k, char *X, char *Y, char *W, char *C,
                  size_t b, size_t cb, pl__moe_gemm_desc *d) {
  const int64_t H = k->H, I = k->I;
  size_t r0 = 0;
  for (int g = 0; g < NG; g++) {
    size_t cw = (size_t)g * (size_t)(H * I + 3);
    const char *Wg = W + (size_t)g * (size_t)(H * I) * b;
    if (k->kind == 0)
      d[g] = (pl__moe_gemm_desc){rows[g], I, H, X + r0 * H * b, Wg,
                                 C + cw * cb, H, I, I};
    else if (k->kind == 1)
      d[g] = (pl__moe_gemm_desc){rows[g], H, I, X + r0 * I * b, Wg,
                                 C + cw * cb, I, H, H};
    else
      d[g] = (pl__moe_gemm_desc){H, I, rows[g], X + r0 * H * b,
                                 Y + r0 * I * b, C + cw * cb, H, I, I};
    r0 += (size_t)rows[g];
  }
}

/* One case on dev: grouped into C1, the loop into C2 (both from the same
 * start), the results on the host in out1, out2; returns the grouped call's
 * status (PL_EUNSUPPORTED: out1 must equal the start). */
static pl_status run_case(pl_dev *dev, const gcase *k, pl_dtype dt,
                          void *out1, void *out2, void *start, size_t *ncp) {
  pl_stream *s = pl_dev_stream(dev);
  const bool wg = k->kind == 2;
  const pl_dtype cdt = wg ? PL_F32 : dt;
  const size_t b = pl_dtype_size(dt), cb = pl_dtype_size(cdt);
  size_t R = 0;
  for (int g = 0; g < NG; g++) R += (size_t)rows[g];
  const size_t wd = (size_t)(k->H > k->I ? k->H : k->I);
  const size_t nc = (size_t)NG * (size_t)(k->H * k->I + 3);
  *ncp = nc;
  void *X, *Y, *W, *C1, *C2;
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, R * wd * b, "t", &X), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, R * wd * b, "t", &Y), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE,
                            (size_t)NG * (size_t)(k->H * k->I) * b, "t", &W),
                   PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, nc * cb, "t", &C1), PL_OK);
  ck_assert_int_eq(pl_alloc(dev, PL_ARENA_DEVICE, nc * cb, "t", &C2), PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, X, dt, R * wd, 5, 0, PL_DIST_NORMAL, 0, 1),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, Y, dt, R * wd, 6, 0, PL_DIST_NORMAL, 0, 1),
                   PL_OK);
  ck_assert_int_eq(pl_rng_fill(s, W, dt, (size_t)NG * (size_t)(k->H * k->I),
                               7, 0, PL_DIST_NORMAL, 0, 0.1f),
                   PL_OK);
  if (wg) /* the accumulator: read and added to */
    ck_assert_int_eq(
        pl_rng_fill(s, C1, cdt, nc, 8, 0, PL_DIST_NORMAL, 0, 1), PL_OK);
  else /* NaN: never read (beta 0), gaps must keep it */
    ck_assert_int_eq(pl_fill(s, C1, cdt, nc, NAN), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s, C2, C1, nc * cb), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s, start, C1, nc * cb), PL_OK);
  pl__moe_gemm_desc d1[NG], d2[NG];
  descs(k, X, Y, W, C1, b, cb, d1);
  descs(k, X, Y, W, C2, b, cb, d2);
  pl_status st = pl__moe_gemm_grouped(s, wg, false, NG, d1, wg ? 1.0f : 0.0f,
                                      dt, cdt);
  for (int g = 0; g < NG; g++)
    ck_assert_int_eq(pl__moe_gemm(s, wg, false, d2[g].m, d2[g].n, d2[g].k,
                                  1.0f, d2[g].A, d2[g].lda, d2[g].B,
                                  d2[g].ldb, wg ? 1.0f : 0.0f, d2[g].C,
                                  d2[g].ldc, dt, cdt),
                     PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s, out1, C1, nc * cb), PL_OK);
  ck_assert_int_eq(pl_memcpy_async(s, out2, C2, nc * cb), PL_OK);
  ck_assert_int_eq(pl_stream_sync(s), PL_OK);
  pl_free(dev, X);
  pl_free(dev, Y);
  pl_free(dev, W);
  pl_free(dev, C1);
  pl_free(dev, C2);
  return st;
}

static void check_backend(pl_backend be) {
  pl_dev *dev;
  ck_assert_int_eq(pl_dev_create(be, 0, &dev), PL_OK);
  const gcase cases[] = {{0, 96, 80}, {1, 96, 80}, {2, 96, 80}, {2, 64, 128}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
    for (int di = 0; di < 2; di++) {
      const pl_dtype dt = di ? PL_BF16 : PL_F32;
      const pl_dtype cdt = cases[ci].kind == 2 ? PL_F32 : dt;
      const size_t cb = pl_dtype_size(cdt);
      const size_t cap = (size_t)NG * (96 * 128 + 3) * 4;
      void *o1 = malloc(cap), *o2 = malloc(cap), *o0 = malloc(cap);
      ck_assert(o1 && o2 && o0);
      size_t nc = 0;
      pl_status st = run_case(dev, &cases[ci], dt, o1, o2, o0, &nc);
      const char *k = cases[ci].kind == 0   ? "up"
                      : cases[ci].kind == 1 ? "down"
                                            : "wgrad";
      if (st == PL_EUNSUPPORTED) {
        ck_assert(be == PL_BACKEND_CUDA);
        printf("  %s %s: no grouped kernel (%s); nothing written\n", k,
               pl_dtype_name(dt), pl_last_error());
        ck_assert(memcmp(o1, o0, nc * cb) == 0);
        free(o1), free(o2), free(o0);
        continue;
      }
      ck_assert_msg(st == PL_OK, "%s %s: %s", k, pl_dtype_name(dt),
                    pl_last_error());
      if (be == PL_BACKEND_CPU) { /* the same loop: the same bits */
        ck_assert_msg(memcmp(o1, o2, nc * cb) == 0, "cpu %s %s: bits differ",
                      k, pl_dtype_name(dt));
      } else { /* another kernel: f32 accumulation in another order */
        const double rtol = cdt == PL_BF16 ? 1.0 / 64 : 1e-4;
        size_t bad = 0, first = 0;
        double worst = 0;
        for (size_t i = 0; i < nc; i++) {
          double a = el(o1, cdt, i), r = el(o2, cdt, i);
          if (isnan(r)) { /* gaps and NaN-poisoned C only where never written */
            if (!isnan(a) && !bad++) first = i;
            continue;
          }
          double e = fabs(a - r);
          if (e > worst) worst = e;
          if (!(e <= rtol * fmax(1.0, fabs(r))) && !bad++) first = i;
        }
        printf("  cuda %s %s: %zu elements, max abs diff %.3g vs the loop\n",
               k, pl_dtype_name(dt), nc, worst);
        ck_assert_msg(bad == 0, "cuda %s %s: %zu elements off, first %zu", k,
                      pl_dtype_name(dt), bad, first);
      }
      free(o1), free(o2), free(o0);
    }
  /* bad input */
  pl__moe_gemm_desc d = {4, 4, 4, NULL, NULL, NULL, 2, 4, 4};
  ck_assert_int_eq(pl__moe_gemm_grouped(pl_dev_stream(dev), false, false, -1,
                                        &d, 0.0f, PL_F32, PL_F32),
                   PL_EINVAL);
  if (be == PL_BACKEND_CUDA) /* lda 2 < k 4 */
    ck_assert_int_eq(pl__moe_gemm_grouped(pl_dev_stream(dev), false, false, 1,
                                          &d, 0.0f, PL_F32, PL_F32),
                     PL_EINVAL);
  pl_dev_destroy(dev);
}

START_TEST(grouped_cpu) {
  check_backend(PL_BACKEND_CPU);
}
END_TEST

START_TEST(grouped_cuda) {
  if (pl_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return;
  }
  check_backend(PL_BACKEND_CUDA);
}
END_TEST

int main(void) {
  const TTest *tests[] = {grouped_cpu, grouped_cuda, NULL};
  return pl_check_suite("moe_gemm_grouped", 300, tests, NULL, NULL, CK_NOFORK,
                        0)
             ? 1
             : 0;
}
