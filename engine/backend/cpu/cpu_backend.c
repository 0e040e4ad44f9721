/* cpu_backend.c — the reference device.
 *
 * The "device" arena is ordinary memory kept apart from the (pinned) host
 * arena only by the tracker; copies are memcpy; every kernel runs to
 * completion on the calling thread (OpenMP inside) before it returns, so work
 * issued on any stream runs in issue order — a valid serialization of the
 * schedule the CUDA backend runs concurrently.  Events stamp the monotonic
 * clock.  GEMM goes through OpenBLAS (cblas_sgemm); bf16 operands are widened
 * to f32 first (exact), accumulated in f32 and the result rounded once to
 * bf16, as the CUDA backend's cuBLAS call does. */
#ifndef PL_HAVE_BLAS
#define PL_HAVE_BLAS 1
#endif
#if PL_HAVE_BLAS
#include <cblas.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/kernels.h"
#include "plateau/host_device.h"

#if PL_HAVE_BLAS
char *openblas_get_config(void);
#else
/* BLAS=none builds (machines without OpenBLAS): a plain OpenMP loop with the
 * same row-major semantics as cblas_sgemm. */
static void plain_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        float alpha, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float beta, float *c,
                        int64_t ldc) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; i++) {
    float *ci = c + i * ldc;
    for (int64_t j = 0; j < n; j++)
      ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
    for (int64_t p = 0; p < k; p++) {
      float av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
      if (tb)
        for (int64_t j = 0; j < n; j++)
          ci[j] += av * b[j * ldb + p];
      else
        for (int64_t j = 0; j < n; j++)
          ci[j] += av * b[p * ldb + j];
    }
  }
}
#endif

static pl_status cpu_init(pl_dev *dev, int ordinal) {
  return PL_OK;
}
static void cpu_fini(pl_dev *dev) {}

static pl_status cpu_info(const pl_dev *dev, pl_dev_info *out) {
  snprintf(out->name, sizeof out->name, "cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) {
          c++;
          while (*c == ' ')
            c++;
          c[strcspn(c, "\n")] = '\0';
          snprintf(out->name, sizeof out->name, "%s", c);
        }
        break;
      }
    fclose(f);
  }
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  out->total_bytes = (pages > 0 && psz > 0) ? (size_t)pages * (size_t)psz : 0;
  out->sm_count = (int)sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(out->driver, sizeof out->driver, "-");
  snprintf(out->runtime, sizeof out->runtime, "-");
#if PL_HAVE_BLAS
  const char *cfg = openblas_get_config();
#else
  const char *cfg = "none (BLAS=none build: plain loops)";
#endif
  /* "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." -> "OpenBLAS 0.3.21"; "none (...)" ->
   * "none" */
  /* sized so that "name num" always fits out->blas (64): 39 + 1 + 15 */
  char name[40] = "OpenBLAS", num[16] = "";
  if (cfg)
    sscanf(cfg, "%39[^ (] %15[0-9.]", name, num);
  snprintf(out->blas, sizeof out->blas, "%s%s%s", name, num[0] ? " " : "", num);
  return PL_OK;
}

static pl_status cpu_sync(pl_dev *dev) {
  return PL_OK;
}

static pl_status cpu_raw_alloc(pl_dev *dev, pl_arena a, size_t bytes,
                               pl_stream *s, void **out) {
  size_t rounded = (bytes + 63) & ~(size_t)63;
  void *p = aligned_alloc(64, rounded ? rounded : 64);
  if (!p)
    return pl_set_error(PL_ENOMEM, "host allocation of %zu bytes failed",
                        bytes);
  *out = p;
  return PL_OK;
}

static void cpu_raw_free(pl_dev *dev, pl_arena a, void *p, pl_stream *s) {
  free(p);
}

