#!/bin/bash
# check-params-doc.sh - the parameter table in docs/configuration.md must be exactly what
# the parameter table in the code generates (scripts/update-params-doc rewrites it).
#   check-params-doc.sh MCPNET_PARAMS_TOOL DOC.md
set -euo pipefail
tool=$1 doc=$2
grep -q '<!-- params:begin -->' "$doc" && grep -q '<!-- params:end -->' "$doc" ||
  { echo "$doc has no params markers (<!-- params:begin --> ... <!-- params:end -->)"; exit 1; }
want=$("$tool" --markdown)
have=$(sed -n '/<!-- params:begin -->/,/<!-- params:end -->/p' "$doc" | sed '1d;$d')
if [ "$want" != "$have" ]; then
  echo "$doc's parameter table differs from the parameter table in the code:"
  diff <(echo "$have") <(echo "$want") || true
  echo "run scripts/update-params-doc"
  exit 1
fi
echo "$doc's parameter table matches the parameter table in the code"
