/*
 * mcp_plugin_props.c - the one translation from the core's device properties to
 * NCCL's per-version properties structs.
 *
 * The core describes a device once (struct mcp_net_props); every version's struct is
 * a subset of the v12 one (whose vProps only hold more devices), so each field is mapped
 * in exactly one macro below and the per-version functions only choose which groups of
 * fields their layout carries.
 */
#include <string.h>

#include "mcp_plugin.h"
#include "net/net.h"

/* Fields every version since v8 carries. NCCL never writes through name/pciPath, so
 * handing it the core's const strings is safe (the struct lacks const for history). */
#define MCP_PROPS_FILL_V8(dst, src)              \
  do {                                           \
    (dst)->name = (char *)(src)->name;           \
    (dst)->pciPath = (char *)(src)->pci_path;    \
    (dst)->guid = (src)->guid;                   \
    (dst)->ptrSupport = (src)->ptr_support;      \
    (dst)->regIsGlobal = (src)->reg_is_global;   \
    (dst)->speed = (src)->speed_mbps;            \
    (dst)->port = (src)->port;                   \
    (dst)->latency = (src)->latency_us;          \
    (dst)->maxComms = (src)->max_comms;          \
    (dst)->maxRecvs = (src)->max_recvs;          \
    (dst)->netDeviceType = NCCL_NET_DEVICE_HOST; \
    (dst)->netDeviceVersion = 0;                 \
  } while (0)

/* Fields v9 added. vProps: a physical index stands for itself, a virtual one for the
 * indices makeVDevice fused (NCCL's topology reads them to place the fused NIC). A table
 * only makes virtual devices its vProps hold (4 before v12, 8 in v12), so the bound
 * below only keeps a table from reading another table's larger one past its end. */
#define MCP_PROPS_VDEVS(dst) ((int)(sizeof((dst)->vProps.devs) / sizeof((dst)->vProps.devs[0])))
#define MCP_PROPS_FILL_V9(dst, src)                                                                    \
  do {                                                                                                 \
    (dst)->forceFlush = (src)->force_flush;                                                            \
    (dst)->vProps.ndevs = (src)->vdev_n < MCP_PROPS_VDEVS(dst) ? (src)->vdev_n : MCP_PROPS_VDEVS(dst); \
    for (int i_ = 0; i_ < (dst)->vProps.ndevs; i_++)                                                   \
      (dst)->vProps.devs[i_] = (src)->vdev[i_];                                                        \
    (dst)->maxP2pBytes = (src)->max_p2p_bytes;                                                         \
    (dst)->maxCollBytes = (src)->max_coll_bytes;                                                       \
  } while (0)

/* Fields v11 added. NCCL 2.28 does not use multi-requests; 1 says "none". */
#define MCP_PROPS_FILL_V11(dst)     \
  do {                              \
    (dst)->maxMultiRequestSize = 1; \
  } while (0)

/* Fields v12 added: the rail and plane (NCCL_NET_ID_UNDEF when unknown), in NCCL's
 * 16 bits; the core keeps them in range (fabric_rail.h). */
#define MCP_PROPS_FILL_V12(dst, src)           \
  do {                                         \
    (dst)->railId = (int16_t)(src)->rail_id;   \
    (dst)->planeId = (int16_t)(src)->plane_id; \
  } while (0)

/* Zeroing first keeps padding and unused vProps slots deterministic for NCCL. */
static ncclResult_t mcp_plugin_props_get(int dev, struct mcp_net_props *core, void *out, size_t out_size)
{
  if (out == NULL)
    return ncclInternalError;
  memset(out, 0, out_size);
  memset(core, 0, sizeof(*core));
  return mcp_net_get_properties(dev, core);
}

ncclResult_t mcp_plugin_props_v12(int dev, ncclNetProperties_v12_t *props)
{
  struct mcp_net_props core;
  ncclResult_t rc = mcp_plugin_props_get(dev, &core, props, sizeof(*props));

  if (rc != ncclSuccess)
    return rc;
  MCP_PROPS_FILL_V8(props, &core);
  MCP_PROPS_FILL_V9(props, &core);
  MCP_PROPS_FILL_V11(props);
  MCP_PROPS_FILL_V12(props, &core);
  return ncclSuccess;
}

ncclResult_t mcp_plugin_props_v11(int dev, ncclNetProperties_v11_t *props)
{
  struct mcp_net_props core;
  ncclResult_t rc = mcp_plugin_props_get(dev, &core, props, sizeof(*props));

  if (rc != ncclSuccess)
    return rc;
  MCP_PROPS_FILL_V8(props, &core);
  MCP_PROPS_FILL_V9(props, &core);
  MCP_PROPS_FILL_V11(props);
  return ncclSuccess;
}

ncclResult_t mcp_plugin_props_v9(int dev, ncclNetProperties_v9_t *props)
{
  struct mcp_net_props core;
  ncclResult_t rc = mcp_plugin_props_get(dev, &core, props, sizeof(*props));

  if (rc != ncclSuccess)
    return rc;
  MCP_PROPS_FILL_V8(props, &core);
  MCP_PROPS_FILL_V9(props, &core);
  return ncclSuccess;
}

ncclResult_t mcp_plugin_props_v8(int dev, ncclNetProperties_v8_t *props)
{
  struct mcp_net_props core;
  ncclResult_t rc = mcp_plugin_props_get(dev, &core, props, sizeof(*props));

  if (rc != ncclSuccess)
    return rc;
  MCP_PROPS_FILL_V8(props, &core);
  return ncclSuccess;
}
