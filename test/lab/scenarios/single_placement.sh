# lab: topology=single deadline=600
# Where traffic goes, on one guest with three soft-RoCE devices: rxe0 on lo, rxe1 and rxe2
# on veth links (10.11.0.1, and 10.12.0.1 plus fd12::1). Each check runs the plugin as
# NCCL loads it (bin/mcp-conformance drives the exported v11 table) with a different
# placement and asserts what devices() exposes and what the log says:
#   MCPNET_RANK_MAP with the local rank from LOCAL_RANK, SLURM_LOCALID or
#   MCPNET_LOCAL_RANK (the log names the variable), devices in the map's order, gid= by
#   address; strict mode failing init with one WARN for a pinned device that does not
#   exist or whose port is down, and skipping it with MCPNET_STRICT=0; NCCL_IB_HCA
#   prefix ambiguity; an unusable NCCL_IB_GID_INDEX named with the port's GID table; a
#   uverbs node the process may not open; tenant P_Keys resolved by value or refused;
#   the init INFO line (version, revision, ABI table, library) and the WARNs for ignored
#   NCCL_IB_ variables and a misspelt MCPNET_ one;
#   a bad map refused at init naming its entry; data over an IPv6 GID and an IPv4 GID;
#   NIC fusion: a map's fused set ('*') as one device, makeVDevice over two devices.
set -euo pipefail
. "$LAB_LIB"
cd "$MCPNET_BUILD_DIR"
plugin=$PWD/plugin/libnccl-net-mcp.so
conf=$PWD/bin/mcp-conformance

# expect FILE ERE WHAT / refute FILE ERE WHAT: lab_grep and lab_refute, file first.
expect() { lab_grep "$2" "$1" "$3"; }
refute() { lab_refute "$2" "$1" "$3"; }

# probe NAME [--fail] [VAR=VALUE...] [-- TESTS]: the plugin's init (+ TESTS, default props)
# in a fresh process with exactly these placement variables; NAME.out / NAME.err in /tmp.
probe() {
  local name=$1 mode="" tests=(props) vars=()
  shift
  if [ "${1:-}" = --fail ]; then
    mode=--expect-init-fail
    shift
  fi
  while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then
      shift
      tests=("$@")
      break
    fi
    vars+=("$1")
    shift
  done
  if ! env -u LOCAL_RANK -u SLURM_LOCALID -u MCPNET_LOCAL_RANK "${vars[@]}" MCP_DRIVE_VERBOSE=1 \
      timeout 120 "$conf" --plugin "$plugin" $mode self "${tests[@]}" > "/tmp/$name.out" 2> "/tmp/$name.err"; then
    cat "/tmp/$name.out" "/tmp/$name.err" >&2
    lab_fail "$name: the conformance program failed"
  fi
}

