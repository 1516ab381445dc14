#!/bin/bash
# check-tool-versions.sh - every installed tool answers --version with one line,
# "TOOL: mcpnet VERSION, source revision REV", the text the plugin logs at init
# (mcp_version_text), so a user can tell which plugin build a tool came with.
#   check-tool-versions.sh VERSION REVISION TOOL...
set -uo pipefail
version=${1:?usage: check-tool-versions.sh VERSION REVISION TOOL...}
revision=${2:?usage: check-tool-versions.sh VERSION REVISION TOOL...}
shift 2
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
