# lab: topology=single deadline=600
# NIC fusion on one guest: rxe0 on lo and rxe1 on a veth (lab_loop_rxe; a second rxe on
# lo is refused), both RoCE, listed by NCCL_IB_HCA==rxe0,rxe1 as physical devices 0 and 1.
# Two processes stream to each other over the virtual device makeVDevice makes of them
# (bin/mcp-stream --fuse 0,1, which NCCL's NCCL_NET_MERGE_LEVEL would ask for), every
# byte checked:
#   - both size lists of the stream (4 KiB..1 MiB, and 2 KiB..64 KiB with --small), with
#     each member carrying a share of the packets (rxe hw counters), so the chunks are
#     striped over both and each member's rkey lands them in the right memory;
#   - one member's link (f1, under rxe1) down for 5 s during the stream: the stream
#     completes, every byte verified, and the log names rxe1;
#   - f1 down for 13 s, past MCPNET_RECOVERY_TIMEOUT=6, during a paced stream: both ends
#     lose the same member at once; failover (on by default) takes both off rxe1, the
#     stream completes over rxe0 with every byte verified, and the log says it went on
#     without rxe1 (pair_fusion.sh checks the member's return, and the failure with
#     NCCL_IB_RESILIENCY_PORT_FAILOVER=0).
# Peers that fused different numbers of devices are not tried here: rxe hands a received
# packet to the rxe of the netdev it arrived on, and a packet from rxe1 to rxe0's address
# (or back) arrives on lo or f1 as the kernel routes it, not on the other device, so QPs
# of two different rxe devices in one guest cannot talk; the unit tests cover it.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"

lab_loop_rxe rxe1 f1 10.21.0.1
export NCCL_IB_HCA='=rxe0,rxe1'
timeout 120 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so self props > /tmp/props.out 2> /tmp/props.err ||
  { cat /tmp/props.out /tmp/props.err; lab_fail "the conformance program could not list the devices"; }
lab_grep '^  0: rxe0 ' /tmp/props.out "physical device 0 is rxe0"
lab_grep '^  1: rxe1 ' /tmp/props.out "physical device 1 is rxe1"

sent() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts"; }
sent rxe0 > /dev/null || lab_fail "rxe0 has no sent_pkts counter"

# stream NAME RTO FUSE_A FUSE_B ARGS...: processes a and b stream to each other here
# (FUSE_x: the --fuse list of that role, or - for physical device 0 alone), with QP timers
# short enough to fail during an outage and MCPNET_RECOVERY_TIMEOUT=RTO. Returns at once;
# stream_wait NAME leaves each role's exit status in /tmp/NAME.ROLE.rc.
stream() {
  local name=$1 rto=$2 fa=$3 fb=$4 r fuse
  shift 4
  mkdir -p "/tmp/x.$name"
  for r in a b; do
    fuse=$fa
    [ $r = b ] && fuse=$fb
    fuse=$([ "$fuse" = - ] || echo "--fuse $fuse")
    # shellcheck disable=SC2086
    env NCCL_IB_TIMEOUT=15 NCCL_IB_RETRY_CNT=3 MCPNET_RECOVERY_TIMEOUT="$rto" MCP_DRIVE_VERBOSE=1 \
      timeout 400 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role $r --xchg "/tmp/x.$name" $fuse "$@" \
      > "/tmp/$name.$r.out" 2> "/tmp/$name.$r.err" &
    echo $! > "/tmp/$name.$r.pid"
  done
}
stream_wait() {
  local r rc
  for r in a b; do
    rc=0
    wait "$(cat "/tmp/$1.$r.pid")" || rc=$?
    echo $rc > "/tmp/$1.$r.rc"
    lab_log "$1: role $r exited $rc: $(tail -1 "/tmp/$1.$r.out")"
  done
}
expect_ok() {
  local r
  for r in a b; do
    [ "$(cat "/tmp/$1.$r.rc")" = 0 ] || { cat "/tmp/$1.$r.out"; tail -40 "/tmp/$1.$r.err"; lab_fail "$1: role $r's stream failed"; }
    lab_grep '^stream: ok: ' "/tmp/$1.$r.out" "$1: role $r: every message arrived intact, no error through the ABI"
  done
}
streaming() { # streaming NAME: wait until both ends stream
  local _
  for _ in $(seq 1200); do [ -f "/tmp/x.$1/a.streaming" ] && [ -f "/tmp/x.$1/b.streaming" ] && return 0; sleep 0.1; done
  cat /tmp/"$1".*.out; tail -n 20 /tmp/"$1".*.err
  lab_fail "$1: the stream never started"
}
# still_streaming NAME: both ends were still streaming when the fault came (else the
# fault proved nothing: give the stream more messages).
still_streaming() {
  local r
  for r in a b; do
    kill -0 "$(cat "/tmp/$1.$r.pid")" 2> /dev/null || lab_fail "$1: role $r's stream had ended before the link went down"
  done
}
# striped NAME BEFORE0 BEFORE1 SHARE: each member sent at least 1/SHARE of the packets since.
striped() {
  local d0=$(($(sent rxe0) - $2)) d1=$(($(sent rxe1) - $3))
  lab_log "$1: packets sent: rxe0 $d0, rxe1 $d1"
  [ $((d0 * $4)) -ge $((d0 + d1)) ] && [ $((d1 * $4)) -ge $((d0 + d1)) ] ||
    lab_fail "$1: the fused stream was not striped over both members (rxe0 sent $d0 packets, rxe1 $d1)"
}

