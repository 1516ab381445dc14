# lab: topology=single deadline=300
# mcpnet-doctor on one guest, each case a fresh run whose verdict and exit status are
# asserted: the healthy guest (rxe0 on lo, NCCL_NET and NCCL_NET_PLUGIN set) reports its
# port and selection OK and exits 0; a soft-RoCE device on a dummy netdev that is down
# is a WARN (exit 0) until NCCL_IB_HCA asks for it (FAIL, exit 1); a device whose netdev
# lives in another network namespace is a WARN from here and the one used from inside
# that namespace, and a rank map giving it to a rank FAILs for that rank only; a
# locked-memory limit of 1 MiB is a WARN while the process holds
# CAP_IPC_LOCK and a FAIL (exit 1) once setpriv drops it; an out-of-range parameter
# is a FAIL naming it. --json of the richest case parses and carries exactly the text
# report's findings and exit status.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
doctor=$PWD/bin/mcpnet-doctor
export NCCL_NET=MCP NCCL_NET_PLUGIN=mcp LD_LIBRARY_PATH=$PWD/plugin

# run NAME WANT_STATUS [VAR=VALUE...] [-- ARGS...]: the doctor in a fresh process (under
# $wrap when set); its report in /tmp/NAME.out, the exit status checked.
run() {
  local name=$1 want=$2 vars=() rc
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  set +e
  # shellcheck disable=SC2086
  env "${vars[@]}" ${wrap:-} "$doctor" "$@" > "/tmp/$name.out" 2> "/tmp/$name.err"
  rc=$?
  set -e
  [ "$rc" = "$want" ] || { cat "/tmp/$name.out" "/tmp/$name.err" >&2; lab_fail "$name: exit status $rc, expected $want"; }
  lab_log "ok: $name exits $rc"
}

# 1. Healthy.
run healthy 0
cat /tmp/healthy.out
lab_grep '^  \[ OK \] rxe0 port 1: ACTIVE, Ethernet' /tmp/healthy.out "healthy: rxe0's port is OK"
lab_grep '^  \[ OK \] this process \(no local rank\) uses rxe0 port 1 \(GID 1 127\.0\.0\.1' /tmp/healthy.out "healthy: the selection uses rxe0's IPv4 GID"
lab_grep '^  \[ OK \] locked-memory limit \(ulimit -l\): unlimited' /tmp/healthy.out "healthy: memlock OK"
lab_grep '^  \[ OK \] NCCL_NET=MCP' /tmp/healthy.out "healthy: NCCL_NET OK"
lab_grep '^  \[ OK \] NCCL_NET_PLUGIN=mcp: libnccl-net-mcp.so loads' /tmp/healthy.out "healthy: the plugin loads by NCCL's name"
lab_refute '^  \[FAIL\]' /tmp/healthy.out "healthy: nothing FAILs"
lab_grep '^[0-9]+ OK, [0-9]+ WARN, 0 FAIL: exit status 0$' /tmp/healthy.out "healthy: the last line counts"

# 2. A port that is down: rxeD on a dummy netdev that was never brought up.
ip link add dummy0 type dummy
rdma link add rxeD type rxe netdev dummy0
run down 0
lab_grep '^  \[WARN\] rxeD port 1 is DOWN \(physical state [A-Za-z]+\): mcpnet does not use it' /tmp/down.out "down: rxeD's port is a WARN"
lab_grep '^         fix: bring the link up \(ip link set dummy0 up' /tmp/down.out "down: the remedy names the netdev"
lab_grep '^    not rxeD:1: port state is DOWN' /tmp/down.out "down: the selection says why rxeD is left out"
run down-asked 1 NCCL_IB_HCA==rxeD
lab_grep '^  \[FAIL\] this process \(no local rank\): mcpnet.s init would fail: .*rxeD' /tmp/down-asked.out "down: asking for rxeD with NCCL_IB_HCA FAILs"

