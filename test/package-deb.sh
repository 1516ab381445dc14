#!/bin/bash
# package-deb.sh - builds the .deb with CPack and installs it into a scratch root
# (<build>/pkgroot) the way a container image would, checking what it carries. The
# lab scenario single_deb_install.sh then loads the plugin from that root.
set -euo pipefail
build=${1:?usage: package-deb.sh BUILD_DIR [VERSION]}
cd "$build"
version=${2:-$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' CMakeCache.txt)}
rm -f mcpnet_*.deb
cpack -G DEB >/dev/null
# The file name carries the version, as the .rpm's does (package-rpm.sh).
deb=mcpnet_${version}_amd64.deb
[ -f "$deb" ] || { echo "package-deb: no $deb"; ls mcpnet_*.deb; exit 1; }
echo "built $build/$deb"
dpkg-deb --info "$deb" | sed -n '1,/Description/p'
contents=$(dpkg-deb --contents "$deb")
for want in ./usr/lib/x86_64-linux-gnu/libnccl-net-mcp.so ./usr/bin/mcpnet-params ./usr/bin/mcpnet-top \
            ./usr/share/man/man7/libnccl-net-mcp.7 ./usr/share/man/man1/mcpnet-top.1 ./usr/share/doc/mcpnet/README.md; do
  grep -q " $want\$" <<<"$contents" || { echo "package-deb: $deb lacks $want"; echo "$contents"; exit 1; }
done
rm -rf pkgroot
dpkg -x "$deb" pkgroot
test -f pkgroot/usr/lib/x86_64-linux-gnu/libnccl-net-mcp.so
echo "installed into $build/pkgroot"
