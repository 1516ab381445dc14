/*
 * net_v12.h - NCCL's v12 network-plugin ABI (NCCL 2.30), declared by mcpnet.
 *
 * NCCL 2.30 loads ncclNetPlugin_v12 first. Its function table is v11's slot for slot;
 * what changed is the properties: a virtual device may now stand for up to 8 physical
 * ones (so vProps grows and every field after it moves), and two 16-bit fields at the
 * end say which rail and which plane the device is on (NCCL_NET_ID_UNDEF when the plugin
 * does not know). NCCL never connects two NICs of different planes, limits its cross-NIC
 * search to one rail, and NCCL_NET_MERGE_POLICY=RAIL fuses NICs of one rail only. The
 * layouts are ABI facts read from NCCL's public source (src/include/plugin/net/net_v12.h
 * at v2.30.7-1), written by hand rather than vendored, with every size and offset pinned
 * below (and in test/unit/test_plugin_plugin_abi.c).
 */
#ifndef MCPNET_NCCL_NET_V12_H
#define MCPNET_NCCL_NET_V12_H

#include "nccl/net_v11.h"

/* The physical devices one v12 virtual device may fuse (v9 - v11: 4). */
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
/* A rail or plane the plugin cannot tell. */
#define NCCL_NET_ID_UNDEF (-1)

typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v12_t;
typedef ncclNetCommConfig_v11_t ncclNetCommConfig_v12_t;
typedef ncclNetCommAttr_v11_t ncclNetCommAttr_v12_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

/* v11's fields in v11's order, the wider vProps, then the rail and the plane. */
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
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} ncclNetProperties_v12_t;

/* 22 slots, v11's; only the properties and vProps types differ. */
typedef struct {
  const char *name;
  ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v12_t *config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
                          ncclNetDeviceHandle_v12_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v12_t **recvDevComm);
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
  ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v12_t *props);
  ncclResult_t (*finalize)(void *ctx);
  ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v12_t *netAttr);
} ncclNet_v12_t;

_Static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36, "v12 vprops are 36 bytes");

/* vProps ends at 100, so maxP2pBytes moves from v11's 88 to 104 (8-byte aligned). */
_Static_assert(sizeof(ncclNetProperties_v12_t) == 128, "v12 properties are 128 bytes");
_Static_assert(offsetof(ncclNetProperties_v12_t, name) == 0, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, pciPath) == 8, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, guid) == 16, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, ptrSupport) == 24, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, regIsGlobal) == 28, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, forceFlush) == 32, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, speed) == 36, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, port) == 40, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, latency) == 44, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxComms) == 48, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxRecvs) == 52, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, netDeviceType) == 56, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, netDeviceVersion) == 60, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, vProps) == 64, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124, "v12 props layout");
_Static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126, "v12 props layout");

_Static_assert(sizeof(ncclNet_v12_t) == 176, "ncclNet_v12_t has 22 slots");
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, name, 0);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, init, 1);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, devices, 2);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, getProperties, 3);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, listen, 4);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, connect, 5);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, accept, 6);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, regMr, 7);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, regMrDmaBuf, 8);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, deregMr, 9);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, isend, 10);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, irecv, 11);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, iflush, 12);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, test, 13);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, closeSend, 14);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, closeRecv, 15);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, closeListen, 16);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, getDeviceMr, 17);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, irecvConsumed, 18);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, makeVDevice, 19);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, finalize, 20);
MCP_NCCL_ASSERT_SLOT(ncclNet_v12_t, setNetAttr, 21);

#endif
