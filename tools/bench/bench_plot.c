/*
 * bench_plot.c - --plot: bandwidth and latency against message size, one curve per
 * series with min..max error bars, in one PNG of two panels, drawn by gnuplot. A table
 * shows numbers; the curves show where a transport falls off (the eager/rendezvous
 * knee, the size where the pipeline fills) at a glance. The script is generated with
 * the data inline and handed to gnuplot; pngcairo is preferred and the plain png
 * terminal is the fallback for gnuplot builds without cairo.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

static void put_block(FILE *f, const struct bench_results *r, enum bench_kind k, int idx)
{
  int si;

  fprintf(f, "$s%d << EOD\n", idx);
  for (si = 0; si < r->nsizes; si++) {
    const struct bench_cell *cell = &r->cells[k][si];
    struct bench_summary s;
    if (cell->n == 0)
      continue;
    bench_stats_summarize(cell->samples, cell->n, &s);
    fprintf(f, "%zu %.6g %.6g %.6g\n", r->sizes[si], s.median, s.min, s.max);
  }
  fputs("EOD\n", f);
}

static void put_panel(FILE *f, const struct bench_results *r, int want_bw)
{
  int i, first = 1;

  fputs("plot ", f);
  for (i = 0; i < r->nseries; i++) {
    const struct bench_series_info *in = bench_series_lookup(r->series[i]);
    if (in->is_bw != want_bw)
      continue;
    fprintf(f, "%s$s%d using 1:2:3:4 with yerrorlines lw 2 pt 7 ps 0.6 title '%s'",
            first ? "" : ", \\\n     ", i, in->name);
    first = 0;
  }
  fputc('\n', f);
}

static int write_script(const struct bench_ctx *c, const char *script, const char *png, const char *term)
{
  const struct bench_results *r = c->res;
  FILE *f = fopen(script, "w");
  int i;

  if (f == NULL)
    return -1;
  fprintf(f, "set terminal %s size 1100,1000\n", term);
  fputs("set termoption noenhanced\n", f); /* series names have underscores */
  fprintf(f, "set output '%s'\n", png);
  for (i = 0; i < r->nseries; i++)
    put_block(f, r, r->series[i], i);
  fprintf(f, "set multiplot layout 2,1 title 'mcpnet-bench: %s on %s, %s%s'\n",
          c->drv.name ? c->drv.name : "?", c->dev_name,
          c->o->role == BENCH_SELF ? "one process" : "two processes", c->o->nccl_steps ? ", NCCL steps" : "");
  /* Both axes logarithmic: the sweep spans six decades of size and of bandwidth. */
  fputs("set logscale x 2\nset logscale y\nset format x '%.0b%BB'\nset grid\nset key left top\n", f);
  fputs("set xlabel 'message size'\n", f);
  fputs("set title 'bandwidth (median, bars: min..max over runs)'\nset ylabel 'MB/s (1e6 B/s)'\n", f);
  put_panel(f, r, 1);
  fputs("set title 'one-way latency (median, bars: min..max over runs)'\nset ylabel 'us'\n", f);
  put_panel(f, r, 0);
  fputs("unset multiplot\n", f);
  return fclose(f);
}

/* pngcairo's fontconfig wants a writable cache folder and complains on every run
 * without one (a read-only home, as in the lab's guests); point it at the temporary
 * folder then. Only gnuplot's environment changes. */
static void cache_env(void)
{
  const char *home = getenv("HOME"), *tmp = getenv("TMPDIR");
  char path[512];

  if (getenv("XDG_CACHE_HOME") != NULL)
    return;
  snprintf(path, sizeof(path), "%s/.cache", home ? home : "");
  if (home != NULL && (access(path, W_OK) == 0 || access(home, W_OK) == 0))
    return;
  setenv("XDG_CACHE_HOME", tmp ? tmp : "/tmp", 1);
}

static int run_gnuplot(const char *script)
{
  int status;
  pid_t pid;

  fflush(NULL);
  pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    cache_env();
    execlp("gnuplot", "gnuplot", script, (char *)NULL);
    fprintf(stderr, "mcpnet-bench: cannot run gnuplot: %s\n", strerror(errno));
    _exit(127);
  }
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return -1;
  return WEXITSTATUS(status);
}

int bench_plot_draw(const struct bench_ctx *c, const char *path)
{
  static const char *terms[] = {"pngcairo font ',10'", "png"};
  const char *tmp = getenv("TMPDIR");
  char script[512];
  unsigned i;
  int fd, rc = -1;

  if (strchr(path, '\'') != NULL) {
    fprintf(stderr, "mcpnet-bench: --plot: a file name with a quote is not supported\n");
    return -1;
  }
  snprintf(script, sizeof(script), "%s/mcpnet-bench-plot-XXXXXX", tmp ? tmp : "/tmp");
  fd = mkstemp(script);
  if (fd < 0) {
    fprintf(stderr, "mcpnet-bench: cannot create %s: %s\n", script, strerror(errno));
    return -1;
  }
  close(fd);
  for (i = 0; i < sizeof(terms) / sizeof(terms[0]) && rc != 0; i++) {
    if (write_script(c, script, path, terms[i]) != 0)
      break;
    rc = run_gnuplot(script);
  }
  unlink(script);
  if (rc != 0)
    fprintf(stderr, "mcpnet-bench: gnuplot could not draw %s (is gnuplot installed?)\n", path);
  return rc == 0 ? 0 : -1;
}
