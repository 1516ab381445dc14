/*
 * net.h - every NCCL network-plugin ABI version mcpnet exports (v8 - v12), in one include.
 *
 * Code that builds or drives the exported tables (plugin/, tests, the benchmark)
 * includes this instead of picking a version header. Each net_vN.h builds on the one
 * before it, because NCCL kept layouts unchanged across versions where it could; the
 * unversioned names below always mean the newest version, v12.
 */
#ifndef MCPNET_NCCL_NET_H
#define MCPNET_NCCL_NET_H

#include "nccl/net_common.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"
#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v12.h"

typedef ncclNet_v12_t ncclNet_t;
typedef ncclNetProperties_v12_t ncclNetProperties_t;
typedef ncclNetVDeviceProps_v12_t ncclNetVDeviceProps_t;
typedef ncclNetCommConfig_v12_t ncclNetCommConfig_t;
typedef ncclNetDeviceHandle_v12_t ncclNetDeviceHandle_t;
typedef ncclNetAttr_v12_t ncclNetAttr_t;

#endif
