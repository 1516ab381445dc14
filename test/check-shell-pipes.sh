#!/bin/bash
# check-shell-pipes.sh - no shell script of ours that runs under `set -o pipefail` pipes a
# command into `grep -q`. grep -q exits at its first match; a writer that flushes as it
# goes (ip addr show does, once per address) then dies of SIGPIPE on its next write, and
# pipefail turns a match into a failure about one run in five: lab_hub_fleet failed in CI
# that way. Feed grep the whole output instead: grep -q PATTERN <<<"$(command)".
# Fails naming every such line.
#   check-shell-pipes.sh [SOURCE_DIR]
set -euo pipefail
repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$repo"

bad=0
while IFS= read -r f; do
  grep -q 'pipefail' "$f" || continue
  # A pipe (not ||) into grep whose options include q, or --quiet/--silent; comments skipped.
  hits=$(grep -nE '(^|[^|])\|[[:space:]]*grep([[:space:]]+-[A-Za-z]+)*[[:space:]]+(-[A-Za-z]*q|--quiet|--silent)' "$f" |
    grep -vE '^[0-9]+:[[:space:]]*#' || true)
  [ -z "$hits" ] && continue
  while IFS= read -r h; do
    echo "$f:$h" >&2
    bad=1
  done <<<"$hits"
done < <(git ls-files | while IFS= read -r f; do
  [ -f "$f" ] || continue
  IFS= read -r first < "$f" || true
  [[ $f == *.sh || $first == '#!'*sh* ]] && echo "$f"
done)
[ $bad = 0 ] || { echo "check-shell-pipes: a pipe into grep -q under pipefail (see above): use grep -q PATTERN <<<\"\$(command)\"" >&2; exit 1; }
echo "check-shell-pipes: no pipe into grep -q under pipefail"
