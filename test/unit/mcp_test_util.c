/*
 * mcp_test_util.c - the loggers and the nap of mcp_test_util.h (see there for why).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp_test_util.h"

#define LOG_TEXT (1u << 20) /* the "LEVEL message\n" lines */
#define LOG_MSGS (1u << 16) /* the first LOG_KEPT messages, each NUL-terminated */
#define LOG_KEPT 256
#define LOG_KINDS 32 /* distinct (level, flags) pairs counted */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[LOG_TEXT];
static size_t log_len;
static char log_msgs[LOG_MSGS];
static size_t log_msgs_len;
static size_t log_kept_at[LOG_KEPT];
static int log_kept;
static struct {
  ncclDebugLogLevel level;
  unsigned long flags;
  int n;
} log_kinds[LOG_KINDS];
static int log_nkinds;
static int log_echo;

void mcp_test_log_quiet(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                        const char *fmt, ...)
{
  (void)level;
  (void)flags;
  (void)file;
  (void)line;
  (void)fmt;
}

static const char *level_name(ncclDebugLogLevel level)
{
  return level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_TRACE ? "TRACE" : "INFO";
}

/* Counts a line of level and flags (under log_lock): the only count kept, the others
 * are sums of it. */
static void count(ncclDebugLogLevel level, unsigned long flags)
{
  int k;

  for (k = 0; k < log_nkinds && (log_kinds[k].level != level || log_kinds[k].flags != flags); k++)
    ;
  if (k == LOG_KINDS) {
    fprintf(stderr, "mcp_test_log_capture: more than %d kinds of line\n", LOG_KINDS);
    abort();
  }
  if (k == log_nkinds) {
    log_kinds[k].level = level;
    log_kinds[k].flags = flags;
    log_kinds[k].n = 0;
    log_nkinds++;
  }
  log_kinds[k].n++;
}

void mcp_test_log_capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                          const char *fmt, ...)
{
  char msg[4096], out[sizeof(msg) + 16];
  va_list ap;
  size_t n, mlen;

  (void)file;
  (void)line;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  snprintf(out, sizeof(out), "%s %s\n", level_name(level), msg);
  n = strlen(out);
  mlen = strlen(msg);
  pthread_mutex_lock(&log_lock);
  if (log_len + n + 1 > sizeof(log_text))
    log_len = 0;
  memcpy(log_text + log_len, out, n + 1);
  log_len += n;
  if (mcp_test_log_lines() < LOG_KEPT && log_msgs_len + mlen + 1 <= sizeof(log_msgs)) {
    memcpy(log_msgs + log_msgs_len, msg, mlen + 1);
    log_kept_at[log_kept++] = log_msgs_len;
    log_msgs_len += mlen + 1;
  }
  count(level, flags);
  if (log_echo)
    fputs(out, stderr);
  pthread_mutex_unlock(&log_lock);
}

void mcp_test_log_clear(void)
{
  pthread_mutex_lock(&log_lock);
  log_len = 0;
  log_text[0] = '\0';
  log_msgs_len = 0;
  log_kept = 0;
  log_nkinds = 0;
  pthread_mutex_unlock(&log_lock);
}

void mcp_test_log_echo(int on) { log_echo = on; }

const char *mcp_test_log_text(void) { return log_text; }

int mcp_test_log_has(ncclDebugLogLevel level, const char *text)
{
  const char *name = level_name(level), *p, *start;
  size_t nlen = strlen(name);

  for (p = log_text; (p = strstr(p, text)) != NULL; p++) {
    for (start = p; start > log_text && start[-1] != '\n'; start--)
      ;
    if (strncmp(start, name, nlen) == 0 && start[nlen] == ' ')
      return 1;
  }
  return 0;
}

const char *mcp_test_log_line(int i) { return i >= 0 && i < log_kept ? log_msgs + log_kept_at[i] : ""; }

int mcp_test_log_lines(void)
{
  int n = 0;

  for (int k = 0; k < log_nkinds; k++)
    n += log_kinds[k].n;
  return n;
}

int mcp_test_log_count(ncclDebugLogLevel level)
{
  int n = 0;

  for (int k = 0; k < log_nkinds; k++)
    n += log_kinds[k].level == level ? log_kinds[k].n : 0;
  return n;
}

int mcp_test_log_count_flags(ncclDebugLogLevel level, unsigned long flags)
{
  for (int k = 0; k < log_nkinds; k++)
    if (log_kinds[k].level == level && log_kinds[k].flags == flags)
      return log_kinds[k].n;
  return 0;
}

void mcp_test_nap(void)
{
  struct timespec ts = {0, 200000};

  nanosleep(&ts, NULL);
}
