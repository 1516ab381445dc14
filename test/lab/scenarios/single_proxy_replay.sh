# lab: topology=single deadline=420
# NCCL's proxy, replayed in one guest (bin/mcp-proxy-replay self: two nodes in one
# process, each with a progress and a service thread, data both ways over rxe0): ring
# ops of SIMPLE (1 MiB requests of 2 steps), LL and LL128 with the optional-completion
# hint, checked by their flags; three PXN ranks (tags 1..3) sharing one comm pair, each
# with its own pace, so a rank's step k+1 comes before another's step k; maxRecvs-grouped
# receives whose n shrinks; iflush into GPU-like memory; regMr/deregMr during traffic.
# Every byte is checked; a NULL request is retried, an error through the ABI fails.
# GPU-like memory: NCCL_PTR_CUDA registrations made unreadable, through the lab's
# nvidia_peermem stand-in.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
lab_fake_peermem
cuda=(--require-cuda)

# replay NAME ARGS...: runs the replay, fails the scenario with its output if it fails.
replay() {
  local name=$1 rc=0
  shift
  timeout 280 bin/mcp-proxy-replay --plugin plugin/libnccl-net-mcp.so "${cuda[@]}" "$@" \
    > "/tmp/$name.out" 2> "/tmp/$name.err" || rc=$?
  if [ "$rc" != 0 ]; then
    tail -30 "/tmp/$name.out"
    grep -E 'WARN' "/tmp/$name.err" | head -20 || true
    lab_fail "$name: the replay failed (exit $rc)"
  fi
  grep -E '^replay: (ok|node)' "/tmp/$name.out"
  lab_grep '^replay: ok: self mode' "/tmp/$name.out" "$name: every byte verified, no error through the ABI"
}

# Groups of all three PXN ranks (maxRecvs as the plugin reports it).
replay pxn --seconds 45 self
lab_grep 'PXN sends ahead of another rank: [1-9][0-9]* tried' /tmp/pxn.out "a PXN rank sent ahead of another's step"
lab_grep 'PXN irecvs by n: 3: [1-9][0-9]*, 2: [1-9][0-9]*, 1: [1-9]' /tmp/pxn.out "grouped receives of 3, and of 2 and 1 as ranks ran out of steps"
lab_grep 'hint receives [1-9]' /tmp/pxn.out "LL/LL128 receives with the optional-completion hint"
lab_grep '0-byte steps [1-9]' /tmp/pxn.out "0-byte steps"
lab_grep 'extra regMr [1-9]' /tmp/pxn.out "registrations from the service thread during traffic"
lab_grep 'memory: GPU-like' /tmp/pxn.out "SIMPLE and LL128 buffers were GPU-like (NCCL_PTR_CUDA)"
lab_grep 'iflush [1-9]' /tmp/pxn.out "iflush where NCCL calls it"
# maxRecvs 2: the three ranks split into a group of two and a group of one on one comm.
replay split --seconds 15 --max-recvs 2 self
lab_grep 'PXN irecvs by n: 3: 0, 2: [1-9][0-9]*, 1: [1-9]' /tmp/split.out "groups of at most 2 on one comm"
