/*
 * bench_opts.c - the command line of mcpnet-bench: what can be asked for, its
 * defaults, and the checks that turn a bad combination into one clear sentence before
 * any device is touched. The option names follow nccl-tests (-b -e -f -n -c) where a
 * meaning is shared, so people can move between the two tools without a manual.
 */
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "core/log.h"

static const char usage_text[] =
  "usage: mcpnet-bench [options]\n"
  "Measures an NCCL net plugin driven as NCCL's proxy drives it, optionally next to\n"
  "perftest on the same device. Without a mode option one process connects to itself.\n"
  "\n"
  "Plugin:\n"
  "  --plugin PATH        net plugin to dlopen (default libnccl-net-mcp.so: the loader's\n"
  "                       search path first, then the copy in this build or install tree)\n"
  "  --abi v8|...|v12     ncclNetPlugin_vN table to drive (default v11)\n"
  "  --dev N              plugin device index (default 0)\n"
  "\n"
  "Two processes (role a serves and runs perftest servers; role b drives the sweep,\n"
  "runs perftest clients and prints the results):\n"
  "  --xchg DIR --role a|b   swap the listen handles through files in DIR\n"
  "  --server [HOST:]PORT    role a: accept the peer on this TCP port (every local\n"
  "                          address when HOST is left out)\n"
  "  --client HOST:PORT      role b: connect to the peer's --server\n"
  "\n"
  "Sweep:\n"
  "  -b, --minbytes SIZE  smallest size (default 8; K, M, G suffixes are powers of 2)\n"
  "  -e, --maxbytes SIZE  largest size (default 64M)\n"
  "  -f, --stepfactor F   multiply the size by F each step (default 2)\n"
  "  -r, --runs N         repeat the sweep N times, series interleaved (default 5)\n"
  "  -n, --iters N        transfers (bandwidth) or round trips (latency) per point\n"
  "                       (default: calibrated so a point takes --point-time)\n"
  "  --point-time SEC     target duration of one point (default 0.3)\n"
  "\n"
  "How the plugin is driven:\n"
  "  --depth N            receives posted ahead and sends in flight per connection,\n"
  "                       1..8 (default 8, NCCL_STEPS)\n"
  "  --conns N            connections moving data at once (default 1)\n"
  "  --group N            grouped receives: irecv with n=N and N isends with tags\n"
  "                       0..N-1 per step (default 1; at most the plugin's maxRecvs)\n"
  "  --nccl-steps         cut each transfer into steps of --step-size over 8 slots of\n"
  "                       one registered buffer, as NCCL's Simple protocol does\n"
  "  --step-size SIZE     NCCL step size (default 512K)\n"
  "  --mem SIZE           registered memory per direction for all connections\n"
  "                       (default 128M; large sizes then get fewer slots)\n"
  "  --spin               never yield the CPU between progress passes (NCCL's proxy\n"
  "                       calls sched_yield after a pass that moved nothing)\n"
  "  --pin CPU            run on this CPU only (perftest runs inherit it); on one host\n"
  "                       give the two processes different CPUs for steadier numbers\n"
  "  --cpu-cost           instead of a sweep: -n messages of -b bytes (one process, 8\n"
  "                       receives ahead), each call made only once its work is done,\n"
  "                       so that a profiler sees the success path without polling;\n"
  "                       mcpnet-cpu-cost runs it under callgrind\n"
  "  -c, --check          verify every received byte and size, in an untimed pass of\n"
  "                       each mcpnet point before its timed one (the timings touch\n"
  "                       no byte, as perftest's do; the sweep takes longer)\n"
  "  --timeout SEC        fail when nothing progresses for SEC seconds (default 120)\n"
  "\n"
  "Comparison with perftest (same device, same run, interleaved with mcpnet):\n"
  "  --compare            also run ib_write_bw and ib_write_lat\n"
  "  --compare-all        also run ib_send_bw and ib_send_lat\n"
  "  --gid-index N        GID index for perftest -x (default: the IPv4 RoCE v2 GID in\n"
  "                       sysfs, as the plugin picks it); when given, also passed to\n"
  "                       the plugin as NCCL_IB_GID_INDEX unless that is set\n"
  "  --ib-dev NAME        perftest -d (default: the plugin's device name)\n"
  "  --perftest-port P    perftest's TCP port (default 18515)\n"
  "  --perftest-host H    where role b's perftest client connects (default: role a's\n"
  "                       GID address, or the --client host)\n"
  "  --perftest-depth N   ib_write_bw/ib_send_bw -t N: writes in flight (default:\n"
  "                       perftest's own, 128); \"match\" takes --depth, so both tools\n"
  "                       keep as many messages in flight as NCCL does\n"
  "\n"
  "Output (a table like nccl-tests': median over runs and spread = (max-min)/median):\n"
  "  --json FILE|-        every (series, size) with all raw samples, for machines\n"
  "                       (with -, the table goes to stderr)\n"
  "  --plot FILE.png      bandwidth and latency against size, one curve per series\n"
  "  -v, --verbose        progress on stderr\n"
  "  -h, --help\n"
  "  --version            the mcpnet version and source revision, as the plugin logs them\n"
  "\n"
  "Units: MB/s = 1e6 bytes/s (perftest's MiB/s are converted); latency is one-way in\n"
  "microseconds, the median of per-round-trip times / 2 with receives posted ahead.\n"
  "Exit status: 0 ok, 1 data check failed, 2 usage, 3 setup or transfer failure.\n";

