/*
 * net_v8.h - NCCL's v8 network-plugin ABI (NCCL 2.20 - 2.23), declared by mcpnet.
 *
 * mcpnet exports a v8 table so that NCCL releases before v9 can load it. The layouts
 * below are ABI facts read from NCCL's public source (ext-net/example/nccl/net_v8.h in
 * NCCL's repository), written by hand rather than vendored; the static asserts at the
 * end pin every size and offset (and test/unit/test_plugin_plugin_abi.c checks them again), so
 * a typo fails the build instead of corrupting NCCL's view of a struct.
 * The device handle is the same in every version from v7 to v11, so newer headers
 * reuse the one declared here.
 */
#ifndef MCPNET_NCCL_NET_V8_H
#define MCPNET_NCCL_NET_V8_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/net_common.h"

_Static_assert(sizeof(void *) == 8 && sizeof(size_t) == 8, "the NCCL plugin layouts below are the LP64 ones");

/* Describes device-side (GPU-offload) state of a comm; HOST plugins never fill it. */
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void *handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;

/* v8 properties: no forceFlush, no virtual-device list, no per-transfer limits. */
typedef struct {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

/* 19 slots; v8 transfer sizes are int and there is no makeVDevice. */
typedef struct {
  const char *name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int *ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
  ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
  ncclResult_t (*connect)(int dev, void *handle, void **sendComm, ncclNetDeviceHandle_v8_t **sendDevComm);
  ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_v8_t **recvDevComm);
  ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                              void **mhandle);
  ncclResult_t (*deregMr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle, void **request);
  ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags, void **mhandles,
                        void **request);
  ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request);
  ncclResult_t (*test)(void *request, int *done, int *sizes);
  ncclResult_t (*closeSend)(void *sendComm);
  ncclResult_t (*closeRecv)(void *recvComm);
  ncclResult_t (*closeListen)(void *listenComm);
  ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

/* Slot k of a function table sits at k pointer widths; every slot is pinned. */
#define MCP_NCCL_ASSERT_SLOT(type, member, k) \
  _Static_assert(offsetof(type, member) == (k) * sizeof(void *), #type "." #member " must be slot " #k)

_Static_assert(sizeof(ncclNetDeviceHandle_v8_t) == 32, "device handle is 32 bytes");
_Static_assert(offsetof(ncclNetDeviceHandle_v8_t, netDeviceVersion) == 4, "handle layout");
_Static_assert(offsetof(ncclNetDeviceHandle_v8_t, handle) == 8, "handle layout");
_Static_assert(offsetof(ncclNetDeviceHandle_v8_t, size) == 16, "handle layout");
_Static_assert(offsetof(ncclNetDeviceHandle_v8_t, needsProxyProgress) == 24, "handle layout");

_Static_assert(sizeof(ncclNetProperties_v8_t) == 64, "v8 properties are 64 bytes");
_Static_assert(offsetof(ncclNetProperties_v8_t, pciPath) == 8, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, guid) == 16, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, ptrSupport) == 24, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, regIsGlobal) == 28, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, speed) == 32, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, port) == 36, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, latency) == 40, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, maxComms) == 44, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, maxRecvs) == 48, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, netDeviceType) == 52, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56, "v8 props layout");

_Static_assert(sizeof(ncclNet_v8_t) == 152, "ncclNet_v8_t has 19 slots");
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, name, 0);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, init, 1);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, devices, 2);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, getProperties, 3);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, listen, 4);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, connect, 5);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, accept, 6);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, regMr, 7);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, regMrDmaBuf, 8);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, deregMr, 9);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, isend, 10);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, irecv, 11);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, iflush, 12);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, test, 13);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, closeSend, 14);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, closeRecv, 15);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, closeListen, 16);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, getDeviceMr, 17);
MCP_NCCL_ASSERT_SLOT(ncclNet_v8_t, irecvConsumed, 18);

#endif
