/*
 * bench_run.c - the sweep: which series run, how many iterations each point gets, and
 * in which order points are taken. Runs are interleaved (for each run, for each size,
 * every series), and the series order rotates from run to run, so slow drift of the
 * machine (a neighbour's VM, thermal limits) spreads over all series instead of
 * favouring whichever came first. Iterations are calibrated once per size so that one
 * point lasts about --point-time, then kept fixed across runs; perftest gets the same
 * amount of work as the mcpnet series it is compared with.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define PT_MAX_ITERS 1000000ull
#define PT_MIN_ITERS 5ull /* perftest refuses fewer */
#define BW_MAX_ITERS 10000000ull

static uint64_t clamp_u64(double v, uint64_t lo, uint64_t hi)
{
  if (!(v >= (double)lo))
    return lo;
  if (v >= (double)hi)
    return hi;
  return (uint64_t)v;
}

/* Seconds one iteration of series k took, from a measured value. */
static double iter_seconds(const struct bench_opts *o, enum bench_kind k, size_t size, double value,
                           double mean)
{
  if (k == BENCH_MCP_BW)
    return value > 0 ? (double)o->conns * (double)o->group * (double)size / (value * 1e6) : 0.0;
  return 2.0 * mean * 1e-6; /* a round trip: the mean, since outliers take time too */
}

/* Short probes, growing until one takes a tenth of the point time; they also warm the
 * connections, the registration cache and the caches of the machine. */
static int calibrate(struct bench_ctx *c, enum bench_kind k, size_t size, struct bench_cell *cell)
{
  const struct bench_opts *o = c->o;
  size_t per_iter = size * (size_t)o->group * (size_t)(k == BENCH_MCP_BW ? o->conns : 1);
  uint64_t cap = k == BENCH_MCP_BW ? BW_MAX_ITERS : BENCH_LAT_MAX_ROUNDS;
  uint64_t first =
    clamp_u64((double)(1u << 20) / (double)per_iter, 1, k == BENCH_MCP_BW ? 2 * BENCH_MAX_DEPTH : 8);
  uint64_t n = first;
  double value, mean, t = 0.0;
  int tries;

  if (o->iters > 0) {
    cell->iters = clamp_u64((double)o->iters, 1, cap);
    return 0;
  }
  for (tries = 0; tries < 8; tries++) {
    if (bench_point_measure(c, k, size, n, &value, &mean, cell) != 0)
      return -1;
    t = iter_seconds(o, k, size, value, mean);
    if (!(t > 0) || (double)n * t >= o->point_time / 10 || n >= cap)
      break;
    n = clamp_u64(fmax(2.0 * (double)n, 1.2 * o->point_time / 10 / t), n + 1, cap);
  }
  cell->iters = t > 0 ? clamp_u64(o->point_time / t, first, cap) : n;
  if (o->verbose)
    fprintf(stderr, "mcpnet-bench: %s %zu B: %llu iterations (%.3g s each)\n", bench_series_lookup(k)->name,
            size, (unsigned long long)cell->iters, t);
  return 0;
}

static uint64_t perftest_iters(const struct bench_ctx *c, enum bench_kind k, int si)
{
  const struct bench_opts *o = c->o;
  const struct bench_results *r = c->res;
  int bw = bench_series_lookup(k)->is_bw;
  uint64_t base = r->cells[bw ? BENCH_MCP_BW : BENCH_MCP_LAT][si].iters;

  /* The same bytes as the mcpnet point: every connection and group element counted. */
  if (bw)
    base *= (uint64_t)o->conns * (uint64_t)o->group;
  return clamp_u64((double)base, PT_MIN_ITERS, PT_MAX_ITERS);
}

static void choose_series(struct bench_ctx *c)
{
  struct bench_results *r = c->res;

  r->nseries = 0;
  r->series[r->nseries++] = BENCH_MCP_BW;
  r->series[r->nseries++] = BENCH_MCP_LAT;
  if (c->o->compare >= 1) {
    r->series[r->nseries++] = BENCH_WRITE_BW;
    r->series[r->nseries++] = BENCH_WRITE_LAT;
  }
  if (c->o->compare >= 2) {
    r->series[r->nseries++] = BENCH_SEND_BW;
    r->series[r->nseries++] = BENCH_SEND_LAT;
  }
}

static int run_point(struct bench_ctx *c, enum bench_kind k, int si, int run)
{
  struct bench_cell *cell = &c->res->cells[k][si];
  size_t size = c->res->sizes[si];
  const char *why = bench_series_lookup(k)->tool ? bench_perftest_refuses(k, size) : NULL;
  uint64_t iters;
  double value, mean;
  int rc;

  if (why != NULL) {
    cell->skipped = 1;
    snprintf(cell->note, sizeof(cell->note), "%s", why);
    return 0;
  }
  iters = bench_series_lookup(k)->tool ? perftest_iters(c, k, si) : cell->iters;
  if (bench_series_lookup(k)->tool)
    cell->iters = iters;
  rc = bench_point_measure(c, k, size, iters, &value, &mean, cell);
  if (rc < 0)
    return -1;
  if (rc == 0 && cell->n < BENCH_MAX_RUNS) {
    cell->samples[cell->n] = value;
    cell->means[cell->n] = mean;
    if (k == BENCH_MCP_LAT) {
      cell->p25[cell->n] = c->lat_p25;
      cell->p75[cell->n] = c->lat_p75;
    }
    cell->n++;
  }
  if (c->o->verbose)
    fprintf(stderr, "mcpnet-bench: run %d %-12s %10zu B %12.3f %s\n", run + 1, bench_series_lookup(k)->name,
            size, value, bench_series_lookup(k)->is_bw ? "MB/s" : "us");
  return 0;
}

int bench_run_sweep(struct bench_ctx *c)
{
  const struct bench_opts *o = c->o;
  struct bench_results *r = c->res;
  int run, si, q, s;
  double t0 = drv_now();

  choose_series(c);
  for (run = 0; run < o->runs; run++) {
    for (si = 0; si < r->nsizes; si++) {
      if (run == 0) {
        /* Before anything of this size is measured, so perftest knows its share. */
        if (calibrate(c, BENCH_MCP_BW, r->sizes[si], &r->cells[BENCH_MCP_BW][si]) != 0 ||
            calibrate(c, BENCH_MCP_LAT, r->sizes[si], &r->cells[BENCH_MCP_LAT][si]) != 0)
          return -1;
      }
      for (q = 0; q < r->nseries; q++)
        if (run_point(c, r->series[(q + run) % r->nseries], si, run) != 0)
          return -1;
    }
    fprintf(stderr, "mcpnet-bench: run %d of %d done (%.1f s)\n", run + 1, o->runs, drv_now() - t0);
  }
  for (s = 0; s < r->nseries; s++)
    for (si = 0; si < r->nsizes; si++) {
      r->checked += r->cells[r->series[s]][si].checked;
      r->wrong += r->cells[r->series[s]][si].wrong;
    }
  if (o->role == BENCH_ROLE_B)
    return bench_point_finish(c);
  return 0;
}
