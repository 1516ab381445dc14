#!/bin/bash
# check-nccl-real-dryrun.sh - ctest device_nccl_real_dryrun: nccl-real.sh as a GPU session
# would run it, on a host without a GPU. Packs what the session carries (--pack), runs
# the script from that pack (--from): the userspace device and the plugin on it must
# pass, and every NCCL stage must be skipped with its reason (or pass, on a host that
# has a GPU and PyTorch); nothing may fail. The Python program it would run is compiled.
#   check-nccl-real-dryrun.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: check-nccl-real-dryrun.sh BUILD_DIR}" && pwd)
work=$(mktemp -d /tmp/mcp-nccl-real-dry.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/run.log" 2> /dev/null | tail -40; exit 1; }

python3 -m py_compile "$here/nccl_collectives.py" || fail "nccl_collectives.py does not compile"
rm -rf "$here/__pycache__"
MCPNET_BUILD_DIR=$build NCCL_TESTS_SRC=${NCCL_TESTS_SRC:-/nonexistent} "$here/nccl-real.sh" --pack "$work/pack" \
  > "$work/pack.log" 2>&1 || { cat "$work/pack.log"; fail "--pack failed"; }
[ -f "$work/pack/plugin/libnccl-net-mcp.so" ] && [ -f "$work/pack/lib/libmcp-uverbs.so" ] &&
  [ -x "$work/pack/bin/mcp-uverbs-ctl" ] || fail "the pack lacks a binary"
OUT=$work/out "$here/nccl-real.sh" --from "$work/pack" > "$work/run.log" 2>&1
rc=$?
cat "$work/run.log"
[ "$rc" = 0 ] || fail "nccl-real.sh exited $rc"
r=$work/out/results.txt
grep -Eq '^device +PASS' "$r" || fail "the device stage did not pass"
grep -Eq '^gpu +(SKIP|PASS)' "$r" || fail "the gpu stage neither passed nor said why it skipped"
for s in collectives fault bench; do
  grep -Eq "^$s +(SKIP|PASS)" "$r" || grep -Eq "^check-" "$r" || fail "stage $s has no result"
done
! grep -Eq ' FAIL ' "$r" || fail "a stage failed"
[ -f "$work/out/logs.tar.gz" ] || fail "no logs.tar.gz"
echo "device_nccl_real_dryrun: passed"
