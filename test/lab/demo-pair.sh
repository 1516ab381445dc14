# demo-pair.sh - the first half of scripts/demo, in the two-host lab: mcpnet-bench moves
# messages of 8 B to 8 MiB from host b to host a through the plugin over the virtual wire,
# every byte verified on both sides. No speeds: between two emulated hosts with one CPU
# each they say more about the emulation than the transport (the second half,
# demo-bench.sh, measures in one guest with two CPUs). Host b prints what moved.
set -euo pipefail
. "$LAB_LIB"
ulimit -l unlimited
bench=$LAB_BIN/mcpnet-bench
port=18600
sweep=(-b 8 -e 8M -f 16 --runs 1 --check --point-time 0.1)

if [ "$LAB_HOST" = a ]; then
  "$bench" --server "$LAB_SELF_IP:$port" "${sweep[@]}" > /tmp/a.out 2>&1 || { cat /tmp/a.out; exit 1; }
  exit 0
fi
"$bench" --client "$LAB_PEER_IP:$port" "${sweep[@]}" > /run/lab/demo-pair.txt 2>&1 ||
  { cat /run/lab/demo-pair.txt; exit 1; }
grep -E '^#  (plugin|device|mode)' /run/lab/demo-pair.txt
grep -E '^# check:' /run/lab/demo-pair.txt | sed 's/^# check: /moved host b -> host a, sizes 8 B to 8 MiB: /'
