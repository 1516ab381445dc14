#!/bin/bash
# run-libfuzzer.sh - the fuzz targets under libFuzzer: the handshake decoder for 100,000
# inputs, and the out-of-band channel, the netlink parsers and the doctor's protocol for
# 30,000 each. libFuzzer needs clang while the main build uses gcc, so this builds the
# targets in their own clang tree (<build>/fuzz-clang) and runs their ctests there.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:?usage: run-libfuzzer.sh BUILD_DIR}
dir="$build/fuzz-clang"
command -v clang >/dev/null || { echo "run-libfuzzer: clang is missing (scripts/install-deps installs it)"; exit 1; }
CC=clang cmake -S "$repo" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=(fuzz_wire fuzz_wire_replay)
for t in oob netlink doctor; do targets+=("fuzz_$t" "fuzz_${t}_replay"); done
cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}" >/dev/null
cd "$dir"
ctest --output-on-failure -R '^fuzz_(wire|oob|netlink|doctor)(_seeds)?$'
