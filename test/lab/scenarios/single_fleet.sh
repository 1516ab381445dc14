# lab: topology=single deadline=600
# mcpnet-doctor --fleet with three nodes in one guest: three doctor processes on
# 127.0.0.1 with rxe0 (on lo), node 0 collecting on port 18650. Each round starts the
# three together and asserts every exit status and node 0's table:
#   healthy  all three: 3 pairs through the plugin, every row healthy, exit 0 everywhere;
#   plugin   node 2 loads a plugin that does not exist: node 2 named with its own check,
#            nodes 0 and 1 still checked together and healthy; node 2 and node 0 exit 1;
#   blocked  node 2's out-of-band port range (MCPNET_OOB_PORT_RANGE) dropped by nft: the
#            two pairs with node 2 fail at connect, 0-1 works, so node 2 is the one named
#            (the common end); node 0's --json table says the same.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
ulimit -l unlimited
doctor=$PWD/bin/mcpnet-doctor
export NCCL_NET=MCP NCCL_NET_PLUGIN=mcp LD_LIBRARY_PATH=$PWD/plugin
# The plugin's own connect gives up before the doctor's step deadline does.
export MCPNET_CONNECT_TIMEOUT=6
export MCPNET_DOCTOR_TOKEN=lab-single-fleet-run-token-0123456789
common=(--fleet --nodes 3 --port 18650 --wait 180 --timeout 12 --size 65536)

# fleet ROUND "ARGS0" "ARGS1" "ARGS2" [ENV2...]: node 0 first (it listens), then nodes 1
# and 2 toward 127.0.0.1; node 2 runs under the extra environment. Output in
# /tmp/ROUND.N.out, exit status in /tmp/ROUND.N.rc.
fleet() {
  local round=$1 a0=$2 a1=$3 a2=$4 pids=()
  shift 4
  # shellcheck disable=SC2086
  ( set +e; "$doctor" "${common[@]}" --node-rank 0 $a0 > "/tmp/$round.0.out" 2> "/tmp/$round.0.err"
    echo $? > "/tmp/$round.0.rc" ) &
  pids+=($!)
  for _ in $(seq 600); do
    grep -q listening "/tmp/$round.0.err" 2> /dev/null && break
    sleep 0.1
  done
  grep -q listening "/tmp/$round.0.err" || { cat "/tmp/$round.0.err" >&2; lab_fail "$round: node 0 did not listen"; }
  # shellcheck disable=SC2086
  ( set +e; "$doctor" "${common[@]}" --node-rank 1 --coordinator 127.0.0.1 $a1 > "/tmp/$round.1.out" 2>&1
    echo $? > "/tmp/$round.1.rc" ) &
  pids+=($!)
  # shellcheck disable=SC2086
  ( set +e; env "$@" "$doctor" "${common[@]}" --node-rank 2 --coordinator 127.0.0.1 $a2 > "/tmp/$round.2.out" 2>&1
    echo $? > "/tmp/$round.2.rc" ) &
  pids+=($!)
  wait "${pids[@]}" || true
  lab_log "$round: node 0's table:"
  cat "/tmp/$round.0.out"
  lab_log "$round: node 1 and node 2 say:"
  cat "/tmp/$round.1.out" "/tmp/$round.2.out"
}
status() {
  local rc
  rc=$(cat "/tmp/$1.rc")
  [ "$rc" = "$2" ] || { cat "/tmp/$1.out" "/tmp/$1.err" >&2 2> /dev/null; lab_fail "$1: exit status $rc, expected $2"; }
  lab_log "ok: $1 exits $rc"
}

# Round 1: healthy.
fleet healthy "" "" ""
status healthy.0 0
status healthy.1 0
status healthy.2 0
t=/tmp/healthy.0.out
lab_grep '^Fleet: 3 of 3 nodes reported to node 0; 3 pairs checked through the plugin on 1 rail, 0 failed$' $t "healthy: 3 pairs checked, none failed"
for r in 0 1 2; do
  lab_grep "^$r +[^ ]+ +[^ ]+ +healthy +-$" $t "healthy: node $r's row is healthy"
done
lab_grep '^fleet: 3 nodes, 0 with problems$' $t "healthy: the last line counts no problems"
lab_grep '^fleet: node 1 \(.*\): healthy \(node 0 checked 3 nodes\)$' /tmp/healthy.1.out "healthy: node 1 got its verdict"

# Round 2: node 2's plugin cannot be loaded.
fleet plugin "" "" "--plugin /nonexistent/libnccl-net-mcp.so"
status plugin.0 1
status plugin.1 0
status plugin.2 1
t=/tmp/plugin.0.out
lab_grep '^2 +[^ ]+ +[^ ]+ +PROBLEMS +its own check: plugin /nonexistent/libnccl-net-mcp\.so: cannot load the plugin' $t "plugin: node 2 named for its plugin"
lab_grep '^Fleet: 3 of 3 nodes reported to node 0; 1 pair checked through the plugin on 1 rail, 0 failed$' $t "plugin: nodes 0 and 1 still checked together"
lab_grep '^0 +[^ ]+ +[^ ]+ +healthy +-$' $t "plugin: node 0 healthy"
lab_grep '^1 +[^ ]+ +[^ ]+ +healthy +-$' $t "plugin: node 1 healthy"
lab_grep '^fleet: 3 nodes, 1 with problems$' $t "plugin: one node with problems"
lab_grep '^  its own check: plugin /nonexistent/libnccl-net-mcp\.so: cannot load' /tmp/plugin.2.out "plugin: node 2 prints why it is named"

# Round 3: node 2's out-of-band ports dropped (nodes 0 and 1 use another range).
nft add table inet fleet
nft add chain inet fleet input '{ type filter hook input priority 0; }'
# Only connection attempts (SYN without ACK): an outgoing connection's ephemeral
# source port may fall in the range, and its replies must still pass.
nft add rule inet fleet input tcp dport 41000-41015 'tcp flags & (syn | ack) == syn' drop
export MCPNET_OOB_PORT_RANGE=42000-42031
fleet blocked "--json" "" "" MCPNET_OOB_PORT_RANGE=41000-41015
nft delete table inet fleet
status blocked.0 1
status blocked.1 0
status blocked.2 1
python3 - /tmp/blocked.0.out <<'EOF' || lab_fail "blocked: node 0's --json table does not name node 2 alone"
import json, sys
doc = json.load(open(sys.argv[1]))
nodes = {n["rank"]: n for n in doc["nodes"]}
assert [nodes[r]["healthy"] for r in range(3)] == [True, True, False], doc["nodes"]
probs = nodes[2]["problems"]
assert len(probs) == 2, probs
for peer in (0, 1):
    assert any(p.startswith("to node %d (rail 0): connect: " % peer) for p in probs), probs
bad = [p for p in doc["pairs"] if not p["ok"]]
assert len(bad) == 2 and all(p["blamed"] == [2] and not p["unsure"] for p in bad), bad
assert doc["with_problems"] == 1 and doc["exit"] == 1, doc
print("json ok: node 2 named: " + probs[0])
EOF
lab_log "ok: blocked: node 2 named for both pairs, nodes 0 and 1 healthy"
lab_grep '^  to node 0 \(rail 0\): connect: ' /tmp/blocked.2.out "blocked: node 2 prints the failed pair with node 0"
lab_refute 'PROBLEMS' /tmp/blocked.1.out "blocked: node 1 is not named"
