# lab: topology=pair deadline=420
# Transparent recovery from a transient link loss. A verified stream runs from host a to
# host b (bin/mcp-stream: 8 receives posted ahead, sizes 4 KiB..1 MiB, every byte
# checked) with QP timers short enough that the QPs fail during the outage
# (NCCL_IB_TIMEOUT=17, NCCL_IB_RETRY_CNT=3: 0.54 s, 4 tries, about 2 s; at 15 (134 ms)
# rxe between two emulated guests on a loaded host retransmits thousands of times and
# ends in "remote invalid request" NAKs a recovery cannot survive: 3 runs in 8 failed so
# beside other guests, as pair_proxy_replay found). Once data flows, one host's eth0 goes down
# for 5 s and comes back: first the sending host's, then the receiving host's. Each
# stream must complete with every byte verified and no error through the ABI, and
# both hosts must log a recovery. Then a 13 s outage, longer than MCPNET_RECOVERY_TIMEOUT=6:
# the stream must fail, through the ABI, with the cause in the message, on the host that
# lost its link within 6 + 4 s of the link going down and before it comes back (nothing
# on the recovery path may wait for the link: NCCL's proxy thread serves every comm from
# one loop); its peer then hears that the process exited. During that outage mcpnet-top
# --once runs on both hosts: 2 s after the link went down on the host that lost it, where
# it names the send comm to lab-b, its peer process and why it is stuck (recovering after
# the completion error, or writes the peer never acknowledged; in a guest so loaded that
# `ip link set down` returned seconds after the port went down, the round may already
# have given up, and it names the failure with its cause); 4 s after on the other host,
# the receive comm from lab-a and what it waits for (data, 2 s without any: --stall 2);
# both exit 1.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
x="$LAB_XCHG/flap"

# stream NAME DOWN_HOST DOWN_SECONDS RECOVERY_TIMEOUT MSGS [addr]: runs the stream, and on
# DOWN_HOST takes eth0 down for DOWN_SECONDS once both ends stream (with addr: removes
# the host's IPv4 address from eth0 instead, and puts it back). Leaves the stream's
# exit status in /tmp/NAME.rc, its output in /tmp/NAME.out and the plugin log in /tmp/NAME.err;
# DOWN_HOST also leaves the times just after the link went down and just before it came
# back in /tmp/NAME.down and /tmp/NAME.up (ip itself can take seconds in a loaded guest:
# its start and end are logged, and the bound counts from its end).
# With look=top (7th argument) both hosts run mcpnet-top --once into the outage, DOWN_HOST
# 2 s after its link went down, the other host 4 s after (/tmp/NAME.top, its exit status
# in /tmp/NAME.top.rc).
look() {
  local rc=0
  bin/mcpnet-top --once --stall 2 > "/tmp/$1.top" 2>&1 || rc=$?
  echo "$rc" > "/tmp/$1.top.rc"
}
stream() {
  local name=$1 down=$2 secs=$3 rto=$4 msgs=$5 how=${6:-link} top=${7:-} dir="$x/$1" pid rc=0
  mkdir -p "$dir"
  env NCCL_IB_TIMEOUT=17 NCCL_IB_RETRY_CNT=3 MCPNET_RECOVERY_TIMEOUT="$rto" MCP_DRIVE_VERBOSE=1 \
    timeout 300 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role "$LAB_HOST" --xchg "$dir" \
    --msgs "$msgs" --from a > "/tmp/$name.out" 2> "/tmp/$name.err" &
  pid=$!
  if [ -n "$top" ] && [ "$LAB_HOST" != "$down" ]; then
    lab_wait "$name.down" 120 > /dev/null
    sleep 4
    look "$name"
  fi
  if [ "$LAB_HOST" = "$down" ]; then
    for _ in $(seq 600); do [ -f "$dir/a.streaming" ] && [ -f "$dir/b.streaming" ] && break; sleep 0.1; done
    [ -f "$dir/a.streaming" ] && [ -f "$dir/b.streaming" ] || { cat "/tmp/$name.out" "/tmp/$name.err"; lab_fail "$name: the stream never started"; }
    sleep 0.5
    if [ "$how" = addr ]; then
      lab_log "$name: $LAB_SELF_IP off eth0 for $secs s"
      ip addr del "$LAB_SELF_IP/24" dev eth0
    else
      lab_log "$name: eth0 down for $secs s"
      lab_link_down
    fi
    date +%s.%N > "/tmp/$name.down"
    lab_log "$name: eth0 is down, or without the address"
    if [ -n "$top" ]; then
      lab_signal "$name.down"
      sleep 2
      look "$name"
      sleep $((secs - 2 - 1))
    else
      sleep "$secs"
    fi
    date +%s.%N > "/tmp/$name.up"
    if [ "$how" = addr ]; then
      ip addr add "$LAB_SELF_IP/24" dev eth0
    else
      lab_link_up
    fi
    lab_log "$name: eth0 up again, or with the address"
    lab_signal "$name.up"
  fi
  wait "$pid" || rc=$?
  echo "$rc" > "/tmp/$name.rc"
  date +%s.%N > "/tmp/$name.end"
  grep -E 'recover|WARN' "/tmp/$name.err" | head -20 || true
  tail -2 "/tmp/$name.out"
}

