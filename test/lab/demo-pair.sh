# demo-pair.sh - what scripts/demo runs in the two-host lab: mcpnet-bench from host b to
# host a through the plugin, with perftest between the same two devices alongside, every
# message verified. Host b prints the table and writes the plot into its results folder.
set -euo pipefail
. "$LAB_LIB"
ulimit -l unlimited
bench=$LAB_BIN/mcpnet-bench
port=18600
sweep=(-b 8 -e 8M -f 16 --runs 2 --check --compare)

if [ "$LAB_HOST" = a ]; then
  "$bench" --server "$LAB_SELF_IP:$port" "${sweep[@]}" > /tmp/a.out 2>&1 || { cat /tmp/a.out; exit 1; }
  exit 0
fi
"$bench" --client "$LAB_PEER_IP:$port" "${sweep[@]}" --plot /run/lab/mcpnet-demo.png
echo
echo "plot: $MCPNET_BUILD_DIR/lab/runs/demo/b/mcpnet-demo.png"
