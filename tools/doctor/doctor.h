/*
 * doctor.h - the pieces of mcpnet-doctor and the report they fill together.
 *
 * mcpnet-doctor answers "why will this multi-node job not start, or why does it hang"
 * with the plugin's own code: it links mcpnet_core for the inventory, the parameter
 * loader and the device selection, and drives the built plugin through its exported
 * table (tools/drive) for the two-node check. Each step adds facts and findings to one
 * in-memory report (struct doctor_report); the text and the JSON output are two views
 * of that same report, so they cannot disagree. The split by role: devices
 * (doctor_devices.c), selection per local rank (doctor_select.c), configuration
 * (doctor_config.c), host checks (doctor_host.c), this host's summary for a peer and the
 * comparison of two (doctor_summary.c), the TCP control connection (doctor_ctl.c), the
 * plugin as NCCL loads it (doctor_plugin.c), the two-node run (doctor_pair.c), and the
 * outputs (doctor_report.c, doctor_text.c, doctor_json.c).
 */
#ifndef MCPNET_DOCTOR_H
#define MCPNET_DOCTOR_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/param.h"
#include "fabric/fabric.h"

#define DOCTOR_MAX_FINDINGS 256
#define DOCTOR_MAX_DEVS 64
#define DOCTOR_MAX_SELECTIONS 64
#define DOCTOR_RANKS_CHECKED 64   /* discoveries run for a rank map, at most */
#define DOCTOR_DEFAULT_PORT 18650 /* the control connection of --listen / --peer */

/* Exit statuses. */
enum { DOCTOR_EXIT_OK = 0, DOCTOR_EXIT_FAIL = 1, DOCTOR_EXIT_USAGE = 2 };

enum doctor_level { DOCTOR_OK = 0, DOCTOR_WARN = 1, DOCTOR_FAIL = 2 };

/* Report sections, in print order. */
enum doctor_section {
  DOCTOR_SEC_DEVICES,
  DOCTOR_SEC_SELECTION,
  DOCTOR_SEC_CONFIG,
  DOCTOR_SEC_HOST,
  DOCTOR_SEC_PEER,
  DOCTOR_SEC_COUNT
};

struct doctor_finding {
  enum doctor_level level;
  enum doctor_section section;
  char check[32];    /* stable identifier for machines: "memlock", "port-state", ... */
  char subject[64];  /* what it is about: "rxe0:1", "NCCL_NET", "" */
  char message[640]; /* one line: what is wrong (or right), with the values */
  char remedy[512];  /* one line: what to do; "" for OK */
};

/* ---- Devices (doctor_devices.c) ------------------------------------------------------ */

struct doctor_gid {
  int index;
  char gid[64];  /* as mcp_gid_format writes it */
  char type[12]; /* "IB", "RoCE v1", "RoCE v2" */
  char netdev[IF_NAMESIZE];
  int in_ns; /* the netdev belongs to this network namespace */
  int up;
};

struct doctor_port {
  int num;
  char state[16], phys_state[24];
  char link_layer[16]; /* "InfiniBand", "Ethernet", "unknown" */
  int ethernet;
  char rate[64];
  int rate_mbps;
  int active_mtu, max_mtu; /* bytes; 0 when verbs could not tell */
  int lid;
  int netlink_rc;               /* mcp_netns_port_netdev's answer: 0 or a negative errno */
  char netdev[IF_NAMESIZE];     /* the port's netdev in this namespace, "" when none */
  char gid_netdev[IF_NAMESIZE]; /* the netdev sysfs names for its GIDs (any namespace) */
  int netdev_mtu;               /* of netdev (or gid_netdev when here), 0 unknown */
  int gid_slots, gid_skipped;
  int ngid;
  struct doctor_gid *gid;
  int ngid_ours;   /* GIDs on a netdev of this namespace */
  int ngid_usable; /* of those, on an up netdev and not link-local */
  char pkeys[160]; /* non-empty P_Key entries: "0xffff, 0x8001" */
};

struct doctor_dev {
  char name[MCP_DEV_NAME_MAX];
  char driver[32];
  char uverbs[32]; /* "uverbs0" from sysfs, "" unknown */
  int opens;       /* ibv_open_device worked */
  char open_err[160];
  int nport;
  struct doctor_port *port;
};

/* ---- Selection (doctor_select.c) ----------------------------------------------------- */

struct doctor_selection {
  int lo, hi;              /* local ranks lo..hi; -1, -1: the process as it is */
  const char *rank_source; /* where the rank came from, or NULL */
  int rc;                  /* mcp_fabric_discover_rank's result */
  struct mcp_fabric fab;
  char warn[1024]; /* WARNs the discovery logged, "; "-separated */
};

/* ---- Two nodes (doctor_summary.c, doctor_pair.c) ------------------------------------- */

/* What one host tells the other about the port and settings it will use. */
struct doctor_summary {
  char host[64];
  char version[32];
  char oob[96]; /* "192.0.2.1 (eth0)" */
  char dev[MCP_DEV_NAME_MAX];
  int port;
  char link_layer[16];
  int mtu;     /* the port's active MTU, bytes */
  int mtu_cap; /* MCPNET_MTU, 0 none */
  char netdev[IF_NAMESIZE];
  int netdev_mtu;
  int rate_mbps;
  int gid_index;
  char gid[64];
  char gid_type[12];
  int gid_family;  /* 4, 6, 0 */
  char subnet[64]; /* "192.0.2.0/24", "" unknown */
  int pkey;        /* value, -1 unknown */
  int pkey_index;
  int pkey_full;
  int sl, tc; /* effective settings, -1 unset */
  int timeout, retry, rnr_retry, qps;
  int ok; /* a usable port was found */
};

