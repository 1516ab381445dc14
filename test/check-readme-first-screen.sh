#!/bin/bash
# check-readme-first-screen.sh - README.md's first screen is for users, and answers what
# one asks first: what mcpnet is, what it has run on (the status), how to install it, how
# to switch one job to it (NCCL_NET_PLUGIN=mcp in the image, NCCL_NET=MCP per job and not
# in the image), the log lines that prove it worked (not the lab's soft-RoCE sample), and
# the two commands that try it without hardware. A reference table or contributor
# material creeping up there pushes those off the screen; this fails when it does.
#   check-readme-first-screen.sh [SOURCE_DIR [LINES]]
# LINES (default 42) is the screen: a terminal's height, or what a repository page shows
# before scrolling.
set -euo pipefail
repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
lines=${2:-42}
readme=$repo/README.md
[ -r "$readme" ] || { echo "check-readme-first-screen: $readme is missing"; exit 1; }
screen=$(head -n "$lines" "$readme")
bad=0
fail() { echo "README.md, first $lines lines: $*"; bad=1; }
# The lines inside code blocks, and the prose outside them.
code=$(awk '/^```/ { inblock = !inblock; next } inblock' <<<"$screen")
prose=$(awk '/^```/ { inblock = !inblock; next } !inblock' <<<"$screen" | tr '\n' ' ')

grep -qE '^# ' <<<"$screen" || fail "no title"
grep -qi 'NCCL network plugin' <<<"$prose" || fail "does not say what it is (an NCCL network plugin)"
grep -qiE '^\*\*Status\.?\*\*|^## Status' <<<"$screen" || fail "no status paragraph (**Status.** ...)"
status=$(awk '/^\*\*Status/ { on = 1 } on && /^$/ { exit } on' <<<"$screen" | tr '\n' ' ')
grep -q 'soft-RoCE' <<<"$status" && grep -qE 'NCCL 2\.[0-9]+' <<<"$status" && grep -qi 'hardware' <<<"$status" ||
  fail "the status does not say what it has run on (the lab's soft-RoCE, which NCCL, whether on hardware)"
grep -qE 'apt-get install|cpack -G' <<<"$prose$code" || fail "does not say how to install it"
# Switching one job: the plugin in the image, NCCL_NET per job and not in the image.
grep -qE '^(export )?NCCL_NET_PLUGIN=mcp\b.*image' <<<"$code" ||
  fail "does not show NCCL_NET_PLUGIN=mcp, for the image, as a command"
grep -qE '^(export )?NCCL_NET=MCP\b.*per job' <<<"$code" || fail "does not show NCCL_NET=MCP, per job, as a command"
if grep -qE '^(export )?NCCL_NET=MCP\b.*in the image' <<<"$code"; then
  fail "puts NCCL_NET=MCP in the image: every job on a host without RDMA would stop at init"
fi
grep -qiE 'not `NCCL_NET=MCP` in (the|an|your) image' <<<"$prose" ||
  fail "does not say to keep NCCL_NET=MCP out of images (it stops every job on a host without RDMA)"
# The log lines that prove it, realistic and said to be illustrative.
grep -q 'Loaded net plugin MCP' <<<"$code" && grep -q 'Using network MCP' <<<"$code" ||
  fail "does not show the log lines that prove it worked (Loaded net plugin MCP, Using network MCP)"
grep -qi 'illustrative' <<<"$prose" || fail "does not say the log sample is illustrative"
if grep -qE 'rxe[0-9]|127\.0\.0\.1|netdev lo\b' <<<"$code"; then
  fail "the log sample is the lab's soft-RoCE one ($(grep -m1 -E 'rxe[0-9]|127\.0\.0\.1|netdev lo' <<<"$code"))"
fi
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
[ "$bad" = 0 ] && echo "check-readme-first-screen: the first $lines lines of README.md say what mcpnet is, where it ran, how to install it and switch a job, the proof in the log, and scripts/demo, scripts/test"
exit "$bad"
