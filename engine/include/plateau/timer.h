/* timer.h — monotonic wall clock, UTC stamps, and summary statistics of a set
 * of timings (median and spread, as the benches report them). */
#ifndef PLATEAU_TIMER_H
#define PLATEAU_TIMER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic clock, nanoseconds. */
uint64_t pl_now_ns(void);
/* Seconds since `start_ns` (a pl_now_ns value). */
double pl_elapsed_s(uint64_t start_ns);
/* "2026-11-30T04:31:56Z" into buf (>= 21 bytes). */
void pl_utc_stamp(char *buf, size_t len);

typedef struct pl_stats {
  int n;
  double median, min, max, mean;
  double p10, p90; /* spread: 10th and 90th percentile (nearest rank) */
} pl_stats;

/* Summary of n samples (the array is sorted in place).  n == 0 gives zeros. */
pl_stats pl_stats_of(double *samples, int n);

#ifdef __cplusplus
}
#endif
#endif