# --- the sending host's link flaps -----------------------------------------------------
stream flap_sender a 5 30 500
[ "$(cat /tmp/flap_sender.rc)" = 0 ] || { cat /tmp/flap_sender.out; tail -40 /tmp/flap_sender.err; lab_fail "flap_sender: the stream failed"; }
lab_grep '^stream: ok: ' /tmp/flap_sender.out "flap_sender: every message arrived intact, no error through the ABI"
lab_grep 'recovered from .* in [0-9.]+ s \(round [0-9]+' /tmp/flap_sender.err "flap_sender: this host logged its recovery"

# --- the receiving host's link flaps ---------------------------------------------------
stream flap_receiver b 5 30 500
[ "$(cat /tmp/flap_receiver.rc)" = 0 ] || { cat /tmp/flap_receiver.out; tail -40 /tmp/flap_receiver.err; lab_fail "flap_receiver: the stream failed"; }
lab_grep '^stream: ok: ' /tmp/flap_receiver.out "flap_receiver: every message arrived intact, no error through the ABI"
lab_grep 'recovered from .* in [0-9.]+ s \(round [0-9]+' /tmp/flap_receiver.err "flap_receiver: this host logged its recovery"

# --- the sending host's address goes away for 4 s and comes back -------------------------
# Its RoCE v2 GID leaves the port's table with it: a GID change event, whose lookup
# (the device's, shared by its comms) starts a round. The out-of-band connection stalls
# meanwhile; when the round's walk comes before the address is back it finds no GID and
# waits for the device's lookups to find it again (logged below when it happens). The
# stream must go on with the index the kernel gives the GID this time.
stream addr_gone a 4 30 500 addr
[ "$(cat /tmp/addr_gone.rc)" = 0 ] || { cat /tmp/addr_gone.out; tail -40 /tmp/addr_gone.err; lab_fail "addr_gone: the stream failed"; }
lab_grep '^stream: ok: ' /tmp/addr_gone.out "addr_gone: every message arrived intact, no error through the ABI"
lab_grep 'recovered from .* in [0-9.]+ s \(round [0-9]+' /tmp/addr_gone.err "addr_gone: this host logged its recovery"
if grep -q 'not in the GID table of' /tmp/addr_gone.err; then
  lab_log "addr_gone: a round found no GID and waited for it"
fi

# --- an outage longer than the recovery timeout ---------------------------------------------
stream outage a 13 6 100000 link top
cat /tmp/outage.top
[ "$(cat /tmp/outage.top.rc)" = 1 ] || lab_fail "outage: mcpnet-top exited $(cat /tmp/outage.top.rc), expected 1 (something waits)"
if [ "$LAB_HOST" = a ]; then
  lab_grep "'s send comm to lab-b pid [0-9]+ \(192\.0\.2\.2\) on rxe0:1 (has been recovering for [0-9]+ s after: .+|has waited [0-9]+ s for an acknowledgement .+|failed [0-9]+ s ago: send to lab-b .*recovery from \".+\" failed after [0-9.]+ s)" \
    /tmp/outage.top "outage: mcpnet-top on a names the send comm, its peer and why it is stuck"
else
  lab_grep "'s recv comm from lab-a pid [0-9]+ \(192\.0\.2\.1\) on rxe0:1 (has been recovering for [0-9]+ s after: .+|has waited [0-9]+ s for .+)" \
    /tmp/outage.top "outage: mcpnet-top on b names the recv comm, its peer and what it waits for"
fi
if [ "$(cat /tmp/outage.rc)" = 0 ]; then
  lab_fail "outage: the stream survived a 13 s outage with MCPNET_RECOVERY_TIMEOUT=6"
fi
lab_grep 'stream: FAIL: (test of a (send|receive)|isend|irecv) returned an error' /tmp/outage.out "outage: the failure came through the ABI"
if [ "$LAB_HOST" = a ]; then
  lab_grep 'recovery from ".*" failed after [0-9.]+ s \(round [0-9]+, MCPNET_RECOVERY_TIMEOUT=6\): the peer never answered' \
    /tmp/outage.err "outage: the error names the cause, the time spent, the timeout and what was missing"
  spent=$(sed -n 's/^stream: FAIL: .* at \([0-9.]*\)$/\1/p' /tmp/outage.out | head -1)
  took=$(awk -v a="$(cat /tmp/outage.down)" -v b="$spent" 'BEGIN { printf "%.1f", b - a }')
  back=$(awk -v a="$(cat /tmp/outage.down)" -v b="$(cat /tmp/outage.up)" 'BEGIN { printf "%.1f", b - a }')
  lab_log "outage: time to error: the stream failed $took s after the link went down (it came back after $back s)"
  # The bound holds in every run: the round's deadline, plus detection and a loaded guest.
  awk -v t="$took" 'BEGIN { exit !(t <= 6 + 4) }' ||
    lab_fail "outage: the error took $took s after the link went down (bound: MCPNET_RECOVERY_TIMEOUT=6 s + 4 s)"
  awk -v t="$took" -v b="$back" 'BEGIN { exit !(t < b) }' ||
    lab_fail "outage: the error came only after the link was back ($took s, link back at $back s): something waited for the link"
else
  # b's link stayed up and it was only receiving: it hears of the outage from a, whose
  # process gives up and exits, or from its own recovery when it was writing.
  lab_grep 'closed the out-of-band connection: the peer process exited|recovery from ".*" failed after' /tmp/outage.err \
    "outage: the receiving host's error says why"
fi
lab_signal "done.$LAB_HOST"
lab_wait "done.$([ "$LAB_HOST" = a ] && echo b || echo a)" 60 > /dev/null
