# lab: topology=pair deadline=360
# mcpnet-doctor across the two hosts, in rounds both guests walk through together
# (rendezvous files in /run/xchg), each asserted on the side that reports it:
#   ok       a --listen without a token draws one and prints it, b --peer a with it: both
#            agree, the plugin's handshake connects, a verified message moves each way,
#            and both print a bandwidth figure (exit 0);
#   token    a --listen with the run's MCPNET_DOCTOR_TOKEN; b --peer with another run's
#            token is turned away ("does not know this run's token", exit 1) and a keeps
#            waiting; b with the right one gets in (exit 0 both);
#   mtu      b's eth0 at MTU 1000 (rxe0 then runs 512-byte packets, a 1024): both report
#            the mismatch naming both hosts and both MTUs (a WARN: the pair still works),
#            a in --json, which must parse and carry the pair's figures;
#   refused  b --peer a on a port nothing listens on: "nothing listens on ADDR:PORT", exit 1;
#   dropped  an nft rule on a drops TCP to the listener's port: b reports a firewall or
#            routing problem naming the port, within its --timeout of 5 s, exit 1.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
doctor=$PWD/bin/mcpnet-doctor
port=18650

expect() {
  if grep -Eq -- "$2" "$1"; then
    lab_log "ok: $3"
  else
    echo "---- $1 ----" >&2
    cat "$1" "${1%.out}.err" >&2 2>/dev/null
    lab_fail "$3: no line of $1 matches /$2/"
  fi
}
# status NAME WANT: the exit status a run recorded in /tmp/NAME.rc.
status() {
  local rc
  rc=$(cat "/tmp/$1.rc")
  [ "$rc" = "$2" ] || { cat "/tmp/$1.out" "/tmp/$1.err" >&2; lab_fail "$1: exit status $rc, expected $2"; }
  lab_log "ok: $1 exits $rc"
}
# listen NAME [ARGS...]: a listener in the background; returns once it listens, and
# passes the token it drew (if it drew one: no MCPNET_DOCTOR_TOKEN) to the peer.
listen() {
  local name=$1
  shift
  ( set +e; "$doctor" --listen --port $port --wait 120 "$@" > "/tmp/$name.out" 2> "/tmp/$name.err" &
    echo $! > "/tmp/$name.pid"
    wait $!
    echo $? > "/tmp/$name.rc" ) &
  listener=$!
  for _ in $(seq 600); do
    [ -s "/tmp/$name.err" ] && break
    sleep 0.1
  done
  grep -q listening "/tmp/$name.err" || { cat "/tmp/$name.err"; lab_fail "$name: the listener did not start"; }
  lab_signal "$name.listening" "$(sed -n 's/^ *MCPNET_DOCTOR_TOKEN=\([0-9a-f]*\) .*/\1/p' "/tmp/$name.err")"
}
# peer NAME [ARGS...]: a peer run toward host a, waiting for a's listener first.
peer() {
  local name=$1 t0 t1
  shift
  drawn=$(lab_wait "$name.listening" 120)
  t0=$(date +%s.%N)
  set +e
  MCPNET_DOCTOR_TOKEN=${drawn:-${MCPNET_DOCTOR_TOKEN:-}} "$doctor" --peer "$LAB_PEER_IP" "$@" > "/tmp/$name.out" \
    2> "/tmp/$name.err"
  echo $? > "/tmp/$name.rc"
  set -e
  t1=$(date +%s.%N)
  elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
}

# Round 1: a healthy pair; the listener draws the run's token and prints it.
if [ "$LAB_HOST" = a ]; then
  listen ok --seconds 2
  wait "$listener" || true
  status ok 0
  sed -n '/^Two hosts/,$p' /tmp/ok.out
  expect /tmp/ok.out '^  \[ OK \] both hosts agree: Ethernet, MTU 1024' "ok: a finds both hosts agree"
  expect /tmp/ok.out '^  \[ OK \] connected to host lab-b .* through the plugin.s own handshake' "ok: a connected through the plugin"
  expect /tmp/ok.out '^  \[ OK \] a 1048576-byte message went each way and arrived intact' "ok: a verified the message"
  expect /tmp/ok.out '^  \[ OK \] bandwidth [0-9]+\.[0-9]+ MB/s with 1048576-byte messages' "ok: a prints the bandwidth"
  expect /tmp/ok.err '^  MCPNET_DOCTOR_TOKEN=[0-9a-f]{32} mcpnet-doctor --peer THIS_HOST:18650$' "ok: a printed the token it drew"
else
  peer ok --seconds 2
  status ok 0
  sed -n '/^Two hosts/,$p' /tmp/ok.out
  expect /tmp/ok.out '^  \[ OK \] both hosts agree' "ok: b finds both hosts agree"
  expect /tmp/ok.out '^  \[ OK \] bandwidth [0-9]+\.[0-9]+ MB/s with 1048576-byte messages \([0-9]+ in [0-9.]+ s, host lab-b to host lab-a\), latency [0-9.]+ us' "ok: b measured bandwidth and latency"
