/*
 * bench_main.c - mcpnet-bench's entry point: finds and loads the plugin, learns the
 * device it will measure (and the GID perftest must use to measure the same path),
 * connects, runs the sweep or serves the peer, and writes the outputs. Every other
 * file does one of these steps; this one only orders them and turns failures into
 * the exit status.
 */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* NCCL resolves NCCL_NET_PLUGIN through the loader's search path; the benchmark does
 * the same first, then falls back to the copy beside it (build tree or install), so
 * `bin/mcpnet-bench` works straight from a build folder. */
static const char *plugin_resolve(const struct bench_opts *o, char *buf, size_t len)
{
  static const char *rel[] = {"../plugin/", "../" BENCH_LIBDIR "/", "../lib/", ""};
  char exe[512], *slash;
  ssize_t n;
  unsigned i;
  void *h;

  if (o->plugin_given || strchr(o->plugin, '/') != NULL)
    return o->plugin;
  h = dlopen(o->plugin, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) {
    dlclose(h);
    return o->plugin;
  }
  n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0)
    return o->plugin;
  exe[n] = '\0';
  slash = strrchr(exe, '/');
  if (slash == NULL)
    return o->plugin;
  slash[1] = '\0';
  for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
    snprintf(buf, len, "%s%s%s", exe, rel[i], o->plugin);
    if (access(buf, R_OK) == 0)
      return buf;
  }
  return o->plugin;
}

