#!/bin/bash
# check-architecture-files.sh - docs/architecture.md section 1 maps every file of src/
# (sources and headers) to its layer. A map that lists a file the tree lacks, or misses
# one it has, is how architecture documents drift; this fails on either.
#   check-architecture-files.sh [SOURCE_DIR]
set -euo pipefail
repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$repo"
doc=docs/architecture.md
# Section 1 only: from its heading to the next "## " heading.
section=$(awk '/^## 1\. /{on=1; next} on && /^## /{exit} on' "$doc")
[ -n "$section" ] || { echo "check-architecture-files: no section 1 in $doc"; exit 1; }
bad=0
for f in src/*/*.c src/*/*.h; do
  name=$(basename "$f")
  if ! grep -qF "$name" <<<"$section"; then
    echo "$doc section 1 does not name $f"
    bad=1
  fi
done
# Every file name section 1 mentions must exist under src/, include/, plugin/ or tools/
# (mcp_plugin_v{11,10,9,8}.c is a brace list and is not matched).
while read -r name; do
  if [ -z "$(find src include plugin tools -name "$name" -print -quit)" ]; then
    echo "$doc section 1 names $name, which is not in the tree"
    bad=1
  fi
done < <(grep -oE '[a-z_0-9][a-z_0-9-]*\.[ch]\b' <<<"$section" | sort -u)
[ "$bad" = 0 ] && echo "check-architecture-files: section 1 names every file of src/"
exit "$bad"
