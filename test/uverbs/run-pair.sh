#!/bin/bash
# run-pair.sh - mcpnet between two processes on the userspace verbs device, no VM: the
# conformance suite, NCCL's proxy replayed, and mcp-stream through a fault, each as
# ctest uverbs_<mode> (label uverbs; scripts/test runs them), in seconds.
#
#   run-pair.sh BUILD_DIR conformance|replay|stream
#
# Both processes load the plugin with MCPNET_VERBS_LIBRARY=<build>/lib/libmcp-uverbs.so
# and nothing else set for the device (its defaults); NCCL_SOCKET_IFNAME=lo carries the
# out-of-band channel. Each run gets a fabric folder of its own (UVERBS_FABRIC), so
# runs in parallel never meet. The device says GPU peer memory is there (its sysfs view
# has module/nvidia_peermem), so the programs' GPU-like mode (buffers registered as
# NCCL_PTR_CUDA and PROT_NONE while the plugin holds them) runs as in the lab's
# *_gpu_memory scenarios: a CPU access by the plugin is a crash.
#
# These run beside the lab's real kernel verbs (soft-RoCE in QEMU), never instead:
# where the two disagree, the lab is right (CONTRIBUTING.md).
set -uo pipefail
build=$(cd "${1:?usage: run-pair.sh BUILD_DIR MODE}" && pwd)
mode=${2:?usage: run-pair.sh BUILD_DIR conformance|replay|stream}
cd "$build" || exit 2

work=$(mktemp -d /tmp/mcp-uvpair.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
  wait 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export MCPNET_VERBS_LIBRARY=$build/lib/libmcp-uverbs.so NCCL_SOCKET_IFNAME=lo UVERBS_FABRIC=$work/f
mkdir -p "$UVERBS_FABRIC"
ctl() { "$build/bin/mcp-uverbs-ctl" "$@"; }
plugin=(--plugin "$build/plugin/libnccl-net-mcp.so")

fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out "$work"/*.err; do
    [ -f "$f" ] || continue
    echo "---- ${f##*/} (last 25 lines)"
    tail -n 25 "$f"
  done
  exit 1
}
expect() { # expect REGEX FILE WHAT
  grep -Eq -- "$1" "$2" || fail "$3: no line matching '$1' in ${2##*/}"
  echo "ok: $3"
}
# both NAME TIMEOUT CMD...: the command as role a and as role b, in the background,
# output in $work/NAME.{a,b}.{out,err}; their pids in pa and pb. The role and the
# rendezvous folder follow the word "pair" in CMD, or end it when it has none.
both() {
  local name=$1 t=$2 r
  shift 2
  mkdir -p "$work/x.$name"
  for r in a b; do
    local args=() w seen=0
    for w in "$@"; do
      args+=("$w")
      if [ "$w" = pair ]; then
        args+=(--role "$r" --xchg "$work/x.$name")
        seen=1
      fi
    done
    [ "$seen" = 1 ] || args+=(--role "$r" --xchg "$work/x.$name")
    timeout "$t" "${args[@]}" > "$work/$name.$r.out" 2> "$work/$name.$r.err" &
    if [ "$r" = a ]; then pa=$!; else pb=$!; fi
  done
  pids+=("$pa" "$pb")
}
# The pid of the program under `timeout` (the device's control socket is per process).
child() { pgrep -P "$1" | head -1; }
wait_both() { # wait_both WHAT: both must exit 0
  local ra=0 rb=0
  wait "$pa" || ra=$?
  wait "$pb" || rb=$?
  [ "$ra" = 0 ] && [ "$rb" = 0 ] || fail "$1: exit $ra (a), $rb (b); 139 is a CPU access to GPU-like memory, 124 a hang"
}

