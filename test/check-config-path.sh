#!/bin/bash
# check-config-path.sh - configuration has one path from parse to use: the process's
# configuration (mcp_param_process(), src/core/param.h) is read only where it is loaded
# or copied into the settings of a level, and every other file gets its settings from
# there (a link's struct mcp_link_cfg, the fabric's struct mcp_fabric_cfg) or as an
# argument. So a setting such as NCCL_IB_TIMEOUT can be followed from its row in the
# table to the QP attribute it ends in.
#
# Allowed, one a line: where it is defined, loaded and freed, and the copies.
#   src/core/param.h, src/core/mcp_param_process.c: its declaration and definition
#   src/net/mcp_net_init.c: net's init loads it and hands it to discovery and the verbs
#   src/fabric/mcp_fabric_process.c: freed with the fabric
#   src/conn/mcp_conn_setup.c: a link's settings are copied from it (comm_new), and the
#     out-of-band channel and status segment take theirs when a comm opens them
# Comments do not count. Prints each other use as FILE:LINE and exits 1 when there is any.
#
# Usage: check-config-path.sh [SOURCE_ROOT]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=${1:-$(dirname "$here")}
allowed="src/core/param.h
src/core/mcp_param_process.c
src/net/mcp_net_init.c
src/fabric/mcp_fabric_process.c
src/conn/mcp_conn_setup.c"

command -v perl >/dev/null || { echo "check-config-path: perl is needed"; exit 1; }
[ -d "$root/src" ] || { echo "check-config-path: $root/src is missing"; exit 1; }

bad=0
while IFS= read -r -d '' f; do
  rel=${f#"$root"/}
  grep -qxF "$rel" <<<"$allowed" && continue
  # Comments blanked (their newlines kept, so line numbers stay), then each use listed.
  hits=$(perl -0777 -ne '
    s{/\*.*?\*/}{ (my $c = $&) =~ tr/\n//cd; $c }gse;
    s{//[^\n]*}{}g;
    my $n = 0;
    for my $line (split /\n/, $_, -1) { $n++; print "$n\n" if $line =~ /\bmcp_param_process\s*\(/ }
  ' "$f")
  for line in $hits; do
    echo "$rel:$line: reads mcp_param_process(); take the setting from the level's copy (struct mcp_link_cfg, struct mcp_fabric_cfg) or as an argument"
    bad=1
  done
done < <(find "$root/src" \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)

if [ $bad -ne 0 ]; then
  echo "check-config-path: configuration read outside the files that load or copy it (see CONTRIBUTING.md)"
  exit 1
fi
echo "check-config-path: mcp_param_process() is read only where configuration is loaded or copied"
