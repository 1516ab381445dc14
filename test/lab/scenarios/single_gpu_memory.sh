# lab: topology=single deadline=420
# GPU memory without a GPU, in one guest (rxe0 on lo). The lab's do-nothing
# nvidia_peermem module (test/lab/guest/fake-peermem) stands in for NVIDIA's peer-memory
# module: without it regMr(NCCL_PTR_CUDA) is refused; with it getProperties reports
# NCCL_PTR_CUDA. Then, as with GPUDirect RDMA, buffers are registered as CUDA memory and
# kept unreachable by the CPU (PROT_NONE) while the plugin holds them, so any CPU
# access by the plugin crashes: every size 0..64 MiB, grouped receives, iflush (which
# must return a request for GPU memory) and many connections, connecting to itself;
# then two processes stream GPU-like buffers to each other, every receive flushed, while
# lo goes down for 5 s: the stream recovers (replaying what was in flight) and every
# byte arrives.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
conf() { timeout 300 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so "$@"; }

# No peer-memory module: CUDA registrations are refused, with the reason.
[ ! -e /sys/module/nvidia_peermem ] || lab_fail "nvidia_peermem is loaded before the scenario loaded it"
if CONF_MAX_SIZE=4096 conf --gpu self sizes > /tmp/nomod.out 2> /tmp/nomod.err; then
  lab_fail "regMr(NCCL_PTR_CUDA) was accepted without a peer-memory module"
fi
lab_grep 'no GPU peer-memory module is loaded \(nvidia_peermem\)' /tmp/nomod.err "without the module, CUDA regMr is refused and says why"

lab_fake_peermem
lab_fake_peermem # a second call leaves it loaded
conf --gpu self props | tee /tmp/props.out
ptr=$(sed -n 's/.* ptrSupport=\(0x[0-9a-f]*\) .*/\1/p' /tmp/props.out | head -1)
[ -n "$ptr" ] && (( ptr & 2 )) || lab_fail "getProperties does not report NCCL_PTR_CUDA (ptrSupport=$ptr) with nvidia_peermem loaded"
lab_log "ok: ptrSupport=$ptr includes NCCL_PTR_CUDA"

# A crash here (SIGSEGV, exit 139) means the plugin touched GPU memory with the CPU;
# the program names the test and the message size.
CONF_CONNS=32 conf --gpu self sizes grouped flush many | tee /tmp/gpu.out
lab_grep '^GPU-like memory: regMr\(NCCL_PTR_CUDA\)' /tmp/gpu.out "the suite ran with GPU-like memory"
lab_grep '^4 passed, 0 failed' /tmp/gpu.out "sizes, grouped, flush and many passed with GPU-like memory"

# Link flap with GPU-like memory: two processes on this guest, rxe0 on lo, lo down 5 s.
# Short QP timers make the QPs fail during the outage, so the plugin must recover and
# replay what was in flight, from memory the CPU cannot read.
x=/tmp/flap
mkdir -p "$x"
pids=()
for r in a b; do
  env NCCL_IB_TIMEOUT=15 NCCL_IB_RETRY_CNT=3 MCPNET_RECOVERY_TIMEOUT=30 MCP_DRIVE_VERBOSE=1 \
    timeout 180 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role $r --xchg "$x" --msgs 300 --gpu \
    > "/tmp/flap.$r.out" 2> "/tmp/flap.$r.err" &
  pids+=($!)
done
for _ in $(seq 600); do [ -f "$x/a.streaming" ] && [ -f "$x/b.streaming" ] && break; sleep 0.1; done
[ -f "$x/a.streaming" ] && [ -f "$x/b.streaming" ] || { cat /tmp/flap.*.out; tail -n 20 /tmp/flap.*.err; lab_fail "the GPU-like stream never started"; }
sleep 0.5
lab_log "lo down for 5 s"
ip link set lo down
sleep 5
ip link set lo up
lab_log "lo up again"
rc_a=0 rc_b=0
wait "${pids[0]}" || rc_a=$?
wait "${pids[1]}" || rc_b=$?
for r in a b; do
  grep -E 'recover|WARN' "/tmp/flap.$r.err" | head -10 || true
  tail -2 "/tmp/flap.$r.out"
done
[ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] || { tail -n 40 /tmp/flap.a.err /tmp/flap.b.err; tail -n 3 /tmp/flap.a.out /tmp/flap.b.out
  lab_fail "the GPU-like stream failed across the flap (exit $rc_a, $rc_b; 139 is a CPU access to GPU memory, 124 a hang)"; }
for r in a b; do
  lab_grep '^stream: GPU-like memory' "/tmp/flap.$r.out" "stream $r ran with GPU-like memory"
  lab_grep '^stream: ok: .*GPU-like memory, every receive flushed' "/tmp/flap.$r.out" "stream $r: every message arrived intact through the flap"
done
cat /tmp/flap.a.err /tmp/flap.b.err > /tmp/flap.err
lab_grep 'recovered from .* in [0-9.]+ s \(round [0-9]+' /tmp/flap.err "the flap was recovered from, not ridden out"
