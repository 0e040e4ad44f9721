/* adamw_simd.c — the SIMD CPU AdamW (backend/adamw_kernels.h): the update the
 * ZeRO-Offload-style baseline (baselines/cpu_adamw.c) runs on the host, and
 * the CPU share of OffloadStreamAdamW's hybrid (ops/stream_adamw.c).
 *
 * Three code paths of one operation order (ops/adamw.h): AVX-512F (16 lanes)
 * and AVX2 (8 lanes) compiled with target attributes and chosen at run time
 * with __builtin_cpu_supports, and the scalar element function.  The vector
 * paths use only _mm*_{mul,add,sub,div,sqrt}_ps — each correctly rounded per
 * lane, like the scalar operations — and no FMA (the target attributes do not
 * enable it, and ISO C mode never contracts), so every path gives the
 * reference's bits.  bf16 rounding (nearest even, NaN kept quiet) is done
 * with the same integer arithmetic as pl_f32_to_bf16.  Tails shorter than a
 * vector use the scalar element function.  OpenMP threads take contiguous,
 * vector-aligned ranges.
 *
 * Memory traffic (the update is bound by host memory bandwidth, 28 bytes a
 * parameter with bf16 gradients: p, m, v read and written, g read, w
 * written): the bf16 weights are written with non-temporal stores when their
 * range is aligned to a vector of them (they are never read here, so the
 * cache line need not be fetched first: 2 bytes a parameter of read-for-
 * ownership saved; an sfence ends each thread's range), unless the caller
 * writes them into a small buffer that a copy reads next (PL_SIMD_W_CACHED:
 * ordinary stores keep the lines in cache for that copy, and the buffer's
 * lines are there already, so nothing reaches memory).  Every stream is
 * prefetched PL_SIMD_PREFETCH elements ahead, so the hardware prefetchers,
 * which stop at 4 KiB page boundaries, are not waited for at each page, and
 * threads take whole 4 KiB pages of the f32 state where there are enough:
 * no page is shared by two threads' ranges. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/adamw_kernels.h"

/* Elements ahead of the current vector that each stream is prefetched:
 * 1 KiB of f32 state, 16 cache lines in flight per stream. */
#define PL_SIMD_PREFETCH 256

/* ---- paths ------------------------------------------------------------------
 */

const char *const pl_simd_path_names[] = {"auto", "scalar", "avx2", "avx512",
                                          NULL};

const char *pl_simd_path_name(pl_simd_path p) {
  if ((int)p < 0 || (int)p > PL_SIMD_AVX512)
    return "?";
  return pl_simd_path_names[p];
}

pl_status pl_simd_path_parse(const char *s, pl_simd_path *out) {
  for (int i = 0; pl_simd_path_names[i]; i++)
    if (s && strcmp(s, pl_simd_path_names[i]) == 0) {
      *out = (pl_simd_path)i;
      return PL_OK;
    }
  return pl_set_error(PL_EINVAL,
                      "SIMD path '%s': must be auto, scalar, avx2 or avx512",
                      s ? s : "(null)");
}

int pl_simd_path_supported(pl_simd_path p) {
  switch (p) {
  case PL_SIMD_AUTO:
  case PL_SIMD_SCALAR:
    return 1;
  case PL_SIMD_AVX2:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  case PL_SIMD_AVX512:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }
  return 0;
}

pl_status pl_simd_path_resolve(pl_simd_path p, pl_simd_path *out) {
  if (p == PL_SIMD_AUTO) {
    const char *env = getenv("PLATEAU_SIMD");
    if (env && *env && strcmp(env, "auto") != 0) {
      PL_TRY(pl_simd_path_parse(env, &p));
    } else {
      p = pl_simd_path_supported(PL_SIMD_AVX512) ? PL_SIMD_AVX512
          : pl_simd_path_supported(PL_SIMD_AVX2) ? PL_SIMD_AVX2
                                                 : PL_SIMD_SCALAR;
    }
  }
  if ((int)p < PL_SIMD_SCALAR || (int)p > PL_SIMD_AVX512)
    return pl_set_error(PL_EINVAL, "SIMD path %d: not a path", (int)p);
  if (!pl_simd_path_supported(p))
    return pl_set_error(PL_EUNSUPPORTED,
                        "SIMD path %s: this CPU does not support it",
                        pl_simd_path_name(p));
  *out = p;
  return PL_OK;
}

