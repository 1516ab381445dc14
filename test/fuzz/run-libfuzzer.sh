#!/bin/bash
# run-libfuzzer.sh - the handshake decoder under libFuzzer for 100,000 inputs. libFuzzer
# needs clang while the main build uses gcc, so this builds the fuzz target in its own
# clang tree (<build>/fuzz-clang) and runs its ctest there (test "fuzz_wire").
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:?usage: run-libfuzzer.sh BUILD_DIR}
dir="$build/fuzz-clang"
command -v clang >/dev/null || { echo "run-libfuzzer: clang is missing (scripts/install-deps installs it)"; exit 1; }
CC=clang cmake -S "$repo" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j"$(nproc)" --target fuzz_wire fuzz_wire_replay >/dev/null
cd "$dir"
ctest --output-on-failure -R '^fuzz_wire'
