/*
 * mcp_param_table.c - the table itself: every parameter mcpnet reads, its type,
 * default, range, the reason for that range and its one-line doc, plus the checks a
 * range cannot express (address families, CIDRs, port ranges, IB MTUs) and the RC
 * timer arithmetic those values imply. Adding a knob means adding a row here and a
 * field in struct mcp_config; the loader, the log, the doctor and the README follow.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/param.h"
#include "core/rankmap.h"
#include "core/sock.h"

static int check_family(const char *value, char *why, size_t whylen)
{
  if (strcasecmp(value, "AF_INET") == 0 || strcasecmp(value, "AF_INET6") == 0)
    return 0;
  snprintf(why, whylen, "must be AF_INET or AF_INET6");
  return -EINVAL;
}

/* NCCL ignores a malformed range quietly, which is how GIDs outside it get picked. */
static int check_cidr(const char *value, char *why, size_t whylen)
{
  unsigned char addr[16];
  char host[INET6_ADDRSTRLEN];
  const char *slash = strchr(value, '/');
  long long prefix;
  size_t hlen;
  int af, maxlen;

  if (slash == NULL) {
    snprintf(why, whylen, "is not a CIDR: expected ADDRESS/PREFIX, e.g. 10.1.0.0/16 or fd00::/64");
    return -EINVAL;
  }
  hlen = (size_t)(slash - value);
  if (hlen == 0 || hlen >= sizeof(host)) {
    snprintf(why, whylen, "is not a CIDR: the address before '/' is missing or too long");
    return -EINVAL;
  }
  memcpy(host, value, hlen);
  host[hlen] = '\0';
  af = strchr(host, ':') != NULL ? AF_INET6 : AF_INET;
  maxlen = af == AF_INET6 ? 128 : 32;
  if (inet_pton(af, host, addr) != 1) {
    snprintf(why, whylen, "is not a CIDR: '%s' is not an IPv%d address", host, af == AF_INET6 ? 6 : 4);
    return -EINVAL;
  }
  /* Only plain decimal here: "/0x10" or "/+8" would be legal ints but odd CIDRs. */
  if (slash[1] < '0' || slash[1] > '9' || mcp_param_parse_int(slash + 1, &prefix) != 0 || prefix > maxlen ||
      strspn(slash + 1, "0123456789") != strlen(slash + 1)) {
    snprintf(why, whylen, "is not a CIDR: the prefix length must be 0..%d", maxlen);
    return -EINVAL;
  }
  return 0;
}

static int parse_port(const char *s, size_t n, long long *port)
{
  char buf[16];

  if (n == 0 || n >= sizeof(buf))
    return -EINVAL;
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (strspn(buf, "0123456789") != n || mcp_param_parse_int(buf, port) != 0)
    return -EINVAL;
  return *port >= 1 && *port <= 65535 ? 0 : -EINVAL;
}

static int check_port_range(const char *value, char *why, size_t whylen)
{
  const char *dash = strchr(value, '-');
  long long lo, hi;

  if (dash == NULL && parse_port(value, strlen(value), &lo) == 0)
    return 0; /* one port */
  if (dash == NULL || parse_port(value, (size_t)(dash - value), &lo) != 0 ||
      parse_port(dash + 1, strlen(dash + 1), &hi) != 0) {
    snprintf(why, whylen, "must be PORT or LO-HI with ports 1..65535, e.g. 40000-40100");
    return -EINVAL;
  }
  if (lo > hi) {
    snprintf(why, whylen, "has LO %lld above HI %lld", lo, hi);
    return -EINVAL;
  }
  return 0;
}

static int check_mtu(long long value, char *why, size_t whylen)
{
  switch (value) {
  case 0:
  case 256:
  case 512:
  case 1024:
  case 2048:
  case 4096: return 0;
  }
  snprintf(why, whylen, "IB path MTUs are 256, 512, 1024, 2048 and 4096; 0 takes the port's active MTU");
  return -EINVAL;
}

/* The whole map is parsed when read, so a typo names its entry at init; the typed map
 * stays in the configuration, so discovery and the doctor never parse it again. */
static int parse_rank_map(const char *value, struct mcp_config *cfg, char *why, size_t whylen)
{
  struct mcp_rankmap *map = calloc(1, sizeof(*map)); /* 30 KiB: not on a caller's stack */

  if (map == NULL) {
    snprintf(why, whylen, "cannot be read: out of memory");
    return -ENOMEM;
  }
  if (mcp_rankmap_parse(value, map, why, whylen) != 0) {
    free(map);
    return -EINVAL;
  }
  free(cfg->rank_map_parsed);
  cfg->rank_map_parsed = map;
  return 0;
}

