# lab: topology=single deadline=420
# The conformance suite in one guest (rxe0 on lo): the plugin driven through its
# exported tables as NCCL's proxy does, connecting to itself. Every size 0..64 MiB
# verified byte for byte with nothing written past the sent size, grouped receives,
# the optional-completion hint, the loopback flush, 256 connections at once, closing
# with requests in flight, threads with concurrent registration, no allocation on the
# data path, properties, 4 QPs per connection, the v8/v9/v10 tables, and a clean
# dlclose with a second full life after it.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
conf() { timeout 300 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so "$@"; }

CONF_EXPECT_NO_DMABUF=1 conf self props sizes grouped optional many inflight-close noalloc threads
MCPNET_FORCE_FLUSH=1 conf self flush
NCCL_IB_QPS_PER_CONNECTION=4 conf self qps sizes grouped
for abi in 8 9 10; do
  CONF_MAX_SIZE=$((16 << 20)) conf --abi "$abi" self props sizes grouped optional
done
conf self reload
conf --abi 8 self reload
