/*
 * net_v9.h - NCCL's v9 network-plugin ABI (NCCL 2.24 - 2.25), declared by mcpnet.
 *
 * mcpnet exports a v9 table for NCCL releases that know v9 but not v10. v9 added the
 * virtual-device list (NIC fusion), forceFlush and the per-transfer byte limits to the
 * properties, and size_t transfer sizes. The layouts are ABI facts from NCCL's public
 * source (ext-net/example/nccl/net_v9.h in NCCL's repository), written by hand and
 * pinned by static asserts (and test/unit/test_plugin_plugin_abi.c);
 * v10 reuses the properties and vprops declared here because their layout is the same.
 */
#ifndef MCPNET_NCCL_NET_V9_H
#define MCPNET_NCCL_NET_V9_H

#include "nccl/net_v8.h"

typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;

/* The physical devices a (virtual) device stands for; {1, {dev}} for a plain NIC. */
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v9_t;

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
  ncclNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v9_t;

/* 20 slots: v8's order plus makeVDevice; init takes only the logger. */
typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, void *handle, void **sendComm, ncclNetDeviceHandle_v9_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v9_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                              void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                        void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

_Static_assert(sizeof(ncclNetVDeviceProps_v9_t) == 20, "vprops are 20 bytes");

_Static_assert(sizeof(ncclNetProperties_v9_t) == 104, "v9 properties are 104 bytes");
_Static_assert(offsetof(ncclNetProperties_v9_t, pciPath) == 8, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, guid) == 16, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, ptrSupport) == 24, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, regIsGlobal) == 28, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, forceFlush) == 32, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, speed) == 36, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, port) == 40, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, latency) == 44, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxComms) == 48, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxRecvs) == 52, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, netDeviceType) == 56, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, netDeviceVersion) == 60, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, vProps) == 64, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxCollBytes) == 96, "v9 props layout");

_Static_assert(sizeof(ncclNet_v9_t) == 160, "ncclNet_v9_t has 20 slots");
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, name, 0);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, init, 1);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, devices, 2);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, getProperties, 3);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, listen, 4);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, connect, 5);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, accept, 6);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, regMr, 7);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, regMrDmaBuf, 8);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, deregMr, 9);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, isend, 10);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, irecv, 11);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, iflush, 12);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, test, 13);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, closeSend, 14);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, closeRecv, 15);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, closeListen, 16);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, getDeviceMr, 17);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, irecvConsumed, 18);
MCP_NCCL_ASSERT_SLOT(ncclNet_v9_t, makeVDevice, 19);

#endif