enum {
  OPT_PLUGIN = 256,
  OPT_ABI,
  OPT_DEV,
  OPT_XCHG,
  OPT_ROLE,
  OPT_SERVER,
  OPT_CLIENT,
  OPT_POINT_TIME,
  OPT_DEPTH,
  OPT_CONNS,
  OPT_GROUP,
  OPT_STEPS,
  OPT_STEP_SIZE,
  OPT_MEM,
  OPT_TIMEOUT,
  OPT_COMPARE,
  OPT_COMPARE_ALL,
  OPT_GID,
  OPT_IBDEV,
  OPT_PT_PORT,
  OPT_PT_HOST,
  OPT_PT_DEPTH,
  OPT_JSON,
  OPT_PLOT,
  OPT_SPIN,
  OPT_PIN,
  OPT_CPU_COST,
  OPT_VERSION
};

static const struct option long_opts[] = {
  {"plugin", required_argument, NULL, OPT_PLUGIN},
  {"abi", required_argument, NULL, OPT_ABI},
  {"dev", required_argument, NULL, OPT_DEV},
  {"xchg", required_argument, NULL, OPT_XCHG},
  {"role", required_argument, NULL, OPT_ROLE},
  {"server", required_argument, NULL, OPT_SERVER},
  {"client", required_argument, NULL, OPT_CLIENT},
  {"minbytes", required_argument, NULL, 'b'},
  {"maxbytes", required_argument, NULL, 'e'},
  {"stepfactor", required_argument, NULL, 'f'},
  {"runs", required_argument, NULL, 'r'},
  {"iters", required_argument, NULL, 'n'},
  {"point-time", required_argument, NULL, OPT_POINT_TIME},
  {"depth", required_argument, NULL, OPT_DEPTH},
  {"conns", required_argument, NULL, OPT_CONNS},
  {"group", required_argument, NULL, OPT_GROUP},
  {"nccl-steps", no_argument, NULL, OPT_STEPS},
  {"step-size", required_argument, NULL, OPT_STEP_SIZE},
  {"mem", required_argument, NULL, OPT_MEM},
  {"check", no_argument, NULL, 'c'},
  {"spin", no_argument, NULL, OPT_SPIN},
  {"pin", required_argument, NULL, OPT_PIN},
  {"cpu-cost", no_argument, NULL, OPT_CPU_COST},
  {"timeout", required_argument, NULL, OPT_TIMEOUT},
  {"compare", no_argument, NULL, OPT_COMPARE},
  {"compare-all", no_argument, NULL, OPT_COMPARE_ALL},
  {"gid-index", required_argument, NULL, OPT_GID},
  {"ib-dev", required_argument, NULL, OPT_IBDEV},
  {"perftest-port", required_argument, NULL, OPT_PT_PORT},
  {"perftest-host", required_argument, NULL, OPT_PT_HOST},
  {"perftest-depth", required_argument, NULL, OPT_PT_DEPTH},
  {"json", required_argument, NULL, OPT_JSON},
  {"plot", required_argument, NULL, OPT_PLOT},
  {"verbose", no_argument, NULL, 'v'},
  {"help", no_argument, NULL, 'h'},
  {"version", no_argument, NULL, OPT_VERSION},
  {NULL, 0, NULL, 0},
};