/* ---- kernels ----------------------------------------------------------------
 */

typedef void (*kernel_fn)(float *p, float *m, float *v, const void *g,
                          int is_bf16, pl_bf16 *w, int w_nt, size_t n,
                          const pl_adamw_scalars *k);

/* Prefetch element i + PL_SIMD_PREFETCH of every stream (a prefetch never
 * faults, past the end included). */
static inline void prefetch_streams(const float *p, const float *m,
                                    const float *v, const void *g, int is_bf16,
                                    size_t i) {
  size_t j = i + PL_SIMD_PREFETCH;
  _mm_prefetch((const char *)(p + j), _MM_HINT_T0);
  _mm_prefetch((const char *)(m + j), _MM_HINT_T0);
  _mm_prefetch((const char *)(v + j), _MM_HINT_T0);
  _mm_prefetch((const char *)g + j * (is_bf16 ? 2 : 4), _MM_HINT_T0);
}

static void upd_scalar(float *p, float *m, float *v, const void *g, int is_bf16,
                       pl_bf16 *w, int w_nt, size_t n,
                       const pl_adamw_scalars *k) {
  (void)w_nt;
  for (size_t i = 0; i < n; i++) {
    float pn =
        pl__adamw_elem(p[i], &m[i], &v[i], pl__adamw_load_g(g, is_bf16, i), k);
    p[i] = pn;
    if (w)
      w[i] = pl_f32_to_bf16(pn);
  }
}

__attribute__((target("avx2"))) static void
upd_avx2(float *p, float *m, float *v, const void *g, int is_bf16, pl_bf16 *w,
         int w_nt, size_t n, const pl_adamw_scalars *k) {
  const __m256 gs = _mm256_set1_ps(k->gscale), b1 = _mm256_set1_ps(k->b1),
               omb1 = _mm256_set1_ps(k->omb1), b2 = _mm256_set1_ps(k->b2),
               omb2 = _mm256_set1_ps(k->omb2), bc1 = _mm256_set1_ps(k->bc1),
               bc2 = _mm256_set1_ps(k->bc2), eps = _mm256_set1_ps(k->eps),
               wd = _mm256_set1_ps(k->wd), lr = _mm256_set1_ps(k->lr);
  const __m256i one = _mm256_set1_epi32(1), r7fff = _mm256_set1_epi32(0x7fff),
                absm = _mm256_set1_epi32(0x7fffffff),
                inf = _mm256_set1_epi32(0x7f800000),
                q = _mm256_set1_epi32(0x40);
  const pl_bf16 *gb = (const pl_bf16 *)g;
  const float *gf = (const float *)g;
  /* 8 bf16 weights per vector: non-temporal when asked and 16-byte aligned */
  const int nt = w && w_nt && ((uintptr_t)w % 16) == 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (i % 16 == 0)
      prefetch_streams(p, m, v, g, is_bf16, i);
    __m256 gr;
    if (is_bf16) {
      __m128i h = _mm_loadu_si128((const __m128i *)(gb + i));
      gr = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      gr = _mm256_loadu_ps(gf + i);
    }
    __m256 pp = _mm256_loadu_ps(p + i), mm = _mm256_loadu_ps(m + i),
           vv = _mm256_loadu_ps(v + i);
    __m256 gg = _mm256_mul_ps(gr, gs);
    mm = _mm256_add_ps(_mm256_mul_ps(b1, mm), _mm256_mul_ps(omb1, gg));
    vv = _mm256_add_ps(_mm256_mul_ps(b2, vv),
                       _mm256_mul_ps(omb2, _mm256_mul_ps(gg, gg)));
    __m256 mh = _mm256_div_ps(mm, bc1), vh = _mm256_div_ps(vv, bc2);
    __m256 den = _mm256_add_ps(_mm256_sqrt_ps(vh), eps);
    __m256 u = _mm256_add_ps(_mm256_div_ps(mh, den), _mm256_mul_ps(wd, pp));
    pp = _mm256_sub_ps(pp, _mm256_mul_ps(lr, u));
    _mm256_storeu_ps(p + i, pp);
    _mm256_storeu_ps(m + i, mm);
    _mm256_storeu_ps(v + i, vv);
    if (w) {
      __m256i x = _mm256_castps_si256(pp);
      __m256i hi16 = _mm256_srli_epi32(x, 16);
      __m256i r =
          _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, r7fff),
                                             _mm256_and_si256(hi16, one)),
                            16);
      __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absm), inf);
      r = _mm256_blendv_epi8(r, _mm256_or_si256(hi16, q), nan);
      __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r),
                                        _mm256_extracti128_si256(r, 1));
      if (nt)
        _mm_stream_si128((__m128i *)(w + i), packed);
      else
        _mm_storeu_si128((__m128i *)(w + i), packed);
    }
  }
  if (nt)
    _mm_sfence();
  if (i < n)
    upd_scalar(p + i, m + i, v + i,
               is_bf16 ? (const void *)(gb + i) : (const void *)(gf + i),
               is_bf16, w ? w + i : NULL, 0, n - i, k);
}

