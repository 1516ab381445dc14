#!/bin/bash
# package-rpm.sh - builds the .rpm packages with CPack and inspects them (rpm -qp): they
# cannot be installed here (Debian). As an RPM distribution builds them: in a tree of its
# own (<build>/rpm-tree-...) with the plugin in /usr/lib64, executable as RPM distributions
# install shared objects (CMake on Debian leaves them 0644), and -DMCPNET_BUILD_TESTS=OFF (which
# this checks too). mcpnet (plugin, mcpnet-doctor, mcpnet-top, mcpnet-params) and mcpnet-bench, each
# named NAME-VERSION-1.ARCH.rpm with the source revision's version (package-lib.sh), its
# requirements rpmbuild's own scan of the binaries (glibc's symbol versions; never
# libibverbs, which is loaded at run time), man pages gzip -9n, the binaries stripped with
# a -debuginfo package holding their debug info. CPack rewrites source paths in the debug
# info in place and needs the source and build folders' paths at least as long as
# /usr/src/debug/mcpnet/src_N: the tree is configured through a link inside the build
# folder and built in a folder with a long name, long enough wherever the project lies.
#   package-rpm.sh BUILD_DIR SOURCE_DIR BASE_VERSION
set -euo pipefail
build=$(cd "${1:?usage: package-rpm.sh BUILD_DIR SOURCE_DIR BASE_VERSION}" && pwd)
src=$(cd "${2:?usage: package-rpm.sh BUILD_DIR SOURCE_DIR BASE_VERSION}" && pwd)
base=${3:?usage: package-rpm.sh BUILD_DIR SOURCE_DIR BASE_VERSION}
. "$src/test/package-lib.sh"
command -v rpmbuild > /dev/null || { echo "package-rpm: needs rpmbuild (Debian: apt-get install rpm)"; exit 1; }
fail() { echo "package-rpm: $*"; exit 1; }
tree=$build/rpm-tree-long-enough-for-debuginfo
link=$build/rpm-source-link-long-enough-for-debuginfo
rm -rf "$tree"
ln -sfn "$src" "$link"
cmake -S "$link" -B "$tree" -DMCPNET_BUILD_TESTS=OFF -DCMAKE_INSTALL_LIBDIR=lib64 -DCMAKE_INSTALL_SO_NO_EXE=0 > "$tree.configure.log" 2>&1 ||
  { cat "$tree.configure.log"; exit 1; }
# No test may be registered in a tree built without tests.
if [ -f "$tree/CTestTestfile.cmake" ] && grep -q add_test "$tree/CTestTestfile.cmake"; then
  fail "-DMCPNET_BUILD_TESTS=OFF still registered tests"
fi
cmake --build "$tree" -j2 > "$tree.build.log" 2>&1 || { tail -40 "$tree.build.log"; exit 1; }
if ls "$tree"/test/test_* > /dev/null 2>&1; then
  fail "-DMCPNET_BUILD_TESTS=OFF still built unit tests"
fi
cd "$tree"
cpack -G RPM > cpack.log 2>&1 || { cat cpack.log; exit 1; }
version=$(package_version "$src" "$base")
arch=$(uname -m)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for pkg in mcpnet mcpnet-bench; do
  rpmfile=$pkg-$version-1.$arch.rpm debuginfo=$pkg-debuginfo-$version-1.$arch.rpm
  [ -f "$rpmfile" ] || { ls ./*.rpm; fail "no $rpmfile (the name must carry the source revision's version)"; }
  [ -f "$debuginfo" ] || { ls ./*.rpm; fail "no debug package $debuginfo"; }
  echo "built $tree/$rpmfile and $debuginfo"
  info=$(rpm -qip "$rpmfile")
  grep -q "^Version *: $version\$" <<< "$info" || fail "$rpmfile's header version is not $version"
  root=$scratch/$pkg
  mkdir -p "$root" "$root-debuginfo"
  (cd "$root" && rpm2cpio "$tree/$rpmfile" | cpio -idm --quiet)
  (cd "$root-debuginfo" && rpm2cpio "$tree/$debuginfo" | cpio -idm --quiet)
  check_stripped "$root" "$rpmfile"
  while IFS= read -r f; do
    id=$(readelf -n "$f" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
    [ -n "$(find "$root-debuginfo/usr/lib/debug" -name "*.debug" -exec sh -c 'readelf -n "$1" > "$1.notes"; grep -q "Build ID: $2" "$1.notes"' _ {} "$id" \; -print 2> /dev/null)" ] ||
      fail "$debuginfo has no debug file for ${f#"$root"} (build id $id)"
  done < <(elf_files "$root")
  while IFS= read -r m; do check_gzip_n "$m"; done < <(find "$root/usr/share/man" -type f 2> /dev/null)
  requires=$(rpm -qp --requires "$rpmfile")
  grep -q 'libc.so.6(GLIBC_' <<< "$requires" || { echo "$requires"; fail "$rpmfile: no glibc requirement from the binaries"; }
  if grep -q 'libibverbs' <<< "$requires"; then
    echo "$requires"; fail "$rpmfile: libibverbs must stay optional (loaded at run time)"
  fi
  # The newest glibc symbol version the binaries use is among what rpmbuild found.
  newest=$(while IFS= read -r f; do readelf --dyn-syms -W "$f"; done < <(elf_files "$root") |
    grep -o '@GLIBC_[0-9.]*' | sed 's/@//' | sort -uV | tail -n 1)
  grep -qF "($newest)" <<< "$requires" || { echo "$requires"; fail "$rpmfile does not require $newest, which its binaries use"; }
  echo "  $pkg requires: $(grep -c . <<< "$requires") entries, newest glibc $newest; stripped; debug info in $debuginfo"
done
files=$(rpm -qlp "mcpnet-$version-1.$arch.rpm")
for want in /usr/lib64/libnccl-net-mcp.so /usr/bin/mcpnet-params /usr/bin/mcpnet-doctor /usr/bin/mcpnet-top \
  /usr/share/man/man1/mcpnet-top.1.gz /usr/share/man/man7/libnccl-net-mcp.7.gz /usr/share/doc/mcpnet/README.md /usr/share/doc/mcpnet/CHANGELOG.md \
  /usr/share/doc/mcpnet/copyright; do
  grep -qx "$want" <<< "$files" || { echo "$files"; fail "mcpnet lacks $want"; }
done
if grep -q 'mcpnet-bench\|lintian' <<< "$files"; then echo "$files"; fail "mcpnet carries the benchmark or Debian's lintian overrides"; fi
bench=$(rpm -qlp "mcpnet-bench-$version-1.$arch.rpm")
for want in /usr/bin/mcpnet-bench /usr/bin/mcpnet-cpu-cost /usr/share/man/man1/mcpnet-bench.1.gz; do
  grep -qx "$want" <<< "$bench" || { echo "$bench"; fail "mcpnet-bench lacks $want"; }
done
grep -qx 'mcpnet' <<< "$(rpm -qp --requires "mcpnet-bench-$version-1.$arch.rpm")" || fail "mcpnet-bench does not require mcpnet"
# The package must not claim folders every system owns (a conflict with the filesystem package).
for own in /usr /usr/lib64 /usr/bin /usr/share/man /usr/share/man/man1 /usr/share/man/man7; do
  if grep -qx "$own" <<< "$files$bench"; then fail "a package owns $own"; fi
done
