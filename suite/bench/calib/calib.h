/* calib.h — what `plateau bench calib` (bench_calib.c) gives other benches:
 * the host-memory copy it measures, which they take as the host's roofline.
 * Internal to suite/. */
#ifndef PLATEAU_SUITE_CALIB_H
#define PLATEAU_SUITE_CALIB_H

#include <stddef.h>
#include <stdint.h>

/* dst := src over words 64-bit words (src NULL: a fixed value), by every
 * OpenMP thread over its range of 64-byte lines with non-temporal stores:
 * the host-memory copy of mem_copy, which other benches take as the host's
 * roofline.  dst and src 16-byte aligned. */
void pl__calib_mem_store(uint64_t *dst, const uint64_t *src, size_t words);
#endif
