# lab: topology=pair deadline=420
# The conformance suite between two hosts: each guest listens, connects to the other
# and both move data both ways at once: every size 0..64 MiB verified byte for byte,
# grouped receives, the optional-completion hint, 4 QPs per connection, many
# connections, and the sockets those use: a few, not one per comm.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
conf() { timeout 300 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so "$@"; }
x="$LAB_XCHG/conf"
mkdir -p "$x/1" "$x/2" "$x/3" "$x/4"

conf pair --role "$LAB_HOST" --xchg "$x/1" sizes grouped optional
CONF_CONNS=64 conf pair --role "$LAB_HOST" --xchg "$x/2" many
NCCL_IB_QPS_PER_CONNECTION=4 CONF_MAX_SIZE=$((8 << 20)) conf pair --role "$LAB_HOST" --xchg "$x/3" sizes
# 200 comms between the two processes share one out-of-band connection per process pair.
CONF_CONNS=100 conf pair --role "$LAB_HOST" --xchg "$x/4" sockets
