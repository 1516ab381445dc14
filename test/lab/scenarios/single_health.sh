# lab: topology=single deadline=300
# Issue 5's diagnosability in one guest (rxe0 on lo), through the exported tables:
# the watchdog reports each stalled comm once per stall (MCPNET_WATCHDOG_SEC=1) and
# never fails it; a failed work completion explains itself with the port's state, its
# error counters since connect and a likely cause; a fork with registered memory in use
# corrupts nothing, with the kernel's copy-on-fork (Linux 5.13+) and with libibverbs'
# MADV_DONTFORK protection (RDMAV_FORK_SAFE=1 RDMAV_USE_MADVISE=1, what older kernels get).
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
conf() { timeout 120 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so "$@"; }

MCPNET_WATCHDOG_SEC=1 conf self watchdog diag
MCPNET_WATCHDOG_SEC=1 conf --abi 8 self watchdog

MCP_DRIVE_VERBOSE=1 conf self fork 2> /tmp/fork.err
grep -i 'fork' /tmp/fork.err || true
lab_grep 'fork safety: the kernel copies registered pages into a forked child' /tmp/fork.err \
  "init says once which fork case applies (this kernel copies pinned pages)"
RDMAV_FORK_SAFE=1 RDMAV_USE_MADVISE=1 conf self fork
