/*
 * net_v10.h - NCCL's v10 network-plugin ABI (NCCL 2.26 - 2.27), declared by mcpnet.
 *
 * mcpnet exports a v10 table for NCCL releases that know v10 but not v11. v10 keeps
 * v9's properties and adds the profiler callback to init, per-connect configuration
 * (the traffic class) and profiler handles on isend/irecv. Layouts are ABI facts from
 * NCCL's public source (ext-net/example/nccl/net_v10.h in NCCL's repository), written
 * by hand and pinned below (and by test/unit/test_plugin_plugin_abi.c).
 */
#ifndef MCPNET_NCCL_NET_V10_H
#define MCPNET_NCCL_NET_V10_H

#include "nccl/net_v9.h"

typedef ncclNetDeviceHandle_v9_t ncclNetDeviceHandle_v10_t;
typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v10_t;
typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

/* What NCCL knows about a communicator that the transport should honour. */
typedef struct {
  int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF when the user set none */
} ncclNetCommConfig_v10_t;

/* 20 slots in v9's order. */
typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t *config, void *handle, void **sendComm,
                          ncclNetDeviceHandle_v10_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v10_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                              void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                        void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                        void **phandles, void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v10_t *props);
} ncclNet_v10_t;

_Static_assert(sizeof(ncclNetCommConfig_v10_t) == 4, "comm config is one int");
_Static_assert(sizeof(ncclNetProperties_v10_t) == 104, "v10 properties are 104 bytes");

_Static_assert(sizeof(ncclNet_v10_t) == 160, "ncclNet_v10_t has 20 slots");
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, name, 0);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, init, 1);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, devices, 2);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, getProperties, 3);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, listen, 4);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, connect, 5);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, accept, 6);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, regMr, 7);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, regMrDmaBuf, 8);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, deregMr, 9);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, isend, 10);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, irecv, 11);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, iflush, 12);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, test, 13);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, closeSend, 14);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, closeRecv, 15);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, closeListen, 16);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, getDeviceMr, 17);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, irecvConsumed, 18);
MCP_NCCL_ASSERT_SLOT(ncclNet_v10_t, makeVDevice, 19);

#endif
