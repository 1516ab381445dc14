/*
 * mcp_param_nccl.c - the variables NCCL itself reads in the three families whose
 * mistakes decide whether and how mcpnet runs: NCCL_IB_* (NCCL's IB transport, which
 * mcpnet stands in for), NCCL_NET and NCCL_NET_* (which plugin and network NCCL picks)
 * and NCCL_SOCKET_* (the interface mcpnet's out-of-band channel shares with NCCL's
 * bootstrap). The names are those of NCCL 2.20 to 2.30 (NCCL_PARAM and ncclGetEnv in
 * their sources); a name of these families that is in neither list nor mcpnet's table
 * is nobody's, most likely a typo. For the IB transport's variables mcpnet has no
 * counterpart for, NCCL's default is kept where every release in that range has the
 * same one: a variable set to it changes nothing under either transport and is not
 * worth a WARN at every init (NCCL_IB_DISABLE=0 is common in images).
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "core/param.h"

/* NCCL_IB_* that NCCL's IB transport reads and mcpnet does not act on (the ones it does
 * act on are rows of the parameter table), each with NCCL's default where that is the
 * same from 2.20 to 2.30, else NULL. */
/* The knobs of NCCL's own failover mechanism (probes, alive messages): mcpnet's failover
 * is a recovery round, switched by the two variables it does read. */
#define FAILOVER_KNOB \
  "it tunes NCCL's own failover; mcpnet's is a recovery round (NCCL_IB_RESILIENCY_PORT_FAILOVER, _RECOVERY)"

static const struct mcp_param_nccl_var ib_ignored[] = {
  {"NCCL_IB_ADAPTIVE_ROUTING", "-2", "mcpnet does not split large writes for adaptive routing"},
  {"NCCL_IB_AR_THRESHOLD", NULL,
   "mcpnet does not split large writes for adaptive routing"}, /* 8192 to 2.29, -2 in 2.30 */
  {"NCCL_IB_DATA_DIRECT", "1", "ConnectX-8 data direct needs mlx5 direct verbs; mcpnet uses plain verbs"},
  {"NCCL_IB_DEVICE_PCI_ORDER", "1",
   "mcpnet numbers devices in discovery order (MCPNET_RANK_MAP fixes placement)"}, /* 2.29 on */
  {"NCCL_IB_DISABLE", "0", "it turns off NCCL's own IB transport, not a plugin"},
  {"NCCL_IB_ECE_ENABLE", "1", "mcpnet negotiates no ECE (plain verbs)"},
  {"NCCL_IB_OOO_RQ", "0",
   "an out-of-order receive queue needs mlx5 direct verbs; mcpnet's QPs receive in order"}, /* 2.30 */
  {"NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS", NULL,
   "mcpnet always posts its receive work requests ahead"}, /* 0 in 2.29, -2 in 2.30 */
  {"NCCL_IB_QUERY_PORT_SPEED", "1",
   "mcpnet always asks ibv_query_port_speed where libibverbs has it"}, /* 2.30 */
  {"NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME", NULL,
   "mcpnet matches sends to receives by tag in its clear-to-send entries"}, /* 0 in 2.29, -2 in 2.30 */
  {"NCCL_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS", "1", FAILOVER_KNOB},    /* 2.29 on */
  {"NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY", "10", FAILOVER_KNOB},    /* 2.29 on */
  {"NCCL_IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT", "5000", FAILOVER_KNOB},
  {"NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL", "500", FAILOVER_KNOB},
  {"NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE", "5", FAILOVER_KNOB},
  {"NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE", "5", FAILOVER_KNOB},
  {"NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT", "4000", FAILOVER_KNOB},
  {"NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX", "5", FAILOVER_KNOB},
  {"NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY", "200", FAILOVER_KNOB},
  {"NCCL_IB_RETURN_ASYNC_EVENTS", "1", "mcpnet always acts on async events: a port error starts a recovery"},
  {"NCCL_IB_ROUTABLE_FLID_GID_INDEX", "1", "mcpnet uses GID 0 on InfiniBand (LID-routed, one subnet)"},
  {"NCCL_IB_SPLIT_DATA_ON_QPS", "0", "mcpnet stripes a large message over every QP"},
  {"NCCL_IB_SUBNET_AWARE_ROUTING", "0",
   "mcpnet connects on the device NCCL chose (MCPNET_RANK_MAP gid= picks each rank's subnet)"}, /* 2.30 */
  {"NCCL_IB_SUBNET_PREFIX_LEN", "24", "it belongs to NCCL_IB_SUBNET_AWARE_ROUTING"},            /* 2.30 */
  {"NCCL_IB_USE_INLINE", "0", "mcpnet inlines small messages itself (MCPNET_INLINE_BYTES)"},
  {"NCCL_IB_WARN_RAIL_LOCAL", "0", "mcpnet connects fused devices of different members without a warning"},
  {NULL, NULL, NULL},
};

