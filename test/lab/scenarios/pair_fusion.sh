# lab: topology=pair wires=2 deadline=600
# NIC fusion between two hosts over two rails: each guest has rxe0 on eth0 (wire 0) and
# rxe1 on eth1 (wire 1, lab --wires 2), listed by NCCL_IB_HCA==rxe0,rxe1 as physical
# devices 0 and 1, and streams over the virtual device makeVDevice makes of them
# (bin/mcp-stream --fuse 0,1), every byte checked. First the second wire itself is
# checked (ping and ibv_rc_pingpong over eth1/rxe1), so a failure below is mcpnet's. Then:
#   - both size lists of the stream (4 KiB..1 MiB, and 2 KiB..64 KiB with --small), both
#     ways at once, with each member sending a share of the packets (rxe hw counters): the
#     chunks are striped over both rails and each lands by the right member's rkey;
#   - wire 1 (eth1 only) down for 5 s on the sending host, then on the receiving host,
#     during a stream from a: it completes, every byte verified, rxe0 stays ACTIVE, and
#     the log names rxe1;
#   - failover (NCCL_IB_RESILIENCY_PORT_FAILOVER, on by default): a's eth1 down for 13 s,
#     past MCPNET_RECOVERY_TIMEOUT=6, during a paced stream from a: it completes over rxe0,
#     every byte verified, the log says it went on without rxe1; once eth1 is back, a round
#     takes rxe1 again (port recovery) and rxe1 carries packets of the same stream again
#     at both hosts;
#   - the same outage with NCCL_IB_RESILIENCY_PORT_FAILOVER=0: the stream fails through the
#     ABI on a before the link is back, with a message naming rxe1.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
peer=$([ "$LAB_HOST" = a ] && echo b || echo a)
x="$LAB_XCHG/fusion"

lab_check_second_wire setup
export NCCL_IB_HCA='=rxe0,rxe1'
timeout 120 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so self props > /tmp/props.out 2> /tmp/props.err ||
  { cat /tmp/props.out /tmp/props.err; lab_fail "the conformance program could not list the devices"; }
lab_grep '^  0: rxe0 ' /tmp/props.out "physical device 0 is rxe0 (eth0)"
lab_grep '^  1: rxe1 ' /tmp/props.out "physical device 1 is rxe1 (eth1)"

sent() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts"; }
sent rxe1 > /dev/null || lab_fail "rxe1 has no sent_pkts counter"

# stream NAME RTO DOWN_HOST DOWN_SECONDS ARGS...: this host's end of a fused stream (QP
# timers short enough to fail during an outage, MCPNET_RECOVERY_TIMEOUT=RTO); on
# DOWN_HOST (or nowhere: -) eth1 goes down for DOWN_SECONDS once both ends stream. Leaves
# the exit status in /tmp/NAME.rc, the output in /tmp/NAME.out, the plugin log in
# /tmp/NAME.err, and on DOWN_HOST the times the link went down and came back.
STREAM_ENV=
stream() {
  local name=$1 rto=$2 down=$3 secs=$4 dir="$x/$1" pid rc=0
  shift 4
  mkdir -p "$dir"
  env NCCL_IB_TIMEOUT=17 NCCL_IB_RETRY_CNT=3 MCPNET_RECOVERY_TIMEOUT="$rto" MCP_DRIVE_VERBOSE=1 $STREAM_ENV \
    timeout 400 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role "$LAB_HOST" --xchg "$dir" --fuse 0,1 \
    "$@" > "/tmp/$name.out" 2> "/tmp/$name.err" &
  pid=$!
  if [ "$LAB_HOST" = "$down" ]; then
    for _ in $(seq 1200); do [ -f "$dir/a.streaming" ] && [ -f "$dir/b.streaming" ] && break; sleep 0.1; done
    [ -f "$dir/a.streaming" ] && [ -f "$dir/b.streaming" ] || { cat "/tmp/$name.out" "/tmp/$name.err"; lab_fail "$name: the stream never started"; }
    sleep 0.5
    lab_link_down eth1
    date +%s.%N > "/tmp/$name.down"
    kill -0 $pid 2> /dev/null || lab_fail "$name: the stream had ended before eth1 went down"
    lab_log "$name: eth1 is down for $secs s"
    sleep "$secs"
    grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state || lab_fail "$name: rxe0 went down with eth1"
    date +%s.%N > "/tmp/$name.up"
    lab_link_up eth1
    sent rxe1 > "/tmp/$name.rxe1up"
    touch "$dir/eth1.up"
    lab_log "$name: eth1 up again"
  elif [ "$down" != - ]; then
    # The other host's rxe1 counter when the link came back (the cue in DIR).
    (for _ in $(seq 4000); do [ -f "$dir/eth1.up" ] && break; sleep 0.1; done; sent rxe1 > "/tmp/$name.rxe1up") &
  fi
  wait "$pid" || rc=$?
  echo "$rc" > "/tmp/$name.rc"
  lab_log "$name: exited $rc: $(tail -1 "/tmp/$name.out")"
}
expect_ok() {
  [ "$(cat "/tmp/$1.rc")" = 0 ] || { cat "/tmp/$1.out"; tail -40 "/tmp/$1.err"; lab_fail "$1: the stream failed"; }
  lab_grep '^stream: ok: ' "/tmp/$1.out" "$1: every message arrived intact, no error through the ABI"
}
# Both hosts finish a part before either starts the next (the link may still be settling).
barrier() {
  lab_signal "$1.$LAB_HOST"
  lab_wait "$1.$peer" 300 > /dev/null
}

