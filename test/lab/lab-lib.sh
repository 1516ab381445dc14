# lab-lib.sh - helpers for lab scenarios, sourced inside a guest: ". "$LAB_LIB"".
#
# Scenarios are plain bash run as root in every guest of a topology; LAB_HOST says which
# one ("single", "a"/"b" in a pair, "a", "b", "c"... in a hub). These helpers cover what scenarios repeat:
# failing with a reason, rendezvous between the two guests, asserting on output, and the
# fault injections later scenarios need (link down/up, netem loss and delay, killing a
# process, powering a guest off).
# shellcheck shell=bash

LAB_BIN=${MCPNET_BUILD_DIR:-}/bin

lab_log() { echo "[$LAB_HOST $(date +%T.%3N)] $*"; }

# lab_fail MESSAGE: stop this guest's scenario, red.
lab_fail() {
  echo "[$LAB_HOST] FAIL: $*" >&2
  exit 1
}

# lab_check DESCRIPTION COMMAND...: run a check, fail with the description if it fails.
lab_check() {
  local what=$1
  shift
  if "$@"; then
    lab_log "ok: $what"
  else
    lab_fail "$what (command: $*)"
  fi
}

# lab_grep PATTERN FILE [DESCRIPTION]: FILE must contain a line matching PATTERN (ERE).
lab_grep() {
  if grep -Eq -- "$1" "$2"; then
    lab_log "ok: ${3:-$2 matches /$1/}"
  else
    echo "---- $2 ----" >&2
    cat "$2" >&2
    lab_fail "${3:-$2} does not match /$1/"
  fi
}

# lab_refute PATTERN FILE DESCRIPTION: FILE must have no line matching PATTERN (ERE).
lab_refute() {
  if grep -Eq -- "$1" "$2"; then
    echo "---- $2 ----" >&2
    cat "$2" >&2
    lab_fail "$3: a line of $2 matches /$1/"
  fi
}

# Rendezvous between the guests of a pair or hub through the shared /run/xchg folder.
lab_signal() { printf '%s\n' "${2:-}" > "$LAB_XCHG/.$1.tmp" && mv "$LAB_XCHG/.$1.tmp" "$LAB_XCHG/$1"; }
lab_wait() {
  local name=$1 limit=${2:-60} i
  for ((i = 0; i < limit * 10; i++)); do
    [ -f "$LAB_XCHG/$name" ] && { cat "$LAB_XCHG/$name"; return 0; }
    sleep 0.1
  done
  lab_fail "waited ${limit}s for '$name' from another guest"
}

# lab_barrier NAME [SECONDS]: wait until every guest of the run has reached the barrier
# NAME (each signals NAME.<host>), e.g. so that none powers off while others still
# talk to it.
lab_barrier() {
  local name=$1 limit=${2:-120} h
  lab_signal "$name.$LAB_HOST"
  for h in ${LAB_HOSTS:-a b}; do lab_wait "$name.$h" "$limit" > /dev/null; done
}

