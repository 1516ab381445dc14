# lab: topology=single deadline=420
# Pods on a shared RDMA device with a macvlan or ipvlan pod network (the RDMA shared-device
# plugin with a macvlan/ipvlan CNI, RDMA in shared namespace mode). The guest's initial
# namespace plays the host: rxeH on the dummy netdev hostd0 (10.97.0.1), whose macvlans
# are the pods P1 (eth0, 10.97.0.11) and P2 (eth0, 10.97.0.12); rxeI on a second dummy
# hostd1 (10.97.1.1), whose ipvlan is pod P3 (eth0, 10.97.1.13). Each pod sees every
# device, and rxeH's GID table holds the host's address and both pods', two of them on a
# netdev called "eth0"; RDMA netlink names no netdev for the port in a pod (the port's
# netdev stays in the host's namespace). Asserted in each pod, with bin/mcp-netns-probe,
# the plugin's discovery and mcpnet-doctor: the device carrying the pod's own macvlan or
# ipvlan is exposed with the GID of the pod's own address, never the host's or the other
# pod's; the other devices (and rxe0 on the host's lo, although every pod has a lo with
# 127.0.0.1 at ifindex 1) have no GID of ours.
# No data test: rxe on this kernel routes and listens only in the initial namespace, so a
# pod's QP could not carry traffic here; discovery, GID choice and the doctor are what
# this covers.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
probe=bin/mcp-netns-probe
doctor=$PWD/bin/mcpnet-doctor

# host_dev DUMMY ADDR RXE: the host's netdev with its own address and an rxe on it.
host_dev() {
  ip link add "$1" type dummy || lab_fail "ip link add $1 type dummy"
  ip addr add "$2/24" dev "$1"
  ip link set "$1" up
  rdma link add "$3" type rxe netdev "$1" || lab_fail "rdma link add $3 on $1"
}
# pod NS KIND LOWER ADDR: namespace NS with a KIND (macvlan|ipvlan) of LOWER as eth0.
pod() {
  local ns=$1 kind=$2 lower=$3 addr=$4 mode=bridge
  [ "$kind" = ipvlan ] && mode=l2
  ip netns add "$ns" || lab_fail "ip netns add $ns"
  ip link add "p-$ns" link "$lower" type "$kind" mode "$mode" || lab_fail "ip link add p-$ns type $kind"
  ip link set "p-$ns" netns "$ns"
  ip -n "$ns" link set "p-$ns" name eth0
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
}

lsmod | grep -E '^(macvlan|ipvlan) ' || true
host_dev hostd0 10.97.0.1 rxeH
host_dev hostd1 10.97.1.1 rxeI
pod P1 macvlan hostd0 10.97.0.11
pod P2 macvlan hostd0 10.97.0.12
pod P3 ipvlan hostd1 10.97.1.13
# The kernel adds the GIDs of uppers asynchronously, a moment after their address.
lab_wait_gid rxeH "$(lab_ipv4_gid 10.97.0.1)" 60
lab_wait_gid rxeH "$(lab_ipv4_gid 10.97.0.11)" 60
lab_wait_gid rxeH "$(lab_ipv4_gid 10.97.0.12)" 60
lab_wait_gid rxeI "$(lab_ipv4_gid 10.97.1.1)" 60
lab_wait_gid rxeI "$(lab_ipv4_gid 10.97.1.13)" 60
rdma link show
ip -d link show hostd0
ip -n P1 -d link show eth0
ip -n P3 -d link show eth0

for ns in P1 P2 P3; do
  ip netns exec "$ns" "$probe" > "/tmp/probe-$ns.out"
  echo "---- probe in $ns"
  cat "/tmp/probe-$ns.out"
done

