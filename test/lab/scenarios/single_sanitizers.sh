# lab: topology=single deadline=600 fixtures=sanitizers
# The conformance suite under AddressSanitizer + UndefinedBehaviorSanitizer, under
# ThreadSanitizer (two threads driving their own comms while a third registers and
# deregisters memory on the same comms), and a short valgrind memcheck run that must
# report no error and no definite leak. The sanitizer builds come from
# test/lab/build-sanitizers.sh (a ctest fixture).
set -euo pipefail
. "$LAB_LIB"
b="$MCPNET_BUILD_DIR"
for d in sanitize-address sanitize-thread; do
  [ -x "$b/$d/bin/mcp-conformance" ] || lab_fail "$b/$d is missing: run test/lab/build-sanitizers.sh"
done

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
CONF_MAX_SIZE=$((8 << 20)) CONF_CONNS=32 MCPNET_FORCE_FLUSH=1 timeout 400 \
  "$b/sanitize-address/bin/mcp-conformance" --plugin "$b/sanitize-address/plugin/libnccl-net-mcp.so" \
  self sizes grouped optional flush many inflight-close threads stray mrcache
CONF_MAX_SIZE=$((1 << 20)) timeout 200 "$b/sanitize-address/bin/mcp-conformance" \
  --plugin "$b/sanitize-address/plugin/libnccl-net-mcp.so" --abi 8 self sizes grouped

export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
CONF_MAX_SIZE=$((1 << 20)) CONF_CONNS=16 timeout 400 \
  "$b/sanitize-thread/bin/mcp-conformance" --plugin "$b/sanitize-thread/plugin/libnccl-net-mcp.so" \
  self threads sizes many optional

CONF_MAX_SIZE=262144 CONF_CONNS=4 timeout 400 valgrind --error-exitcode=9 --leak-check=full \
  --errors-for-leak-kinds=definite --show-leak-kinds=definite \
  --suppressions="$MCPNET_SOURCE_DIR/test/lab/valgrind.supp" \
  "$b/bin/mcp-conformance" --plugin "$b/plugin/libnccl-net-mcp.so" self sizes grouped optional many inflight-close
