# lab: topology=hub hosts=3 deadline=1600
# The hub topology end to end, then mcpnet-doctor --fleet across it: three guests a, b, c
# on one virtual segment (bin/lab-hub switching between them), one boot for both parts.
# Part 1, the hub and the helpers a fleet test needs (it was hub_smoke):
#   wire     every guest pings every other over IPv4 and IPv6, and its rxe0 is ACTIVE
#            with the GIDs of its own addresses;
#   streams  a verified mcpnet stream (bin/mcp-stream, 200 messages each way) on each
#            edge of the ring a-b, b-c, c-a, all three at once;
#   ports    lab_block_ports on b: a TCP connect from every other guest to a blocked
#            port of b times out (drop) or is refused (reject), one outside the range
#            still connects, and after lab_unblock_ports the blocked one connects again;
#   link     lab_link_down on c: no other guest reaches c (IPv4 and IPv6), and after
#            lab_link_up they all do again (and c's rxe0 is ACTIVE with its GIDs again).
# Guests go through these rounds together (lab_barrier) so that none checks a state the
# others have not set up yet.
# Part 2, mcpnet-doctor --fleet (a is node 0, b node 1, c node 2; rxe0 on each eth0), in
# rounds all three walk through together:
#   healthy  every node exits 0 and a's table shows three healthy rows, 3 pairs checked;
#   blocked  every node uses MCPNET_OOB_PORT_RANGE=41000-41015 (a cluster opens one
#            range) and c drops that range with nft: the pairs b-c and a-c fail at
#            connect, a-b works, so c is named (the common end of the failures), a and b
#            healthy; c exits 1, b 0, a 1 (node 0 exits 1 when any node is named);
#   linkdown b takes eth0 down before it starts, so rxe0's port is DOWN. In this lab
#            eth0 also carries the control connection, so b cannot report: a's table
#            names b as the node whose report never arrived (within a --wait of 20 s),
#            and b itself prints that it could not reach node 0 with its own FAILs
#            (the port). On a cluster whose control network is another interface, the
#            same fault shows as b's own port FAIL in the table and b-* pairs blamed
#            on b: the attribution unit tests cover that case. a and c are healthy.
# Part 3, mcpnet-top --fleet on the same three nodes: a ring of verified streams (rank r on
# node r sends to the next node and receives from the previous one, bin/mcp-stream
# --ring), and rank 1 (on b) stopped with SIGSTOP mid-stream (it stops itself after 100
# messages, so its neighbours still have work for it). mcpnet-top --fleet on every
# node (node 0 found as the doctor finds it, the run's token proved both ways) joins the
# three views by connection: its one root is node lab-b, rank 1, stopped, waited on by
# a's send comm (no clear-to-send) and c's receive comm (no data); every node prints it and
# exits 1. After SIGCONT the ring finishes with every byte verified.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
x="$LAB_XCHG/smoke"
mkdir -p "$x"
[ "$LAB_TOPOLOGY" = hub ] && [ "$LAB_NHOSTS" = 3 ] || lab_fail "run me in the hub topology with 3 hosts"
read -r -a names <<<"$LAB_HOSTS"
read -r -a ips <<<"$LAB_HOST_IPS"
[ "${names[$LAB_HOST_INDEX]}" = "$LAB_HOST" ] && [ "${ips[$LAB_HOST_INDEX]}" = "$LAB_SELF_IP" ] ||
  lab_fail "LAB_HOSTS/LAB_HOST_IPS ($LAB_HOSTS / $LAB_HOST_IPS) disagree with LAB_HOST=$LAB_HOST, LAB_SELF_IP=$LAB_SELF_IP"
[ "$(lab_host_ip "$LAB_HOST")" = "$LAB_SELF_IP" ] || lab_fail "lab_host_ip $LAB_HOST is not $LAB_SELF_IP"
ip6_of() { echo "2001:db8::$(($1 + 1))"; }

