/*
 * bench_report.c - the human output, shaped like nccl-tests': a block of '#' lines
 * saying exactly what was measured and how (so a pasted table carries its own
 * context), then one row per size with, for every series, the median and the spread,
 * the data check count, and the mcpnet/perftest ratios that answer "how close to the
 * verbs ceiling". Missing values print as "-", never as 0.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

static const char *pin_text(const struct bench_opts *o, char *buf, size_t len)
{
  if (o->pin_cpu < 0)
    return "";
  snprintf(buf, len, " on CPU %d (--pin; perftest runs inherit it)", o->pin_cpu);
  return buf;
}

static const char *mode_text(const struct bench_opts *o, char *buf, size_t len)
{
  const char *role = o->role == BENCH_ROLE_A ? "a" : "b";

  if (o->role == BENCH_SELF)
    snprintf(buf, len, "one process connected to itself");
  else if (o->xchg != NULL)
    snprintf(buf, len, "two processes, this is role %s (handles through files in %s)", role, o->xchg);
  else
    snprintf(buf, len, "two processes, this is role %s (handles over TCP %s)", role,
             o->server ? o->server : o->client);
  return buf;
}

void bench_header_print(const struct bench_ctx *c, FILE *f)
{
  const struct bench_opts *o = c->o;
  const struct bench_results *r = c->res;
  char buf[600];

  fprintf(f, "# mcpnet-bench %s\n", MCPNET_VERSION);
  fprintf(f, "#  plugin   : %s (net \"%s\", table ncclNetPlugin_v%d)\n", c->plugin_path,
          c->drv.name ? c->drv.name : "?", o->abi);
  fprintf(f, "#  device   : %d = %s port %d, speed %d Mb/s, maxRecvs %d\n", o->dev,
          c->props.name ? c->props.name : "?", c->props.port, c->props.speed, c->props.maxRecvs);
  fprintf(f, "#  mode     : %s\n", mode_text(o, buf, sizeof(buf)));
  if (o->cpu_cost) /* no sweep: bench_cost.c says what it drove */
    return;
  if (o->nccl_steps)
    fprintf(f, "#  driving  : NCCL steps of %zu B over %d slots, %d in flight, %d connection(s), group %d\n",
            o->step_size, BENCH_MAX_DEPTH, o->depth, o->conns, o->group);
  else
    fprintf(f,
            "#  driving  : one message per transfer, up to %d posted ahead / in flight, %d connection(s), "
            "group %d\n",
            o->depth, o->conns, o->group);
  fprintf(f, "#  progress : one thread%s; %s\n", pin_text(o, buf, sizeof(buf)),
          o->spin ? "spins without yielding (--spin)"
                  : "sched_yield after a pass that moved nothing, as NCCL's proxy");
  if (r->nsizes > 0)
    fprintf(f, "#  sweep    : %zu .. %zu B x%g (%d sizes), %d run(s) interleaved, series order rotating; ",
            r->sizes[0], r->sizes[r->nsizes - 1], o->factor, r->nsizes, o->runs);
  if (o->iters > 0)
    fprintf(f, "%ld iterations per point\n", o->iters);
  else
    fprintf(f, "iterations calibrated to %.2g s per point\n", o->point_time);
  fprintf(f, "#  check    : %s\n",
          o->check ? "every byte and size verified in an untimed pass before each timed one" : "off (-c)");
  if (o->compare) {
    fprintf(f, "#  perftest : %s on %s, GID index %d (%s), TCP port %d\n",
            o->compare >= 2 ? "ib_write_bw ib_write_lat ib_send_bw ib_send_lat" : "ib_write_bw ib_write_lat",
            c->dev_name, c->gid_index, c->gid_ip[0] ? c->gid_ip : "?", o->perftest_port);
    if (o->pt_depth > 0)
      fprintf(f, "#  depth    : bandwidth tools at -t %d: %d writes in flight, as mcpnet's %d messages%s\n",
              o->pt_depth, o->pt_depth, o->depth, o->pt_depth == o->depth ? " (--perftest-depth match)" : "");
    else
      fprintf(f,
              "#  depth    : bandwidth tools at perftest's default -t 128: 128 writes in flight against "
              "mcpnet's %d\n",
              o->depth);
  }
  fprintf(f,
          "#  units    : size = bytes per isend; MB/s = 1e6 B/s over all connections (perftest's MiB/s "
          "converted); latency = one-way us, median of round trips / 2\n");
  fprintf(f, "#  stats    : median over runs; spread = (max - min) / median\n");
  if (o->compare)
    fprintf(f,
            "#  ratios   : mcpnet / perftest medians (bandwidth: 1.0 is perftest's rate, higher is "
            "better; latency: lower is better)\n");
  fflush(f);
}

