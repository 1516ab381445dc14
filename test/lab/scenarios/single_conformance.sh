# lab: topology=single deadline=720
# The conformance suite in one guest (rxe0 on lo): the plugin driven through its
# exported tables as NCCL's proxy does, connecting to itself. Every size 0..64 MiB
# verified byte for byte with nothing written past the sent size, grouped receives,
# the optional-completion hint, the loopback flush, 256 connections at once, closing
# with requests in flight, threads with concurrent registration, no allocation on the
# data path, properties, 4 QPs per connection, the v8/v9/v10 tables, the v12 table of
# NCCL 2.30 with the rail and plane NCCL_IB_HCA's name:port:rail:plane gives (and the rank
# map's rail= over it), and a clean dlclose with a second full life after it.
# NCCL-compatible defaults and bounds: 32 QPs per connection carry data, 200 are capped
# with a WARN, and NCCL_IB_TIMEOUT defaults to 18 under a v8 table (NCCL 2.20-2.22) and
# 20 under v11. makeVDevice through the v9, v10, v11 and v12 tables (none in v8): the
# index after the physical ones, its properties showing the members (v12: and its rail
# and plane), and (v11, v12) the index kept across finalize and init.
# NCCL profiler events (v10, v11): every one started is stopped.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
conf() { timeout 300 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so "$@"; }

CONF_EXPECT_NO_DMABUF=1 conf self props sizes grouped optional many inflight-close threads
LD_PRELOAD=$MCPNET_BUILD_DIR/lib/libmcp-alloc-count.so conf self noalloc
MCPNET_FORCE_FLUSH=1 conf self flush
# NCCL profiler events through the v11 and v10 tables, with NCCL's parent handles:
# started for every work request, each stopped (flushes included).
for abi in 10 11; do
  MCPNET_FORCE_FLUSH=1 conf --abi "$abi" self profiler > /tmp/prof$abi.out
  cat /tmp/prof$abi.out
  lab_grep '^ok   profiler' /tmp/prof$abi.out "v$abi: every profiler event started was stopped"
done
NCCL_IB_QPS_PER_CONNECTION=4 conf self qps sizes grouped
for abi in 8 9 10; do
  CONF_MAX_SIZE=$((16 << 20)) conf --abi "$abi" self props sizes grouped optional
done
# NCCL 2.30's v12 table, rail 3 and plane 2 from NCCL_IB_HCA as a 2.30 user writes it: the
# properties carry them (a virtual device of one device too), and data moves.
NCCL_IB_HCA=rxe0:1:3:2 CONF_EXPECT_RAIL=3 CONF_EXPECT_PLANE=2 MCP_DRIVE_VERBOSE=1 CONF_MAX_SIZE=$((16 << 20)) \
  conf --abi 12 self props vdevice sizes grouped optional 2> /tmp/v12.err
lab_grep 'NCCL took the ncclNetPlugin_v12 table' /tmp/v12.err "the init INFO line names the v12 table"
lab_grep 'rxe0 port 1: rail 3, plane 2 \(-1: none; from NCCL_IB_HCA\)' /tmp/v12.err "the rail and plane are logged"
# A pinned rank's rail= wins over NCCL_IB_HCA's; the plane it does not name comes from
# NCCL_IB_HCA (rxe0::7:1: any port, rail 7, plane 1).
MCPNET_LOCAL_RANK=0 MCPNET_RANK_MAP='0=rxe0,rail=5' NCCL_IB_HCA=rxe0::7:1 CONF_EXPECT_RAIL=5 CONF_EXPECT_PLANE=1 \
  conf --abi 12 self props
conf self mrcache stray sockets
for abi in 8 9 10 11; do
  conf --abi "$abi" self vdevice
done
# makeVDevice's refusals are said (docs/messages.md 2.5).
conf self vdevice 2> /tmp/vdev.err
lab_grep 'makeVDevice: device 0 \(rxe0\) is named twice' /tmp/vdev.err "a refused makeVDevice says why"
# A peer that never answers: SYNs into a dummy netdev vanish. No connect call waits for
# the peer (each returns within 500 ms, well before a SYN's first retransmission at 1 s)
# and the connect fails at MCPNET_CONNECT_TIMEOUT.
ip link add mcpdrop type dummy && ip addr add 198.51.100.1/24 dev mcpdrop && ip link set mcpdrop up
MCPNET_CONNECT_TIMEOUT=3 CONF_UNREACHABLE=198.51.100.2:9 conf self unreachable 2> /tmp/unreach.err
cat /tmp/unreach.err
lab_grep '198\.51\.100\.2:9' /tmp/unreach.err "the connect failure names the address and port"
conf self reload
conf --abi 8 self reload

# No usable device: init fails after one WARN that says what was found and why.
NCCL_IB_HCA=mlx5 conf --expect-init-fail self 2> /tmp/nodev.err
lab_grep 'rxe0: not selected by NCCL_IB_HCA=mlx5' /tmp/nodev.err "the WARN names rxe0 and why it was excluded"
lab_grep 'NCCL_NET=MCP' /tmp/nodev.err "the WARN says NCCL would fall back"
# No rdma-core at all: the plugin still loads; init fails with a clear WARN.
unshare -m bash -c "mount --bind /dev/null /usr/lib/x86_64-linux-gnu/libibverbs.so.1 &&
  timeout 60 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so --expect-init-fail self" 2> /tmp/noverbs.err
lab_grep 'libibverbs.so.1 cannot be loaded' /tmp/noverbs.err "init explains the missing libibverbs"

# NCCL runs more than 16 QPs per connection (its bound is 128): so does mcpnet.
NCCL_IB_QPS_PER_CONNECTION=32 CONF_MAX_SIZE=$((16 << 20)) conf self qps sizes
# Beyond what mcpnet can run: capped with one WARN naming the cap and why, data still moves.
NCCL_IB_QPS_PER_CONNECTION=200 MCP_DRIVE_VERBOSE=1 CONF_MAX_SIZE=$((4 << 20)) conf self sizes 2> /tmp/qps200.err
lab_grep "NCCL_IB_QPS_PER_CONNECTION=200: rxe0 uses [0-9]+ QPs per connection: ([0-9]+ QPs per connection is mcpnet's bound|[0-9]+ QPs per connection fill this device's completion queue)" \
  /tmp/qps200.err "200 QPs per connection are capped with a WARN saying why"
# NCCL_IB_TIMEOUT's default follows the NCCL the table tells: 18 for v8, 20 for v11.
MCP_DRIVE_VERBOSE=1 conf --abi 8 self props 2> /tmp/abi8.err
lab_grep 'NCCL_IB_TIMEOUT is the default for this NCCL: 18, as NCCL took the v8 table' /tmp/abi8.err "v8 (NCCL 2.20-2.22): timeout 18"
lab_grep 'NCCL took the ncclNetPlugin_v8 table' /tmp/abi8.err "the init INFO line names the v8 table"
MCP_DRIVE_VERBOSE=1 conf self props 2> /tmp/abi11.err
lab_grep 'NCCL_IB_TIMEOUT is the default for this NCCL: 20, as NCCL took the v11 table' /tmp/abi11.err "v11 (NCCL 2.28): timeout 20"
