/*
 * mcp_log.c - the logging bridge: NCCL's logger when the plugin runs inside NCCL,
 * stderr for tools and tests. The prefix "NET/MCP" is added here once so call sites
 * only say what happened. Also the rate limit for WARNs that a stranger can repeat at
 * will (MCP_WARN_LIMITED), so that a flood of bad connections cannot flood the log.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"

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

/* ---- Rate-limited WARNs (log.h) -------------------------------------------------- */

#define LIMIT_SLOTS 64
#define LIMIT_QUOTE 120 /* how much of the first message a count line quotes */

struct limit_slot {
  const char *fmt; /* the call site's format: one kind of message */
  char source[64];
  uint64_t start_ms; /* the window began; 0: the slot is free or its window was reported */
  unsigned more;     /* suppressed since the window began */
  uint64_t used_ms;  /* for choosing a slot to reuse */
  char first[LIMIT_QUOTE + 4];
};

static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct limit_slot limits[LIMIT_SLOTS];
static atomic_uint limit_pending;           /* slots whose count is not printed yet */
static atomic_ulong limit_suppressed_total; /* for tests */

/* The count of slot s, once (limit_lock held). */
static void limit_report(struct limit_slot *s)
{
  if (s->more == 0)
    return;
  mcp_log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__,
          "%s ... and %u more like it from %s in the last %u s (one line a minute is printed per "
          "message and source)",
          s->first, s->more, s->source, MCP_LOG_LIMIT_WINDOW_MS / 1000u);
  s->more = 0;
  atomic_fetch_sub(&limit_pending, 1);
}

static struct limit_slot *limit_slot_for(const char *fmt, const char *source, uint64_t now)
{
  struct limit_slot *s, *victim = &limits[0];

  for (s = limits; s < limits + LIMIT_SLOTS; s++) {
    if (s->fmt == fmt && strncmp(s->source, source, sizeof(s->source) - 1) == 0)
      return s;
    if (s->used_ms < victim->used_ms)
      victim = s;
  }
  limit_report(victim);
  memset(victim, 0, sizeof(*victim));
  victim->fmt = fmt;
  snprintf(victim->source, sizeof(victim->source), "%s", source);
  (void)now;
  return victim;
}

/* How many sources of one format print in full per window; the rest are counted as one
 * source, "other addresses", so many addresses cannot flood the log either (oldest first). */
#define LIMIT_SOURCES 4
static struct {
  const char *fmt;
  uint64_t start_ms;
  unsigned printed;
} limit_fmts[LIMIT_SLOTS / 4];

/* Whether one more source of fmt may print in full now (limit_lock held). */
static int limit_fmt_allows(const char *fmt, uint64_t now)
{
  unsigned i, oldest = 0;

  for (i = 0; i < sizeof(limit_fmts) / sizeof(limit_fmts[0]); i++) {
    if (limit_fmts[i].fmt == fmt)
      break;
    if (limit_fmts[i].start_ms < limit_fmts[oldest].start_ms)
      oldest = i;
  }
  if (i == sizeof(limit_fmts) / sizeof(limit_fmts[0])) {
    i = oldest;
    limit_fmts[i].fmt = fmt;
    limit_fmts[i].start_ms = 0;
  }
  if (limit_fmts[i].start_ms == 0 || now - limit_fmts[i].start_ms >= MCP_LOG_LIMIT_WINDOW_MS) {
    limit_fmts[i].start_ms = now;
    limit_fmts[i].printed = 0;
  }
  return limit_fmts[i].printed++ < LIMIT_SOURCES;
}

void mcp_log_limited(const char *source, const char *file, int line, const char *fmt, ...)
{
  uint64_t now = mcp_clock_coarse_ms() + 1; /* never 0: 0 marks a free window */
  struct limit_slot *s;
  char msg[2048];
  va_list ap;

  if (source == NULL)
    source = "?";
  pthread_mutex_lock(&limit_lock);
  s = limit_slot_for(fmt, source, now);
  if ((s->start_ms == 0 || now - s->start_ms >= MCP_LOG_LIMIT_WINDOW_MS) && !limit_fmt_allows(fmt, now)) {
    /* A new window of one more source: fold it into the others'. */
    if (s->more == 0)
      memset(s, 0, sizeof(*s)); /* nothing of its own to report: give the slot back */
    s = limit_slot_for(fmt, "other addresses", now);
  }
  s->used_ms = now;
  if (s->start_ms != 0 && now - s->start_ms < MCP_LOG_LIMIT_WINDOW_MS) {
    if (s->more++ == 0)
      atomic_fetch_add(&limit_pending, 1);
    atomic_fetch_add(&limit_suppressed_total, 1);
    pthread_mutex_unlock(&limit_lock);
    return;
  }
  limit_report(s);
  s->start_ms = now;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  snprintf(s->first, sizeof(s->first), "%.*s%s", LIMIT_QUOTE, msg, strlen(msg) > LIMIT_QUOTE ? "..." : "");
  mcp_log(NCCL_LOG_WARN, NCCL_ALL, file, line, "%s", msg);
  pthread_mutex_unlock(&limit_lock);
}

void mcp_log_limited_flush(int all)
{
  uint64_t now;

  if (atomic_load_explicit(&limit_pending, memory_order_relaxed) == 0)
    return;
  now = mcp_clock_coarse_ms() + 1;
  pthread_mutex_lock(&limit_lock);
  for (struct limit_slot *s = limits; s < limits + LIMIT_SLOTS; s++) {
    if (s->more == 0 || (!all && now - s->start_ms < MCP_LOG_LIMIT_WINDOW_MS))
      continue;
    limit_report(s);
    s->start_ms = 0; /* the next one is printed in full */
  }
  pthread_mutex_unlock(&limit_lock);
}

unsigned long mcp_log_limited_suppressed(void) { return atomic_load(&limit_suppressed_total); }
