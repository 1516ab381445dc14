/*
 * net.h - the one core behind every exported ncclNetPlugin_v* table.
 *
 * The core speaks NCCL 2.28's v11 semantics (and 2.30's v12 rails, planes and 8-device
 * virtual NICs) with plain C types. The plugin/ folder holds v12 and v11 tables pointing
 * here and thin v10/v9/v8 shims that adapt arguments;
 * no transport logic lives in plugin/. Every function returns an ncclResult_t and
 * never blocks on a peer: listen/connect/accept are resumable state machines.
 */
#ifndef MCPNET_NET_H
#define MCPNET_NET_H

#include <stddef.h>
#include <stdint.h>

#include "core/limits.h"
#include "nccl/net_common.h"

#define MCP_NET_NAME "MCP"

/* The canonical device properties; plugin/ copies them out per ABI version. */
struct mcp_net_props {
  const char *name;     /* unique per device, e.g. "rxe0" or "mlx5_0" */
  const char *pci_path; /* its NIC's PCI path, function digit zeroed (fabric_topo.h); NULL without one */
  uint64_t guid;        /* sys_image_guid: ports of one NIC share it */
  int ptr_support;      /* NCCL_PTR_* bits */
  int reg_is_global;
  int force_flush;
  int speed_mbps;
  int port; /* verbs port + its index among devices with this pci_path (fabric_topo.h) */
  float latency_us;
  int max_comms;
  int max_recvs;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
  int vdev_n; /* vProps: {1, {dev}} for a physical index, the fused indices for a virtual one */
  int vdev[MCP_MAX_MEMBERS];
  /* v12: the rail and plane NCCL's topology reads, NCCL_NET_ID_UNDEF (-1) when unknown;
   * a fused device's as NCCL's IB transport reports one (mcp_fabric_rail_plane). */
  int rail_id, plane_id;
};

/* Per-communicator configuration NCCL hands to init (v11) or connect (v10). */
struct mcp_comm_config {
  int traffic_class; /* NCCL_NET_TRAFFIC_CLASS_UNDEF when unset */
};

ncclResult_t mcp_net_init(void **ctx, uint64_t comm_id, const struct mcp_comm_config *config,
                          ncclDebugLogger_t log_fn);
/* Which ncclNetPlugin_vN table NCCL took (8..12): each table's init says so before
 * calling mcp_net_init, so defaults can follow that NCCL's (NCCL_IB_TIMEOUT) and the
 * init log can name it. */
void mcp_net_note_abi(int version);
ncclResult_t mcp_net_finalize(void *ctx);
ncclResult_t mcp_net_devices(int *ndev);
ncclResult_t mcp_net_get_properties(int dev, struct mcp_net_props *props);
/* makeVDevice (v9+): a virtual device over n physical indices; its index in *dev. max: the
 * most the calling table's vProps hold (4 in v9-v11, 8 in v12); n beyond it is refused
 * before devs is read. */
ncclResult_t mcp_net_make_vdevice(int *dev, int n, const int *devs, int max);

/* ctx may be NULL for the v8-v10 shims: the comm then uses the process defaults
 * and, for connect, the traffic class in config (NULL = undefined). */
ncclResult_t mcp_net_listen(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t mcp_net_connect(void *ctx, int dev, const struct mcp_comm_config *config, void *handle,
                             void **send_comm);
ncclResult_t mcp_net_accept(void *listen_comm, void **recv_comm);

ncclResult_t mcp_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t mcp_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                   void **mhandle);
ncclResult_t mcp_net_dereg_mr(void *comm, void *mhandle);

ncclResult_t mcp_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
ncclResult_t mcp_net_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                           void **request);
/* The same with NCCL's parent handles (net API v10 on, whose tables point here): NCCL's
 * profiler gets an event for each work request they post (mcp_xfer_prof.c). A NULL
 * handle, or a comm whose profiler takes no events, goes the plain way. */
ncclResult_t mcp_net_isend_ph(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                              void **request);
ncclResult_t mcp_net_irecv_ph(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                              void **phandles, void **request);
/* NCCL's profiler callback, from init (v10 on); NULL: no events. */
void mcp_net_set_profiler(ncclProfilerCallback_t fn);
ncclResult_t mcp_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
ncclResult_t mcp_net_test(void *request, int *done, int *sizes);

ncclResult_t mcp_net_close_send(void *send_comm);
ncclResult_t mcp_net_close_recv(void *recv_comm);
ncclResult_t mcp_net_close_listen(void *listen_comm);

/* What NCCL sees of a library error: 0 or a negative errno (src/core/err.h) below net. */
ncclResult_t mcp_net_result(int err);

#endif