/* "64M", "512K", "8": binary suffixes, as nccl-tests reads them. */
static int parse_size(const char *s, size_t *out)
{
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  int shift = 0;

  if (end == s)
    return -1;
  switch (toupper((unsigned char)*end)) {
  case 'K':
    shift = 10;
    end++;
    break;
  case 'M':
    shift = 20;
    end++;
    break;
  case 'G':
    shift = 30;
    end++;
    break;
  default: break;
  }
  if (*end == 'i')
    end++;
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end != '\0' || v > (1ULL << 40) >> shift)
    return -1;
  *out = (size_t)(v << shift);
  return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
  char *end;
  long v = strtol(s, &end, 10);

  if (end == s || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

#define BAD(...)                                   \
  do {                                             \
    fprintf(stderr, "mcpnet-bench: " __VA_ARGS__); \
    fputc('\n', stderr);                           \
    return BENCH_EXIT_USAGE;                       \
  } while (0)

static int check_combination(struct bench_opts *o)
{
  size_t sizes[BENCH_MAX_SIZES + 1];

  if (o->min_size < 1 || o->max_size < o->min_size)
    BAD("the sweep needs 1 <= -b <= -e (got -b %zu -e %zu)", o->min_size, o->max_size);
  if (o->max_size > (1ULL << 30))
    BAD("-e %zu is over NCCL's 1 GiB per message", o->max_size);
  if (!(o->factor > 1.0))
    BAD("-f must be greater than 1");
  if (bench_opts_sweep(o, sizes, BENCH_MAX_SIZES + 1) > BENCH_MAX_SIZES)
    BAD("the sweep has more than %d sizes: raise -f or narrow -b/-e", BENCH_MAX_SIZES);
  if (o->nccl_steps && (o->step_size < 1 || o->step_size > (1u << 30)))
    BAD("--step-size must be between 1 byte and 1 GiB");
  if ((o->xchg != NULL) + (o->server != NULL) + (o->client != NULL) > 1)
    BAD("choose one of --xchg, --server and --client");
  if (o->xchg != NULL && o->role == BENCH_SELF)
    BAD("--xchg needs --role a or --role b");
  if (o->server != NULL) {
    if (o->role == BENCH_ROLE_B)
      BAD("--server is role a");
    o->role = BENCH_ROLE_A;
  }
  if (o->client != NULL) {
    if (o->role == BENCH_ROLE_A)
      BAD("--client is role b");
    if (strrchr(o->client, ':') == NULL)
      BAD("--client wants HOST:PORT");
    o->role = BENCH_ROLE_B;
  }
  if (o->role != BENCH_SELF && o->xchg == NULL && o->server == NULL && o->client == NULL)
    BAD("--role needs --xchg DIR");
  if (o->cpu_cost && (o->role != BENCH_SELF || o->compare || o->conns > 1 || o->group > 1 || o->nccl_steps))
    BAD("--cpu-cost runs one connection in one process: no --xchg/--server/--client, --compare, --conns, "
        "--group or --nccl-steps");
  if (o->pt_depth < 0)
    o->pt_depth = o->depth;
  if (o->pt_depth > 0 && !o->compare)
    BAD("--perftest-depth needs --compare");
  if (o->role == BENCH_ROLE_A && (o->json || o->plot))
    fprintf(stderr, "mcpnet-bench: note: role a serves; role b writes --json and --plot\n");
  return 0;
}

int bench_opts_parse(struct bench_opts *o, int argc, char **argv)
{
  long v;
  int c;

  memset(o, 0, sizeof(*o));
  o->plugin = "libnccl-net-mcp.so";
  o->abi = 11;
  o->min_size = 8;
  o->max_size = 64u << 20;
  o->factor = 2.0;
  o->runs = 5;
  o->conns = 1;
  o->group = 1;
  o->depth = BENCH_MAX_DEPTH;
  o->step_size = 512u << 10;
  o->mem_max = 128u << 20;
  o->point_time = 0.3;
  o->timeout_s = 120;
  o->gid_index = -1;
  o->perftest_port = 18515;
  o->role = BENCH_SELF;
  o->pin_cpu = -1;

  while ((c = getopt_long(argc, argv, "b:e:f:r:n:cvh", long_opts, NULL)) != -1) {
    switch (c) {
    case OPT_PLUGIN:
      o->plugin = optarg;
      o->plugin_given = 1;
      break;
    case OPT_ABI:
      if (optarg[0] == 'v')
        optarg++;
      if (parse_int(optarg, 8, 12, &v) != 0)
        BAD("--abi wants v8, v9, v10, v11 or v12");
      o->abi = (int)v;
      break;
    case OPT_DEV:
      if (parse_int(optarg, 0, 1023, &v) != 0)
        BAD("--dev wants a device index");
      o->dev = (int)v;
      break;
    case OPT_XCHG: o->xchg = optarg; break;
    case OPT_ROLE:
      if (strcmp(optarg, "a") == 0)
        o->role = BENCH_ROLE_A;
      else if (strcmp(optarg, "b") == 0)
        o->role = BENCH_ROLE_B;
      else
        BAD("--role wants a or b");
      break;
    case OPT_SERVER: o->server = optarg; break;
    case OPT_CLIENT: o->client = optarg; break;
    case 'b':
      if (parse_size(optarg, &o->min_size) != 0)
        BAD("-b wants a size such as 8, 4K or 1M");
      break;
    case 'e':
      if (parse_size(optarg, &o->max_size) != 0)
        BAD("-e wants a size such as 64M");
      break;
    case 'f': o->factor = strtod(optarg, NULL); break;
    case 'r':
      if (parse_int(optarg, 1, BENCH_MAX_RUNS, &v) != 0)
        BAD("--runs wants 1..%d", BENCH_MAX_RUNS);
      o->runs = (int)v;
      break;
    case 'n':
      if (parse_int(optarg, 1, 100000000, &v) != 0)
        BAD("--iters wants a positive count");
      o->iters = v;
      break;
    case OPT_POINT_TIME:
      o->point_time = strtod(optarg, NULL);
      if (!(o->point_time > 0.0 && o->point_time <= 600))
        BAD("--point-time wants seconds, e.g. 0.3");
      break;
    case OPT_DEPTH:
      if (parse_int(optarg, 1, BENCH_MAX_DEPTH, &v) != 0)
        BAD("--depth wants 1..%d", BENCH_MAX_DEPTH);
      o->depth = (int)v;
      break;
    case OPT_CONNS:
      if (parse_int(optarg, 1, BENCH_MAX_CONNS, &v) != 0)
        BAD("--conns wants 1..%d", BENCH_MAX_CONNS);
      o->conns = (int)v;
      break;
    case OPT_GROUP:
      if (parse_int(optarg, 1, BENCH_MAX_GROUP, &v) != 0)
        BAD("--group wants 1..%d", BENCH_MAX_GROUP);
      o->group = (int)v;
      break;
    case OPT_STEPS: o->nccl_steps = 1; break;
    case OPT_STEP_SIZE:
      if (parse_size(optarg, &o->step_size) != 0)
        BAD("--step-size wants a size such as 512K");
      break;
    case OPT_MEM:
      if (parse_size(optarg, &o->mem_max) != 0)
        BAD("--mem wants a size such as 256M");
      break;
    case 'c': o->check = 1; break;
    case OPT_SPIN: o->spin = 1; break;
    case OPT_PIN:
      if (parse_int(optarg, 0, CPU_SETSIZE - 1, &v) != 0)
        BAD("--pin wants a CPU number");
      o->pin_cpu = (int)v;
      break;
    case OPT_CPU_COST: o->cpu_cost = 1; break;
    case OPT_TIMEOUT:
      if (parse_int(optarg, 1, 86400, &v) != 0)
        BAD("--timeout wants seconds");
      o->timeout_s = (int)v;
      break;
    case OPT_COMPARE:
      if (o->compare < 1)
        o->compare = 1;
      break;
    case OPT_COMPARE_ALL: o->compare = 2; break;
    case OPT_GID:
      if (parse_int(optarg, 0, 65535, &v) != 0)
        BAD("--gid-index wants an index");
      o->gid_index = (int)v;
      o->gid_given = 1;
      break;
    case OPT_IBDEV: o->ib_dev = optarg; break;
    case OPT_PT_PORT:
      if (parse_int(optarg, 1, 65535, &v) != 0)
        BAD("--perftest-port wants a TCP port");
      o->perftest_port = (int)v;
      break;
    case OPT_PT_HOST: o->perftest_host = optarg; break;
    case OPT_PT_DEPTH:
      if (strcmp(optarg, "match") == 0)
        o->pt_depth = -1; /* --depth may come later on the line */
      else if (parse_int(optarg, 1, 8192, &v) != 0)
        BAD("--perftest-depth wants 1..8192 or match");
      else
        o->pt_depth = (int)v;
      break;
    case OPT_JSON: o->json = optarg; break;
    case OPT_PLOT: o->plot = optarg; break;
    case 'v': o->verbose = 1; break;
    case 'h': fputs(usage_text, stdout); return -1;
    case OPT_VERSION: printf("mcpnet-bench: %s\n", mcp_version_text()); return -1;
    default: fputs(usage_text, stderr); return BENCH_EXIT_USAGE;
    }
  }
  if (optind < argc)
    BAD("unexpected argument '%s' (see --help)", argv[optind]);
  return check_combination(o);
}

int bench_opts_sweep(const struct bench_opts *o, size_t *sizes, int max)
{
  double s = (double)o->min_size;
  size_t last = 0;
  int n = 0;

  /* As nccl-tests: size *= factor while size <= max; the end is included only when
   * the factor lands on it. Rounding never repeats a size. */
  while (s <= (double)o->max_size + 0.5 && n < max) {
    size_t cur = (size_t)llround(s);
    if (cur > last)
      sizes[n++] = last = cur;
    s *= o->factor;
  }
  return n;
}

void bench_opts_describe(const struct bench_opts *o, char *buf, size_t len)
{
  snprintf(buf, len,
           "mcpnet-bench/2 sizes=%zu..%zu*%g conns=%d group=%d depth=%d steps=%d/%zu mem=%zu check=%d "
           "compare=%d perftest-port=%d perftest-depth=%d",
           o->min_size, o->max_size, o->factor, o->conns, o->group, o->depth, o->nccl_steps, o->step_size,
           o->mem_max, o->check, o->compare, o->perftest_port, o->pt_depth);
}
