/*
 * clock.h - mcpnet's one time base: CLOCK_MONOTONIC in nanoseconds. Every deadline,
 * timeout and rate limit reads it here, so that a unit test can drive all of them with
 * one injected clock instead of sleeping, and so no two modules disagree on what "now"
 * is (one used to read CLOCK_MONOTONIC_COARSE in ms, others CLOCK_MONOTONIC in ns).
 */
#ifndef MCPNET_CLOCK_H
#define MCPNET_CLOCK_H

#include <stdint.h>

#define MCP_NS_PER_MS 1000000ull
#define MCP_NS_PER_S 1000000000ull

/* Now, in ns of CLOCK_MONOTONIC (or of the injected clock). */
uint64_t mcp_clock_ns(void);
/*
 * The same time base read cheaply (CLOCK_MONOTONIC_COARSE: a vDSO read without the
 * hardware counter, up to one kernel tick behind mcp_clock_ns). For the data path,
 * where a few ms of lag on a 100 ms check does not matter.
 */
uint64_t mcp_clock_coarse_ns(void);
static inline uint64_t mcp_clock_ms(void) { return mcp_clock_ns() / MCP_NS_PER_MS; }
static inline uint64_t mcp_clock_coarse_ms(void) { return mcp_clock_coarse_ns() / MCP_NS_PER_MS; }

/*
 * The one test hook: every read above returns now_ns() from then on (NULL restores the
 * real clock). Unit tests only; set it before the code under test runs.
 */
void mcp_clock_test_set(uint64_t (*now_ns)(void));

#endif
