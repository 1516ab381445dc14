# lab: topology=pair deadline=420
# GPU memory without a GPU, between two hosts. Each guest loads the lab's do-nothing
# nvidia_peermem module (test/lab/guest/fake-peermem), so getProperties reports
# NCCL_PTR_CUDA; buffers are registered with regMr(NCCL_PTR_CUDA) as NCCL does with
# GPUDirect RDMA and kept unreachable by the CPU (PROT_NONE) while the plugin holds
# them, so a CPU access by the plugin crashes. Both hosts move data both ways at once:
# every size 0..64 MiB, grouped receives, iflush (a request for GPU memory). Then a
# verified stream both ways from GPU-like buffers, every receive flushed, while host a's
# eth0 goes down for 5 s with QP timers short enough that the QPs fail: the connection
# recovers, replays what was in flight, and every byte arrives.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
conf() { timeout 300 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so "$@"; }
x="$LAB_XCHG/gpu"
mkdir -p "$x/conf" "$x/flap"

lab_fake_peermem
conf --gpu pair --role "$LAB_HOST" --xchg "$x/conf" props sizes grouped flush | tee /tmp/gpu.out
ptr=$(sed -n 's/.* ptrSupport=\(0x[0-9a-f]*\) .*/\1/p' /tmp/gpu.out | head -1)
[ -n "$ptr" ] && (( ptr & 2 )) || lab_fail "getProperties does not report NCCL_PTR_CUDA (ptrSupport=$ptr) with nvidia_peermem loaded"
lab_log "ok: ptrSupport=$ptr includes NCCL_PTR_CUDA"
lab_grep '^GPU-like memory: regMr\(NCCL_PTR_CUDA\)' /tmp/gpu.out "the suite ran with GPU-like memory"
lab_grep '^4 passed, 0 failed' /tmp/gpu.out "props, sizes, grouped and flush passed with GPU-like memory, both ways"

# One link flap under a GPU-like stream both ways; host a's link goes down. QP timeout 17
# (0.54 s, 4 tries) as in pair_link_flap: at 15, rxe between loaded guests can end in
# "remote invalid request" NAKs that have nothing to do with the flap.
env NCCL_IB_TIMEOUT=17 NCCL_IB_RETRY_CNT=3 MCPNET_RECOVERY_TIMEOUT=30 MCP_DRIVE_VERBOSE=1 \
  timeout 180 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role "$LAB_HOST" --xchg "$x/flap" \
  --msgs 300 --gpu > /tmp/flap.out 2> /tmp/flap.err &
pid=$!
if [ "$LAB_HOST" = a ]; then
  for _ in $(seq 600); do [ -f "$x/flap/a.streaming" ] && [ -f "$x/flap/b.streaming" ] && break; sleep 0.1; done
  [ -f "$x/flap/a.streaming" ] && [ -f "$x/flap/b.streaming" ] || { cat /tmp/flap.out; tail -n 20 /tmp/flap.err; lab_fail "the GPU-like stream never started"; }
  sleep 0.5
  lab_log "eth0 down for 5 s"
  lab_link_down
  sleep 5
  lab_link_up
  lab_log "eth0 up again"
fi
rc=0
wait "$pid" || rc=$?
grep -E 'recover|WARN' /tmp/flap.err | head -20 || true
tail -n 3 /tmp/flap.out
[ "$rc" = 0 ] || { tail -n 40 /tmp/flap.err; lab_fail "the GPU-like stream failed across the flap (exit $rc; 139 is a CPU access to GPU memory, 124 a hang)"; }
lab_grep '^stream: GPU-like memory' /tmp/flap.out "the stream ran with GPU-like memory"
lab_grep '^stream: ok: .*GPU-like memory, every receive flushed' /tmp/flap.out "every message arrived intact through the flap, every receive flushed"
lab_grep 'recovered from .* in [0-9.]+ s \(round [0-9]+' /tmp/flap.err "this host logged its recovery"
lab_signal "gpu.done.$LAB_HOST"
lab_wait "gpu.done.$([ "$LAB_HOST" = a ] && echo b || echo a)" 120 > /dev/null
