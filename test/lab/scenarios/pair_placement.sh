# lab: topology=pair deadline=300
# Placement between two hosts, checked on the wire. Both guests pin local rank 0 to rxe0
# with tc=104 in MCPNET_RANK_MAP, set NCCL_IB_FIFO_TC=184 (NCCL 2.30's class for its
# control messages) and move verified data; a capture of RoCE v2 (UDP 4791) on eth0 shows
# every packet of the connections, both directions, in one of the two classes: the data
# in the data's class 104 (IPv4 TOS 0x68), and what the receive side's QPs send (only
# clear-to-send entries and acknowledgements) in 184 (TOS 0xb8): some packets, and far
# fewer bytes than the data's. Then NCCL_IB_ADDR_FAMILY=AF_INET6 makes both ends take their
# IPv6 GIDs (2001:db8::1 and ::2): data verified again, and the capture shows RoCE over
# IPv6 between exactly those addresses. Different QP timers on the two hosts are named
# in one WARN per process; a GID index that does not exist fails init naming the table.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
x="$LAB_XCHG/placement"
mkdir -p "$x/v4" "$x/v6"

conf() { # conf NAME XCHG VAR=VALUE...: verified data both ways, plugin log in /tmp/NAME.err
  local name=$1 dir=$2
  shift 2
  if ! env "$@" MCP_DRIVE_VERBOSE=1 CONF_MAX_SIZE=$((1 << 20)) timeout 200 bin/mcp-conformance \
      --plugin plugin/libnccl-net-mcp.so pair --role "$LAB_HOST" --xchg "$dir" sizes \
      > "/tmp/$name.out" 2> "/tmp/$name.err"; then
    cat "/tmp/$name.out" "/tmp/$name.err" >&2
    lab_fail "$name: the conformance program failed"
  fi
  lab_grep '^ok +sizes ' "/tmp/$name.out" "$name: every size verified between the hosts"
}

capture_start() { # capture_start FILE FILTER...
  local file=$1
  shift
  tcpdump -Z root -i eth0 -nn -v -l "$@" > "$file" 2> "$file.err" &
  CAPTURE_PID=$!
  for _ in $(seq 100); do grep -q 'listening on' "$file.err" && return 0; sleep 0.1; done
  cat "$file.err" >&2
  lab_fail "tcpdump did not start"
}
capture_stop() {
  sleep 0.5
  kill "$CAPTURE_PID"
  wait "$CAPTURE_PID" 2>/dev/null || true
}

# --- IPv4, tc=104 from the rank map, the clear-to-send in NCCL_IB_FIFO_TC=184 ----------
capture_start /tmp/v4.cap udp dst port 4791
timeout=$([ "$LAB_HOST" = a ] && echo 18 || echo 17)
conf v4 "$x/v4" MCPNET_RANK_MAP='0=rxe0,tc=104' LOCAL_RANK=0 NCCL_IB_TIMEOUT=$timeout NCCL_IB_FIFO_TC=184
capture_stop
lab_grep "QP timers differ: NCCL_IB_TIMEOUT=$timeout NCCL_IB_RETRY_CNT=7 here, $((35 - timeout)) and 7 at " /tmp/v4.err \
  "different NCCL_IB_TIMEOUT on the two hosts is named"
[ "$(grep -c 'QP timers differ' /tmp/v4.err)" = 1 ] || lab_fail "the timer WARN must come once per process"
lab_grep "local rank 0 \(from LOCAL_RANK\): MCPNET_RANK_MAP entry '0=rxe0,tc=104'" /tmp/v4.err "the pinned placement is logged"
lab_grep "rxe0 port 1: GID [0-9]+ $LAB_SELF_IP \(RoCE v2" /tmp/v4.err "rxe0 talks from its IPv4 GID"
lab_grep "accepted rxe0 <- .* TC 184" /tmp/v4.err "the receive side's QPs take NCCL_IB_FIFO_TC"
total=$(grep -c 'proto UDP' /tmp/v4.cap || true)
marked=$(grep -c 'tos 0x68,.*proto UDP' /tmp/v4.cap || true)
fifo=$(grep -c 'tos 0xb8,.*proto UDP' /tmp/v4.cap || true)
bytes() { grep "tos $1,.*proto UDP" /tmp/v4.cap | sed -n 's/.*proto UDP ([0-9]*), length \([0-9]*\)).*/\1/p' |
  awk '{ n += $1 } END { print n + 0 }'; }
