/*
 * doctor_main.c - mcpnet-doctor's entry point: reads the options, runs the one-node
 * steps in order (configuration, devices, selection, host), the two-node check when
 * --listen or --peer asks for it, writes the report as text or JSON, and turns the
 * findings into the exit status (1 on any FAIL). The steps themselves live in the
 * other doctor_*.c files.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "doctor_ctl.h"
#include "doctor_fleet.h"
#include "doctor_rankmap.h"
#include "core/log.h"

/* --suggest-rank-map is a mode of its own (no report, no plugin): kept out of doctor_opts. */
static int suggest_rank_map;
static const char *sysfs_root = "/sys";
/* --fleet is a mode of its own too (doctor_fleet_run.c); its three values live here. */
static int fleet;
static struct fleet_opts fleet_o = {NULL, -1, -1};

static void usage(FILE *f)
{
  fputs(
    "usage: mcpnet-doctor [options]                  this host: devices, selection, configuration, host\n"
    "       mcpnet-doctor --listen [options]         the same, then wait for a --peer and check the pair\n"
    "       mcpnet-doctor --peer HOST[:PORT] [options]\n"
    "Checks what an NCCL job over mcpnet needs, with the plugin's own code, and says what to fix.\n"
    "Exit status: 0 when nothing FAILs, 1 when something does, 2 for a usage error.\n"
    "  --json             the same report as one JSON object\n"
    "  --verbose          also print what the plugin's code logs, on stderr\n"
    "  --min-memlock MIB  a locked-memory limit below this FAILs (default 64)\n"
    "  --version          the mcpnet version and source revision, as the plugin logs them\n"
    "Two hosts:\n"
    "  --listen           wait for one mcpnet-doctor --peer, then check the pair\n"
    "  --peer HOST[:PORT] connect to a mcpnet-doctor --listen on HOST\n"
    "  --port P           the control connection's TCP port (default 18650)\n"
    "  --bind ADDR        --listen: the local address to listen on (default: all)\n"
    "  --wait S           --listen: how long to wait for the peer (default 300); --fleet: on\n"
    "                     node 0, for every node, elsewhere, to keep trying node 0\n"
    "  --timeout S        deadline of each network step: connect, handshake, answers (default 15)\n"
    "  --seconds S        time spent measuring bandwidth and latency (default 3)\n"
    "  --size BYTES       bandwidth message size (default 1048576)\n"
    "  --dev N            the plugin device to check (default 0)\n"
    "  --plugin PATH      the plugin to load (default libnccl-net-mcp.so, as NCCL finds it)\n"
    "  The two hosts prove to each other that they know the run's token, MCPNET_DOCTOR_TOKEN (at\n"
    "  least 16 characters; --listen draws one and prints it when it is unset); other connections\n"
    "  are ignored.\n"
    "Rank map:\n"
    "  --suggest-rank-map print the MCPNET_RANK_MAP that puts each local rank on its nearest NIC port\n"
    "                     by PCI distance, with the reasoning (reads CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER)\n"
    "  --sysfs-root DIR   read DIR instead of /sys (a copy of another host's tree)\n"
    "Fleet (run once per node; node 0 prints one table, every node exits 0 healthy, 1 named):\n"
    "  --fleet            check this node, and with node 0 the pairs that matter, as one fleet\n"
    "  --coordinator HOST[:PORT]  node 0's address (default MCPNET_FLEET_COORDINATOR, else the\n"
    "                     first host of SLURM_JOB_NODELIST); --port is the default port\n"
    "  --nodes N          the number of nodes (default SLURM_NNODES, else MCPNET_FLEET_NODES)\n"
    "  --node-rank R      this node's rank (default SLURM_NODEID, else JOB_COMPLETION_INDEX,\n"
    "                     else MCPNET_FLEET_RANK); --wait bounds the wait for all nodes\n"
    "  MCPNET_DOCTOR_TOKEN  the run's token, the same on every node (required)\n",
    f);
}

