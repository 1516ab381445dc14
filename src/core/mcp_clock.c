/*
 * mcp_clock.c - the monotonic clock every module reads (see clock.h), with the one
 * hook through which unit tests replace it.
 */
#include <stddef.h>
#include <time.h>

#include "core/clock.h"

/* Read with an atomic load: a test may set it while the library's threads run. */
static uint64_t (*clock_hook)(void);

static uint64_t clock_read(clockid_t id)
{
  struct timespec ts;

  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * MCP_NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t mcp_clock_ns(void)
{
  uint64_t (*hook)(void) = __atomic_load_n(&clock_hook, __ATOMIC_ACQUIRE);

  return hook != NULL ? hook() : clock_read(CLOCK_MONOTONIC);
}

uint64_t mcp_clock_coarse_ns(void)
{
  uint64_t (*hook)(void) = __atomic_load_n(&clock_hook, __ATOMIC_ACQUIRE);

  return hook != NULL ? hook() : clock_read(CLOCK_MONOTONIC_COARSE);
}

void mcp_clock_test_set(uint64_t (*now_ns)(void)) { __atomic_store_n(&clock_hook, now_ns, __ATOMIC_RELEASE); }