# ping4/ping6 ADDR [TRIES]: one echo answered within TRIES attempts of 2 s.
ping_ok() {
  local fam=$1 addr=$2 tries=${3:-30} i
  for ((i = 0; i < tries; i++)); do
    busybox ping "-$fam" -c 1 -W 2 "$addr" > /tmp/ping.out 2>&1 && return 0
  done
  cat /tmp/ping.out >&2
  return 1
}
# ping_none FAM ADDR: three echoes, none answered.
ping_none() { ! busybox ping "-$1" -c 3 -W 2 "$2" > /tmp/ping.out 2>&1; }
# tcp_try ADDR PORT: "connected", "refused" or "timeout" (nothing within 6 s).
tcp_try() {
  local rc=0
  timeout 6 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2> /tmp/tcp.err || rc=$?
  if [ $rc = 0 ]; then echo connected
  elif [ $rc = 124 ]; then echo timeout
  elif grep -q 'Connection refused' /tmp/tcp.err; then echo refused
  else echo "other ($(cat /tmp/tcp.err))"; fi
}
expect_tcp() {
  local got
  got=$(tcp_try "$1" "$2")
  [ "$got" = "$3" ] || lab_fail "$4: a TCP connect to $1:$2 gave '$got', expected '$3'"
  lab_log "ok: $4 ($1:$2 $got)"
}

lab_log "host $LAB_HOST (index $LAB_HOST_INDEX of $LAB_NHOSTS) at $LAB_SELF_IP and $LAB_SELF_IP6"
lab_barrier up 600

# Round 1: the wire.
lab_wait_gid rxe0 "$(lab_ipv4_gid "$LAB_SELF_IP")"
lab_log "ok: rxe0 is ACTIVE with the GID of $LAB_SELF_IP"
gid6=$(printf '2001:0db8:0000:0000:0000:0000:0000:%04x' $((LAB_HOST_INDEX + 1)))
lab_wait_gid rxe0 "$gid6"
lab_log "ok: rxe0 has the GID of $LAB_SELF_IP6 ($gid6)"
for ((k = 0; k < LAB_NHOSTS; k++)); do
  [ "$k" = "$LAB_HOST_INDEX" ] && continue
  ping_ok 4 "${ips[$k]}" || lab_fail "no IPv4 ping answer from ${names[$k]} (${ips[$k]})"
  ping_ok 6 "$(ip6_of $k)" || lab_fail "no IPv6 ping answer from ${names[$k]} ($(ip6_of $k))"
  lab_log "ok: ${names[$k]} answers pings at ${ips[$k]} and $(ip6_of $k)"
done
lab_barrier wire

# Round 2: a stream on each edge of the ring, this host as role a toward the next host
# and as role b toward the previous one, both at once.
next=${names[$(((LAB_HOST_INDEX + 1) % LAB_NHOSTS))]}
prev=${names[$(((LAB_HOST_INDEX + LAB_NHOSTS - 1) % LAB_NHOSTS))]}
stream() {
  local edge=$1 role=$2
  mkdir -p "$x/$edge"
  MCP_DRIVE_VERBOSE=1 timeout 600 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role "$role" \
    --xchg "$x/$edge" --msgs 200 --small --finish-together > "/tmp/$edge.out" 2> "/tmp/$edge.err"
}
stream "$LAB_HOST$next" a & pa=$!
stream "$prev$LAB_HOST" b & pb=$!
for edge in "$LAB_HOST$next:$pa" "$prev$LAB_HOST:$pb"; do
  rc=0
  wait "${edge#*:}" || rc=$?
  edge=${edge%:*}
  grep -E '^stream: (connected|ok|FAIL)' "/tmp/$edge.out" || true
  if [ $rc != 0 ]; then
    grep -E 'WARN|FAIL|failed' "/tmp/$edge.err" | tail -20 >&2 || true
    lab_fail "stream $edge: mcp-stream exited with $rc"
  fi
  lab_grep '^stream: ok: 200 messages sent, 200 received, [0-9]+ bytes received and verified' "/tmp/$edge.out" \
    "stream ${edge:0:1}-${edge:1:1}: 200 messages each way arrived intact"
done
lab_barrier streams

# Round 3: blocked ports on b. b listens on 41005 (inside the range) and 41020 (outside).
blocker=b
bip=$(lab_host_ip $blocker)
if [ "$LAB_HOST" = $blocker ]; then
  python3 -c '
import select, socket, sys
socks = []
for port in sys.argv[1:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(port)))
    s.listen(16)
    socks.append(s)
while True:
    for s in select.select(socks, [], [])[0]:
        s.accept()[0].close()
' 41005 41020 &
  listener=$!
  lab_wait_port 41005 30
  lab_wait_port 41020 30
