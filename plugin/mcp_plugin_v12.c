/*
 * mcp_plugin_v12.c - ncclNetPlugin_v12, the table NCCL 2.30 loads first.
 *
 * v12 keeps v11's functions slot for slot; its properties add the device's rail and
 * plane (from NCCL_IB_HCA's name:port:rail:plane or the rank map's rail=/plane=) and
 * its vProps hold 8 devices, so a virtual device may fuse up to 8. Only those two slots
 * and init (which names the table) differ from v11's; the rest is the same core and the
 * same shared adapters.
 */
#include "mcp_plugin.h"
#include "net/net.h"

static ncclResult_t mcp_plugin_v12_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v12_t *config,
                                        ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn)
{
  return mcp_plugin_ctx_init(12, ctx, comm_id, config, log_fn, prof_fn);
}

MCP_PLUGIN_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
  .name = MCP_NET_NAME,
  .init = mcp_plugin_v12_init,
  .devices = mcp_net_devices,
  .getProperties = mcp_plugin_props_v12,
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
  .makeVDevice = mcp_plugin_make_vdevice_v12,
  .finalize = mcp_net_finalize,
  .setNetAttr = NULL,
};
