/*
 * mcp_plugin_v9.c - ncclNetPlugin_v9, for NCCL 2.24 - 2.25.
 *
 * v9 has the process-wide lifecycle of v10 but no configuration at all (the traffic
 * class stays undefined) and no profiler handles, which makes its isend/irecv the
 * core's own signatures. The table is therefore wiring, plus an init that names the
 * table (for NCCL-version defaults and the init log).
 */
#include "mcp_plugin.h"
#include "net/net.h"

static ncclResult_t mcp_plugin_v9_init(ncclDebugLogger_t log_fn) { return mcp_plugin_legacy_init(9, log_fn); }

MCP_PLUGIN_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
  .name = MCP_NET_NAME,
  .init = mcp_plugin_v9_init,
  .devices = mcp_net_devices,
  .getProperties = mcp_plugin_props_v9,
  .listen = mcp_plugin_legacy_listen,
  .connect = mcp_plugin_legacy_connect,
  .accept = mcp_plugin_accept,
  .regMr = mcp_net_reg_mr,
  .regMrDmaBuf = mcp_net_reg_mr_dmabuf,
  .deregMr = mcp_net_dereg_mr,
  .isend = mcp_net_isend,
  .irecv = mcp_net_irecv,
  .iflush = mcp_net_iflush,
  .test = mcp_net_test,
  .closeSend = mcp_net_close_send,
  .closeRecv = mcp_net_close_recv,
  .closeListen = mcp_net_close_listen,
  .getDeviceMr = NULL,
  .irecvConsumed = NULL,
  .makeVDevice = mcp_plugin_make_vdevice,
};