# pod_probe NS DEV ADDR OTHER...: in NS, DEV's port has no netdev by netlink, its GID of
# ADDR on eth0 is ours and chosen; every OTHER address's GID on DEV is not ours.
pod_probe() {
  local ns=$1 dev=$2 addr=$3 out=/tmp/probe-$1.out a
  shift 3
  local re=${addr//./\\.}
  lab_grep "^$dev/1 netlink netdev \"\"$" "$out" "$ns: netlink names no netdev for $dev's port"
  lab_grep "^$dev/1 gid [0-9]+ $re RoCE v2 ndev \"eth0\" ours=1 up=1$" "$out" "$ns: $dev's GID of $addr on eth0 is ours"
  lab_grep "^$dev/1 choice GID [0-9]+ $re \\(automatic" "$out" "$ns: the automatic choice on $dev is $addr"
  for a in "$@"; do
    re=${a//./\\.}
    lab_grep "^$dev/1 gid [0-9]+ $re RoCE v2 ndev \"[a-z0-9]+\" ours=0 up=0$" "$out" "$ns: $dev's GID of $a is listed, not ours"
    lab_refute "^$dev/1 gid [0-9]+ $re .* ours=1" "$out" "$ns: $dev's GID of $a is never ours"
  done
}
pod_probe P1 rxeH 10.97.0.11 10.97.0.1 10.97.0.12
pod_probe P2 rxeH 10.97.0.12 10.97.0.1 10.97.0.11
pod_probe P3 rxeI 10.97.1.13 10.97.1.1
lab_grep '^rxeH/1 gid [0-9]+ 10\.97\.0\.12 RoCE v2 ndev "eth0" ours=0' /tmp/probe-P1.out "P1: P2's GID is labelled eth0 too"
for ns in P1 P2; do
  lab_grep '^rxeI/1 choice none: ' "/tmp/probe-$ns.out" "$ns: rxeI (P3's ipvlan parent) has no GID of ours"
  lab_grep '^rxe0/1 choice none: ' "/tmp/probe-$ns.out" "$ns: rxe0 on the host's lo has no GID of ours"
done
lab_grep '^rxeH/1 choice none: ' /tmp/probe-P3.out "P3: rxeH has no GID of ours"
lab_grep '^rxe0/1 choice none: ' /tmp/probe-P3.out "P3: rxe0 on the host's lo has no GID of ours"

# The host's view is unchanged: netlink names hostd0, and the host uses its own address.
"$probe" > /tmp/probe-host.out
lab_grep '^rxeH/1 netlink netdev "hostd0"$' /tmp/probe-host.out "host: netlink names rxeH's netdev hostd0"
lab_grep '^rxeH/1 choice GID [0-9]+ 10\.97\.0\.1 ' /tmp/probe-host.out "host: rxeH's choice is the host's address"

# The plugin's discovery in each pod: its device, with its own address's GID.
# plugin_in NS DEV ADDR
plugin_in() {
  local ns=$1 dev=$2 re=${3//./\\.} out=/tmp/plugin-$1.err
  MCP_DRIVE_VERBOSE=1 ip netns exec "$ns" timeout 120 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so \
    self props > "/tmp/plugin-$ns.out" 2> "$out" || { cat "/tmp/plugin-$ns.out" "$out"; lab_fail "plugin in $ns"; }
  grep -E 'GID|netdev|devices' "$out" || true
  lab_grep "$dev port 1: the port's netdev is in another network namespace; [12] of its [0-9]+ GIDs are ours" "$out" \
    "$ns: the plugin decides $dev's GIDs one by one and finds its own (its address and its link-local one)"
  lab_grep "$dev port 1: GID [0-9]+ $re \\(RoCE v2, netdev eth0\\)" "$out" "$ns: the plugin uses $dev's GID of $3"
}
plugin_in P1 rxeH 10.97.0.11
lab_refute 'port 1: GID [0-9]+ 10\.97\.0\.(1|12) ' /tmp/plugin-P1.err "P1: the plugin never uses the host's or P2's GID"
lab_refute '(rxeI|rxe0) port 1: GID' /tmp/plugin-P1.err "P1: the plugin uses no GID on rxeI or rxe0"
plugin_in P2 rxeH 10.97.0.12
lab_refute 'port 1: GID [0-9]+ 10\.97\.0\.(1|11) ' /tmp/plugin-P2.err "P2: the plugin never uses the host's or P1's GID"
plugin_in P3 rxeI 10.97.1.13
lab_refute '(rxeH|rxe0) port 1: GID' /tmp/plugin-P3.err "P3: the plugin uses no GID on rxeH or rxe0"

# The doctor in each pod reports the same choice, and lists only its own GID as ours.
for ns in P1 P2 P3; do
  set +e
  ip netns exec "$ns" env NCCL_NET=MCP NCCL_NET_PLUGIN=mcp LD_LIBRARY_PATH="$PWD/plugin" "$doctor" \
    > "/tmp/doctor-$ns.out" 2> "/tmp/doctor-$ns.err"
  set -e
  echo "---- doctor in $ns"
  cat "/tmp/doctor-$ns.out"
done
lab_grep 'uses rxeH port 1 \(GID [0-9]+ 10\.97\.0\.11, RoCE v2, netdev eth0\)' /tmp/doctor-P1.out "P1: the doctor's selection is rxeH with 10.97.0.11"
lab_grep 'uses rxeH port 1 \(GID [0-9]+ 10\.97\.0\.12, RoCE v2, netdev eth0\)' /tmp/doctor-P2.out "P2: the doctor's selection is rxeH with 10.97.0.12"
lab_grep 'uses rxeI port 1 \(GID [0-9]+ 10\.97\.1\.13, RoCE v2, netdev eth0\)' /tmp/doctor-P3.out "P3: the doctor's selection is rxeI with 10.97.1.13"
lab_grep '^    port 1: .*netdev not in this namespace; ours: GIDs on eth0 \(stacked on it here\)' /tmp/doctor-P1.out "P1: the doctor says rxeH's port is ours through eth0"
lab_grep 'GID [0-9]+ +10\.97\.0\.11 .*this namespace' /tmp/doctor-P1.out "P1: the doctor lists 10.97.0.11 as this namespace's"
lab_refute 'GID [0-9]+ +10\.97\.0\.12 .*this namespace' /tmp/doctor-P1.out "P1: the doctor never lists P2's GID as this namespace's"
lab_refute 'GID [0-9]+ +10\.97\.0\.1 .*this namespace' /tmp/doctor-P1.out "P1: the doctor never lists the host's GID as this namespace's"
lab_log "ok: each pod uses its own address's GID on the shared device"