/* NCCL_NET* and NCCL_SOCKET_* that NCCL's own code reads (plugin and network choice,
 * GPUDirect, fusion, its Socket transport and bootstrap): NCCL's business, never
 * warned about, but names a typo can be measured against. NCCL_NET and
 * NCCL_NET_PLUGIN are judged by mcp_param_check_select. */
static const struct mcp_param_nccl_var nccl_own[] = {
  {"NCCL_NET", NULL, NULL},
  {"NCCL_NET_DISABLE_INTRA", NULL, NULL},
  {"NCCL_NET_FORCE_FLUSH", NULL, NULL},
  {"NCCL_NET_FORCE_MERGE", NULL, NULL},
  {"NCCL_NET_GDR_C2C", NULL, NULL},
  {"NCCL_NET_GDR_LEVEL", NULL, NULL},
  {"NCCL_NET_GDR_MLOPART", NULL, NULL},
  {"NCCL_NET_GDR_READ", NULL, NULL},
  {"NCCL_NET_MERGE_LEVEL", NULL, NULL},
  {"NCCL_NET_MERGE_POLICY", NULL, NULL},
  {"NCCL_NET_OPTIONAL_RECV_COMPLETION", NULL, NULL},
  {"NCCL_NET_OVERHEAD", NULL, NULL},
  {"NCCL_NET_PLUGIN", NULL, NULL},
  {"NCCL_NET_PLUGIN_REF_COUNT", NULL, NULL},
  {"NCCL_NET_SHARED_BUFFERS", NULL, NULL},
  {"NCCL_NET_SHARED_COMMS", NULL, NULL},
  {"NCCL_SOCKET_INLINE", NULL, NULL},
  {"NCCL_SOCKET_MAGIC", NULL, NULL},
  {"NCCL_SOCKET_MIN_TASKSIZE", NULL, NULL},
  {"NCCL_SOCKET_NTHREADS", NULL, NULL},
  {"NCCL_SOCKET_POLL_TIMEOUT_MSEC", NULL, NULL},
  {"NCCL_SOCKET_RCVBUF", NULL, NULL},
  {"NCCL_SOCKET_RETRY_CNT", NULL, NULL},
  {"NCCL_SOCKET_RETRY_SLEEP_MSEC", NULL, NULL},
  {"NCCL_SOCKET_SNDBUF", NULL, NULL},
  {NULL, NULL, NULL},
};

const struct mcp_param_nccl_var *mcp_param_nccl_list(enum mcp_param_nccl_kind kind)
{
  return kind == MCP_NCCL_IB_IGNORED ? ib_ignored : kind == MCP_NCCL_OWN ? nccl_own : NULL;
}

bool mcp_param_nccl_family(const char *name)
{
  return strncmp(name, "NCCL_IB_", 8) == 0 || strncmp(name, "NCCL_NET_", 9) == 0 ||
    strcmp(name, "NCCL_NET") == 0 || strncmp(name, "NCCL_SOCKET_", 12) == 0;
}

const struct mcp_param_nccl_var *mcp_param_nccl_lookup(const char *name, enum mcp_param_nccl_kind *kind)
{
  static const enum mcp_param_nccl_kind kinds[] = {MCP_NCCL_IB_IGNORED, MCP_NCCL_OWN};

  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
    for (const struct mcp_param_nccl_var *v = mcp_param_nccl_list(kinds[k]); v->name != NULL; v++)
      if (strcmp(v->name, name) == 0) {
        if (kind != NULL)
          *kind = kinds[k];
        return v;
      }
  return NULL;
}

bool mcp_param_nccl_is_default(const struct mcp_param_nccl_var *var, const char *value)
{
  long long want, got;

  /* Compared as NCCL would read them: "00" and "0" are the same setting. A value we
   * cannot parse strictly is not the default (it gets the WARN). */
  return var->dflt != NULL && mcp_param_parse_int(var->dflt, &want) == 0 &&
    mcp_param_parse_int(value, &got) == 0 && want == got;
}

bool mcp_param_nccl_reads(const char *name)
{
  const struct mcp_param_def *def = mcp_param_find(name);

  return mcp_param_nccl_lookup(name, NULL) != NULL || (def != NULL && strncmp(def->name, "NCCL_", 5) == 0);
}
