/* timer.c — monotonic clock, UTC stamps and median/spread statistics. */
#include <stdlib.h>
#include <time.h>

#include "plateau/timer.h"

uint64_t pl_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double pl_elapsed_s(uint64_t start_ns) {
  return (double)(pl_now_ns() - start_ns) * 1e-9;
}

void pl_utc_stamp(char *buf, size_t len) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted samples. */
static double pct(const double *s, int n, double p) {
  int i = (int)(p * (n - 1) + 0.5);
  if (i < 0)
    i = 0;
  if (i >= n)
    i = n - 1;
  return s[i];
}

pl_stats pl_stats_of(double *samples, int n) {
  pl_stats st = {0};
  if (n <= 0)
    return st;
  qsort(samples, (size_t)n, sizeof *samples, cmp_double);
  st.n = n;
  st.min = samples[0];
  st.max = samples[n - 1];
  st.median =
      (n % 2) ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += samples[i];
  st.mean = sum / n;
  st.p10 = pct(samples, n, 0.10);
  st.p90 = pct(samples, n, 0.90);
  return st;
}
