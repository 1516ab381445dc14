#!/bin/bash
# check-format.sh - every C file of ours must be as .clang-format formats it, so style
# is settled by a tool instead of by review. Uses clang-format 14 (Debian 12's
# `clang-format`, installed by scripts/install-deps): other versions format some
# constructs differently, so the check refuses them rather than report false drift.
#   check-format.sh [SOURCE_DIR]     lists the files that differ; exit 1 if any
# To format a file: clang-format-14 -i FILE (the tree was formatted in one commit,
# listed in .git-blame-ignore-revs).
set -euo pipefail
repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$repo"
cf=
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null && grep -q 'version 14\.' <<<"$("$c" --version)"; then cf=$c; break; fi
done
[ -n "$cf" ] || { echo "check-format: clang-format 14 is missing (scripts/install-deps installs it)"; exit 1; }
# Our sources, tests and lab programs; include/nccl/ is included: it is our own
# declaration of NCCL's ABI, written in the same style, not a vendored copy.
dirs=(src include plugin tools test/unit test/lab/progs test/fuzz test/uverbs)
mapfile -t files < <(find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.h' \) | sort)
[ ${#files[@]} -gt 0 ] || { echo "check-format: no C files under ${dirs[*]}"; exit 1; }
# One run over all files; each violation is reported as FILE:LINE:COL: error: ...
out=$("$cf" --style=file --dry-run --Werror "${files[@]}" 2>&1) && rc=0 || rc=$?
mapfile -t bad < <(grep -oE '^[^:]+:[0-9]+:[0-9]+: error' <<<"$out" | cut -d: -f1 | sort -u)
if [ "$rc" != 0 ] && [ ${#bad[@]} = 0 ]; then
  echo "check-format: $cf failed without naming a file:"; echo "$out"; exit 1
fi
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format ($cf):"
  printf '  %s\n' "${bad[@]}"
  echo "see the differences with: $cf --style=file FILE | diff FILE -"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted as .clang-format says ($cf)"
