/*
 * mcp_net_comm.c - the comm-level entry points: listen, connect, accept, the data path,
 * registration and close.
 *
 * Each is a thin call down: conn sets up the link (listen, connect, accept), xfer moves
 * the data (isend, irecv, iflush, test) and registers memory. What only net knows (the
 * per-communicator context and its traffic class) is resolved here and passed down as
 * a value.
 */
#include <stddef.h>

#include "core/log.h"
#include "xfer/comm.h"
#include "net/net.h"

#include "net_internal.h"

ncclResult_t mcp_net_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
  int tc = mcp_ctx_traffic_class(ctx);

  return mcp_net_result(mcp_conn_listen(dev, tc, &mcp_xfer_link_ops, handle, listen_comm));
}

ncclResult_t mcp_net_connect(void *ctx, int dev, const struct mcp_comm_config *config, void *handle,
                             void **send_comm)
{
  int tc = config != NULL ? config->traffic_class : mcp_ctx_traffic_class(ctx);

  return mcp_net_result(mcp_conn_connect(dev, tc, &mcp_xfer_link_ops, handle, send_comm));
}

ncclResult_t mcp_net_accept(void *listen_comm, void **recv_comm)
{
  return mcp_net_result(mcp_conn_accept(listen_comm, recv_comm));
}

ncclResult_t mcp_net_close_listen(void *listen_comm)
{
  return mcp_net_result(mcp_conn_close_listen(listen_comm));
}

/* The data path's calls succeed almost always: their success is tested here, inline,
 * and only an error goes through the mapping (one call less per isend, irecv and test). */
static inline ncclResult_t data_result(int rc)
{
  return __builtin_expect(rc == 0, 1) ? ncclSuccess : mcp_net_result(rc);
}

ncclResult_t mcp_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request)
{
  return data_result(mcp_xfer_isend(send_comm, data, size, tag, mhandle, request));
}

ncclResult_t mcp_net_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                           void **request)
{
  return data_result(mcp_xfer_irecv(recv_comm, n, data, sizes, tags, mhandles, request));
}

/* With NCCL's parent handles (v10 on): the profiled path only where a profiler may take
 * the events; a call without a handle, or on a comm whose profiler took none, costs the
 * plain path's instructions and one test more. */
ncclResult_t mcp_net_isend_ph(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                              void **request)
{
  if (__builtin_expect(phandle == NULL || !mcp_xfer_prof_may(send_comm), 1))
    return data_result(mcp_xfer_isend(send_comm, data, size, tag, mhandle, request));
  return data_result(mcp_xfer_isend_prof(send_comm, data, size, tag, mhandle, phandle, request));
}

ncclResult_t mcp_net_irecv_ph(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                              void **phandles, void **request)
{
  if (__builtin_expect(phandles == NULL || !mcp_xfer_prof_may(recv_comm), 1))
    return data_result(mcp_xfer_irecv(recv_comm, n, data, sizes, tags, mhandles, request));
  return data_result(mcp_xfer_irecv_prof(recv_comm, n, data, sizes, tags, mhandles, phandles, request));
}

void mcp_net_set_profiler(ncclProfilerCallback_t fn) { mcp_xfer_prof_set(fn); }

ncclResult_t mcp_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request)
{
  return data_result(mcp_xfer_iflush(recv_comm, n, data, sizes, mhandles, request));
}

ncclResult_t mcp_net_test(void *request, int *done, int *sizes)
{
  return data_result(mcp_xfer_test(request, done, sizes));
}

static struct mcp_devctx *comm_devctx(void *comm)
{
  struct mcp_comm *c = comm;

  if (c == NULL || (c->link.kind != MCP_COMM_SEND && c->link.kind != MCP_COMM_RECV))
    return NULL;
  return mcp_link_dev_of(&c->link, 0)->dc; /* member 0; a fused comm registers on every member */
}

/* A fused comm (several members): one registration per member (mcp_xfer_reg_mr_set). */
static int comm_fused(void *comm) { return ((struct mcp_comm *)comm)->link.ndevs > 1; }

ncclResult_t mcp_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
  struct mcp_devctx *dc = comm_devctx(comm);
  struct mcp_mr *m;
  int rc;

  *mhandle = NULL;
  if (dc == NULL) {
    MCP_WARN("regMr on %p: not a send or receive comm of mcpnet", comm);
    return ncclInvalidArgument;
  }
  if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
    MCP_WARN("regMr of type %d: only host (1) and CUDA (2) memory exist", type);
    return ncclInvalidArgument;
  }
  if (type == NCCL_PTR_CUDA && !(dc->info->ptr_support & NCCL_PTR_CUDA)) {
    MCP_WARN("regMr of GPU memory on %s: no GPU peer-memory module is loaded (nvidia_peermem)",
             dc->info->name);
    return ncclInvalidUsage;
  }
  if (comm_fused(comm))
    return mcp_net_result(mcp_xfer_reg_mr_set(comm, data, size, type, 0, -1, mhandle));
  rc = mcp_mr_register(dc, data, size, type, &m);
  if (rc == 0)
    *mhandle = m;
  return mcp_net_result(rc);
}

ncclResult_t mcp_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                   void **mhandle)
{
  struct mcp_devctx *dc = comm_devctx(comm);
  struct mcp_mr *m;
  int rc;

  *mhandle = NULL;
  if (dc == NULL) {
    MCP_WARN("regMrDmaBuf on %p: not a send or receive comm of mcpnet", comm);
    return ncclInvalidArgument;
  }
  if (fd < 0)
    return mcp_net_reg_mr(comm, data, size, type, mhandle);
  if (comm_fused(comm))
    return mcp_net_result(mcp_xfer_reg_mr_set(comm, data, size, type, offset, fd, mhandle));
  rc = mcp_mr_register_dmabuf(dc, data, size, type, offset, fd, &m);
  if (rc == 0)
    *mhandle = m;
  return mcp_net_result(rc);
}

ncclResult_t mcp_net_dereg_mr(void *comm, void *mhandle)
{
  if (mhandle == NULL)
    return ncclSuccess;
  (void)comm; /* may be closed already: the handle says what it is */
  if (mcp_mh_is_set(mhandle)) {
    mcp_xfer_dereg_mr_set(mhandle);
    return ncclSuccess;
  }
  mcp_mr_release(mhandle);
  return ncclSuccess;
}

static ncclResult_t close_comm(void *comm, int kind)
{
  struct mcp_comm *c = comm;

  if (c == NULL)
    return ncclSuccess;
  if (c->link.kind != kind) {
    MCP_WARN("close of %p: not a %s comm of mcpnet", comm, kind == MCP_COMM_SEND ? "send" : "receive");
    return ncclInvalidArgument;
  }
  mcp_comm_destroy(&c->link);
  return ncclSuccess;
}

ncclResult_t mcp_net_close_send(void *send_comm) { return close_comm(send_comm, MCP_COMM_SEND); }
ncclResult_t mcp_net_close_recv(void *recv_comm) { return close_comm(recv_comm, MCP_COMM_RECV); }
