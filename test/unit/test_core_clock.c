/*
 * test_core_clock.c - the one clock: both reads follow the one test hook, and come back to
 * the real monotonic clock when it is cleared. No wall-clock bounds: only order.
 */
#include "mcp_test.h"
#include "core/clock.h"

static uint64_t fake_ns = 5 * MCP_NS_PER_S + 7 * MCP_NS_PER_MS + 3;
static uint64_t fake(void) { return fake_ns; }

static void test_hook_drives_both_reads(void)
{
  mcp_clock_test_set(fake);
  CHECK(mcp_clock_ns() == fake_ns);
  CHECK(mcp_clock_coarse_ns() == fake_ns);
  CHECK(mcp_clock_ms() == 5007);
  CHECK(mcp_clock_coarse_ms() == 5007);
  fake_ns += MCP_NS_PER_S;
  CHECK(mcp_clock_ms() == 6007);
  mcp_clock_test_set(NULL);
}

static void test_real_clock_is_monotonic(void)
{
  uint64_t a = mcp_clock_ns(), b = mcp_clock_ns();

  CHECK(a != fake_ns && b >= a);
  a = mcp_clock_coarse_ns();
  b = mcp_clock_coarse_ns();
  CHECK(b >= a);
  /* Same time base: the coarse read is never ahead of a precise read taken after it. */
  CHECK(mcp_clock_coarse_ns() <= mcp_clock_ns());
}

int main(void)
{
  RUN_TEST(test_hook_drives_both_reads);
  RUN_TEST(test_real_clock_is_monotonic);
  return TEST_EXIT();
}
