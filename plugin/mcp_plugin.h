/*
 * mcp_plugin.h - what the files of plugin/ share: the exported tables, the canonical
 * properties fill and the argument adapters more than one ABI version needs.
 *
 * plugin/ is only the NCCL-facing edge. Each table file declares one ncclNetPlugin_vN
 * and the adapters unique to its version; anything two versions have in common lives
 * once, here and in mcp_plugin_props.c / mcp_plugin_shared.c, so a fix to one argument
 * conversion reaches every version.
 */
#ifndef MCPNET_PLUGIN_H
#define MCPNET_PLUGIN_H

#include "nccl/net.h"

/* The tables are the only symbols the .so exports (see exports.map). */
#define MCP_PLUGIN_EXPORT __attribute__((visibility("default")))

extern MCP_PLUGIN_EXPORT const ncclNet_v12_t ncclNetPlugin_v12;
extern MCP_PLUGIN_EXPORT const ncclNet_v11_t ncclNetPlugin_v11;
extern MCP_PLUGIN_EXPORT const ncclNet_v10_t ncclNetPlugin_v10;
extern MCP_PLUGIN_EXPORT const ncclNet_v9_t ncclNetPlugin_v9;
extern MCP_PLUGIN_EXPORT const ncclNet_v8_t ncclNetPlugin_v8;

/* Properties of dev in each version's layout (v10 shares v9's). */
ncclResult_t mcp_plugin_props_v12(int dev, ncclNetProperties_v12_t *props);
ncclResult_t mcp_plugin_props_v11(int dev, ncclNetProperties_v11_t *props);
ncclResult_t mcp_plugin_props_v9(int dev, ncclNetProperties_v9_t *props);
ncclResult_t mcp_plugin_props_v8(int dev, ncclNetProperties_v8_t *props);

/* accept in every version: a HOST plugin has no device handle to hand out. */
ncclResult_t mcp_plugin_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v8_t **recv_dev_comm);

/* isend/irecv with profiler handles (v10, v11): the handles are dropped. */

/* makeVDevice: v9 - v11 share one vProps layout of 4 devices, v12's holds 8. */
ncclResult_t mcp_plugin_make_vdevice(int *d, ncclNetVDeviceProps_v9_t *props);
ncclResult_t mcp_plugin_make_vdevice_v12(int *d, ncclNetVDeviceProps_v12_t *props);

/* init and connect of the tables with a per-communicator context (v11, v12, which share
 * the config and device-handle types); init takes the table's version (mcp_net_note_abi). */
ncclResult_t mcp_plugin_ctx_init(int abi, void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                                 ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn);
ncclResult_t mcp_plugin_ctx_connect(void *ctx, int dev, void *handle, void **send_comm,
                                    ncclNetDeviceHandle_v11_t **send_dev_comm);

/* The context-free calls of v8 - v10, whose lifecycle is the whole process. init takes
 * the table's version: it tells which NCCL loaded us (mcp_net_note_abi). */
ncclResult_t mcp_plugin_legacy_init(int abi, ncclDebugLogger_t log_fn);
ncclResult_t mcp_plugin_legacy_listen(int dev, void *handle, void **listen_comm);
ncclResult_t mcp_plugin_legacy_connect(int dev, void *handle, void **send_comm,
                                       ncclNetDeviceHandle_v8_t **send_dev_comm);

#endif
