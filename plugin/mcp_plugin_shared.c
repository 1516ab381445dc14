/*
 * mcp_plugin_shared.c - argument adapters that more than one exported table uses.
 *
 * Versions differ mostly by a few arguments: device-handle out-pointers a HOST plugin
 * never fills, profiler handles (v10 on: a call with one goes where its work requests
 * become NCCL profiler events, one without costs nothing more), and the missing context
 * of v8 - v10. Each adapter drops or supplies exactly that and calls the core, so the
 * table files stay declarations of what their version differs in.
 */
#include "mcp_plugin.h"
#include "mcpnet/net.h"

/* recv_dev_comm is left alone: NCCL's GDR probe passes NULL for it, and for a HOST
 * plugin NCCL expects the handle it points to to stay NULL. */
ncclResult_t mcp_plugin_accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_v8_t **recv_dev_comm)
{
  (void)recv_dev_comm;
  return mcp_net_accept(listen_comm, recv_comm);
}

ncclResult_t mcp_plugin_isend_ph(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                                 void *phandle, void **request)
{
  if (phandle == NULL)
    return mcp_net_isend(send_comm, data, size, tag, mhandle, request);
  return mcp_net_isend_prof(send_comm, data, size, tag, mhandle, phandle, request);
}

ncclResult_t mcp_plugin_irecv_ph(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                                 void **mhandles, void **phandles, void **request)
{
  if (phandles == NULL)
    return mcp_net_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
  return mcp_net_irecv_prof(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
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
 * type). NCCL passes indices it got from devices(); the core checks them. */
ncclResult_t mcp_plugin_make_vdevice(int *d, ncclNetVDeviceProps_v9_t *props)
{
  if (props == NULL)
    return mcp_net_make_vdevice(d, 0, NULL);
  return mcp_net_make_vdevice(d, props->ndevs, props->devs);
}
