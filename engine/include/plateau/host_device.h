/* host_device.h — inline helpers compiled identically for the host (C11) and
 * the device (CUDA C): bf16 conversion and the counter-based RNG.
 *
 * Why one header: the RNG must give bit-identical values on the CPU and CUDA
 * backends for the same (seed, index), and bf16 rounding must be the same at
 * every storage point.  Both use integer arithmetic and correctly rounded float
 * operations only (no contraction: the __f*_rn intrinsics on the device; C11
 * ISO mode keeps gcc from contracting on the host). */
#ifndef PLATEAU_HOST_DEVICE_H
#define PLATEAU_HOST_DEVICE_H

#include <stdint.h>

#ifdef __CUDACC__
#define PL_HD __host__ __device__ __forceinline__
#else
#define PL_HD static inline
#endif

#if defined(__CUDA_ARCH__)
#define PL_FMUL(a, b) __fmul_rn((a), (b))
#define PL_FADD(a, b) __fadd_rn((a), (b))
#define PL_FSUB(a, b) __fsub_rn((a), (b))
#else
#define PL_FMUL(a, b) ((a) * (b))
#define PL_FADD(a, b) ((a) + (b))
#define PL_FSUB(a, b) ((a) - (b))
#endif

typedef uint16_t pl_bf16; /* raw bf16 bits: sign, 8 exponent, 7 mantissa */

PL_HD float pl_bf16_to_f32(pl_bf16 h) {
  union {
    uint32_t u;
    float f;
  } v;
  v.u = (uint32_t)h << 16;
  return v.f;
}

/* Round to nearest even, NaN kept quiet: the same as __float2bfloat16_rn. */
PL_HD pl_bf16 pl_f32_to_bf16(float f) {
  union {
    uint32_t u;
    float f;
  } v;
  v.f = f;
  uint32_t u = v.u;
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
    return (pl_bf16)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (pl_bf16)(u >> 16);
}

/* Counter-based generator: value i of stream `seed` is a pure function of
 * (seed, i) — a splitmix64 finalizer over a Weyl sequence.  No state, so any
 * backend, thread or chunk can produce any slice of the stream. */
PL_HD uint64_t pl_rng_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

PL_HD uint32_t pl_rng_u32(uint64_t seed, uint64_t i) {
  uint64_t z = pl_rng_mix64(seed ^ 0x5851f42d4c957f2dull) +
               (i + 1) * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(pl_rng_mix64(z) >> 32);
}

/* Uniform in (0, 1): 24 random bits, exact in float. */
PL_HD float pl_rng_unit(uint64_t seed, uint64_t i) {
  return ((float)(pl_rng_u32(seed, i) >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

/* Uniform in [lo, hi). */
PL_HD float pl_rng_uniform(uint64_t seed, uint64_t i, float lo, float hi) {
  return PL_FADD(lo, PL_FMUL(PL_FSUB(hi, lo), pl_rng_unit(seed, i)));
}

/* Approximately normal (mean, std): Irwin-Hall sum of four 24-bit uniforms
 * drawn from one 64-bit hash pair, summed exactly in integers; the single
 * int->float conversion and the scaling are correctly rounded on both sides,
 * so CPU and CUDA agree bit for bit.  Tails are bounded at ±2·sqrt(3)·std. */
PL_HD float pl_rng_normal(uint64_t seed, uint64_t i, float mean, float std) {
  uint64_t a = pl_rng_mix64(seed * 0xd1342543de82ef95ull + 2 * i + 1);
  uint64_t b = pl_rng_mix64(a ^ 0x2545f4914f6cdd1dull);
  uint32_t s = (uint32_t)((a >> 40) + ((a >> 8) & 0xffffffu) + (b >> 40) +
                          ((b >> 8) & 0xffffffu));
  /* s in [0, 4·2^24): mean 2·2^24, variance 4/12·2^48. */
  float z = PL_FMUL((float)((int32_t)s - (int32_t)(2u << 24)),
                    (1.7320508075688772f / 16777216.0f));
  return PL_FADD(mean, PL_FMUL(std, z));
}

#endif
