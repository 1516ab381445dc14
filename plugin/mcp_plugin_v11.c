/*
 * mcp_plugin_v11.c - ncclNetPlugin_v11, the table NCCL 2.28 and 2.29 load first.
 *
 * v11 is the core's native interface, so most slots point straight at mcp_net_*:
 * the compiler checks each of those signatures against the table. init (its config
 * struct) and connect (its device handle) are the context tables' shared adapters, and
 * isend/irecv take profiler handles. Device offload and traffic hints are not offered,
 * so those slots are NULL, which NCCL checks before calling.
 */
#include "mcp_plugin.h"
#include "net/net.h"

static ncclResult_t mcp_plugin_v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                                        ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn)
{
  return mcp_plugin_ctx_init(11, ctx, comm_id, config, log_fn, prof_fn);
}

MCP_PLUGIN_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
  .name = MCP_NET_NAME,
  .init = mcp_plugin_v11_init,
  .devices = mcp_net_devices,
  .getProperties = mcp_plugin_props_v11,
  .listen = mcp_net_listen,
  .connect = mcp_plugin_ctx_connect,
  .accept = mcp_plugin_accept,
  .regMr = mcp_net_reg_mr,
  .regMrDmaBuf = mcp_net_reg_mr_dmabuf,
  .deregMr = mcp_net_dereg_mr,
  .isend = mcp_net_isend_ph,
  .irecv = mcp_net_irecv_ph,
  .iflush = mcp_net_iflush,
  .test = mcp_net_test,
  .closeSend = mcp_net_close_send,
  .closeRecv = mcp_net_close_recv,
  .closeListen = mcp_net_close_listen,
  .getDeviceMr = NULL,
  .irecvConsumed = NULL,
  .makeVDevice = mcp_plugin_make_vdevice,
  .finalize = mcp_net_finalize,
  .setNetAttr = NULL,
};
