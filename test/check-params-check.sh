#!/bin/bash
# check-params-check.sh - `mcpnet-params --check` judges an environment as the plugin's
# init does, and as NCCL picks its plugin: exit 1 and name the nearest real variable for
# a misspelt MCPNET_*, NCCL_IB_*, NCCL_NET_* or NCCL_SOCKET_* name, exit 1 and name `mcp`
# (or `MCP`) for an NCCL_NET_PLUGIN (NCCL_NET) that keeps mcpnet out, list set NCCL_IB_*
# variables mcpnet ignores without failing and say nothing of one set to NCCL's default,
# exit 0 for a clean environment; --json says the same as one JSON object.
set -euo pipefail
tool=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "check-params-check: $*"; cat "$out"; exit 1; }
# expect_fail "WANTED TEXT" VAR=VALUE...: --check exits 1 and prints the text
expect_fail() {
  local want=$1
  shift
  if env -i "$@" "$tool" --check > "$out" 2>&1; then
    fail "$* must exit non-zero"
  fi
  grep -qF -- "$want" "$out" || fail "$*: wanted '$want'"
}

expect_fail "MCPNET_RECOVERY_TIMOUT=5 (environment) is not an mcpnet variable and is ignored; the nearest one is MCPNET_RECOVERY_TIMEOUT" \
  MCPNET_RECOVERY_TIMOUT=5 NCCL_IB_AR_THRESHOLD=0
grep -q "mcpnet does not act on them (NCCL's own IB transport would): NCCL_IB_AR_THRESHOLD" "$out" ||
  fail "the ignored NCCL_IB_* variable must be listed"

env -i NCCL_IB_AR_THRESHOLD=0 NCCL_IB_HCA=mlx5_0 MCPNET_STRICT=0 NCCL_NET_PLUGIN=mcp "$tool" --check > "$out" 2>&1 ||
  fail "ignored NCCL_IB_* variables alone must not fail the check"
grep -q "0 unknown names, 1 NCCL_IB_\* variable mcpnet does not act on, 0 plugin selection problems, configuration valid" "$out" ||
  fail "the verdict line must count what it found"

# mcpnet-doctor --fleet's variables live in the same pods and jobs: known, not typos.
env -i MCPNET_FLEET_COORDINATOR=job-0.svc MCPNET_FLEET_NODES=4 MCPNET_FLEET_RANK=1 "$tool" --check > "$out" 2>&1 ||
  fail "MCPNET_FLEET_* (the doctor's --fleet) must not count as unknown"
grep -q "0 unknown names" "$out" || fail "MCPNET_FLEET_* must not be counted as unknown"

expect_fail "configuration invalid" NCCL_IB_RETRY_CNT=9

# Misspelt NCCL names: the variables that decide whether mcpnet runs, and where.
expect_fail "NCCL_IB_GID_INDX=3 (environment) is a variable neither NCCL 2.20-2.30 nor mcpnet reads, so it changes nothing; did you mean NCCL_IB_GID_INDEX?" \
  NCCL_IB_GID_INDX=3 NCCL_NET_PLUGIN=mcp
expect_fail "did you mean NCCL_NET_PLUGIN?" NCCL_NET_PLUGN=mcp
expect_fail "did you mean NCCL_SOCKET_IFNAME?" NCCL_SOCKET_IFNAM=eth0 NCCL_NET_PLUGIN=mcp
# The plugin's and the network's names.
expect_fail "NCCL_NET_PLUGIN=mpc: NCCL opens libnccl-net-mpc.so, not mcpnet's libnccl-net-mcp.so" NCCL_NET_PLUGIN=mpc
grep -qF "did you mean mcp?" "$out" || fail "NCCL_NET_PLUGIN=mpc must be called a slip of mcp"
expect_fail "NCCL_NET_PLUGIN=ofi names no mcpnet" NCCL_NET_PLUGIN=ofi
expect_fail "NCCL_NET=MPC names no network NCCL has" NCCL_NET_PLUGIN=mcp NCCL_NET=MPC
grep -qF "did you mean MCP?" "$out" || fail "NCCL_NET=MPC must be called a slip of MCP"
expect_fail "NCCL_NET=IB selects NCCL's own IB transport: NCCL never initialises mcpnet" NCCL_NET_PLUGIN=mcp NCCL_NET=IB

# NCCL_IB_DISABLE=0 is NCCL's default and common in images: not a word about it.
env -i NCCL_IB_DISABLE=0 NCCL_NET_PLUGIN=mcp NCCL_NET=MCP "$tool" --check > "$out" 2>&1 ||
  fail "NCCL_IB_DISABLE=0 with mcp selected must pass"
if grep -q "WARN\|NCCL_IB_DISABLE" "$out"; then fail "NCCL_IB_DISABLE=0 must be silent"; fi
# NCCL_NET_PLUGIN unset: a note, no failure.
env -i MCPNET_STRICT=1 "$tool" --check > "$out" 2>&1 || fail "an unset NCCL_NET_PLUGIN must not fail the check"
grep -qF "note: NCCL_NET_PLUGIN is not set" "$out" || fail "an unset NCCL_NET_PLUGIN gets a note"

# --json: one object on stdout, nothing on stderr, the same verdict.
if env -i NCCL_NET_PLUGIN=mpc NCCL_IB_GID_INDX=3 NCCL_IB_AR_THRESHOLD=5 NCCL_IB_TIMEOUT=99 \
  "$tool" --check --json > "$out" 2> "$out.err"; then
  fail "--check --json must exit 1 as --check does"
fi
[ ! -s "$out.err" ] || { cat "$out.err"; rm -f "$out.err"; fail "--json must print nothing on stderr"; }
rm -f "$out.err"
python3 - "$out" <<'PY' || fail "--json does not say what --check says"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] is False and d["configuration_valid"] is False, d
assert d["counts"] == {"unknown_names": 1, "ignored": 1, "invalid_values": 1, "plugin_selection": 1}, d["counts"]
by = {(f["kind"], f["name"]): f for f in d["findings"]}
assert by[("unknown-name", "NCCL_IB_GID_INDX")]["nearest"] == "NCCL_IB_GID_INDEX"
assert by[("unknown-name", "NCCL_IB_GID_INDX")]["value"] == "3"
assert by[("plugin", "NCCL_NET_PLUGIN")]["nearest"] == "mcp" and by[("plugin", "NCCL_NET_PLUGIN")]["problem"]
assert by[("ignored", "NCCL_IB_AR_THRESHOLD")]["problem"] is False
inv = by[("invalid-value", "NCCL_IB_TIMEOUT")]
assert inv["value"] == "99" and "out of range" in inv["message"], inv
PY
env -i NCCL_NET_PLUGIN=mcp "$tool" --check --json > "$out" 2>&1 || fail "a clean --check --json must exit 0"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] and d["findings"] == [], d' "$out" ||
  fail "a clean environment has no findings"
if "$tool" --json > "$out" 2>&1; then fail "--json without --check is a usage error"; fi
echo "mcpnet-params --check behaves"
