# lab: topology=single deadline=200 fixtures=deb
# The .deb a container image installs (unpacked into <build>/pkgroot by the package_deb
# test): the plugin loads from there by the name NCCL_NET_PLUGIN=mcp resolves to
# (libnccl-net-mcp.so on the library path), finds rxe0 and moves verified data; the
# packaged mcpnet-params runs, and its --version is the text the packaged plugin logs at
# init.
set -euo pipefail
. "$LAB_LIB"
root="$MCPNET_BUILD_DIR/pkgroot"
[ -f "$root/usr/lib/x86_64-linux-gnu/libnccl-net-mcp.so" ] || lab_fail "no unpacked package in $root (run the package_deb test)"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu"
CONF_MAX_SIZE=$((4 << 20)) MCP_DRIVE_VERBOSE=1 timeout 120 "$MCPNET_BUILD_DIR/bin/mcp-conformance" \
  --plugin libnccl-net-mcp.so self props sizes 2>/tmp/deb.err | tee /tmp/deb.out || { cat /tmp/deb.err >&2; exit 1; }
lab_grep '^ok +sizes' /tmp/deb.out "the packaged plugin moves verified data"
"$root/usr/bin/mcpnet-params" --markdown > /tmp/params.md
lab_grep 'NCCL_IB_TIMEOUT' /tmp/params.md "the packaged mcpnet-params prints the reference"
version=$("$root/usr/bin/mcpnet-params" --version)
lab_log "packaged: $version"
grep -qF "${version#mcpnet-params: }; NCCL took the ncclNetPlugin_v11 table" /tmp/deb.err ||
  { cat /tmp/deb.err >&2; lab_fail "the plugin's init line does not carry '${version#mcpnet-params: }'"; }
lab_log "ok: the packaged plugin's init line names the same version as mcpnet-params --version"