case $mode in
conformance)
  # One process connected to itself, then two processes moving data both ways at once.
  timeout 120 bin/mcp-conformance "${plugin[@]}" self props sizes grouped optional flush many inflight-close \
    threads > "$work/self.out" 2> "$work/self.err" || fail "self: the suite failed"
  expect '^8 passed, 0 failed' "$work/self.out" "self: props sizes grouped optional flush many inflight-close threads"
  MCPNET_FORCE_FLUSH=1 timeout 60 bin/mcp-conformance "${plugin[@]}" self flush > "$work/flush.out" \
    2> "$work/flush.err" || fail "self: forced flush failed"
  LD_PRELOAD=$build/lib/libmcp-alloc-count.so timeout 120 bin/mcp-conformance "${plugin[@]}" self noalloc \
    > "$work/noalloc.out" 2> "$work/noalloc.err" || fail "self: noalloc failed"
  expect '^ok +noalloc' "$work/noalloc.out" "no allocation on the data path, device threads included"
  CONF_CONNS=32 both pair 180 bin/mcp-conformance "${plugin[@]}" pair props sizes grouped optional flush many
  wait_both "pair"
  for r in a b; do
    expect '^6 passed, 0 failed' "$work/pair.$r.out" "pair, role $r: props sizes grouped optional flush many, both ways"
  done
  expect 'mcpuv0 pciPath=NULL guid=[0-9a-f:]+ speed=100000 port=1 ptrSupport=0x7' "$work/pair.a.out" \
    "properties: the device's speed, GPU and DMA-BUF pointers"
  CONF_CONNS=32 both gpu 180 bin/mcp-conformance --gpu "${plugin[@]}" pair props sizes grouped flush many
  wait_both "pair, GPU-like memory"
  for r in a b; do
    expect '^GPU-like memory: regMr\(NCCL_PTR_CUDA\)' "$work/gpu.$r.out" "role $r ran with GPU-like memory"
    expect '^5 passed, 0 failed' "$work/gpu.$r.out" "pair, GPU-like, role $r: props sizes grouped flush many"
  done
  # The peer process dies with comms open: closing ours returns promptly.
  both gone 120 bin/mcp-conformance "${plugin[@]}" pair peergone
  for _ in $(seq 300); do [ -f "$work/x.gone/b.ready" ] && break; sleep 0.1; done
  [ -f "$work/x.gone/b.ready" ] || fail "peergone: role b never got ready"
  kill -9 "$(child "$pb")" 2> /dev/null
  wait "$pa" || fail "peergone: role a failed"
  wait "$pb" 2> /dev/null
  expect '^ok +peergone' "$work/gone.a.out" "the peer process killed: closing returned promptly"
  ;;
replay)
  # NCCL 2.28's proxy (threads, ticks, slots, PXN, LL/LL128 hints, GPU-like SIMPLE with
  # iflush) for 12 s both ways; 3 s in, the link between the two is cut for 2 s with QP
  # timers short enough that the QPs fail (134 ms x 4; shorter ones fail QPs of a
  # loaded 2-core host with no fault at all): both must recover and lose nothing.
  NCCL_IB_TIMEOUT=15 NCCL_IB_RETRY_CNT=3 MCP_DRIVE_VERBOSE=1 both replay 150 bin/mcp-proxy-replay "${plugin[@]}" \
    --require-cuda --seconds 12 pair
  for _ in $(seq 300); do grep -q connected "$work/replay.a.out" 2> /dev/null && break; sleep 0.1; done
  grep -q connected "$work/replay.a.out" || fail "the replay never connected"
  sleep 3
  a=$(child "$pa") b=$(child "$pb")
  ctl "$a" link "$b" down > /dev/null || fail "cutting the link a-b"
  sleep 2
  ctl "$a" link "$b" up > /dev/null || fail "mending the link a-b"
  wait_both "replay"
  for r in a b; do
    expect '^replay: ok: pair mode' "$work/replay.$r.out" "role $r: every byte verified both ways through the cut"
    expect 'recovered from .* in [0-9.]+ s \(round [0-9]+' "$work/replay.$r.err" "role $r logged a recovery"
  done
  expect 'memory: GPU-like' "$work/replay.a.out" "SIMPLE and LL128 buffers were GPU-like (NCCL_PTR_CUDA)"
  expect 'hint receives [1-9]' "$work/replay.a.out" "LL/LL128 receives with the optional-completion hint"
  expect 'iflush [1-9]' "$work/replay.a.out" "iflush where NCCL calls it"
  ;;
stream)
  # A verified stream both ways from GPU-like buffers, every receive flushed; once it
  # streams, a's port goes down for 2 s (IBV_EVENT_PORT_ERR, sysfs DOWN): the QPs fail
  # (134 ms x 4), the connection recovers and replays, every byte arrives. Each side
  # closes only once the other has everything.
  NCCL_IB_TIMEOUT=15 NCCL_IB_RETRY_CNT=3 MCPNET_RECOVERY_TIMEOUT=30 MCP_DRIVE_VERBOSE=1 \
    both stream 150 bin/mcp-stream "${plugin[@]}" --msgs 1500 --gpu --finish-together
  x=$work/x.stream
  for _ in $(seq 300); do [ -f "$x/a.streaming" ] && [ -f "$x/b.streaming" ] && break; sleep 0.1; done
  [ -f "$x/a.streaming" ] && [ -f "$x/b.streaming" ] || fail "the stream never started"
  a=$(child "$pa")
  ctl "$a" port 0 down > /dev/null || fail "taking a's port down"
  sleep 2
  ctl "$a" port 0 up > /dev/null || fail "bringing a's port up"
  wait_both "stream"
  for r in a b; do
    expect '^stream: ok: .*GPU-like memory, every receive flushed' "$work/stream.$r.out" \
      "role $r: every message arrived intact through the port flap"
  done
  expect 'port error event: the link went down' "$work/stream.a.err" "a heard the port go down (async event)"
  expect 'recovered from .* in [0-9.]+ s \(round [0-9]+' "$work/stream.a.err" "a recovered"
  ;;
*)
  echo "run-pair.sh: unknown mode $mode" >&2
  exit 2
  ;;
esac
echo "uverbs $mode: passed"