fi
lab_barrier listening
[ "$LAB_HOST" != $blocker ] && expect_tcp "$bip" 41005 connected "ports: b's port 41005 is open before the block"
lab_barrier open-checked
[ "$LAB_HOST" = $blocker ] && { lab_block_ports 41000-41010; lab_log "blocked 41000-41010 (drop)"; }
lab_barrier blocked
if [ "$LAB_HOST" != $blocker ]; then
  expect_tcp "$bip" 41005 timeout "ports: b drops a connect to 41005 (in its blocked range)"
  expect_tcp "$bip" 41020 connected "ports: b's 41020 (outside the range) still connects"
fi
lab_barrier drop-checked
[ "$LAB_HOST" = $blocker ] && { lab_unblock_ports; lab_block_ports 41000-41010 reject; lab_log "blocked 41000-41010 (reject)"; }
lab_barrier rejecting
[ "$LAB_HOST" != $blocker ] && expect_tcp "$bip" 41005 refused "ports: b refuses a connect to 41005 (reject)"
lab_barrier reject-checked
[ "$LAB_HOST" = $blocker ] && { lab_unblock_ports; lab_log "unblocked"; }
lab_barrier unblocked
[ "$LAB_HOST" != $blocker ] && expect_tcp "$bip" 41005 connected "ports: b's 41005 connects again after lab_unblock_ports"
lab_barrier ports-done
[ "$LAB_HOST" = $blocker ] && kill "$listener"

# Round 4: c's link goes down, then up.
downed=c
k_down=2
if [ "$LAB_HOST" = $downed ]; then lab_link_down; lab_log "eth0 down"; fi
lab_barrier down
if [ "$LAB_HOST" != $downed ]; then
  ping_none 4 "${ips[$k_down]}" || lab_fail "link: c (${ips[$k_down]}) still answers an IPv4 ping with its link down"
  ping_none 6 "$(ip6_of $k_down)" || lab_fail "link: c ($(ip6_of $k_down)) still answers an IPv6 ping with its link down"
  lab_log "ok: link: c is unreachable with its link down"
fi
lab_barrier down-checked
if [ "$LAB_HOST" = $downed ]; then
  lab_link_up
  lab_log "eth0 up"
  # The doctor's rounds below use rxe0 on c again: its port and GIDs come back with the link.
  lab_wait_gid rxe0 "$(lab_ipv4_gid "$LAB_SELF_IP")" 60
  lab_wait_gid rxe0 "$gid6" 60
fi
lab_barrier up-again
if [ "$LAB_HOST" != $downed ]; then
  ping_ok 4 "${ips[$k_down]}" || lab_fail "link: c (${ips[$k_down]}) does not answer an IPv4 ping after lab_link_up"
  ping_ok 6 "$(ip6_of $k_down)" || lab_fail "link: c ($(ip6_of $k_down)) does not answer an IPv6 ping after lab_link_up"
  lab_log "ok: link: c answers again after lab_link_up"
fi
lab_barrier end

# Part 2: mcpnet-doctor --fleet.
ulimit -l unlimited
doctor=$PWD/bin/mcpnet-doctor
export NCCL_NET=MCP NCCL_NET_PLUGIN=mcp LD_LIBRARY_PATH=$PWD/plugin
export MCPNET_CONNECT_TIMEOUT=6
# The run's token, the same on every node, as a job script sets it.
export MCPNET_DOCTOR_TOKEN=lab-hub-fleet-run-token-0123456789
read -r node0_ip _ <<< "$LAB_HOST_IPS"
rank=$LAB_HOST_INDEX

status() {
  local rc
  rc=$(cat "/tmp/$1.rc")
  [ "$rc" = "$2" ] || { cat "/tmp/$1.out" "/tmp/$1.err" >&2 2> /dev/null; lab_fail "$1: exit status $rc, expected $2"; }
  lab_log "ok: $1 exits $rc"
}
# run ROUND WAIT: this host's doctor for the round (node 0 listens; the others retry
# until it does), then a rendezvous so no round overlaps the next.
run() {
  local round=$1 wait_s=$2
  lab_wait "$round.go" 300 > /dev/null
  set +e
  "$doctor" --fleet --nodes 3 --node-rank "$rank" --coordinator "$node0_ip" --wait "$wait_s" --timeout 12 \
    --size 65536 > "/tmp/$round.out" 2> "/tmp/$round.err"
  echo $? > "/tmp/$round.rc"
  set -e
  cat "/tmp/$round.out"
  lab_signal "$round.done.$LAB_HOST"
  for h in a b c; do
    lab_wait "$round.done.$h" 600 > /dev/null
  done
}
# Host a opens each round once every host has prepared it.
open_round() {
  local round=$1
  lab_signal "$round.ready.$LAB_HOST"
  if [ "$LAB_HOST" = a ]; then
    for h in a b c; do
      lab_wait "$round.ready.$h" 300 > /dev/null
    done
    lab_signal "$round.go"
  fi
}

