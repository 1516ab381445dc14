/*
 * bench_stats.c - how repeated samples become the numbers in the table: the median
 * (robust against the one run a noisy neighbour spoiled) and the full range, reported
 * as spread = (max - min) / median so a reader sees at once whether two medians differ
 * by more than their noise.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return (x > y) - (x < y);
}

double bench_median_find(double *v, size_t n)
{
  if (n == 0)
    return 0.0;
  qsort(v, n, sizeof(*v), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

void bench_stats_summarize(const double *v, int n, struct bench_summary *s)
{
  double tmp[BENCH_MAX_RUNS];

  memset(s, 0, sizeof(*s));
  if (n <= 0)
    return;
  if (n > BENCH_MAX_RUNS)
    n = BENCH_MAX_RUNS;
  memcpy(tmp, v, (size_t)n * sizeof(*v));
  s->n = n;
  s->median = bench_median_find(tmp, (size_t)n);
  s->min = tmp[0];
  s->max = tmp[n - 1];
  s->spread = s->median > 0 ? (s->max - s->min) / s->median : 0.0;
}