# --- every size of both lists, striped over both members ---------------------------------
# A message of 128 KiB or more is cut into chunks on every QP, so the large list loads the
# members evenly (at least a fifth each). A smaller one goes whole on one QP, the next
# message on the next QP; the small list alternates small and large sizes (period 6)
# with the two QPs (period 2), so one member gets about 7% of the packets (1/20 each).
for list in large small; do
  s0=$(sent rxe0) s1=$(sent rxe1)
  if [ $list = large ]; then stream $list 30 0,1 0,1 --msgs 120; else stream $list 30 0,1 0,1 --msgs 300 --small; fi
  stream_wait $list
  expect_ok $list
  striped $list "$s0" "$s1" "$([ $list = large ] && echo 5 || echo 20)"
done

# --- one member's link flaps ---------------------------------------------------------------
stream flap 30 0,1 0,1 --msgs 1000
streaming flap
sleep 0.5
lab_log "flap: f1 (rxe1's netdev) down for 5 s"
lab_link_down f1
still_streaming flap
sleep 5
lab_link_up f1
lab_log "flap: f1 up again; rxe0 stayed $(cat /sys/class/infiniband/rxe0/ports/1/state)"
stream_wait flap
expect_ok flap
cat /tmp/flap.a.err /tmp/flap.b.err | grep -E 'recover|degrad|member' > /tmp/flap.events || true
lab_grep 'rxe1' /tmp/flap.events "flap: the recovery's log names the member whose link went down"
lab_wait_gid rxe1 "$(lab_ipv4_gid 10.21.0.1)"

# --- one member's link stays down past MCPNET_RECOVERY_TIMEOUT ------------------------------
# Paced (a send every 10 ms: 2500 take 25 s at least) so the stream outlasts the outage.
stream outage 6 0,1 0,1 --msgs 2500 --small --pace 10
streaming outage
sleep 0.5
lab_link_down f1
still_streaming outage
lab_log "outage: f1 down for 13 s"
sleep 13
lab_link_up f1
stream_wait outage
expect_ok outage
cat /tmp/outage.a.err /tmp/outage.b.err | grep -E 'without rxe1 port 1 \((port down|left out)' > /tmp/outage.events || true
lab_grep 'rxe1' /tmp/outage.events "outage: the log says the stream went on without rxe1"
lab_log "outage: $(head -1 /tmp/outage.events | sed 's/.*recovered/recovered/')"
lab_log "single fusion checks passed"