__attribute__((target("avx512f"))) static void
upd_avx512(float *p, float *m, float *v, const void *g, int is_bf16, pl_bf16 *w,
           int w_nt, size_t n, const pl_adamw_scalars *k) {
  const __m512 gs = _mm512_set1_ps(k->gscale), b1 = _mm512_set1_ps(k->b1),
               omb1 = _mm512_set1_ps(k->omb1), b2 = _mm512_set1_ps(k->b2),
               omb2 = _mm512_set1_ps(k->omb2), bc1 = _mm512_set1_ps(k->bc1),
               bc2 = _mm512_set1_ps(k->bc2), eps = _mm512_set1_ps(k->eps),
               wd = _mm512_set1_ps(k->wd), lr = _mm512_set1_ps(k->lr);
  const __m512i one = _mm512_set1_epi32(1), r7fff = _mm512_set1_epi32(0x7fff),
                absm = _mm512_set1_epi32(0x7fffffff),
                inf = _mm512_set1_epi32(0x7f800000),
                q = _mm512_set1_epi32(0x40);
  const pl_bf16 *gb = (const pl_bf16 *)g;
  const float *gf = (const float *)g;
  /* 16 bf16 weights per vector: non-temporal when asked and 32-byte
   * aligned */
  const int nt = w && w_nt && ((uintptr_t)w % 32) == 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    prefetch_streams(p, m, v, g, is_bf16, i);
    __m512 gr;
    if (is_bf16) {
      __m256i h = _mm256_loadu_si256((const __m256i *)(gb + i));
      gr = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      gr = _mm512_loadu_ps(gf + i);
    }
    __m512 pp = _mm512_loadu_ps(p + i), mm = _mm512_loadu_ps(m + i),
           vv = _mm512_loadu_ps(v + i);
    __m512 gg = _mm512_mul_ps(gr, gs);
    mm = _mm512_add_ps(_mm512_mul_ps(b1, mm), _mm512_mul_ps(omb1, gg));
    vv = _mm512_add_ps(_mm512_mul_ps(b2, vv),
                       _mm512_mul_ps(omb2, _mm512_mul_ps(gg, gg)));
    __m512 mh = _mm512_div_ps(mm, bc1), vh = _mm512_div_ps(vv, bc2);
    __m512 den = _mm512_add_ps(_mm512_sqrt_ps(vh), eps);
    __m512 u = _mm512_add_ps(_mm512_div_ps(mh, den), _mm512_mul_ps(wd, pp));
    pp = _mm512_sub_ps(pp, _mm512_mul_ps(lr, u));
    _mm512_storeu_ps(p + i, pp);
    _mm512_storeu_ps(m + i, mm);
    _mm512_storeu_ps(v + i, vv);
    if (w) {
      __m512i x = _mm512_castps_si512(pp);
      __m512i hi16 = _mm512_srli_epi32(x, 16);
      __m512i r =
          _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, r7fff),
                                             _mm512_and_si512(hi16, one)),
                            16);
      __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, absm), inf);
      r = _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(hi16, q));
      if (nt)
        _mm256_stream_si256((__m256i *)(w + i), _mm512_cvtepi32_epi16(r));
      else
        _mm256_storeu_si256((__m256i *)(w + i), _mm512_cvtepi32_epi16(r));
    }
  }
  if (nt)
    _mm_sfence();
  if (i < n)
    upd_scalar(p + i, m + i, v + i,
               is_bf16 ? (const void *)(gb + i) : (const void *)(gf + i),
               is_bf16, w ? w + i : NULL, 0, n - i, k);
}