# lab_host_ip HOST: a hub guest's IPv4 address (HOST is a, b, c...).
lab_host_ip() {
  local host=$1 l=abcdef
  l=${l%%"$host"*}
  # shellcheck disable=SC2086
  set -- ${LAB_HOST_IPS:-}
  [ ${#l} -lt $# ] || lab_fail "lab_host_ip: no host '$host' in this run (LAB_HOST_IPS: ${LAB_HOST_IPS:-none})"
  shift ${#l}
  echo "$1"
}

# lab_wait_port PORT [SECONDS]: wait until a local TCP port listens.
lab_wait_port() {
  local port=$1 limit=${2:-30} i
  for ((i = 0; i < limit * 10; i++)); do
    [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  lab_fail "nothing listens on port $port after ${limit}s"
}

# Faults. lab_link_down/up take one netdev: eth0 (the default) or, in a pair with
# wires=2, eth1 alone, which leaves the other wire (and its rxe) up.
lab_link_down() { ip link set "${1:-eth0}" down; }
lab_link_up() { ip link set "${1:-eth0}" up; }
# lab_block_ports FROM-TO [reject]: this guest's firewall drops incoming TCP to the ports
# FROM..TO (a peer's connect times out), or with "reject" answers with a reset (the
# peer's connect is refused). lab_unblock_ports lifts every such block. Other ports,
# ICMP and RoCE (UDP 4791) pass.
lab_block_ports() {
  local range=$1 verdict=drop
  [ "${2:-}" = reject ] && verdict="reject with tcp reset"
  nft add table inet lab_block &&
    nft add chain inet lab_block input '{ type filter hook input priority 0; }' &&
    nft add rule inet lab_block input tcp dport "$range" $verdict ||
    lab_fail "lab_block_ports $range: nft refused the rule"
}
lab_unblock_ports() { nft delete table inet lab_block 2>/dev/null || true; }
lab_netem() { tc qdisc replace dev "${LAB_NETEM_DEV:-eth0}" root netem "$@"; }
lab_netem_clear() { tc qdisc del dev "${LAB_NETEM_DEV:-eth0}" root 2>/dev/null || true; }
lab_kill() { pkill -KILL -f "$1"; }
# lab_poweroff: power this guest off at once, as a host that vanishes; the run still
# counts this guest's part as passed, since the scenario asked for it.
lab_poweroff() {
  echo 0 > /run/lab/rc
  sync
  echo 1 > /proc/sys/kernel/sysrq
  echo o > /proc/sysrq-trigger
  sleep 30
}

# lab_add_rxe NAME NETDEV: one more soft-RoCE device on a netdev of the initial namespace.
lab_add_rxe() {
  rdma link add "$1" type rxe netdev "$2" || lab_fail "rdma link add $1 on $2"
  local i
  for ((i = 0; i < 50; i++)); do
    grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null && return 0
    sleep 0.1
  done
  lab_fail "$1 on $2 never became ACTIVE"
}

# lab_netns_rxe NS IFNAME RXE ADDR: a veth pair whose inner end, renamed IFNAME, lives in
# network namespace NS with ADDR; RXE is a soft-RoCE device on that inner end.
lab_netns_rxe() {
  local ns=$1 ifname=$2 rxe=$3 addr=$4
  ip netns add "$ns" || lab_fail "ip netns add $ns"
  ip link add "v-$ns" type veth peer name "i-$ns" || lab_fail "veth for $ns"
  ip link set "v-$ns" up
  ip link set "i-$ns" netns "$ns"
  ip -n "$ns" link set "i-$ns" name "$ifname"
  ip -n "$ns" addr add "$addr" dev "$ifname"
  ip -n "$ns" link set "$ifname" up
  ip -n "$ns" link set lo up
  ip netns exec "$ns" rdma link add "$rxe" type rxe netdev "$ifname" || lab_fail "rdma link add $rxe in $ns"
}

# perftest: the ceiling every benchmark compares with. lab_perftest_server TOOL ARGS... runs
# TOOL in the background on port $LAB_PERFTEST_PORT and waits until it listens.
LAB_PERFTEST_PORT=${LAB_PERFTEST_PORT:-18515}
lab_perftest_server() {
  local tool=$1
  shift
  "$tool" -p "$LAB_PERFTEST_PORT" "$@" > "/tmp/$tool.server.out" 2>&1 &
  LAB_PERFTEST_PID=$!
  lab_wait_port "$LAB_PERFTEST_PORT" 30
}

# lab_fake_peermem: load the lab's do-nothing nvidia_peermem module (built by lab-setup.sh
# from test/lab/guest/fake-peermem) so that mcpnet reports GPU pointer support and accepts
# regMr(NCCL_PTR_CUDA). Safe to call again: a loaded module is left as it is.
lab_fake_peermem() {
  local ko=${MCPNET_BUILD_DIR:-}/lab/fake-peermem/nvidia_peermem.ko
  if [ ! -f /sys/module/nvidia_peermem/version ]; then
    [ -f "$ko" ] || lab_fail "no $ko: run test/lab/lab-setup.sh"
    insmod "$ko" || lab_fail "insmod $ko failed (built for another kernel than $(uname -r)?)"
  fi
  [ -f /sys/module/nvidia_peermem/version ] || lab_fail "nvidia_peermem is loaded but has no version file"
  lab_log "nvidia_peermem stand-in loaded (version $(cat /sys/module/nvidia_peermem/version))"
}

# lab_ipv4_gid ADDR: the IPv4-mapped GID of ADDR as sysfs prints it.
lab_ipv4_gid() {
  local IFS=.
  # shellcheck disable=SC2086
  set -- $1
  printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "$1" "$2" "$3" "$4"
}

# lab_wait_gid RXE GID [SECONDS]: wait until RXE's port is ACTIVE and lists GID.
lab_wait_gid() {
  local rxe=$1 gid=$2 limit=${3:-20} i
  for ((i = 0; i < limit * 10; i++)); do
    grep -q ACTIVE "/sys/class/infiniband/$rxe/ports/1/state" 2>/dev/null &&
      grep -qsx "$gid" /sys/class/infiniband/"$rxe"/ports/1/gids/* && return 0
    sleep 0.1
  done
  lab_fail "$rxe: no ACTIVE port with GID $gid after ${limit}s"
}

# lab_gid_index RXE ADDR: the index of ADDR's RoCE v2 GID on RXE (for perftest's -x and
# ibv_*_pingpong's -g); fails when there is none.
lab_gid_index() {
  local gid f
  gid=$(lab_ipv4_gid "$2")
  for f in $(grep -lsx "$gid" /sys/class/infiniband/"$1"/ports/1/gids/*); do
    grep -qs "RoCE v2" "/sys/class/infiniband/$1/ports/1/gid_attrs/types/${f##*/}" && { echo "${f##*/}"; return 0; }
  done
  lab_fail "$1 has no RoCE v2 GID for $2"
}

# lab_loop_rxe RXE IFNAME ADDR: for the single guest, one more soft-RoCE device that
# carries RoCE to itself as rxe0 does on lo (a second rxe on lo is refused: "already
# configured on lo", one rxe per netdev). IFNAME is one end of a veth pair (its peer
# IFNAME-p is up and unused) with the IPv4 address ADDR/24; rxe reaches its own
# addresses on it by its internal loopback. Waits until RXE is ACTIVE with ADDR's GID.
# `lab_link_down IFNAME` then takes this device's port down and no other.
lab_loop_rxe() {
  local rxe=$1 ifname=$2 addr=$3
  ip link add "$ifname" type veth peer name "$ifname-p" || lab_fail "veth $ifname for $rxe"
  ip link set "$ifname-p" up
  ip addr add "$addr/24" dev "$ifname"
  ip link set "$ifname" up
  rdma link add "$rxe" type rxe netdev "$ifname" || lab_fail "rdma link add $rxe on $ifname"
  lab_wait_gid "$rxe" "$(lab_ipv4_gid "$addr")"
}

# lab_check_second_wire TAG: in a pair booted with wires=2, on both guests: eth1 reaches
# the peer's eth1 over IP (ping, retried while the peer may still be booting), and rxe1
# carries RC traffic to the peer's rxe1 (ibv_rc_pingpong over the eth1 addresses' RoCE v2
# GIDs, b serving). TAG names the rendezvous and output files, so calls differ by it.
lab_check_second_wire() {
  local tag=$1 idx i port=18601 pid
  [ "${LAB_WIRES:-1}" = 2 ] || lab_fail "$tag: the scenario needs wires=2 in its '# lab:' header"
  [ -e /sys/class/infiniband/rxe1 ] || lab_fail "$tag: no rxe1 on the second wire"
  idx=$(lab_gid_index rxe1 "$LAB_SELF_IP1") || exit 1
  for ((i = 0; i < 60; i++)); do
    busybox ping -c 1 -W 2 "$LAB_PEER_IP1" > "/tmp/$tag.ping" 2>&1 && break
  done
  [ $i -lt 60 ] || { cat "/tmp/$tag.ping"; lab_fail "$tag: the peer's eth1 ($LAB_PEER_IP1) does not answer a ping"; }
  lab_log "ok: $tag: ping over eth1 to $LAB_PEER_IP1"
  if [ "$LAB_HOST" = b ]; then
    timeout 120 ibv_rc_pingpong -d rxe1 -g "$idx" -p "$port" -s 4096 -n 100 > "/tmp/$tag.pp" 2>&1 &
    pid=$!
    lab_wait_port "$port" 60
    lab_signal "$tag.listening"
    wait "$pid" || { cat "/tmp/$tag.pp"; lab_fail "$tag: ibv_rc_pingpong (server) over rxe1 failed"; }
  else
    lab_wait "$tag.listening" 120 > /dev/null
    timeout 120 ibv_rc_pingpong -d rxe1 -g "$idx" -p "$port" -s 4096 -n 100 "$LAB_PEER_IP1" > "/tmp/$tag.pp" 2>&1 ||
      { cat "/tmp/$tag.pp"; lab_fail "$tag: ibv_rc_pingpong (client) over rxe1 to $LAB_PEER_IP1 failed"; }
  fi
  lab_grep '^819200 bytes in [0-9.]+ seconds' "/tmp/$tag.pp" "$tag: 100 RC round trips of 4 KiB over rxe1 (GID index $idx)"
}