/* The list variables are parsed when read, into a scratch list first: a refused value
 * leaves what an earlier layer set. */
static int parse_ib_hca(const char *value, struct mcp_config *cfg, char *why, size_t whylen)
{
  struct mcp_match_list list;
  char err[192];

  if (mcp_hca_parse(value, &list, err, sizeof(err)) != 0) {
    snprintf(why, whylen, "is not a device list: %s", err);
    return -EINVAL;
  }
  cfg->ib_hca_list = list;
  return 0;
}

static int parse_socket_ifname(const char *value, struct mcp_config *cfg, char *why, size_t whylen)
{
  struct mcp_match_list list;
  char err[192];

  if (mcp_sock_ifspec_parse(value, &list, err, sizeof(err)) != 0) {
    snprintf(why, whylen, "is not an interface list: %s", err);
    return -EINVAL;
  }
  cfg->socket_ifname_list = list;
  return 0;
}

/* A P_Key value: 16 bits, partition bits not all zero (0x0000 and 0x8000 are invalid). */
static int check_pkey_value(long long value, char *why, size_t whylen)
{
  if (value < 0 || (value & 0x7fff) != 0)
    return 0;
  snprintf(why, whylen, "0x%04llx is not a partition: the low 15 bits must not be 0", value);
  return -EINVAL;
}

/* The directory the status files go to, and where mcpnet-top looks: absolute, so a
 * process and the tool started elsewhere agree on it. */
static int check_status_dir(const char *value, char *why, size_t whylen)
{
  if (value[0] == '/')
    return 0;
  snprintf(why, whylen, "must be an absolute path, e.g. /dev/shm or /run/mcpnet");
  return -EINVAL;
}

static const char *const tenant_pkey_aliases[] = {"MCPNET_PKEY", NULL};
static const char *const watchdog_aliases[] = {"MCPNET_WATCHDOG_SECONDS", NULL};

#define OFF(field) offsetof(struct mcp_config, field)

#define INT_ROW(id_, name_, def_, min_, max_, field, doc_, why_) \
  [id_] = {.id = id_,                                            \
           .name = name_,                                        \
           .type = MCP_PARAM_INT,                                \
           .def = def_,                                          \
           .min = min_,                                          \
           .max = max_,                                          \
           .doc = doc_,                                          \
           .why = why_,                                          \
           .offset = OFF(field)}
#define BOOL_ROW(id_, name_, def_, field, doc_) \
  [id_] = {.id = id_,                           \
           .name = name_,                       \
           .type = MCP_PARAM_BOOL,              \
           .def = def_,                         \
           .min = 0,                            \
           .max = 1,                            \
           .doc = doc_,                         \
           .offset = OFF(field)}
#define STR_ROW(id_, name_, def_, field, check_, range_, doc_) \
  [id_] = {.id = id_,                                          \
           .name = name_,                                      \
           .type = MCP_PARAM_STRING,                           \
           .def_str = def_,                                    \
           .check_str = check_,                                \
           .range_doc = range_,                                \
           .doc = doc_,                                        \
           .offset = OFF(field)}
/* A string whose typed form the configuration keeps (parse_), e.g. the rank map. */
#define PARSED_ROW(id_, name_, def_, field, parse_, range_, doc_) \
  [id_] = {.id = id_,                                             \
           .name = name_,                                         \
           .type = MCP_PARAM_STRING,                              \
           .def_str = def_,                                       \
           .parse_str = parse_,                                   \
           .range_doc = range_,                                   \
           .doc = doc_,                                           \
           .offset = OFF(field)}

/* An NCCL on/off integer: any integer, 0 off and every other value on, as NCCL reads it. */
#define NCCL_FLAG_ROW(id_, name_, def_, field, doc_)           \
  [id_] = {.id = id_,                                          \
           .name = name_,                                      \
           .type = MCP_PARAM_INT,                              \
           .def = def_,                                        \
           .min = INT_MIN,                                     \
           .max = INT_MAX,                                     \
           .doc = doc_,                                        \
           .range_doc = "integer (0 off, any other value on)", \
           .offset = OFF(field)}

