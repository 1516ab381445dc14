/*
 * mcp_net_result.c - the one place a library error becomes what NCCL sees.
 *
 * Below net every call returns 0 or a negative errno (src/core/err.h) and has
 * said why where it failed; NCCL only distinguishes kinds of failure, and reacts to
 * them differently (a remote error names the peer, invalid usage points at the user),
 * so each MCP_ERR_* maps to the ncclResult_t that call returned before the convention.
 * Any other errno is a local system failure.
 */
#include "core/err.h"
#include "net/net.h"

ncclResult_t mcp_net_result(int err)
{
  switch (err) {
  case 0: return ncclSuccess;
  case MCP_ERR_REMOTE: return ncclRemoteError;
  case MCP_ERR_INTERNAL: return ncclInternalError;
  case MCP_ERR_ARG: return ncclInvalidArgument;
  case MCP_ERR_USAGE: return ncclInvalidUsage;
  default: return ncclSystemError;
  }
}
