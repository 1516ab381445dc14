#!/bin/bash
# check-tool-versions.sh - every installed tool answers --version with one line,
# "TOOL: mcpnet VERSION, source revision REV", the text the plugin logs at init
# (mcp_version_text), so a user can tell which plugin build a tool came with. The
# revision is the one the build wrote into its generated mcp_revision.h.
#   check-tool-versions.sh VERSION REVISION_HEADER TOOL...
set -uo pipefail
version=${1:?usage: check-tool-versions.sh VERSION REVISION_HEADER TOOL...}
header=${2:?usage: check-tool-versions.sh VERSION REVISION_HEADER TOOL...}
shift 2
revision=$(sed -n 's/^#define MCPNET_REVISION "\(.*\)"$/\1/p' "$header")
[ -n "$revision" ] || { echo "check-tool-versions: no MCPNET_REVISION in $header"; exit 1; }
want="mcpnet $version, source revision $revision"
bad=0
for tool in "$@"; do
  name=$(basename "$tool")
  out=$("$tool" --version 2>&1)
  rc=$?
  if [ "$rc" != 0 ]; then
    echo "$name --version: exit status $rc, output: $out"
    bad=1
  elif [ "$out" != "$name: $want" ]; then
    echo "$name --version printed '$out', expected '$name: $want'"
    bad=1
  else
    echo "$out"
  fi
done
exit "$bad"
