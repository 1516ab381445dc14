# lab: topology=single deadline=900 mem=3072
# Many comms in one process (issue 16): bin/mcp-scale opens N send/recv comm pairs over
# rxe0 on lo, moves verified messages on each and closes them all, for N = 256 and
# 1024, and prints memory per pair (resident, the verbs mappings' share, the guest's
# MemAvailable), file descriptors and open/close times. Asserted: every pair opened,
# moved its data intact and closed, and the file descriptors do not grow with the
# pairs. Memory and time are printed, not asserted (an emulated, shared lab); the guest
# has 3 GiB so that 1024 pairs fit even at today's cost.
set -euo pipefail
. "$LAB_LIB"
ulimit -l unlimited
ulimit -n 65536
export NCCL_DEBUG=WARN

for n in 256 1024; do
  out=/tmp/scale.$n.out
  rc=0
  timeout 400 "$LAB_BIN/mcp-scale" --plugin "$MCPNET_BUILD_DIR/plugin/libnccl-net-mcp.so" --pairs "$n" --msgs 2 \
    > "$out" 2> "/tmp/scale.$n.err" || rc=$?
  cat "$out"
  if [ "$rc" != 0 ]; then
    grep -E 'WARN' "/tmp/scale.$n.err" | head -20 || true
    lab_fail "mcp-scale --pairs $n failed (exit $rc)"
  fi
  lab_grep "^scale: opened $n pairs" "$out" "$n pairs opened"
  lab_grep "^scale: data: $n pairs moved 2 verified" "$out" "$n pairs moved verified data"
  lab_grep "^scale: closed $n pairs" "$out" "$n pairs closed"
  lab_grep "^scale: ok: $n pairs" "$out" "$n pairs: no error through the ABI"
  # A comm costs no file descriptor of its own (the out-of-band connections share one
  # poll set): at most a handful more for N pairs.
  fds=$(sed -n 's/^scale: memory after open:.*fds +\([0-9]*\)$/\1/p' "$out")
  lab_check "$n pairs add at most 16 file descriptors (added ${fds:-?})" test "${fds:-999}" -le 16
done