# 3. A device of another network namespace (a container's neighbour on a shared HCA).
lab_netns_rxe B eth0 rxeB 10.77.0.1/24
for _ in $(seq 100); do
  grep -qs 0a4d:0001 /sys/class/infiniband/rxeB/ports/1/gids/* && break
  sleep 0.1
done
run netns 0
lab_grep '^  \[WARN\] rxeB port 1: its GIDs \(netdev eth0\) belong to another network namespace' /tmp/netns.out "netns: rxeB is foreign here"
lab_grep '^      GID [0-9]+ +10\.77\.0\.1 +RoCE v2 +eth0 +another namespace$' /tmp/netns.out "netns: its GID is listed as another namespace's"
lab_grep '^  \[ OK \] this process \(no local rank\) uses rxe0 port 1 ' /tmp/netns.out "netns: the selection still uses rxe0"
set +e
ip netns exec B "$doctor" > /tmp/in-B.out 2>&1
rc=$?
set -e
[ $rc = 0 ] || { cat /tmp/in-B.out; lab_fail "the doctor inside namespace B exits $rc"; }
lab_grep '^  \[ OK \] this process \(no local rank\) uses rxeB port 1 \(GID [0-9]+ 10\.77\.0\.1' /tmp/in-B.out "netns: inside B the selection uses rxeB"
lab_grep '^  \[WARN\] rxe0 port 1: its GIDs \(netdev lo\) belong to another network namespace' /tmp/in-B.out "netns: inside B, rxe0 is the foreign one"
lab_grep '^  \[ OK \] out-of-band channel: eth0 10\.77\.0\.1' /tmp/in-B.out "netns: inside B the out-of-band channel is B's eth0"
# Per local rank: the rank map's entries each get the plugin's own selection.
run rankmap 1 'MCPNET_RANK_MAP=0-1=rxe0;2=rxeB'
lab_grep '^  \[ OK \] local ranks 0-1 use rxe0 port 1 ' /tmp/rankmap.out "rank map: ranks 0-1 use rxe0"
lab_grep '^  \[FAIL\] local rank 2: mcpnet.s init would fail: rxeB port 1: no usable GID' /tmp/rankmap.out "rank map: rank 2's rxeB is unusable here, a FAIL"

# 4. The locked-memory limit.
# (ulimit applies to the subshell only; root's CAP_IPC_LOCK still lets it pin memory)
( ulimit -l 1024; run memlock-cap 0 )
lab_grep '^  \[WARN\] locked-memory limit \(ulimit -l\) is 1 MiB, below 64 MiB; registration works here only because this process has CAP_IPC_LOCK' /tmp/memlock-cap.out "memlock: 1 MiB with CAP_IPC_LOCK is a WARN"
( ulimit -l 1024; wrap="setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock" run memlock 1 )
lab_grep '^  \[FAIL\] locked-memory limit \(ulimit -l\) is 1 MiB, below 64 MiB: registering NCCL.s buffers fails' /tmp/memlock.out "memlock: 1 MiB without CAP_IPC_LOCK FAILs"
lab_grep '^         fix: ulimit -l unlimited' /tmp/memlock.out "memlock: the remedy says ulimit -l unlimited"

# 5. An invalid value.
run invalid 1 NCCL_IB_TIMEOUT=40
lab_grep '^  \[FAIL\] .*NCCL_IB_TIMEOUT.*40' /tmp/invalid.out "invalid: NCCL_IB_TIMEOUT=40 FAILs naming the value"
lab_grep '^  NCCL_IB_TIMEOUT +20 +environment, REFUSED: the default applies' /tmp/invalid.out "invalid: the table shows the refusal"

# 6. --json: the same report as the text (the down device asked for: WARNs and a FAIL).
run json-text 1 NCCL_IB_HCA==rxeD
run json 1 NCCL_IB_HCA==rxeD -- --json
python3 - /tmp/json-text.out /tmp/json.out <<'EOF' || lab_fail "--json does not match the text report"
import json, re, sys
text = open(sys.argv[1]).read().splitlines()
doc = json.load(open(sys.argv[2]))
tag = {"[ OK ]": "OK", "[WARN]": "WARN", "[FAIL]": "FAIL"}
from_text = sorted((tag[m.group(1)], m.group(2)) for m in
                   (re.match(r"^  (\[ OK \]|\[WARN\]|\[FAIL\]) (.*)$", l) for l in text) if m)
from_json = sorted((f["level"], f["message"]) for f in doc["findings"])
assert from_text == from_json, (set(from_text) ^ set(from_json))
last = re.match(r"^(\d+) OK, (\d+) WARN, (\d+) FAIL: exit status (\d+)$", text[-1]).groups()
s = doc["summary"]
assert [s["ok"], s["warn"], s["fail"], doc["exit_status"]] == [int(x) for x in last], (s, last)
ports = {d["name"]: d["ports"][0]["state"] for d in doc["devices"]}
assert ports["rxe0"] == "ACTIVE" and ports["rxeD"] == "DOWN" and ports["rxeB"] == "ACTIVE", ports
assert not doc["selection"][0]["ok"], doc["selection"]
assert any(f["level"] == "FAIL" and f["check"] == "selection" for f in doc["findings"])
print("json ok: %d findings, the same as the text; exit status %d" % (len(from_json), doc["exit_status"]))
EOF
lab_log "ok: --json parses and matches the text report"