veth_rxe() { # veth_rxe IFNAME RXE ADDR...
  local ifname=$1 rxe=$2
  shift 2
  ip link add "$ifname" type veth peer name "$ifname-p"
  ip link set "$ifname-p" up
  for a in "$@"; do
    case $a in *:*) ip addr add "$a" dev "$ifname" nodad ;; *) ip addr add "$a" dev "$ifname" ;; esac
  done
  ip link set "$ifname" up
  rdma link add "$rxe" type rxe netdev "$ifname" || lab_fail "rdma link add $rxe"
}
wait_gid() { # wait_gid RXE GID
  local _
  for _ in $(seq 100); do
    grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" && grep -qs "$2" /sys/class/infiniband/$1/ports/1/gids/* && return 0
    sleep 0.1
  done
  lab_fail "$1: no ACTIVE port with GID $2 after 10 s"
}
gid_index() { # gid_index RXE GID TYPE: the index of GID with that RoCE type (one grep: TCG forks are slow)
  local f
  for f in $(grep -lsx "$2" /sys/class/infiniband/$1/ports/1/gids/*); do
    grep -qs "$3" "/sys/class/infiniband/$1/ports/1/gid_attrs/types/${f##*/}" && { echo "${f##*/}"; return 0; }
  done
  return 1
}

veth_rxe p1 rxe1 10.11.0.1/24
veth_rxe p2 rxe2 10.12.0.1/24 fd12::1/64
wait_gid rxe1 0000:0000:0000:0000:0000:ffff:0a0b:0001
wait_gid rxe2 0000:0000:0000:0000:0000:ffff:0a0c:0001
wait_gid rxe2 fd12:0000:0000:0000:0000:0000:0000:0001
rdma link show

map='0=rxe1;1=rxe2,gid=10.12.0.1;2-3=rxe2+rxe1,sl=3'

# --- the rank map and the local rank ------------------------------------------------
probe r0 MCPNET_RANK_MAP="$map" LOCAL_RANK=0
expect /tmp/r0.out '^  0: rxe1 ' "local rank 0 sees rxe1"
refute /tmp/r0.out '^  1: ' "local rank 0 sees one device only"
expect /tmp/r0.err "local rank 0 \(from LOCAL_RANK\): MCPNET_RANK_MAP entry '0=rxe1'" "the log names LOCAL_RANK and the entry"

probe r1 MCPNET_RANK_MAP="$map" SLURM_LOCALID=1
expect /tmp/r1.out '^  0: rxe2 ' "local rank 1 (SLURM_LOCALID) sees rxe2"
refute /tmp/r1.out '^  1: ' "local rank 1 sees one device only"
expect /tmp/r1.err 'from SLURM_LOCALID' "the log names SLURM_LOCALID"
expect /tmp/r1.err 'rxe2 port 1: GID [0-9]+ 10\.12\.0\.1 .*pinned by address' "gid=10.12.0.1 picks that address's GID"

probe r2 MCPNET_RANK_MAP="$map" LOCAL_RANK=0 MCPNET_LOCAL_RANK=2
expect /tmp/r2.out '^  0: rxe2 ' "local rank 2: rxe2 first, as the map lists it"
expect /tmp/r2.out '^  1: rxe1 ' "local rank 2: rxe1 second"
refute /tmp/r2.out '^  2: ' "local rank 2 sees exactly two devices"
expect /tmp/r2.err 'local rank 2 \(from MCPNET_LOCAL_RANK\)' "MCPNET_LOCAL_RANK wins over LOCAL_RANK"

# NIC fusion in the map: '*' fuses rxe1 and rxe2 into one device (named after both, its
# pciPath and guid rxe1's), '+' adds rxe0 as a second. makeVDevice over two physical
# devices shows both in vProps with the summed speed (conformance test vdevice).
probe fused MCPNET_RANK_MAP='0=rxe1*rxe2+rxe0' LOCAL_RANK=0
expect /tmp/fused.out '^  0: rxe1\+rxe2 ' "'rxe1*rxe2' is one device, named after both members"
expect /tmp/fused.out '^  1: rxe0 ' "'+rxe0' is a second device"
refute /tmp/fused.out '^  2: ' "the fused members are not also offered alone"
probe fusedtwice --fail MCPNET_RANK_MAP='0=rxe1*rxe2*rxe0*rxe1:1' LOCAL_RANK=0
expect /tmp/fusedtwice.err "device rxe1 is named twice" "a fused set naming a device twice is refused at init"
probe vdev2 NCCL_IB_HCA==rxe1,rxe2 -- vdevice
expect /tmp/vdev2.out 'device 3 = rxe[12]\+rxe[12], [0-9]+ Mb/s, vProps \{2: 1 0\}' \
  "makeVDevice over devices 1 and 0: index 3, both members in vProps"

probe nomap NCCL_IB_HCA==rxe0,rxe1
expect /tmp/nomap.out '^  1: ' "without a map, NCCL_IB_HCA=rxe0,rxe1 gives two devices"
refute /tmp/nomap.out 'rxe2' "without a map, rxe2 is not listed"
# A space after the comma: NCCL keeps it (its own transports skip " rxe1"); mcpnet trims
# it, uses both devices in strict mode, and WARNs that NCCL itself would not match it.
probe spaced NCCL_IB_HCA="=rxe0, rxe1"
expect /tmp/spaced.out '^  1: ' "NCCL_IB_HCA='=rxe0, rxe1' gives two devices"
refute /tmp/spaced.out 'rxe2' "with the spaced list, rxe2 is not listed"
expect /tmp/spaced.err "NCCL_IB_HCA entry ' rxe1' has spaces around its name: mcpnet ignores them, but NCCL itself" \
  "the trimmed entry is named in a WARN"

# --- strict mode ----------------------------------------------------------------------
probe missing --fail MCPNET_RANK_MAP='0=rxe9+rxe1' LOCAL_RANK=0
expect /tmp/missing.err "init fails \(MCPNET_STRICT=1\): rxe9 \(pinned by MCPNET_RANK_MAP entry '0=rxe9\+rxe1'\): no such device" \
  "a pinned device that does not exist fails init, naming it"
expect /tmp/missing.err 'Devices found: .*rxe1 port 1: used.*rxe0: not selected by .*rxe2: not selected by' \
  "the same WARN lists every device and what became of it"
expect /tmp/missing.err 'unless NCCL_NET=MCP' "the WARN says NCCL would fall back"
[ "$(grep -c 'init fails' /tmp/missing.err)" = 1 ] || lab_fail "strict failure must be one WARN"

probe lenient MCPNET_RANK_MAP='0=rxe9+rxe1' LOCAL_RANK=0 MCPNET_STRICT=0
expect /tmp/lenient.out '^  0: rxe1 ' "MCPNET_STRICT=0 keeps the pinned device that exists"
expect /tmp/lenient.err 'requested devices skipped \(MCPNET_STRICT=0\): rxe9' "and warns about the one skipped"

probe norank --fail MCPNET_RANK_MAP="$map"
expect /tmp/norank.err 'MCPNET_RANK_MAP is set but this process has no local rank' "a map without a local rank fails init"
probe uncovered --fail MCPNET_RANK_MAP="$map" LOCAL_RANK=7
expect /tmp/uncovered.err 'places no device for local rank 7 \(from LOCAL_RANK\)' "a rank the map does not cover fails init"

probe badmap --fail MCPNET_RANK_MAP='0-3=rxe1;2=rxe2' LOCAL_RANK=0
expect /tmp/badmap.err "entries '0-3=rxe1' and '2=rxe2' both place local rank 2" "a bad map is refused at init, naming its entries"

ip link set p2 down
for _ in $(seq 50); do grep -q ACTIVE /sys/class/infiniband/rxe2/ports/1/state || break; sleep 0.1; done
probe down --fail MCPNET_RANK_MAP="$map" LOCAL_RANK=1
expect /tmp/down.err "rxe2:1 \(pinned by .*\)|rxe2 \(pinned by .*\): port state is DOWN" "a pinned port that is down fails init, saying so"
ip link set p2 up
wait_gid rxe2 0000:0000:0000:0000:0000:ffff:0a0c:0001

# NCCL uses every device a prefix token matches; so does mcpnet, strict or not, with a WARN.
probe ambiguous NCCL_IB_HCA=rxe
expect /tmp/ambiguous.err "NCCL_IB_HCA=rxe: 'rxe' matches several devices \(rxe0, rxe1, rxe2\)\. mcpnet uses all of them" \
  "strict: an ambiguous NCCL_IB_HCA token is a WARN, no longer an init failure"
expect /tmp/ambiguous.out '^  2: rxe' "strict: all three devices the prefix matches are used, as NCCL uses them"
refute /tmp/ambiguous.err 'init fails' "strict: the ambiguity does not fail init"
probe ambiguous-lenient NCCL_IB_HCA=rxe MCPNET_STRICT=0
expect /tmp/ambiguous-lenient.err "'rxe' matches several devices \(rxe0, rxe1, rxe2\)" "not strict: it is a WARN"

# --- who is running, and what it ignores -----------------------------------------------
# NCCL's transport would read NCCL_IB_AR_THRESHOLD; mcpnet does not, and says so. A
# misspelt MCPNET_ variable is named with the real one. Neither stops init.
probe ignored NCCL_IB_HCA==rxe1 NCCL_IB_AR_THRESHOLD=0 MCPNET_RECOVERY_TIMOUT=5
expect /tmp/ignored.err 'mcpnet [0-9]+\.[0-9]+\.[0-9]+, source revision [^;]+; NCCL took the ncclNetPlugin_v11 table; library /.*libnccl-net-mcp\.so' \
  "init's INFO line names the version, the source revision, the ABI table and the library's path"
expect /tmp/ignored.err "set, but mcpnet does not act on them \(NCCL's own IB transport would\): NCCL_IB_AR_THRESHOLD" \
  "one WARN lists the NCCL_IB_ variable mcpnet ignores"
expect /tmp/ignored.err 'MCPNET_RECOVERY_TIMOUT=5 \(environment\) is not an mcpnet variable and is ignored; the nearest one is MCPNET_RECOVERY_TIMEOUT' \
  "one WARN names the misspelt MCPNET_ variable and the nearest real one"
expect /tmp/ignored.out '^  0: rxe1 ' "init goes on"
[ "$(grep -c 'does not act on them' /tmp/ignored.err)" = 1 ] || lab_fail "the ignored NCCL_IB_ variables are one WARN"

# --- GID index ------------------------------------------------------------------------
# rxe has RoCE v2 GIDs only: ask for v1 to see a present index of the other type used
# as given (NCCL does the same), with a WARN.
v2=$(gid_index rxe1 0000:0000:0000:0000:0000:ffff:0a0b:0001 "RoCE v2") || lab_fail "rxe1 has no RoCE v2 GID for 10.11.0.1"
probe gidempty --fail NCCL_IB_HCA==rxe1 NCCL_IB_GID_INDEX=17
expect /tmp/gidempty.err "rxe1 port 1: GID index 17 is empty or not described to this namespace \(set by NCCL_IB_GID_INDEX\)\. The port's GIDs: 0 fe80::.* 10\.11\.0\.1 v2 p1" \
  "an empty GID index fails init and the message shows the port's GID table"
probe gidv1 NCCL_IB_HCA==rxe1 NCCL_IB_GID_INDEX="$v2" NCCL_IB_ROCE_VERSION_NUM=1
expect /tmp/gidv1.err "rxe1 port 1: GID index $v2 is RoCE v2, not the v1 NCCL_IB_ROCE_VERSION_NUM=1 asks for; used as given" \
  "a RoCE v2 index when v1 is wanted is a WARN, no longer a refusal"
expect /tmp/gidv1.out '^  0: rxe1 ' "and rxe1 is used with that GID"
expect /tmp/gidv1.err "rxe1 port 1: GID $v2 10\.11\.0\.1 \(RoCE v2, netdev p1\): set by NCCL_IB_GID_INDEX" "the log names the index and its source"
probe gidok NCCL_IB_HCA==rxe1 NCCL_IB_GID_INDEX="$v2"
expect /tmp/gidok.err "rxe1 port 1: GID $v2 10\.11\.0\.1 \(RoCE v2, netdev p1\): set by NCCL_IB_GID_INDEX" "a valid index is used and logged with its source"

# --- the device cgroup / permissions on the uverbs node --------------------------------
node=$(grep -l '^rxe1$' /sys/class/infiniband_verbs/uverbs*/ibdev | head -1)
node=/dev/infiniband/$(basename "$(dirname "$node")")
chmod 0666 /dev/infiniband/uverbs*
chmod 0600 "$node"
chmod 1777 /tmp
ulimit -l unlimited
# The build tree may sit below a folder only root can enter (mktemp -d): give the
# unprivileged user copies in the guest's own /tmp.
mkdir -p /tmp/nobody
cp "$conf" "$plugin" /tmp/nobody/
chmod 755 /tmp/nobody /tmp/nobody/*
asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
if ! asnobody env NCCL_IB_HCA==rxe1 MCP_DRIVE_VERBOSE=1 timeout 120 /tmp/nobody/mcp-conformance \
    --plugin /tmp/nobody/libnccl-net-mcp.so --expect-init-fail self props \
    > /tmp/perm.out 2> /tmp/perm.err; then
  cat /tmp/perm.out /tmp/perm.err >&2
  lab_fail "perm: the conformance program failed"
fi
expect /tmp/perm.err "rxe1 \(listed in NCCL_IB_HCA\): cannot open its uverbs node /dev/infiniband/uverbs[0-9]+ \(Permission denied\)" \
  "a listed device whose uverbs node cannot be opened fails init, saying why"
asnobody env MCP_DRIVE_VERBOSE=1 timeout 120 /tmp/nobody/mcp-conformance --plugin /tmp/nobody/libnccl-net-mcp.so \
    self props > /tmp/perm2.out 2> /tmp/perm2.err ||
  { cat /tmp/perm2.out /tmp/perm2.err >&2; lab_fail "perm2: the conformance program failed"; }
refute /tmp/perm2.out 'rxe1' "unlisted, that device is left out"
expect /tmp/perm2.out '^  0: rxe' "and the others are used"
expect /tmp/perm2.err 'rxe1: cannot open its uverbs node' "the INFO says why rxe1 was excluded"
chmod 0666 "$node"

# --- P_Keys ---------------------------------------------------------------------------
probe pkey NCCL_IB_HCA==rxe1 MCPNET_TENANT_PKEY=0x7fff
expect /tmp/pkey.err 'rxe1 port 1: GID .*P_Key 0xffff at index 0' "tenant P_Key 0x7fff resolves to 0xffff at index 0 (low 15 bits)"
probe pkeymissing --fail NCCL_IB_HCA==rxe1 MCPNET_TENANT_PKEY=0x8123
expect /tmp/pkeymissing.err 'MCPNET_TENANT_PKEY 0x8123: partition 0x0123 is not in the port.s P_Key table \(table: 0xffff\)' \
  "a partition the port lacks is refused, naming the table"
probe pkeybad --fail MCPNET_TENANT_PKEY=0x8000
expect /tmp/pkeybad.err 'MCPNET_TENANT_PKEY.*not a partition' "0x8000 is refused at init"

# --- data over an IPv6 GID and over an IPv4 GID -------------------------------------------
probe v6 NCCL_IB_HCA==rxe2 NCCL_IB_ADDR_FAMILY=AF_INET6 CONF_MAX_SIZE=$((1 << 20)) -- props sizes
expect /tmp/v6.err 'rxe2 port 1: GID [0-9]+ fd12::1 \(RoCE v2' "AF_INET6 picks rxe2's IPv6 GID"
expect /tmp/v6.out '^ok +sizes ' "data verified over the IPv6 GID"
probe v4 MCPNET_RANK_MAP='0=rxe1,gid=10.11.0.0/24' LOCAL_RANK=0 CONF_MAX_SIZE=$((1 << 20)) -- props sizes
expect /tmp/v4.err 'rxe1 port 1: GID [0-9]+ 10\.11\.0\.1 \(RoCE v2' "gid=CIDR picks rxe1's IPv4 GID"
expect /tmp/v4.out '^ok +sizes ' "data verified over the IPv4 GID"
lab_log "placement checks passed"
