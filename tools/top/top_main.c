/*
 * top_main.c - mcpnet-top's entry point: the options, then the node's view refreshed
 * like top (or once, as text or JSON), the Prometheus file, or --fleet.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/param.h"
#include "top.h"

static void usage(FILE *f)
{
  fputs(
    "usage: mcpnet-top [options]         every mcpnet process on this node and its comms, refreshed like top\n"
    "       mcpnet-top --once [--json]   one view, then exit\n"
    "       mcpnet-top --fleet [options] run on every node: node 0 names where each waiting chain ends\n"
    "Which connection is the job waiting on, and why: each mcpnet process publishes its comms in a\n"
    "file of its own (MCPNET_STATUS_DIR, default /dev/shm) that this tool reads without the\n"
    "process's help, even when it is stopped or stuck in a GPU kernel.\n"
    "Exit status (--once, --fleet): 0 nothing waits, 1 something waits (named), 2 usage error,\n"
    "3 the view is incomplete (a node did not report, or the directory cannot be read).\n"
    "  --once             print one view and exit\n"
    "  --json             the view (or with --fleet the roots) as JSON; implies --once\n"
    "  --interval S       seconds between refreshes (default 2)\n"
    "  --sample S         seconds between the two reads that tell a moving comm from a stuck one\n"
    "                     (default 1; 0: one read)\n"
    "  --stall S          a comm without progress for S seconds waits (default 5)\n"
    "  --waiting          leave idle comms out of the table\n"
    "  --dir DIR          the status files' directory (default MCPNET_STATUS_DIR)\n"
    "  --prometheus FILE  also write the figures as Prometheus text to FILE (e.g. node_exporter's\n"
    "                     textfile directory/mcpnet.prom), replaced atomically at every refresh\n"
    "  --version          the mcpnet version and source revision\n"
    "Fleet (run once per node; node 0 is found as mcpnet-doctor --fleet finds it):\n"
    "  --fleet            send this node's view to node 0; node 0 joins them by connection and\n"
    "                     prints the roots of the wait-for graph; every node prints them\n"
    "  --coordinator HOST[:PORT]  node 0 (default MCPNET_FLEET_COORDINATOR, else the first host of\n"
    "                     SLURM_JOB_NODELIST)\n"
    "  --nodes N          number of nodes (default SLURM_NNODES, else MCPNET_FLEET_NODES)\n"
    "  --node-rank R      this node's rank (default SLURM_NODEID, JOB_COMPLETION_INDEX, MCPNET_FLEET_RANK)\n"
    "  --port P           node 0's port (default 18651)\n"
    "  --wait S           how long node 0 waits for every node, and a node keeps trying node 0 (default 60)\n"
    "  --timeout S        deadline of each network step (default 15)\n"
    "  MCPNET_DOCTOR_TOKEN  the run's token, the same on every node (required for --fleet)\n",
    f);
}

enum {
  OPT_ONCE = 256,
  OPT_JSON,
  OPT_INTERVAL,
  OPT_SAMPLE,
  OPT_STALL,
  OPT_WAITING,
  OPT_DIR,
  OPT_PROM,
  OPT_VERSION,
  OPT_HELP,
  OPT_FLEET,
  OPT_COORDINATOR,
  OPT_NODES,
  OPT_NODE_RANK,
  OPT_PORT,
  OPT_WAIT,
  OPT_TIMEOUT
};

static const struct option long_opts[] = {
  {"once", no_argument, NULL, OPT_ONCE},
  {"json", no_argument, NULL, OPT_JSON},
  {"interval", required_argument, NULL, OPT_INTERVAL},
  {"sample", required_argument, NULL, OPT_SAMPLE},
  {"stall", required_argument, NULL, OPT_STALL},
  {"waiting", no_argument, NULL, OPT_WAITING},
  {"dir", required_argument, NULL, OPT_DIR},
  {"prometheus", required_argument, NULL, OPT_PROM},
  {"version", no_argument, NULL, OPT_VERSION},
  {"help", no_argument, NULL, OPT_HELP},
  {"fleet", no_argument, NULL, OPT_FLEET},
  {"coordinator", required_argument, NULL, OPT_COORDINATOR},
  {"nodes", required_argument, NULL, OPT_NODES},
  {"node-rank", required_argument, NULL, OPT_NODE_RANK},
  {"port", required_argument, NULL, OPT_PORT},
  {"wait", required_argument, NULL, OPT_WAIT},
  {"timeout", required_argument, NULL, OPT_TIMEOUT},
  {NULL, 0, NULL, 0},
};

/* A number in lo..hi, or -1. */
static double number(const char *text, double lo, double hi)
{
  char *end;
  double v = strtod(text, &end);

  return end != text && *end == '\0' && v >= lo && v <= hi ? v : -1;
}

struct opts {
  int once, json, waiting, fleet;
  double interval, sample, stall;
  const char *dir, *prom;
  struct top_fleet_opts fo;
};

