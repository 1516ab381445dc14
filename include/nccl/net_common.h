/*
 * net_common.h - the parts of NCCL's network-plugin ABI that every version shares.
 *
 * mcpnet declares NCCL's plugin ABI itself instead of vendoring NCCL's headers: the
 * values and layouts below are facts of the ABI (NCCL 2.20 - 2.30), written from NCCL's
 * public source (ext-net/example/nccl/ in NCCL's repository: err.h, common.h, net.h).
 * Sizes and offsets of the versioned structs are pinned with static asserts in the
 * per-version headers.
 */
#ifndef MCPNET_NCCL_NET_COMMON_H
#define MCPNET_NCCL_NET_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Result codes, numerically identical to nccl.h. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* Log levels and subsystem masks NCCL's logger understands. */
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                                  const char *fmt, ...);

/* Profiler hook handed to init (v10+); mcpnet accepts it and does not call it yet. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle, int64_t pluginId,
                                               void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC 4 /* v9 - v11's vProps; v12's: net_v12.h */
#define NCCL_MAX_NET_SIZE_BYTES (1ULL << 40)
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)

typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;

#endif
