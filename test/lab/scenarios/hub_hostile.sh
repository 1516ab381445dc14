# lab: topology=hub hosts=3 deadline=900
# A hostile tenant on the same network (issue 35). Hosts a and b run a verified mcpnet
# stream (bin/mcp-stream, 1500 messages each way, every byte checked) while host c, a
# stranger, attacks a's out-of-band listener for 20 s (bin/mcp-oob-attack): 300
# connections held open and silent, replaced as a closes them; HTTP and random bytes;
# PINGs before any HELLO; a HELLO whose host name carries a newline and a forged "NCCL
# WARN" line; HELLOs for listens that do not exist; and, with a's listen id (as if it had
# leaked, read from the handle a published) and b's process nonce claimed as c's own,
# requests with guessed MACs. c never has a listen key. Asserted:
#   - the stream completes on both hosts, every byte verified;
#   - a closed c's connections (c counts them);
#   - after the attack, a process that keeps calling into the plugin (--linger 30)
#     holds no more descriptors than when streaming began (1 spare) and at most 256 KiB
#     more heap;
#   - a's log: at most 60 WARN lines for the whole run (the rate limit: one line a minute
#     per message and address, plus the counts), none of them forged, and the attack
#     seen (wrong proofs, connections that did not prove themselves).
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
x="$LAB_XCHG/hostile"
mkdir -p "$x"
[ "$LAB_TOPOLOGY" = hub ] && [ "$LAB_NHOSTS" = 3 ] || lab_fail "run me in the hub topology with 3 hosts"
lab_barrier up 600
lab_wait_gid rxe0 "$(lab_ipv4_gid "$LAB_SELF_IP")"

case "$LAB_HOST" in
a | b)
  linger=()
  [ "$LAB_HOST" = a ] && linger=(--linger 30)
  set +e
  MCP_DRIVE_VERBOSE=1 timeout 600 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role "$LAB_HOST" \
    --xchg "$x" --msgs 1500 --small --finish-together "${linger[@]}" > /tmp/stream.out 2> /tmp/stream.err
  rc=$?
  set -e
  grep -E '^stream: (connected|ok|resources|FAIL)' /tmp/stream.out || true
  if [ $rc != 0 ]; then
    grep -E 'WARN|FAIL|failed' /tmp/stream.err | tail -20 >&2 || true
    lab_fail "mcp-stream exited with $rc"
  fi
  lab_grep '^stream: ok: 1500 messages sent, 1500 received, [0-9]+ bytes received and verified' /tmp/stream.out \
    "$LAB_HOST: 1500 messages each way arrived intact while c attacked"
  if [ "$LAB_HOST" = a ]; then
    read -r fds0 heap0 fds1 heap1 <<< "$(sed -n \
      's/^stream: resources: \([0-9]*\) descriptors and \([0-9]*\) bytes of heap when streaming began, \([0-9]*\) and \([0-9]*\) after.*/\1 \2 \3 \4/p' \
      /tmp/stream.out)"
    [ -n "${heap1:-}" ] || lab_fail "a: no resources line"
    [ "$fds1" -le $((fds0 + 1)) ] || lab_fail "a: $fds1 descriptors after the attack, $fds0 before"
    [ "$heap1" -le $((heap0 + 262144)) ] || lab_fail "a: $heap1 bytes of heap after the attack, $heap0 before"
    lab_log "ok: a's descriptors $fds0 -> $fds1, heap $heap0 -> $heap1 bytes across the attack"
    warns=$(grep -c '^\[WARN\]' /tmp/stream.err || true)
    grep '^\[WARN\]' /tmp/stream.err | cut -c1-200 || true
    [ "$warns" -le 60 ] || lab_fail "a: $warns WARN lines, more than 60"
    lab_log "ok: a logged $warns WARN lines for the whole attack"
    ! grep -q 'forged' /tmp/stream.err || lab_fail "a: a peer's string reached the log"
    lab_log "ok: no forged line in a's log"
    lab_grep 'with a wrong proof of its key' /tmp/stream.err "a: the guessed MACs were refused"
    lab_grep 'did not prove itself|to make room' /tmp/stream.err "a: the flood was closed"
    lab_grep 'and [0-9]+ more like it from 192\.0\.2\.3 in the last 60 s' /tmp/stream.err \
      "a: the repeats were counted, not printed"
  fi
  ;;
c)
  for _ in $(seq 1200); do
    [ -f "$x/a.streaming" ] && break
    sleep 0.25
  done
  [ -f "$x/a.streaming" ] || lab_fail "c: a never started streaming"
  bin/mcp-oob-attack --handle "$x/a.stream.handle" --replay-handle "$x/b.stream.handle" --seconds 20 \
    --flood 300 | tee /tmp/attack.out
  closed=$(sed -n 's/.*), \([0-9]*\) closed by the victim.*/\1/p' /tmp/attack.out)
  [ "${closed:-0}" -gt 100 ] || lab_fail "c: a closed only ${closed:-0} of the attacker's connections"
  lab_log "ok: a closed $closed of c's connections"
  ;;
esac
lab_barrier done 300
