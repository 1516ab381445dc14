#!/bin/bash
# check-doctor-fleet-cli.sh - mcpnet-doctor --fleet end to end on this machine's
# loopback, without RDMA: the usage errors name what to set (exit 2); two doctors that
# find each other through Slurm's variables alone report to node 0, which prints both
# rows; a node with another token is not let in (named missing, and told why); and a
# node that never comes is named by rank once --wait runs out. Whether the
# nodes are healthy depends on this machine's devices, so only the table's shape, the
# named node and the exit statuses are asserted (the lab's single_fleet checks pairs).
set -uo pipefail
doctor=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "check-doctor-fleet-cli: $*"; cat "$out"/* 2> /dev/null; exit 1; }
port=$((20000 + RANDOM % 9000))

env -i "$doctor" --fleet > "$out/u1" 2>&1
[ $? = 2 ] || fail "no node count: exit status must be 2"
grep -q "needs the number of nodes: give --nodes N or set MCPNET_FLEET_NODES" "$out/u1" || fail "no node count: must name MCPNET_FLEET_NODES"
env -i MCPNET_FLEET_NODES=2 MCPNET_FLEET_RANK=1 "$doctor" --fleet > "$out/u2" 2>&1
[ $? = 2 ] || fail "no coordinator: exit status must be 2"
grep -q "give --coordinator HOST\[:PORT\] or set MCPNET_FLEET_COORDINATOR" "$out/u2" || fail "no coordinator: must name MCPNET_FLEET_COORDINATOR"
env -i SLURM_NNODES=2 SLURM_NODEID=2 "$doctor" --fleet > "$out/u3" 2>&1
[ $? = 2 ] || fail "rank out of range: exit status must be 2"
grep -q "node rank 2 (SLURM_NODEID) is not below the number of nodes 2 (SLURM_NNODES)" "$out/u3" || fail "rank out of range: must say so"

env -i SLURM_NNODES=2 SLURM_NODEID=1 "SLURM_JOB_NODELIST=localhost" "$doctor" --fleet > "$out/u4" 2>&1
[ $? = 2 ] || fail "no token: exit status must be 2"
grep -q "needs the run's token in MCPNET_DOCTOR_TOKEN" "$out/u4" || fail "no token: must name MCPNET_DOCTOR_TOKEN"
env -i MCPNET_DOCTOR_TOKEN=short SLURM_NNODES=2 SLURM_NODEID=1 "SLURM_JOB_NODELIST=localhost" "$doctor" --fleet \
  > "$out/u5" 2>&1
[ $? = 2 ] || fail "short token: exit status must be 2"
grep -q "MCPNET_DOCTOR_TOKEN is shorter than 16 characters" "$out/u5" || fail "short token: must say so"
export MCPNET_DOCTOR_TOKEN=check-doctor-fleet-cli-token-0123456789

# Two nodes through Slurm's variables: node 0 is the first host of the list.
slurm=(SLURM_NNODES=2 "SLURM_JOB_NODELIST=localhost,nodeb[1-3]")
env "${slurm[@]}" SLURM_NODEID=0 "$doctor" --fleet --port $port --wait 60 --timeout 5 > "$out/n0" 2> "$out/n0.err" &
n0=$!
env "${slurm[@]}" SLURM_NODEID=1 "$doctor" --fleet --port $port --wait 60 --timeout 5 > "$out/n1" 2>&1
rc1=$?
wait $n0
rc0=$?
grep -Eq '^Fleet: 2 of 2 nodes reported to node 0' "$out/n0" || fail "slurm: node 0 must have both reports"
grep -Eq '^0 +[^ ]+ +[^ ]+ +(healthy|PROBLEMS) ' "$out/n0" || fail "slurm: node 0's row"
grep -Eq '^1 +[^ ]+ +[^ ]+ +(healthy|PROBLEMS) ' "$out/n0" || fail "slurm: node 1's row"
grep -Eq '^fleet: 2 nodes, [0-2] with problems$' "$out/n0" || fail "slurm: the last line"
grep -Eq '^fleet: node 1 \(.*\): (healthy|PROBLEMS)' "$out/n1" || fail "slurm: node 1 must get its verdict"
if grep -q '^fleet: 2 nodes, 0 with problems$' "$out/n0"; then want=0; else want=1; fi
[ $rc0 = $want ] || fail "slurm: node 0 exits $rc0, its table says $want"
grep -Eq '^1 .* healthy ' "$out/n0" && want=0 || want=1
[ $rc1 = $want ] || fail "slurm: node 1 exits $rc1, its row says $want"

# Node 1 holds another run's token: node 0 lets it in nowhere and names it missing; node 1
# is told its token differs.
"$doctor" --fleet --nodes 2 --node-rank 0 --port $((port + 2)) --wait 6 --timeout 5 > "$out/t0" 2>&1 &
t0=$!
MCPNET_DOCTOR_TOKEN=another-run-token-9876543210 "$doctor" --fleet --nodes 2 --node-rank 1 \
  --coordinator 127.0.0.1:$((port + 2)) --wait 3 --timeout 5 > "$out/t1" 2>&1
rc1=$?
wait $t0
rc0=$?
[ $rc0 = 1 ] || fail "token: node 0 exits $rc0, expected 1"
grep -Eq '^1 +\? +\? +PROBLEMS +no report reached node 0' "$out/t0" || fail "token: node 1 must be named missing"
[ $rc1 != 0 ] || fail "token: node 1 must not pass"
grep -q "does not know this run's token" "$out/t1" || fail "token: node 1 must be told its token differs"

# Node 1 never comes: named by rank when --wait runs out, and node 0 exits 1.
"$doctor" --fleet --nodes 2 --node-rank 0 --port $((port + 1)) --wait 3 --timeout 5 > "$out/m0" 2>&1
rc=$?
[ $rc = 1 ] || fail "missing: node 0 exits $rc, expected 1"
grep -Eq '^1 +\? +\? +PROBLEMS +no report reached node 0: it did not connect within --wait 3 s' "$out/m0" ||
  fail "missing: node 1 must be named by rank"
grep -Eq '^Fleet: 1 of 2 nodes reported to node 0; 0 pairs checked' "$out/m0" || fail "missing: the first line"
echo "mcpnet-doctor --fleet: usage errors, Slurm discovery, another run's token and a missing node behave"
