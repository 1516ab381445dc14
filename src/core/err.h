/*
 * err.h - the library's one error convention.
 *
 * Inside src/core .. src/xfer a call returns 0 or a negative errno, and whoever finds
 * the error says why where it is found (MCP_WARN, or a comm's errmsg through
 * mcp_comm_fail). Only net turns the number into the ncclResult_t NCCL sees
 * (mcp_net_result), so the kind of failure NCCL reports is chosen here, by errno:
 */
#ifndef MCPNET_ERR_H
#define MCPNET_ERR_H

#include <errno.h>

#define MCP_ERR_SYSTEM (-EIO)         /* ncclSystemError: a local resource or call failed */
#define MCP_ERR_REMOTE (-ECONNRESET)  /* ncclRemoteError: the peer, the link or the path failed */
#define MCP_ERR_INTERNAL (-EOVERFLOW) /* ncclInternalError: more outstanding work than NCCL may post */
#define MCP_ERR_ARG (-EINVAL)         /* ncclInvalidArgument: an argument is not ours or out of range */
#define MCP_ERR_USAGE (-ENOTSUP)      /* ncclInvalidUsage: configuration, setup or peers that cannot work */

#endif
