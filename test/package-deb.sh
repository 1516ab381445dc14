#!/bin/bash
# package-deb.sh - builds the .deb packages with CPack and checks them as a distribution
# would, then unpacks mcpnet into a scratch root (<build>/pkgroot) the way a container image
# installs it; the lab scenario single_deb_install.sh loads the plugin from there.
#   mcpnet        the plugin (in /usr/lib/<triplet>), mcpnet-doctor, mcpnet-top, mcpnet-params, man
#                 pages, docs; mcpnet-bench the benchmark tools, depending on mcpnet
#   each named NAME_VERSION_ARCH.deb with the version of the source revision
#   (package-lib.sh), a -dbgsym .ddeb with the debug info of every ELF file, the ELF
#   files stripped, Depends exactly what dpkg-shlibdeps computes from those files (and
#   libc6 no older than the newest GLIBC_ symbol version they use), man pages and
#   changelog gzip -9n, the changelog a Debian one for this version, a copyright file;
#   and lintian --pedantic clean, every remaining tag overridden with its reason
#   (cmake/deb/*.lintian-overrides).
#   package-deb.sh BUILD_DIR SOURCE_DIR BASE_VERSION
set -euo pipefail
build=${1:?usage: package-deb.sh BUILD_DIR SOURCE_DIR BASE_VERSION}
src=$(cd "${2:?usage: package-deb.sh BUILD_DIR SOURCE_DIR BASE_VERSION}" && pwd)
base=${3:?usage: package-deb.sh BUILD_DIR SOURCE_DIR BASE_VERSION}
. "$src/test/package-lib.sh"
for tool in dpkg-shlibdeps lintian; do
  command -v $tool > /dev/null || { echo "package-deb: needs $tool (scripts/install-deps installs it)"; exit 1; }
done
cd "$build"
rm -f ./mcpnet*.deb ./mcpnet*.ddeb
cpack -G DEB > cpack-deb.log 2>&1 || { cat cpack-deb.log; exit 1; }
version=$(package_version "$src" "$base")
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "package-deb: $*"; exit 1; }

