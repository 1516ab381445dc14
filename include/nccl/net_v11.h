/*
 * net_v11.h - NCCL's v11 network-plugin ABI (NCCL 2.28), declared by mcpnet.
 *
 * v11 is the interface mcpnet implements natively (plugin/mcp_plugin_v11.c). It made
 * init per communicator: init returns a context that listen/connect/finalize receive,
 * and the traffic class travels in that context instead of through connect. It also
 * added maxMultiRequestSize to the properties and the optional setNetAttr hint. The
 * layouts are ABI facts from NCCL's public source (ext-net/example/nccl/net_v11.h in
 * NCCL 2.28's repository), written by hand rather than vendored, with every size and
 * offset pinned by static asserts (and test/unit/test_plugin_plugin_abi.c).
 */
#ifndef MCPNET_NCCL_NET_V11_H
#define MCPNET_NCCL_NET_V11_H

#include "nccl/net_v10.h"

#define NCCL_NET_ATTR_UNDEF (-1)

typedef ncclNetDeviceHandle_v10_t ncclNetDeviceHandle_v11_t;
typedef ncclNetVDeviceProps_v10_t ncclNetVDeviceProps_v11_t;
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;

typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} ncclNetProperties_v11_t;

/* The traffic-shape hint setNetAttr carries; NCCL_NET_ATTR_UNDEF marks unset fields. */
typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;    /* bitmask of collective kinds */
  uint32_t algo;  /* bitmask of algorithms */
  uint32_t proto; /* bitmask of protocols */
} ncclNetAttr_v11_t;

/* 22 slots: v10's order with ctx-taking init/listen/connect, then finalize, setNetAttr. */
typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_v11_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v11_t **recvDevComm);
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
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
  ncclResult_t (*finalize)(void *ctx);
  ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

_Static_assert(sizeof(ncclNetVDeviceProps_v11_t) == 20, "vprops are 20 bytes");
_Static_assert(sizeof(ncclNetDeviceHandle_v11_t) == 32, "device handle is 32 bytes");

_Static_assert(sizeof(ncclNetProperties_v11_t) == 112, "v11 properties are 112 bytes");
_Static_assert(offsetof(ncclNetProperties_v11_t, name) == 0, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, pciPath) == 8, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, guid) == 16, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, ptrSupport) == 24, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, regIsGlobal) == 28, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, forceFlush) == 32, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, speed) == 36, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, port) == 40, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, latency) == 44, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxComms) == 48, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxRecvs) == 52, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, netDeviceType) == 56, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, netDeviceVersion) == 60, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104, "v11 props layout");

_Static_assert(sizeof(ncclNetCommAttr_v11_t) == 16, "comm attr is four int32");
_Static_assert(sizeof(ncclNetAttr_v11_t) == 44, "net attr is 44 bytes");
_Static_assert(offsetof(ncclNetAttr_v11_t, recvCommAttr) == 16, "net attr layout");
_Static_assert(offsetof(ncclNetAttr_v11_t, op) == 32, "net attr layout");
_Static_assert(offsetof(ncclNetAttr_v11_t, algo) == 36, "net attr layout");
_Static_assert(offsetof(ncclNetAttr_v11_t, proto) == 40, "net attr layout");

_Static_assert(sizeof(ncclNet_v11_t) == 176, "ncclNet_v11_t has 22 slots");
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, name, 0);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, init, 1);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, devices, 2);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, getProperties, 3);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, listen, 4);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, connect, 5);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, accept, 6);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, regMr, 7);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, regMrDmaBuf, 8);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, deregMr, 9);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, isend, 10);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, irecv, 11);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, iflush, 12);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, test, 13);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, closeSend, 14);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, closeRecv, 15);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, closeListen, 16);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, getDeviceMr, 17);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, irecvConsumed, 18);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, makeVDevice, 19);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, finalize, 20);
MCP_NCCL_ASSERT_SLOT(ncclNet_v11_t, setNetAttr, 21);

#endif
