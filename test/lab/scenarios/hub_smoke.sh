# lab: topology=hub hosts=3 deadline=1500
# The hub topology works end to end (three guests a, b, c on one virtual segment,
# bin/lab-hub switching between them), and so do the helpers a fleet test needs:
#   wire     every guest pings every other over IPv4 and IPv6, and its rxe0 is ACTIVE
#            with the GIDs of its own addresses;
#   streams  a verified mcpnet stream (bin/mcp-stream, 200 messages each way) on each
#            edge of the ring a-b, b-c, c-a, all three at once;
#   ports    lab_block_ports on b: a TCP connect from every other guest to a blocked
#            port of b times out (drop) or is refused (reject), one outside the range
#            still connects, and after lab_unblock_ports the blocked one connects again;
#   link     lab_link_down on c: no other guest reaches c (IPv4 and IPv6), and after
#            lab_link_up they all do again.
# Guests go through the rounds together (lab_barrier) so that none checks a state the
# others have not set up yet, and none powers off while another still talks to it.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
x="$LAB_XCHG/smoke"
mkdir -p "$x"
[ "$LAB_TOPOLOGY" = hub ] && [ "$LAB_NHOSTS" = 3 ] || lab_fail "run me in the hub topology with 3 hosts"
read -r -a names <<<"$LAB_HOSTS"
read -r -a ips <<<"$LAB_HOST_IPS"
[ "${names[$LAB_HOST_INDEX]}" = "$LAB_HOST" ] && [ "${ips[$LAB_HOST_INDEX]}" = "$LAB_SELF_IP" ] ||
  lab_fail "LAB_HOSTS/LAB_HOST_IPS ($LAB_HOSTS / $LAB_HOST_IPS) disagree with LAB_HOST=$LAB_HOST, LAB_SELF_IP=$LAB_SELF_IP"
[ "$(lab_host_ip "$LAB_HOST")" = "$LAB_SELF_IP" ] || lab_fail "lab_host_ip $LAB_HOST is not $LAB_SELF_IP"
ip6_of() { echo "2001:db8::$(($1 + 1))"; }

# ping4/ping6 ADDR [TRIES]: one echo answered within TRIES attempts of 2 s.
ping_ok() {
  local fam=$1 addr=$2 tries=${3:-30} i
  for ((i = 0; i < tries; i++)); do
    busybox ping "-$fam" -c 1 -W 2 "$addr" > /tmp/ping.out 2>&1 && return 0
  done
  cat /tmp/ping.out >&2
  return 1
}
# ping_none FAM ADDR: three echoes, none answered.
ping_none() { ! busybox ping "-$1" -c 3 -W 2 "$2" > /tmp/ping.out 2>&1; }
# tcp_try ADDR PORT: "connected", "refused" or "timeout" (nothing within 6 s).
tcp_try() {
  local rc=0
  timeout 6 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2> /tmp/tcp.err || rc=$?
  if [ $rc = 0 ]; then echo connected
  elif [ $rc = 124 ]; then echo timeout
  elif grep -q 'Connection refused' /tmp/tcp.err; then echo refused
  else echo "other ($(cat /tmp/tcp.err))"; fi
}
expect_tcp() {
  local got
  got=$(tcp_try "$1" "$2")
  [ "$got" = "$3" ] || lab_fail "$4: a TCP connect to $1:$2 gave '$got', expected '$3'"
  lab_log "ok: $4 ($1:$2 $got)"
}

lab_log "host $LAB_HOST (index $LAB_HOST_INDEX of $LAB_NHOSTS) at $LAB_SELF_IP and $LAB_SELF_IP6"
lab_barrier up 600

# Round 1: the wire.
lab_wait_gid rxe0 "$(lab_ipv4_gid "$LAB_SELF_IP")"
lab_log "ok: rxe0 is ACTIVE with the GID of $LAB_SELF_IP"
gid6=$(printf '2001:0db8:0000:0000:0000:0000:0000:%04x' $((LAB_HOST_INDEX + 1)))
lab_wait_gid rxe0 "$gid6"
lab_log "ok: rxe0 has the GID of $LAB_SELF_IP6 ($gid6)"
for ((k = 0; k < LAB_NHOSTS; k++)); do
  [ "$k" = "$LAB_HOST_INDEX" ] && continue
  ping_ok 4 "${ips[$k]}" || lab_fail "no IPv4 ping answer from ${names[$k]} (${ips[$k]})"
  ping_ok 6 "$(ip6_of $k)" || lab_fail "no IPv6 ping answer from ${names[$k]} ($(ip6_of $k))"
  lab_log "ok: ${names[$k]} answers pings at ${ips[$k]} and $(ip6_of $k)"
done
lab_barrier wire

