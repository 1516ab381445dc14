/*
 * net_internal.h - what the net files share and no lower layer sees: the
 * per-communicator context v11's init returns.
 */
#ifndef MCPNET_NET_INTERNAL_H
#define MCPNET_NET_INTERNAL_H

#include <stdint.h>

struct mcp_ctx {
  uint64_t comm_id;
  int traffic_class;
};

/* The context's traffic class; NCCL_NET_TRAFFIC_CLASS_UNDEF for NULL (the v8-v10 shims). */
int mcp_ctx_traffic_class(const void *ctx);

#endif
