# package-lib.sh - what the package tests (package-deb.sh, package-rpm.sh, package-arm64.sh)
# share; sourced, not run.

# package_version SOURCE_DIR BASE: the version the packages must carry, worked out here on
# its own from git (cmake/version.cmake makes it for CPack): X.Y.Z at a tag vX.Y.Z, else
# BASE+git<commit date, UTC>.<7-digit hash>; with changes to tracked files, .dirty
# (+dirty after a tag); BASE outside a git checkout.
package_version() {
  local src=$1 base=$2 tag v dirty
  if [ ! -e "$src/.git" ] || ! command -v git > /dev/null; then
    echo "$base"
    return
  fi
  if tag=$(git -C "$src" describe --tags --exact-match --match 'v[0-9]*' HEAD 2> /dev/null) &&
    [[ $tag =~ ^v([0-9][0-9.]*)$ ]]; then
    v=${BASH_REMATCH[1]} dirty=+dirty
  else
    v="$base+git$(TZ=UTC git -C "$src" log -1 --format=%cd --date=format-local:%Y%m%d).$(git -C "$src" rev-parse --short=7 HEAD)"
    dirty=.dirty
  fi
  [ -z "$(git -C "$src" status --porcelain --untracked-files=no)" ] || v=$v$dirty
  echo "$v"
}

# elf_files DIR: the ELF files under DIR, one per line.
elf_files() {
  find "$1" -type f -print0 | while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] && echo "$f"
  done
  return 0
}

# check_stripped DIR WHAT: every ELF file under DIR has no debug info left, only a link
# to its debug file (.gnu_debuglink); exits with a message otherwise.
check_stripped() {
  local f n=0
  while IFS= read -r f; do
    n=$((n + 1))
    if grep -q ' \.debug_info ' <<< "$(readelf -S -W "$f")"; then
      echo "package: $2: ${f#"$1"} still carries its debug info (not stripped)"
      exit 1
    fi
  done < <(elf_files "$1")
  [ "$n" -gt 0 ] || { echo "package: $2 holds no ELF file"; exit 1; }
}

# check_gzip_n FILE: compressed with gzip -9n: valid, and no name or time in its header
# (bytes 4-7, the time stamp, zero; flag byte 3 without FNAME).
check_gzip_n() {
  gzip -t "$1" || { echo "package: $1 is not valid gzip"; exit 1; }
  local head
  head=$(od -An -tx1 -N8 "$1" | tr -d ' \n')
  [ "${head:6:2}" = 00 ] && [ "${head:8:8}" = 00000000 ] ||
    { echo "package: $1 was not compressed with gzip -n (header $head)"; exit 1; }
}