struct doctor_pair_result {
  int ran;       /* the two-node check ran (listen or peer mode) */
  int connected; /* the plugin's handshake finished */
  int verified;  /* the verified message arrived intact both ways */
  double bw_mbs; /* MB/s (10^6 bytes/s), 0 when not measured */
  size_t bw_size;
  long bw_msgs;
  double bw_seconds;
  double lat_us; /* one-way, half the median round trip */
  long lat_rounds;
  char peer_addr[96]; /* the control connection's far end */
  char plugin_path[512];
  int have_peer;
  struct doctor_summary local, peer;
};

/* ---- Options and the report ------------------------------------------------------------ */

struct doctor_opts {
  int json;
  int verbose;
  int listen;
  const char *peer; /* HOST[:PORT] */
  const char *bind; /* --bind ADDR for --listen */
  int port;
  int timeout_s;  /* each network step */
  int wait_s;     /* --listen: how long to wait for the peer */
  double seconds; /* measuring time */
  size_t size;    /* bandwidth message size */
  int dev;        /* the plugin device the two-node check uses */
  const char *plugin;
  int plugin_given;
  size_t min_memlock;   /* bytes below which the locked-memory limit FAILs */
  char drawn_token[40]; /* --listen without MCPNET_DOCTOR_TOKEN: the one it drew and prints */
};

/* The listener's measurement plan as the other side reads it off the network: "end",
 * "bw COUNT SIZE" (SIZE at most max_size) or "lat COUNT", COUNT 1..DOCTOR_PLAN_MAX_COUNT;
 * anything else is BAD. */
enum { DOCTOR_PLAN_BAD = -1, DOCTOR_PLAN_END = 0, DOCTOR_PLAN_BW = 1, DOCTOR_PLAN_LAT = 2 };
#define DOCTOR_PLAN_MAX_COUNT 10000000L
int doctor_plan_parse(const char *text, size_t max_size, long *count, size_t *size);

struct doctor_report {
  const struct doctor_opts *o;
  char host[64];
  int nfind;
  struct doctor_finding find[DOCTOR_MAX_FINDINGS];
  int ndev;
  struct doctor_dev dev[DOCTOR_MAX_DEVS];
  int devs_rc;         /* 0, or a negative errno when sysfs could not be read */
  char verbs_err[256]; /* "" when libibverbs loaded */
  struct mcp_config cfg;
  int cfg_rc;
  int nsel;
  struct doctor_selection *sel[DOCTOR_MAX_SELECTIONS];
  int own_rank;     /* this process's local rank, -1 unknown */
  int ranks_capped; /* a rank map had more ranks than DOCTOR_RANKS_CHECKED */
  struct doctor_pair_result pair;
  /* Host facts for both outputs. */
  long long memlock_bytes; /* -1: unlimited */
  int cap_ipc_lock;
  long long shm_bytes; /* -1: no /dev/shm */
  char oob_iface[IF_NAMESIZE];
  char oob_addr[64];
  double tte_s, rnr_s;
};

/* doctor_report.c */
void doctor_report_init(struct doctor_report *r, const struct doctor_opts *o);
void doctor_report_free(struct doctor_report *r);
void doctor_add(struct doctor_report *r, enum doctor_level level, enum doctor_section section,
                const char *check, const char *subject, const char *remedy, const char *fmt, ...)
  __attribute__((format(printf, 7, 8)));
int doctor_count(const struct doctor_report *r, enum doctor_level level);
int doctor_exit_status(const struct doctor_report *r);
const char *doctor_level_name(enum doctor_level level);
const char *doctor_section_name(enum doctor_section section);
/* Collects the WARNs mcpnet_core logs while a step runs (discovery, loading). */
void doctor_log_capture(char *buf, size_t len);
void doctor_log_release(void);
void doctor_log_setup(int verbose);

/* The steps of the one-node report. */
void doctor_devices_scan(struct doctor_report *r);
void doctor_devices_check(struct doctor_report *r);
void doctor_config_load(struct doctor_report *r);
void doctor_config_export_nccl_conf(const struct doctor_report *r);
void doctor_select_run(struct doctor_report *r);
void doctor_host_check(struct doctor_report *r);

/* The two-node check; listen or peer mode. */
void doctor_summary_fill(const struct doctor_report *r, int dev, struct doctor_summary *s);
int doctor_summary_encode(const struct doctor_summary *s, char *buf, size_t len);
int doctor_summary_decode(const char *text, struct doctor_summary *s);
void doctor_summary_compare(struct doctor_report *r, const struct doctor_summary *a,
                            const struct doctor_summary *b);
void doctor_pair_run(struct doctor_report *r);

/* Outputs. */
void doctor_text_write(const struct doctor_report *r, FILE *f);
void doctor_json_write(const struct doctor_report *r, FILE *f);

#endif