enum {
  OPT_JSON = 256,
  OPT_VERBOSE,
  OPT_LISTEN,
  OPT_PEER,
  OPT_PORT,
  OPT_BIND,
  OPT_WAIT,
  OPT_TIMEOUT,
  OPT_SECONDS,
  OPT_SIZE,
  OPT_DEV,
  OPT_PLUGIN,
  OPT_MEMLOCK,
  OPT_HELP,
  OPT_VERSION,
  OPT_SUGGEST_RANK_MAP,
  OPT_SYSFS_ROOT,
  OPT_FLEET,
  OPT_COORDINATOR,
  OPT_NODES,
  OPT_NODE_RANK
};

static const struct option long_opts[] = {
  {"json", no_argument, NULL, OPT_JSON},
  {"verbose", no_argument, NULL, OPT_VERBOSE},
  {"listen", no_argument, NULL, OPT_LISTEN},
  {"peer", required_argument, NULL, OPT_PEER},
  {"port", required_argument, NULL, OPT_PORT},
  {"bind", required_argument, NULL, OPT_BIND},
  {"wait", required_argument, NULL, OPT_WAIT},
  {"timeout", required_argument, NULL, OPT_TIMEOUT},
  {"seconds", required_argument, NULL, OPT_SECONDS},
  {"size", required_argument, NULL, OPT_SIZE},
  {"dev", required_argument, NULL, OPT_DEV},
  {"plugin", required_argument, NULL, OPT_PLUGIN},
  {"min-memlock", required_argument, NULL, OPT_MEMLOCK},
  {"help", no_argument, NULL, OPT_HELP},
  {"version", no_argument, NULL, OPT_VERSION},
  {"suggest-rank-map", no_argument, NULL, OPT_SUGGEST_RANK_MAP},
  {"sysfs-root", required_argument, NULL, OPT_SYSFS_ROOT},
  {"fleet", no_argument, NULL, OPT_FLEET},
  {"coordinator", required_argument, NULL, OPT_COORDINATOR},
  {"nodes", required_argument, NULL, OPT_NODES},
  {"node-rank", required_argument, NULL, OPT_NODE_RANK},
  {NULL, 0, NULL, 0},
};

/* A whole number in lo..hi, or -1. */
static long long number(const char *text, long long lo, long long hi)
{
  char *end;
  long long v = strtoll(text, &end, 10);

  return end != text && *end == '\0' && v >= lo && v <= hi ? v : -1;
}

