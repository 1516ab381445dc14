/*
 * mcp_log.c - the logging bridge: NCCL's logger when the plugin runs inside NCCL,
 * stderr for tools and tests. The prefix "NET/MCP" is added here once so call sites
 * only say what happened.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>

#include "mcpnet/log.h"

static _Atomic(ncclDebugLogger_t) log_fn;
static atomic_int stderr_level = NCCL_LOG_WARN;

void mcp_log_set_logger(ncclDebugLogger_t fn) { atomic_store(&log_fn, fn); }

void mcp_log_set_stderr(int max_level) { atomic_store(&stderr_level, max_level); }

int mcp_log_level_enabled(int level)
{
  return atomic_load(&log_fn) != NULL || level <= atomic_load(&stderr_level);
}

void mcp_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
  char msg[2048];
  va_list ap;
  ncclDebugLogger_t fn = atomic_load(&log_fn);

  if (fn == NULL && (int)level > atomic_load(&stderr_level))
    return;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (fn != NULL) {
    fn(level, flags, file, line, "NET/MCP %s", msg);
    return;
  }
  fprintf(stderr, "mcpnet %s: %s\n",
          level == NCCL_LOG_WARN     ? "WARN"
            : level == NCCL_LOG_INFO ? "INFO"
                                     : "TRACE",
          msg);
}