fi

# From here on the run's token comes from the environment, as a job sets it.
export MCPNET_DOCTOR_TOKEN=lab-pair-doctor-run-token-0123456789

# Round 1b: a peer with another run's token is turned away; the listener waits on.
if [ "$LAB_HOST" = a ]; then
  listen token --seconds 1
  wait "$listener" || true
  status token 0
  expect /tmp/token.out '^  \[ OK \] a [0-9]+-byte message went each way and arrived intact' "token: a met the right peer"
else
  lab_wait token.listening 120 > /dev/null
  set +e
  MCPNET_DOCTOR_TOKEN=another-runs-doctor-token-987654 "$doctor" --peer "$LAB_PEER_IP" --seconds 1 --timeout 5 \
    > /tmp/token-wrong.out 2> /tmp/token-wrong.err
  echo $? > /tmp/token-wrong.rc
  set -e
  status token-wrong 1
  expect /tmp/token-wrong.out "^  \[FAIL\] the doctor at 192\.0\.2\.1:18650 does not know this run's token" "token: b is told its token differs"
  peer token --seconds 1
  status token 0
fi

# Round 2: different MTUs. rxe0's active MTU follows its netdev's.
if [ "$LAB_HOST" = b ]; then
  ip link set eth0 mtu 1000
  for _ in $(seq 50); do
    grep -q 'active_mtu:.*512' <<<"$(ibv_devinfo -d rxe0)" && break
    sleep 0.2
  done
  lab_signal mtu-set
  peer mtu --seconds 1
  ip link set eth0 mtu 1500
  status mtu 0
  grep -E '^  \[|^         fix' /tmp/mtu.out | sed -n '/MTU/,+1p'
  expect /tmp/mtu.out '^  \[WARN\] MTU 512 on host lab-b \(rxe0, netdev eth0\), 1024 on host lab-a \(rxe0, netdev eth0\): this connection runs at 512 bytes' "mtu: b reports both MTUs"
  expect /tmp/mtu.out '^         fix: set the same MTU on both links \(on host lab-b: ip link set eth0 mtu 1500' "mtu: the remedy says which link to change"
else
  lab_wait mtu-set 120 > /dev/null
  listen mtu --seconds 1 --json
  wait "$listener" || true
  status mtu 0
  python3 - /tmp/mtu.out <<'EOF' || lab_fail "mtu: a's --json report lacks the mismatch"
import json, sys
doc = json.load(open(sys.argv[1]))
pair = doc["pair"]
assert pair["role"] == "listen" and pair["connected"] and pair["verified"], pair
assert pair["local"]["mtu"] == 1024 and pair["remote"]["mtu"] == 512, pair
assert pair["bandwidth_mbs"] > 0, pair
mtu = [f for f in doc["findings"] if f["check"] == "mtu"]
assert len(mtu) == 1 and mtu[0]["level"] == "WARN", mtu
assert mtu[0]["message"].startswith("MTU 512 on host lab-b (rxe0, netdev eth0), 1024 on host lab-a"), mtu
print("json ok: " + mtu[0]["message"])
EOF
  lab_log "ok: mtu: a reports the mismatch too (--json)"
fi

# Round 3: nothing listens.
if [ "$LAB_HOST" = b ]; then
  lab_signal refused.listening
  peer refused --port 18651 --timeout 5
  status refused 1
  grep -A1 '^  \[FAIL\]' /tmp/refused.out
  expect /tmp/refused.out '^  \[FAIL\] nothing listens on 192\.0\.2\.1:18651: the connection was refused' "refused: b says nothing listens"
  expect /tmp/refused.out '^         fix: start mcpnet-doctor --listen --port 18651 on that host first' "refused: the remedy says to start the listener"
  lab_signal refused.done
else
  lab_wait refused.done 120 > /dev/null
fi

# Round 4: a firewall drops the listener's port.
if [ "$LAB_HOST" = a ]; then
  nft add table inet doctor
  nft add chain inet doctor input '{ type filter hook input priority 0; }'
  nft add rule inet doctor input tcp dport $port drop
  listen dropped
  lab_wait dropped.done 120 > /dev/null
  kill "$(cat /tmp/dropped.pid)" 2>/dev/null || true
  wait "$listener" 2>/dev/null || true
  nft delete table inet doctor
else
  peer dropped --timeout 5
  lab_signal dropped.done
  status dropped 1
  grep -A1 '^  \[FAIL\]' /tmp/dropped.out
  expect /tmp/dropped.out '^  \[FAIL\] no answer from 192\.0\.2\.1:18650 within [0-9.]+ s: a firewall or routing problem drops traffic to TCP port 18650' "dropped: b names the firewall and the port"
  awk -v e="$elapsed" 'BEGIN { exit !(e < 15) }' || lab_fail "dropped: the report took ${elapsed} s, past its 5 s deadline (plus start-up)"
  lab_log "ok: dropped: reported after ${elapsed} s with --timeout 5"
fi