static int parse(int argc, char **argv, struct doctor_opts *o)
{
  int c;
  long long v;

  memset(o, 0, sizeof(*o));
  o->port = DOCTOR_DEFAULT_PORT;
  o->timeout_s = 15;
  o->wait_s = 300;
  o->seconds = 3.0;
  o->size = 1u << 20;
  o->plugin = "libnccl-net-mcp.so";
  o->min_memlock = 64ull << 20;
  while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
    switch (c) {
    case OPT_JSON: o->json = 1; break;
    case OPT_VERBOSE: o->verbose = 1; break;
    case OPT_LISTEN: o->listen = 1; break;
    case OPT_PEER: o->peer = optarg; break;
    case OPT_BIND: o->bind = optarg; break;
    case OPT_PLUGIN:
      o->plugin = optarg;
      o->plugin_given = 1;
      break;
    case OPT_PORT:
      if ((v = number(optarg, 1, 65535)) < 0)
        goto bad;
      o->port = (int)v;
      break;
    case OPT_WAIT:
      if ((v = number(optarg, 1, 86400)) < 0)
        goto bad;
      o->wait_s = (int)v;
      break;
    case OPT_TIMEOUT:
      if ((v = number(optarg, 1, 3600)) < 0)
        goto bad;
      o->timeout_s = (int)v;
      break;
    case OPT_SECONDS:
      if ((v = number(optarg, 1, 600)) < 0)
        goto bad;
      o->seconds = (double)v;
      break;
    case OPT_SIZE:
      if ((v = number(optarg, 8, 1ll << 30)) < 0)
        goto bad;
      o->size = (size_t)v;
      break;
    case OPT_DEV:
      if ((v = number(optarg, 0, MCP_MAX_NET_DEVS - 1)) < 0)
        goto bad;
      o->dev = (int)v;
      break;
    case OPT_MEMLOCK:
      if ((v = number(optarg, 0, 1ll << 30)) < 0)
        goto bad;
      o->min_memlock = (size_t)v << 20;
      break;
    case OPT_VERSION: printf("mcpnet-doctor: %s\n", mcp_version_text()); exit(DOCTOR_EXIT_OK);
    case OPT_HELP:
    case 'h': usage(stdout); exit(DOCTOR_EXIT_OK);
    case OPT_SUGGEST_RANK_MAP: suggest_rank_map = 1; break;
    case OPT_SYSFS_ROOT: sysfs_root = optarg; break;
    case OPT_FLEET: fleet = 1; break;
    case OPT_COORDINATOR: fleet_o.coordinator = optarg; break;
    case OPT_NODES:
      if ((v = number(optarg, 1, FLEET_MAX_NODES)) < 0)
        goto bad;
      fleet_o.nodes = (int)v;
      break;
    case OPT_NODE_RANK:
      if ((v = number(optarg, 0, FLEET_MAX_NODES - 1)) < 0)
        goto bad;
      fleet_o.rank = (int)v;
      break;
    default: usage(stderr); return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "mcpnet-doctor: unexpected argument '%s'\n", argv[optind]);
    return -1;
  }
  if (o->listen && o->peer != NULL) {
    fputs("mcpnet-doctor: --listen and --peer are the two ends: give one\n", stderr);
    return -1;
  }
  if (fleet && (o->listen || o->peer != NULL)) {
    fputs("mcpnet-doctor: --fleet checks its own pairs: leave out --listen and --peer\n", stderr);
    return -1;
  }
  return 0;
bad:
  fprintf(stderr, "mcpnet-doctor: --%s: '%s' is out of range (see --help)\n", long_opts[c - OPT_JSON].name,
          optarg);
  return -1;
}

int main(int argc, char **argv)
{
  static struct doctor_opts o;
  struct doctor_report *r;
  int status;

  if (parse(argc, argv, &o) != 0)
    return DOCTOR_EXIT_USAGE;
  if (suggest_rank_map) {
    char map[1024], err[512];

    if (doctor_rankmap_suggest(sysfs_root, getenv("CUDA_VISIBLE_DEVICES"), getenv("CUDA_DEVICE_ORDER"),
                               stdout, map, sizeof(map), err, sizeof(err)) != 0) {
      fflush(stdout);
      fprintf(stderr, "mcpnet-doctor: no rank map to suggest: %s\n", err);
      return DOCTOR_EXIT_FAIL;
    }
    return DOCTOR_EXIT_OK;
  }
  if (fleet)
    return doctor_fleet_main(&o, &fleet_o);
  if ((o.listen || o.peer != NULL) &&
      doctor_ctl_run_token("mcpnet-doctor", o.listen ? "--listen" : "--peer", o.listen ? o.drawn_token : NULL,
                           sizeof(o.drawn_token)) != 0)
    return DOCTOR_EXIT_USAGE;
  r = calloc(1, sizeof(*r));
  if (r == NULL) {
    fputs("mcpnet-doctor: out of memory\n", stderr);
    return DOCTOR_EXIT_FAIL;
  }
  doctor_report_init(r, &o);
  doctor_log_setup(o.verbose);
  doctor_config_load(r);
  doctor_devices_scan(r);
  doctor_devices_check(r);
  doctor_select_run(r);
  doctor_host_check(r);
  if (o.listen || o.peer != NULL)
    doctor_pair_run(r);
  if (o.json)
    doctor_json_write(r, stdout);
  else
    doctor_text_write(r, stdout);
  fflush(stdout);
  status = doctor_exit_status(r);
  doctor_report_free(r);
  free(r);
  return status;
}
