#!/bin/bash
# check-readme-params.sh - README's configuration reference must be exactly what the
# parameter table generates (scripts/update-readme-params rewrites it).
set -euo pipefail
tool=$1 readme=$2
want=$("$tool" --markdown)
have=$(sed -n '/<!-- params:begin -->/,/<!-- params:end -->/p' "$readme" | sed '1d;$d')
if [ "$want" != "$have" ]; then
  echo "README.md's configuration reference differs from the parameter table:"
  diff <(echo "$have") <(echo "$want") || true
  echo "run scripts/update-readme-params"
  exit 1
fi
echo "README.md's configuration reference matches the parameter table"
