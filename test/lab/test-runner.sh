#!/bin/bash
# test-runner.sh - the lab runner must report red, with the guest's console log, when a
# scenario fails or hangs; never green. This test makes both happen on purpose and
# checks what the runner printed and its exit status.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "test-runner: FAIL: $*"; exit 1; }

echo "== 1. a command that fails: exit 7"
out=$("$here/lab" --deadline 120 --name runner-fail single -- bash -c 'echo marker-before-failure; exit 7' 2>&1)
rc=$?
echo "$out"
[ $rc -ne 0 ] || fail "a failing command was reported with exit status 0"
grep -q 'FAIL on host single: the command exited with status 7' <<<"$out" || fail "no failure line naming status 7"
grep -q 'guest console log' <<<"$out" || fail "the console log was not shown"
grep -q 'marker-before-failure' <<<"$out" || fail "the command's output was not shown"

echo "== 2. a command that hangs: killed at a 30 s deadline"
t0=$(date +%s)
out=$("$here/lab" --deadline 30 --name runner-hang single -- bash -c 'echo marker-before-hang; sleep 1000' 2>&1)
rc=$?
t1=$(date +%s)
echo "$out"
[ $rc -ne 0 ] || fail "a hanging command was reported with exit status 0"
grep -q 'deadline of 30s exceeded' <<<"$out" || fail "the deadline was not named"
grep -q 'guest console log' <<<"$out" || fail "the console log was not shown"
grep -q 'marker-before-hang' <<<"$out" || fail "the console log lacks the guest's own output"
[ $((t1 - t0)) -lt 60 ] || fail "the runner took $((t1 - t0)) s to give up on a 30 s deadline"

echo "== 3. a passing command is green"
"$here/lab" --deadline 120 --name runner-pass single -- true || fail "a passing command was reported red"
echo "test-runner: the runner reports failures and hangs red, with console logs"