static int has_value(const struct bench_cell *cell) { return cell->n > 0; }

static double median_of(const struct bench_cell *cell)
{
  struct bench_summary s;

  bench_stats_summarize(cell->samples, cell->n, &s);
  return s.median;
}

static void print_cell(FILE *f, const struct bench_cell *cell)
{
  struct bench_summary s;

  if (!has_value(cell)) {
    fprintf(f, " %10s %7s", "-", "-");
    return;
  }
  bench_stats_summarize(cell->samples, cell->n, &s);
  /* Enough digits for the lab's 0.004 MB/s and a NIC's 45000 MB/s in one column. */
  fprintf(f, s.median >= 100 ? " %10.1f" : s.median >= 1 ? " %10.2f" : " %10.4f", s.median);
  if (s.n < 2)
    fprintf(f, " %7s", "-"); /* one run has no spread */
  else if (s.spread >= 10.0)
    fprintf(f, " %7s", ">999%"); /* keeps the columns; the JSON has the samples */
  else
    fprintf(f, " %6.1f%%", s.spread * 100.0);
}

/* The ratio columns: every mcpnet series against every perftest series of its kind. */
struct ratio_col {
  enum bench_kind mcp, pt;
  char label[16];
};

static int ratio_cols(const struct bench_results *r, struct ratio_col *cols)
{
  int n = 0, i;

  for (i = 0; i < r->nseries; i++) {
    enum bench_kind k = r->series[i];
    const struct bench_series_info *in = bench_series_lookup(k);
    if (in->tool == NULL)
      continue;
    cols[n].mcp = in->is_bw ? BENCH_MCP_BW : BENCH_MCP_LAT;
    cols[n].pt = k;
    /* "bw/wr", "lat/sd": the perftest label's prefix names the verb. */
    snprintf(cols[n].label, sizeof(cols[n].label), "%s/%.2s", in->is_bw ? "bw" : "lat", in->label);
    n++;
  }
  return n;
}

/* The one line a reader needs before the ratios: what is compared with what, and why a
 * bandwidth ratio below 1 at small sizes does or does not point at mcpnet. */
static void compared_line(const struct bench_opts *o, FILE *f)
{
  if (o->pt_depth == o->depth)
    fprintf(
      f,
      "# compared: like with like, %d messages in flight on both sides: mcpnet as NCCL drives it (a send "
      "goes once the receiver has granted it with a clear-to-send, as in NCCL's own IB transport) "
      "against ib_write_bw (no receiver in the loop) and ib_write_lat; where mcpnet trails at small "
      "sizes (bw below 1, lat above 1) that grant is why: a cost of NCCL's protocol, not a defect\n",
      o->depth);
  else
    fprintf(f,
            "# compared: mcpnet with %d messages in flight (each waits for the receiver's clear-to-send, as "
            "NCCL's) against ib_write_bw with %d%s and no receiver in the loop: where a round trip bounds "
            "the rate (small sizes between hosts) the bw ratio measures that depth, not mcpnet; "
            "--perftest-depth match compares like with like\n",
            o->depth, o->pt_depth > 0 ? o->pt_depth : 128, o->pt_depth > 0 ? "" : " (perftest's default)");
}

