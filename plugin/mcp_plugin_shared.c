/*
 * mcp_plugin_shared.c - argument adapters that more than one exported table uses.
 *
 * Versions differ mostly by a few arguments: device-handle out-pointers a HOST plugin
 * never fills and the missing context of v8 - v10 (isend/irecv with profiler handles
 * need no adapter: the core takes them, mcp_net_isend_ph). Each adapter drops or supplies exactly that and calls the core, so the
 * table files stay declarations of what their version differs in.
 */
#include "mcp_plugin.h"
#include "net/net.h"

/* recv_dev_comm is left alone: NCCL's GDR probe passes NULL for it, and for a HOST
 * plugin NCCL expects the handle it points to to stay NULL. */
ncclResult_t mcp_plugin_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v8_t **recv_dev_comm)
{
  (void)recv_dev_comm;
  return mcp_net_accept(listen_comm, recv_comm);
}

/* v8 - v10 have no per-communicator context: init only sets the logger and runs
 * discovery (the core's "legacy init", ctx == NULL), and comms use process defaults. */
ncclResult_t mcp_plugin_legacy_init(int abi, ncclDebugLogger_t log_fn)
{
  mcp_net_note_abi(abi);
  return mcp_net_init(NULL, 0, NULL, log_fn);
}

ncclResult_t mcp_plugin_legacy_listen(int dev, void *handle, void **listen_comm)
{
  return mcp_net_listen(NULL, dev, handle, listen_comm);
}

/* For v8 and v9, which carry no configuration: the traffic class stays undefined. */
ncclResult_t mcp_plugin_legacy_connect(int dev, void *handle, void **send_comm,
                                       ncclNetDeviceHandle_v8_t **send_dev_comm)
{
  (void)send_dev_comm;
  return mcp_net_connect(NULL, dev, NULL, handle, send_comm);
}

/* makeVDevice of v9, v10 and v11: their vProps are one layout (v10 and v11 reuse v9's
 * type) of 4 devices, and more is refused before devs is read. NCCL passes indices it got
 * from devices(); the core checks them. */
ncclResult_t mcp_plugin_make_vdevice(int *d, ncclNetVDeviceProps_v9_t *props)
{
  if (props == NULL)
    return mcp_net_make_vdevice(d, 0, NULL, NCCL_NET_MAX_DEVS_PER_NIC);
  return mcp_net_make_vdevice(d, props->ndevs, props->devs, NCCL_NET_MAX_DEVS_PER_NIC);
}

/* v12's vProps hold 8 devices (NCCL 2.30's fused NICs). */
ncclResult_t mcp_plugin_make_vdevice_v12(int *d, ncclNetVDeviceProps_v12_t *props)
{
  if (props == NULL)
    return mcp_net_make_vdevice(d, 0, NULL, NCCL_NET_MAX_DEVS_PER_NIC_V12);
  return mcp_net_make_vdevice(d, props->ndevs, props->devs, NCCL_NET_MAX_DEVS_PER_NIC_V12);
}

/* NCCL's config lives on its stack and cfg on ours: mcp_net_init must copy the
 * traffic class into ctx rather than keep the pointer. */
ncclResult_t mcp_plugin_ctx_init(int abi, void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                                 ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn)
{
  struct mcp_comm_config cfg = {
    .traffic_class = config != NULL ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF,
  };

  mcp_net_set_profiler(prof_fn); /* events per work request (mcp_xfer_prof.c) */
  mcp_net_note_abi(abi);
  return mcp_net_init(ctx, comm_id, &cfg, log_fn);
}

/* The traffic class already sits in ctx (from init), so connect passes no config.
 * send_dev_comm may be NULL (NCCL's GDR probe) and is never written: HOST plugin. */
ncclResult_t mcp_plugin_ctx_connect(void *ctx, int dev, void *handle, void **send_comm,
                                    ncclNetDeviceHandle_v11_t **send_dev_comm)
{
  (void)send_dev_comm;
  return mcp_net_connect(ctx, dev, NULL, handle, send_comm);
}
