/*
 * bench_series.c - what each series is: its names in the table, the JSON and the plot,
 * the perftest tool that measures it (none for mcpnet's own), and whether it is a
 * bandwidth or a latency. Every stage of the run reads this table (the sweep, one
 * point, perftest, the outputs), so it sits in a file of its own that calls nothing:
 * the stages then call one another in one direction only (run -> point -> perftest).
 */
#include "bench.h"

static const struct bench_series_info series_infos[BENCH_KIND_COUNT] = {
  [BENCH_MCP_BW] = {"mcpnet-bw", "mcp-bw", NULL, 1},
  [BENCH_MCP_LAT] = {"mcpnet-lat", "mcp-lat", NULL, 0},
  [BENCH_WRITE_BW] = {"ib_write_bw", "wr-bw", "ib_write_bw", 1},
  [BENCH_WRITE_LAT] = {"ib_write_lat", "wr-lat", "ib_write_lat", 0},
  [BENCH_SEND_BW] = {"ib_send_bw", "sd-bw", "ib_send_bw", 1},
  [BENCH_SEND_LAT] = {"ib_send_lat", "sd-lat", "ib_send_lat", 0},
};

const struct bench_series_info *bench_series_lookup(enum bench_kind k) { return &series_infos[k]; }