void bench_table_print(const struct bench_ctx *c, FILE *f)
{
  const struct bench_results *r = c->res;
  struct ratio_col cols[BENCH_KIND_COUNT];
  int ncols = ratio_cols(r, cols), i, si;

  if (r->ncmds > 0) {
    fprintf(f, "# perftest command lines, as run (each once per run and size):\n");
    for (i = 0; i < r->ncmds; i++)
      fprintf(f, "#   %s\n", r->cmds[i]);
  }
  fprintf(f, "#\n");
  if (ncols > 0)
    compared_line(c->o, f);
  fprintf(f, "# %10s", "");
  for (i = 0; i < r->nseries; i++) {
    fprintf(f, " %10s %7s", bench_series_lookup(r->series[i])->label, "");
    if (r->series[i] == BENCH_MCP_LAT)
      fprintf(f, " %7s", "");
  }
  if (ncols > 0)
    fprintf(f, "  mcpnet/perftest");
  fprintf(f, "\n# %10s", "size");
  for (i = 0; i < r->nseries; i++) {
    fprintf(f, " %10s %7s", bench_series_lookup(r->series[i])->is_bw ? "MB/s" : "us", "spread");
    if (r->series[i] == BENCH_MCP_LAT)
      fprintf(f, " %7s", "#wrong");
  }
  for (i = 0; i < ncols; i++)
    fprintf(f, " %8s", cols[i].label);
  fputc('\n', f);

  for (si = 0; si < r->nsizes; si++) {
    fprintf(f, "  %10zu", r->sizes[si]);
    for (i = 0; i < r->nseries; i++) {
      print_cell(f, &r->cells[r->series[i]][si]);
      if (r->series[i] == BENCH_MCP_LAT) {
        const struct bench_cell *bw = &r->cells[BENCH_MCP_BW][si], *lat = &r->cells[BENCH_MCP_LAT][si];
        /* Without -c the sizes test reports are still compared, so the count means something. */
        fprintf(f, " %7llu", (unsigned long long)(bw->wrong + lat->wrong));
      }
    }
    for (i = 0; i < ncols; i++) {
      const struct bench_cell *m = &r->cells[cols[i].mcp][si], *p = &r->cells[cols[i].pt][si];
      double pm = has_value(p) ? median_of(p) : 0.0;
      if (has_value(m) && pm > 0)
        fprintf(f, " %8.3f", median_of(m) / pm);
      else
        fprintf(f, " %8s", "-");
    }
    fputc('\n', f);
  }
  for (i = 0; i < r->nseries; i++)
    for (si = 0; si < r->nsizes; si++) {
      const struct bench_cell *cell = &r->cells[r->series[i]][si];
      if (cell->note[0] && (cell->skipped || cell->failed))
        fprintf(f, "# note: %s at %zu B: %s%s\n", bench_series_lookup(r->series[i])->name, r->sizes[si],
                cell->note, cell->failed ? " (failed runs are left out)" : "");
    }
  for (si = 0; si < r->nsizes; si++) {
    const struct bench_cell *lat = &r->cells[BENCH_MCP_LAT][si];
    struct bench_summary q25, q75;
    if (!has_value(lat))
      continue;
    bench_stats_summarize(lat->p25, lat->n, &q25);
    bench_stats_summarize(lat->p75, lat->n, &q75);
    fprintf(f,
            "# round trips at %zu B: 25%% within %.2f us, 75%% within %.2f us (mcp-lat, one-way, "
            "medians over runs)\n",
            r->sizes[si], q25.median, q75.median);
  }
  if (c->o->check)
    fprintf(f, "# check: %llu messages verified on both sides, %llu wrong\n", (unsigned long long)r->checked,
            (unsigned long long)r->wrong);
  else
    fprintf(f, "# check: off (sizes reported by test were still compared: %llu wrong)\n",
            (unsigned long long)r->wrong);
  fflush(f);
}
