/*
 * mcp_test_util.h - what unit tests share beyond mcp_test.h's checks: the loggers a test
 * hands the library (mcp_log_set_logger), one that drops every line and one that keeps
 * them for the checks on what was said, and the short nap of a test that waits for the
 * library's own threads. A test that includes this header gets mcp_test_util.c linked
 * (test/CMakeLists.txt), as does one that includes mcp_fake_flight.h.
 *
 * Why: each test used to write these out again, a little differently each time (WARNs
 * only or every line, a prefix or none, counters of its own); one capture with the
 * accessors below serves them all, and its lines look the same in every test.
 */
#ifndef MCPNET_TEST_UTIL_H
#define MCPNET_TEST_UTIL_H

#include "nccl/net_common.h"

/* A logger that drops every line: for tests whose failures log on purpose. */
void mcp_test_log_quiet(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * A logger that keeps every line since the last mcp_test_log_clear, one line a message as
 * NCCL's logger writes them: "WARN <message>\n", "TRACE <message>\n", and "INFO
 * <message>\n" for every other level. A newline inside a message is kept as it is (a
 * forged line that a test can look for). The text holds 1 MiB: a line that does not fit
 * starts it again, from that line; the counts go on. Safe to call from several threads.
 */
void mcp_test_log_capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Forgets every line and count. */
void mcp_test_log_clear(void);
/* on: the capture also writes each line to stderr, as it keeps it (for a test's output). */
void mcp_test_log_echo(int on);
/* The lines kept, NUL-terminated ("" after a clear). */
const char *mcp_test_log_text(void);
/* 1 when a kept line of that level holds text (text without a newline). */
int mcp_test_log_has(ncclDebugLogLevel level, const char *text);
/* The message of line i since the clear (0 first), without prefix or newline: the first
 * 256 lines are kept one by one too. "" for a line not kept. */
const char *mcp_test_log_line(int i);
/* Lines since the clear: all of them, those of one level, those of one level whose flags
 * (NCCL_ENV, ... ; MCP_WARN's are NCCL_ALL) are exactly flags. */
int mcp_test_log_lines(void);
int mcp_test_log_count(ncclDebugLogLevel level);
int mcp_test_log_count_flags(ncclDebugLogLevel level, unsigned long flags);

/* Sleeps 0.2 ms: a turn of a loop that waits for the library's threads (a count of
 * turns bounds the loop, never a time). */
void mcp_test_nap(void);

#endif
