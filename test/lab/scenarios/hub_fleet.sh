# lab: topology=hub hosts=3 deadline=900
# mcpnet-doctor --fleet across three guests on one virtual hub (a is node 0, b node 1,
# c node 2; rxe0 on each eth0), in rounds all three walk through together:
#   healthy  every node exits 0 and a's table shows three healthy rows, 3 pairs checked;
#   blocked  every node uses MCPNET_OOB_PORT_RANGE=41000-41015 (a cluster opens one
#            range) and c drops that range with nft: the pairs b-c and a-c fail at
#            connect, a-b works, so c is named (the common end of the failures), a and b
#            healthy; c exits 1, b 0, a 1 (node 0 exits 1 when any node is named);
#   linkdown b takes eth0 down before it starts, so rxe0's port is DOWN. In this lab
#            eth0 also carries the control connection, so b cannot report: a's table
#            names b as the node whose report never arrived (within a --wait of 60 s),
#            and b itself prints that it could not reach node 0 with its own FAILs
#            (the port). On a cluster whose control network is another interface, the
#            same fault shows as b's own port FAIL in the table and b-* pairs blamed
#            on b: the attribution unit tests cover that case. a and c are healthy.

set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
ulimit -l unlimited
doctor=$PWD/bin/mcpnet-doctor
export NCCL_NET=MCP NCCL_NET_PLUGIN=mcp LD_LIBRARY_PATH=$PWD/plugin
export MCPNET_CONNECT_TIMEOUT=6
read -r node0_ip _ <<< "$LAB_HOST_IPS"
rank=$LAB_HOST_INDEX

expect() {
  grep -Eq -- "$2" "$1" && { lab_log "ok: $3"; return 0; }
  cat "$1" >&2
  lab_fail "$3: no line of $1 matches /$2/"
}
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

# Round 1: healthy.
open_round healthy
run healthy 180
status healthy 0
if [ "$LAB_HOST" = a ]; then
  t=/tmp/healthy.out
  expect $t '^Fleet: 3 of 3 nodes reported to node 0; 3 pairs checked through the plugin on 1 rail, 0 failed$' "healthy: 3 pairs, none failed"
  for r in 0 1 2; do
    expect $t "^$r +lab-[abc] +192\.0\.2\.[123] +healthy +-$" "healthy: node $r's row is healthy"
  done
  expect $t '^fleet: 3 nodes, 0 with problems$' "healthy: no node with problems"
else
  expect /tmp/healthy.out "^fleet: node $rank \(lab-$LAB_HOST\): healthy" "healthy: $LAB_HOST got its verdict"
fi

# Round 2: c drops the plugin's out-of-band port range.
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
    expect $t '^0 +lab-a +192\.0\.2\.1 +healthy +-$' "blocked: a healthy"
    expect $t '^1 +lab-b +192\.0\.2\.2 +healthy +-$' "blocked: b healthy"
    expect $t '^2 +lab-c +192\.0\.2\.3 +PROBLEMS +to node [01] \(rail 0\): connect: ' "blocked: c named at connect"
    expect $t '^ +to node [01] \(rail 0\): connect: ' "blocked: c's second failed pair listed"
    expect $t '^fleet: 3 nodes, 1 with problems$' "blocked: one node with problems"
    ;;
  b) status blocked 0 ;;
  c)
    status blocked 1
    expect /tmp/blocked.out '^fleet: node 2 \(lab-c\): PROBLEMS' "blocked: c is told it is named"
    ;;
esac
unset MCPNET_OOB_PORT_RANGE

# Round 3: b's link down from the start.
if [ "$LAB_HOST" = b ]; then
  ip link set eth0 down
  for _ in $(seq 100); do
    ibv_devinfo -d rxe0 | grep -q 'state:.*PORT_DOWN' && break
    sleep 0.2
  done
fi
open_round linkdown
# b gives up after 30 s (it cannot reach node 0); a waits 60 s for it.
if [ "$LAB_HOST" = b ]; then run linkdown 30; else run linkdown 60; fi
if [ "$LAB_HOST" = b ]; then
  ip link set eth0 up
  ip addr show eth0 | grep -q "$LAB_SELF_IP" || ip addr add "$LAB_SELF_IP/24" dev eth0
fi
case $LAB_HOST in
  a)
    status linkdown 1
    t=/tmp/linkdown.out
    expect $t '^Fleet: 2 of 3 nodes reported to node 0; 1 pair checked through the plugin on 1 rail, 0 failed$' "linkdown: a and c checked together"
    expect $t '^0 +lab-a +[^ ]+ +healthy +-$' "linkdown: a healthy"
    expect $t '^1 +\? +\? +PROBLEMS +no report reached node 0: it did not connect within --wait 60 s' "linkdown: b named: it never reported"
    expect $t '^2 +lab-c +[^ ]+ +healthy +-$' "linkdown: c healthy"
    expect $t '^fleet: 3 nodes, 1 with problems$' "linkdown: one node with problems"
    ;;
  b)
    status linkdown 1
    expect /tmp/linkdown.out '^fleet: node 1 \(lab-b\): could not reach node 0 at 192\.0\.2\.1' "linkdown: b says it could not reach node 0"
    ;;
  c) status linkdown 0 ;;
esac