static int parse(int argc, char **argv, struct opts *o)
{
  int c;
  double v;

  while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
    switch (c) {
    case OPT_ONCE: o->once = 1; break;
    case OPT_JSON: o->json = o->once = 1; break;
    case OPT_WAITING: o->waiting = 1; break;
    case OPT_FLEET: o->fleet = o->once = 1; break;
    case OPT_DIR: o->dir = optarg; break;
    case OPT_PROM: o->prom = optarg; break;
    case OPT_COORDINATOR: o->fo.coordinator = optarg; break;
    case OPT_INTERVAL:
      if ((o->interval = number(optarg, 0.1, 3600)) < 0)
        goto bad;
      break;
    case OPT_SAMPLE:
      if ((o->sample = number(optarg, 0, 60)) < 0)
        goto bad;
      break;
    case OPT_STALL:
      if ((o->stall = number(optarg, 0.1, 86400)) < 0)
        goto bad;
      break;
    case OPT_NODES:
      if ((v = number(optarg, 1, 4096)) < 0 || v != (int)v)
        goto bad;
      o->fo.nodes = (int)v;
      break;
    case OPT_NODE_RANK:
      if ((v = number(optarg, 0, 4095)) < 0 || v != (int)v)
        goto bad;
      o->fo.rank = (int)v;
      break;
    case OPT_PORT:
      if ((v = number(optarg, 1, 65535)) < 0 || v != (int)v)
        goto bad;
      o->fo.port = (int)v;
      break;
    case OPT_WAIT:
      if ((v = number(optarg, 1, 86400)) < 0 || v != (int)v)
        goto bad;
      o->fo.wait_s = (int)v;
      break;
    case OPT_TIMEOUT:
      if ((v = number(optarg, 1, 3600)) < 0 || v != (int)v)
        goto bad;
      o->fo.timeout_s = (int)v;
      break;
    case OPT_VERSION: printf("mcpnet-top: %s\n", mcp_version_text()); exit(TOP_EXIT_OK);
    case OPT_HELP:
    case 'h': usage(stdout); exit(TOP_EXIT_OK);
    default: usage(stderr); return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "mcpnet-top: unexpected argument '%s'\n", argv[optind]);
    return -1;
  }
  return 0;
bad:
  fprintf(stderr, "mcpnet-top: --%s: '%s' is out of range (see --help)\n", long_opts[c - OPT_ONCE].name,
          optarg);
  return -1;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
  (void)sig;
  stop = 1;
}

int main(int argc, char **argv)
{
  static struct opts o = {
    .interval = 2, .sample = 1, .stall = 5, .fo = {NULL, -1, -1, TOP_DEFAULT_PORT, 60, 15, 0}};
  struct mcp_config cfg;
  char err[300];
  int status = TOP_EXIT_OK, tty = isatty(STDOUT_FILENO);

  if (parse(argc, argv, &o) != 0)
    return TOP_EXIT_USAGE;
  o.fo.json = o.json;
  mcp_log_set_stderr(NCCL_LOG_WARN);
  /* The directory as the plugin reads it: the same parameter table and files. */
  mcp_param_load(&cfg, NULL, 0, err, sizeof(err));
  if (o.dir == NULL)
    o.dir = cfg.status_dir != NULL ? cfg.status_dir : "/dev/shm";
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  for (;;) {
    struct top_view v;
    struct top_out_opts out = {.all = !o.waiting};

    if (top_view_read(o.dir, o.sample, &v, err, sizeof(err)) != 0) {
      fprintf(stderr, "mcpnet-top: %s (is MCPNET_STATUS_DIR the plugin's? see --dir)\n", err);
      status = TOP_EXIT_PARTIAL;
      if (o.once || stop)
        break;
    } else {
      top_classify(&v, o.stall);
      if (o.prom != NULL) {
        int rc = top_prom_file(&v, o.prom);

        if (rc != 0)
          fprintf(stderr, "mcpnet-top: cannot write %s: %s\n", o.prom, strerror(-rc));
      }
      if (o.fleet) {
        status = top_fleet_main(&v, &o.fo);
        top_view_free(&v);
        break;
      }
      if (!o.once && tty)
        fputs("\033[H\033[2J", stdout);
      if (o.json)
        top_json_write(&v, stdout);
      else
        top_text_write(&v, &out, stdout);
      fflush(stdout);
      status = TOP_EXIT_OK;
      for (int i = 0; i < v.nproc; i++) {
        status |= v.proc[i].stopped == 1 ? TOP_EXIT_WAITING : 0;
        for (int k = 0; k < v.proc[i].ncomm; k++)
          status |= v.proc[i].comm[k].waits ? TOP_EXIT_WAITING : 0;
      }
      top_view_free(&v);
    }
    if (o.once || stop)
      break;
    {
      struct timespec ts = {(time_t)o.interval, (long)((o.interval - (double)(time_t)o.interval) * 1e9)};

      nanosleep(&ts, NULL);
    }
    if (stop)
      break;
  }
  mcp_param_free(&cfg);
  return status;
}