static const struct mcp_param_def params[MCP_PARAM_COUNT] = {
  PARSED_ROW(MCP_PARAM_IB_HCA, "NCCL_IB_HCA", NULL, ib_hca, parse_ib_hca, "device list",
             "Devices to use, as in NCCL 2.30: comma list of name[:port[:rail[:plane]]], prefix match, ^ "
             "excludes, = exact; rail and plane go to the v12 properties"),
  INT_ROW(MCP_PARAM_IB_GID_INDEX, "NCCL_IB_GID_INDEX", -1, -1, 1023, ib_gid_index,
          "RoCE GID index on every port; -1 chooses automatically", "-1 chooses automatically"),
  INT_ROW(MCP_PARAM_IB_ROCE_VERSION_NUM, "NCCL_IB_ROCE_VERSION_NUM", 2, 1, 2, ib_roce_version,
          "RoCE version preferred by automatic GID choice", "RoCE is version 1 or 2"),
  STR_ROW(MCP_PARAM_IB_ADDR_FAMILY, "NCCL_IB_ADDR_FAMILY", "AF_INET", ib_addr_family, check_family,
          "AF_INET|AF_INET6", "Address family preferred by automatic GID choice"),
  STR_ROW(MCP_PARAM_IB_ADDR_RANGE, "NCCL_IB_ADDR_RANGE", NULL, ib_addr_range, check_cidr,
          "CIDR (IPv4 or IPv6)", "Automatic GID choice only takes GIDs inside this subnet"),
  INT_ROW(MCP_PARAM_IB_TIMEOUT, "NCCL_IB_TIMEOUT", 20, 0, 31, ib_timeout,
          "QP local ACK timeout exponent: 4.096 us * 2^N per try; default as NCCL's: 20, or 18 "
          "when NCCL 2.20-2.22 loads the plugin; 0 (infinite) needs MCPNET_ALLOW_INFINITE_RETRY",
          "the local ACK timeout is 5 bits"),
  INT_ROW(MCP_PARAM_IB_RETRY_CNT, "NCCL_IB_RETRY_CNT", 7, 0, 7, ib_retry_cnt,
          "QP transport retries after an ACK timeout", "the IB retry counter is 3 bits"),
  INT_ROW(MCP_PARAM_IB_SL, "NCCL_IB_SL", -1, -1, 15, ib_sl,
          "InfiniBand service level; -1 leaves the choice to NCCL's traffic class or 0",
          "service levels are 4 bits; -1 leaves it unset"),
  INT_ROW(MCP_PARAM_IB_TC, "NCCL_IB_TC", -1, -1, 255, ib_tc,
          "RoCE GRH traffic class (DSCP << 2); -1 leaves the choice to NCCL's traffic class or 0",
          "the traffic class is one byte; -1 leaves it unset"),
  INT_ROW(MCP_PARAM_IB_PKEY, "NCCL_IB_PKEY", 0, 0, 65535, ib_pkey_index,
          "Index into the port's P_Key table, as in NCCL (a P_Key value goes in MCPNET_TENANT_PKEY)",
          "P_Key table indices are 16 bits"),
  INT_ROW(MCP_PARAM_IB_QPS_PER_CONNECTION, "NCCL_IB_QPS_PER_CONNECTION", 1, 1, 65535, ib_qps_per_conn,
          "QPs each connection spreads its messages over; above 128, or more "
          "than a device's completion queue holds, is capped with a WARN",
          "a connection needs at least 1 QP"),
  /* NCCL reads these as integers and tests them for non-zero: 2 is on there, so it is
   * here (a 0/1 boolean would fail init where NCCL's own transport runs). */
  NCCL_FLAG_ROW(MCP_PARAM_IB_MERGE_VFS, "NCCL_IB_MERGE_VFS", 1, ib_merge_vfs,
                "As in NCCL: a VF (found by its physfn link) reports its PF's NIC as pciPath and a "
                "port after the PF's; 0 keeps the VF's own PCI device"),
  NCCL_FLAG_ROW(MCP_PARAM_IB_MERGE_NICS, "NCCL_IB_MERGE_NICS", 1, ib_merge_nics,
                "As in NCCL: 0 refuses NCCL's makeVDevice of more than one device, so NCCL uses each "
                "port on its own; a rank map's DEV*DEV still fuses"),
  /* Any integer, as NCCL's IB transport reads it (net_ib/init.cc: only 1 and 2 turn it
   * on): refusing 3 would fail init where NCCL's own transport runs. Init WARNs of it. */
  [MCP_PARAM_IB_PCI_RELAXED_ORDERING] = {.id = MCP_PARAM_IB_PCI_RELAXED_ORDERING,
                                         .name = "NCCL_IB_PCI_RELAXED_ORDERING",
                                         .type = MCP_PARAM_INT,
                                         .def = 2,
                                         .min = INT_MIN,
                                         .max = INT_MAX,
                                         .doc =
                                           "Register data buffers with PCIe relaxed ordering, as in NCCL: 1 "
                                           "and 2 (where available) both ask for it, 0 and any other value "
                                           "never (init WARNs of others); the clear-to-send ring and "
                                           "records are never relaxed",
                                         .range_doc = "integer (0, 1, 2)",
                                         .offset = OFF(ib_pci_relaxed_ordering)},
  /* NCCL 2.30 (net_ib/connect.cc) sets the traffic class of the receive side's QPs, whose
   * only writes are its control FIFO, on RoCE: so does mcpnet, whose receive side's QPs
   * write only the clear-to-send entries (mcp_conn_setup.c, accept). */
  INT_ROW(MCP_PARAM_IB_FIFO_TC, "NCCL_IB_FIFO_TC", -1, -1, 255, ib_fifo_tc,
          "As in NCCL: RoCE traffic class of the receive side's QPs, which carry only the "
          "clear-to-send writes (mcpnet's control messages); -1 takes the data's (NCCL_IB_TC)",
          "the traffic class is one byte; -1 leaves it to NCCL_IB_TC"),
  /* NCCL 2.30 (misc/ibvwrap.cc) retries every ibv_modify_qp that fails with ETIMEDOUT (or
   * with anything, with RETRY_ALL), the k-th time after k x SLEEP_MSEC. mcpnet does for a
   * connection's RTR and RTS, which run on a setup thread (mcp_conn_qp.c). */
  NCCL_FLAG_ROW(MCP_PARAM_IB_MQP_RETRY_ALL, "NCCL_IB_MQP_RETRY_ALL", 0, ib_mqp_retry_all,
                "As in NCCL: a connection's RTR/RTS transition is retried whatever its error; 0 only "
                "after ETIMEDOUT (the peer's address did not resolve yet)"),
  [MCP_PARAM_IB_MQP_RETRY_CNT] = {.id = MCP_PARAM_IB_MQP_RETRY_CNT,
                                  .name = "NCCL_IB_MQP_RETRY_CNT",
                                  .type = MCP_PARAM_INT,
                                  .def = 34,
                                  .min = INT_MIN,
                                  .max = INT_MAX,
                                  .doc = "As in NCCL: retries of a connection's failed RTR/RTS transition "
                                         "(on its setup thread, never NCCL's); 0 or less: none",
                                  .range_doc = "integer (0 or less: no retry)",
                                  .offset = OFF(ib_mqp_retry_cnt)},
  INT_ROW(MCP_PARAM_IB_MQP_RETRY_SLEEP_MSEC, "NCCL_IB_MQP_RETRY_SLEEP_MSEC", 100, 0, 3600000,
          ib_mqp_retry_sleep_ms,
          "As in NCCL: the k-th retry of a connection's RTR/RTS waits k times this many ms "
          "(34 retries of 100: about 60 s in all)",
          "a negative wait is none; an hour per step is the most that means anything"),
  PARSED_ROW(MCP_PARAM_SOCKET_IFNAME, "NCCL_SOCKET_IFNAME", NULL, socket_ifname, parse_socket_ifname,
             "interface list",
             "Interface for the out-of-band channel, as in NCCL (prefix, ^ excludes, = exact)"),
  STR_ROW(MCP_PARAM_SOCKET_FAMILY, "NCCL_SOCKET_FAMILY", NULL, socket_family, check_family,
          "AF_INET|AF_INET6", "Address family of the out-of-band channel; unset takes either"),
  PARSED_ROW(MCP_PARAM_RANK_MAP, "MCPNET_RANK_MAP", NULL, rank_map, parse_rank_map, "rank map",
             "Per-local-rank placement: "
             "RANKS=DEV[:PORT][+DEV[:PORT]...][,gid=..][,pkey=..][,sl=N][,tc=N][,rail=N][,plane=N];...; "
             "DEV*DEV fuses"),
  INT_ROW(MCP_PARAM_LOCAL_RANK, "MCPNET_LOCAL_RANK", -1, -1, 4095, local_rank,
          "This process's local rank for MCPNET_RANK_MAP; -1 reads LOCAL_RANK, SLURM_LOCALID, ...",
          "-1 looks the local rank up in the launcher's variables"),
  BOOL_ROW(MCP_PARAM_STRICT, "MCPNET_STRICT", 1, strict,
           "A pinned or listed device that is missing or unusable fails init instead of being skipped"),
  [MCP_PARAM_TENANT_PKEY] =
    {.id = MCP_PARAM_TENANT_PKEY,
     .name = "MCPNET_TENANT_PKEY",
     .aliases = tenant_pkey_aliases,
     .type = MCP_PARAM_INT,
     .def = -1,
     .min = -1,
     .max = 0xffff,
     .hex = true,
     .check_int = check_pkey_value,
     .doc = "P_Key value (e.g. 0x8001) this tenant's traffic must carry; -1 uses NCCL_IB_PKEY's index",
     .why = "a P_Key is 16 bits; -1 leaves it unset",
     .offset = OFF(tenant_pkey)},
  [MCP_PARAM_MTU] = {.id = MCP_PARAM_MTU,
                     .name = "MCPNET_MTU",
                     .type = MCP_PARAM_INT,
                     .def = 0,
                     .min = 0,
                     .max = 4096,
                     .check_int = check_mtu,
                     .range_doc = "0, 256, 512, 1024, 2048, 4096",
                     .doc = "Path MTU cap in bytes; 0 takes the port's active MTU",
                     .offset = OFF(mtu)},
  INT_ROW(MCP_PARAM_RNR_RETRY, "MCPNET_RNR_RETRY", 6, 0, 7, rnr_retry,
          "Retries after a receiver-not-ready NAK; 7 (infinite) needs MCPNET_ALLOW_INFINITE_RETRY",
          "the RNR retry counter is 3 bits"),
  INT_ROW(MCP_PARAM_MIN_RNR_TIMER, "MCPNET_MIN_RNR_TIMER", 12, 0, 31, min_rnr_timer,
          "IB min_rnr_timer code: how long a sender waits after an RNR NAK "
          "(12 = 0.64 ms, 0 = 655.36 ms)",
          "the RNR timer code is 5 bits"),
  BOOL_ROW(MCP_PARAM_ALLOW_INFINITE_RETRY, "MCPNET_ALLOW_INFINITE_RETRY", 0, allow_infinite_retry,
           "Allow NCCL_IB_TIMEOUT=0 or MCPNET_RNR_RETRY=7, which can hang a job forever"),
  STR_ROW(MCP_PARAM_OOB_PORT_RANGE, "MCPNET_OOB_PORT_RANGE", NULL, oob_port_range, check_port_range,
          "PORT or LO-HI within 1-65535",
          "TCP ports the out-of-band listener may bind, so firewalls can open them; unset = any"),
  INT_ROW(MCP_PARAM_CONNECT_TIMEOUT, "MCPNET_CONNECT_TIMEOUT", 30, 1, 3600, connect_timeout_s,
          "Seconds an out-of-band connect keeps retrying before it fails",
          "a connect deadline is 1 s to 1 h"),
  INT_ROW(MCP_PARAM_RECOVERY_TIMEOUT, "MCPNET_RECOVERY_TIMEOUT", 30, 0, 3600, recovery_timeout_s,
          "Seconds to re-create a connection's QPs and replay after a transport error; 0 fails at once",
          "recovery may take up to 1 h; 0 disables it"),
  /* NCCL's defaults are 0 (its failover is new in 2.29 and off); mcpnet's recovery already
   * re-creates a fused link's QPs, and moving them off a dead port costs nothing while
   * every port is up, so it is on here. */
  NCCL_FLAG_ROW(MCP_PARAM_IB_PORT_FAILOVER, "NCCL_IB_RESILIENCY_PORT_FAILOVER", 1, ib_port_failover,
                "Fused devices: a recovery moves the QPs of a member whose port is down to the "
                "other members and goes on (NCCL's default is 0; see the README); 0 waits for every "
                "member and fails after MCPNET_RECOVERY_TIMEOUT"),
  NCCL_FLAG_ROW(MCP_PARAM_IB_PORT_RECOVERY, "NCCL_IB_RESILIENCY_PORT_RECOVERY", 1, ib_port_recovery,
                "Fused devices: a member left out by failover is taken back when its port is active "
                "again (NCCL's default is 0); 0 leaves it out for the connection's life"),
  [MCP_PARAM_WATCHDOG_SEC] =
    {.id = MCP_PARAM_WATCHDOG_SEC,
     .name = "MCPNET_WATCHDOG_SEC",
     .aliases = watchdog_aliases,
     .type = MCP_PARAM_INT,
     .def = 300,
     .min = 0,
     .max = 86400,
     .doc = "Seconds without progress before a request's stall is reported (once per stall); 0 turns it off",
     .why = "the watchdog period is at most a day; 0 turns it off",
     .offset = OFF(watchdog_s)},
  BOOL_ROW(MCP_PARAM_STATUS, "MCPNET_STATUS", 1, status,
           "Publish each comm's state, counters and what it waits for in a file mcpnet-top reads "
           "(MCPNET_STATUS_DIR); 0 publishes nothing"),
  STR_ROW(MCP_PARAM_STATUS_DIR, "MCPNET_STATUS_DIR", "/dev/shm", status_dir, check_status_dir,
          "absolute path",
          "Directory of the per-process status files (mode 0600) that mcpnet-top reads; it must exist"),
  BOOL_ROW(MCP_PARAM_ABORT_ON_ERROR, "MCPNET_ABORT_ON_ERROR", 0, abort_on_error,
           "Abort the process at the first error, for a core dump"),
  BOOL_ROW(MCP_PARAM_FORCE_FLUSH, "MCPNET_FORCE_FLUSH", 0, force_flush,
           "Run iflush's loopback read for host buffers too (GPU buffers are always flushed when NCCL asks)"),
  INT_ROW(MCP_PARAM_PROGRESS_CPU, "MCPNET_PROGRESS_CPU", -1, -1, 4095, progress_cpu,
          "CPU a future background thread (async events, recovery) is pinned to; -1 = not pinned"
          " [planned: not in effect yet]",
          "-1 leaves the thread unpinned"),
  INT_ROW(MCP_PARAM_INLINE_BYTES, "MCPNET_INLINE_BYTES", 64, 0, 1024, inline_bytes,
          "Largest data message from host memory written inline (GPU memory never is); 0 never inlines data, "
          "and no message lands",
          "devices inline at most about 1 KiB"),
  STR_ROW(MCP_PARAM_VERBS_LIBRARY, "MCPNET_VERBS_LIBRARY", NULL, verbs_library, NULL, "path",
          "Library that provides the verbs instead of libibverbs.so.1 (a test device: test/uverbs); "
          "its sysfs view comes from it too. Unset: libibverbs.so.1"),
  STR_ROW(MCP_PARAM_CONFIG, "MCPNET_CONFIG", NULL, config_path, NULL, "path",
          "File of KEY=VALUE lines read before the environment (which wins); '#' starts a comment"),
};

