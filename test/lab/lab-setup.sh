#!/bin/bash
# lab-setup.sh - prepare the soft-RoCE lab: a stock Debian kernel unpacked into the build
# tree (apt-get download + dpkg -x, nothing installed into /boot) and a busybox initramfs
# that mounts the host root read-only over 9p and runs one command as root; and a
# do-nothing nvidia_peermem module for that kernel (the GPU-like memory scenarios).
#
# Usage: lab-setup.sh [LAB_DIR]      (default: $MCPNET_BUILD_DIR/lab, MCPNET_BUILD_DIR=<repo>/build)
# Safe to run again: each step is skipped when its output is already there.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
lab=${1:-${MCPNET_BUILD_DIR:-$repo/build}/lab}
mkdir -p "$lab"
lab=$(cd "$lab" && pwd)

die() { echo "lab-setup: $*" >&2; exit 1; }

for tool in qemu-system-x86_64 busybox depmod modinfo make cpio gzip dpkg apt-get; do
  command -v "$tool" >/dev/null || die "missing '$tool': run scripts/install-deps first (apt-get install qemu-system-x86 busybox-static kmod cpio)"
done
busybox_bin=$(command -v busybox)
grep -q 'statically linked' <<<"$(file -L "$busybox_bin" 2>/dev/null)" ||
  die "$busybox_bin is not statically linked: apt-get install busybox-static"

# 1. The kernel, into $lab/kernel (vmlinuz + modules), at the version Debian's meta package names.
if ! ls "$lab"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -n "$pkg" ] || die "apt-cache cannot resolve linux-image-amd64 (run apt-get update)"
  mkdir -p "$lab/dl"
  rm -f "$lab"/dl/*.deb
  (cd "$lab/dl" && apt-get download -q "$pkg" 2>&1 | grep -v 'unsandboxed' >&2) || true
  deb=$(ls "$lab"/dl/"$pkg"_*.deb 2>/dev/null | head -n1)
  [ -n "$deb" ] || die "apt-get download $pkg failed"
  rm -rf "$lab/kernel.tmp"
  dpkg -x "$deb" "$lab/kernel.tmp"
  mv "$lab/kernel.tmp" "$lab/kernel"
  rm -f "$deb"
fi
kver=$(basename "$(ls -d "$lab"/kernel/lib/modules/*/ | head -n1)")
[ -n "$kver" ] || die "no modules folder in $lab/kernel"
[ -f "$lab/kernel/lib/modules/$kver/modules.dep" ] || depmod -b "$lab/kernel" "$kver"
kmods="$lab/kernel/lib/modules/$kver/kernel"
[ -f "$(find "$kmods" -name rdma_rxe.ko | head -n1)" ] || die "kernel $kver has no rdma_rxe module"

# 2. The initramfs: busybox, the virtio/9p/net modules in load order, the netdev types the
# pod scenarios build (macvlan, ipvlan: single_pods.sh), and our init. dummy stays out: at
# load it would create a dummy0 that scenarios create themselves (single_doctor.sh); the
# guest's modprobe wrapper loads it on demand (guest-main.sh), as any other. The module
# list is recorded next to the initrd, so a build tree made before a change of the list
# gets a new initrd even where this file's timestamp says nothing (a fresh checkout
# beside an old build/lab, a CI cache).
order="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p failover net_failover virtio_net macvlan ipvlan"
init_src="$here/guest/init"
initrd="$lab/initrd.gz"
if [ ! -f "$initrd" ] || [ "$init_src" -nt "$initrd" ] || [ "$0" -nt "$initrd" ] ||
   [ "$(cat "$lab/initrd.modules" 2>/dev/null)" != "$order" ]; then
  stage="$lab/initramfs.tmp"
  rm -rf "$stage"
  mkdir -p "$stage"/{bin,dev,proc,sys,newroot,results,xchg,project,modules}
  cp "$busybox_bin" "$stage/bin/busybox"
  ln -s busybox "$stage/bin/sh"
  i=0
  for m in $order; do
    f=$(find "$kmods" -name "$m.ko" | head -n1)
    [ -n "$f" ] || die "module $m.ko not found in kernel $kver"
    cp "$f" "$stage/modules/$(printf '%02d' $i)-$m.ko"
    i=$((i + 1))
  done
  cp "$init_src" "$stage/init"
  chmod 755 "$stage/init"
  (cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) > "$initrd.tmp"
  mv "$initrd.tmp" "$initrd"
  echo "$order" > "$lab/initrd.modules"
  rm -rf "$stage"
fi

# 3. The lab's stand-in for nvidia_peermem (test/lab/guest/fake-peermem): a do-nothing module
# whose presence makes mcpnet report GPU pointer support, built against this kernel's
# headers (Debian's linux-headers-$kver, installed when missing and we are root). Kbuild
# writes next to its sources, so it builds in a copy under $lab/fake-peermem.
peermem_src="$here/guest/fake-peermem"
peermem_ko="$lab/fake-peermem/nvidia_peermem.ko"
if [ ! -f "$peermem_ko" ] || [ "$peermem_src/nvidia_peermem.c" -nt "$peermem_ko" ] ||
   [ "$peermem_src/Kbuild" -nt "$peermem_ko" ] || ! grep -q "^$kver " <<<"$(modinfo -F vermagic "$peermem_ko" 2>/dev/null)"; then
  hdrs=/usr/src/linux-headers-$kver
  if [ ! -f "$hdrs/Makefile" ]; then
    [ "$(id -u)" = 0 ] || die "no kernel headers in $hdrs: apt-get install linux-headers-$kver (as root)"
    echo "lab-setup: installing linux-headers-$kver to build the nvidia_peermem stand-in"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "linux-headers-$kver" >&2 ||
      die "apt-get install linux-headers-$kver failed (apt-get update first?)"
  fi
  rm -rf "$lab/fake-peermem"
  mkdir -p "$lab/fake-peermem"
  cp "$peermem_src/nvidia_peermem.c" "$peermem_src/Kbuild" "$lab/fake-peermem/"
  make -s -C "$hdrs" M="$lab/fake-peermem" modules >&2 || die "building the nvidia_peermem stand-in failed"
  grep -q "^$kver " <<<"$(modinfo -F vermagic "$peermem_ko")" || die "$peermem_ko is not built for $kver"
fi

ln -sf "$(ls "$lab"/kernel/boot/vmlinuz-* | head -n1)" "$lab/vmlinuz"
echo "$kver" > "$lab/kernel-version"
echo "lab-setup: kernel $kver and initramfs ready in $lab"
