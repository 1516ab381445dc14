# lab: topology=single deadline=200
# Network namespaces on one guest, the multi-tenant situation of containers on a shared
# HCA: namespaces A and B each hold a veth end named eth0 (same name, same address)
# with an rxe on it, and rxe0 sits on the initial namespace's lo. Every namespace sees
# all three devices (shared RDMA namespace mode). Asserted with bin/mcp-netns-probe:
# sysfs labels the GIDs "eth0", "eth0" and "lo" whoever asks (names prove nothing);
# RDMA netlink names a port's netdev only inside that netdev's namespace, so from A the
# automatic GID choice finds a GID for rxeA only, and from the initial namespace for
# rxe0 only. Empty GID slots read EINVAL on this kernel and are skipped. Then the plugin
# itself, initialised in A, exposes rxeA only and says why rxeB and rxe0 were excluded.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
probe=bin/mcp-netns-probe
ip4gid=0000:0000:0000:0000:0000:ffff:0a4d:0001 # ::ffff:10.77.0.1

# expect FILE ERE WHAT: lab_grep without two processes per check (TCG makes each slow).
expect() {
  local line
  while IFS= read -r line; do
    [[ $line =~ $2 ]] && { echo "[$LAB_HOST] ok: $3"; return 0; }
  done < "$1"
  cat "$1" >&2
  lab_fail "$3: no line of $1 matches /$2/"
}

lab_netns_rxe A eth0 rxeA 10.77.0.1/24
lab_netns_rxe B eth0 rxeB 10.77.0.1/24
# Port state and the IPv4 GID appear asynchronously after the address is added.
for dev in rxeA rxeB; do
  ok=0
  for _ in $(seq 100); do
    if grep -q ACTIVE "/sys/class/infiniband/$dev/ports/1/state" &&
       grep -qs "$ip4gid" /sys/class/infiniband/$dev/ports/1/gids/*; then
      ok=1
      break
    fi
    sleep 0.1
  done
  [ $ok = 1 ] || lab_fail "$dev: no ACTIVE port with the GID of 10.77.0.1 after 10 s"
done
rdma link show

# The kernel refuses to describe an empty slot: EINVAL, which the reader skips.
last=$(ls /sys/class/infiniband/rxeA/ports/1/gids | sort -n | tail -1)
if cat "/sys/class/infiniband/rxeA/ports/1/gid_attrs/types/$last" > /tmp/empty-slot.err 2>&1; then
  lab_fail "reading the type of empty GID slot $last succeeded: $(cat /tmp/empty-slot.err)"
fi
expect /tmp/empty-slot.err 'Invalid argument' "the type of empty slot $last reads EINVAL"

ip netns exec A "$probe" > /tmp/probe-A.out
cat /tmp/probe-A.out
out=/tmp/probe-A.out
expect $out '^devices 3$' "namespace A sees all three devices"
expect $out '^rxeA/1 netlink netdev "eth0"$' "from A, netlink names rxeA's netdev eth0"
expect $out '^rxeB/1 netlink netdev ""$' "from A, netlink names no netdev for rxeB"
expect $out '^rxe0/1 netlink netdev ""$' "from A, netlink names no netdev for rxe0"
expect $out '^rxeA/1 gid [0-9]+ 10\.77\.0\.1 RoCE v2 ndev "eth0" ours=1 up=1$' "sysfs: rxeA's GID on eth0, ours"
expect $out '^rxeB/1 gid [0-9]+ 10\.77\.0\.1 RoCE v2 ndev "eth0" ours=0 up=0$' "sysfs: rxeB's GID also on \"eth0\", not ours"
expect $out '^rxe0/1 gid [0-9]+ 127\.0\.0\.1 RoCE v2 ndev "lo" ours=0 up=0$' "sysfs: rxe0's GID on \"lo\" (A has a lo too), not ours"
expect $out '^rxeA/1 slots [0-9]+ readable 2 skipped [1-9][0-9]*$' "rxeA's empty slots are skipped"
expect $out '^rxeA/1 choice GID [0-9]+ 10\.77\.0\.1 \(automatic' "from A, rxeA gets its IPv4 GID"
expect $out '^rxeB/1 choice none: .*another network namespace' "from A, rxeB has no usable GID"
expect $out '^rxe0/1 choice none: .*another network namespace' "from A, rxe0 has no usable GID"

ip netns exec B "$probe" > /tmp/probe-B.out
out=/tmp/probe-B.out
expect $out '^rxeB/1 netlink netdev "eth0"$' "from B, netlink names rxeB's netdev eth0"
expect $out '^rxeA/1 netlink netdev ""$' "from B, netlink names no netdev for rxeA"
expect $out '^rxeB/1 choice GID [0-9]+ 10\.77\.0\.1 ' "from B, rxeB gets its IPv4 GID"
expect $out '^rxeA/1 choice none' "from B, rxeA has no usable GID"

"$probe" > /tmp/probe-init.out
out=/tmp/probe-init.out
expect $out '^rxe0/1 netlink netdev "lo"$' "from the initial namespace, netlink names rxe0's netdev lo"
expect $out '^rxeA/1 netlink netdev ""$' "from the initial namespace, no netdev for rxeA"
expect $out '^rxeB/1 netlink netdev ""$' "from the initial namespace, no netdev for rxeB"
expect $out '^rxe0/1 choice GID [0-9]+ 127\.0\.0\.1 ' "from the initial namespace, rxe0 gets 127.0.0.1"
expect $out '^rxeA/1 choice none' "from the initial namespace, rxeA has no usable GID"

# The plugin's discovery in A: one device, rxeA; the others excluded with the reason.
MCP_DRIVE_VERBOSE=1 ip netns exec A timeout 120 bin/mcp-conformance --plugin plugin/libnccl-net-mcp.so \
  self props > /tmp/plugin-A.out 2> /tmp/plugin-A.err || { cat /tmp/plugin-A.out /tmp/plugin-A.err; lab_fail "plugin in A"; }
grep -E 'GID|netdev|excluded' /tmp/plugin-A.err
out=/tmp/plugin-A.err
expect $out 'rxeA port 1: netdev in this network namespace: eth0' "the plugin in A learns rxeA's netdev from netlink"
expect $out 'rxeA port 1: GID [0-9]+ 10\.77\.0\.1 \(RoCE v2, netdev eth0\)' "the plugin in A uses rxeA's IPv4 GID"
expect $out 'devices: .*rxeB port 1: no usable GID.*another network namespace' "the plugin in A excludes rxeB, saying why"
expect $out 'devices: .*rxe0 port 1: no usable GID.*another network namespace' "the plugin in A excludes rxe0, saying why"
if grep -Eq '(rxeB|rxe0) port 1: GID' $out; then lab_fail "the plugin in A chose a GID on rxeB or rxe0"; fi
lab_log "ok: the plugin in A exposes rxeA only"
