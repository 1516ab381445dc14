# demo-bench.sh - the second half of scripts/demo, in one guest with two vCPUs (soft-RoCE
# on lo), where the README's benchmark targets are measured too: two mcpnet-bench
# processes pinned to the two CPUs, mcpnet against perftest like with like: ib_write_bw
# keeps as many writes in flight as mcpnet keeps messages (8, NCCL's depth; perftest's
# default is 128), ib_write_lat beside mcpnet's latency. Between two one-CPU hosts
# (demo-pair.sh's lab) the small sizes measured the round trip and the depth instead.
# Prints the table; the plot goes into the run's folder.
set -euo pipefail
. "$LAB_LIB"
ulimit -l unlimited
bench=$LAB_BIN/mcpnet-bench
args=(-b 8 -e 8M -f 16 --runs 5 --check --compare --perftest-depth match)
rm -rf /tmp/x.demo && mkdir -p /tmp/x.demo
"$bench" --xchg /tmp/x.demo --role a --pin 0 "${args[@]}" > /tmp/demo.a 2>&1 &
a=$!
"$bench" --xchg /tmp/x.demo --role b --pin 1 "${args[@]}" --plot /run/lab/mcpnet-demo.png ||
  { cat /tmp/demo.a; exit 1; }
wait $a || { cat /tmp/demo.a; exit 1; }
echo
echo "plot: $MCPNET_BUILD_DIR/lab/runs/demo-bench/single/mcpnet-demo.png"