# Round 2: a stream on each edge of the ring, this host as role a toward the next host
# and as role b toward the previous one, both at once.
next=${names[$(((LAB_HOST_INDEX + 1) % LAB_NHOSTS))]}
prev=${names[$(((LAB_HOST_INDEX + LAB_NHOSTS - 1) % LAB_NHOSTS))]}
stream() {
  local edge=$1 role=$2
  mkdir -p "$x/$edge"
  MCP_DRIVE_VERBOSE=1 timeout 600 bin/mcp-stream --plugin plugin/libnccl-net-mcp.so --role "$role" \
    --xchg "$x/$edge" --msgs 200 --small --finish-together > "/tmp/$edge.out" 2> "/tmp/$edge.err"
}
stream "$LAB_HOST$next" a & pa=$!
stream "$prev$LAB_HOST" b & pb=$!
for edge in "$LAB_HOST$next:$pa" "$prev$LAB_HOST:$pb"; do
  rc=0
  wait "${edge#*:}" || rc=$?
  edge=${edge%:*}
  grep -E '^stream: (connected|ok|FAIL)' "/tmp/$edge.out" || true
  if [ $rc != 0 ]; then
    grep -E 'WARN|FAIL|failed' "/tmp/$edge.err" | tail -20 >&2 || true
    lab_fail "stream $edge: mcp-stream exited with $rc"
  fi
  lab_grep '^stream: ok: 200 messages sent, 200 received, [0-9]+ bytes received and verified' "/tmp/$edge.out" \
    "stream ${edge:0:1}-${edge:1:1}: 200 messages each way arrived intact"
done
lab_barrier streams

# Round 3: blocked ports on b. b listens on 41005 (inside the range) and 41020 (outside).
blocker=b
bip=$(lab_host_ip $blocker)
if [ "$LAB_HOST" = $blocker ]; then
  python3 -c '
import select, socket, sys
socks = []
for port in sys.argv[1:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(port)))
    s.listen(16)
    socks.append(s)
while True:
    for s in select.select(socks, [], [])[0]:
        s.accept()[0].close()
' 41005 41020 &
  listener=$!
  lab_wait_port 41005 30
  lab_wait_port 41020 30
fi
lab_barrier listening
[ "$LAB_HOST" != $blocker ] && expect_tcp "$bip" 41005 connected "ports: b's port 41005 is open before the block"
lab_barrier open-checked
[ "$LAB_HOST" = $blocker ] && { lab_block_ports 41000-41010; lab_log "blocked 41000-41010 (drop)"; }
lab_barrier blocked
if [ "$LAB_HOST" != $blocker ]; then
  expect_tcp "$bip" 41005 timeout "ports: b drops a connect to 41005 (in its blocked range)"
  expect_tcp "$bip" 41020 connected "ports: b's 41020 (outside the range) still connects"
fi
lab_barrier drop-checked
[ "$LAB_HOST" = $blocker ] && { lab_unblock_ports; lab_block_ports 41000-41010 reject; lab_log "blocked 41000-41010 (reject)"; }
lab_barrier rejecting
[ "$LAB_HOST" != $blocker ] && expect_tcp "$bip" 41005 refused "ports: b refuses a connect to 41005 (reject)"
lab_barrier reject-checked
[ "$LAB_HOST" = $blocker ] && { lab_unblock_ports; lab_log "unblocked"; }
lab_barrier unblocked
[ "$LAB_HOST" != $blocker ] && expect_tcp "$bip" 41005 connected "ports: b's 41005 connects again after lab_unblock_ports"
lab_barrier ports-done
[ "$LAB_HOST" = $blocker ] && kill "$listener"

# Round 4: c's link goes down, then up.
downed=c
k_down=2
if [ "$LAB_HOST" = $downed ]; then lab_link_down; lab_log "eth0 down"; fi
lab_barrier down
if [ "$LAB_HOST" != $downed ]; then
  ping_none 4 "${ips[$k_down]}" || lab_fail "link: c (${ips[$k_down]}) still answers an IPv4 ping with its link down"
  ping_none 6 "$(ip6_of $k_down)" || lab_fail "link: c ($(ip6_of $k_down)) still answers an IPv6 ping with its link down"
  lab_log "ok: link: c is unreachable with its link down"
fi
lab_barrier down-checked
if [ "$LAB_HOST" = $downed ]; then lab_link_up; lab_log "eth0 up"; fi
lab_barrier up-again
if [ "$LAB_HOST" != $downed ]; then
  ping_ok 4 "${ips[$k_down]}" || lab_fail "link: c (${ips[$k_down]}) does not answer an IPv4 ping after lab_link_up"
  ping_ok 6 "$(ip6_of $k_down)" || lab_fail "link: c ($(ip6_of $k_down)) does not answer an IPv6 ping after lab_link_up"
  lab_log "ok: link: c answers again after lab_link_up"
fi
lab_barrier end
lab_log "hub smoke passed on $LAB_HOST"
