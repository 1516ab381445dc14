# lab: topology=pair deadline=420
# NCCL's proxy, replayed between two guests (bin/mcp-proxy-replay pair, data both ways):
# ring ops of SIMPLE, LL and LL128 (the hint's receives checked by their flags), three
# PXN ranks with their own pace sharing one comm pair each way, maxRecvs-grouped
# receives, iflush into GPU-like memory, regMr/deregMr during traffic; every byte
# checked. Mid-run each host's eth0 goes down for 5 s (a's about 20 s after connecting,
# b's about 40 s after) with QP timers short enough that the QPs fail during the
# outage: the replay must go on with no error through the ABI, and each host must log a
# recovery. NCCL_IB_TIMEOUT=17 (0.54 s, 4 tries: the QPs fail about 2 s into the
# outage), as pair_link_flap and pair_gpu_memory: at 15 (134 ms) this traffic between two
# emulated guests on a loaded host makes rxe retransmit thousands of times and end in
# "remote invalid request" NAKs with no link fault at all.
# The optional-completion hint stays on, as in NCCL: had mcpnet completed those receives
# early, NCCL (and this replay) would make no call on that comm until the data's flags
# arrived, and nothing would drive its recovery (this scenario failed that way 3 times
# of 3 before). GPU-like memory comes from the lab's nvidia_peermem stand-in.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
x="$LAB_XCHG/replay"
mkdir -p "$x"
lab_fake_peermem
cuda=(--require-cuda)

env NCCL_IB_TIMEOUT=17 NCCL_IB_RETRY_CNT=3 MCP_DRIVE_VERBOSE=1 \
  timeout 330 bin/mcp-proxy-replay --plugin plugin/libnccl-net-mcp.so "${cuda[@]}" --seconds 72 \
  pair --role "$LAB_HOST" --xchg "$x" > /tmp/replay.out 2> /tmp/replay.err &
pid=$!
for _ in $(seq 1200); do grep -q 'connected' /tmp/replay.out 2> /dev/null && break; sleep 0.1; done
grep -q 'connected' /tmp/replay.out || { cat /tmp/replay.out; tail -30 /tmp/replay.err; lab_fail "the replay never connected"; }
lab_log "connected; data flows both ways"
sleep $([ "$LAB_HOST" = a ] && echo 20 || echo 40)
lab_log "eth0 down for 5 s"
lab_link_down
sleep 5
lab_link_up
lab_log "eth0 up again"
rc=0
wait "$pid" || rc=$?
if [ "$rc" != 0 ]; then
  tail -30 /tmp/replay.out
  grep -E 'WARN|recover' /tmp/replay.err | head -30 || true
  lab_fail "the replay failed (exit $rc)"
fi
grep -E '^replay: (ok|node)' /tmp/replay.out
grep -E 'recovered from' /tmp/replay.err | head -5 || true
lab_grep '^replay: ok: pair mode' /tmp/replay.out "every byte verified both ways across two flaps, no error through the ABI"
lab_grep 'recovered from .* in [0-9.]+ s \(round [0-9]+' /tmp/replay.err "this host logged a recovery"
lab_grep 'PXN sends ahead of another rank: [1-9][0-9]* tried' /tmp/replay.out "a PXN rank sent ahead of another's step"
lab_grep 'hint receives [1-9]' /tmp/replay.out "LL/LL128 receives with the optional-completion hint"
lab_grep 'memory: GPU-like' /tmp/replay.out "SIMPLE and LL128 buffers were GPU-like (NCCL_PTR_CUDA)"
lab_grep 'iflush [1-9]' /tmp/replay.out "iflush where NCCL calls it"
