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

/*
 * A WARN that a stranger or a misbehaving peer can cause again and again (a connection
 * with a wrong key, garbage on the out-of-band port): the first of one format from one
 * source (an address, without its port) in a window of MCP_LOG_LIMIT_WINDOW_MS is
 * printed; later ones are only counted, and the count is printed as one line when the
 * window has passed ("... and N more like it from SOURCE in the last 60 s"), at the next
 * such WARN or at mcp_log_limited_flush, whichever comes first (or when the out-of-band
 * channel closes). A flood therefore costs
 * at most two lines a minute per format and source; and past 4 sources of one format in
 * a minute, the others are counted together as "other addresses", so that many addresses
 * cannot flood it either.
 */
#define MCP_LOG_LIMIT_WINDOW_MS 60000u
#define MCP_WARN_LIMITED(source, ...) mcp_log_limited(source, __FILE__, __LINE__, __VA_ARGS__)
void mcp_log_limited(const char *source, const char *file, int line, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
/* Prints the counts of windows that have passed (all: every count, as when the channel
 * closes, so none is lost); cheap when nothing was suppressed. */
void mcp_log_limited_flush(int all);
/* Tests: WARNs suppressed so far, all sources. */
unsigned long mcp_log_limited_suppressed(void);
#define MCP_INFO(flags, ...) mcp_log(NCCL_LOG_INFO, (flags), __func__, __LINE__, __VA_ARGS__)
#define MCP_TRACE(flags, ...) mcp_log(NCCL_LOG_TRACE, (flags), __func__, __LINE__, __VA_ARGS__)

#endif
