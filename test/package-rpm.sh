#!/bin/bash
# package-rpm.sh - builds the .rpm with CPack and inspects it (rpm -qip / -qlp / -qp
# --requires). It cannot be installed here (Debian), so this is the check it gets: the
# name carries the version, the plugin lies in /usr/lib64 where RPM distributions'
# loader looks, the tools, man page and docs are in, and the package requires the
# glibc the README states. The package is built in a tree of its own (<build>/rpm-tree)
# configured as an RPM distribution would (lib64) and with -DMCPNET_BUILD_TESTS=OFF, as
# a package build does, which checks that option too.
set -euo pipefail
build=${1:?usage: package-rpm.sh BUILD_DIR SOURCE_DIR VERSION}
src=${2:?usage: package-rpm.sh BUILD_DIR SOURCE_DIR VERSION}
version=${3:?usage: package-rpm.sh BUILD_DIR SOURCE_DIR VERSION}
command -v rpmbuild >/dev/null || { echo "package-rpm: needs rpmbuild (Debian: apt-get install rpm)"; exit 1; }
tree=$build/rpm-tree
rm -rf "$tree"
cmake -S "$src" -B "$tree" -DMCPNET_BUILD_TESTS=OFF -DCMAKE_INSTALL_LIBDIR=lib64 >"$tree.configure.log" 2>&1 ||
  { cat "$tree.configure.log"; exit 1; }
# No test may be registered in a tree built without tests.
if [ -f "$tree/CTestTestfile.cmake" ] && grep -q add_test "$tree/CTestTestfile.cmake"; then
  echo "package-rpm: -DMCPNET_BUILD_TESTS=OFF still registered tests"; exit 1
fi
cmake --build "$tree" -j2 >"$tree.build.log" 2>&1 || { tail -40 "$tree.build.log"; exit 1; }
if ls "$tree"/test/test_* >/dev/null 2>&1; then
  echo "package-rpm: -DMCPNET_BUILD_TESTS=OFF still built unit tests"; exit 1
fi
cd "$tree"
cpack -G RPM >cpack.log 2>&1 || { cat cpack.log; exit 1; }
rpmfile=mcpnet-$version-1.x86_64.rpm
[ -f "$rpmfile" ] || { echo "package-rpm: no $rpmfile (the name must carry the version)"; ls ./*.rpm; exit 1; }
echo "built $tree/$rpmfile"
info=$(rpm -qip "$rpmfile")
echo "$info" | sed -n '1,/^Description/p'
grep -q "^Version *: $version\$" <<<"$info" || { echo "package-rpm: header version is not $version"; exit 1; }
files=$(rpm -qlp "$rpmfile")
for want in /usr/lib64/libnccl-net-mcp.so /usr/bin/mcpnet-params /usr/bin/mcpnet-doctor /usr/bin/mcpnet-bench /usr/bin/mcpnet-top \
            /usr/share/man/man7/libnccl-net-mcp.7 /usr/share/man/man1/mcpnet-top.1 /usr/share/doc/mcpnet/README.md \
            /usr/share/doc/mcpnet/CHANGELOG.md; do
  grep -qx "$want" <<<"$files" || { echo "package-rpm: $rpmfile lacks $want"; echo "$files"; exit 1; }
done
# The package must not claim folders every system owns (a conflict with the filesystem package).
for own in /usr /usr/lib64 /usr/bin /usr/share/man /usr/share/man/man1 /usr/share/man/man7; do
  if grep -qx "$own" <<<"$files"; then echo "package-rpm: $rpmfile owns $own"; exit 1; fi
done
requires=$(rpm -qp --requires "$rpmfile")
grep -q 'GLIBC_2\.34' <<<"$requires" || { echo "package-rpm: no glibc 2.34 requirement:"; echo "$requires"; exit 1; }
if grep -q 'libibverbs' <<<"$requires"; then
  echo "package-rpm: libibverbs must stay optional (loaded at run time):"; echo "$requires"; exit 1
fi
echo "requires: $(tr '\n' ' ' <<<"$requires")"