static pl_status cpu_stream_create(pl_dev *dev, pl_stream *s) {
  s->native = NULL;
  return PL_OK;
}
static void cpu_stream_destroy(pl_stream *s) {}
static pl_status cpu_stream_sync(pl_stream *s) {
  return PL_OK;
}
static pl_status cpu_event_create(pl_dev *dev, pl_event *e) {
  return PL_OK;
}
static void cpu_event_destroy(pl_event *e) {}
static pl_status cpu_event_record(pl_event *e, pl_stream *s) {
  e->stamp_ns = pl_now_ns();
  return PL_OK;
}
static pl_status cpu_stream_wait(pl_stream *s, pl_event *e) {
  return PL_OK;
}
static pl_status cpu_event_sync(pl_event *e) {
  return PL_OK;
}
static int cpu_event_done(pl_event *e) {
  return 1;
}
static pl_status cpu_event_elapsed_ms(pl_event *a, pl_event *b, float *ms) {
  *ms = (float)((double)((int64_t)(b->stamp_ns - a->stamp_ns)) * 1e-6);
  return PL_OK;
}

/* ---- kernels ------------------------------------------------------------- */

pl_status pl__cpu_rng_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                           uint64_t seed, uint64_t offset, pl_dist dist,
                           float a, float b) {
  if (dt == PL_F32) {
    float *d = dst;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      d[i] = dist == PL_DIST_UNIFORM ? pl_rng_uniform(seed, offset + i, a, b)
                                     : pl_rng_normal(seed, offset + i, a, b);
  } else {
    pl_bf16 *d = dst;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      d[i] = pl_f32_to_bf16(dist == PL_DIST_UNIFORM
                                ? pl_rng_uniform(seed, offset + i, a, b)
                                : pl_rng_normal(seed, offset + i, a, b));
  }
  return PL_OK;
}

pl_status pl__cpu_fill(pl_stream *s, void *dst, pl_dtype dt, size_t n,
                       double value) {
  switch (dt) {
  case PL_F32: {
    float *d = dst, v = (float)value;
    for (size_t i = 0; i < n; i++)
      d[i] = v;
  } break;
  case PL_BF16: {
    pl_bf16 *d = dst, v = pl_f32_to_bf16((float)value);
    for (size_t i = 0; i < n; i++)
      d[i] = v;
  } break;
  case PL_I32: {
    int32_t *d = dst, v = (int32_t)value;
    for (size_t i = 0; i < n; i++)
      d[i] = v;
  } break;
  case PL_I64: {
    int64_t *d = dst, v = (int64_t)value;
    for (size_t i = 0; i < n; i++)
      d[i] = v;
  } break;
  }
  return PL_OK;
}

pl_status pl__cpu_convert(pl_stream *s, void *dst, pl_dtype dst_dt,
                          const void *src, pl_dtype src_dt, size_t n) {
  if (dst_dt == src_dt) {
    memmove(dst, src, n * pl_dtype_size(dst_dt));
  } else if (dst_dt == PL_BF16) {
    const float *x = src;
    pl_bf16 *y = dst;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      y[i] = pl_f32_to_bf16(x[i]);
  } else {
    const pl_bf16 *x = src;
    float *y = dst;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      y[i] = pl_bf16_to_f32(x[i]);
  }
  return PL_OK;
}

pl_status pl__cpu_scale(pl_stream *s, void *x, pl_dtype dt, size_t n,
                        float alpha) {
  if (dt == PL_F32) {
    float *v = x;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      v[i] *= alpha;
  } else {
    pl_bf16 *v = x;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      v[i] = pl_f32_to_bf16(pl_bf16_to_f32(v[i]) * alpha);
  }
  return PL_OK;
}