# --- every size of both lists, both ways, striped over both rails ------------------------
for list in large small; do
  s0=$(sent rxe0) s1=$(sent rxe1)
  if [ $list = large ]; then stream $list 30 - 0 --msgs 120; else stream $list 30 - 0 --msgs 300 --small; fi
  expect_ok $list
  d0=$(($(sent rxe0) - s0)) d1=$(($(sent rxe1) - s1))
  lab_log "$list: packets sent: rxe0 $d0, rxe1 $d1"
  share=$([ $list = large ] && echo 5 || echo 20) # see single_fusion.sh: small sizes alias with 2 QPs
  [ $((d0 * share)) -ge $((d0 + d1)) ] && [ $((d1 * share)) -ge $((d0 + d1)) ] ||
    lab_fail "$list: the fused stream was not striped over both rails (rxe0 sent $d0 packets, rxe1 $d1)"
  barrier $list
done

# --- one rail flaps: the sending host's, then the receiving host's ------------------------
for who in a b; do
  stream flap_$who 30 $who 5 --msgs 400 --from a
  expect_ok flap_$who
  if [ "$LAB_HOST" = $who ]; then
    grep -E 'recover|degrad|member' "/tmp/flap_$who.err" > "/tmp/flap_$who.events" || true
    lab_grep 'rxe1' "/tmp/flap_$who.events" "flap_$who: the log names the member whose link went down"
  fi
  lab_wait_gid rxe1 "$(lab_ipv4_gid "$LAB_SELF_IP1")" 60
  barrier flap_$who
done

# --- failover: a's rail 1 down past MCPNET_RECOVERY_TIMEOUT, then back ------------------
# Paced (a send every 10 ms: 2500 take 25 s at least) so the stream outlasts the outage
# and goes on after the link is back.
stream failover 6 a 13 --msgs 2500 --small --pace 10 --from a
expect_ok failover
wait # the watcher of the other host's counter
if [ "$LAB_HOST" = a ]; then
  lab_grep 'without rxe1 port 1 \(port down\)' /tmp/failover.err "failover: the log says the stream went on without rxe1"
  lab_grep 'rxe1 port 1 is active again \(port event\); taking the member back' /tmp/failover.err \
    "failover: the port's return started a round that takes rxe1 back"
  lab_log "failover: $(grep -m1 'without rxe1' /tmp/failover.err | sed 's/.*recovered/recovered/')"
fi
[ -f /tmp/failover.rxe1up ] || lab_fail "failover: the cue of eth1 coming back never arrived"
after=$(($(sent rxe1) - $(cat /tmp/failover.rxe1up)))
lab_log "failover: rxe1 sent $after packets of the same stream after eth1 came back"
[ "$after" -ge 20 ] || lab_fail "failover: rxe1 carried nothing of the stream after its link came back ($after packets)"
lab_wait_gid rxe1 "$(lab_ipv4_gid "$LAB_SELF_IP1")" 60
barrier failover

# --- the same outage without failover: the stream fails before the link is back ----------
STREAM_ENV=NCCL_IB_RESILIENCY_PORT_FAILOVER=0
stream outage 6 a 13 --msgs 100000 --from a
STREAM_ENV=
[ "$(cat /tmp/outage.rc)" != 0 ] || lab_fail "outage: the stream survived a 13 s outage of rxe1 with MCPNET_RECOVERY_TIMEOUT=6 and failover off"
lab_grep 'stream: FAIL: (test of a (send|receive)|isend|irecv) returned an error' /tmp/outage.out "outage: the failure came through the ABI"
if [ "$LAB_HOST" = a ]; then
  grep -E 'MCPNET_RECOVERY_TIMEOUT=6' /tmp/outage.err | grep -v 'TIMEOUT=6 (environment)' > /tmp/outage.events || true
  lab_grep 'rxe1' /tmp/outage.events "outage: the recovery timeout's error names the member rxe1"
  lab_log "outage: $(head -1 /tmp/outage.events)"
  spent=$(sed -n 's/^stream: FAIL: .* at \([0-9.]*\)$/\1/p' /tmp/outage.out | head -1)
  took=$(awk -v a="$(cat /tmp/outage.down)" -v b="$spent" 'BEGIN { printf "%.1f", b - a }')
  back=$(awk -v a="$(cat /tmp/outage.down)" -v b="$(cat /tmp/outage.up)" 'BEGIN { printf "%.1f", b - a }')
  lab_log "outage: the stream failed $took s after eth1 went down (it came back after $back s)"
  awk -v t="$took" -v b="$back" 'BEGIN { exit !(t < b) }' ||
    { grep -Ev '^\[INFO\] NET/MCP (MCPNET|NCCL)_' /tmp/outage.err | tail -40; lab_fail "outage: the error came only after the link was back ($took s, back at $back s): something waited for the link"; }
fi
barrier finished
lab_log "pair fusion checks passed"
