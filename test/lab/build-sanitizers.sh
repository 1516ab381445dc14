#!/bin/bash
# build-sanitizers.sh - builds the plugin and the conformance suite twice more, with
# AddressSanitizer+UndefinedBehaviorSanitizer and with ThreadSanitizer, into
# <build>/sanitize-address and <build>/sanitize-thread for the lab's sanitizer scenario.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${MCPNET_BUILD_DIR:-$repo/build}
for san in address,undefined thread; do
  dir="$build/sanitize-${san%%,*}"
  cmake -S "$repo" -B "$dir" -DMCPNET_SANITIZE="$san" -DCMAKE_BUILD_TYPE=Debug -DMCPNET_WERROR=ON >/dev/null
  cmake --build "$dir" -j"$(nproc)" --target nccl-net-mcp mcp-conformance >/dev/null
  echo "built $dir"
done