pl_status pl__cpu_axpy(pl_stream *s, void *y, pl_dtype y_dt, const void *x,
                       pl_dtype x_dt, size_t n, float alpha) {
  if (y_dt == PL_F32 && x_dt == PL_F32) {
    float *yy = y;
    const float *xx = x;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      yy[i] = yy[i] + alpha * xx[i];
  } else if (y_dt == PL_F32) {
    float *yy = y;
    const pl_bf16 *xx = x;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      yy[i] = yy[i] + alpha * pl_bf16_to_f32(xx[i]);
  } else {
    pl_bf16 *yy = y;
    const pl_bf16 *xx = x;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      yy[i] =
          pl_f32_to_bf16(pl_bf16_to_f32(yy[i]) + alpha * pl_bf16_to_f32(xx[i]));
  }
  return PL_OK;
}

/* Widen a rows×cols bf16 matrix (leading dimension ld) into a dense f32 one. */
static float *widen(const pl_bf16 *src, int64_t rows, int64_t cols,
                    int64_t ld) {
  float *d = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *d);
  if (!d)
    return NULL;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      d[r * cols + c] = pl_bf16_to_f32(src[r * ld + c]);
  return d;
}

/* x rounded to TF32 (8-bit exponent, 10-bit mantissa): nearest, ties away
 * from zero, as the tensor cores' cvt.rna.tf32.f32; inf and NaN kept. */
static float to_tf32(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u)
    u = (u + 0x1000u) & ~0x1fffu;
  memcpy(&x, &u, 4);
  return x;
}

/* A rows×cols f32 matrix (leading dimension ld) rounded to TF32, dense. */
static float *round_tf32(const float *src, int64_t rows, int64_t cols,
                         int64_t ld) {
  float *d = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *d);
  if (!d)
    return NULL;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      d[r * cols + c] = to_tf32(src[r * ld + c]);
  return d;
}

/* One row-major GEMM on f32 (A, B possibly widened, or rounded to TF32 when
 * tf32) into C (f32 or bf16). */
static pl_status gemm_one(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                          float alpha, const void *A, int64_t lda,
                          const void *B, int64_t ldb, float beta, void *C,
                          int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt,
                          bool tf32) {
  const float *a = A, *b = B;
  float *wa = NULL, *wb = NULL, *wc = NULL;
  int64_t la = lda, lb = ldb;
  pl_status st = PL_OK;
  if (ab_dt == PL_BF16 || tf32) {
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    wa = ab_dt == PL_BF16 ? widen(A, ar, ac, lda) : round_tf32(A, ar, ac, lda);
    wb = ab_dt == PL_BF16 ? widen(B, br, bc, ldb) : round_tf32(B, br, bc, ldb);
    if (!wa || !wb) {
      st = pl_set_error(PL_ENOMEM,
                        "cpu gemm: out of host memory widening bf16 operands");
      goto out;
    }
    a = wa, b = wb, la = ac, lb = bc;
  }
  float *c = C;
  int64_t lc = ldc;
  if (c_dt == PL_BF16) {
    wc = malloc((size_t)(m * n) * sizeof *wc);
    if (!wc) {
      st = pl_set_error(PL_ENOMEM,
                        "cpu gemm: out of host memory for a bf16 result");
      goto out;
    }
    const pl_bf16 *cb = C;
    for (int64_t r = 0; r < m; r++)
      for (int64_t q = 0; q < n; q++)
        wc[r * n + q] = beta != 0.0f ? pl_bf16_to_f32(cb[r * ldc + q]) : 0.0f;
    c = wc, lc = n;
  }
  if (k == 0) {
    for (int64_t r = 0; r < m; r++)
      for (int64_t q = 0; q < n; q++)
        c[r * lc + q] = beta == 0.0f ? 0.0f : beta * c[r * lc + q];
  } else {
#if PL_HAVE_BLAS
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
                (blasint)k, alpha, a, (blasint)la, b, (blasint)lb, beta, c,
                (blasint)lc);
#else
    plain_sgemm(ta, tb, m, n, k, alpha, a, la, b, lb, beta, c, lc);
#endif
  }
  if (c_dt == PL_BF16) {
    pl_bf16 *cb = C;
    for (int64_t r = 0; r < m; r++)
      for (int64_t q = 0; q < n; q++)
        cb[r * ldc + q] = pl_f32_to_bf16(wc[r * n + q]);
  }
