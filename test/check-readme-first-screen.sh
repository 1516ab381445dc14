#!/bin/bash
# check-readme-first-screen.sh - README.md's first screen is for users: what mcpnet is, its
# status, and the two commands that try it without hardware. A reference table or
# contributor material creeping up there pushes those off the screen; this fails when it does.
#   check-readme-first-screen.sh [SOURCE_DIR [LINES]]
# LINES (default 40) is the screen: a terminal's height, or what a repository page shows
# before scrolling.
set -euo pipefail
repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
lines=${2:-40}
readme=$repo/README.md
[ -r "$readme" ] || { echo "check-readme-first-screen: $readme is missing"; exit 1; }
screen=$(head -n "$lines" "$readme")
bad=0
fail() { echo "README.md, first $lines lines: $*"; bad=1; }

grep -qE '^# ' <<<"$screen" || fail "no title"
grep -qiE '^\*\*Status\.?\*\*|^## Status' <<<"$screen" || fail "no status paragraph (**Status.** ...)"
# The two commands, each at the start of a line inside a code block, as a newcomer types them.
for cmd in scripts/demo scripts/test; do
  awk '/^```/ { inblock = !inblock; next } inblock && $1 == c { found = 1 } END { exit !found }' \
    c="$cmd" <<<"$screen" || fail "does not show \`$cmd\` as a command in a code block"
  [ -x "$repo/$cmd" ] || fail "names $cmd, which is not an executable file of the repository"
done
# Reference material lives in docs/: no table, no parameter list.
if grep -qE '^\s*\|' <<<"$screen"; then
  fail "holds a table (reference tables belong in docs/): $(grep -m1 -E '^\s*\|' <<<"$screen")"
fi
n=$(grep -oE '\b(NCCL|MCPNET)_[A-Z_]+' <<<"$screen" | sort -u | wc -l)
[ "$n" -le 3 ] || fail "names $n different parameters (a parameter list belongs in docs/configuration.md)"
[ "$bad" = 0 ] && echo "check-readme-first-screen: the first $lines lines of README.md show the status and scripts/demo, scripts/test"
exit "$bad"
