#!/bin/bash
# guest-main.sh - first program inside a lab guest's chroot (the host's root, read-only).
# Brings up soft-RoCE (rdma_rxe) and the guest's network, runs the scenario command as
# root with its output on the console and in the results share, records the exit
# status for the host, and powers the VM off. The host kernel has no RDMA; this guest's
# stock Debian kernel does.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
# shellcheck disable=SC1091
. /run/lab/lab.env

poweroff_now() {
  sync
  echo 1 > /proc/sys/kernel/sysrq
  echo o > /proc/sysrq-trigger
  sleep 30
}

setup() {
  # The kernel loads modules on demand through this wrapper: the lab kernel's modules
  # live in the build tree, not in /lib/modules of the (host's) root.
  printf '#!/bin/sh\nexec /usr/sbin/modprobe -d %s "$@"\n' "$LAB_KERNEL_DIR" > /run/lab-modprobe
  chmod 755 /run/lab-modprobe
  echo /run/lab-modprobe > /proc/sys/kernel/modprobe
  for m in rdma_rxe ib_uverbs; do
    /run/lab-modprobe "$m" || { echo "lab: cannot load $m"; return 1; }
  done
  ip link set lo up
  sysctl -qw net.ipv6.conf.all.keep_addr_on_down=1 net.ipv6.conf.default.keep_addr_on_down=1
  if [ -n "${LAB_SELF_IP:-}" ]; then
    ip link set eth0 up || return 1
    sysctl -qw net.ipv6.conf.eth0.keep_addr_on_down=1
    ip addr add "$LAB_SELF_IP/24" dev eth0
    ip -6 addr add "$LAB_SELF_IP6/64" dev eth0 nodad
    rdma link add rxe0 type rxe netdev eth0 || return 1
  else
    rdma link add rxe0 type rxe netdev lo || return 1
  fi
  # A pair's second wire (lab --wires 2): eth1, whose MAC says it is the second NIC
  # QEMU was given, and rxe1 on it.
  if [ "${LAB_WIRES:-1}" = 2 ]; then
    [ "$(cat /sys/class/net/eth1/address 2>/dev/null)" = "$LAB_MAC1" ] ||
      { echo "lab: eth1 is not the second wire's NIC (MAC $(cat /sys/class/net/eth1/address 2>/dev/null), expected $LAB_MAC1)"; return 1; }
    ip link set eth1 up || return 1
    sysctl -qw net.ipv6.conf.eth1.keep_addr_on_down=1
    ip addr add "$LAB_SELF_IP1/24" dev eth1
    ip -6 addr add "$LAB_SELF_IP6_1/64" dev eth1 nodad
    rdma link add rxe1 type rxe netdev eth1 || return 1
  fi
  local rxe ok
  for rxe in rxe0 $([ "${LAB_WIRES:-1}" = 2 ] && echo rxe1); do
    ok=0
    for _ in $(seq 100); do
      grep -q ACTIVE /sys/class/infiniband/$rxe/ports/1/state 2>/dev/null && { ok=1; break; }
      sleep 0.1
    done
    [ $ok = 1 ] || { echo "lab: $rxe port never became ACTIVE"; return 1; }
  done
  return 0
}

if ! setup > /run/lab/setup.log 2>&1; then
  echo "lab: guest setup failed:"
  cat /run/lab/setup.log
  echo 97 > /run/lab/rc
  poweroff_now
fi
ulimit -l unlimited
ulimit -c 0
cd "$LAB_SOURCE_DIR" || exit 1
export LAB_LIB="$LAB_SOURCE_DIR/test/lab/lab-lib.sh"
set -o pipefail
bash /run/lab/cmd.sh 2>&1 | tee /run/lab/out
echo "${PIPESTATUS[0]}" > /run/lab/rc.tmp
mv /run/lab/rc.tmp /run/lab/rc
poweroff_now