out:
  free(wa);
  free(wb);
  free(wc);
  return st;
}

pl_status pl__cpu_gemm_strided_batched(pl_stream *s, bool ta, bool tb,
                                       int64_t m, int64_t n, int64_t k,
                                       float alpha, const void *A, int64_t lda,
                                       int64_t sa, const void *B, int64_t ldb,
                                       int64_t sb, float beta, void *C,
                                       int64_t ldc, int64_t sc, int64_t batch,
                                       pl_dtype ab_dt, pl_dtype c_dt) {
  size_t esz = pl_dtype_size(ab_dt), csz = pl_dtype_size(c_dt);
  for (int64_t i = 0; i < batch; i++)
    PL_TRY(gemm_one(ta, tb, m, n, k, alpha,
                    (const char *)A + (size_t)(i * sa) * esz, lda,
                    (const char *)B + (size_t)(i * sb) * esz, ldb, beta,
                    (char *)C + (size_t)(i * sc) * csz, ldc, ab_dt, c_dt,
                    ab_dt == PL_F32 && s->tf32));
  return PL_OK;
}

pl_status pl__cpu_memcpy_async(pl_stream *s, void *dst, const void *src,
                               size_t bytes) {
  memmove(dst, src, bytes);
  return PL_OK;
}

pl_status pl__cpu_memcpy_peer_async(pl_stream *s, void *dst,
                                    const pl_dev *dst_dev, const void *src,
                                    const pl_dev *src_dev, size_t bytes) {
  memmove(dst, src, bytes);
  return PL_OK;
}

/* Naive reference for tests: double accumulation, any transpose. */
pl_status pl__cpu_gemm_ref(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                           float alpha, const void *A, int64_t lda,
                           const void *B, int64_t ldb, float beta, void *C,
                           int64_t ldc, pl_dtype ab_dt, pl_dtype c_dt) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < k; p++) {
        int64_t ia = ta ? p * lda + i : i * lda + p;
        int64_t ib = tb ? j * ldb + p : p * ldb + j;
        double av = ab_dt == PL_F32 ? ((const float *)A)[ia]
                                    : pl_bf16_to_f32(((const pl_bf16 *)A)[ia]);
        double bv = ab_dt == PL_F32 ? ((const float *)B)[ib]
                                    : pl_bf16_to_f32(((const pl_bf16 *)B)[ib]);
        acc += av * bv;
      }
      double old = 0;
      if (beta != 0.0f)
        old = c_dt == PL_F32 ? ((float *)C)[i * ldc + j]
                             : pl_bf16_to_f32(((pl_bf16 *)C)[i * ldc + j]);
      double v = alpha * acc + beta * old;
      if (c_dt == PL_F32)
        ((float *)C)[i * ldc + j] = (float)v;
      else
        ((pl_bf16 *)C)[i * ldc + j] = pl_f32_to_bf16((float)v);
    }
  return PL_OK;
}

const pl__backend_ops pl__cpu_backend_ops = {
    .init = cpu_init,
    .fini = cpu_fini,
    .info = cpu_info,
    .sync = cpu_sync,
    .raw_alloc = cpu_raw_alloc,
    .raw_free = cpu_raw_free,
    .pool_high = NULL,
    .pool_reset = NULL,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait = cpu_stream_wait,
    .event_sync = cpu_event_sync,
    .event_done = cpu_event_done,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .rng_fill = pl__cpu_rng_fill,
    .fill = pl__cpu_fill,
    .convert = pl__cpu_convert,
    .scale = pl__cpu_scale,
    .axpy = pl__cpu_axpy,
    .gemm_strided_batched = pl__cpu_gemm_strided_batched,
    .memcpy_async = pl__cpu_memcpy_async,
    .memcpy_peer_async = pl__cpu_memcpy_peer_async,
};
