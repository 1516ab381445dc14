# lab: topology=single deadline=200 fixtures=deb
# The .deb a container image installs (unpacked into <build>/pkgroot by the package_deb
# test): the plugin loads from there by the name NCCL_NET_PLUGIN=mcp resolves to
# (libnccl-net-mcp.so on the library path), finds rxe0 and moves verified data; the
# packaged mcpnet-params runs.
set -euo pipefail
. "$LAB_LIB"
root="$MCPNET_BUILD_DIR/pkgroot"
[ -f "$root/usr/lib/x86_64-linux-gnu/libnccl-net-mcp.so" ] || lab_fail "no unpacked package in $root (run the package_deb test)"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu"
CONF_MAX_SIZE=$((4 << 20)) timeout 120 "$MCPNET_BUILD_DIR/bin/mcp-conformance" --plugin libnccl-net-mcp.so \
  self props sizes | tee /tmp/deb.out
lab_grep '^ok +sizes' /tmp/deb.out "the packaged plugin moves verified data"
"$root/usr/bin/mcpnet-params" --markdown > /tmp/params.md
lab_grep 'NCCL_IB_TIMEOUT' /tmp/params.md "the packaged mcpnet-params prints the reference"
