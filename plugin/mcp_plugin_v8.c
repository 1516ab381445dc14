/*
 * mcp_plugin_v8.c - ncclNetPlugin_v8, for NCCL 2.20 - 2.23.
 *
 * v8 is v9 with int transfer sizes, the 64-byte properties and no makeVDevice slot.
 * The adapters here widen sizes to size_t (refusing negative ones, which can only be
 * a caller bug) and otherwise share v9's wiring.
 */
#include "mcp_plugin.h"
#include "core/log.h"
#include "net/net.h"

static ncclResult_t mcp_plugin_v8_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
                                        void **request)
{
  if (size < 0) {
    *request = NULL;
    MCP_WARN("isend: negative size %d from a v8 caller (tag %d)", size, tag);
    return ncclInternalError;
  }
  return mcp_net_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

/* *request is cleared first: NCCL's optional-completion hint is a v9+ contract, and
 * NCCL's own compatibility layer never lets it reach a v8 irecv either. The widened
 * sizes live on this stack frame, which relies on mcp_net_irecv copying sizes[]
 * before it returns rather than keeping the pointer. */
static ncclResult_t mcp_plugin_v8_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
                                        void **mhandles, void **request)
{
  size_t wide[MCP_MAX_RECVS];

  *request = NULL;
  if (n < 1 || n > MCP_MAX_RECVS) {
    MCP_WARN("irecv: %d buffers from a v8 caller, supported 1..%d", n, MCP_MAX_RECVS);
    return ncclInternalError;
  }
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) {
      MCP_WARN("irecv: negative size %d for buffer %d from a v8 caller", sizes[i], i);
      return ncclInternalError;
    }
    wide[i] = (size_t)sizes[i];
  }
  return mcp_net_irecv(recv_comm, n, data, wide, tags, mhandles, request);
}

/* NCCL 2.20 - 2.22 default NCCL_IB_TIMEOUT to 18, 2.23 to 20: init says it is v8. */
static ncclResult_t mcp_plugin_v8_init(ncclDebugLogger_t log_fn) { return mcp_plugin_legacy_init(8, log_fn); }

MCP_PLUGIN_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
  .name = MCP_NET_NAME,
  .init = mcp_plugin_v8_init,
  .devices = mcp_net_devices,
  .getProperties = mcp_plugin_props_v8,
  .listen = mcp_plugin_legacy_listen,
  .connect = mcp_plugin_legacy_connect,
  .accept = mcp_plugin_accept,
  .regMr = mcp_net_reg_mr,
  .regMrDmaBuf = mcp_net_reg_mr_dmabuf,
  .deregMr = mcp_net_dereg_mr,
  .isend = mcp_plugin_v8_isend,
  .irecv = mcp_plugin_v8_irecv,
  .iflush = mcp_net_iflush,
  .test = mcp_net_test,
  .closeSend = mcp_net_close_send,
  .closeRecv = mcp_net_close_recv,
  .closeListen = mcp_net_close_listen,
  .getDeviceMr = NULL,
  .irecvConsumed = NULL,
};
