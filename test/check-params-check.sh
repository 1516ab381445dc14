#!/bin/bash
# check-params-check.sh - `mcpnet-params --check` judges an environment as the plugin's
# init does: exit 1 and name the nearest real variable for a misspelt MCPNET_* name,
# list set NCCL_IB_* variables mcpnet ignores without failing, exit 0 for a clean one.
set -euo pipefail
tool=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "check-params-check: $*"; cat "$out"; exit 1; }

if env -i MCPNET_RECOVERY_TIMOUT=5 NCCL_IB_AR_THRESHOLD=0 "$tool" --check > "$out" 2>&1; then
  fail "an unknown MCPNET_* name must exit non-zero"
fi
grep -q "MCPNET_RECOVERY_TIMOUT=5 (environment) is not an mcpnet variable and is ignored; the nearest one is MCPNET_RECOVERY_TIMEOUT" "$out" ||
  fail "the WARN must name the nearest real variable"
grep -q "mcpnet does not act on them (NCCL's own IB transport would): NCCL_IB_AR_THRESHOLD" "$out" ||
  fail "the ignored NCCL_IB_* variable must be listed"

env -i NCCL_IB_AR_THRESHOLD=0 NCCL_IB_HCA=mlx5_0 MCPNET_STRICT=0 "$tool" --check > "$out" 2>&1 ||
  fail "ignored NCCL_IB_* variables alone must not fail the check"
grep -q "0 unknown MCPNET_\* names, 1 NCCL_IB_\* variable mcpnet does not act on, configuration valid" "$out" ||
  fail "the verdict line must count what it found"

# mcpnet-doctor --fleet's variables live in the same pods and jobs: known, not typos.
env -i MCPNET_FLEET_COORDINATOR=job-0.svc MCPNET_FLEET_NODES=4 MCPNET_FLEET_RANK=1 "$tool" --check > "$out" 2>&1 ||
  fail "MCPNET_FLEET_* (the doctor's --fleet) must not count as unknown"
grep -q "0 unknown MCPNET_\* names" "$out" || fail "MCPNET_FLEET_* must not be counted as unknown"

if env -i NCCL_IB_RETRY_CNT=9 "$tool" --check > "$out" 2>&1; then
  fail "an invalid value must exit non-zero"
fi
echo "mcpnet-params --check behaves"
