#!/bin/bash
# package-arm64.sh - the plugin and tools cross-built for arm64 (GH200/GB200 nodes) with
# Debian's cross compiler (gcc-aarch64-linux-gnu), build only: nothing runs. readelf checks
# that every binary is an AArch64 ELF64, that the plugin exports exactly the tables the
# native one does (ncclNetPlugin_v8 to _v12) and needs nothing but libc (libibverbs is
# dlopened); then the packages for arm64: the two .deb with Architecture arm64, the plugin
# in /usr/lib/aarch64-linux-gnu and Depends computed by dpkg-shlibdeps from the arm64
# binaries (which needs libc6:arm64, scripts/install-deps), lintian clean as the amd64 ones;
# and the two .rpm for aarch64 with the plugin in /usr/lib64.
#   package-arm64.sh BUILD_DIR SOURCE_DIR BASE_VERSION
# BUILD_DIR is the native build, whose plugin gives the expected exports.
set -euo pipefail
build=$(cd "${1:?usage: package-arm64.sh BUILD_DIR SOURCE_DIR BASE_VERSION}" && pwd)
src=$(cd "${2:?usage: package-arm64.sh BUILD_DIR SOURCE_DIR BASE_VERSION}" && pwd)
base=${3:?usage: package-arm64.sh BUILD_DIR SOURCE_DIR BASE_VERSION}
. "$src/test/package-lib.sh"
fail() { echo "package-arm64: $*"; exit 1; }
cc=aarch64-linux-gnu-gcc
command -v $cc > /dev/null || fail "needs $cc (scripts/install-deps: gcc-aarch64-linux-gnu)"
dpkg -s libc6:arm64 > /dev/null 2>&1 ||
  fail "needs libc6:arm64 for dpkg-shlibdeps (scripts/install-deps adds the arm64 architecture)"
tree=$build/arm64-tree
rm -rf "$tree"
mkdir -p "$tree/verbs-include"
# The verbs headers are the same on every architecture; only they are taken from the host
# (the rest of the system headers come from the cross compiler's own sysroot).
[ -f /usr/include/infiniband/verbs.h ] || fail "needs /usr/include/infiniband/verbs.h (libibverbs-dev)"
ln -s /usr/include/infiniband "$tree/verbs-include/infiniband"
configure() {
  cmake -S "$src" -B "$tree" -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 -DCMAKE_C_COMPILER=$cc \
    -DIBVERBS_INCLUDE_DIR="$tree/verbs-include" -DMCPNET_BUILD_TESTS=OFF -DMCPNET_WERROR=ON "$@" \
    >> "$tree/configure.log" 2>&1 || { cat "$tree/configure.log"; exit 1; }
  cmake --build "$tree" -j2 >> "$tree/build.log" 2>&1 || { tail -40 "$tree/build.log"; exit 1; }
}
configure
plugin=$tree/plugin/libnccl-net-mcp.so
for f in "$plugin" "$tree/bin/mcpnet-doctor" "$tree/tools/mcpnet-params" "$tree/bin/mcpnet-bench"; do
  [ -f "$f" ] || fail "the cross build made no ${f#"$tree"/}"
  head=$(readelf -h "$f")
  grep -q 'Class: *ELF64' <<< "$head" && grep -q 'Machine: *AArch64' <<< "$head" ||
    { echo "$head"; fail "${f#"$tree"/} is not an AArch64 ELF64"; }
done
exports() { readelf --dyn-syms -W "$1" | awk '$5 == "GLOBAL" && $7 != "UND" { print $8 }' | sort; }
want=$(exports "$build/plugin/libnccl-net-mcp.so")
got=$(exports "$plugin")
[ -n "$want" ] && [ "$got" = "$want" ] || fail "the arm64 plugin exports '$(tr '\n' ' ' <<< "$got")', the native one '$(tr '\n' ' ' <<< "$want")'"
needed=$(readelf -d "$plugin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
[ "$needed" = "libc.so.6 " ] || fail "the arm64 plugin needs '$needed'; only libc.so.6 (libibverbs is dlopened)"
echo "arm64: plugin, mcpnet-doctor, mcpnet-params, mcpnet-bench are AArch64 ELF64; exports $(tr '\n' ' ' <<< "$got")"

version=$(package_version "$src" "$base")
cd "$tree"
cpack -G DEB > cpack-deb.log 2>&1 || { cat cpack-deb.log; exit 1; }
for pkg in mcpnet mcpnet-bench; do
  deb=${pkg}_${version}_arm64.deb
  [ -f "$deb" ] && [ -f "${pkg}-dbgsym_${version}_arm64.ddeb" ] || { ls; fail "no $deb or its -dbgsym"; }
  [ "$(dpkg-deb -f "$deb" Architecture)" = arm64 ] || fail "$deb: Architecture $(dpkg-deb -f "$deb" Architecture)"
  grep -q 'libc6 (>= ' <<< "$(dpkg-deb -f "$deb" Depends)" || fail "$deb: Depends '$(dpkg-deb -f "$deb" Depends)' lacks libc6"
  echo "  $deb: Depends $(dpkg-deb -f "$deb" Depends)"
done
contents=$(dpkg-deb --contents "mcpnet_${version}_arm64.deb")
grep -q ' ./usr/lib/aarch64-linux-gnu/libnccl-net-mcp.so$' <<< "$contents" ||
  fail "the arm64 .deb does not put the plugin in /usr/lib/aarch64-linux-gnu"
lint=$(lintian --pedantic -E -I --fail-on error,warning,info,pedantic \
  "mcpnet_${version}_arm64.deb" "mcpnet-bench_${version}_arm64.deb" 2>&1 | grep -v 'root privileges') || true
[ -z "$lint" ] || { echo "$lint"; fail "lintian reports tags on the arm64 packages"; }
echo "  lintian --pedantic: clean"

# The .rpm as an aarch64 RPM distribution lays it out: the same tree, reconfigured.
configure -DCMAKE_INSTALL_LIBDIR=lib64 -DCMAKE_INSTALL_SO_NO_EXE=0
cpack -G RPM > cpack-rpm.log 2>&1 || { cat cpack-rpm.log; exit 1; }
for pkg in mcpnet mcpnet-bench; do
  rpmfile=$pkg-$version-1.aarch64.rpm
  [ -f "$rpmfile" ] || { ls ./*.rpm; fail "no $rpmfile"; }
  [ "$(rpm -qp --qf '%{ARCH}' "$rpmfile")" = aarch64 ] || fail "$rpmfile is not aarch64"
  echo "  $rpmfile"
done
files=$(rpm -qlp "mcpnet-$version-1.aarch64.rpm")
grep -qx /usr/lib64/libnccl-net-mcp.so <<< "$files" ||
  fail "the aarch64 .rpm does not put the plugin in /usr/lib64"