/* Elements a thread's range is made of: a 4 KiB page of f32 state when
 * every thread gets at least one, else a 64-element block (a cache line of
 * p, m, v; any vector width divides both). */
static size_t range_unit(size_t n, int nt) {
  return n >= (size_t)nt * 1024 ? 1024 : 64;
}

pl_status pl__cpu_adamw_simd_ex(pl_simd_path path, int nthreads, float *p,
                                float *m, float *v, const void *g, pl_dtype gdt,
                                pl_bf16 *w, size_t n, const pl_adamw_scalars *k,
                                unsigned flags) {
  if (gdt != PL_F32 && gdt != PL_BF16)
    return pl_set_error(PL_EINVAL,
                        "cpu_adamw: gradient dtype %s: must be f32 or bf16",
                        pl_dtype_name(gdt));
  if (flags & ~(unsigned)PL_SIMD_W_CACHED)
    return pl_set_error(PL_EINVAL,
                        "cpu_adamw: flags 0x%x: only "
                        "PL_SIMD_W_CACHED (0x%x) is defined",
                        flags, (unsigned)PL_SIMD_W_CACHED);
  pl_simd_path rp;
  PL_TRY(pl_simd_path_resolve(path, &rp));
  if (n == 0)
    return PL_OK;
  kernel_fn fn = rp == PL_SIMD_AVX512 ? upd_avx512
                 : rp == PL_SIMD_AVX2 ? upd_avx2
                                      : upd_scalar;
  const int is_bf16 = gdt == PL_BF16, w_nt = !(flags & PL_SIMD_W_CACHED);
  const size_t gsz = is_bf16 ? 2 : 4;
  const pl_adamw_scalars kk = *k;
  int nt = nthreads > 0 ? nthreads : omp_get_max_threads();
  /* Contiguous ranges of whole units; the last thread also takes the
   * tail. */
  const size_t unit = range_unit(n, nt);
  size_t blocks = (n + unit - 1) / unit;
  if ((size_t)nt > blocks)
    nt = (int)blocks;
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    size_t b0 = blocks * (size_t)t / (size_t)T,
           b1 = blocks * (size_t)(t + 1) / (size_t)T;
    size_t lo = b0 * unit, hi = b1 * unit < n ? b1 * unit : n;
    if (lo < hi)
      fn(p + lo, m + lo, v + lo, (const char *)g + lo * gsz, is_bf16,
         w ? w + lo : NULL, w_nt, hi - lo, &kk);
  }
  return PL_OK;
}

pl_status pl__cpu_adamw_simd(pl_simd_path path, int nthreads, float *p,
                             float *m, float *v, const void *g, pl_dtype gdt,
                             pl_bf16 *w, size_t n, const pl_adamw_scalars *k) {
  return pl__cpu_adamw_simd_ex(path, nthreads, p, m, v, g, gdt, w, n, k, 0);
}