data_bytes=$(bytes 0x68)
fifo_bytes=$(bytes 0xb8)
lab_log "captured $total RoCE v2 packets: $marked with TOS 0x68 (tc 104, $data_bytes bytes), $fifo with TOS 0xb8 (NCCL_IB_FIFO_TC 184, $fifo_bytes bytes)"
[ "$total" -ge 20 ] || { head -20 /tmp/v4.cap; lab_fail "too few RoCE packets captured ($total)"; }
[ $((marked + fifo)) = "$total" ] ||
  { grep -v 'tos 0x68\|tos 0xb8' /tmp/v4.cap | grep 'proto UDP' | head; lab_fail "RoCE packets in neither tc=104 nor 184"; }
[ "$fifo" -gt 0 ] || lab_fail "no packet in NCCL_IB_FIFO_TC's class: the receive side's QPs ignored it"
# The data (every size to 1 MiB, both ways) is megabytes; what the receive side sends is
# 32-byte entries and acknowledgements: data in class 184 would be as much as the rest.
[ $((fifo_bytes * 10)) -lt "$data_bytes" ] ||
  lab_fail "$fifo_bytes bytes in NCCL_IB_FIFO_TC's class against $data_bytes in the data's: data went in the control class"
grep -q "$LAB_SELF_IP\.[0-9]* > $LAB_PEER_IP\.4791" /tmp/v4.cap || lab_fail "no RoCE packet from this host in the capture"
grep -q "$LAB_PEER_IP\.[0-9]* > $LAB_SELF_IP\.4791" /tmp/v4.cap || lab_fail "no RoCE packet from the peer in the capture"
lab_log "ok: every RoCE v2 packet both ways is in class 104 (data) or 184 (the receive side's: clear-to-send, acknowledgements)"

# --- IPv6 GIDs -----------------------------------------------------------------------
capture_start /tmp/v6.cap ip6 and udp dst port 4791
conf v6 "$x/v6" NCCL_IB_ADDR_FAMILY=AF_INET6
capture_stop
lab_grep "rxe0 port 1: GID [0-9]+ $LAB_SELF_IP6 \(RoCE v2" /tmp/v6.err "AF_INET6: rxe0 talks from its IPv6 GID"
grep -q "$LAB_SELF_IP6\.[0-9]* > $LAB_PEER_IP6\.4791" /tmp/v6.cap || { head /tmp/v6.cap; lab_fail "no RoCE/IPv6 packet from this host"; }
grep -q "$LAB_PEER_IP6\.[0-9]* > $LAB_SELF_IP6\.4791" /tmp/v6.cap || { head /tmp/v6.cap; lab_fail "no RoCE/IPv6 packet from the peer"; }
lab_log "ok: RoCE v2 over IPv6 between $LAB_SELF_IP6 and $LAB_PEER_IP6"

# --- a GID index this port does not have -------------------------------------------------
if env NCCL_IB_GID_INDEX=9 MCP_DRIVE_VERBOSE=1 timeout 60 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so \
    --expect-init-fail self props > /tmp/gid9.out 2> /tmp/gid9.err; then
  lab_grep "rxe0 port 1: GID index 9 is empty or not described to this namespace \(set by NCCL_IB_GID_INDEX\)\. The port's GIDs: .*$LAB_SELF_IP v2 eth0" \
    /tmp/gid9.err "a bad GID index fails init, naming the index and the table"
else
  cat /tmp/gid9.out /tmp/gid9.err >&2
  lab_fail "NCCL_IB_GID_INDEX=9 did not fail init"
fi
