# lab: topology=pair deadline=240
# NCCL's abort path: host b powers off while host a has receives posted toward it;
# closing a's comms still returns within 1 s, and nothing hangs.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
x="$LAB_XCHG/gone"
mkdir -p "$x"
if [ "$LAB_HOST" = b ]; then
  timeout 200 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so pair --role b --xchg "$x" peergone &
  for _ in $(seq 600); do [ -f "$x/b.ready" ] && break; sleep 0.1; done
  [ -f "$x/b.ready" ] || lab_fail "the conformance process never got ready"
  lab_log "powering host b off with its comms open"
  lab_poweroff
fi
timeout 200 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so pair --role a --xchg "$x" peergone | tee /tmp/gone.out
lab_grep '^ok +peergone' /tmp/gone.out "close returned promptly with the peer host gone"
