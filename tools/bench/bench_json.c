/*
 * bench_json.c - the machine output: one JSON document with the configuration, the
 * perftest command lines and one object per (series, size) carrying every raw sample
 * next to its summary, so a later analysis can recompute anything the table shows
 * (or decide the median was the wrong statistic) without rerunning the benchmark.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "mcp_json.h"

static void put_num(FILE *f, double v)
{
  if (isfinite(v))
    fprintf(f, "%.6g", v);
  else
    fputs("null", f);
}

static void put_array(FILE *f, const double *v, int n)
{
  int i;

  fputc('[', f);
  for (i = 0; i < n; i++) {
    if (i)
      fputs(", ", f);
    put_num(f, v[i]);
  }
  fputc(']', f);
}

static void put_config(const struct bench_ctx *c, FILE *f)
{
  const struct bench_opts *o = c->o;
  const struct bench_results *r = c->res;
  int i;

  fputs("  \"config\": {\"plugin\": ", f);
  mcp_json_str(f, c->plugin_path);
  fputs(", \"net\": ", f);
  mcp_json_str(f, c->drv.name);
  fprintf(f, ", \"abi\": %d, \"dev\": %d, \"device\": ", o->abi, o->dev);
  mcp_json_str(f, c->props.name);
  fprintf(f, ", \"mode\": \"%s\", \"role\": %s", o->role == BENCH_SELF ? "self" : "pair",
          o->role == BENCH_SELF       ? "null"
            : o->role == BENCH_ROLE_A ? "\"a\""
                                      : "\"b\"");
  fputs(", \"sizes\": [", f);
  for (i = 0; i < r->nsizes; i++)
    fprintf(f, "%s%zu", i ? ", " : "", r->sizes[i]);
  fprintf(
    f, "], \"runs\": %d, \"conns\": %d, \"group\": %d, \"depth\": %d, \"nccl_steps\": %s, \"step_size\": %zu",
    o->runs, o->conns, o->group, o->depth, o->nccl_steps ? "true" : "false", o->step_size);
  fprintf(f, ", \"check\": %s, \"spin\": %s, \"point_time\": %g, \"iters\": %ld", o->check ? "true" : "false",
          o->spin ? "true" : "false", o->point_time, o->iters);
  fprintf(f, ", \"compare\": %s, \"gid_index\": %d, \"perftest_port\": %d", o->compare ? "true" : "false",
          c->gid_index, o->perftest_port);
  fputs(", \"units\": {\"bw\": \"MB/s (1e6 bytes/s)\", \"lat\": \"us one-way\"}", f);
  fputs(", \"statistic\": \"median over runs; spread = (max - min) / median\"},\n", f);
}

static void put_result(const struct bench_ctx *c, FILE *f, enum bench_kind k, int si)
{
  const struct bench_results *r = c->res;
  const struct bench_cell *cell = &r->cells[k][si];
  const struct bench_series_info *in = bench_series_lookup(k);
  struct bench_summary s;
  struct bench_geom g;
  int i, first = 1;

  bench_stats_summarize(cell->samples, cell->n, &s);
  fputs("    {\"series\": ", f);
  mcp_json_str(f, in->name);
  fprintf(f, ", \"size\": %zu, \"unit\": \"%s\", \"n\": %d, \"median\": ", r->sizes[si],
          in->is_bw ? "MB/s" : "us", cell->n);
  put_num(f, cell->n ? s.median : NAN);
  fputs(", \"min\": ", f);
  put_num(f, cell->n ? s.min : NAN);
  fputs(", \"max\": ", f);
  put_num(f, cell->n ? s.max : NAN);
  fputs(", \"spread\": ", f);
  put_num(f, cell->n > 1 ? s.spread : NAN);
  fputs(", \"samples\": ", f);
  put_array(f, cell->samples, cell->n);
  if (!in->is_bw) {
    fputs(", \"means\": ", f);
    put_array(f, cell->means, cell->n);
  }
  if (k == BENCH_MCP_LAT) {
    fputs(", \"round_trip_p25\": ", f);
    put_array(f, cell->p25, cell->n);
    fputs(", \"round_trip_p75\": ", f);
    put_array(f, cell->p75, cell->n);
  }
  fprintf(f, ", \"iters\": %llu", (unsigned long long)cell->iters);
  if (in->tool == NULL) {
    bench_geom_make(c->o, r->sizes[si], &g);
    fprintf(f, ", \"checked\": %llu, \"wrong\": %llu, \"depth\": %d, \"steps_per_transfer\": %llu",
            (unsigned long long)cell->checked, (unsigned long long)cell->wrong, g.depth,
            (unsigned long long)g.nmsg);
    fputs(", \"ratio\": {", f);
    for (i = 0; i < r->nseries; i++) {
      enum bench_kind pk = r->series[i];
      const struct bench_cell *p = &r->cells[pk][si];
      struct bench_summary ps;
      if (bench_series_lookup(pk)->tool == NULL || bench_series_lookup(pk)->is_bw != in->is_bw)
        continue;
      bench_stats_summarize(p->samples, p->n, &ps);
      fprintf(f, "%s\"%s\": ", first ? "" : ", ", bench_series_lookup(pk)->name);
      put_num(f, p->n && cell->n && ps.median > 0 ? s.median / ps.median : NAN);
      first = 0;
    }
    fputc('}', f);
  } else {
    fprintf(f, ", \"failed_runs\": %d, \"skipped\": %s", cell->failed, cell->skipped ? "true" : "false");
  }
  if (cell->note[0]) {
    fputs(", \"note\": ", f);
    mcp_json_str(f, cell->note);
  }
  fputc('}', f);
}

int bench_json_write(const struct bench_ctx *c, const char *path)
{
  const struct bench_results *r = c->res;
  FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
  int i, si, first = 1;

  if (f == NULL) {
    perror(path);
    return -1;
  }
  fprintf(f, "{\n  \"tool\": \"mcpnet-bench\", \"version\": \"%s\",\n", MCPNET_VERSION);
  put_config(c, f);
  fputs("  \"perftest_commands\": [", f);
  for (i = 0; i < r->ncmds; i++) {
    fputs(i ? ", " : "", f);
    mcp_json_str(f, r->cmds[i]);
  }
  fprintf(f, "],\n  \"check\": {\"enabled\": %s, \"verified\": %llu, \"wrong\": %llu},\n",
          c->o->check ? "true" : "false", (unsigned long long)r->checked, (unsigned long long)r->wrong);
  fputs("  \"results\": [\n", f);
  for (i = 0; i < r->nseries; i++)
    for (si = 0; si < r->nsizes; si++) {
      fputs(first ? "" : ",\n", f);
      put_result(c, f, r->series[i], si);
      first = 0;
    }
  fputs("\n  ]\n}\n", f);
  if (f == stdout)
    fflush(f);
  else if (fclose(f) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}