# Round 5: healthy.
open_round healthy
run healthy 180
status healthy 0
if [ "$LAB_HOST" = a ]; then
  t=/tmp/healthy.out
  lab_grep '^Fleet: 3 of 3 nodes reported to node 0; 3 pairs checked through the plugin on 1 rail, 0 failed$' $t "healthy: 3 pairs, none failed"
  for r in 0 1 2; do
    lab_grep "^$r +lab-[abc] +192\.0\.2\.[123] +healthy +-$" $t "healthy: node $r's row is healthy"
  done
  lab_grep '^fleet: 3 nodes, 0 with problems$' $t "healthy: no node with problems"
else
  lab_grep "^fleet: node $rank \(lab-$LAB_HOST\): healthy" /tmp/healthy.out "healthy: $LAB_HOST got its verdict"
fi

# Round 6: c drops the plugin's out-of-band port range.
export MCPNET_OOB_PORT_RANGE=41000-41015
if [ "$LAB_HOST" = c ]; then
  nft add table inet fleet
  nft add chain inet fleet input '{ type filter hook input priority 0; }'
  # Only connection attempts (SYN without ACK): an outgoing connection's ephemeral
  # source port may fall in the range, and its replies must still pass.
  nft add rule inet fleet input tcp dport 41000-41015 'tcp flags & (syn | ack) == syn' drop
fi
open_round blocked
run blocked 180
[ "$LAB_HOST" = c ] && nft delete table inet fleet
case $LAB_HOST in
  a)
    status blocked 1
    t=/tmp/blocked.out
    lab_grep '^0 +lab-a +192\.0\.2\.1 +healthy +-$' $t "blocked: a healthy"
    lab_grep '^1 +lab-b +192\.0\.2\.2 +healthy +-$' $t "blocked: b healthy"
    lab_grep '^2 +lab-c +192\.0\.2\.3 +PROBLEMS +to node [01] \(rail 0\): connect: ' $t "blocked: c named at connect"
    lab_grep '^ +to node [01] \(rail 0\): connect: ' $t "blocked: c's second failed pair listed"
    lab_grep '^fleet: 3 nodes, 1 with problems$' $t "blocked: one node with problems"
    ;;
  b) status blocked 0 ;;
  c)
    status blocked 1
    lab_grep '^fleet: node 2 \(lab-c\): PROBLEMS' /tmp/blocked.out "blocked: c is told it is named"
    ;;
esac
unset MCPNET_OOB_PORT_RANGE

# Round 7: b's link down from the start.
if [ "$LAB_HOST" = b ]; then
  ip link set eth0 down
  for _ in $(seq 100); do
    grep -q 'state:.*PORT_DOWN' <<<"$(ibv_devinfo -d rxe0)" && break
    sleep 0.2
  done
fi
open_round linkdown
# b gives up after 15 s (it cannot reach node 0); a waits 20 s for it, c's report arriving
# within seconds (as in the healthy round).
if [ "$LAB_HOST" = b ]; then run linkdown 15; else run linkdown 20; fi
if [ "$LAB_HOST" = b ]; then
  ip link set eth0 up
  # Not `ip addr show | grep -q` under pipefail: ip flushes each address as it prints it, so
  # grep -q can exit first and ip's next write dies of SIGPIPE, failing the pipeline.
  grep -qF "inet $LAB_SELF_IP/" <<<"$(ip -4 addr show dev eth0)" || ip addr add "$LAB_SELF_IP/24" dev eth0
