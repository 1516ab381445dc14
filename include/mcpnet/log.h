/*
 * log.h - logging through NCCL's logger, or stderr when no logger was given.
 *
 * NCCL filters by NCCL_DEBUG / NCCL_DEBUG_SUBSYS itself, so every message is handed
 * over; tools without NCCL set MCPNET_LOG_LEVEL-style filtering in mcp_log_set_stderr.
 * Messages are prefixed "NET/MCP" so they stand out in NCCL's log. Never call these
 * on the data path's success path.
 */
#ifndef MCPNET_LOG_H
#define MCPNET_LOG_H

#include "nccl/net_common.h"

void mcp_log_set_logger(ncclDebugLogger_t fn);
/* For tools and tests: print to stderr up to this level (NCCL_LOG_WARN, _INFO, _TRACE). */
void mcp_log_set_stderr(int max_level);
int mcp_log_level_enabled(int level);
/* "mcpnet VERSION, source revision REV": what init logs and every tool's --version prints. */
const char *mcp_version_text(void);

void mcp_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
  __attribute__((format(printf, 5, 6)));

#define MCP_WARN(...) mcp_log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define MCP_INFO(flags, ...) mcp_log(NCCL_LOG_INFO, (flags), __func__, __LINE__, __VA_ARGS__)
#define MCP_TRACE(flags, ...) mcp_log(NCCL_LOG_TRACE, (flags), __func__, __LINE__, __VA_ARGS__)

#endif