for pkg in mcpnet mcpnet-bench; do
  deb=${pkg}_${version}_${arch}.deb ddeb=${pkg}-dbgsym_${version}_${arch}.ddeb
  [ -f "$deb" ] || { ls ./*.deb; fail "no $deb (the name must carry the source revision's version $version)"; }
  [ -f "$ddeb" ] || fail "no debug package $ddeb"
  [ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "$deb says Version $(dpkg-deb -f "$deb" Version)"
  echo "built $build/$deb and $ddeb"
  root=$scratch/$pkg
  dpkg -x "$deb" "$root"
  dpkg -x "$ddeb" "$scratch/$pkg-dbgsym"
  # Stripped, each ELF file's debug info in the -dbgsym package under its build id.
  check_stripped "$root" "$deb"
  while IFS= read -r f; do
    id=$(readelf -n "$f" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
    [ -f "$scratch/$pkg-dbgsym/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ] ||
      fail "$ddeb has no debug file for ${f#"$root"} (build id $id)"
  done < <(elf_files "$root")
  # Depends: what dpkg-shlibdeps says about the packaged binaries, nothing written by hand.
  mapfile -t elves < <(elf_files "$root")
  # (dpkg-shlibdeps wants a debian/control beside the files; CPack makes one the same way.)
  mkdir -p "$scratch/shlibs-$pkg/debian" && touch "$scratch/shlibs-$pkg/debian/control"
  computed=$(cd "$scratch/shlibs-$pkg" && dpkg-shlibdeps -O --ignore-missing-info "${elves[@]}" 2> /dev/null |
    sed -n 's/^shlibs:Depends=//p')
  depends=$(dpkg-deb -f "$deb" Depends)
  want=$computed
  [ "$pkg" = mcpnet-bench ] && want="mcpnet (= $version), $computed"
  [ "$depends" = "$want" ] || fail "$deb Depends '$depends', but the binaries need '$want'"
  newest=$(for f in "${elves[@]}"; do readelf --dyn-syms -W "$f"; done |
    grep -o '@GLIBC_[0-9.]*' | sed 's/@GLIBC_//' | sort -uV | tail -n 1)
  need=$(sed -n 's/.*libc6 (>= \([0-9.]*\)).*/\1/p' <<< "$depends")
  [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$newest" "$need" | sort -V | tail -n 1)" = "$need" ] ||
    fail "$deb asks for libc6 >= '${need:-nothing}' but its binaries use GLIBC_$newest"
  # Man pages and changelog compressed; the changelog Debian's, for this version.
  while IFS= read -r m; do check_gzip_n "$m"; done < <(find "$root/usr/share/man" -type f 2> /dev/null)
  doc=$root/usr/share/doc/$pkg
  check_gzip_n "$doc/changelog.gz"
  zcat "$doc/changelog.gz" > "$scratch/changelog"
  [ "$(dpkg-parsechangelog -l "$scratch/changelog" -S Version)" = "$version" ] ||
    fail "$deb's changelog.gz is not a Debian changelog for $version"
  grep -q '^License: Expat$' "$doc/copyright" && grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/$' "$doc/copyright" ||
    fail "$deb has no machine-readable copyright file"
  echo "  $pkg: Depends $depends; stripped; debug info in $ddeb"
done

# What lies where: the plugin and node tools in mcpnet, the benchmark in mcpnet-bench.
runtime=$(dpkg-deb --contents "mcpnet_${version}_${arch}.deb")
bench=$(dpkg-deb --contents "mcpnet-bench_${version}_${arch}.deb")
for want in ./usr/lib/$triplet/libnccl-net-mcp.so ./usr/bin/mcpnet-params ./usr/bin/mcpnet-doctor ./usr/bin/mcpnet-top \
  ./usr/share/man/man1/mcpnet-top.1.gz \
  ./usr/share/man/man7/libnccl-net-mcp.7.gz ./usr/share/man/man1/mcpnet-params.1.gz \
  ./usr/share/man/man1/mcpnet-doctor.1.gz ./usr/share/doc/mcpnet/README.md ./usr/share/doc/mcpnet/copyright; do
  grep -q " $want\$" <<< "$runtime" || { echo "$runtime"; fail "mcpnet lacks $want"; }
done
for want in ./usr/bin/mcpnet-bench ./usr/bin/mcpnet-cpu-cost ./usr/share/man/man1/mcpnet-bench.1.gz \
  ./usr/share/man/man1/mcpnet-cpu-cost.1.gz ./usr/share/doc/mcpnet-bench/copyright; do
  grep -q " $want\$" <<< "$bench" || { echo "$bench"; fail "mcpnet-bench lacks $want"; }
done
if grep -q 'mcpnet-bench\|mcpnet-cpu-cost' <<< "$runtime"; then fail "mcpnet carries the benchmark"; fi
if grep -q 'libibverbs' <<< "$(dpkg-deb -f "mcpnet_${version}_${arch}.deb" Depends)"; then
  fail "libibverbs must stay optional (loaded at run time, only recommended)"
fi

# lintian, as a distribution runs it: nothing left but what the overrides explain.
lint=$(lintian --pedantic -E -I --fail-on error,warning,info,pedantic \
  "mcpnet_${version}_${arch}.deb" "mcpnet-bench_${version}_${arch}.deb" 2>&1 | grep -v 'root privileges') ||
  true
[ -z "$lint" ] || { echo "$lint"; fail "lintian reports tags (fix them, or override one with its reason in cmake/deb/)"; }
echo "lintian --pedantic: clean ($(cat "$src"/cmake/deb/*.lintian-overrides | grep -c "^mcpnet") tags overridden, each with its reason in cmake/deb/)"

rm -rf pkgroot
dpkg -x "mcpnet_${version}_${arch}.deb" pkgroot
test -f "pkgroot/usr/lib/$triplet/libnccl-net-mcp.so"
echo "installed into $build/pkgroot"
