# lab: topology=pair wires=2 deadline=300
# A recovery whose GID is away while the peer is still reachable. The data runs on the
# second wire (NCCL_IB_HCA=rxe1, its GID chosen in 198.51.100.0/24), the out-of-band
# connection on the first (NCCL_SOCKET_IFNAME=eth0). Mid-stream the sending host's IPv4
# address leaves eth1 for 4 s, and its RoCE v2 GID leaves rxe1's table with it: the QPs
# lose their path, but the peer's RECOVER arrives at once over eth0, so the round's walk
# comes while the GID is missing. It must wait for it, saying so once (INFO "our GID ...
# is not in the GID table of rxe1 port 1 (yet); waiting for it"), with the device's
# lookups looking again every 100 ms, then finish with the index the kernel gives the GID
# this time; the stream must complete with every byte verified and no error through the
# ABI. (pair_link_flap removes the address of the only wire: there the out-of-band
# connection stalls with it, and the walk comes after the address is back.)
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
dir="$LAB_XCHG/gid_wait"
mkdir -p "$dir"
lab_wait_gid rxe1 "$(lab_ipv4_gid "$LAB_SELF_IP1")"
gid_before=$(lab_gid_index rxe1 "$LAB_SELF_IP1")

env NCCL_IB_HCA==rxe1 NCCL_IB_ADDR_RANGE=198.51.100.0/24 NCCL_SOCKET_IFNAME==eth0 \
  NCCL_IB_TIMEOUT=17 NCCL_IB_RETRY_CNT=3 MCPNET_RECOVERY_TIMEOUT=30 MCP_DRIVE_VERBOSE=1 \
  timeout 240 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role "$LAB_HOST" --xchg "$dir" \
  --msgs 500 --from a > /tmp/stream.out 2> /tmp/stream.err &
pid=$!
if [ "$LAB_HOST" = a ]; then
  for _ in $(seq 600); do [ -f "$dir/a.streaming" ] && [ -f "$dir/b.streaming" ] && break; sleep 0.1; done
  [ -f "$dir/a.streaming" ] && [ -f "$dir/b.streaming" ] || { cat /tmp/stream.out /tmp/stream.err; lab_fail "the stream never started"; }
  sleep 0.5
  lab_log "$LAB_SELF_IP1 off eth1 for 4 s"
  ip addr del "$LAB_SELF_IP1/24" dev eth1
  sleep 4
  ip addr add "$LAB_SELF_IP1/24" dev eth1
  lab_log "$LAB_SELF_IP1 back on eth1"
fi
rc=0
wait "$pid" || rc=$?
grep -E 'recover|GID|WARN' /tmp/stream.err | head -20 || true
tail -2 /tmp/stream.out
[ "$rc" = 0 ] || { tail -40 /tmp/stream.err; lab_fail "the stream failed (exit $rc)"; }
lab_grep '^stream: ok: ' /tmp/stream.out "every message arrived intact, no error through the ABI"
lab_grep 'recovered from .* in [0-9.]+ s \(round [0-9]+' /tmp/stream.err "this host logged its recovery"
if [ "$LAB_HOST" = a ]; then
  lab_grep "our GID .* is not in the GID table of rxe1 port 1 \(yet\); waiting for it" /tmp/stream.err \
    "the round found the GID missing and said it waits for it"
  [ "$(grep -c 'not in the GID table of' /tmp/stream.err)" -le 2 ] ||
    lab_fail "the wait was reported more than once per comm: $(grep -c 'not in the GID table of' /tmp/stream.err) lines"
  lab_log "the GID was at index $gid_before before, at $(lab_gid_index rxe1 "$LAB_SELF_IP1") after"
fi
lab_signal "done.$LAB_HOST"
lab_wait "done.$([ "$LAB_HOST" = a ] && echo b || echo a)" 60 > /dev/null