const struct mcp_param_def *mcp_param_table(size_t *n)
{
  if (n != NULL)
    *n = MCP_PARAM_COUNT;
  return params;
}

const struct mcp_param_def *mcp_param_find(const char *name)
{
  for (size_t i = 0; i < MCP_PARAM_COUNT; i++) {
    if (strcmp(params[i].name, name) == 0)
      return &params[i];
    for (const char *const *a = params[i].aliases; a != NULL && *a != NULL; a++)
      if (strcmp(*a, name) == 0)
        return &params[i];
  }
  return NULL;
}

const char *mcp_param_type_name(enum mcp_param_type type)
{
  switch (type) {
  case MCP_PARAM_INT: return "int";
  case MCP_PARAM_BOOL: return "bool";
  case MCP_PARAM_STRING: return "string";
  }
  return "?";
}

double mcp_param_time_to_error_s(int timeout, int retry)
{
  /* 0 is infinite in the IB encoding; the shift stays defined for any 5-bit code. */
  if (timeout <= 0 || timeout > 63)
    return INFINITY;
  return 4.096e-6 * (double)(1ULL << timeout) * (double)(retry + 1);
}

/* The IB specification's min_rnr_timer encoding, in hundredths of a millisecond. */
static const unsigned rnr_timer_cs[32] = {
  65536, 1,   2,   3,   4,    6,    8,    12,   16,   24,   32,   48,    64,    96,    128,   192,
  256,   384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

double mcp_param_rnr_timer_ms(int code)
{
  if (code < 0 || code > 31)
    return NAN;
  return rnr_timer_cs[code] / 100.0;
}

double mcp_param_rnr_bound_s(int min_rnr_timer, int rnr_retry)
{
  if (rnr_retry >= 7)
    return INFINITY;
  return mcp_param_rnr_timer_ms(min_rnr_timer) * (double)(rnr_retry + 1) / 1000.0;
}
