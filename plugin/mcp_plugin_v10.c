/*
 * mcp_plugin_v10.c - ncclNetPlugin_v10, for NCCL 2.26 - 2.27.
 *
 * v10 differs from v11 in lifecycle: init runs once per process without a context,
 * there is no finalize, and the traffic class arrives with each connect instead of
 * through init. Everything else is v11's argument list, so the slots reuse the
 * shared adapters and the core directly.
 */
#include "mcp_plugin.h"
#include "net/net.h"

/* The profiler callback receives an event per work request NCCL's proxy posts with a
 * parent handle (mcp_xfer_prof.c). */
static ncclResult_t mcp_plugin_v10_init(ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn)
{
  mcp_net_set_profiler(prof_fn);
  return mcp_plugin_legacy_init(10, log_fn);
}

/* cfg lives on this stack frame, so mcp_net_connect must copy the traffic class out
 * rather than keep the pointer (NCCL's own config is no longer-lived either). */
static ncclResult_t mcp_plugin_v10_connect(int dev, ncclNetCommConfig_v10_t *config, void *handle,
                                           void **send_comm, ncclNetDeviceHandle_v10_t **send_dev_comm)
{
  struct mcp_comm_config cfg = {
    .traffic_class = config != NULL ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF,
  };

  (void)send_dev_comm;
  return mcp_net_connect(NULL, dev, &cfg, handle, send_comm);
}

MCP_PLUGIN_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
  .name = MCP_NET_NAME,
  .init = mcp_plugin_v10_init,
  .devices = mcp_net_devices,
  .getProperties = mcp_plugin_props_v9,
  .listen = mcp_plugin_legacy_listen,
  .connect = mcp_plugin_v10_connect,
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
};
