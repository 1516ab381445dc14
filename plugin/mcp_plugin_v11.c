/*
 * mcp_plugin_v11.c - ncclNetPlugin_v11, the table NCCL 2.28 and later load first.
 *
 * v11 is the core's native interface, so most slots point straight at mcp_net_*:
 * the compiler checks each of those signatures against the table. Only init (its
 * config struct), connect (its device handle) and isend/irecv (profiler handles)
 * need adapting. Device offload, NIC fusion and traffic hints are not offered, so
 * those slots are NULL, which NCCL checks before calling.
 */
#include "mcp_plugin.h"
#include "mcpnet/net.h"

/* NCCL's config lives on its stack and cfg on ours: mcp_net_init must copy the
 * traffic class into ctx rather than keep the pointer. */
static ncclResult_t mcp_plugin_v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                                        ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn)
{
  struct mcp_comm_config cfg = {
    .traffic_class = config != NULL ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF,
  };

  mcp_net_set_profiler(prof_fn); /* events per work request (mcp_xfer_prof.c) */
  mcp_net_note_abi(11);
  return mcp_net_init(ctx, comm_id, &cfg, log_fn);
}

/* The traffic class already sits in ctx (from init), so connect passes no config.
 * send_dev_comm may be NULL (NCCL's GDR probe) and is never written: HOST plugin. */
static ncclResult_t mcp_plugin_v11_connect(void *ctx, int dev, void *handle, void **send_comm,
                                           ncclNetDeviceHandle_v11_t **send_dev_comm)
{
  (void)send_dev_comm;
  return mcp_net_connect(ctx, dev, NULL, handle, send_comm);
}

MCP_PLUGIN_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
  .name = MCP_NET_NAME,
  .init = mcp_plugin_v11_init,
  .devices = mcp_net_devices,
  .getProperties = mcp_plugin_props_v11,
  .listen = mcp_net_listen,
  .connect = mcp_plugin_v11_connect,
  .accept = mcp_plugin_accept,
  .regMr = mcp_net_reg_mr,
  .regMrDmaBuf = mcp_net_reg_mr_dmabuf,
  .deregMr = mcp_net_dereg_mr,
  .isend = mcp_plugin_isend_ph,
  .irecv = mcp_plugin_irecv_ph,
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