fi
case $LAB_HOST in
  a)
    status linkdown 1
    t=/tmp/linkdown.out
    lab_grep '^Fleet: 2 of 3 nodes reported to node 0; 1 pair checked through the plugin on 1 rail, 0 failed$' $t "linkdown: a and c checked together"
    lab_grep '^0 +lab-a +[^ ]+ +healthy +-$' $t "linkdown: a healthy"
    lab_grep '^1 +\? +\? +PROBLEMS +no report reached node 0: it did not connect within --wait 20 s' $t "linkdown: b named: it never reported"
    lab_grep '^2 +lab-c +[^ ]+ +healthy +-$' $t "linkdown: c healthy"
    lab_grep '^fleet: 3 nodes, 1 with problems$' $t "linkdown: one node with problems"
    ;;
  b)
    status linkdown 1
    lab_grep '^fleet: node 1 \(lab-b\): could not reach node 0 at 192\.0\.2\.1' /tmp/linkdown.out "linkdown: b says it could not reach node 0"
    ;;
  c) status linkdown 0 ;;
esac

# Part 3: one rank of a ring stalls; mcpnet-top --fleet names it. b's link came back at
# the end of round 7: every port ACTIVE with its GID before the ring connects.
xr="$LAB_XCHG/ring"
mkdir -p "$xr"
lab_wait_gid rxe0 "$(lab_ipv4_gid "$LAB_SELF_IP")" 60
lab_barrier ring-ready 300
# Rank 1 stops itself once 100 messages went either way: a and c then still have work
# for it (300 each way), whichever of the three guests ran faster.
RANK=$rank MCP_DRIVE_VERBOSE=1 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role "$LAB_HOST" \
  --ring "$prev,$next" --xchg "$xr" --msgs 300 --small --finish-together \
  $([ "$LAB_HOST" = b ] && echo --stop-at 100) > /tmp/ring.out 2> /tmp/ring.err &
ring_pid=$!
lab_signal "ring.pid.$LAB_HOST" "$ring_pid"
b_pid=$(lab_wait ring.pid.b 60)
if [ "$LAB_HOST" = b ]; then
  for _ in $(seq 1200); do
    [ "$(awk '{ print $3 }' "/proc/$ring_pid/stat" 2>/dev/null)" = T ] && break
    sleep 0.1
  done
  [ "$(awk '{ print $3 }' "/proc/$ring_pid/stat" 2>/dev/null)" = T ] || { cat /tmp/ring.out; lab_fail "ring: rank 1 never stopped"; }
  lab_signal ring.stopped
  lab_log "ring: rank 1's stream process $ring_pid stopped itself ($(grep 'stopping itself' /tmp/ring.out))"
else
  lab_wait ring.stopped 180 > /dev/null
fi
sleep 6 # longer than mcpnet-top's --stall (5 s)
set +e
bin/mcpnet-top --fleet --nodes 3 --node-rank "$rank" --coordinator "$node0_ip" --wait 60 --timeout 12 \
  > /tmp/topfleet.out 2> /tmp/topfleet.err
echo $? > /tmp/topfleet.rc
set -e
cat /tmp/topfleet.out
status topfleet 1
lab_grep "^root 1 of 1 \(stopped\): node lab-b rank 1 \(pid $b_pid\): stopped \(state T: SIGSTOP or a debugger\)" \
  /tmp/topfleet.out "ring: the one root is rank 1 on lab-b, stopped"
lab_grep "^  waited on by lab-a rank 0 \(pid [0-9]+\): send comm to lab-b pid $b_pid \(192\.0\.2\.2\) has waited [0-9]+ s for a clear-to-send" \
  /tmp/topfleet.out "ring: a's send comm to b waits on it for a clear-to-send"
lab_grep "^  waited on by lab-c rank 2 \(pid [0-9]+\): recv comm from lab-b pid $b_pid \(192\.0\.2\.2\) has waited [0-9]+ s for data" \
  /tmp/topfleet.out "ring: c's recv comm from b waits on it for data"
lab_signal "ring.looked.$LAB_HOST"
if [ "$LAB_HOST" = b ]; then
  for h in a c; do lab_wait "ring.looked.$h" 120 > /dev/null; done
  kill -CONT "$ring_pid"
fi
wait "$ring_pid" || { tail -5 /tmp/ring.out; lab_fail "ring: the stream failed after SIGCONT"; }
lab_grep '^stream: ok: 300 messages sent, 300 received' /tmp/ring.out "ring: every byte verified after SIGCONT"
