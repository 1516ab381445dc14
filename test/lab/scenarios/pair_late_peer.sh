# lab: topology=pair deadline=1200 overlap=1
# A late peer is not a dead peer (issue 12). In a large job, or with NCCL's runtime
# connection, one rank reaches its accept or connect minutes after another; NCCL's IB
# transport waits for it, and so must mcpnet. Three runs of a verified stream (200
# messages each way), each with one host 72 s late (mcp-stream --late):
# - idle: host a makes no call into the plugin for 72 s after publishing its handle: b's
#   connect sits in a's listen backlog with no HELLO (main failed it after 10 s, "sent no
#   HELLO within 10 s");
# - accept: host b connects, then calls accept 72 s after its first connect call: a's
#   connect waits for the CONN_ACK (main failed it at MCPNET_CONNECT_TIMEOUT=30);
# - connect: host a accepts, then calls connect 72 s after its first accept call.
# Every run must connect after the 72 s, move its data intact, and the host that waited
# past 60 s must have said so with a WARN naming both ends ("still waiting after").
# The three runs are separate processes with handles and exchange folders of their own,
# so they run at the same time: each is still 72 s late, the scenario waits 72 s once
# rather than three times. Its asserts are lower bounds (connected after 67 s or more)
# and generous timeouts, so it may share the machine with other tests (overlap=1).
# The firewall and unreachable cases keep their deadlines (pair_faults, single_conformance).
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
x="$LAB_XCHG/late"

# start NAME LATE_HOST MODE: one stream in the background with LATE_HOST late by 72 s in
# MODE; its exit status lands in /tmp/NAME.rc.
start() {
  local name=$1 late_host=$2 mode=$3 args=()
  mkdir -p "$x/$name"
  [ "$LAB_HOST" = "$late_host" ] && args=(--late "$mode:72")
  (
    rc=0
    MCP_DRIVE_VERBOSE=1 timeout 400 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role "$LAB_HOST" \
      --xchg "$x/$name" --msgs 200 --small --finish-together "${args[@]}" > "/tmp/$name.out" 2> "/tmp/$name.err" || rc=$?
    echo "$rc" > "/tmp/$name.rc"
  ) &
}

# check NAME LATE_HOST MODE: the finished stream NAME connected only once the late host
# came, moved its data intact, and nothing gave up on the late peer.
check() {
  local name=$1 late_host=$2 mode=$3 rc took
  rc=$(cat "/tmp/$name.rc")
  grep -E '^stream: (connected|ok|FAIL)' "/tmp/$name.out" || true
  if [ "$rc" != 0 ]; then
    grep -E 'WARN|FAIL|failed' "/tmp/$name.err" | tail -20 >&2 || true
    lab_fail "$name: the stream failed (rc $rc) with host $late_host 72 s late in $mode"
  fi
  lab_grep '^stream: ok: 200 messages sent, 200 received, [0-9]+ bytes received and verified' "/tmp/$name.out" \
    "$name: 200 messages each way arrived intact"
  took=$(sed -n 's/^stream: connected after \([0-9.]*\) s/\1/p' "/tmp/$name.out")
  lab_log "$name: connected after $took s"
  awk -v t="$took" 'BEGIN { exit !(t >= 67) }' || lab_fail "$name: connected after $took s, before the late host came"
  lab_refute 'sent no HELLO|no answer within|not completed within' "/tmp/$name.err" "$name: nothing gave up on the late peer"
  grep -m1 'WARN.*still waiting' "/tmp/$name.err" || true
}

start idle a idle
start accept b accept
start connect a connect
wait
check idle a idle
check accept b accept
check connect a connect
# The prompt host's connect waited on a's kernel-held TCP connection for 72 s.
if [ "$LAB_HOST" = b ]; then
  lab_grep 'INFO.*connect to .*: waiting [0-9]+ s for its accept; this end is .* pid [0-9]+' /tmp/idle.err \
    "idle: an INFO said who waits for whom after 10 s"
  lab_grep 'WARN.*connect to .*: still waiting after [0-9]+ s for its accept; this end is .*has made no call into mcpnet' \
    /tmp/idle.err "idle: a WARN after 60 s named both ends and said the peer makes no call"
fi
if [ "$LAB_HOST" = a ]; then
  lab_grep 'WARN.*connect to .* pid [0-9]+.*: still waiting after [0-9]+ s for its accept; this end is .* pid [0-9]+' \
    /tmp/accept.err "accept: a WARN after 60 s named both ends"
fi
lab_barrier done 300
lab_log "ok: a peer 72 s late was waited for in all three runs, and the data moved"
