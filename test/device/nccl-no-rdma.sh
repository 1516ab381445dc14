#!/bin/bash
# nccl-no-rdma.sh - mcpnet inside real NCCL on a GPU host that has no RDMA device: what
# a job does when the image sets NCCL_NET_PLUGIN=mcp on such a node. Not run by ctest
# (the machines that run it have a GPU and PyTorch, and no lab); run it by hand there.
#   nccl-no-rdma.sh [PLUGIN_DIR]   PLUGIN_DIR holds libnccl-net-mcp.so (default: build/plugin)
# Three two-rank jobs on one GPU (nccl_two_hosts.py), each checked:
#   builtin  no plugin: NCCL's own transports; the data is correct
#   plugin   NCCL_NET_PLUGIN=mcp: NCCL loads the v11 table, mcpnet's init says why it
#            cannot run and that NCCL falls back, NCCL uses Socket; the data is correct
#   forced   and NCCL_NET=MCP: both ranks stop at start-up, within 60 s, with mcpnet's
#            reason and NCCL's "Failed to initialize any NET plugin" in the log
# Logs go to $OUT (the device tool's folder) or /tmp/mcpnet-nccl-no-rdma. Exit 0 when all pass.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
plugdir=$(cd "${1:-$here/../../build/plugin}" && pwd) || exit 2
[ -f "$plugdir/libnccl-net-mcp.so" ] || { echo "nccl-no-rdma: no libnccl-net-mcp.so in $plugdir"; exit 2; }
out=${OUT:-/tmp/mcpnet-nccl-no-rdma}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME=lo
fails=0

job() { # job NAME PORT ENV...: both ranks; the exit codes in $rc0 $rc1
  local name=$1 port=$2 pids=() r
  shift 2
  for r in 0 1; do
    env "$@" timeout 60 python3 "$here/nccl_two_hosts.py" "$r" "$port" > "$out/$name.$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
}
expect() { # expect NAME PATTERN WHY: every rank's log of job NAME matches PATTERN, else WHY
  local r
  for r in 0 1; do
    if grep -qE "$2" "$out/$1.$r.log"; then :; else
      echo "nccl-no-rdma: FAIL $1 rank $r: $3"
      fails=$((fails + 1))
    fi
  done
}

job builtin 29511
[ "$rc0$rc1" = 00 ] || { echo "nccl-no-rdma: FAIL builtin: ranks exited $rc0 $rc1"; fails=$((fails + 1)); }
expect builtin 'correct=True' 'data not correct'

job plugin 29512 NCCL_NET_PLUGIN=mcp LD_LIBRARY_PATH="$plugdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ "$rc0$rc1" = 00 ] || { echo "nccl-no-rdma: FAIL plugin: ranks exited $rc0 $rc1"; fails=$((fails + 1)); }
expect plugin 'Loaded net plugin MCP \(v11\)' 'NCCL did not load the v11 table'
expect plugin 'NET/MCP .*NCCL falls back to its own transports unless NCCL_NET=MCP' 'no reason from mcpnet'
expect plugin 'Using network Socket' 'NCCL did not fall back to Socket'
expect plugin 'correct=True' 'data not correct'

job forced 29513 NCCL_NET_PLUGIN=mcp NCCL_NET=MCP LD_LIBRARY_PATH="$plugdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for rc in "$rc0" "$rc1"; do
  case $rc in
    0) echo "nccl-no-rdma: FAIL forced: a rank ran without mcpnet"; fails=$((fails + 1)) ;;
    124) echo "nccl-no-rdma: FAIL forced: a rank hung for 60 s"; fails=$((fails + 1)) ;;
  esac
done
expect forced 'NET/MCP .*NCCL falls back to its own transports unless NCCL_NET=MCP' 'no reason from mcpnet'
expect forced 'Failed to initialize any NET plugin' 'NCCL did not stop at its net init'

for f in "$out"/*.0.log; do
  echo "== $(basename "$f" .0.log), rank 0:"
  grep -E 'NET/Plugin|NET/MCP|Using network|nccl_two_hosts|Failed to initialize|Error' "$f" | cut -c1-220
done
[ "$fails" = 0 ] && echo "nccl-no-rdma: all three jobs as expected" && exit 0
echo "nccl-no-rdma: $fails check(s) failed (logs in $out)"
exit 1
