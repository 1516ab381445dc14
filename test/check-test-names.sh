#!/bin/bash
# check-test-names.sh - a unit test's name says which layer and which file it tests, so
# that a change to a file finds its test by name and a test is never filed under the
# wrong layer. test/unit/test_<folder>_<topic>.c must have:
#   <folder>: a layer (src/<folder>/), plugin (plugin/) or a tool (tools/<folder>/);
#   <topic>:  <stem> or <stem>_<aspect>, where <stem> is the name of a file of that folder
#             without its extension and its mcp_<folder>_, mcp_ or <folder>_ prefix
#             (test_fabric_mr_ordering.c: src/fabric/mcp_fabric_mr.c; test_core_list.c:
#             src/core/list.h; test_doctor_fleet.c: tools/doctor/doctor_fleet.c).
# Fails naming every test that does not resolve.
#   check-test-names.sh [SOURCE_DIR]
set -euo pipefail
repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$repo"

# The file of dir that topic names (printed), or nothing.
resolve() {
  local folder=$1 dir=$2 topic=$3 f base stem
  for f in "$dir"/*; do
    [ -f "$f" ] || continue
    base=$(basename "$f")
    [ "$base" = CMakeLists.txt ] && continue
    base=${base%%.*}
    case "$base" in
    mcp_"$folder"_*) stem=${base#mcp_"$folder"_} ;;
    mcp_*) stem=${base#mcp_} ;;
    "$folder"_*) stem=${base#"$folder"_} ;;
    *) stem=$base ;;
    esac
    if [ "$topic" = "$stem" ] || [ "${topic#"$stem"_}" != "$topic" ]; then
      echo "$f"
      return
    fi
  done
}

bad=0
n=0
for t in test/unit/test_*.c; do
  [ -e "$t" ] || continue
  n=$((n + 1))
  rest=$(basename "$t" .c)
  rest=${rest#test_}
  folder=${rest%%_*}
  topic=${rest#*_}
  if [ "$folder" = "$rest" ] || [ -z "$topic" ]; then
    echo "$t: not test_<folder>_<topic>.c"
    bad=1
    continue
  fi
  if [ "$folder" = plugin ]; then
    dir=plugin
  elif [ -d "src/$folder" ]; then
    dir=src/$folder
  elif [ -d "tools/$folder" ]; then
    dir=tools/$folder
  else
    echo "$t: '$folder' is no folder of src/, plugin/ or tools/"
    bad=1
    continue
  fi
  if [ -z "$(resolve "$folder" "$dir" "$topic")" ]; then
    echo "$t: '$topic' starts with the stem of no file of $dir/ (mcp_${folder}_<stem>, mcp_<stem>," \
      "${folder}_<stem> or <stem>)"
    bad=1
  fi
done
[ "$n" -gt 0 ] || { echo "check-test-names: no test/unit/test_*.c under $repo"; exit 1; }
[ "$bad" = 0 ] && echo "check-test-names: all $n unit tests name their layer and file"
exit "$bad"