static int setup_device(struct bench_ctx *c)
{
  const struct bench_opts *o = c->o;
  struct link_map *lm = NULL;
  char found[512];
  const char *path = plugin_resolve(o, found, sizeof(found));
  int ndev = 0;

  if (o->gid_given && getenv("NCCL_IB_GID_INDEX") == NULL) {
    char v[16];
    snprintf(v, sizeof(v), "%d", o->gid_index);
    setenv("NCCL_IB_GID_INDEX", v, 0); /* the plugin and perftest use the same GID */
  }
  if (drv_open(&c->drv, path, o->abi) != 0)
    return -1;
  snprintf(c->plugin_path, sizeof(c->plugin_path), "%s", path);
  if (dlinfo(c->drv.lib, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name && lm->l_name[0])
    snprintf(c->plugin_path, sizeof(c->plugin_path), "%s", lm->l_name);
  if (drv_init(&c->drv) != ncclSuccess) {
    fprintf(stderr, "mcpnet-bench: the plugin's init failed (MCP_DRIVE_VERBOSE=1 shows its log)\n");
    return -1;
  }
  if (drv_devices(&c->drv, &ndev) != ncclSuccess || ndev <= 0) {
    fprintf(stderr, "mcpnet-bench: the plugin found no device\n");
    return -1;
  }
  if (o->dev >= ndev) {
    fprintf(stderr, "mcpnet-bench: --dev %d, but the plugin has %d device(s)\n", o->dev, ndev);
    return -1;
  }
  if (drv_props(&c->drv, o->dev, &c->props) != ncclSuccess) {
    fprintf(stderr, "mcpnet-bench: getProperties(%d) failed\n", o->dev);
    return -1;
  }
  if (o->group > c->props.maxRecvs) {
    fprintf(stderr, "mcpnet-bench: --group %d, but the plugin offers grouped receives of at most %d\n",
            o->group, c->props.maxRecvs);
    return -1;
  }
  snprintf(c->dev_name, sizeof(c->dev_name), "%s",
           o->ib_dev         ? o->ib_dev
             : c->props.name ? c->props.name
                             : "");
  c->ib_port = c->props.port > 0 ? c->props.port : 1;
  return 0;
}

/* The GID perftest uses, and the address its out-of-band connection goes to. */
static void setup_perftest(struct bench_ctx *c)
{
  const struct bench_opts *o = c->o;

  c->gid_index = o->gid_index;
  if (c->gid_index >= 0) {
    if (bench_gid_resolve(c->dev_name, c->ib_port, c->gid_index, c->gid_ip, sizeof(c->gid_ip)) != 0)
      c->gid_ip[0] = '\0';
  } else if (bench_gid_pick(c->dev_name, c->ib_port, &c->gid_index, c->gid_ip, sizeof(c->gid_ip)) != 0) {
    c->gid_index = 0; /* native IB (or no sysfs): perftest's own default */
    c->gid_ip[0] = '\0';
  }
  if (o->perftest_host != NULL) {
    snprintf(c->peer_host, sizeof(c->peer_host), "%s", o->perftest_host);
  } else if (o->client != NULL) {
    const char *colon = strrchr(o->client, ':');
    const char *h = o->client[0] == '[' ? o->client + 1 : o->client;
    int len = (int)(colon - h) - (o->client[0] == '[');
    snprintf(c->peer_host, sizeof(c->peer_host), "%.*s", len > 0 ? len : 0, h);
  } else if (o->role == BENCH_SELF) {
    snprintf(c->peer_host, sizeof(c->peer_host), "%s", c->gid_ip[0] ? c->gid_ip : "127.0.0.1");
  }
}

static int check_tools(const struct bench_opts *o)
{
  static const enum bench_kind kinds[] = {BENCH_WRITE_BW, BENCH_WRITE_LAT, BENCH_SEND_BW, BENCH_SEND_LAT};
  unsigned i;

  for (i = 0; i < (o->compare >= 2 ? 4u : o->compare ? 2u : 0u); i++) {
    const char *tool = bench_series_lookup(kinds[i])->tool;
    if (!bench_perftest_find(tool)) {
      fprintf(stderr, "mcpnet-bench: --compare needs %s in PATH (Debian: apt-get install perftest)\n", tool);
      return -1;
    }
  }
  return 0;
}

static size_t ring_bytes_for(const struct bench_opts *o, const struct bench_results *r)
{
  size_t max = 0;
  int i;

  for (i = 0; i < r->nsizes; i++) {
    struct bench_geom g;
    bench_geom_make(o, r->sizes[i], &g);
    if (bench_ring_measure(&g) > max)
      max = bench_ring_measure(&g);
  }
  return max;
}

static int run(struct bench_ctx *c)
{
  const struct bench_opts *o = c->o;
  FILE *out = o->json && strcmp(o->json, "-") == 0 ? stderr : stdout;
  struct bench_xchg x = {.fd = -1};
  size_t ring;
  int rc = -1;

  if (setup_device(c) != 0 || check_tools(o) != 0)
    return BENCH_EXIT_USAGE;
  setup_perftest(c);
  c->res->nsizes = bench_opts_sweep(o, c->res->sizes, BENCH_MAX_SIZES);
  c->lat_stamps = malloc((2 * BENCH_LAT_MAX_ROUNDS + 2) * sizeof(double));
  if (c->lat_stamps == NULL)
    return BENCH_EXIT_FAIL;
  if (o->role != BENCH_SELF && bench_xchg_open(&x, o) != 0)
    return BENCH_EXIT_FAIL;
  ring = ring_bytes_for(o, c->res);
  if (o->cpu_cost && ring < BENCH_COST_DEPTH * o->min_size)
    ring = BENCH_COST_DEPTH * o->min_size;
  if (bench_link_open(&c->link, &c->drv, o, o->role == BENCH_SELF ? NULL : &x, ring) != 0)
    goto out;
  bench_xchg_close(&x);
  bench_header_print(c, out);
  if (o->cpu_cost) {
    rc = bench_cost_run(c);
    goto out;
  }
  if (o->role == BENCH_ROLE_A) {
    printf("# role a: serving role b; the results are printed by role b\n");
    rc = bench_point_serve(c);
    if (o->check)
      printf("# check: %llu messages verified on this side, %llu wrong\n",
             (unsigned long long)c->res->checked, (unsigned long long)c->res->wrong);
    goto out;
  }
  rc = bench_run_sweep(c);
  if (rc != 0)
    goto out;
  bench_table_print(c, out);
  if (o->json != NULL && bench_json_write(c, o->json) != 0)
    rc = -1;
  if (o->plot != NULL && bench_plot_draw(c, o->plot) != 0)
    rc = -1;
out:
  bench_xchg_close(&x);
  bench_link_close(&c->link);
  if (rc != 0)
    return BENCH_EXIT_FAIL;
  return c->res->wrong ? BENCH_EXIT_WRONG : BENCH_EXIT_OK;
}

int main(int argc, char **argv)
{
  struct bench_opts o;
  struct bench_ctx *c;
  int rc, i;

  rc = bench_opts_parse(&o, argc, argv);
  if (rc != 0)
    return rc < 0 ? BENCH_EXIT_OK : rc;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (o.pin_cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o.pin_cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      fprintf(stderr, "mcpnet-bench: --pin %d: %s\n", o.pin_cpu, strerror(errno));
      return BENCH_EXIT_USAGE;
    }
  }
  c = calloc(1, sizeof(*c));
  if (c == NULL || (c->res = calloc(1, sizeof(*c->res))) == NULL) {
    fprintf(stderr, "mcpnet-bench: out of memory\n");
    return BENCH_EXIT_FAIL;
  }
  c->o = &o;
  rc = run(c);
  if (c->drv.lib != NULL) {
    drv_finalize(&c->drv);
    drv_close_lib(&c->drv);
  }
  for (i = 0; i < c->res->ncmds; i++)
    free(c->res->cmds[i]);
  free(c->lat_stamps);
  free(c->res);
  free(c);
  return rc;
}
