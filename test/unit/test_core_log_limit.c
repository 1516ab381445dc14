/*
 * test_core_log_limit.c - WARNs a stranger can repeat (MCP_WARN_LIMITED), on an injected
 * clock: one line per message and source a minute, the repeats' count printed when the
 * minute is over (at the next one, or at a flush), and past 4 sources of one message the
 * others counted together, so that neither one address nor many flood the log.
 */
#include <stdio.h>
#include <string.h>

#include "mcp_test.h"
#include "mcp_test_util.h"
#include "core/clock.h"
#include "core/log.h"

static uint64_t now_ms = 5000;
static uint64_t fake_now(void) { return now_ms * MCP_NS_PER_MS; }

static void say(const char *source, int n) { MCP_WARN_LIMITED(source, "stranger %d knocked", n); }

static void test_one_source(void)
{
  mcp_test_log_clear();
  for (int i = 0; i < 1000; i++)
    say("10.0.0.1", i);
  CHECK_EQ_INT(mcp_test_log_lines(), 1);
  CHECK(strstr(mcp_test_log_line(0), "stranger 0 knocked") != NULL);
  now_ms += 30000;
  mcp_log_limited_flush(0); /* the minute is not over */
  CHECK_EQ_INT(mcp_test_log_lines(), 1);
  now_ms += 31000;
  say("10.0.0.1", 1000); /* the count, then this one in full */
  CHECK_EQ_INT(mcp_test_log_lines(), 3);
  CHECK(strstr(mcp_test_log_line(1),
               "stranger 0 knocked ... and 999 more like it from 10.0.0.1 in the last 60 s") != NULL);
  CHECK(strstr(mcp_test_log_line(2), "stranger 1000 knocked") != NULL);
  say("10.0.0.1", 1001);
  now_ms += 61000;
  mcp_log_limited_flush(0);
  CHECK_EQ_INT(mcp_test_log_lines(), 4);
  CHECK(strstr(mcp_test_log_line(3), "and 1 more like it from 10.0.0.1") != NULL);
  mcp_log_limited_flush(0); /* said once */
  CHECK_EQ_INT(mcp_test_log_lines(), 4);
  say("10.0.0.1", 1002); /* a new minute: in full */
  CHECK_EQ_INT(mcp_test_log_lines(), 5);
  now_ms += 61000;
}

static void test_many_sources(void)
{
  char src[32];

  mcp_test_log_clear();
  for (int round = 0; round < 10; round++)
    for (int h = 0; h < 10; h++) {
      snprintf(src, sizeof(src), "10.1.0.%d", h);
      say(src, round * 10 + h);
    }
  /* Four addresses in full, the fifth's first line for "other addresses". */
  CHECK_EQ_INT(mcp_test_log_lines(), 5);
  CHECK(strstr(mcp_test_log_line(4), "stranger 4 knocked") != NULL);
  now_ms += 61000;
  mcp_log_limited_flush(0);
  CHECK_EQ_INT(mcp_test_log_lines(), 10);
  CHECK(strstr(mcp_test_log_line(9), "and 59 more like it from other addresses") != NULL ||
        strstr(mcp_test_log_line(5), "and 59 more like it from other addresses") != NULL);
  CHECK(mcp_log_limited_suppressed() > 0);
}

/* When the channel closes, every count is printed, its minute over or not. */
static void test_flush_all(void)
{
  mcp_test_log_clear();
  for (int i = 0; i < 5; i++)
    say("10.2.0.1", i);
  CHECK_EQ_INT(mcp_test_log_lines(), 1);
  mcp_log_limited_flush(0);
  CHECK_EQ_INT(mcp_test_log_lines(), 1);
  mcp_log_limited_flush(1);
  CHECK_EQ_INT(mcp_test_log_lines(), 2);
  CHECK(strstr(mcp_test_log_line(1), "and 4 more like it from 10.2.0.1") != NULL);
}

int main(void)
{
  mcp_clock_test_set(fake_now);
  mcp_log_set_logger(mcp_test_log_capture);
  RUN_TEST(test_one_source);
  RUN_TEST(test_many_sources);
  RUN_TEST(test_flush_all);
  mcp_clock_test_set(NULL);
  return TEST_EXIT();
}
